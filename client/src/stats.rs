//! Every counter of a dataplane, as `oaectl stats` and the metrics endpoint
//! read them: serde types that `oaed` writes and its clients read, so both
//! sides agree on every field by construction.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use oae_os::cpu::CpuTime;
use serde::{Deserialize, Serialize};

use crate::status::QueueInfo;

/// Monotonic counters by name (the producer's field names): they only
/// grow while the process lives.
pub type Counters = BTreeMap<String, u64>;

/// Driver counters that count what the queue's own counters do (its
/// frames, its full transmit rings): shown and exported once, as the
/// queue's.
pub const DRIVER_COUNTED_BY_THE_QUEUE: [&str; 3] = ["rx_packets", "tx_packets", "tx_ring_full"];

/// The whole-number fields of a serde struct of counters, by field name
/// (others, such as CPU seconds, left out): how `oaectl stats` and the
/// metrics endpoint read a counter struct by its names.
pub fn counters_of(v: &impl Serialize) -> Counters {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::Object(m)) => m
            .into_iter()
            .filter_map(|(k, v)| Some((k, v.as_u64()?)))
            .collect(),
        _ => Counters::new(),
    }
}

/// Counters from `(name, count)` pairs.
pub fn named_counters<'a>(pairs: impl IntoIterator<Item = (&'a str, u64)>) -> Counters {
    pairs.into_iter().map(|(n, c)| (n.to_string(), c)).collect()
}

/// `oaectl stats`: every queue's counters and every XDP program's.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DataplaneStats {
    pub name: String,
    pub queues: Vec<QueueStats>,
    pub xdp: Vec<XdpStats>,
}

/// The XDP program on one interface.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct XdpStats {
    pub iface: String,
    /// `native` or `generic`.
    pub mode: String,
    pub counters: Counters,
    pub faults: FaultView,
}

/// The fault injector's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultView {
    pub drop_ppm: u32,
    pub corrupt_ppm: u32,
    /// The flipped bit's byte; `None` (`"random"` in JSON) picks one per
    /// frame.
    #[serde(with = "random_offset")]
    pub corrupt_offset: Option<u32>,
    pub link_down: bool,
    pub seed: u64,
    /// `oae`, `ipv4` or `port:N`.
    pub scope: Option<String>,
}

mod random_offset {
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Offset {
        At(u32),
        Random(String),
    }

    pub fn serialize<S: Serializer>(o: &Option<u32>, s: S) -> Result<S::Ok, S::Error> {
        match o {
            Some(at) => s.serialize_u32(*at),
            None => s.serialize_str("random"),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
        match Offset::deserialize(d)? {
            Offset::At(at) => Ok(Some(at)),
            Offset::Random(r) if r == "random" => Ok(None),
            Offset::Random(r) => Err(D::Error::custom(format!(
                "corrupt_offset: '{r}' is neither a byte offset nor \"random\""
            ))),
        }
    }
}

/// One queue: its polling core, driver, links and the verbs it ran.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct QueueStats {
    pub queue: QueueInfo,
    pub pipeline: PipelineCounters,
    /// Verbs ended, by verb and outcome (those that never ended are not
    /// here): only the pairs that happened.
    pub verbs: Vec<VerbCount>,
    pub host: Option<HostStats>,
    pub driver: Counters,
    pub idle: IdleCounters,
    /// The polling thread's CPU time.
    pub cpu: CpuTime,
    /// `oae` or `rc-model`.
    pub transport: String,
    pub links: Vec<LinkCounters>,
    /// Latency of every verb completed on the queue.
    pub latency: LatencyBuckets,
    /// Where the polling core's time goes, stage by stage.
    #[serde(default)]
    pub stages: StageAccount,
}

/// The host ring a queue serves.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostStats {
    pub ring: String,
    pub counters: HostPortCounters,
}

/// How many verbs of one kind ended one way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerbCount {
    /// `read`, `write`, `cas`, `faa`, `swap`, `mcas`, `bswap`.
    pub verb: String,
    /// [`Outcome::name`]: `ok`, `refused_locked`, `queue_full`, ...
    pub outcome: String,
    pub count: u64,
}

/// One link's counters.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LinkCounters {
    pub link: u16,
    pub peer_mac: String,
    pub peer_node: Option<u64>,
    /// Malformed frames by reason (OAE links).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub malformed: Counters,
    /// Frames an authenticated link dropped, by reason (`bad_tag`,
    /// `replayed`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub auth_dropped: Counters,
    /// Every other counter of the link's transport.
    #[serde(flatten)]
    pub counters: Counters,
}

impl LinkCounters {
    /// A counter by name; zero if the transport keeps no such counter.
    pub fn get(&self, name: &str) -> u64 {
        self.counters.get(name).copied().unwrap_or(0)
    }
}

