//! Bring-up: HELLOs to common knowledge, a peer's new incarnation, and
//! what a restart resets (PROTOCOL.md, "Bring-up"; receiver rows R3-R9).

use super::*;

/// What a HELLO offers: its sender's node id, slots, credits and largest
/// class.
struct HelloOffer {
    peer_id: u64,
    slots: u16,
    credits: u16,
    max_class: u8,
}

impl HelloOffer {
    fn of(frame: &Frame<'_>) -> Result<HelloOffer, Malformed> {
        // R3: a HELLO is of class 0
        if frame.context.class != 0 {
            return Err(Malformed::Inconsistent);
        }
        let p = frame.payload;
        // R4: a HELLO's field, padding and offer
        if !verb::all_zero(&p[HELLO_LEN..]) || frame.context.field != 0 {
            return Err(Malformed::BadPayload);
        }
        let offer = HelloOffer {
            peer_id: u64::from_be_bytes(p[..8].try_into().expect("eight bytes")),
            slots: u16::from_be_bytes([p[8], p[9]]),
            credits: u16::from_be_bytes([p[10], p[11]]),
            max_class: p[12],
        };
        let HelloOffer {
            slots,
            credits,
            max_class,
            ..
        } = offer;
        if slots == 0 || credits == 0 || credits > slots || max_class > wire::MAX_CODEC_CLASS {
            return Err(Malformed::BadPayload);
        }
        Ok(offer)
    }
}

impl Link {
    /// How long after a HELLO the next goes, while the peer does not answer.
    pub(super) fn hello_wait(&self) -> Nanos {
        let interval = self.cfg.hello_interval;
        let doublings = self
            .unanswered_hellos
            .saturating_sub(self.cfg.unreachable_after_rounds)
            .min(30);
        interval
            .saturating_mul(1 << doublings)
            .min(HELLO_BACKOFF_LIMIT.max(interval))
    }

    pub(super) fn handle_hello<O: Observer, M: Store>(
        &mut self,
        frame: &Frame<'_>,
        sh: &mut Shared<'_, O, M>,
    ) {
        let HelloOffer {
            peer_id,
            slots,
            credits,
            max_class,
        } = match HelloOffer::of(frame) {
            Ok(offer) => offer,
            Err(m) => return self.count_malformed(m),
        };
        let epoch = frame.sender_epoch;
        // R5: an older or dead incarnation
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
        // R6: a HELLO that knows us takes its role against us
        if knows_us && frame.context.role != peer_role {
            return self.count_malformed(Malformed::Inconsistent);
        }
        // R7: a new incarnation of the peer
        if epoch > self.peer_epoch {
            if self.peer_epoch != 0 {
                self.peer_restarted(sh);
            }
            self.peer_epoch = epoch;
            *self.knew_peer = true;
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
        }
        self.heard_this_round = true;
        self.silent_rounds = 0;
        self.peer_lost_us = self.is_up() && frame.context.knowledge < Knowledge::KnowYouKnowMe;
        // R8: a HELLO that names us: up, answered at level 2 if below
        if frame.receiver_epoch == sh.epoch {
            if !self.is_up() {
                self.go_up(sh);
            }
            if frame.context.knowledge < Knowledge::KnowYouKnowMe {
                self.hello_due = true;
            }
        } else {
            // R9: a HELLO that names another of our epochs, or none
            self.hello_due = true;
        }
    }

    /// A new peer incarnation: both ends number their frames from 1 again.
    pub(super) fn restart_order(&mut self) {
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

    pub(super) fn reset_sender_slots(&mut self) {
        self.idle.clear();
        self.commit_candidates.clear();
        self.sender_tx.clear();
        self.credits_in_use = 0;
        self.senders.fill(SenderSlot::IDLE);
        for s in (0..self.active_slots()).rev() {
            self.idle.push(s);
        }
    }

    /// The peer came back as a new incarnation: settle everything the old one
    /// left here by the rules of `docs/SEMANTICS.md`.
    pub(super) fn peer_restarted<O: Observer, M: Store>(&mut self, sh: &mut Shared<'_, O, M>) {
        self.stats.peer_restarts += 1;
        self.bring_up_again();
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
                self.settle_message(s as u16, true, sh.events);
            }
            let r = &mut self.receivers[s];
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

    pub(super) fn build_hello<O: Observer, M: Store>(
        &mut self,
        buf: &mut [u8],
        sh: &mut Shared<'_, O, M>,
    ) -> usize {
        let ctx = Context {
            class: 0,
            knowledge: self.knowledge(),
            role: self.role,
            transition: Transition::Hello,
            previous_committed: false,
            field: 0,
        };
        let cfg = self.cfg;
        wire::compose(buf, &ctx, (sh.epoch, self.peer_epoch), |p| {
            write_hello_offer(p, sh.node_id, &cfg)
        })
    }
}

/// A HELLO's payload: its sender's node id and the offer of a link
/// configured as `cfg`.
pub(crate) fn write_hello_offer(payload: &mut [u8], node_id: u64, cfg: &LinkConfig) {
    payload[..8].copy_from_slice(&node_id.to_be_bytes());
    payload[8..10].copy_from_slice(&cfg.slots.to_be_bytes());
    payload[10..12].copy_from_slice(&cfg.receive_credits.to_be_bytes());
    payload[12] = cfg.max_class;
}
