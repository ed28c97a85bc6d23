//! The fabric's simulator campaign: rings, lines and meshes of nodes that
//! address verbs to every other node, relayed over several hops, through
//! cut links, partitions, restarts and scrambled routing state. After every
//! step the oracle checks exactly_once, no_trace_after_reversal, isolation,
//! linearizable, no_overrun and single_completion; at the end liveness,
//! in_doubt_resolved, no_doubt_while_path (no word locked and no transfer
//! in doubt once every node has a path, even over links cut for good) and
//! views_agree (every node holds the same numbered view).

use oae_sim::{FABRIC_SCENARIOS, SimConfig, run, scenario};

const SEEDS: u64 = 12;

fn campaign(name: &str) -> oae_sim::Report {
    let sc = scenario(name).expect("known scenario");
    let cfg = SimConfig::default();
    let mut sum = oae_sim::Report::default();
    let mut failures = Vec::new();
    for seed in 1..=SEEDS {
        match run(&cfg, &sc, seed) {
            Ok(r) => {
                assert_eq!(r.verbs, cfg.verbs as u64);
                assert!(r.ok > 0, "seed {seed}: no verb succeeded");
                sum.add(&r);
            }
            Err(f) => failures.push(f.to_string()),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    println!(
        "{name}: {SEEDS} seeds, {} verbs, every invariant held: {sum:?}",
        sum.verbs
    );
    sum
}

#[test]
fn every_fabric_class_is_in_the_campaign() {
    let names: Vec<_> = FABRIC_SCENARIOS.iter().map(|s| s.name).collect();
    assert_eq!(
        names,
        [
            "ring-clean",
            "ring-cut",
            "ring-failover",
            "ring-one-way",
            "ring-partition",
            "mesh-flap",
            "line-restart",
            "ring-scramble",
            "scramble-start",
            "fabric-mixed"
        ]
    );
}

#[test]
fn ring_relays_verbs_between_every_pair() {
    let r = campaign("ring-clean");
    assert!(r.relayed > 0, "{r:?}");
    assert_eq!(r.reversals, 0, "{r:?}");
}

/// A link cut for good: the ring becomes a line, transfers in doubt on the
/// cut link are settled over the other way round, and verbs between its
/// ends go that way too, within a bounded number of round trips.
#[test]
fn ring_survives_a_cut_link() {
    let r = campaign("ring-cut");
    assert_eq!(r.cuts, SEEDS, "{r:?}");
    assert!(r.reroutes > 0, "{r:?}");
    // Suspicion (two unanswered probes), the route withdrawn, and one round
    // trip of a path four hops long: well under thirty link round trips.
    assert!(r.reroute_rtts_max <= 30, "{r:?}");
}

/// A link cut while its ends talk to each other: their verbs go the other
/// way round within a few link round trips (simulated time, so exact for
/// a seed): suspicion as soon as two probes go unanswered, relays probing
/// the links they push FORWARDs into, paths giving up at once on what
/// they sent into the failed link (PROTOCOL.md O3, F1).
#[test]
fn ring_fails_over_in_link_round_trips() {
    let r = campaign("ring-failover");
    assert_eq!(r.reroutes, SEEDS, "{r:?}");
    // Suspicion about 4, the route around 1, a verb in doubt resolved and
    // retried over the 4-hop detour 4 + 4.
    assert!(r.reroute_rtts_max <= 16, "{r:?}");
    assert!(r.reroute_rtts_sum <= 13 * SEEDS, "{r:?}");
}

/// A cut that takes one direction first (up to 50 round trips before the
/// other): the end that still hears its peer, whose `seen` stays below its
/// probes, suspects the link a minimum round after the first of them
/// (PROTOCOL.md O3) instead of waiting for the peer to declare the link
/// down. Before that rule these seeds failed over in a mean of 32 and at
/// most 57 link round trips.
#[test]
fn ring_fails_over_when_a_cut_takes_one_direction_first() {
    let r = campaign("ring-one-way");
    assert_eq!(r.reroutes, SEEDS, "{r:?}");
    assert!(r.reroute_rtts_max <= 16, "{r:?}");
    assert!(r.reroute_rtts_sum <= 13 * SEEDS, "{r:?}");
}

#[test]
fn ring_heals_after_partitions() {
    let r = campaign("ring-partition");
    assert_eq!(r.partitions, 2 * SEEDS, "{r:?}");
}

#[test]
fn mesh_fails_over_and_resolves_over_another_path() {
    let r = campaign("mesh-flap");
    assert!(r.rerouted > 0 && r.resolved > 0, "{r:?}");
}

#[test]
fn line_survives_restarts_of_relays() {
    let r = campaign("line-restart");
    assert_eq!(r.restarts, 2 * SEEDS, "{r:?}");
}

/// Routing state overwritten with arbitrary values converges again: the
/// views agree at the end of every run (checked by the oracle).
#[test]
fn scrambled_routes_stabilise() {
    let r = campaign("ring-scramble");
    assert_eq!(r.scrambles, 4 * SEEDS, "{r:?}");
}

#[test]
fn fabric_mixed() {
    campaign("fabric-mixed");
}

/// Seeds that once broke an invariant, replayed as they were found.
#[test]
fn fabric_regressions() {
    let cfg = SimConfig::default();
    let sc = scenario("fabric-mixed").expect("known");
    // 3: a decision sent over a path while the link was down carried the
    //    link's knowledge bits, so the target's cached answer never matched
    //    the link's own REVERSE afterwards and the slot hung.
    // 7: an initiator restarted behind a cut link; its target never heard
    //    the new incarnation on that link and held the old one's words
    //    locked (now learned from the path's HELLO: presumed commit).
    // 28: a link that learned of a restart by another path still offered
    //    the dead incarnation's transfers for resolution.
    for seed in [3, 7, 28] {
        if let Err(f) = run(&cfg, &sc, seed) {
            panic!("seed {seed}: {f}");
        }
    }
}

/// Seeds of scrambled routing state that once left the views split
/// (views_agree), replayed as they were found.
#[test]
fn scramble_regressions() {
    let cfg = SimConfig::default();
    let sc = scenario("ring-scramble").expect("known");
    // 12000221, 20000357: a scramble left members of epoch 0 in a node's
    // copies of its neighbours' vectors; it took them into its tables and
    // advertised them, its neighbours refused every one of its adverts as
    // malformed and kept their copy of its vector, phantom members and
    // all, for good.
    let failures: Vec<String> = [12_000_221, 20_000_357]
        .into_iter()
        .filter_map(|seed| {
            run(&cfg, &sc, seed)
                .err()
                .map(|f| format!("seed {seed}: {f}"))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Seeds that once broke an invariant with messages on, replayed as they
/// were found.
#[test]
fn message_regressions() {
    let cfg = SimConfig {
        messages_ppm: 300_000,
        ..SimConfig::default()
    };
    // fabric-mixed 2, 3: a SEND reversed over a path came back to its
    // unusable link, which handed no SEND to the path, and waited there
    // for good (liveness).
    // mesh-flap 4: a SEND submitted to a node went straight to the path
    // while an earlier one was in doubt on the link; that one, reversed
    // and handed over later, arrived second (message_order).
    let failures: Vec<String> = [("fabric-mixed", 2), ("fabric-mixed", 3), ("mesh-flap", 4)]
        .into_iter()
        .filter_map(|(name, seed)| {
            let sc = scenario(name).expect("known");
            run(&cfg, &sc, seed)
                .err()
                .map(|f| format!("{name} seed {seed}: {f}"))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
