//! One CAS round trip through the OAE core on both ends, over a perfect
//! in-memory wire:
//!
//! initiator `submit` → `poll_transmit` (REQUEST encoded) → target
//! `handle_frame` (decoded, link step, CAS applied tentatively, ECHO built) →
//! target `poll_transmit` → initiator `handle_frame` (echo verified,
//! completion queued) → `poll_event`; then the commit reaches the target:
//!
//! * `piggybacked_commit`: steady state of a continuous stream, the commit
//!   rides on the slot's next REQUEST (2 frames per verb);
//! * `explicit_commit`: every CAS is followed by its COMMIT / COMMIT_ACK
//!   exchange (4 frames per verb);
//! * `sealed_piggybacked_commit`: the first path on an authenticated link
//!   (the core seals and opens every frame: AES-GCM trailer, replay
//!   window), to show what authentication adds. The target below is the
//!   plain paths'; this one has none.
//! * `write_64` and `send_64`: a 64-byte WRITE, and a 64-byte SEND into a
//!   receive the target posts for it (the receive reported at the target
//!   too), both in the first path's steady state: a message verb should
//!   cost the core no more than a WRITE of its size (the ratio is printed).
//!
//! Reports ns per verb (median, min and max over batches; batches of the two
//! paths interleaved so drift hits both alike) and heap allocations per verb
//! counted by a wrapping global allocator after warm-up. Prints a table, then
//! one JSON line (the only line starting with `{`).
//!
//! Run: `cargo bench -p oae-perf --bench cas_round_trip`.
//!
//! Environment:
//! * `OAE_BENCH_QUICK=1` (or the `--quick` argument): tiny counts, to check
//!   that it runs; the figures mean nothing. Quick mode is also used when the
//!   binary is started without `--bench` (as `cargo test --all-targets` does).
//! * `OAE_BENCH_CORE=<n>`: pin to core n instead of the last one.
//! * `OAE_BENCH_BATCHES`, `OAE_BENCH_BATCH_VERBS`: override the counts.
//! * `OAE_BENCH_PATHS=piggybacked_commit,explicit_commit`: measure only
//!   these paths (to profile one at a time, e.g. under callgrind).

use std::time::{Duration, Instant};

use oae_perf::{
    AllocCount, CountingAlloc, MachineFacts, Pair, Summary, allowed_cpus, machine_facts,
    pin_preferred, round_to,
};
use serde::Serialize;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::new();

/// The goal of the plain paths: under this many ns per verb, with no
/// allocation.
const TARGET_NS: f64 = 100.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    Piggybacked,
    Explicit,
    SealedPiggybacked,
    Write64,
    Send64,
}

impl Path {
    const ALL: [Path; 5] = [
        Path::Piggybacked,
        Path::Explicit,
        Path::SealedPiggybacked,
        Path::Write64,
        Path::Send64,
    ];

