//! Fabrics of 64 and 256 nodes in the simulator: cold starts whose views
//! agree within twice the diameter in rounds (exactly the nodes running,
//! checked by the oracle), and the scale scenarios (a cut, a partition, a
//! restart and a scrambled node, with verbs between random pairs) with
//! every invariant held. The full table: `oae-sim scale` and `oae-sim soak
//! --scenario scale` (docs/BENCHMARKS.md).

use oae_sim::scale::{self, SCALE_SCENARIOS};
use oae_sim::topology::Shape;
use oae_sim::{SimConfig, run, scenario};

#[test]
fn large_fabrics_agree_within_twice_their_diameter() {
    let cfg = SimConfig::default();
    for fabric in [(Shape::Ring, 64), (Shape::Torus, 64), (Shape::Random, 256)] {
        let c = scale::converge(&cfg, fabric, 1, || 0).unwrap_or_else(|e| panic!("{e}"));
        let bound = (2 * c.diameter + 4) as f64;
        assert!(c.rounds() <= bound, "{c:?}");
        // Every route found; a path only to each neighbour (others open
        // when a verb needs one).
        assert_eq!(c.routes, (c.nodes - 1) as f64, "{c:?}");
        let degree = fabric
            .0
            .neighbours(fabric.1)
            .iter()
            .map(Vec::len)
            .sum::<usize>();
        assert_eq!(c.paths, degree as f64 / c.nodes as f64, "{c:?}");
        // The steady state: adverts every few rounds, not every frame.
        assert!(
            c.adverts_per_round > 0.0 && c.adverts_per_round < 10.0,
            "{c:?}"
        );
        println!("{c:?}");
    }
}

#[test]
fn every_scale_scenario_is_known_by_name() {
    for sc in SCALE_SCENARIOS {
        assert_eq!(scenario(sc.name).map(|s| s.name), Some(sc.name));
    }
}

#[test]
fn large_fabrics_keep_every_invariant_through_faults() {
    for (name, verbs) in [("ring-64", 500), ("torus-64", 500), ("random-256", 200)] {
        let cfg = SimConfig {
            verbs,
            ..SimConfig::default()
        };
        let sc = scenario(name).expect("known");
        let r = run(&cfg, &sc, 1).unwrap_or_else(|f| panic!("{name}: {f}"));
        assert_eq!(r.verbs, verbs as u64, "{name}: {r:?}");
        assert!(r.ok > 0 && r.relayed > 0, "{name}: {r:?}");
        assert_eq!(
            (r.cuts, r.partitions, r.restarts, r.scrambles),
            (1, 1, 1, 1),
            "{name}: {r:?}"
        );
    }
}
