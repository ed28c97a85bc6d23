//! Fabrics of real dataplanes: namespaces joined by a veth pair per link,
//! every node running a workload aimed at every other node through the
//! fabric (nodes that are not neighbours have their verbs relayed). A ring
//! of four has a link cut for good, a partition healed and a node killed
//! with SIGKILL and restarted; a ring of eight, its cores sleeping on two
//! CPUs, a cut and a restart. At the end every workload's ledger matches
//! the memory of both its ends byte for byte, no transfer is in doubt and
//! no word is locked, and every node holds the same view of the members.

use std::time::{Duration, Instant};

use oae_client::control::{WorkloadReport, WorkloadSpec};
use oae_config::deployment::{FABRIC_LOCAL, FABRIC_TARGET};
use oae_sim::Shape;
use oae_tests::fabric::{Fabric, Net};

/// The workloads of a fabric: one from every node to every other.
struct Workloads {
    nodes: usize,
    lanes: u32,
    seconds: f64,
}

impl Workloads {
    /// Node `i`'s workload aimed at node `j`: lanes of its own in `j`'s
    /// target region and in `i`'s local region.
    fn first_lane(&self, i: usize, j: usize) -> u32 {
        (i * self.nodes + j) as u32 * self.lanes
    }

    fn pairs(&self) -> impl Iterator<Item = (usize, usize)> + use<> {
        let n = self.nodes;
        (0..n).flat_map(move |i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
    }

    fn start(&self, f: &Fabric) {
        for (i, j) in self.pairs() {
            let spec = WorkloadSpec {
                node: Some(j as u64 + 1),
                first_lane: self.first_lane(i, j),
                region: FABRIC_TARGET.0,
                key: FABRIC_TARGET.1,
                local_region: FABRIC_LOCAL,
                lanes: self.lanes,
                seconds: self.seconds,
                seed: (i * self.nodes + j) as u64,
                ..Default::default()
            };
            let started = f
                .client(i)
                .workload_start(spec)
                .unwrap_or_else(|e| panic!("start {i} → {j}: {e:?}\n{}", f.logs()));
            assert_eq!(
                started.node,
                Some(j as u64 + 1),
                "aimed at the node: {started:?}"
            );
        }
    }

    fn phase(&self, f: &Fabric, name: &str) {
        for (i, j) in self.pairs() {
            // A workload of a node that was killed is gone: nothing to mark.
            let _ = f.client(i).workload_phase(0, 0, Some(j as u64 + 1), name);
        }
    }

    /// Waits until the workloads of every node but `restarted` are done,
    /// nothing is in doubt, no word locked and the views agree.
    fn wait_done(&self, f: &Fabric, restarted: usize) {
        let n = self.nodes;
        f.wait_for(Duration::from_secs(120), "every workload done", |f| {
            self.pairs()
                .filter(|&(i, _)| i != restarted)
                .all(|(i, j)| report(f, i, j).is_some_and(|r| !r.running))
        });
        f.wait_for(
            Duration::from_secs(60),
            "nothing in doubt, no word locked",
            |f| {
                (0..n).all(|i| {
                    f.fabric(i)
                        .is_some_and(|v| v.in_doubt == 0 && v.locked_words == 0)
                })
            },
        );
        // A link of dataplanes sharing two vCPUs may flap while the last
        // checks run; the views must agree again once it is back.
        f.wait_for(Duration::from_secs(60), "views to agree at the end", |f| {
            f.views_agree(n)
        });
    }

    /// Compares every ledger of the nodes but `restarted` (whose workloads
    /// died with it) with both ends' memory; returns how many.
    fn check_ledgers(&self, f: &Fabric, restarted: usize) -> usize {
        let mut checked = 0;
        for i in (0..self.nodes).filter(|&i| i != restarted) {
            let local = region(f, i, FABRIC_LOCAL);
            for j in (0..self.nodes).filter(|&j| j != i) {
                let r = report(f, i, j).expect("a report");
                assert_eq!(r.mismatches, 0, "{i} → {j}: {r:?}");
                assert!(r.completed > 0, "{i} → {j}: {r:?}");
                let remote = region(f, j, FABRIC_TARGET.0);
                assert_eq!(
                    slice(&remote, r.first_byte, &r.expected_remote),
                    r.expected_remote,
                    "node {j}'s target region vs the ledger of {i} → {j}"
                );
                assert_eq!(
                    slice(&local, r.first_byte, &r.expected_local),
                    r.expected_local,
                    "node {i}'s local region vs the ledger of {i} → {j}"
                );
                checked += 1;
            }
        }
        checked
    }
}

fn report(f: &Fabric, i: usize, j: usize) -> Option<WorkloadReport> {
    f.client(i).workload_status(0, 0, Some(j as u64 + 1)).ok()
}

/// Completions of node `i`'s workload aimed at `j` so far.
fn completed(f: &Fabric, i: usize, j: usize) -> u64 {
    report(f, i, j).map_or(0, |r| r.completed)
}

/// Waits until `i`'s workload aimed at `j` completed `more` verbs beyond
/// what it had.
fn progress(f: &Fabric, i: usize, j: usize, more: u64, what: &str) {
    let from = completed(f, i, j);
    f.wait_for(Duration::from_secs(60), what, |f| {
        completed(f, i, j) >= from + more
    });
}

/// The veth pair between `a` and `b` down (both ends) or up again.
fn set_link(f: &Fabric, a: usize, b: usize, up: bool) {
    let Net::Graph(graph, ..) = &f.net else {
        unreachable!("a graph")
    };
    graph
        .set_link(a, b, up)
        .unwrap_or_else(|e| panic!("link {a}-{b} up={up}: {e}"));
}

/// Kills node `i` without a goodbye and starts it again (a new
/// incarnation), and waits until every view holds the new one.
fn restart(f: &mut Fabric, i: usize, nodes: usize) {
    let epoch_before = f.fabric(0).expect("fabric").members[i].1;
    f.kill9(i);
    f.launch(i);
    f.wait_for(
        Duration::from_secs(60),
        &format!("views agree on node {i}'s new incarnation"),
        |f| f.views_agree(nodes) && f.fabric(0).is_some_and(|v| v.members[i].1 > epoch_before),
    );
}

fn region(f: &Fabric, i: usize, id: u16) -> String {
    f.client(i)
        .region_dump(id, 0, None)
        .unwrap_or_else(|e| panic!("dump region {id} of node {i}: {e:?}"))
        .data
}

fn slice(hex: &str, first_byte: usize, expected: &str) -> String {
    hex[2 * first_byte..2 * first_byte + expected.len()].to_string()
}

#[test]
fn a_ring_relays_and_survives_a_cut_a_partition_and_a_restart() {
    if !oae_tests::require_root("a_ring_relays_and_survives_a_cut_a_partition_and_a_restart") {
        return;
    }
    const NODES: usize = 4;
    let w = Workloads {
        nodes: NODES,
        lanes: 4,
        seconds: 45.0,
    };
    let mut f = Fabric::start_graph("ring", Shape::Ring, NODES);
    // Every view holds every member before every route is in: on a loaded
    // machine an advert can still be on its way.
    let route_to_3 = |f: &Fabric| {
        let view = f.fabric(0)?;
        let route = view.routes.iter().find(|r| r.node == 3)?.clone();
        Some((route, view))
    };
    f.wait_for(Duration::from_secs(60), "node 0's route to node 3", |f| {
        route_to_3(f).is_some()
    });
    // Node 0 reaches node 2 (opposite in the ring) over two hops.
    let (route, view) = route_to_3(&f).expect("a route to node 3");
    assert_eq!(route.hops, 2, "{view:?}");

    w.start(&f);
    progress(&f, 0, 2, 20, "relayed verbs from node 0 to node 2");

    // Cut the link between 0 and 1 for good: their verbs go the other way
    // round, three hops, and what was in doubt on the link is settled there.
    w.phase(&f, "cut");
    let cut_at = Instant::now();
    set_link(&f, 0, 1, false);
    progress(&f, 0, 1, 1, "node 0's first verb to node 1 after the cut");
    let rerouted_after = cut_at.elapsed();
    progress(&f, 0, 1, 20, "node 0's verbs to node 1 after the cut");
    let srtt = f
        .fabric(0)
        .and_then(|v| v.paths.into_iter().find(|p| p.node == 2))
        .map_or(0, |p| p.srtt_ns);

    // Partition {1, 2} from {3, 0} (0-1 is already cut), then heal.
    w.phase(&f, "partition");
    set_link(&f, 2, 3, false);
    std::thread::sleep(Duration::from_secs(2));
    set_link(&f, 2, 3, true);
    f.wait_for(Duration::from_secs(60), "views agree after the heal", |f| {
        f.views_agree(NODES)
    });
    progress(&f, 1, 3, 10, "node 1's verbs to node 3 after the heal");

    // Kill node 3 without a goodbye and start it again: a new incarnation.
    w.phase(&f, "restart");
    restart(&mut f, 3, NODES);
    progress(&f, 0, 3, 10, "verbs to the restarted node");

    // The workloads of nodes 0-2 run out; node 3's died with it.
    w.wait_done(&f, 3);
    let checked = w.check_ledgers(&f, 3);
    let stats: Vec<_> = (0..NODES)
        .map(|i| f.fabric(i).expect("fabric").counters)
        .collect();
    println!(
        "ring of {NODES}: {checked} ledgers exact; cut 0-1 → the first verb from 0 to 1 over \
         the other way round after {:.1} ms ({} round trips of the {:.0} us path); fabric \
         counters {stats:?}",
        rerouted_after.as_secs_f64() * 1e3,
        (rerouted_after.as_nanos() as u64)
            .checked_div(srtt)
            .unwrap_or(0),
        srtt as f64 / 1e3
    );
}

/// Eight dataplanes in a ring on this machine's two CPUs, their cores
/// sleeping when idle: all 56 ordered pairs at once (up to four hops), a
/// link cut for good and a node restarted, every ledger exact.
#[test]
fn a_ring_of_eight_sleeping_nodes_carries_all_pairs_through_a_cut_and_a_restart() {
    if !oae_tests::require_root(
        "a_ring_of_eight_sleeping_nodes_carries_all_pairs_through_a_cut_and_a_restart",
    ) {
        return;
    }
    const NODES: usize = 8;
    let w = Workloads {
        nodes: NODES,
        lanes: 1,
        seconds: 30.0,
    };
    let mut f = Fabric::start_graph("ring8", Shape::Ring, NODES);
    f.wait_for(
        Duration::from_secs(60),
        "node 0's routes to every node",
        |f| f.fabric(0).is_some_and(|v| v.routes.len() == NODES - 1),
    );
    let routes = f.fabric(0).expect("fabric").routes;
    let farthest = routes.iter().map(|r| r.hops).max();
    assert_eq!(
        farthest,
        Some(4),
        "the opposite node is four hops away: {routes:?}"
    );

    w.start(&f);
    progress(&f, 0, 4, 10, "node 0's verbs to node 4, four hops away");

    w.phase(&f, "cut");
    set_link(&f, 0, 1, false);
    progress(&f, 0, 1, 10, "node 0's verbs to node 1 the other way round");
    progress(&f, 1, 0, 10, "node 1's verbs to node 0 the other way round");

    w.phase(&f, "restart");
    restart(&mut f, 5, NODES);
    progress(&f, 0, 5, 10, "node 0's verbs to the restarted node");
    progress(
        &f,
        2,
        7,
        10,
        "relayed verbs past the restarted node's neighbour",
    );

    w.wait_done(&f, 5);
    let checked = w.check_ledgers(&f, 5);
    assert_eq!(checked, (NODES - 1) * (NODES - 1));
    let counters: Vec<_> = (0..NODES)
        .map(|i| f.fabric(i).expect("fabric").counters)
        .collect();
    for (i, c) in counters.iter().enumerate() {
        assert_eq!(c.get("dropped_queue_full"), Some(&0), "node {i}: {c:?}");
    }
    println!(
        "ring of {NODES}, sleeping cores: {checked} ledgers exact through a cut and a restart; \
         relayed {:?}",
        counters.iter().map(|c| c["relayed"]).collect::<Vec<_>>()
    );
}
