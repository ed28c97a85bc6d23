//! One repetition of one subject: an `oaectl demo` child, an in-process
//! raw AF_XDP run, `dpdk-testpmd` fed by the raw flood, `sockperf`, or
//! `redis-server` and `redis-benchmark` (the TCP baseline of the failure
//! matrix). Every child runs in a namespace of its own veth pair, is
//! bounded in time and is ended by its own PID.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};

use oae_os::child::Supervised;
use std::time::{Duration, Instant};

use oae_common::CORRUPT_RANDOM_OFFSET;
use oae_dataplane::control::FabricDemoReport;
use oae_dataplane::deployment::{Deployment, flap_times};
use oae_pmd::afxdp::AfXdpConfig;
use oae_pmd::netns::VethPair;
use oae_pmd::xdp::{FaultConfig, FaultScope, Steering, XdpCounters, XdpMode};
use oae_swapring::wave::{Variant, Workload};
use serde_json::Value;

use super::{GRACE, Options};
use crate::raw::{self, FloodConfig, PingPongConfig, RawConfig};

const VETH_PAIR: &str = include_str!("../../../configs/veth-pair.toml");
const DPDK_AF_XDP: &str = include_str!("../../../configs/dpdk-af-xdp.toml");
const DPDK_MEMIF: &str = include_str!("../../../configs/dpdk-memif.toml");

/// Hugepages net_af_xdp needs (oae_pmd::dpdk refuses it on 4 KiB pages:
/// the kernel drops frames whose mbufs straddle a page), for two oaed
/// processes or one testpmd.
const HUGEPAGES: u64 = 256;

/// Liveness round of line-rate and latency trials on two cores: 2 ms, so
/// that a polling thread descheduled by other work on these shared vCPUs
/// is not taken for a dead peer. Failure trials keep the deployed 20 us.
const SHARED_CPU_MIN_ROUND_US: u64 = 2_000;
/// With both ends on one core, each waits a whole time slice for the
/// other: a round well above the scheduler's slice.
pub(super) const SAME_CORE_MIN_ROUND_US: u64 = 20_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverChoice {
    AfXdp,
    DpdkAfXdp,
    DpdkMemif,
}

impl DriverChoice {
    pub fn name(self) -> &'static str {
        match self {
            DriverChoice::AfXdp => "af-xdp",
            DriverChoice::DpdkAfXdp => "dpdk net_af_xdp",
            DriverChoice::DpdkMemif => "dpdk net_memif",
        }
    }

    fn config(self) -> (&'static str, &'static str) {
        match self {
            DriverChoice::AfXdp => ("veth-pair.toml", VETH_PAIR),
            DriverChoice::DpdkAfXdp => ("dpdk-af-xdp.toml", DPDK_AF_XDP),
            DriverChoice::DpdkMemif => ("dpdk-memif.toml", DPDK_MEMIF),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Side a and side b on cores of their own.
    CrossCore,
    /// Both sides on side a's core.
    SameCore,
}

impl Placement {
    pub fn name(self) -> &'static str {
        match self {
            Placement::CrossCore => "cross-core",
            Placement::SameCore => "same-core",
        }
    }

    fn cores(self, cores: [usize; 2]) -> [usize; 2] {
        match self {
            Placement::CrossCore => cores,
            Placement::SameCore => [cores[0], cores[0]],
        }
    }
}

/// How the dataplanes of a trial poll (`oaectl demo --idle --kicks
/// --busy-poll`); the default is the deployments': spin, immediate kicks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PollChoice {
    pub idle: Option<&'static str>,
    pub kicks: Option<&'static str>,
    pub busy_poll: bool,
}

impl PollChoice {
    pub const SLEEP: PollChoice = PollChoice {
        idle: Some("sleep"),
        kicks: None,
        busy_poll: false,
    };

    /// For the report and log names: `default`, or what differs from it.
    pub fn name(&self) -> String {
        let mut parts = Vec::new();
        if let Some(i) = self.idle {
            parts.push(format!("idle {i}"));
        }
        if let Some(k) = self.kicks {
            parts.push(format!("{k} kicks"));
        }
        if self.busy_poll {
            parts.push("busy poll".to_string());
        }
        if parts.is_empty() {
            "default".into()
        } else {
            parts.join(" + ")
        }
    }

    fn args(&self, cmd: &mut Command) {
        if let Some(i) = self.idle {
            cmd.args(["--idle", i]);
        }
        if let Some(k) = self.kicks {
            cmd.args(["--kicks", k]);
        }
        if self.busy_poll {
            cmd.arg("--busy-poll");
        }
    }
}

/// One `oaectl demo` run.
#[derive(Clone, Debug)]
pub struct DemoTrial {
    driver: DriverChoice,
    transport: &'static str,
    verbs: &'static str,
    slots: Option<u16>,
    /// `None`: as many lanes as slots.
    lanes: Option<u32>,
    failure: bool,
    placement: Placement,
    /// Loss ppm, corruption ppm, flaps.
    faults: [u32; 3],
    /// Queues per dataplane, each with its own workload of `lanes` lanes.
    queues: u32,
    /// How long each flap keeps the link down (the demo's default if none).
    flap_ms: Option<u32>,
    /// The trial runs at least this long, whatever `--failure-secs` says.
    min_secs: f64,
    poll: PollChoice,
}

impl DemoTrial {
    /// Line rate: one lane per slot, so every slot has a verb in flight.
    pub fn line(driver: DriverChoice, verb: &'static str, slots: u16) -> DemoTrial {
        DemoTrial {
            driver,
            transport: "oae",
            verbs: verb,
            slots: Some(slots),
            lanes: None,
            failure: false,
            placement: Placement::CrossCore,
            faults: [0; 3],
            queues: 1,
            flap_ms: None,
            min_secs: 0.0,
            poll: PollChoice::default(),
        }
    }

    /// The same trial with the dataplanes polling as `poll` says.
    pub fn polling(self, poll: PollChoice) -> DemoTrial {
        DemoTrial { poll, ..self }
    }

    /// Scale: CAS over `queues` queues per dataplane (a link each), one
    /// lane per slot on each. Both queues of a dataplane share its core
    /// here: the machine has two.
    pub fn scale(driver: DriverChoice, queues: u32, slots: u16) -> DemoTrial {
        DemoTrial {
            queues,
            ..DemoTrial::line(driver, "cas", slots)
        }
    }

    /// Latency: one lane, one verb in flight.
    pub fn latency(verb: &'static str, placement: Placement) -> DemoTrial {
        DemoTrial {
            driver: DriverChoice::AfXdp,
            transport: "oae",
            verbs: verb,
            slots: None,
            lanes: Some(1),
            failure: false,
            placement,
            faults: [0; 3],
            queues: 1,
            flap_ms: None,
            min_secs: 0.0,
            poll: PollChoice::default(),
        }
    }

    /// Failure injection: the verbs both transports run, faults in the
    /// middle third.
    /// The link down once in the middle third for 1 s: longer than the
    /// RC model's retries last (8 ACK timeouts of about 67 ms), so its
    /// queue pair fails; 6 s at least, so the outage fits the middle third.
    pub fn outage(transport: &'static str, lanes: u32) -> DemoTrial {
        DemoTrial {
            flap_ms: Some(1000),
            min_secs: 6.0,
            ..DemoTrial::failure(transport, lanes, [0, 0, 1])
        }
    }

    pub fn failure(transport: &'static str, lanes: u32, faults: [u32; 3]) -> DemoTrial {
        DemoTrial {
            driver: DriverChoice::AfXdp,
            transport,
            verbs: "cas,faa,write",
            slots: None,
            lanes: Some(lanes),
            failure: true,
            placement: Placement::CrossCore,
            faults,
            queues: 1,
            flap_ms: None,
            min_secs: 0.0,
            poll: PollChoice::default(),
        }
    }
}

