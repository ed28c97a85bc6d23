//! What `oaectl demo --json` (or `--report FILE`) writes, as serde types
//! `oaectl` fills and the benchmark suite reads.

use oae_os::cpu::CpuTime;
use serde::{Deserialize, Serialize};

use crate::control::WorkloadReport;
use crate::host::load::CheckedLoad;
use crate::stats::DataplaneStats;

/// A demo of two dataplanes running a verb workload between them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DemoReport {
    /// The faults of the middle third, in words.
    pub impairment: String,
    pub settings: DemoRun,
    /// Queues (a workload each) the dataplanes ran.
    pub queues: usize,
    /// Each dataplane's polling CPU time while the workload ran.
    pub cpu: Vec<CpuTime>,
    /// The wall time `cpu` was measured across.
    pub cpu_wall_s: f64,
    /// Every queue's workload, as one ([`WorkloadReport::side_by_side`]).
    pub workload: WorkloadReport,
    pub workloads: Vec<WorkloadReport>,
    /// Each dataplane's counters at the end, in the order they started.
    pub stats: Vec<DataplaneStats>,
    /// Both memories equal every workload's ledger.
    pub exactly_once: bool,
    /// Where they do not, in words.
    pub differences: Vec<String>,
}

/// The settings a demo ran with.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DemoRun {
    pub seconds: f64,
    pub lanes: u32,
    pub loss_ppm: u32,
    pub corrupt_ppm: u32,
    pub flaps: u32,
    pub flap_ms: u32,
    /// `oae`, `ipv4` or `port:N`.
    pub fault_scope: String,
    /// The verbs of the mix (empty: the default mix).
    pub verbs: Vec<String>,
}

/// A demo whose workload is a host program on the host ring.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostDemoReport {
    pub host: CheckedLoad,
    pub cpu: Vec<CpuTime>,
    pub cpu_wall_s: f64,
    pub stats: Vec<DataplaneStats>,
    pub exactly_once: bool,
}

/// `oaectl demo --topology ... --report FILE`: a fabric's run, written by
/// the demo and read by the benchmark suite.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct FabricDemoReport {
    /// `ring:5`, `mesh:4`, `line:3`.
    pub topology: String,
    pub seconds: f64,
    pub lanes: u32,
    /// The link cut for good a third of the way in, if any.
    pub cut: Option<(usize, usize)>,
    /// The cut's failover: the longest the verbs between its ends went
    /// without a completion (from the last on the link to the first over
    /// another path, by the dataplanes' clocks), and that in round trips
    /// of the path.
    pub reroute_ms: Option<f64>,
    pub reroute_path_rtts: Option<f64>,
    pub path_srtt_us: Option<f64>,
    /// Every workload, from every node to every other.
    pub pairs: Vec<PairReport>,
    /// Every ledger equals both ends' memory.
    pub exact: bool,
    pub views_agree: bool,
    pub view: u64,
    /// With `--pair-latency`: each ordered pair measured alone before the
    /// workloads between all pairs, one verb in flight.
    #[serde(default)]
    pub pair_latency: Vec<PairLatency>,
    /// The polling cores' idle policy (`spin`, `yield` or `sleep`).
    #[serde(default)]
    pub idle: String,
    /// With `--pair-latency` and a cut: the cut alone, a verb at a time
    /// across it and nothing else running, cut and healed again, once per
    /// entry.
    #[serde(default)]
    pub cuts_alone: Vec<CutAlone>,
    /// With `--incast`: what the target's senders got.
    #[serde(default)]
    pub incast: Option<IncastReport>,
}

/// Every node that reaches `target` only through relays, writing to it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct IncastReport {
    pub target: usize,
    /// Each sender's completed verbs over all senders', in the order of
    /// the pairs.
    pub shares: Vec<f64>,
    /// The largest share over the smallest, less one: 0.2 is 20 % apart.
    pub spread: f64,
    /// Frames lost to a full queue anywhere in the fabric: relays' queues
    /// (`dropped_queue_full`) and the kernel's receive rings
    /// (`kernel_rx_dropped`, `kernel_rx_ring_full`), every node summed.
    pub overrun_drops: u64,
    /// The most FORWARD frames that waited for one link at once, on any
    /// node (`relay_queue_peak`).
    #[serde(default)]
    pub relay_queue_peak: u64,
}

/// One cut of a link with a single verb at a time between its ends and
/// nothing else running: how long the verbs went without a completion.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CutAlone {
    pub from: usize,
    pub to: usize,
    pub verbs: u64,
    /// The longest time between two completions, by the dataplane's clock
    /// (from the last over the link to the first over another path).
    pub stall_us: f64,
    /// From the last answer the issuer received over the link to the
    /// first over another path, read from a capture of the issuer's
    /// frames (none if the capture missed either).
    #[serde(default)]
    pub failover_us: Option<f64>,
    pub ledger_exact: bool,
}

