//! Two `dpdk-testpmd` in macswap mode joined by `net_memif`: frames bounce
//! between them with no kernel in the way, the DPDK reference OAE over
//! `net_memif` is measured against. Side a (the memif client) forwards on
//! core a and, once its link is up, sends the first `in_flight` frames
//! (`start tx_first`, typed at its prompt); side b (the server) forwards
//! on core b. Each testpmd's main lcore sits on the other core. A round
//! trip is a frame's return to side a, so round trips/s is side a's
//! receive rate: its received count (`show port stats`) over the window.

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::Options;
use super::child::{Bounded, tail};
use super::choice::HUGEPAGES;
use super::outcome::Outcome;

/// Shortest measured window.
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
        // Line-buffered output (stdbuf execs testpmd in place): side a's
        // answers are read from its log while it runs.
        let mut cmd = std::process::Command::new("stdbuf");
        cmd.args(["-oL", "dpdk-testpmd"])
            .args(["-l", &format!("{forward_on},{main_on}")])
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
                "--nb-cores=1",
                "--total-num-mbufs=16384",
                &format!("--burst={in_flight}"),
            ]);
        cmd
    };
    let log_b = log.with_extension("server.log");
    let mut b_cmd = side("server", core_b, core_a);
    // Without a stats period a non-interactive testpmd never creates the
    // memif server's socket (seen with DPDK 22.11), and the client cannot
    // connect.
    b_cmd.args(["--auto-start", "--stats-period=1"]);
    let mut b = Bounded::spawn(b_cmd, &log_b, "dpdk-testpmd (b)")?;
    // Side a takes commands: its first burst goes once the memif link is
    // up, not at start (`--tx-first` sends before the client has
    // connected, the burst is dropped and nothing ever bounces).
    let mut a_cmd = side("client", core_a, core_b);
    a_cmd.arg("-i");
    let measured = b
        .wait_for_line("packet forwarding - ports=", READY)
        .and_then(|()| Bounded::spawn_driven(a_cmd, log, "dpdk-testpmd (a)"))
        .and_then(|mut a| {
            let run = measure(&mut a, &b, opts.secs.max(MIN_SECS));
            let _ = a.send("quit");
            a.stop();
            run
        });
    b.stop();
    let _ = std::fs::remove_file(&socket);
    let (bounced, cpu, wall) = measured.map_err(|e| format!("{e}\nserver:\n{}", tail(&log_b)))?;
    if bounced == 0 {
        return Err(format!(
            "the testpmd pair bounced no frames ({in_flight} in flight):\n{}\nserver:\n{}",
            tail(log),
            tail(&log_b)
        ));
    }
    let rate = bounced as f64 / wall;
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

/// Waits for side a's link, sends its first burst, and measures for
/// `secs`: the frames that came back to side a, the CPU each side used
/// (seconds) and the wall time.
fn measure(
    a: &mut Bounded,
    b: &Bounded,
    secs: f64,
) -> Result<(u64, Option<[f64; 2]>, f64), String> {
    a.wait_for_line("testpmd> ", READY)?;
    let deadline = Instant::now() + READY;
    while !a.log_text().contains("Link status: up") {
        if Instant::now() > deadline {
            return Err(format!(
                "side a's memif link did not come up within {READY:?}:\n{}",
                a.log_text()
            ));
        }
        let asked = a.log_text().matches("Link status:").count();
        a.send("show port info 0")?;
        a.wait_until(|log| log.matches("Link status:").count() > asked, READY)?;
    }
    a.send("start tx_first")?;
    a.wait_for_line("packet forwarding - ports=", READY)?;
    let first = received(a)?;
    let before = (a.cpu(), b.cpu());
    let start = Instant::now();
    // The measured window itself, not a wait for readiness.
    std::thread::sleep(Duration::from_secs_f64(secs));
    let after = (a.cpu(), b.cpu());
    let last = received(a)?;
    let wall = start.elapsed().as_secs_f64();
    let cpu = match (before, after) {
        ((Some(a0), Some(b0)), (Some(a1), Some(b1))) => {
            Some([a1.since(&a0).total_s(), b1.since(&b0).total_s()])
        }
        _ => None,
    };
    Ok((last.saturating_sub(first), cpu, wall))
}

/// The frames side a has received so far, as `show port stats 0` says.
fn received(a: &mut Bounded) -> Result<u64, String> {
    let asked = a.log_text().matches("RX-packets:").count();
    a.send("show port stats 0")?;
    a.wait_until(|log| log.matches("RX-packets:").count() > asked, READY)?;
    rx_packets(&a.log_text()).ok_or_else(|| format!("no RX-packets in:\n{}", a.log_text()))
}

/// The last `RX-packets:` count in testpmd's output.
fn rx_packets(log: &str) -> Option<u64> {
    let at = log.rfind("RX-packets:")?;
    log[at + "RX-packets:".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_received_count_is_read() {
        let log = "  RX-packets: 26926464   RX-missed: 0          RX-bytes:  1723293760\n\
                   \x20 RX-errors: 0\n\
                   \x20 RX-packets: 28268608   RX-missed: 0          RX-bytes:  1809190912\n";
        assert_eq!(rx_packets(log), Some(28_268_608));
        assert_eq!(rx_packets("EAL: error\n"), None);
    }
}
