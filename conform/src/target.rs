//! Clauses on the IUT's target side: the tester initiates, the IUT
//! applies, answers, refuses, or must stay silent.

use crate::ctx::{Ctx, Outcome, SILENCE, check_reflection, fail};
use crate::frame::{self, COMMIT, COMMIT_ACK, ECHO, REFUSE, REQUEST, REVERSE, REVERSE_ACK, TICK};
use crate::peer::ANSWER;
use crate::verbs::Verb;

pub fn tick_tock(c: &mut Ctx) -> Outcome {
    let before = c.peer.tocks;
    let tick = c.peer.tick();
    c.peer.quiet(SILENCE);
    if c.peer.tocks == before {
        return fail("no TOCK");
    }
    let tock = c.peer.last_tock.clone().expect("counted");
    check_reflection(&tick, &tock)?;
    if tock.header.field != u32::from_be_bytes(tick[4..8].try_into().unwrap()) {
        return fail("the TOCK's field is not the TICK's");
    }
    Ok(())
}

pub fn iut_ticks(c: &mut Ctx) -> Outcome {
    let before = c.peer.iut_ticks.len();
    c.peer.quiet(ANSWER);
    let ticks = &c.peer.iut_ticks[before..];
    match ticks.last() {
        None => fail("no TICK from the IUT in two seconds of silence"),
        Some((_, 0)) => fail("the IUT's TICK advertises a round of 0 ns"),
        Some(_) => Ok(()),
    }
}

pub fn every_verb(c: &mut Ctx) -> Outcome {
    c.learn_memory()?;
    let o = |i| c.offset(i);
    let verbs = [
        Verb::Write {
            offset: o(0),
            data: (1..=13).collect(),
        },
        Verb::Read {
            offset: o(0),
            len: 13,
        },
        Verb::Cas {
            offset: o(16),
            expected: 0,
            new: 9,
        },
        Verb::Cas {
            offset: o(16),
            expected: 1,
            new: 10,
        },
        Verb::Faa {
            offset: o(24),
            add: 0x0100_0001,
        },
        Verb::Swap {
            offset: o(32),
            new: 0xAB,
        },
        Verb::Mcas {
            words: vec![(o(40), 0, 1), (o(48), 0, 2), (o(56), 0, 3)],
        },
        Verb::Bswap {
            offset: o(64),
            block: vec![0xEE; 24],
        },
    ];
    // The area's words must start as the checks assume: zero them first.
    let zero = Verb::Write {
        offset: o(0),
        data: vec![0; 96],
    };
    c.echo(1, &zero, false)?;
    c.decide(1, COMMIT)?;
    for verb in &verbs {
        c.echo(1, verb, false)?;
        c.decide(1, COMMIT)?;
    }
    c.check_memory(2)
}

pub fn carried_commit(c: &mut Ctx) -> Outcome {
    let faa = Verb::Faa {
        offset: c.offset(72),
        add: 1,
    };
    c.echo(3, &faa, false)?;
    c.echo(3, &faa, true)?;
    c.echo(3, &faa, true)?;
    c.decide(3, COMMIT)?;
    c.check_memory(2)
}

pub fn duplicates(c: &mut Ctx) -> Outcome {
    let faa = Verb::Faa {
        offset: c.offset(80),
        add: 1,
    };
    let seq = c.next_seq(4);
    let first = c.request_again(4, seq, &faa, ECHO, "the first REQUEST")?;
    faa.apply(&mut c.shadow, c.target.base);
    let again = c.request_again(4, seq, &faa, ECHO, "the repeated REQUEST")?;
    let n = first.bytes.len();
    if first.bytes[..16] != again.bytes[..16] || first.bytes[24..n - 4] != again.bytes[24..n - 4] {
        return fail("the repeated REQUEST's ECHO differs from the first (beyond the order slice)");
    }
    c.decide(4, COMMIT)?;
    c.request_again(4, seq, &faa, COMMIT_ACK, "a REQUEST after its COMMIT")?;
    c.check_memory(2)
}

