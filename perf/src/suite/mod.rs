//! The benchmark suite: line rate, latency and failure injection, each
//! compared side by side with references run on the same veth pair and
//! cores, every figure from several repetitions.
//!
//! The runner is an orchestrator. Every OAE figure comes from the product's
//! own main job, `oaectl demo`, run as a child process with the settings
//! of the trial (driver, transport, slots, verbs, faults, cores), so what
//! is measured is what users run; each DPDK run then also gets the fresh
//! process DPDK's EAL needs. The references are real peers: the raw AF_XDP
//! reflector and ping-pong of [`crate::raw`], `dpdk-testpmd` in macswap
//! mode, `sockperf`, and in the failure matrix Debian's `redis-server` and
//! `redis-benchmark`: an atomic counter over the kernel's TCP, hurt by the
//! same XDP faults as OAE. Repetitions are the outer loop, so each
//! repetition runs every subject a few seconds apart and ratios compare
//! like with like on a machine whose speed drifts.

pub mod child;
pub mod choice;
pub mod demo;
pub mod doc;
pub mod fabric;
pub mod fi_pingpong;
pub mod figures;
pub mod ipu;
pub mod outcome;
pub mod plan;
pub mod raw_xdp;
pub mod redis;
pub mod report;
pub mod sizes;
pub mod sockperf;
mod stages;
pub mod svg;
pub mod testpmd;
pub mod testpmd_pair;
pub mod trial;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::{MachineFacts, Summary, machine_facts};

/// The experiments, in the order `suite` runs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Experiment {
    LineRate,
    Latency,
    Failure,
    /// The Wave-like offload over emulated PCIe: FITO rings against the
    /// bilateral swap.
    Ipu,
    /// Queues and links per dataplane, on one shared memory.
    Scale,
    /// A link cut in a fabric (traffic takes another path) against a link
    /// down between two nodes, OAE and the RC model.
    Fabric,
    /// libfabric's fi_pingpong over the oae provider against libfabric's
    /// tcp and udp providers.
    Libfabric,
    /// WRITE and READ from 64 to 960 bytes: verbs/s, Mpps and Gb/s.
    Sizes,
}

impl Experiment {
    pub const ALL: [Experiment; 8] = [
        Experiment::LineRate,
        Experiment::Latency,
        Experiment::Failure,
        Experiment::Ipu,
        Experiment::Scale,
        Experiment::Fabric,
        Experiment::Libfabric,
        Experiment::Sizes,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Experiment::LineRate => "line-rate",
            Experiment::Latency => "latency",
            Experiment::Failure => "failure",
            Experiment::Ipu => "ipu",
            Experiment::Scale => "scale",
            Experiment::Fabric => "fabric",
            Experiment::Libfabric => "libfabric",
            Experiment::Sizes => "sizes",
        }
    }
}

/// How the suite runs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Options {
    /// Short runs and one repetition: checks that every experiment
    /// completes and its results are well formed, not how fast it is.
    pub quick: bool,
    pub reps: usize,
    /// Seconds of each line-rate and latency trial.
    pub secs: f64,
    /// Seconds of each failure trial; faults fill its middle third.
    pub failure_secs: f64,
    /// Slots per link for the line-rate sweep (one verb lane per slot).
    pub slots: Vec<u16>,
    /// Verb lanes of the failure trials.
    pub failure_lanes: u32,
    /// Cores of side a (issuer, generator, client) and side b.
    pub cores: [usize; 2],
    /// Milliseconds of each IPU offload run.
    pub ipu_ms: u64,
    /// The emulated PCIe costs of the IPU experiment (its non-posted read
    /// cost is swept: 0 and 750 ns), as `oae_swapring::cost::CostModel`.
    pub pcie_cost: String,
    pub oaectl: PathBuf,
    /// The directory holding the oae libfabric provider, liboae-fi.so.
    #[serde(default)]
    pub fi_provider: PathBuf,
    pub out: PathBuf,
}

impl Options {
    /// The documented full suite.
    pub fn full(oaectl: PathBuf, out: PathBuf) -> Options {
        Options {
            quick: false,
            reps: 5,
            secs: 3.0,
            failure_secs: 6.0,
            slots: vec![1, 4, 16, 64, 256, 1024],
            failure_lanes: 32,
            cores: [0, 1],
            ipu_ms: 500,
            pcie_cost: oae_swapring::cost::CostModel::default().to_string(),
            fi_provider: fi_pingpong::default_provider_dir(&oaectl),
            oaectl,
            out,
        }
    }

