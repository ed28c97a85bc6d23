//! One repetition of one subject: an `oaectl demo` child, an in-process
//! raw AF_XDP run, `dpdk-testpmd` fed by the raw flood, or `sockperf`.
//! Every child runs in a namespace of its own veth pair, is bounded in
//! time and is ended by its own PID.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use oae_pmd::afxdp::AfXdpConfig;
use oae_pmd::netns::VethPair;
use oae_pmd::xdp::XdpMode;
use oae_swapring::cost::CostModel;
use oae_swapring::fito::Wakeup;
use oae_swapring::wave::{self, RunConfig, Variant, Workload};
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
const SAME_CORE_MIN_ROUND_US: u64 = 20_000;

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
        }
    }

    /// Failure injection: the verbs both transports run, faults in the
    /// middle third.
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
        }
    }
}

#[derive(Clone, Debug)]
pub enum Trial {
    Demo(DemoTrial),
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
    fn set(&mut self, name: &str, v: f64) {
        self.metrics.insert(name.to_string(), v);
    }
}

pub fn run(trial: &Trial, opts: &Options, log: &Path, rep: usize) -> Result<Outcome, String> {
    match trial {
        Trial::Offload {
            workload,
            variant,
            read_ns,
        } => offload(opts, *workload, *variant, *read_ns, rep),
        Trial::Demo(d) => demo(d, opts, log),
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
        opts.failure_secs
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

/// Figures from `oaectl demo --report`.
pub fn demo_outcome(v: &Value, rc: bool) -> Outcome {
    let w = &v["workload"];
    let num = |x: &Value| x.as_f64().unwrap_or(0.0);
    let mut o = Outcome::default();
    let completed = num(&w["completed"]);
    let verbs_per_s = completed / num(&w["elapsed_s"]).max(1e-9);
    o.set("verbs_per_s", verbs_per_s);
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
            .map(|q| num(&q[inner][key]))
            .sum()
    };
    if rc {
        o.set("retransmissions", sum("queues", "retransmissions", "link"));
        o.set("ack_timeouts", sum("queues", "timeouts", "link"));
    } else {
        o.set("reversals", sum("queues", "reversals", "link"));
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
        sum("queues", "tx_frames", "link") / completed.max(1.0),
    );
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
    let open = raw::flood_from_a(&pair, opts.cores[0], &FloodConfig { window: 0, ..cfg });
    let windowed = raw::flood_from_a(&pair, opts.cores[0], &FloodConfig { window: 256, ..cfg });
    server.stop();
    let (open, windowed) = (open?, windowed?);
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
    o.headline = format!("{best:.0} frames/s reflected by testpmd macswap");
    Ok(o)
}

// ----- sockperf -----------------------------------------------------------------

const SOCKPERF_PORT: &str = "11111";

fn sockperf(opts: &Options, placement: Placement, log: &Path) -> Result<Outcome, String> {
    let cores = placement.cores(opts.cores);
    let pair = VethPair::create("sperf").map_err(|e| format!("creating the veth pair: {e}"))?;
    let server_ip = pair.ip[1].to_string();
    let mut cmd = pair.command(1, "taskset");
    cmd.args(["-c", &cores[1].to_string(), "sockperf", "sr"])
        .args(["-i", &server_ip, "-p", SOCKPERF_PORT]);
    let mut server = Bounded::spawn(cmd, &log.with_extension("server.log"), "sockperf server")?;
    std::thread::sleep(Duration::from_millis(300));
    let mut client = pair.command(0, "taskset");
    client
        .args(["-c", &cores[0].to_string(), "sockperf", "pp"])
        .args(["-i", &server_ip, "-p", SOCKPERF_PORT])
        .args(["-t", &format!("{}", opts.secs.ceil().max(1.0) as u64)])
        .args(["-m", "64", "--full-rtt"]);
    let status = run_bounded(
        client,
        log,
        Duration::from_secs_f64(opts.secs) + GRACE,
        "sockperf client",
    );
    server.stop();
    status?;
    let text = std::fs::read_to_string(log).map_err(|e| e.to_string())?;
    let mut o = sockperf_outcome(&text)
        .ok_or_else(|| format!("no percentiles in sockperf's output:\n{}", tail(log)))?;
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

// ----- IPU offload -----------------------------------------------------------

fn offload(
    opts: &Options,
    workload: Workload,
    variant: Variant,
    read_ns: u64,
    rep: usize,
) -> Result<Outcome, String> {
    let cost = CostModel::parse(&opts.pcie_cost).map_err(|e| e.to_string())?;
    let r = wave::run(&RunConfig {
        workload,
        variant,
        cost: CostModel {
            nonposted_read_ns: read_ns,
            ..cost
        },
        wakeup: Wakeup::Interrupt,
        duration: Duration::from_millis(opts.ipu_ms),
        cpus: 4,
        tasks: 32,
        window: 16,
        seed: 0x5eed + rep as u64,
        pin: true,
        epoch: Instant::now(),
    });
    if r.completed == 0 {
        return Err("nothing completed".into());
    }
    let mut o = Outcome::default();
    let decisions = (r.aborted_total + r.completed).max(1) as f64;
    o.set("per_s", r.per_second);
    o.set("p50_us", r.latency_p50_ns as f64 / 1e3);
    o.set("p99_us", r.latency_p99_ns as f64 / 1e3);
    o.set("aborted_per_s", r.aborted_total as f64 / r.seconds);
    o.set("abort_percent", 100.0 * r.aborted_total as f64 / decisions);
    o.set("stale", r.aborted_total as f64);
    o.set("wasted_us_per_s", r.wasted_ns as f64 / 1e3 / r.seconds);
    o.set("withdrawn_per_s", r.withdrawn as f64 / r.seconds);
    o.set("cpu_busy", r.cpu_busy);
    o.headline = format!(
        "{:.0}/s, p50 {:.1} us, {:.2} % aborted",
        r.per_second,
        r.latency_p50_ns as f64 / 1e3,
        100.0 * r.aborted_total as f64 / decisions
    );
    Ok(o)
}

// ----- children -----------------------------------------------------------------

/// A child process with its output in a log file, stopped by its own PID:
/// SIGTERM, then SIGKILL if it does not exit.
struct Bounded {
    child: Child,
    what: &'static str,
    log: std::path::PathBuf,
}

impl Bounded {
    fn spawn(mut cmd: Command, log: &Path, what: &'static str) -> Result<Bounded, String> {
        let out = File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| {
                format!("cannot start {what}: {e} (is it installed? cargo xtask setup)")
            })?;
        Ok(Bounded {
            child,
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
            if let Ok(Some(status)) = self.child.try_wait() {
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
        let deadline = Instant::now() + limit;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                _ => return None,
            }
        }
    }

    fn stop(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        // A polite stop first, so the child removes what it created
        // (oaectl its namespaces and dataplanes, testpmd its EAL files).
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        if self.wait(Duration::from_secs(15)).is_none() {
            eprintln!(
                "oae-perf: {} (pid {}) ignored SIGTERM; killing it",
                self.what,
                self.child.id()
            );
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Drop for Bounded {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs `cmd` to completion within `limit`, its output in `log`.
fn run_bounded(
    cmd: Command,
    log: &Path,
    limit: Duration,
    what: &'static str,
) -> Result<std::process::ExitStatus, String> {
    let mut child = Bounded::spawn(cmd, log, what)?;
    match child.wait(limit) {
        Some(status) => Ok(status),
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
fn tail(log: &Path) -> String {
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
                {"queues": [{"link": {"reversals": 7, "tx_frames": 1100}}],
                 "xdp": [{"counters": {"dropped_by_fault": 9}}]},
                {"queues": [{"link": {"reversals": 2, "tx_frames": 1000}}], "xdp": []}
            ]
        });
        let o = demo_outcome(&v, false);
        assert_eq!(o.metrics["verbs_per_s"], 500.0);
        assert_eq!(o.metrics["during_verbs_per_s"], 300.0);
        assert_eq!(o.metrics["during_p999_us"], 40.0);
        assert_eq!(o.metrics["reversals"], 9.0);
        assert_eq!(o.metrics["frames_dropped_by_fault"], 9.0);
        assert_eq!(o.metrics["frames_per_verb"], 2.1);
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