pub fn sequences(c: &mut Ctx) -> Outcome {
    let faa = Verb::Faa {
        offset: c.offset(88),
        add: 1,
    };
    let payload = faa.request(c.target.region, c.target.key);
    let slot = 5;
    c.slot_frame(REQUEST, slot, 0, false, faa.class(), &payload);
    c.nothing("sequence 0 on a fresh slot")?;
    c.slot_frame(REQUEST, slot, 2, false, faa.class(), &payload);
    c.nothing("sequence 2 on a fresh slot")?;
    c.echo(slot, &faa, false)?;
    c.decide(slot, COMMIT)?;
    c.slot_frame(REQUEST, slot, 3, true, faa.class(), &payload);
    c.nothing("sequence 3 after 1")?;
    c.slot_frame(COMMIT, slot, 0, false, 0, &[]);
    c.nothing("a COMMIT of sequence 0 after 1")?;
    c.check_memory(2)
}

pub fn reversal(c: &mut Ctx) -> Outcome {
    let faa = Verb::Faa {
        offset: c.offset(96),
        add: 7,
    };
    let before = c.shadow.clone();
    c.echo(6, &faa, false)?;
    c.decide(6, REVERSE)?;
    c.shadow = before;
    c.decide(6, REVERSE)?;
    let seq = c.seq(6);
    c.request_again(6, seq, &faa, REVERSE_ACK, "a REQUEST after its REVERSE")?;
    c.check_memory(2)
}

pub fn reverse_unseen(c: &mut Ctx) -> Outcome {
    let faa = Verb::Faa {
        offset: c.offset(104),
        add: 7,
    };
    let seq = c.next_seq(7);
    let sent = c.slot_frame(REVERSE, 7, seq, false, 0, &[]);
    let ack = c.answer(7, seq)?;
    if ack.transition() != REVERSE_ACK {
        return fail(format!(
            "REVERSE of the next sequence got {}",
            frame::name(ack.transition())
        ));
    }
    check_reflection(&sent, &ack)?;
    c.request_again(7, seq, &faa, REVERSE_ACK, "the late REQUEST")?;
    c.check_memory(2)
}

pub fn violations(c: &mut Ctx) -> Outcome {
    let faa = |c: &Ctx| Verb::Faa {
        offset: c.offset(112),
        add: 1,
    };
    let v = faa(c);
    c.echo(8, &v, false)?;
    let payload = v.request(c.target.region, c.target.key);
    let next = c.seq(8) + 1;
    c.slot_frame(REQUEST, 8, next, false, v.class(), &payload);
    c.nothing("R21: a REQUEST while the last is tentative, without previous-committed")?;
    c.decide(8, COMMIT)?;
    let seq = c.seq(8);
    c.slot_frame(REVERSE, 8, seq, false, 0, &[]);
    c.nothing("R28: a REVERSE of a committed transfer")?;
    let bad_key = c.target.key ^ 1;
    let f = c.request_to(9, &v, false, c.target.region, bad_key)?;
    if f.transition() != REFUSE {
        return fail("a bad key was not refused");
    }
    let seq = c.seq(9);
    c.slot_frame(COMMIT, 9, seq, false, 0, &[]);
    c.nothing("R25: a COMMIT of a refused transfer")?;
    c.slot_frame(REQUEST, 9, seq + 1, true, v.class(), &payload);
    c.nothing("R21: a REQUEST claiming to commit a refused transfer")?;
    c.check_memory(2)
}

pub fn refusals(c: &mut Ctx) -> Result<Option<String>, String> {
    let at = c.offset(120);
    let faa = |offset| Verb::Faa { offset, add: 1 };
    let t = (c.target.region, c.target.key);
    let mut cases: Vec<(u8, &str, u16, u32, Verb)> = vec![
        (2, "unknown region", t.0.wrapping_add(0x7F00), t.1, faa(at)),
        (3, "bad key", t.0, t.1 ^ 0x5A5A, faa(at)),
        (4, "out of bounds", t.0, t.1, faa(c.target.len)),
        (8, "misaligned", t.0, t.1, faa(at + 4)),
    ];
    if let Some((region, key)) = c.target.no_atomics {
        cases.push((6, "forbidden", region, key, faa(0)));
    }
    for (reason, what, region, key, verb) in cases {
        let f = c.request_to(10, &verb, false, region, key)?;
        if f.transition() != REFUSE || f.payload()[8] != reason {
            return fail(format!(
                "{what}: got {} reason {}, want REFUSE {reason}",
                frame::name(f.transition()),
                f.payload()[8]
            ));
        }
        if f.payload()[9..].iter().any(|&b| b != 0) {
            return fail(format!("{what}: bytes after the reason"));
        }
    }
    // Malformed: opcode 0.
    let seq = c.seq(10) + 1;
    c.seqs[10] = seq;
    c.slot_frame(REQUEST, 10, seq, false, 0, &[0, 0, 0, 1]);
    let f = c.answer(10, seq)?;
    if f.transition() != REFUSE || f.payload()[8] != 5 {
        return fail("an opcode 0 REQUEST was not refused `malformed`");
    }
    // Locked: slot 11 holds the word tentatively, slot 12 asks for it.
    c.echo(11, &faa(at), false)?;
    let f = c.request(12, &faa(at), false)?;
    if f.transition() != REFUSE || f.payload()[8] != 7 {
        return fail("a word held by another slot's tentative transfer was not refused `locked`");
    }
    c.decide(11, COMMIT)?;
    c.check_memory(2)?;
    Ok(c.target
        .no_atomics
        .is_none()
        .then(|| "forbidden not checked: give --no-atomics REGION:KEY".to_string()))
}

