//! A message-size sweep, as perftest's `ib_write_bw -a` and `ib_read_bw
//! -a` run one: WRITEs or READs of one size, a window of them in flight
//! from side a to side b of a real AF_XDP link, for a fixed time. What
//! each size moves: verbs (messages) per second, the payload in Gb/s, and
//! the frames and bytes side a's queue carried, both ways, headers and
//! answers included.

use std::time::{Duration, Instant};

use oae_client::api::Submission;
use oae_client::outcome::Outcome;
use oae_dataplane::embed::EmbeddedQueue;
use oae_pmd::netns::VethPair;
use oae_proto::verb::{Block, MAX_BLOCK, RegionRef, Verb};

use crate::link::{PairLinks, start_pair};

/// The sizes swept: payload bytes a verb carries, up to the most one frame
/// holds ([`MAX_BLOCK`]).
pub const SIZES: [usize; 5] = [64, 128, 256, 512, MAX_BLOCK];

/// How long the issuing thread sleeps when it has nothing to do. Both
/// CPUs of a small machine are the polling cores': a spinning issuer would
/// take time slices from them.
const NAP: Duration = Duration::from_micros(20);

/// Which verb a sweep runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SweepVerb {
    Write,
    Read,
}

impl SweepVerb {
    pub fn name(self) -> &'static str {
        match self {
            SweepVerb::Write => "write",
            SweepVerb::Read => "read",
        }
    }
}

/// What one size measured.
#[derive(Clone, Copy, Debug)]
pub struct SweepRun {
    pub verbs: u64,
    pub failed: u64,
    /// The outcome of the first verb that failed.
    pub first_failure: Option<&'static str>,
    pub seconds: f64,
    /// Frames and bytes side a's queue sent and received.
    pub frames: u64,
    pub bytes: u64,
}

impl SweepRun {
    pub fn verbs_per_s(&self) -> f64 {
        self.verbs as f64 / self.seconds
    }

    /// Payload moved, gigabits per second.
    pub fn payload_gbps(&self, size: usize) -> f64 {
        self.verbs_per_s() * size as f64 * 8.0 / 1e9
    }

    /// Everything side a's queue carried, both ways, gigabits per second.
    pub fn wire_gbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.seconds / 1e9
    }

    /// Frames side a's queue carried, both ways, millions per second.
    pub fn mpps(&self) -> f64 {
        self.frames as f64 / self.seconds / 1e6
    }
}

/// Runs `verb`s of `size` bytes, `window` in flight, for `seconds`, side a
/// and side b pinned to `cores`.
pub fn run(
    pair: &VethPair,
    verb: SweepVerb,
    size: usize,
    window: usize,
    seconds: f64,
    cores: [usize; 2],
) -> Result<SweepRun, String> {
    if !(1..=MAX_BLOCK).contains(&size) {
        return Err(format!("size {size}: use 1 to {MAX_BLOCK} bytes"));
    }
    let slots = window.clamp(1, 4096) as u16;
    let span = window * size.next_multiple_of(64);
    let links = PairLinks {
        auth: false,
        shared_cpus: true,
    };
    let queues = start_pair(pair, slots, span.max(4096), cores, links)?;
    let result = drive(&queues[0], verb, size, window, seconds);
    let reports: Vec<_> = queues.into_iter().filter_map(EmbeddedQueue::stop).collect();
    let a = reports.first().ok_or("side a's queue gave no report")?;
    result.map(|mut run| {
        run.frames = a.pipeline.rx_frames + a.pipeline.tx_frames;
        run.bytes = a.pipeline.rx_bytes + a.pipeline.tx_bytes;
        run
    })
}

/// Keeps `window` verbs in flight on `q` for `seconds`, then waits for the
/// last to end.
fn drive(
    q: &EmbeddedQueue,
    verb: SweepVerb,
    size: usize,
    window: usize,
    seconds: f64,
) -> Result<SweepRun, String> {
    let data = Block::new(&vec![0x5a; size]).ok_or("a block of that size")?;
    let stride = size.next_multiple_of(64) as u32;
    let target = RegionRef { id: 1, key: 1 };
    let verb_at = |slot: usize| {
        let offset = slot as u32 * stride;
        match verb {
            SweepVerb::Write => Verb::Write {
                target,
                offset,
                data,
            },
            SweepVerb::Read => Verb::Read {
                target,
                offset,
                local_region: 2,
                local_offset: offset,
                len: size as u16,
            },
        }
    };
    let submit = |slot: usize| -> Result<(), String> {
        let mut s = Submission::to_first_link(slot as u64, verb_at(slot));
        // The submission queue is bounded: a full one is tried again.
        let give_up = Instant::now() + Duration::from_secs(10);
        loop {
            match q.submit(s) {
                Ok(()) => return Ok(()),
                Err(back) if Instant::now() < give_up => {
                    s = back;
                    std::thread::sleep(NAP);
                }
                Err(_) => return Err("the submission queue stayed full".into()),
            }
        }
    };
    for slot in 0..window {
        submit(slot)?;
    }
    let started = Instant::now();
    let stop = started + Duration::from_secs_f64(seconds);
    let (mut verbs, mut failed, mut in_flight) = (0u64, 0u64, window);
    let mut first_failure = None;
    let give_up = stop + Duration::from_secs(20);
    while in_flight > 0 {
        let Some(c) = q.poll_completion() else {
            if Instant::now() > give_up {
                return Err(format!("{in_flight} verbs never completed"));
            }
            std::thread::sleep(NAP);
            continue;
        };
        match &c.result {
            Ok(_) => verbs += 1,
            Err(_) => {
                failed += 1;
                first_failure.get_or_insert(Outcome::of(&c.result).name());
            }
        }
        if Instant::now() < stop {
            submit(c.id as usize)?;
        } else {
            in_flight -= 1;
        }
    }
    Ok(SweepRun {
        verbs,
        failed,
        first_failure,
        seconds: started.elapsed().as_secs_f64(),
        frames: 0,
        bytes: 0,
    })
}
