//! One OAE link: bring-up to common knowledge, liveness counted in round
//! trips, and S slots, each an alternating-bit channel carrying one reversible
//! transfer at a time in each direction.
//!
//! The link is driven by [`crate::Node`]; it never reads a clock or touches a
//! socket. Frames come in through `handle_frame`, go out through
//! `poll_transmit`, and time passes through `handle_timeout`.

use std::collections::VecDeque;

use crate::config::{LinkConfig, Nanos};
use crate::down_reason::{DOWN_REASON_FRAMES, DownReason};
use crate::fabric::envelope::{Outcome, Resolution};
use crate::memory::{LockOwner, Store, Undo};
use crate::unhashed::Unhashed;
use crate::verb::{self, Output, Refusal, ReverseReason, Verb, VerbError};
use crate::wire::{
    self, Context, Frame, Knowledge, MAX_FRAME, Machine, Malformed, Role, SLICE, Transition,
    order_after,
};
use crate::{Event, LinkChange, Observer, VerbId};

/// A verb waiting for, or occupying, a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Pending {
    pub id: VerbId,
    pub verb: Verb,
    /// Attempts already made (each takes a fresh sequence number).
    pub attempts: u32,
    /// Transient refusals wait for this round before the next attempt.
    pub not_before_round: u64,
    /// Already retried once right after this end's commits (see `on_refuse`).
    pub retried_after_commits: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum SendPhase {
    Idle,
    /// REQUEST sent; the verb's fate is not known here yet.
    AwaitEcho,
    /// Echo verified, issuer told `Ok`; the target learns of the commit from
    /// an explicit COMMIT or from the slot's next frame.
    Committed,
    /// REVERSE sent; waiting for the target to confirm every trace is gone.
    Reversing(ReverseReason),
}

/// The initiator's half of a slot.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct SenderSlot {
    seq: u16,
    phase: SendPhase,
    /// Index of the verb in the link's verb store.
    pending: Option<u32>,
    /// Frame class of the transfer on this slot (request and echo share it).
    class: u8,
    /// The transfer before `seq` was committed here; the target may not know
    /// yet, so every frame for `seq` says so.
    previous_committed: bool,
    commit_sent: bool,
    /// Context of the last frame sent on this slot, for checking reflections.
    sent_context: [u8; SLICE],
    sent_at: Nanos,
    sent_round: u64,
    /// Order number of the frame on this slot still owed an answer (0: none).
    awaiting: u32,
    queued: bool,
}

impl SenderSlot {
    const IDLE: SenderSlot = SenderSlot {
        seq: 0,
        phase: SendPhase::Idle,
        pending: None,
        class: 0,
        previous_committed: false,
        commit_sent: false,
        sent_context: [0; SLICE],
        sent_at: 0,
        sent_round: 0,
        awaiting: 0,
        queued: false,
    };
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum RecvState {
    /// Nothing received on this slot in this incarnation.
    Fresh,
    Tentative,
    Committed,
    Reversed,
    Refused,
}

/// The target's half of a slot.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ReceiverSlot {
    seq: u16,
    state: RecvState,
    undo: Undo,
    /// The answer to `seq`, kept so a duplicate gets the same bytes back
    /// without being applied again.
    response: [u8; MAX_FRAME],
    response_len: u16,
    queued: bool,
}

/// Counters a link keeps; never reset while the process lives.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LinkStats {
    pub rx_frames: u64,
    pub tx_frames: u64,
    /// Malformed frames by [`Malformed`] reason, in [`Malformed::ALL`] order.
    pub malformed: [u64; 10],
    /// Well-formed frames from another incarnation of either end.
    pub stale_epoch: u64,
    /// Slot frames that answer nothing outstanding (late, duplicated).
    pub stale_slot_frames: u64,
    pub duplicate_requests: u64,
    pub requests_sent: u64,
    pub echoes_verified: u64,
    pub echo_mismatches: u64,
    /// Transfers reversed because their echo did not come (found by order
    /// or by patience, below).
    pub echo_missing: u64,
    /// Frames found lost because the peer had seen a later one: each cost a
    /// reversal or a repeated decision, and no timer.
    pub lost_by_order: u64,
    /// Frames given up on after `echo_patience_rounds` (unordered links).
    pub lost_by_patience: u64,
    /// Gaps in the peer's order numbers: frames of the peer's that never
    /// arrived here, seen when a later one did.
    pub gaps_seen: u64,
    /// Ticks sent because a frame owed an answer had none yet.
    pub probes_sent: u64,
    /// Reversals confirmed by the target.
    pub reversals: u64,
    pub retries: u64,
    pub refusals_received: u64,
    pub commits_sent: u64,
    pub transfers_applied: u64,
    pub transfers_committed: u64,
    pub transfers_reversed: u64,
    pub refusals_sent: u64,
    /// Requests that arrived with no credit left: the peer broke the protocol.
    pub overruns: u64,
    /// Frames that contradict what this end knows (never expected).
    pub protocol_violations: u64,
    pub ticks_sent: u64,
    pub rtt_samples: u64,
    pub unreachable_declared: u64,
    pub peer_restarts: u64,
    /// Tentative transfers of a dead initiator incarnation, committed.
    pub presumed_commits: u64,
    pub completions_ok: u64,
    pub completions_err: u64,
}

impl LinkStats {
    /// Every counter by its stable name: what the dataplane reports, the
    /// metrics endpoint exports and the test vectors check (malformed
    /// frames by reason are in [`LinkStats::malformed`]).
    pub fn named(&self) -> [(&'static str, u64); 31] {
        [
            ("rx_frames", self.rx_frames),
            ("tx_frames", self.tx_frames),
            ("malformed_total", self.malformed.iter().sum::<u64>()),
            ("stale_epoch", self.stale_epoch),
            ("stale_slot_frames", self.stale_slot_frames),
            ("duplicate_requests", self.duplicate_requests),
            ("requests_sent", self.requests_sent),
            ("echoes_verified", self.echoes_verified),
            ("echo_mismatches", self.echo_mismatches),
            ("echo_missing", self.echo_missing),
            ("lost_by_order", self.lost_by_order),
            ("lost_by_patience", self.lost_by_patience),
            ("gaps_seen", self.gaps_seen),
            ("probes_sent", self.probes_sent),
            ("reversals", self.reversals),
            ("retries", self.retries),
            ("refusals_received", self.refusals_received),
            ("commits_sent", self.commits_sent),
            ("transfers_applied", self.transfers_applied),
            ("transfers_committed", self.transfers_committed),
            ("transfers_reversed", self.transfers_reversed),
            ("refusals_sent", self.refusals_sent),
            ("overruns", self.overruns),
            ("protocol_violations", self.protocol_violations),
            ("ticks_sent", self.ticks_sent),
            ("rtt_samples", self.rtt_samples),
            ("unreachable_declared", self.unreachable_declared),
            ("peer_restarts", self.peer_restarts),
            ("presumed_commits", self.presumed_commits),
            ("completions_ok", self.completions_ok),
            ("completions_err", self.completions_err),
        ]
    }
}

/// A snapshot of a link for status displays and invariant checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkStatus {
    pub up: bool,
    pub unreachable: bool,
    pub knowledge: Knowledge,
    pub role: Role,
    pub epoch: u32,
    pub peer_epoch: u32,
    pub peer_id: u64,
    pub srtt: Nanos,
    pub round: u64,
    pub round_len: Nanos,
    /// Slots in use towards the peer (min of both ends' counts).
    pub active_slots: u16,
    /// Credits the peer advertised, and how many this end holds.
    pub peer_credits: u16,
    pub credits_in_use: u16,
    /// Tentative transfers held here for the peer, and the credits offered.
    pub tentative: u16,
    pub receive_credits: u16,
    pub queued_verbs: usize,
    /// While the link is not up: why, as the last frames it dropped tell
    /// ([`DownReason`]), once [`DOWN_REASON_FRAMES`] in a row told it.
    pub down_reason: Option<DownReason>,
    /// How many frames in a row told `down_reason`.
    pub down_reason_frames: u32,
}

/// Things the node shares with all its links while a link handles an input.
pub(crate) struct Shared<'a, O, M> {
    pub memory: &'a mut M,
    pub events: &'a mut VecDeque<Event>,
    pub observer: &'a mut O,
    pub epoch: u32,
    pub node_id: u64,
}

/// The exchange a frame belongs to: the link's ticks, or one slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Exchange {
    Tick,
    Slot(u16),
}

/// A tick sent and not yet reflected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Outstanding {
    context: [u8; SLICE],
    sent_at: Nanos,
    order: u32,
}

/// What kind of frame the link sends next, for its place in the order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sent {
    /// Bring-up: no place in the order.
    Hello,
    /// Answers the peer's frame; owed nothing.
    Answer,
    /// Owed an answer by the peer.
    Owed(Exchange),
}

/// What became of a verb offered to a slot.
enum Start {
    /// Its REQUEST for this slot is in the buffer.
    Sent(usize, u16),
    /// No slot or credit: it waits at the head of the queue.
    NoSlot,
    /// Completed with an error or parked for a later round.
    Parked,
}

const HELLO_LEN: usize = 8 + 2 + 2 + 1;
/// While a peer does not answer, HELLOs after the first
/// `unreachable_after_rounds` come ever less often: the wait doubles each
/// time, up to this (or `hello_interval`, if longer). The peer's own HELLO
/// is answered at once, so only a peer whose first HELLO is lost waits.
pub const HELLO_BACKOFF_LIMIT: Nanos = 1_000_000_000;

/// What a received frame was for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Received {
    /// The link's own (or dropped): nothing more to do.
    Own,
    /// A fabric frame from the peer, accepted by the link (epochs checked,
    /// its place in the order noted); its payload is the fabric's.
    Fabric(Transition),
}

