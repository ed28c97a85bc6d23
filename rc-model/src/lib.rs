//! A **model** of the RoCE RC (reliable connected) transport, for comparing
//! OAE with what RDMA deployments run today. It is not RoCE: it carries
//! RC's semantics over the same wire as OAE (EtherType 0x88B5 frames, a
//! frame format of its own), so both run through the same drivers, XDP
//! fault injection and pipeline.
//!
//! What it models, one queue pair per link:
//!
//! * **Requester:** a packet sequence number (PSN) per request, at most
//!   `max_outstanding` unacknowledged; **go-back-N** from the PSN a NAK
//!   names; a **local ACK timeout** of 4.096 µs × 2^`ack_timeout_exp`
//!   (t = 14, about 67 ms, as deployed) that resends everything
//!   unacknowledged, at most `retry_count` (7) times in a row before the QP
//!   fails: outstanding verbs complete with the retry-exceeded error and
//!   queued ones are flushed (both reported as [`VerbError::Unreachable`]).
//! * **Responder:** an expected PSN; a request ahead of it is dropped and
//!   answered by one sequence-error NAK; writes are acknowledged in
//!   coalesced ACKs (every `ack_coalesce` writes, or at once when the
//!   request asks); reads and atomics are answered one by one; a duplicate
//!   read is executed again (reads are idempotent); a duplicate atomic is
//!   answered from the **responder cache** of the last
//!   `responder_cache` atomic results, never executed twice, and a
//!   duplicate too old for the cache gets an invalid-request NAK, which
//!   fails the requester's QP, as on real adapters.
//! * A remote access error (bad key, out of bounds, forbidden) completes
//!   that verb with the refusal and fails the QP, as RC does; OAE refuses
//!   the one verb and carries on.
//!
//! READ, WRITE, compare-and-swap and fetch-add are RC verbs; swap,
//! multi-word commit and bilateral swap are not, and are refused at
//! submission. A READ lands in its local block when its response arrives,
//! as the OAE core's does, and its completion carries the length.
//!
//! Like the OAE core, the model is sans-IO: frames and time in, frames and
//! events out, no clock, socket or thread.

use std::collections::VecDeque;

use oae_proto::memory::{LockOwner, Undo};
use oae_proto::verb::{Output, Refusal, Request, Verb, VerbError, decode_request, encode_request};
use oae_proto::{Memory, Nanos, Opcode, Store, VerbId};

/// First payload byte of every model frame: no OAE frame starts with it
/// (OAE's first byte is its version, 1, in the high nibble).
pub const TAG: u8 = 0xE1;
/// Header bytes: tag, opcode, flags, spare, PSN, length, then the body.
const HEADER: usize = 10;
/// CRC32C of everything before it, like RoCE's ICRC.
const TRAILER: usize = 4;
/// Largest frame the model sends (as OAE's largest class).
pub const MAX_FRAME: usize = 1024;
/// Smallest frame: frames are padded to 64 bytes like OAE's basic frame.
const MIN_FRAME: usize = 64;

/// The local ACK timeout unit of the InfiniBand specification.
const TIMEOUT_UNIT_NS: u64 = 4096;

const OP_REQUEST: u8 = 1;
const OP_ACK: u8 = 2;
const OP_NAK_SEQUENCE: u8 = 3;
const OP_NAK_INVALID: u8 = 4;
const OP_RESPONSE: u8 = 5;
const OP_NAK_ACCESS: u8 = 6;

/// Set on a request to ask for an immediate acknowledgement.
const FLAG_ACK_REQ: u8 = 1;

/// Whether this model runs verbs of this kind: RDMA READ, WRITE and its
/// two atomics (compare-and-swap, fetch-and-add). SWAP, MULTI-WORD COMMIT
/// and BILATERAL SWAP are OAE's own; RC's SEND is not modelled.
pub const fn runs(kind: Opcode) -> bool {
    match kind {
        Opcode::Read | Opcode::Write | Opcode::CompareAndSwap | Opcode::FetchAdd => true,
        Opcode::Swap | Opcode::MultiWordCommit | Opcode::BilateralSwap | Opcode::Send => false,
    }
}

