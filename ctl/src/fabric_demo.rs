//! `oaectl demo --topology ring:5` (or `mesh:4`, `line:3`): a fabric of
//! dataplanes, one per namespace, a veth pair per link. Every node runs a
//! workload aimed at every other node (verbs to nodes that are not
//! neighbours are relayed); a third of the way in, one link is cut for
//! good. At the end, each workload's ledger is compared with the memory of
//! both its ends, and the table shows what the cut cost. Everything it
//! creates it removes, on success, on failure and on Ctrl-C.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use oae_client::control::{Client, FaultChange, WorkloadReport, WorkloadSpec};
use oae_client::demo::{CutAlone, FabricDemoReport, IncastReport, PairLatency, PairReport};
use oae_client::status::{FabricStatus, RouteStatus};
use oae_common::topology::Shape;
use oae_config::IdlePolicy;

use crate::failure::Failure;
use oae_config::deployment::{FABRIC_LOCAL, FABRIC_TARGET, Naming, fabric_node_toml};
use oae_pmd::netns::Graph;

use crate::running::Running;

const STEP: Duration = Duration::from_secs(10);
/// Liveness rounds of at least 10 ms by default: the polling cores of every
/// node share this machine's CPUs, and a neighbour descheduled for a few
/// time slices must not look dead.
pub const MIN_ROUND_NS: u64 = 10_000_000;

/// What the fabric demo was asked to do.
pub struct FabricDemo {
    pub shape: Shape,
    pub nodes: usize,
    pub seconds: f64,
    pub lanes: u32,
    /// Cut this link a third of the way in (none: the first link of the
    /// shape whose loss leaves every node a path).
    pub cut: Option<(usize, usize)>,
    pub idle: IdlePolicy,
    pub min_round_ns: u64,
    /// Before the workloads between all pairs, each ordered pair alone for
    /// this long, one verb in flight (0: not).
    pub pair_latency: Duration,
    /// Instead of a workload between every pair and a cut: every node that
    /// reaches this one only through relays writes to it.
    pub incast: Option<usize>,
    pub oaed: PathBuf,
    /// Write the report as JSON here too.
    pub report: Option<PathBuf>,
    /// Print the final report as JSON on standard output.
    pub json: bool,
}

/// Everything the demo started. The dataplanes come first, so they stop
/// before the namespaces (and the veth pairs) go.
struct Setup {
    running: Running,
    graph: Graph,
}

impl Setup {
    fn fabric(&self, i: usize) -> Option<FabricStatus> {
        let s = Client::new(&self.running.sockets[i], Duration::from_secs(2))
            .status()
            .ok()?;
        s.queues.into_iter().next()?.fabric
    }

    /// Every node holds the same view, of every node.
    fn views_agree(&self, n: usize) -> bool {
        let views: Vec<_> = (0..n).map(|i| self.fabric(i)).collect();
        let first = views[0].as_ref().map(|v| (v.view, v.members.clone()));
        views.iter().all(|v| {
            v.as_ref()
                .is_some_and(|v| v.members.len() == n && Some((v.view, v.members.clone())) == first)
        })
    }

    fn report(&self, i: usize, j: usize) -> Result<WorkloadReport, String> {
        self.client(i)
            .workload_status(0, 0, Some(j as u64 + 1))
            .map_err(|e| format!("node {i}'s workload for node {j}: {e}"))
    }

    fn region(&self, i: usize, id: u16) -> Result<String, String> {
        Ok(self.client(i).region_dump(id, 0, None)?.data)
    }

    /// Dataplane `i`, each answer awaited up to [`STEP`].
    fn client(&self, i: usize) -> Client {
        Client::new(&self.running.sockets[i], STEP)
    }
}