/// Unanswered probes after which a link is suspected dead: new verbs take
/// another path while one exists, and its transfers in doubt are resolved
/// over it. About four round trips after the last frame heard.
const SUSPECT_AFTER_PROBES: u32 = 2;
/// Silent rounds after which a link is suspected dead.
pub(crate) const SUSPECT_AFTER_ROUNDS: u32 = 2;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Link {
    index: u16,
    cfg: LinkConfig,

    up: bool,
    unreachable: bool,
    knowledge: Knowledge,
    role: Role,
    peer_epoch: u32,
    peer_id: u64,
    peer_slots: u16,
    peer_credits: u16,
    peer_max_class: u8,
    hello_due: bool,
    next_hello: Nanos,
    /// HELLOs sent since the link was last up (or since it was created).
    unanswered_hellos: u32,
    /// While up, the peer said hello as if it had not heard this end: it
    /// declared the link down, so the way to it is broken. Cleared by any
    /// other frame of the peer's.
    peer_lost_us: bool,
    /// An incarnation of the peer known dead from another path: its
    /// HELLOs, late, must not bring the link up again.
    dead_epoch: u32,
    /// When the peer was last heard, and whether a minimum round has
    /// passed since (as of the last `handle_timeout`): unanswered probes
    /// mean a dead link only then, not while the peer is merely
    /// descheduled for less than the configured round.
    last_heard_at: Nanos,
    quiet_for_a_round: bool,

    srtt: Nanos,
    round: u64,
    round_started: Nanos,
    peer_round_len: Nanos,
    heard_this_round: bool,
    sent_this_round: bool,
    silent_rounds: u32,
    tick_due: bool,
    tick_no: u32,
    tick_outstanding: Option<Outstanding>,
    /// The latest tick to reflect (its TOCK waits in `answers`).
    tock_context: [u8; SLICE],
    tock_queued: bool,

    /// Order number of the last frame sent since the peer's incarnation
    /// became known (0: none).
    tx_order: u32,
    /// Highest order number received from the peer (0: none).
    rx_high: u32,
    /// Answers owed to the peer, by the order number of the frame each
    /// answers: sent strictly in that order, so that `seen` never runs
    /// ahead of an answer still to go.
    answers: VecDeque<(u32, Exchange)>,
    /// Frames sent that are owed an answer, by order number, oldest first;
    /// entries whose answer came are skipped when reached.
    awaiting: Unhashed<VecDeque<(u32, Exchange)>>,
    /// Live entries of `awaiting`.
    owed: Unhashed<u16>,
    /// When the newest frame owed an answer was sent: the probe's clock.
    last_owed_at: Nanos,
    /// Probes sent since the peer was last heard (each waits twice as long).
    unanswered_probes: u32,
    probe_due: bool,
    /// A gap in the peer's order was seen: tell it, even if nothing else goes.
    gap_notice_due: bool,
    /// Mean deviation of the RTT samples.
    rttvar: Nanos,

    senders: Vec<SenderSlot>,
    idle: Vec<u16>,
    commit_candidates: Vec<u16>,
    credits_in_use: u16,
    /// Every verb of this link, queued or on a slot, stored once and named
    /// by index so that queues and slots move four bytes, not a kilobyte.
    verbs: Vec<Pending>,
    free_verbs: Vec<u32>,
    ready: VecDeque<u32>,
    backoff: VecDeque<u32>,
    /// Verbs refused `Locked` that go again once every commit this end
    /// owes has been sent.
    after_commits: VecDeque<u32>,
    sender_tx: VecDeque<u16>,

    receivers: Vec<ReceiverSlot>,
    tentative: u16,

    /// Whether `srtt` is measured yet (else it is `initial_rtt`).
    rtt_measured: bool,
    stats: Unhashed<LinkStats>,
    /// While not up: the reason the last frame dropped for one gave, and
    /// how many in a row gave it (recorded, never acted on).
    down_reason: Unhashed<Option<(DownReason, u32)>>,
}

impl Link {
    pub fn new(index: u16, cfg: LinkConfig) -> Link {
        let slots = usize::from(cfg.slots);
        Link {
            index,
            cfg,
            up: false,
            unreachable: false,
            knowledge: Knowledge::Nothing,
            role: Role::Alice,
            peer_epoch: 0,
            peer_id: 0,
            peer_slots: 0,
            peer_credits: 0,
            peer_max_class: 0,
            hello_due: true,
            next_hello: 0,
            unanswered_hellos: 0,
            peer_lost_us: false,
            dead_epoch: 0,
            last_heard_at: 0,
            quiet_for_a_round: false,
            srtt: cfg.initial_rtt,
            round: 0,
            round_started: 0,
            peer_round_len: 0,
            heard_this_round: false,
            sent_this_round: false,
            silent_rounds: 0,
            tick_due: false,
            tick_no: 0,
            tick_outstanding: None,
            tock_context: [0; SLICE],
            tock_queued: false,
            tx_order: 0,
            rx_high: 0,
            answers: VecDeque::with_capacity(slots + 1),
            awaiting: Unhashed(VecDeque::with_capacity(2 * slots + 2)),
            owed: Unhashed(0),
            last_owed_at: 0,
            unanswered_probes: 0,
            probe_due: false,
            gap_notice_due: false,
            rttvar: 0,
            senders: vec![SenderSlot::IDLE; slots],
            idle: Vec::with_capacity(slots),
            commit_candidates: Vec::with_capacity(2 * slots),
            credits_in_use: 0,
            verbs: Vec::with_capacity(cfg.submit_queue + slots),
            free_verbs: Vec::with_capacity(cfg.submit_queue + slots),
            ready: VecDeque::with_capacity(cfg.submit_queue),
            backoff: VecDeque::with_capacity(cfg.submit_queue),
            after_commits: VecDeque::with_capacity(cfg.submit_queue),
            sender_tx: VecDeque::with_capacity(slots),
            receivers: vec![
                ReceiverSlot {
                    seq: 0,
                    state: RecvState::Fresh,
                    undo: Undo::default(),
                    response: [0; MAX_FRAME],
                    response_len: 0,
                    queued: false,
                };
                slots
            ],
            tentative: 0,
            rtt_measured: false,
            stats: Unhashed::default(),
            down_reason: Unhashed(None),
        }
    }

    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    pub fn status(&self, epoch: u32) -> LinkStatus {
        LinkStatus {
            up: self.up,
            unreachable: self.unreachable,
            knowledge: self.knowledge,
            role: self.role,
            epoch,
            peer_epoch: self.peer_epoch,
            peer_id: self.peer_id,
            srtt: self.srtt,
            round: self.round,
            round_len: self.round_len(),
            active_slots: self.active_slots(),
            peer_credits: self.peer_credits,
            credits_in_use: self.credits_in_use,
            tentative: self.tentative,
            receive_credits: self.cfg.receive_credits,
            queued_verbs: self.queued_verbs(),
            down_reason: self.down_reason(),
            down_reason_frames: self.down_reason.map_or(0, |(_, n)| n),
        }
    }

    /// Why the link is not coming up, once [`DOWN_REASON_FRAMES`] frames
    /// in a row told the same.
    pub fn down_reason(&self) -> Option<DownReason> {
        match *self.down_reason {
            Some((r, n)) if !self.up && n >= DOWN_REASON_FRAMES => Some(r),
            _ => None,
        }
    }

    /// A frame dropped for `reason`: recorded while the link is not up (a
    /// stray frame while it is up says nothing of why it would not come
    /// up later).
    pub fn note_down_reason(&mut self, reason: DownReason) {
        if self.up {
            return;
        }
        *self.down_reason = match *self.down_reason {
            Some((r, n)) if r == reason => Some((r, n.saturating_add(1))),
            _ => Some((reason, 1)),
        };
    }

    pub fn max_class(&self) -> u8 {
        self.cfg.max_class
    }

    fn active_slots(&self) -> u16 {
        self.cfg.slots.min(self.peer_slots)
    }

    fn round_len(&self) -> Nanos {
        let own = self
            .srtt
            .saturating_mul(u64::from(self.cfg.rtt_multiplier))
            .max(self.cfg.min_round);
        match self.role {
            Role::Alice => own,
            // Bob hears Alice's ticks once per Alice round at most; counting
            // silence in shorter rounds would declare a live peer dead.
            Role::Bob => own.max(self.peer_round_len),
        }
    }

    // ----- submission -------------------------------------------------------

    /// Queues `p`; false if the submission queue is full.
    pub fn submit<O: Observer, M: Store>(
        &mut self,
        id: VerbId,
        verb: &Verb,
        sh: &mut Shared<'_, O, M>,
    ) -> bool {
        if self.unreachable {
            self.complete(id, Err(VerbError::Unreachable), sh);
            return true;
        }
        if self.queued_verbs() >= self.cfg.submit_queue {
            return false;
        }
        // Live verbs never exceed submit_queue + slots, the store's capacity.
        // Fields are written in place: a verb is copied once, into the store.
        let v = match self.free_verbs.pop() {
            Some(v) => {
                let p = &mut self.verbs[v as usize];
                p.id = id;
                p.verb.assign(verb);
                p.attempts = 0;
                p.not_before_round = 0;
                p.retried_after_commits = false;
                v
            }
            None => {
                self.verbs.push(Pending {
                    id,
                    verb: *verb,
                    attempts: 0,
                    not_before_round: 0,
                    retried_after_commits: false,
                });
                (self.verbs.len() - 1) as u32
            }
        };
        self.ready.push_back(v);
        true
    }

    /// Verbs accepted and not on a slot.
    fn queued_verbs(&self) -> usize {
        self.ready.len() + self.backoff.len() + self.after_commits.len()
    }