    fn name(self) -> &'static str {
        match self {
            Path::Piggybacked => "piggybacked_commit",
            Path::Explicit => "explicit_commit",
            Path::SealedPiggybacked => "sealed_piggybacked_commit",
            Path::Write64 => "write_64",
            Path::Send64 => "send_64",
        }
    }

    fn pair(self) -> Pair {
        match self {
            Path::SealedPiggybacked => Pair::sealed(),
            _ => Pair::new(),
        }
    }

    /// The ns per verb this path must stay under, if it has a target.
    fn target_ns(self) -> Option<f64> {
        match self {
            Path::Piggybacked | Path::Explicit => Some(TARGET_NS),
            Path::SealedPiggybacked | Path::Write64 | Path::Send64 => None,
        }
    }

    fn frames_per_verb(self) -> u32 {
        match self {
            Path::Explicit => 4,
            _ => 2,
        }
    }

    /// `n` verbs back to back; each call is monomorphic so the driver inlines.
    fn run(self, pair: &mut Pair, n: u64) {
        match self {
            Path::Piggybacked | Path::SealedPiggybacked => {
                (0..n).for_each(|_| pair.cas_piggybacked_commit())
            }
            Path::Explicit => (0..n).for_each(|_| pair.cas_explicit_commit()),
            Path::Write64 => (0..n).for_each(|_| pair.write_piggybacked_commit()),
            Path::Send64 => (0..n).for_each(|_| pair.send_piggybacked_commit()),
        }
    }

    /// The protocol did what the path claims: every verb swapped (every
    /// message landed), and commits went the intended way.
    fn check(self, pair: &Pair) -> Result<(), String> {
        if matches!(self, Path::Write64 | Path::Send64) {
            return check_messages(self, pair);
        }
        let (i, t) = (pair.initiator_stats(), pair.target_stats());
        let n = pair.value();
        let mut bad = Vec::new();
        if pair.target_word() != n {
            bad.push(format!("target word {} != {n} verbs", pair.target_word()));
        }
        if i.echoes_verified != n || t.transfers_applied != n {
            bad.push(format!(
                "{n} verbs but {} echoes verified, {} applied",
                i.echoes_verified, t.transfers_applied
            ));
        }
        let (commits, committed) = match self {
            Path::Explicit => (n, n),
            _ => (0, n.saturating_sub(1)),
        };
        if i.commits_sent != commits || t.transfers_committed != committed {
            bad.push(format!(
                "expected {commits} COMMIT frames and {committed} committed, got {} and {}",
                i.commits_sent, t.transfers_committed
            ));
        }
        let trouble = i.retries + i.echo_mismatches + i.echo_missing + t.protocol_violations;
        if trouble != 0 {
            bad.push(format!("{trouble} retries/mismatches/violations"));
        }
        match (self, pair.auth_stats()) {
            (Path::SealedPiggybacked, None) => bad.push("the link is not authenticated".into()),
            (Path::SealedPiggybacked, Some((i, t))) => {
                let dropped: u64 = i.dropped.iter().chain(&t.dropped).sum();
                if i.sealed != t.verified || t.sealed != i.verified || i.sealed < n || dropped != 0
                {
                    bad.push(format!(
                        "{n} verbs but sealed {}/{}, verified {}/{}, dropped {dropped}",
                        i.sealed, t.sealed, i.verified, t.verified
                    ));
                }
            }
            (_, Some(_)) => bad.push("a plain path ran on an authenticated link".into()),
            (_, None) => {}
        }
        if bad.is_empty() {
            Ok(())
        } else {
            Err(bad.join("; "))
        }
    }
}

/// A message path: every verb echoed and applied, nothing retried, and
/// every SEND but the last (whose commit is still to ride) received.
fn check_messages(path: Path, pair: &Pair) -> Result<(), String> {
    let (i, t) = (pair.initiator_stats(), pair.target_stats());
    let n = t.transfers_applied;
    let trouble = i.retries + i.echo_mismatches + i.echo_missing + t.protocol_violations;
    let received = pair.received();
    let want = if path == Path::Send64 {
        n.saturating_sub(1)
    } else {
        0
    };
    if n == 0 || i.echoes_verified != n || trouble != 0 || received != want {
        return Err(format!(
            "{n} applied, {} echoes verified, {trouble} retries/mismatches/violations, \
             {received} messages received (want {want})",
            i.echoes_verified
        ));
    }
    Ok(())
}

struct Plan {
    quick: bool,
    paths: Vec<Path>,
    batches: usize,
    batch_verbs: u64,
    warmup_verbs: u64,
    /// Warm-up stops early after this long.
    warmup_limit: Duration,
    /// Measured time per path; batches shrink to fit the estimate into it.
    budget: Duration,
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.trim().parse().ok()
}

fn plan() -> Plan {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick_env = std::env::var_os("OAE_BENCH_QUICK").is_some_and(|v| !v.is_empty() && v != "0");
    let quick =
        quick_env || args.iter().any(|a| a == "--quick") || !args.iter().any(|a| a == "--bench");
    let paths = match std::env::var("OAE_BENCH_PATHS") {
        Ok(list) => Path::ALL
            .into_iter()
            .filter(|p| list.split(',').any(|n| n.trim() == p.name()))
            .collect(),
        Err(_) => Path::ALL.to_vec(),
    };
    let mut p = if quick {
        Plan {
            quick,
            paths,
            batches: 3,
            batch_verbs: 2_000,
            warmup_verbs: 2_000,
            warmup_limit: Duration::from_millis(200),
            budget: Duration::from_millis(200),
        }
    } else {
        Plan {
            quick,
            paths,
            batches: 11,
            batch_verbs: 200_000,
            warmup_verbs: 200_000,
            warmup_limit: Duration::from_millis(400),
            budget: Duration::from_millis(2_500),
        }
    };
    if let Some(b) = env_number("OAE_BENCH_BATCHES").filter(|&b| b > 0) {
        p.batches = b as usize;
    }
    if let Some(v) = env_number("OAE_BENCH_BATCH_VERBS").filter(|&v| v > 0) {
        p.batch_verbs = v;
    }
    p
}

