//! Model checking of in-doubt resolution over another path,
//! with `stateright`, on three real [`oae_proto::Node`]s running the fabric.
//!
//! A and B are neighbours, and both neighbours of C. A's CAS on B's word
//! travels on the link A–B. The link may be cut at any moment (everything
//! on it is lost and nothing crosses it again), and the nodes' rounds elapse in any order: A then suspects
//! the link, reverses the transfer if its echo has not come, settles it
//! with B through C (RESOLVE, RESOLVED), and sends the verb again over its
//! path to B through C. Every interleaving of deliveries on the six FIFO
//! lanes, the cut and the rounds is explored (frames are lost only by the
//! cut: a loss budget as well multiplies the space beyond what runs here).
//!
//! The model starts from a converged fabric: a deterministic prelude
//! brings the links and paths up and delivers the adverts, so the search
//! spends its states on the resolution, not on bring-up (checked by
//! `model_check.rs` and the simulator).
//!
//! Invariants, after every step: `single_completion`; `exactly_once` (at
//! most one live application of the verb at B, at most one commit);
//! `agreement` (a completion `Ok(old)` means B's word holds the new value
//! and `old` was the initial one; an `Err` means no application lives at B
//! and the word is untouched). Examples that must be reachable: the
//! transfer resolved over C after the cut, and the verb completed `Ok`
//! over the path after the cut.

mod checking;

use std::sync::Arc;

use checking::Search;

use oae_proto::wire::MAX_FRAME;
use oae_proto::{
    Event, FabricConfig, LinkConfig, Node, Observer, Output, PATH_BASE, Permissions, RegionRef,
    RegionSpec, Verb, VerbError, VerbId,
};
use stateright::{Model, Property};

const REGION: RegionRef = RegionRef { id: 1, key: 42 };
const EPOCH: u32 = 1;
const IDS: [u64; 3] = [0xA, 0xB, 0xC];
/// Node `i`'s link `k` leads to `PEERS[i][k]`.
const PEERS: [[usize; 2]; 3] = [[1, 2], [0, 2], [0, 1]];
const A: usize = 0;
const B: usize = 1;
const CAS: Verb = Verb::CompareAndSwap {
    target: REGION,
    offset: 0,
    expected: 0,
    new: 7,
};
const MAX_STATES: usize = 20_000_000;

/// What the invariants need, in a canonical form (see `model_check.rs`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct Recorder {
    applied: u8,
    committed: u8,
    reversed: u8,
    completions: Vec<(u16, Result<Output, VerbError>)>,
}

impl Observer for Recorder {
    fn applied(&mut self, _: u16, _: u32, _: u16, _: u16) {
        self.applied += 1;
    }
    fn committed(&mut self, _: u16, _: u32, _: u16, _: u16) {
        self.committed += 1;
    }
    fn reversed(&mut self, _: u16, _: u32, _: u16, _: u16) {
        self.reversed += 1;
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    nodes: [Node<Recorder>; 3],
    /// `lanes[from][to]`: frames on the way, oldest first.
    lanes: [[Vec<Arc<[u8]>>; 3]; 3],
    now: [u64; 3],
    rounds: [u8; 3],
    submitted: bool,
    cut: bool,
    losses: u8,
    /// Settled over C: A's fabric answered a RESOLVE of its own.
    resolved: bool,
}

impl State {
    fn link_to(i: usize, j: usize) -> u16 {
        PEERS[i].iter().position(|&p| p == j).expect("neighbours") as u16
    }

    fn pull_events(&mut self, i: usize) {
        while let Some(e) = self.nodes[i].poll_event() {
            if let Event::Completed { link, result, .. } = e {
                self.nodes[i]
                    .observer_mut()
                    .completions
                    .push((link, result));
            }
        }
        if i == A {
            self.resolved |= self.nodes[A]
                .fabric_stats()
                .is_some_and(|f| f.resolved_as_initiator > 0);
        }
    }

    fn severed(&self, i: usize, j: usize) -> bool {
        self.cut && i.min(j) == A && i.max(j) == B
    }

    /// Everything node `i` has to say goes onto its links.
    fn drain(&mut self, i: usize) {
        let mut buf = [0u8; MAX_FRAME];
        for (k, &j) in PEERS[i].iter().enumerate() {
            while let Some(len) = self.nodes[i].poll_transmit(k as u16, self.now[i], &mut buf) {
                if !self.severed(i, j) {
                    self.lanes[i][j].push(Arc::from(&buf[..len]));
                }
            }
        }
        self.pull_events(i);
    }

    fn deliver(&mut self, from: usize, to: usize) {
        let bytes = self.lanes[from][to].remove(0);
        let link = State::link_to(to, from);
        self.nodes[to].handle_frame(link, &bytes, self.now[to]);
        self.pull_events(to);
        self.drain(to);
    }