/// One run of the TCP baseline: Debian's `redis-server` in namespace b,
/// `redis-benchmark` in namespace a incrementing one counter (INCR), each
/// connection with one request in flight, under the faults of a failure
/// condition applied by the XDP program to port 6379's segments.
#[derive(Clone, Debug)]
pub struct RedisTrial {
    /// Connections of `redis-benchmark`, one INCR in flight on each: the
    /// lanes of the OAE trial of the same condition.
    pub connections: u32,
    /// Loss ppm, corruption ppm, flaps, as the OAE trial of the condition.
    pub faults: [u32; 3],
}

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
    Sockperf(Placement),
    /// One run of the Wave-like offload over emulated PCIe.
    Offload {
        workload: Workload,
        variant: Variant,
        read_ns: u64,
    },
    /// A host program's verbs through dataplane a's host ring in `mode`,
    /// `window` in flight (`oaectl demo --host-ring`).
    HostRing {
        mode: oae_dataplane::host::HostMode,
        window: usize,
    },
}

/// What one repetition measured.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub metrics: BTreeMap<String, f64>,
    /// `(quantile, us)` points, if the subject reports a distribution.
    pub cdf: Vec<(f64, f64)>,
    /// The p99.9 the distribution is ranked by among repetitions.
    pub tail_us: f64,
    /// One line for the progress display.
    pub headline: String,
}

impl Outcome {
    pub(super) fn set(&mut self, name: &str, v: f64) {
        self.metrics.insert(name.to_string(), v);
    }

    /// The cores each side used while measured (CPU time over wall time),
    /// and, for a subject with a `rate` (verbs or frames per second), that
    /// rate per CPU-second of both sides together.
    fn set_cpu(&mut self, cores: [f64; 2], rate: Option<f64>) {
        self.set("cpu_a_cores", cores[0]);
        self.set("cpu_b_cores", cores[1]);
        if let Some(rate) = rate {
            self.set("per_cpu_s", rate / (cores[0] + cores[1]).max(1e-9));
        }
    }
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
        Trial::Sockperf(p) => sockperf(opts, *p, log),
    }
}

// ----- oaectl demo -------------------------------------------------------------

fn demo(d: &DemoTrial, opts: &Options, log: &Path) -> Result<Outcome, String> {
    if d.driver == DriverChoice::DpdkAfXdp {
        oae_pmd::dpdk::reserve_hugepages(HUGEPAGES)?;
    }
    let (file, text) = d.driver.config();
    let config = opts.out.join("configs").join(file);
    if !config.exists() {
        std::fs::create_dir_all(opts.out.join("configs")).map_err(|e| e.to_string())?;
        std::fs::write(&config, text).map_err(|e| e.to_string())?;
    }
    let report = log.with_extension("json");
    let _ = std::fs::remove_file(&report);
    let secs = if d.failure {
        opts.failure_secs.max(d.min_secs)
    } else {
        opts.secs
    };
    let cores = d.placement.cores(opts.cores);
    let lanes = d.lanes.unwrap_or_else(|| u32::from(d.slots.unwrap_or(64)));
    let mut cmd = Command::new(&opts.oaectl);
    cmd.arg("demo")
        .arg("--config")
        .arg(&config)
        .args(["--transport", d.transport])
        .args(["--verbs", d.verbs])
        .args(["--seconds", &secs.to_string()])
        .args(["--lanes", &lanes.to_string()])
        .args(["--cores", &format!("{},{}", cores[0], cores[1])])
        .args(["--loss-ppm", &d.faults[0].to_string()])
        .args(["--corrupt-ppm", &d.faults[1].to_string()])
        .args(["--flaps", &d.faults[2].to_string()])
        .arg("--report")
        .arg(&report);
    if let Some(slots) = d.slots {
        cmd.args(["--slots", &slots.to_string()]);
    }
    if d.queues > 1 {
        cmd.args(["--queues", &d.queues.to_string()]);
    }
    if let Some(ms) = d.flap_ms {
        cmd.args(["--flap-ms", &ms.to_string()]);
    }
    d.poll.args(&mut cmd);
    match (d.failure, d.placement) {
        (true, _) => {}
        (false, Placement::CrossCore) => {
            cmd.args(["--min-round-us", &SHARED_CPU_MIN_ROUND_US.to_string()]);
        }
        (false, Placement::SameCore) => {
            cmd.args(["--min-round-us", &SAME_CORE_MIN_ROUND_US.to_string()]);
        }
    }
    let status = run_bounded(
        cmd,
        log,
        Duration::from_secs_f64(secs) + GRACE,
        "oaectl demo",
    )?;
    let text = std::fs::read_to_string(&report).map_err(|_| {
        let tail = tail(log);
        format!(
            "oaectl demo exited ({status}) without a report: {}\n{tail}",
            tail.lines().last().unwrap_or_default().trim()
        )
    })?;
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", report.display()))?;
    Ok(demo_outcome(&v, d.transport == "rc-model"))
}

/// A fabric of dataplanes (`oaectl demo --topology`), one namespace each,
/// with a link cut for good a third of the way in.
#[derive(Clone, Debug)]
pub struct FabricTrial {
    pub topology: &'static str,
}

/// Lanes of each workload of a fabric trial (one per ordered pair).
const FABRIC_LANES: u32 = 4;
/// Bring-up of a fabric (every view agreed) before its workloads start.
const FABRIC_BRING_UP: Duration = Duration::from_secs(60);

fn fabric(f: &FabricTrial, opts: &Options, log: &Path) -> Result<Outcome, String> {
    let report = log.with_extension("json");
    let _ = std::fs::remove_file(&report);
    // Long enough for a third before the cut and two after it.
    let secs = opts.failure_secs.max(3.0);
    let mut cmd = Command::new(&opts.oaectl);
    cmd.arg("demo")
        .args(["--topology", f.topology])
        .args(["--seconds", &secs.to_string()])
        .args(["--lanes", &FABRIC_LANES.to_string()])
        .arg("--report")
        .arg(&report);
    let status = run_bounded(
        cmd,
        log,
        Duration::from_secs_f64(secs) + FABRIC_BRING_UP + GRACE,
        "oaectl demo --topology",
    )?;
    let text = std::fs::read_to_string(&report).map_err(|_| {
        let tail = tail(log);
        format!(
            "oaectl demo --topology exited ({status}) without a report: {}\n{tail}",
            tail.lines().last().unwrap_or_default().trim()
        )
    })?;
    let r: FabricDemoReport =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", report.display()))?;
    fabric_outcome(&r)
}

/// Figures of a fabric run: the whole fabric's rate, and the cut link's
/// ends (both directions) before and after the cut.
pub fn fabric_outcome(r: &FabricDemoReport) -> Result<Outcome, String> {
    let (a, b) = r
        .cut
        .ok_or("the fabric trial's topology has no link to cut")?;
    let mut o = Outcome::default();
    let total: u64 = r.pairs.iter().map(|p| p.workload.completed).sum();
    o.set("verbs_per_s", total as f64 / r.seconds.max(1e-9));
    let (mut before, mut after, mut before_s, mut after_s, mut failed) = (0.0, 0.0, 0.0, 0.0, 0.0);
    let mut latency = Value::Null;
    for p in r
        .pairs
        .iter()
        .filter(|p| (p.from, p.to) == (a, b) || (p.from, p.to) == (b, a))
    {
        let w = &p.workload;
        let cut = w
            .phases
            .iter()
            .find(|ph| ph.name == "cut")
            .ok_or("a workload across the cut has no cut phase")?;
        before += (w.completed - cut.completed) as f64;
        after += cut.completed as f64;
        before_s = cut.started_s;
        after_s = (w.elapsed_s - cut.started_s).max(1e-9);
        failed += cut.failed as f64;
        if (p.from, p.to) == (a, b) {
            latency = serde_json::to_value(cut.latency).map_err(|e| e.to_string())?;
        }
    }
    o.set("cut_pair_before_verbs_per_s", before / before_s.max(1e-9));
    o.set("cut_pair_after_verbs_per_s", after / after_s);
    o.set("cut_pair_after_failed", failed);
    percentiles(&mut o, "after_", &latency);
    o.set("reroute_ms", r.reroute_ms.unwrap_or(f64::NAN));
    o.set("reroute_path_rtts", r.reroute_path_rtts.unwrap_or(f64::NAN));
    o.set("path_srtt_us", r.path_srtt_us.unwrap_or(f64::NAN));
    let pass = r.exact && r.views_agree;
    o.set("exactly_once_pass", if pass { 1.0 } else { 0.0 });
    o.tail_us = o.metrics["after_p999_us"];
    o.headline = format!(
        "cut {a}-{b}: {:.0} -> {:.0} verbs/s across it, rerouted in {:.1} ms, p99.9 after {:.0} us{}",
        o.metrics["cut_pair_before_verbs_per_s"],
        o.metrics["cut_pair_after_verbs_per_s"],
        o.metrics["reroute_ms"],
        o.tail_us,
        if pass {
            ", exactly-once PASS"
        } else {
            ", exactly-once FAIL"
        }
    );
    Ok(o)
}

