//! Losses found by order: what was sent in which order, what the peer has
//! seen, and what is owed an answer (receiver row R40).

use super::*;

impl Link {
    /// Every frame owed an answer whose order number is at most `seen` has
    /// had it, or was lost with its answer: the peer answers in order and
    /// has seen a later frame (or this one, unanswered).
    // R40: frames the peer has seen without answering are lost
    pub(super) fn find_losses(&mut self, seen: u32) {
        while let Some(&(order, exchange)) = self.awaiting.front() {
            if order_after(order, seen) {
                break;
            }
            self.awaiting.pop_front();
            let lost = match exchange {
                Exchange::Tick => match self.tick_outstanding {
                    Some(t) if t == order => {
                        // It and every TICK before it: no TOCK will come.
                        self.tick_outstanding = None;
                        self.recent_ticks.clear();
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
    pub(super) fn owe(&mut self, order: u32, exchange: Exchange, now: Nanos) {
        if !self.cfg.ordered {
            return;
        }
        *self.owed += 1;
        self.last_owed_at = now;
        // Answered entries at the front are dead weight: drop them so the
        // queue stays within its capacity.
        while let Some(&(o, e)) = self.awaiting.front() {
            let live = match e {
                Exchange::Tick => self.tick_outstanding == Some(o),
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
    pub(super) fn sent_owed(&mut self, order: u32, exchange: Exchange, now: Nanos) {
        match exchange {
            Exchange::Tick => {
                if let Some(t) = &mut self.tick_outstanding {
                    *t = order;
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
    pub(super) fn settle_tick(&mut self) {
        if let Some(order) = self.tick_outstanding.take()
            && self.cfg.ordered
            && order != 0
        {
            self.one_less_owed();
        }
    }

    /// Records a frame's place in the peer's order; a jump means frames of
    /// the peer's were lost on the way here.
    pub(super) fn note_order(&mut self, order: u32) {
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
    pub(super) fn seen(&self) -> u32 {
        self.answers
            .front()
            .map_or(self.rx_high, |&(order, _)| order.wrapping_sub(1))
    }

    /// The answer owed to slot `s`'s last frame arrived.
    pub(super) fn answered(&mut self, s: u16) {
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

    pub(super) fn one_less_owed(&mut self) {
        *self.owed -= 1;
        if *self.owed == 0 {
            // Meaningless until the next frame owed an answer: cleared so
            // that it does not tell otherwise equal states apart.
            self.last_owed_at = 0;
        }
    }

    /// Forgets every frame owed an answer (the link restarts its order).
    pub(super) fn forget_owed(&mut self) {
        self.awaiting.clear();
        *self.owed = 0;
        self.last_owed_at = 0;
        self.unheard_fabric_at = 0;
        self.unanswered_probes = 0;
        self.deaf_since = None;
        self.deaf_for_a_round = false;
        self.probe_backoff = 0;
        self.probe_due = false;
        self.tick_outstanding = None;
        self.recent_ticks.clear();
        for slot in &mut self.senders {
            slot.awaiting = 0;
        }
    }
}