    fn elapse(&mut self, i: usize) {
        let now = self.nodes[i]
            .poll_timeout()
            .expect("links")
            .max(self.now[i]);
        self.now[i] = now;
        self.nodes[i].handle_timeout(now);
        self.pull_events(i);
        self.drain(i);
    }

    fn word(&self, i: usize) -> u64 {
        let b = self.nodes[i].memory().bytes(REGION.id).expect("registered");
        u64::from_le_bytes(b[..8].try_into().expect("one word"))
    }

    fn quiet(&self) -> bool {
        self.lanes.iter().flatten().all(Vec::is_empty)
    }
}

fn link_config() -> LinkConfig {
    LinkConfig {
        slots: 1,
        receive_credits: 1,
        max_class: 1,
        unreachable_after_rounds: 3,
        ordered: true,
        echo_patience_rounds: 1,
        rtt_multiplier: 1,
        min_round: 1000,
        initial_rtt: 1000,
        hello_interval: 1000,
        max_attempts: 4,
        submit_queue: 2,
    }
}

fn node(i: usize) -> Node<Recorder> {
    let cfg = link_config();
    let mut n = Node::with_observer(IDS[i], EPOCH, Recorder::default());
    for _ in 0..2 {
        n.add_link(cfg).expect("valid link");
    }
    let mut fabric = FabricConfig::for_links(&cfg);
    fabric.path.slots = 1;
    fabric.path.receive_credits = 1;
    fabric.path.submit_queue = 2;
    // Adverts only when routes change: periodic ones would make every
    // round a new burst of frames to interleave.
    fabric.advert_rounds = 1000;
    fabric.relay_queue = 4;
    n.enable_fabric(fabric, &cfg).expect("valid fabric");
    n.register(RegionSpec {
        id: REGION.id,
        key: REGION.key,
        len: 8,
        permissions: Permissions::ATOMIC,
    })
    .expect("one region");
    n
}

/// Fresh nodes, brought up deterministically: frames delivered in order,
/// rounds elapsing at every node, until every link and A's path to B are
/// up and nothing is on the wire.
fn converged() -> State {
    let mut s = State {
        nodes: [node(0), node(1), node(2)],
        lanes: Default::default(),
        now: [0; 3],
        rounds: [0; 3],
        submitted: false,
        cut: false,
        losses: 0,
        resolved: false,
    };
    for i in 0..3 {
        s.drain(i);
    }
    for _ in 0..400 {
        while let Some((from, to)) = (0..9)
            .map(|k| (k / 3, k % 3))
            .find(|&(f, t)| !s.lanes[f][t].is_empty())
        {
            s.deliver(from, to);
        }
        let links_up =
            (0..3).all(|i| (0..2).all(|k| s.nodes[i].link_status(k).is_some_and(|l| l.up)));
        let path_up = s.nodes[A]
            .paths()
            .find(|&(_, peer)| peer == IDS[B])
            .and_then(|(id, _)| s.nodes[A].link_status(id))
            .is_some_and(|l| l.up);
        let agreed = s
            .nodes
            .iter()
            .all(|n| n.view().is_some_and(|v| v.members.len() == 3));
        if links_up && path_up && agreed && s.quiet() {
            s.now = [0; 3].map(|_| s.now.iter().copied().max().unwrap_or(0));
            return s;
        }
        for i in 0..3 {
            s.elapse(i);
        }
    }
    panic!(
        "the fabric did not converge in the prelude: {:?}",
        s.nodes[A].routes()
    );
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Action {
    Submit,
    Deliver(u8, u8),
    Lose(u8, u8),
    Cut,
    Round(u8),
}

struct FabricModel {
    start: State,
    max_rounds: [u8; 3],
    max_losses: u8,
    /// The `sometimes` properties this configuration must reach.
    examples: Vec<String>,
}

const RESOLVED: &str = "resolved over C after the cut";
const OK_OVER_PATH: &str = "Ok over the path after the cut";

impl Model for FabricModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![self.start.clone()]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        if !s.submitted {
            actions.push(Action::Submit);
        }
        if s.submitted && !s.cut {
            actions.push(Action::Cut);
        }
        for i in 0..3u8 {
            if s.submitted && s.rounds[usize::from(i)] < self.max_rounds[usize::from(i)] {
                actions.push(Action::Round(i));
            }
            for j in 0..3u8 {
                if !s.lanes[usize::from(i)][usize::from(j)].is_empty() {
                    actions.push(Action::Deliver(i, j));
                    if s.losses < self.max_losses {
                        actions.push(Action::Lose(i, j));
                    }
                }
            }
        }
    }

