//! Clauses on the IUT's initiator side: the tester asks the IUT for a
//! verb through a command (`--submit`, given `oaectl verb`'s arguments)
//! and plays the target on the wire.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::ctx::{Ctx, Outcome, SILENCE, fail};
use crate::frame::{
    self, COMMIT, COMMIT_ACK, ECHO, REFUSE, REQUEST, REVERSE, REVERSE_ACK, Received,
};
use crate::peer::ANSWER;
use crate::verbs::Verb;

/// The tester's memory as target: region and key the IUT is told to use.
pub const REGION: u16 = 1;
pub const KEY: u32 = 0x0c0f;

/// `oaectl verb` arguments for `verb` on the tester's region; a READ lands
/// in the IUT's block `read_lands_in`.
fn arguments(verb: &Verb, read_lands_in: (u16, u32)) -> Vec<String> {
    let at = |offset: &u32| {
        vec![
            "--region".to_string(),
            REGION.to_string(),
            "--key".into(),
            format!("{KEY:#x}"),
            "--offset".into(),
            offset.to_string(),
        ]
    };
    let mut a = Vec::new();
    match verb {
        Verb::Cas {
            offset,
            expected,
            new,
        } => {
            a.push("cas".to_string());
            a.extend(at(offset));
            a.extend([
                "--expected".into(),
                expected.to_string(),
                "--new".into(),
                new.to_string(),
            ]);
        }
        Verb::Faa { offset, add } => {
            a.push("faa".into());
            a.extend(at(offset));
            a.extend(["--add".into(), add.to_string()]);
        }
        Verb::Swap { offset, new } => {
            a.push("swap".into());
            a.extend(at(offset));
            a.extend(["--new".into(), new.to_string()]);
        }
        Verb::Read { offset, len } => {
            a.push("read".into());
            a.extend(at(offset));
            a.extend(["--len".into(), len.to_string()]);
            a.extend(["--local-region".into(), read_lands_in.0.to_string()]);
            a.extend(["--local-offset".into(), read_lands_in.1.to_string()]);
        }
        Verb::Write { offset, data } => {
            a.push("write".into());
            a.extend(at(offset));
            a.extend(["--data".into(), frame::hex(data)]);
        }
        Verb::Mcas { words } => {
            a.extend(["mcas".into(), "--region".into(), REGION.to_string()]);
            a.extend(["--key".into(), format!("{KEY:#x}")]);
            for (o, e, n) in words {
                a.extend(["--word".into(), format!("{o}:{e}:{n}")]);
            }
        }
        Verb::Bswap { offset, block } => {
            a.push("bswap".into());
            a.extend(at(offset));
            a.extend(["--len".into(), block.len().to_string()]);
            a.extend(["--local-region".into(), read_lands_in.0.to_string()]);
            a.extend(["--local-offset".into(), read_lands_in.1.to_string()]);
        }
    }
    a
}

impl Ctx {
    fn submit(&mut self, verb: &Verb) -> Result<Child, String> {
        let Some(cmd) = &self.submit else {
            return fail("no --submit command");
        };
        let mut words = cmd.split_whitespace();
        let program = words.next().ok_or("--submit is empty")?;
        Command::new(program)
            .args(words)
            .args(arguments(verb, self.target.read_lands_in))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start --submit {cmd}: {e}"))
    }

