//! Verbs handed to the link: queued, finished, failed, or handed over to
//! another link.

use super::*;

impl Link {
    /// Queues `p`; false if the submission queue is full.
    pub fn submit<O: Observer, M: Store>(
        &mut self,
        id: VerbId,
        verb: &Verb,
        sh: &mut Shared<'_, O, M>,
    ) -> bool {
        if self.phase == Phase::Unreachable {
            self.complete(id, Err(VerbError::Unreachable), sh);
            return true;
        }
        if self.queued_verbs() >= self.cfg.submit_queue {
            return false;
        }
        // Live verbs never exceed submit_queue + slots, the store's capacity.
        // Fields are written in place: a verb is copied once, into the store.
        let v = match self.free_verbs.pop() {
            Some(v) => {
                let p = &mut self.verbs[v as usize];
                p.id = id;
                p.verb.assign(verb);
                p.attempts = 0;
                p.not_before_round = 0;
                p.retried_after_commits = false;
                v
            }
            None => {
                self.verbs.push(Pending {
                    id,
                    verb: *verb,
                    attempts: 0,
                    not_before_round: 0,
                    retried_after_commits: false,
                });
                (self.verbs.len() - 1) as u32
            }
        };
        if matches!(verb, Verb::Send { .. }) {
            self.queue_message(v);
        } else {
            self.ready.push_back(v);
        }
        true
    }

    /// Verbs accepted and not on a slot.
    pub(super) fn queued_verbs(&self) -> usize {
        self.ready.len() + self.backoff.len() + self.after_commits.len() + self.messages.waiting()
    }

    /// Completes stored verb `v` and frees its place.
    pub(super) fn finish<O: Observer, M: Store>(
        &mut self,
        v: u32,
        result: Result<Output, VerbError>,
        sh: &mut Shared<'_, O, M>,
    ) {
        self.free_verbs.push(v);
        self.complete(self.verbs[v as usize].id, result, sh);
        self.message_decided(v);
    }

    pub(super) fn complete<O: Observer, M: Store>(
        &mut self,
        id: VerbId,
        result: Result<Output, VerbError>,
        sh: &mut Shared<'_, O, M>,
    ) {
        if result.is_ok() {
            self.stats.completions_ok += 1;
        } else {
            self.stats.completions_err += 1;
        }
        sh.events.push_back(Event::Completed {
            link: self.index,
            id,
            result,
        });
    }

    /// Verbs never sent cannot have had an effect: fail them now rather than
    /// hold their issuers for a link that may not come back. Verbs in flight
    /// stay in doubt until the link or the peer's next incarnation resolves
    /// them.
    pub(super) fn fail_queued<O: Observer, M: Store>(&mut self, sh: &mut Shared<'_, O, M>) {
        while let Some(v) = self.ready.pop_front() {
            self.finish(v, Err(VerbError::Unreachable), sh);
        }
        while let Some(v) = self.backoff.pop_front() {
            self.finish(v, Err(VerbError::Unreachable), sh);
        }
        while let Some(v) = self.after_commits.pop_front() {
            self.finish(v, Err(VerbError::Unreachable), sh);
        }
        self.fail_waiting_messages(VerbError::Unreachable, sh);
    }

    /// Moves the verbs queued here and not yet on a slot to `to`, oldest
    /// first, as far as its queue takes them; returns how many moved. They
    /// never left this end, so they had no effect anywhere.
    pub fn hand_over<O: Observer, M: Store>(
        &mut self,
        to: &mut Link,
        sh: &mut Shared<'_, O, M>,
    ) -> usize {
        let mut moved = 0;
        let mut sent_message = false;
        for which in 0..3 {
            let queue = match which {
                0 => &mut self.after_commits,
                1 => &mut self.ready,
                _ => &mut self.backoff,
            };
            // Verbs too large for `to`'s frames stay, in order, and wait
            // for this link.
            for _ in 0..queue.len() {
                let v = queue.pop_front().expect("counted");
                let p = &self.verbs[v as usize];
                if p.verb.class(to.cfg.max_class).is_some() && to.submit(p.id, &p.verb, sh) {
                    self.free_verbs.push(v);
                    moved += 1;
                    // The SEND in flight was queued, not on a slot: the
                    // ones behind it may follow it.
                    sent_message |= matches!(p.verb, Verb::Send { .. });
                } else {
                    queue.push_back(v);
                }
            }
        }
        if sent_message {
            self.messages_in_flight_moved();
        }
        moved + self.hand_over_messages(to, sh)
    }
}
