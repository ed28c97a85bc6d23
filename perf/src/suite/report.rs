//! The suite's targets and its Markdown report.

use std::fmt::Write as _;

use super::choice::{DriverChoice, PollChoice};
use super::figures::{find, fmt_fig, ratio};
use super::plan::{CONDITIONS, LINE_RATE_POLLING, driver_slots};
use super::redis::REDIS_PORT;
use super::{Experiment, Measurement, Options, Results, Target};

/// RoCE's local ACK timeout at the deployed exponent: 4.096 us x 2^14.
const RC_ACK_TIMEOUT_US: f64 = 4.096 * 16_384.0;

/// Linux's minimum TCP retransmission timeout (`TCP_RTO_MIN`, 200 ms).
const TCP_RTO_MIN_US: f64 = 200_000.0;

/// The TCP baseline's target: OAE's p99.9 at most this share of Redis's.
const TCP_TAIL_SHARE: f64 = 1.0 / 50.0;

/// A subject's `metric` (median) in a failure condition, while the fault
/// was on.
fn failure_tail(ms: &[Measurement], subject: &str, cond: &str, metric: &str) -> Option<f64> {
    let key = while_faulted(subject, cond, metric);
    find(ms, Experiment::Failure, subject, &[("condition", cond)]).and_then(|m| m.median(&key))
}

/// The key of a failure trial's `metric` while its fault was on: the
/// "during" phase, or the whole run where nothing is faulted and for Redis,
/// whose run is under the fault from start to end.
fn while_faulted(subject: &str, cond: &str, metric: &str) -> String {
    if cond.starts_with("none") || subject == "redis" {
        metric.to_string()
    } else {
        format!("during_{metric}")
    }
}

fn met_word(met: bool) -> &'static str {
    if met { "met" } else { "not met" }
}

/// The targets of loss found by order: OAE's tail under loss against its
/// own loss-free tail, against the RC model in every condition, its worst
/// case at one lane against RC's ACK timeout, and spurious reversals.
fn failure_tail_targets(ms: &[Measurement], lanes: u32, secs: f64, out: &mut Vec<Target>) {
    for (loss, clean, lanes) in [
        ("loss 1%", "none", lanes),
        ("loss 1%, 1 lane", "none, 1 lane", 1),
    ] {
        let lossy = failure_tail(ms, "oae", loss, "p999_us");
        let free = failure_tail(ms, "oae", clean, "p999_us");
        let r = ratio(lossy, free);
        out.push(Target {
            name: format!("OAE tail under 1 % loss, {lanes} lane(s)"),
            ratio_of: format!(
                "OAE p99.9 while 1 % loss is on / OAE loss-free p99.9, {lanes} lane(s)"
            ),
            ratio: r,
            wanted: "<= 1.5".into(),
            met: r.map(|r| r <= 1.5),
            why: match (r, lossy, free) {
                (Some(r), Some(l), Some(f)) => format!(
                    "{}: {l:.1} us against {f:.1} us. A lost frame is found by order, about one \
                     round trip after it (the answer to a later frame, or a probe on an idle \
                     link), so a lost verb costs about three round trips: detection, reversal, \
                     retry",
                    met_word(r <= 1.5)
                ),
                _ => "not measured (see the failed trials)".into(),
            },
        });
    }
    let mut worst: Option<(f64, &str, f64, f64)> = None;
    let mut missing = Vec::new();
    for (cond, _, _, _, _) in CONDITIONS {
        let oae = failure_tail(ms, "oae", cond, "p999_us");
        let rc = failure_tail(ms, "rc-model", cond, "p999_us");
        match (oae, rc, ratio(oae, rc)) {
            (Some(o), Some(c), Some(r)) => {
                if worst.is_none_or(|w| r > w.0) {
                    worst = Some((r, cond, o, c));
                }
            }
            _ => missing.push(cond),
        }
    }
    let r = worst.filter(|_| missing.is_empty()).map(|w| w.0);
    out.push(Target {
        name: "OAE tail vs the RoCE RC model, every condition".into(),
        ratio_of: "largest, over the failure conditions, of OAE p99.9 / RC model p99.9 (while \
                   the fault is on)"
            .into(),
        ratio: r,
        wanted: "<= 1".into(),
        met: r.map(|r| r <= 1.0),
        why: match (worst, missing.is_empty()) {
            (Some((r, cond, o, c)), true) => format!(
                "{}: the worst condition is \"{cond}\", OAE {o:.1} us against RC {c:.1} us",
                met_word(r <= 1.0)
            ),
            _ => format!("not measured in: {}", missing.join(", ")),
        },
    });
    let oae_max = failure_tail(ms, "oae", "loss 1%, 1 lane", "max_us");
    let rc_max = failure_tail(ms, "rc-model", "loss 1%, 1 lane", "max_us");
    let r = ratio(oae_max, rc_max);
    let clean_max = failure_tail(ms, "oae", "none, 1 lane", "max_us");
    out.push(Target {
        name: "OAE worst case at one lane vs the RC model's".into(),
        ratio_of: "OAE max latency / RC model max latency, 1 % loss, one verb in flight".into(),
        ratio: r,
        wanted: "<= 0.01 (1/100)".into(),
        met: r.map(|r| r <= 0.01),
        why: match (r, oae_max, rc_max) {
            (Some(r), Some(o), Some(c)) => format!(
                "{}: {o:.0} us against {:.1} ms; RC's responder cannot NAK a gap no later \
                 request reveals, so its ACK timer fires; OAE's idle-link probe reveals it. \
                 OAE's max without any loss is {} us: the worst case is a scheduling stall of \
                 a polling core, not a loss",
                met_word(r <= 0.01),
                c / 1e3,
                clean_max.map_or("not measured".into(), |m| format!("{m:.0}"))
            ),
            _ => "not measured (see the failed trials)".into(),
        },
    });
    let clean = find(ms, Experiment::Failure, "oae", &[("condition", "none")]);
    let reversals = clean.and_then(|m| m.median("reversals"));
    let verbs = clean
        .and_then(|m| m.median("verbs_per_s"))
        .map(|v| v * secs);
    let r = ratio(reversals, verbs);
    out.push(Target {
        name: "Spurious reversals without loss".into(),
        ratio_of: "OAE reversals in the loss-free condition / verbs (verbs/s x trial seconds)"
            .into(),
        ratio: r,
        wanted: "<= 0.0001 (0.01 %)".into(),
        met: r.map(|r| r <= 1e-4),
        why: match (r, reversals, verbs) {
            (Some(r), Some(n), Some(v)) => format!(
                "{}: {n:.0} reversals in about {v:.0} verbs; on an ordered link a late answer \
                 still arrives before the answer to anything sent after it, so only a real \
                 loss (here: none injected) reverses a transfer",
                met_word(r <= 1e-4)
            ),
            _ => "not measured (see the failed trials)".into(),
        },
    });
}