/// Figures from `oaectl demo --report`.
pub fn demo_outcome(v: &Value, rc: bool) -> Outcome {
    let w = &v["workload"];
    let num = |x: &Value| x.as_f64().unwrap_or(0.0);
    let mut o = Outcome::default();
    let completed = num(&w["completed"]);
    let elapsed = num(&w["elapsed_s"]).max(1e-9);
    let verbs_per_s = completed / elapsed;
    o.set("verbs_per_s", verbs_per_s);
    // CPU time over the wall time it was measured across (the workload and
    // the control requests around it).
    let cpu_wall = num(&v["cpu_wall_s"]).max(1e-9);
    let cores: Vec<f64> = v["cpu"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| (num(&c["user_s"]) + num(&c["system_s"])) / cpu_wall)
        .collect();
    if let [a, b] = cores[..] {
        // Per CPU-second: the verbs completed over the CPU both sides used
        // across the whole window CPU was measured over (the workload and
        // the requests around it), so a policy that idles cheaply around
        // the workload gains nothing it did not earn while it ran.
        o.set_cpu([a, b], Some(completed / cpu_wall));
    }
    percentiles(&mut o, "", &w["latency"]);
    let phases = w["phases"].as_array().cloned().unwrap_or_default();
    let during = phases.iter().position(|p| p["name"] == "during");
    let cdf_source = match during {
        Some(i) => {
            let p = &phases[i];
            percentiles(&mut o, "during_", &p["latency"]);
            let start = num(&p["started_s"]);
            let end = phases
                .get(i + 1)
                .map_or(num(&w["elapsed_s"]), |n| num(&n["started_s"]));
            o.set(
                "during_verbs_per_s",
                num(&p["completed"]) / (end - start).max(1e-9),
            );
            o.set("during_failed", num(&p["failed"]));
            &p["cdf"]
        }
        None => &w["cdf"],
    };
    o.cdf = cdf_source
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|pt| Some((pt[0].as_f64()?, pt[1].as_f64()? / 1e3)))
        .collect();
    o.tail_us = o
        .metrics
        .get("during_p999_us")
        .copied()
        .unwrap_or_else(|| o.metrics.get("p999_us").copied().unwrap_or(0.0));
    o.set("failed", num(&w["failed"]));
    o.set("mismatches", num(&w["mismatches"]));
    let exactly_once = v["exactly_once"] == true && num(&w["mismatches"]) == 0.0;
    o.set("exactly_once_pass", if exactly_once { 1.0 } else { 0.0 });
    let sum = |section: &str, key: &str, inner: &str| -> f64 {
        v["stats"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|s| s[section].as_array().into_iter().flatten())
            .map(|q| match &q[inner] {
                // A queue's links, each with its counters.
                Value::Array(links) => links.iter().map(|l| num(&l[key])).sum(),
                one => num(&one[key]),
            })
            .sum()
    };
    if rc {
        o.set("retransmissions", sum("queues", "retransmissions", "links"));
        o.set("ack_timeouts", sum("queues", "timeouts", "links"));
    } else {
        o.set("reversals", sum("queues", "reversals", "links"));
    }
    o.set(
        "frames_dropped_by_fault",
        sum("xdp", "dropped_by_fault", "counters"),
    );
    o.set(
        "frames_corrupted_by_fault",
        sum("xdp", "corrupted_by_fault", "counters"),
    );
    o.set(
        "frames_per_verb",
        sum("queues", "tx_frames", "links") / completed.max(1.0),
    );
    // Frames per transmit system call, per side (drivers that count kicks).
    for (side, stats) in ["a", "b"]
        .iter()
        .zip(v["stats"].as_array().into_iter().flatten())
    {
        let (mut frames, mut kicks) = (0.0, 0.0);
        for q in stats["queues"].as_array().into_iter().flatten() {
            frames += num(&q["pipeline"]["tx_frames"]);
            kicks += num(&q["driver"]["tx_kicks"]);
        }
        if kicks > 0.0 {
            o.set(&format!("frames_per_kick_{side}"), frames / kicks);
        }
    }
    o.headline = format!(
        "{:.0} verbs/s, p50 {:.1} us, p99.9 {:.1} us{}",
        verbs_per_s,
        o.metrics["p50_us"],
        o.tail_us,
        if exactly_once {
            ", exactly-once PASS"
        } else {
            ", exactly-once FAIL"
        }
    );
    o
}

fn percentiles(o: &mut Outcome, prefix: &str, l: &Value) {
    for (name, key) in [
        ("p50_us", "p50"),
        ("p90_us", "p90"),
        ("p99_us", "p99"),
        ("p999_us", "p999"),
        ("max_us", "max"),
    ] {
        o.set(
            &format!("{prefix}{name}"),
            l[key].as_f64().unwrap_or(0.0) / 1e3,
        );
    }
}

// ----- raw AF_XDP ----------------------------------------------------------------

fn raw_flood(opts: &Options) -> Result<Outcome, String> {
    let cfg = RawConfig {
        flood: flood_config(opts),
        windowed_flood: 256,
        ping_pong: PingPongConfig {
            warmup_rounds: 10,
            rounds: 100,
            max_duration: Duration::from_millis(100),
            ..PingPongConfig::default()
        },
        generator_core: opts.cores[0],
        reflector_core: opts.cores[1],
    };
    let r = raw::run_afxdp(&cfg, XdpMode::Auto, &AfXdpConfig::default())?;
    let best = r
        .windowed_flood
        .map_or(r.flood.rx_pps, |(_, w)| w.rx_pps.max(r.flood.rx_pps));
    let mut o = Outcome::default();
    o.set("frames_per_s", best);
    o.set("open_loop_frames_per_s", r.flood.rx_pps);
    // Both threads busy-poll from start to end: their whole life's share.
    o.set_cpu(r.cpu_cores, Some(best));
    o.headline = format!("{best:.0} frames/s reflected");
    Ok(o)
}

fn flood_config(opts: &Options) -> FloodConfig {
    FloodConfig {
        warmup: Duration::from_millis(if opts.quick { 50 } else { 200 }),
        duration: Duration::from_secs_f64(opts.secs / 2.0),
        ..FloodConfig::default()
    }
}

