//! Host programs and a dataplane in separate processes, over the host ring
//! (a swap-ring region standing in for an IPU's PCIe BAR): this test
//! process is the host, `oaed` a is the IPU side, `oaed` b its peer across
//! a real veth link. Needs root.

use std::time::{Duration, Instant};

use oae_dataplane::host::{HostQueue, MAX_WRITE};
use oae_dataplane::pipeline::{AppError, Completion, Submission};
use oae_proto::{Block, McasWord, Output, Refusal, RegionRef, Verb, VerbError};
use oae_tests::dataplanes::{
    Dataplanes, LOCAL_REGION, Options, TARGET_KEY, TARGET_REGION, binary, host_ring_path,
};

const T: RegionRef = RegionRef {
    id: TARGET_REGION,
    key: TARGET_KEY,
};

fn start(tag: &str, cost: &'static str) -> (Dataplanes, HostQueue) {
    let d = Dataplanes::start(
        tag,
        &Options {
            host_ring_cost: Some(cost),
            ..Options::default()
        },
    );
    let host = HostQueue::attach(host_ring_path(&d.pair), 100).expect("attach the host ring");
    (d, host)
}

/// Submits and waits for the one completion, bounded in time.
fn run(host: &mut HostQueue, id: u64, verb: Verb) -> Completion {
    host.submit(Submission { id, verb })
        .expect("room in the ring");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(c) = host.poll_completion() {
            assert_eq!(c.id, id, "completions come back with their ids");
            return c;
        }
        assert!(Instant::now() < deadline, "no completion for verb {id}");
        std::hint::spin_loop();
    }
}

fn word(d: &Dataplanes, offset: usize) -> u64 {
    let m = d.region(1, TARGET_REGION);
    u64::from_le_bytes(m[offset..offset + 8].try_into().unwrap())
}

/// Every verb a record carries, end to end, with the emulated PCIe costs
/// on: results as the peer's memory says, refusals with no effect.
#[test]
fn every_verb_from_the_host_through_the_dataplane() {
    if !oae_tests::require_root("every_verb_from_the_host_through_the_dataplane") {
        return;
    }
    let (d, mut host) = start("hostverbs", "read=750,write=200,doorbell=1600,atomic=1000");
    let data = Block::new(&[0x5a; MAX_WRITE]).unwrap();
    let c = run(
        &mut host,
        1,
        Verb::Write {
            target: T,
            offset: 64,
            data,
        },
    );
    assert_eq!(c.result, Ok(Output::Write));
    assert_eq!(
        &d.region(1, TARGET_REGION)[64..64 + MAX_WRITE],
        data.as_slice()
    );
    let c = run(
        &mut host,
        2,
        Verb::Read {
            target: T,
            offset: 64,
            len: 16,
        },
    );
    assert_eq!(c.result, Ok(Output::Read(Block::new(&[0x5a; 16]).unwrap())));
    let c = run(
        &mut host,
        3,
        Verb::CompareAndSwap {
            target: T,
            offset: 0,
            expected: 0,
            new: 41,
        },
    );
    assert_eq!(
        c.result,
        Ok(Output::CompareAndSwap {
            old: 0,
            swapped: true
        })
    );
    let c = run(
        &mut host,
        4,
        Verb::FetchAdd {
            target: T,
            offset: 0,
            add: 1,
        },
    );
    assert_eq!(c.result, Ok(Output::FetchAdd { old: 41 }));
    let c = run(
        &mut host,
        5,
        Verb::Swap {
            target: T,
            offset: 0,
            new: 7,
        },
    );
    assert_eq!(c.result, Ok(Output::Swap { old: 42 }));
    assert_eq!(word(&d, 0), 7);
    let c = run(
        &mut host,
        6,
        Verb::BilateralSwap {
            target: T,
            offset: 0,
            local_region: LOCAL_REGION,
            local_offset: 0,
            len: 8,
        },
    );
    assert_eq!(
        c.result,
        Ok(Output::BilateralSwap(
            Block::new(&7u64.to_le_bytes()).unwrap()
        ))
    );
    assert_eq!(&d.region(0, LOCAL_REGION)[..8], &7u64.to_le_bytes());
    assert!(c.latency_ns > 0, "the dataplane reports its latency");

    // Refusals: a wrong key at the target, and what a record cannot carry.
    let c = run(
        &mut host,
        7,
        Verb::FetchAdd {
            target: RegionRef { key: 1, ..T },
            offset: 0,
            add: 1,
        },
    );
    assert_eq!(
        c.result,
        Err(AppError::Verb(VerbError::Refused(Refusal::BadKey)))
    );
    assert_eq!(
        word(&d, 0),
        0,
        "the bilateral swap took 7; the refused add did nothing"
    );
    let mcas = Verb::multi_word_commit(T, &[McasWord::default()]).unwrap();
    match run(&mut host, 8, mcas).result {
        Err(AppError::NotSubmitted(why)) => {
            assert!(why.to_string().contains("multi-word"), "{why}")
        }
        other => panic!("{other:?}"),
    }
    let stats = d.stats(0);
    let counters = &stats["queues"][0]["host"]["counters"];
    assert_eq!(counters["requests"], 7, "{stats}");
    assert_eq!(counters["completions_lost"], 0);

    // The operator's view of the same region.
    let out = oae_tests::run(
        std::process::Command::new(binary("oaectl"))
            .arg("swap-ring")
            .arg(host_ring_path(&d.pair)),
    );
    assert!(out.success(), "{out}");
    assert!(
        out.stdout.contains("fito mode") && out.stdout.contains("verb_requests"),
        "{out}"
    );
}

