//! One repetition of one subject: an `oaectl demo` child, an in-process
//! raw AF_XDP run, `dpdk-testpmd` fed by the raw flood, `sockperf`, or
//! `redis-server` and `redis-benchmark` (the TCP baseline of the failure
//! matrix). Every child runs in a namespace of its own veth pair, is
//! bounded in time and is ended by its own PID.

use std::path::Path;

use super::Options;
use super::choice::Placement;
use super::demo::{DemoTrial, demo};
use super::fabric::{FabricTrial, fabric};
use super::fi_pingpong::fi_pingpong;
use super::outcome::Outcome;
use super::raw_xdp::{raw_flood, raw_ping_pong};
use super::redis::{RedisTrial, redis};
use super::sockperf::sockperf;
use super::testpmd::testpmd;
use super::testpmd_pair::testpmd_pair;
use oae_swapring::wave::{Variant, Workload};

#[derive(Clone, Debug)]
pub enum Trial {
    Demo(DemoTrial),
    /// `oaectl demo --topology`: a fabric with a link cut.
    Fabric(FabricTrial),
    /// The TCP baseline of the failure matrix.
    Redis(RedisTrial),
    /// The raw AF_XDP reflector's best flood rate.
    RawFlood,
    RawPingPong(Placement),
    /// `dpdk-testpmd` in macswap mode in namespace b, fed by the raw flood.
    Testpmd,
    /// Two `dpdk-testpmd` in macswap mode bouncing `in_flight` frames over
    /// `net_memif`, the reference without a kernel.
    TestpmdPair {
        in_flight: u16,
    },
    Sockperf(Placement),
    /// libfabric's fi_pingpong over `provider` (oae, tcp or udp).
    FiPingpong {
        provider: &'static str,
        bytes: u32,
    },
    /// One run of the Wave-like offload over emulated PCIe.
    Offload {
        workload: Workload,
        variant: Variant,
        read_ns: u64,
    },
    /// WRITEs or READs of `bytes`, a window in flight (the size sweep).
    Sweep {
        verb: crate::sweep::SweepVerb,
        bytes: usize,
    },
    /// A host program's verbs through dataplane a's host ring in `mode`,
    /// `window` in flight (`oaectl demo --host-ring`).
    HostRing {
        mode: oae_client::host::HostMode,
        window: usize,
    },
}

pub fn run(trial: &Trial, opts: &Options, log: &Path, rep: usize) -> Result<Outcome, String> {
    match trial {
        Trial::Offload {
            workload,
            variant,
            read_ns,
        } => super::ipu::offload(opts, *workload, *variant, *read_ns, rep),
        Trial::HostRing { mode, window } => super::ipu::host_ring(*mode, *window, opts, log),
        Trial::Demo(d) => demo(d, opts, log),
        Trial::Fabric(f) => fabric(f, opts, log),
        Trial::Redis(r) => redis(r, opts, log),
        Trial::RawFlood => raw_flood(opts),
        Trial::RawPingPong(p) => raw_ping_pong(opts, *p),
        Trial::Testpmd => testpmd(opts, log),
        Trial::TestpmdPair { in_flight } => testpmd_pair(opts, log, *in_flight),
        Trial::Sockperf(p) => sockperf(opts, *p, log),
        Trial::FiPingpong { provider, bytes } => fi_pingpong(opts, provider, *bytes, log),
        Trial::Sweep { verb, bytes } => super::sizes::trial(opts, *verb, *bytes),
    }
}
