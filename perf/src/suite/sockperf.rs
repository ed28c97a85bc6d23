//! `sockperf` ping-pong over kernel UDP: the kernel's latency baseline.

use std::path::Path;
use std::time::{Duration, Instant};

use oae_pmd::netns::VethPair;

use super::child::{Bounded, pinned, run_measured, tail};
use super::choice::*;
use super::outcome::Outcome;
use super::{GRACE, Options};

const SOCKPERF_PORT: &str = "11111";

pub(super) fn sockperf(
    opts: &Options,
    placement: Placement,
    log: &Path,
) -> Result<Outcome, String> {
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
    let server_cpu = || server.cpu();
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
}
