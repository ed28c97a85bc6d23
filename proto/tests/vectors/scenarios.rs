//! Every vector: one function each, named by the rows of the receiver
//! table in `docs/PROTOCOL.md` it exercises. Each asserts what it is there
//! to show, so a vector that stopped showing it fails here, not silently.

use oae_proto::fabric::envelope;
use oae_proto::fabric::routes::Heard;
use oae_proto::verb::{Block, MAX_MCAS_WORDS, McasWord, Refusal, Verb};
use oae_proto::wire::{self, Knowledge, Malformed, SLICE, Transition};
use oae_proto::{Member, RegionRef, View};

use super::iut::Setup;
use super::script::{PEER_ID, Script, SlotFrame};
use super::text::{READ_ONLY, REGION};

pub fn all() -> Vec<(String, String)> {
    [
        bring_up_as_alice,
        bring_up_as_bob,
        hello_checks,
        hello_backoff,
        peer_restart_presumes_commit,
        malformed_frames,
        class_above_max,
        after_bring_up_checks,
        tick_and_tock,
        every_verb_as_target,
        refusals,
        duplicates_get_the_latest_answer,
        sequence_numbers,
        violations_are_dropped,
        reversal,
        reverse_before_request,
        slot_frame_checks,
        third_hello_lost,
        initiator_commit,
        initiator_carries_commit,
        initiator_mismatch_reverses,
        initiator_refused,
        initiator_loss_by_order,
        initiator_answer_checks,
        send_as_target,
        send_as_initiator,
        idle_probes,
        advert_class,
        reverse_carries_commit,
        words_locked,
        malformed_checking_order,
        resync_hellos,
        advert_pages,
        handshake_on_a_keyless_link,
    ]
    .into_iter()
    .map(|make| make().finish())
    .collect()
}

const FAA: Verb = Verb::FetchAdd {
    target: REGION,
    offset: 0,
    add: 5,
};

fn cas(offset: u32, expected: u64, new: u64) -> Verb {
    Verb::CompareAndSwap {
        target: REGION,
        offset,
        expected,
        new,
    }
}

fn on(target: RegionRef, offset: u32) -> Verb {
    Verb::FetchAdd {
        target,
        offset,
        add: 1,
    }
}

fn bring_up_as_alice() -> Script {
    let mut s = Script::new(
        "01-bring-up-alice",
        "bring-up in three HELLOs; the IUT has the smaller epoch and is Alice",
        "B1 B2 R7 R8",
        Setup::DEFAULT,
        7,
    );
    s.note("the IUT's first HELLO, level 0, naming nobody");
    s.drain();
    s.note("the peer knows the IUT: level 1, epochs (7, 1)");
    s.hello(Knowledge::KnowYou, true);
    s.note("the IUT is up and says so at level 2");
    s.drain();
    s
}

fn bring_up_as_bob() -> Script {
    let mut s = Script::new(
        "02-bring-up-bob",
        "bring-up started by the peer; the IUT has the larger epoch and is Bob",
        "B1 B2 R7 R8 R9",
        Setup {
            epoch: 9,
            ..Setup::DEFAULT
        },
        3,
    );
    s.drain();
    s.note("the peer's HELLO at level 0 does not name the IUT: it is answered at level 1");
    s.hello(Knowledge::Nothing, false);
    s.drain();
    s.note("level 2 naming the IUT: up, and nothing to answer");
    s.hello(Knowledge::KnowYouKnowMe, true);
    s.drain();
    s.note("a TICK from the peer (Alice) is answered: the link is up");
    let tick = s.context(Transition::Tick, 0, 1);
    let tick = s.frame_bytes(tick, |p| p[..8].copy_from_slice(&80_000u64.to_be_bytes()));
    s.recv(&tick);
    s.drain();
    s
}

fn hello_checks() -> Script {
    let mut s = Script::new(
        "03-hello-checks",
        "HELLOs that are dropped: wrong class, bad payload, older epoch, wrong role",
        "R3 R4 R5 R6",
        Setup::DEFAULT,
        7,
    );
    s.up();
    let good = s.hello_bytes(Knowledge::KnowYouKnowMe, true);
    s.note("class 1 (128 bytes)");
    let mut big = vec![0u8; 128];
    big[..60].copy_from_slice(&good[..60]);
    big[0] |= 1;
    wire::seal(&mut big);
    s.recv(&big);
    s.note("0 slots offered");
    let mut bad = good.clone();
    bad[wire::HEADER_LEN + 8..wire::HEADER_LEN + 10].fill(0);
    wire::seal(&mut bad);
    s.recv(&bad);
    assert_eq!(s.count("malformed.inconsistent"), 1);
    assert_eq!(s.count("malformed.bad_payload"), 1);
    s.note("an older epoch of the peer");
    s.peer_epoch = 6;
    s.hello(Knowledge::Nothing, false);
    s.peer_epoch = 7;
    assert_eq!(s.count("stale_epoch"), 1);
    s.note("naming the IUT, with the IUT's own role (Alice)");
    let mut wrong_role = good;
    wrong_role[1] &= !0x04;
    wire::seal(&mut wrong_role);
    s.recv(&wrong_role);
    assert_eq!(s.count("malformed.inconsistent"), 2);
    s.drain();
    s
}

fn hello_backoff() -> Script {
    let mut s = Script::new(
        "04-hello-backoff",
        "an absent peer: HELLO every hello_interval for unreachable_after_rounds, then \
         ever less often, at most 1 s apart; the peer's own HELLO is answered at once",
        "B3",
        Setup::DEFAULT,
        7,
    );
    s.note("the first HELLO, at start, is the HELLO timer's first (B3)");
    assert_eq!(s.drain().len(), 1);
    let mut now = 0;
    let mut wait = 1_000_000;
    for n in 2..=21 {
        now += wait;
        s.at(now - 1);
        assert!(s.drain().is_empty(), "HELLO {n} early");
        s.at(now);
        assert_eq!(s.drain().len(), 1, "HELLO {n}");
        if n > 8 {
            // After unreachable_after_rounds (8), each waits twice as
            // long as the one before.
            wait = (wait * 2).min(1_000_000_000);
        }
    }
    s.note("the peer comes: answered at once");
    s.hello(Knowledge::Nothing, false);
    assert_eq!(s.drain().len(), 1);
    s
}