    /// Completes stored verb `v` and frees its place.
    fn finish<O: Observer, M: Store>(
        &mut self,
        v: u32,
        result: Result<Output, VerbError>,
        sh: &mut Shared<'_, O, M>,
    ) {
        self.free_verbs.push(v);
        self.complete(self.verbs[v as usize].id, result, sh);
    }

    fn complete<O: Observer, M: Store>(
        &mut self,
        id: VerbId,
        result: Result<Output, VerbError>,
        sh: &mut Shared<'_, O, M>,
    ) {
        if result.is_ok() {
            self.stats.completions_ok += 1;
        } else {
            self.stats.completions_err += 1;
        }
        sh.events.push_back(Event::Completed {
            link: self.index,
            id,
            result,
        });
    }

    // ----- time -------------------------------------------------------------

    pub fn poll_timeout(&self) -> Nanos {
        let round_end = self.round_started.saturating_add(self.round_len());
        if !self.up {
            round_end.min(self.next_hello)
        } else if let Some(probe) = self.probe_at() {
            round_end.min(probe)
        } else {
            round_end
        }
    }

    /// When to send a tick that makes the peer answer with its `seen`, if a
    /// frame is owed an answer on an ordered link. The probe is no timeout:
    /// an answer merely late still arrives before the probe's (the peer
    /// answers in order), so its timing costs frames, never a spurious
    /// reversal. It comes about one RTT after the newest owed frame, so a
    /// loss on an idle link is found within about two round trips, and
    /// waits twice as long after each probe the peer left unanswered.
    fn probe_at(&self) -> Option<Nanos> {
        if !self.cfg.ordered || *self.owed == 0 {
            return None;
        }
        let delay = self
            .srtt
            .saturating_add(2 * self.rttvar)
            .max(self.srtt + self.srtt / 4)
            .saturating_mul(1 << self.unanswered_probes.min(6))
            .min(self.round_len());
        Some(self.last_owed_at.saturating_add(delay))
    }

    pub fn handle_timeout<O: Observer, M: Store>(&mut self, now: Nanos, sh: &mut Shared<'_, O, M>) {
        self.quiet_for_a_round = now.saturating_sub(self.last_heard_at) >= self.cfg.min_round;
        if !self.up && now >= self.next_hello {
            self.hello_due = true;
            self.unanswered_hellos += 1;
            self.next_hello = now.saturating_add(self.hello_wait());
            // A peer that never answers bring-up is as unreachable as one
            // that fell silent: fail what is queued rather than hold it.
            if !self.unreachable && self.unanswered_hellos > self.cfg.unreachable_after_rounds {
                self.fail_queued(sh);
                self.unreachable = true;
                sh.events.push_back(Event::Link {
                    link: self.index,
                    change: LinkChange::Unreachable,
                });
            }
        }
        if self.up && self.probe_at().is_some_and(|at| now >= at) {
            self.probe_due = true;
        }
        if now >= self.round_started.saturating_add(self.round_len()) {
            // One round per call: a stalled caller must not count its own
            // stall as many silent rounds of the peer.
            self.round_started = now;
            self.end_round(sh);
        }
    }

    /// How long after a HELLO the next goes, while the peer does not answer.
    fn hello_wait(&self) -> Nanos {
        let interval = self.cfg.hello_interval;
        let doublings = self
            .unanswered_hellos
            .saturating_sub(self.cfg.unreachable_after_rounds)
            .min(30);
        interval
            .saturating_mul(1 << doublings)
            .min(HELLO_BACKOFF_LIMIT.max(interval))
    }

    /// Everything that is counted in round trips happens here.
    fn end_round<O: Observer, M: Store>(&mut self, sh: &mut Shared<'_, O, M>) {
        let heard = core::mem::replace(&mut self.heard_this_round, false);
        let sent = core::mem::replace(&mut self.sent_this_round, false);
        self.round += 1;
        if !self.up {
            return;
        }
        self.silent_rounds = if heard { 0 } else { self.silent_rounds + 1 };
        if self.silent_rounds >= self.cfg.unreachable_after_rounds {
            self.declare_unreachable(sh);
            return;
        }
        if self.role == Role::Alice && !sent {
            self.tick_due = true;
        }
        if !self.cfg.ordered {
            let patience = u64::from(self.cfg.echo_patience_rounds);
            for s in 0..self.active_slots() {
                let slot = &self.senders[usize::from(s)];
                if self.round >= slot.sent_round + patience && self.give_up_on(s) {
                    self.stats.lost_by_patience += 1;
                }
            }
        }
        while let Some(&v) = self.backoff.front() {
            if self.verbs[v as usize].not_before_round > self.round {
                break;
            }
            self.backoff.pop_front();
            self.ready.push_back(v);
        }
    }

    /// The last frame sent on slot `s` is taken for lost (or the link came
    /// back after an outage): a transfer awaiting its echo is reversed, an
    /// unconfirmed decision is sent again. True if the slot had one.
    fn give_up_on(&mut self, s: u16) -> bool {
        let slot = &mut self.senders[usize::from(s)];
        match slot.phase {
            SendPhase::AwaitEcho => {
                slot.phase = SendPhase::Reversing(ReverseReason::EchoMissing);
                self.stats.echo_missing += 1;
            }
            SendPhase::Reversing(_) => {}
            SendPhase::Committed if slot.commit_sent => {}
            SendPhase::Committed | SendPhase::Idle => return false,
        }
        self.queue_sender(s);
        true
    }

    /// Every frame owed an answer whose order number is at most `seen` has
    /// had it, or was lost with its answer: the peer answers in order and
    /// has seen a later frame (or this one, unanswered).
    fn find_losses(&mut self, seen: u32) {
        while let Some(&(order, exchange)) = self.awaiting.front() {
            if order_after(order, seen) {
                break;
            }
            self.awaiting.pop_front();
            let lost = match exchange {
                Exchange::Tick => match self.tick_outstanding {
                    Some(t) if t.order == order => {
                        self.tick_outstanding = None;
                        true
                    }
                    _ => false,
                },
                Exchange::Slot(s) if self.senders[usize::from(s)].awaiting == order => {
                    self.senders[usize::from(s)].awaiting = 0;
                    self.give_up_on(s);
                    true
                }
                Exchange::Slot(_) => false,
            };
            if lost {
                self.one_less_owed();
                self.stats.lost_by_order += 1;
            }
        }
    }

    /// Frame `order` of `exchange` was just sent and is owed an answer.
    fn owe(&mut self, order: u32, exchange: Exchange, now: Nanos) {
        if !self.cfg.ordered {
            return;
        }
        *self.owed += 1;
        self.last_owed_at = now;
        // Answered entries at the front are dead weight: drop them so the
        // queue stays within its capacity.
        while let Some(&(o, e)) = self.awaiting.front() {
            let live = match e {
                Exchange::Tick => self.tick_outstanding.is_some_and(|t| t.order == o),
                Exchange::Slot(s) => self.senders[usize::from(s)].awaiting == o,
            };
            if live {
                break;
            }
            self.awaiting.pop_front();
        }
        self.awaiting.push_back((order, exchange));
    }

    /// Frame `order` of `exchange`, owed an answer, has just been sent.
    fn sent_owed(&mut self, order: u32, exchange: Exchange, now: Nanos) {
        match exchange {
            Exchange::Tick => {
                if let Some(t) = &mut self.tick_outstanding {
                    t.order = order;
                }
            }
            Exchange::Slot(s) => {
                if !self.cfg.ordered {
                    return;
                }
                self.answered(s);
                self.senders[usize::from(s)].awaiting = order;
            }
        }
        self.owe(order, exchange, now);
    }

    /// The outstanding tick is answered or replaced.
    fn settle_tick(&mut self) -> Option<Outstanding> {
        let t = self.tick_outstanding.take()?;
        if self.cfg.ordered && t.order != 0 {
            self.one_less_owed();
        }
        Some(t)
    }

    /// Records a frame's place in the peer's order; a jump means frames of
    /// the peer's were lost on the way here.
    fn note_order(&mut self, order: u32) {
        if order_after(order, self.rx_high.wrapping_add(1)) {
            self.stats.gaps_seen += 1;
            self.gap_notice_due = self.cfg.ordered;
        }
        if order_after(order, self.rx_high) {
            self.rx_high = order;
        }
    }

    /// The highest order number of the peer's frames that this end has
    /// received and, where one was due, answered: answers go out in order,
    /// so it stops short of the first answer still queued.
    fn seen(&self) -> u32 {
        self.answers
            .front()
            .map_or(self.rx_high, |&(order, _)| order.wrapping_sub(1))
    }

    /// The answer owed to slot `s`'s last frame arrived.
    fn answered(&mut self, s: u16) {
        let slot = &mut self.senders[usize::from(s)];
        if slot.awaiting != 0 {
            // Answers come in order: this one is almost always the oldest.
            if self.awaiting.front() == Some(&(slot.awaiting, Exchange::Slot(s))) {
                self.awaiting.pop_front();
            }
            slot.awaiting = 0;
            self.one_less_owed();
        }
    }

    fn one_less_owed(&mut self) {
        *self.owed -= 1;
        if *self.owed == 0 {
            // Meaningless until the next frame owed an answer: cleared so
            // that it does not tell otherwise equal states apart.
            self.last_owed_at = 0;
        }
    }

    /// Forgets every frame owed an answer (the link restarts its order).
    fn forget_owed(&mut self) {
        self.awaiting.clear();
        *self.owed = 0;
        self.last_owed_at = 0;
        self.unanswered_probes = 0;
        self.probe_due = false;
        self.tick_outstanding = None;
        for slot in &mut self.senders {
            slot.awaiting = 0;
        }
    }

