//! A ring of eight dataplanes whose configurations name only interfaces
//! (no node id, no peer): each finds its two neighbours (docs/PROTOCOL.md,
//! "Discovery"), makes its node id ("Addresses"), and the fabric agrees
//! one view of all eight; then every node runs a workload aimed at the
//! node opposite, four hops away, found by its node id in the view, and
//! every ledger matches both ends' memory.

use std::time::Duration;

use oae_client::control::WorkloadSpec;
use oae_config::deployment::{FABRIC_LOCAL, FABRIC_TARGET, Naming};
use oae_proto::address::{address_of, is_made};
use oae_sim::Shape;
use oae_tests::fabric::Fabric;

const NODES: usize = 8;

#[test]
fn a_ring_of_eight_that_names_only_interfaces_comes_up_agrees_and_carries_exact_workloads() {
    if !oae_tests::require_root("a_ring_of_eight_that_names_only_interfaces") {
        return;
    }
    let f = Fabric::start_graph_named("zt8", Shape::Ring, NODES, Naming::InterfacesOnly);
    // Reported, never asserted: the machine may be busy. Seen within the
    // 50 ms the wait polls at.
    let agreed = f.launched.elapsed();
    println!(
        "ring of {NODES}, interfaces only, started at once: every dataplane answering after \
         {:.0} ms; every link up and every view agreed {:.0} ms after the start",
        f.launching.as_secs_f64() * 1e3,
        agreed.as_secs_f64() * 1e3,
    );
    let ids: Vec<u64> = (0..NODES)
        .map(|i| f.client(i).status().expect("status").node_id)
        .collect();
    assert!(ids.iter().all(|&id| is_made(id)), "{ids:x?}");
    let mut addresses: Vec<u16> = ids.iter().map(|&id| address_of(id)).collect();
    addresses.sort_unstable();
    addresses.dedup();
    assert_eq!(addresses.len(), NODES, "addresses unique: {ids:x?}");
    for i in 0..NODES {
        let links = f.links(i);
        assert_eq!(
            links.len(),
            2,
            "node {i} found its two neighbours: {links:?}"
        );
        assert!(links.iter().all(|l| l.state.up), "node {i}: {links:?}");
        let members: Vec<u64> = f
            .fabric(i)
            .expect("fabric")
            .members
            .iter()
            .map(|m| m.0)
            .collect();
        let mut all = ids.clone();
        all.sort_unstable();
        assert_eq!(members, all, "node {i}'s view");
    }

    let opposite = |i: usize| (i + NODES / 2) % NODES;
    for i in 0..NODES {
        let spec = WorkloadSpec {
            node: Some(ids[opposite(i)]),
            first_lane: i as u32,
            region: FABRIC_TARGET.0,
            key: FABRIC_TARGET.1,
            local_region: FABRIC_LOCAL,
            lanes: 1,
            seconds: 2.0,
            seed: i as u64,
            ..Default::default()
        };
        f.client(i)
            .workload_start(spec)
            .unwrap_or_else(|e| panic!("start {i}: {e:?}\n{}", f.logs()));
    }
    let report = |f: &Fabric, i: usize| {
        f.client(i)
            .workload_status(0, 0, Some(ids[opposite(i)]))
            .ok()
    };
    f.wait_for(Duration::from_secs(120), "every workload done", |f| {
        (0..NODES).all(|i| report(f, i).is_some_and(|r| !r.running))
    });
    f.wait_for(Duration::from_secs(60), "nothing in doubt", |f| {
        (0..NODES).all(|i| {
            f.fabric(i)
                .is_some_and(|v| v.in_doubt == 0 && v.locked_words == 0)
        })
    });
    let region = |i: usize, id: u16| {
        f.client(i)
            .region_dump(id, 0, None)
            .unwrap_or_else(|e| panic!("dump region {id} of node {i}: {e:?}"))
            .data
    };
    let slice = |hex: &str, first: usize, expected: &str| {
        hex[2 * first..2 * first + expected.len()].to_string()
    };
    for i in 0..NODES {
        let r = report(&f, i).expect("a report");
        assert!(r.completed > 0 && r.mismatches == 0, "{i}: {r:?}");
        let remote = region(opposite(i), FABRIC_TARGET.0);
        assert_eq!(
            slice(&remote, r.first_byte, &r.expected_remote),
            r.expected_remote,
            "node {}'s target region vs the ledger of {i}",
            opposite(i)
        );
        let local = region(i, FABRIC_LOCAL);
        assert_eq!(
            slice(&local, r.first_byte, &r.expected_local),
            r.expected_local,
            "node {i}'s local region vs its ledger"
        );
    }
}
