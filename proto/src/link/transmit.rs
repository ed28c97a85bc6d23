//! Transmitting: which frame goes next (answers, decisions, requests,
//! commits, ticks) and how each is built.

use super::*;

impl Link {
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

    pub(super) fn seal_and_count(&mut self, frame: &mut [u8], kind: Sent, now: Nanos) {
        if kind != Sent::Hello {
            // Every frame after bring-up takes the next place in the link's
            // order and says how far this end has seen the peer's.
            self.tx_order = match self.tx_order.wrapping_add(1) {
                0 => 1,
                n => n,
            };
            wire::stamp_order(frame, self.tx_order, self.seen());
            self.gap_notice_due = false;
            if core::mem::take(&mut self.sending_probe) && self.deaf_since.is_none() {
                self.deaf_since = Some((self.tx_order, now));
            }
            if let Sent::Owed(exchange) = kind {
                self.sent_owed(self.tx_order, exchange, now);
            }
        }
        wire::seal(frame);
        self.stats.tx_frames += 1;
        self.sent_this_round = true;
    }

    /// The next frame due, unsealed and without its order slice.
    pub(super) fn next_frame<O: Observer, M: Store>(
        &mut self,
        now: Nanos,
        buf: &mut [u8],
        sh: &mut Shared<'_, O, M>,
    ) -> Option<(usize, Sent)> {
        if self.hello_due {
            self.hello_due = false;
            if !self.is_up() {
                if now >= self.next_hello {
                    // B3: the timer is due (the link just started or lost
                    // its peer) and its timeout has not run: this HELLO is
                    // the timer's, counted as the timeout would count it.
                    self.unanswered_hellos += 1;
                    self.next_hello = now.saturating_add(self.hello_wait());
                } else {
                    // Every HELLO restarts the wait for the next.
                    self.next_hello = self.next_hello.max(now.saturating_add(self.hello_wait()));
                }
            }
            return Some((self.build_hello(buf, sh), Sent::Hello));
        }
        if self.peer_epoch == 0 {
            return None;
        }
        if let Some((_, exchange)) = self.answers.pop_front() {
            return Some((self.build_answer(exchange, buf, sh), Sent::Answer));
        }
        if !self.is_up() {
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
        self.probe_due &= *self.owed > 0 || self.unheard_fabric_at > 0;
        if self.tick_due || self.probe_due || self.gap_notice_due {
            return Some((self.build_tick(now, buf, sh), Sent::Owed(Exchange::Tick)));
        }
        None
    }

    /// The REQUEST of the first verb in `ready` that a slot can take, if any.
    pub(super) fn start_ready<O: Observer, M: Store>(
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
    pub(super) fn build_answer<O: Observer, M: Store>(
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
    pub(super) fn build_tick<O: Observer, M: Store>(
        &mut self,
        now: Nanos,
        buf: &mut [u8],
        sh: &mut Shared<'_, O, M>,
    ) -> usize {
        let probe = self.probe_due;
        if probe {
            self.stats.probes_sent += 1;
            self.probe_backoff += 1;
            self.sending_probe = true;
        }
        self.tick_due = false;
        self.probe_due = false;
        self.gap_notice_due = false;
        self.tick_no = self.tick_no.wrapping_add(1);
        self.recent_ticks.record(self.tick_no, now, probe);
        let ctx = self.tick_context(self.tick_no);
        // A tick still unanswered is superseded: its answer is no longer
        // waited for.
        self.settle_tick();
        self.tick_outstanding = Some(0);
        self.stats.ticks_sent += 1;
        let round_len = self.round_len();
        self.advertised_round = round_len;
        wire::compose(buf, &ctx, (sh.epoch, self.peer_epoch), |p| {
            p[..8].copy_from_slice(&round_len.to_be_bytes())
        })
    }

    /// COMMIT or REVERSE for slot `s`, if its phase still calls for one.
    pub(super) fn build_decision<O: Observer, M: Store>(
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
}
