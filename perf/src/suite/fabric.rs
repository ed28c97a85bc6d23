//! `oaectl demo --topology` as a subject: a fabric with a link cut.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use oae_client::control::Percentiles;
use oae_client::demo::FabricDemoReport;

use super::child::{run_bounded, tail};
use super::outcome::{Outcome, percentiles};
use super::{GRACE, Options};

/// A fabric of dataplanes (`oaectl demo --topology`), one namespace each.
#[derive(Clone, Debug)]
pub struct FabricTrial {
    pub topology: &'static str,
    pub kind: FabricKind,
}

#[derive(Clone, Copy, Debug)]
pub enum FabricKind {
    /// Each pair alone first, then the cut alone (cut and healed), then a
    /// workload between every pair and a link cut for good a third of the
    /// way in.
    Cut,
    /// Every node that reaches `target` only through relays writes to it,
    /// `lanes` verbs in flight each.
    Incast { target: usize, lanes: u32 },
}

/// Lanes of each workload of a fabric trial with a cut (one per ordered
/// pair).
const FABRIC_LANES: u32 = 4;
/// Seconds each pair is measured alone before the workloads of all pairs.
const PAIR_ALONE_SECONDS: f64 = 1.0;
/// The links' minimum round in a trial with a cut: a silent link is
/// suspected within about this much, so the failover can be sub-millisecond.
const FAILOVER_MIN_ROUND_US: u64 = 200;
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
        .arg("--report")
        .arg(&report);
    match f.kind {
        FabricKind::Cut => cmd
            .args(["--lanes", &FABRIC_LANES.to_string()])
            .args(["--pair-latency", &PAIR_ALONE_SECONDS.to_string()])
            .args(["--min-round-us", &FAILOVER_MIN_ROUND_US.to_string()]),
        FabricKind::Incast { target, lanes } => cmd
            .args(["--incast", &target.to_string()])
            .args(["--lanes", &lanes.to_string()]),
    };
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
    match f.kind {
        FabricKind::Cut => fabric_outcome(&r),
        FabricKind::Incast { .. } => incast_outcome(&r),
    }
}

/// Figures of an incast: the fabric's rate, the senders' shares and p99s,
/// and what full queues cost.
pub fn incast_outcome(r: &FabricDemoReport) -> Result<Outcome, String> {
    let incast = r
        .incast
        .as_ref()
        .ok_or("an incast trial without an incast report")?;
    let mut o = Outcome::default();
    let total: u64 = r.pairs.iter().map(|p| p.workload.completed).sum();
    o.set("verbs_per_s", total as f64 / r.seconds.max(1e-9));
    o.set("senders", r.pairs.len() as f64);
    o.set("share_spread_pct", incast.spread * 100.0);
    let p99s = r.pairs.iter().map(|p| p.workload.latency.p99 as f64 / 1e3);
    o.set("p99_min_us", p99s.clone().fold(f64::INFINITY, f64::min));
    o.set("p99_max_us", p99s.fold(0.0, f64::max));
    o.set("overrun_drops", incast.overrun_drops as f64);
    o.set("relay_queue_peak", incast.relay_queue_peak as f64);
    let pass = r.exact && r.views_agree && incast.overrun_drops == 0;
    o.set("exactly_once_pass", if pass { 1.0 } else { 0.0 });
    o.tail_us = o.metrics["p99_max_us"];
    o.headline = format!(
        "incast of {} to node {}: shares {:.0} % apart, p99 up to {:.0} us, {} frames lost to \
         overrun{}",
        r.pairs.len(),
        incast.target,
        o.metrics["share_spread_pct"],
        o.tail_us,
        incast.overrun_drops,
        if pass {
            ", exactly-once PASS"
        } else {
            ", exactly-once FAIL"
        }
    );
    Ok(o)
}

/// The median of the pairs' p50 alone with `hops` hops, us.
fn alone_p50(r: &FabricDemoReport, hops: u8) -> f64 {
    let mut p50s: Vec<f64> = r
        .pair_latency
        .iter()
        .filter(|p| p.hops == hops)
        .map(|p| p.p50_us)
        .collect();
    p50s.sort_by(f64::total_cmp);
    p50s.get(p50s.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The figures of the pairs and the cut measured alone.
fn alone_figures(o: &mut Outcome, r: &FabricDemoReport) {
    let (one, two) = (alone_p50(r, 1), alone_p50(r, 2));
    o.set("alone_1hop_p50_us", one);
    o.set("alone_2hop_p50_us", two);
    o.set("alone_2hop_vs_1hop", two / one);
    let gap = r
        .pair_latency
        .iter()
        .map(|p| p.longest_gap_us)
        .fold(f64::NAN, f64::max);
    o.set("alone_longest_gap_ms", gap / 1e3);
    let mut stalls: Vec<f64> = r.cuts_alone.iter().map(|c| c.stall_us / 1e3).collect();
    stalls.sort_by(f64::total_cmp);
    o.set(
        "cut_alone_stall_median_ms",
        stalls.get(stalls.len() / 2).copied().unwrap_or(f64::NAN),
    );
    o.set(
        "cut_alone_stall_max_ms",
        stalls.last().copied().unwrap_or(f64::NAN),
    );
    let mut failovers: Vec<f64> = r
        .cuts_alone
        .iter()
        .filter_map(|c| c.failover_us)
        .map(|us| us / 1e3)
        .collect();
    failovers.sort_by(f64::total_cmp);
    o.set("cut_alone_failovers_measured", failovers.len() as f64);
    o.set(
        "cut_alone_failover_median_ms",
        failovers
            .get(failovers.len() / 2)
            .copied()
            .unwrap_or(f64::NAN),
    );
    o.set(
        "cut_alone_failover_max_ms",
        failovers.last().copied().unwrap_or(f64::NAN),
    );
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
    alone_figures(&mut o, r);
    o.set("reroute_ms", r.reroute_ms.unwrap_or(f64::NAN));
    o.set("reroute_path_rtts", r.reroute_path_rtts.unwrap_or(f64::NAN));
    o.set("path_srtt_us", r.path_srtt_us.unwrap_or(f64::NAN));
    let pass = r.exact
        && r.views_agree
        && r.pair_latency.iter().all(|p| p.ledger_exact)
        && r.cuts_alone.iter().all(|c| c.ledger_exact);
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
