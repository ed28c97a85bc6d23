//! `oae-perf`: the benchmark suite. Each experiment compares OAE side by
//! side with references on the same veth pair and cores and writes
//! `results.json`, `report.md` and SVG plots into one directory.
//!
//! ```sh
//! sudo ./target/release/oae-perf suite                 # everything, 5 repetitions
//! sudo ./target/release/oae-perf line-rate --reps 3    # one experiment
//! sudo ./target/release/oae-perf suite --quick         # the CI smoke run
//! ./target/release/oae-perf check results/<timestamp>  # is it well formed?
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use oae_perf::suite::{self, Experiment, Options};

#[derive(Parser, Debug)]
#[command(
    name = "oae-perf",
    version = oae_version::VERSION,
    about = "OAE benchmark suite: line rate, latency, failure injection"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Every experiment, in one run.
    Suite(RunArgs),
    /// Verbs/s vs slots and vs driver, against the raw AF_XDP reflector
    /// and dpdk-testpmd in macswap mode.
    LineRate(RunArgs),
    /// CAS and READ round trips against raw AF_XDP ping-pong and sockperf
    /// UDP, on two cores and on one.
    Latency(RunArgs),
    /// Loss, corruption and link flaps: OAE against the RoCE RC model and
    /// against Redis INCR over kernel TCP (redis-server, redis-benchmark),
    /// hurt by the same XDP faults on its port.
    Failure(RunArgs),
    /// The Wave-like offload over emulated PCIe: FITO rings (each of
    /// Wave's mitigations alone and all) against the bilateral swap.
    Ipu(RunArgs),
    /// Verbs/s with one and two queues (one link each) per dataplane, over
    /// AF_XDP and DPDK net_memif, every queue on one shared memory.
    Scale(RunArgs),
    /// Through a link cut: a ring of four dataplanes running the fabric
    /// (the cut link's traffic takes the other way round) against a pair
    /// whose one link goes down, OAE and the RC model; and an incast, seven
    /// leaves of a star writing to an eighth through the hub.
    Fabric(RunArgs),
    /// libfabric's fi_pingpong over the oae provider against libfabric's
    /// tcp and udp providers, on the same cores.
    Libfabric(RunArgs),
    /// WRITE and READ from 64 to 960 bytes over AF_XDP: verbs/s, Mpps and
    /// Gb/s per size, as perftest's `-a` sweeps.
    Sizes(RunArgs),
    /// Checks that a results directory is complete and well formed.
    Check { dir: PathBuf },
    /// Writes a results directory's report and plots again from its
    /// results.json (measures nothing).
    Report { dir: PathBuf },
    /// Writes the targets table of a document (docs/BENCHMARKS.md) again
    /// from the run its generated block names, or from `--run`.
    Doc {
        /// The document, e.g. docs/BENCHMARKS.md.
        file: PathBuf,
        /// A run's directory under the repository, e.g.
        /// results/20261124-001023Z.
        #[arg(long)]
        run: Option<String>,
    },
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// Short trials and one repetition: checks that everything runs.
    #[arg(long)]
    quick: bool,
    /// Repetitions of every trial (default 5; 1 with --quick).
    #[arg(long)]
    reps: Option<usize>,
    /// Seconds of each line-rate and latency trial.
    #[arg(long)]
    secs: Option<f64>,
    /// Seconds of each failure trial (faults in its middle third).
    #[arg(long)]
    failure_secs: Option<f64>,
    /// Slot counts of the line-rate sweep, e.g. 1,16,256.
    #[arg(long, value_delimiter = ',')]
    slots: Option<Vec<u16>>,
    /// Verb lanes of the failure trials.
    #[arg(long)]
    failure_lanes: Option<u32>,
    /// Cores of side a and side b, e.g. 0,1.
    #[arg(long, value_delimiter = ',')]
    cores: Option<Vec<usize>>,
    /// Milliseconds of each IPU offload run.
    #[arg(long)]
    ipu_ms: Option<u64>,
    /// Emulated PCIe costs of the IPU experiment, e.g. read=750,atomic=1000
    /// or zero,doorbell=1600 (its read cost is swept over 0 and 750).
    #[arg(long)]
    pcie_cost: Option<String>,
    /// The oaectl binary; by default the one next to oae-perf.
    #[arg(long)]
    oaectl: Option<PathBuf>,
    /// The directory holding the oae libfabric provider (liboae-fi.so); by
    /// default ../oae-c/lib/libfabric from oaectl's directory, where
    /// `cargo xtask install-c --prefix target/oae-c` puts it.
    #[arg(long)]
    fi_provider: Option<PathBuf>,
    /// Output directory; by default results/<UTC timestamp>.
    #[arg(long)]
    out: Option<PathBuf>,
}

