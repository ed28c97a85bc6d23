//! `oae-linkbench`: OAE over a real AF_XDP link against what the same
//! driver moves with no protocol at all, side by side in one run. Needs
//! root.
//!
//! Every repetition runs, each on a fresh veth pair between two network
//! namespaces, side a pinned to one core and side b to the other:
//!
//! 1. the raw references ([`oae_perf::raw`]): a ping-pong (one 64-byte
//!    frame in flight), then an open-loop flood and a windowed flood
//!    against a reflector that swaps MAC addresses in place;
//! 2. OAE round trip: one CAS in flight (`--rtt-lanes`, default 1) over a
//!    link of `--slots` slots;
//! 3. OAE throughput: `--lanes` CAS streams, one verb in flight each;
//! 4. the same two OAE runs over authenticated links (`[queue.auth]`:
//!    every frame tagged and checked).
//!
//! Repetitions interleave the three so that drift on this shared machine
//! hits them alike; the report gives the median and range of each figure
//! and the two ratios the dataplane is judged by:
//!
//! * CAS verbs/s ÷ the raw reflector's packets/s (the better of the two
//!   floods), and
//! * CAS round-trip p50 ÷ the raw ping-pong's p50;
//!
//! and what authentication costs: authenticated CAS verbs/s ÷ plain, and
//! authenticated round-trip p50 ÷ plain.
//!
//! ```text
//! oae-linkbench [--reps N] [--secs S] [--lanes N] [--rtt-lanes N] [--slots N]
//!               [--cores A,B] [--quick] [--json]
//! ```

use std::process::ExitCode;
use std::time::Duration;

use oae_perf::link::{OaeRun, cas_workload};
use oae_perf::raw::{RawConfig, RawReport, run_afxdp};
use oae_perf::{MachineFacts, Summary, machine_facts};
use oae_pmd::afxdp::AfXdpConfig;
use oae_pmd::netns::VethPair;
use oae_pmd::xdp::XdpMode;
use serde::Serialize;

const USAGE: &str = "usage: oae-linkbench [--reps N] [--secs S] [--lanes N] [--rtt-lanes N] \
                     [--slots N] [--cores A,B] [--quick] [--json]";

#[derive(Clone, Debug)]
struct Options {
    reps: usize,
    secs: f64,
    lanes: u32,
    rtt_lanes: u32,
    slots: u16,
    cores: [usize; 2],
    json: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            reps: 5,
            secs: 2.0,
            lanes: 64,
            rtt_lanes: 1,
            slots: 64,
            cores: [0, 1],
            json: false,
        }
    }
}

fn parse(args: impl IntoIterator<Item = String>) -> Result<Options, String> {
    let mut o = Options::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .ok_or_else(|| format!("{name} needs a value\n{USAGE}"))
        };
        match arg.as_str() {
            "--quick" => {
                o.reps = 1;
                o.secs = 0.3;
            }
            "--json" => o.json = true,
            "--reps" => o.reps = number("--reps", &value("--reps")?)?,
            "--secs" => o.secs = number("--secs", &value("--secs")?)?,
            "--lanes" => o.lanes = number("--lanes", &value("--lanes")?)?,
            "--rtt-lanes" => o.rtt_lanes = number("--rtt-lanes", &value("--rtt-lanes")?)?,
            "--slots" => o.slots = number("--slots", &value("--slots")?)?,
            "--cores" => {
                let v = value("--cores")?;
                let (a, b) = v
                    .split_once(',')
                    .ok_or_else(|| format!("--cores '{v}': expected two cores, e.g. 0,1"))?;
                o.cores = [number("--cores", a)?, number("--cores", b)?];
            }
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument '{other}'\n{USAGE}")),
        }
    }
    if o.reps == 0 || o.reps > 100 {
        return Err(format!("--reps {}: use 1 to 100", o.reps));
    }
    if !(o.secs > 0.0 && o.secs <= 600.0) {
        return Err(format!("--secs {}: use a duration in (0, 600]", o.secs));
    }
    for (name, lanes) in [("--lanes", o.lanes), ("--rtt-lanes", o.rtt_lanes)] {
        if lanes == 0 || lanes > 1024 {
            return Err(format!("{name} {lanes}: use 1 to 1024"));
        }
    }
    if o.slots == 0 || o.slots > 4096 {
        return Err(format!("--slots {}: use 1 to 4096", o.slots));
    }
    Ok(o)
}

