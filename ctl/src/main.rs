//! `oaectl`: talks to running OAE dataplanes over their control sockets, and
//! runs the two-namespace demo.

#[macro_use]
mod out;

mod capture;
mod demo;
mod fabric_demo;
mod failover;
mod failure;
mod fi_demo;
mod host_demo;
mod host_verbs;
mod numbers;
mod pair;
mod running;
mod view;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{CommandFactory, Parser, Subcommand};
use failure::Failure;
use oae_client::control::{Client, ErrorCode, FaultChange, KeyChange, OutputView, VerbSpec};
use oae_client::stats::DataplaneStats;
use oae_client::status::{DataplaneStatus, QueueFabric};
use oae_config::cli_docs::{self, Shell};
use oae_config::{CONTROL_DIR, default_control_socket};
use oae_pmd::xdp::{FaultConfig, FaultScope, apply_fault_setting};
use oae_swapring::report::ClaimReport;
use serde::Serialize;

const TIMEOUT: Duration = Duration::from_secs(35);

#[derive(Parser)]
#[command(
    name = "oaectl",
    version = oae_version::VERSION,
    about = "Control tool for OAE dataplanes",
    after_help = failure::EXIT_STATUSES
)]
struct Cli {
    /// Control socket of the dataplane.
    #[arg(long, short, env = "OAE_SOCKET", global = true)]
    socket: Option<PathBuf>,
    /// Dataplane name: its socket is /run/oae/<name>.sock.
    #[arg(long, short, global = true)]
    name: Option<String>,
    /// Print the answer as JSON (the serde types oaed answers with), for
    /// programs; every command takes it.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Links: state, epochs, slots in use, credits, RTT estimate.
    Status,
    /// The fabric: the numbered view of live members, routes, paths and
    /// transfers still in doubt, per queue that runs one.
    Members,
    /// Every counter that is not zero, grouped (loop, driver, links,
    /// verbs, XDP), with its rate per second over --interval; `--json` has
    /// every counter, at once.
    Stats {
        /// Seconds between the two samples the rates come from (0: totals
        /// only, at once).
        #[arg(long, default_value_t = 1.0, value_parser = stats_interval)]
        interval: f64,
    },
    /// Latency of completed verbs: percentiles and buckets.
    Hist {
        #[arg(long, default_value_t = 0)]
        queue: u16,
    },
    /// Runs one verb against a peer's memory and prints its result.
    Verb {
        /// The peer, by node id: the dataplane picks an up link to it.
        #[arg(long, conflicts_with_all = ["queue", "link"])]
        node: Option<u64>,
        #[arg(long, default_value_t = 0)]
        queue: u16,
        /// The queue's link (its peers in configuration order).
        #[arg(long, default_value_t = 0)]
        link: u16,
        #[command(subcommand)]
        verb: VerbCmd,
    },
    /// Posts a receive on a link and prints the message the peer's next
    /// SEND puts in it (its bytes in hex and its immediate data); gives
    /// the receive back if none comes within --timeout.
    Recv {
        #[arg(long, default_value_t = 0)]
        queue: u16,
        #[arg(long, default_value_t = 0)]
        link: u16,
        /// Where the message lands: a region of this dataplane's memory…
        #[arg(long, value_parser = numbers::parse::<u16>)]
        region: u16,
        /// … at this offset …
        #[arg(long, value_parser = numbers::parse::<u32>, default_value_t = 0)]
        offset: u32,
        /// … and at most this many bytes (up to 960).
        #[arg(long, default_value_t = 960)]
        len: u16,
        /// Seconds to wait for a message (at most 50).
        #[arg(long, default_value_t = 10.0)]
        timeout: f64,
    },
    /// Registered memory.
    Region {
        #[command(subcommand)]
        cmd: RegionCmd,
    },
    /// The XDP fault injector.
    Fault {
        #[command(subcommand)]
        cmd: FaultCmd,
    },
    /// The keys of an authenticated link (`[queue.auth]`): show, add, use,
    /// retire, or roll to a new one without a pause. Keys are read from a
    /// file (or `-`, stdin) as 64 hex digits, never from the command line.
    Key {
        #[arg(long, default_value_t = 0)]
        queue: u16,
        #[arg(long, default_value_t = 0)]
        link: u16,
        #[command(subcommand)]
        cmd: KeyCmd,
    },
    /// Refreshing view of status and counters, with rates since the last
    /// refresh.
    Watch {
        /// Seconds between refreshes, 0.05 to 3600.
        #[arg(long, default_value_t = 1.0, value_parser = watch_interval)]
        interval: f64,
        /// Stop after this many refreshes (0: until Ctrl-C).
        #[arg(long, default_value_t = 0)]
        count: u64,
    },
    /// Asks the dataplane to stop (it drains, detaches XDP and exits).
    Shutdown,
    /// A pair to drive by hand: `pair up` makes two namespaces, a veth
    /// pair and a dataplane in each and leaves them running; `pair down`
    /// removes them.
    Pair {
        #[command(subcommand)]
        cmd: pair::PairCmd,
    },
    /// Two namespaces joined by a veth pair, a dataplane in each, a mixed
    /// verb workload with loss injected, and an exactly-once check.
    Demo(Box<demo::DemoArgs>),
    /// A swap-ring region (the host ring of an IPU deployment, or any
    /// region of the swap-ring experiments): header, both sides' liveness
    /// and counters, ring indexes, swap slots by state. Reads the shared
    /// memory directly; no dataplane needs to answer.
    SwapRing {
        /// The region's file, e.g. /dev/shm/oae-host-a.
        path: PathBuf,
    },
    /// Runs as a host program on a dataplane's host ring: a window of
    /// FETCH-ADDs through the ring, the dataplane and its peer; prints the
    /// rate, the latency seen and every outcome.
    HostVerbs(host_verbs::HostVerbsArgs),
    /// Records the next OAE frames a queue of the dataplane receives and
    /// sends into a pcapng file (`-w FILE`), from its polling core: open it
    /// in Wireshark with tools/wireshark/oae.lua.
    Capture(capture::CaptureArgs),
    /// Prints oaectl's completion script for a shell, e.g.
    /// `oaectl completions bash > /etc/bash_completion.d/oaectl`.
    Completions { shell: Shell },
    /// Writes oaectl's manual pages (oaectl.1 and one per command) into
    /// DIR, e.g. /usr/local/share/man/man1.
    Man { dir: PathBuf },
}