fn raw_ping_pong(opts: &Options, placement: Placement) -> Result<Outcome, String> {
    let cores = placement.cores(opts.cores);
    let cfg = RawConfig {
        flood: FloodConfig {
            warmup: Duration::ZERO,
            duration: Duration::from_millis(10),
            ..FloodConfig::default()
        },
        windowed_flood: 0,
        ping_pong: PingPongConfig {
            warmup_rounds: if opts.quick { 20 } else { 200 },
            rounds: 1_000_000,
            max_duration: Duration::from_secs_f64(opts.secs),
            ..PingPongConfig::default()
        },
        generator_core: cores[0],
        reflector_core: cores[1],
    };
    let r = raw::run_afxdp(&cfg, XdpMode::Auto, &AfXdpConfig::default())?;
    let p = &r.ping_pong;
    if p.rounds == 0 {
        return Err(format!("no round trip completed ({} lost)", p.lost));
    }
    let mut o = Outcome::default();
    for (name, ns) in [
        ("p50_us", p.p50_ns),
        ("p90_us", p.p90_ns),
        ("p99_us", p.p99_ns),
        ("p999_us", p.p999_ns),
        ("max_us", p.max_ns),
    ] {
        o.set(name, ns as f64 / 1e3);
    }
    o.set("lost", p.lost as f64);
    o.set_cpu(r.cpu_cores, None);
    o.headline = format!(
        "RTT p50 {:.1} us, p99.9 {:.1} us ({} rounds)",
        p.p50_ns as f64 / 1e3,
        p.p999_ns as f64 / 1e3,
        p.rounds
    );
    Ok(o)
}

// ----- dpdk-testpmd ----------------------------------------------------------------

fn testpmd(opts: &Options, log: &Path) -> Result<Outcome, String> {
    oae_pmd::dpdk::reserve_hugepages(HUGEPAGES)?;
    let pair = VethPair::create("tpmd").map_err(|e| format!("creating the veth pair: {e}"))?;
    let mut cmd = pair.command(1, "dpdk-testpmd");
    cmd.args(["-l", &format!("{},{}", opts.cores[0], opts.cores[1])])
        .args(["--no-pci", "--in-memory"])
        .args(["--file-prefix", &format!("oae-tpmd-{}", std::process::id())])
        .args(["--vdev", &format!("net_af_xdp0,iface={}", pair.ifname[1])])
        .args([
            "--",
            "--forward-mode=macswap",
            "--auto-start",
            "--total-num-mbufs=16384",
            "--nb-cores=1",
            "--stats-period=1",
        ]);
    let mut server = Bounded::spawn(cmd, log, "dpdk-testpmd")?;
    server.wait_for_line("packet forwarding - ports=", Duration::from_secs(20))?;
    // The forwarding core is polling once the banner is out; a moment for
    // net_af_xdp's socket to settle.
    std::thread::sleep(Duration::from_millis(300));
    let cfg = flood_config(opts);
    let testpmd_cpu = || server.process.id().and_then(oae_os::cpu::of_process);
    let (cpu0, t0) = (testpmd_cpu(), Instant::now());
    let open = raw::flood_from_a(&pair, opts.cores[0], &FloodConfig { window: 0, ..cfg });
    let windowed = raw::flood_from_a(&pair, opts.cores[0], &FloodConfig { window: 256, ..cfg });
    let (cpu1, wall) = (testpmd_cpu(), t0.elapsed().as_secs_f64());
    server.stop();
    let ((open, open_cores), (windowed, windowed_cores)) = (open?, windowed?);
    let best = open.rx_pps.max(windowed.rx_pps);
    if best == 0.0 {
        return Err(format!(
            "testpmd reflected nothing ({} sent):\n{}",
            open.sent,
            tail(log)
        ));
    }
    let mut o = Outcome::default();
    o.set("frames_per_s", best);
    o.set("open_loop_frames_per_s", open.rx_pps);
    if let (Some(c0), Some(c1)) = (cpu0, cpu1) {
        let reflector = c1.since(&c0).total_s() / wall.max(1e-9);
        o.set_cpu([open_cores.max(windowed_cores), reflector], Some(best));
    }
    o.headline = format!("{best:.0} frames/s reflected by testpmd macswap");
    Ok(o)
}

// ----- sockperf -----------------------------------------------------------------

const SOCKPERF_PORT: &str = "11111";

fn sockperf(opts: &Options, placement: Placement, log: &Path) -> Result<Outcome, String> {
    let cores = placement.cores(opts.cores);
    let pair = VethPair::create("sperf").map_err(|e| format!("creating the veth pair: {e}"))?;
    let server_ip = pair.ip[1].to_string();
    let mut cmd = pinned(&pair, 1, cores[1], "sockperf");
    cmd.arg("sr").args(["-i", &server_ip, "-p", SOCKPERF_PORT]);
    let mut server = Bounded::spawn(cmd, &log.with_extension("server.log"), "sockperf server")?;
    server.wait_for_line("to block on socket", Duration::from_secs(10))?;
    let mut client = pinned(&pair, 0, cores[0], "sockperf");
    client
        .arg("pp")
        .args(["-i", &server_ip, "-p", SOCKPERF_PORT])
        .args(["-t", &format!("{}", opts.secs.ceil().max(1.0) as u64)])
        .args(["-m", "64", "--full-rtt"]);
    let server_cpu = || server.process.id().and_then(oae_os::cpu::of_process);
    let (cpu0, t0) = (server_cpu(), Instant::now());
    let run = run_measured(
        client,
        log,
        Duration::from_secs_f64(opts.secs) + GRACE,
        "sockperf client",
    );
    let (cpu1, wall) = (server_cpu(), t0.elapsed().as_secs_f64());
    server.stop();
    let (_, client_cpu) = run?;
    let text = std::fs::read_to_string(log).map_err(|e| e.to_string())?;
    let mut o = sockperf_outcome(&text)
        .ok_or_else(|| format!("no percentiles in sockperf's output:\n{}", tail(log)))?;
    if let (Some(c0), Some(c1), Some(client)) = (cpu0, cpu1, client_cpu) {
        let wall = wall.max(1e-9);
        o.set_cpu(
            [client.total_s() / wall, c1.since(&c0).total_s() / wall],
            None,
        );
    }
    o.headline = format!(
        "UDP RTT p50 {:.1} us, p99.9 {:.1} us",
        o.metrics["p50_us"], o.metrics["p999_us"]
    );
    Ok(o)
}

/// Round-trip percentiles (us) from `sockperf pp --full-rtt`'s summary.
pub fn sockperf_outcome(text: &str) -> Option<Outcome> {
    let mut o = Outcome::default();
    for line in text.lines().map(strip_ansi) {
        let Some((what, value)) = line.split_once("--->").and_then(|(_, r)| r.split_once('='))
        else {
            continue;
        };
        let Ok(value) = value.trim().parse::<f64>() else {
            continue;
        };
        let name = match what.trim() {
            "percentile 50.000" => "p50_us",
            "percentile 90.000" => "p90_us",
            "percentile 99.000" => "p99_us",
            "percentile 99.900" => "p999_us",
            "<MAX> observation" => "max_us",
            _ => continue,
        };
        o.set(name, value);
    }
    (o.metrics.len() == 5).then_some(o)
}

fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ ... final byte in @..~
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) && c != '[' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

// ----- Redis over kernel TCP ----------------------------------------------------

/// The port Redis listens on; the fault scope of its trials.
pub const REDIS_PORT: u16 = 6379;

/// The counter `redis-benchmark -t incr` increments: its key without `-r`.
const REDIS_COUNTER_KEY: &str = "counter:__rand_int__";

/// Requests of the first probe per connection; each next probe has four
/// times as many, up to [`REDIS_MAX_REQUESTS`].
const REDIS_PROBE_PER_CONNECTION: u64 = 16;
const REDIS_MAX_REQUESTS: u64 = 50_000_000;

