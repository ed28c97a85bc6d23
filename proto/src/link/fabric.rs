//! The fabric's hold on the link: FORWARD frames, a peer's restart learnt
//! elsewhere, and transfers in doubt resolved over another path.

use super::*;

impl Link {
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
        debug_assert!(self.is_up() && transition.machine() == Machine::Fabric);
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
        self.unheard_fabric_at = now.max(1);
        len
    }

    /// The peer settles this link's transfers by another path (F2): it
    /// cannot use the link, so the way to it is broken, as when it says
    /// hello as if it had not heard this end. Cleared by the peer's next
    /// frame over the link.
    pub fn peer_lost_us_elsewhere(&mut self) {
        if self.is_up() {
            self.peer_lost_us = true;
        }
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
        self.hello_due = true;
    }

    /// This path's route went out on a link that stopped being usable: the
    /// frames it sent that way are most likely gone. Every transfer not
    /// settled is given up on now, as patience would later (a REQUEST
    /// reversed, a decision sent again), over the route of the moment.
    /// Safe whatever actually arrived: giving up is the initiator's own
    /// decision, and the peer answers a repeated one again.
    pub fn route_lost(&mut self) {
        debug_assert!(!self.cfg.ordered, "paths are unordered");
        for s in 0..self.active_slots() {
            if self.give_up_on(s) {
                self.stats.lost_with_route += 1;
            }
        }
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
}