#[derive(Subcommand)]
enum VerbCmd {
    /// Reads the peer's block into a local block; prints the bytes landed.
    Read {
        #[command(flatten)]
        at: Target,
        /// The local region the bytes land in.
        #[arg(long, value_parser = numbers::parse::<u16>)]
        local_region: u16,
        #[arg(long, value_parser = numbers::parse::<u32>)]
        local_offset: u32,
        #[arg(long)]
        len: u16,
    },
    Write {
        #[command(flatten)]
        at: Target,
        /// Bytes in hex.
        #[arg(long)]
        data: String,
    },
    Cas {
        #[command(flatten)]
        at: Target,
        #[arg(long, value_parser = numbers::parse::<u64>)]
        expected: u64,
        #[arg(long, value_parser = numbers::parse::<u64>)]
        new: u64,
    },
    Faa {
        #[command(flatten)]
        at: Target,
        #[arg(long, value_parser = numbers::parse::<u64>)]
        add: u64,
    },
    Swap {
        #[command(flatten)]
        at: Target,
        #[arg(long, value_parser = numbers::parse::<u64>)]
        new: u64,
    },
    /// Multi-word compare-and-swap: --word OFFSET:EXPECTED:NEW, repeated.
    Mcas {
        #[arg(long, value_parser = numbers::parse::<u16>)]
        region: u16,
        #[arg(long, value_parser = numbers::parse::<u32>)]
        key: u32,
        #[arg(long = "word", value_parser = parse_word, required = true)]
        words: Vec<(u32, u64, u64)>,
    },
    /// Bilateral swap of a local block with the peer's block.
    Bswap {
        #[command(flatten)]
        at: Target,
        #[arg(long)]
        local_region: u16,
        #[arg(long)]
        local_offset: u32,
        #[arg(long)]
        len: u16,
    },
    /// A message (up to 960 bytes) into the receive the peer's application
    /// posted first; refused `no receive` at once if it posted none.
    Send {
        /// Bytes in hex (may be empty).
        #[arg(long, default_value = "")]
        data: String,
        /// Immediate data delivered beside the message.
        #[arg(long, value_parser = numbers::parse::<u32>)]
        imm: Option<u32>,
    },
}