/// The TCP baseline under one failure condition.
///
/// Both veth ends get the XDP program, as in the OAE trials (where each
/// dataplane's program faults what it receives), with the condition's
/// loss, corruption and flaps scoped to port 6379 and the OAE trials' seed
/// and flap length. `redis-benchmark` counts requests, not seconds, and
/// cannot change phase halfway, so the whole run is under the fault: short
/// probes under the same fault, each four times longer than the last,
/// measure the rate until one lasts a quarter of the window (a third of
/// `--failure-secs`, the length of OAE's "during" phase), then the
/// measured run asks for the window's worth of requests. Link flaps are
/// spread over that window as `oaectl demo` spreads them over its middle
/// third. Retransmissions, checksum errors and XDP counters are taken over
/// the measured run; the counter, read back once the faults are off, must
/// equal the INCRs that completed (probes included).
fn redis(t: &RedisTrial, opts: &Options, log: &Path) -> Result<Outcome, String> {
    let demo = Deployment::parse(VETH_PAIR, Path::new("configs/veth-pair.toml"))
        .map_err(|e| format!("configs/veth-pair.toml: {e}"))?
        .demo;
    let [loss, corrupt, flaps] = t.faults;
    let window = opts.failure_secs / 3.0;
    let pair = VethPair::create("redis").map_err(|e| format!("creating the veth pair: {e}"))?;
    for side in 0..2 {
        software_checksums(&pair, side)?;
    }
    let steering = [attach_steering(&pair, 0)?, attach_steering(&pair, 1)?];

    let mut server = redis_server(&pair, opts.cores[1], log)?;

    let faults = FaultConfig {
        drop_ppm: loss,
        corrupt_ppm: corrupt,
        corrupt_offset: CORRUPT_RANDOM_OFFSET,
        seed: demo.seed,
        ..FaultConfig::default()
    }
    .with_scope(FaultScope::Port(REDIS_PORT));
    set_faults(&steering, &faults)?;

    // Probes: the rate under this fault, and INCRs for the counter check.
    let mut completed: u64 = 0;
    let rate = probe_rate(&pair, opts, t.connections, window, log, &mut completed)?;
    // With flaps, a quarter more, so that the last flap (three quarters
    // into the window) falls well inside the run.
    let stretch = if flaps > 0 { 1.25 } else { 1.0 };
    let requests = ((rate * window * stretch).round() as u64)
        .clamp(10 * u64::from(t.connections), REDIS_MAX_REQUESTS);

    let tcp_before = [tcp_counters(&pair, 0)?, tcp_counters(&pair, 1)?];
    let xdp_before = xdp_counters(&steering)?;
    let bench = Bounded::spawn(
        redis_benchmark(&pair, opts.cores[0], t.connections, requests),
        log,
        "redis-benchmark",
    )?;
    let flaps = Flaps {
        steering: &steering,
        faults,
        steps: flap_steps(flaps, window, demo.flap_ms),
    };
    let limit = Duration::from_secs_f64(window * stretch) + GRACE;
    let (status, flapped) = flaps.run_until_done(bench, limit, requests, log)?;
    let tcp_after = [tcp_counters(&pair, 0)?, tcp_counters(&pair, 1)?];
    let xdp_after = xdp_counters(&steering)?;
    set_faults(
        &steering,
        &FaultConfig::default().with_scope(FaultScope::Port(REDIS_PORT)),
    )?;
    if !status.success() {
        return Err(format!("redis-benchmark exited ({status}):\n{}", tail(log)));
    }
    completed += requests;
    let counter = redis_counter(&pair, &log.with_extension("counter.log"))?;
    server.stop();

    let text = std::fs::read_to_string(log).map_err(|e| e.to_string())?;
    let mut o = redis_benchmark_outcome(&text).ok_or_else(|| {
        format!(
            "no latency distribution in redis-benchmark's output:\n{}",
            tail(log)
        )
    })?;
    let tcp = |i: usize| -> f64 {
        (0..2)
            .map(|side| tcp_after[side][i].saturating_sub(tcp_before[side][i]) as f64)
            .sum()
    };
    o.set("tcp_retransmissions", tcp(0));
    o.set("checksum_drops", tcp(1));
    let xdp: Vec<XdpCounters> = xdp_after
        .iter()
        .zip(&xdp_before)
        .map(|(after, before)| after.since(before))
        .collect();
    o.set(
        "frames_dropped_by_fault",
        xdp.iter().map(|c| c.dropped_by_fault as f64).sum(),
    );
    o.set(
        "frames_corrupted_by_fault",
        xdp.iter().map(|c| c.corrupted_by_fault as f64).sum(),
    );
    if t.faults[2] > 0 {
        o.set("link_flaps", f64::from(flapped));
    }
    let exact = counter == completed;
    o.set("exactly_once_pass", if exact { 1.0 } else { 0.0 });
    o.headline = format!(
        "{:.0} INCR/s, p50 {:.1} us, p99.9 {:.1} us, {:.0} TCP retransmissions, counter {}",
        o.metrics["requests_per_s"],
        o.metrics["p50_us"],
        o.tail_us,
        o.metrics["tcp_retransmissions"],
        if exact {
            format!("= {completed} INCRs")
        } else {
            format!("{counter} != {completed} INCRs")
        }
    );
    Ok(o)
}

/// `redis-server` in namespace b on `core`, bound to b's address, with
/// nothing on disk; returns once it accepts connections.
fn redis_server(pair: &VethPair, core: usize, log: &Path) -> Result<Bounded, String> {
    let data_dir = log.parent().unwrap_or(Path::new("."));
    let mut cmd = pinned(pair, 1, core, "redis-server");
    cmd.args([
        "--bind",
        &pair.ip[1].to_string(),
        "--port",
        &REDIS_PORT.to_string(),
    ])
    // Nothing on disk: no snapshots, no append-only file.
    .args(["--save", "", "--appendonly", "no"])
    // Bound to this namespace's address only; no password to check.
    .args(["--protected-mode", "no", "--daemonize", "no"])
    .arg("--dir")
    .arg(data_dir);
    let mut server = Bounded::spawn(cmd, &log.with_extension("server.log"), "redis-server")?;
    server.wait_for_line("Ready to accept connections", Duration::from_secs(20))?;
    Ok(server)
}

/// INCRs/s under the fault already set: runs of 4x more requests each
/// until one lasts a quarter of `window` (or reaches the cap). Every
/// request completed is added to `completed`, for the counter check.
fn probe_rate(
    pair: &VethPair,
    opts: &Options,
    connections: u32,
    window: f64,
    log: &Path,
    completed: &mut u64,
) -> Result<f64, String> {
    let probe_log = log.with_extension("probe.log");
    let run_limit = Duration::from_secs_f64(window) + GRACE;
    let mut requests = REDIS_PROBE_PER_CONNECTION * u64::from(connections);
    loop {
        let started = Instant::now();
        let cmd = redis_benchmark(pair, opts.cores[0], connections, requests);
        let status = run_bounded(cmd, &probe_log, run_limit, "redis-benchmark")?;
        if !status.success() {
            return Err(format!(
                "redis-benchmark (probe of {requests} requests) exited ({status}):\n{}",
                tail(&probe_log)
            ));
        }
        *completed += requests;
        let took = started.elapsed().as_secs_f64();
        let text = std::fs::read_to_string(&probe_log).map_err(|e| e.to_string())?;
        let rate = redis_benchmark_outcome(&text)
            .and_then(|o| o.metrics.get("requests_per_s").copied())
            .filter(|r| *r > 0.0)
            .ok_or_else(|| {
                format!(
                    "no throughput in redis-benchmark's output:\n{}",
                    tail(&probe_log)
                )
            })?;
        if took >= window / 4.0 || requests >= REDIS_MAX_REQUESTS {
            return Ok(rate);
        }
        requests = (requests * 4).min(REDIS_MAX_REQUESTS);
    }
}

/// Link flaps applied on schedule while a benchmark runs.
struct Flaps<'a> {
    steering: &'a [Steering],
    /// The faults in force; a flap sets `link_down` on top of them.
    faults: FaultConfig,
    /// From the benchmark's start: when the link goes down (`true`) or up.
    steps: Vec<(Duration, bool)>,
}