fn peer_restart_presumes_commit() -> Script {
    let mut s = Script::new(
        "05-peer-restart",
        "a HELLO from a new incarnation: the old one's tentative transfer is committed \
         (presumed), both ends number their frames from 1 again",
        "R7 B4",
        Setup::DEFAULT,
        7,
    );
    s.up();
    s.request(0, 1, false, &FAA, &[]);
    s.drain();
    s.peer_restarts(8);
    s.hello(Knowledge::Nothing, false);
    s.drain();
    assert_eq!(s.count("presumed_commits"), 1);
    s.count("peer_restarts");
    s.memory(0, 8);
    s.hello(Knowledge::KnowYouKnowMe, true);
    s.note("the new incarnation's first REQUEST on slot 0 has sequence 1 again");
    s.request(0, 1, false, &FAA, &[]);
    s.drain();
    s.memory(0, 8);
    s
}

fn malformed_frames() -> Script {
    let mut s = Script::new(
        "06-malformed",
        "one frame per malformed reason, each counted and dropped without an answer",
        "R1",
        Setup::DEFAULT,
        7,
    );
    s.up();
    let tick_ctx = s.context(Transition::Tick, 0, 9);
    let tick = s.frame_bytes(tick_ctx, |_| {});
    let resealed = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut f = tick.clone();
        edit(&mut f);
        wire::seal(&mut f);
        f
    };
    let cases: [(Malformed, &str, Vec<u8>); 10] = [
        (Malformed::Truncated, "40 bytes", tick[..40].to_vec()),
        (Malformed::WrongLength, "class 0 with 72 bytes", {
            let mut f = tick.clone();
            f.extend([0; 8]);
            f
        }),
        (
            Malformed::UnknownVersion,
            "version 1",
            resealed(&|f| f[0] = 0x10),
        ),
        (Malformed::BadClass, "class 5", resealed(&|f| f[0] = 0x25)),
        (Malformed::BadCrc, "one bit flipped", {
            let mut f = tick.clone();
            f[30] ^= 1;
            f
        }),
        (
            Malformed::UnknownTransition,
            "state 2 code 9",
            resealed(&|f| {
                f[2] = 2;
                f[3] = 9
            }),
        ),
        (
            Malformed::WrongDirection,
            "REVERSE without the reverse bit",
            resealed(&|f| {
                f[2] = 2;
                f[3] = 6
            }),
        ),
        (
            Malformed::ReservedBits,
            "liveness bit 3",
            resealed(&|f| f[1] |= 0x08),
        ),
        (
            Malformed::Inconsistent,
            "sender epoch 0",
            resealed(&|f| f[8..12].fill(0)),
        ),
        (
            Malformed::BadPayload,
            "a TICK with bytes after its round length",
            resealed(&|f| f[wire::HEADER_LEN + 8] = 1),
        ),
    ];
    for (reason, what, bytes) in cases {
        s.note(what);
        s.recv(&bytes);
        assert_eq!(s.count(&format!("malformed.{}", reason.name())), 1);
    }
    s.drain();
    s
}

fn class_above_max() -> Script {
    let mut s = Script::new(
        "07-class-above-max",
        "a frame of a class above the receiver's max_class is malformed (bad_class)",
        "R2",
        Setup {
            max_class: 1,
            ..Setup::DEFAULT
        },
        7,
    );
    s.up();
    let write = Verb::Write {
        target: REGION,
        offset: 0,
        data: Block::new(&[7; 48]).unwrap(),
    };
    // A 48-byte WRITE needs class 1 (128 bytes); forced to class 2 here.
    let bytes = s.slot_bytes(
        SlotFrame {
            transition: Transition::Request,
            slot: 0,
            seq: 1,
            previous_committed: false,
            class: 2,
        },
        |p| oae_proto::verb::encode_request(&write, &[], p),
    );
    s.recv(&bytes);
    assert_eq!(s.count("malformed.bad_class"), 1);
    s.drain();
    s
}

fn after_bring_up_checks() -> Script {
    let mut s = Script::new(
        "08-after-bring-up",
        "frames after bring-up: other epochs are stale; level, role and class must be as agreed",
        "R10 R11",
        Setup::DEFAULT,
        7,
    );
    s.up();
    s.note("a TICK naming another incarnation of the IUT");
    let tick = s.context(Transition::Tick, 0, 1);
    let mut other = s.frame_bytes(tick, |_| {});
    other[15] ^= 0x02;
    wire::seal(&mut other);
    s.recv(&other);
    assert_eq!(s.count("stale_epoch"), 1);
    for (what, edit) in [
        (
            "level 1",
            (|f: &mut Vec<u8>| f[1] = (f[1] & !3) | 1) as fn(&mut Vec<u8>),
        ),
        ("the IUT's own role", |f| f[1] &= !0x04),
    ] {
        s.note(what);
        let tick = s.context(Transition::Tick, 0, 1);
        let mut f = s.frame_bytes(tick, |_| {});
        edit(&mut f);
        wire::seal(&mut f);
        s.recv(&f);
    }
    s.note("a COMMIT of class 1");
    let commit = s.slot_bytes(
        SlotFrame {
            transition: Transition::Commit,
            slot: 0,
            seq: 1,
            previous_committed: false,
            class: 1,
        },
        |_| {},
    );
    s.recv(&commit);
    assert_eq!(s.count("malformed.inconsistent"), 3);
    s.note("none of them was answered, and none counts as heard from the peer");
    s.drain();
    s
}

fn tick_and_tock() -> Script {
    let mut s = Script::new(
        "09-tick-tock",
        "a TICK is answered by a TOCK reflecting it; a TOCK that answers nothing is stale",
        "R13 R14 R15 R16",
        Setup::DEFAULT,
        7,
    );
    s.up();
    let ctx = s.context(Transition::Tick, 0, 5);
    let tick = s.frame_bytes(ctx, |p| p[..8].copy_from_slice(&80_000u64.to_be_bytes()));
    s.recv(&tick);
    s.drain();
    s.note("a TOCK when no TICK of the IUT's is outstanding");
    let ctx = s.context(Transition::Tock, 0, 5);
    let raw_context: [u8; SLICE] = tick[..SLICE].try_into().unwrap();
    let tock = s.frame_bytes(ctx, |p| p[..SLICE].copy_from_slice(&raw_context));
    s.recv(&tock);
    assert_eq!(s.count("stale_slot_frames"), 1);
    s.note("a TOCK with bytes after its reflection");
    let ctx = s.context(Transition::Tock, 0, 5);
    let tock = s.frame_bytes(ctx, |p| p[SLICE] = 1);
    s.recv(&tock);
    assert_eq!(s.count("malformed.bad_payload"), 1);
    s.drain();
    s
}