struct Measured {
    path: Path,
    batch_verbs: u64,
    warmup_verbs: u64,
    ns_per_verb: Vec<f64>,
    allocs: AllocCount,
    check: Result<(), String>,
}

impl Measured {
    fn verbs(&self) -> u64 {
        self.batch_verbs * self.ns_per_verb.len() as u64
    }

    fn summary(&self) -> Summary {
        Summary::of(&self.ns_per_verb).expect("at least one batch")
    }

    fn allocs_per_verb(&self) -> f64 {
        self.allocs.allocs as f64 / self.verbs() as f64
    }

    fn bytes_per_verb(&self) -> f64 {
        self.allocs.bytes as f64 / self.verbs() as f64
    }

    /// `None` for a path without a target.
    fn meets_target(&self) -> Option<bool> {
        let target = self.path.target_ns()?;
        Some(self.summary().median < target && self.allocs.allocs == 0 && self.check.is_ok())
    }
}

fn main() {
    // Read before pinning: available_parallelism honours the affinity mask.
    let facts = machine_facts();
    let core = pin_preferred(env_number("OAE_BENCH_CORE").map(|c| c as usize));
    let allowed = allowed_cpus().unwrap_or_else(|| "unknown".into());
    let plan = plan();
    if plan.paths.is_empty() {
        eprintln!(
            "OAE_BENCH_PATHS names no path; known: {}",
            Path::ALL.map(Path::name).join(",")
        );
        std::process::exit(2);
    }

    let setup_start = ALLOC.count();
    let mut pairs: Vec<Pair> = plan.paths.iter().map(|p| p.pair()).collect();
    // Proof the counter counts: building the nodes allocates.
    let setup = ALLOC.count() - setup_start;

    // Warm up (caches, branch predictors, every queue at its working size)
    // and estimate the cost per verb to keep the run inside its budget.
    let mut batch_verbs = vec![plan.batch_verbs; plan.paths.len()];
    let mut warmed = vec![0; plan.paths.len()];
    for (k, &path) in plan.paths.iter().enumerate() {
        let start = Instant::now();
        let mut done = 0;
        while done < plan.warmup_verbs && start.elapsed() < plan.warmup_limit {
            let n = 1_000.min(plan.warmup_verbs - done);
            path.run(&mut pairs[k], n);
            done += n;
        }
        warmed[k] = done;
        let est_ns = start.elapsed().as_nanos() as f64 / done as f64;
        let fit = plan.budget.as_nanos() as f64 / (plan.batches as f64 * est_ns);
        batch_verbs[k] = plan.batch_verbs.min(fit as u64).max(1);
    }

    let mut measured: Vec<Measured> = plan
        .paths
        .iter()
        .enumerate()
        .map(|(k, &path)| Measured {
            path,
            batch_verbs: batch_verbs[k],
            warmup_verbs: warmed[k],
            ns_per_verb: Vec::with_capacity(plan.batches),
            allocs: AllocCount::default(),
            check: Ok(()),
        })
        .collect();
    // A hard stop, should the machine get busier after calibration: twice the
    // budget, but never fewer than three batches per path.
    let deadline = Instant::now() + 2 * plan.budget * plan.paths.len() as u32;
    let mut cut_short = false;
    for b in 0..plan.batches {
        if b >= 3 && Instant::now() > deadline {
            cut_short = true;
            break;
        }
        for (m, pair) in measured.iter_mut().zip(&mut pairs) {
            let n = m.batch_verbs;
            let before = ALLOC.count();
            let start = Instant::now();
            m.path.run(pair, n);
            let elapsed = start.elapsed();
            let after = ALLOC.count();
            m.allocs += after - before;
            m.ns_per_verb.push(elapsed.as_nanos() as f64 / n as f64);
        }
    }
    for (m, pair) in measured.iter_mut().zip(&pairs) {
        m.check = m.path.check(pair);
    }

    print_table(&facts, core, &allowed, &plan, setup, &measured);
    if cut_short {
        println!("note: stopped early at the time limit: fewer batches than planned");
    }
    let crc_ns = crc_ns_per_frame(if plan.quick { 10_000 } else { 5_000_000 });
    println!(
        "CRC32C of one 64-byte frame (sealing it): {crc_ns:.1} ns; a verb seals two frames and \
         checks two, so {:.0} ns of each verb is CRC, a chain of dependent crc32 instructions",
        4.0 * crc_ns
    );
    println!(
        "{}",
        json_line(&facts, core, &allowed, &plan, setup, &measured)
    );
    if measured.iter().any(|m| m.check.is_err()) {
        std::process::exit(1);
    }
}

