//! The Wave-like experiment: scheduling offload and key-value requests
//! between a host thread and an IPU-side thread over an emulated PCIe
//! region, FITO (with each of Wave's mitigations alone and all together)
//! against the bilateral swap, at emulated read costs 0 and 750 ns.
//!
//! usage: oae-wavebench [--quick] [--json] [--runs N] [--duration-ms MS]
//!                      [--workload sched|kv|both] [--reads NS,NS]
//!                      [--cost SPEC] [--wakeup interrupt|poll] [--no-pin]
//!
//! Each cell is the median of N runs (default 5) of each metric on its own.
//! Columns: committed decisions (sched) or answered requests (kv) per
//! second; latency from a task becoming runnable to its commit (sched) or
//! from request to answer (kv); aborted decisions per second and as a share
//! of all decisions; wasted_us/s, the in-flight time of decisions that were
//! then aborted, per second of run; withdrawn offers per second (bilateral);
//! busy, the fraction of simulated cpu time running tasks.
//! Every run is bounded by its duration; the whole experiment by their sum.
//! With two CPUs or more the host thread runs on cpu 0 and the agent on
//! cpu 1, each spinning as a polling core would.

#[cfg(loom)]
fn main() {}

#[cfg(not(loom))]
fn main() {
    use oae_swapring::cost::CostModel;
    use oae_swapring::fito::Wakeup;
    use oae_swapring::wave::{self, RunConfig, RunResult, Variant, Workload};
    use std::process::exit;
    use std::time::Duration;

    let mut args = std::env::args().skip(1);
    let (mut quick, mut json, mut runs, mut duration_ms) = (false, false, 5usize, None);
    let mut workloads = vec![Workload::Sched, Workload::KeyValue];
    let mut reads = vec![0u64, 750];
    let mut cost = CostModel::default();
    let mut wakeup = Wakeup::Interrupt;
    let mut pin = std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2);
    let fail = |msg: String| -> ! {
        eprintln!("oae-wavebench: {msg}");
        exit(2)
    };
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .unwrap_or_else(|| fail(format!("{name} needs a value")))
        };
        match arg.as_str() {
            "--quick" => quick = true,
            "--json" => json = true,
            "--no-pin" => pin = false,
            "--runs" => {
                runs = value("--runs")
                    .parse()
                    .unwrap_or_else(|_| fail("--runs takes a count".into()))
            }
            "--duration-ms" => {
                duration_ms = Some(
                    value("--duration-ms")
                        .parse()
                        .unwrap_or_else(|_| fail("--duration-ms takes ms".into())),
                )
            }
            "--workload" => {
                workloads = match value("--workload").as_str() {
                    "sched" => vec![Workload::Sched],
                    "kv" => vec![Workload::KeyValue],
                    "both" => vec![Workload::Sched, Workload::KeyValue],
                    other => fail(format!(
                        "unknown workload {other:?}; expected sched, kv or both"
                    )),
                }
            }
            "--reads" => {
                reads = value("--reads")
                    .split(',')
                    .map(|s| {
                        s.trim()
                            .parse()
                            .unwrap_or_else(|_| fail(format!("read cost {s:?} is not ns")))
                    })
                    .collect()
            }
            "--cost" => {
                cost = CostModel::parse(&value("--cost")).unwrap_or_else(|e| fail(e.to_string()))
            }
            "--wakeup" => {
                wakeup = match value("--wakeup").as_str() {
                    "interrupt" => Wakeup::Interrupt,
                    "poll" => Wakeup::Poll,
                    other => fail(format!(
                        "unknown wakeup {other:?}; expected interrupt or poll"
                    )),
                }
            }
            "-h" | "--help" => {
                println!(
                    "{}",
                    include_str!("wavebench.rs").lines().nth(5).unwrap_or("")
                );
                return;
            }
            other => fail(format!("unknown argument {other:?}")),
        }
    }
    let runs = runs.max(1);
    let duration = Duration::from_millis(duration_ms.unwrap_or(if quick { 100 } else { 500 }));

    let median = |mut v: Vec<f64>| -> f64 {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let mut rows = Vec::new();
    if !json {
        println!(
            "{:<5} {:>5} {:<15} {:>11} {:>9} {:>9} {:>8} {:>9} {:>11} {:>7} {:>6}",
            "load",
            "read",
            "variant",
            "per_s",
            "p50_us",
            "p99_us",
            "aborted",
            "abort_%",
            "wasted_us/s",
            "withdr",
            "busy"
        );
    }
    for &workload in &workloads {
        for &read in &reads {
            for (name, variant) in Variant::all() {
                let results: Vec<RunResult> = (0..runs)
                    .map(|i| {
                        wave::run(&RunConfig {
                            workload,
                            variant,
                            cost: CostModel {
                                nonposted_read_ns: read,
                                ..cost
                            },
                            wakeup,
                            duration,
                            cpus: 4,
                            tasks: 32,
                            window: 16,
                            seed: 0x5eed + i as u64,
                            pin,
                            epoch: std::time::Instant::now(),
                        })
                    })
                    .collect();
                let m = |f: &dyn Fn(&RunResult) -> f64| median(results.iter().map(f).collect());
                let per_second = m(&|r| r.per_second);
                let p50 = m(&|r| r.latency_p50_ns as f64);
                let p99 = m(&|r| r.latency_p99_ns as f64);
                let aborted = m(&|r| r.aborted_total as f64 / r.seconds);
                let abort_pct = m(&|r| {
                    100.0 * r.aborted_total as f64 / (r.aborted_total + r.completed).max(1) as f64
                });
                let wasted_us_per_s = m(&|r| r.wasted_ns as f64 / 1e3 / r.seconds);
                let withdrawn = m(&|r| r.withdrawn as f64 / r.seconds);
                let busy = m(&|r| r.cpu_busy);
                let by_reason: Vec<_> = results[0]
                    .aborted
                    .iter()
                    .map(|(reason, _)| {
                        let v = m(&|r| {
                            r.aborted
                                .iter()
                                .find(|(n, _)| n == reason)
                                .map_or(0, |(_, c)| *c) as f64
                                / r.seconds
                        });
                        (reason.to_string(), serde_json::json!(v))
                    })
                    .collect();
                let load = match workload {
                    Workload::Sched => "sched",
                    Workload::KeyValue => "kv",
                };
                if json {
                    rows.push(serde_json::json!({
                        "workload": load,
                        "read_ns": read,
                        "variant": name,
                        "runs": runs,
                        "duration_ms": duration.as_millis() as u64,
                        "per_second": per_second,
                        "latency_p50_ns": p50,
                        "latency_p99_ns": p99,
                        "aborted_per_second": aborted,
                        "aborted_by_reason_per_second": serde_json::Map::from_iter(by_reason),
                        "abort_percent": abort_pct,
                        "wasted_us_per_second": wasted_us_per_s,
                        "withdrawn_per_second": withdrawn,
                        "cpu_busy": busy,
                        "lost_swaps": m(&|r| r.lost_swaps as f64),
                    }));
                } else {
                    println!(
                        "{load:<5} {read:>5} {name:<15} {per_second:>11.0} {:>9.2} {:>9.2} {aborted:>8.0} {abort_pct:>9.2} {wasted_us_per_s:>11.0} {withdrawn:>7.0} {busy:>6.2}",
                        p50 / 1e3,
                        p99 / 1e3
                    );
                }
            }
        }
    }
    if json {
        let doc = serde_json::json!({
            "experiment": "wave-like offload over emulated PCIe (busy-wait cost model)",
            "cost": cost.to_string(),
            "wakeup": format!("{wakeup:?}"),
            "pinned": pin,
            "statistic": format!("median of {runs} runs, each metric separately"),
            "results": rows,
        });
        println!("{}", serde_json::to_string_pretty(&doc).expect("json"));
    }
}
