//! The stage account's clock: one iteration in
//! [`StageAccount::SAMPLE_EVERY`] on average, at random intervals (a fixed
//! one beats in step with the peer's bursts and picks the same kind of
//! iteration every time), reads the loop's own clock at the end of each
//! stage; the others pay a branch per stage. What a clock read itself costs is
//! measured once and taken off each stage, so that a short stage is not
//! mostly the read that timed it.

use oae_client::stats::{Stage, StageAccount};
use oae_common::rng::Rng;

pub(super) struct StageClock {
    /// Iterations until the next one timed.
    countdown: u32,
    intervals: Rng,
    /// The iteration being timed: when its last stage ended, and its
    /// stages so far.
    timing: Option<quanta::Instant>,
    /// The loop's own clock.
    clock: quanta::Clock,
    current: [u64; 8],
    /// Nanoseconds one clock read takes, on this machine.
    read_ns: u64,
    account: StageAccount,
}

/// Clock reads averaged to find what one costs.
const CALIBRATION_READS: u32 = 256;

/// 1 to 2 × SAMPLE_EVERY − 1 iterations, SAMPLE_EVERY on average.
fn next_interval(rng: &mut Rng) -> u32 {
    rng.between(1, 2 * u64::from(StageAccount::SAMPLE_EVERY) - 1) as u32
}

fn clock_read_ns(clock: &quanta::Clock) -> u64 {
    let start = clock.now();
    let mut last = start;
    for _ in 0..CALIBRATION_READS {
        last = std::hint::black_box(clock.now());
    }
    (last.duration_since(start).as_nanos() / u128::from(CALIBRATION_READS)) as u64
}

impl StageClock {
    /// Times stages on `clock`, the loop's.
    pub(super) fn new(clock: quanta::Clock) -> StageClock {
        let read_ns = clock_read_ns(&clock);
        let mut intervals = Rng::new(0x57a6e);
        StageClock {
            read_ns,
            clock,
            countdown: next_interval(&mut intervals),
            intervals,
            timing: None,
            current: [0; 8],
            account: StageAccount {
                clock_read_ns: read_ns,
                ..StageAccount::default()
            },
        }
    }

    /// An iteration starts: time it if its turn has come.
    #[inline]
    pub(super) fn begin(&mut self) {
        self.countdown -= 1;
        if self.countdown == 0 {
            self.countdown = next_interval(&mut self.intervals);
            self.current = [0; 8];
            self.timing = Some(self.clock.now());
        }
    }

    /// `stage` ended (an iteration timed).
    #[inline]
    pub(super) fn mark(&mut self, stage: Stage) {
        if let Some(since) = &mut self.timing {
            let now = self.clock.now();
            let ns = now.duration_since(*since).as_nanos() as u64;
            self.current[stage as usize] += ns.saturating_sub(self.read_ns);
            *since = now;
        }
    }

    /// The iteration ended, having moved `frames` received and `verbs`
    /// ended (both zero: it was idle).
    #[inline]
    pub(super) fn end(&mut self, moved: bool, frames: u64, verbs: u64) {
        if self.timing.take().is_none() {
            return;
        }
        let a = &mut self.account;
        if moved {
            a.busy_iterations += 1;
            a.frames += frames;
            a.verbs += verbs;
            for (sum, ns) in a.busy_ns.iter_mut().zip(self.current) {
                *sum += ns;
            }
        } else {
            a.idle_iterations += 1;
            a.idle_ns += self.current.iter().sum::<u64>();
        }
    }

    pub(super) fn account(&self) -> StageAccount {
        self.account
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_one_iteration_in_the_sample_and_keeps_busy_from_idle() {
        let mut clock = StageClock::new(quanta::Clock::new());
        let every = u64::from(StageAccount::SAMPLE_EVERY);
        let iterations = every * 1000;
        for i in 0..iterations {
            clock.begin();
            clock.mark(Stage::DriverReceive);
            std::hint::black_box(i);
            clock.mark(Stage::Link);
            // Odd iterations moved 3 frames and 2 verbs.
            let busy = i % 2 == 1;
            clock.end(busy, 3 * u64::from(busy), 2 * u64::from(busy));
        }
        let a = clock.account();
        let timed = a.busy_iterations + a.idle_iterations;
        // One in SAMPLE_EVERY on average: 1000 expected, well within 20 %.
        assert!((800..1200).contains(&timed), "{a:?}");
        assert!(a.busy_iterations > 300 && a.idle_iterations > 300, "{a:?}");
        assert_eq!(a.frames, 3 * a.busy_iterations, "{a:?}");
        assert_eq!(a.verbs, 2 * a.busy_iterations, "{a:?}");
        // A stage not marked in a timed iteration has no time.
        assert_eq!(a.ns(Stage::Completion), 0, "{a:?}");
        assert_eq!(a.ns(Stage::Timers), 0, "{a:?}");
    }
}
