//! `oaectl demo` as a subject: line rate, latency, scale and failure trials.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use oae_client::demo::DemoReport;
use oae_client::stats::{Stage, StageAccount};

use super::child::{run_bounded, tail};
use super::choice::*;
use super::outcome::{Outcome, percentiles};
use super::{GRACE, Options};

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

pub(super) fn demo(d: &DemoTrial, opts: &Options, log: &Path) -> Result<Outcome, String> {
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
    let v: DemoReport =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", report.display()))?;
    Ok(demo_outcome(&v, d.transport == "rc-model"))
}

/// Figures from `oaectl demo --report`.
pub fn demo_outcome(v: &DemoReport, rc: bool) -> Outcome {
    let w = &v.workload;
    let mut o = Outcome::default();
    let completed = w.completed as f64;
    let verbs_per_s = completed / w.elapsed_s.max(1e-9);
    o.set("verbs_per_s", verbs_per_s);
    // CPU time over the wall time it was measured across (the workload and
    // the control requests around it).
    let cpu_wall = v.cpu_wall_s.max(1e-9);
    if let [a, b] = v.cpu[..] {
        // Per CPU-second: the verbs completed over the CPU both sides used
        // across the whole window CPU was measured over (the workload and
        // the requests around it), so a policy that idles cheaply around
        // the workload gains nothing it did not earn while it ran.
        o.set_cpu(
            [a.total_s() / cpu_wall, b.total_s() / cpu_wall],
            Some(completed / cpu_wall),
        );
    }
    percentiles(&mut o, "", &w.latency);
    let during = w.phases.iter().position(|p| p.name == "during");
    let cdf_source = match during {
        Some(i) => {
            let p = &w.phases[i];
            percentiles(&mut o, "during_", &p.latency);
            let end = w.phases.get(i + 1).map_or(w.elapsed_s, |n| n.started_s);
            o.set(
                "during_verbs_per_s",
                p.completed as f64 / (end - p.started_s).max(1e-9),
            );
            o.set("during_failed", p.failed as f64);
            &p.cdf
        }
        None => &w.cdf,
    };
    o.cdf = cdf_source
        .iter()
        .map(|&(q, ns)| (q, ns as f64 / 1e3))
        .collect();
    o.tail_us = o
        .metrics
        .get("during_p999_us")
        .copied()
        .unwrap_or_else(|| o.metrics.get("p999_us").copied().unwrap_or(0.0));
    o.set("failed", w.failed as f64);
    o.set("mismatches", w.mismatches as f64);
    let exactly_once = v.exactly_once && w.mismatches == 0;
    o.set("exactly_once_pass", if exactly_once { 1.0 } else { 0.0 });
    let queues = || v.stats.iter().flat_map(|s| &s.queues);
    let links = |key: &str| -> f64 {
        queues()
            .flat_map(|q| &q.links)
            .map(|l| l.get(key) as f64)
            .sum()
    };
    let xdp = |key: &str| -> f64 {
        v.stats
            .iter()
            .flat_map(|s| &s.xdp)
            .map(|x| x.counters.get(key).copied().unwrap_or(0) as f64)
            .sum()
    };
    if rc {
        o.set("retransmissions", links("retransmissions"));
        o.set("ack_timeouts", links("timeouts"));
    } else {
        o.set("reversals", links("reversals"));
    }
    o.set("frames_dropped_by_fault", xdp("dropped_by_fault"));
    o.set("frames_corrupted_by_fault", xdp("corrupted_by_fault"));
    o.set("frames_per_verb", links("tx_frames") / completed.max(1.0));
    // Frames per transmit system call, per side (drivers that count kicks).
    for (side, stats) in ["a", "b"].iter().zip(&v.stats) {
        let frames: u64 = stats.queues.iter().map(|q| q.pipeline.tx_frames).sum();
        let kicks: u64 = stats
            .queues
            .iter()
            .map(|q| q.driver.get("tx_kicks").copied().unwrap_or(0))
            .sum();
        if kicks > 0 {
            o.set(
                &format!("frames_per_kick_{side}"),
                frames as f64 / kicks as f64,
            );
        }
    }
    stage_account(&mut o, v, completed);
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

/// Each side's stage account as nanoseconds of its core per verb the
/// workload completed (`stage_a_link_ns`, …): a stage's time over the
/// frames received in the busy iterations timed, times the frames that
/// side received per verb. And what one idle iteration costs
/// (`stage_a_idle_iteration_ns`).
fn stage_account(o: &mut Outcome, v: &DemoReport, completed: f64) {
    if completed <= 0.0 {
        return;
    }
    for (side, stats) in ["a", "b"].iter().zip(&v.stats) {
        let mut sum = StageAccount::default();
        let mut received = 0;
        for q in &stats.queues {
            let a = &q.stages;
            for (s, ns) in sum.busy_ns.iter_mut().zip(a.busy_ns) {
                *s += ns;
            }
            sum.frames += a.frames;
            sum.idle_iterations += a.idle_iterations;
            sum.idle_ns += a.idle_ns;
            received += q.pipeline.rx_frames;
        }
        if sum.frames == 0 {
            continue;
        }
        let scale = received as f64 / sum.frames as f64 / completed;
        for stage in Stage::ALL {
            o.set(
                &format!("stage_{side}_{}_ns", stage.name()),
                sum.ns(stage) as f64 * scale,
            );
        }
        let busy: u64 = sum.busy_ns.iter().sum();
        o.set(&format!("stage_{side}_total_ns"), busy as f64 * scale);
        if sum.idle_iterations > 0 {
            o.set(
                &format!("stage_{side}_idle_iteration_ns"),
                sum.idle_ns as f64 / sum.idle_iterations as f64,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use oae_client::control::{Percentiles, PhaseReport, WorkloadReport};
    use oae_client::stats::{DataplaneStats, LinkCounters, QueueStats, XdpStats};
    use oae_os::cpu::CpuTime;

    fn latency(p50: u64, p999: u64) -> Percentiles {
        Percentiles {
            p50,
            p999,
            ..Percentiles::default()
        }
    }

    fn links(reversals: u64, tx_frames: u64) -> Vec<LinkCounters> {
        vec![LinkCounters {
            counters: [("reversals", reversals), ("tx_frames", tx_frames)]
                .map(|(k, n)| (k.to_string(), n))
                .into(),
            ..LinkCounters::default()
        }]
    }

    fn phase(
        name: &str,
        started_s: f64,
        completed: u64,
        failed: u64,
        l: Percentiles,
    ) -> PhaseReport {
        PhaseReport {
            name: name.into(),
            started_s,
            completed,
            failed,
            latency: l,
            cdf: Vec::new(),
        }
    }

    #[test]
    fn demo_reports_become_figures() {
        let mut a = QueueStats {
            links: links(7, 1100),
            driver: [("tx_kicks".to_string(), 100)].into(),
            ..QueueStats::default()
        };
        a.pipeline.tx_frames = 1100;
        // Side a's account: 4 busy iterations timed, 10 of the 640 frames
        // it received in them, 1000 ns of link work and 600 of
        // completions; 2 idle ones of 50 ns each.
        a.pipeline.rx_frames = 640;
        a.stages.frames = 10;
        a.stages.busy_iterations = 4;
        a.stages.busy_ns[Stage::Link as usize] = 1000;
        a.stages.busy_ns[Stage::Completion as usize] = 600;
        a.stages.idle_iterations = 2;
        a.stages.idle_ns = 100;
        let b = QueueStats {
            links: links(2, 1000),
            ..QueueStats::default()
        };
        let mut during = phase("during", 0.5, 300, 3, latency(6000, 40000));
        during.cdf = vec![(0.5, 6000), (1.0, 40000)];
        let v = DemoReport {
            impairment: String::new(),
            settings: Default::default(),
            queues: 1,
            cpu: vec![
                CpuTime {
                    user_s: 1.5,
                    system_s: 0.5,
                },
                CpuTime {
                    user_s: 0.5,
                    system_s: 0.5,
                },
            ],
            cpu_wall_s: 2.0,
            workload: WorkloadReport {
                completed: 1000,
                elapsed_s: 2.0,
                failed: 3,
                latency: Percentiles {
                    p90: 6000,
                    p99: 9000,
                    max: 90000,
                    ..latency(5000, 20000)
                },
                cdf: vec![(0.5, 5000)],
                phases: vec![
                    phase("before", 0.0, 400, 0, latency(5000, 8000)),
                    during,
                    phase("after", 1.5, 300, 0, latency(5000, 9000)),
                ],
                ..WorkloadReport::default()
            },
            workloads: Vec::new(),
            stats: vec![
                DataplaneStats {
                    queues: vec![a],
                    xdp: vec![XdpStats {
                        counters: [("dropped_by_fault".to_string(), 9)].into(),
                        ..XdpStats::default()
                    }],
                    ..DataplaneStats::default()
                },
                DataplaneStats {
                    queues: vec![b],
                    ..DataplaneStats::default()
                },
            ],
            exactly_once: true,
            differences: Vec::new(),
        };
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
        // The timed frames stand for 64 times as many; 1000 verbs.
        assert_eq!(o.metrics["stage_a_link_ns"], 64.0);
        assert_eq!(o.metrics["stage_a_completion_ns"], 38.4);
        assert_eq!(o.metrics["stage_a_total_ns"], 102.4);
        assert_eq!(o.metrics["stage_a_idle_iteration_ns"], 50.0);
        assert!(
            !o.metrics.contains_key("stage_b_total_ns"),
            "side b timed no frame"
        );
        assert_eq!(o.cdf, vec![(0.5, 6.0), (1.0, 40.0)]);
        assert_eq!(o.tail_us, 40.0);
        let failed = DemoReport {
            exactly_once: false,
            ..v
        };
        assert_eq!(
            demo_outcome(&failed, false).metrics["exactly_once_pass"],
            0.0
        );
    }
}