/// One ordered pair of a fabric measured alone: one lane, every other
/// workload idle.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PairLatency {
    pub from: usize,
    pub to: usize,
    pub hops: u8,
    pub verbs: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// The longest time between two completions: what this machine's
    /// scheduling costs a pair with no fault at all.
    #[serde(default)]
    pub longest_gap_us: f64,
    pub ledger_exact: bool,
}

/// One workload of a fabric demo: node `from` aimed at node `to`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PairReport {
    pub from: usize,
    pub to: usize,
    /// Hops of the route at the end (1: neighbours).
    pub hops: u8,
    pub ledger_exact: bool,
    pub workload: WorkloadReport,
}

/// One row of libfabric's `fi_pingpong` client report: one message size.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct FiPingpongRow {
    pub bytes: u64,
    /// Ping-pongs run, and those the server acknowledged.
    pub sent: u64,
    pub acked: u64,
    pub seconds: f64,
    /// fi_pingpong's own figure: the run's time over its transfers (two a
    /// ping-pong), so half a round trip.
    pub usec_per_xfer: f64,
}

impl FiPingpongRow {
    /// Transfers a second, from `usec_per_xfer` (fi_pingpong prints this
    /// rounded to 0.01 M).
    pub fn xfers_per_s(&self) -> f64 {
        1e6 / self.usec_per_xfer.max(1e-9)
    }

    /// Every result row of fi_pingpong's output; lines that are not one
    /// (its header, debug output) are skipped.
    pub fn parse_all(text: &str) -> Vec<FiPingpongRow> {
        text.lines().filter_map(Self::parse).collect()
    }

    fn parse(line: &str) -> Option<FiPingpongRow> {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [bytes, sent, acked, _total, time, _mb, usec, _mx] = f[..] else {
            return None;
        };
        let sent = count(sent)?;
        let acked = match acked.split_at_checked(1)? {
            ("=", n) => count(n)?,
            ("+", n) => sent.checked_sub(count(n)?)?,
            ("-", n) => sent + count(n)?,
            _ => return None,
        };
        Some(FiPingpongRow {
            bytes: size(bytes)?,
            sent,
            acked,
            seconds: time.strip_suffix('s')?.parse().ok()?,
            usec_per_xfer: usec.parse().ok()?,
        })
    }
}

/// A size as fi_pingpong prints it: `64`, `1k`, `1.5k` (powers of 1024).
fn size(text: &str) -> Option<u64> {
    scaled(text, 1024.0)
}

/// A count as fi_pingpong prints it: `200`, `10k`, `2m` (powers of 1000,
/// rounded down).
fn count(text: &str) -> Option<u64> {
    scaled(text, 1000.0)
}

fn scaled(text: &str, base: f64) -> Option<u64> {
    let (digits, scale) = match text.chars().last()? {
        'k' => (&text[..text.len() - 1], base),
        'm' => (&text[..text.len() - 1], base * base),
        'g' | 'b' => (&text[..text.len() - 1], base * base * base),
        _ => (text, 1.0),
    };
    let v: f64 = digits.parse().ok()?;
    (v >= 0.0).then_some((v * scale).round() as u64)
}

/// `oaectl demo --fi-pingpong SIZE --report FILE`: libfabric's fi_pingpong
/// over OAE, both ends on a dataplane's host ring.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FiDemoReport {
    pub size: u32,
    pub iterations: u32,
    /// The client's rows (one: the size asked for).
    pub rows: Vec<FiPingpongRow>,
    /// The dataplanes' polling CPU time while it ran.
    pub cpu: Vec<CpuTime>,
    pub cpu_wall_s: f64,
    pub stats: Vec<DataplaneStats>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fi_pingpong_rows_are_read_and_everything_else_skipped() {
        let text = "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec\n\
                    64      200     =200     25k         3.45s      0.01    8629.33       0.00\n\
                    1.5k    10k     =10k     29m         0.50s     58.00      25.00       0.04\n\
                    [debug] pingpong.c:123: receiving\n";
        let rows = FiPingpongRow::parse_all(text);
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!((rows[0].bytes, rows[0].sent, rows[0].acked), (64, 200, 200));
        assert_eq!(rows[0].usec_per_xfer, 8629.33);
        assert_eq!((rows[1].bytes, rows[1].sent), (1536, 10_000));
        assert_eq!(rows[1].xfers_per_s(), 40_000.0);
    }
}
