//! Two nodes joined by a perfect wire: every verb end to end.

mod common;

use common::{R, pair_with, pump};
use oae_proto::wire::MAX_FRAME;
use oae_proto::*;

fn pair() -> [Node; 2] {
    pair_with(LinkConfig::default())
}

fn run(nodes: &mut [Node; 2], verb: Verb) -> Result<Output, VerbError> {
    nodes[0].submit(0, VerbId(7), &verb).unwrap();
    pump(nodes, 10);
    loop {
        match nodes[0].poll_event() {
            Some(Event::Completed { id, result, .. }) => {
                assert_eq!(id, VerbId(7));
                return result;
            }
            Some(_) => continue,
            None => panic!("no completion"),
        }
    }
}

#[test]
fn bring_up_then_every_verb() {
    let mut n = pair();
    pump(&mut n, 0);
    assert!(n[0].link_status(0).unwrap().up && n[1].link_status(0).unwrap().up);
    let cas = Verb::CompareAndSwap {
        target: R,
        offset: 8,
        expected: 0,
        new: 5,
    };
    assert_eq!(
        run(&mut n, cas),
        Ok(Output::CompareAndSwap {
            old: 0,
            swapped: true
        })
    );
    assert_eq!(
        run(&mut n, cas),
        Ok(Output::CompareAndSwap {
            old: 5,
            swapped: false
        })
    );
    let faa = Verb::FetchAdd {
        target: R,
        offset: 8,
        add: 3,
    };
    assert_eq!(run(&mut n, faa), Ok(Output::FetchAdd { old: 5 }));
    let swap = Verb::Swap {
        target: R,
        offset: 8,
        new: 1,
    };
    assert_eq!(run(&mut n, swap), Ok(Output::Swap { old: 8 }));
    let write = Verb::Write {
        target: R,
        offset: 100,
        data: Block::new(b"hello").unwrap(),
    };
    assert_eq!(run(&mut n, write), Ok(Output::Write));
    let read = Verb::Read {
        target: R,
        offset: 100,
        local_region: 1,
        local_offset: 200,
        len: 5,
    };
    assert_eq!(run(&mut n, read), Ok(Output::Read { len: 5 }));
    assert_eq!(&n[0].memory().bytes(1).unwrap()[200..205], b"hello");
    let words = [
        McasWord {
            offset: 16,
            expected: 0,
            new: 1,
        },
        McasWord {
            offset: 24,
            expected: 0,
            new: 2,
        },
        McasWord {
            offset: 32,
            expected: 0,
            new: 3,
        },
        McasWord {
            offset: 40,
            expected: 0,
            new: 4,
        },
    ];
    let mcas = Verb::multi_word_commit(R, &words).unwrap();
    match run(&mut n, mcas) {
        Ok(Output::MultiWordCommit {
            committed: true,
            count: 4,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    let bswap = Verb::BilateralSwap {
        target: R,
        offset: 100,
        local_region: 1,
        local_offset: 0,
        len: 8,
    };
    match run(&mut n, bswap) {
        Ok(Output::BilateralSwap { len: 8 }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(&n[0].memory().bytes(1).unwrap()[..5], b"hello");
    assert_eq!(
        n[1].memory().bytes(1).unwrap()[100],
        0,
        "target got the initiator's zeros"
    );
    let bad = Verb::FetchAdd {
        target: RegionRef { id: 1, key: 1 },
        offset: 0,
        add: 1,
    };
    assert_eq!(run(&mut n, bad), Err(VerbError::Refused(Refusal::BadKey)));
    pump(&mut n, 20);
    assert!(n[0].is_quiescent() && n[1].is_quiescent());
    assert_eq!(n[1].memory().locked_words(), 0);
}

#[test]
fn a_refused_read_leaves_its_local_block_untouched() {
    let mut n = pair();
    pump(&mut n, 0);
    let mut bad = Verb::Read {
        target: RegionRef { id: 1, key: 1 },
        offset: 0,
        local_region: 1,
        local_offset: 8,
        len: 16,
    };
    assert_eq!(run(&mut n, bad), Err(VerbError::Refused(Refusal::BadKey)));
    if let Verb::Read { target, offset, .. } = &mut bad {
        *target = R;
        *offset = 250;
    }
    assert_eq!(
        run(&mut n, bad),
        Err(VerbError::Refused(Refusal::OutOfBounds))
    );
    assert_eq!(n[0].memory().bytes(1).unwrap(), &[0u8; 256][..]);
    assert_eq!(n[0].memory().locked_words(), 0);
}

#[test]
fn a_read_outside_the_local_regions_is_not_submitted() {
    let mut n = pair();
    pump(&mut n, 0);
    for (local_region, local_offset) in [(2, 0), (1, 250)] {
        let read = Verb::Read {
            target: R,
            offset: 0,
            local_region,
            local_offset,
            len: 16,
        };
        assert!(
            matches!(
                n[0].submit(0, VerbId(1), &read),
                Err(SubmitError::Invalid(_))
            ),
            "region {local_region} offset {local_offset}"
        );
    }
}

#[test]
fn a_read_whose_block_a_swap_holds_when_its_echo_comes_is_reversed_then_lands() {
    let mut n = pair();
    pump(&mut n, 0);
    let target_block: Vec<u8> = (1..=16).collect();
    let write = Verb::Write {
        target: R,
        offset: 64,
        data: Block::new(&target_block).unwrap(),
    };
    assert_eq!(run(&mut n, write), Ok(Output::Write));
    // The READ goes first; the swap then locks local [0, 16) until it is
    // decided. The READ's echo comes while the swap holds the block, so
    // its bytes cannot land: that attempt is reversed, and the next lands.
    let read = Verb::Read {
        target: R,
        offset: 64,
        local_region: 1,
        local_offset: 0,
        len: 16,
    };
    let bswap = Verb::BilateralSwap {
        target: R,
        offset: 0,
        local_region: 1,
        local_offset: 0,
        len: 16,
    };
    let reversals = |n: &[Node; 2]| n[0].link_stats(0).unwrap().reversals;
    n[0].submit(0, VerbId(1), &read).unwrap();
    n[0].submit(0, VerbId(2), &bswap).unwrap();
    let mut done = Vec::new();
    let mut now = 10;
    while done.len() < 2 {
        assert!(now < 1_000_000_000, "both verbs complete: {done:?}");
        pump(&mut n, now);
        n[0].handle_timeout(now);
        n[1].handle_timeout(now);
        while let Some(ev) = n[0].poll_event() {
            if let Event::Completed { id, result, .. } = ev {
                done.push((id, result));
            }
        }
        now += 10_000;
    }
    assert_eq!(
        done,
        [
            (VerbId(2), Ok(Output::BilateralSwap { len: 16 })),
            (VerbId(1), Ok(Output::Read { len: 16 })),
        ]
    );
    assert_eq!(reversals(&n), 1, "the READ's first attempt was reversed");
    assert_eq!(&n[0].memory().bytes(1).unwrap()[..16], &target_block[..]);
    assert_eq!(n[0].memory().locked_words(), 0);
}

fn completion(n: &mut Node) -> Option<Result<Output, VerbError>> {
    while let Some(ev) = n.poll_event() {
        if let Event::Completed { result, .. } = ev {
            return Some(result);
        }
    }
    None
}

const FAA: Verb = Verb::FetchAdd {
    target: R,
    offset: 0,
    add: 1,
};

fn word0(n: &Node) -> u64 {
    u64::from_le_bytes(n.memory().bytes(1).unwrap()[..8].try_into().unwrap())
}

/// Brings the pair up, then submits a FETCH_ADD at node 0 and delivers its
/// request, and only its request, to node 1.
fn request_applied_at_target(n: &mut [Node; 2], buf: &mut [u8]) {
    pump(n, 0);
    n[0].submit(0, VerbId(1), &FAA).unwrap();
    let len = n[0].poll_transmit(0, 1, buf).unwrap();
    n[1].handle_frame(0, &buf[..len], 1);
}

/// The sender compares the reflected first slice bit for bit: an echo whose
/// reflection differs (even with a valid CRC) is never taken as success.
#[test]
fn echo_with_a_wrong_reflection_is_reversed_and_retried() {
    let mut n = pair();
    let mut buf = [0u8; MAX_FRAME];
    request_applied_at_target(&mut n, &mut buf);
    let len = n[1].poll_transmit(0, 1, &mut buf).unwrap();
    // Flip one bit of the reflected slice (the payload's first) and reseal.
    buf[wire::HEADER_LEN + 7] ^= 1;
    wire::seal(&mut buf[..len]);
    n[0].handle_frame(0, &buf[..len], 2);
    assert_eq!(n[0].link_stats(0).unwrap().echo_mismatches, 1);
    assert_eq!(
        completion(&mut n[0]),
        None,
        "a mismatched echo completes nothing"
    );
    pump(&mut n, 3);
    assert_eq!(completion(&mut n[0]), Some(Ok(Output::FetchAdd { old: 0 })));
    pump(&mut n, 4);
    assert_eq!(word0(&n[1]), 1, "applied exactly once");
    assert_eq!(n[1].link_stats(0).unwrap().transfers_reversed, 1);
    assert!(n[0].is_quiescent() && n[1].is_quiescent());
}

/// Silence is counted in rounds (multiples of the measured RTT), and the
/// link is declared unreachable after exactly `unreachable_after_rounds`.
/// Queued verbs fail with no effect; the one in flight stays in doubt until
/// the link returns, then is reversed and retried, and lands once.
#[test]
fn unreachable_after_k_silent_rounds_then_in_doubt_resolved() {
    let mut n = pair();
    pump(&mut n, 0);
    let k = LinkConfig::default().unreachable_after_rounds;
    n[0].submit(0, VerbId(1), &FAA).unwrap();
    let mut buf = [0u8; MAX_FRAME];
    let len = n[0].poll_transmit(0, 1, &mut buf).unwrap();
    n[1].handle_frame(0, &buf[..len], 1); // applied; the echo will be lost
    n[0].submit(0, VerbId(2), &FAA).unwrap();
    // Queue more verbs than credits so one waits unsent.
    for i in 3..=70 {
        n[0].submit(0, VerbId(i), &FAA).unwrap();
    }
    let mut now;
    let first_round = n[0].link_status(0).unwrap().round;
    let mut wakeups = 0;
    // Wake-ups include the probes sent for the lost echo between rounds.
    let rounds = loop {
        now = n[0].poll_timeout().unwrap();
        n[0].handle_timeout(now);
        while n[0].poll_transmit(0, now, &mut buf).is_some() {} // all lost
        wakeups += 1;
        let status = n[0].link_status(0).unwrap();
        if !status.up {
            break (status.round - first_round) as u32;
        }
        assert!(wakeups <= 20 * k, "never declared unreachable");
    };
    assert!(
        rounds >= u64::from(k) as u32 && rounds <= k + 2,
        "declared after {rounds} rounds"
    );
    let mut unreachable = 0;
    while let Some(r) = completion(&mut n[0]) {
        assert_eq!(r, Err(VerbError::Unreachable));
        unreachable += 1;
    }
    assert!(unreachable > 0);
    assert!(n[0].in_doubt() > 0);
    // The link comes back: bring-up resynchronises, in-doubt transfers are
    // reversed and retried; contended verbs wait a round between attempts.
    let (mut ok, mut contended) = (0, 0);
    for _ in 0..500 {
        now = n
            .iter()
            .filter_map(|x| x.poll_timeout())
            .min()
            .unwrap()
            .max(now + 1);
        n[0].handle_timeout(now);
        n[1].handle_timeout(now);
        pump(&mut n, now);
        while let Some(r) = completion(&mut n[0]) {
            match r {
                Ok(Output::FetchAdd { .. }) => ok += 1,
                // 64 verbs on one word: some run out of attempts, with no effect.
                Err(VerbError::Refused(Refusal::Locked)) => contended += 1,
                other => panic!("{other:?}"),
            }
        }
        if ok + contended + unreachable == 70 && n[0].is_quiescent() && n[1].is_quiescent() {
            break;
        }
    }
    assert_eq!(
        ok + contended + unreachable,
        70,
        "every verb completed once"
    );
    assert_eq!(n[0].in_doubt(), 0);
    assert_eq!(
        word0(&n[1]),
        ok,
        "every Ok applied exactly once, nothing else"
    );
    assert!(n[1].link_stats(0).unwrap().transfers_reversed >= 1);
}

/// A restarted initiator cannot send a decision: its tentative transfers are
/// committed (it may have told its issuer Ok; it never said Err without a
/// confirmed reversal).
#[test]
fn initiator_restart_presumes_commit() {
    let mut n = pair();
    let mut buf = [0u8; MAX_FRAME];
    request_applied_at_target(&mut n, &mut buf);
    assert_eq!(n[1].memory().locked_words(), 1, "tentative and locked");
    let mut reborn = Node::new(0xA, 2);
    reborn.add_link(LinkConfig::default()).unwrap();
    reborn
        .register(RegionSpec {
            id: 1,
            key: 42,
            len: 256,
            permissions: Permissions::ALL,
        })
        .unwrap();
    n[0] = reborn;
    pump(&mut n, 2);
    assert!(n[1].link_status(0).unwrap().up);
    assert_eq!(n[1].link_status(0).unwrap().peer_epoch, 2);
    assert_eq!(n[1].link_stats(0).unwrap().presumed_commits, 1);
    assert_eq!(n[1].memory().locked_words(), 0);
    assert_eq!(word0(&n[1]), 1);
}

/// Buffers of a transmit burst, as a driver lends them.
struct Burst {
    frames: Vec<Vec<u8>>,
    room: usize,
}

impl TransmitBuffers for Burst {
    fn next_buffer(&mut self) -> Option<&mut [u8]> {
        if self.frames.len() == self.room {
            return None;
        }
        self.frames.push(vec![0; MAX_FRAME]);
        self.frames.last_mut().map(Vec::as_mut_slice)
    }

    fn filled(&mut self, len: usize) {
        self.frames.last_mut().expect("lent").truncate(len);
    }
}

#[test]
fn a_burst_is_the_frames_one_by_one_in_one_call() {
    let bursts = |max: usize, room: usize| {
        let mut n = pair();
        pump(&mut n, 0);
        for i in 0..8 {
            let verb = Verb::FetchAdd {
                target: R,
                offset: 8 * i,
                add: 1,
            };
            n[0].submit(0, VerbId(u64::from(i)), &verb).unwrap();
        }
        let mut out = Burst {
            frames: Vec::new(),
            room,
        };
        let sent = n[0].poll_transmit_burst(0, 5, max, &mut out);
        // A buffer lent and not filled is no frame.
        if out.frames.last().is_some_and(|f| f.len() == MAX_FRAME) {
            out.frames.pop();
        }
        assert_eq!(sent, out.frames.len());
        (n, out.frames)
    };
    // One by one, the reference.
    let (mut reference, _) = bursts(0, 0);
    let mut buf = [0u8; MAX_FRAME];
    let mut one_by_one = Vec::new();
    while let Some(len) = reference[0].poll_transmit(0, 5, &mut buf) {
        one_by_one.push(buf[..len].to_vec());
    }
    assert_eq!(one_by_one.len(), 8, "a REQUEST per verb, one per slot");
    let (_, all) = bursts(64, 64);
    assert_eq!(all, one_by_one, "the same frames, in the same order");
    let (_, three) = bursts(3, 64);
    assert_eq!(three, one_by_one[..3], "at most max_datagrams");
    let (mut rest, two) = bursts(64, 2);
    assert_eq!(two, one_by_one[..2], "at most the buffers lent");
    let (_, zero) = bursts(0, 64);
    assert!(zero.is_empty());
    // What did not fit goes next, in order.
    let mut more = Burst {
        frames: Vec::new(),
        room: 64,
    };
    rest[0].poll_transmit_burst(0, 5, 64, &mut more);
    more.frames.pop();
    assert_eq!(more.frames, one_by_one[2..]);
}