fn every_verb_as_target() -> Script {
    let mut s = Script::new(
        "10-every-verb",
        "the seven verbs applied by the IUT as target on slot 0, each commit carried by the \
         next REQUEST, the last one by a COMMIT",
        "R20 R23 V1 V2",
        Setup::DEFAULT,
        7,
    );
    s.up();
    let mut words = [McasWord::default(); MAX_MCAS_WORDS];
    words[0] = McasWord {
        offset: 16,
        expected: 9,
        new: 10,
    };
    words[1] = McasWord {
        offset: 24,
        expected: 0,
        new: 11,
    };
    let verbs = [
        Verb::Write {
            target: REGION,
            offset: 0,
            data: Block::new(&[1, 2, 3, 4, 5, 6, 7, 8, 9]).unwrap(),
        },
        Verb::Read {
            target: REGION,
            offset: 0,
            local_region: 1,
            local_offset: 0,
            len: 9,
        },
        cas(16, 0, 9),
        Verb::FetchAdd {
            target: REGION,
            offset: 8,
            add: 0x100,
        },
        Verb::Swap {
            target: REGION,
            offset: 32,
            new: 0xAB,
        },
        Verb::MultiWordCommit {
            target: REGION,
            count: 2,
            words,
        },
        Verb::BilateralSwap {
            target: REGION,
            offset: 40,
            local_region: 1,
            local_offset: 0,
            len: 16,
        },
    ];
    for (i, verb) in verbs.iter().enumerate() {
        s.note(&format!("{verb:?}"));
        s.request(0, i as u16 + 1, i > 0, verb, &[0xEE; 16]);
        s.drain();
    }
    let last = verbs.len() as u16;
    s.decide(Transition::Commit, 0, last);
    s.drain();
    assert_eq!(s.count("transfers_committed"), u64::from(last));
    s.memory(0, 56);
    s
}

fn refusals() -> Script {
    let mut s = Script::new(
        "11-refusals",
        "every refusal reason: REFUSE with the reason, nothing changed; a refused slot takes \
         its next REQUEST without the previous-committed bit",
        "R20 R31 V3",
        Setup {
            credits: 2,
            ..Setup::DEFAULT
        },
        7,
    );
    s.up();
    let cases = [
        (Refusal::UnknownRegion, on(RegionRef { id: 9, key: 42 }, 0)),
        (Refusal::BadKey, on(RegionRef { id: 1, key: 43 }, 0)),
        (Refusal::OutOfBounds, on(REGION, 64)),
        (Refusal::Forbidden, on(READ_ONLY, 0)),
        (Refusal::Misaligned, on(REGION, 4)),
    ];
    let mut seq = 0;
    for (why, verb) in cases {
        seq += 1;
        s.note(&format!("{why:?}"));
        s.request(0, seq, false, &verb, &[]);
        let answer = s.drain();
        assert_eq!(answer[0][wire::HEADER_LEN + SLICE], why as u8);
    }
    s.note("Malformed: an opcode 0 request");
    seq += 1;
    let bytes = s.slot_bytes(
        SlotFrame {
            transition: Transition::Request,
            slot: 0,
            seq,
            previous_committed: false,
            class: 0,
        },
        |p| p[0] = 0,
    );
    s.recv(&bytes);
    s.drain();
    s.note("Locked: slot 1 holds word 0 tentatively, slot 2 asks for it");
    s.request(1, 1, false, &FAA, &[]);
    s.drain();
    s.request(2, 1, false, &FAA, &[]);
    s.drain();
    s.note("NoCredit: slots 1 and 3 hold the 2 credits offered; slot 0 asks for a third");
    s.request(3, 1, false, &on(REGION, 8), &[]);
    s.drain();
    s.request(0, seq + 1, false, &on(REGION, 16), &[]);
    s.drain();
    assert_eq!(s.count("overruns"), 1);
    assert_eq!(s.count("refusals_sent"), 8);
    s.memory(0, 24);
    s
}

fn duplicates_get_the_latest_answer() -> Script {
    let mut s = Script::new(
        "12-duplicates",
        "a repeated REQUEST gets the slot's latest answer: the ECHO while tentative, the \
         COMMIT_ACK once committed; applied once",
        "R22 R24",
        Setup::DEFAULT,
        7,
    );
    s.up();
    s.request(0, 1, false, &FAA, &[]);
    s.drain();
    s.request(0, 1, false, &FAA, &[]);
    s.drain();
    s.decide(Transition::Commit, 0, 1);
    s.drain();
    s.note("after the commit: the same REQUEST, then the same COMMIT");
    s.request(0, 1, false, &FAA, &[]);
    s.drain();
    s.decide(Transition::Commit, 0, 1);
    s.drain();
    assert_eq!(s.count("duplicate_requests"), 2);
    assert_eq!(s.count("transfers_applied"), 1);
    s.memory(0, 8);
    s
}

fn sequence_numbers() -> Script {
    let mut s = Script::new(
        "13-sequence-numbers",
        "a slot's first REQUEST has sequence 1; 0 on a fresh slot, or any number but the \
         last and the next, is stale and dropped",
        "S1 R19 R30",
        Setup::DEFAULT,
        7,
    );
    s.up();
    s.note("sequence 0 on a fresh slot");
    s.request(0, 0, false, &FAA, &[]);
    s.note("sequence 2 on a fresh slot");
    s.request(0, 2, false, &FAA, &[]);
    assert_eq!(s.count("stale_slot_frames"), 2);
    s.drain();
    s.request(0, 1, false, &FAA, &[]);
    s.drain();
    s.note("sequence 3, two ahead, carrying the commit of 1");
    s.request(0, 3, true, &FAA, &[]);
    s.note("a COMMIT of sequence 0, behind");
    s.decide(Transition::Commit, 0, 0);
    assert_eq!(s.count("stale_slot_frames"), 4);
    s.drain();
    s.memory(0, 8);
    s
}

