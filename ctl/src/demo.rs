//! `oaectl demo`: the product's main job on one machine. Two network
//! namespaces joined by a veth pair, a dataplane in each, a mixed verb
//! workload with loss injected for a while, and an exactly-once check of
//! both sides' memory against the ledger of the issued verbs. Everything it
//! creates it removes, on success, on failure and on Ctrl-C.

use std::io::{IsTerminal, Write as _};
use std::path::{Path, PathBuf};
use std::process::Command;

use oae_common::topology::Shape;

use crate::fabric_demo::{self, FabricDemo};
use crate::failure::Failure;
use crate::fi_demo::{self, FiDemo};
use crate::host_demo::HostDemo;
use crate::running::Running;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use oae_client::control::{Client, FaultChange, WorkloadReport, WorkloadSpec};
use oae_client::demo::{DemoReport, DemoRun, FiDemoReport, HostDemoReport};
use oae_client::host::HostMode;
use oae_client::stats::DataplaneStats;
use oae_common::mac::parse_mac;
use oae_config::deployment::{DemoSettings, Deployment, QueueOverrides, flap_times};
use oae_config::{IdlePolicy, KickPolicy};
use oae_os::cpu::CpuTime;
use oae_pmd::netns::VethPair;
use oae_pmd::xdp::FaultScope;

const EMBEDDED: &str = include_str!("../../configs/veth-pair.toml");
const STEP: Duration = Duration::from_secs(10);