impl RunArgs {
    fn options(&self) -> Result<Options, String> {
        let oaectl = match &self.oaectl {
            Some(p) => p.clone(),
            None => std::env::current_exe()
                .map_err(|e| e.to_string())?
                .with_file_name("oaectl"),
        };
        let out = self
            .out
            .clone()
            .unwrap_or_else(|| PathBuf::from("results").join(suite::utc_timestamp()));
        let mut o = if self.quick {
            Options::quick(oaectl, out)
        } else {
            Options::full(oaectl, out)
        };
        if let Some(r) = self.reps {
            o.reps = r;
        }
        if let Some(s) = self.secs {
            o.secs = s;
        }
        if let Some(s) = self.failure_secs {
            o.failure_secs = s;
        }
        if let Some(s) = &self.slots {
            o.slots = s.clone();
        }
        if let Some(ms) = self.ipu_ms {
            o.ipu_ms = ms;
        }
        if let Some(c) = &self.pcie_cost {
            o.pcie_cost = c.clone();
        }
        if let Some(p) = &self.fi_provider {
            o.fi_provider = p.clone();
        }
        if let Some(l) = self.failure_lanes {
            o.failure_lanes = l;
        }
        if let Some(c) = &self.cores {
            let [a, b] = c[..] else {
                return Err(format!("--cores {c:?}: give two cores, e.g. 0,1"));
            };
            o.cores = [a, b];
        }
        o.check()?;
        Ok(o)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (args, experiments): (&RunArgs, Vec<Experiment>) = match &cli.command {
        Cmd::Suite(a) => (a, Experiment::ALL.to_vec()),
        Cmd::LineRate(a) => (a, vec![Experiment::LineRate]),
        Cmd::Latency(a) => (a, vec![Experiment::Latency]),
        Cmd::Failure(a) => (a, vec![Experiment::Failure]),
        Cmd::Ipu(a) => (a, vec![Experiment::Ipu]),
        Cmd::Scale(a) => (a, vec![Experiment::Scale]),
        Cmd::Fabric(a) => (a, vec![Experiment::Fabric]),
        Cmd::Libfabric(a) => (a, vec![Experiment::Libfabric]),
        Cmd::Sizes(a) => (a, vec![Experiment::Sizes]),
        Cmd::Doc { file, run } => {
            let written = std::fs::read_to_string(file)
                .map_err(|e| format!("cannot read {}: {e}", file.display()))
                .and_then(|doc| {
                    suite::doc::regenerate(&doc, Path::new("."), run.as_deref())
                        .map_err(|e| format!("{}: {e}", file.display()))
                })
                .and_then(|doc| {
                    std::fs::write(file, doc)
                        .map_err(|e| format!("cannot write {}: {e}", file.display()))
                });
            return match written {
                Ok(()) => {
                    println!("wrote the targets of {}", file.display());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("oae-perf: {e}");
                    ExitCode::FAILURE
                }
            };
        }
        Cmd::Report { dir } => {
            return match suite::rerender(dir) {
                Ok(()) => {
                    println!("wrote {}/{{report.md, *.svg}}", dir.display());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("oae-perf: {e}");
                    ExitCode::FAILURE
                }
            };
        }
        Cmd::Check { dir } => {
            return match suite::validate(dir) {
                Ok(summary) => {
                    println!("{}: {summary}", dir.display());
                    ExitCode::SUCCESS
                }
                Err(problems) => {
                    eprintln!("{}: not well formed:\n{problems}", dir.display());
                    ExitCode::FAILURE
                }
            };
        }
    };
    let opts = match args.options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("oae-perf: {e}");
            return ExitCode::from(2);
        }
    };
    match suite::run(&opts, &experiments) {
        Ok(results) => {
            println!(
                "wrote {}/{{results.json, report.md, *.svg}}",
                opts.out.display()
            );
            for t in &results.targets {
                println!(
                    "  {:<44} {:>6}  wanted {:<8} {}",
                    t.name,
                    t.ratio.map_or("-".into(), |r| format!("{r:.2}")),
                    t.wanted.split(' ').take(2).collect::<Vec<_>>().join(" "),
                    match t.met {
                        Some(true) => "met",
                        Some(false) => "NOT met",
                        None => "not measured",
                    }
                );
            }
            let failed: usize = results.measurements.iter().map(|m| m.failures.len()).sum();
            if failed > 0 {
                println!("  {failed} trial(s) failed; see report.md");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("oae-perf: {e}");
            ExitCode::FAILURE
        }
    }
}