/// Every OAE CAS line-rate measurement over AF_XDP (the sweep and the
/// polling choices), with its verbs/s.
fn oae_cas_rates(ms: &[Measurement]) -> Vec<(&Measurement, f64)> {
    ms.iter()
        .filter(|m| {
            m.experiment == Experiment::LineRate
                && m.subject == "oae"
                && m.param("verb") == Some("cas")
                && m.param("driver") == Some("af-xdp")
        })
        .filter_map(|m| Some((m, m.median("verbs_per_s")?)))
        .collect()
}

/// The fastest of [`oae_cas_rates`].
fn best_rate<'a>(rates: &[(&'a Measurement, f64)]) -> Option<(&'a Measurement, f64)> {
    rates.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1))
}

/// OAE's best CAS rate against the raw AF_XDP reflector, and what each
/// polling choice did to the default's rate.
fn line_rate_targets(ms: &[Measurement], out: &mut Vec<Target>) {
    let oae = oae_cas_rates(ms);
    let best = best_rate(&oae);
    let raw =
        find(ms, Experiment::LineRate, "raw-af-xdp", &[]).and_then(|m| m.median("frames_per_s"));
    let r = ratio(best.map(|b| b.1), raw);
    let frames = |m: &Measurement| m.median("frames_per_verb").unwrap_or(f64::NAN);
    out.push(Target {
        name: "OAE CAS throughput vs the raw AF_XDP reflector".into(),
        ratio_of: format!(
            "OAE CAS verbs/s (best: {} slots, polling {}) / raw AF_XDP reflector frames/s",
            best.and_then(|b| b.0.param("slots")).unwrap_or("?"),
            best.and_then(|b| b.0.param("poll")).unwrap_or("?")
        ),
        ratio: r,
        wanted: ">= 0.8".into(),
        met: r.map(|r| r >= 0.8),
        why: match (r, best) {
            (Some(r), Some((m, rate))) => format!(
                "{}: {}",
                met_word(r >= 0.8),
                per_core_cost(Some(rate), raw, Some(frames(m)), "the reflector")
            ),
            _ => "not measured (see the failed trials)".into(),
        },
    });
    for poll in LINE_RATE_POLLING {
        let name = poll.name();
        let Some((m, rate)) = oae
            .iter()
            .find(|(m, _)| m.param("poll") == Some(name.as_str()))
        else {
            continue;
        };
        let Some((d, base)) = oae.iter().find(|(d, _)| {
            d.param("poll") == Some("default") && d.param("slots") == m.param("slots")
        }) else {
            continue;
        };
        let kicks = |m: &Measurement| m.median("frames_per_kick_b").unwrap_or(f64::NAN);
        // Each choice against the default, as the default's gain: what
        // adaptive kicks (the default) win over immediate ones, what busy
        // polling would add to them.
        let (ratio_of, r) = if poll.kicks == Some("immediate") {
            ("default (adaptive kicks) / immediate kicks", base / rate)
        } else {
            ("with busy polling / the default", rate / base)
        };
        out.push(Target {
            name: format!("Polling choice: {name}"),
            ratio_of: format!(
                "OAE CAS verbs/s, {ratio_of}, {} slots",
                m.param("slots").unwrap_or("?")
            ),
            ratio: Some(r),
            wanted: "> 1 (measured one by one)".into(),
            met: Some(r > 1.0),
            why: format!(
                "{rate:.0} ({name}) against {base:.0} verbs/s (default); the target sent {:.1} \
                 frames per transmit system call against {:.1}",
                kicks(m),
                kicks(d)
            ),
        });
    }
}

