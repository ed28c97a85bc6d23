//! `oaed`: builds the queues a configuration describes, runs one pinned
//! polling thread per queue, serves the control socket, and on SIGINT or
//! SIGTERM stops accepting work, drains, detaches XDP and prints its final
//! counters.

use crate::host::HostPort;
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
use oae_pmd::Driver;
use oae_pmd::afxdp::{AfXdp, AfXdpConfig, BindMode};
#[cfg(feature = "dpdk")]
use oae_pmd::dpdk::{Dpdk, DpdkConfig, init_eal};
use oae_pmd::netns::{format_mac, parse_mac};
use oae_pmd::xdp::{Steering, XdpCounters, XdpMode};
use oae_proto::{Memory, Node, RegionSpec};
use oae_rc_model::RcEndpoint;
use serde_json::{Value, json};

use crate::config::{
    BindModeSetting, Config, DriverKind, QueueConfig, TransportKind, XdpModeSetting,
};
use crate::control::{FaultChange, Request, Response};
use crate::pipeline::{CommandKind, FinalReport, Pipeline, QueueInfo, QueueShared};
use crate::transport::{Oae, RcModel, Transport};

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

/// A queue ready to run: its polling loop, whatever its driver, and what
/// the rest of the process shares with it.
pub struct BuiltQueue {
    pub shared: Arc<QueueShared>,
    run: Box<dyn FnOnce(Duration) -> FinalReport + Send>,
}

impl BuiltQueue {
    /// Runs the polling loop on the calling thread until asked to stop,
    /// then drains for at most `drain`.
    pub fn run(self, drain: Duration) -> FinalReport {
        (self.run)(drain)
    }
}

/// Builds queue `index` of `config`: its driver (for AF_XDP, after
/// attaching the XDP program to the interface, once per interface; for
/// DPDK, after starting the EAL, once per process), its node and its
/// pipeline. Must run in the network namespace of the interface.
pub fn build_queue(
    config: &Config,
    index: usize,
    epoch: u32,
    steering: &mut BTreeMap<String, Steering>,
) -> Result<BuiltQueue, String> {
    let q = &config.queues[index];
    let link_cfg = q.link.to_link_config();
    let inflight = match q.transport {
        TransportKind::Oae => link_cfg.submit_queue + usize::from(link_cfg.slots),
        TransportKind::RcModel => {
            let rc = q.rc.to_rc_config();
            rc.submit_queue + usize::from(rc.max_outstanding)
        }
    } + 64;
    let transport = match q.transport {
        TransportKind::Oae => {
            let mut node = Node::new(config.node_id, epoch);
            let link = node
                .add_link(link_cfg)
                .map_err(|e| format!("link.{}: {}", e.field, e.problem))?;
            AnyTransport::Oae(Oae { node, link })
        }
        TransportKind::RcModel => AnyTransport::Rc(RcModel {
            endpoint: RcEndpoint::new(q.rc.to_rc_config(), Memory::default())?,
        }),
    };
    let parts = Parts {
        peer_mac: parse_mac(&q.peer_mac).ok_or("peer_mac was validated")?,
        shared: Arc::new(QueueShared::new(4096)),
        inflight,
        info: QueueInfo {
            index: index as u16,
            iface: q.label().to_string(),
            queue_id: q.queue_id,
            core: q.core,
            driver: String::new(),
            mac: String::new(),
            peer_mac: q.peer_mac.clone(),
        },
        regions: config
            .regions
            .iter()
            .map(|r| r.to_spec().map_err(|e| format!("region {}: {e}", r.id)))
            .collect::<Result<_, _>>()?,
        host: match &config.host {
            Some(h) if usize::from(h.queue) == index => {
                let ring = h.to_host_ring()?;
                // Every request waiting in the ring or in flight may owe a
                // completion at once.
                let waiting = ring.capacity as usize + inflight;
                Some(HostPort::create(&ring, waiting)?)
            }
            _ => None,
        },
    };
    let shared = Arc::clone(&parts.shared);
    let run = match q.driver {
        DriverKind::AfXdp => {
            let driver = open_afxdp(q, steering)?;
            let name = format!("af_xdp ({})", driver.bind_mode());
            assemble(driver, name, transport, parts)?
        }
        #[cfg(feature = "dpdk")]
        DriverKind::Dpdk => {
            let driver = open_dpdk(config, q)?;
            let name = format!("dpdk ({})", driver.name());
            assemble(driver, name, transport, parts)?
        }
        #[cfg(not(feature = "dpdk"))]
        DriverKind::Dpdk => return Err(crate::config::NO_DPDK.into()),
    };
    Ok(BuiltQueue { shared, run })
}