fn number<T: std::str::FromStr>(name: &str, text: &str) -> Result<T, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("{name} '{text}' is not a number"))
}

/// One repetition's figures.
struct Rep {
    raw: RawReport,
    rtt: OaeRun,
    throughput: OaeRun,
    auth_rtt: OaeRun,
    auth_throughput: OaeRun,
}

fn raw_config(o: &Options) -> RawConfig {
    let mut cfg = RawConfig {
        generator_core: o.cores[0],
        reflector_core: o.cores[1],
        ..RawConfig::default()
    };
    cfg.flood.duration = Duration::from_secs_f64(o.secs);
    cfg.flood.warmup = Duration::from_secs_f64((o.secs / 10.0).min(0.2));
    cfg.ping_pong.max_duration = Duration::from_secs_f64(o.secs);
    cfg.ping_pong.warmup_rounds = 200;
    cfg
}

fn oae_run(o: &Options, lanes: u32, auth: bool) -> Result<OaeRun, String> {
    let pair = VethPair::create("bench").map_err(|e| format!("creating the veth pair: {e}"))?;
    cas_workload(
        &pair,
        o.slots.max(lanes as u16),
        lanes,
        o.secs,
        o.cores,
        auth,
    )
}

fn run(o: &Options) -> Result<Vec<Rep>, String> {
    let mut reps = Vec::with_capacity(o.reps);
    for i in 0..o.reps {
        eprint!("repetition {}/{}: raw", i + 1, o.reps);
        let raw = run_afxdp(&raw_config(o), XdpMode::Auto, &AfXdpConfig::default())?;
        eprint!(", OAE round trip");
        let rtt = oae_run(o, o.rtt_lanes, false)?;
        eprint!(", OAE throughput");
        let throughput = oae_run(o, o.lanes, false)?;
        eprint!(", authenticated");
        let auth_rtt = oae_run(o, o.rtt_lanes, true)?;
        let auth_throughput = oae_run(o, o.lanes, true)?;
        eprintln!(" done");
        for (what, r) in [
            ("round trip", &rtt),
            ("throughput", &throughput),
            ("authenticated round trip", &auth_rtt),
            ("authenticated throughput", &auth_throughput),
        ] {
            if r.mismatches != 0 {
                return Err(format!(
                    "OAE {what} run: {} results contradicted the ledger",
                    r.mismatches
                ));
            }
        }
        reps.push(Rep {
            raw,
            rtt,
            throughput,
            auth_rtt,
            auth_throughput,
        });
    }
    Ok(reps)
}

/// The summaries the report is made of, in one place for both formats.
struct Figures {
    raw_pp_p50_us: Summary,
    raw_flood_pps: Summary,
    raw_windowed_pps: Summary,
    raw_best_pps: Summary,
    oae_rtt_p50_us: Summary,
    oae_rtt_p99_us: Summary,
    oae_verbs_per_s: Summary,
    oae_tput_p50_us: Summary,
    oae_failed: u64,
    oae_frames_per_verb: Summary,
    oae_rx_per_iteration: [Summary; 2],
    oae_explicit_commit_share: Summary,
    throughput_ratio: Summary,
    latency_ratio: Summary,
    auth_rtt_p50_us: Summary,
    auth_verbs_per_s: Summary,
    auth_throughput_ratio: Summary,
    auth_latency_ratio: Summary,
}