fn violations_are_dropped() -> Script {
    let mut s = Script::new(
        "14-violations",
        "frames a correct initiator never sends are dropped and counted, not answered: a new \
         REQUEST while the last is tentative without committing it; a commit of a refused \
         transfer",
        "R21 R25",
        Setup::DEFAULT,
        7,
    );
    s.up();
    s.request(0, 1, false, &FAA, &[]);
    s.drain();
    s.note("REQUEST 2 without the previous-committed bit while 1 is tentative");
    s.request(0, 2, false, &FAA, &[]);
    s.drain();
    s.note("slot 1: refused (bad key), then COMMIT of it, then REQUEST 2 claiming to commit it");
    s.request(1, 1, false, &on(RegionRef { id: 1, key: 1 }, 8), &[]);
    s.drain();
    s.decide(Transition::Commit, 1, 1);
    s.request(1, 2, true, &on(REGION, 8), &[]);
    s.drain();
    assert_eq!(s.count("protocol_violations"), 3);
    s.memory(0, 16);
    s
}

fn reversal() -> Script {
    let mut s = Script::new(
        "15-reversal",
        "REVERSE undoes a tentative transfer; a repeated REVERSE and a late copy of the \
         REQUEST get the REVERSE_ACK again; a COMMIT of it is a violation",
        "R26 R27 R22 R25",
        Setup::DEFAULT,
        7,
    );
    s.up();
    s.request(0, 1, false, &FAA, &[]);
    s.drain();
    s.memory(0, 8);
    s.decide(Transition::Reverse, 0, 1);
    s.drain();
    s.memory(0, 8);
    s.decide(Transition::Reverse, 0, 1);
    s.drain();
    s.request(0, 1, false, &FAA, &[]);
    s.drain();
    s.decide(Transition::Commit, 0, 1);
    s.drain();
    assert_eq!(s.count("transfers_reversed"), 1);
    assert_eq!(s.count("protocol_violations"), 1);
    s.memory(0, 8);
    s
}

fn reverse_before_request() -> Script {
    let mut s = Script::new(
        "16-reverse-unseen",
        "REVERSE of the next sequence (its REQUEST lost): acknowledged and remembered, so a \
         late REQUEST is never applied; a REVERSE of a committed transfer is a violation",
        "R29 R22 R28",
        Setup::DEFAULT,
        7,
    );
    s.up();
    s.decide(Transition::Reverse, 0, 1);
    s.drain();
    s.request(0, 1, false, &FAA, &[]);
    s.drain();
    s.memory(0, 8);
    s.note("slot 1: applied and committed, then reversed");
    s.request(1, 1, false, &FAA, &[]);
    s.drain();
    s.decide(Transition::Commit, 1, 1);
    s.drain();
    s.decide(Transition::Reverse, 1, 1);
    s.drain();
    assert_eq!(s.count("protocol_violations"), 1);
    s.memory(0, 8);
    s
}

fn slot_frame_checks() -> Script {
    let mut s = Script::new(
        "17-slot-frame-checks",
        "a slot beyond the receiver's count is inconsistent; COMMIT and REVERSE carry a zero \
         payload",
        "R17 R18",
        Setup::DEFAULT,
        7,
    );
    s.up();
    s.request(4, 1, false, &FAA, &[]);
    assert_eq!(s.count("malformed.inconsistent"), 1);
    s.request(0, 1, false, &FAA, &[]);
    s.drain();
    let commit = s.slot_bytes(
        SlotFrame {
            transition: Transition::Commit,
            slot: 0,
            seq: 1,
            previous_committed: false,
            class: 0,
        },
        |p| p[0] = 1,
    );
    s.recv(&commit);
    assert_eq!(s.count("malformed.bad_payload"), 1);
    s.drain();
    s
}

fn third_hello_lost() -> Script {
    let mut s = Script::new(
        "18-third-hello-lost",
        "the peer's third HELLO is lost: its first other frame brings the IUT up; a jump in \
         the peer's order numbers is a gap the IUT tells of",
        "B1 R12 O2",
        Setup {
            epoch: 9,
            ..Setup::DEFAULT
        },
        3,
    );
    s.drain();
    s.hello(Knowledge::Nothing, false);
    s.drain();
    s.note("no HELLO at level 2: a TICK, which only an end that is up sends");
    let tick = s.context(Transition::Tick, 0, 1);
    let tick = s.frame_bytes(tick, |p| p[..8].copy_from_slice(&80_000u64.to_be_bytes()));
    s.recv(&tick);
    s.drain();
    s.note("the peer's order number skips one: a frame of its was lost");
    let skipped = s.context(Transition::Tick, 0, 2);
    let _lost = s.frame_bytes(skipped, |_| {});
    let tick = s.context(Transition::Tick, 0, 3);
    let tick = s.frame_bytes(tick, |p| p[..8].copy_from_slice(&80_000u64.to_be_bytes()));
    s.recv(&tick);
    assert_eq!(s.count("gaps_seen"), 1);
    s.drain();
    s
}

/// The IUT's REQUEST for a submitted verb, taken off the wire.
fn submitted(s: &mut Script, verb: Verb) -> Vec<u8> {
    s.submit(verb);
    let mut out = s.drain();
    assert_eq!(out.len(), 1);
    out.remove(0)
}

/// Writes an echo's result after its reflection.
fn result(bytes: &[u8]) -> impl FnOnce(&mut [u8]) {
    let bytes = bytes.to_vec();
    move |p: &mut [u8]| p[..bytes.len()].copy_from_slice(&bytes)
}

fn initiator_commit() -> Script {
    let mut s = Script::new(
        "20-initiator-commit",
        "the IUT as initiator: REQUEST, the peer's ECHO completes the verb, COMMIT, COMMIT_ACK",
        "I1 R35 R38",
        Setup::DEFAULT,
        7,
    );
    s.up();
    let request = submitted(&mut s, cas(0, 0, 5));
    s.answer(&request, Transition::Echo, result(&0u64.to_be_bytes()));
    s.done();
    let commit = s.drain();
    s.answer(&commit[0], Transition::CommitAck, |_| {});
    s.drain();
    s.count("commits_sent");
    s
}