    /// The CI smoke run of every experiment.
    pub fn quick(oaectl: PathBuf, out: PathBuf) -> Options {
        Options {
            quick: true,
            reps: 1,
            secs: 1.0,
            failure_secs: 1.5,
            slots: vec![1, 64],
            failure_lanes: 16,
            ipu_ms: 100,
            ..Options::full(oaectl, out)
        }
    }

    /// Refuses settings that cannot run, saying which and why.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=100).contains(&self.reps) {
            return Err(format!("--reps {}: use 1 to 100", self.reps));
        }
        for (flag, s) in [("--secs", self.secs), ("--failure-secs", self.failure_secs)] {
            if !(s > 0.0 && s <= 600.0) {
                return Err(format!("{flag} {s}: use a number of seconds in (0, 600]"));
            }
        }
        if self.failure_secs < 1.2 {
            return Err(format!(
                "--failure-secs {}: at least 1.2, so the middle third holds the link flaps",
                self.failure_secs
            ));
        }
        if self.slots.is_empty() {
            return Err("--slots: give at least one slot count".into());
        }
        if let Some(s) = self.slots.iter().find(|s| !(1..=1024).contains(*s)) {
            return Err(format!("--slots {s}: use 1 to 1024"));
        }
        if !(1..=1024).contains(&self.failure_lanes) {
            return Err(format!(
                "--failure-lanes {}: use 1 to 1024",
                self.failure_lanes
            ));
        }
        if !(10..=60_000).contains(&self.ipu_ms) {
            return Err(format!("--ipu-ms {}: use 10 to 60000", self.ipu_ms));
        }
        oae_swapring::cost::CostModel::parse(&self.pcie_cost)
            .map_err(|e| format!("--pcie-cost {}: {e}", self.pcie_cost))?;
        if !self.oaectl.exists() {
            return Err(format!(
                "{} not found: build it (cargo build --release -p oae-ctl) or pass --oaectl",
                self.oaectl.display()
            ));
        }
        Ok(())
    }
}

/// One figure over the repetitions.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Figure {
    /// One value per repetition that produced it.
    pub values: Vec<f64>,
    pub median: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// Mean and sample standard deviation of `values`.
    #[serde(default)]
    pub mean: Option<f64>,
    #[serde(default)]
    pub stddev: Option<f64>,
}

impl Figure {
    fn push(&mut self, v: f64) {
        self.values.push(v);
        let s = Summary::of(&self.values);
        self.median = s.map(|s| s.median);
        self.min = s.map(|s| s.min);
        self.max = s.map(|s| s.max);
        self.mean = s.map(|s| s.mean);
        self.stddev = s.map(|s| s.stddev);
    }
}

/// One subject measured under one setting, over every repetition.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Measurement {
    pub experiment: Experiment,
    /// What ran: `oae`, `rc-model`, `raw-af-xdp`, `testpmd`, `sockperf`,
    /// `redis` (Redis INCR over kernel TCP), or an IPU offload variant.
    pub subject: String,
    /// The setting: verb, slots, driver, placement, condition ...
    pub params: BTreeMap<String, String>,
    /// Metric name to figure; names end in their unit (`_per_s`, `_us`).
    pub metrics: BTreeMap<String, Figure>,
    /// Repetitions that failed to run, with the reason.
    pub failures: Vec<String>,
    /// The latency distribution of the repetition with the median p99.9
    /// (`(quantile, us)`), where the subject reports one.
    pub cdf: Vec<(f64, f64)>,
    #[serde(skip)]
    cdfs: Vec<(f64, Vec<(f64, f64)>)>,
}

impl Measurement {
    pub fn param(&self, key: &str) -> Option<&str> {
        self.params.get(key).map(String::as_str)
    }

    pub fn median(&self, metric: &str) -> Option<f64> {
        self.metrics.get(metric).and_then(|f| f.median)
    }

    fn record(&mut self, outcome: outcome::Outcome) {
        for (k, v) in outcome.metrics {
            self.metrics.entry(k).or_default().push(v);
        }
        if !outcome.cdf.is_empty() {
            self.cdfs.push((outcome.tail_us, outcome.cdf));
            let mut by_tail: Vec<&(f64, Vec<(f64, f64)>)> = self.cdfs.iter().collect();
            by_tail.sort_by(|a, b| a.0.total_cmp(&b.0));
            self.cdf = by_tail[by_tail.len() / 2].1.clone();
        }
    }
}