    fn declare_unreachable<O: Observer, M: Store>(&mut self, sh: &mut Shared<'_, O, M>) {
        self.up = false;
        self.unreachable = true;
        self.knowledge = Knowledge::KnowYou;
        self.stats.unreachable_declared += 1;
        self.hello_due = true;
        self.unanswered_hellos = 0;
        self.fail_queued(sh);
        sh.events.push_back(Event::Link {
            link: self.index,
            change: LinkChange::Unreachable,
        });
    }

    /// Verbs never sent cannot have had an effect: fail them now rather than
    /// hold their issuers for a link that may not come back. Verbs in flight
    /// stay in doubt until the link or the peer's next incarnation resolves
    /// them.
    fn fail_queued<O: Observer, M: Store>(&mut self, sh: &mut Shared<'_, O, M>) {
        while let Some(v) = self.ready.pop_front() {
            self.finish(v, Err(VerbError::Unreachable), sh);
        }
        while let Some(v) = self.backoff.pop_front() {
            self.finish(v, Err(VerbError::Unreachable), sh);
        }
        while let Some(v) = self.after_commits.pop_front() {
            self.finish(v, Err(VerbError::Unreachable), sh);
        }
    }

    fn sample_rtt(&mut self, sent_at: Nanos, now: Nanos) {
        let sample = now.saturating_sub(sent_at).max(1);
        if self.rtt_measured {
            self.rttvar = (self.rttvar * 3 + self.srtt.abs_diff(sample)) / 4;
            self.srtt = (self.srtt * 7 + sample) / 8;
        } else {
            self.rttvar = sample / 2;
            self.srtt = sample;
        }
        self.rtt_measured = true;
        self.stats.rtt_samples += 1;
    }

    // ----- receive ----------------------------------------------------------

    pub fn handle_frame<O: Observer, M: Store>(
        &mut self,
        bytes: &[u8],
        now: Nanos,
        sh: &mut Shared<'_, O, M>,
    ) -> Received {
        self.stats.rx_frames += 1;
        let frame = match Frame::parse(bytes) {
            Ok(f) if f.context.class > self.cfg.max_class => {
                self.count_malformed(Malformed::BadClass);
                return Received::Own;
            }
            Ok(f) => f,
            Err(m) => {
                self.count_malformed(m);
                if let Some(reason) = DownReason::of_malformed(m, bytes) {
                    self.note_down_reason(reason);
                }
                return Received::Own;
            }
        };
        if frame.context.transition == Transition::Hello {
            self.handle_hello(&frame, sh);
            return Received::Own;
        }
        if self.peer_epoch == 0
            || frame.sender_epoch != self.peer_epoch
            || frame.receiver_epoch != sh.epoch
        {
            self.stats.stale_epoch += 1;
            return Received::Own;
        }
        if let Err(m) = self.check_agreed_bits(&frame.context) {
            self.count_malformed(m);
            return Received::Own;
        }
        self.heard_this_round = true;
        self.silent_rounds = 0;
        self.unanswered_probes = 0;
        self.peer_lost_us = false;
        self.last_heard_at = now;
        self.quiet_for_a_round = false;
        if !self.up {
            // Only an end that is up sends anything but HELLO, so this frame
            // proves the peer knows that we know it.
            self.go_up(sh);
        }
        self.note_order(frame.order);
        let mut received = Received::Own;
        match frame.context.transition {
            Transition::Hello => unreachable!("handled above"),
            t if t.machine() == Machine::Fabric => received = Received::Fabric(t),
            Transition::Tick => self.handle_tick(&frame),
            Transition::Tock if !verb::all_zero(&frame.payload[SLICE..]) => {
                self.count_malformed(Malformed::BadPayload)
            }
            Transition::Tock => match self.tick_outstanding {
                Some(t) if frame.payload[..SLICE] == wire::reflect(&t.context) => {
                    self.settle_tick();
                    self.sample_rtt(t.sent_at, now);
                }
                _ => self.stats.stale_slot_frames += 1,
            },
            t if t.from_initiator() => self.handle_as_target(&frame, sh),
            _ => self.handle_as_initiator(&frame, now, sh),
        }
        // After the frame's own answer, if it was one: whatever the peer
        // has seen and not answered is lost.
        if self.cfg.ordered {
            self.find_losses(frame.seen);
        }
        received
    }

    /// Bits a frame after bring-up must carry as both ends agreed them: the
    /// sender is up (knowledge 2) and has the other role; HELLO, TICK,
    /// COMMIT and REVERSE are one slice-octet long (class 0).
    fn check_agreed_bits(&self, ctx: &Context) -> Result<(), Malformed> {
        if ctx.knowledge != Knowledge::KnowYouKnowMe || ctx.role == self.role {
            return Err(Malformed::Inconsistent);
        }
        let smallest = matches!(
            ctx.transition,
            Transition::Tick | Transition::Commit | Transition::Reverse
        );
        if smallest && ctx.class != 0 {
            return Err(Malformed::Inconsistent);
        }
        Ok(())
    }

    fn handle_tick(&mut self, frame: &Frame<'_>) {
        if !verb::all_zero(&frame.payload[8..]) {
            return self.count_malformed(Malformed::BadPayload);
        }
        if self.role == Role::Bob {
            self.peer_round_len =
                u64::from_be_bytes(frame.payload[..8].try_into().expect("eight bytes"));
        }
        self.tock_context = frame.raw_context;
        if !self.tock_queued {
            self.tock_queued = true;
            self.answers.push_back((frame.order, Exchange::Tick));
        }
    }

    fn count_malformed(&mut self, m: Malformed) {
        let i = Malformed::ALL.iter().position(|&x| x == m).expect("listed");
        self.stats.malformed[i] += 1;
    }

    fn handle_hello<O: Observer, M: Store>(
        &mut self,
        frame: &Frame<'_>,
        sh: &mut Shared<'_, O, M>,
    ) {
        if frame.context.class != 0 {
            return self.count_malformed(Malformed::Inconsistent);
        }
        let p = frame.payload;
        if !verb::all_zero(&p[HELLO_LEN..]) || frame.context.field != 0 {
            return self.count_malformed(Malformed::BadPayload);
        }
        let peer_id = u64::from_be_bytes(p[..8].try_into().expect("eight bytes"));
        let slots = u16::from_be_bytes([p[8], p[9]]);
        let credits = u16::from_be_bytes([p[10], p[11]]);
        let max_class = p[12];
        if slots == 0 || credits == 0 || credits > slots || max_class > wire::MAX_CODEC_CLASS {
            return self.count_malformed(Malformed::BadPayload);
        }
        let epoch = frame.sender_epoch;
        if epoch < self.peer_epoch || epoch <= self.dead_epoch {
            self.stats.stale_epoch += 1;
            if epoch < self.peer_epoch {
                self.note_down_reason(DownReason::PeerEpochWentBack);
            }
            return;
        }
        if (epoch, peer_id) == (sh.epoch, sh.node_id) {
            // Neither end can take a role against its own identity: each
            // drops the other's HELLOs that name it (R6), for good.
            self.note_down_reason(DownReason::SameIdentity);
        } else if frame.receiver_epoch > sh.epoch {
            // The peer heard from a later incarnation of this end than this
            // one: this end's epoch went back, and the peer drops its
            // HELLOs as stale (R5) for good.
            self.note_down_reason(DownReason::EpochWentBack);
        }
        // A HELLO that knows this incarnation took its role against it.
        let peer_role = if (sh.epoch, sh.node_id) < (epoch, peer_id) {
            Role::Bob
        } else {
            Role::Alice
        };
        let knows_us =
            frame.receiver_epoch == sh.epoch && frame.context.knowledge > Knowledge::Nothing;
        if knows_us && frame.context.role != peer_role {
            return self.count_malformed(Malformed::Inconsistent);
        }
        if epoch > self.peer_epoch {
            if self.peer_epoch != 0 {
                self.peer_restarted(sh);
            }
            self.peer_epoch = epoch;
            self.peer_id = peer_id;
            self.peer_slots = slots;
            self.peer_credits = credits;
            self.peer_max_class = max_class;
            self.role = match peer_role {
                Role::Bob => Role::Alice,
                Role::Alice => Role::Bob,
            };
            self.reset_sender_slots();
            self.restart_order();
            self.knowledge = Knowledge::KnowYou;
        }
        self.heard_this_round = true;
        self.silent_rounds = 0;
        self.peer_lost_us = self.up && frame.context.knowledge < Knowledge::KnowYouKnowMe;
        if frame.receiver_epoch == sh.epoch {
            self.knowledge = Knowledge::KnowYouKnowMe;
            if !self.up {
                self.go_up(sh);
            }
            if frame.context.knowledge < Knowledge::KnowYouKnowMe {
                self.hello_due = true;
            }
        } else {
            self.hello_due = true;
        }
    }

    /// A new peer incarnation: both ends number their frames from 1 again.
    fn restart_order(&mut self) {
        self.forget_owed();
        self.tx_order = 0;
        self.rx_high = 0;
        self.answers.clear();
        self.tock_queued = false;
        self.gap_notice_due = false;
        for r in &mut self.receivers {
            r.queued = false;
        }
    }

    fn reset_sender_slots(&mut self) {
        self.idle.clear();
        self.commit_candidates.clear();
        self.sender_tx.clear();
        self.credits_in_use = 0;
        self.senders.fill(SenderSlot::IDLE);
        for s in (0..self.active_slots()).rev() {
            self.idle.push(s);
        }
    }