#[derive(clap::Args)]
struct Target {
    #[arg(long, value_parser = numbers::parse::<u16>)]
    region: u16,
    /// The region's key, decimal or hexadecimal after 0x (as configuration
    /// files write it).
    #[arg(long, value_parser = numbers::parse::<u32>)]
    key: u32,
    #[arg(long, value_parser = numbers::parse::<u32>)]
    offset: u32,
}

#[derive(Subcommand)]
enum RegionCmd {
    Add {
        #[arg(long, value_parser = numbers::parse::<u16>)]
        id: u16,
        #[arg(long, value_parser = numbers::parse::<u32>)]
        key: u32,
        #[arg(long)]
        len: u32,
        /// Any of r, w, a.
        #[arg(long, default_value = "rwa")]
        perms: String,
    },
    List,
    /// Prints a region's bytes in hex: all of them, or `--len` bytes from
    /// `--offset`. One dump returns at most 1048576 bytes (MAX_DUMP_BYTES):
    /// dump a larger region in windows.
    Dump {
        #[arg(long)]
        id: u16,
        #[arg(long, default_value_t = 0)]
        queue: u16,
        /// First byte to print.
        #[arg(long, default_value_t = 0, value_parser = numbers::parse::<u32>)]
        offset: u32,
        /// Bytes to print (default: to the region's end).
        #[arg(long, value_parser = numbers::parse::<u32>)]
        len: Option<u32>,
    },
}

#[derive(Subcommand)]
enum KeyCmd {
    /// Which key numbers the link accepts and sends under.
    Show,
    /// Accept frames under key NUMBER from now on.
    Add {
        number: u8,
        #[arg(long)]
        key_file: PathBuf,
    },
    /// Send under key NUMBER from the next frame (the peer must hold it).
    Use { number: u8 },
    /// Stop accepting key NUMBER.
    Retire { number: u8 },
    /// Roll to a new key: run it at both ends with the same key, in either
    /// order. Each end accepts the key at once, sends under it once the
    /// other end accepts it, and retires the old one once both use it.
    Roll {
        #[arg(long)]
        key_file: PathBuf,
    },
}

/// A key file's 64 hex digits (`-`: stdin).
fn read_key(path: &Path) -> Result<String, Failure> {
    let text = if path == Path::new("-") {
        std::io::read_to_string(std::io::stdin()).map_err(|e| format!("stdin: {e}"))?
    } else {
        std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?
    };
    let key = text.trim().to_string();
    oae_client::control::parse_key(&key)
        .map_err(|e| Failure::usage(format!("{}: {e}", path.display())))?;
    Ok(key)
}

#[derive(Subcommand)]
enum FaultCmd {
    /// e.g. `fault set drop=0.01 corrupt=0.001 link=down seed=7`
    /// (probabilities as fractions, or with a ppm suffix: drop=10000ppm),
    /// `fault set --scope port:6379 drop=1%`.
    Set {
        #[arg(value_parser = parse_fault, required_unless_present = "scope")]
        settings: Vec<FaultSetting>,
        /// Which received frames the faults apply to: oae (OAE frames, the
        /// default), ipv4 (every IPv4 frame) or port:N (IPv4 TCP and UDP
        /// segments with source or destination port N). Frames outside it
        /// are never touched. Kept until set again.
        #[arg(long)]
        scope: Option<FaultScope>,
        /// Only this interface's XDP program (by default every interface
        /// of the dataplane): one link of a node with several, e.g. f1.
        #[arg(long)]
        iface: Option<String>,
    },
    /// Clears every fault.
    Clear,
}