fn print_table(
    facts: &MachineFacts,
    core: Option<usize>,
    allowed: &str,
    plan: &Plan,
    setup: AllocCount,
    measured: &[Measured],
) {
    println!("oae-perf cas_round_trip: one CAS through both cores over a perfect wire");
    println!(
        "machine: {} | nproc {} | kernel {} | loadavg {}",
        facts.cpu_model, facts.nproc, facts.kernel, facts.loadavg
    );
    match core {
        Some(c) => println!("pinned:  core {c} (thread may run on CPUs {allowed})"),
        None => println!("pinned:  NOT pinned (thread may run on CPUs {allowed})"),
    }
    println!(
        "mode:    {}, {} batches per path, interleaved; warm-up up to {} verbs per path{}",
        if plan.quick {
            "QUICK (figures mean nothing)"
        } else {
            "full"
        },
        measured.first().map_or(0, |m| m.ns_per_verb.len()),
        plan.warmup_verbs,
        if measured.iter().any(|m| m.batch_verbs < plan.batch_verbs) {
            format!(
                "; batches shrunk from {} to fit the time budget",
                plan.batch_verbs
            )
        } else {
            String::new()
        }
    );
    println!();
    println!(
        "{:<26} {:>6} {:>11} {:>10} {:>9} {:>9} {:>12} {:>11}  check",
        "path", "frames", "verbs/batch", "ns/verb", "min", "max", "allocs/verb", "bytes/verb"
    );
    println!("{:<26} {:>6} {:>11} {:>10}", "", "", "", "(median)");
    for m in measured {
        let s = m.summary();
        println!(
            "{:<26} {:>6} {:>11} {:>10.1} {:>9.1} {:>9.1} {:>12.4} {:>11.1}  {}",
            m.path.name(),
            m.path.frames_per_verb(),
            m.batch_verbs,
            s.median,
            s.min,
            s.max,
            m.allocs_per_verb(),
            m.bytes_per_verb(),
            match &m.check {
                Ok(()) => "ok".to_string(),
                Err(e) => format!("FAILED: {e}"),
            }
        );
    }
    println!();
    println!(
        "allocator: counts {} allocations ({} bytes) while building the nodes; \
         allocs/verb above are from the measured batches only (after warm-up)",
        setup.allocs, setup.bytes
    );
    for m in measured {
        println!(
            "target (< {TARGET_NS} ns/verb, 0 allocations): {:<26} {}",
            m.path.name(),
            match (plan.quick, m.meets_target()) {
                (_, None) if m.path == Path::SealedPiggybacked => {
                    "none (what authentication adds, for comparison)"
                }
                (_, None) => "none (SEND against WRITE, below)",
                (true, Some(_)) => "not judged in quick mode",
                (false, Some(true)) => "met",
                (false, Some(false)) => "NOT met",
            }
        );
    }
    if let Some(r) = send_vs_write(measured) {
        println!(
            "a 64-byte SEND (receive posted and reported) costs {r:.2} x a 64-byte WRITE \
             (wanted <= 1){}",
            if plan.quick { "; quick mode" } else { "" }
        );
    }
    println!(
        "note: CPUs may be shared with other work (loadavg above); figures drift between runs."
    );
}