    fn go_up<O: Observer, M: Store>(&mut self, sh: &mut Shared<'_, O, M>) {
        self.up = true;
        *self.down_reason = None;
        self.unreachable = false;
        self.unanswered_hellos = 0;
        self.knowledge = Knowledge::KnowYouKnowMe;
        self.silent_rounds = 0;
        // Resynchronise: transfers whose echo never came are reversed (the
        // in-doubt rule), undelivered decisions are sent again.
        self.forget_owed();
        for s in 0..self.active_slots() {
            self.give_up_on(s);
        }
        sh.events.push_back(Event::Link {
            link: self.index,
            change: LinkChange::Up,
        });
    }

    /// The peer came back as a new incarnation: settle everything the old one
    /// left here by the rules of `docs/SEMANTICS.md`.
    fn peer_restarted<O: Observer, M: Store>(&mut self, sh: &mut Shared<'_, O, M>) {
        self.stats.peer_restarts += 1;
        self.up = false;
        self.unreachable = false;
        for s in 0..self.senders.len() {
            let slot = &mut self.senders[s];
            let phase = slot.phase;
            let pending = slot.pending.take();
            if let (SendPhase::AwaitEcho | SendPhase::Reversing(_), Some(v)) = (phase, pending) {
                release_local(&self.verbs[v as usize].verb, None, sh.memory);
                self.finish(v, Err(VerbError::PeerRestarted), sh);
            }
        }
        // Tentative transfers of the dead initiator: it may have told its
        // issuer `Ok` (echo verified) and only an `Err` is ever told after a
        // confirmed reversal, so committing is consistent with every
        // completion it can have given.
        for s in 0..self.receivers.len() {
            let r = &mut self.receivers[s];
            if r.state == RecvState::Tentative {
                sh.memory.commit(&r.undo);
                sh.observer
                    .committed(self.index, self.peer_epoch, s as u16, r.seq);
                self.stats.presumed_commits += 1;
                self.stats.transfers_committed += 1;
            }
            r.seq = 0;
            r.state = RecvState::Fresh;
        }
        self.restart_order();
        self.tentative = 0;
        sh.events.push_back(Event::Link {
            link: self.index,
            change: LinkChange::PeerRestarted,
        });
    }

    // ----- target side ------------------------------------------------------

    fn handle_as_target<O: Observer, M: Store>(
        &mut self,
        frame: &Frame<'_>,
        sh: &mut Shared<'_, O, M>,
    ) {
        let ctx = frame.context;
        let s = ctx.slot();
        if s >= self.cfg.slots {
            return self.count_malformed(Malformed::Inconsistent);
        }
        if ctx.transition != Transition::Request && !verb::all_zero(frame.payload) {
            return self.count_malformed(Malformed::BadPayload);
        }
        let si = usize::from(s);
        let seq = ctx.seq();
        let (last, state) = (self.receivers[si].seq, self.receivers[si].state);
        let ahead = seq.wrapping_sub(last);
        let t = ctx.transition;
        if ahead == 0 && state == RecvState::Fresh {
            self.stats.stale_slot_frames += 1;
            return;
        }
        match (t, ahead) {
            (Transition::Request, 0) => {
                self.stats.duplicate_requests += 1;
                self.queue_receiver(s, frame.order);
            }
            (Transition::Request | Transition::Reverse, 1) => {
                if !self.settle_previous(s, ctx.previous_committed, sh) {
                    return;
                }
                if t == Transition::Request {
                    self.apply_request(s, frame, sh);
                } else {
                    // The request never arrived: remember its number so a late
                    // copy of it is recognised and never applied.
                    let r = &mut self.receivers[si];
                    r.seq = seq;
                    r.state = RecvState::Reversed;
                    self.respond(s, frame, Transition::ReverseAck, |_| {}, sh.epoch);
                }
            }
            (Transition::Commit, 0) => match state {
                RecvState::Tentative => {
                    self.commit_tentative(s, sh);
                    self.respond(s, frame, Transition::CommitAck, |_| {}, sh.epoch);
                }
                RecvState::Committed => self.queue_receiver(s, frame.order),
                _ => self.stats.protocol_violations += 1,
            },
            (Transition::Reverse, 0) => match state {
                RecvState::Tentative | RecvState::Refused => {
                    if state == RecvState::Tentative {
                        self.reverse_tentative(s, sh);
                    }
                    self.receivers[si].state = RecvState::Reversed;
                    self.respond(s, frame, Transition::ReverseAck, |_| {}, sh.epoch);
                }
                RecvState::Reversed => self.queue_receiver(s, frame.order),
                _ => self.stats.protocol_violations += 1,
            },
            _ => self.stats.stale_slot_frames += 1,
        }
    }

    /// Before a new sequence number is acted on, the previous transfer on the
    /// slot must be settled; the initiator says whether it committed it.
    fn settle_previous<O: Observer, M: Store>(
        &mut self,
        s: u16,
        previous_committed: bool,
        sh: &mut Shared<'_, O, M>,
    ) -> bool {
        let state = self.receivers[usize::from(s)].state;
        match (state, previous_committed) {
            (RecvState::Tentative, true) => {
                self.commit_tentative(s, sh);
                true
            }
            (RecvState::Tentative, false) | (RecvState::Reversed | RecvState::Refused, true) => {
                self.stats.protocol_violations += 1;
                false
            }
            _ => true,
        }
    }

    fn commit_tentative<O: Observer, M: Store>(&mut self, s: u16, sh: &mut Shared<'_, O, M>) {
        let r = &mut self.receivers[usize::from(s)];
        sh.memory.commit(&r.undo);
        r.state = RecvState::Committed;
        self.tentative -= 1;
        self.stats.transfers_committed += 1;
        sh.observer.committed(self.index, self.peer_epoch, s, r.seq);
    }

    fn reverse_tentative<O: Observer, M: Store>(&mut self, s: u16, sh: &mut Shared<'_, O, M>) {
        let r = &mut self.receivers[usize::from(s)];
        sh.memory.reverse(&r.undo);
        r.state = RecvState::Reversed;
        self.tentative -= 1;
        self.stats.transfers_reversed += 1;
        sh.observer.reversed(self.index, self.peer_epoch, s, r.seq);
    }

    fn apply_request<O: Observer, M: Store>(
        &mut self,
        s: u16,
        frame: &Frame<'_>,
        sh: &mut Shared<'_, O, M>,
    ) {
        let si = usize::from(s);
        self.receivers[si].seq = frame.context.seq();
        let refusal = if self.tentative >= self.cfg.receive_credits {
            self.stats.overruns += 1;
            Some(Refusal::NoCredit)
        } else {
            match verb::decode_request(frame.payload) {
                None => Some(Refusal::Malformed),
                Some(request) => {
                    let class = frame.context.class;
                    let r = &mut self.receivers[si];
                    let payload_at = wire::HEADER_LEN;
                    let end = wire::frame_len(class) - wire::TRAILER_LEN;
                    let result_area = &mut r.response[payload_at + SLICE..end];
                    // A result that would not fit the request's class is a
                    // malformed request: reject before touching memory.
                    let fits = verb::result_fits(&request, result_area.len());
                    if !fits {
                        Some(Refusal::Malformed)
                    } else {
                        result_area.fill(0);
                        sh.memory
                            .apply(
                                &request,
                                LockOwner::target(self.index, s),
                                &mut r.undo,
                                result_area,
                            )
                            .err()
                    }
                }
            }
        };
        match refusal {
            None => {
                self.receivers[si].state = RecvState::Tentative;
                self.tentative += 1;
                self.stats.transfers_applied += 1;
                sh.observer
                    .applied(self.index, self.peer_epoch, s, frame.context.seq());
                // The result is already in place after the reflected slice.
                self.respond_in_place(s, frame, Transition::Echo, sh.epoch);
            }
            Some(why) => {
                self.receivers[si].state = RecvState::Refused;
                self.stats.refusals_sent += 1;
                self.respond(s, frame, Transition::Refuse, |p| p[0] = why as u8, sh.epoch);
            }
        }
    }

    /// Builds the cached response to `frame` on slot `s`: reflected context,
    /// then whatever `fill` writes.
    fn respond(
        &mut self,
        s: u16,
        frame: &Frame<'_>,
        transition: Transition,
        fill: impl FnOnce(&mut [u8]),
        epoch: u32,
    ) {
        let ctx = self.response_context(frame, transition);
        let peer_epoch = self.peer_epoch;
        let r = &mut self.receivers[usize::from(s)];
        let len = wire::compose(&mut r.response, &ctx, (epoch, peer_epoch), |p| {
            p[..SLICE].copy_from_slice(&wire::reflect(&frame.raw_context));
            fill(&mut p[SLICE..]);
        });
        r.response_len = len as u16;
        self.queue_receiver(s, frame.order);
    }

    /// Like `respond`, keeping the result bytes already written in the
    /// response buffer.
    fn respond_in_place(&mut self, s: u16, frame: &Frame<'_>, transition: Transition, epoch: u32) {
        let ctx = self.response_context(frame, transition);
        let peer_epoch = self.peer_epoch;
        let r = &mut self.receivers[usize::from(s)];
        let len = wire::frame_len(ctx.class);
        let f = &mut r.response[..len];
        f[..SLICE].copy_from_slice(&ctx.encode());
        f[8..12].copy_from_slice(&epoch.to_be_bytes());
        f[12..16].copy_from_slice(&peer_epoch.to_be_bytes());
        f[wire::HEADER_LEN..wire::HEADER_LEN + SLICE]
            .copy_from_slice(&wire::reflect(&frame.raw_context));
        r.response_len = len as u16;
        self.queue_receiver(s, frame.order);
    }

    fn response_context(&self, frame: &Frame<'_>, transition: Transition) -> Context {
        Context {
            class: frame.context.class,
            knowledge: Knowledge::KnowYouKnowMe,
            role: self.role,
            transition,
            previous_committed: false,
            field: frame.context.field,
        }
    }

