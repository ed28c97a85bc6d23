//! Time: rounds, the peer's silence, HELLO and probe timers, and round-trip
//! samples.

use super::*;

impl Link {
    pub fn poll_timeout(&self) -> Nanos {
        let round_end = self.round_started.saturating_add(self.round_len());
        if !self.is_up() {
            round_end.min(self.next_hello)
        } else {
            let probe = self.probe_at().unwrap_or(Nanos::MAX);
            round_end
                .min(probe)
                .min(self.suspect_at().unwrap_or(Nanos::MAX))
        }
    }

    /// When the probes left unanswered make the link suspected: the moment
    /// it has been quiet for a minimum round, or the peer, talking, has not
    /// shown for a minimum round that it heard a probe, so the fabric
    /// moves its traffic then, not at the end of the round.
    fn suspect_at(&self) -> Option<Nanos> {
        let quiet = (self.unanswered_probes >= SUSPECT_AFTER_PROBES && !self.quiet_for_a_round)
            .then(|| self.last_heard_at.saturating_add(self.cfg.min_round));
        let deaf = self
            .deaf_since
            .filter(|_| !self.deaf_for_a_round)
            .map(|(_, at)| at.saturating_add(self.cfg.min_round));
        match (quiet, deaf) {
            (Some(q), Some(d)) => Some(q.min(d)),
            (q, d) => q.or(d),
        }
    }

    /// When to send a tick that makes the peer answer with its `seen`, if a
    /// frame is owed an answer on an ordered link. The probe is no timeout:
    /// an answer merely late still arrives before the probe's (the peer
    /// answers in order), so its timing costs frames, never a spurious
    /// reversal. It comes about one RTT after the newest owed frame, so a
    /// loss on an idle link is found within about two round trips, and
    /// waits twice as long after each probe the peer left unanswered (a
    /// TOCK, even a late one, says which were answered).
    pub(super) fn probe_at(&self) -> Option<Nanos> {
        if !self.cfg.ordered {
            return None;
        }
        let since = if *self.owed > 0 {
            self.last_owed_at
        } else if self.unheard_fabric_at > 0 {
            self.unheard_fabric_at
        } else {
            return None;
        };
        let delay = self
            .srtt
            .saturating_add(2 * self.rttvar)
            .max(self.srtt + self.srtt / 4)
            .saturating_mul(1 << self.probe_backoff.min(6))
            .min(self.round_len());
        Some(since.saturating_add(delay))
    }

    pub fn handle_timeout<O: Observer, M: Store>(&mut self, now: Nanos, sh: &mut Shared<'_, O, M>) {
        self.quiet_for_a_round = now.saturating_sub(self.last_heard_at) >= self.cfg.min_round;
        self.deaf_for_a_round = self
            .deaf_since
            .is_some_and(|(_, at)| now.saturating_sub(at) >= self.cfg.min_round);
        if !self.is_up() && now >= self.next_hello {
            self.hello_due = true;
            self.unanswered_hellos += 1;
            self.next_hello = now.saturating_add(self.hello_wait());
            // A peer that never answers bring-up is as unreachable as one
            // that fell silent: fail what is queued rather than hold it.
            if self.phase == Phase::BringingUp
                && self.unanswered_hellos > self.cfg.unreachable_after_rounds
            {
                self.give_up_bring_up(sh);
            }
        }
        if self.is_up() && !self.probe_due && self.probe_at().is_some_and(|at| now >= at) {
            // Counted when decided, not when sent: suspicion (and the
            // fabric's failover, which follows this call) need not wait
            // for the link's next transmit opportunity.
            self.probe_due = true;
            self.unanswered_probes += 1;
        }
        if now >= self.round_started.saturating_add(self.round_len()) {
            // One round per call: a stalled caller must not count its own
            // stall as many silent rounds of the peer.
            self.round_started = now;
            self.end_round(sh);
        }
    }

    /// Everything that is counted in round trips happens here.
    pub(super) fn end_round<O: Observer, M: Store>(&mut self, sh: &mut Shared<'_, O, M>) {
        let heard = core::mem::replace(&mut self.heard_this_round, false);
        let sent = core::mem::replace(&mut self.sent_this_round, false);
        self.round += 1;
        if !self.is_up() {
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

    pub(super) fn sample_rtt(&mut self, sent_at: Nanos, now: Nanos) {
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
        // L1: Bob counts silence in rounds no shorter than the length in
        // Alice's last TICK. A round grown past twice that is told at once:
        // at its next idle tick it would come too late, Bob having counted
        // its rounds silent in the old, shorter ones.
        if self.role == Role::Alice && self.round_len() > 2 * self.advertised_round {
            self.tick_due = true;
        }
    }
}
