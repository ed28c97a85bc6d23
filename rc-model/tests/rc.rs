//! The RC model between two endpoints over a seeded channel that loses,
//! duplicates and delays (so reorders) frames, in simulated time.

use std::collections::{BTreeMap, BTreeSet};

use oae_common::rng::Rng;
use oae_proto::verb::{Output, Refusal, RegionRef, Verb, VerbError};
use oae_proto::{Memory, Nanos, Permissions, RegionSpec, Store, VerbId};
use oae_rc_model::{MAX_FRAME, QpFailure, RcConfig, RcEndpoint, RcEvent, SubmitError};

const REGION: RegionRef = RegionRef { id: 1, key: 7 };
const WORDS: u32 = 64;

fn memory() -> Memory {
    let mut m = Memory::default();
    m.register(RegionSpec {
        id: 1,
        key: 7,
        len: 4096,
        permissions: Permissions::ALL,
    })
    .unwrap();
    m
}

#[derive(Clone, Copy, Default)]
struct Faults {
    loss_ppm: u64,
    dup_ppm: u64,
    /// Extra delay, uniform in 0..jitter, on top of one microsecond.
    jitter: Nanos,
    /// Drop everything from a to b.
    cut_a_to_b: bool,
}

/// Endpoint a issues verbs against b's memory.
struct Pair {
    ends: [RcEndpoint; 2],
    /// (delivery time, sequence, to, frame)
    wire: BTreeMap<(Nanos, u64), (usize, Vec<u8>)>,
    seq: u64,
    now: Nanos,
    rng: Rng,
    faults: Faults,
    completions: Vec<(VerbId, Result<Output, VerbError>, Nanos)>,
    failures: Vec<(QpFailure, Nanos)>,
}

impl Pair {
    fn new(cfg: RcConfig, faults: Faults, seed: u64) -> Pair {
        Pair {
            ends: [
                RcEndpoint::new(cfg, memory()).unwrap(),
                RcEndpoint::new(cfg, memory()).unwrap(),
            ],
            wire: BTreeMap::new(),
            seq: 0,
            now: 0,
            rng: Rng::new(seed),
            faults,
            completions: Vec::new(),
            failures: Vec::new(),
        }
    }

    fn roll(&mut self, ppm: u64) -> bool {
        self.rng.chance_ppm(ppm as u32)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.rng.below(n) }
    }

    fn send(&mut self, from: usize, frame: Vec<u8>) {
        if from == 0 && self.faults.cut_a_to_b {
            return;
        }
        if self.roll(self.faults.loss_ppm) {
            return;
        }
        let copies = if self.roll(self.faults.dup_ppm) { 2 } else { 1 };
        for _ in 0..copies {
            let at = self.now + 1_000 + self.below(self.faults.jitter);
            self.seq += 1;
            self.wire.insert((at, self.seq), (1 - from, frame.clone()));
        }
    }

    /// Moves frames and time until nothing is in flight and no verb is
    /// pending, or `limit` of simulated time passes.
    fn run(&mut self, limit: Nanos) {
        let mut buf = [0u8; MAX_FRAME];
        loop {
            for i in 0..2 {
                while let Some(n) = self.ends[i].poll_transmit(self.now, &mut buf) {
                    self.send(i, buf[..n].to_vec());
                }
                while let Some(e) = self.ends[i].poll_event() {
                    match e {
                        RcEvent::Completed { id, result } => {
                            self.completions.push((id, result, self.now))
                        }
                        RcEvent::QpFailed(why) => self.failures.push((why, self.now)),
                    }
                }
            }
            let next_frame = self.wire.keys().next().map(|k| k.0);
            let next_timer = self.ends.iter().filter_map(RcEndpoint::poll_timeout).min();
            let Some(next) = [next_frame, next_timer].into_iter().flatten().min() else {
                return;
            };
            if next > limit {
                return;
            }
            self.now = self.now.max(next);
            if next_frame == Some(next) {
                let key = *self.wire.keys().next().unwrap();
                let (to, frame) = self.wire.remove(&key).unwrap();
                self.ends[to].handle_frame(&frame, self.now);
            } else {
                for e in &mut self.ends {
                    e.handle_timeout(self.now);
                }
            }
        }
    }

    fn word(&self, w: u32) -> u64 {
        let bytes = self.ends[1].memory().bytes(1).unwrap();
        let at = (w * 8) as usize;
        u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
    }
}

