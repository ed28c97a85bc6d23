//! libfabric's own `fi_pingpong` (libfabric-bin) over three providers on
//! the same cores: `oae` (`oaectl demo --fi-pingpong`: both ends on a
//! dataplane's host ring), and the kernel-backed `tcp` and `udp` providers
//! between two namespaces of a veth pair. One message in flight, so the
//! figures are a round trip's halves and what that allows a second.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use oae_client::demo::{FiDemoReport, FiPingpongRow};
use oae_pmd::netns::VethPair;

use super::child::{Bounded, pinned, run_bounded, run_measured, tail};
use super::figures::{find, fmt_fig, ratio};
use super::outcome::Outcome;
use super::{Experiment, GRACE, Measurement, Options, Target};

/// The providers compared, in the report's order.
pub const PROVIDERS: [&str; 3] = ["oae", "tcp", "udp"];
/// Message sizes; the oae provider carries at most 361 bytes a message.
pub const SIZES: [u32; 2] = [64, 256];
/// fi_pingpong's out-of-band port for the kernel providers' runs (each in
/// namespaces of its own).
const CONTROL_PORT: u16 = 47592;

/// Ping-pongs of one run: enough for a few seconds of the slowest.
fn iterations(opts: &Options) -> u32 {
    if opts.quick { 500 } else { 20_000 }
}

pub(super) fn fi_pingpong(
    opts: &Options,
    provider: &str,
    bytes: u32,
    log: &Path,
) -> Result<Outcome, String> {
    let (row, cpu) = match provider {
        "oae" => over_oae(opts, bytes, log)?,
        _ => over_kernel(opts, provider, bytes, log)?,
    };
    if row.sent != row.acked || row.sent == 0 {
        return Err(format!(
            "fi_pingpong acknowledged {} of {} ping-pongs:\n{}",
            row.acked,
            row.sent,
            tail(log)
        ));
    }
    let mut o = Outcome::default();
    o.set("usec_per_xfer", row.usec_per_xfer);
    o.set("rtt_us", 2.0 * row.usec_per_xfer);
    o.set("xfers_per_s", row.xfers_per_s());
    o.set("pingpongs", row.sent as f64);
    if let Some(cores) = cpu {
        o.set_cpu(cores, Some(row.xfers_per_s()));
    }
    o.headline = format!(
        "{provider} {bytes} B: {:.2} us a transfer, {:.0} transfers/s",
        row.usec_per_xfer,
        row.xfers_per_s()
    );
    Ok(o)
}

/// `oaectl demo --fi-pingpong`: the dataplanes on the suite's cores, each
/// beside its side's fi_pingpong, yielding the CPU to one another.
fn over_oae(
    opts: &Options,
    bytes: u32,
    log: &Path,
) -> Result<(FiPingpongRow, Option<[f64; 2]>), String> {
    let report = log.with_extension("json");
    let _ = std::fs::remove_file(&report);
    let [a, b] = opts.cores;
    let mut cmd = Command::new(&opts.oaectl);
    cmd.arg("demo")
        .args(["--fi-pingpong", &bytes.to_string()])
        .args(["--fi-iterations", &iterations(opts).to_string()])
        .arg("--fi-provider")
        .arg(&opts.fi_provider)
        .args(["--cores", &format!("{a},{b}")])
        .args(["--idle", "yield"])
        .arg("--report")
        .arg(&report);
    let status = run_bounded(cmd, log, GRACE * 4, "oaectl demo --fi-pingpong")?;
    if !status.success() {
        return Err(format!(
            "oaectl demo --fi-pingpong failed ({status}):\n{}",
            tail(log)
        ));
    }
    let text = std::fs::read_to_string(&report)
        .map_err(|e| format!("{}: {e}\n{}", report.display(), tail(log)))?;
    let r: FiDemoReport =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", report.display()))?;
    let row = r
        .rows
        .into_iter()
        .next()
        .ok_or("the demo reported no row")?;
    // The demo measures its dataplanes' CPU, not fi_pingpong's: no figure
    // to set beside the kernel providers' (their two fi_pingpongs').
    Ok((row, None))
}

/// fi_pingpong's server in namespace b, its client in namespace a, over the
/// kernel's TCP or UDP on the veth pair.
fn over_kernel(
    opts: &Options,
    provider: &str,
    bytes: u32,
    log: &Path,
) -> Result<(FiPingpongRow, Option<[f64; 2]>), String> {
    let pair = VethPair::create("fipp").map_err(|e| format!("creating the veth pair: {e}"))?;
    let n = iterations(opts).to_string();
    let size = bytes.to_string();
    let args = ["-p", provider, "-e", "rdm", "-S", &size, "-I", &n];
    let mut server = pinned(&pair, 1, opts.cores[1], "fi_pingpong");
    server.args(args);
    let mut server = Bounded::spawn(
        server,
        &log.with_extension("server.log"),
        "fi_pingpong server",
    )?;
    let pid = server.pid().ok_or("fi_pingpong's server exited at once")?;
    server.wait_until(
        |_| oae_os::tcp::listening_seen_by(pid, CONTROL_PORT),
        Duration::from_secs(10),
    )?;
    let server_cpu = || server.cpu();
    let (cpu0, t0) = (server_cpu(), Instant::now());
    let mut client = pinned(&pair, 0, opts.cores[0], "fi_pingpong");
    client.args(args).arg(pair.ip[1].to_string());
    let run = run_measured(client, log, GRACE * 4, "fi_pingpong client");
    let (cpu1, wall) = (server_cpu(), t0.elapsed().as_secs_f64());
    let server_done = server.wait(GRACE);
    server.stop();
    let (status, client_cpu) = run?;
    let text = std::fs::read_to_string(log).map_err(|e| e.to_string())?;
    let row = FiPingpongRow::parse_all(&text).into_iter().next();
    let (true, Some(row), Some(_)) = (status.success(), row, server_done) else {
        return Err(format!(
            "fi_pingpong -p {provider} failed ({status}):\n{}\nserver:\n{}",
            tail(log),
            server.log_text()
        ));
    };
    let cores = match (cpu0, cpu1, client_cpu) {
        (Some(c0), Some(c1), Some(client)) => {
            let wall = wall.max(1e-9);
            Some([client.total_s() / wall, c1.since(&c0).total_s() / wall])
        }
        _ => None,
    };
    Ok((row, cores))
}

