//! Per-link settings, checked before a link exists: a bad value is refused
//! with the field's name and what would be accepted.

use crate::wire::MAX_CLASS;

/// Nanoseconds on whatever monotonic clock the caller reads. The core never
/// reads a clock: every entry point that needs time takes `now`.
pub type Nanos = u64;

/// Most slots a link may have.
pub const MAX_SLOTS: u16 = 4096;
/// Verbs a link may hold waiting for a slot. Its queues are sized for it
/// when the link is made (a verb can carry a 960-byte block, so about 1 KB
/// each), so the bound keeps one link below about 64 MB.
pub const MAX_SUBMIT_QUEUE: usize = 1 << 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LinkConfig {
    /// Alternating-bit channels in each direction; throughput comes from many.
    pub slots: u16,
    /// Tentative transfers this end holds for its peer at once: the credits it
    /// advertises. At most `slots`.
    pub receive_credits: u16,
    /// Largest frame class sent or accepted (0 = 64 bytes … 4 = 1024 bytes).
    pub max_class: u8,
    /// The peer is declared unreachable after this many silent round trips
    /// (at least 2; an idle link ticks every other round, so values below 4
    /// let delay jitter declare a live peer unreachable).
    pub unreachable_after_rounds: u32,
    /// The link delivers frames in the order they were sent (a cable, a NIC
    /// queue pair, a veth pair): a loss is then found the moment an answer
    /// to a later frame arrives, with no timer. Off for a path that may
    /// reorder, where `echo_patience_rounds` finds losses instead. Safety
    /// never depends on it: on a reordering link set `ordered`, a late
    /// frame is taken for lost and its transfer reversed, nothing worse.
    pub ordered: bool,
    /// On a link that is not `ordered`: a transfer with no echo after this
    /// many round trips is reversed, and an unanswered COMMIT or REVERSE is
    /// repeated as often.
    pub echo_patience_rounds: u32,
    /// A round lasts this many smoothed RTTs …
    pub rtt_multiplier: u32,
    /// … but never less than this.
    pub min_round: Nanos,
    /// RTT assumed until the first sample.
    pub initial_rtt: Nanos,
    /// Bring-up messages repeat at this interval until the link is up (the
    /// only absolute timer: before bring-up there is no RTT to count in).
    pub hello_interval: Nanos,
    /// Attempts per verb (each reversal or transient refusal uses one).
    pub max_attempts: u32,
    /// Verbs waiting for a slot; submissions beyond it are refused.
    pub submit_queue: usize,
}

impl Default for LinkConfig {
    fn default() -> LinkConfig {
        LinkConfig {
            slots: 64,
            receive_credits: 64,
            max_class: MAX_CLASS,
            unreachable_after_rounds: 8,
            ordered: true,
            echo_patience_rounds: 3,
            rtt_multiplier: 4,
            min_round: 20_000,
            initial_rtt: 100_000,
            hello_interval: 1_000_000,
            max_attempts: 16,
            submit_queue: 4096,
        }
    }
}

/// A refused setting: which one, and what to change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub field: &'static str,
    pub problem: String,
}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}: {}", self.field, self.problem)
    }
}

impl std::error::Error for ConfigError {}

impl LinkConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        let fail = |field, problem: String| Err(ConfigError { field, problem });
        if !(1..=MAX_SLOTS).contains(&self.slots) {
            return fail(
                "slots",
                format!("must be between 1 and {MAX_SLOTS}, got {}", self.slots),
            );
        }
        if self.receive_credits == 0 || self.receive_credits > self.slots {
            return fail(
                "receive_credits",
                format!(
                    "must be between 1 and slots ({}), got {}",
                    self.slots, self.receive_credits
                ),
            );
        }
        if self.max_class > MAX_CLASS {
            return fail(
                "max_class",
                format!(
                    "must be at most {MAX_CLASS} (frames of {} bytes), got {}",
                    64 << MAX_CLASS,
                    self.max_class
                ),
            );
        }
        if self.unreachable_after_rounds < 2 {
            return fail(
                "unreachable_after_rounds",
                format!("must be at least 2, got {}", self.unreachable_after_rounds),
            );
        }
        if self.echo_patience_rounds == 0
            || self.echo_patience_rounds >= self.unreachable_after_rounds
        {
            return fail(
                "echo_patience_rounds",
                format!(
                    "must be at least 1 and below unreachable_after_rounds ({}), got {}",
                    self.unreachable_after_rounds, self.echo_patience_rounds
                ),
            );
        }
        if self.rtt_multiplier == 0 {
            return fail("rtt_multiplier", "must be at least 1".into());
        }
        if self.initial_rtt == 0 || self.hello_interval == 0 {
            return fail(
                if self.initial_rtt == 0 {
                    "initial_rtt"
                } else {
                    "hello_interval"
                },
                "must be positive".into(),
            );
        }
        if self.max_attempts == 0 {
            return fail("max_attempts", "must be at least 1".into());
        }
        if !(1..=MAX_SUBMIT_QUEUE).contains(&self.submit_queue) {
            return fail(
                "submit_queue",
                format!(
                    "must be from 1 to {MAX_SUBMIT_QUEUE}, got {}",
                    self.submit_queue
                ),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid_and_errors_name_the_field() {
        LinkConfig::default().validate().unwrap();
        let bad = LinkConfig {
            slots: 0,
            ..LinkConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().field, "slots");
        let bad = LinkConfig {
            receive_credits: 65,
            ..LinkConfig::default()
        };
        let e = bad.validate().unwrap_err();
        assert_eq!(
            e.to_string(),
            "receive_credits: must be between 1 and slots (64), got 65"
        );
    }
}