/// A queue's transport, before the pipeline is built around it. Made once
/// per queue and unpacked at once, so its size does not matter.
#[allow(clippy::large_enum_variant)]
enum AnyTransport {
    Oae(Oae),
    Rc(RcModel),
}

/// What a pipeline needs besides its driver and transport.
struct Parts {
    peer_mac: [u8; 6],
    shared: Arc<QueueShared>,
    inflight: usize,
    info: QueueInfo,
    host: Option<HostPort>,
    regions: Vec<RegionSpec>,
}

/// The queue's loop over `driver` and `transport`, as a value a thread can
/// run.
fn assemble<D>(
    driver: D,
    driver_name: String,
    transport: AnyTransport,
    parts: Parts,
) -> Result<Box<dyn FnOnce(Duration) -> FinalReport + Send>, String>
where
    D: Driver + Send + 'static,
    D::Buf: Send,
{
    match transport {
        AnyTransport::Oae(t) => runner(driver, driver_name, t, parts),
        AnyTransport::Rc(t) => runner(driver, driver_name, t, parts),
    }
}

/// Registers the regions with `transport` and builds the pipeline; one
/// loop is compiled per driver and transport.
fn runner<D, T>(
    driver: D,
    driver_name: String,
    mut transport: T,
    parts: Parts,
) -> Result<Box<dyn FnOnce(Duration) -> FinalReport + Send>, String>
where
    D: Driver + Send + 'static,
    D::Buf: Send,
    T: Transport,
{
    for spec in &parts.regions {
        transport
            .register(*spec)
            .map_err(|e| format!("region {}: {e}", spec.id))?;
    }
    let info = QueueInfo {
        driver: driver_name,
        mac: format_mac(driver.mac()),
        ..parts.info
    };
    let pipeline = Pipeline::new(
        driver,
        transport,
        parts.peer_mac,
        info,
        parts.shared,
        parts.host,
        parts.inflight,
    );
    Ok(Box::new(move |drain| pipeline.run(drain)))
}

fn open_afxdp(q: &QueueConfig, steering: &mut BTreeMap<String, Steering>) -> Result<AfXdp, String> {
    if !steering.contains_key(&q.iface) {
        let mode = match q.xdp_mode {
            XdpModeSetting::Auto => XdpMode::Auto,
            XdpModeSetting::Driver => XdpMode::Driver,
            XdpModeSetting::Skb => XdpMode::Skb,
        };
        let s = Steering::attach(&q.iface, mode).map_err(|e| e.to_string())?;
        steering.insert(q.iface.clone(), s);
    }
    let ring = q.ring_size();
    let driver = AfXdp::new(&AfXdpConfig {
        iface: q.iface.clone(),
        queue_id: q.queue_id,
        frame_count: q.frames,
        fill_size: ring,
        comp_size: ring,
        rx_size: ring,
        tx_size: ring,
        mode: match q.bind_mode {
            BindModeSetting::Auto => BindMode::Auto,
            BindModeSetting::ZeroCopy => BindMode::ZeroCopy,
            BindModeSetting::Copy => BindMode::Copy,
        },
        ..AfXdpConfig::default()
    })
    .map_err(|e| format!("{} queue {}: {e}", q.iface, q.queue_id))?;
    steering[&q.iface]
        .register_socket(q.queue_id, driver.fd())
        .map_err(|e| e.to_string())?;
    Ok(driver)
}

