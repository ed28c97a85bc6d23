//! `dpdk-testpmd` in macswap mode in namespace b, fed by the raw flood.

use std::path::Path;
use std::time::{Duration, Instant};

use oae_pmd::netns::VethPair;

use super::Options;
use super::child::{Bounded, tail};
use super::choice::*;
use super::outcome::Outcome;
use super::raw_xdp::flood_config;
use crate::raw::{self, FloodConfig};

pub(super) fn testpmd(opts: &Options, log: &Path) -> Result<Outcome, String> {
    oae_pmd::dpdk::reserve_hugepages(HUGEPAGES)?;
    let pair = VethPair::create("tpmd").map_err(|e| format!("creating the veth pair: {e}"))?;
    let mut cmd = pair.command(1, "dpdk-testpmd");
    cmd.args(["-l", &format!("{},{}", opts.cores[0], opts.cores[1])])
        .args(["--no-pci", "--in-memory"])
        .args(["--file-prefix", &format!("oae-tpmd-{}", std::process::id())])
        .args(["--vdev", &format!("net_af_xdp0,iface={}", pair.ifname[1])])
        .args([
            "--",
            "--forward-mode=macswap",
            "--auto-start",
            "--total-num-mbufs=16384",
            "--nb-cores=1",
            "--stats-period=1",
        ]);
    let mut server = Bounded::spawn(cmd, log, "dpdk-testpmd")?;
    server.wait_for_line("packet forwarding - ports=", Duration::from_secs(20))?;
    // The forwarding core is polling once the banner is out; a moment for
    // net_af_xdp's socket to settle.
    std::thread::sleep(Duration::from_millis(300));
    let cfg = flood_config(opts);
    let testpmd_cpu = || server.cpu();
    let (cpu0, t0) = (testpmd_cpu(), Instant::now());
    let open = raw::flood_from_a(&pair, opts.cores[0], &FloodConfig { window: 0, ..cfg });
    let windowed = raw::flood_from_a(&pair, opts.cores[0], &FloodConfig { window: 256, ..cfg });
    let (cpu1, wall) = (testpmd_cpu(), t0.elapsed().as_secs_f64());
    server.stop();
    let ((open, open_cores), (windowed, windowed_cores)) = (open?, windowed?);
    let best = open.rx_pps.max(windowed.rx_pps);
    if best == 0.0 {
        return Err(format!(
            "testpmd reflected nothing ({} sent):\n{}",
            open.sent,
            tail(log)
        ));
    }
    let mut o = Outcome::default();
    o.set("frames_per_s", best);
    o.set("open_loop_frames_per_s", open.rx_pps);
    if let (Some(c0), Some(c1)) = (cpu0, cpu1) {
        let reflector = c1.since(&c0).total_s() / wall.max(1e-9);
        o.set_cpu([open_cores.max(windowed_cores), reflector], Some(best));
    }
    o.headline = format!("{best:.0} frames/s reflected by testpmd macswap");
    Ok(o)
}
