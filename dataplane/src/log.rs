//! oaed's log: lines with a level and a time (or, under systemd, the
//! journal's time), filtered by `RUST_LOG` (`info` by default, e.g.
//! `RUST_LOG=warn` or `RUST_LOG=oae_dataplane=debug`). What a polling core
//! says about its links is rate-limited here, so a flapping link cannot
//! flood the log or stall its core on the log's lock.

use std::io::IsTerminal;

use oae_proto::Nanos;
use tracing_subscriber::EnvFilter;

/// Sets up the log for this process. Called once, by `oaed`; a library
/// user keeps its own subscriber.
pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal());
    // Under systemd the journal stamps each line itself.
    let set = if std::env::var_os("JOURNAL_STREAM").is_some() {
        builder.without_time().try_init()
    } else {
        builder.try_init()
    };
    // Already set (a test, or an embedding program): theirs stands.
    drop(set);
}

/// How much a line about a link matters to the operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The link does what it should: up, keyed, a neighbour found.
    Info,
    /// Something the operator may have to act on: a link down or not
    /// coming up, a peer refused, a message nobody received.
    Warn,
}

/// Writes `what` at `severity`, naming the queue it is about.
fn link_line(queue: &str, severity: Severity, what: &str) {
    match severity {
        Severity::Info => tracing::info!("{queue}: {what}"),
        Severity::Warn => tracing::warn!("{queue}: {what}"),
    }
}

/// Lines a polling core may write at once.
pub const NOTICE_BURST: u32 = 20;
/// Then one line per this long.
pub const NOTICE_EVERY: Nanos = 500_000_000;

/// One queue's lines about its links, through a token bucket:
/// [`NOTICE_BURST`] at once, then one per [`NOTICE_EVERY`]; what is held
/// back is counted and said with the next line let through. Counters
/// (`oaectl stats`) keep every event whatever the log says.
#[derive(Debug)]
pub struct QueueLog {
    /// Which queue: `f1 queue 0`.
    queue: String,
    tokens: u32,
    refilled: Nanos,
    held_back: u64,
}

/// What [`QueueLog::admit`] decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit {
    /// Write the line; this many lines were held back before it.
    Write { held_back: u64 },
    /// Hold it back (counted).
    HoldBack,
}

impl QueueLog {
    pub fn new(queue: String, now: Nanos) -> QueueLog {
        QueueLog {
            queue,
            tokens: NOTICE_BURST,
            refilled: now,
            held_back: 0,
        }
    }

    pub fn admit(&mut self, now: Nanos) -> Admit {
        let earned = now.saturating_sub(self.refilled) / NOTICE_EVERY;
        if earned > 0 {
            self.tokens = (u64::from(self.tokens) + earned).min(u64::from(NOTICE_BURST)) as u32;
            self.refilled += earned * NOTICE_EVERY;
        }
        if self.tokens == 0 {
            self.held_back += 1;
            return Admit::HoldBack;
        }
        self.tokens -= 1;
        Admit::Write {
            held_back: std::mem::take(&mut self.held_back),
        }
    }

    /// Writes `what` if the bucket allows.
    pub fn say(&mut self, now: Nanos, severity: Severity, what: &str) {
        if let Admit::Write { held_back } = self.admit(now) {
            if held_back > 0 {
                link_line(
                    &self.queue,
                    Severity::Warn,
                    &format!(
                        "{held_back} more link events were not logged (at most {NOTICE_BURST} \
                         at once, then {} a second); `oaectl stats` counts every one",
                        1_000_000_000 / NOTICE_EVERY
                    ),
                );
            }
            link_line(&self.queue, severity, what);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_written_then_one_line_a_period_and_the_rest_counted() {
        let mut limit = QueueLog::new("f1 queue 0".into(), 1_000);
        for _ in 0..NOTICE_BURST {
            assert_eq!(limit.admit(1_000), Admit::Write { held_back: 0 });
        }
        for _ in 0..7 {
            assert_eq!(limit.admit(1_000 + NOTICE_EVERY - 1), Admit::HoldBack);
        }
        assert_eq!(
            limit.admit(1_000 + NOTICE_EVERY),
            Admit::Write { held_back: 7 }
        );
        assert_eq!(limit.admit(1_000 + NOTICE_EVERY), Admit::HoldBack);
        // A long quiet spell earns a whole burst back, and no more.
        let later = 1_000 + 100 * NOTICE_EVERY;
        for _ in 0..NOTICE_BURST {
            assert!(matches!(limit.admit(later), Admit::Write { .. }));
        }
        assert_eq!(limit.admit(later), Admit::HoldBack);
    }
}