/// OAE's round trip against the raw AF_XDP ping-pong, and what sleeping
/// when idle costs and saves.
fn latency_targets(ms: &[Measurement], out: &mut Vec<Target>) {
    let p50 = |subject: &str, params: &[(&str, &str)]| {
        find(ms, Experiment::Latency, subject, params).and_then(|m| m.median("p50_us"))
    };
    let sleep = PollChoice::SLEEP.name();
    let sleep = sleep.as_str();
    let cas =
        |placement: &'static str, poll| [("verb", "cas"), ("placement", placement), ("poll", poll)];
    let spin_cross = p50("oae", &cas("cross-core", "default"));
    let raw_cross = p50("raw-af-xdp", &[("placement", "cross-core")]);
    let r = ratio(spin_cross, raw_cross);
    out.push(Target {
        name: "OAE CAS round trip vs raw AF_XDP ping-pong".into(),
        ratio_of: "OAE CAS p50 / raw AF_XDP ping-pong p50, cross-core, spinning".into(),
        ratio: r,
        wanted: "<= 1.15".into(),
        met: r.map(|r| r <= 1.15),
        why: match (r, spin_cross, raw_cross) {
            (Some(r), Some(o), Some(w)) => format!(
                "{}: {o:.1} us against {w:.1} us; the difference is both cores' protocol work \
                 and the pipeline's loop around it",
                met_word(r <= 1.15)
            ),
            _ => "not measured (see the failed trials)".into(),
        },
    });
    let sleep_same = find(ms, Experiment::Latency, "oae", &cas("same-core", sleep));
    let sockperf_same = p50("sockperf", &[("placement", "same-core")]);
    let r = ratio(sleep_same.and_then(|m| m.median("p50_us")), sockperf_same);
    let cores = |m: Option<&Measurement>| {
        m.and_then(|m| Some(m.median("cpu_a_cores")? + m.median("cpu_b_cores")?))
            .unwrap_or(f64::NAN)
    };
    out.push(Target {
        name: "OAE CAS on one core, sleeping when idle, vs sockperf UDP".into(),
        ratio_of: format!("OAE CAS p50 ({sleep}) / sockperf UDP p50, both same-core"),
        ratio: r,
        wanted: "<= 2".into(),
        met: r.map(|r| r <= 2.0),
        why: match (
            r,
            sleep_same.and_then(|m| m.median("p50_us")),
            sockperf_same,
        ) {
            (Some(r), Some(o), Some(s)) => format!(
                "{}: {o:.1} us against {s:.1} us; an idle core yields to its peer at once and \
                 sleeps on its socket after 50 us, so neither waits out the other's time slice \
                 (spinning: {} us); both sides together used {:.2} cores",
                met_word(r <= 2.0),
                p50("oae", &cas("same-core", "default"))
                    .map_or("–".into(), |v| format!("{v:.0}")),
                cores(sleep_same)
            ),
            _ => "not measured (see the failed trials)".into(),
        },
    });
    let sleep_cross = p50("oae", &cas("cross-core", sleep));
    let r = ratio(sleep_cross, spin_cross);
    out.push(Target {
        name: "Sleeping when idle costs little latency across cores".into(),
        ratio_of: format!("OAE CAS p50, {sleep} / spinning, cross-core"),
        ratio: r,
        wanted: "<= 1.1".into(),
        met: r.map(|r| r <= 1.1),
        why: match (r, sleep_cross, spin_cross) {
            (Some(r), Some(a), Some(b)) => format!(
                "{}: {a:.1} us against {b:.1} us: with a verb always in flight a core polls \
                 (yielding) rather than sleeps, and the yields are system calls",
                met_word(r <= 1.1)
            ),
            _ => "not measured (see the failed trials)".into(),
        },
    });
}

/// OAE over `net_memif` against two testpmd bouncing frames over
/// `net_memif` on the same cores: with no kernel on the path, what a verb
/// costs beyond a bounced frame is OAE's own.
fn memif_targets(ms: &[Measurement], out: &mut Vec<Target>) {
    let oae = |slots: &str| {
        find(
            ms,
            Experiment::LineRate,
            "oae",
            &[
                ("verb", "cas"),
                ("slots", slots),
                ("driver", DriverChoice::DpdkMemif.name()),
            ],
        )
    };
    let pair = |in_flight: &str| {
        find(
            ms,
            Experiment::LineRate,
            "testpmd-pair",
            &[("driver", "net_memif"), ("in_flight", in_flight)],
        )
    };
    let pairs = ms
        .iter()
        .filter(|m| m.subject == "testpmd-pair")
        .filter_map(|m| m.param("in_flight"));
    let mut in_flights: Vec<&str> = pairs.collect();
    in_flights.sort_by_key(|n| std::cmp::Reverse(n.parse::<u32>().unwrap_or(0)));
    in_flights.dedup();
    for n in in_flights {
        let wanted = if n == "1" { 0.7 } else { 0.8 };
        let verbs = oae(n).and_then(|m| m.median("verbs_per_s"));
        let trips = pair(n).and_then(|m| m.median("round_trips_per_s"));
        let r = ratio(verbs, trips);
        out.push(Target {
            name: format!("OAE CAS over net_memif vs the testpmd pair, {n} in flight"),
            ratio_of: format!(
                "OAE CAS verbs/s over DPDK net_memif, {n} in flight / round trips/s of two \
                 dpdk-testpmd (macswap) over net_memif, {n} in flight"
            ),
            ratio: r,
            wanted: format!(">= {wanted}"),
            met: r.map(|r| r >= wanted),
            why: match (r, verbs, trips) {
                (Some(r), Some(v), Some(t)) => format!(
                    "{}: {:.2} us of each core per verb against {:.2} us per bounced frame, \
                     with no kernel on either path",
                    met_word(r >= wanted),
                    1e6 / v,
                    1e6 / t
                ),
                _ => "not measured (see the failed trials)".into(),
            },
        });
    }
    let p50 = oae("1").and_then(|m| m.median("p50_us"));
    let trip = pair("1").and_then(|m| m.median("round_trip_us"));
    if p50.is_some() || trip.is_some() {
        let r = ratio(p50, trip);
        out.push(Target {
            name: "OAE CAS p50 over net_memif vs the testpmd pair's round trip".into(),
            ratio_of: "OAE CAS p50 over DPDK net_memif, 1 in flight / the round trip of one \
                       frame between two dpdk-testpmd over net_memif (mean)"
                .into(),
            ratio: r,
            wanted: "<= 1.3".into(),
            met: r.map(|r| r <= 1.3),
            why: match (r, p50, trip) {
                (Some(r), Some(a), Some(b)) => {
                    format!("{}: {a:.2} us against {b:.2} us", met_word(r <= 1.3))
                }
                _ => "not measured (see the failed trials)".into(),
            },
        });
    }
}

/// Why OAE's verbs/s trail a reflector's frames/s, from the figures: both
/// are round trips, each side sending one frame per round trip through
/// veth's copy path on its own core, so the difference is what a verb costs
/// a core beyond its frame.
fn per_core_cost(oae: Option<f64>, reference: Option<f64>, fpv: Option<f64>, name: &str) -> String {
    match (oae, reference) {
        (Some(o), Some(r)) if o > 0.0 && r > 0.0 => format!(
            "both are round trips of one frame each way ({:.2} frames per verb: the commit \
             rides on the next request), each side on a core of its own, so a core spends \
             {:.2} us per verb against {:.2} us per frame for {name}: the {:.2} us more is \
             that side's protocol work (about half the core micro-benchmark's round trip) \
             and the pipeline around it (completions, the workload, the latency histogram)",
            fpv.unwrap_or(f64::NAN),
            1e6 / o,
            1e6 / r,
            1e6 / o - 1e6 / r
        ),
        _ => "not measured (see the failed trials)".into(),
    }
}