/// Settings of one queue pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RcConfig {
    /// Requests in flight (sent, not acknowledged) at most.
    pub max_outstanding: u16,
    /// Reads and atomics in flight at most (RC's max_rd_atomic). At most
    /// `responder_cache`, as RC negotiates it against the responder's
    /// resources: then every duplicate atomic is still in the cache.
    pub max_rd_atomic: u16,
    /// t in 4.096 µs × 2^t.
    pub ack_timeout_exp: u8,
    /// Timeouts in a row before the QP fails.
    pub retry_count: u8,
    /// The responder acknowledges writes every this many.
    pub ack_coalesce: u16,
    /// Atomic results the responder keeps for duplicates.
    pub responder_cache: u16,
    /// Verbs waiting to be sent at most.
    pub submit_queue: usize,
}

impl Default for RcConfig {
    fn default() -> RcConfig {
        RcConfig {
            max_outstanding: 64,
            max_rd_atomic: 16,
            ack_timeout_exp: 14,
            retry_count: 7,
            ack_coalesce: 16,
            responder_cache: 16,
            submit_queue: 4096,
        }
    }
}

impl RcConfig {
    /// The local ACK timeout in nanoseconds.
    pub fn ack_timeout(&self) -> Nanos {
        TIMEOUT_UNIT_NS << self.ack_timeout_exp
    }

    /// Checks the settings; the error names the setting and the fix.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_outstanding == 0 {
            return Err("max_outstanding must be at least 1".into());
        }
        if self.ack_timeout_exp > 31 {
            return Err(format!(
                "ack_timeout_exp = {} must be 0 to 31 (4.096 us x 2^t)",
                self.ack_timeout_exp
            ));
        }
        if self.retry_count > 7 {
            return Err(format!(
                "retry_count = {} must be 0 to 7 (a 3-bit field in RC)",
                self.retry_count
            ));
        }
        if self.max_rd_atomic == 0 || self.max_rd_atomic > self.responder_cache {
            return Err(format!(
                "max_rd_atomic = {} must be 1 to responder_cache ({}): a duplicate atomic \
                 must still find its result in the responder's cache",
                self.max_rd_atomic, self.responder_cache
            ));
        }
        if self.ack_coalesce == 0 {
            return Err("ack_coalesce must be at least 1".into());
        }
        if !(1..=oae_proto::config::MAX_SUBMIT_QUEUE).contains(&self.submit_queue) {
            return Err(format!(
                "submit_queue must be from 1 to {}, got {}",
                oae_proto::config::MAX_SUBMIT_QUEUE,
                self.submit_queue
            ));
        }
        Ok(())
    }
}

/// Why a verb was not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubmitError {
    /// The submission queue is full.
    QueueFull,
    /// Swap, multi-word commit and bilateral swap have no RC equivalent.
    NotAnRcVerb,
    /// The QP has failed; nothing more is sent on it.
    QpError,
    /// A READ's local block is not inside a local region, or its length is
    /// not 1..=960 bytes.
    BadLocalBlock,
}

/// What the model tells its user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RcEvent {
    /// A verb's one completion.
    Completed {
        id: VerbId,
        result: Result<Output, VerbError>,
    },
    /// The QP failed (retry exceeded, remote access error, or an atomic
    /// duplicate too old for the responder cache).
    QpFailed(QpFailure),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpFailure {
    RetryExceeded,
    RemoteAccess(Refusal),
    InvalidRequest,
}

/// Counters of one queue pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RcStats {
    pub rx_frames: u64,
    pub tx_frames: u64,
    /// Frames that failed their CRC or made no sense, dropped.
    pub malformed: u64,
    pub requests_sent: u64,
    /// Requests sent again (go-back-N after a NAK or a timeout).
    pub retransmissions: u64,
    pub timeouts: u64,
    pub naks_received: u64,
    pub acks_sent: u64,
    pub naks_sent: u64,
    /// Requests the responder executed.
    pub executed: u64,
    /// Duplicate requests answered without executing them.
    pub duplicates: u64,
    /// Duplicate atomics answered from the responder cache.
    pub cache_replays: u64,
    /// Duplicate atomics too old for the cache (answered by an
    /// invalid-request NAK).
    pub cache_misses: u64,
    /// Requests dropped because they were ahead of the expected PSN.
    pub out_of_order: u64,
    pub completions_ok: u64,
    pub completions_err: u64,
}