/// The IUT with one slot: two FETCH_ADDs, the first echoed; the second's
/// REQUEST, which carries the first's commit (previous-committed bit).
fn second_request_carries_commit(s: &mut Script) -> Vec<u8> {
    s.up();
    s.submit(FAA);
    s.submit(FAA);
    let first = s.drain().remove(0);
    s.answer(&first, Transition::Echo, result(&0u64.to_be_bytes()));
    s.done();
    let second = s.drain().remove(0);
    assert_ne!(second[3] & 0x40, 0, "the previous-committed bit");
    second
}

fn initiator_carries_commit() -> Script {
    let mut s = Script::new(
        "21-initiator-carries-commit",
        "with one slot, the next REQUEST carries the commit (previous-committed bit)",
        "I2 R35",
        Setup {
            slots: 1,
            credits: 1,
            ..Setup::DEFAULT
        },
        7,
    );
    let second = second_request_carries_commit(&mut s);
    s.answer(&second, Transition::Echo, result(&5u64.to_be_bytes()));
    s.done();
    let commit = s.drain().remove(0);
    s.answer(&commit, Transition::CommitAck, |_| {});
    s.drain();
    s
}

fn initiator_mismatch_reverses() -> Script {
    let mut s = Script::new(
        "22-initiator-mismatch",
        "an ECHO whose reflection differs is a mismatch: REVERSE, then the verb again on a \
         fresh sequence number",
        "R36 R39 I3",
        Setup::DEFAULT,
        7,
    );
    s.up();
    let request = submitted(&mut s, FAA);
    let mut echo = s.answer_bytes(&request, Transition::Echo, |_| {});
    echo[wire::HEADER_LEN + 2] ^= 0x40;
    wire::seal(&mut echo);
    s.recv(&echo);
    let reverse = s.drain().remove(0);
    s.answer(&reverse, Transition::ReverseAck, |_| {});
    let again = s.drain().remove(0);
    s.answer(&again, Transition::Echo, result(&0u64.to_be_bytes()));
    s.done();
    s.drain();
    s.count("echo_mismatches");
    s.count("retries");
    s
}

fn initiator_refused() -> Script {
    let mut s = Script::new(
        "23-initiator-refused",
        "a REFUSE for a lasting reason completes the verb with it; a transient one (locked) \
         is retried",
        "R37",
        Setup::DEFAULT,
        7,
    );
    s.up();
    let request = submitted(&mut s, FAA);
    s.answer(&request, Transition::Refuse, |p| {
        p[0] = Refusal::BadKey as u8
    });
    s.done();
    s.drain();
    let request = submitted(&mut s, FAA);
    s.answer(&request, Transition::Refuse, |p| {
        p[0] = Refusal::Locked as u8
    });
    s.note("on an ordered link the first LOCKED goes again once owed commits are out");
    let again = s.drain().remove(0);
    s.answer(&again, Transition::Echo, result(&0u64.to_be_bytes()));
    s.done();
    s.drain();
    s
}

fn initiator_loss_by_order() -> Script {
    let mut s = Script::new(
        "24-initiator-loss-by-order",
        "a frame of the peer's whose `seen` covers a REQUEST with no answer proves it lost: \
         the transfer is reversed at once, no timer",
        "O1 R40",
        Setup::DEFAULT,
        7,
    );
    s.up();
    s.submit(FAA);
    s.submit(cas(8, 0, 1));
    let sent = s.drain();
    assert_eq!(sent.len(), 2);
    s.note("the first REQUEST is lost; the ECHO of the second says the peer saw both");
    s.answer(&sent[1], Transition::Echo, result(&0u64.to_be_bytes()));
    s.done();
    let out = s.drain();
    assert!(out.iter().any(|f| f[2] == 2 && f[3] == 0x86), "a REVERSE");
    assert_eq!(s.count("lost_by_order"), 1);
    s
}

fn initiator_answer_checks() -> Script {
    let mut s = Script::new(
        "25-initiator-answer-checks",
        "answers the IUT is not waiting for are stale; an acknowledgement with bytes after \
         its reflection is not one (the decision stays owed)",
        "R32 R33 R34 R38",
        Setup::DEFAULT,
        7,
    );
    s.up();
    let request = submitted(&mut s, FAA);
    s.answer(&request, Transition::Echo, result(&0u64.to_be_bytes()));
    s.done();
    let commit = s.drain().remove(0);
    s.note("the same ECHO again: nothing awaits it");
    s.answer(&request, Transition::Echo, result(&0u64.to_be_bytes()));
    assert_eq!(s.count("stale_slot_frames"), 1);
    s.note("a COMMIT_ACK with a byte after the reflection");
    s.answer(&commit, Transition::CommitAck, |p| p[0] = 1);
    assert_eq!(s.count("malformed.bad_payload"), 1);
    s.note("an ECHO on slot 9, beyond the 4 slots in use");
    let ctx = s.context(Transition::Echo, 0, wire::Context::slot_field(9, 1));
    let echo = s.frame_bytes(ctx, |_| {});
    s.recv(&echo);
    assert_eq!(s.count("malformed.inconsistent"), 1);
    s.note("a COMMIT_ACK reflecting the REQUEST instead of the COMMIT");
    s.answer(&request, Transition::CommitAck, |_| {});
    assert_eq!(s.count("echo_mismatches"), 1);
    s.answer(&commit, Transition::CommitAck, |_| {});
    s.drain();
    s
}

fn send(data: &[u8], imm: Option<u32>) -> Verb {
    Verb::Send {
        imm,
        data: Block::new(data).unwrap(),
    }
}

