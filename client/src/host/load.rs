//! A host program's verb load through the host ring: keep a window of
//! FETCH-ADDs in flight on one word of the peer's memory, measure the
//! rate and the latency the host program sees (ring, dataplane, link and
//! back), and count every outcome. `oaectl host-verbs` runs it; the
//! benchmark suite and the tests read its [`LoadReport`].

use std::time::{Duration, Instant};

use oae_proto::{Output, RegionRef, Verb};

use super::{HostMode, HostQueue, HostQueueCounters};
use crate::api::{AppError, Submission};

/// What to run.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    pub target: RegionRef,
    /// The first of the 8-byte words the FETCH-ADDs add 1 to: the verb in
    /// window position `i` adds to word `i % words`, so with as many words
    /// as the window no two verbs in flight contend for one.
    pub offset: u32,
    pub words: u32,
    pub count: u64,
    pub window: usize,
    /// If set, no verb is submitted after this long (the window drains).
    pub duration: Option<Duration>,
    /// Safety net: the load stops here, counting what did not complete.
    pub deadline: Duration,
}

/// What a load did. `ok` FETCH-ADDs added 1 each: the words together moved
/// by `ok` (plus whatever other programs added).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LoadReport {
    pub mode: String,
    /// The slot this process held (bilateral).
    pub slot: Option<usize>,
    pub count: u64,
    pub ok: u64,
    /// Completed with a verb error (no effect, or the error says).
    pub failed: u64,
    /// Completed as not submitted (no effect).
    pub not_submitted: u64,
    /// Submitted and not completed by the deadline. (`count` is what was
    /// submitted.)
    pub unfinished: u64,
    /// Completions for no verb this program has in flight (must stay 0:
    /// nothing meant for another process, or twice, reaches it).
    pub unexpected: u64,
    pub seconds: f64,
    pub verbs_per_s: f64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub exchanges: u64,
    pub withdrawn: u64,
    pub foreign_completions: u64,
    pub undecodable: u64,
}

/// A load and what the peer's memory says of it (`oaectl demo
/// --host-ring`, read back by the benchmark suite).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CheckedLoad {
    pub load: LoadReport,
    /// How much the target words moved.
    pub added: u64,
    /// `added` equals the FETCH-ADDs that succeeded, and every verb
    /// completed once.
    pub exact: bool,
}

impl LoadReport {
    pub fn completed(&self) -> u64 {
        self.ok + self.failed + self.not_submitted
    }
}

/// Runs `load` on `queue` to completion or its deadline.
pub fn run(queue: &mut HostQueue, load: &Load) -> LoadReport {
    let mut latency = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)
        .expect("histogram bounds");
    let window = load.window.max(1);
    // Submission time per window position; ids are positions.
    let mut sent_at: Vec<Option<Instant>> = vec![None; window];
    let mut free: Vec<u64> = (0..window as u64).rev().collect();
    let mut report = LoadReport {
        mode: match queue.mode() {
            HostMode::Fito => "fito",
            HostMode::Bilateral => "bilateral",
        }
        .into(),
        slot: queue.slot(),
        count: load.count,
        ..LoadReport::default()
    };
    let start = Instant::now();
    let deadline = start + load.deadline;
    let stop_at = load.duration.map(|d| start + d);
    let (mut submitted, mut polls, mut count) = (0u64, 0u64, load.count);
    while report.completed() < count {
        if stop_at.is_some_and(|t| polls.is_multiple_of(64) && Instant::now() >= t) {
            count = submitted;
        }
        while submitted < count
            && let Some(&id) = free.last()
        {
            let verb = Verb::FetchAdd {
                target: load.target,
                offset: load.offset + 8 * (id as u32 % load.words.max(1)),
                add: 1,
            };
            if queue.submit(Submission::to_first_link(id, verb)).is_err() {
                break;
            }
            free.pop();
            sent_at[id as usize] = Some(Instant::now());
            submitted += 1;
        }
        while let Some(c) = queue.poll_completion() {
            let Some(at) = sent_at.get_mut(c.id as usize).and_then(Option::take) else {
                report.unexpected += 1;
                continue;
            };
            let _ = latency.record((at.elapsed().as_nanos() as u64).max(1));
            free.push(c.id);
            match c.result {
                Ok(Output::FetchAdd { .. }) => report.ok += 1,
                Ok(_) | Err(AppError::Verb(_)) => report.failed += 1,
                Err(AppError::NotSubmitted(_)) => report.not_submitted += 1,
            }
        }
        polls += 1;
        if polls.is_multiple_of(1024) && Instant::now() > deadline {
            break;
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let counters: HostQueueCounters = queue.counters();
    LoadReport {
        count: submitted,
        unfinished: submitted - report.completed(),
        seconds,
        verbs_per_s: report.completed() as f64 / seconds,
        p50_ns: latency.value_at_quantile(0.5),
        p99_ns: latency.value_at_quantile(0.99),
        p999_ns: latency.value_at_quantile(0.999),
        exchanges: counters.exchanges,
        withdrawn: counters.withdrawn,
        foreign_completions: counters.foreign_completions,
        undecodable: counters.undecodable,
        ..report
    }
}