/// The suite's providers' directory default: beside the binaries, where
/// `cargo xtask install-c --prefix target/oae-c` puts it.
pub fn default_provider_dir(exe: &Path) -> std::path::PathBuf {
    exe.parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("."))
        .join("oae-c/lib/libfabric")
}

/// The targets: fi_pingpong's latency over oae at most a fifth of tcp's,
/// and its transfers a second at least three times tcp's, at 64 bytes.
pub(super) fn targets(ms: &[Measurement], out: &mut Vec<Target>) {
    let at = |provider: &str, metric: &str| {
        find(
            ms,
            Experiment::Libfabric,
            "fi-pingpong",
            &[("provider", provider), ("bytes", "64")],
        )
        .and_then(|m| m.median(metric))
    };
    let (oae, tcp) = (at("oae", "rtt_us"), at("tcp", "rtt_us"));
    let r = ratio(oae, tcp);
    out.push(Target {
        name: "fi_pingpong latency, oae vs tcp provider".into(),
        ratio_of: "fi_pingpong round trip over oae / over libfabric's tcp provider, 64 bytes"
            .into(),
        ratio: r,
        wanted: "<= 0.2".into(),
        met: r.map(|r| r <= 0.2),
        why: match (oae, tcp) {
            (Some(o), Some(t)) => format!(
                "{}: {o:.1} us against {t:.1} us. A message over oae crosses the host ring \
                 twice and the link once each way, and on this machine's two CPUs each \
                 dataplane shares its CPU with its side's fi_pingpong, both yielding",
                if r.is_some_and(|r| r <= 0.2) {
                    "met"
                } else {
                    "not met"
                }
            ),
            _ => "not measured (see the failed trials)".into(),
        },
    });
    let (oae, tcp) = (at("oae", "xfers_per_s"), at("tcp", "xfers_per_s"));
    let r = ratio(oae, tcp);
    out.push(Target {
        name: "fi_pingpong message rate, oae vs tcp provider".into(),
        ratio_of: "fi_pingpong transfers/s over oae / over libfabric's tcp provider, 64 bytes \
                   (one in flight)"
            .into(),
        ratio: r,
        wanted: ">= 3".into(),
        met: r.map(|r| r >= 3.0),
        why: match (oae, tcp) {
            (Some(o), Some(t)) => format!(
                "{}: {o:.0} against {t:.0} transfers/s; with one message in flight the rate \
                 is the latency's inverse",
                if r.is_some_and(|r| r >= 3.0) {
                    "met"
                } else {
                    "not met"
                }
            ),
            _ => "not measured (see the failed trials)".into(),
        },
    });
}

/// The report's libfabric section.
pub(super) fn section(out: &mut String, ms: &[Measurement]) {
    out.push_str(
        "## libfabric: fi_pingpong over the oae provider\n\n\
         libfabric 1.17's own `fi_pingpong -e rdm` (libfabric-bin), one message in flight. \
         `oae`: `oaectl demo --fi-pingpong`, both fi_pingpongs host programs on their \
         dataplane's host ring (FITO, in host memory), each dataplane on the same core as \
         its side's fi_pingpong, both yielding the CPU when idle (`--idle yield`, \
         FI_OAE_YIELD). `tcp`, `udp`: libfabric's providers over the kernel, fi_pingpong's \
         server in namespace b and client in namespace a of a veth pair, on the same cores. \
         A transfer is one message one way (fi_pingpong's usec/xfer); a round trip is two. \
         Cores: the two fi_pingpongs' CPU time over wall time.\n\n\
         | provider | bytes | round trip us | transfers/s | cores a / b |\n\
         |---|---|---|---|---|\n",
    );
    for bytes in SIZES {
        for provider in PROVIDERS {
            let bytes = bytes.to_string();
            let m = find(
                ms,
                Experiment::Libfabric,
                "fi-pingpong",
                &[("provider", provider), ("bytes", &bytes)],
            );
            let f = |k: &str, d| fmt_fig(m.and_then(|m| m.metrics.get(k)), 1.0, d);
            let _ = writeln!(
                out,
                "| {provider} | {bytes} | {} | {} | {} / {} |",
                f("rtt_us", 1),
                f("xfers_per_s", 0),
                f("cpu_a_cores", 2),
                f("cpu_b_cores", 2),
            );
        }
    }
    out.push('\n');
}