/// A target the suite reports against, with the ratio measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Target {
    pub name: String,
    /// E.g. "OAE CAS verbs/s / testpmd macswap pps".
    pub ratio_of: String,
    pub ratio: Option<f64>,
    /// E.g. ">= 1".
    pub wanted: String,
    pub met: Option<bool>,
    /// Why it is met or not, from the figures.
    pub why: String,
}

/// Everything a suite run measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Results {
    pub started_utc: String,
    pub duration_s: f64,
    pub options: Options,
    pub machine: Machine,
    pub experiments: Vec<Experiment>,
    pub measurements: Vec<Measurement>,
    pub targets: Vec<Target>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Machine {
    pub nproc: usize,
    pub cpu_model: String,
    pub kernel: String,
    pub loadavg_before: String,
    pub pinning: String,
}

impl Machine {
    fn of(facts: MachineFacts, cores: [usize; 2]) -> Machine {
        Machine {
            nproc: facts.nproc,
            cpu_model: facts.cpu_model,
            kernel: facts.kernel,
            loadavg_before: facts.loadavg,
            pinning: format!(
                "side a (issuer, generator, client) on core {}, side b (target, reflector, \
                 server) on core {}; same-core latency runs put both on core {}",
                cores[0], cores[1], cores[0]
            ),
        }
    }
}

/// Runs `experiments` and writes `results.json`, `report.md` and the SVG
/// plots into `opts.out`. A trial that fails is recorded with its reason
/// and the suite goes on; the run fails only if nothing could be measured
/// or the results cannot be written.
pub fn run(opts: &Options, experiments: &[Experiment]) -> Result<Results, String> {
    opts.check()?;
    std::fs::create_dir_all(opts.out.join("logs"))
        .map_err(|e| format!("cannot create {}: {e}", opts.out.display()))?;
    let started = Instant::now();
    let started_utc = utc_timestamp();
    let machine = Machine::of(machine_facts(), opts.cores);
    let plan = plan::plan(opts, experiments);
    let mut measurements: Vec<Measurement> = plan
        .iter()
        .map(|item| Measurement {
            experiment: item.experiment,
            subject: item.subject.clone(),
            params: item.params.clone(),
            metrics: BTreeMap::new(),
            failures: Vec::new(),
            cdf: Vec::new(),
            cdfs: Vec::new(),
        })
        .collect();
    let total = plan.len() * opts.reps;
    let mut done = 0;
    eprintln!(
        "oae-perf: {} trials ({} settings x {} repetitions); {}",
        total,
        plan.len(),
        opts.reps,
        machine.pinning
    );
    for rep in 0..opts.reps {
        for (item, m) in plan.iter().zip(measurements.iter_mut()) {
            done += 1;
            let t0 = Instant::now();
            let log = opts
                .out
                .join("logs")
                .join(format!("{}-rep{}.log", item.slug(), rep + 1));
            let outcome = trial::run(&item.trial, opts, &log, rep);
            let took = t0.elapsed().as_secs_f64();
            let eta = started.elapsed().as_secs_f64() / done as f64 * (total - done) as f64;
            match outcome {
                Ok(o) => {
                    eprintln!(
                        "[{done:>3}/{total}] {:<52} rep {}/{}: {} ({took:.1} s, about {:.0} s left)",
                        item.describe(),
                        rep + 1,
                        opts.reps,
                        o.headline,
                        eta
                    );
                    m.record(o);
                }
                Err(e) => {
                    eprintln!(
                        "[{done:>3}/{total}] {:<52} rep {}/{}: FAILED: {e}",
                        item.describe(),
                        rep + 1,
                        opts.reps
                    );
                    m.failures.push(format!("rep {}: {e}", rep + 1));
                }
            }
        }
    }
    if measurements.iter().all(|m| m.metrics.is_empty()) {
        return Err("no trial produced a figure (see the logs in the output directory)".into());
    }
    let targets = report::targets(&measurements, opts);
    let results = Results {
        started_utc,
        duration_s: started.elapsed().as_secs_f64(),
        options: opts.clone(),
        machine,
        experiments: experiments.to_vec(),
        measurements,
        targets,
    };
    write(&results, &opts.out)?;
    Ok(results)
}

