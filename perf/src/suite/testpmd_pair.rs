//! Two `dpdk-testpmd` in macswap mode joined by `net_memif`: frames bounce
//! between them with no kernel in the way, the DPDK reference OAE over
//! `net_memif` is measured against. Side a (the memif client) forwards on
//! core a and sends the first `in_flight` frames (`--tx-first`); side b
//! (the server) forwards on core b. Each testpmd's main lcore, which only
//! prints statistics, sits on the other core. A round trip is a frame's
//! return to side a, so round trips/s is side a's receive rate.

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::Options;
use super::child::{Bounded, tail};
use super::choice::HUGEPAGES;
use super::outcome::Outcome;

/// Shortest measured window: testpmd prints its rates once a second, and
/// the first line after the start is left out as warm-up.
const MIN_SECS: f64 = 3.0;
const READY: Duration = Duration::from_secs(20);

pub(super) fn testpmd_pair(opts: &Options, log: &Path, in_flight: u16) -> Result<Outcome, String> {
    oae_pmd::dpdk::reserve_hugepages(HUGEPAGES)?;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let tag = format!(
        "oae-tpmd-pair-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let socket = format!("/run/{tag}.sock");
    let _ = std::fs::remove_file(&socket);
    let [core_a, core_b] = opts.cores;
    let side = |role: &str, forward_on: usize, main_on: usize| {
        let mut cmd = std::process::Command::new("dpdk-testpmd");
        cmd.args(["-l", &format!("{forward_on},{main_on}")])
            .args(["--main-lcore", &main_on.to_string()])
            .args(["--no-pci", "--in-memory"])
            .args(["--file-prefix", &format!("{tag}-{role}")])
            .args([
                "--vdev",
                &format!("net_memif0,role={role},socket={socket},socket-abstract=no"),
            ])
            .args([
                "--",
                "--forward-mode=macswap",
                "--auto-start",
                "--nb-cores=1",
                "--stats-period=1",
                "--total-num-mbufs=16384",
                &format!("--burst={in_flight}"),
            ]);
        cmd
    };
    let log_b = log.with_extension("server.log");
    let mut b = Bounded::spawn(side("server", core_b, core_a), &log_b, "dpdk-testpmd (b)")?;
    let mut a_cmd = side("client", core_a, core_b);
    a_cmd.arg("--tx-first");
    let measured = b
        .wait_for_line("packet forwarding - ports=", READY)
        .and_then(|()| Bounded::spawn(a_cmd, log, "dpdk-testpmd (a)"))
        .and_then(|mut a| {
            let run = measure(&mut a, &b, opts.secs.max(MIN_SECS));
            a.stop();
            run
        });
    b.stop();
    let _ = std::fs::remove_file(&socket);
    let (cpu, wall) = measured?;
    let text = std::fs::read_to_string(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let rate = round_trips_per_s(&text).ok_or_else(|| {
        format!(
            "the testpmd pair bounced no frames ({in_flight} in flight):\n{}\nserver:\n{}",
            tail(log),
            tail(&log_b)
        )
    })?;
    let mut o = Outcome::default();
    o.set("round_trips_per_s", rate);
    // Little's law: each of the frames in flight comes back every
    // in_flight / rate seconds.
    o.set("round_trip_us", f64::from(in_flight) / rate * 1e6);
    if let Some([a, b]) = cpu {
        o.set_cpu([a / wall, b / wall], Some(rate));
    }
    o.headline = format!("{rate:.0} round trips/s between two testpmd over net_memif");
    Ok(o)
}

/// Waits for side a to forward, then measures for `secs`: the CPU each
/// side used (seconds) and the wall time.
fn measure(a: &mut Bounded, b: &Bounded, secs: f64) -> Result<(Option<[f64; 2]>, f64), String> {
    a.wait_for_line("packet forwarding - ports=", READY)?;
    let before = (a.cpu(), b.cpu());
    let start = Instant::now();
    // The measured window itself, not a wait for readiness.
    std::thread::sleep(Duration::from_secs_f64(secs));
    let after = (a.cpu(), b.cpu());
    let wall = start.elapsed().as_secs_f64();
    let cpu = match (before, after) {
        ((Some(a0), Some(b0)), (Some(a1), Some(b1))) => {
            Some([a1.since(&a0).total_s(), b1.since(&b0).total_s()])
        }
        _ => None,
    };
    Ok((cpu, wall))
}

/// The median of the receive rates testpmd printed (`Rx-pps:`), leaving
/// out those before the first frame came back and the first after it
/// (a partial second).
fn round_trips_per_s(log: &str) -> Option<f64> {
    let mut rates: Vec<f64> = log
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Rx-pps:"))
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .skip_while(|&r: &f64| r == 0.0)
        .skip(1)
        .collect();
    if rates.is_empty() {
        return None;
    }
    rates.sort_by(f64::total_cmp);
    let mid = rates.len() / 2;
    Some(if rates.len() % 2 == 1 {
        rates[mid]
    } else {
        (rates[mid - 1] + rates[mid]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_read_past_the_start_and_its_partial_second() {
        let log = "  Rx-pps:            0          Rx-bps:            0\n\
                   \x20 Rx-pps:        12173          Rx-bps:      6232712\n\
                   \x20 Tx-pps:        12173          Tx-bps:      6232712\n\
                   \x20 Rx-pps:      8086910          Rx-bps:   4140498024\n\
                   \x20 Rx-pps:      7696640          Rx-bps:   3940679992\n\
                   \x20 Rx-pps:      7657881          Rx-bps:   3920835288\n";
        assert_eq!(round_trips_per_s(log), Some(7_696_640.0));
        assert_eq!(round_trips_per_s("  Rx-pps: 0 Rx-bps: 0\n"), None);
        assert_eq!(round_trips_per_s("EAL: error\n"), None);
    }
}
