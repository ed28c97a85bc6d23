//! `oaed`: builds the queues a configuration describes, runs one pinned
//! polling thread per queue, serves the control socket, and on SIGINT or
//! SIGTERM stops accepting work, drains, detaches XDP and prints its final
//! counters.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use oae_common::FaultConfig;
use oae_pmd::xdp::{Steering, XdpCounters};
use oae_proto::LinkId;

use crate::workload::Aim;
use serde_json::{Value, json};

use crate::config::{Config, MetricsSettings};
use crate::control::{
    FaultChange, FaultsSet, MAX_CAPTURE_FRAMES, MAX_CAPTURE_SECONDS, Request, Response, Stopping,
    to_json,
};
use crate::metrics::MetricsServer;
use crate::pipeline::{CaptureBuffer, CommandKind, FinalReport, QueueShared};
use crate::queue::{build_memory, build_queue};
use crate::stats::{Counters, DataplaneStats, FaultView, QueueStats, XdpStats, named_counters};
use crate::status::DataplaneStatus;
use serde::Serialize;

/// How long a stopping queue keeps running to finish or reverse what is in
/// flight.
const DRAIN: Duration = Duration::from_secs(2);
/// How long a control request waits for its polling core.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(30);

/// Options that override the file (unique paths for tests and the demo).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub control_socket: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
}

/// A running dataplane, as the control server sees it.
struct Shared {
    queues: Vec<Arc<QueueShared>>,
    steering: Mutex<BTreeMap<String, Steering>>,
    stop: Arc<AtomicBool>,
    name: String,
    epoch: u32,
}

/// Runs the dataplane until a signal or a `shutdown` request.
pub fn run(config: Config, overrides: Overrides) -> Result<(), String> {
    let socket = overrides
        .control_socket
        .clone()
        .unwrap_or_else(|| config.control_socket());
    let state_dir = overrides
        .state_dir
        .clone()
        .unwrap_or_else(|| config.state_dir());
    let listener = bind_control(&socket)?;
    let epoch = crate::epoch::next(&state_dir)?;

    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .map_err(|e| format!("cannot install the signal handler: {e}"))?;
    }

    let mut steering = BTreeMap::new();
    let mut threads: Vec<JoinHandle<FinalReport>> = Vec::new();
    let mut queues = Vec::new();
    let result = (|| -> Result<(), String> {
        let memory = build_memory(&config)?;
        for (index, q) in config.queues.iter().enumerate() {
            let built = build_queue(&config, index, epoch, &memory, &mut steering)?;
            let shared = Arc::clone(&built.shared);
            let core = q.core;
            let handle = std::thread::Builder::new()
                .name(format!("oae-q{index}"))
                .spawn(move || {
                    if let Some(core) = core
                        && let Err(e) = oae_os::pin::pin_current_thread(core)
                    {
                        eprintln!("oaed: queue {index}: {e}");
                    }
                    built.run(DRAIN)
                })
                .map_err(|e| format!("cannot start the polling thread: {e}"))?;
            threads.push(handle);
            queues.push(shared);
        }
        Ok(())
    })();

    let shared = Arc::new(Shared {
        queues,
        steering: Mutex::new(steering),
        stop: Arc::clone(&stop),
        name: config.name.clone(),
        epoch,
    });
    if let Err(e) = result {
        shared.stop.store(true, Ordering::Relaxed);
        finish(&shared, threads, &socket);
        return Err(e);
    }
    for s in shared.steering.lock().expect("not poisoned").values() {
        eprintln!("oaed: {}: XDP attached in {} mode", s.iface(), s.mode());
    }
    let metrics = match config.metrics.as_ref().map(|m| start_metrics(m, &shared)) {
        Some(Err(e)) => {
            shared.stop.store(true, Ordering::Relaxed);
            finish(&shared, threads, &socket);
            return Err(e);
        }
        Some(Ok(m)) => {
            eprintln!("oaed: metrics at http://{}/metrics", m.addr);
            Some(m)
        }
        None => None,
    };
    eprintln!(
        "oaed: {} running, epoch {epoch}, {} queue(s), control socket {}",
        config.name,
        shared.queues.len(),
        socket.display()
    );
    serve(&listener, &shared);
    shared.stop.store(true, Ordering::Relaxed);
    if let Some(m) = metrics {
        m.join();
    }
    finish(&shared, threads, &socket);
    Ok(())
}