    fn next_state(&self, s: &State, action: Action) -> Option<State> {
        let mut s = s.clone();
        match action {
            Action::Submit => {
                s.submitted = true;
                s.nodes[A]
                    .submit_to(IDS[B], VerbId(0), &CAS)
                    .expect("a usable link to B");
                s.pull_events(A);
                s.drain(A);
            }
            Action::Deliver(i, j) => s.deliver(usize::from(i), usize::from(j)),
            Action::Lose(i, j) => {
                s.losses += 1;
                s.lanes[usize::from(i)][usize::from(j)].remove(0);
            }
            Action::Cut => {
                s.cut = true;
                s.lanes[A][B].clear();
                s.lanes[B][A].clear();
            }
            Action::Round(i) => {
                s.rounds[usize::from(i)] += 1;
                s.elapse(usize::from(i));
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut p = vec![
            Property::always("single_completion", |_, s: &State| {
                s.nodes[A].observer().completions.len() <= 1
            }),
            Property::always("exactly_once", |_, s: &State| {
                let b = s.nodes[B].observer();
                let live = i16::from(b.applied) - i16::from(b.reversed);
                (0..=1).contains(&live) && b.committed <= 1
            }),
            Property::always("agreement", |_, s: &State| agreement(s).is_ok()),
        ];
        if self.examples.iter().any(|e| e == RESOLVED) {
            p.push(Property::sometimes(RESOLVED, |_, s: &State| {
                s.cut && s.resolved && s.nodes[B].memory().locked_words() == 0
            }));
        }
        if self.examples.iter().any(|e| e == OK_OVER_PATH) {
            p.push(Property::sometimes(OK_OVER_PATH, |_, s: &State| {
                s.cut
                    && s.nodes[A]
                        .observer()
                        .completions
                        .iter()
                        .any(|(link, r)| *link >= PATH_BASE && r.is_ok())
            }));
        }
        p
    }
}

/// A completion agrees with B's memory.
fn agreement(s: &State) -> Result<(), String> {
    let b = s.nodes[B].observer();
    let live = i16::from(b.applied) - i16::from(b.reversed);
    match s.nodes[A].observer().completions.first() {
        Some((
            _,
            Ok(Output::CompareAndSwap {
                old: 0,
                swapped: true,
            }),
        )) if live == 1 && s.word(B) == 7 => Ok(()),
        Some((_, Err(_))) if live == 0 && s.word(B) == 0 => Ok(()),
        None => Ok(()),
        other => Err(format!(
            "completion {other:?} with {live} live applications, word {}",
            s.word(B)
        )),
    }
}

/// Explores the model; `complete`: the whole space, within the bounds, or
/// fail. Otherwise a bounded search (depth first, `MAX_STATES` generated).
fn explore(max_rounds: [u8; 3], examples: &[&str], complete: bool) {
    let model = FabricModel {
        start: converged(),
        max_rounds,
        max_losses: 0,
        examples: examples.iter().map(|e| e.to_string()).collect(),
    };
    let search = Search {
        max: MAX_STATES,
        depth_first: true,
        complete,
    };
    let label = format!("model_check_fabric rounds {max_rounds:?}");
    checking::explore(&label, model, search, |s| format!("{:?}", agreement(s)));
}

/// Two rounds at A (it suspects the cut link once two probes go
/// unanswered, the moment a minimum round has passed in quiet), none at B
/// or C: B never suspects the link itself, and learns that it is broken
/// from A's RESOLVE, carried by C (PROTOCOL.md F2), so its answer goes the
/// way round. Every interleaving of the six lanes, the cut at any point
/// after the submission. Measured: about 750 k unique states, 40 s. With
/// two rounds at B as well the search no longer completes within 20 M
/// states generated (5.3 M unique, no invariant broken); the verb's retry
/// over the path needs more rounds still (below).
#[test]
fn a_transfer_in_doubt_on_a_cut_link_is_resolved_through_the_third_node() {
    explore([2, 0, 0], &[RESOLVED], true);
}

/// Four rounds at A and three at B: the retried verb completes `Ok` over
/// the path through C. Too large to finish here: 20 M states generated in
/// about 430 s cover about 5.8 M unique states, depth first, with no
/// invariant broken; since links that carry fabric frames are probed too,
/// and suspicion takes effect a round sooner, that budget no longer
/// reaches the retry's completion (it did before: the simulator's
/// `ring-failover` completes such retries in every run). Run with
/// `--ignored`; it fails on that example until the search is narrowed.
#[test]
#[ignore = "a bounded search of about 430 s; run with --ignored"]
fn the_retried_verb_completes_over_the_path_bounded() {
    explore([4, 3, 0], &[RESOLVED, OK_OVER_PATH], false);
}
