//! TICKs and the TOCKs that answer them (receiver rows R15, R16). A peer
//! answers every TICK, in order; a TICK sent while another is unanswered
//! supersedes it (only the newest is owed an answer), but the older one's
//! TOCK, when it comes, is late, not stale: it measures the round trip,
//! and says that the probes before it were answered.

use super::*;

/// How many TICKs back a late TOCK is still recognised.
const RECENT_TICKS: usize = 8;

/// A TICK this end sent whose TOCK has not come yet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
struct SentTick {
    /// `None`: answered, superseded too long ago, or never sent.
    sent_at: Option<Nanos>,
    probe: bool,
}

/// The last few TICKs sent, by tick number modulo [`RECENT_TICKS`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct RecentTicks {
    sent: [SentTick; RECENT_TICKS],
}

impl RecentTicks {
    fn at(&mut self, tick_no: u32) -> &mut SentTick {
        &mut self.sent[tick_no as usize % RECENT_TICKS]
    }

    pub fn record(&mut self, tick_no: u32, sent_at: Nanos, probe: bool) {
        *self.at(tick_no) = SentTick {
            sent_at: Some(sent_at),
            probe,
        };
    }

    /// TICK `n` is answered while `newest` is the newest sent: when it was
    /// sent, and how many probes went after it (all still unanswered). It
    /// and every TICK before it are forgotten: their TOCKs came or never
    /// will.
    fn answer(&mut self, n: u32, newest: u32) -> Option<(Nanos, u32)> {
        let back = newest.wrapping_sub(n);
        if back as usize >= RECENT_TICKS {
            return None;
        }
        let sent_at = self.at(n).sent_at?;
        let probes_after = (1..=back)
            .filter(|&k| {
                let later = self.at(n.wrapping_add(k));
                later.sent_at.is_some() && later.probe
            })
            .count() as u32;
        for k in back..RECENT_TICKS as u32 {
            *self.at(newest.wrapping_sub(k)) = SentTick::default();
        }
        Some((sent_at, probes_after))
    }

    pub fn clear(&mut self) {
        self.sent = Default::default();
    }
}

impl Link {
    /// The context of this end's TICK number `n`: all of it follows from
    /// the number and the role.
    pub(super) fn tick_context(&self, n: u32) -> Context {
        Context {
            class: 0,
            knowledge: Knowledge::KnowYouKnowMe,
            role: self.role,
            transition: Transition::Tick,
            previous_committed: false,
            field: n,
        }
    }

    pub(super) fn handle_tock(&mut self, frame: &Frame<'_>, now: Nanos) {
        // R15: a TOCK with junk after its reflection
        if !verb::all_zero(&frame.payload[SLICE..]) {
            return self.count_malformed(Malformed::BadPayload);
        }
        // R16: the TOCK reflects a TICK of ours, the outstanding one or
        // one it superseded (a TOCK's field is its TICK's number, R14)
        let n = frame.context.field;
        let ours = frame.payload[..SLICE] == wire::reflect(&self.tick_context(n).encode());
        let answered = if ours {
            self.recent_ticks.answer(n, self.tick_no)
        } else {
            None
        };
        let Some((sent_at, probes_after)) = answered else {
            self.stats.stale_slot_frames += 1;
            return;
        };
        if n == self.tick_no {
            self.settle_tick();
        } else {
            self.stats.late_tocks += 1;
        }
        self.sample_rtt(sent_at, now);
        // O3: each probe still unanswered doubles the wait for the next.
        self.probe_backoff = probes_after;
    }
}