fn start_metrics(
    settings: &MetricsSettings,
    shared: &Arc<Shared>,
) -> Result<MetricsServer, String> {
    let source = Arc::clone(shared);
    MetricsServer::start(
        settings.listen,
        Arc::new(move || Ok((stats(&source)?, status(&source)?))),
        Arc::clone(&shared.stop),
    )
}

/// What `oaed` prints when it stops.
#[derive(Serialize)]
struct FinalSummary {
    name: String,
    epoch: u32,
    queues: Vec<FinalReport>,
    xdp: Vec<FinalXdp>,
}

#[derive(Serialize)]
struct FinalXdp {
    iface: String,
    counters: Counters,
}

fn finish(shared: &Shared, threads: Vec<JoinHandle<FinalReport>>, socket: &Path) {
    for q in &shared.queues {
        q.request_stop();
    }
    let mut reports = Vec::new();
    for t in threads {
        match t.join() {
            Ok(r) => reports.push(r),
            Err(_) => eprintln!("oaed: a polling thread panicked"),
        }
    }
    let xdp: Vec<FinalXdp> = shared
        .steering
        .lock()
        .map(|s| {
            s.values()
                .map(|st| FinalXdp {
                    iface: st.iface().to_string(),
                    counters: xdp_counters(&st.counters()),
                })
                .collect()
        })
        .unwrap_or_default();
    // Dropping the steering detaches the XDP programs.
    if let Ok(mut s) = shared.steering.lock() {
        s.clear();
    }
    let _ = std::fs::remove_file(socket);
    let summary = FinalSummary {
        name: shared.name.clone(),
        epoch: shared.epoch,
        queues: reports,
        xdp,
    };
    println!(
        "{}",
        serde_json::to_string_pretty(&summary).unwrap_or_default()
    );
    eprintln!("oaed: {} stopped; XDP detached", shared.name);
}