impl Flaps<'_> {
    /// Waits for `bench` to end, flapping the link on schedule; stops it
    /// and fails past `limit`. Returns its exit status and the flaps done.
    fn run_until_done(
        &self,
        mut bench: Bounded,
        limit: Duration,
        requests: u64,
        log: &Path,
    ) -> Result<(std::process::ExitStatus, u32), String> {
        let started = Instant::now();
        let mut next_step = 0;
        let mut flapped = 0u32;
        loop {
            if let Some(status) = bench.wait(Duration::ZERO) {
                return Ok((status, flapped));
            }
            let now = started.elapsed();
            while let Some(&(at, down)) = self.steps.get(next_step)
                && now >= at
            {
                let link = FaultConfig {
                    link_down: u32::from(down),
                    ..self.faults
                };
                set_faults(self.steering, &link)?;
                flapped += u32::from(!down);
                next_step += 1;
            }
            if now > limit {
                bench.stop();
                return Err(format!(
                    "redis-benchmark did not complete {requests} requests within {limit:?}; \
                     stopped it:\n{}",
                    tail(log)
                ));
            }
            let to_step = self
                .steps
                .get(next_step)
                .map_or(Duration::MAX, |&(at, _)| at.saturating_sub(now));
            std::thread::sleep(to_step.min(Duration::from_millis(10)));
        }
    }
}

/// When the link goes down (`true`) and up again within a window of
/// `window` seconds: `flaps` flaps of `flap_ms`, the k-th going down at
/// (k + 1/4) shares of the window, as `oaectl demo` places them in its
/// middle third.
fn flap_steps(flaps: u32, window: f64, flap_ms: u32) -> Vec<(Duration, bool)> {
    flap_times(flaps, flap_ms, window)
        .flat_map(|(down, up)| {
            [
                (Duration::from_secs_f64(down), true),
                (Duration::from_secs_f64(up), false),
            ]
        })
        .collect()
}

/// `redis-benchmark` in namespace a, pinned to side a's `core`: `requests`
/// INCRs of one counter over `connections` connections with one request in
/// flight on each (`-P 1`), latencies printed to the microsecond.
fn redis_benchmark(pair: &VethPair, core: usize, connections: u32, requests: u64) -> Command {
    let mut cmd = pinned(pair, 0, core, "redis-benchmark");
    cmd.args(["-h", &pair.ip[1].to_string(), "-p", &REDIS_PORT.to_string()])
        .args(["-c", &connections.to_string(), "-n", &requests.to_string()])
        .args(["-P", "1", "-t", "incr", "--precision", "3"]);
    cmd
}

/// The counter's value (0 while it does not exist), read with `redis-cli`
/// from namespace a.
fn redis_counter(pair: &VethPair, log: &Path) -> Result<u64, String> {
    let mut cmd = pair.command(0, "redis-cli");
    cmd.args(["-h", &pair.ip[1].to_string(), "-p", &REDIS_PORT.to_string()])
        .args(["GET", REDIS_COUNTER_KEY]);
    let status = run_bounded(cmd, log, Duration::from_secs(20), "redis-cli")?;
    let text = std::fs::read_to_string(log).map_err(|e| e.to_string())?;
    let value = text.trim();
    if !status.success() {
        return Err(format!(
            "redis-cli GET {REDIS_COUNTER_KEY} failed ({status}): {value}"
        ));
    }
    if value.is_empty() {
        return Ok(0);
    }
    value
        .parse()
        .map_err(|_| format!("redis-cli GET {REDIS_COUNTER_KEY} answered '{value}'"))
}

