//! `oae-sim`: runs the deterministic simulator. Without arguments it runs a
//! short campaign over every fault class and prints one table row per class.

use std::alloc::System;
use std::process::ExitCode;

use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

use oae_sim::scale::{self, Convergence, SCALE_SCENARIOS};
use oae_sim::topology::Shape;
use oae_sim::{FABRIC_SCENARIOS, Report, SCENARIOS, Scenario, SimConfig, run, scenario};

/// The system allocator, counting: what `scale` reports as the heap a node
/// costs.
#[global_allocator]
static ALLOCATOR: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Bytes the process holds on the heap now.
fn heap_held() -> usize {
    // A reallocation is counted in these two as well as in its own field.
    let s = ALLOCATOR.stats();
    s.bytes_allocated.saturating_sub(s.bytes_deallocated)
}

const USAGE: &str = "\
usage: oae-sim [table] [--seeds N] [--verbs N]
       oae-sim run --scenario NAME --seed N [--verbs N] [--nodes N] [--slots N] [--credits N]
                   [--loss-ppm N] [--dup-ppm N] [--corrupt-ppm N] [--jitter-ns N] [--exponential-delay]
                   [--flaps N] [--restarts N] [--unordered] [--auth|--agree-keys] [--messages-ppm N] [--withdraw-ppm N]
                   [--addresses] [--discover [--forget-after-delays N]]
       oae-sim soak [--scenario NAME|all] [--seeds N] [--first-seed N] [--verbs N] [--unordered] [--auth|--agree-keys]
                    [--messages-ppm N] [--withdraw-ppm N] [--addresses] [--discover]
       oae-sim scale [--topology SHAPE:N]... [--seeds N]

--unordered: links that may reorder (losses found by patience, not by order)
--auth: authenticated links (every frame tagged, replays refused)
--agree-keys: links keyed by identity: a Noise handshake before bring-up and after
    every restart, keys renewed every 300 frames, recorded handshake messages
    replayed onto any link