/// Writes the report and plots of `dir` again from its `results.json`
/// (after a change to how they are drawn; nothing is measured).
pub fn rerender(dir: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(dir.join("results.json"))
        .map_err(|e| format!("cannot read {}/results.json: {e}", dir.display()))?;
    let mut results: Results =
        serde_json::from_str(&text).map_err(|e| format!("results.json: {e}"))?;
    results.targets = report::targets(&results.measurements, &results.options);
    write(&results, dir)
}

fn write(results: &Results, out: &Path) -> Result<(), String> {
    let put = |name: &str, text: &str| {
        std::fs::write(out.join(name), text)
            .map_err(|e| format!("cannot write {}: {e}", out.join(name).display()))
    };
    let json = serde_json::to_string_pretty(results).map_err(|e| e.to_string())?;
    put("results.json", &json)?;
    let plots = svg::plots(results);
    for (name, text) in &plots {
        put(name, text)?;
    }
    let names: Vec<&str> = plots.iter().map(|(n, _)| n.as_str()).collect();
    put("report.md", &report::markdown(results, &names))?;
    Ok(())
}

/// Checks that `dir` holds a complete, well-formed suite result: the JSON
/// parses as the suite's result types, every planned measurement has every
/// metric from at least one repetition or says why not, every failure
/// condition has its TCP baseline row with its figures in order, and the
/// report and plots are there.
pub fn validate(dir: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(dir.join("results.json"))
        .map_err(|e| format!("cannot read {}/results.json: {e}", dir.display()))?;
    // Read with the types `run` wrote it with: anything they cannot read is
    // not well formed, and serde's error says which field and where.
    let results: Results = serde_json::from_str(&text)
        .map_err(|e| format!("results.json does not match the suite's types: {e}"))?;
    let mut problems = tcp_baseline_problems(&results);
    for m in &results.measurements {
        let what = format!("{} {} {:?}", m.experiment.name(), m.subject, m.params);
        if !m.metrics.is_empty() {
            for (name, fig) in &m.metrics {
                if !fig.median.is_some_and(f64::is_finite) {
                    problems.push(format!("{what}: {name} has no median"));
                }
            }
        } else if !m.failures.is_empty() {
            problems.push(format!("{what}: every repetition failed: {:?}", m.failures));
        } else {
            problems.push(format!("{what}: no figures and no failure recorded"));
        }
    }
    for t in &results.targets {
        if t.why.is_empty() {
            problems.push(format!("target {} says nothing", t.name));
        }
    }
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap_or_default();
    if !report.starts_with("# ") {
        problems.push("report.md is missing or empty".into());
    }
    let svgs = std::fs::read_dir(dir)
        .map_err(|e| e.to_string())?
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "svg"))
        .count();
    if svgs == 0 {
        problems.push("no SVG plot was written".into());
    }
    if problems.is_empty() {
        Ok(format!(
            "{} measurements, {} targets, {svgs} plots: well formed",
            results.measurements.len(),
            results.targets.len()
        ))
    } else {
        Err(problems.join("\n"))
    }
}

/// Metrics every Redis row of the failure matrix must have.
const REDIS_METRICS: [&str; 9] = [
    "requests_per_s",
    "p50_us",
    "p99_us",
    "p999_us",
    "max_us",
    "tcp_retransmissions",
    "checksum_drops",
    "frames_dropped_by_fault",
    "exactly_once_pass",
];

/// What is wrong with the TCP baseline's rows: each failure condition that
/// OAE ran must have a Redis row with every figure (or say why not), its
/// latency percentiles in order and a rate above zero.
fn tcp_baseline_problems(r: &Results) -> Vec<String> {
    let mut problems = Vec::new();
    let failure = r
        .measurements
        .iter()
        .filter(|m| m.experiment == Experiment::Failure);
    let redis: Vec<&Measurement> = failure.clone().filter(|m| m.subject == "redis").collect();
    for oae in failure.filter(|m| m.subject == "oae") {
        let cond = oae.param("condition").unwrap_or("?");
        let Some(m) = redis.iter().find(|m| m.param("condition") == Some(cond)) else {
            problems.push(format!(
                "failure condition '{cond}' has no Redis (TCP baseline) row"
            ));
            continue;
        };
        if m.metrics.is_empty() {
            // Every repetition failed: the generic check reports it.
            continue;
        }
        let what = format!("failure redis condition={cond}");
        for name in REDIS_METRICS {
            if m.median(name).is_none() {
                problems.push(format!("{what}: no {name}"));
            }
        }
        let p: Vec<Option<f64>> = ["p50_us", "p99_us", "p999_us", "max_us"]
            .iter()
            .map(|k| m.median(k))
            .collect();
        // Read off rows printed to the microsecond: allow that much.
        if p.windows(2)
            .any(|w| matches!(w, [Some(a), Some(b)] if *a > *b + 1.0))
        {
            problems.push(format!(
                "{what}: percentiles out of order (p50, p99, p99.9, max: {p:?})"
            ));
        }
        if m.median("requests_per_s").is_some_and(|x| x <= 0.0) {
            problems.push(format!("{what}: no request completed"));
        }
        if m.cdf.is_empty() {
            problems.push(format!("{what}: no latency distribution"));
        }
    }
    problems
}