#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    /// Deployment file; the embedded configs/veth-pair.toml by default.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Overrides demo.seconds.
    #[arg(long)]
    seconds: Option<f64>,
    /// Overrides demo.lanes.
    #[arg(long)]
    lanes: Option<u32>,
    /// Overrides demo.loss_ppm (loss during the middle third).
    #[arg(long)]
    loss_ppm: Option<u32>,
    /// Overrides demo.corrupt_ppm (one bit flipped, middle third).
    #[arg(long)]
    corrupt_ppm: Option<u32>,
    /// Overrides demo.flaps (link down and up, spread over the middle third).
    #[arg(long)]
    flaps: Option<u32>,
    /// Overrides demo.flap_ms (how long each flap keeps the link down).
    #[arg(long)]
    flap_ms: Option<u32>,
    /// The frames the middle third's faults hit: oae (the default), or
    /// ipv4 / port:N, which leave OAE frames alone (to see that faults on
    /// other traffic of the link do not reach OAE).
    #[arg(long)]
    fault_scope: Option<FaultScope>,
    /// Overrides demo.verbs: a comma-separated mix, e.g. cas or read,write.
    #[arg(long, value_delimiter = ',')]
    verbs: Option<Vec<String>>,
    /// Runs every queue with this transport: oae, or rc-model (the model
    /// of RoCE's RC transport), for comparing the two on one setup.
    #[arg(long)]
    transport: Option<String>,
    /// Slots (and receive credits) of every link.
    #[arg(long)]
    slots: Option<u16>,
    /// The polling core of each dataplane, e.g. 0,1 (two cores) or 0,0
    /// (both on one; raise --min-round-us then, or a descheduled peer
    /// looks dead).
    #[arg(long, value_delimiter = ',')]
    cores: Option<Vec<usize>>,
    /// The links' minimum liveness round, microseconds.
    #[arg(long)]
    min_round_us: Option<u64>,
    /// Queues per dataplane, each with its own polling core, link and
    /// workload (AF_XDP: veth queues steered by queue; DPDK: memif
    /// interfaces), all on one memory per dataplane.
    #[arg(long)]
    queues: Option<u32>,
    /// Every queue's idle policy: spin (the default), yield, or sleep on
    /// the socket until a frame, a request or the next timer. With
    /// --topology, sleep by default when the nodes outnumber the CPUs.
    #[arg(long, value_enum)]
    idle: Option<IdlePolicy>,
    /// When every queue kicks its transmit ring: adaptive (the default:
    /// held while receive bursts keep coming, bounded) or immediate.
    #[arg(long, value_enum)]
    kicks: Option<KickPolicy>,
    /// AF_XDP preferred busy polling on every queue.
    #[arg(long)]
    busy_poll: bool,
    /// A fabric instead of the pair: ring:N, mesh:N, line:N, grid:N,
    /// torus:N, random:N or star:N (2 to 16 nodes), a namespace per node, a veth pair per link, a workload
    /// between every pair of nodes, one link cut a third of the way in.
    #[arg(long)]
    topology: Option<String>,
    /// With --topology: the link to cut, e.g. 0-1 (by default the first
    /// whose loss leaves every node a path).
    #[arg(long)]
    cut: Option<String>,
    /// With --topology: first measure each ordered pair alone for this
    /// many seconds, one verb in flight (relayed against neighbours, with
    /// no other traffic on the shared CPUs).
    #[arg(long, requires = "topology")]
    pair_latency: Option<f64>,
    /// With --topology, instead of a workload between every pair and a
    /// cut: every node that reaches node T only through relays writes to
    /// it (star:9 and --incast 8: seven senders, one relay), and the
    /// senders' shares, p99 and every frame lost to a full queue are shown.
    #[arg(long, value_name = "T", requires = "topology", conflicts_with = "cut")]
    incast: Option<usize>,
    /// The oaed binary; by default the one next to oaectl.
    #[arg(long)]
    oaed: Option<PathBuf>,
    /// A host program in front of dataplane a instead of the dataplanes'
    /// workload, as on an IPU: dataplane a serves a host ring in this mode
    /// (fito or bilateral) and `oaectl host-verbs`, a process of its own,
    /// keeps --host-window FETCH-ADDs in flight through it.
    #[arg(long, value_parser = parse_host_mode)]
    host_ring: Option<HostMode>,
    /// FETCH-ADDs the host program keeps in flight (default: --lanes).
    #[arg(long, requires = "host_ring")]
    host_window: Option<usize>,
    /// The CPU the host program is pinned to.
    #[arg(long, requires = "host_ring")]
    host_core: Option<usize>,
    /// libfabric's own fi_pingpong over OAE instead of the workload: both
    /// dataplanes serve a host ring, fi_pingpong's server runs on b's and
    /// its client on a's through the oae provider, with messages of SIZE
    /// bytes (at most 361). Needs libfabric-bin and the provider.
    #[arg(long, conflicts_with_all = ["host_ring", "topology"])]
    fi_pingpong: Option<u32>,
    /// Ping-pongs of --fi-pingpong.
    #[arg(long, default_value_t = 10_000, requires = "fi_pingpong")]
    fi_iterations: u32,
    /// The directory holding the provider, liboae-fi.so (by default
    /// target/oae-c/lib/libfabric beside oaectl, where `cargo xtask
    /// install-c` puts it).
    #[arg(long, requires = "fi_pingpong")]
    fi_provider: Option<PathBuf>,
    /// Print the final report as JSON too (oaectl's `--json`).
    #[arg(skip)]
    pub json: bool,
    /// Write the final report as JSON to this file.
    #[arg(long)]
    report: Option<PathBuf>,
}

/// Everything the demo started. The dataplanes come first, so they stop
/// before the namespaces (and the veth pair and its XDP programs) go.
struct Setup {
    running: Running,
    _pair: VethPair,
}

/// The deployment in `config`, or the embedded configs/veth-pair.toml.
pub fn load_deployment(config: Option<&Path>) -> Result<Deployment, Failure> {
    let (text, path) = match config {
        Some(p) => (
            std::fs::read_to_string(p)
                .map_err(|e| Failure::usage(format!("cannot read {}: {e}", p.display())))?,
            p.to_path_buf(),
        ),
        None => (
            EMBEDDED.to_string(),
            PathBuf::from("configs/veth-pair.toml (embedded)"),
        ),
    };
    Deployment::parse(&text, &path).map_err(|e| Failure::usage(e.to_string()))
}

/// `--oaed`, or the oaed beside this oaectl.
pub fn oaed_path(given: Option<&Path>) -> Result<PathBuf, Failure> {
    let oaed = match given {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe()
            .map_err(|e| e.to_string())?
            .with_file_name("oaed"),
    };
    if !oaed.exists() {
        return Err(Failure::usage(format!(
            "{} not found: build it (cargo build --release) or pass --oaed",
            oaed.display()
        )));
    }
    Ok(oaed)
}

