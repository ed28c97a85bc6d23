//! The simulator's oracle: a ledger of every verb issued, and a sequential
//! model of every node's memory rebuilt from what the targets applied,
//! committed and reversed, computed independently of the core's verbs engine.

use std::collections::{HashMap, VecDeque};

use oae_proto::verb::MAX_MCAS_WORDS;
use oae_proto::{LinkId, Output, Verb, VerbError, VerbId};

/// Where a verb stands, as the oracle sees it.
#[derive(Clone, Debug)]
pub struct Record {
    pub verb: Verb,
    pub issuer: usize,
    pub issuer_epoch: u32,
    pub target: usize,
    pub submitted_at: u64,
    pub completion: Option<(u64, Result<Output, VerbError>)>,
    pub applied: u32,
    pub committed: u32,
    pub reversed: u32,
    /// What the model says the live application returned.
    pub model_output: Option<Output>,
    /// The target's bytes the live application of a READ or bilateral swap
    /// returned: what must land in the initiator's local block.
    pub model_block: Option<Vec<u8>>,
    /// Old bytes of what the live application changed, for reversal.
    pub(crate) undo: Vec<(usize, Vec<u8>)>,
    /// The initiator's local block as locked when sent (bilateral swap):
    /// it must be unchanged when the peer's block lands.
    pub sent_block: Option<Vec<u8>>,
    pub landed: bool,
    /// The issuer's incarnation died before it heard the outcome.
    pub orphaned: bool,
    /// The target's incarnation died while holding an effect of this verb.
    pub target_lost: bool,
    /// A SEND's live application: the target's link and the receive it
    /// holds, and the receive's bytes from before.
    pub receive: Option<(LinkId, u64, Vec<u8>)>,
    /// A SEND's message was reported received.
    pub delivered: bool,
}

impl Record {
    pub fn live_applications(&self) -> i64 {
        i64::from(self.applied) - i64::from(self.reversed)
    }
}

/// A broken invariant, named as in `docs/SEMANTICS.md`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub invariant: &'static str,
    pub detail: String,
}

pub type Check = Result<(), Violation>;

pub fn violation(invariant: &'static str, detail: String) -> Check {
    Err(Violation { invariant, detail })
}

/// A transfer as its initiator names it: (initiator, its epoch, its channel
/// to the target (target << 1, | 1 for a path), slot, sequence number).
pub type AttemptKey = (usize, u32, u32, u16, u16);

pub const REGION: u16 = 1;
/// Where a node's READs land: no peer's verb names it.
pub const LANDING: u16 = 2;
/// Where a node's receives are posted: no peer's verb names it.
pub const MAILBOX: u16 = 3;
pub const KEY: u32 = 0x0AE0_0001;

/// A receive as the oracle tracks it.
#[derive(Clone, Debug)]
struct ModelReceive {
    id: u64,
    offset: usize,
    len: usize,
    fill: ModelFill,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ModelFill {
    Posted,
    Held(VerbId),
    Filled(VerbId),
}

#[derive(Default)]
pub struct Ledger {
    pub records: HashMap<VerbId, Record>,
    /// (issuer, issuer epoch, issuer link, slot, seq) → verb.
    attempts: HashMap<AttemptKey, VerbId>,
    /// Model of region `REGION` of every node.
    pub model: Vec<Vec<u8>>,
    /// Model of region `LANDING` of every node: what its READs returned.
    pub landing: Vec<Vec<u8>>,
    /// Model of region `MAILBOX` of every node: the messages it received.
    pub mailbox: Vec<Vec<u8>>,
    /// Receives posted on each (node, link), in the order posted.
    receives: HashMap<(usize, LinkId), VecDeque<ModelReceive>>,
    /// The last SEND reported received on each (node, link).
    last_received: HashMap<(usize, LinkId), VerbId>,
    /// Which live, uncommitted application holds each byte of each node's
    /// region: no other verb may read or write it until it settles.
    holder: Vec<Vec<Option<VerbId>>>,
    pub checks_passed: u64,
}

impl Ledger {
    pub fn new(nodes: usize, region_len: usize, mailbox_len: usize) -> Ledger {
        Ledger {
            model: vec![vec![0; region_len]; nodes],
            landing: vec![vec![0; region_len]; nodes],
            mailbox: vec![vec![0; mailbox_len]; nodes],
            holder: vec![vec![None; region_len]; nodes],
            ..Ledger::default()
        }
    }

