//! Several queues on one interface, one memory per dataplane: two veth
//! queues per end, one AF_XDP socket, polling core and link each, steered by
//! queue; workloads on both queues at once act on one memory at each end.

use std::time::Duration;

use oae_client::control::{WorkloadReport, WorkloadSpec, from_hex};
use oae_tests::dataplanes::{Dataplanes, LOCAL_REGION, Options, TARGET_KEY, TARGET_REGION};

const LANES: u32 = 8;

fn workload(d: &Dataplanes, queue: u16) -> WorkloadReport {
    workload_of(d, 0, queue)
}

fn workload_of(d: &Dataplanes, i: usize, queue: u16) -> WorkloadReport {
    d.client(i)
        .workload_status(queue, 0, None)
        .unwrap_or_else(|e| panic!("workload status of dataplane {i} queue {queue}: {e:?}"))
}

#[test]
fn two_queues_on_one_veth_pair_share_one_memory() {
    if !oae_tests::require_root("two_queues_on_one_veth_pair_share_one_memory") {
        return;
    }
    let d = Dataplanes::start(
        "mq",
        &Options {
            queues: 2,
            ..Options::default()
        },
    );
    // Both queues of a at once, each with lanes of its own in both regions.
    for queue in 0..2u16 {
        d.client(0)
            .workload_start(WorkloadSpec {
                queue,
                first_lane: u32::from(queue) * LANES,
                region: TARGET_REGION,
                key: TARGET_KEY,
                local_region: LOCAL_REGION,
                lanes: LANES,
                seconds: 2.0,
                seed: 7 + u64::from(queue),
                ..Default::default()
            })
            .unwrap_or_else(|e| panic!("workload on queue {queue}: {e:?}"));
    }
    d.wait_for(Duration::from_secs(60), "both workloads to finish", |d| {
        (0..2).all(|q| !workload(d, q).running)
    });
    // b's one memory, holding what both of a's queues did to it.
    let target = d.region(1, TARGET_REGION);
    let local = d.region(0, LOCAL_REGION);
    for queue in 0..2u16 {
        let r = workload(&d, queue);
        assert!(r.completed > 0 && r.mismatches == 0, "queue {queue}: {r:?}");
        let remote = from_hex(&r.expected_remote).unwrap();
        let mine = from_hex(&r.expected_local).unwrap();
        let at = r.first_byte;
        assert_eq!(
            &target[at..at + remote.len()],
            &remote[..],
            "b's memory vs queue {queue}'s ledger"
        );
        assert_eq!(
            &local[at..at + mine.len()],
            &mine[..],
            "a's local region vs queue {queue}'s ledger"
        );
    }
    // Each link's frames arrived on its own queue: every queue received
    // OAE frames, none from a peer it has no link to.
    for i in 0..2 {
        let stats = d.stats(i);
        assert_eq!(stats.queues.len(), 2, "{stats:?}");
        for q in &stats.queues {
            assert!(q.pipeline.rx_frames > 0, "{q:?}");
            assert_eq!(q.pipeline.rx_foreign, 0, "{q:?}");
            assert!(q.links[0].get("rx_frames") > 0, "{q:?}");
        }
    }
}

/// Both queues of each dataplane hammer the same four words of the other's
/// memory at once (FETCH_ADD, CAS and MULTI-WORD COMMIT increments), so the
/// two polling cores of the target apply verbs to the same words: the words
/// end equal to what the four workloads saw take effect.
#[test]
fn two_queues_hammering_the_same_words_keep_an_exact_ledger() {
    if !oae_tests::require_root("two_queues_hammering_the_same_words_keep_an_exact_ledger") {
        return;
    }
    let d = Dataplanes::start(
        "mqc",
        &Options {
            queues: 2,
            ..Options::default()
        },
    );
    for i in 0..2 {
        for queue in 0..2u16 {
            let spec = WorkloadSpec {
                queue,
                contend: true,
                region: TARGET_REGION,
                key: TARGET_KEY,
                local_region: LOCAL_REGION,
                lanes: LANES,
                seconds: 2.0,
                seed: 11 + u64::from(queue),
                ..Default::default()
            };
            d.client(i)
                .workload_start(spec)
                .unwrap_or_else(|e| panic!("contended workload on {i} queue {queue}: {e:?}"));
        }
    }
    d.wait_for(
        Duration::from_secs(60),
        "every contended workload to finish",
        |d| (0..2).all(|i| (0..2).all(|q| !workload_of(d, i, q).running)),
    );
    for target in 0..2 {
        let issuer = 1 - target;
        let reports: Vec<WorkloadReport> = (0..2).map(|q| workload_of(&d, issuer, q)).collect();
        let sum = |f: fn(&oae_client::control::ContendedCounts) -> u64| {
            reports
                .iter()
                .map(|r| f(r.contended.as_ref().expect("contended counts")))
                .sum::<u64>()
        };
        for r in &reports {
            assert!(r.completed > 0 && r.mismatches == 0, "{r:?}");
        }
        let bytes = d.region(target, TARGET_REGION);
        let word = |w: usize| u64::from_le_bytes(bytes[8 * w..8 * w + 8].try_into().unwrap());
        let context = format!(
            "dataplane {target}'s words {:?}, reports {reports:?}",
            [0, 1, 2, 3].map(word)
        );
        assert_eq!(word(0), sum(|c| c.adds), "FETCH_ADDs, once each: {context}");
        assert_eq!(
            word(1),
            sum(|c| c.cas_wins),
            "CAS increments that won: {context}"
        );
        assert_eq!(
            word(2),
            sum(|c| c.mcas_wins),
            "multi-word commits: {context}"
        );
        assert_eq!(
            word(3),
            sum(|c| c.mcas_wins),
            "multi-word commits: {context}"
        );
        assert!(
            sum(|c| c.cas_wins) > 0 && sum(|c| c.mcas_wins) > 0,
            "{context}"
        );
        let cas_done: u64 = reports
            .iter()
            .flat_map(|r| &r.per_verb)
            .filter(|(verb, _)| verb == "cas")
            .map(|(_, n)| n)
            .sum();
        assert!(
            cas_done > sum(|c| c.cas_wins),
            "lanes raced for the words: {context}"
        );
        let locked = d
            .client(target)
            .region_dump(TARGET_REGION, 0, None)
            .expect("dump")
            .locked_words;
        assert_eq!(locked, 0, "no word stays locked: {context}");
    }
}