pub fn run(args: &DemoArgs) -> Result<(), Failure> {
    let overrides = QueueOverrides {
        transport: args.transport.clone(),
        slots: args.slots,
        cores: args.cores.clone(),
        min_round_ns: args.min_round_us.map(|us| us.saturating_mul(1000)),
        queues: args.queues,
        idle: args.idle,
        kicks: args.kicks,
        busy_poll: args.busy_poll.then_some(true),
    };
    let mut deployment = load_deployment(args.config.as_deref())?;
    deployment
        .apply(&overrides)
        .map_err(|e| Failure::usage(e.to_string()))?;
    let host = match args.host_ring {
        Some(mode) => {
            let window = args
                .host_window
                .unwrap_or(args.lanes.unwrap_or(deployment.demo.lanes) as usize);
            Some(HostDemo::configure(
                &mut deployment,
                mode,
                window,
                args.host_core,
            )?)
        }
        None => None,
    };
    let fi = match args.fi_pingpong {
        Some(size) => Some(FiDemo::configure(
            &mut deployment,
            size,
            args.fi_iterations,
            args.fi_provider
                .clone()
                .unwrap_or_else(fi_demo::default_provider),
            args.cores
                .as_deref()
                .and_then(|c| Some([*c.first()?, *c.get(1)?])),
            // Beside a dataplane that yields, fi_pingpong yields too.
            args.idle.is_some_and(|i| i != IdlePolicy::Spin),
        )?),
        None => None,
    };
    let text = deployment.to_toml().map_err(|e| e.to_string())?;
    let mut settings = deployment.demo.clone();
    if let Some(s) = args.seconds {
        settings.seconds = s;
    }
    if let Some(l) = args.lanes {
        settings.lanes = l;
    }
    if let Some(p) = args.loss_ppm {
        settings.loss_ppm = p;
    }
    if let Some(p) = args.corrupt_ppm {
        settings.corrupt_ppm = p;
    }
    if let Some(n) = args.flaps {
        settings.flaps = n;
    }
    if let Some(ms) = args.flap_ms {
        settings.flap_ms = ms;
    }
    if let Some(v) = &args.verbs {
        settings.verbs = v.clone();
    }
    settings.validate().map_err(|(field, problem)| {
        Failure::usage(format!("--{} {problem}", field.replace('_', "-")))
    })?;
    let oaed = oaed_path(args.oaed.as_deref())?;

    let interrupted = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&interrupted))
            .map_err(|e| format!("cannot install the signal handler: {e}"))?;
    }

    if let Some(spec) = &args.topology {
        let (shape, nodes) = Shape::parse(spec).map_err(|e| format!("--topology: {e}"))?;
        let cut = match &args.cut {
            None => None,
            Some(c) => {
                let (a, b) = c
                    .split_once('-')
                    .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
                    .ok_or_else(|| format!("--cut '{c}': write two node numbers, e.g. 0-1"))?;
                Some((a, b))
            }
        };
        let demo = FabricDemo {
            shape,
            nodes,
            seconds: args.seconds.unwrap_or(9.0),
            lanes: args.lanes.unwrap_or(4),
            cut,
            idle: args
                .idle
                .unwrap_or_else(|| oae_config::deployment::fabric_idle(nodes)),
            min_round_ns: args
                .min_round_us
                .map_or(fabric_demo::MIN_ROUND_NS, |us| us * 1000),
            pair_latency: Duration::from_secs_f64(args.pair_latency.unwrap_or(0.0).max(0.0)),
            incast: args.incast,
            oaed,
            report: args.report.clone(),
            json: args.json,
        };
        return fabric_demo::run(&demo, &interrupted);
    }
    let names: Vec<String> = deployment.dataplane.keys().cloned().collect();
    let macs = [
        parse_mac(&deployment.topology.macs[0]).ok_or("validated")?,
        parse_mac(&deployment.topology.macs[1]).ok_or("validated")?,
    ];
    let mut running = Running::new("oae-demo-")?;
    let config_file = running.write_file("deployment.toml", &text)?;
    let queues = args.queues.unwrap_or(1);
    outln!("setting up two namespaces joined by a veth pair ...");
    let pair = VethPair::create_with_queues("demo", Some(macs), queues)
        .map_err(|e| format!("cannot create the namespaces (run as root): {e}"))?;
    outln!(
        "  {} ({}) <-> {} ({})",
        pair.ns[0],
        pair.ifname[0],
        pair.ns[1],
        pair.ifname[1]
    );
    for (i, name) in names.iter().enumerate() {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &pair.ns[i]])
            .arg(&oaed)
            .arg("--config")
            .arg(&config_file)
            .args(["--name", name]);
        running.start(cmd, name, &oaed)?;
    }
    let mut setup = Setup {
        running,
        _pair: pair,
    };

    wait_for_links(&mut setup, &interrupted)?;
    if let Some(host) = &host {
        return run_host_program(setup, host, settings.seconds, &names, args);
    }
    if let Some(fi) = &fi {
        return run_fi_pingpong(setup, fi, &names, args);
    }
    outln!(
        "links up; running the workload for {:.1} s",
        settings.seconds
    );
    let scope = args.fault_scope.unwrap_or_default();
    let cpu_before = polling_cpu(&setup)?;
    let cpu_clock = std::time::Instant::now();
    let reports = run_workload(&setup, &deployment, &settings, scope, &interrupted)?;
    let cpu_after = polling_cpu(&setup)?;
    let cpu_wall_s = cpu_clock.elapsed().as_secs_f64();
    let cpu: Vec<CpuTime> = cpu_after
        .iter()
        .zip(&cpu_before)
        .map(|(after, before)| after.since(before))
        .collect();
    let check = exactly_once_check(&setup, &reports)?;
    let report = WorkloadReport::side_by_side(&reports);
    let stats = every_stats(&setup)?;
    print_table(&names, &settings, scope, &report, &stats, &check);
    print_cpu("CPU while the workload ran", &names, &cpu, cpu_wall_s);
    if args.json || args.report.is_some() {
        let exactly_once = check.ok();
        let v = DemoReport {
            impairment: settings.impairment(),
            settings: DemoRun {
                seconds: settings.seconds,
                lanes: settings.lanes,
                loss_ppm: settings.loss_ppm,
                corrupt_ppm: settings.corrupt_ppm,
                flaps: settings.flaps,
                flap_ms: settings.flap_ms,
                fault_scope: scope.to_string(),
                verbs: settings.verbs.clone(),
            },
            queues: reports.len(),
            cpu,
            cpu_wall_s,
            workload: report.clone(),
            workloads: reports,
            stats,
            exactly_once,
            differences: check.differences.clone(),
        };
        write_report(&v, args)?;
    }
    drop(setup);
    outln!("namespaces, XDP programs and dataplanes removed");
    if check.ok() && report.mismatches == 0 {
        Ok(())
    } else {
        Err(Failure::answered(
            "the exactly-once check FAILED (see above)",
        ))
    }
}