    /// Waits for the submit command while keeping the link alive; true if
    /// it reported success. The COMMIT of `decided` (the transfer whose
    /// ECHO completed the verb) may come before the command ends, or later,
    /// or be carried by the slot's next REQUEST (I2): `uncommitted` keeps
    /// it until one of these happens.
    fn outcome(&mut self, mut child: Child, decided: Option<&Received>) -> Result<bool, String> {
        let deadline = Instant::now() + 3 * ANSWER;
        let mut committed = decided.is_none();
        let success = loop {
            if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
                break status.success();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return fail("the --submit command did not finish");
            }
            if let Some(f) = self.peer.next(Duration::from_millis(10)) {
                let commit_of = |r: &Received| f.header.field == r.header.field;
                match decided {
                    Some(request)
                        if !committed && f.transition() == COMMIT && commit_of(request) =>
                    {
                        self.peer.owe(&f);
                        self.acknowledge_commit(&f, request)?;
                        committed = true;
                    }
                    _ if f.transition() == COMMIT && self.uncommitted.iter().any(commit_of) => {
                        self.peer.owe(&f);
                        let i = self.uncommitted.iter().position(commit_of).expect("found");
                        let pending = self.uncommitted.remove(i);
                        self.acknowledge_commit(&f, &pending)?;
                    }
                    _ => {
                        return fail(format!(
                            "while the verb completed, the IUT sent {} slot {} seq {}",
                            frame::name(f.transition()),
                            f.header.slot(),
                            f.header.seq()
                        ));
                    }
                }
            }
        };
        if let (false, Some(request)) = (committed, decided) {
            self.uncommitted.push(request.clone());
        }
        Ok(success)
    }

    /// The IUT's next frame as initiator, which must be `want`; a COMMIT
    /// of the transfer still `uncommitted` may come first, and a REQUEST on
    /// its slot must carry that commit.
    fn iut_sends(&mut self, want: (u8, u8)) -> Result<Received, String> {
        let Some(f) = self.peer.next(ANSWER) else {
            return fail(format!("no {} from the IUT", frame::name(want)));
        };
        let pending = self
            .uncommitted
            .iter()
            .position(|p| p.header.slot() == f.header.slot());
        if let Some(i) = pending {
            if f.transition() == COMMIT && want != COMMIT {
                self.peer.owe(&f);
                let pending = self.uncommitted.remove(i);
                self.acknowledge_commit(&f, &pending)?;
                return self.iut_sends(want);
            }
            if f.transition() == REQUEST {
                if !f.header.previous_committed {
                    return fail(
                        "the slot's next REQUEST neither follows a COMMIT nor carries the commit",
                    );
                }
                self.uncommitted.remove(i);
            }
        }
        if f.transition() != want {
            return fail(format!(
                "expected {} from the IUT, got {}",
                frame::name(want),
                frame::name(f.transition())
            ));
        }
        self.peer.owe(&f);
        Ok(f)
    }

    /// The IUT's REQUEST for `verb`: its payload exactly the verb's, its
    /// class the smallest that holds request and echo.
    fn request_for(&mut self, verb: &Verb) -> Result<Received, String> {
        let f = self.iut_sends(REQUEST)?;
        let want = verb.request(REGION, KEY);
        let p = f.payload();
        if p[..want.len()] != want[..] || p[want.len()..].iter().any(|&b| b != 0) {
            return fail(format!(
                "the REQUEST for {} carries {} (want {})",
                verb.name(),
                frame::hex(&p[..want.len()]),
                frame::hex(&want)
            ));
        }
        if f.header.class != verb.class() {
            return fail(format!(
                "{} sent in class {}, the smallest holding it is {}",
                verb.name(),
                f.header.class,
                verb.class()
            ));
        }
        Ok(f)
    }

    /// The tester's answer to the IUT's frame `to`: `transition`, its
    /// reflection, then `rest`.
    fn reply(&mut self, to: &Received, transition: (u8, u8), rest: &[u8]) {
        let h = to.header;
        self.peer.answered(to);
        let mut header = self.peer.header(transition, h.class, h.field);
        header.previous_committed = false;
        let mut payload = frame::reflect(&to.bytes[..8]).to_vec();
        payload.extend(rest);
        self.peer.send_frame(&header, &payload);
    }

    fn echo_to(&mut self, request: &Received, verb: &Verb) {
        let result = verb.apply(&mut self.mine, 0);
        self.reply(request, ECHO, &result);
    }

    /// The COMMIT of the transfer still uncommitted, if any, acknowledged:
    /// how every clause ends.
    fn settle(&mut self) -> Outcome {
        while !self.uncommitted.is_empty() {
            let f = self.iut_sends(COMMIT)?;
            let i = self
                .uncommitted
                .iter()
                .position(|p| p.header.field == f.header.field)
                .ok_or("a COMMIT of a transfer not awaiting one")?;
            let pending = self.uncommitted.remove(i);
            self.acknowledge_commit(&f, &pending)?;
        }
        Ok(())
    }

    fn acknowledge_commit(&mut self, f: &Received, request: &Received) -> Outcome {
        if f.header.field != request.header.field || f.header.class != 0 {
            return fail("the COMMIT names another transfer, or is not class 0");
        }
        if f.payload().iter().any(|&b| b != 0) {
            return fail("the COMMIT carries a payload");
        }
        self.reply(f, COMMIT_ACK, &[]);
        Ok(())
    }

    /// A REVERSE of the transfer `request` began, acknowledged.
    fn reverse_of(&mut self, request: &Received) -> Outcome {
        let f = self.iut_sends(REVERSE)?;
        if f.header.field != request.header.field || f.header.class != 0 {
            return fail("the REVERSE names another transfer, or is not class 0");
        }
        self.reply(&f, REVERSE_ACK, &[]);
        Ok(())
    }
}