fn faa(w: u32, add: u64) -> Verb {
    Verb::FetchAdd {
        target: REGION,
        offset: w * 8,
        add,
    }
}

/// Submits `n` fetch-adds (adding id + 1 to word id % WORDS), runs, and
/// checks that every verb completed once and that memory holds every add
/// completed `Ok` exactly once. An add completed with an error may or may
/// not have been applied (RC cannot say): memory must lie between the two.
/// Returns the pair for further checks.
fn faa_campaign(cfg: RcConfig, faults: Faults, seed: u64, n: u64) -> Pair {
    let mut p = Pair::new(cfg, faults, seed);
    for id in 0..n {
        p.ends[0]
            .submit(VerbId(id), faa((id % u64::from(WORDS)) as u32, id + 1))
            .unwrap();
    }
    p.run(60_000_000_000);
    let ids: BTreeSet<u64> = p.completions.iter().map(|c| c.0.0).collect();
    assert_eq!(ids.len(), p.completions.len(), "a verb completed twice");
    assert_eq!(ids.len() as u64, n, "every verb completes");
    let mut sure = vec![0u64; WORDS as usize];
    let mut in_doubt = vec![0u64; WORDS as usize];
    for (id, result, _) in &p.completions {
        let w = (id.0 % u64::from(WORDS)) as usize;
        match result {
            Ok(Output::FetchAdd { .. }) => sure[w] += id.0 + 1,
            Ok(other) => panic!("{other:?}"),
            Err(_) => in_doubt[w] += id.0 + 1,
        }
    }
    for w in 0..WORDS {
        let m = p.word(w);
        let (lo, hi) = (sure[w as usize], sure[w as usize] + in_doubt[w as usize]);
        assert!(lo <= m && m <= hi, "word {w}: {m} not in {lo}..={hi}");
    }
    p
}

