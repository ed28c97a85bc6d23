//! `oaectl demo --topology` as a subject: a fabric with a link cut.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use oae_client::control::Percentiles;
use oae_client::demo::FabricDemoReport;

use super::child::{run_bounded, tail};
use super::outcome::{Outcome, percentiles};
use super::{GRACE, Options};

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

pub(super) fn fabric(f: &FabricTrial, opts: &Options, log: &Path) -> Result<Outcome, String> {
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
    let mut latency = Percentiles::default();
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
            latency = cut.latency;
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
        "cut {a}-{b}: {:.0} -> {:.0} verbs/s across it, stalled at most {:.1} ms, p99.9 after {:.0} us{}",
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