/// Turns transmit checksum offload off on side `side`'s veth end, so the
/// kernel fills in every TCP checksum before a segment leaves. With it on,
/// veth hands segments over with the checksum still to be computed, which
/// the receiving stack trusts without checking: a bit flipped by the XDP
/// program would reach Redis. With it off, the receiver checks the sum and
/// drops the segment (CHECKSUM_DROPS), as after a real wire.
fn software_checksums(pair: &VethPair, side: usize) -> Result<(), String> {
    let iface = &pair.ifname[side];
    let out = pair
        .command(side, "ethtool")
        .args(["-K", iface, "tx", "off"])
        .output()
        .map_err(|e| format!("cannot run ethtool: {e} (is it installed? cargo xtask setup)"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ethtool -K {iface} tx off in {} failed: {}",
            pair.ns[side],
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The XDP program on side `side`'s veth end, attached from a thread
/// inside that namespace, where the interface's name means something.
fn attach_steering(pair: &VethPair, side: usize) -> Result<Steering, String> {
    let ns = &pair.ns[side];
    Steering::attach_in_netns(ns, &pair.ifname[side], XdpMode::Auto)
        .map_err(|e| format!("attaching the XDP program in {ns}: {e}"))
}

fn set_faults(steering: &[Steering], faults: &FaultConfig) -> Result<(), String> {
    for s in steering {
        s.set_faults(faults)
            .map_err(|e| format!("setting faults on {}: {e}", s.iface()))?;
    }
    Ok(())
}

fn xdp_counters(steering: &[Steering]) -> Result<Vec<XdpCounters>, String> {
    steering
        .iter()
        .map(|s| s.try_counters().map_err(|e| e.to_string()))
        .collect()
}

/// The kernel's counters that count what a corrupted segment becomes: a
/// flipped bit in the IP header is caught by IP (a bad header checksum, or
/// a header that no longer makes sense), one in the TCP header or payload
/// by TCP.
const CHECKSUM_DROPS: [&str; 3] = ["IpExtInCsumErrors", "IpInHdrErrors", "TcpInCsumErrors"];

/// TCP segments retransmitted, and segments dropped on a bad IP or TCP
/// checksum, so far in namespace `side`: `nstat`'s absolute counters (its
/// history file left alone).
fn tcp_counters(pair: &VethPair, side: usize) -> Result<[u64; 2], String> {
    let ns = &pair.ns[side];
    let out = pair
        .command(side, "nstat")
        .args(["-asz", "TcpRetransSegs"])
        .args(CHECKSUM_DROPS)
        .output()
        .map_err(|e| format!("cannot run nstat in {ns}: {e} (is iproute2 installed?)"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "nstat in {ns} failed ({}): {}{}",
            out.status,
            text.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let get = |name: &str| -> Result<u64, String> {
        nstat_value(&text, name)
            .ok_or_else(|| format!("nstat in {ns} printed no {name}:\n{}", text.trim()))
    };
    let mut checksum_drops = 0;
    for name in CHECKSUM_DROPS {
        checksum_drops += get(name)?;
    }
    Ok([get("TcpRetransSegs")?, checksum_drops])
}

/// A counter's value in `nstat`'s output (`Name  value  rate` lines).
pub fn nstat_value(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        if words.next() != Some(name) {
            return None;
        }
        words.next()?.parse().ok()
    })
}

/// Figures from `redis-benchmark`'s report (Redis 7; latencies in ms there,
/// us here): `requests_per_s` from its throughput summary, `requests` from
/// "N requests completed", p50, p99 and max from its latency summary, and
/// p90 and p99.9 from the rows of its latency distributions. Each row,
/// `P% <= V milliseconds (cumulative count C)`, says C requests took at
/// most V; a quantile is the smallest V whose C reaches its rank, an upper
/// bound at the resolution of the rows printed (for p99.9, the next row
/// at or above 99.9 %). The rows are the distribution, as
/// `(quantile, us)`. `None` if any of it is missing.
pub fn redis_benchmark_outcome(text: &str) -> Option<Outcome> {
    let mut requests = None;
    let mut rate = None;
    let mut rows: Vec<(f64, u64)> = Vec::new();
    let mut header: Option<Vec<String>> = None;
    let mut summary: Vec<(String, f64)> = Vec::new();
    // Progress lines end in carriage returns, not newlines.
    for line in text.split(['\r', '\n']).map(str::trim) {
        if line.is_empty() {
            continue;
        }
        if let Some(names) = header.take() {
            let values: Vec<f64> = line
                .split_whitespace()
                .filter_map(|w| w.parse().ok())
                .collect();
            if values.len() == names.len() {
                summary = names.into_iter().zip(values).collect();
            }
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.first() == Some(&"avg") && words.contains(&"p50") {
            header = Some(words.iter().map(|w| (*w).to_string()).collect());
            continue;
        }
        if let Some((n, _)) = line.split_once(" requests completed in ")
            && let Ok(n) = n.trim().parse::<u64>()
        {
            requests = Some(n);
            continue;
        }
        if let Some(r) = line
            .strip_prefix("throughput summary:")
            .and_then(|r| r.trim().strip_suffix("requests per second"))
            .and_then(|r| r.trim().parse::<f64>().ok())
        {
            rate = Some(r);
            continue;
        }
        if let Some((_, rest)) = line.split_once("% <= ")
            && let Some((ms, count)) = rest.split_once(" milliseconds (cumulative count ")
            && let (Ok(ms), Ok(count)) = (
                ms.trim().parse::<f64>(),
                count.trim_end_matches(')').trim().parse::<u64>(),
            )
        {
            rows.push((ms * 1e3, count));
        }
    }
    let requests: u64 = requests?;
    if requests == 0 || rows.is_empty() {
        return None;
    }
    rows.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let at = |q: f64| -> Option<f64> {
        let rank = ((q * requests as f64).ceil() as u64).max(1);
        rows.iter().find(|r| r.1 >= rank).map(|r| r.0)
    };
    let summarised = |name: &str| {
        summary
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, ms)| ms * 1e3)
    };
    let mut o = Outcome::default();
    o.set("requests_per_s", rate?);
    o.set("requests", requests as f64);
    o.set("p50_us", summarised("p50").or_else(|| at(0.5))?);
    o.set("p90_us", at(0.9)?);
    o.set("p99_us", summarised("p99").or_else(|| at(0.99))?);
    o.set("p999_us", at(0.999)?);
    o.set("max_us", summarised("max").or_else(|| at(1.0))?);
    o.cdf = rows
        .iter()
        .map(|&(us, count)| ((count as f64 / requests as f64).min(1.0), us))
        .collect();
    o.tail_us = o.metrics["p999_us"];
    Some(o)
}

// ----- IPU offload -----------------------------------------------------------

// ----- children -----------------------------------------------------------------

/// `program` in namespace `side` of `pair`, pinned to `core` with
/// `taskset`; `ip netns exec` and `taskset` both exec in place, so the
/// child's PID is the program's and stopping it stops the program.
fn pinned(pair: &VethPair, side: usize, core: usize, program: &str) -> Command {
    let mut cmd = pair.command(side, "taskset");
    cmd.args(["-c", &core.to_string(), program]);
    cmd
}

/// A child process with its output in a log file, stopped by its own PID:
/// SIGTERM, then SIGKILL if it does not exit within 15 s (so the child can
/// remove what it created: oaectl its namespaces and dataplanes, testpmd
/// its EAL files).
struct Bounded {
    process: Supervised,
    what: &'static str,
    log: std::path::PathBuf,
}

impl Bounded {
    fn spawn(mut cmd: Command, log: &Path, what: &'static str) -> Result<Bounded, String> {
        let out = File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        let process = Supervised::spawn(&mut cmd, what, Duration::from_secs(15))
            .map_err(|e| format!("{e} (is it installed? cargo xtask setup)"))?;
        Ok(Bounded {
            process,
            what,
            log: log.to_path_buf(),
        })
    }

    /// Waits until the log holds `needle`, the child exits, or `limit`.
    fn wait_for_line(&mut self, needle: &str, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        loop {
            if std::fs::read_to_string(&self.log).is_ok_and(|t| t.contains(needle)) {
                return Ok(());
            }
            if let Some(status) = self.process.exited() {
                return Err(format!(
                    "{} exited ({status}) before it was ready:\n{}",
                    self.what,
                    tail(&self.log)
                ));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{} was not ready after {limit:?}:\n{}",
                    self.what,
                    tail(&self.log)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for the child to exit by itself, up to `limit`.
    fn wait(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        self.process.wait_for(limit)
    }

    fn stop(&mut self) {
        if let Some((_, true)) = self.process.stop(false) {
            eprintln!("oae-perf: {} ignored SIGTERM; killed it", self.what);
        }
    }
}

/// Runs `cmd` to completion within `limit`, its output in `log`.
pub(super) fn run_bounded(
    cmd: Command,
    log: &Path,
    limit: Duration,
    what: &'static str,
) -> Result<std::process::ExitStatus, String> {
    run_measured(cmd, log, limit, what).map(|(status, _)| status)
}

/// [`run_bounded`], also returning the CPU time the child used.
fn run_measured(
    cmd: Command,
    log: &Path,
    limit: Duration,
    what: &'static str,
) -> Result<(std::process::ExitStatus, Option<oae_os::cpu::CpuTime>), String> {
    let mut child = Bounded::spawn(cmd, log, what)?;
    match child.wait(limit) {
        Some(status) => Ok((status, child.process.cpu())),
        None => {
            child.stop();
            Err(format!(
                "{what} did not finish within {limit:?}; stopped it:\n{}",
                tail(log)
            ))
        }
    }
}

/// The last lines of a log, for error messages.
pub(super) fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(12)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockperf_summary_is_read_in_microseconds() {
        let text = "sockperf: \u{1b}[2;35m====> avg-rtt=24.536 (std-dev=27.217)\u{1b}[0m\n\
                    sockperf: ---> <MAX> observation = 4123.612\n\
                    sockperf: ---> percentile 99.999 = 4046.077\n\
                    sockperf: ---> percentile 99.900 =   69.920\n\
                    sockperf: ---> percentile 99.000 =   47.939\n\
                    sockperf: ---> percentile 90.000 =   27.811\n\
                    sockperf: ---> percentile 50.000 =   23.654\n\
                    sockperf: ---> <MIN> observation =   16.240\n";
        let o = sockperf_outcome(text).unwrap();
        assert_eq!(o.metrics["p50_us"], 23.654);
        assert_eq!(o.metrics["p999_us"], 69.920);
        assert_eq!(o.metrics["max_us"], 4123.612);
        assert!(sockperf_outcome("sockperf: ---> percentile 50.000 = 1.0").is_none());
    }

    /// What Debian bookworm's redis-benchmark 7.0.15 printed for
    /// `-t incr -n 20000 -c 1 -P 1 --precision 3`, progress lines included.
    const REDIS_BENCHMARK_OUTPUT: &str = "\rINCR: rps=0.0 (overall: -nan) avg_msec=-nan (overall: -nan)\r\
        \rINCR: rps=22984.0 (overall: 22984.0) avg_msec=0.041 (overall: 0.041)\r\
        \r====== INCR ======\n\
        \x20 20000 requests completed in 1.08 seconds\n\
        \x20 1 parallel clients\n\
        \x20 3 bytes payload\n\
        \x20 keep alive: 1\n\
        \x20 host configuration \"save\": \n\
        \x20 host configuration \"appendonly\": no\n\
        \x20 multi-thread: no\n\
        \n\
        Latency by percentile distribution:\n\
        0.000% <= 0.007 milliseconds (cumulative count 2796)\n\
        50.000% <= 0.055 milliseconds (cumulative count 12467)\n\
        75.000% <= 0.063 milliseconds (cumulative count 18337)\n\
        93.750% <= 0.079 milliseconds (cumulative count 18945)\n\
        96.875% <= 0.095 milliseconds (cumulative count 19490)\n\
        98.438% <= 0.111 milliseconds (cumulative count 19720)\n\
        99.219% <= 0.135 milliseconds (cumulative count 19885)\n\
        99.609% <= 0.279 milliseconds (cumulative count 19925)\n\
        99.805% <= 0.367 milliseconds (cumulative count 19963)\n\
        99.902% <= 0.439 milliseconds (cumulative count 19982)\n\
        99.951% <= 0.495 milliseconds (cumulative count 19992)\n\
        99.976% <= 0.527 milliseconds (cumulative count 19996)\n\
        99.988% <= 0.623 milliseconds (cumulative count 19998)\n\
        99.994% <= 0.647 milliseconds (cumulative count 19999)\n\
        99.997% <= 2.055 milliseconds (cumulative count 20000)\n\
        100.000% <= 2.055 milliseconds (cumulative count 20000)\n\
        \n\
        Cumulative distribution of latencies:\n\
        98.195% <= 0.103 milliseconds (cumulative count 19639)\n\
        99.555% <= 0.207 milliseconds (cumulative count 19911)\n\
        99.660% <= 0.303 milliseconds (cumulative count 19932)\n\
        99.850% <= 0.407 milliseconds (cumulative count 19970)\n\
        99.970% <= 0.503 milliseconds (cumulative count 19994)\n\
        99.980% <= 0.607 milliseconds (cumulative count 19996)\n\
        99.995% <= 0.703 milliseconds (cumulative count 19999)\n\
        100.000% <= 2.103 milliseconds (cumulative count 20000)\n\
        \n\
        Summary:\n\
        \x20 throughput summary: 18535.68 requests per second\n\
        \x20 latency summary (msec):\n\
        \x20         avg       min       p50       p95       p99       max\n\
        \x20       0.051     0.000     0.055     0.087     0.127     2.055\n";

    fn assert_close(o: &Outcome, name: &str, want: f64) {
        let got = o.metrics[name];
        assert!((got - want).abs() < 1e-6, "{name}: {got} against {want}");
    }

    #[test]
    fn redis_benchmark_reports_become_figures() {
        let o = redis_benchmark_outcome(REDIS_BENCHMARK_OUTPUT).unwrap();
        assert_close(&o, "requests_per_s", 18_535.68);
        assert_close(&o, "requests", 20_000.0);
        // From the summary.
        assert_close(&o, "p50_us", 55.0);
        assert_close(&o, "p99_us", 127.0);
        assert_close(&o, "max_us", 2055.0);
        // From the rows, the smallest value whose count reaches the rank:
        // 99.9 % is 19980 requests, first reached by the 0.439 ms row
        // (19982); 90 % is 18000, first reached by the 0.063 ms row (18337).
        assert_close(&o, "p999_us", 439.0);
        assert_close(&o, "p90_us", 63.0);
        assert_eq!(o.tail_us, o.metrics["p999_us"]);
        let first = o.cdf.first().copied().unwrap();
        assert!((first.0 - 0.1398).abs() < 1e-9 && (first.1 - 7.0).abs() < 1e-9);
        assert_eq!(o.cdf.last().map(|p| p.0), Some(1.0));
        assert!(
            o.cdf
                .windows(2)
                .all(|w| w[0].1 <= w[1].1 && w[0].0 <= w[1].0)
        );

        // No summary: the rows stand in for it. No rows: nothing to report.
        let rows_only = REDIS_BENCHMARK_OUTPUT
            .split("Summary:")
            .next()
            .unwrap()
            .to_string()
            + "  throughput summary: 100.00 requests per second\n";
        let o = redis_benchmark_outcome(&rows_only).unwrap();
        assert_close(&o, "p50_us", 55.0);
        assert_close(&o, "max_us", 2055.0);
        assert_close(&o, "requests_per_s", 100.0);
        let no_rows: String = REDIS_BENCHMARK_OUTPUT
            .lines()
            .filter(|l| !l.contains("cumulative count"))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(redis_benchmark_outcome(&no_rows).is_none());
        assert!(redis_benchmark_outcome("Could not connect to Redis").is_none());
    }

    #[test]
    fn nstat_lines_are_read_by_name() {
        let text = "#kernel\nTcpRetransSegs                  12                 0.0\n\
                    TcpInCsumErrors                 3                  0.0\n";
        assert_eq!(nstat_value(text, "TcpRetransSegs"), Some(12));
        assert_eq!(nstat_value(text, "TcpInCsumErrors"), Some(3));
        assert_eq!(nstat_value(text, "TcpRetrans"), None);
    }

    #[test]
    fn flaps_fall_inside_the_window() {
        let steps = flap_steps(3, 2.0, 50);
        assert_eq!(steps.len(), 6);
        assert_eq!(steps[0], (Duration::from_secs_f64(2.0 / 3.0 * 0.25), true));
        assert!(steps[1].0 - steps[0].0 >= Duration::from_millis(49));
        assert!(!steps[1].1);
        assert!(steps.last().unwrap().0 < Duration::from_secs_f64(2.0));
        assert!(flap_steps(0, 2.0, 50).is_empty());
    }

    #[test]
    fn demo_reports_become_figures() {
        let v = serde_json::json!({
            "exactly_once": true,
            "workload": {
                "completed": 1000, "elapsed_s": 2.0, "failed": 3, "mismatches": 0,
                "latency": {"p50": 5000, "p90": 6000, "p99": 9000, "p999": 20000, "max": 90000},
                "cdf": [[0.5, 5000]],
                "phases": [
                    {"name": "before", "started_s": 0.0, "completed": 400, "failed": 0,
                     "latency": {"p50": 5000, "p999": 8000}},
                    {"name": "during", "started_s": 0.5, "completed": 300, "failed": 3,
                     "latency": {"p50": 6000, "p999": 40000}, "cdf": [[0.5, 6000], [1.0, 40000]]},
                    {"name": "after", "started_s": 1.5, "completed": 300, "failed": 0,
                     "latency": {"p50": 5000, "p999": 9000}}
                ]
            },
            "stats": [
                {"queues": [{"links": [{"reversals": 7, "tx_frames": 1100}],
                             "pipeline": {"tx_frames": 1100}, "driver": {"tx_kicks": 100}}],
                 "xdp": [{"counters": {"dropped_by_fault": 9}}]},
                {"queues": [{"links": [{"reversals": 2, "tx_frames": 1000}]}], "xdp": []}
            ],
            "cpu": [{"user_s": 1.5, "system_s": 0.5}, {"user_s": 0.5, "system_s": 0.5}],
            "cpu_wall_s": 2.0
        });
        let o = demo_outcome(&v, false);
        assert_eq!(o.metrics["verbs_per_s"], 500.0);
        assert_eq!(o.metrics["during_verbs_per_s"], 300.0);
        assert_eq!(o.metrics["during_p999_us"], 40.0);
        assert_eq!(o.metrics["reversals"], 9.0);
        assert_eq!(o.metrics["frames_dropped_by_fault"], 9.0);
        assert_eq!(o.metrics["frames_per_verb"], 2.1);
        assert_eq!(o.metrics["frames_per_kick_a"], 11.0);
        assert!(
            !o.metrics.contains_key("frames_per_kick_b"),
            "no kicks counted"
        );
        // 2 s of CPU on side a and 1 s on side b over a 2 s workload.
        assert_eq!(o.metrics["cpu_a_cores"], 1.0);
        assert_eq!(o.metrics["cpu_b_cores"], 0.5);
        assert_eq!(o.metrics["per_cpu_s"], 1000.0 / 3.0);
        assert_eq!(o.metrics["exactly_once_pass"], 1.0);
        assert_eq!(o.cdf, vec![(0.5, 6.0), (1.0, 40.0)]);
        assert_eq!(o.tail_us, 40.0);
        let mut failed = v.clone();
        failed["exactly_once"] = false.into();
        assert_eq!(
            demo_outcome(&failed, false).metrics["exactly_once_pass"],
            0.0
        );
    }
}