fn figures(reps: &[Rep]) -> Figures {
    let s = |f: &dyn Fn(&Rep) -> f64| {
        Summary::of(&reps.iter().map(f).collect::<Vec<_>>()).expect("at least one repetition")
    };
    let best_pps = |r: &Rep| {
        let windowed = r.raw.windowed_flood.as_ref().map_or(0.0, |(_, f)| f.rx_pps);
        r.raw.flood.rx_pps.max(windowed)
    };
    Figures {
        raw_pp_p50_us: s(&|r| r.raw.ping_pong.p50_ns as f64 / 1e3),
        raw_flood_pps: s(&|r| r.raw.flood.rx_pps),
        raw_windowed_pps: s(&|r| r.raw.windowed_flood.as_ref().map_or(0.0, |(_, f)| f.rx_pps)),
        raw_best_pps: s(&best_pps),
        oae_rtt_p50_us: s(&|r| r.rtt.latency.p50 as f64 / 1e3),
        oae_rtt_p99_us: s(&|r| r.rtt.latency.p99 as f64 / 1e3),
        oae_verbs_per_s: s(&|r| r.throughput.verbs_per_s),
        oae_tput_p50_us: s(&|r| r.throughput.latency.p50 as f64 / 1e3),
        oae_failed: reps
            .iter()
            .map(|r| {
                r.rtt.failed + r.throughput.failed + r.auth_rtt.failed + r.auth_throughput.failed
            })
            .sum(),
        oae_frames_per_verb: s(&|r| r.throughput.frames_per_verb),
        oae_rx_per_iteration: [0, 1].map(|i| s(&|r| r.throughput.rx_per_iteration[i])),
        oae_explicit_commit_share: s(&|r| {
            r.throughput.explicit_commits as f64 / r.throughput.completed.max(1) as f64
        }),
        // Ratios per repetition, so each compares runs taken side by side.
        throughput_ratio: s(&|r| r.throughput.verbs_per_s / best_pps(r).max(1.0)),
        latency_ratio: s(&|r| r.rtt.latency.p50 as f64 / (r.raw.ping_pong.p50_ns as f64).max(1.0)),
        auth_rtt_p50_us: s(&|r| r.auth_rtt.latency.p50 as f64 / 1e3),
        auth_verbs_per_s: s(&|r| r.auth_throughput.verbs_per_s),
        auth_throughput_ratio: s(&|r| {
            r.auth_throughput.verbs_per_s / r.throughput.verbs_per_s.max(1.0)
        }),
        auth_latency_ratio: s(&|r| {
            r.auth_rtt.latency.p50 as f64 / (r.rtt.latency.p50 as f64).max(1.0)
        }),
    }
}

fn text(o: &Options, reps: &[Rep], f: &Figures) -> String {
    let m = machine_facts();
    let row = |name: &str, s: Summary, unit: &str| {
        format!(
            "  {name:<40} {:>12.2} {unit:<8} ({:.2} .. {:.2})  {:.2} ± {:.2}  n={}\n",
            s.median, s.min, s.max, s.mean, s.stddev, s.count
        )
    };
    let mut out = format!(
        "OAE vs raw AF_XDP on a veth pair: {} repetition(s) of {:.1} s; side a pinned to core \
         {}, side b to core {}\nmachine: {} CPUs, {}, kernel {}, load {}\ndriver: {} / {}\n\n\
         median (min .. max)  mean ± standard deviation  n repetitions\n",
        reps.len(),
        o.secs,
        o.cores[0],
        o.cores[1],
        m.nproc,
        m.cpu_model,
        m.kernel,
        m.loadavg,
        reps[0].raw.generator,
        reps[0].raw.reflector,
    );
    out += &row("raw ping-pong RTT p50", f.raw_pp_p50_us, "us");
    out += &row("raw reflector, open-loop flood", f.raw_flood_pps, "pps");
    out += &row(
        "raw reflector, windowed flood (256)",
        f.raw_windowed_pps,
        "pps",
    );
    out += &row(
        &format!("OAE CAS round trip p50 ({} lane)", o.rtt_lanes),
        f.oae_rtt_p50_us,
        "us",
    );
    out += &row("OAE CAS round trip p99", f.oae_rtt_p99_us, "us");
    out += &row(
        &format!(
            "OAE CAS verbs/s ({} lanes, {} slots)",
            o.lanes,
            o.slots.max(o.lanes as u16)
        ),
        f.oae_verbs_per_s,
        "verbs/s",
    );
    out += &row(
        "OAE CAS latency p50 under that load",
        f.oae_tput_p50_us,
        "us",
    );
    out += &row(
        "OAE frames per verb (both sides)",
        f.oae_frames_per_verb,
        "",
    );
    for (side, summary) in ["a", "b"].iter().zip(f.oae_rx_per_iteration) {
        out += &row(
            &format!("OAE frames received per loop, side {side}"),
            summary,
            "",
        );
    }
    out += &row(
        "OAE verbs whose commit went alone",
        f.oae_explicit_commit_share,
        "share",
    );
    out += &row("authenticated CAS round trip p50", f.auth_rtt_p50_us, "us");
    out += &row("authenticated CAS verbs/s", f.auth_verbs_per_s, "verbs/s");
    out += &format!("  {:<40} {:>12}\n", "OAE verbs failed", f.oae_failed);
    out += "\nratios (per repetition, then median):\n";
    out += &row(
        "CAS verbs/s / raw reflector pps",
        f.throughput_ratio,
        "(>= 0.8)",
    );
    out += &row(
        "CAS RTT p50 / raw ping-pong p50",
        f.latency_ratio,
        "(<= 1.3)",
    );
    out += &row(
        "authenticated / plain CAS verbs/s",
        f.auth_throughput_ratio,
        "",
    );
    out += &row(
        "authenticated / plain CAS RTT p50",
        f.auth_latency_ratio,
        "",
    );
    out
}

