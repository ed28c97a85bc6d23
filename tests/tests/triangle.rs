//! Three dataplanes, each linked to the other two over one Ethernet segment
//! (several peer MACs on one interface): a workload from every node to both
//! neighbours at once, addressed by node id, and every ledger exact on every
//! node's one memory; `oaectl verb --node N` reaches a chosen peer.

use std::process::Command;
use std::time::Duration;

use oae_client::control::{WorkloadReport, WorkloadSpec, from_hex};
use oae_tests::dataplanes::{LOCAL_REGION, TARGET_KEY, TARGET_REGION, binary};
use oae_tests::fabric::Fabric;

const NODES: usize = 3;
const LANES: u32 = 8;

fn region(f: &Fabric, i: usize, id: u16) -> Vec<u8> {
    let dump = f
        .client(i)
        .region_dump(id, 0, None)
        .unwrap_or_else(|e| panic!("region {id} of node {i}: {e:?}"));
    from_hex(&dump.data).expect("hex")
}

/// A workload from node `from` to node `to`, where the daemon put it.
struct Started {
    from: usize,
    to: usize,
    queue: u16,
    link: u16,
}

fn report(f: &Fabric, w: &Started) -> WorkloadReport {
    f.client(w.from)
        .workload_status(w.queue, w.link, None)
        .unwrap_or_else(|e| panic!("workload {} → {}: {e:?}", w.from, w.to))
}

#[test]
fn a_triangle_keeps_exact_ledgers_with_workloads_to_both_neighbours() {
    if !oae_tests::require_root("a_triangle_keeps_exact_ledgers_with_workloads_to_both_neighbours")
    {
        return;
    }
    let f = Fabric::start("tri", NODES);
    for i in 0..NODES {
        let mut peers: Vec<u64> = f
            .links(i)
            .iter()
            .map(|l| l.peer_node.expect("an up link knows its peer"))
            .collect();
        peers.sort_unstable();
        let others: Vec<u64> = (1..=NODES as u64).filter(|&n| n != i as u64 + 1).collect();
        assert_eq!(peers, others, "node {i}'s links");
    }
    let mut started = Vec::new();
    for from in 0..NODES {
        for to in (0..NODES).filter(|&to| to != from) {
            // Lanes of their own in the issuer's local region and in the
            // target's region, which other nodes' workloads also write.
            let spec = WorkloadSpec {
                node: Some(to as u64 + 1),
                first_lane: (from * NODES + to) as u32 * LANES,
                region: TARGET_REGION,
                key: TARGET_KEY,
                local_region: LOCAL_REGION,
                lanes: LANES,
                seconds: 2.0,
                seed: (from * NODES + to) as u64,
                ..Default::default()
            };
            let s = f
                .client(from)
                .workload_start(spec)
                .unwrap_or_else(|e| panic!("workload {from} → {to}: {e:?}\n{}", f.logs()));
            started.push(Started {
                from,
                to,
                queue: s.queue,
                link: s.link.expect("a workload on a link names it"),
            });
        }
    }
    f.wait_for(Duration::from_secs(90), "every workload to finish", |f| {
        started.iter().all(|w| !report(f, w).running)
    });
    for w in &started {
        let r = report(&f, w);
        assert!(
            r.completed > 0 && r.mismatches == 0,
            "{} → {}: {r:?}",
            w.from,
            w.to
        );
        let remote = from_hex(&r.expected_remote).unwrap();
        let local = from_hex(&r.expected_local).unwrap();
        let at = r.first_byte;
        assert_eq!(
            &region(&f, w.to, TARGET_REGION)[at..at + remote.len()],
            &remote[..],
            "node {}'s memory vs the ledger of {} → {}",
            w.to,
            w.from,
            w.to
        );
        assert_eq!(
            &region(&f, w.from, LOCAL_REGION)[at..at + local.len()],
            &local[..],
            "node {}'s local region vs the ledger of {} → {}",
            w.from,
            w.from,
            w.to
        );
    }
    // The real CLI picks the link by node id: a FETCH_ADD from node 0 to
    // node 3 lands in node 3's memory, not node 2's.
    let offset = 60_000;
    let out = oae_tests::run_ok(
        f.net
            .command(0, binary("oaectl").to_str().expect("utf-8 path"))
            .arg("--socket")
            .arg(&f.sockets[0])
            .args(["verb", "--node", "3", "faa", "--region"])
            .arg(TARGET_REGION.to_string())
            .arg("--key")
            .arg(TARGET_KEY.to_string())
            .arg("--offset")
            .arg(offset.to_string())
            .args(["--add", "5"]),
    );
    let word = |i: usize| {
        u64::from_le_bytes(
            region(&f, i, TARGET_REGION)[offset..offset + 8]
                .try_into()
                .unwrap(),
        )
    };
    assert_eq!((word(1), word(2)), (0, 5), "oaectl verb --node 3: {out}");
    let refused = oae_tests::run(
        Command::new(binary("oaectl"))
            .arg("--socket")
            .arg(&f.sockets[0])
            .args(["verb", "--node", "9", "faa", "--region", "1", "--key", "1"])
            .args(["--offset", "0", "--add", "1"]),
    );
    assert!(
        !refused.success() && refused.stderr.contains("no link to node 9"),
        "{refused}"
    );
}