/// The targets the suite reports against, from what was measured.
pub fn targets(ms: &[Measurement], options: &Options) -> Vec<Target> {
    let mut out = Vec::new();
    let has = |e: Experiment| ms.iter().any(|m| m.experiment == e);
    if has(Experiment::LineRate) {
        let best = best_rate(&oae_cas_rates(ms));
        let testpmd =
            find(ms, Experiment::LineRate, "testpmd", &[]).and_then(|m| m.median("frames_per_s"));
        let r = ratio(best.map(|b| b.1), testpmd);
        let fpv = best.and_then(|b| b.0.median("frames_per_verb"));
        out.push(Target {
            name: "OAE CAS throughput vs testpmd macswap".into(),
            ratio_of: format!(
                "OAE CAS verbs/s (AF_XDP, best of the sweep: {} slots, polling {}) / testpmd \
                 macswap frames/s",
                best.and_then(|b| b.0.param("slots")).unwrap_or("?"),
                best.and_then(|b| b.0.param("poll")).unwrap_or("?")
            ),
            ratio: r,
            wanted: ">= 1".into(),
            met: r.map(|r| r >= 1.0),
            why: match r {
                None => "not measured (see the failed trials)".into(),
                Some(r) if r >= 1.0 => format!(
                    "met: a CAS takes {:.2} frames on the wire (request, echo, commit riding on \
                     the next request) against testpmd's one reflected frame, and still keeps up",
                    fpv.unwrap_or(f64::NAN)
                ),
                Some(_) => format!(
                    "not met: {}",
                    per_core_cost(best.map(|b| b.1), testpmd, fpv, "testpmd")
                ),
            },
        });
    }
    if has(Experiment::LineRate) {
        line_rate_targets(ms, &mut out);
        memif_targets(ms, &mut out);
    }
    if has(Experiment::Latency) {
        latency_targets(ms, &mut out);
        let oae = find(
            ms,
            Experiment::Latency,
            "oae",
            &[
                ("verb", "cas"),
                ("placement", "cross-core"),
                ("poll", "default"),
            ],
        )
        .and_then(|m| m.median("p50_us"));
        let sockperf = find(
            ms,
            Experiment::Latency,
            "sockperf",
            &[("placement", "cross-core")],
        )
        .and_then(|m| m.median("p50_us"));
        let r = ratio(oae, sockperf);
        out.push(Target {
            name: "OAE CAS round trip vs sockperf UDP".into(),
            ratio_of: "OAE CAS p50 / sockperf UDP round-trip p50, cross-core".into(),
            ratio: r,
            wanted: "<= 0.5".into(),
            met: r.map(|r| r <= 0.5),
            why: match (r, oae, sockperf) {
                (Some(r), Some(o), Some(s)) => format!(
                    "{}: {o:.1} us against {s:.1} us; busy-polling cores never sleep, while each \
                     UDP round trip crosses the kernel stack and wakes a blocked thread on the \
                     other core twice",
                    if r <= 0.5 { "met" } else { "not met" }
                ),
                _ => "not measured (see the failed trials)".into(),
            },
        });
    }
    if has(Experiment::Failure) {
        failure_tail_targets(ms, options.failure_lanes, options.failure_secs, &mut out);
        let rc = find(
            ms,
            Experiment::Failure,
            "rc-model",
            &[("condition", "loss 1%, 1 lane")],
        );
        let rc_tail = rc.and_then(|m| m.median("during_p999_us"));
        let rc_max = rc.and_then(|m| m.median("during_max_us"));
        let r = ratio(rc_max, Some(RC_ACK_TIMEOUT_US));
        out.push(Target {
            name: "RoCE RC model tail under 1 % loss".into(),
            ratio_of: format!(
                "RC model max latency while 1 % loss is on, one verb in flight / local ACK \
                 timeout ({:.1} ms)",
                RC_ACK_TIMEOUT_US / 1e3
            ),
            ratio: r,
            wanted: ">= 1 (the tail is set by the ACK timeout)".into(),
            met: r.map(|r| r >= 1.0),
            why: match (rc_tail, rc_max) {
                (Some(t), Some(m)) => format!(
                    "p99.9 {:.1} ms, max {:.1} ms: with one verb in flight nothing follows a \
                     lost request or response, so no NAK reveals the gap and the ACK timer must \
                     fire; with many in flight (the 1 % row) the responder's NAK does it at once",
                    t / 1e3,
                    m / 1e3
                ),
                _ => "not measured (see the failed trials)".into(),
            },
        });
        let oae_tail = find(ms, Experiment::Failure, "oae", &[("condition", "loss 1%")])
            .and_then(|m| m.median("during_p999_us"));
        let redis = find(
            ms,
            Experiment::Failure,
            "redis",
            &[("condition", "loss 1%")],
        );
        let tcp_tail = redis.and_then(|m| m.median("p999_us"));
        let retransmitted = redis.and_then(|m| m.median("tcp_retransmissions"));
        let r = ratio(oae_tail, tcp_tail);
        out.push(Target {
            name: "OAE tail vs a TCP atomic counter under 1 % loss".into(),
            ratio_of: format!(
                "OAE p99.9 while 1 % loss is on / Redis INCR p99.9 over kernel TCP under the \
                 same 1 % loss (XDP scope port:{}), same lanes, one request in flight per \
                 connection, same cores",
                REDIS_PORT
            ),
            ratio: r,
            wanted: "<= 0.02 (1/50)".into(),
            met: r.map(|r| r <= TCP_TAIL_SHARE),
            why: match (r, oae_tail, tcp_tail) {
                (Some(r), Some(o), Some(t)) => format!(
                    "{}: OAE {o:.0} us against Redis {:.1} ms, {:.1}x Linux's minimum \
                     retransmission timeout of 200 ms{}. A connection with one request in \
                     flight has no later segment to raise duplicate ACKs when one is lost, so \
                     TCP waits for its retransmission timer or a tail-loss probe (which, with a \
                     single segment out, waits about as long); OAE finds a lost frame by order, \
                     about one round trip after it, reverses its verb and retries it at once",
                    if r <= TCP_TAIL_SHARE {
                        "met"
                    } else {
                        "not met"
                    },
                    t / 1e3,
                    t / TCP_RTO_MIN_US,
                    retransmitted.map_or_else(String::new, |n| format!(
                        " ({n:.0} TCP segments retransmitted during the measured run)"
                    )),
                ),
                _ => "not measured (see the failed trials)".into(),
            },
        });
        let (passes, runs) = ms
            .iter()
            .filter(|m| m.experiment == Experiment::Failure && m.subject == "oae")
            .filter_map(|m| m.metrics.get("exactly_once_pass"))
            .fold((0usize, 0usize), |(p, n), f| {
                (
                    p + f.values.iter().filter(|v| **v == 1.0).count(),
                    n + f.values.len(),
                )
            });
        out.push(Target {
            name: "OAE exactly once under every fault".into(),
            ratio_of: "failure trials whose memory matched the ledger on both sides / trials"
                .into(),
            ratio: (runs > 0).then(|| passes as f64 / runs as f64),
            wanted: "= 1 (0 violations)".into(),
            met: (runs > 0).then_some(passes == runs),
            why: format!("{passes} of {runs} trials passed the ledger check"),
        });
    }
    if has(Experiment::Ipu) {
        super::ipu::targets(ms, &mut out);
    }
    if has(Experiment::Libfabric) {
        super::fi_pingpong::targets(ms, &mut out);
    }
    out
}