/// The `--json` line: the run's settings, the machine, then every figure
/// as median, min and max.
#[derive(Serialize)]
struct JsonReport {
    reps: usize,
    secs: f64,
    lanes: u32,
    rtt_lanes: u32,
    slots: u16,
    cores: [usize; 2],
    // At the top level, as the line has always had them.
    #[serde(flatten)]
    machine: MachineFacts,
    raw_ping_pong_p50_us: Summary,
    raw_flood_pps: Summary,
    raw_windowed_flood_pps: Summary,
    raw_best_pps: Summary,
    oae_cas_rtt_p50_us: Summary,
    oae_cas_rtt_p99_us: Summary,
    oae_cas_verbs_per_s: Summary,
    oae_cas_loaded_p50_us: Summary,
    oae_failed: u64,
    oae_frames_per_verb: Summary,
    oae_rx_per_iteration_a: Summary,
    oae_rx_per_iteration_b: Summary,
    oae_explicit_commit_share: Summary,
    throughput_ratio: Summary,
    latency_ratio: Summary,
    auth_cas_rtt_p50_us: Summary,
    auth_cas_verbs_per_s: Summary,
    auth_throughput_ratio: Summary,
    auth_latency_ratio: Summary,
}

fn json(o: &Options, reps: usize, f: &Figures) -> String {
    // Three decimals: more than repetitions on a shared machine agree on.
    let s = |s: Summary| s.rounded(3);
    let report = JsonReport {
        reps,
        secs: o.secs,
        lanes: o.lanes,
        rtt_lanes: o.rtt_lanes,
        slots: o.slots.max(o.lanes as u16),
        cores: o.cores,
        machine: machine_facts(),
        raw_ping_pong_p50_us: s(f.raw_pp_p50_us),
        raw_flood_pps: s(f.raw_flood_pps),
        raw_windowed_flood_pps: s(f.raw_windowed_pps),
        raw_best_pps: s(f.raw_best_pps),
        oae_cas_rtt_p50_us: s(f.oae_rtt_p50_us),
        oae_cas_rtt_p99_us: s(f.oae_rtt_p99_us),
        oae_cas_verbs_per_s: s(f.oae_verbs_per_s),
        oae_cas_loaded_p50_us: s(f.oae_tput_p50_us),
        oae_failed: f.oae_failed,
        oae_frames_per_verb: s(f.oae_frames_per_verb),
        oae_rx_per_iteration_a: s(f.oae_rx_per_iteration[0]),
        oae_rx_per_iteration_b: s(f.oae_rx_per_iteration[1]),
        oae_explicit_commit_share: s(f.oae_explicit_commit_share),
        throughput_ratio: s(f.throughput_ratio),
        latency_ratio: s(f.latency_ratio),
        auth_cas_rtt_p50_us: s(f.auth_rtt_p50_us),
        auth_cas_verbs_per_s: s(f.auth_verbs_per_s),
        auth_throughput_ratio: s(f.auth_throughput_ratio),
        auth_latency_ratio: s(f.auth_latency_ratio),
    };
    // Numbers and strings in a struct: serialising cannot fail.
    serde_json::to_string(&report).expect("the report serialises")
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if oae_version::asked(&args) {
        println!("oae-linkbench {}", oae_version::VERSION);
        return ExitCode::SUCCESS;
    }
    let o = match parse(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match run(&o) {
        Ok(reps) => {
            let f = figures(&reps);
            print!("{}", text(&o, &reps, &f));
            if o.json {
                println!("{}", json(&o, reps.len(), &f));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("\noae-linkbench: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Result<Options, String> {
        parse(s.split_whitespace().map(String::from))
    }

    #[test]
    fn arguments_are_checked() {
        let o = args("--reps 3 --lanes 128 --cores 1,0").unwrap();
        assert_eq!((o.reps, o.lanes, o.cores), (3, 128, [1, 0]));
        assert_eq!(args("--quick").unwrap().reps, 1);
        for (bad, says) in [
            ("--reps 0", "use 1 to 100"),
            ("--secs -1", "(0, 600]"),
            ("--lanes 5000", "1 to 1024"),
            ("--cores 1", "two cores"),
            ("--slots x", "not a number"),
            ("--frobnicate", "unknown argument"),
        ] {
            let e = args(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    /// The line has the keys, and in the order, it had when it was
    /// written by hand.
    #[test]
    fn the_json_line_keeps_its_keys() {
        let one = Summary {
            median: 2.0,
            min: 1.0004,
            max: 3.0,
            mean: 2.0,
            stddev: 1.0,
            count: 3,
        };
        let f = Figures {
            raw_pp_p50_us: one,
            raw_flood_pps: one,
            raw_windowed_pps: one,
            raw_best_pps: one,
            oae_rtt_p50_us: one,
            oae_rtt_p99_us: one,
            oae_verbs_per_s: one,
            oae_tput_p50_us: one,
            oae_failed: 7,
            oae_frames_per_verb: one,
            oae_rx_per_iteration: [one; 2],
            oae_explicit_commit_share: one,
            throughput_ratio: one,
            latency_ratio: one,
            auth_rtt_p50_us: one,
            auth_verbs_per_s: one,
            auth_throughput_ratio: one,
            auth_latency_ratio: one,
        };
        let line = json(&Options::default(), 5, &f);
        let mut at = 0;
        for key in [
            "reps",
            "secs",
            "lanes",
            "rtt_lanes",
            "slots",
            "cores",
            "nproc",
            "cpu_model",
            "kernel",
            "loadavg",
            "raw_ping_pong_p50_us",
            "raw_flood_pps",
            "raw_windowed_flood_pps",
            "raw_best_pps",
            "oae_cas_rtt_p50_us",
            "oae_cas_rtt_p99_us",
            "oae_cas_verbs_per_s",
            "oae_cas_loaded_p50_us",
            "oae_failed",
            "oae_frames_per_verb",
            "oae_rx_per_iteration_a",
            "oae_rx_per_iteration_b",
            "oae_explicit_commit_share",
            "throughput_ratio",
            "latency_ratio",
            "auth_cas_rtt_p50_us",
            "auth_cas_verbs_per_s",
            "auth_throughput_ratio",
            "auth_latency_ratio",
        ] {
            let needle = format!("\"{key}\":");
            let Some(found) = line[at..].find(&needle) else {
                panic!("{key} missing or out of order: {line}");
            };
            at += found + needle.len();
        }
        assert!(
            line.starts_with(
                r#"{"reps":5,"secs":2.0,"lanes":64,"rtt_lanes":1,"slots":64,"cores":[0,1],"#
            ),
            "{line}"
        );
        assert!(
            line.contains(r#""oae_failed":7,"#)
                && line.ends_with(
                    r#""auth_latency_ratio":{"median":2.0,"min":1.0,"max":3.0,"mean":2.0,"stddev":1.0,"count":3}}"#
                ),
            "{line}"
        );
    }
}