/// `send_64`'s median over `write_64`'s, if both were measured.
fn send_vs_write(measured: &[Measured]) -> Option<f64> {
    let median = |p: Path| {
        measured
            .iter()
            .find(|m| m.path == p)
            .map(|m| m.summary().median)
    };
    Some(median(Path::Send64)? / median(Path::Write64)?)
}

/// What sealing one 64-byte frame costs: the CRC32C over its first 60
/// bytes (the `crc32c` crate's SSE4.2 path where the CPU has it), each
/// frame's CRC depending on the last so none overlaps the next.
fn crc_ns_per_frame(frames: u32) -> f64 {
    let mut frame = [0u8; oae_proto::wire::MIN_FRAME];
    let start = Instant::now();
    for i in 0..frames {
        frame[8] = i as u8;
        oae_proto::wire::seal(std::hint::black_box(&mut frame));
        // The next frame's bytes depend on this one's CRC.
        frame[9] = frame[oae_proto::wire::MIN_FRAME - 1];
    }
    start.elapsed().as_nanos() as f64 / f64::from(frames)
}

/// The JSON line: the only line of the output that starts with `{`.
#[derive(Serialize)]
struct Report<'a> {
    bench: &'static str,
    /// `quick` or `full`.
    mode: &'static str,
    target_ns: f64,
    machine: &'a MachineFacts,
    pinned_core: Option<usize>,
    allowed_cpus: &'a str,
    batches: usize,
    setup_allocs: u64,
    paths: Vec<PathReport<'a>>,
    /// `None` in quick mode, whose figures mean nothing.
    meets_target: Option<bool>,
    /// A 64-byte SEND's median over a 64-byte WRITE's, if both ran.
    send_vs_write: Option<f64>,
}

/// One path's figures in the JSON line.
#[derive(Serialize)]
struct PathReport<'a> {
    name: &'static str,
    frames_per_verb: u32,
    warmup_verbs: u64,
    batch_verbs: u64,
    verbs: u64,
    ns_per_verb: Summary,
    batch_ns_per_verb: Vec<f64>,
    allocs_per_verb: f64,
    alloc_bytes_per_verb: f64,
    allocs_total: u64,
    alloc_bytes_total: u64,
    /// `ok`, or what the protocol did wrong.
    check: &'a str,
    meets_target: Option<bool>,
}

fn json_line(
    facts: &MachineFacts,
    core: Option<usize>,
    allowed: &str,
    plan: &Plan,
    setup: AllocCount,
    measured: &[Measured],
) -> String {
    // Quick runs are too short to judge.
    let judged = |met: bool| (!plan.quick).then_some(met);
    let paths: Vec<PathReport> = measured
        .iter()
        .map(|m| PathReport {
            name: m.path.name(),
            frames_per_verb: m.path.frames_per_verb(),
            warmup_verbs: m.warmup_verbs,
            batch_verbs: m.batch_verbs,
            verbs: m.verbs(),
            // Hundredths of a nanosecond: finer than batches agree on.
            ns_per_verb: m.summary().rounded(2),
            batch_ns_per_verb: m.ns_per_verb.iter().map(|&v| round_to(v, 2)).collect(),
            allocs_per_verb: m.allocs_per_verb(),
            alloc_bytes_per_verb: m.bytes_per_verb(),
            allocs_total: m.allocs.allocs,
            alloc_bytes_total: m.allocs.bytes,
            check: match &m.check {
                Ok(()) => "ok",
                Err(e) => e.as_str(),
            },
            meets_target: m.meets_target().and_then(judged),
        })
        .collect();
    let report = Report {
        bench: "cas_round_trip",
        mode: if plan.quick { "quick" } else { "full" },
        target_ns: TARGET_NS,
        machine: facts,
        pinned_core: core,
        allowed_cpus: allowed,
        batches: measured.first().map_or(0, |m| m.ns_per_verb.len()),
        setup_allocs: setup.allocs,
        paths,
        // The paths with a target; a sealed path only reports.
        meets_target: judged(
            measured
                .iter()
                .filter_map(Measured::meets_target)
                .all(|met| met),
        ),
        send_vs_write: send_vs_write(measured).map(|r| round_to(r, 3)),
    };
    // Numbers and strings in structs: serialising cannot fail.
    serde_json::to_string(&report).expect("the report serialises")
}