#[derive(Clone, Debug)]
enum FaultSetting {
    Drop(u32),
    Corrupt(u32),
    Offset(u32),
    Link(bool),
    Seed(u64),
    Scope(FaultScope),
}

fn parse_word(s: &str) -> Result<(u32, u64, u64), String> {
    let parts: Vec<&str> = s.split(':').collect();
    let [o, e, n] = parts[..] else {
        return Err(format!("'{s}': expected OFFSET:EXPECTED:NEW"));
    };
    Ok((numbers::parse(o)?, numbers::parse(e)?, numbers::parse(n)?))
}

/// One `key=value` fault setting, read by the same parser the XDP
/// configuration uses, so `oaectl` and the library accept the same text.
fn parse_fault(s: &str) -> Result<FaultSetting, String> {
    let mut parsed = FaultConfig::default();
    apply_fault_setting(&mut parsed, s).map_err(|e| e.to_string())?;
    let key = s.split_once('=').map_or("", |(k, _)| k.trim());
    Ok(match key {
        "drop" => FaultSetting::Drop(parsed.drop_ppm),
        "corrupt" => FaultSetting::Corrupt(parsed.corrupt_ppm),
        "offset" => FaultSetting::Offset(parsed.corrupt_offset),
        "link" => FaultSetting::Link(parsed.link_down != 0),
        "scope" => FaultSetting::Scope(parsed.scope().unwrap_or_default()),
        _ => FaultSetting::Seed(parsed.seed),
    })
}