fn send_as_target() -> Script {
    let mut s = Script::new(
        "26-send-as-target",
        "SEND: refused at once with no receive posted; delivered tentatively into the receive \
         posted first; a REVERSE restores its bytes and posts it again; committed, it is \
         reported with its length and immediate data; a message longer than its receive is \
         refused",
        "R41 R42 R43 V3 V4",
        Setup::DEFAULT,
        7,
    );
    s.up();
    s.note("no receive posted: REFUSE no receive (9)");
    s.request(0, 1, false, &send(b"hello", Some(5)), &[]);
    let answer = s.drain();
    assert_eq!(
        answer[0][wire::HEADER_LEN + SLICE],
        Refusal::NoReceive as u8
    );
    s.receive(1, 0, 8);
    s.receive(2, 8, 8);
    s.note("the message lands in receive 1, tentatively");
    s.request(0, 2, false, &send(b"hello", Some(5)), &[]);
    s.drain();
    assert_eq!(s.memory(0, 8), b"hello\0\0\0");
    s.note("reversed: the receive's bytes come back and it is posted again");
    s.decide(Transition::Reverse, 0, 2);
    s.drain();
    assert_eq!(s.memory(0, 8), [0; 8]);
    s.request(0, 3, false, &send(b"hello", Some(5)), &[]);
    s.drain();
    s.decide(Transition::Commit, 0, 3);
    s.drain();
    assert_eq!(s.received(), (1, 5, Some(5)));
    s.memory(0, 8);
    s.note("nine bytes for the 8-byte receive 2: REFUSE receive too small (10)");
    s.request(0, 4, false, &send(&[7; 9], None), &[]);
    let answer = s.drain();
    assert_eq!(
        answer[0][wire::HEADER_LEN + SLICE],
        Refusal::ReceiveTooSmall as u8
    );
    s.note("an empty message with immediate data fills receive 2");
    s.request(0, 5, false, &send(&[], Some(9)), &[]);
    s.drain();
    s.decide(Transition::Commit, 0, 5);
    s.drain();
    assert_eq!(s.received(), (2, 0, Some(9)));
    assert_eq!(s.count("messages_received"), 2);
    assert_eq!(s.count("refusals_sent"), 2);
    s
}

fn send_as_initiator() -> Script {
    let mut s = Script::new(
        "27-send-as-initiator",
        "the IUT as initiator keeps one SEND in flight: the second goes once the first is \
         decided; a REFUSE no receive fails it at once, with no retry",
        "I5 R37 V4",
        Setup::DEFAULT,
        7,
    );
    s.up();
    s.submit(send(b"one", None));
    s.submit(send(b"two", Some(2)));
    let first = s.drain();
    assert_eq!(first.len(), 1, "one SEND in flight");
    s.answer(&first[0], Transition::Echo, |_| {});
    s.done();
    let second = s.drain().remove(0);
    s.answer(&second, Transition::Refuse, |p| {
        p[0] = Refusal::NoReceive as u8
    });
    s.done();
    s.drain();
    assert_eq!(s.count("retries"), 0);
    s
}

/// The TICK the IUT sent next, when its timer ran, and the time.
fn next_tick(s: &mut Script) -> (u64, Vec<u8>) {
    let mut sent = s.next_timer_frames();
    assert_eq!(sent.len(), 1, "one frame");
    let tick = sent.pop().unwrap();
    assert_eq!((tick[2], tick[3] & 0x1f), (1, 2), "a TICK");
    (s.now(), tick)
}

fn idle_probes() -> Script {
    let mut s = Script::new(
        "28-idle-probes",
        "on an idle link a TICK owed an answer is probed about one RTT later, each unanswered \
         probe doubling the wait; a TOCK for a TICK a newer one superseded is late, not stale",
        "O3 L1 R16",
        Setup::DEFAULT,
        7,
    );
    s.up();
    s.note("the IUT, Alice, ticks at the end of a round in which it sent nothing (L1)");
    let (ticked, round_tick) = next_tick(&mut s);
    s.note("no TOCK: a probe max(srtt + 2 rttvar, 1.25 srtt) later (no sample yet: srtt = initial_rtt)");
    let (probed, probe) = next_tick(&mut s);
    s.note("still no TOCK: the next probe waits twice as long");
    let (probed_again, second_probe) = next_tick(&mut s);
    assert_eq!(
        probed_again - probed,
        2 * (probed - ticked),
        "the wait doubles"
    );
    let order = |f: &[u8]| u32::from_be_bytes(f[16..20].try_into().unwrap());
    s.at(probed_again + 5_000);
    s.note(
        "the first TICK's TOCK comes, late, saying the peer has seen up to that TICK: a \
         round-trip sample, not stale; both probes after it are still unanswered",
    );
    s.peer_seen = order(&round_tick);
    s.answer(&round_tick, Transition::Tock, |_| {});
    assert_eq!(s.count("late_tocks"), 1);
    assert_eq!(s.count("stale_slot_frames"), 0);
    s.note(
        "the sample (380 us) makes Alice's round 4 srtt = 1.52 ms, more than twice the 400 us \
         her last TICK said: she says so at once in a TICK (L1), not a probe",
    );
    let mut sent = s.drain();
    assert_eq!(sent.len(), 1);
    let notice = sent.pop().unwrap();
    assert_eq!((notice[2], notice[3] & 0x1f), (1, 2), "a TICK");
    let advertised = u64::from_be_bytes(notice[24..32].try_into().unwrap());
    assert!(advertised > 2 * 400_000, "round {advertised}");
    let noticed = s.now();
    s.note("the two probes after the first TICK are still unanswered: the next waits four times max(srtt + 2 rttvar, 1.25 srtt), at most a round");
    let (probed_third, third_probe) = next_tick(&mut s);
    assert!(
        probed_third - noticed >= probed_again - probed,
        "no shorter wait"
    );
    s.note("the other TOCKs come at once (a peer that was descheduled catches up)");
    for tick in [&probe, &second_probe, &notice, &third_probe] {
        s.peer_seen = order(tick);
        s.answer(tick, Transition::Tock, |_| {});
    }
    assert_eq!(s.count("late_tocks"), 4);
    assert_eq!(s.count("stale_slot_frames"), 0);
    assert_eq!(s.count("rtt_samples"), 5);
    assert_eq!(s.count("probes_sent"), 3);
    s.note("the notice TICK's sample (1.52 ms) took the round past twice 1.52 ms again: another notice");
    let notices = s.drain();
    assert_eq!(notices.len(), 1);
    s.peer_seen = order(&notices[0]);
    s.answer(&notices[0], Transition::Tock, |_| {});
    s.drain();
    s.note("everything answered: the next TICK is the round's (L1), not a probe");
    let _ = next_tick(&mut s);
    assert_eq!(s.count("probes_sent"), 3);
    s
}