    /// Queues slot `s`'s answer to the peer's frame `order`. An answer
    /// already queued keeps its place: it answers the later frame too.
    /// A decision that came by another path (order 0, see `resolve`) is
    /// answered that way, not on the link.
    fn queue_receiver(&mut self, s: u16, order: u32) {
        let r = &mut self.receivers[usize::from(s)];
        if order != 0 && !r.queued {
            r.queued = true;
            self.answers.push_back((order, Exchange::Slot(s)));
        }
    }

    // ----- initiator side ---------------------------------------------------

    fn handle_as_initiator<O: Observer, M: Store>(
        &mut self,
        frame: &Frame<'_>,
        now: Nanos,
        sh: &mut Shared<'_, O, M>,
    ) {
        let ctx = frame.context;
        let s = ctx.slot();
        if s >= self.active_slots() {
            return self.count_malformed(Malformed::Inconsistent);
        }
        let si = usize::from(s);
        let slot = &self.senders[si];
        let expected_phase = match ctx.transition {
            Transition::Echo | Transition::Refuse => slot.phase == SendPhase::AwaitEcho,
            Transition::CommitAck => slot.phase == SendPhase::Committed && slot.commit_sent,
            Transition::ReverseAck => matches!(slot.phase, SendPhase::Reversing(_)),
            _ => false,
        };
        if !expected_phase || ctx.seq() != slot.seq {
            self.stats.stale_slot_frames += 1;
            return;
        }
        let acknowledgement = matches!(
            ctx.transition,
            Transition::CommitAck | Transition::ReverseAck
        );
        if acknowledgement && !verb::all_zero(&frame.payload[SLICE..]) {
            // Not an answer: the decision is still owed one, and the next
            // frame that proves it lost sends it again.
            return self.count_malformed(Malformed::BadPayload);
        }
        // An answer is the class of the frame it answers.
        let reflected_ok = frame.payload[..SLICE] == wire::reflect(&slot.sent_context)
            && ctx.class == slot.sent_context[0] & 0x0F;
        if acknowledgement && !reflected_ok {
            // Acknowledges something else: the decision stays owed, as above.
            self.stats.echo_mismatches += 1;
            return;
        }
        self.answered(s);
        match ctx.transition {
            Transition::Echo => self.on_echo(s, frame, reflected_ok, now, sh),
            Transition::Refuse => {
                let why = Refusal::from_u8(frame.payload[SLICE]);
                let clean = verb::all_zero(&frame.payload[SLICE + 1..]);
                match why {
                    Some(why) if reflected_ok && clean => self.on_refuse(s, why, sh),
                    _ => self.start_reverse(s, ReverseReason::EchoMismatch),
                }
            }
            Transition::CommitAck => self.set_idle(s),
            Transition::ReverseAck => self.on_reverse_ack(s, sh),
            _ => unreachable!("an initiator frame"),
        }
    }

    fn on_echo<O: Observer, M: Store>(
        &mut self,
        s: u16,
        frame: &Frame<'_>,
        reflected_ok: bool,
        now: Nanos,
        sh: &mut Shared<'_, O, M>,
    ) {
        let si = usize::from(s);
        let v = self.senders[si]
            .pending
            .expect("a transfer awaits its echo");
        if !reflected_ok || frame.context.class != self.senders[si].class {
            return self.start_reverse(s, ReverseReason::EchoMismatch);
        }
        // The result is decoded straight into its completion event: results
        // carry their bytes inline, and this is the one place they land.
        let p = &self.verbs[v as usize];
        sh.events.push_back(Event::Completed {
            link: self.index,
            id: p.id,
            result: Ok(Output::Write),
        });
        let Some(Event::Completed {
            result: Ok(output), ..
        }) = sh.events.back_mut()
        else {
            unreachable!("just pushed")
        };
        if !verb::decode_output_into(&p.verb, &frame.payload[SLICE..], output) {
            sh.events.pop_back();
            return self.start_reverse(s, ReverseReason::EchoMismatch);
        }
        self.stats.echoes_verified += 1;
        self.stats.completions_ok += 1;
        // The decision is taken here: commit. Both ends' effects are now
        // inevitable, so the local half of a bilateral swap lands too.
        if let Output::BilateralSwap(block) = output {
            release_local(&p.verb, Some(block.as_slice()), sh.memory);
            sh.observer.local_swapped(p.id);
        }
        let sent_at = self.senders[si].sent_at;
        self.sample_rtt(sent_at, now);
        let slot = &mut self.senders[si];
        slot.pending = None;
        slot.phase = SendPhase::Committed;
        slot.commit_sent = false;
        slot.previous_committed = false;
        self.commit_candidates.push(s);
        self.free_verbs.push(v);
    }

    fn on_refuse<O: Observer, M: Store>(
        &mut self,
        s: u16,
        why: Refusal,
        sh: &mut Shared<'_, O, M>,
    ) {
        self.stats.refusals_received += 1;
        let v = self.senders[usize::from(s)]
            .pending
            .take()
            .expect("a transfer awaits its echo");
        release_local(&self.verbs[v as usize].verb, None, sh.memory);
        self.set_idle(s);
        let p = &mut self.verbs[v as usize];
        if why.is_transient() && p.attempts < self.cfg.max_attempts {
            self.stats.retries += 1;
            if why == Refusal::Locked && self.cfg.ordered && !p.retried_after_commits {
                // On an ordered link the word is most likely locked by a
                // transfer of ours whose echo came before this refusal
                // (answers come in order): a retry sent after our commits
                // reaches the target after them and finds the word free.
                // Once only: a lock held by another link's transfer waits
                // a round, like every other transient refusal.
                p.retried_after_commits = true;
                self.after_commits.push_back(v);
            } else {
                p.not_before_round = self.round + 1;
                self.backoff.push_back(v);
            }
        } else {
            self.finish(v, Err(VerbError::Refused(why)), sh);
        }
    }

    fn on_reverse_ack<O: Observer, M: Store>(&mut self, s: u16, sh: &mut Shared<'_, O, M>) {
        self.stats.reversals += 1;
        let SendPhase::Reversing(reason) = self.senders[usize::from(s)].phase else {
            unreachable!("checked by caller")
        };
        let v = self.senders[usize::from(s)]
            .pending
            .take()
            .expect("a reversing transfer keeps its verb");
        release_local(&self.verbs[v as usize].verb, None, sh.memory);
        self.set_idle(s);
        if self.verbs[v as usize].attempts < self.cfg.max_attempts {
            // As if for the first time: a fresh sequence number on whatever
            // slot is free next.
            self.stats.retries += 1;
            self.ready.push_front(v);
        } else {
            self.finish(v, Err(VerbError::Exhausted(reason)), sh);
        }
    }

    fn start_reverse(&mut self, s: u16, reason: ReverseReason) {
        self.stats.echo_mismatches += u64::from(reason == ReverseReason::EchoMismatch);
        self.senders[usize::from(s)].phase = SendPhase::Reversing(reason);
        self.queue_sender(s);
    }

    fn set_idle(&mut self, s: u16) {
        let slot = &mut self.senders[usize::from(s)];
        slot.phase = SendPhase::Idle;
        slot.previous_committed = false;
        slot.commit_sent = false;
        self.credits_in_use -= 1;
        self.idle.push(s);
    }

    fn queue_sender(&mut self, s: u16) {
        let slot = &mut self.senders[usize::from(s)];
        if !slot.queued {
            slot.queued = true;
            self.sender_tx.push_back(s);
        }
    }

    // ----- transmit ---------------------------------------------------------

    /// Writes the next frame to send into `buf` (at least [`MAX_FRAME`]
    /// bytes) and returns its length, or `None` if nothing is due.
    pub fn poll_transmit<O: Observer, M: Store>(
        &mut self,
        now: Nanos,
        buf: &mut [u8],
        sh: &mut Shared<'_, O, M>,
    ) -> Option<usize> {
        let (len, kind) = self.next_frame(now, buf, sh)?;
        self.seal_and_count(&mut buf[..len], kind, now);
        Some(len)
    }

    /// Writes a fabric frame (`transition`, `class`, payload by `fill`)
    /// with the link's epochs and its next place in the order; answers
    /// nothing and is owed nothing. The link must be up.
    pub fn send_fabric(
        &mut self,
        epoch: u32,
        now: Nanos,
        buf: &mut [u8],
        transition: Transition,
        class: u8,
        fill: impl FnOnce(&mut [u8]),
    ) -> usize {
        debug_assert!(self.up && transition.machine() == Machine::Fabric);
        let ctx = Context {
            class,
            knowledge: Knowledge::KnowYouKnowMe,
            role: self.role,
            transition,
            previous_committed: false,
            field: 0,
        };
        let len = wire::compose(buf, &ctx, (epoch, self.peer_epoch), fill);
        self.seal_and_count(&mut buf[..len], Sent::Answer, now);
        len
    }

    fn seal_and_count(&mut self, frame: &mut [u8], kind: Sent, now: Nanos) {
        if kind != Sent::Hello {
            // Every frame after bring-up takes the next place in the link's
            // order and says how far this end has seen the peer's.
            self.tx_order = match self.tx_order.wrapping_add(1) {
                0 => 1,
                n => n,
            };
            wire::stamp_order(frame, self.tx_order, self.seen());
            self.gap_notice_due = false;
            if let Sent::Owed(exchange) = kind {
                self.sent_owed(self.tx_order, exchange, now);
            }
        }
        wire::seal(frame);
        self.stats.tx_frames += 1;
        self.sent_this_round = true;
    }