struct Outstanding {
    psn: u32,
    id: VerbId,
    verb: Verb,
}

/// A frame the responder owes its peer.
enum Reply {
    Ack(u32),
    /// The duplicate atomic at this PSN is too old for the cache.
    NakInvalid(u32),
    /// The request at this PSN was refused.
    NakAccess(u32, Refusal),
    /// A read's data or an atomic's old value: `len` bytes of response
    /// buffer `buffer`.
    Response {
        psn: u32,
        len: usize,
        buffer: usize,
    },
}

/// Bytes of an atomic's encoded result (the old value).
const ATOMIC_RESULT: usize = 8;

/// One end of a queue pair: requester and responder.
pub struct RcEndpoint<M: Store = Memory> {
    cfg: RcConfig,
    memory: M,
    failed: Option<QpFailure>,
    // Requester.
    queue: VecDeque<(VerbId, Verb)>,
    outstanding: VecDeque<Outstanding>,
    next_psn: u32,
    /// Index into `outstanding` of the next request to (re)send.
    send_from: usize,
    /// Reads and atomics in `outstanding`, for the max_rd_atomic check on
    /// every transmit poll without scanning the window.
    rd_atomic_out: u16,
    retries_left: u8,
    deadline: Option<Nanos>,
    // Responder.
    expected_psn: u32,
    nak_pending_for: Option<u32>,
    writes_unacked: u16,
    replies: VecDeque<Reply>,
    /// Response bodies waiting to be sent, reused: the pool grows only
    /// while more responses wait at once than ever before.
    buffers: Vec<[u8; MAX_FRAME]>,
    free_buffers: Vec<usize>,
    /// The last atomics' PSNs and encoded results.
    cache: VecDeque<(u32, [u8; ATOMIC_RESULT])>,
    events: VecDeque<RcEvent>,
    stats: RcStats,
    undo: Undo,
}

impl<M: Store> RcEndpoint<M> {
    /// A queue pair end over `memory` (this end's registered regions, which
    /// the peer's verbs act on).
    pub fn new(cfg: RcConfig, memory: M) -> Result<RcEndpoint<M>, String> {
        cfg.validate()?;
        Ok(RcEndpoint {
            cfg,
            memory,
            failed: None,
            queue: VecDeque::with_capacity(cfg.submit_queue.min(65_536)),
            outstanding: VecDeque::with_capacity(usize::from(cfg.max_outstanding)),
            next_psn: 0,
            send_from: 0,
            rd_atomic_out: 0,
            retries_left: cfg.retry_count,
            deadline: None,
            expected_psn: 0,
            nak_pending_for: None,
            writes_unacked: 0,
            replies: VecDeque::new(),
            buffers: Vec::new(),
            free_buffers: Vec::new(),
            cache: VecDeque::with_capacity(usize::from(cfg.responder_cache)),
            events: VecDeque::new(),
            stats: RcStats::default(),
            undo: Undo::default(),
        })
    }

    pub fn memory(&self) -> &M {
        &self.memory
    }

    pub fn memory_mut(&mut self) -> &mut M {
        &mut self.memory
    }

    pub fn stats(&self) -> &RcStats {
        &self.stats
    }

    /// Why the QP failed, if it has.
    pub fn failure(&self) -> Option<QpFailure> {
        self.failed
    }

    /// Verbs submitted and not yet completed.
    pub fn in_flight(&self) -> usize {
        self.queue.len() + self.outstanding.len()
    }

    /// Queues a verb for the peer's memory.
    pub fn submit(&mut self, id: VerbId, verb: Verb) -> Result<(), SubmitError> {
        if self.failed.is_some() {
            return Err(SubmitError::QpError);
        }
        if !runs(verb.opcode()) {
            return Err(SubmitError::NotAnRcVerb);
        }
        oae_proto::check_local_block(&verb, &self.memory)
            .map_err(|_| SubmitError::BadLocalBlock)?;
        if self.queue.len() >= self.cfg.submit_queue {
            return Err(SubmitError::QueueFull);
        }
        self.queue.push_back((id, verb));
        Ok(())
    }