/// `YYYYMMDD-HHMMSSZ` now, for result directories that sort by time.
pub fn utc_timestamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (Howard
/// Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// How long a child may run beyond its own duration before it is stopped.
pub const GRACE: Duration = Duration::from_secs(60);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_civil() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(20_780), (2026, 11, 23));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn figures_keep_every_repetition_and_their_median() {
        let mut f = Figure::default();
        for v in [3.0, 1.0, 2.0] {
            f.push(v);
        }
        assert_eq!(f.values, vec![3.0, 1.0, 2.0]);
        assert_eq!((f.median, f.min, f.max), (Some(2.0), Some(1.0), Some(3.0)));
    }

    #[test]
    fn the_tcp_baseline_rows_are_checked() {
        let row = |subject: &str, metrics: &[(&str, f64)]| Measurement {
            experiment: Experiment::Failure,
            subject: subject.to_string(),
            params: BTreeMap::from([("condition".to_string(), "loss 1%".to_string())]),
            metrics: metrics
                .iter()
                .map(|&(k, v)| {
                    let mut f = Figure::default();
                    f.push(v);
                    (k.to_string(), f)
                })
                .collect(),
            failures: Vec::new(),
            cdf: vec![(0.5, 50.0), (1.0, 400.0)],
            cdfs: Vec::new(),
        };
        let mut results = Results {
            started_utc: "20261123-000000Z".into(),
            duration_s: 1.0,
            options: Options::quick(PathBuf::from("/bin/sh"), PathBuf::from("/tmp/x")),
            machine: Machine {
                nproc: 2,
                cpu_model: "test".into(),
                kernel: "test".into(),
                loadavg_before: "0 0 0".into(),
                pinning: "test".into(),
            },
            experiments: vec![Experiment::Failure],
            measurements: vec![row("oae", &[("during_p999_us", 1000.0)])],
            targets: Vec::new(),
        };
        let problems = tcp_baseline_problems(&results);
        assert!(problems[0].contains("no Redis"), "{problems:?}");

        let mut figures: Vec<(&str, f64)> = REDIS_METRICS.iter().map(|&k| (k, 1.0)).collect();
        figures.extend([
            ("p50_us", 50.0),
            ("p99_us", 200.0),
            ("p999_us", 210.0),
            ("max_us", 400.0),
        ]);
        results.measurements.push(row("redis", &figures));
        assert_eq!(tcp_baseline_problems(&results), Vec::<String>::new());

        figures.push(("p999_us", 900.0));
        figures.retain(|(k, _)| *k != "tcp_retransmissions");
        results.measurements[1] = row("redis", &figures);
        let problems = tcp_baseline_problems(&results);
        assert!(
            problems.iter().any(|p| p.contains("out of order")),
            "{problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("no tcp_retransmissions")),
            "{problems:?}"
        );
    }

    #[test]
    fn bad_options_are_refused_with_the_flag() {
        let base = Options::quick(PathBuf::from("/bin/sh"), PathBuf::from("/tmp/x"));
        type Change = fn(&mut Options);
        let cases: [(Change, &str); 5] = [
            (|o| o.reps = 0, "--reps 0"),
            (|o| o.secs = -1.0, "--secs -1"),
            (|o| o.failure_secs = 1.0, "--failure-secs 1"),
            (|o| o.slots = vec![2048], "--slots 2048"),
            (
                |o| o.oaectl = PathBuf::from("/nonexistent/oaectl"),
                "not found",
            ),
        ];
        for (change, says) in cases {
            let mut o = base.clone();
            change(&mut o);
            let e = o.check().unwrap_err();
            assert!(e.contains(says), "{says}: {e}");
        }
        assert!(base.check().is_ok());
    }
}
