//! `redis-server` and `redis-benchmark` over kernel TCP: the failure
//! matrix's TCP baseline, under the same faults from the XDP program.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use oae_common::CORRUPT_RANDOM_OFFSET;
use oae_config::deployment::{Deployment, flap_times};
use oae_pmd::netns::VethPair;
use oae_pmd::xdp::{FaultConfig, FaultScope, Steering, XdpCounters, XdpMode};

use super::child::{Bounded, pinned, run_bounded, tail};
use super::choice::*;
use super::outcome::Outcome;
use super::{GRACE, Options};

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
pub(super) fn redis(t: &RedisTrial, opts: &Options, log: &Path) -> Result<Outcome, String> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