fn advert_class() -> Script {
    let mut s = Script::new(
        "29-advert-class",
        "a node running the fabric advertises when its link comes up and when what it hears \
         changes, each ADVERT in the smallest class that holds its entries",
        "A1",
        Setup {
            fabric: true,
            ..Setup::DEFAULT
        },
        7,
    );
    s.drain();
    s.hello(Knowledge::KnowYou, true);
    s.note("up: the IUT's ADVERT names itself alone: 33 + 14 = 47 bytes, class 1");
    let advert = last_advert(&s.drain());
    assert_eq!(advert.len(), 128, "class 1");
    s.note("the peer's ADVERT: itself at 0 hops and three neighbours of its at 1");
    let members = [PEER_ID, 0x21, 0x22, 0x23];
    let bytes = peer_advert(&mut s, &members, 1, 0);
    s.recv(&bytes);
    s.note("the IUT now names five nodes: 33 + 5 x 14 = 103 bytes, class 2");
    let advert = last_advert(&s.drain());
    assert_eq!(advert.len(), 256, "class 2");
    s
}

/// The last ADVERT among `sent`.
fn last_advert(sent: &[Vec<u8>]) -> Vec<u8> {
    sent.iter()
        .rev()
        .find(|f| f[2] == 3 && f[3] == 1)
        .expect("an ADVERT")
        .clone()
}

/// The page of the peer's ADVERT from node id `first` in class `class`:
/// as many of `members` (the peer at 0 hops, any other node at 1) as it
/// holds, under the view of all of them.
fn peer_advert(s: &mut Script, members: &[u64], class: u8, first: u64) -> Vec<u8> {
    let member = |node| Member { node, epoch: 7 };
    let mut all: Vec<Member> = members.iter().map(|&n| member(n)).collect();
    all.sort();
    let view = View {
        number: 1,
        members: all.clone(),
    };
    let from = all.into_iter().map(|m| m.node).filter(move |&n| n >= first);
    let heard = from.map(move |node| {
        let hops = u8::from(node != PEER_ID);
        Heard {
            member: member(node),
            hops,
            reach: hops,
        }
    });
    let ctx = s.context(Transition::Advert, class, 0);
    s.frame_bytes(ctx, |p| {
        envelope::encode_advert(p, (view.number, view.digest()), first, heard);
    })
}

fn advert_pages() -> Script {
    let mut s = Script::new(
        "34-advert-pages",
        "a vector longer than one frame holds goes in pages, each covering a range of node ids \
         and replacing the receiver's copy over that range",
        "A1",
        Setup {
            fabric: true,
            max_class: 1,
            ..Setup::DEFAULT
        },
        7,
    );
    s.drain();
    s.hello(Knowledge::KnowYou, true);
    s.drain();
    s.note("the peer's ADVERT of six nodes, in two pages of class 1 (at most 4 entries each)");
    let members = [0x05, PEER_ID, 0x21, 0x22, 0x23, 0x24];
    let first = peer_advert(&mut s, &members, 1, 0);
    s.recv(&first);
    let second = peer_advert(&mut s, &members, 1, 0x23);
    s.recv(&second);
    s.note("the IUT names seven (itself, 0x0A, among them): a page of 4 up to 0x21, then 3");
    assert_eq!(last_pages(&s.drain()), [(4, 0, 0x21), (3, 0x22, u64::MAX)]);
    s.note("the peer's first page again, without 0x05: the IUT forgets it, and only it");
    let without = [PEER_ID, 0x21, 0x22, 0x23, 0x24];
    let again = peer_advert(&mut s, &without, 1, 0);
    s.recv(&again);
    assert_eq!(last_pages(&s.drain()), [(4, 0, 0x22), (2, 0x23, u64::MAX)]);
    s
}

/// The entry count and range of the last two ADVERT pages among `sent`.
fn last_pages(sent: &[Vec<u8>]) -> Vec<(u8, u64, u64)> {
    let mut pages: Vec<(u8, u64, u64)> = sent
        .iter()
        .filter(|f| f[2] == 3 && f[3] == 1)
        .map(|f| {
            let p = &f[wire::HEADER_LEN..];
            let at = |i: usize| u64::from_be_bytes(p[i..i + 8].try_into().unwrap());
            (p[16], at(17), at(25))
        })
        .collect();
    pages.drain(..pages.len().saturating_sub(2));
    pages
}

/// The answer the IUT sent last: its transition byte's code and, for a
/// REFUSE, the reason.
fn answer_of(frame: &[u8]) -> (u8, Option<u8>) {
    let code = frame[3] & 0x1f;
    let reason = (code == 5).then(|| frame[wire::HEADER_LEN + SLICE]);
    (code, reason)
}

fn reverse_carries_commit() -> Script {
    let mut s = Script::new(
        "30-reverse-carries-commit",
        "a REQUEST that carried the previous transfer's commit (bit 6) and was lost is \
         reversed with bit 6 too: the REVERSE tells the target the commit it never got",
        "I2 I3 R40",
        Setup {
            slots: 1,
            credits: 1,
            ..Setup::DEFAULT
        },
        7,
    );
    let _second = second_request_carries_commit(&mut s);
    s.note("the second REQUEST is lost: the peer's next frame says it saw it");
    let ctx = s.context(Transition::Tick, 0, 1);
    let tick = s.frame_bytes(ctx, |p| p[..8].copy_from_slice(&80_000u64.to_be_bytes()));
    s.recv(&tick);
    let out = s.drain();
    let reverse = out
        .iter()
        .find(|f| f[2] == 2 && f[3] & 0x1f == 6)
        .expect("a REVERSE")
        .clone();
    assert_ne!(reverse[3] & 0x40, 0, "the REVERSE carries the commit too");
    s.answer(&reverse, Transition::ReverseAck, |_| {});
    s.note("the verb again, on sequence 3, with nothing left to carry");
    let again = s.drain().remove(0);
    assert_eq!(again[3] & 0x40, 0);
    s.answer(&again, Transition::Echo, result(&5u64.to_be_bytes()));
    s.done();
    let commit = s.drain().remove(0);
    s.answer(&commit, Transition::CommitAck, |_| {});
    s.drain();
    assert_eq!(s.count("lost_by_order"), 1);
    s
}