/// Waits for `cond`, checking the dataplanes are alive and Ctrl-C unasked.
fn wait(
    setup: &mut Setup,
    limit: Duration,
    what: &str,
    interrupted: &AtomicBool,
    mut cond: impl FnMut(&Setup) -> bool,
) -> Result<(), String> {
    let until = Instant::now() + limit;
    loop {
        setup.running.check(interrupted)?;
        if cond(setup) {
            return Ok(());
        }
        if Instant::now() > until {
            return Err(format!(
                "{what}: not within {limit:?}\n{}",
                setup.running.logs()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn run(demo: &FabricDemo, interrupted: &AtomicBool) -> Result<(), Failure> {
    let n = demo.nodes;
    let edges = demo.shape.edges(n);
    let adj = demo.shape.neighbours(n);
    let cut = match demo.cut {
        _ if demo.incast.is_some() => None,
        Some((a, b)) if edges.contains(&(a.min(b), a.max(b))) => Some((a.min(b), a.max(b))),
        Some((a, b)) => {
            return Err(Failure::usage(format!(
                "--cut {a}-{b}: no such link in {}:{n}",
                demo.shape.name()
            )));
        }
        None => edges.iter().copied().find(|&(a, b)| {
            let mut down = vec![vec![false; n]; n];
            down[a][b] = true;
            down[b][a] = true;
            oae_common::topology::connected(&adj, &down)
        }),
    };
    outln!(
        "setting up a {}:{n} fabric: {n} namespaces, {} veth pairs, cores that {} when idle ...",
        demo.shape.name(),
        edges.len(),
        match demo.idle {
            IdlePolicy::Spin => "spin",
            IdlePolicy::Yield => "yield",
            IdlePolicy::Sleep => "sleep",
        }
    );
    let graph = Graph::create("fabric", n, &edges)
        .map_err(|e| format!("cannot create the namespaces (run as root): {e}"))?;
    let mut running = Running::new("oae-fabric-")?;
    for (i, neighbours) in adj.iter().enumerate() {
        let config = running.write_file(
            &format!("n{i}.toml"),
            &fabric_node_toml(i, neighbours, demo.min_round_ns, demo.idle, Naming::Listed),
        )?;
        let mut cmd = graph.command(i, &demo.oaed.to_string_lossy());
        cmd.arg("--config").arg(&config);
        running.start(cmd, &format!("n{i}"), &demo.oaed)?;
    }
    let mut setup = Setup { running, graph };
    wait(
        &mut setup,
        Duration::from_secs(60),
        "every node's view of every node",
        interrupted,
        |s| s.views_agree(n),
    )?;
    let view = setup.fabric(0).ok_or("node 0 has no fabric")?;
    outln!(
        "view {} agreed by all {n} nodes; node 0 routes: {}",
        view.view,
        view.routes
            .iter()
            .map(|r| format!("node {} in {} hop(s)", r.node, r.hops))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let pair_latency = if demo.pair_latency.is_zero() {
        Vec::new()
    } else {
        let measured = pair_latencies(&mut setup, demo, interrupted)?;
        print_pair_latencies(&measured, demo);
        measured
    };
    let cuts_alone = match cut {
        Some(ends) if !demo.pair_latency.is_zero() => {
            let measured = cuts_alone(&mut setup, demo, ends, interrupted)?;
            print_cuts_alone(&measured, &pair_latency);
            measured
        }
        _ => Vec::new(),
    };
    let pairs = workload_pairs(demo, &adj)?;
    for (k, &(i, j)) in pairs.iter().enumerate() {
        let spec = WorkloadSpec {
            node: Some(j as u64 + 1),
            // Below the lanes of the pairs and the cuts measured alone.
            first_lane: k as u32 * demo.lanes,
            region: FABRIC_TARGET.0,
            key: FABRIC_TARGET.1,
            local_region: FABRIC_LOCAL,
            lanes: demo.lanes,
            seconds: demo.seconds,
            seed: (i * n + j) as u64,
            ..Default::default()
        };
        setup.client(i).workload_start(spec)?;
    }
    match demo.incast {
        Some(t) => outln!(
            "incast: {} nodes writing to node {t} through relays for {:.1} s, {} lanes each",
            pairs.len(),
            demo.seconds,
            demo.lanes
        ),
        None => outln!(
            "workloads between all {} pairs for {:.1} s, {} lanes each",
            pairs.len(),
            demo.seconds,
            demo.lanes
        ),
    }
    let started = Instant::now();
    let mut rerouted = None;
    if let Some((a, b)) = cut {
        std::thread::sleep(Duration::from_secs_f64(demo.seconds / 3.0));
        let before = setup.report(a, b)?.completed;
        let cut_at = Instant::now();
        setup
            .graph
            .set_link(a, b, false)
            .map_err(|e| e.to_string())?;
        outln!("cut the link {a}-{b} for good");
        wait(
            &mut setup,
            Duration::from_secs(60),
            "a verb across the cut",
            interrupted,
            |s| s.report(a, b).is_ok_and(|r| r.completed > before),
        )?;
        rerouted = Some(cut_at.elapsed());
        // From the first verb across the cut: nothing completed before
        // the cut counts in it (the phase is begun by control requests,
        // which take their time; the reroute was timed without them).
        phase(&setup, &pairs, "cut")?;
    }
    if cut.is_none() && demo.incast.is_none() {
        outln!("no link can be cut without cutting a node off: no cut");
    }
    let remaining = Duration::from_secs_f64(demo.seconds).saturating_sub(started.elapsed());
    std::thread::sleep(remaining);
    wait(
        &mut setup,
        Duration::from_secs(60),
        "every workload done",
        interrupted,
        |s| {
            pairs
                .iter()
                .all(|&(i, j)| s.report(i, j).is_ok_and(|r| !r.running))
        },
    )?;
    wait(
        &mut setup,
        Duration::from_secs(30),
        "nothing in doubt, no word locked",
        interrupted,
        |s| {
            (0..n).all(|i| {
                s.fabric(i)
                    .is_some_and(|v| v.in_doubt == 0 && v.locked_words == 0)
            })
        },
    )?;
    // A link of dataplanes sharing the CPUs may flap as the workloads end;
    // the views must agree again once it is back.
    let _ = wait(
        &mut setup,
        Duration::from_secs(30),
        "views to agree",
        interrupted,
        |s| s.views_agree(n),
    );
    let mut report = gather(&setup, demo, &pairs, cut, rerouted)?;
    if let Some(target) = demo.incast {
        report.incast = Some(incast_report(&setup, target, &report.pairs)?);
    }
    report.pair_latency = pair_latency;
    report.cuts_alone = cuts_alone;
    print_table(&report);
    if demo.json {
        crate::out::json(&report)?;
    }
    if let Some(path) = &demo.report {
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(path, text)
            .map_err(|e| format!("cannot write the report to {}: {e}", path.display()))?;
    }
    let pairs_exact = report.pair_latency.iter().all(|p| p.ledger_exact)
        && report.cuts_alone.iter().all(|c| c.ledger_exact);
    let no_overrun = report.incast.as_ref().is_none_or(|i| i.overrun_drops == 0);
    if report.exact && pairs_exact && report.views_agree && no_overrun {
        outln!("every ledger exact on both ends; namespaces, XDP programs and dataplanes removed");
        Ok(())
    } else {
        Err(Failure::answered("the fabric check FAILED (see above)"))
    }
}

/// Waits until node `i`'s workload aimed at `j` has run out; its report.
fn run_out(
    setup: &mut Setup,
    (i, j): (usize, usize),
    what: &str,
    interrupted: &AtomicBool,
) -> Result<WorkloadReport, String> {
    wait(setup, Duration::from_secs(60), what, interrupted, |s| {
        s.report(i, j).is_ok_and(|r| !r.running)
    })?;
    setup.report(i, j)
}

/// Each ordered pair alone, one verb in flight for `demo.pair_latency`,
/// on lanes of their own (after the all-pairs workloads' lanes), each
/// ledger compared with both ends' memory.
fn pair_latencies(
    setup: &mut Setup,
    demo: &FabricDemo,
    interrupted: &AtomicBool,
) -> Result<Vec<PairLatency>, String> {
    let n = demo.nodes;
    let mut measured = Vec::new();
    for i in 0..n {
        let routes = setup.fabric(i).map(|v| v.routes).unwrap_or_default();
        for j in (0..n).filter(|&j| j != i) {
            let spec = WorkloadSpec {
                node: Some(j as u64 + 1),
                first_lane: (n * n) as u32 * demo.lanes + (i * n + j) as u32,
                region: FABRIC_TARGET.0,
                key: FABRIC_TARGET.1,
                local_region: FABRIC_LOCAL,
                lanes: 1,
                seconds: demo.pair_latency.as_secs_f64(),
                seed: (n * n + i * n + j) as u64,
                ..Default::default()
            };
            setup.client(i).workload_start(spec)?;
            let what = format!("node {i}'s verbs to node {j}, alone");
            let r = run_out(setup, (i, j), &what, interrupted)?;
            measured.push(PairLatency {
                from: i,
                to: j,
                hops: hops_to(&routes, j),
                verbs: r.completed,
                p50_us: r.latency.p50 as f64 / 1e3,
                p99_us: r.latency.p99 as f64 / 1e3,
                longest_gap_us: r.longest_gap_us,
                ledger_exact: ledger_exact(setup, i, j, &r)?,
            });
        }
    }
    Ok(measured)
}

/// Times the cut of a link alone is measured.
const CUTS_ALONE: usize = 3;
/// Frames of the cut's capture: at about three frames a verb, some 100 ms
/// of one verb at a time, the cut and what follows it.
const CUT_CAPTURE_FRAMES: u32 = 10_000;
const CUT_CAPTURE_SECONDS: f64 = 2.0;
/// How long the capture is given to start (its request reaches the
/// polling core through the control socket) before the cut.
const CAPTURE_LEAD: Duration = Duration::from_millis(25);

/// The cut alone, [`CUTS_ALONE`] times: one verb at a time from `a` to
/// `b` for `demo.pair_latency` (at least a second) with nothing else
/// running, the link cut by its XDP programs a third of the way in, then
/// healed and waited for until the route is direct again and the views
/// agree.
fn cuts_alone(
    setup: &mut Setup,
    demo: &FabricDemo,
    (a, b): (usize, usize),
    interrupted: &AtomicBool,
) -> Result<Vec<CutAlone>, String> {
    let n = demo.nodes;
    let seconds = demo.pair_latency.as_secs_f64().max(1.0);
    let mut measured = Vec::new();
    for k in 0..CUTS_ALONE {
        let spec = WorkloadSpec {
            node: Some(b as u64 + 1),
            // After the all-pairs workloads' lanes and the pairs alone.
            first_lane: (n * n) as u32 * demo.lanes + (n * n + k) as u32,
            region: FABRIC_TARGET.0,
            key: FABRIC_TARGET.1,
            local_region: FABRIC_LOCAL,
            lanes: 1,
            seconds,
            seed: (2 * n * n + k) as u64,
            ..Default::default()
        };
        setup.client(a).workload_start(spec)?;
        std::thread::sleep(Duration::from_secs_f64(seconds / 3.0));
        // Node a's frames around the cut, recorded by its own core.
        let socket = setup.running.sockets[a].clone();
        let capture = std::thread::spawn(move || {
            Client::new(&socket, STEP).capture(0, CUT_CAPTURE_FRAMES, CUT_CAPTURE_SECONDS)
        });
        std::thread::sleep(CAPTURE_LEAD);
        xdp_cut(setup, (a, b), true)?;
        let failover_us = capture
            .join()
            .map_err(|_| "the capture thread panicked".to_string())?
            .ok()
            .and_then(|c| crate::failover::failover_us(&c, &Graph::ifname(b), b as u64 + 1));
        let what = format!("node {a}'s verbs to node {b} across the cut, alone");
        let r = run_out(setup, (a, b), &what, interrupted)?;
        measured.push(CutAlone {
            from: a,
            to: b,
            verbs: r.completed,
            stall_us: r.longest_gap_us,
            failover_us,
            ledger_exact: ledger_exact(setup, a, b, &r)?,
        });
        xdp_cut(setup, (a, b), false)?;
        wait(
            setup,
            Duration::from_secs(60),
            &format!("the link {a}-{b} back, its route direct and the views agreed"),
            interrupted,
            |s| s.views_agree(n) && s.fabric(a).is_some_and(|v| hops_to(&v.routes, b) == 1),
        )?;
    }
    Ok(measured)
}

/// The link between `a` and `b` cut (or healed) by the XDP programs of its
/// two interfaces, which drop every OAE frame they receive: the kernel's
/// devices stay up, so the cut costs the dataplanes nothing but the frames
/// (`ip link set down` closes a device under its XDP program and socket).
fn xdp_cut(setup: &Setup, (a, b): (usize, usize), down: bool) -> Result<(), String> {
    for (i, j) in [(a, b), (b, a)] {
        let change = FaultChange {
            link_down: Some(down),
            iface: Some(Graph::ifname(j)),
            ..FaultChange::default()
        };
        setup
            .client(i)
            .fault(change)
            .map_err(|e| format!("node {i}'s fault injector on f{j}: {e}"))?;
    }
    Ok(())
}

fn print_cuts_alone(measured: &[CutAlone], pairs: &[PairLatency]) {
    let Some(first) = measured.first() else {
        return;
    };
    let ms = |us: Option<f64>| us.map_or("-".to_string(), |us| format!("{:.2}", us / 1e3));
    let failovers: Vec<String> = measured.iter().map(|c| ms(c.failover_us)).collect();
    let stalls: Vec<String> = measured.iter().map(|c| ms(Some(c.stall_us))).collect();
    outln!(
        "the cut alone, one verb at a time from {} to {}, cut (by XDP) and healed {} times: \
         from the last answer over the link to the first over another path (node {}'s \
         capture) {} ms; the workload's longest stall {} ms",
        first.from,
        first.to,
        measured.len(),
        first.from,
        failovers.join(", "),
        stalls.join(", ")
    );
    if let Some(p) = pairs
        .iter()
        .find(|p| (p.from, p.to) == (first.from, first.to))
    {
        outln!(
            "  (the same pair alone without a cut: at most {:.2} ms between completions)",
            p.longest_gap_us / 1e3
        );
    }
    if !measured.iter().all(|c| c.ledger_exact) {
        outln!("  a ledger of the cut alone DIFFERS from its ends' memory");
    }
}

/// The median of each pair's p50 by hops, and the relayed pairs' against
/// the neighbours'.
fn print_pair_latencies(measured: &[PairLatency], demo: &FabricDemo) {
    let idle = match demo.idle {
        IdlePolicy::Spin => "spinning",
        IdlePolicy::Yield => "yielding",
        IdlePolicy::Sleep => "sleeping",
    };
    outln!(
        "each pair alone, one verb in flight, {:.1} s each, {idle} cores:",
        demo.pair_latency.as_secs_f64()
    );
    let most = measured.iter().map(|m| m.hops).max().unwrap_or(0);
    let neighbours = median_p50(measured, 1);
    for hops in 1..=most {
        let Some(p50) = median_p50(measured, hops) else {
            continue;
        };
        let pairs = measured.iter().filter(|m| m.hops == hops).count();
        let versus = match neighbours {
            Some(one) if hops > 1 => format!(
                ": {:.2} x the neighbours' (the target: at most {} x)",
                p50 / one,
                2 * hops
            ),
            _ => String::new(),
        };
        outln!("  {hops} hop(s), {pairs} pairs: median p50 {p50:.1} us{versus}");
    }
    if !measured.iter().all(|m| m.ledger_exact) {
        outln!("  a pair's ledger DIFFERS from its ends' memory");
    }
}

fn median_p50(measured: &[PairLatency], hops: u8) -> Option<f64> {
    let mut p50s: Vec<f64> = measured
        .iter()
        .filter(|m| m.hops == hops)
        .map(|m| m.p50_us)
        .collect();
    p50s.sort_by(f64::total_cmp);
    p50s.get(p50s.len() / 2).copied()
}

/// Hops of the route to node `j` among a node's `routes` (0: none).
fn hops_to(routes: &[RouteStatus], j: usize) -> u8 {
    routes
        .iter()
        .find(|x| x.node == j as u64 + 1)
        .map_or(0, |x| x.hops)
}

/// Whether workload `r` of node `i` towards `j` left exactly what its
/// ledger says in both ends' memory.
fn ledger_exact(setup: &Setup, i: usize, j: usize, r: &WorkloadReport) -> Result<bool, String> {
    let local = setup.region(i, FABRIC_LOCAL)?;
    let remote = setup.region(j, FABRIC_TARGET.0)?;
    let at = 2 * r.first_byte;
    let same = |image: &str, expected: &str| image.get(at..at + expected.len()) == Some(expected);
    Ok(same(&remote, &r.expected_remote) && same(&local, &r.expected_local) && r.mismatches == 0)
}

/// Starts phase `name` of every workload: verbs completing from now on
/// count in its own figures too.
fn phase(setup: &Setup, pairs: &[(usize, usize)], name: &str) -> Result<(), String> {
    for &(i, j) in pairs {
        setup
            .client(i)
            .workload_phase(0, 0, Some(j as u64 + 1), name)?;
    }
    Ok(())
}

/// The ordered pairs that run a workload: every pair, or with `--incast T`
/// every node not beside T aimed at T.
fn workload_pairs(demo: &FabricDemo, adj: &[Vec<usize>]) -> Result<Vec<(usize, usize)>, String> {
    let n = demo.nodes;
    let Some(t) = demo.incast else {
        return Ok((0..n)
            .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
            .collect());
    };
    if t >= n {
        return Err(format!(
            "--incast {t}: the fabric's nodes are 0 to {}",
            n - 1
        ));
    }
    let pairs: Vec<_> = (0..n)
        .filter(|&i| i != t && !adj[t].contains(&i))
        .map(|i| (i, t))
        .collect();
    if pairs.is_empty() {
        return Err(format!(
            "--incast {t}: every other node is beside node {t}, so none writes to it through \
             relays (try star:9 and a leaf, e.g. --incast 8)"
        ));
    }
    Ok(pairs)
}

fn print_incast(incast: &IncastReport, pairs: &[PairReport]) {
    let shares: Vec<String> = incast
        .shares
        .iter()
        .map(|s| format!("{:.1}", s * 100.0))
        .collect();
    let p99 = |f: fn(f64, f64) -> f64, from| {
        pairs
            .iter()
            .map(|p| p.workload.latency.p99 as f64 / 1e3)
            .fold(from, f)
    };
    outln!(
        "incast to node {}: each sender's share {} % (the largest {:.1} % above the smallest; \
         the target: within 20 %), p99 {:.0} to {:.0} us, {} frames lost to a full queue (a relay's queue held at most {})",
        incast.target,
        shares.join(" / "),
        incast.spread * 100.0,
        p99(f64::min, f64::INFINITY),
        p99(f64::max, 0.0),
        incast.overrun_drops,
        incast.relay_queue_peak
    );
}

/// The senders' shares of an incast and every frame a full queue cost.
fn incast_report(
    setup: &Setup,
    target: usize,
    pairs: &[PairReport],
) -> Result<IncastReport, String> {
    let total: u64 = pairs.iter().map(|p| p.workload.completed).sum();
    let shares: Vec<f64> = pairs
        .iter()
        .map(|p| p.workload.completed as f64 / total.max(1) as f64)
        .collect();
    let most = shares.iter().copied().fold(0.0, f64::max);
    let least = shares.iter().copied().fold(f64::INFINITY, f64::min);
    let (mut overrun_drops, mut relay_queue_peak) = (0, 0);
    for i in 0..setup.running.sockets.len() {
        let fabric = setup.fabric(i).ok_or(format!("node {i} has no fabric"))?;
        let counter = |name: &str| fabric.counters.get(name).copied().unwrap_or(0);
        overrun_drops += counter("dropped_queue_full");
        relay_queue_peak = relay_queue_peak.max(counter("relay_queue_peak"));
        let stats = setup
            .client(i)
            .stats()
            .map_err(|e| format!("node {i}'s stats: {e}"))?;
        for q in &stats.queues {
            for name in ["kernel_rx_dropped", "kernel_rx_ring_full"] {
                overrun_drops += q.driver.get(name).copied().unwrap_or(0);
            }
        }
    }
    Ok(IncastReport {
        target,
        spread: most / least.max(f64::MIN_POSITIVE) - 1.0,
        shares,
        overrun_drops,
        relay_queue_peak,
    })
}

/// Every workload's report, its ledger compared with both ends' memory.
fn gather(
    setup: &Setup,
    demo: &FabricDemo,
    ordered: &[(usize, usize)],
    cut: Option<(usize, usize)>,
    rerouted: Option<Duration>,
) -> Result<FabricDemoReport, String> {
    let n = demo.nodes;
    let mut pairs = Vec::new();
    for &(i, j) in ordered {
        let routes = setup.fabric(i).map(|v| v.routes).unwrap_or_default();
        let r = setup.report(i, j)?;
        pairs.push(PairReport {
            from: i,
            to: j,
            hops: hops_to(&routes, j),
            ledger_exact: ledger_exact(setup, i, j, &r)?,
            workload: r,
        });
    }
    // The cut's failover, from the dataplanes' own clocks: the longest the
    // verbs between its ends went without a completion (from the last
    // before the cut to the first after it, over the other way round; an
    // upper bound). The time the demo saw a verb across it includes its
    // own `ip` command and control requests.
    let stall = cut.map(|(a, b)| {
        pairs
            .iter()
            .filter(|p| (p.from, p.to) == (a, b) || (p.from, p.to) == (b, a))
            .map(|p| p.workload.longest_gap_us)
            .fold(0.0, f64::max)
    });
    let rerouted = stall
        .map(|us| Duration::from_secs_f64(us / 1e6))
        .or(rerouted);
    let view = setup.fabric(0).ok_or("node 0 has no fabric")?;
    let srtt = cut
        .and_then(|(_, b)| view.paths.iter().find(|p| p.node == b as u64 + 1))
        .map(|p| p.srtt_ns);
    Ok(FabricDemoReport {
        topology: format!("{}:{n}", demo.shape.name()),
        seconds: demo.seconds,
        lanes: demo.lanes,
        cut,
        reroute_ms: rerouted.map(|t| t.as_secs_f64() * 1e3),
        reroute_path_rtts: rerouted
            .zip(srtt)
            .map(|(t, s)| t.as_nanos() as f64 / s.max(1) as f64),
        path_srtt_us: srtt.map(|s| s as f64 / 1e3),
        exact: pairs.iter().all(|p| p.ledger_exact),
        pairs,
        views_agree: setup.views_agree(n),
        view: view.view,
        pair_latency: Vec::new(),
        cuts_alone: Vec::new(),
        incast: None,
        idle: format!("{:?}", demo.idle).to_lowercase(),
    })
}

/// A row per pair, then what the cut cost and the verdict.
fn print_table(r: &FabricDemoReport) {
    outln!(
        "{:>4} {:>4} {:>5} {:>9} {:>7} {:>5} {:>9} {:>10} {:>10}  ledger",
        "from",
        "to",
        "hops",
        "verbs",
        "failed",
        "mism",
        "p50 us",
        "p99.9 us",
        "max us"
    );
    for p in &r.pairs {
        let w = &p.workload;
        outln!(
            "{:>4} {:>4} {:>5} {:>9} {:>7} {:>5} {:>9.1} {:>10.1} {:>10.1}  {}",
            p.from,
            p.to,
            p.hops,
            w.completed,
            w.failed,
            w.mismatches,
            w.latency.p50 as f64 / 1e3,
            w.latency.p999 as f64 / 1e3,
            w.latency.max as f64 / 1e3,
            if p.ledger_exact { "exact" } else { "DIFFERS" }
        );
        if !w.errors.is_empty() {
            let errors: Vec<String> = w.errors.iter().map(|(e, c)| format!("{c} {e}")).collect();
            outln!("{:>10} failed (no effect): {}", "", errors.join(", "));
        }
    }
    if let (Some((a, b)), Some(ms)) = (r.cut, r.reroute_ms) {
        outln!(
            "cut {a}-{b}: the verbs between {a} and {b} stalled at most {ms:.2} ms across the cut \
             (the longest time with no completion, from the last on the link to the first over \
             the other way round: {:.1} round trips of that path, {:.0} us each)",
            r.reroute_path_rtts.unwrap_or(0.0),
            r.path_srtt_us.unwrap_or(0.0)
        );
    }
    if let Some(incast) = &r.incast {
        print_incast(incast, &r.pairs);
    }
    outln!(
        "view {} {}",
        r.view,
        if r.views_agree {
            "agreed by every node"
        } else {
            "NOT agreed"
        }
    );
}