#[cfg(feature = "dpdk")]
fn open_dpdk(config: &Config, q: &QueueConfig) -> Result<Dpdk, String> {
    let settings = config
        .dpdk
        .as_ref()
        .ok_or("a DPDK queue needs [dpdk] (validated)")?;
    init_eal(&settings.eal_args(&config.name)).map_err(|e| e.to_string())?;
    let ring = q.ring_size() as u16;
    Dpdk::new(&DpdkConfig {
        port: q.dpdk_port.clone().ok_or("dpdk_port was validated")?,
        rx_ring: ring,
        tx_ring: ring,
        mbufs: q.frames,
    })
    .map_err(|e| e.to_string())
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
        for (index, q) in config.queues.iter().enumerate() {
            let built = build_queue(&config, index, epoch, &mut steering)?;
            let shared = Arc::clone(&built.shared);
            let core = q.core;
            let handle = std::thread::Builder::new()
                .name(format!("oae-q{index}"))
                .spawn(move || {
                    if let Some(core) = core
                        && !core_affinity::set_for_current(core_affinity::CoreId { id: core })
                    {
                        eprintln!("oaed: could not pin queue {index} to core {core}");
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
    eprintln!(
        "oaed: {} running, epoch {epoch}, {} queue(s), control socket {}",
        config.name,
        shared.queues.len(),
        socket.display()
    );
    serve(&listener, &shared);
    finish(&shared, threads, &socket);
    Ok(())
}

fn finish(shared: &Shared, threads: Vec<JoinHandle<FinalReport>>, socket: &Path) {
    for q in &shared.queues {
        q.stop.store(true, Ordering::Relaxed);
    }
    let mut reports = Vec::new();
    for t in threads {
        match t.join() {
            Ok(r) => reports.push(r),
            Err(_) => eprintln!("oaed: a polling thread panicked"),
        }
    }
    let xdp: Vec<Value> = shared
        .steering
        .lock()
        .map(|s| {
            s.values()
                .map(|st| json!({"iface": st.iface(), "counters": xdp_counters_json(&st.counters())}))
                .collect()
        })
        .unwrap_or_default();
    // Dropping the steering detaches the XDP programs.
    if let Ok(mut s) = shared.steering.lock() {
        s.clear();
    }
    let _ = std::fs::remove_file(socket);
    let summary =
        json!({"name": shared.name, "epoch": shared.epoch, "queues": reports, "xdp": xdp});
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

fn handle(request: Request, shared: &Shared) -> Result<Value, String> {
    let ask = |queue: u16, what: CommandKind| ask(shared, queue, what);
    match request {
        Request::Status => {
            let queues = (0..shared.queues.len() as u16)
                .map(|q| ask(q, CommandKind::Status))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(
                json!({"name": shared.name, "pid": std::process::id(), "epoch": shared.epoch,
                      "queues": queues}),
            )
        }
        Request::Stats => {
            let queues = (0..shared.queues.len() as u16)
                .map(|q| ask(q, CommandKind::Stats))
                .collect::<Result<Vec<_>, _>>()?;
            let xdp: Vec<Value> = shared
                .steering
                .lock()
                .map_err(|_| "steering lock poisoned")?
                .values()
                .map(|s| {
                    json!({"iface": s.iface(), "mode": s.mode().name(),
                                "counters": xdp_counters_json(&s.counters()),
                                "faults": fault_json(&s.faults())})
                })
                .collect();
            Ok(json!({"name": shared.name, "queues": queues, "xdp": xdp}))
        }
        Request::Hist { queue } => ask(queue, CommandKind::Hist),
        Request::Verb { queue, verb } => ask(queue, CommandKind::Verb(Box::new(verb.to_verb()?))),
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
            let answers = (0..shared.queues.len() as u16)
                .map(|q| ask(q, CommandKind::RegionAdd(spec)))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Value::Array(answers))
        }
        Request::RegionList => ask(0, CommandKind::RegionList),
        Request::RegionDump { id, queue } => ask(queue, CommandKind::RegionDump(id)),
        Request::Fault(change) => set_faults(shared, &change),
        Request::WorkloadStart(spec) => {
            let queue = spec.queue;
            ask(queue, CommandKind::WorkloadStart(spec))
        }
        Request::WorkloadStatus { queue } => ask(queue, CommandKind::WorkloadStatus),
        Request::WorkloadPhase { queue, name } => ask(queue, CommandKind::WorkloadPhase(name)),
        Request::Shutdown => {
            shared.stop.store(true, Ordering::Relaxed);
            Ok(json!({"stopping": true}))
        }
    }
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
        out.push(json!({"iface": s.iface(), "faults": fault_json(&f)}));
    }
    Ok(Value::Array(out))
}

/// The XDP program's counters as a JSON object, by counter name.
pub fn xdp_counters_json(c: &XdpCounters) -> Value {
    c.iter()
        .map(|(name, n)| (name.to_string(), Value::from(n)))
        .collect()
}

pub fn fault_json(f: &FaultConfig) -> Value {
    json!({
        "drop_ppm": f.drop_ppm,
        "corrupt_ppm": f.corrupt_ppm,
        "corrupt_offset": if f.corrupt_offset == oae_common::CORRUPT_RANDOM_OFFSET {
            Value::from("random")
        } else {
            Value::from(f.corrupt_offset)
        },
        "link_down": f.link_down != 0,
        "seed": f.seed,
        "scope": f.scope().map(|s| s.to_string()),
    })
}