#[test]
fn a_clean_channel_completes_every_verb_once_in_order() {
    let p = faa_campaign(RcConfig::default(), Faults::default(), 1, 500);
    assert!(p.completions.iter().all(|c| c.1.is_ok()));
    let s = p.ends[0].stats();
    assert_eq!((s.retransmissions, s.timeouts), (0, 0));
    // Completions arrive in PSN order, as RC delivers them.
    let order: Vec<u64> = p.completions.iter().map(|c| c.0.0).collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn loss_is_recovered_by_go_back_n_and_the_ack_timeout() {
    let faults = Faults {
        loss_ppm: 50_000,
        ..Faults::default()
    };
    for seed in 0..8 {
        let p = faa_campaign(RcConfig::default(), faults, seed, 400);
        assert!(p.completions.iter().all(|c| c.1.is_ok()), "seed {seed}");
        let (a, b) = (p.ends[0].stats(), p.ends[1].stats());
        assert!(a.retransmissions > 0 && b.naks_sent > 0, "seed {seed}");
    }
    // A lost frame that nothing after it reveals waits for the timer: seed
    // 25 loses one (found among seeds 0 to 47, of which 2 do).
    let p = faa_campaign(RcConfig::default(), faults, 25, 400);
    assert!(p.completions.iter().all(|c| c.1.is_ok()));
    assert!(p.ends[0].stats().timeouts > 0, "{:?}", p.ends[0].stats());
}

#[test]
fn the_tail_is_set_by_the_ack_timeout() {
    // One lost frame that no later frame reveals (the last request) costs a
    // whole local ACK timeout: 4.096 us x 2^14, about 67 ms.
    let cfg = RcConfig::default();
    let mut p = Pair::new(
        cfg,
        Faults {
            cut_a_to_b: true,
            ..Faults::default()
        },
        1,
    );
    p.ends[0].submit(VerbId(0), faa(0, 1)).unwrap();
    p.run(10_000);
    p.faults.cut_a_to_b = false;
    p.run(60_000_000_000);
    let (_, result, at) = &p.completions[0];
    assert!(result.is_ok());
    assert!(*at >= cfg.ack_timeout(), "completed at {at} ns");
    assert_eq!(cfg.ack_timeout(), 67_108_864);
}

#[test]
fn duplicated_atomics_are_answered_from_the_cache_not_executed_again() {
    // In order, as a link delivers: a duplicate follows its original.
    let faults = Faults {
        dup_ppm: 200_000,
        ..Faults::default()
    };
    let mut replays = 0;
    for seed in 0..8 {
        let p = faa_campaign(RcConfig::default(), faults, seed, 400);
        replays += p.ends[1].stats().cache_replays;
        assert_eq!(p.ends[1].stats().executed, 400, "seed {seed}");
    }
    assert!(replays > 0);
}

/// Duplicates delayed past newer requests (RC assumes a link does not
/// reorder) may outlive the cache: the QP fails, but nothing runs twice.
#[test]
fn late_duplicates_never_run_twice() {
    let faults = Faults {
        dup_ppm: 200_000,
        jitter: 50_000,
        ..Faults::default()
    };
    let mut failed = 0;
    for seed in 0..8 {
        // The campaign checks memory against the completions.
        let p = faa_campaign(RcConfig::default(), faults, seed, 400);
        for (why, _) in &p.failures {
            assert_eq!(*why, QpFailure::InvalidRequest, "seed {seed}");
            failed += 1;
        }
    }
    eprintln!("QPs failed by late duplicates: {failed} of 8");
}

#[test]
fn a_duplicate_too_old_for_the_cache_fails_the_qp_instead_of_running_twice() {
    let cfg = RcConfig {
        responder_cache: 4,
        max_rd_atomic: 4,
        ..RcConfig::default()
    };
    let mut a = RcEndpoint::new(cfg, memory()).unwrap();
    let mut b = RcEndpoint::new(cfg, memory()).unwrap();
    let mut buf = [0u8; MAX_FRAME];
    for id in 0..10 {
        a.submit(VerbId(id), faa(0, 1)).unwrap();
    }
    let mut first = None;
    for _ in 0..100 {
        while let Some(n) = a.poll_transmit(0, &mut buf) {
            first.get_or_insert_with(|| buf[..n].to_vec());
            b.handle_frame(&buf[..n], 0);
        }
        while let Some(n) = b.poll_transmit(0, &mut buf) {
            a.handle_frame(&buf[..n], 0);
        }
    }
    assert_eq!(b.stats().executed, 10);
    assert_eq!(a.in_flight(), 0);
    // The first request again, long after its result left the cache.
    b.handle_frame(first.as_ref().unwrap(), 1);
    assert_eq!(b.stats().cache_misses, 1);
    assert_eq!(b.stats().executed, 10, "not executed a second time");
    let word = u64::from_le_bytes(b.memory().bytes(1).unwrap()[..8].try_into().unwrap());
    assert_eq!(word, 10);
    while let Some(n) = b.poll_transmit(1, &mut buf) {
        a.handle_frame(&buf[..n], 1);
    }
    assert_eq!(a.failure(), Some(QpFailure::InvalidRequest));
}

#[test]
fn exhausted_retries_fail_the_qp_and_flush_the_queue() {
    let cfg = RcConfig {
        max_outstanding: 4,
        ..RcConfig::default()
    };
    let mut p = Pair::new(
        cfg,
        Faults {
            cut_a_to_b: true,
            ..Faults::default()
        },
        1,
    );
    for id in 0..10 {
        p.ends[0].submit(VerbId(id), faa(id as u32, 1)).unwrap();
    }
    p.run(60_000_000_000);
    assert_eq!(p.completions.len(), 10);
    assert!(
        p.completions
            .iter()
            .all(|c| c.1 == Err(VerbError::Unreachable))
    );
    let (why, at) = p.failures[0];
    assert_eq!(why, QpFailure::RetryExceeded);
    // The first send plus retry_count resends, each waiting a full timeout.
    assert_eq!(
        at,
        (u64::from(cfg.retry_count) + 1) * cfg.ack_timeout(),
        "failed after {at} ns"
    );
    assert_eq!(
        p.ends[0].submit(VerbId(99), faa(0, 1)),
        Err(SubmitError::QpError)
    );
}

#[test]
fn a_remote_access_error_fails_the_qp() {
    let mut p = Pair::new(RcConfig::default(), Faults::default(), 1);
    let bad = Verb::FetchAdd {
        target: RegionRef { id: 1, key: 8 },
        offset: 0,
        add: 1,
    };
    p.ends[0].submit(VerbId(0), faa(0, 1)).unwrap();
    p.ends[0].submit(VerbId(1), bad).unwrap();
    p.ends[0].submit(VerbId(2), faa(1, 1)).unwrap();
    p.run(60_000_000_000);
    let result = |id| p.completions.iter().find(|c| c.0 == VerbId(id)).unwrap().1;
    assert!(result(0).is_ok());
    assert_eq!(result(1), Err(VerbError::Refused(Refusal::BadKey)));
    assert!(result(2).is_err(), "flushed with the QP");
    assert_eq!(p.failures[0].0, QpFailure::RemoteAccess(Refusal::BadKey));
}

#[test]
fn reads_and_writes_round_trip_and_non_rc_verbs_are_refused() {
    let mut p = Pair::new(RcConfig::default(), Faults::default(), 1);
    let data = oae_proto::Block::new(&[9u8; 24]).unwrap();
    p.ends[0]
        .submit(
            VerbId(0),
            Verb::Write {
                target: REGION,
                offset: 64,
                data,
            },
        )
        .unwrap();
    p.ends[0]
        .submit(
            VerbId(1),
            Verb::Read {
                target: REGION,
                offset: 64,
                local_region: 1,
                local_offset: 1024,
                len: 24,
            },
        )
        .unwrap();
    p.ends[0]
        .submit(
            VerbId(2),
            Verb::CompareAndSwap {
                target: REGION,
                offset: 64,
                expected: u64::from_le_bytes([9; 8]),
                new: 5,
            },
        )
        .unwrap();
    p.run(60_000_000_000);
    assert_eq!(p.completions[0].1, Ok(Output::Write));
    assert_eq!(p.completions[1].1, Ok(Output::Read { len: 24 }));
    let local = p.ends[0].memory().snapshot(1).unwrap();
    assert_eq!(&local[1024..1048], data.as_slice());
    assert!(matches!(
        p.completions[2].1,
        Ok(Output::CompareAndSwap { swapped: true, .. })
    ));
    let swap = Verb::Swap {
        target: REGION,
        offset: 0,
        new: 1,
    };
    assert_eq!(
        p.ends[0].submit(VerbId(3), swap),
        Err(SubmitError::NotAnRcVerb)
    );
    let nowhere = Verb::Read {
        target: REGION,
        offset: 0,
        local_region: 9,
        local_offset: 0,
        len: 8,
    };
    assert_eq!(
        p.ends[0].submit(VerbId(4), nowhere),
        Err(SubmitError::BadLocalBlock)
    );
}

#[test]
fn corrupted_frames_are_counted_and_dropped() {
    let mut a = RcEndpoint::new(RcConfig::default(), memory()).unwrap();
    let mut b = RcEndpoint::new(RcConfig::default(), memory()).unwrap();
    let mut buf = [0u8; MAX_FRAME];
    a.submit(VerbId(0), faa(0, 1)).unwrap();
    let n = a.poll_transmit(0, &mut buf).unwrap();
    let mut bad = buf[..n].to_vec();
    bad[20] ^= 4;
    b.handle_frame(&bad, 0);
    b.handle_frame(&[0u8; 3], 0);
    assert_eq!(b.stats().malformed, 2);
    assert_eq!(b.stats().executed, 0);
    b.handle_frame(&buf[..n], 0);
    assert_eq!(b.stats().executed, 1);
}