/// The report: method, targets, one table per experiment, plots.
pub fn markdown(r: &Results, plots: &[&str]) -> String {
    let ms = &r.measurements;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# OAE benchmark suite, {}{}\n",
        r.started_utc,
        if r.options.quick {
            " (quick mode: the figures only show that it runs)"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "Machine: {} CPUs ({}), kernel {}, load average before the run {}.  \n\
         Pinning: {}.  \n\
         Every figure is the median over {} repetition(s), with [min–max] where there \
         are several; repetitions are the outer loop, so the subjects of a table ran \
         minutes apart at most. Line-rate and latency trials ran {} s each, failure \
         trials {} s with the faults in the middle third. The whole run took {:.0} s. \
         Raw figures and every repetition's values are in `results.json`; the last \
         section gives every figure's count, mean and standard deviation.\n",
        r.machine.nproc,
        r.machine.cpu_model,
        r.machine.kernel,
        r.machine.loadavg_before,
        r.machine.pinning,
        r.options.reps,
        r.options.secs,
        r.options.failure_secs,
        r.duration_s
    );
    if !r.targets.is_empty() {
        out.push_str(
            "## Targets\n\n| target | ratio | wanted | met | why |\n|---|---|---|---|---|\n",
        );
        for t in &r.targets {
            let _ = writeln!(
                out,
                "| {} ({}) | {} | {} | {} | {} |",
                t.name,
                t.ratio_of,
                t.ratio.map_or("–".into(), |x| format!("{x:.2}")),
                t.wanted,
                match t.met {
                    Some(true) => "yes",
                    Some(false) => "**no**",
                    None => "–",
                },
                t.why
            );
        }
        out.push('\n');
    }
    if r.experiments.contains(&Experiment::LineRate) {
        out.push_str(
            "## Line rate\n\nOAE verbs/s over its own AF_XDP driver, one verb lane per slot \
             (64-byte frames; k = thousands):\n\n| slots | WRITE verbs/s (k) | CAS verbs/s (k) | CAS frames/verb |\n|---|---|---|---|\n",
        );
        for &slots in &r.options.slots {
            let s = slots.to_string();
            let get = |verb: &str| {
                find(
                    ms,
                    Experiment::LineRate,
                    "oae",
                    &[
                        ("verb", verb),
                        ("slots", &s),
                        ("driver", "af-xdp"),
                        ("poll", "default"),
                    ],
                )
            };
            let _ = writeln!(
                out,
                "| {slots} | {} | {} | {} |",
                fmt_fig(
                    get("write").and_then(|m| m.metrics.get("verbs_per_s")),
                    1e3,
                    0
                ),
                fmt_fig(
                    get("cas").and_then(|m| m.metrics.get("verbs_per_s")),
                    1e3,
                    0
                ),
                fmt_fig(
                    get("cas").and_then(|m| m.metrics.get("frames_per_verb")),
                    1.0,
                    2
                ),
            );
        }
        let slots = driver_slots(&r.options).to_string();
        let _ = writeln!(
            out,
            "\nPer driver and polling choice ({slots} slots, CAS), and the references on the \
             same veth pair and cores. Cores: CPU time over wall time of side a (issuer, \
             generator) and side b (target, reflector) while measured; per CPU-second: the \
             rate over both sides' cores:\n\n\
             | subject | rate (k/s) | cores a / b | per CPU-second (k) |\n|---|---|---|---|"
        );
        let row = |out: &mut String, name: &str, m: Option<&Measurement>, rate: &str| {
            let f = |k: &str, digits| fmt_fig(m.and_then(|m| m.metrics.get(k)), 1.0, digits);
            let _ = writeln!(
                out,
                "| {name} | {} | {} / {} | {} |",
                fmt_fig(m.and_then(|m| m.metrics.get(rate)), 1e3, 0),
                f("cpu_a_cores", 2),
                f("cpu_b_cores", 2),
                fmt_fig(m.and_then(|m| m.metrics.get("per_cpu_s")), 1e3, 0),
            );
        };
        let default = PollChoice::default().name();
        let af_xdp_polls =
            std::iter::once(default.clone()).chain(LINE_RATE_POLLING.iter().map(PollChoice::name));
        for poll in af_xdp_polls {
            let m = find(
                ms,
                Experiment::LineRate,
                "oae",
                &[
                    ("verb", "cas"),
                    ("slots", &slots),
                    ("driver", "af-xdp"),
                    ("poll", &poll),
                ],
            );
            row(
                &mut out,
                &format!("OAE CAS over af-xdp, {poll} (verbs/s)"),
                m,
                "verbs_per_s",
            );
        }
        for d in ["dpdk net_af_xdp", "dpdk net_memif"] {
            let m = find(
                ms,
                Experiment::LineRate,
                "oae",
                &[("verb", "cas"), ("slots", &slots), ("driver", d)],
            );
            row(
                &mut out,
                &format!("OAE CAS over {d} (verbs/s)"),
                m,
                "verbs_per_s",
            );
        }
        for (subject, name) in [
            (
                "raw-af-xdp",
                "raw AF_XDP reflector (frames/s, best of open-loop and 256 in flight)",
            ),
            (
                "testpmd",
                "dpdk-testpmd macswap over net_af_xdp (frames/s, same generator)",
            ),
        ] {
            let m = find(ms, Experiment::LineRate, subject, &[]);
            row(&mut out, name, m, "frames_per_s");
        }
        let one_memif = find(
            ms,
            Experiment::LineRate,
            "oae",
            &[
                ("verb", "cas"),
                ("slots", "1"),
                ("driver", "dpdk net_memif"),
            ],
        );
        row(
            &mut out,
            "OAE CAS over dpdk net_memif, 1 in flight (verbs/s)",
            one_memif,
            "verbs_per_s",
        );
        for n in [slots.as_str(), "1"] {
            let m = find(
                ms,
                Experiment::LineRate,
                "testpmd-pair",
                &[("driver", "net_memif"), ("in_flight", n)],
            );
            row(
                &mut out,
                &format!("two dpdk-testpmd macswap over net_memif, {n} in flight (round trips/s)"),
                m,
                "round_trips_per_s",
            );
        }
        out.push('\n');
    }
    if r.experiments.contains(&Experiment::Latency) {
        out.push_str(
            "## Latency\n\nRound trips in microseconds, one in flight. OAE: a verb from the \
             polling iteration that sent it to the one that completed it. Raw: one 64-byte frame \
             through the AF_XDP reflector. sockperf: UDP ping-pong (`--full-rtt`) through the \
             kernel stack. Same-core runs share one CPU, so each side waits for the other's time \
             slice unless it yields or sleeps (`idle sleep`: poll 50 us yielding between polls, \
             then sleep on the socket). Cores: CPU time over wall time of side a and side b.\n\n\
             | subject | placement | p50 | p90 | p99 | p99.9 | max | cores a / b |\n\
             |---|---|---|---|---|---|---|---|\n",
        );
        let sleep = PollChoice::SLEEP.name();
        for placement in ["cross-core", "same-core"] {
            for (subject, verb, poll, name) in [
                ("oae", Some("cas"), Some("default"), "OAE CAS".to_string()),
                (
                    "oae",
                    Some("cas"),
                    Some(sleep.as_str()),
                    format!("OAE CAS, {sleep}"),
                ),
                ("oae", Some("read"), Some("default"), "OAE READ".to_string()),
                ("raw-af-xdp", None, None, "raw AF_XDP ping-pong".to_string()),
                ("sockperf", None, None, "sockperf UDP".to_string()),
            ] {
                let mut p = vec![("placement", placement)];
                p.extend(verb.map(|v| ("verb", v)));
                p.extend(poll.map(|v| ("poll", v)));
                let m = find(ms, Experiment::Latency, subject, &p);
                let f = |k: &str, d| fmt_fig(m.and_then(|m| m.metrics.get(k)), 1.0, d);
                let _ = writeln!(
                    out,
                    "| {name} | {placement} | {} | {} | {} | {} | {} | {} / {} |",
                    f("p50_us", 1),
                    f("p90_us", 1),
                    f("p99_us", 1),
                    f("p999_us", 1),
                    f("max_us", 1),
                    f("cpu_a_cores", 2),
                    f("cpu_b_cores", 2),
                );
            }
        }
        out.push('\n');
    }
    if r.experiments.contains(&Experiment::Failure) {
        let _ = writeln!(
            out,
            "## Failure injection\n\nThe mixed CAS/FAA/WRITE workload ({} lanes unless the condition says \
             otherwise) on each \
             transport; faults from the XDP program on both veth ends during the middle third. \
             Latency (us) is of the verbs completed while the faults were on; verbs/s is over \
             the whole run. The RC model resends (go-back-N) where OAE reverses.\n\n\
             The TCP baseline is a real atomic counter over the kernel's TCP: Debian's \
             `redis-server` in namespace b and `redis-benchmark` in namespace a running `INCR` \
             on one key, one request in flight per connection (`-P 1`) and as many connections \
             as the condition has lanes, pinned to the same cores as OAE's two sides. The same \
             XDP program on both veth ends applies the condition's loss, corruption and flaps, \
             with the same seed, to the TCP segments of port {} only (fault scope \
             `port:{}`); transmit checksum offload is off on both ends, so a corrupted segment \
             fails the receiver's checksum and is dropped as after a real wire. \
             `redis-benchmark` counts requests, not seconds, and cannot be switched between \
             phases, so **each Redis run is entirely under the fault**: short probes under the \
             same fault size it to about a third of the trial ({:.1} s, the length of OAE's \
             fault phase), with the flaps spread over it. Its latencies are per request as \
             `redis-benchmark` reports them (p99.9 from its percentile rows, an upper bound at \
             the next printed percentile), its rate is requests/s under the fault, and its \
             recovery column counts the TCP segments retransmitted in both namespaces during \
             the run (`nstat` TcpRetransSegs), with the segments the receivers dropped for a \
             bad IP or TCP checksum (IpExtInCsumErrors, IpInHdrErrors, TcpInCsumErrors). A \
             Redis run with fewer than 1000 requests (under heavy loss) has no p99.9 of its \
             own: the table then says how many requests its p99.9 is taken from. Exactly \
             once, for Redis: the counter read back equals the `INCR`s that completed.\n\n\
             | transport | condition | lanes | verbs or requests/s (k) | p50 | p99 | p99.9 | max | failed | recovery: reversals / retransmissions (ACK timeouts) / TCP retransmitted segments (checksum drops) | exactly once |\n\
             |---|---|---|---|---|---|---|---|---|---|---|",
            r.options.failure_lanes,
            REDIS_PORT,
            REDIS_PORT,
            r.options.failure_secs / 3.0,
        );
        for (cond, _, _, _, lanes) in CONDITIONS {
            let lanes = lanes.unwrap_or(r.options.failure_lanes);
            for transport in ["oae", "rc-model", "redis"] {
                let m = find(ms, Experiment::Failure, transport, &[("condition", cond)]);
                let during = |k: &str| {
                    let key = while_faulted(transport, cond, k);
                    fmt_fig(m.and_then(|m| m.metrics.get(&key)), 1.0, 1)
                };
                let g = |k: &str| fmt_fig(m.and_then(|m| m.metrics.get(k)), 1.0, 0);
                let (name, rate, failed, recovery) = match transport {
                    "oae" => ("OAE", "verbs_per_s", g("failed"), g("reversals")),
                    "rc-model" => (
                        "RC model",
                        "verbs_per_s",
                        g("failed"),
                        format!("{} ({})", g("retransmissions"), g("ack_timeouts")),
                    ),
                    _ => (
                        "Redis INCR, kernel TCP",
                        "requests_per_s",
                        "–".to_string(),
                        format!("{} ({})", g("tcp_retransmissions"), g("checksum_drops")),
                    ),
                };
                // Below 1000 requests a run has no 1-in-1000 tail of its
                // own: its p99.9 is one of its few largest latencies.
                let few = m
                    .and_then(|m| m.median("requests"))
                    .filter(|&n| transport == "redis" && n < 1000.0);
                let p999 = match few {
                    Some(n) => format!("{} (of {n:.0} requests)", during("p999_us")),
                    None => during("p999_us"),
                };
                let once =
                    m.and_then(|m| m.metrics.get("exactly_once_pass"))
                        .map_or("–".into(), |f| {
                            format!(
                                "{}/{}",
                                f.values.iter().filter(|v| **v == 1.0).count(),
                                f.values.len()
                            )
                        });
                let _ = writeln!(
                    out,
                    "| {name} | {cond} | {lanes} | {} | {} | {} | {} | {} | {failed} | {recovery} | {once} |",
                    fmt_fig(m.and_then(|m| m.metrics.get(rate)), 1e3, 1),
                    during("p50_us"),
                    during("p99_us"),
                    p999,
                    during("max_us"),
                );
            }
        }
        out.push('\n');
    }
    super::stages::section(&mut out, ms);
    if r.experiments.contains(&Experiment::Scale) {
        scale_section(&mut out, ms);
    }
    if r.experiments.contains(&Experiment::Fabric) {
        fabric_section(&mut out, ms);
    }
    if r.experiments.contains(&Experiment::Ipu) {
        super::ipu::section(&mut out, r);
    }
    if r.experiments.contains(&Experiment::Libfabric) {
        super::fi_pingpong::section(&mut out, ms);
    }
    if r.experiments.contains(&Experiment::Sizes) {
        super::sizes::section(&mut out, ms);
    }
    let failed: Vec<String> = ms
        .iter()
        .flat_map(|m| {
            m.failures.iter().map(move |f| {
                let params: Vec<String> =
                    m.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!(
                    "- {} {} {}: {}",
                    m.experiment.name(),
                    m.subject,
                    params.join(" "),
                    f.lines().next().unwrap_or_default()
                )
            })
        })
        .collect();
    if !failed.is_empty() {
        let _ = writeln!(
            out,
            "## Trials that failed\n\nThey are left out of the medians; their logs are in `logs/`.\n\n{}\n",
            failed.join("\n")
        );
    }
    super::figures::statistics(&mut out, ms);
    if !plots.is_empty() {
        out.push_str("## Plots\n\n");
        for p in plots {
            let _ = writeln!(out, "![{p}]({p})\n");
        }
    }
    out
}