/// A SEND (opcode 8: flags, two zero bytes, immediate data, length,
/// message) to an IUT whose application has posted no receive: REFUSE
/// `no receive` (9), in the same round trip, and nothing changes.
pub fn send_without_receive(c: &mut Ctx) -> Outcome {
    let mut send = vec![8, 1, 0, 0, 0, 0, 0, 42, 0, 3];
    send.extend_from_slice(b"hi!");
    let seq = c.seq(13) + 1;
    c.seqs[13] = seq;
    c.slot_frame(REQUEST, 13, seq, false, 0, &send);
    let f = c.answer(13, seq)?;
    if f.transition() != REFUSE || f.payload()[8] != 9 {
        return fail(format!(
            "a SEND with no receive posted: got {} reason {}, want REFUSE 9 (no receive)",
            frame::name(f.transition()),
            f.payload()[8]
        ));
    }
    if f.payload()[9..].iter().any(|&b| b != 0) {
        return fail("no receive: bytes after the reason");
    }
    c.check_memory(2)
}

pub fn credits(c: &mut Ctx) -> Result<Option<String>, String> {
    let (slots, credits) = (c.peer.iut.slots, c.peer.iut.credits);
    if credits >= slots || credits > 40 {
        return Ok(Some(format!(
            "not checked: the IUT offers {credits} credits for {slots} slots (the check needs \
             fewer credits than slots, and at most 40)"
        )));
    }
    // Slots 0 to `credits`: every earlier clause has settled them.
    let first = 0u16;
    for k in 0..credits {
        c.echo(
            first + k,
            &Verb::Faa {
                offset: c.offset(128 + 8 * usize::from(k)),
                add: 1,
            },
            false,
        )?;
    }
    let over = first + credits;
    let f = c.request(
        over,
        &Verb::Faa {
            offset: c.offset(120),
            add: 1,
        },
        false,
    )?;
    if f.transition() != REFUSE || f.payload()[8] != 1 {
        return fail(format!(
            "transfer {} got {}, want REFUSE no credit",
            credits + 1,
            frame::name(f.transition())
        ));
    }
    for k in 0..credits {
        c.decide(first + k, COMMIT)?;
    }
    c.check_memory(2).map(|()| None)
}

/// The link still carries verbs (nothing the last frames did reset it).
pub fn still_up(c: &mut Ctx) -> Outcome {
    let faa = Verb::Faa {
        offset: c.offset(400),
        add: 1,
    };
    c.echo(13, &faa, false)
        .map_err(|e| format!("afterwards the link does not work: {e}"))?;
    c.decide(13, COMMIT)
}

pub fn malformed(c: &mut Ctx) -> Outcome {
    let h = c.peer.header(TICK, 0, 99);
    let tick = frame::build(&h, &[0; 8]);
    let resealed = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut f = tick.clone();
        edit(&mut f);
        frame::seal(&mut f);
        f
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("truncated", tick[..40].to_vec()),
        ("wrong_length", {
            let mut f = tick.clone();
            f.extend([0; 8]);
            f
        }),
        ("unknown_version", resealed(&|f| f[0] = 0x10)),
        ("bad_class", resealed(&|f| f[0] = 0x25)),
        ("bad_crc", {
            let mut f = tick.clone();
            f[30] ^= 1;
            f
        }),
        (
            "unknown_transition",
            resealed(&|f| {
                f[2] = 2;
                f[3] = 9
            }),
        ),
        ("wrong_direction", resealed(&|f| f[3] |= 0x80)),
        ("reserved_bits", resealed(&|f| f[1] |= 0x08)),
        (
            "inconsistent (sender epoch 0)",
            resealed(&|f| f[8..12].fill(0)),
        ),
    ];
    let tocks = c.peer.tocks;
    for (what, bytes) in cases {
        c.peer.send(&bytes);
        c.nothing(what)?;
    }
    if c.peer.tocks != tocks {
        return fail("a malformed TICK was answered");
    }
    still_up(c)
}