/// Many verbs in flight at once on a few words: each completes exactly
/// once, and the peer's memory holds the sum of those that succeeded (a
/// verb refused `Locked` by its contended word had no effect).
#[test]
fn a_window_of_host_verbs_completes_exactly_once() {
    if !oae_tests::require_root("a_window_of_host_verbs_completes_exactly_once") {
        return;
    }
    let (d, mut host) = start("hostwin", "zero");
    const VERBS: u64 = 4000;
    const WINDOW: u64 = 64;
    let mut done = vec![false; VERBS as usize];
    let (mut sent, mut completed, mut added) = (0u64, 0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs(60);
    while completed < VERBS {
        while sent < VERBS && sent - completed < WINDOW {
            let verb = Verb::FetchAdd {
                target: T,
                offset: 8 * (sent % 8) as u32,
                add: 1,
            };
            match host.submit(Submission { id: sent, verb }) {
                Ok(()) => sent += 1,
                Err(_) => break,
            }
        }
        while let Some(c) = host.poll_completion() {
            assert!(!done[c.id as usize], "verb {} completed twice", c.id);
            done[c.id as usize] = true;
            match c.result {
                Ok(Output::FetchAdd { .. }) => added += 1,
                Err(AppError::Verb(VerbError::Refused(Refusal::Locked))) => {}
                other => panic!("verb {}: {other:?}", c.id),
            }
            completed += 1;
        }
        assert!(
            Instant::now() < deadline,
            "{completed} of {VERBS} completed"
        );
    }
    let total: u64 = (0..8).map(|w| word(&d, 8 * w)).sum();
    assert_eq!(total, added);
    assert!(added > VERBS / 2, "only {added} of {VERBS} succeeded");
}

/// kill -9 of the dataplane: the host notices because the dataplane's
/// interaction counter stops moving over its own polls (counted, not
/// timed), and nothing it submitted afterwards is ever answered.
#[test]
fn the_host_notices_a_dead_dataplane_by_counted_polls() {
    if !oae_tests::require_root("the_host_notices_a_dead_dataplane_by_counted_polls") {
        return;
    }
    let (mut d, mut host) = start("hostkill", "zero");
    let c = run(
        &mut host,
        1,
        Verb::FetchAdd {
            target: T,
            offset: 0,
            add: 1,
        },
    );
    assert!(c.result.is_ok());
    d.kill9(0);
    host.submit(Submission {
        id: 2,
        verb: Verb::FetchAdd {
            target: T,
            offset: 0,
            add: 1,
        },
    })
    .expect("room");
    // A live polling core moves its counter every burst; a million of our
    // polls without a move means it is gone.
    const QUIET_POLLS: u64 = 1_000_000;
    let (mut last, mut quiet, mut polls) = (host.dataplane_interactions(), 0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs(30);
    while quiet < QUIET_POLLS {
        assert!(
            host.poll_completion().is_none(),
            "a dead dataplane answered"
        );
        let now = host.dataplane_interactions();
        if now == last {
            quiet += 1;
        } else {
            (last, quiet) = (now, 0);
        }
        polls += 1;
        assert!(
            Instant::now() < deadline,
            "still moving after {polls} polls"
        );
    }
    assert_eq!(
        word(&d, 0),
        1,
        "the verb after the kill had no effect at the peer"
    );
}

/// A file that is not a host ring is refused with what is wrong.
#[test]
fn a_file_that_is_not_a_host_ring_is_refused() {
    let path = format!("/dev/shm/oae-not-a-ring-{}", std::process::id());
    std::fs::write(&path, vec![0x42u8; 4096]).unwrap();
    let e = HostQueue::attach(&path, 1).err().expect("refused");
    std::fs::remove_file(&path).unwrap();
    assert!(e.contains("magic"), "{e}");
}
