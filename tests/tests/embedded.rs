//! An application in its own process, submitting verbs to a dataplane
//! queue it embeds through the lock-free submission and completion queues;
//! real AF_XDP sockets and the real XDP program on a fresh veth pair, the
//! peer queue on another thread inside the other namespace. Needs root.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use oae_client::api::{AppError, Completion, Submission};
use oae_dataplane::embed::EmbeddedQueue;
use oae_pmd::netns::VethPair;
use oae_proto::verb::{Output, Refusal, RegionRef, Verb, VerbError};
use oae_tests::dataplanes::{
    LOCAL_REGION, MACS, Options, TARGET_KEY, TARGET_REGION, configs, polling_turn,
};

/// A link key for the tests that authenticate (64 hex digits).
const KEY: &str = "0e3bedded0000000c0ffee00d15ea5e0123456789abcdef0fedcba9876543210";

const TARGET: RegionRef = RegionRef {
    id: TARGET_REGION,
    key: TARGET_KEY,
};

fn start_pair(tag: &str) -> (VethPair, EmbeddedQueue, EmbeddedQueue) {
    let pair = VethPair::create_with_macs(tag, Some(MACS)).expect("veth pair");
    let [a, b] = configs(&pair, &Options::default());
    let b = EmbeddedQueue::start(&b, 0, 1, Some(&pair.ns[1])).expect("queue b");
    let a = EmbeddedQueue::start(&a, 0, 1, Some(&pair.ns[0])).expect("queue a");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(a.link_up() && b.link_up()) {
        assert!(Instant::now() < deadline, "the link did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
    (pair, a, b)
}

/// Waits for `n` completions, bounded in time.
fn collect(q: &EmbeddedQueue, n: usize) -> Vec<Completion> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        match q.poll_completion() {
            Some(c) => out.push(c),
            None => {
                assert!(
                    Instant::now() < deadline,
                    "{} of {n} completions after 20 s",
                    out.len()
                );
                std::thread::yield_now();
            }
        }
    }
    out
}

#[test]
fn verbs_submitted_in_process_complete_exactly_once() {
    if !oae_tests::require_root("verbs_submitted_in_process_complete_exactly_once") {
        return;
    }
    let _turn = polling_turn();
    let (_pair, a, b) = start_pair("emb");
    // Fetch-adds over 64 words, eight per word, all submitted at once.
    const WORDS: u64 = 64;
    const N: u64 = 512;
    let word = |id: u64| (id % WORDS) as u32 * 8;
    for id in 0..N {
        let verb = Verb::FetchAdd {
            target: TARGET,
            offset: word(id),
            add: id + 1,
        };
        a.submit(Submission::to_first_link(id, verb))
            .unwrap_or_else(|_| panic!("submission queue full at {id}"));
    }
    let done = collect(&a, N as usize);
    let mut ids = BTreeSet::new();
    let mut model = [0u64; WORDS as usize];
    let mut applied = 0;
    for c in &done {
        assert!(ids.insert(c.id), "verb {} completed twice", c.id);
        match c.result {
            Ok(Output::FetchAdd { .. }) => {
                model[(c.id % WORDS) as usize] += c.id + 1;
                applied += 1;
            }
            // Locked out through every attempt: refused, with no effect.
            Err(AppError::Verb(VerbError::Refused(Refusal::Locked))) => {}
            ref other => panic!("verb {}: {other:?}", c.id),
        }
    }
    assert!(applied > N / 2, "only {applied} of {N} applied");
    let read = Verb::Read {
        target: TARGET,
        offset: 0,
        local_region: LOCAL_REGION,
        local_offset: 256,
        len: (WORDS * 8) as u16,
    };
    a.submit(Submission::to_first_link(N, read))
        .unwrap_or_else(|_| panic!("submission queue full"));
    let read = collect(&a, 1).remove(0);
    assert_eq!(
        read.result,
        Ok(Output::Read {
            len: WORDS as u16 * 8
        })
    );
    let mut bytes = [0u8; WORDS as usize * 8];
    a.read_local(LOCAL_REGION, 256, &mut bytes)
        .expect("the local block is inside the local region");
    let memory: Vec<u64> = bytes
        .chunks(8)
        .map(|w| u64::from_le_bytes(w.try_into().expect("eight bytes")))
        .collect();
    // Every completed add applied exactly once, every refused one not at all.
    assert_eq!(memory, model);

    // Refused at the target, with no effect; refused before the link.
    let bad_key = Verb::FetchAdd {
        target: RegionRef {
            id: TARGET_REGION,
            key: TARGET_KEY ^ 1,
        },
        offset: 0,
        add: 1,
    };
    let outside = Verb::FetchAdd {
        target: TARGET,
        offset: 1 << 20,
        add: 1,
    };
    for (id, verb) in [(100_001, bad_key), (100_002, outside)] {
        a.submit(Submission::to_first_link(id, verb))
            .unwrap_or_else(|_| panic!("submission queue full"));
    }
    let mut refused = collect(&a, 2);
    refused.sort_by_key(|c| c.id);
    assert!(
        matches!(
            refused[0].result,
            Err(AppError::Verb(VerbError::Refused(Refusal::BadKey)))
        ),
        "{:?}",
        refused[0]
    );
    assert!(
        matches!(
            refused[1].result,
            Err(AppError::Verb(VerbError::Refused(Refusal::OutOfBounds)))
        ),
        "{:?}",
        refused[1]
    );
    let report = b.stop().expect("b's final report");
    assert_eq!(report.in_flight_at_exit, 0);
    let report = a.stop().expect("a's final report");
    assert_eq!(report.pipeline.app_submitted, N + 3);
    assert_eq!(report.pipeline.app_completions_lost, 0);
}

/// Two embedded queues of one process on interfaces that share a MAC pair
/// (VLANs of one NIC; here a second veth pair given the first's MACs),
/// both authenticated: their links would derive one key and share nonces.
/// The second is refused while the first runs, and starts once it stopped.
#[test]
fn an_embedded_queue_sharing_a_running_ones_authenticated_link_is_refused() {
    if !oae_tests::require_root(
        "an_embedded_queue_sharing_a_running_ones_authenticated_link_is_refused",
    ) {
        return;
    }
    let _turn = polling_turn();
    let pair = VethPair::create_with_macs("embmac", Some(MACS)).expect("veth pair");
    pair.add_link(["oae2", "oae3"], MACS, None)
        .expect("second veth pair, same MACs");
    let options = Options {
        auth_key: Some(KEY),
        ..Options::default()
    };
    let [first, _] = configs(&pair, &options);
    let mut second = first.clone();
    second.queues[0].iface = "oae2".into();
    let ns = Some(pair.ns[0].as_str());

    let running = EmbeddedQueue::start(&first, 0, 1, ns).expect("the first queue");
    let Err(refusal) = EmbeddedQueue::start(&second, 0, 1, ns) else {
        panic!("a second queue on the first's MACs and channel was started");
    };
    assert!(
        refusal.contains("is authenticated, and another queue of this process already links"),
        "{refusal}"
    );
    running.stop().expect("the first queue's final report");
    let after = EmbeddedQueue::start(&second, 0, 1, ns).expect("once the first stopped");
    after.stop().expect("the second queue's final report");
}
