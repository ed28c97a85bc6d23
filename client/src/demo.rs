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
    /// From the cut to the first verb completed between its ends, and the
    /// round trips of the path that verb took.
    pub reroute_ms: Option<f64>,
    pub reroute_path_rtts: Option<f64>,
    pub path_srtt_us: Option<f64>,
    /// Every workload, from every node to every other.
    pub pairs: Vec<PairReport>,
    /// Every ledger equals both ends' memory.
    pub exact: bool,
    pub views_agree: bool,
    pub view: u64,
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