fn words_locked() -> Script {
    let mut s = Script::new(
        "31-words-locked",
        "a tentative transfer locks exactly the 8-byte words its bytes touch: a 3-byte WRITE \
         at offset 5 locks word 0 alone, a 4-byte one at offset 5 words 0 and 1",
        "V2 R20",
        Setup::DEFAULT,
        7,
    );
    s.up();
    let write = |offset: u32, len: usize| Verb::Write {
        target: REGION,
        offset,
        data: Block::new(&[0xAA; 8][..len]).unwrap(),
    };
    s.note("slot 0: a 3-byte WRITE at offset 5, bytes 5-7: word 0, left tentative");
    s.request(0, 1, false, &write(5, 3), &[]);
    assert_eq!(answer_of(&s.drain()[0]), (2, None));
    s.note("slot 1: a CAS of word 1 (offset 8) is not locked");
    s.request(1, 1, false, &cas(8, 0, 1), &[]);
    assert_eq!(answer_of(&s.drain()[0]), (2, None));
    s.note("slot 2: a CAS of word 0 is");
    s.request(2, 1, false, &cas(0, 0, 1), &[]);
    assert_eq!(answer_of(&s.drain()[0]), (5, Some(Refusal::Locked as u8)));
    s.note("both committed; slot 3: a 4-byte WRITE at offset 5, bytes 5-8: words 0 and 1");
    s.decide(Transition::Commit, 0, 1);
    s.decide(Transition::Commit, 1, 1);
    s.drain();
    s.request(3, 1, false, &write(5, 4), &[]);
    assert_eq!(answer_of(&s.drain()[0]), (2, None));
    s.note("slot 0: a CAS of word 1 is now refused `locked`");
    s.request(0, 2, false, &cas(8, 1, 2), &[]);
    assert_eq!(answer_of(&s.drain()[0]), (5, Some(Refusal::Locked as u8)));
    s.decide(Transition::Commit, 3, 1);
    s.drain();
    s.memory(0, 16);
    s
}

fn malformed_checking_order() -> Script {
    let mut s = Script::new(
        "32-malformed-order",
        "frames with two faults each: the first check R1 lists names the reason",
        "R1",
        Setup::DEFAULT,
        7,
    );
    s.up();
    let tick_ctx = s.context(Transition::Tick, 0, 9);
    let tick = s.frame_bytes(tick_ctx, |_| {});
    let edited = |edit: &dyn Fn(&mut Vec<u8>), reseal: bool| {
        let mut f = tick.clone();
        edit(&mut f);
        if reseal {
            wire::seal(&mut f);
        }
        f
    };
    let cases: [(Malformed, &str, Vec<u8>); 7] = [
        (
            Malformed::Truncated,
            "version 1 in 40 bytes: the 64-byte minimum comes first",
            edited(&|f| f[0] = 0x10, true)[..40].to_vec(),
        ),
        (
            Malformed::BadClass,
            "class 9 and level 3: the class (above 7) before the bits",
            edited(
                &|f| {
                    f[0] = 0x29;
                    f[1] |= 3
                },
                true,
            ),
        ),
        (
            Malformed::ReservedBits,
            "a reserved liveness bit and a bad CRC: the header before the CRC",
            edited(&|f| f[1] |= 0x08, false),
        ),
        (
            Malformed::UnknownTransition,
            "state 4 and the direction bit: the transition before its direction",
            edited(
                &|f| {
                    f[2] = 4;
                    f[3] |= 0x80
                },
                true,
            ),
        ),
        (
            Malformed::ReservedBits,
            "class 5 and bit 5 of byte 3: the bits (check 7) before a class the codec knows but \
             no frame may use (check 8)",
            edited(
                &|f| {
                    f[0] = 0x25;
                    f[3] |= 0x20
                },
                true,
            ),
        ),
        (
            Malformed::BadClass,
            "class 5 in 64 bytes: the class before the length",
            edited(&|f| f[0] = 0x25, true),
        ),
        (
            Malformed::BadCrc,
            "sender epoch 0 and a bad CRC: the CRC before the order slice and epochs",
            edited(&|f| f[8..12].fill(0), false),
        ),
    ];
    for (reason, what, bytes) in cases {
        s.note(what);
        let before = s.count(&format!("malformed.{}", reason.name()));
        s.recv(&bytes);
        assert_eq!(
            s.count(&format!("malformed.{}", reason.name())),
            before + 1,
            "{what}"
        );
    }
    s.drain();
    s
}

fn resync_hellos() -> Script {
    let mut s = Script::new(
        "33-resync-hellos",
        "a peer silent for unreachable_after_rounds rounds is declared unreachable; bring-up \
         starts again with the HELLO timer due, so its HELLOs go as at start: 9 at \
         hello_interval, then ever less often",
        "L2 B3",
        Setup::DEFAULT,
        7,
    );
    s.up();
    s.note("the peer falls silent: TICKs and probes go unanswered until the link is declared unreachable");
    let hello = loop {
        let sent = s.next_timer_frames();
        if let Some(h) = sent.iter().find(|f| f[2] == 1 && f[3] & 0x1f == 1) {
            break h.clone();
        }
    };
    assert_eq!(s.count("unreachable_declared"), 1);
    assert_eq!(
        hello[1] & 3,
        1,
        "a HELLO at level 1: the peer is known, not up"
    );
    s.note("that HELLO was the timer's first; eight more 1 ms apart, then the waits double");
    let start = s.now();
    let mut at = Vec::new();
    while at.len() < 10 {
        let sent = s.next_timer_frames();
        assert!(
            sent.iter().all(|f| f[2] == 1 && f[3] & 0x1f == 1),
            "HELLOs only"
        );
        at.push(s.now() - start);
    }
    assert_eq!(
        at,
        [1, 2, 3, 4, 5, 6, 7, 8, 10, 14].map(|ms| ms * 1_000_000),
        "HELLO times after the first"
    );
    s
}

fn handshake_on_a_keyless_link() -> Script {
    let mut s = Script::new(
        "35-handshake-on-a-keyless-link",
        "a HANDSHAKE reaching a link that does not agree its keys by identity is dropped as \
         inconsistent, and the link carries on",
        "R44",
        Setup::DEFAULT,
        7,
    );
    s.up();
    s.note("message 1 of a key agreement (class 2, order 0): this link agrees no keys");
    let mut buf = [0u8; wire::MAX_FRAME];
    let len = oae_proto::handshake::write_frame(&mut buf, 1, (s.peer_epoch, 0), &[0x5a; 44]);
    s.recv(&buf[..len]);
    assert_eq!(s.count("malformed.inconsistent"), 1);
    s.drain();
    s
}
