//! Receiving a frame: checks every frame passes before it reaches the
//! target or the initiator, TICKs and TOCKs (receiver rows R1-R2, R10-R16).

use super::*;

impl Link {
    pub fn handle_frame<O: Observer, M: Store>(
        &mut self,
        bytes: &[u8],
        now: Nanos,
        sh: &mut Shared<'_, O, M>,
    ) -> Received {
        self.stats.rx_frames += 1;
        let frame = match Frame::parse(bytes) {
            // R2: a class above ours
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
        // R44: key agreement is the node's, for links that agree keys; a
        // handshake reaching a link is one this end never asked for
        if frame.context.transition == Transition::Handshake {
            self.count_malformed(Malformed::Inconsistent);
            self.note_down_reason(DownReason::PeerAgreesKeys);
            return Received::Own;
        }
        if frame.context.transition == Transition::Hello {
            self.handle_hello(&frame, sh);
            return Received::Own;
        }
        // R10: not from our peer's incarnation to ours
        if self.peer_epoch == 0
            || frame.sender_epoch != self.peer_epoch
            || frame.receiver_epoch != sh.epoch
        {
            self.stats.stale_epoch += 1;
            return Received::Own;
        }
        // R11: bits both ends agreed at bring-up
        if let Err(m) = self.check_agreed_bits(&frame.context) {
            self.count_malformed(m);
            return Received::Own;
        }
        // R12: heard, up, order noted; then the rows below, then R40
        self.heard_this_round = true;
        self.silent_rounds = 0;
        self.unanswered_probes = 0;
        self.peer_lost_us = false;
        self.last_heard_at = now;
        self.unheard_fabric_at = 0;
        self.quiet_for_a_round = false;
        if !self.is_up() {
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
            Transition::Tock => self.handle_tock(&frame, now),
            t if t.from_initiator() => self.handle_as_target(&frame, sh),
            _ => self.handle_as_initiator(&frame, now, sh),
        }
        // After the frame's own answer, if it was one: whatever the peer
        // has seen and not answered is lost.
        // R40: what the peer has seen and not answered is lost
        if self.cfg.ordered {
            self.find_losses(frame.seen);
            // O3: the peer has heard the oldest probe it had not.
            if self
                .deaf_since
                .is_some_and(|(probe, _)| !order_after(probe, frame.seen))
            {
                self.deaf_since = None;
                self.deaf_for_a_round = false;
            }
        }
        received
    }

    /// Bits a frame after bring-up must carry as both ends agreed them: the
    /// sender is up (knowledge 2) and has the other role; HELLO, TICK,
    /// COMMIT and REVERSE are one slice-octet long (class 0).
    pub(super) fn check_agreed_bits(&self, ctx: &Context) -> Result<(), Malformed> {
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

    pub(super) fn handle_tick(&mut self, frame: &Frame<'_>) {
        // R13: a TICK with junk after the round length
        if !verb::all_zero(&frame.payload[8..]) {
            return self.count_malformed(Malformed::BadPayload);
        }
        // R14: a TICK is answered by a TOCK in order; Bob takes the round length
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
}