    /// The next frame due, unsealed and without its order slice.
    fn next_frame<O: Observer, M: Store>(
        &mut self,
        now: Nanos,
        buf: &mut [u8],
        sh: &mut Shared<'_, O, M>,
    ) -> Option<(usize, Sent)> {
        if self.hello_due {
            self.hello_due = false;
            if !self.up {
                // Every HELLO restarts the wait for the next.
                self.next_hello = self.next_hello.max(now.saturating_add(self.hello_wait()));
            }
            return Some((self.build_hello(buf, sh), Sent::Hello));
        }
        if self.peer_epoch == 0 {
            return None;
        }
        if let Some((_, exchange)) = self.answers.pop_front() {
            return Some((self.build_answer(exchange, buf, sh), Sent::Answer));
        }
        if !self.up {
            return None;
        }
        while let Some(s) = self.sender_tx.pop_front() {
            self.senders[usize::from(s)].queued = false;
            if let Some(len) = self.build_decision(s, now, buf, sh) {
                return Some((len, Sent::Owed(Exchange::Slot(s))));
            }
        }
        if let Some(sent) = self.start_ready(now, buf, sh) {
            return Some(sent);
        }
        while let Some(s) = self.commit_candidates.pop() {
            let slot = &self.senders[usize::from(s)];
            if slot.phase == SendPhase::Committed && !slot.commit_sent {
                let len = self.build_decision(s, now, buf, sh)?;
                return Some((len, Sent::Owed(Exchange::Slot(s))));
            }
        }
        // Every commit owed has gone out: verbs refused `Locked` go now.
        if !self.after_commits.is_empty() {
            self.ready.extend(self.after_commits.drain(..));
            if let Some(sent) = self.start_ready(now, buf, sh) {
                return Some(sent);
            }
        }
        self.probe_due &= *self.owed > 0;
        if self.tick_due || self.probe_due || self.gap_notice_due {
            return Some((self.build_tick(now, buf, sh), Sent::Owed(Exchange::Tick)));
        }
        None
    }

    /// The REQUEST of the first verb in `ready` that a slot can take, if any.
    fn start_ready<O: Observer, M: Store>(
        &mut self,
        now: Nanos,
        buf: &mut [u8],
        sh: &mut Shared<'_, O, M>,
    ) -> Option<(usize, Sent)> {
        while let Some(v) = self.ready.pop_front() {
            match self.start_transfer(v, now, buf, sh) {
                Start::Sent(len, s) => return Some((len, Sent::Owed(Exchange::Slot(s)))),
                // Parked at the head of `ready` until a slot or credit frees.
                Start::NoSlot => break,
                Start::Parked => {}
            }
        }
        None
    }

    /// A TOCK or a slot's cached answer, in the order the peer's frames came.
    fn build_answer<O: Observer, M: Store>(
        &mut self,
        exchange: Exchange,
        buf: &mut [u8],
        sh: &mut Shared<'_, O, M>,
    ) -> usize {
        match exchange {
            Exchange::Tick => {
                self.tock_queued = false;
                let tick = core::mem::take(&mut self.tock_context);
                let ctx = Context::decode(&tick).expect("parsed on arrival");
                let ctx = Context {
                    transition: Transition::Tock,
                    knowledge: Knowledge::KnowYouKnowMe,
                    role: self.role,
                    ..ctx
                };
                wire::compose(buf, &ctx, (sh.epoch, self.peer_epoch), |p| {
                    p[..SLICE].copy_from_slice(&wire::reflect(&tick))
                })
            }
            Exchange::Slot(s) => {
                let r = &mut self.receivers[usize::from(s)];
                r.queued = false;
                let len = usize::from(r.response_len);
                buf[..len].copy_from_slice(&r.response[..len]);
                len
            }
        }
    }

    /// A TICK: Alice's liveness tick, a probe for an answer owed, or the
    /// notice of a gap in the peer's order (any frame carries `seen`).
    fn build_tick<O: Observer, M: Store>(
        &mut self,
        now: Nanos,
        buf: &mut [u8],
        sh: &mut Shared<'_, O, M>,
    ) -> usize {
        if self.probe_due {
            self.stats.probes_sent += 1;
            self.unanswered_probes += 1;
        }
        self.tick_due = false;
        self.probe_due = false;
        self.gap_notice_due = false;
        self.tick_no = self.tick_no.wrapping_add(1);
        let ctx = Context {
            class: 0,
            knowledge: Knowledge::KnowYouKnowMe,
            role: self.role,
            transition: Transition::Tick,
            previous_committed: false,
            field: self.tick_no,
        };
        // A tick still unanswered is superseded: its answer is no longer
        // waited for.
        self.settle_tick();
        self.tick_outstanding = Some(Outstanding {
            context: ctx.encode(),
            sent_at: now,
            order: 0,
        });
        self.stats.ticks_sent += 1;
        let round_len = self.round_len();
        wire::compose(buf, &ctx, (sh.epoch, self.peer_epoch), |p| {
            p[..8].copy_from_slice(&round_len.to_be_bytes())
        })
    }

    fn build_hello<O: Observer, M: Store>(
        &mut self,
        buf: &mut [u8],
        sh: &mut Shared<'_, O, M>,
    ) -> usize {
        let ctx = Context {
            class: 0,
            knowledge: self.knowledge,
            role: self.role,
            transition: Transition::Hello,
            previous_committed: false,
            field: 0,
        };
        let cfg = self.cfg;
        wire::compose(buf, &ctx, (sh.epoch, self.peer_epoch), |p| {
            p[..8].copy_from_slice(&sh.node_id.to_be_bytes());
            p[8..10].copy_from_slice(&cfg.slots.to_be_bytes());
            p[10..12].copy_from_slice(&cfg.receive_credits.to_be_bytes());
            p[12] = cfg.max_class;
        })
    }

    /// COMMIT or REVERSE for slot `s`, if its phase still calls for one.
    fn build_decision<O: Observer, M: Store>(
        &mut self,
        s: u16,
        now: Nanos,
        buf: &mut [u8],
        sh: &mut Shared<'_, O, M>,
    ) -> Option<usize> {
        let round = self.round;
        let ctx = self.decision_context(s)?;
        let transition = ctx.transition;
        let slot = &mut self.senders[usize::from(s)];
        slot.sent_context = ctx.encode();
        slot.sent_at = now;
        slot.sent_round = round;
        if transition == Transition::Commit {
            slot.commit_sent = true;
            self.stats.commits_sent += 1;
        }
        Some(wire::compose(
            buf,
            &ctx,
            (sh.epoch, self.peer_epoch),
            |_| {},
        ))
    }

    /// Puts stored verb `v` on a slot and writes its REQUEST, or parks or
    /// fails it.
    fn start_transfer<O: Observer, M: Store>(
        &mut self,
        v: u32,
        now: Nanos,
        buf: &mut [u8],
        sh: &mut Shared<'_, O, M>,
    ) -> Start {
        let vi = v as usize;
        let Some(class) = self.verbs[vi]
            .verb
            .class(self.cfg.max_class.min(self.peer_max_class))
        else {
            self.finish(v, Err(VerbError::TooLarge), sh);
            return Start::Parked;
        };
        // A slot whose last transfer committed carries that commit along;
        // otherwise a free slot, if a credit allows.
        let s = loop {
            match self.commit_candidates.pop() {
                Some(s) if self.senders[usize::from(s)].phase == SendPhase::Committed => {
                    break Some(s);
                }
                Some(_) => continue,
                None => break None,
            }
        };
        let s = match s {
            Some(s) => s,
            None => match self.idle.pop() {
                Some(s) if self.credits_in_use < self.peer_credits => {
                    self.credits_in_use += 1;
                    s
                }
                other => {
                    self.idle.extend(other);
                    self.ready.push_front(v);
                    return Start::NoSlot;
                }
            },
        };
        let si = usize::from(s);
        self.verbs[vi].attempts += 1;
        if let Verb::BilateralSwap {
            local_region,
            local_offset,
            len,
            ..
        } = self.verbs[vi].verb
        {
            let owner = LockOwner::initiator(self.index, s);
            if sh
                .memory
                .lock_local(local_region, local_offset, len, owner)
                .is_err()
            {
                // Give the slot back as it was and try again next round.
                if self.senders[si].phase == SendPhase::Committed {
                    self.commit_candidates.push(s);
                } else {
                    self.credits_in_use -= 1;
                    self.idle.push(s);
                }
                if self.verbs[vi].attempts < self.cfg.max_attempts {
                    self.verbs[vi].not_before_round = self.round + 1;
                    self.backoff.push_back(v);
                } else {
                    self.finish(v, Err(VerbError::LocalLocked), sh);
                }
                return Start::Parked;
            }
        }
        let round = self.round;
        let slot = &mut self.senders[si];
        slot.previous_committed = slot.phase == SendPhase::Committed;
        slot.seq = slot.seq.wrapping_add(1);
        slot.phase = SendPhase::AwaitEcho;
        slot.class = class;
        slot.commit_sent = false;
        slot.sent_at = now;
        slot.sent_round = round;
        let ctx = Context {
            class,
            knowledge: Knowledge::KnowYouKnowMe,
            role: self.role,
            transition: Transition::Request,
            previous_committed: slot.previous_committed,
            field: Context::slot_field(s, slot.seq),
        };
        slot.sent_context = ctx.encode();
        slot.pending = Some(v);
        let seq = slot.seq;
        self.stats.requests_sent += 1;
        let p = &self.verbs[vi];
        sh.observer.sent(self.index, sh.epoch, s, seq, p.id);
        let memory = &*sh.memory;
        let len = wire::compose(buf, &ctx, (sh.epoch, self.peer_epoch), |payload| {
            match p.verb {
                Verb::BilateralSwap {
                    local_region,
                    local_offset,
                    len,
                    ..
                } => memory.with_block(local_region, local_offset, len, |local| {
                    verb::encode_request(&p.verb, local, payload)
                }),
                _ => verb::encode_request(&p.verb, &[], payload),
            }
        });
        Start::Sent(len, s)
    }

