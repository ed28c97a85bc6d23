//! The target side of a slot: REQUEST, COMMIT and REVERSE, applied to
//! memory tentatively and answered (receiver rows R17-R31).

use super::*;
use crate::verb::Request;

impl Link {
    pub(super) fn handle_as_target<O: Observer, M: Store>(
        &mut self,
        frame: &Frame<'_>,
        sh: &mut Shared<'_, O, M>,
    ) {
        let ctx = frame.context;
        let s = ctx.slot();
        // R17: a slot beyond ours
        if s >= self.cfg.slots {
            return self.count_malformed(Malformed::Inconsistent);
        }
        // R18: a COMMIT or REVERSE with a payload
        if ctx.transition != Transition::Request && !verb::all_zero(frame.payload) {
            return self.count_malformed(Malformed::BadPayload);
        }
        let si = usize::from(s);
        let seq = ctx.seq();
        let (last, state) = (self.receivers[si].seq, self.receivers[si].state);
        let ahead = seq.wrapping_sub(last);
        let t = ctx.transition;
        // R19: a fresh slot's sequence number 0
        if ahead == 0 && state == RecvState::Fresh {
            self.stats.stale_slot_frames += 1;
            return;
        }
        match (t, ahead) {
            // R22: a duplicate REQUEST gets the latest answer again
            (Transition::Request, 0) => {
                self.stats.duplicate_requests += 1;
                self.queue_receiver(s, frame.order);
            }
            // R20, R29: the next sequence number, once the previous is settled
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
            // R23, R24, R25: a COMMIT of the last transfer
            (Transition::Commit, 0) => match state {
                RecvState::Tentative => {
                    self.commit_tentative(s, sh);
                    self.respond(s, frame, Transition::CommitAck, |_| {}, sh.epoch);
                }
                RecvState::Committed => self.queue_receiver(s, frame.order),
                _ => self.stats.protocol_violations += 1,
            },
            // R26, R27, R28: a REVERSE of the last transfer
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
            // R30: any other sequence number
            _ => self.stats.stale_slot_frames += 1,
        }
    }

    /// Before a new sequence number is acted on, the previous transfer on the
    /// slot must be settled; the initiator says whether it committed it.
    pub(super) fn settle_previous<O: Observer, M: Store>(
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
            // R21: a previous-committed bit that contradicts the slot
            (RecvState::Tentative, false) | (RecvState::Reversed | RecvState::Refused, true) => {
                self.stats.protocol_violations += 1;
                false
            }
            _ => true,
        }
    }

    pub(super) fn commit_tentative<O: Observer, M: Store>(
        &mut self,
        s: u16,
        sh: &mut Shared<'_, O, M>,
    ) {
        let r = &mut self.receivers[usize::from(s)];
        sh.memory.commit(&r.undo);
        r.state = RecvState::Committed;
        self.tentative -= 1;
        self.stats.transfers_committed += 1;
        sh.observer.committed(self.index, self.peer_epoch, s, r.seq);
        self.settle_message(s, true, sh.events);
    }

    pub(super) fn reverse_tentative<O: Observer, M: Store>(
        &mut self,
        s: u16,
        sh: &mut Shared<'_, O, M>,
    ) {
        let r = &mut self.receivers[usize::from(s)];
        sh.memory.reverse(&r.undo);
        r.state = RecvState::Reversed;
        self.tentative -= 1;
        self.stats.transfers_reversed += 1;
        sh.observer.reversed(self.index, self.peer_epoch, s, r.seq);
        self.settle_message(s, false, sh.events);
    }

    pub(super) fn apply_request<O: Observer, M: Store>(
        &mut self,
        s: u16,
        frame: &Frame<'_>,
        sh: &mut Shared<'_, O, M>,
    ) {
        let si = usize::from(s);
        self.receivers[si].seq = frame.context.seq();
        // R31: no credit left
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
                    } else if let Request::Send { imm, data } = request {
                        // R41: a SEND lands in the first posted receive
                        self.take_receive(s, imm, data, sh).err()
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
    pub(super) fn respond(
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
    pub(super) fn respond_in_place(
        &mut self,
        s: u16,
        frame: &Frame<'_>,
        transition: Transition,
        epoch: u32,
    ) {
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

    pub(super) fn response_context(&self, frame: &Frame<'_>, transition: Transition) -> Context {
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
    pub(super) fn queue_receiver(&mut self, s: u16, order: u32) {
        let r = &mut self.receivers[usize::from(s)];
        if order != 0 && !r.queued {
            r.queued = true;
            self.answers.push_back((order, Exchange::Slot(s)));
        }
    }
}