pub fn every_verb(c: &mut Ctx) -> Outcome {
    let verbs = [
        Verb::Write {
            offset: 0,
            data: (1..=20).collect(),
        },
        Verb::Read { offset: 0, len: 20 },
        Verb::Cas {
            offset: 24,
            expected: 0,
            new: 5,
        },
        Verb::Faa { offset: 32, add: 3 },
        Verb::Swap { offset: 40, new: 7 },
        Verb::Mcas {
            words: vec![(48, 0, 1), (56, 0, 2)],
        },
    ];
    for verb in &verbs {
        let child = c.submit(verb)?;
        let request = c.request_for(verb)?;
        c.echo_to(&request, verb);
        if !c.outcome(child, Some(&request))? {
            return fail(format!(
                "{} failed at the IUT after a good ECHO",
                verb.name()
            ));
        }
    }
    c.settle()
}

/// A BILATERAL SWAP the IUT initiates with its block `read_lands_in`,
/// which holds the 20 bytes its READ of `every_verb` landed: the REQUEST
/// must carry them. A second swap of the same blocks must then carry what
/// the first one's ECHO gave back: the IUT wrote it into its block.
pub fn bilateral_swap(c: &mut Ctx) -> Outcome {
    const AT: usize = 96;
    const LEN: usize = 20;
    for (i, b) in c.mine[AT..AT + LEN].iter_mut().enumerate() {
        *b = 0xB0 + i as u8;
    }
    let mut local = c.mine[..LEN].to_vec();
    for round in ["first", "second"] {
        let verb = Verb::Bswap {
            offset: AT as u32,
            block: local.clone(),
        };
        let child = c.submit(&verb)?;
        let request = c
            .request_for(&verb)
            .map_err(|e| format!("the {round} swap: {e}"))?;
        local = c.mine[AT..AT + LEN].to_vec();
        c.echo_to(&request, &verb);
        if !c.outcome(child, Some(&request))? {
            return fail(format!(
                "the {round} swap failed at the IUT after a good ECHO"
            ));
        }
    }
    c.settle()
}

pub fn mismatch(c: &mut Ctx) -> Outcome {
    let verb = Verb::Faa { offset: 64, add: 1 };
    let child = c.submit(&verb)?;
    let request = c.request_for(&verb)?;
    let mut wrong = request.clone();
    wrong.bytes[5] ^= 0x01;
    c.reply(&wrong, ECHO, &0u64.to_be_bytes());
    c.reverse_of(&request)?;
    let again = c.request_for(&verb)?;
    if again.header.seq() == request.header.seq() && again.header.slot() == request.header.slot() {
        return fail("the verb went again on the reversed sequence number");
    }
    c.echo_to(&again, &verb);
    if !c.outcome(child, Some(&again))? {
        return fail("the verb failed after its second attempt's good ECHO");
    }
    c.settle()
}

