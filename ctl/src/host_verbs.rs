//! `oaectl host-verbs`: a host program on a dataplane's host ring. It
//! attaches as a host process would (claiming the ring or a slot), keeps a
//! window of FETCH-ADDs in flight through the ring, the dataplane and its
//! peer, and reports the rate, the latency it saw and every outcome.

use std::path::PathBuf;
use std::time::Duration;

use oae_client::host::HostQueue;
use oae_client::host::load::{self, Load};
use oae_client::proto::RegionRef;

#[derive(clap::Args)]
pub struct HostVerbsArgs {
    /// The host ring's file (`[host] ring` of the dataplane).
    ring: PathBuf,
    /// The peer's region, its key, and the first 8-byte word the verbs add
    /// 1 to.
    #[arg(long)]
    region: u16,
    #[arg(long, value_parser = crate::numbers::parse::<u32>)]
    key: u32,
    #[arg(long, default_value_t = 0)]
    offset: u32,
    /// Words to spread the verbs over (the verb in window position i adds
    /// to word i % words); default: one per verb in flight, so none contend.
    #[arg(long)]
    words: Option<u32>,
    /// FETCH-ADDs to run.
    #[arg(long, default_value_t = 10_000)]
    count: u64,
    /// Stop submitting after this many seconds (then drain the window).
    #[arg(long)]
    seconds: Option<f64>,
    /// How many to keep in flight (at most the ring's capacity).
    #[arg(long, default_value_t = 32)]
    window: usize,
    /// Seconds before giving up on what has not completed.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// Pin this process to a CPU.
    #[arg(long)]
    core: Option<usize>,
}

pub fn run(args: &HostVerbsArgs, json: bool) -> Result<(), String> {
    if args.window == 0 || args.count == 0 {
        return Err("--window and --count must be at least 1".into());
    }
    if args.seconds.is_some_and(|s| !(s > 0.0 && s <= 3600.0)) {
        return Err("--seconds: use a number of seconds in (0, 3600]".into());
    }
    if let Some(core) = args.core {
        oae_os::pin::pin_current_thread(core).map_err(|e| format!("--core {core}: {e}"))?;
    }
    let mut queue = HostQueue::attach(&args.ring, 2000).map_err(|e| e.to_string())?;
    let report = load::run(
        &mut queue,
        &Load {
            target: RegionRef {
                id: args.region,
                key: args.key,
            },
            offset: args.offset,
            words: args.words.unwrap_or(args.window as u32),
            count: args.count,
            window: args.window,
            duration: args.seconds.map(Duration::from_secs_f64),
            deadline: Duration::from_secs(args.timeout),
        },
    );
    if json {
        crate::out::json(&report)?;
    } else {
        outln!(
            "{} ring{}: {} of {} FETCH-ADDs ok, {} failed, {} not submitted, {} unfinished; \
             {:.0} verbs/s, p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us; {} exchanges, {} withdrawn",
            report.mode,
            report.slot.map_or(String::new(), |s| format!(" slot {s}")),
            report.ok,
            report.count,
            report.failed,
            report.not_submitted,
            report.unfinished,
            report.verbs_per_s,
            report.p50_ns as f64 / 1e3,
            report.p99_ns as f64 / 1e3,
            report.p999_ns as f64 / 1e3,
            report.exchanges,
            report.withdrawn,
        );
    }
    if report.unfinished > 0 {
        return Err(format!(
            "{} verbs did not complete in {} s",
            report.unfinished, args.timeout
        ));
    }
    Ok(())
}