fn socket_path(cli: &Cli) -> Result<PathBuf, Failure> {
    if let Some(s) = &cli.socket {
        return Ok(s.clone());
    }
    if let Some(n) = &cli.name {
        return Ok(default_control_socket(n));
    }
    let found: Vec<PathBuf> = std::fs::read_dir(CONTROL_DIR)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "sock"))
                .collect()
        })
        .unwrap_or_default();
    match found.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(Failure::new(
            ErrorCode::NoDataplane,
            "no dataplane found in /run/oae: start one with `oaed --config <file>`, \
             or give --socket",
        )),
        many => Err(Failure::usage(format!(
            "several dataplanes are running ({}): choose one with --name or --socket",
            many.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

fn swap_ring(path: &std::path::Path, json: bool) -> Result<(), String> {
    let region = oae_swapring::region::Region::open(path).map_err(|e| e.to_string())?;
    let r = region.report();
    if json {
        return out::json(&r);
    }
    outln!(
        "{}: {} mode, {} records per ring, {} swap slots, PCIe cost {}",
        r.path,
        r.mode,
        r.ring_capacity,
        r.slots,
        r.cost
    );
    outln!(
        "  {:<5} {:>8} {:>8} {:>14} {:>10} {:>10} {:>10} {:>10} {:>8} {:>9}",
        "side",
        "pid",
        "attached",
        "interactions",
        "sent",
        "received",
        "refused",
        "committed",
        "aborted",
        "swaps"
    );
    for (side, b) in [("host", &r.host), ("ipu", &r.ipu)] {
        outln!(
            "  {:<5} {:>8} {:>8} {:>14} {:>10} {:>10} {:>10} {:>10} {:>8} {:>9}",
            side,
            b.pid,
            b.attachments,
            b.interactions,
            b.sent,
            b.received,
            b.refused_full,
            b.committed,
            b.aborted,
            b.swaps
        );
    }
    outln!(
        "  {:<15} {:>10} {:>10} {:>7} {:>10} {:>8}",
        "ring",
        "head",
        "tail",
        "queued",
        "doorbells",
        "refused"
    );
    for ring in &r.rings {
        outln!(
            "  {:<15} {:>10} {:>10} {:>7} {:>10} {:>8}",
            ring.ring,
            ring.head,
            ring.tail,
            ring.queued,
            ring.doorbells,
            ring.refused_full
        );
    }
    let s = &r.slot_states;
    outln!(
        "  slots: {} idle, {} offered, {} swapped, {} half-applied, {} corrupt",
        s.idle,
        s.offered,
        s.swapped,
        s.half_applied,
        s.corrupt
    );
    let held = |c: &ClaimReport| format!("pid {} (generation {})", c.pid, c.generation);
    if let (Some(c), "fito") = (&r.ring_claim, r.mode.as_str()) {
        outln!("  rings held by {}", held(c));
    }
    for (i, c) in r.slot_claims.iter().enumerate() {
        if let Some(c) = c {
            outln!("  slot {i} held by {}", held(c));
        }
    }
    Ok(())
}

/// `stats --interval`: 0 (no rates), or a refresh's seconds.
fn stats_interval(text: &str) -> Result<f64, String> {
    if text.parse::<f64>().is_ok_and(|s| s == 0.0) {
        return Ok(0.0);
    }
    watch_interval(text)
}

/// `watch --interval`: a finite number of seconds a refresh can wait.
fn watch_interval(text: &str) -> Result<f64, String> {
    let seconds: f64 = text
        .parse()
        .map_err(|_| format!("'{text}' is not a number of seconds"))?;
    if !(0.05..=3600.0).contains(&seconds) {
        return Err(format!("{text} s: give 0.05 to 3600 seconds"));
    }
    Ok(seconds)
}

fn main() -> ExitCode {
    let mut cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return refuse_arguments(e),
    };
    let json = cli.json;
    if json {
        out::json_mode();
    }
    if let Cmd::Demo(args) = &mut cli.command {
        args.json = json;
    }
    let result = match &cli.command {
        Cmd::Demo(args) => demo::run(args),
        Cmd::Pair { cmd } => pair::run(cmd, json),
        Cmd::SwapRing { path } => swap_ring(path, json).map_err(Failure::from),
        Cmd::HostVerbs(args) => host_verbs::run(args, json).map_err(Failure::from),
        Cmd::Completions { shell } => completions(*shell, json).map_err(Failure::from),
        Cmd::Man { dir } => man_pages(dir, json).map_err(Failure::from),
        _ => socket_path(&cli).and_then(|socket| command(&cli.command, &socket, json)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(json),
    }
}

/// Arguments clap refused: its words, as JSON on standard output if
/// `--json` was among them. Help and `--version` are not failures.
fn refuse_arguments(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let asked_json = std::env::args()
        .take_while(|a| a != "--")
        .any(|a| a == "--json");
    if !asked_json
        || matches!(
            e.kind(),
            ErrorKind::DisplayHelp
                | ErrorKind::DisplayVersion
                | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
        )
    {
        e.exit();
    }
    out::json_mode();
    Failure::usage(e.render().to_string().trim_end()).report(true)
}

/// `oaectl man DIR`: the pages written, a path a line.
fn man_pages(dir: &Path, json: bool) -> Result<(), String> {
    let pages = cli_docs::man_pages(Cli::command(), dir)
        .map_err(|e| format!("writing manual pages into {}: {e}", dir.display()))?;
    if json {
        return out::json(&pages);
    }
    for p in pages {
        outln!("{}", p.display());
    }
    Ok(())
}

/// The dataplane on `socket`, each answer awaited up to [`TIMEOUT`].
fn client(socket: &Path) -> Client {
    Client::new(socket, TIMEOUT)
}

/// `oaectl completions SHELL`: the script, or with `--json` the script
/// inside an object.
fn completions(shell: Shell, json: bool) -> Result<(), String> {
    let mut script = Vec::new();
    cli_docs::completions(Cli::command(), shell, &mut script);
    let script = String::from_utf8_lossy(&script).into_owned();
    if !json {
        out!("{script}");
        return Ok(());
    }
    out::json(&CompletionScript {
        shell: shell.to_string(),
        script,
    })
}

#[derive(Serialize)]
struct CompletionScript {
    shell: String,
    script: String,
}

fn command(cmd: &Cmd, socket: &Path, json: bool) -> Result<(), Failure> {
    match cmd {
        Cmd::Status => {
            let status = client(socket).status()?;
            if json {
                out::json(&status)?;
            } else {
                view::print_status(&status);
            }
        }
        Cmd::Members => {
            let status = client(socket).status()?;
            if json {
                let fabrics: Vec<QueueFabric> = status
                    .queues
                    .into_iter()
                    .filter_map(|q| {
                        Some(QueueFabric {
                            queue: q.queue.index,
                            fabric: q.fabric?,
                        })
                    })
                    .collect();
                out::json(&fabrics)?;
            } else {
                view::print_members(&status);
            }
        }
        Cmd::Stats { interval } => {
            let stats = client(socket).stats()?;
            if json {
                return Ok(out::json(&stats)?);
            }
            if *interval == 0.0 {
                view::print_stats(&stats, None);
                return Ok(());
            }
            let started = Instant::now();
            std::thread::sleep(Duration::from_secs_f64(*interval));
            let after = client(socket).stats()?;
            let rates = view::Rates {
                before: &stats,
                seconds: started.elapsed().as_secs_f64(),
            };
            view::print_stats(&after, Some(&rates));
        }
        Cmd::Hist { queue } => {
            let h = client(socket).hist(*queue)?;
            if json {
                return Ok(out::json(&h)?);
            }
            let stats = client(socket).stats()?;
            let buckets = stats
                .queues
                .iter()
                .find(|q| q.queue.index == *queue)
                .map(|q| &q.latency);
            view::print_hist(h.queue, &h.latency_ns, buckets);
        }
        Cmd::Verb {
            node,
            queue,
            link,
            verb,
        } => {
            let answer = client(socket).verb(*queue, *link, *node, verb_spec(verb))?;
            if json {
                return Ok(out::json(&answer)?);
            }
            outln!(
                "{} in {:.1} us",
                describe_output(&answer.result),
                answer.latency_ns as f64 / 1e3
            );
        }
        Cmd::Recv {
            queue,
            link,
            region,
            offset,
            len,
            timeout,
        } => {
            if !(*timeout > 0.0 && *timeout <= 50.0) {
                return Err(Failure::usage(format!(
                    "--timeout {timeout} must be more than 0 and at most 50 seconds"
                )));
            }
            let wait = Duration::from_secs_f64(*timeout);
            let answer = Client::new(socket, wait + TIMEOUT).recv(
                *queue,
                *link,
                (*region, *offset, *len),
                wait.as_millis().max(1) as u32,
            )?;
            if json {
                return Ok(out::json(&answer)?);
            }
            let imm = answer.imm.map_or("none".into(), |i| i.to_string());
            outln!(
                "received {} bytes on link {} (immediate {imm}): {}",
                answer.len,
                answer.link,
                answer.data
            );
        }
        Cmd::Region { cmd } => {
            match cmd {
                RegionCmd::List => {
                    let regions = client(socket).region_list()?;
                    if json {
                        return Ok(out::json(&regions)?);
                    }
                    outln!("{:>6} {:>10} {:>10} perms", "id", "key", "len");
                    for r in regions {
                        outln!("{:>6} {:>#10x} {:>10} {}", r.id, r.key, r.len, r.perms);
                    }
                }
                RegionCmd::Dump {
                    id,
                    queue: _,
                    offset,
                    len,
                } => {
                    // One memory for every queue: the queue changes nothing.
                    let dump = client(socket).region_dump(*id, *offset, *len)?;
                    if json {
                        return Ok(out::json(&dump)?);
                    }
                    let bytes = oae_client::control::from_hex(&dump.data)
                        .map_err(|e| format!("the dataplane's dump is not hex: {e}"))?;
                    view::print_dump(&dump, &bytes);
                }
                RegionCmd::Add {
                    id,
                    key,
                    len,
                    perms,
                } => {
                    let added = client(socket).region_add(*id, *key, *len, perms)?;
                    if json {
                        return Ok(out::json(&added)?);
                    }
                    outln!("region {} registered", added.registered);
                }
            }
        }
        Cmd::Fault { cmd } => {
            let mut change = FaultChange::default();
            match cmd {
                FaultCmd::Clear => {
                    change = FaultChange {
                        drop_ppm: Some(0),
                        corrupt_ppm: Some(0),
                        corrupt_offset: None,
                        link_down: Some(false),
                        seed: None,
                        scope: None,
                        iface: None,
                    }
                }
                FaultCmd::Set {
                    settings,
                    scope,
                    iface,
                } => {
                    change.iface.clone_from(iface);
                    for s in settings {
                        match *s {
                            FaultSetting::Drop(p) => change.drop_ppm = Some(p),
                            FaultSetting::Corrupt(p) => change.corrupt_ppm = Some(p),
                            FaultSetting::Offset(o) => change.corrupt_offset = Some(o),
                            FaultSetting::Link(down) => change.link_down = Some(down),
                            FaultSetting::Seed(s) => change.seed = Some(s),
                            FaultSetting::Scope(s) => change.scope = Some(s),
                        }
                    }
                    if let Some(s) = scope {
                        if change.scope.is_some() {
                            return Err(Failure::usage(
                                "the scope is given twice: use --scope or a scope= \
                                 setting, not both",
                            ));
                        }
                        change.scope = Some(*s);
                    }
                }
            }
            let set = client(socket).fault(change)?;
            if json {
                return Ok(out::json(&set)?);
            }
            for s in set {
                let f = &s.faults;
                outln!(
                    "{}: drop {} ppm, corrupt {} ppm at {}, link {}, seed {}, scope {}",
                    s.iface,
                    f.drop_ppm,
                    f.corrupt_ppm,
                    f.corrupt_offset
                        .map_or_else(|| "a random byte".to_string(), |o| format!("byte {o}")),
                    if f.link_down { "down" } else { "up" },
                    f.seed,
                    f.scope.as_deref().unwrap_or("oae"),
                );
            }
        }
        Cmd::Key { queue, link, cmd } => {
            let change = match cmd {
                KeyCmd::Show => KeyChange::Show,
                KeyCmd::Add { number, key_file } => KeyChange::Add {
                    number: *number,
                    key: read_key(key_file)?,
                },
                KeyCmd::Use { number } => KeyChange::Use { number: *number },
                KeyCmd::Retire { number } => KeyChange::Retire { number: *number },
                KeyCmd::Roll { key_file } => KeyChange::Roll {
                    key: read_key(key_file)?,
                },
            };
            let state = client(socket).key(*queue, *link, change)?;
            if json {
                return Ok(out::json(&state)?);
            }
            outln!(
                "queue {queue} link {link}: sending under key {}, accepting {:?}{}",
                state.sending,
                state.accepted,
                state.rolling_to.map_or(String::new(), |n| format!(
                    ", rolling to key {n} once the peer accepts it"
                ))
            );
        }
        Cmd::Watch { interval, count } => {
            let mut n = 0;
            let mut before: Option<(DataplaneStats, Instant)> = None;
            loop {
                let status = client(socket).status()?;
                let stats = client(socket).stats()?;
                let taken = Instant::now();
                if json {
                    // One object a line, for programs that follow along.
                    out::json_line(&WatchLine { status, stats })?;
                } else {
                    out!("\x1b[2J\x1b[H");
                    view::print_status(&status);
                    let rates = before.as_ref().map(|(b, at)| view::Rates {
                        before: b,
                        seconds: taken.duration_since(*at).as_secs_f64(),
                    });
                    view::print_stats(&stats, rates.as_ref());
                    before = Some((stats, taken));
                }
                n += 1;
                if *count != 0 && n >= *count {
                    break;
                }
                std::thread::sleep(Duration::from_secs_f64(*interval));
            }
        }
        Cmd::Shutdown => {
            let s = client(socket).shutdown()?;
            if json {
                return Ok(out::json(&s)?);
            }
            outln!("the dataplane is draining and will exit");
        }
        Cmd::Capture(args) => capture::run(args, socket, json)?,
        Cmd::Demo(_)
        | Cmd::Pair { .. }
        | Cmd::SwapRing { .. }
        | Cmd::HostVerbs(_)
        | Cmd::Completions { .. }
        | Cmd::Man { .. } => {
            unreachable!("handled before a socket is chosen")
        }
    }
    Ok(())
}

fn verb_spec(v: &VerbCmd) -> VerbSpec {
    match v {
        VerbCmd::Read {
            at,
            local_region,
            local_offset,
            len,
        } => VerbSpec::Read {
            region: at.region,
            key: at.key,
            offset: at.offset,
            local_region: *local_region,
            local_offset: *local_offset,
            len: *len,
        },
        VerbCmd::Write { at, data } => VerbSpec::Write {
            region: at.region,
            key: at.key,
            offset: at.offset,
            data: data.clone(),
        },
        VerbCmd::Cas { at, expected, new } => VerbSpec::Cas {
            region: at.region,
            key: at.key,
            offset: at.offset,
            expected: *expected,
            new: *new,
        },
        VerbCmd::Faa { at, add } => VerbSpec::Faa {
            region: at.region,
            key: at.key,
            offset: at.offset,
            add: *add,
        },
        VerbCmd::Swap { at, new } => VerbSpec::Swap {
            region: at.region,
            key: at.key,
            offset: at.offset,
            new: *new,
        },
        VerbCmd::Mcas { region, key, words } => VerbSpec::Mcas {
            region: *region,
            key: *key,
            words: words.clone(),
        },
        VerbCmd::Bswap {
            at,
            local_region,
            local_offset,
            len,
        } => VerbSpec::Bswap {
            region: at.region,
            key: at.key,
            offset: at.offset,
            local_region: *local_region,
            local_offset: *local_offset,
            len: *len,
        },
        VerbCmd::Send { data, imm } => VerbSpec::Send {
            data: data.clone(),
            imm: *imm,
        },
    }
}

/// `oaectl watch --json`: one refresh.
#[derive(Serialize)]
struct WatchLine {
    status: DataplaneStatus,
    stats: DataplaneStats,
}

/// A verb's result in a line.
fn describe_output(o: &OutputView) -> String {
    match o {
        OutputView::Read { data } => format!("read {data}"),
        OutputView::Write => "written".into(),
        OutputView::Cas { old, swapped } => {
            format!(
                "cas: old {old}, {}",
                if *swapped { "swapped" } else { "not swapped" }
            )
        }
        OutputView::Faa { old } => format!("fetch-add: old {old}"),
        OutputView::Swap { old } => format!("swap: old {old}"),
        OutputView::Mcas { committed, old } => format!(
            "multi-word commit: {}, old {old:?}",
            if *committed {
                "committed"
            } else {
                "not committed"
            }
        ),
        OutputView::Bswap { data } => format!("bilateral swap: received {data}"),
        OutputView::Send => "sent: the message is in the peer's receive".into(),
    }
}

#[cfg(test)]
mod tests {
    use oae_client::proto::Opcode;

    use super::*;

    /// `oaectl verb` has one subcommand per kind of verb, named as the
    /// core names it.
    #[test]
    fn the_verb_subcommands_are_the_cores_kinds() {
        let cli = Cli::command();
        let verb = cli
            .find_subcommand("verb")
            .expect("oaectl has a verb subcommand");
        let names: Vec<&str> = verb.get_subcommands().map(|c| c.get_name()).collect();
        assert_eq!(names, Opcode::NAMES);
    }
}
