//! The initiator side of a slot: starting transfers, and what ECHO,
//! REFUSE, COMMIT_ACK and REVERSE_ACK do to them (receiver rows R32-R39).

use super::*;

impl Link {
    /// The last frame sent on slot `s` is taken for lost (or the link came
    /// back after an outage): a transfer awaiting its echo is reversed, an
    /// unconfirmed decision is sent again. True if the slot had one.
    pub(super) fn give_up_on(&mut self, s: u16) -> bool {
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

    pub(super) fn handle_as_initiator<O: Observer, M: Store>(
        &mut self,
        frame: &Frame<'_>,
        now: Nanos,
        sh: &mut Shared<'_, O, M>,
    ) {
        let ctx = frame.context;
        let s = ctx.slot();
        // R32: a slot beyond those in use
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
        // R33: not the answer the slot waits for
        if !expected_phase || ctx.seq() != slot.seq {
            self.stats.stale_slot_frames += 1;
            return;
        }
        let acknowledgement = matches!(
            ctx.transition,
            Transition::CommitAck | Transition::ReverseAck
        );
        // R34: an acknowledgement with junk after its reflection
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
                    // R37: a REFUSE with a known reason retries or fails the verb
                    Some(why) if reflected_ok && clean => self.on_refuse(s, why, sh),
                    // R36: a REFUSE that does not match is reversed
                    _ => self.start_reverse(s, ReverseReason::EchoMismatch),
                }
            }
            // R38: the COMMIT acknowledged, the slot is free
            Transition::CommitAck => self.set_idle(s),
            // R39: the REVERSE acknowledged, the verb goes again or fails
            Transition::ReverseAck => self.on_reverse_ack(s, sh),
            _ => unreachable!("an initiator frame"),
        }
    }

    pub(super) fn on_echo<O: Observer, M: Store>(
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
        // R36: an ECHO that does not match is reversed
        if !reflected_ok || frame.context.class != self.senders[si].class {
            return self.start_reverse(s, ReverseReason::EchoMismatch);
        }
        let p = &self.verbs[v as usize];
        let Some((output, block)) = verb::decode_output(&p.verb, &frame.payload[SLICE..]) else {
            return self.start_reverse(s, ReverseReason::EchoMismatch);
        };
        // A READ's block was not held in flight: it lands now, under a
        // momentary lock, or the attempt is reversed and tried again.
        if let (Verb::Read { .. }, Some((region, offset, len))) = (&p.verb, p.verb.local_block()) {
            let owner = LockOwner::initiator(self.index, s);
            if sh.memory.lock_local(region, offset, len, owner).is_err() {
                return self.start_reverse(s, ReverseReason::LocalLocked);
            }
            sh.memory.unlock_local(region, offset, len, Some(block));
            sh.observer.local_landed(p.id);
        }
        // R35: a good ECHO completes the verb, committed
        self.stats.echoes_verified += 1;
        self.stats.completions_ok += 1;
        // The decision is taken here: commit. Both ends' effects are now
        // inevitable, so a bilateral swap's block lands in its local block
        // (locked since sending) straight from the frame, before the
        // completion that says so.
        if matches!(p.verb, Verb::BilateralSwap { .. }) {
            release_local(&p.verb, Some(block), sh.memory);
            sh.observer.local_landed(p.id);
        }
        sh.events.push_back(Event::Completed {
            link: self.index,
            id: p.id,
            result: Ok(output),
        });
        let sent_at = self.senders[si].sent_at;
        self.sample_rtt(sent_at, now);
        let slot = &mut self.senders[si];
        slot.pending = None;
        slot.phase = SendPhase::Committed;
        slot.commit_sent = false;
        slot.previous_committed = false;
        self.commit_candidates.push(s);
        self.free_verbs.push(v);
        self.message_decided(v);
    }

    pub(super) fn on_refuse<O: Observer, M: Store>(
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

    pub(super) fn on_reverse_ack<O: Observer, M: Store>(
        &mut self,
        s: u16,
        sh: &mut Shared<'_, O, M>,
    ) {
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
            let why = match reason {
                ReverseReason::LocalLocked => VerbError::LocalLocked,
                other => VerbError::Exhausted(other),
            };
            self.finish(v, Err(why), sh);
        }
    }

    pub(super) fn start_reverse(&mut self, s: u16, reason: ReverseReason) {
        self.stats.echo_mismatches += u64::from(reason == ReverseReason::EchoMismatch);
        self.senders[usize::from(s)].phase = SendPhase::Reversing(reason);
        self.queue_sender(s);
    }

    pub(super) fn set_idle(&mut self, s: u16) {
        let slot = &mut self.senders[usize::from(s)];
        slot.phase = SendPhase::Idle;
        slot.previous_committed = false;
        slot.commit_sent = false;
        self.credits_in_use -= 1;
        self.idle.push(s);
    }

    pub(super) fn queue_sender(&mut self, s: u16) {
        let slot = &mut self.senders[usize::from(s)];
        if !slot.queued {
            slot.queued = true;
            self.sender_tx.push_back(s);
        }
    }

    /// Puts stored verb `v` on a slot and writes its REQUEST, or parks or
    /// fails it.
    pub(super) fn start_transfer<O: Observer, M: Store>(
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
        let Some(s) = self.take_slot() else {
            self.ready.push_front(v);
            return Start::NoSlot;
        };
        self.verbs[vi].attempts += 1;
        if !self.lock_local_block(v, s, sh) {
            return Start::Parked;
        }
        let ctx = self.arm_request(s, class, v, now);
        self.stats.requests_sent += 1;
        let p = &self.verbs[vi];
        sh.observer.sent(
            self.index,
            sh.epoch,
            s,
            self.senders[usize::from(s)].seq,
            p.id,
        );
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

    /// A slot for a new transfer: one whose last transfer committed, which
    /// carries that commit along; otherwise a free slot, if a credit allows.
    fn take_slot(&mut self) -> Option<u16> {
        loop {
            match self.commit_candidates.pop() {
                Some(s) if self.senders[usize::from(s)].phase == SendPhase::Committed => {
                    return Some(s);
                }
                Some(_) => continue,
                None => break,
            }
        }
        match self.idle.pop() {
            Some(s) if self.credits_in_use < self.peer_credits => {
                self.credits_in_use += 1;
                Some(s)
            }
            other => {
                self.idle.extend(other);
                None
            }
        }
    }

    /// A slot taken for a transfer that could not start, as it was.
    fn give_slot_back(&mut self, s: u16) {
        if self.senders[usize::from(s)].phase == SendPhase::Committed {
            self.commit_candidates.push(s);
        } else {
            self.credits_in_use -= 1;
            self.idle.push(s);
        }
    }

    /// A bilateral swap locks its local block before it asks: false if the
    /// block is locked, and then the slot is given back and the verb waits
    /// a round (or fails, out of attempts).
    fn lock_local_block<O: Observer, M: Store>(
        &mut self,
        v: u32,
        s: u16,
        sh: &mut Shared<'_, O, M>,
    ) -> bool {
        let vi = v as usize;
        let verb = &self.verbs[vi].verb;
        let (Verb::BilateralSwap { .. }, Some((local_region, local_offset, len))) =
            (verb, verb.local_block())
        else {
            return true;
        };
        let owner = LockOwner::initiator(self.index, s);
        if sh
            .memory
            .lock_local(local_region, local_offset, len, owner)
            .is_ok()
        {
            return true;
        }
        self.give_slot_back(s);
        if self.verbs[vi].attempts < self.cfg.max_attempts {
            self.verbs[vi].not_before_round = self.round + 1;
            self.backoff.push_back(v);
        } else {
            self.finish(v, Err(VerbError::LocalLocked), sh);
        }
        false
    }

    /// Slot `s` awaits the echo of verb `v`'s REQUEST, sent now in `class`:
    /// the REQUEST's context.
    fn arm_request(&mut self, s: u16, class: u8, v: u32, now: Nanos) -> Context {
        let round = self.round;
        let slot = &mut self.senders[usize::from(s)];
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
        ctx
    }

    /// The COMMIT or REVERSE slot `s` owes the target, if any.
    pub(super) fn decision_context(&self, s: u16) -> Option<Context> {
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
}
