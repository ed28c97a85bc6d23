//! The fixed simulator campaign CI runs: every fault class, 12 seeds each, a
//! thousand verbs per seed (108 seeds, 108 000 verbs in all). After every
//! simulated step the oracle checks exactly_once, no_trace_after_reversal,
//! isolation, linearizable, no_overrun and single_completion; at the end,
//! liveness and in_doubt_resolved. A failure prints its replay command.

use oae_sim::{SCENARIOS, SimConfig, run, scenario};

const SEEDS: u64 = 12;

fn campaign(name: &str, cfg: SimConfig) {
    let sc = scenario(name).expect("known scenario");
    let mut verbs = 0;
    let mut failures = Vec::new();
    for seed in 1..=SEEDS {
        match run(&cfg, &sc, seed) {
            Ok(r) => {
                assert_eq!(r.verbs, cfg.verbs as u64);
                assert!(r.ok > 0, "seed {seed}: no verb succeeded");
                verbs += r.verbs;
            }
            Err(f) => failures.push(f.to_string()),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    println!("{name}: {SEEDS} seeds, {verbs} verbs, every invariant held");
}

#[test]
fn every_fault_class_is_in_the_campaign() {
    let names: Vec<_> = SCENARIOS.iter().map(|s| s.name).collect();
    assert_eq!(
        names,
        [
            "clean",
            "loss",
            "duplication",
            "corruption",
            "reordering",
            "link-flap",
            "restart",
            "mixed",
            "heavy"
        ]
    );
}

#[test]
fn clean() {
    campaign("clean", SimConfig::default());
}

#[test]
fn loss() {
    campaign("loss", SimConfig::default());
}

#[test]
fn duplication() {
    campaign("duplication", SimConfig::default());
}

#[test]
fn corruption() {
    campaign("corruption", SimConfig::default());
}

#[test]
fn reordering() {
    campaign("reordering", SimConfig::default());
}

#[test]
fn link_flap() {
    campaign("link-flap", SimConfig::default());
}

#[test]
fn restart() {
    campaign("restart", SimConfig::default());
}

#[test]
fn mixed() {
    campaign("mixed", SimConfig::default());
}

/// Mixed faults with one slot and one credit: every transfer waits for the
/// previous one, the alternating bit alone separates them.
#[test]
fn heavy_on_a_single_slot() {
    let mut cfg = SimConfig::default();
    cfg.link.slots = 1;
    cfg.link.receive_credits = 1;
    campaign("heavy", cfg);
}