/// A latency distribution as cumulative buckets (Prometheus' histogram).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyBuckets {
    /// `(upper bound in ns, verbs at or below it)`, bounds increasing.
    pub buckets: Vec<(u64, u64)>,
    pub count: u64,
    /// Sum of the latencies in ns, at the histogram's precision (three
    /// significant figures).
    pub sum_ns: u64,
}

/// Bucket bounds: 1-2.5-5 steps from 1 µs to 10 s.
const BOUNDS_NS: [u64; 22] = [
    1_000,
    2_500,
    5_000,
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

impl LatencyBuckets {
    pub fn of(h: &Histogram<u64>) -> LatencyBuckets {
        let mut below = 0;
        let mut next = 0;
        let mut buckets: Vec<(u64, u64)> = BOUNDS_NS.iter().map(|&b| (b, 0)).collect();
        let mut sum = 0u128;
        for v in h.iter_recorded() {
            let value = v.value_iterated_to();
            let n = v.count_at_value();
            sum += u128::from(h.median_equivalent(value)) * u128::from(n);
            while next < buckets.len() && buckets[next].0 < value {
                buckets[next].1 = below;
                next += 1;
            }
            below += n;
        }
        for b in &mut buckets[next..] {
            b.1 = below;
        }
        LatencyBuckets {
            buckets,
            count: h.len(),
            sum_ns: u64::try_from(sum).unwrap_or(u64::MAX),
        }
    }
}

/// Counters of the loop itself.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct PipelineCounters {
    pub bursts: u64,
    pub rx_frames: u64,
    /// Frames of another EtherType (the XDP program passes those to the kernel).
    pub rx_not_oae: u64,
    /// OAE frames from a MAC that is none of this queue's peers (on a
    /// queue that finds its neighbours: sent to another node).
    pub rx_foreign: u64,
    /// Announcements received (docs/PROTOCOL.md, "Discovery"): a
    /// neighbour's, or a stranger's that made it one.
    #[serde(default)]
    pub rx_announcements: u64,
    #[serde(default)]
    pub tx_announcements: u64,
    /// Neighbours found, each bound to a vacant link.
    #[serde(default)]
    pub neighbours_found: u64,
    /// Neighbours let go because their link never came up.
    #[serde(default)]
    pub neighbours_forgotten: u64,
    /// Frames of strangers dropped because every link was taken.
    #[serde(default)]
    pub no_vacant_link: u64,
    pub tx_frames: u64,
    /// Bytes of the frames received and sent, Ethernet header included
    /// (no FCS).
    #[serde(default)]
    pub rx_bytes: u64,
    #[serde(default)]
    pub tx_bytes: u64,
    /// Iterations whose transmit burst found the ring full.
    pub tx_ring_full: u64,
    pub app_submitted: u64,
    pub app_refused: u64,
    /// Control requests answered (or, for verbs, submitted).
    pub control_requests: u64,
    /// Completions dropped because the application's queue was full.
    pub app_completions_lost: u64,
    /// Verbs that ended on this queue (completed or failed on a link).
    #[serde(default)]
    pub verbs_ended: u64,
    /// Messages that filled a receive whose `oaectl recv` had gone.
    #[serde(default)]
    pub messages_unclaimed: u64,
}

/// The stages of one polling-loop iteration, in the order it runs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// The driver's receive burst: descriptors and buffers in.
    DriverReceive,
    /// Each received frame through its link (and a request through the
    /// memory), the buffers released: the sans-IO core.
    Link,
    /// The link's timers, when one is due.
    Timers,
    /// Completions handed to whoever waits: histogram, outcome counts,
    /// the workload's ledger, an application's queue, the host ring.
    Completion,
    /// New verbs taken in: applications, the host ring, the workload,
    /// control requests.
    Application,
    /// The link writing its frames into transmit buffers.
    TransmitBuild,
    /// Buffers allocated, the transmit burst and the kick.
    DriverTransmit,
    /// The host ring's flush and a capture's end.
    Other,
}

impl Stage {
    pub const ALL: [Stage; 8] = [
        Stage::DriverReceive,
        Stage::Link,
        Stage::Timers,
        Stage::Completion,
        Stage::Application,
        Stage::TransmitBuild,
        Stage::DriverTransmit,
        Stage::Other,
    ];

    /// A stable name, as reports print it.
    pub fn name(self) -> &'static str {
        match self {
            Stage::DriverReceive => "driver_receive",
            Stage::Link => "link",
            Stage::Timers => "timers",
            Stage::Completion => "completion",
            Stage::Application => "application",
            Stage::TransmitBuild => "transmit_build",
            Stage::DriverTransmit => "driver_transmit",
            Stage::Other => "other",
        }
    }
}