    pub fn poll_event(&mut self) -> Option<RcEvent> {
        self.events.pop_front()
    }

    /// When [`RcEndpoint::handle_timeout`] is next due.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        self.deadline
    }

    /// The local ACK timer: resend everything unacknowledged, or fail the
    /// QP when the retries are used up.
    pub fn handle_timeout(&mut self, now: Nanos) {
        let Some(deadline) = self.deadline else {
            return;
        };
        if now < deadline || self.outstanding.is_empty() {
            return;
        }
        self.stats.timeouts += 1;
        if self.retries_left == 0 {
            self.fail(QpFailure::RetryExceeded);
            return;
        }
        self.retries_left -= 1;
        self.send_from = 0;
        self.deadline = Some(now + self.cfg.ack_timeout());
    }

    /// Writes the next frame into `buf` (at least [`MAX_FRAME`] bytes);
    /// `None` if nothing is due.
    pub fn poll_transmit(&mut self, now: Nanos, buf: &mut [u8]) -> Option<usize> {
        let len = self.next_frame(now, buf)?;
        self.stats.tx_frames += 1;
        Some(len)
    }

    fn next_frame(&mut self, now: Nanos, buf: &mut [u8]) -> Option<usize> {
        if let Some(psn) = self.nak_pending_for.take() {
            self.stats.naks_sent += 1;
            return Some(build(buf, OP_NAK_SEQUENCE, 0, psn, &[]));
        }
        if let Some(reply) = self.replies.pop_front() {
            return Some(match reply {
                Reply::Ack(psn) => {
                    self.stats.acks_sent += 1;
                    build(buf, OP_ACK, 0, psn, &[])
                }
                Reply::NakInvalid(psn) => {
                    self.stats.naks_sent += 1;
                    build(buf, OP_NAK_INVALID, 0, psn, &[])
                }
                Reply::NakAccess(psn, refusal) => {
                    self.stats.naks_sent += 1;
                    build(buf, OP_NAK_ACCESS, 0, psn, &[refusal as u8])
                }
                Reply::Response { psn, len, buffer } => {
                    let n = build(buf, OP_RESPONSE, 0, psn, &self.buffers[buffer][..len]);
                    self.free_buffers.push(buffer);
                    n
                }
            });
        }
        if self.failed.is_some() {
            return None;
        }
        // Go-back-N resends first, then new requests while the window allows.
        if self.send_from < self.outstanding.len() {
            let o = &self.outstanding[self.send_from];
            self.send_from += 1;
            self.stats.retransmissions += 1;
            self.stats.requests_sent += 1;
            let last = self.send_from == self.outstanding.len() && self.queue.is_empty();
            return Some(request_frame(buf, o.psn, &o.verb, last));
        }
        if self.outstanding.len() < usize::from(self.cfg.max_outstanding)
            && self.queue.front().is_some_and(|(_, v)| {
                // RC sends in order: a read or atomic over the limit waits,
                // and so does everything behind it.
                !is_read_or_atomic(v) || self.rd_atomic_out < self.cfg.max_rd_atomic
            })
            && let Some((id, verb)) = self.queue.pop_front()
        {
            let psn = self.next_psn;
            self.next_psn = self.next_psn.wrapping_add(1);
            if is_read_or_atomic(&verb) {
                self.rd_atomic_out += 1;
            }
            self.outstanding.push_back(Outstanding { psn, id, verb });
            self.send_from = self.outstanding.len();
            self.deadline.get_or_insert(now + self.cfg.ack_timeout());
            self.stats.requests_sent += 1;
            return Some(request_frame(buf, psn, &verb, self.queue.is_empty()));
        }
        None
    }

    /// One received frame (the payload after the Ethernet header).
    pub fn handle_frame(&mut self, frame: &[u8], now: Nanos) {
        self.stats.rx_frames += 1;
        let Some((op, flags, psn, body)) = parse(frame) else {
            self.stats.malformed += 1;
            return;
        };
        match op {
            OP_REQUEST => self.on_request(psn, flags, body),
            OP_ACK => self.on_ack(psn, now),
            OP_RESPONSE => self.on_response(psn, body, now),
            OP_NAK_SEQUENCE => {
                self.stats.naks_received += 1;
                // Everything before `psn` arrived; resend from it.
                self.acknowledge_writes_before(psn, now);
                if let Some(i) = self.outstanding.iter().position(|o| o.psn == psn) {
                    self.send_from = self.send_from.min(i);
                }
            }
            OP_NAK_INVALID => {
                self.stats.naks_received += 1;
                self.fail(QpFailure::InvalidRequest);
            }
            OP_NAK_ACCESS => {
                self.stats.naks_received += 1;
                let refusal = body
                    .first()
                    .and_then(|&b| Refusal::from_u8(b))
                    .unwrap_or(Refusal::Malformed);
                self.acknowledge_writes_before(psn, now);
                if let Some(o) = self.outstanding.front()
                    && o.psn == psn
                {
                    let o = self.pop_outstanding().expect("checked");
                    self.send_from = self.send_from.saturating_sub(1);
                    self.complete(o.id, Err(VerbError::Refused(refusal)));
                }
                self.fail(QpFailure::RemoteAccess(refusal));
            }
            _ => self.stats.malformed += 1,
        }
    }

    // ----- requester ----------------------------------------------------------

    /// The oldest unacknowledged request, leaving the window.
    fn pop_outstanding(&mut self) -> Option<Outstanding> {
        let o = self.outstanding.pop_front()?;
        if is_read_or_atomic(&o.verb) {
            self.rd_atomic_out -= 1;
        }
        Some(o)
    }

    /// Completes the writes in front of `psn` (an acknowledgement for them).
    /// A read or atomic in front of it that never got its response means
    /// the response was lost: resend from it.
    fn acknowledge_writes_before(&mut self, psn: u32, now: Nanos) {
        let mut progressed = false;
        while let Some(o) = self.outstanding.front() {
            if !before(o.psn, psn) {
                break;
            }
            if !matches!(o.verb, Verb::Write { .. }) {
                self.send_from = 0;
                break;
            }
            let o = self.pop_outstanding().expect("checked");
            self.send_from = self.send_from.saturating_sub(1);
            self.complete(o.id, Ok(Output::Write));
            progressed = true;
        }
        if progressed {
            self.progress(now);
        }
    }

    fn on_ack(&mut self, psn: u32, now: Nanos) {
        self.acknowledge_writes_before(psn.wrapping_add(1), now);
    }

    fn on_response(&mut self, psn: u32, body: &[u8], now: Nanos) {
        self.acknowledge_writes_before(psn, now);
        let Some(o) = self.outstanding.front() else {
            return;
        };
        if o.psn != psn {
            // A duplicate response for something already completed.
            return;
        }
        let Some((output, block)) = oae_proto::verb::decode_output(&o.verb, body) else {
            self.stats.malformed += 1;
            return;
        };
        let result = match o.verb.local_block() {
            Some(local) => self.land(local, block).map(|()| output),
            None => Ok(output),
        };
        let o = self.pop_outstanding().expect("checked");
        self.send_from = self.send_from.saturating_sub(1);
        self.complete(o.id, result);
        self.progress(now);
    }

    /// Writes a READ's response into its local block. RC does not hold the
    /// local buffer while a READ is in flight, so the block is locked only
    /// for the copy; if an OAE transfer on a shared memory holds it, the
    /// READ fails with no effect rather than write under that transfer.
    fn land(
        &mut self,
        (region, offset, len): (u16, u32, u16),
        block: &[u8],
    ) -> Result<(), VerbError> {
        let owner = LockOwner::initiator(0, 0);
        self.memory
            .lock_local(region, offset, len, owner)
            .map_err(|_| VerbError::LocalLocked)?;
        self.memory.unlock_local(region, offset, len, Some(block));
        Ok(())
    }

    /// Acknowledged progress: the retry budget is full again and the timer
    /// restarts for what is still unacknowledged.
    fn progress(&mut self, now: Nanos) {
        self.retries_left = self.cfg.retry_count;
        self.deadline = (!self.outstanding.is_empty()).then(|| now + self.cfg.ack_timeout());
    }

    fn complete(&mut self, id: VerbId, result: Result<Output, VerbError>) {
        if result.is_ok() {
            self.stats.completions_ok += 1;
        } else {
            self.stats.completions_err += 1;
        }
        self.events.push_back(RcEvent::Completed { id, result });
    }

    /// The QP enters the error state: everything outstanding completes with
    /// the transport's error and everything queued is flushed.
    fn fail(&mut self, why: QpFailure) {
        if self.failed.is_some() {
            return;
        }
        self.failed = Some(why);
        self.deadline = None;
        let error = match why {
            QpFailure::RemoteAccess(r) => VerbError::Refused(r),
            QpFailure::RetryExceeded | QpFailure::InvalidRequest => VerbError::Unreachable,
        };
        while let Some(o) = self.pop_outstanding() {
            self.complete(o.id, Err(error));
        }
        while let Some((id, _)) = self.queue.pop_front() {
            self.complete(id, Err(VerbError::Unreachable));
        }
        self.send_from = 0;
        self.events.push_back(RcEvent::QpFailed(why));
    }

    // ----- responder ----------------------------------------------------------

    fn on_request(&mut self, psn: u32, flags: u8, body: &[u8]) {
        if psn == self.expected_psn {
            self.execute(psn, flags, body);
        } else if before(psn, self.expected_psn) {
            self.duplicate(psn, body);
        } else {
            // A gap: something before it was lost. One NAK per gap.
            self.stats.out_of_order += 1;
            if self.nak_pending_for != Some(self.expected_psn) {
                self.nak_pending_for = Some(self.expected_psn);
            }
        }
    }

    fn execute(&mut self, psn: u32, flags: u8, body: &[u8]) {
        let Some(request) = decode_request(body) else {
            self.stats.malformed += 1;
            return;
        };
        self.expected_psn = self.expected_psn.wrapping_add(1);
        self.nak_pending_for = None;
        let buffer = self.take_buffer();
        let owner = LockOwner::target(0, 0);
        let out = &mut self.buffers[buffer][..];
        match self.memory.apply(&request, owner, &mut self.undo, out) {
            Ok(len) => {
                // RC applies at once: there is nothing to reverse.
                self.memory.commit(&self.undo);
                self.stats.executed += 1;
                if let Request::Write { .. } = request {
                    self.free_buffers.push(buffer);
                    self.writes_unacked += 1;
                    if flags & FLAG_ACK_REQ != 0 || self.writes_unacked >= self.cfg.ack_coalesce {
                        self.writes_unacked = 0;
                        self.replies.push_back(Reply::Ack(psn));
                    }
                    return;
                }
                // A response acknowledges the writes before it as well.
                self.writes_unacked = 0;
                if is_atomic(&request) {
                    self.remember(psn, buffer);
                }
                self.replies.push_back(Reply::Response { psn, len, buffer });
            }
            Err(refusal) => {
                self.free_buffers.push(buffer);
                self.writes_unacked = 0;
                self.replies.push_back(Reply::NakAccess(psn, refusal));
            }
        }
    }

    fn take_buffer(&mut self) -> usize {
        self.free_buffers.pop().unwrap_or_else(|| {
            self.buffers.push([0u8; MAX_FRAME]);
            self.buffers.len() - 1
        })
    }

    /// Keeps an atomic's result (in response buffer `buffer`) for
    /// duplicates of its request.
    fn remember(&mut self, psn: u32, buffer: usize) {
        if self.cfg.responder_cache == 0 {
            return;
        }
        if self.cache.len() == usize::from(self.cfg.responder_cache) {
            self.cache.pop_front();
        }
        let mut result = [0u8; ATOMIC_RESULT];
        result.copy_from_slice(&self.buffers[buffer][..ATOMIC_RESULT]);
        self.cache.push_back((psn, result));
    }

    fn duplicate(&mut self, psn: u32, body: &[u8]) {
        self.stats.duplicates += 1;
        let Some(request) = decode_request(body) else {
            self.stats.malformed += 1;
            return;
        };
        match request {
            Request::Write { .. } => {
                self.replies
                    .push_back(Reply::Ack(self.expected_psn.wrapping_sub(1)));
            }
            Request::Read { .. } => {
                // Reads are idempotent: read again, answer under the old PSN.
                let buffer = self.take_buffer();
                let out = &mut self.buffers[buffer][..];
                match self
                    .memory
                    .apply(&request, LockOwner::target(0, 0), &mut self.undo, out)
                {
                    Ok(len) => {
                        self.memory.commit(&self.undo);
                        self.replies.push_back(Reply::Response { psn, len, buffer });
                    }
                    Err(_) => self.free_buffers.push(buffer),
                }
            }
            _ => match self.cache.iter().find(|(p, _)| *p == psn) {
                Some(&(_, cached)) => {
                    self.stats.cache_replays += 1;
                    let buffer = self.take_buffer();
                    self.buffers[buffer][..ATOMIC_RESULT].copy_from_slice(&cached);
                    self.replies.push_back(Reply::Response {
                        psn,
                        len: ATOMIC_RESULT,
                        buffer,
                    });
                }
                None => {
                    // Executing it again could apply it twice.
                    self.stats.cache_misses += 1;
                    self.replies.push_back(Reply::NakInvalid(psn));
                }
            },
        }
    }
}