    pub fn issue(&mut self, id: VerbId, rec: Record) {
        self.records.insert(id, rec);
    }

    pub fn sent(
        &mut self,
        issuer: usize,
        epoch: u32,
        channel: u32,
        slot: u16,
        seq: u16,
        id: VerbId,
    ) {
        self.attempts
            .insert((issuer, epoch, channel, slot, seq), id);
        let rec = self.records.get_mut(&id).expect("issued");
        if let Verb::BilateralSwap {
            local_offset, len, ..
        } = rec.verb
        {
            let at = local_offset as usize;
            rec.sent_block = Some(self.model[issuer][at..at + usize::from(len)].to_vec());
        }
    }

    fn attempt(&self, key: AttemptKey) -> Result<VerbId, Violation> {
        self.attempts.get(&key).copied().ok_or_else(|| Violation {
            invariant: "exactly_once",
            detail: format!("target acted on a transfer nobody sent: {key:?}"),
        })
    }

    /// Node `node` posted receive `id` on `link`: `MAILBOX[offset..+len]`.
    pub fn posted(&mut self, node: usize, link: LinkId, id: u64, offset: usize, len: usize) {
        self.receives
            .entry((node, link))
            .or_default()
            .push_back(ModelReceive {
                id,
                offset,
                len,
                fill: ModelFill::Posted,
            });
    }

    /// Node `node` tried to take back receive `id` of `link`, and the core
    /// `withdrawn` it or not: it must if and only if the receive holds no
    /// message, arriving or arrived.
    pub fn withdrawn(&mut self, node: usize, link: LinkId, id: u64, withdrawn: bool) -> Check {
        let queue = self.receives.entry((node, link)).or_default();
        let at = queue.iter().position(|r| r.id == id);
        let empty = at.is_some_and(|at| queue[at].fill == ModelFill::Posted);
        if withdrawn != empty {
            return violation(
                "message_order",
                format!(
                    "node {node} link {link}: receive {id} withdrawn: {withdrawn}, the oracle \
                     has it {:?}",
                    at.map(|at| queue[at].fill)
                ),
            );
        }
        if let (true, Some(at)) = (withdrawn, at) {
            queue.remove(at);
        }
        Ok(())
    }

    /// The target applied an attempt: run the verb on the model.
    pub fn applied(&mut self, target: usize, link: LinkId, key: AttemptKey) -> Check {
        let id = self.attempt(key)?;
        let rec = self.records.get_mut(&id).expect("issued");
        if rec.target != target {
            return violation("exactly_once", format!("{id:?} applied at the wrong node"));
        }
        if rec.live_applications() != 0 || rec.committed != 0 {
            return violation(
                "exactly_once",
                format!("{id:?} applied again while an earlier application stands: {rec:?}"),
            );
        }
        if let Some((_, Err(e))) = rec.completion
            && e != VerbError::PeerRestarted
        {
            return violation(
                "exactly_once",
                format!("{id:?} applied after completing with {e:?}"),
            );
        }
        for range in touched(&rec.verb) {
            if let Some(w) = self.holder[target][range]
                .iter()
                .flatten()
                .find(|&&w| w != id)
            {
                return violation(
                    "isolation",
                    format!(
                        "{id:?} touched bytes held by the tentative {w:?}: {:?}",
                        rec.verb
                    ),
                );
            }
        }
        rec.applied += 1;
        if let Verb::Send { data, .. } = rec.verb {
            // The first receive posted and not yet holding a message.
            let Some(receive) = self
                .receives
                .get_mut(&(target, link))
                .and_then(|q| q.iter_mut().find(|r| r.fill == ModelFill::Posted))
            else {
                return violation(
                    "message_order",
                    format!("{id:?} applied at node {target} link {link} with no receive posted"),
                );
            };
            if data.len() > receive.len {
                return violation(
                    "message_whole",
                    format!("{id:?} applied into a receive of {} bytes", receive.len),
                );
            }
            let span = receive.offset..receive.offset + data.len();
            let old = self.mailbox[target][span.clone()].to_vec();
            self.mailbox[target][span].copy_from_slice(data.as_slice());
            receive.fill = ModelFill::Held(id);
            rec.receive = Some((link, receive.id, old));
            rec.model_output = Some(Output::Send);
            return Ok(());
        }
        let mem = &mut self.model[target];
        let (output, block, undo) = run_model(&rec.verb, rec.sent_block.as_deref(), mem);
        for (at, old) in &undo {
            self.holder[target][*at..*at + old.len()].fill(Some(id));
        }
        rec.model_output = Some(output);
        rec.model_block = block;
        rec.undo = undo;
        Ok(())
    }