/// One line: each dataplane's polling CPU time over the wall time.
fn print_cpu(what: &str, names: &[String], cpu: &[CpuTime], wall_s: f64) {
    outln!(
        "  {:<34} {}",
        what,
        names
            .iter()
            .zip(cpu)
            .map(|(n, c)| format!("{n} {:.2} s of {wall_s:.2} s", c.total_s()))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

/// The final report as JSON: printed with `--json`, written to `--report`.
fn write_report(report: &impl serde::Serialize, args: &DemoArgs) -> Result<(), String> {
    if args.json {
        crate::out::json(report)?;
    }
    if let Some(path) = &args.report {
        let text = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
        std::fs::write(path, text)
            .map_err(|e| format!("cannot write the report to {}: {e}", path.display()))?;
    }
    Ok(())
}

/// The demo with libfabric's fi_pingpong as the workload.
fn run_fi_pingpong(
    setup: Setup,
    fi: &FiDemo,
    names: &[String],
    args: &DemoArgs,
) -> Result<(), Failure> {
    outln!(
        "links up; fi_pingpong over the oae provider, {} bytes, {} ping-pongs",
        fi.size,
        fi.iterations
    );
    let cpu_before = polling_cpu(&setup)?;
    let cpu_clock = std::time::Instant::now();
    let row = fi.run(&setup.running.sockets)?;
    let cpu_after = polling_cpu(&setup)?;
    let cpu_wall_s = cpu_clock.elapsed().as_secs_f64();
    let cpu: Vec<CpuTime> = cpu_after
        .iter()
        .zip(&cpu_before)
        .map(|(after, before)| after.since(before))
        .collect();
    let stats = every_stats(&setup)?;
    outln!(
        "  {} bytes: {} ping-pongs, {} acknowledged, {:.2} us a transfer ({:.0} transfers/s)",
        row.bytes,
        row.sent,
        row.acked,
        row.usec_per_xfer,
        row.xfers_per_s()
    );
    print_cpu("CPU while fi_pingpong ran", names, &cpu, cpu_wall_s);
    let complete = row.sent == row.acked && row.sent == u64::from(fi.iterations);
    if args.json || args.report.is_some() {
        let v = FiDemoReport {
            size: fi.size,
            iterations: fi.iterations,
            rows: vec![row],
            cpu,
            cpu_wall_s,
            stats,
        };
        write_report(&v, args)?;
    }
    drop(setup);
    outln!("namespaces, XDP programs and dataplanes removed");
    if complete {
        Ok(())
    } else {
        Err(Failure::answered(
            "fi_pingpong's counts do not match its iterations (see above)",
        ))
    }
}

/// The demo with a host program as the workload: its figures, the CPU the
/// polling cores used meanwhile, and the ledger at the peer.
fn run_host_program(
    setup: Setup,
    host: &HostDemo,
    seconds: f64,
    names: &[String],
    args: &DemoArgs,
) -> Result<(), Failure> {
    outln!(
        "links up; a host program on the {:?} host ring for {seconds:.1} s, {} verbs in flight",
        host.mode,
        host.window
    );
    let cpu_before = polling_cpu(&setup)?;
    let cpu_clock = std::time::Instant::now();
    let report = host.run(&setup.running.sockets, seconds)?;
    let cpu_after = polling_cpu(&setup)?;
    let cpu_wall_s = cpu_clock.elapsed().as_secs_f64();
    let cpu: Vec<CpuTime> = cpu_after
        .iter()
        .zip(&cpu_before)
        .map(|(after, before)| after.since(before))
        .collect();
    let stats = every_stats(&setup)?;
    let l = &report.load;
    outln!(
        "  {} ring: {} FETCH-ADDs ok, {} failed, {} not submitted; {:.0} verbs/s; \
         p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us; {} exchanges",
        l.mode,
        l.ok,
        l.failed,
        l.not_submitted,
        l.verbs_per_s,
        l.p50_ns as f64 / 1e3,
        l.p99_ns as f64 / 1e3,
        l.p999_ns as f64 / 1e3,
        l.exchanges
    );
    outln!(
        "  peer's words moved by {} for {} successes: {}",
        report.added,
        l.ok,
        if report.exact { "exact" } else { "MISMATCH" }
    );
    print_cpu("CPU while the host program ran", names, &cpu, cpu_wall_s);
    if args.json || args.report.is_some() {
        let v = HostDemoReport {
            host: report.clone(),
            cpu,
            cpu_wall_s,
            stats,
            exactly_once: report.exact,
        };
        write_report(&v, args)?;
    }
    drop(setup);
    outln!("namespaces, XDP programs and dataplanes removed");
    if report.exact {
        Ok(())
    } else {
        Err(Failure::answered(
            "the host program's ledger does not match the peer's memory (see above)",
        ))
    }
}

fn parse_host_mode(s: &str) -> Result<HostMode, String> {
    match s {
        "fito" => Ok(HostMode::Fito),
        "bilateral" => Ok(HostMode::Bilateral),
        _ => Err(format!("'{s}': use fito or bilateral")),
    }
}

fn wait_for_links(setup: &mut Setup, interrupted: &AtomicBool) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        setup.running.check(interrupted)?;
        let up = setup.running.sockets.iter().all(|s| {
            Client::new(s, Duration::from_secs(1))
                .status()
                .is_ok_and(|status| status.all_up())
        });
        if up {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the links did not come up within 20 s\n{}",
                setup.running.logs()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn set_faults(setup: &Setup, change: &FaultChange) -> Result<(), String> {
    for s in &setup.running.sockets {
        client(s).fault(change.clone())?;
    }
    Ok(())
}

/// What the demo does to the link, and when.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    /// The middle third begins: loss and corruption on.
    Impair,
    LinkDown,
    LinkUp,
    /// The middle third ends: every fault off.
    Restore,
}

/// The middle third's steps, in seconds from the workload's start.
fn schedule(settings: &DemoSettings) -> Vec<(f64, Step)> {
    if !settings.impaired() {
        return Vec::new();
    }
    let third = settings.seconds / 3.0;
    let mut steps = vec![(third, Step::Impair)];
    for (down, up) in flap_times(settings.flaps, settings.flap_ms, third) {
        steps.push((third + down, Step::LinkDown));
        steps.push((third + up, Step::LinkUp));
    }
    steps.push((2.0 * third, Step::Restore));
    steps
}

/// The dataplane on `socket`, each answer awaited up to [`STEP`].
fn client(socket: &Path) -> Client {
    Client::new(socket, STEP)
}

/// Every dataplane's counters, in the order they were started.
fn every_stats(setup: &Setup) -> Result<Vec<DataplaneStats>, String> {
    setup
        .running
        .sockets
        .iter()
        .map(|s| Ok(client(s).stats()?))
        .collect()
}

/// CPU time each dataplane's polling threads have used so far.
fn polling_cpu(setup: &Setup) -> Result<Vec<CpuTime>, String> {
    Ok(every_stats(setup)?
        .iter()
        .map(|stats| {
            let mut sum = CpuTime::default();
            for q in &stats.queues {
                sum.add(&q.cpu);
            }
            sum
        })
        .collect())
}

fn run_workload(
    setup: &Setup,
    deployment: &Deployment,
    settings: &DemoSettings,
    scope: FaultScope,
    interrupted: &AtomicBool,
) -> Result<Vec<WorkloadReport>, String> {
    let issuer = &setup.running.sockets[0];
    // A workload per queue of the issuer, each with lanes of its own.
    let queues = deployment
        .dataplane
        .values()
        .next()
        .map_or(1, |c| c.queues.len()) as u16;
    let target_cfg = deployment.dataplane.values().nth(1).ok_or("validated")?;
    let region = target_cfg.regions.first().ok_or_else(|| {
        "the second dataplane needs a region for the workload to target".to_string()
    })?;
    let local = deployment
        .dataplane
        .values()
        .next()
        .and_then(|c| c.regions.get(1))
        .ok_or("the first dataplane needs a second region for bilateral swaps")?;
    for queue in 0..queues {
        let spec = WorkloadSpec {
            queue,
            first_lane: u32::from(queue) * settings.lanes,
            region: region.id,
            key: region.key,
            local_region: local.id,
            lanes: settings.lanes,
            seconds: settings.seconds,
            seed: settings.seed + u64::from(queue),
            verbs: settings.verbs.clone(),
            ..Default::default()
        };
        client(issuer).workload_start(spec)?;
    }
    // Latency per phase: a whole-run percentile hides what faults cost.
    let phase = |name: &str| {
        (0..queues).try_for_each(|queue| {
            client(issuer)
                .workload_phase(queue, 0, None, name)
                .map(drop)
                .map_err(String::from)
        })
    };
    let steps = schedule(settings);
    if !steps.is_empty() {
        phase("before")?;
    }
    let mut next_step = 0;
    let mut impaired = false;
    let apply = |step: Step| -> Result<(), String> {
        let change = match step {
            Step::Impair => FaultChange {
                drop_ppm: Some(settings.loss_ppm),
                corrupt_ppm: Some(settings.corrupt_ppm),
                corrupt_offset: Some(u32::MAX),
                seed: Some(settings.seed),
                scope: Some(scope),
                ..FaultChange::default()
            },
            Step::LinkDown | Step::LinkUp => FaultChange {
                link_down: Some(step == Step::LinkDown),
                ..FaultChange::default()
            },
            Step::Restore => FaultChange {
                drop_ppm: Some(0),
                corrupt_ppm: Some(0),
                link_down: Some(false),
                ..FaultChange::default()
            },
        };
        set_faults(setup, &change)?;
        match step {
            Step::Impair => phase("during"),
            Step::Restore => phase("after"),
            Step::LinkDown | Step::LinkUp => Ok(()),
        }
    };
    let terminal = std::io::stdout().is_terminal();
    let status_every = Duration::from_millis(250);
    let mut next_status = status_every;
    let mut polls = 0u64;
    let started = Instant::now();
    let hard_deadline = started + Duration::from_secs_f64(settings.seconds + 30.0);
    loop {
        // Sleep to whichever comes first: the next fault step or status poll.
        let step_at = steps
            .get(next_step)
            .map(|(t, _)| Duration::from_secs_f64(*t));
        let wake = step_at.map_or(next_status, |t| t.min(next_status));
        std::thread::sleep(wake.saturating_sub(started.elapsed()));
        if interrupted.load(Ordering::Relaxed) {
            if impaired {
                let _ = apply(Step::Restore);
            }
            return Err("interrupted".into());
        }
        while let Some(&(t, step)) = steps.get(next_step)
            && started.elapsed().as_secs_f64() >= t
        {
            apply(step)?;
            impaired = step != Step::Restore;
            next_step += 1;
        }
        if started.elapsed() < next_status {
            continue;
        }
        next_status += status_every;
        let reports = (0..queues)
            .map(|queue| client(issuer).workload_status(queue, 0, None))
            .collect::<Result<Vec<_>, _>>()?;
        let r = WorkloadReport::side_by_side(&reports);
        polls += 1;
        let rate = if r.elapsed_s > 0.0 {
            r.completed as f64 / r.elapsed_s
        } else {
            0.0
        };
        let line = format!(
            "  [{:>5.1} s] {:>9} verbs {:>9.0}/s  failed {:>5}  p99 {:>8.1} us  faults {:<4}",
            r.elapsed_s,
            r.completed,
            rate,
            r.failed,
            r.latency.p99 as f64 / 1e3,
            if impaired { "on" } else { "off" }
        );
        // A terminal gets one line rewritten in place; a log gets a line a
        // second.
        if terminal {
            out!("\r{line}");
            let _ = std::io::stdout().flush();
        } else if polls.is_multiple_of(4) || !r.running {
            outln!("{line}");
        }
        if !r.running {
            if terminal {
                outln!();
            }
            if impaired {
                apply(Step::Restore)?;
            }
            return Ok(reports);
        }
        if Instant::now() > hard_deadline {
            return Err("the workload did not finish in time".into());
        }
    }
}

struct Check {
    compared_bytes: usize,
    differences: Vec<String>,
}

impl Check {
    fn ok(&self) -> bool {
        self.differences.is_empty()
    }
}

/// Compares both sides' memory with each workload's ledger.
fn exactly_once_check(setup: &Setup, reports: &[WorkloadReport]) -> Result<Check, String> {
    let mut differences = Vec::new();
    let mut compared = 0;
    let dump = |socket: &Path, id: u16| -> Result<String, String> {
        Ok(client(socket).region_dump(id, 0, None)?.data)
    };
    let (remote, local) = (
        dump(&setup.running.sockets[1], 1)?,
        dump(&setup.running.sockets[0], 2)?,
    );
    let images = reports.iter().flat_map(|r| {
        [
            (
                "peer's target region",
                &remote,
                r.first_byte,
                &r.expected_remote,
            ),
            (
                "issuer's local region",
                &local,
                r.first_byte,
                &r.expected_local,
            ),
        ]
    });
    for (what, actual, first, expected) in images {
        // Hex: two characters a byte.
        let from = (2 * first).min(actual.len());
        let actual = &actual[from..(from + expected.len()).min(actual.len())];
        compared += expected.len() / 2;
        if actual != expected {
            let at = actual
                .bytes()
                .zip(expected.bytes())
                .position(|(a, b)| a != b)
                .unwrap_or(0)
                / 2;
            let at = first + at;
            differences.push(format!(
                "{what} differs from the ledger first at byte {at} (lane {})",
                at / 64
            ));
        }
    }
    Ok(Check {
        compared_bytes: compared,
        differences,
    })
}

fn print_table(
    names: &[String],
    settings: &DemoSettings,
    scope: FaultScope,
    r: &WorkloadReport,
    stats: &[DataplaneStats],
    check: &Check,
) {
    let sum = |key: &str| -> u64 {
        stats
            .iter()
            .flat_map(|s| &s.queues)
            .flat_map(|q| &q.links)
            .map(|l| l.get(key))
            .sum()
    };
    let xdp = |key: &str| -> u64 {
        stats
            .iter()
            .flat_map(|s| &s.xdp)
            .map(|x| x.counters.get(key).copied().unwrap_or(0))
            .sum()
    };
    let us = |ns: u64| format!("{:.1} us", ns as f64 / 1e3);
    outln!();
    let first_queue = stats.first().and_then(|s| s.queues.first());
    let driver = first_queue.map_or("an unknown driver", |q| q.queue.driver.as_str());
    let transport = match first_queue.map(|q| q.transport.as_str()) {
        Some("rc-model") => "the RC transport model",
        _ => "OAE",
    };
    let on = match scope {
        FaultScope::Oae => String::new(),
        other => format!(" on {other} frames, not OAE's"),
    };
    outln!(
        "{transport} over {driver}, {} -> {} ({} lanes, {:.1} s, {}{on} in the middle third)",
        names[0],
        names[1],
        settings.lanes,
        settings.seconds,
        settings.impairment()
    );
    let rc = transport != "OAE";
    let recovery: Vec<(&str, String)> = if rc {
        vec![
            (
                "retransmissions (go-back-N)",
                sum("retransmissions").to_string(),
            ),
            ("ACK timeouts", sum("timeouts").to_string()),
            (
                "duplicates answered from cache",
                sum("cache_replays").to_string(),
            ),
        ]
    } else {
        vec![
            ("reversals", sum("reversals").to_string()),
            (
                "transfers reversed at target",
                sum("transfers_reversed").to_string(),
            ),
            (
                "losses found by order (no timer)",
                sum("lost_by_order").to_string(),
            ),
            (
                "losses found by patience",
                sum("lost_by_patience").to_string(),
            ),
            ("probes sent", sum("probes_sent").to_string()),
        ]
    };
    let mut rows: Vec<(&str, String)> = vec![
        ("verbs completed", r.completed.to_string()),
        (
            "verbs/s",
            format!("{:.0}", r.completed as f64 / r.elapsed_s.max(1e-9)),
        ),
        (
            // RC cannot say whether a verb it failed took effect.
            if rc {
                "verbs failed (effect unknown)"
            } else {
                "verbs failed (no effect)"
            },
            r.failed.to_string(),
        ),
        ("latency p50", us(r.latency.p50)),
        ("latency p99", us(r.latency.p99)),
        ("latency p99.9", us(r.latency.p999)),
        ("latency max", us(r.latency.max)),
        (
            "frames dropped by fault (XDP)",
            xdp("dropped_by_fault").to_string(),
        ),
        (
            "frames corrupted by fault (XDP)",
            xdp("corrupted_by_fault").to_string(),
        ),
        ("malformed frames", sum("malformed_total").to_string()),
        ("results contradicting the ledger", r.mismatches.to_string()),
        (
            "exactly-once (memory vs ledger)",
            if check.ok() && r.mismatches == 0 {
                format!("PASS ({} bytes on both sides)", check.compared_bytes)
            } else {
                format!("FAIL: {}", check.differences.join("; "))
            },
        ),
    ];
    // How each transport recovered, after the latencies.
    let at = rows
        .iter()
        .position(|(k, _)| *k == "latency max")
        .map_or(rows.len(), |i| i + 1);
    rows.splice(at..at, recovery);
    for (k, v) in rows {
        outln!("  {k:<34} {v}");
    }
    if !r.phases.is_empty() {
        outln!(
            "  {:<14} {:>7} {:>10} {:>7} {:>10} {:>10} {:>10} {:>10}",
            "phase (from)",
            "s",
            "completed",
            "failed",
            "p50",
            "p99",
            "p99.9",
            "max"
        );
        for p in &r.phases {
            let l = &p.latency;
            outln!(
                "  {:<14} {:>7.1} {:>10} {:>7} {:>10} {:>10} {:>10} {:>10}",
                p.name,
                p.started_s,
                p.completed,
                p.failed,
                us(l.p50),
                us(l.p99),
                us(l.p999),
                us(l.max)
            );
        }
    }
    let mix: Vec<String> = r.per_verb.iter().map(|(k, n)| format!("{k} {n}")).collect();
    outln!("  {:<34} {}", "mix", mix.join(", "));
    if !r.errors.is_empty() {
        let errs: Vec<String> = r.errors.iter().map(|(k, n)| format!("{k} {n}")).collect();
        outln!("  {:<34} {}", "failures by reason", errs.join(", "));
    }
}