/// Through a link cut: the fabric's other way round against a pair's one
/// link, OAE and the RC model.
fn fabric_section(out: &mut String, ms: &[Measurement]) {
    out.push_str(
        "## Through a link cut\n\nThe ring: four dataplanes in four namespaces, a veth pair \
         per link, the fabric on, a workload of 4 lanes from every node to every other; the \
         link 0-1 is cut for good a third of the way in, and the figures are those of the \
         workloads between 0 and 1 (both ways), which then go the other way round, three \
         hops: before the cut, and from the first verb across it on. The pairs: two dataplanes, one link, which goes down once in the middle third \
         for 1 s and comes back; OAE's verbs wait for it, the RC model's queue pair \
         fails when its retries run out (8 ACK timeouts of about 67 ms). All four \
         dataplanes of the ring share this machine's two CPUs, so a relayed round trip \
         includes scheduler delays: the figures show that traffic continues and at what \
         cost here, not the cost on cores of their own. The ring's cores sleep when idle \
         (four dataplanes, two CPUs) and its links' minimum round is 200 us.\n\n\
         | subject | link | verbs/s across it before | while down | failed while down | \
         p50 us | p99.9 us | max us | longest stall across the cut (failover) |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    if let Some(m) = find(ms, Experiment::Fabric, "oae", &[("topology", "ring:4")]) {
        let f = |k: &str| m.metrics.get(k);
        let _ = writeln!(
            out,
            "| OAE fabric, ring:4 | 0-1 cut for good | {} | {} | {} | {} | {} | {} | {} ms, {} round trips of its path |",
            fmt_fig(f("cut_pair_before_verbs_per_s"), 1.0, 0),
            fmt_fig(f("cut_pair_after_verbs_per_s"), 1.0, 0),
            fmt_fig(f("cut_pair_after_failed"), 1.0, 0),
            fmt_fig(f("after_p50_us"), 1.0, 0),
            fmt_fig(f("after_p999_us"), 1.0, 0),
            fmt_fig(f("after_max_us"), 1.0, 0),
            fmt_fig(f("reroute_ms"), 1.0, 1),
            fmt_fig(f("reroute_path_rtts"), 1.0, 1),
        );
    }
    for (subject, name) in [("oae", "OAE pair"), ("rc-model", "RC model pair")] {
        let Some(m) = find(ms, Experiment::Fabric, subject, &[("topology", "pair")]) else {
            continue;
        };
        let f = |k: &str| m.metrics.get(k);
        let _ = writeln!(
            out,
            "| {name} | down 1 s, middle third | {} (whole run) | {} (middle third) | {} | {} | {} | {} | none: one link |",
            fmt_fig(f("verbs_per_s"), 1.0, 0),
            fmt_fig(f("during_verbs_per_s"), 1.0, 0),
            fmt_fig(f("during_failed"), 1.0, 0),
            fmt_fig(f("during_p50_us"), 1.0, 0),
            fmt_fig(f("during_p999_us"), 1.0, 0),
            fmt_fig(f("during_max_us"), 1.0, 0),
        );
    }
    out.push('\n');
    fabric_alone_section(out, ms);
    incast_section(out, ms);
}

