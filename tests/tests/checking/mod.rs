//! Running a stateright model and judging it, for the model checks that
//! share nothing else: the size of the search, every counterexample with
//! its actions, every example found or missing.

use std::fmt::Debug;
use std::time::Instant;

use stateright::{Checker, Expectation, HasDiscoveries, Model};

/// How to search: up to `max` states generated, depth or breadth first;
/// `complete`: the whole space must fit in `max`.
pub struct Search {
    pub max: usize,
    pub depth_first: bool,
    pub complete: bool,
}

/// Explores `model`, prints the search's size and what it found, and
/// fails on a broken invariant, an example never reached, or (for a
/// complete search) a space larger than its bound. `explain` says why the
/// last state of a counterexample breaks its invariant.
pub fn explore<M>(label: &str, model: M, search: Search, explain: impl Fn(&M::State) -> String)
where
    M: Model + Send + Sync + 'static,
    M::State: Debug + std::hash::Hash + Send + Sync + Clone + PartialEq + 'static,
    M::Action: Debug + Clone + PartialEq,
{
    let started = Instant::now();
    let builder = model.checker().finish_when(HasDiscoveries::AnyFailures);
    let builder = builder.target_state_count(search.max);
    if search.depth_first {
        judge(label, builder.spawn_dfs().join(), &search, started, explain);
    } else {
        judge(label, builder.spawn_bfs().join(), &search, started, explain);
    }
}

fn judge<M: Model>(
    label: &str,
    checker: impl Checker<M>,
    search: &Search,
    started: Instant,
    explain: impl Fn(&M::State) -> String,
) where
    M::State: Clone + PartialEq + std::hash::Hash,
    M::Action: Debug + Clone + PartialEq,
{
    println!(
        "{label}: {} unique states, {} generated, max depth {}, {:.1?}",
        checker.unique_state_count(),
        checker.state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    let mut failed = Vec::new();
    for p in checker.model().properties() {
        match (p.expectation, checker.discovery(p.name)) {
            (Expectation::Always, Some(path)) => {
                let last = path.last_state().clone();
                println!("COUNTEREXAMPLE to {}: {}", p.name, explain(&last));
                for (k, a) in path.into_actions().iter().enumerate() {
                    println!("  {:3}. {a:?}", k + 1);
                }
                failed.push(p.name);
            }
            (Expectation::Sometimes, None) => failed.push(p.name),
            (Expectation::Sometimes, Some(path)) => {
                println!(
                    "  example of {}: {} steps",
                    p.name,
                    path.into_actions().len()
                );
            }
            _ => {}
        }
    }
    assert!(failed.is_empty(), "broken or never reached: {failed:?}");
    if search.complete {
        let max = search.max;
        assert!(checker.state_count() < max, "gave up after {max} states");
    }
}
