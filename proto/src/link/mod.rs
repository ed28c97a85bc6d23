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

mod bringup;
mod fabric;
mod initiator;
mod messages;
mod order;
mod phase;

pub(crate) use bringup::write_hello_offer;
use messages::Messages;
pub use messages::{MAX_POSTED_RECEIVES, PostError, PostedReceive};
use phase::Phase;
mod receive;
mod submit;
mod target;
mod ticks;
mod timers;
mod transmit;

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
    /// The tentative transfer is a SEND holding a receive.
    message: bool,
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
    /// Frames of a path given up on at once because the link its route
    /// went out on stopped being usable (they went into that link).
    pub lost_with_route: u64,
    /// Gaps in the peer's order numbers: frames of the peer's that never
    /// arrived here, seen when a later one did.
    pub gaps_seen: u64,
    /// Ticks sent because a frame owed an answer had none yet.
    pub probes_sent: u64,
    /// TOCKs answering a TICK that a newer one superseded: late, not
    /// stale (they still measure the round trip).
    pub late_tocks: u64,
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
    /// Messages delivered whole into a posted receive, and reported.
    pub messages_received: u64,
}

impl LinkStats {
    /// Every counter by its stable name: what the dataplane reports, the
    /// metrics endpoint exports and the test vectors check (malformed
    /// frames by reason are in [`LinkStats::malformed`]).
    pub fn named(&self) -> [(&'static str, u64); 34] {
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
            ("lost_with_route", self.lost_with_route),
            ("gaps_seen", self.gaps_seen),
            ("probes_sent", self.probes_sent),
            ("late_tocks", self.late_tocks),
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
            ("messages_received", self.messages_received),
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
    /// Receives posted for incoming SENDs and not yet reported filled.
    pub posted_receives: usize,
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

    /// Bringing up, up, or given up on: changed only by the transitions in
    /// `phase.rs`.
    phase: Phase,
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
    /// Alice: the round length in her last TICK, or, before her first,
    /// the round both ends start from (`initial_rtt`): what Bob's rounds
    /// are at least (L1).
    advertised_round: Nanos,
    heard_this_round: bool,
    sent_this_round: bool,
    silent_rounds: u32,
    tick_due: bool,
    tick_no: u32,
    /// The newest TICK, while it is owed an answer: its order number (0
    /// until it is sent).
    tick_outstanding: Option<u32>,
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
    /// When the newest fabric frame went out with nothing heard since (0:
    /// none): relayed traffic owes no answer, but a link that carries it
    /// into silence is probed as if it did (O3), so a relay finds a dead
    /// link in round trips, not in silent rounds.
    unheard_fabric_at: Nanos,
    /// Probes sent since the peer was last heard (for suspicion).
    unanswered_probes: u32,
    /// The oldest probe the peer has not shown it heard (its `seen` has
    /// stayed below it), with when it went out: a peer that talks but does
    /// not hear this end is suspected a minimum round after it (O3).
    deaf_since: Option<(u32, Nanos)>,
    /// The next frame to go out is a probe (for `deaf_since`).
    sending_probe: bool,
    /// `deaf_since` is a minimum round old.
    deaf_for_a_round: bool,
    /// Probes sent since a TICK of this end's was last answered: each
    /// waits twice as long as the one before (O3).
    probe_backoff: u32,
    /// The TICKs a TOCK may still answer, late ones included.
    recent_ticks: ticks::RecentTicks,
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
    messages: Messages,

    receivers: Vec<ReceiverSlot>,
    tentative: u16,

    /// Whether `srtt` is measured yet (else it is `initial_rtt`).
    rtt_measured: bool,
    stats: Unhashed<LinkStats>,
    /// While not up: the reason the last frame dropped for one gave, and
    /// how many in a row gave it (recorded, never acted on).
    down_reason: Unhashed<Option<(DownReason, u32)>>,
    /// The link learned an incarnation of its peer since it was made or
    /// renewed: it may have named it in a HELLO, which can bring the
    /// peer's end up and let it number transfers this end would forget if
    /// renewed. The link's own rules never read it; discovery does (D6,
    /// D7), outside the model checker, which never renews a link.
    knew_peer: Unhashed<bool>,
}

impl Link {
    /// A link with room for its whole submission queue made up front: no
    /// verb it takes ever allocates.
    pub fn new(index: u16, cfg: LinkConfig) -> Link {
        Link::with_verbs(index, cfg, cfg.submit_queue)
    }

    /// A link with room made for `verbs` queued verbs (each about a
    /// kilobyte: a verb holds its block); the store grows, doubling, past
    /// that up to `submit_queue`. Paths, many and mostly idle, start empty.
    pub fn with_verbs(index: u16, cfg: LinkConfig, verbs: usize) -> Link {
        let slots = usize::from(cfg.slots);
        Link {
            index,
            cfg,
            phase: Phase::BringingUp,
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
            advertised_round: cfg
                .initial_rtt
                .saturating_mul(u64::from(cfg.rtt_multiplier))
                .max(cfg.min_round),
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
            unheard_fabric_at: 0,
            unanswered_probes: 0,
            deaf_since: None,
            sending_probe: false,
            deaf_for_a_round: false,
            probe_backoff: 0,
            recent_ticks: Default::default(),
            probe_due: false,
            gap_notice_due: false,
            rttvar: 0,
            senders: vec![SenderSlot::IDLE; slots],
            idle: Vec::with_capacity(slots),
            commit_candidates: Vec::with_capacity(2 * slots),
            credits_in_use: 0,
            verbs: Vec::with_capacity(verbs.min(cfg.submit_queue) + slots),
            free_verbs: Vec::with_capacity(verbs.min(cfg.submit_queue) + slots),
            ready: VecDeque::with_capacity(cfg.submit_queue),
            backoff: VecDeque::with_capacity(cfg.submit_queue),
            after_commits: VecDeque::with_capacity(cfg.submit_queue),
            sender_tx: VecDeque::with_capacity(slots),
            messages: Messages::new(cfg.submit_queue),
            receivers: vec![
                ReceiverSlot {
                    seq: 0,
                    state: RecvState::Fresh,
                    undo: Undo::default(),
                    response: [0; MAX_FRAME],
                    response_len: 0,
                    queued: false,
                    message: false,
                };
                slots
            ],
            tentative: 0,
            rtt_measured: false,
            stats: Unhashed::default(),
            down_reason: Unhashed(None),
            knew_peer: Unhashed(false),
        }
    }

    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    pub fn status(&self, epoch: u32) -> LinkStatus {
        LinkStatus {
            up: self.is_up(),
            unreachable: self.phase == Phase::Unreachable,
            knowledge: self.knowledge(),
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
            posted_receives: self.messages.posted(),
            down_reason: self.down_reason(),
            down_reason_frames: self.down_reason.map_or(0, |(_, n)| n),
        }
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

    fn count_malformed(&mut self, m: Malformed) {
        let i = Malformed::ALL.iter().position(|&x| x == m).expect("listed");
        self.stats.malformed[i] += 1;
    }

    pub fn is_up(&self) -> bool {
        self.phase == Phase::Up
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

    /// Whether `verb` fits this link's frames.
    pub fn carries(&self, verb: &Verb) -> bool {
        verb.class(self.cfg.max_class).is_some()
    }

    pub fn config(&self) -> &LinkConfig {
        &self.cfg
    }

    /// Whether the link learned an incarnation of its peer since it was
    /// made or renewed (every link that came up did).
    pub fn knew_peer(&self) -> bool {
        *self.knew_peer
    }

    /// The link as new, for another peer, its counters kept (they never
    /// reset while the process lives). Only for a link that never learned
    /// its peer and holds nothing: a peer that heard this end name it could
    /// be up, numbering transfers in slots the new link would start again
    /// from 0, and neither would ever accept the other's.
    pub fn renew(&mut self) {
        debug_assert!(!self.knew_peer() && self.is_quiescent());
        let stats = core::mem::take(&mut self.stats);
        *self = Link::new(self.index, self.cfg);
        self.stats = stats;
    }

    /// True when nothing is in flight or held in either direction.
    pub fn is_quiescent(&self) -> bool {
        self.tentative == 0
            && self.ready.is_empty()
            && self.backoff.is_empty()
            && self.after_commits.is_empty()
            && self.messages.waiting() == 0
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

/// Releases the local block of a bilateral swap (the one verb that holds
/// its block in flight), writing `replacement` (the block the target sent)
/// into it when the swap committed.
fn release_local(verb: &Verb, replacement: Option<&[u8]>, memory: &mut impl Store) {
    if let (Verb::BilateralSwap { .. }, Some((region, offset, len))) = (verb, verb.local_block()) {
        memory.unlock_local(region, offset, len, replacement);
    }
}
