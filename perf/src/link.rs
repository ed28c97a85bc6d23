//! OAE over a real link: two pipelines, one per namespace of a fresh veth
//! pair, each on its own pinned core, running a CAS workload. The same
//! shape as the raw reflector and ping-pong it is compared with.

use std::time::{Duration, Instant};

use oae_client::control::{Percentiles, WorkloadSpec};
use oae_common::mac::format_mac;
use oae_config::Config;
use oae_config::deployment::{SHARED_CPU_MIN_ROUND_NS, SHARED_CPU_UNREACHABLE_ROUNDS};
use oae_dataplane::embed::EmbeddedQueue;
use oae_dataplane::pipeline::FinalReport;
use oae_dataplane::workload::Aim;
use oae_pmd::netns::VethPair;

/// How long a control question to a polling core may take.
const ASK: Duration = Duration::from_secs(10);

/// What one OAE run measured.
#[derive(Clone, Debug)]
pub struct OaeRun {
    pub verbs_per_s: f64,
    pub latency: Percentiles,
    pub completed: u64,
    pub failed: u64,
    pub mismatches: u64,
    /// Frames both sides sent per completed verb: 2 when every commit
    /// rides on the slot's next request, up to 4 when each goes alone.
    pub frames_per_verb: f64,
    /// Explicit COMMIT frames (commits that found no request to ride on).
    pub explicit_commits: u64,
    /// Frames each side's polling loop received per iteration (side a,
    /// side b), over the whole run: far below 1 means the loop mostly
    /// spun idle, waiting for frames.
    pub rx_per_iteration: [f64; 2],
}

/// The link key of authenticated runs (both ends).
const BENCH_KEY: &str = "0b0e0a0c0d0e0f00112233445566778899aabbccddeeff00112233445566778f";

/// How the pair's links are set.
#[derive(Clone, Copy, Debug, Default)]
pub struct PairLinks {
    /// Authenticated (`[queue.auth]`).
    pub auth: bool,
    /// A third thread (an application issuing verbs) shares the polling
    /// cores' CPUs: the shared-CPU round, so a descheduled peer does not
    /// look dead.
    pub shared_cpus: bool,
}

/// One embedded dataplane in each namespace of `pair`, side `i` pinned to
/// `cores[i]`, each with two regions of `len` bytes (1: `rwa`, key 1; 2:
/// `rw`, key 2), over links of `slots` slots set as `links` says. Returns
/// once both links are up.
pub fn start_pair(
    pair: &VethPair,
    slots: u16,
    len: usize,
    cores: [usize; 2],
    links: PairLinks,
) -> Result<Vec<EmbeddedQueue>, String> {
    let mut queues: Vec<EmbeddedQueue> = Vec::new();
    for (i, &core) in cores.iter().enumerate() {
        let text = format!(
            r#"
name = "bench{i}"
node_id = {node}
[[queue]]
iface = "{iface}"
peer_mac = "{peer}"
core = {core}
[queue.link]
slots = {slots}
credits = {slots}
{round}
{auth}
[[region]]
id = 1
key = 1
len = {len}
perms = "rwa"
[[region]]
id = 2
key = 2
len = {len}
perms = "rw"
"#,
            node = i + 1,
            iface = pair.ifname[i],
            peer = format_mac(pair.mac[1 - i]),
            round = if links.shared_cpus {
                format!(
                    "min_round_ns = {SHARED_CPU_MIN_ROUND_NS}\n\
                     unreachable_after_rounds = {SHARED_CPU_UNREACHABLE_ROUNDS}"
                )
            } else {
                String::new()
            },
            auth = if links.auth {
                format!("[queue.auth]\nkey = \"{BENCH_KEY}\"")
            } else {
                String::new()
            },
        );
        let cfg = Config::from_toml(&text).map_err(|e| e.to_string())?;
        queues.push(EmbeddedQueue::start(&cfg, 0, 1, Some(&pair.ns[i]))?);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !queues.iter().all(EmbeddedQueue::link_up) {
        if Instant::now() > deadline {
            for q in queues {
                q.stop();
            }
            return Err("the OAE link did not come up".to_string());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(queues)
}

/// Runs `lanes` CAS streams (one verb in flight each) from side 0 to side
/// 1 for `seconds`, side `i` pinned to `cores[i]`; with `auth`, over
/// authenticated links (`[queue.auth]`).
pub fn cas_workload(
    pair: &VethPair,
    slots: u16,
    lanes: u32,
    seconds: f64,
    cores: [usize; 2],
    auth: bool,
) -> Result<OaeRun, String> {
    let len = (lanes as usize * 64).max(4096);
    let queues = start_pair(
        pair,
        slots,
        len,
        cores,
        PairLinks {
            auth,
            shared_cpus: false,
        },
    )?;
    let result = (|| {
        queues[0].workload_start(
            WorkloadSpec {
                queue: 0,
                region: 1,
                key: 1,
                local_region: 2,
                lanes,
                seconds,
                seed: 1,
                verbs: vec!["cas".into()],
                ..Default::default()
            },
            ASK,
        )?;
        let deadline = Instant::now() + Duration::from_secs_f64(seconds + 20.0);
        loop {
            std::thread::sleep(Duration::from_millis(100));
            let r = queues[0].workload_status(Aim::Link(0), ASK)?;
            if !r.running {
                return Ok(OaeRun {
                    verbs_per_s: r.completed as f64 / r.elapsed_s.max(1e-9),
                    latency: r.latency,
                    completed: r.completed,
                    failed: r.failed,
                    mismatches: r.mismatches,
                    frames_per_verb: 0.0,
                    explicit_commits: 0,
                    rx_per_iteration: [0.0; 2],
                });
            }
            if Instant::now() > deadline {
                return Err("the workload did not finish".into());
            }
        }
    })();
    let reports: Vec<FinalReport> = queues.into_iter().filter_map(EmbeddedQueue::stop).collect();
    let counter = |name: &str| -> u64 {
        reports
            .iter()
            .flat_map(|r| &r.links)
            .map(|l| l.get(name))
            .sum()
    };
    result.map(|mut run| {
        run.frames_per_verb = counter("tx_frames") as f64 / run.completed.max(1) as f64;
        run.explicit_commits = counter("commits_sent");
        for (side, r) in run.rx_per_iteration.iter_mut().zip(&reports) {
            *side = r.pipeline.rx_frames as f64 / r.pipeline.bursts.max(1) as f64;
        }
        run
    })
}