    /// The COMMIT or REVERSE slot `s` owes the target, if any.
    fn decision_context(&self, s: u16) -> Option<Context> {
        let slot = &self.senders[usize::from(s)];
        let transition = match slot.phase {
            SendPhase::Committed => Transition::Commit,
            SendPhase::Reversing(_) => Transition::Reverse,
            SendPhase::Idle | SendPhase::AwaitEcho => return None,
        };
        // Knowledge as on an up link, the only place a decision is sent,
        // so a decision carried by another path while the link is down
        // reads bit for bit the same and its cached answer reflects it.
        Some(Context {
            class: 0,
            knowledge: Knowledge::KnowYouKnowMe,
            role: self.role,
            transition,
            previous_committed: slot.previous_committed,
            field: Context::slot_field(s, slot.seq),
        })
    }

    // ----- the fabric's hold on the link ------------------------------------

    pub fn is_up(&self) -> bool {
        self.up
    }

    /// The peer's node id, once a HELLO told it (0 before).
    pub fn peer_id(&self) -> u64 {
        self.peer_id
    }

    pub fn peer_epoch(&self) -> u32 {
        self.peer_epoch
    }

    pub fn round(&self) -> u64 {
        self.round
    }

    /// Largest class both ends accept.
    pub fn class_to_peer(&self) -> u8 {
        self.cfg.max_class.min(self.peer_max_class)
    }

    /// Up and heard from lately: fit for new traffic. A link that fell
    /// silent for two rounds, or left two probes unanswered with nothing
    /// heard for a minimum round (about four round trips after its last
    /// frame when verbs are in flight and rounds are short; where polling
    /// cores share CPUs, `min_round` says how long a descheduled peer may
    /// be quiet), or
    /// whose peer says hello as if it had lost this end (the way towards
    /// it is broken), is suspected; new verbs then take another path while
    /// one exists.
    pub fn is_usable(&self) -> bool {
        let probes_unanswered =
            self.unanswered_probes >= SUSPECT_AFTER_PROBES && self.quiet_for_a_round;
        self.up
            && !self.peer_lost_us
            && self.silent_rounds < SUSPECT_AFTER_ROUNDS
            && !probes_unanswered
    }

    /// Another path brought word (a HELLO of its own, from the peer) that
    /// the peer runs as incarnation `epoch`, newer than the one this link
    /// knows: the old one is dead, and what it left here is settled by the
    /// restart rules now, not when this link next hears the peer. The link
    /// then waits for the new incarnation's HELLO.
    pub fn peer_restarted_elsewhere<O: Observer, M: Store>(
        &mut self,
        epoch: u32,
        sh: &mut Shared<'_, O, M>,
    ) {
        if self.peer_epoch == 0 || epoch <= self.peer_epoch {
            return;
        }
        self.peer_restarted(sh);
        self.reset_sender_slots();
        self.dead_epoch = self.peer_epoch;
        self.peer_epoch = 0;
        self.knowledge = Knowledge::Nothing;
        self.hello_due = true;
    }

    /// Something else says the peer is reachable (a path's route): a link
    /// that gave up on bring-up takes verbs again and keeps saying hello,
    /// and declares the peer unreachable only after as many unanswered
    /// HELLOs again.
    pub fn expect_peer(&mut self) {
        if self.unreachable && !self.up {
            self.unreachable = false;
            self.unanswered_hellos = 0;
            // Backed off while nothing led to the peer: say HELLO now.
            self.next_hello = 0;
        }
    }

    /// Moves the verbs queued here and not yet on a slot to `to`, oldest
    /// first, as far as its queue takes them; returns how many moved. They
    /// never left this end, so they had no effect anywhere.
    pub fn hand_over<O: Observer, M: Store>(
        &mut self,
        to: &mut Link,
        sh: &mut Shared<'_, O, M>,
    ) -> usize {
        let mut moved = 0;
        for which in 0..3 {
            let queue = match which {
                0 => &mut self.after_commits,
                1 => &mut self.ready,
                _ => &mut self.backoff,
            };
            // Verbs too large for `to`'s frames stay, in order, and wait
            // for this link.
            for _ in 0..queue.len() {
                let v = queue.pop_front().expect("counted");
                let p = &self.verbs[v as usize];
                if p.verb.class(to.cfg.max_class).is_some() && to.submit(p.id, &p.verb, sh) {
                    self.free_verbs.push(v);
                    moved += 1;
                } else {
                    queue.push_back(v);
                }
            }
        }
        moved
    }

    /// Whether `verb` fits this link's frames.
    pub fn carries(&self, verb: &Verb) -> bool {
        verb.class(self.cfg.max_class).is_some()
    }

    /// Calls `f` with the decision owed for every transfer this end has
    /// not settled with the peer, to be carried by another path while the
    /// link is unusable. A transfer still awaiting its echo is decided now:
    /// reverse (its issuer was told nothing, so reversal is always allowed,
    /// and the link itself sends the same REVERSE if it comes back).
    pub fn doubts(&mut self, epoch: u32, mut f: impl FnMut(Resolution)) {
        if self.peer_epoch == 0 {
            return;
        }
        for s in 0..self.active_slots() {
            if self.senders[usize::from(s)].phase == SendPhase::AwaitEcho {
                self.give_up_on(s);
            }
            if let Some(ctx) = self.decision_context(s) {
                f(Resolution {
                    initiator_epoch: epoch,
                    target_epoch: self.peer_epoch,
                    decision: ctx.encode(),
                });
            }
        }
    }

    /// Carries out, as the target, a decision the initiator sent by another
    /// path: exactly what its COMMIT or REVERSE would have done on the
    /// link, with the answer going back that way (a frame of order 0 is
    /// never answered on the link). True if the transfer is now settled as
    /// decided, so the initiator may forget it.
    pub fn resolve<O: Observer, M: Store>(
        &mut self,
        res: &Resolution,
        sh: &mut Shared<'_, O, M>,
    ) -> bool {
        if self.peer_epoch == 0 || res.initiator_epoch != self.peer_epoch {
            self.stats.stale_epoch += 1;
            return false;
        }
        let ctx = match Context::decode(&res.decision) {
            Ok(c) if matches!(c.transition, Transition::Commit | Transition::Reverse) => c,
            _ => {
                self.count_malformed(Malformed::BadPayload);
                return false;
            }
        };
        let frame = Frame {
            context: ctx,
            raw_context: res.decision,
            sender_epoch: res.initiator_epoch,
            receiver_epoch: sh.epoch,
            order: 0,
            seen: 0,
            payload: &[],
        };
        self.handle_as_target(&frame, sh);
        let Some(r) = self.receivers.get(usize::from(ctx.slot())) else {
            return false;
        };
        let settled = if ctx.transition == Transition::Commit {
            RecvState::Committed
        } else {
            RecvState::Reversed
        };
        r.seq == ctx.seq() && r.state == settled
    }

    /// The target's answer to a decision this end sent by another path.
    /// True if it settled a transfer here.
    pub fn resolved<O: Observer, M: Store>(
        &mut self,
        res: &Resolution,
        outcome: Outcome,
        sh: &mut Shared<'_, O, M>,
    ) -> bool {
        let Ok(ctx) = Context::decode(&res.decision) else {
            return false;
        };
        let s = ctx.slot();
        if res.target_epoch != self.peer_epoch
            || s >= self.active_slots()
            || self.senders[usize::from(s)].seq != ctx.seq()
        {
            return false;
        }
        let phase = self.senders[usize::from(s)].phase;
        match (phase, ctx.transition, outcome) {
            (SendPhase::Reversing(_), Transition::Reverse, Outcome::Settled) => {
                self.answered(s);
                // Retried like any reversed verb; while the link stays
                // unusable the fabric hands it to another path.
                self.on_reverse_ack(s, sh);
            }
            (SendPhase::Committed, Transition::Commit, Outcome::Settled) => {
                self.answered(s);
                self.set_idle(s);
            }
            (SendPhase::AwaitEcho | SendPhase::Reversing(_), _, Outcome::TargetRestarted) => {
                self.answered(s);
                let v = self.senders[usize::from(s)]
                    .pending
                    .take()
                    .expect("a transfer in doubt keeps its verb");
                release_local(&self.verbs[v as usize].verb, None, sh.memory);
                self.set_idle(s);
                self.finish(v, Err(VerbError::PeerRestarted), sh);
            }
            (SendPhase::Committed, _, Outcome::TargetRestarted) => {
                self.answered(s);
                self.set_idle(s);
            }
            _ => return false,
        }
        true
    }

    /// True when nothing is in flight or held in either direction.
    pub fn is_quiescent(&self) -> bool {
        self.tentative == 0
            && self.ready.is_empty()
            && self.backoff.is_empty()
            && self.after_commits.is_empty()
            && self
                .senders
                .iter()
                .all(|s| matches!(s.phase, SendPhase::Idle | SendPhase::Committed))
    }

    /// Slots whose outcome this end does not know yet (awaiting an echo or a
    /// reversal's confirmation).
    pub fn in_doubt(&self) -> usize {
        self.senders
            .iter()
            .filter(|s| matches!(s.phase, SendPhase::AwaitEcho | SendPhase::Reversing(_)))
            .count()
    }
}

/// Releases the local block of a bilateral swap, writing `replacement` into
/// it when the swap committed.
fn release_local(verb: &Verb, replacement: Option<&[u8]>, memory: &mut impl Store) {
    if let Verb::BilateralSwap {
        local_region,
        local_offset,
        len,
        ..
    } = *verb
    {
        memory.unlock_local(local_region, local_offset, len, replacement);
    }
}