pub fn refused(c: &mut Ctx) -> Outcome {
    let verb = Verb::Faa { offset: 72, add: 1 };
    let child = c.submit(&verb)?;
    let request = c.request_for(&verb)?;
    c.reply(&request, REFUSE, &[3]);
    if c.outcome(child, None)? {
        return fail("a verb refused `bad key` was reported a success");
    }
    let more = c.peer.quiet(SILENCE);
    if let Some(f) = more.first() {
        return fail(format!(
            "after the refusal the IUT sent {}",
            frame::name(f.transition())
        ));
    }
    // `locked` is transient: the verb goes again.
    let child = c.submit(&verb)?;
    let request = c.request_for(&verb)?;
    c.reply(&request, REFUSE, &[7]);
    let again = c.request_for(&verb)?;
    c.echo_to(&again, &verb);
    if !c.outcome(child, Some(&again))? {
        return fail("a verb refused `locked`, then echoed, failed");
    }
    c.settle()
}

/// A FETCH_ADD at `offset` whose REQUEST the tester leaves unanswered
/// while saying, in its next frame's `seen`, that it has seen it; the
/// REVERSE that follows is acknowledged and the retry echoed. How long
/// the REVERSE took after that frame, and the IUT's round.
fn unanswered_but_seen(c: &mut Ctx, offset: u32) -> Result<(Duration, Duration), String> {
    let verb = Verb::Faa { offset, add: 1 };
    let child = c.submit(&verb)?;
    let request = c.request_for(&verb)?;
    c.peer.forget_owed();
    let sent_at = Instant::now();
    let _ = c.peer.tick();
    c.reverse_of(&request)?;
    let took = sent_at.elapsed();
    let again = c.request_for(&verb)?;
    c.echo_to(&again, &verb);
    if !c.outcome(child, Some(&again))? {
        return fail("the verb failed after its retry's good ECHO");
    }
    let round = c
        .peer
        .iut_ticks
        .last()
        .map_or(ANSWER / 8, |&(_, ns)| Duration::from_nanos(ns));
    Ok((took, round))
}

/// O1 R40: on an ordered link that `seen` proves the REQUEST or its
/// answer lost, and the IUT reverses at once.
pub fn loss_by_order(c: &mut Ctx) -> Outcome {
    let (took, round) = unanswered_but_seen(c, 80)?;
    // Sooner than any timer the IUT could have used instead: two of its
    // rounds (patience takes three), or 100 ms where its rounds are
    // shorter than scheduling noise.
    let bound = (2 * round).max(Duration::from_millis(100));
    if took > bound {
        return fail(format!(
            "the REVERSE came {took:?} after the frame that proved the loss (at most {bound:?})"
        ));
    }
    c.settle()
}

/// I3 on a link with `ordered = false`: a frame whose `seen` covers an
/// unanswered REQUEST proves nothing there (frames may be overtaken), so
/// the IUT must not reverse at once; it reverses after
/// `echo_patience_rounds` of its rounds, then retries.
pub fn loss_by_patience(c: &mut Ctx) -> Outcome {
    let (took, round) = unanswered_but_seen(c, 88)?;
    // Patience is at least one of the IUT's rounds; a REVERSE sooner than
    // half of one answered the tester's `seen`, which means nothing here.
    if took < round / 2 {
        return fail(format!(
            "the REVERSE came {took:?} after a frame whose `seen` covered the REQUEST, within \
             half a round ({round:?}): an unordered link must wait (I3)"
        ));
    }
    c.settle()
}
