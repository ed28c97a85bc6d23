//! The tester's side of a link in one place: its peer, the IUT's memory
//! as the tester models it, and the steps clauses are made of (send a
//! REQUEST, expect its answer, expect silence).

use std::time::Duration;

use crate::frame::{self, COMMIT, COMMIT_ACK, ECHO, HELLO, REQUEST, REVERSE_ACK, Received};
use crate::peer::{ANSWER, Peer};
use crate::verbs::Verb;

/// How long the tester listens to conclude that a frame got no answer.
pub const SILENCE: Duration = Duration::from_millis(150);

/// Where the tester may work in the IUT's memory.
pub struct Target {
    pub region: u16,
    pub key: u32,
    pub len: u32,
    /// Bytes from `base` the tester owns (it learns them by READ first).
    pub base: u32,
    /// A region without the atomic permission, for `forbidden`.
    pub no_atomics: Option<(u16, u32)>,
    /// Where in its own memory the IUT lands a READ it is asked for, as
    /// (region, offset).
    pub read_lands_in: (u16, u32),
}

pub const AREA: usize = 512;

pub struct Ctx {
    pub peer: Peer,
    pub target: Target,
    /// The tester's model of the IUT's bytes from `base`.
    pub shadow: Vec<u8>,
    /// Per slot: the last sequence number sent (0: none yet).
    pub seqs: Vec<u16>,
    /// The command that makes the IUT initiate a verb (`--submit`).
    pub submit: Option<String>,
    /// The tester's own memory, target of the IUT's verbs.
    pub mine: Vec<u8>,
    /// The IUT's transfers whose ECHO completed their verb and whose
    /// commit has not come yet (a COMMIT, or the slot's next REQUEST).
    pub uncommitted: Vec<Received>,
}

pub type Outcome = Result<(), String>;

pub fn fail<T>(what: impl Into<String>) -> Result<T, String> {
    Err(what.into())
}

impl Ctx {
    pub fn new(peer: Peer, target: Target, submit: Option<String>) -> Ctx {
        Ctx {
            peer,
            target,
            shadow: vec![0; AREA],
            seqs: vec![0; 4096],
            submit,
            mine: vec![0; AREA],
            uncommitted: Vec::new(),
        }
    }

    /// A new incarnation of the tester, as Bob (a larger epoch than any
    /// the IUT knows), brought up in three HELLOs.
    pub fn fresh(&mut self) -> Outcome {
        let p = &mut self.peer;
        let epoch = p.iut.epoch.max(p.iut.knows_epoch).max(p.epoch) + 1;
        p.restart(epoch, p.iut.node_id.wrapping_add(1));
        self.seqs.fill(0);
        p.hello(0, false);
        let answer = self.expect_hello()?;
        let h = answer.header;
        if h.level != 1 || h.receiver_epoch != self.peer.epoch {
            return fail(format!(
                "B1: the IUT answered HELLO level 0 with level {} naming epoch {} (want 1, {})",
                h.level, h.receiver_epoch, self.peer.epoch
            ));
        }
        if h.bob {
            return fail("B2: the IUT has the smaller epoch but did not take Alice's role");
        }
        self.peer.hello(2, true);
        Ok(())
    }

    fn expect_hello(&mut self) -> Result<Received, String> {
        loop {
            let Some(f) = self.peer.next(ANSWER) else {
                return fail("no HELLO came back");
            };
            if f.transition() == HELLO && f.header.sender_epoch == self.peer.iut.epoch {
                return Ok(f);
            }
        }
    }

    pub fn offset(&self, i: usize) -> u32 {
        self.target.base + i as u32
    }

    /// The answer on `slot` to sequence `seq`, whatever else comes (other
    /// slot frames are a failure).
    pub fn answer(&mut self, slot: u16, seq: u16) -> Result<Received, String> {
        let f = loop {
            let Some(f) = self.peer.next(ANSWER) else {
                return fail(format!("no answer on slot {slot} to sequence {seq}"));
            };
            // The IUT repeats its level-1 HELLO until it hears the
            // tester's level 2 (B1): one it sent before that arrived may
            // still come after it, ahead of the answer. Nothing else may.
            let h = f.header;
            let bring_up_repeat = f.transition() == HELLO
                && h.level == 1
                && h.sender_epoch == self.peer.iut.epoch
                && h.receiver_epoch == self.peer.epoch;
            if !bring_up_repeat {
                break f;
            }
        };
        let h = f.header;
        if h.transition.0 != 2 || h.slot() != slot || h.seq() != seq {
            return fail(format!(
                "expected the answer to slot {slot} sequence {seq}, got {} slot {} seq {}",
                frame::name(h.transition),
                h.slot(),
                h.seq()
            ));
        }
        self.peer.note_seen(&f);
        Ok(f)
    }

    /// Sends a slot frame of the tester's (initiator side).
    pub fn slot_frame(
        &mut self,
        transition: (u8, u8),
        slot: u16,
        seq: u16,
        previous_committed: bool,
        class: u8,
        payload: &[u8],
    ) -> Vec<u8> {
        let mut h = self
            .peer
            .header(transition, class, (u32::from(slot) << 16) | u32::from(seq));
        h.previous_committed = previous_committed;
        self.peer.send_frame(&h, payload)
    }

    /// REQUEST of `verb` on `slot` with the next sequence number; returns
    /// the answer, checked for its reflection and class.
    pub fn request(
        &mut self,
        slot: u16,
        verb: &Verb,
        previous_committed: bool,
    ) -> Result<Received, String> {
        self.request_to(
            slot,
            verb,
            previous_committed,
            self.target.region,
            self.target.key,
        )
    }