    pub fn committed(&mut self, key: AttemptKey) -> Check {
        let id = self.attempt(key)?;
        let rec = self.records.get_mut(&id).expect("issued");
        if rec.live_applications() != 1 || rec.committed != 0 {
            return violation(
                "exactly_once",
                format!("{id:?} committed without exactly one live application: {rec:?}"),
            );
        }
        if let Some((_, Err(e))) = rec.completion {
            return violation(
                "exactly_once",
                format!("{id:?} committed after completing with {e:?}"),
            );
        }
        rec.committed += 1;
        for (at, old) in &rec.undo {
            self.holder[rec.target][*at..*at + old.len()].fill(None);
        }
        if let Some((link, receive, _)) = rec.receive {
            let held = self
                .receives
                .get_mut(&(rec.target, link))
                .and_then(|q| q.iter_mut().find(|r| r.id == receive))
                .expect("a held receive stays queued");
            held.fill = ModelFill::Filled(id);
        }
        Ok(())
    }

    pub fn reversed(&mut self, target: usize, key: AttemptKey) -> Check {
        let id = self.attempt(key)?;
        let rec = self.records.get_mut(&id).expect("issued");
        if rec.live_applications() != 1 || rec.committed != 0 {
            return violation(
                "no_trace_after_reversal",
                format!("{id:?} reversed without a live uncommitted application: {rec:?}"),
            );
        }
        if let Some((_, Ok(_))) = rec.completion {
            return violation(
                "exactly_once",
                format!("{id:?} reversed after its issuer was told Ok"),
            );
        }
        rec.reversed += 1;
        if let Some((link, receive, old)) = rec.receive.take() {
            let held = self
                .receives
                .get_mut(&(target, link))
                .and_then(|q| q.iter_mut().find(|r| r.id == receive))
                .expect("a held receive stays queued");
            self.mailbox[target][held.offset..held.offset + old.len()].copy_from_slice(&old);
            held.fill = ModelFill::Posted;
        }
        let mem = &mut self.model[target];
        for (at, old) in rec.undo.drain(..).rev() {
            mem[at..at + old.len()].copy_from_slice(&old);
            self.holder[target][at..at + old.len()].fill(None);
        }
        rec.model_output = None;
        rec.model_block = None;
        Ok(())
    }

    /// The initiator landed a READ's or bilateral swap's result in its
    /// local block: the model's block lands in the model of its memory (a
    /// READ's in the landing region, a swap's in the region peers use).
    pub fn local_landed(&mut self, id: VerbId) -> Check {
        let rec = self.records.get_mut(&id).expect("issued");
        let (Some((_, local_offset, len)), Some(theirs)) =
            (rec.verb.local_block(), rec.model_block.as_deref())
        else {
            return violation(
                "exactly_once",
                format!("{id:?} landed locally with no live application at the target"),
            );
        };
        if rec.landed {
            return violation("exactly_once", format!("{id:?} landed locally twice"));
        }
        rec.landed = true;
        let span = local_offset as usize..local_offset as usize + usize::from(len);
        if matches!(rec.verb, Verb::Read { .. }) {
            self.landing[rec.issuer][span].copy_from_slice(theirs);
            return Ok(());
        }
        // A swap's block was locked from sending: no peer's tentative
        // transfer holds it, and nothing changed it.
        if let Some(w) = self.holder[rec.issuer][span.clone()]
            .iter()
            .flatten()
            .next()
        {
            return violation(
                "isolation",
                format!("{id:?} landed on bytes held by the tentative {w:?}"),
            );
        }
        if rec.sent_block.as_deref() != Some(&self.model[rec.issuer][span.clone()]) {
            return violation(
                "isolation",
                format!("{id:?}: the local block changed between send and landing"),
            );
        }
        self.model[rec.issuer][span].copy_from_slice(theirs);
        Ok(())
    }