/// The ring's pairs and its cut, each alone before the workloads of all
/// pairs.
fn fabric_alone_section(out: &mut String, ms: &[Measurement]) {
    let Some(m) = find(ms, Experiment::Fabric, "oae", &[("topology", "ring:4")]) else {
        return;
    };
    let f = |k: &str| m.metrics.get(k);
    let _ = writeln!(
        out,
        "Before those workloads, each ordered pair of the ring alone (one verb in flight, 1 s, \
         nothing else running): neighbours p50 {} us, two hops (relayed) p50 {} us, {}× the \
         neighbours' (the target: at most 4×); the longest any pair went between two \
         completions with no fault at all: {} ms. Then the cut alone, a verb at a time from 0 \
         to 1, cut by the XDP programs of its two interfaces and healed three times: from the \
         last answer over the link to the first over another path, by node 0's own capture \
         of its frames, {} ms at the median and {} ms at most ({} of 3 cuts caught by the \
         capture); the workload's longest stall, which also holds whatever else the shared \
         CPUs did in the run, {} ms at the median, {} ms at most.\n",
        fmt_fig(f("alone_1hop_p50_us"), 1.0, 1),
        fmt_fig(f("alone_2hop_p50_us"), 1.0, 1),
        fmt_fig(f("alone_2hop_vs_1hop"), 1.0, 2),
        fmt_fig(f("alone_longest_gap_ms"), 1.0, 2),
        fmt_fig(f("cut_alone_failover_median_ms"), 1.0, 2),
        fmt_fig(f("cut_alone_failover_max_ms"), 1.0, 2),
        fmt_fig(f("cut_alone_failovers_measured"), 1.0, 0),
        fmt_fig(f("cut_alone_stall_median_ms"), 1.0, 2),
        fmt_fig(f("cut_alone_stall_max_ms"), 1.0, 2),
    );
}