/// Each bad HELLO comes from a newer incarnation of the tester, so an IUT
/// that took one would restart the link and answer it (R7-R9): silence and
/// a link that still carries verbs show it was dropped.
pub fn bad_hellos(c: &mut Ctx) -> Outcome {
    let (epoch, bob) = (c.peer.epoch, c.peer.bob);
    let newer = c.peer.hello_from(epoch + 1, bob, 0, false);
    let mut class1 = vec![0u8; 128];
    class1[..60].copy_from_slice(&newer[..60]);
    class1[0] |= 1;
    frame::seal(&mut class1);
    let mut no_slots = newer.clone();
    no_slots[frame::HEADER + 8..frame::HEADER + 10].fill(0);
    frame::seal(&mut no_slots);
    let older = c.peer.hello_from(epoch - 1, bob, 0, false);
    let wrong_role = c.peer.hello_from(epoch + 1, !bob, 1, true);
    for (what, bytes) in [
        ("R3: a HELLO of class 1", class1),
        ("R4: a HELLO offering 0 slots", no_slots),
        ("R5: a HELLO of an older epoch", older),
        (
            "R6: a HELLO naming the IUT with the IUT's own role",
            wrong_role,
        ),
    ] {
        c.peer.send(&bytes);
        c.nothing(what)?;
    }
    still_up(c)
}

pub fn disagreeing(c: &mut Ctx) -> Outcome {
    let tocks = c.peer.tocks;
    let mut cases = Vec::new();
    for (what, edit) in [
        (
            "R10: a TICK naming another epoch of the IUT",
            (|h: &mut frame::Header| h.receiver_epoch ^= 0x100) as fn(&mut frame::Header),
        ),
        ("R11: a TICK at level 1", |h| h.level = 1),
        ("R11: a TICK with the IUT's role", |h| h.bob = !h.bob),
        ("R11: a TICK of class 1", |h| h.class = 1),
    ] {
        let mut h = c.peer.header(TICK, 0, 7);
        edit(&mut h);
        cases.push((what, frame::build(&h, &[0, 0, 0, 0, 0, 0, 0, 1])));
    }
    let h = c.peer.header(TICK, 0, 7);
    cases.push((
        "R13: a TICK with a byte after its round length",
        frame::build(&h, &[0, 0, 0, 0, 0, 0, 0, 1, 1]),
    ));
    let h = c.peer.header(frame::TOCK, 0, 7);
    cases.push((
        "R16: a TOCK answering no TICK of the IUT's",
        frame::build(&h, &[1, 2, 3, 4, 5, 6, 7, 8]),
    ));
    let h = c.peer.header(ECHO, 0, (20 << 16) | 1);
    cases.push((
        "R33: an ECHO on a slot awaiting none",
        frame::build(&h, &[0; 16]),
    ));
    for (what, bytes) in cases {
        c.peer.send(&bytes);
        c.nothing(what)?;
        if c.peer.tocks != tocks {
            return fail(format!("{what} was answered with a TOCK"));
        }
    }
    still_up(c)
}

pub fn slot_checks(c: &mut Ctx) -> Outcome {
    let faa = Verb::Faa {
        offset: c.offset(408),
        add: 1,
    };
    let beyond = c.peer.iut.slots;
    c.slot_frame(
        REQUEST,
        beyond,
        1,
        false,
        faa.class(),
        &faa.request(c.target.region, c.target.key),
    );
    c.nothing("R17: a REQUEST on a slot beyond the IUT's")?;
    c.echo(14, &faa, false)?;
    let seq = c.seq(14);
    c.slot_frame(COMMIT, 14, seq, false, 0, &[1]);
    c.nothing("R18: a COMMIT with a payload")?;
    c.decide(14, COMMIT)?;
    c.check_memory(2)
}

pub fn restart(c: &mut Ctx) -> Outcome {
    let faa = Verb::Faa {
        offset: c.offset(416),
        add: 3,
    };
    c.echo(15, &faa, false)?;
    // Gone without deciding: the next incarnation finds it committed.
    c.fresh()?;
    c.check_memory(2)
}