    /// Node `node` reported receive `id` of `link` filled with a message
    /// of `len` bytes and immediate data `imm`: it must be the first
    /// posted, hold one committed SEND whole, and come after the SENDs
    /// reported before it on the link.
    pub fn received(
        &mut self,
        node: usize,
        link: LinkId,
        id: u64,
        len: u16,
        imm: Option<u32>,
    ) -> Check {
        let queue = self.receives.entry((node, link)).or_default();
        let Some(&ModelReceive {
            id: first,
            fill: ModelFill::Filled(verb),
            ..
        }) = queue.front()
        else {
            return violation(
                "message_order",
                format!(
                    "node {node} link {link} reported receive {id}, the oracle's first is {:?}",
                    queue.front()
                ),
            );
        };
        if first != id {
            return violation(
                "message_order",
                format!("node {node} link {link} reported receive {id} before {first}"),
            );
        }
        queue.pop_front();
        let rec = self.records.get_mut(&verb).expect("issued");
        let Verb::Send {
            data,
            imm: sent_imm,
        } = rec.verb
        else {
            unreachable!("only a SEND fills a receive")
        };
        if usize::from(len) != data.len() || imm != sent_imm {
            return violation(
                "message_whole",
                format!("{verb:?} reported as {len} bytes, immediate {imm:?}: {rec:?}"),
            );
        }
        if std::mem::replace(&mut rec.delivered, true) {
            return violation("exactly_once", format!("{verb:?} received twice"));
        }
        if let Some(last) = self.last_received.insert((node, link), verb)
            && last > verb
        {
            return violation(
                "message_order",
                format!("node {node} link {link} received {verb:?} after {last:?}"),
            );
        }
        Ok(())
    }

    /// The issuer was told the outcome.
    pub fn completed(&mut self, id: VerbId, now: u64, result: Result<Output, VerbError>) -> Check {
        let Some(rec) = self.records.get_mut(&id) else {
            return violation(
                "single_completion",
                format!("completion for unknown {id:?}"),
            );
        };
        if rec.completion.is_some() {
            return violation("single_completion", format!("{id:?} completed twice"));
        }
        rec.completion = Some((now, result));
        match result {
            Ok(out) => {
                if rec.live_applications() != 1 && !rec.target_lost {
                    return violation(
                        "exactly_once",
                        format!("{id:?} completed Ok without one live application: {rec:?}"),
                    );
                }
                if !rec.target_lost && rec.model_output != Some(out) {
                    return violation(
                        "linearizable",
                        format!(
                            "{id:?} returned {out:?}, the sequential model says {:?}",
                            rec.model_output
                        ),
                    );
                }
            }
            Err(VerbError::PeerRestarted) => {}
            Err(e) => {
                if rec.live_applications() != 0 || rec.committed != 0 {
                    return violation(
                        "exactly_once",
                        format!("{id:?} completed {e:?} but has an effect: {rec:?}"),
                    );
                }
            }
        }
        Ok(())
    }

    /// A node restarted: its memory is gone, and so are its issuers.
    pub fn node_restarted(&mut self, node: usize) {
        self.model[node].fill(0);
        self.landing[node].fill(0);
        self.mailbox[node].fill(0);
        // A new incarnation numbers its paths afresh.
        self.receives.retain(|&(n, _), _| n != node);
        self.last_received.retain(|&(n, _), _| n != node);
        self.holder[node].fill(None);
        for rec in self.records.values_mut() {
            if rec.issuer == node && rec.completion.is_none() {
                rec.orphaned = true;
            }
            if rec.target == node && (rec.live_applications() > 0 || rec.committed > 0) {
                rec.target_lost = true;
            }
        }
    }