fn is_read_or_atomic(verb: &Verb) -> bool {
    !matches!(verb, Verb::Write { .. })
}

fn is_atomic(request: &Request<'_>) -> bool {
    matches!(
        request,
        Request::CompareAndSwap { .. } | Request::FetchAdd { .. }
    )
}

/// True if PSN `a` comes before `b` (modular, half the space each way).
fn before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

fn request_frame(buf: &mut [u8], psn: u32, verb: &Verb, ack_req: bool) -> usize {
    let mut body = [0u8; MAX_FRAME - HEADER - TRAILER];
    let len = verb.request_len();
    encode_request(verb, &[], &mut body[..len]);
    let flags = if ack_req { FLAG_ACK_REQ } else { 0 };
    build(buf, OP_REQUEST, flags, psn, &body[..len])
}

/// Writes a frame and returns its length (padded to 64 bytes).
fn build(buf: &mut [u8], op: u8, flags: u8, psn: u32, body: &[u8]) -> usize {
    let used = HEADER + body.len() + TRAILER;
    let len = used.max(MIN_FRAME);
    buf[..len].fill(0);
    buf[0] = TAG;
    buf[1] = op;
    buf[2] = flags;
    buf[4..8].copy_from_slice(&psn.to_be_bytes());
    buf[8..10].copy_from_slice(&(body.len() as u16).to_be_bytes());
    buf[HEADER..HEADER + body.len()].copy_from_slice(body);
    let crc = crc32c::crc32c(&buf[..len - TRAILER]);
    buf[len - TRAILER..len].copy_from_slice(&crc.to_be_bytes());
    len
}

/// `(opcode, flags, psn, body)` of a well-formed frame.
fn parse(frame: &[u8]) -> Option<(u8, u8, u32, &[u8])> {
    if frame.len() < MIN_FRAME || frame.len() > MAX_FRAME || frame[0] != TAG {
        return None;
    }
    // Ethernet may pad; the CRC sits at the end of the padded 64-byte unit.
    let body_len = usize::from(u16::from_be_bytes([frame[8], frame[9]]));
    let len = (HEADER + body_len + TRAILER).max(MIN_FRAME);
    if len > frame.len() {
        return None;
    }
    let crc = u32::from_be_bytes(frame[len - TRAILER..len].try_into().ok()?);
    if crc32c::crc32c(&frame[..len - TRAILER]) != crc {
        return None;
    }
    let psn = u32::from_be_bytes(frame[4..8].try_into().ok()?);
    Some((frame[1], frame[2], psn, &frame[HEADER..HEADER + body_len]))
}