/// Where a polling core's time goes: one iteration in
/// [`StageAccount::SAMPLE_EVERY`] on average, at random intervals, is timed
/// at each stage's end, so the account costs the loop a clock read per
/// stage that often. Iterations
/// that moved something (busy) and those that did not (idle, spinning)
/// are kept apart: the busy ones' time, over the frames and verbs they
/// moved, is the cost of a verb; the idle ones' is the cost of waiting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StageAccount {
    pub busy_iterations: u64,
    /// Frames received and verbs ended in the busy iterations timed.
    pub frames: u64,
    pub verbs: u64,
    /// Nanoseconds per stage over the busy iterations timed, in
    /// [`Stage::ALL`]'s order.
    pub busy_ns: [u64; 8],
    pub idle_iterations: u64,
    /// Nanoseconds the idle iterations timed took, all stages together.
    pub idle_ns: u64,
    /// What one clock read costs on this machine; taken off every stage
    /// timed (each is timed by one read).
    pub clock_read_ns: u64,
}

impl StageAccount {
    pub const SAMPLE_EVERY: u32 = 64;

    /// A stage's nanoseconds over the busy iterations timed.
    pub fn ns(&self, stage: Stage) -> u64 {
        self.busy_ns[stage as usize]
    }

    /// Nanoseconds per unit of `per` (frames or verbs) in `stage`.
    pub fn ns_per(&self, stage: Stage, per: u64) -> Option<f64> {
        (per > 0).then(|| self.ns(stage) as f64 / per as f64)
    }
}

/// What the idle policy did, for reports.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct IdleCounters {
    /// Loop iterations that found nothing to do.
    pub idle_iterations: u64,
    pub yields: u64,
    pub sleeps: u64,
    /// Time spent asleep, nanoseconds.
    pub slept_ns: u64,
    /// Sleeps ended by a frame, a submission or a control request (the
    /// rest ended at their timeout).
    pub woken: u64,
}

/// Counters of a dataplane's host port.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct HostPortCounters {
    pub requests: u64,
    pub undecodable: u64,
    pub completions: u64,
    /// Completions still waiting for room (FITO) or an exchange (bilateral).
    pub completions_waiting: u64,
    /// Completions dropped because even the waiting list was full
    /// (the host stopped taking them).
    pub completions_lost: u64,
    /// Completions for a host process that is gone (another claimed its
    /// ring or slot since); nobody is left to take them.
    pub completions_orphaned: u64,
    /// Verbs a FITO ring's earlier holder published and the dataplane read
    /// only after it was gone: not run, as a bilateral slot withdraws what
    /// a dead holder left offered.
    pub requests_orphaned: u64,
    /// Bilateral exchanges committed, and lost to the host's withdrawal.
    pub swaps: u64,
    pub lost_swaps: u64,
    /// Offers whose header claims more records than a slot holds.
    pub bad_offers: u64,
    /// Polls of a FITO ring whose request tail stood behind the head or
    /// more than a ring ahead of it (a host that scribbled its index):
    /// nothing was taken.
    #[serde(default)]
    pub bad_tails: u64,
    /// 1 once the ring file was found cut short under the mapping (a
    /// process truncated it): the port serves the ring no more, and the
    /// completions it still held are counted orphaned. A new ring needs a
    /// restart.
    #[serde(default)]
    pub ring_cut: u64,
}

#[cfg(test)]
mod tests {

    #[test]
    fn counters_are_the_whole_numbers_of_a_serde_value() {
        #[derive(serde::Serialize)]
        struct S {
            frames: u64,
            seconds: f64,
            name: &'static str,
        }
        let c = counters_of(&S {
            frames: 7,
            seconds: 1.5,
            name: "x",
        });
        assert_eq!(c.into_iter().collect::<Vec<_>>(), [("frames".into(), 7)]);
    }
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_end_with_every_verb() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
        for v in [800, 1_000, 3_000, 3_000, 40_000, 20_000_000_000] {
            h.record(v).unwrap();
        }
        let b = LatencyBuckets::of(&h);
        let at = |bound: u64| b.buckets.iter().find(|x| x.0 == bound).unwrap().1;
        assert_eq!(at(1_000), 2, "{b:?}");
        assert_eq!(at(2_500), 2);
        assert_eq!(at(5_000), 4);
        assert_eq!(at(50_000), 5);
        assert_eq!(at(10_000_000_000), 5, "20 s is above every bound");
        assert_eq!(b.count, 6);
        let exact: u64 = 800 + 1_000 + 6_000 + 40_000 + 20_000_000_000;
        assert!(
            b.sum_ns.abs_diff(exact) < exact / 500,
            "{} vs {exact}",
            b.sum_ns
        );
        assert!(b.buckets.windows(2).all(|w| w[0].1 <= w[1].1));
    }
}