/// Binds the control socket, refusing to steal one a live daemon answers on.
fn bind_control(path: &Path) -> Result<UnixListener, String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(format!(
                "another dataplane is listening on {}: stop it or choose another control_socket",
                path.display()
            ));
        }
        std::fs::remove_file(path)
            .map_err(|e| format!("cannot remove the stale socket {}: {e}", path.display()))?;
    }
    let listener = UnixListener::bind(path)
        .map_err(|e| format!("cannot listen on {}: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("cannot restrict {}: {e}", path.display()))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("control socket: {e}"))?;
    Ok(listener)
}

fn serve(listener: &UnixListener, shared: &Arc<Shared>) {
    while !shared.stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                let shared = Arc::clone(shared);
                let _ = std::thread::Builder::new()
                    .name("oae-control".into())
                    .spawn(move || connection(stream, &shared));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                eprintln!("oaed: control socket: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        if shared
            .queues
            .iter()
            .any(|q| q.stopped.load(Ordering::Acquire))
        {
            eprintln!("oaed: a polling thread stopped; shutting down");
            break;
        }
    }
}

fn connection(stream: UnixStream, shared: &Shared) {
    let _ = stream.set_nonblocking(false);
    let reader = BufReader::new(&stream);
    for line in reader.lines() {
        let Ok(line) = line else { return };
        if line.trim().is_empty() {
            continue;
        }
        let response = match serde_json::from_str::<Request>(&line) {
            Ok(request) => match handle(request, shared) {
                Ok(v) => Response::Ok(v),
                Err(e) => Response::Error(e),
            },
            Err(e) => Response::Error(format!("bad request: {e}")),
        };
        let mut text = serde_json::to_string(&response).unwrap_or_default();
        text.push('\n');
        if (&stream).write_all(text.as_bytes()).is_err() {
            return;
        }
    }
}

/// Every counter: each polling core answers for its queue.
fn stats(shared: &Shared) -> Result<DataplaneStats, String> {
    let queues = (0..shared.queues.len() as u16)
        .map(|q| {
            let answer = ask(shared, q, CommandKind::Stats)?;
            serde_json::from_value(answer).map_err(|e| format!("queue {q}'s counters: {e}"))
        })
        .collect::<Result<Vec<QueueStats>, String>>()?;
    let xdp = shared
        .steering
        .lock()
        .map_err(|_| "steering lock poisoned")?
        .values()
        .map(|s| XdpStats {
            iface: s.iface().to_string(),
            mode: s.mode().name().to_string(),
            counters: xdp_counters(&s.counters()),
            faults: fault_view(&s.faults()),
        })
        .collect();
    Ok(DataplaneStats {
        name: shared.name.clone(),
        queues,
        xdp,
    })
}

fn handle(request: Request, shared: &Shared) -> Result<Value, String> {
    let ask = |queue: u16, what: CommandKind| ask(shared, queue, what);
    match request {
        Request::Status => serde_json::to_value(status(shared)?).map_err(|e| e.to_string()),
        Request::Stats => serde_json::to_value(stats(shared)?).map_err(|e| e.to_string()),
        Request::Hist { queue } => ask(queue, CommandKind::Hist),
        Request::Key {
            queue,
            link,
            change,
        } => ask(queue, CommandKind::Key(link, change)),
        Request::Verb {
            queue,
            link,
            node,
            verb,
        } => {
            let verb = Box::new(verb.to_verb()?);
            match node {
                // A queue that runs a fabric reaches the node by a link or
                // a path, whichever serves; without one, an up link must.
                Some(node) => match fabric_queue(shared)? {
                    Some(q) => ask(q, CommandKind::VerbTo(node, verb)),
                    None => {
                        let (queue, link) = link_to(shared, node)?;
                        ask(queue, CommandKind::Verb(link, verb))
                    }
                },
                None => ask(queue, CommandKind::Verb(link, verb)),
            }
        }
        Request::RegionAdd {
            id,
            key,
            len,
            perms,
        } => {
            let spec = crate::config::RegionConfig {
                id,
                key,
                len,
                perms,
            }
            .to_spec()?;
            // One memory for every queue: registering once is enough.
            ask(0, CommandKind::RegionAdd(spec))
        }
        Request::RegionList => ask(0, CommandKind::RegionList),
        Request::RegionDump { id, queue } => ask(queue, CommandKind::RegionDump(id)),
        Request::Fault(change) => set_faults(shared, &change),
        Request::WorkloadStart(mut spec) => {
            let fabric = fabric_queue(shared)?;
            match (spec.node, fabric) {
                (Some(_), Some(q)) => spec.queue = q,
                (Some(node), None) => (spec.queue, spec.link) = link_to(shared, node)?,
                (None, _) => {}
            }
            let (queue, link, node) = (spec.queue, spec.link, spec.node);
            ask(queue, CommandKind::WorkloadStart(spec))?;
            // Where it runs, for the status and phase requests that follow:
            // a node through the fabric, or a link.
            Ok(match (node, fabric) {
                (Some(node), Some(_)) => json!({"started": true, "queue": queue, "node": node}),
                _ => json!({"started": true, "queue": queue, "link": link}),
            })
        }
        Request::WorkloadStatus { queue, link, node } => {
            ask(queue, CommandKind::WorkloadStatus(aim(link, node)))
        }
        Request::WorkloadPhase {
            queue,
            link,
            node,
            name,
        } => ask(queue, CommandKind::WorkloadPhase(aim(link, node), name)),
        Request::Capture {
            queue,
            count,
            seconds,
        } => {
            if count == 0 || count > MAX_CAPTURE_FRAMES {
                return Err(format!(
                    "capture count {count}: use 1 to {MAX_CAPTURE_FRAMES} frames"
                ));
            }
            if !(seconds > 0.0 && seconds <= MAX_CAPTURE_SECONDS) {
                return Err(format!(
                    "capture time {seconds} s: use more than 0 and at most {MAX_CAPTURE_SECONDS} s"
                ));
            }
            // Made here, not on the polling core: a buffer of up to 10 MB.
            let buffer = Box::new(CaptureBuffer::new(count));
            let within = Duration::from_secs_f64(seconds);
            let (done, finished) = std::sync::mpsc::sync_channel(1);
            ask(
                queue,
                CommandKind::Capture {
                    buffer,
                    within,
                    done,
                },
            )?;
            let capture = finished
                .recv_timeout(within + Duration::from_secs(5))
                .map_err(|_| format!("queue {queue} did not end its capture"))?;
            serde_json::to_value(capture.report()).map_err(|e| e.to_string())
        }
        Request::Shutdown => {
            shared.stop.store(true, Ordering::Relaxed);
            to_json(&Stopping { stopping: true })
        }
    }
}

/// Every queue's status, as one.
fn status(shared: &Shared) -> Result<DataplaneStatus, String> {
    let queues = (0..shared.queues.len() as u16)
        .map(|q| {
            let v = ask(shared, q, CommandKind::Status)?;
            serde_json::from_value(v).map_err(|e| format!("queue {q}'s status: {e}"))
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(DataplaneStatus {
        name: shared.name.clone(),
        pid: std::process::id(),
        epoch: shared.epoch,
        queues,
    })
}

fn aim(link: LinkId, node: Option<u64>) -> Aim {
    node.map_or(Aim::Link(link), Aim::Node)
}

/// The first queue that runs a fabric, if any.
fn fabric_queue(shared: &Shared) -> Result<Option<u16>, String> {
    Ok(status(shared)?
        .queues
        .iter()
        .find(|q| q.fabric.is_some())
        .map(|q| q.queue.index))
}

/// The queue and link of an up link to node `node`: the first found, in
/// queue and link order.
fn link_to(shared: &Shared, node: u64) -> Result<(u16, LinkId), String> {
    let status = status(shared)?;
    if let Some((q, l)) = status
        .links()
        .find(|(_, l)| l.peer_node == Some(node) && l.state.up)
    {
        return Ok((q.queue.index, l.link));
    }
    let seen: Vec<String> = status
        .links()
        .map(|(q, l)| {
            let up = if l.state.up { "up" } else { "down" };
            let node = l
                .peer_node
                .map_or_else(|| "not heard yet".to_string(), |n| format!("node {n}"));
            format!(
                "queue {} link {} ({}): {node}, {up}",
                q.queue.index, l.link, l.peer_mac
            )
        })
        .collect();
    Err(format!(
        "no link to node {node} is up; links: {}",
        seen.join("; ")
    ))
}

fn ask(shared: &Shared, queue: u16, what: CommandKind) -> Result<Value, String> {
    let q = shared.queues.get(usize::from(queue)).ok_or_else(|| {
        format!(
            "no queue {queue}: this dataplane has queues 0 to {}",
            shared.queues.len().saturating_sub(1)
        )
    })?;
    if shared.stop.load(Ordering::Relaxed) {
        return Err("the dataplane is shutting down".into());
    }
    q.ask(what, CONTROL_TIMEOUT)
        .map_err(|e| format!("queue {queue}: {e}"))
}

fn set_faults(shared: &Shared, change: &FaultChange) -> Result<Value, String> {
    let steering = shared
        .steering
        .lock()
        .map_err(|_| "steering lock poisoned")?;
    if steering.is_empty() {
        return Err(
            "no XDP program runs on this dataplane (its queues use DPDK), so there is \
                    no fault injector to set: faults are injected by the XDP program of \
                    AF_XDP queues"
                .into(),
        );
    }
    let mut out = Vec::new();
    for s in steering.values() {
        let mut f: FaultConfig = s.faults();
        if let Some(v) = change.drop_ppm {
            f.drop_ppm = v;
        }
        if let Some(v) = change.corrupt_ppm {
            f.corrupt_ppm = v;
        }
        if let Some(v) = change.corrupt_offset {
            f.corrupt_offset = v;
        }
        if let Some(v) = change.link_down {
            f.link_down = u32::from(v);
        }
        if let Some(v) = change.seed {
            f.seed = v;
        }
        if let Some(scope) = change.scope {
            f = f.with_scope(scope);
        }
        if f.drop_ppm > oae_common::PPM || f.corrupt_ppm > oae_common::PPM {
            return Err("probabilities are parts per million: at most 1000000".into());
        }
        s.set_faults(&f).map_err(|e| e.to_string())?;
        out.push(FaultsSet {
            iface: s.iface().to_string(),
            faults: fault_view(&f),
        });
    }
    serde_json::to_value(out).map_err(|e| e.to_string())
}

/// The XDP program's counters, by name.
pub fn xdp_counters(c: &XdpCounters) -> Counters {
    named_counters(c.iter())
}

pub fn fault_view(f: &FaultConfig) -> FaultView {
    FaultView {
        drop_ppm: f.drop_ppm,
        corrupt_ppm: f.corrupt_ppm,
        corrupt_offset: (f.corrupt_offset != oae_common::CORRUPT_RANDOM_OFFSET)
            .then_some(f.corrupt_offset),
        link_down: f.link_down != 0,
        seed: f.seed,
        scope: f.scope().map(|s| s.to_string()),
    }
}