    /// Checks that hold once everything has settled.
    pub fn check_final(&self) -> Check {
        for (id, rec) in &self.records {
            if rec.completion.is_none() && !rec.orphaned {
                return violation("liveness", format!("{id:?} never completed: {rec:?}"));
            }
            if rec.target_lost {
                continue;
            }
            let expect_committed = match rec.completion {
                Some((_, Ok(_))) => 1,
                Some((_, Err(_))) => 0,
                None => rec.committed,
            };
            if matches!(rec.verb, Verb::Send { .. }) && rec.delivered != (expect_committed == 1) {
                return violation(
                    "exactly_once",
                    format!(
                        "{id:?} completed {:?}, delivered: {}",
                        rec.completion, rec.delivered
                    ),
                );
            }
            if rec.committed != expect_committed
                || rec.live_applications() != i64::from(expect_committed)
            {
                return violation(
                    "exactly_once",
                    format!(
                        "{id:?} settled with applied {} reversed {} committed {} against completion {:?}",
                        rec.applied, rec.reversed, rec.committed, rec.completion
                    ),
                );
            }
        }
        Ok(())
    }
}

/// Byte ranges a verb reads or writes at its target.
fn touched(verb: &Verb) -> Vec<std::ops::Range<usize>> {
    let span = |offset: u32, len: usize| offset as usize..offset as usize + len;
    match *verb {
        Verb::Read { offset, len, .. } | Verb::BilateralSwap { offset, len, .. } => {
            vec![span(offset, usize::from(len))]
        }
        Verb::Write { offset, data, .. } => vec![span(offset, data.len())],
        Verb::CompareAndSwap { offset, .. }
        | Verb::FetchAdd { offset, .. }
        | Verb::Swap { offset, .. } => vec![span(offset, 8)],
        Verb::MultiWordCommit { count, words, .. } => words[..usize::from(count)]
            .iter()
            .map(|w| span(w.offset, 8))
            .collect(),
        // Lands in a receive, not in the region peers use.
        Verb::Send { .. } => Vec::new(),
    }
}

/// Old bytes of what a verb changed, by offset.
type UndoLog = Vec<(usize, Vec<u8>)>;

/// The sequential semantics of a verb, written without the core's engine:
/// returns the output, the block a READ or bilateral swap returns, and the
/// (offset, old bytes) of what it changed.
fn run_model(
    verb: &Verb,
    sent_block: Option<&[u8]>,
    mem: &mut [u8],
) -> (Output, Option<Vec<u8>>, UndoLog) {
    let word = |mem: &[u8], at: u32| {
        let at = at as usize;
        u64::from_le_bytes(mem[at..at + 8].try_into().unwrap())
    };
    let mut undo = Vec::new();
    let put = |mem: &mut [u8], at: usize, bytes: &[u8], undo: &mut Vec<(usize, Vec<u8>)>| {
        undo.push((at, mem[at..at + bytes.len()].to_vec()));
        mem[at..at + bytes.len()].copy_from_slice(bytes);
    };
    let mut block = None;
    let out = match *verb {
        Verb::Read { offset, len, .. } => {
            let at = offset as usize;
            block = Some(mem[at..at + usize::from(len)].to_vec());
            Output::Read { len }
        }
        Verb::Write { offset, data, .. } => {
            put(mem, offset as usize, data.as_slice(), &mut undo);
            Output::Write
        }
        Verb::CompareAndSwap {
            offset,
            expected,
            new,
            ..
        } => {
            let old = word(mem, offset);
            if old == expected {
                put(mem, offset as usize, &new.to_le_bytes(), &mut undo);
            }
            Output::CompareAndSwap {
                old,
                swapped: old == expected,
            }
        }
        Verb::FetchAdd { offset, add, .. } => {
            let old = word(mem, offset);
            put(
                mem,
                offset as usize,
                &old.wrapping_add(add).to_le_bytes(),
                &mut undo,
            );
            Output::FetchAdd { old }
        }
        Verb::Swap { offset, new, .. } => {
            let old = word(mem, offset);
            put(mem, offset as usize, &new.to_le_bytes(), &mut undo);
            Output::Swap { old }
        }
        Verb::MultiWordCommit { count, words, .. } => {
            let words = &words[..usize::from(count)];
            let mut old = [0u64; MAX_MCAS_WORDS];
            for (o, w) in old.iter_mut().zip(words) {
                *o = word(mem, w.offset);
            }
            let committed = words.iter().zip(&old).all(|(w, o)| w.expected == *o);
            if committed {
                for w in words {
                    put(mem, w.offset as usize, &w.new.to_le_bytes(), &mut undo);
                }
            }
            Output::MultiWordCommit {
                committed,
                count,
                old,
            }
        }
        Verb::BilateralSwap { offset, len, .. } => {
            let at = offset as usize;
            block = Some(mem[at..at + usize::from(len)].to_vec());
            put(mem, at, sent_block.expect("recorded when sent"), &mut undo);
            Output::BilateralSwap { len }
        }
        Verb::Send { .. } => unreachable!("a SEND is run on the mailbox"),
    };
    (out, block, undo)
}