/// Seven leaves of a star writing to an eighth through the hub.
fn incast_section(out: &mut String, ms: &[Measurement]) {
    let runs: Vec<(u32, &Measurement)> = super::plan::INCAST_LANES
        .iter()
        .filter_map(|&lanes| {
            let l = lanes.to_string();
            let m = find(
                ms,
                Experiment::Fabric,
                "oae",
                &[("topology", "star:9"), ("lanes", l.as_str())],
            )?;
            Some((lanes, m))
        })
        .collect();
    if runs.is_empty() {
        return;
    }
    out.push_str(
        "## Incast\n\nA star of nine dataplanes (cores that sleep when idle): seven leaves \
         write to an eighth, every frame relayed by the hub. Frames lost to overrun count \
         the relays' full queues and the kernel's receive rings of every node.\n\n\
         | verbs in flight per sender | verbs/s (all) | largest share over smallest | \
         p99 us (best sender) | p99 us (worst sender) | frames lost to overrun | relay queue \
         peak |\n|---|---|---|---|---|---|---|\n",
    );
    for (lanes, m) in runs {
        let f = |k: &str| m.metrics.get(k);
        let _ = writeln!(
            out,
            "| {lanes} | {} | +{} % | {} | {} | {} | {} |",
            fmt_fig(f("verbs_per_s"), 1.0, 0),
            fmt_fig(f("share_spread_pct"), 1.0, 1),
            fmt_fig(f("p99_min_us"), 1.0, 0),
            fmt_fig(f("p99_max_us"), 1.0, 0),
            fmt_fig(f("overrun_drops"), 1.0, 0),
            fmt_fig(f("relay_queue_peak"), 1.0, 0),
        );
    }
    out.push('\n');
}

/// Verbs/s with one and two queues (a link each) per dataplane.
fn scale_section(out: &mut String, ms: &[Measurement]) {
    out.push_str(
        "## Queues and links\n\nOAE CAS with one and with two queues per dataplane, each \
         queue a polling thread with one link and a workload of one lane per slot, every \
         queue of a dataplane on its one shared memory. Both queues of a dataplane are \
         pinned to its core (this machine has two), so two queues share one CPU: the rows \
         show the cost of serving two links and one memory from time-sliced threads, not \
         the scaling of a core per queue.\n\n\
         | driver | queues | links | CAS verbs/s (k) | vs 1 queue | p99 us |\n|---|---|---|---|---|---|\n",
    );
    for driver in ["af-xdp", "dpdk net_memif"] {
        let get = |queues: &str| {
            find(
                ms,
                Experiment::Scale,
                "oae",
                &[("driver", driver), ("queues", queues)],
            )
        };
        let one = get("1").and_then(|m| m.median("verbs_per_s"));
        for queues in ["1", "2"] {
            let m = get(queues);
            let _ = writeln!(
                out,
                "| {driver} | {queues} | {queues} | {} | {} | {} |",
                fmt_fig(m.and_then(|m| m.metrics.get("verbs_per_s")), 1e3, 0),
                ratio(m.and_then(|m| m.median("verbs_per_s")), one)
                    .map_or("-".into(), |r| format!("{r:.2}")),
                fmt_fig(m.and_then(|m| m.metrics.get("p99_us")), 1.0, 0),
            );
        }
    }
    out.push('\n');
}