--addresses: fabric scenarios only: nodes make their own addresses from a space one larger
    than the fabric, which starts as two that merge; a node that must yield its address
    comes back at a free one (PROTOCOL.md, \"Addresses\")
--discover: links are not listed but found: each node's links are a pool its neighbours take
    as it hears them, announcements go out on every port (PROTOCOL.md, \"Discovery\");
    --forget-after-delays N lets a neighbour go whose link is not up N one-way delays
    after it was found (default 6)
--messages-ppm N: draw this share of verbs (parts per million) as SENDs, with receives posted
--withdraw-ppm N: chance per node and step (ppm) that its application takes back a receive
scale: cold starts of large fabrics (rounds to agree against the diameter, memory and advert
  bytes per node); --topology ring|line|mesh|grid|torus|random:N (up to 256 nodes; default: a list).
  Faults at that size, with verbs and every invariant: oae-sim soak --scenario scale

scenarios: clean loss duplication corruption reordering link-flap restart mixed heavy
fabric scenarios (--scenario fabric for all): ring-clean ring-cut ring-failover ring-one-way
  ring-partition mesh-flap line-restart ring-scramble scramble-start fabric-mixed
scale scenarios (--scenario scale for all): ring-64 torus-64 torus-256 random-256";

struct Args {
    command: String,
    scenario: Option<String>,
    topologies: Vec<(Shape, usize)>,
    seed: u64,
    seeds: u64,
    first_seed: u64,
    cfg: SimConfig,
    faults: Vec<(String, u64)>,
}

fn parse(mut argv: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut a = Args {
        command: "table".into(),
        scenario: None,
        topologies: Vec::new(),
        seed: 1,
        seeds: 4,
        first_seed: 1,
        cfg: SimConfig::default(),
        faults: Vec::new(),
    };
    let mut first = true;
    while let Some(arg) = argv.next() {
        if first && !arg.starts_with('-') {
            a.command = arg;
            first = false;
            continue;
        }
        first = false;
        let mut value = |name: &str| -> Result<u64, String> {
            let v = argv.next().ok_or(format!("{name} needs a value"))?;
            v.parse()
                .map_err(|_| format!("{name} takes a whole number, got '{v}'"))
        };
        match arg.as_str() {
            "--scenario" => {
                a.scenario = Some(argv.next().ok_or("--scenario needs a name")?);
            }
            "--topology" => {
                let spec = argv.next().ok_or("--topology needs shape:nodes")?;
                a.topologies.push(Shape::parse_up_to(&spec, 256)?);
            }
            "--seed" => a.seed = value("--seed")?,
            "--seeds" => a.seeds = value("--seeds")?,
            "--first-seed" => a.first_seed = value("--first-seed")?,
            "--verbs" => a.cfg.verbs = value("--verbs")? as usize,
            "--nodes" => a.cfg.nodes = value("--nodes")? as usize,
            "--slots" => a.cfg.link.slots = value("--slots")? as u16,
            "--credits" => a.cfg.link.receive_credits = value("--credits")? as u16,
            "--loss-ppm" | "--dup-ppm" | "--corrupt-ppm" | "--jitter-ns" | "--flaps"
            | "--restarts" => {
                let v = value(&arg)?;
                if arg.ends_with("-ppm") && v >= 1_000_000 {
                    return Err(format!("{arg} must be below 1000000 (100 %), got {v}"));
                }
                a.faults.push((arg, v));
            }
            "--exponential-delay" => a.faults.push((arg, 1)),
            "--unordered" => a.cfg.link.ordered = false,
            "--auth" => a.cfg.auth = true,
            "--agree-keys" => a.cfg.agree_keys = true,
            "--addresses" => a.cfg.addresses = true,
            "--discover" => a.cfg.discover = true,
            "--forget-after-delays" => {
                a.cfg.forget_after_delays = value("--forget-after-delays")?.max(1) as u32
            }
            "--messages-ppm" => a.cfg.messages_ppm = value("--messages-ppm")? as u32,
            "--withdraw-ppm" => a.cfg.withdraw_ppm = value("--withdraw-ppm")? as u32,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    if a.cfg.discover && (a.cfg.auth || a.cfg.agree_keys) {
        return Err(
            "--discover with --auth or --agree-keys: not simulated together yet; run each alone"
                .into(),
        );
    }
    if a.cfg.addresses && a.cfg.agree_keys {
        return Err(
            "--addresses with --agree-keys: not simulated together yet; run each alone".into(),
        );
    }
    if a.cfg.nodes < 2 {
        return Err(format!("--nodes must be at least 2, got {}", a.cfg.nodes));
    }
    a.cfg
        .link
        .validate()
        .map_err(|e| format!("link settings: {e}"))?;
    if let Some(s) = &a.scenario
        && s != "all"
        && s != "fabric"
        && s != "scale"
        && scenario(s).is_none()
    {
        return Err(format!("unknown scenario '{s}'"));
    }
    Ok(a)
}

/// The chosen scenarios, with any fault given on the command line overriding.
fn scenarios(a: &Args) -> Vec<Scenario> {
    let mut list = match a.scenario.as_deref() {
        None | Some("all") => SCENARIOS.iter().chain(&FABRIC_SCENARIOS).copied().collect(),
        Some("fabric") => FABRIC_SCENARIOS.to_vec(),
        Some("scale") => SCALE_SCENARIOS.to_vec(),
        Some(s) => vec![scenario(s).expect("validated")],
    };
    for sc in &mut list {
        for (flag, v) in &a.faults {
            let f = &mut sc.faults;
            match flag.as_str() {
                "--loss-ppm" => f.loss_ppm = *v as u32,
                "--dup-ppm" => f.duplicate_ppm = *v as u32,
                "--corrupt-ppm" => f.corrupt_ppm = *v as u32,
                "--jitter-ns" => f.jitter = *v,
                "--exponential-delay" => f.exponential_delay = true,
                "--flaps" => f.link_flaps = *v as u32,
                "--restarts" => f.restarts = *v as u32,
                _ => unreachable!("parsed above"),
            }
        }
    }
    list
}

fn header() {
    println!(
        "{:<12} {:>5} {:>7} {:>7} {:>6} {:>6} {:>9} {:>8} {:>8} {:>8} {:>7} {:>6} {:>6} {:>6} {:>5} {:>5} {:>8} {:>10} {:>12}",
        "faults",
        "seeds",
        "verbs",
        "ok",
        "err",
        "orphan",
        "reversals",
        "retries",
        "by-order",
        "patience",
        "frames",
        "lost",
        "dup",
        "corrupt",
        "flaps",
        "rstrt",
        "presumed",
        "malformed",
        "checks"
    );
}

fn row(name: &str, seeds: u64, r: &Report) {
    println!(
        "{:<12} {:>5} {:>7} {:>7} {:>6} {:>6} {:>9} {:>8} {:>8} {:>8} {:>7} {:>6} {:>6} {:>6} {:>5} {:>5} {:>8} {:>10} {:>12}",
        name,
        seeds,
        r.verbs,
        r.ok,
        r.err,
        r.orphaned,
        r.reversals,
        r.retries,
        r.lost_by_order,
        r.lost_by_patience,
        r.frames,
        r.lost,
        r.duplicated,
        r.corrupted,
        r.flaps,
        r.restarts,
        r.presumed_commits,
        r.malformed_counted,
        r.checks
    );
    if r.relayed > 0 || r.cuts + r.partitions + r.scrambles > 0 {
        println!(
            "{:<12} fabric: relayed {}, rerouted {}, resolved over a path {}, cuts {}, partitions {}, \
             scrambles {}, largest view number {}",
            "", r.relayed, r.rerouted, r.resolved, r.cuts, r.partitions, r.scrambles, r.max_view
        );
    }
    if r.neighbours_found > 0 {
        println!(
            "{:<12} discovery: {} neighbours found, {} let go (their links never heard them in time), \
             {} announcements",
            "", r.neighbours_found, r.neighbours_forgotten, r.announcements
        );
    }
    if r.address_yields > 0 {
        println!(
            "{:<12} addresses: {} given up to a lower node id, {} of them to a node of the other \
             fabric after the two merged, {} between a node back after half the run and \
             another that took its address",
            "", r.address_yields, r.merge_yields, r.rejoin_yields
        );
    }
    if r.reroutes > 0 {
        println!(
            "{:<12} failover, round trips from a cut to the first verb between its ends done over a \
             path: any verb {} cuts, mean {:.1}, max {}; a verb never in doubt on the cut link {} cuts, \
             mean {:.1}, max {}",
            "",
            r.reroutes,
            r.reroute_rtts_sum as f64 / r.reroutes as f64,
            r.reroute_rtts_max,
            r.fresh_reroutes,
            r.fresh_reroute_rtts_sum as f64 / r.fresh_reroutes.max(1) as f64,
            r.fresh_reroute_rtts_max,
        );
    }
    if r.handshakes > 0 {
        let [unauthenticated, unknown_key, bad_tag, replayed, old_epoch] = r.auth_dropped;
        println!(
            "{:<12} keys agreed: {} handshakes completed, {} recorded handshake messages replayed \
             onto links; frames dropped: {} without trailer, {} unknown key, {} bad tag, {} \
             replayed, {} old epoch",
            "",
            r.handshakes,
            r.replayed,
            unauthenticated,
            unknown_key,
            bad_tag,
            replayed,
            old_epoch
        );
    }
    if r.sends > 0 {
        println!(
            "{:<12} messages: {} SENDs, {} received, {} refused for want of a receive; \
             receives withdrawn {} (refused while a message held them {})",
            "", r.sends, r.messages, r.no_receive, r.withdrawn, r.withdraw_refused
        );
    }
}

fn campaign(a: &Args) -> ExitCode {
    header();
    let mut total = Report::default();
    let mut failed = false;
    for sc in scenarios(a) {
        let mut sum = Report::default();
        for seed in a.first_seed..a.first_seed + a.seeds {
            match run(&a.cfg, &sc, seed) {
                Ok(r) => sum.add(&r),
                Err(f) => {
                    eprintln!("FAILED {}", f);
                    failed = true;
                }
            }
        }
        row(sc.name, a.seeds, &sum);
        total.add(&sum);
    }
    println!(
        "every invariant held: exactly_once, no_trace_after_reversal, isolation, linearizable, no_overrun, single_completion, liveness, in_doubt_resolved, message_order, message_whole{}{}",
        match (a.cfg.addresses, a.cfg.discover) {
            (true, true) => ", addresses_unique, link_to_its_neighbour",
            (true, false) => ", addresses_unique",
            (false, true) => ", link_to_its_neighbour",
            (false, false) => "",
        },
        if failed {
            " — EXCEPT the failures above"
        } else {
            ""
        }
    );
    println!(
        "columns: ok/err = completions; orphan = issuer restarted before the outcome; reversals = \
         transfers undone after loss or mismatch; retries = reattempts (reversal or locked word); \
         by-order = frames found lost by a later frame's answer (no timer); patience = frames \
         given up on after echo_patience_rounds (unordered links only); \
         frames = sent; lost/dup/corrupt = injected; presumed = tentative transfers of a dead \
         initiator committed; malformed = corrupt frames counted and dropped; checks = invariant \
         checks passed"
    );
    println!(
        "{} verbs, {} invariant checks, longest verb {:.1} us of simulated time",
        total.verbs,
        total.checks,
        total.max_latency as f64 / 1e3
    );
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Cold starts of large fabrics, one row each, then the scale scenarios.
fn scale_report(a: &Args) -> ExitCode {
    let shapes = if a.topologies.is_empty() {
        scale::SHAPES.to_vec()
    } else {
        a.topologies.clone()
    };
    println!(
        "{:<12} {:>5} {:>4} {:>9} {:>7} {:>7} {:>8} {:>7} {:>6} {:>9} {:>9} {:>10} {:>9}",
        "fabric",
        "seeds",
        "diam",
        "agree_us",
        "rtts",
        "rounds",
        "2d+4",
        "routes",
        "paths",
        "made_KiB",
        "grown_KiB",
        "adverts/rd",
        "adv_B/rd"
    );
    let mut failed = false;
    for (shape, nodes) in shapes {
        let mut runs: Vec<Convergence> = Vec::new();
        for seed in a.first_seed..a.first_seed + a.seeds {
            match scale::converge(&a.cfg, (shape, nodes), seed, heap_held) {
                Ok(c) => runs.push(c),
                Err(e) => {
                    eprintln!("FAILED {e}");
                    failed = true;
                }
            }
        }
        let Some(worst) = runs.iter().max_by_key(|c| c.converged_at) else {
            continue;
        };
        let mean = |f: fn(&Convergence) -> f64| runs.iter().map(f).sum::<f64>() / runs.len() as f64;
        let bound = 2 * worst.diameter + 4;
        println!(
            "{:<12} {:>5} {:>4} {:>9.1} {:>7.1} {:>7.1} {:>8} {:>7.1} {:>6.1} {:>9.1} {:>9.1} {:>10.2} {:>9.0}",
            format!("{}:{nodes}", shape.name()),
            runs.len(),
            worst.diameter,
            worst.converged_at as f64 / 1e3,
            worst.round_trips(),
            worst.rounds(),
            if worst.rounds() <= bound as f64 {
                format!("{bound} ok")
            } else {
                format!("{bound} OVER")
            },
            mean(|c| c.routes),
            mean(|c| c.paths),
            mean(|c| c.heap_made as f64) / 1024.0,
            mean(|c| c.heap_grown as f64) / 1024.0,
            mean(|c| c.adverts_per_round),
            mean(|c| c.advert_bytes_per_round)
        );
        failed |= worst.rounds() > bound as f64;
    }
    println!(
        "columns: diam = hops across the fabric; agree_us, rtts, rounds = from every node starting at \
         once to every view agreeing on exactly the nodes running (the slowest seed), in simulated \
         microseconds, link round trips and rounds of the links; 2d+4 = the bound checked; routes, \
         paths = held per node; made, grown = heap per node as made (links, region) and what \
         bring-up and convergence added (routes, vectors heard, paths, frames in flight); adverts/rd, adv_B/rd = ADVERT pages and bytes a node sends \
         per round of its links over {} rounds after agreeing",
        scale::STEADY_ROUNDS
    );
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if oae_version::asked(&args) {
        println!("oae-sim {}", oae_version::VERSION);
        return ExitCode::SUCCESS;
    }
    let a = match parse(args.into_iter()) {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("oae-sim: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match a.command.as_str() {
        "table" | "soak" => campaign(&a),
        "scale" => scale_report(&a),
        "run" => {
            let Some(name) = a.scenario.as_deref().filter(|s| *s != "all") else {
                eprintln!("oae-sim: run needs --scenario NAME\n{USAGE}");
                return ExitCode::from(2);
            };
            let _ = name;
            let sc = scenarios(&a)[0];
            match run(&a.cfg, &sc, a.seed) {
                Ok(r) => {
                    header();
                    row(sc.name, 1, &r);
                    println!("seed {} passed every invariant", a.seed);
                    ExitCode::SUCCESS
                }
                Err(f) => {
                    eprintln!("FAILED {f}");
                    ExitCode::FAILURE
                }
            }
        }
        other => {
            eprintln!("oae-sim: unknown command '{other}'\n{USAGE}");
            ExitCode::from(2)
        }
    }
}