    pub fn request_to(
        &mut self,
        slot: u16,
        verb: &Verb,
        previous_committed: bool,
        region: u16,
        key: u32,
    ) -> Result<Received, String> {
        let seq = self.next_seq(slot);
        let sent = self.slot_frame(
            REQUEST,
            slot,
            seq,
            previous_committed,
            verb.class(),
            &verb.request(region, key),
        );
        let f = self.answer(slot, seq)?;
        check_reflection(&sent, &f)?;
        Ok(f)
    }

    /// REQUEST of `verb` again on `slot` with sequence `seq` (a duplicate,
    /// or a late copy): the answer, which must be `want`.
    pub fn request_again(
        &mut self,
        slot: u16,
        seq: u16,
        verb: &Verb,
        want: (u8, u8),
        what: &str,
    ) -> Result<Received, String> {
        let payload = verb.request(self.target.region, self.target.key);
        self.slot_frame(REQUEST, slot, seq, false, verb.class(), &payload);
        let f = self.answer(slot, seq)?;
        if f.transition() != want {
            return fail(format!(
                "{what} got {}, not the {}",
                frame::name(f.transition()),
                frame::name(want)
            ));
        }
        Ok(f)
    }

    pub fn next_seq(&mut self, slot: u16) -> u16 {
        let s = &mut self.seqs[usize::from(slot)];
        *s = s.wrapping_add(1);
        *s
    }

    pub fn seq(&self, slot: u16) -> u16 {
        self.seqs[usize::from(slot)]
    }

    /// REQUEST, ECHO checked against the model; the model then holds the
    /// verb's effect (tentative until decided).
    pub fn echo(&mut self, slot: u16, verb: &Verb, previous_committed: bool) -> Outcome {
        let f = self.request(slot, verb, previous_committed)?;
        if f.transition() != ECHO {
            return fail(format!(
                "{} answered with {} (reason {})",
                verb.name(),
                frame::name(f.transition()),
                f.payload()[8]
            ));
        }
        let want = verb.apply(&mut self.shadow, self.target.base);
        let got = &f.payload()[8..8 + want.len()];
        if got != want.as_slice() {
            return fail(format!(
                "{}: the echo's result is {} where the memory says {}",
                verb.name(),
                frame::hex(got),
                frame::hex(&want)
            ));
        }
        if f.payload()[8 + want.len()..].iter().any(|&b| b != 0) {
            return fail(format!("{}: bytes after the result", verb.name()));
        }
        Ok(())
    }

    /// COMMIT or REVERSE of the slot's last sequence, and its
    /// acknowledgement checked.
    pub fn decide(&mut self, slot: u16, transition: (u8, u8)) -> Outcome {
        let seq = self.seq(slot);
        let sent = self.slot_frame(transition, slot, seq, false, 0, &[]);
        let f = self.answer(slot, seq)?;
        let want = if transition == COMMIT {
            COMMIT_ACK
        } else {
            REVERSE_ACK
        };
        if f.transition() != want {
            return fail(format!(
                "{} answered with {}",
                frame::name(transition),
                frame::name(f.transition())
            ));
        }
        check_reflection(&sent, &f)?;
        if f.payload()[8..].iter().any(|&b| b != 0) {
            return fail(format!("{}: bytes after the reflection", frame::name(want)));
        }
        Ok(())
    }

    /// Reads the model's whole area back through a READ on `slot` and
    /// compares.
    pub fn check_memory(&mut self, slot: u16) -> Outcome {
        for chunk in 0..AREA / 256 {
            let verb = Verb::Read {
                offset: self.offset(chunk * 256),
                len: 256,
            };
            self.echo(slot, &verb, false)
                .map_err(|e| format!("reading back: {e}"))?;
            self.decide(slot, COMMIT)?;
        }
        Ok(())
    }

    /// Learns the area's bytes (a READ whose result becomes the model).
    pub fn learn_memory(&mut self) -> Outcome {
        for chunk in 0..AREA / 256 {
            let verb = Verb::Read {
                offset: self.offset(chunk * 256),
                len: 256,
            };
            let f = self.request(0, &verb, false)?;
            if f.transition() != ECHO {
                return fail(format!(
                    "READ of the tester's area refused (reason {}): check --region, --key, --base",
                    f.payload()[8]
                ));
            }
            self.shadow[chunk * 256..(chunk + 1) * 256].copy_from_slice(&f.payload()[10..266]);
            self.decide(0, COMMIT)?;
        }
        Ok(())
    }

    /// Nothing but liveness traffic for a while.
    pub fn nothing(&mut self, what: &str) -> Outcome {
        let got = self.peer.quiet(SILENCE);
        match got.first() {
            None => Ok(()),
            Some(f) => fail(format!(
                "{what} was answered with {} slot {} seq {}",
                frame::name(f.transition()),
                f.header.slot(),
                f.header.seq()
            )),
        }
    }
}

/// An answer reflects the context slice of what it answers, halves
/// swapped, and has its class.
pub fn check_reflection(sent: &[u8], answer: &Received) -> Outcome {
    let want = frame::reflect(&sent[..8]);
    if answer.payload()[..8] != want {
        return fail(format!(
            "{} reflects {} where {} was sent",
            frame::name(answer.transition()),
            frame::hex(&answer.payload()[..8]),
            frame::hex(&sent[..8])
        ));
    }
    if answer.header.class != sent[0] & 0x0F {
        return fail(format!(
            "{} of class {} answers a frame of class {}",
            frame::name(answer.transition()),
            answer.header.class,
            sent[0] & 0x0F
        ));
    }
    Ok(())
}
