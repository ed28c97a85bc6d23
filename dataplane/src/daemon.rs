//! `oaed`: builds the queues a configuration describes, runs one pinned
//! polling thread per queue, serves the control socket, and on SIGINT or
//! SIGTERM stops accepting work, drains, detaches XDP and prints its final
//! counters.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use oae_common::FaultConfig;
use oae_os::lock::{HeldLock, LockError, hold_exclusive};
use oae_pmd::xdp::{Steering, XdpCounters};
use oae_proto::{LinkId, SharedMemory, Store};

use crate::incarnation::Incarnation;
use crate::workload::Aim;

use crate::metrics::MetricsServer;
use crate::pipeline::{CaptureBuffer, CommandKind, FinalReport, QueueShared, RecvRequest};
use crate::queue::{AuthenticatedLinks, build_daemon_memory, build_queue};
use oae_client::control::{
    Answer, CONTROL_IDLE_TIMEOUT, CloseReason, ControlError, ErrorCode, FaultChange, FaultsSet,
    MAX_CAPTURE_FRAMES, MAX_CAPTURE_SECONDS, MAX_CONTROL_CONNECTIONS, MAX_DUMP_BYTES,
    MAX_RECV_TIMEOUT_MS, MAX_REQUEST_LINE_BYTES, RegionDump, Request, Response, Stopping,
    WorkloadStarted, to_hex,
};
use oae_client::stats::{
    Counters, DataplaneStats, FaultView, QueueStats, XdpStats, named_counters,
};
use oae_client::status::DataplaneStatus;
use oae_config::{Config, MetricsSettings};
use serde::Serialize;

/// How long a stopping queue keeps running to finish or reverse what is in
/// flight.
const DRAIN: Duration = Duration::from_secs(2);
/// How long a control request waits for its polling core.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the accepting thread may spend telling a connection it is one
/// too many: the line fits in a fresh socket's buffer, so this is never
/// reached in practice, but the thread that accepts must never block.
const REFUSAL_WRITE_TIMEOUT: Duration = Duration::from_millis(100);

/// What the control server allows a client: the protocol's limits
/// ([`ControlLimits::PROTOCOL`]), smaller in tests.
#[derive(Debug, Clone, Copy)]
struct ControlLimits {
    /// Connections served at once.
    connections: usize,
    /// Longest wait for a whole request, and for a client to take an
    /// answer.
    idle: Duration,
    /// Longest request line, its newline not counted.
    line_bytes: usize,
}

impl ControlLimits {
    const PROTOCOL: ControlLimits = ControlLimits {
        connections: MAX_CONTROL_CONNECTIONS,
        idle: CONTROL_IDLE_TIMEOUT,
        line_bytes: MAX_REQUEST_LINE_BYTES,
    };
}

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
    node_id: u64,
    epoch: u32,
    /// The memory every queue shares, for dumps read off the polling cores.
    memory: SharedMemory,
    /// The host ring, beside which every region has a file host programs
    /// map ([`oae_client::host::region_file`]), removed at exit.
    host_ring: Option<PathBuf>,
}

/// Why a dataplane that ran stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// A signal or a `shutdown` request.
    Asked,
    /// Its address was another's (docs/PROTOCOL.md, "Addresses", N3): the
    /// free address it takes is stored, and it must start again, as a new
    /// incarnation, to run at it (N4).
    Readdressed,
}

/// Runs the dataplane until a signal or a `shutdown` request, or until it
/// must come back at another address.
pub fn run(config: Config, overrides: Overrides) -> Result<Stopped, String> {
    let socket = overrides
        .control_socket
        .clone()
        .unwrap_or_else(|| config.control_socket());
    let state_dir = overrides
        .state_dir
        .clone()
        .unwrap_or_else(|| config.state_dir());
    let control = bind_control(&socket)?;
    let me = Incarnation::begin(&config, &state_dir)?;
    let epoch = me.epoch;
    if let Some(id) = &me.identity {
        tracing::info!("{} identity {}", config.name, id.public());
    }
    if config.node_id.is_none() {
        tracing::info!(
            "{} address {} (node id {:#x})",
            config.name,
            oae_proto::address::address_of(me.node_id),
            me.node_id
        );
    }

    let stop = Arc::new(AtomicBool::new(false));
    // A signal stops the dataplane, and is remembered apart from the stop
    // flag (which stopping for any reason sets): one that comes while the
    // dataplane stops to take another address ends it, not restarts it.
    let signalled = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        for flag in [&stop, &signalled] {
            signal_hook::flag::register(signal, Arc::clone(flag))
                .map_err(|e| format!("cannot install the signal handler: {e}"))?;
        }
    }

    let mut steering = BTreeMap::new();
    let mut authenticated = AuthenticatedLinks::default();
    // Queue `i`'s polling thread is `threads[i]`.
    let mut threads: Vec<JoinHandle<FinalReport>> = Vec::new();
    let mut queues = Vec::new();
    let built = (|| -> Result<SharedMemory, String> {
        let memory = build_daemon_memory(&config)?;
        // Every queue is built (and its links checked against the others')
        // before any polls: a queue refused does not follow queues whose
        // links already came up.
        let mut built = Vec::with_capacity(config.queues.len());
        for index in 0..config.queues.len() {
            built.push(build_queue(
                &config,
                index,
                &me,
                &memory,
                &mut steering,
                &mut authenticated,
            )?);
        }
        for (index, (q, built)) in config.queues.iter().zip(built).enumerate() {
            let shared = Arc::clone(&built.shared);
            let core = q.core;
            let handle = std::thread::Builder::new()
                .name(format!("oae-q{index}"))
                .spawn(move || {
                    if let Some(core) = core
                        && let Err(e) = oae_os::pin::pin_current_thread(core)
                    {
                        tracing::warn!("queue {index}: {e}");
                    }
                    built.run(DRAIN)
                })
                .map_err(|e| format!("cannot start the polling thread: {e}"))?;
            threads.push(handle);
            queues.push(shared);
        }
        Ok(memory)
    })();
    let (memory, result) = match built {
        Ok(memory) => (memory, Ok(())),
        Err(e) => (SharedMemory::new(), Err(e)),
    };

    let shared = Arc::new(Shared {
        queues,
        steering: Mutex::new(steering),
        stop: Arc::clone(&stop),
        name: config.name.clone(),
        node_id: me.node_id,
        epoch,
        memory,
        host_ring: config.host.as_ref().map(|h| h.ring.clone()),
    });
    if let Err(e) = result {
        shared.stop.store(true, Ordering::Relaxed);
        return Err(
            match finish(&shared, threads, &socket, Finish::NeverStarted) {
                Ok(()) => format!("{} did not start: {e}", config.name),
                Err(panics) => format!("{} did not start: {e}; {panics}", config.name),
            },
        );
    }
    for s in shared.steering.lock().expect("not poisoned").values() {
        tracing::info!("{}: XDP attached in {} mode", s.iface(), s.mode());
    }
    let metrics = match config.metrics.as_ref().map(|m| start_metrics(m, &shared)) {
        Some(Err(e)) => {
            shared.stop.store(true, Ordering::Relaxed);
            return Err(
                match finish(&shared, threads, &socket, Finish::NeverStarted) {
                    Ok(()) => format!("{} did not start: {e}", config.name),
                    Err(panics) => format!("{} did not start: {e}; {panics}", config.name),
                },
            );
        }
        Some(Ok(m)) => {
            tracing::info!(
                "metrics at http://{}/metrics{}",
                m.addr,
                oae_os::netns::named().map_or_else(String::new, |ns| format!(
                    " (inside network namespace {ns}: `ip netns exec {ns} curl …`)"
                ))
            );
            Some(m)
        }
        None => None,
    };
    tracing::info!(
        "{} running, epoch {epoch}, {} queue(s), control socket {}",
        config.name,
        shared.queues.len(),
        socket.display()
    );
    let ended = serve(
        &control.listener,
        &shared,
        &threads,
        ControlLimits::PROTOCOL,
    );
    shared.stop.store(true, Ordering::Relaxed);
    if let Some(m) = metrics {
        m.join();
    }
    match (ended, finish(&shared, threads, &socket, Finish::Ran)) {
        (_, Err(panics)) => Err(format!("{panics}; the dataplane stopped and detached XDP")),
        (Some(Ended::ThreadDied(queue)), Ok(())) => Err(format!(
            "queue {queue}'s polling thread ended without being asked to stop; the dataplane \
             stopped and detached XDP"
        )),
        (Some(Ended::Readdress(address)), Ok(())) => {
            crate::address::give_up_for(&state_dir, address)?;
            if signalled.load(Ordering::Relaxed) {
                return Ok(Stopped::Asked);
            }
            Ok(Stopped::Readdressed)
        }
        (None, Ok(())) => Ok(Stopped::Asked),
    }
}

/// Why serving control connections ended, other than being asked to.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// A polling thread ended unasked.
    ThreadDied(usize),
    /// A queue found the dataplane's address held by a lower node id.
    Readdress(u16),
}

fn start_metrics(
    settings: &MetricsSettings,
    shared: &Arc<Shared>,
) -> Result<MetricsServer, String> {
    let source = Arc::clone(shared);
    MetricsServer::start(
        settings.listen,
        Arc::new(move || {
            Ok((
                stats(&source).map_err(|e| e.to_string())?,
                status(&source).map_err(|e| e.to_string())?,
            ))
        }),
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

/// Whether the dataplane ran before [`finish`] stops it.
#[derive(Clone, Copy)]
enum Finish {
    Ran,
    NeverStarted,
}

/// Stops every queue, detaches XDP, removes the socket and prints the
/// final counters; `Err` names each queue whose polling thread panicked,
/// and its panic.
fn finish(
    shared: &Shared,
    threads: Vec<JoinHandle<FinalReport>>,
    socket: &Path,
    how: Finish,
) -> Result<(), String> {
    for q in &shared.queues {
        q.request_stop();
    }
    let mut reports = Vec::new();
    let mut panics = Vec::new();
    for (queue, t) in threads.into_iter().enumerate() {
        match t.join() {
            Ok(r) => reports.push(r),
            Err(payload) => {
                let why = format!(
                    "queue {queue}'s polling thread panicked: {}",
                    panic_text(payload.as_ref())
                );
                tracing::error!("{why}");
                panics.push(why);
            }
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
    // Dropping the steering detaches the XDP programs, even if a thread
    // panicked holding the lock.
    shared
        .steering
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clear();
    let _ = std::fs::remove_file(socket);
    if let Some(ring) = &shared.host_ring {
        for spec in shared.memory.region_specs() {
            let _ = std::fs::remove_file(oae_client::host::region_file(ring, spec.id));
        }
    }
    let summary = FinalSummary {
        name: shared.name.clone(),
        epoch: shared.epoch,
        queues: reports,
        xdp,
    };
    // A reader that has gone (`oaed … | head`) loses the report, and the
    // dataplane still stops cleanly: no panic on a broken pipe.
    let report = serde_json::to_string_pretty(&summary).unwrap_or_default();
    if let Err(e) = writeln!(std::io::stdout().lock(), "{report}") {
        tracing::warn!("the final counters were not written to standard output: {e}");
    }
    // One that never started says why in its error, and leaves nothing
    // attached either.
    if let Finish::Ran = how {
        tracing::info!("{} stopped; XDP detached", shared.name);
    }
    if panics.is_empty() {
        Ok(())
    } else {
        Err(panics.join("; "))
    }
}

/// A panic's message, as `panic!` and `expect` leave it.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(a panic without a message)")
}

/// The control socket and the lock that makes it this process's: held
/// from before a stale socket is judged until the process ends, so two
/// dataplanes starting on one path cannot both take a stale socket for
/// theirs to replace (the second would unlink the first's new socket).
#[derive(Debug)]
struct ControlSocket {
    listener: UnixListener,
    _lock: HeldLock,
}

/// Binds the control socket at `path` so that no other user can ever
/// reach it, replacing nothing but a stale socket.
///
/// `bind` creates the socket file with mode 0777 less the umask, so a
/// chmod after it leaves a moment in which anyone may connect (under umask
/// 000, anyone could). Narrowing the umask around `bind` would not do: it
/// is the whole process's, so another thread creating a file meanwhile
/// would get the narrow mode, or this one another thread's wide mode.
/// Instead the socket is bound inside a new directory of mode 0700 next to
/// `path`, which no other user can enter, so none can reach the socket
/// there whatever its mode; it is narrowed to 0600 there, and only then
/// linked at `path`, so that name appears with mode 0600 already. `link`
/// (unlike `rename`) fails if anything appeared at `path` meanwhile
/// instead of replacing it.
fn bind_control(path: &Path) -> Result<ControlSocket, String> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let lock = lock_control(path)?;
    clear_stale_socket(path)?;
    let private = BindDir::create(dir)?;
    let inside = private.socket();
    let listener = UnixListener::bind(&inside)
        .map_err(|e| format!("cannot listen on {}: {e}", inside.display()))?;
    std::fs::set_permissions(&inside, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("cannot restrict {}: {e}", inside.display()))?;
    std::fs::hard_link(&inside, path).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => format!(
            "something was created at {} while oaed was binding its control socket \
             there (another dataplane starting?): stop it or choose another \
             control_socket (--socket)",
            path.display()
        ),
        _ => format!("cannot name the control socket {}: {e}", path.display()),
    })?;
    // The socket keeps its public name; the private one goes.
    drop(private);
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("control socket: {e}"))?;
    Ok(ControlSocket {
        listener,
        _lock: lock,
    })
}

/// The lock beside the control socket at `path` (`<path>.lock`).
fn lock_control(path: &Path) -> Result<HeldLock, String> {
    let mut name = path.as_os_str().to_owned();
    name.push(".lock");
    hold_exclusive(Path::new(&name)).map_err(|e| match e {
        LockError::Held => format!(
            "another dataplane is listening or starting on {}: stop it or choose another \
             control_socket (--socket)",
            path.display()
        ),
        LockError::Unusable(why) => format!("cannot lock the control socket's name: {why}"),
    })
}

/// Makes way for the control socket at `path`: removes a stale socket (one
/// no process listens on). A live socket, or anything that is not a socket,
/// is left as it is and refused.
fn clear_stale_socket(path: &Path) -> Result<(), String> {
    let found = match std::fs::symlink_metadata(path) {
        Ok(found) => found.file_type(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("cannot inspect {}: {e}", path.display())),
    };
    if !found.is_socket() {
        let what = if found.is_file() {
            "a regular file"
        } else if found.is_dir() {
            "a directory"
        } else if found.is_symlink() {
            "a symbolic link"
        } else {
            "a special file"
        };
        return Err(format!(
            "{} is {what}, not a socket: oaed replaces only a stale control socket, so it \
             leaves it alone; move it away, or choose another control_socket (--socket)",
            path.display()
        ));
    }
    match UnixStream::connect(path) {
        Ok(_) => Err(format!(
            "another dataplane is listening on {}: stop it or choose another control_socket",
            path.display()
        )),
        // No listener: left by a dataplane that did not stop cleanly.
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            match std::fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(format!(
                    "cannot remove the stale socket {}: {e}",
                    path.display()
                )),
                _ => Ok(()),
            }
        }
        Err(e) => Err(format!(
            "cannot tell whether a dataplane listens on {} ({e}): remove it if none does",
            path.display()
        )),
    }
}

/// A directory of mode 0700 made by [`BindDir::create`], with the socket
/// bound in it; dropping it removes both names (a socket linked elsewhere
/// keeps that name).
struct BindDir {
    path: PathBuf,
}

impl BindDir {
    fn create(parent: &Path) -> Result<BindDir, String> {
        // `mkdir` fails on a name that exists, so the directory used is
        // always one this call made, never one another user made first
        // (and could enter). Short names: a socket path has at most 107
        // bytes.
        for attempt in 0..100 {
            let path = parent.join(format!(".oaed-{}-{attempt}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(BindDir { path }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(format!(
                        "cannot create a private directory in {} to bind the control socket \
                         in: {e}",
                        parent.display()
                    ));
                }
            }
        }
        Err(format!(
            "{} holds 100 directories named .oaed-{}-N: remove them",
            parent.display(),
            std::process::id()
        ))
    }

    fn socket(&self) -> PathBuf {
        self.path.join("s")
    }
}

impl Drop for BindDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.socket());
        let _ = std::fs::remove_dir(&self.path);
    }
}

/// The longest the accepting thread waits for a connection (ms) before it
/// looks at the stop flag and the polling threads again.
const ACCEPT_WAIT_MS: u8 = 20;

/// Serves control connections until the stop flag is set, until a
/// polling thread ends unasked, or until a queue finds the dataplane's
/// address taken. `threads[i]` is queue `i`'s.
fn serve(
    listener: &UnixListener,
    shared: &Arc<Shared>,
    threads: &[JoinHandle<FinalReport>],
    limits: ControlLimits,
) -> Option<Ended> {
    let open = Arc::new(AtomicUsize::new(0));
    while !shared.stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => admit(stream, shared, &open, limits),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                // Woken by the next connection at once, and at least every
                // ACCEPT_WAIT_MS to look at the stop flag and the threads.
                let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
                let _ = poll(&mut fds, PollTimeout::from(ACCEPT_WAIT_MS));
            }
            Err(e) => {
                tracing::warn!("control socket: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        // A polling thread ends only when asked to stop, so one that has
        // ended now died (a panic unwinds past every flag it would set): its
        // queue answers nothing and carries no traffic, so the dataplane
        // stops rather than run on with XDP attached.
        if let Some(queue) = threads.iter().position(JoinHandle::is_finished) {
            tracing::error!("queue {queue}'s polling thread ended; stopping the dataplane");
            return Some(Ended::ThreadDied(queue));
        }
        if let Some(address) = shared.queues.iter().find_map(|q| q.readdress()) {
            tracing::warn!("stopping to come back at address {address}");
            return Some(Ended::Readdress(address));
        }
    }
    None
}

/// One open control connection, counted while it lives, even if its
/// thread panics.
struct ConnectionSlot(Arc<AtomicUsize>);

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Serves `stream` on a thread of its own, or closes it saying why if
/// `limits.connections` are open. Only the accepting thread counts
/// connections in, so the count cannot pass the limit.
fn admit(stream: UnixStream, shared: &Arc<Shared>, open: &Arc<AtomicUsize>, limits: ControlLimits) {
    if open.load(Ordering::Acquire) >= limits.connections {
        let _ = stream.set_nonblocking(false);
        let limit = limits.connections;
        let _ = send(
            &stream,
            &Response::Closed(CloseReason::TooManyConnections { limit }.into()),
            REFUSAL_WRITE_TIMEOUT,
        );
        return;
    }
    open.fetch_add(1, Ordering::AcqRel);
    let slot = ConnectionSlot(Arc::clone(open));
    let shared = Arc::clone(shared);
    // If the thread cannot start, the closure is dropped: the stream
    // closes and the slot is given back.
    let started = std::thread::Builder::new()
        .name("oae-control".into())
        .spawn(move || {
            let _slot = slot;
            connection(stream, &shared, limits);
        });
    if let Err(e) = started {
        tracing::warn!("cannot start a thread for a control connection: {e}");
    }
}

/// Answers `stream`'s requests, one line each, until it closes, sends a
/// line longer than `limits.line_bytes`, or sends no whole request within
/// `limits.idle`; each limit is told to the client before closing.
fn connection(stream: UnixStream, shared: &Shared, limits: ControlLimits) {
    // Accepted from a non-blocking listener: this thread blocks, bounded
    // by the timeouts.
    if stream.set_nonblocking(false).is_err() {
        return;
    }
    let mut reader = BufReader::new(&stream);
    loop {
        let line = match read_request(&mut reader, limits) {
            Ok(Some(line)) => line,
            Ok(None) => return,
            Err(LineEnd::Closing(reason)) => {
                let _ = send(&stream, &Response::Closed(reason.into()), limits.idle);
                return;
            }
            Err(LineEnd::Failed) => return,
        };
        let response = match serde_json::from_slice::<Request>(&line) {
            Ok(request) => match handle(request, shared) {
                Ok(v) => Response::Ok(v),
                Err(e) => Response::Error(e),
            },
            Err(e) => Response::Error(ControlError::bad_request(format!("bad request: {e}"))),
        };
        if send(&stream, &response, limits.idle).is_err() {
            return;
        }
    }
}

/// Serves one control connection as `oaed` does (the request reader with
/// the protocol's line limit, the parser, the dispatcher, the answers) for
/// a dataplane that has `memory` and no queue yet, so every request that
/// needs a polling core is answered that there is none. `idle` bounds the
/// wait for a request and `line_bytes` its length (the protocol's are
/// [`oae_client::control::CONTROL_IDLE_TIMEOUT`] and
/// [`oae_client::control::MAX_REQUEST_LINE_BYTES`]). The fuzz target `control`
/// drives it with arbitrary bytes; `oaed` itself never calls it.
pub fn serve_connection_without_queues(
    stream: UnixStream,
    memory: SharedMemory,
    idle: Duration,
    line_bytes: usize,
) {
    let shared = Shared {
        queues: Vec::new(),
        steering: Mutex::new(BTreeMap::new()),
        stop: Arc::new(AtomicBool::new(false)),
        name: "offline".into(),
        node_id: 0,
        epoch: 1,
        memory,
        host_ring: None,
    };
    let limits = ControlLimits {
        idle,
        line_bytes,
        ..ControlLimits::PROTOCOL
    };
    connection(stream, &shared, limits);
}

/// Why no request line came.
enum LineEnd {
    /// A limit was met: tell the client, then close.
    Closing(CloseReason),
    /// The connection failed.
    Failed,
}

/// The next non-blank request line, without its newline; `None` at the end
/// of the stream. At most `limits.line_bytes` are held, and the whole line
/// must come within `limits.idle` (blank lines do not restart the wait).
fn read_request(
    reader: &mut BufReader<&UnixStream>,
    limits: ControlLimits,
) -> Result<Option<Vec<u8>>, LineEnd> {
    let deadline = Instant::now() + limits.idle;
    let mut line = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let limit_s = limits.idle.as_secs();
            return Err(LineEnd::Closing(CloseReason::Idle { limit_s }));
        }
        reader
            .get_ref()
            .set_read_timeout(Some(left))
            .map_err(|_| LineEnd::Failed)?;
        let available = match reader.fill_buf() {
            Ok(bytes) => bytes,
            // Timed out or interrupted: the deadline decides.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                continue;
            }
            Err(_) => return Err(LineEnd::Failed),
        };
        if available.is_empty() {
            // A last request without its newline still counts.
            return Ok((!line.trim_ascii().is_empty()).then_some(line));
        }
        let newline = available.iter().position(|&b| b == b'\n');
        let take = newline.unwrap_or(available.len());
        if line.len() + take > limits.line_bytes {
            let limit_bytes = limits.line_bytes;
            return Err(LineEnd::Closing(CloseReason::RequestTooLong {
                limit_bytes,
            }));
        }
        line.extend_from_slice(&available[..take]);
        reader.consume(take + usize::from(newline.is_some()));
        if newline.is_some() {
            if !line.trim_ascii().is_empty() {
                return Ok(Some(line));
            }
            line.clear();
        }
    }
}

/// The most one write of an answer hands the kernel. A Unix socket's send
/// timeout bounds each wait for room, not a write: a write of a whole large
/// answer to a client reading slowly would last as long as the client
/// likes. Pieces this small need one wait each.
const ANSWER_PIECE_BYTES: usize = 16 * 1024;

/// Writes `response` as one line, all of it `within` a time: a client
/// reading slowly cannot hold its connection (and its slot) longer.
fn send(
    mut stream: &UnixStream,
    response: &Response<Answer>,
    within: Duration,
) -> std::io::Result<()> {
    // An error that is only a string always serialises; the empty line
    // after it is unreachable, and still no panic.
    let mut text = serde_json::to_string(response)
        .or_else(|e| {
            serde_json::to_string(&Response::<Answer>::Error(ControlError::failed(format!(
                "the answer could not be written as JSON: {e}"
            ))))
        })
        .unwrap_or_default();
    text.push('\n');
    let deadline = Instant::now() + within;
    let mut rest = text.as_bytes();
    while !rest.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        stream.set_write_timeout(Some(left))?;
        match stream.write(&rest[..rest.len().min(ANSWER_PIECE_BYTES)]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => rest = &rest[n..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Every counter: each polling core answers for its queue.
fn stats(shared: &Shared) -> Result<DataplaneStats, ControlError> {
    let queues = (0..shared.queues.len() as u16)
        .map(|q| match ask(shared, q, CommandKind::Stats)? {
            Answer::QueueStats(stats) => Ok(*stats),
            other => Err(answered_otherwise(q, "its counters", &other)),
        })
        .collect::<Result<Vec<QueueStats>, ControlError>>()?;
    let xdp = steering(shared)?
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

/// A polling core's answer of another kind than asked: a defect of this
/// program, said so rather than passed on.
fn answered_otherwise(queue: u16, asked: &str, answer: &Answer) -> ControlError {
    ControlError::failed(format!(
        "queue {queue} was asked for {asked} and answered {answer:?}: a defect of oaed, \
         please report it"
    ))
}

fn steering(
    shared: &Shared,
) -> Result<std::sync::MutexGuard<'_, BTreeMap<String, Steering>>, ControlError> {
    shared
        .steering
        .lock()
        .map_err(|_| ControlError::failed("the XDP steering table's lock is poisoned"))
}

fn handle(request: Request, shared: &Shared) -> Result<Answer, ControlError> {
    let ask = |queue: u16, what: CommandKind| ask(shared, queue, what);
    match request {
        Request::Status => Ok(Answer::Status(status(shared)?)),
        Request::Stats => Ok(Answer::Stats(stats(shared)?)),
        Request::Hist { queue } => ask(queue, CommandKind::Hist),
        Request::Key {
            queue,
            link,
            change,
        } => ask(queue, CommandKind::Key(link, change)),
        Request::Recv {
            queue,
            link,
            region,
            offset,
            len,
            timeout_ms,
        } => {
            if timeout_ms == 0 || timeout_ms > MAX_RECV_TIMEOUT_MS {
                return Err(ControlError::bad_request(format!(
                    "timeout_ms = {timeout_ms} must be 1 to {MAX_RECV_TIMEOUT_MS}"
                )));
            }
            let within = Duration::from_millis(u64::from(timeout_ms));
            let ask = RecvRequest {
                link,
                region,
                offset,
                len,
                within,
            };
            // The polling core answers when the deadline passes; this waits
            // a little longer, so its answer is the one the client gets.
            ask_within(
                shared,
                queue,
                CommandKind::Recv(ask),
                within + CONTROL_TIMEOUT,
            )
        }
        Request::Verb {
            queue,
            link,
            node,
            verb,
        } => {
            let verb = Box::new(verb.to_verb().map_err(ControlError::bad_request)?);
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
            let spec = oae_config::RegionConfig {
                id,
                key,
                len,
                perms,
            }
            .to_spec()
            .map_err(ControlError::bad_request)?;
            let mut all = shared.memory.region_specs();
            all.push(spec);
            oae_config::regions_fit_memory(&all).map_err(ControlError::bad_request)?;
            // One memory for every queue: registering once is enough.
            ask(0, CommandKind::RegionAdd(spec))
        }
        Request::RegionList => ask(0, CommandKind::RegionList),
        // One memory for every queue: the queue a dump names changes nothing.
        Request::RegionDump { id, queue: _ } => dump(shared, id, 0, None),
        Request::RegionDumpRange {
            id,
            queue: _,
            offset,
            len,
        } => dump(shared, id, offset, len),
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
            let (link, node) = match (node, fabric) {
                (Some(node), Some(_)) => (None, Some(node)),
                _ => (Some(link), None),
            };
            Ok(Answer::WorkloadStarted(WorkloadStarted {
                started: true,
                queue,
                link,
                node,
            }))
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
                return Err(ControlError::bad_request(format!(
                    "capture count {count}: use 1 to {MAX_CAPTURE_FRAMES} frames"
                )));
            }
            if !(seconds > 0.0 && seconds <= MAX_CAPTURE_SECONDS) {
                return Err(ControlError::bad_request(format!(
                    "capture time {seconds} s: use more than 0 and at most {MAX_CAPTURE_SECONDS} s"
                )));
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
                .map_err(|_| {
                    ControlError::failed(format!("queue {queue} did not end its capture"))
                })?;
            Ok(Answer::Capture(capture.report()))
        }
        Request::Shutdown => {
            shared.stop.store(true, Ordering::Relaxed);
            Ok(Answer::Stopping(Stopping { stopping: true }))
        }
    }
}

/// Every queue's status, as one.
fn status(shared: &Shared) -> Result<DataplaneStatus, ControlError> {
    let queues = (0..shared.queues.len() as u16)
        .map(|q| match ask(shared, q, CommandKind::Status)? {
            Answer::QueueStatus(status) => Ok(*status),
            other => Err(answered_otherwise(q, "its status", &other)),
        })
        .collect::<Result<Vec<_>, ControlError>>()?;
    Ok(DataplaneStatus {
        name: shared.name.clone(),
        node_id: shared.node_id,
        pid: std::process::id(),
        epoch: shared.epoch,
        queues,
    })
}

fn aim(link: LinkId, node: Option<u64>) -> Aim {
    node.map_or(Aim::Link(link), Aim::Node)
}

/// The first queue that runs a fabric, if any.
fn fabric_queue(shared: &Shared) -> Result<Option<u16>, ControlError> {
    Ok(status(shared)?
        .queues
        .iter()
        .find(|q| q.fabric.is_some())
        .map(|q| q.queue.index))
}

/// The queue and link of an up link to node `node`: the first found, in
/// queue and link order.
fn link_to(shared: &Shared, node: u64) -> Result<(u16, LinkId), ControlError> {
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
    Err(ControlError::not_found(format!(
        "no link to node {node} is up; links: {}",
        seen.join("; ")
    )))
}

/// Bytes `offset..offset + len` of region `id` (`len` left out: to its
/// end), at most [`MAX_DUMP_BYTES`]. Read here, on the control thread, from
/// the memory every queue shares: a polling core that copied and encoded a
/// large region would stop answering its peer meanwhile. The words are read
/// without their locks, as a snapshot for control and tests is: tentative
/// changes show, and a verb being applied may show in part.
fn dump(shared: &Shared, id: u16, offset: u32, len: Option<u32>) -> Result<Answer, ControlError> {
    let (index, facts) = shared
        .memory
        .find(id)
        .ok_or_else(|| ControlError::not_found(format!("region {id} is not registered")))?;
    let region_len = u32::try_from(facts.len).unwrap_or(u32::MAX);
    let Some(rest) = region_len.checked_sub(offset) else {
        return Err(ControlError::bad_request(format!(
            "offset {offset} is past the end of region {id} ({region_len} bytes)"
        )));
    };
    let len = len.unwrap_or(rest);
    if len > rest {
        return Err(ControlError::bad_request(format!(
            "region {id} has {region_len} bytes: {len} from offset {offset} run past its end"
        )));
    }
    if len > MAX_DUMP_BYTES {
        return Err(ControlError::bad_request(format!(
            "a dump returns at most {MAX_DUMP_BYTES} bytes (MAX_DUMP_BYTES), and {len} bytes \
             of region {id} were asked for: dump it in windows, e.g. `oaectl region dump \
             --id {id} --offset {offset} --len {MAX_DUMP_BYTES}` (request region_dump_range)"
        )));
    }
    let mut bytes = vec![0; len as usize];
    shared.memory.load(index, offset as usize, &mut bytes);
    Ok(Answer::RegionDump(RegionDump {
        id,
        offset,
        region_len,
        data: to_hex(&bytes),
        locked_words: shared
            .memory
            .locked_words_in(index, offset as usize..offset as usize + len as usize),
    }))
}

fn queue_of(shared: &Shared, queue: u16) -> Result<&Arc<QueueShared>, ControlError> {
    shared.queues.get(usize::from(queue)).ok_or_else(|| {
        ControlError::not_found(format!(
            "no queue {queue}: this dataplane has queues 0 to {}",
            shared.queues.len().saturating_sub(1)
        ))
    })
}

fn ask(shared: &Shared, queue: u16, what: CommandKind) -> Result<Answer, ControlError> {
    ask_within(shared, queue, what, CONTROL_TIMEOUT)
}

/// [`ask`], waiting up to `limit` for the answer.
fn ask_within(
    shared: &Shared,
    queue: u16,
    what: CommandKind,
    limit: Duration,
) -> Result<Answer, ControlError> {
    let q = queue_of(shared, queue)?;
    if shared.stop.load(Ordering::Relaxed) {
        return Err(ControlError::new(
            ErrorCode::ShuttingDown,
            "the dataplane is shutting down",
        ));
    }
    q.ask(what, limit)
        .map_err(|e| e.within(format_args!("queue {queue}")))
}

fn set_faults(shared: &Shared, change: &FaultChange) -> Result<Answer, ControlError> {
    let steering = steering(shared)?;
    if steering.is_empty() {
        return Err(ControlError::unsupported(
            "no XDP program runs on this dataplane (its queues use DPDK), so there is \
                    no fault injector to set: faults are injected by the XDP program of \
                    AF_XDP queues",
        ));
    }
    if let Some(iface) = &change.iface
        && !steering.values().any(|s| s.iface() == iface)
    {
        let known: Vec<&str> = steering.values().map(|s| s.iface()).collect();
        return Err(ControlError::bad_request(format!(
            "no XDP program of this dataplane is on interface {iface}: its interfaces are {}",
            known.join(", ")
        )));
    }
    // Every interface's new faults are checked before any is set: a change
    // one interface refuses changes none.
    let mut planned = Vec::new();
    let chosen = steering
        .values()
        .filter(|s| change.iface.as_ref().is_none_or(|i| s.iface() == i));
    for s in chosen {
        let f = change.applied_to(s.faults());
        s.check_faults(&f).map_err(|e| {
            ControlError::bad_request(format!("{}: {e}; no interface was changed", s.iface()))
        })?;
        planned.push((s, f));
    }
    let mut out = Vec::new();
    for (s, f) in planned {
        s.set_faults(&f).map_err(|e| {
            let set: Vec<&str> = out.iter().map(|o: &FaultsSet| o.iface.as_str()).collect();
            ControlError::failed(format!(
                "{}: {e}; already set on: [{}]",
                s.iface(),
                set.join(", ")
            ))
        })?;
        out.push(FaultsSet {
            iface: s.iface().to_string(),
            faults: fault_view(&f),
        });
    }
    Ok(Answer::FaultsSet(out))
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

#[cfg(test)]
mod tests {
    use super::*;
    use oae_client::control::Client;
    use oae_proto::{Permissions, RegionSpec};
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;

    /// A fresh directory for one test's socket, removed when dropped.
    struct TestDir(PathBuf);

    impl TestDir {
        fn new(test: &str) -> TestDir {
            let dir = std::env::temp_dir().join(format!("oaed-unit-{}-{test}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            TestDir(dir)
        }

        fn join(&self, name: &str) -> PathBuf {
            self.0.join(name)
        }
    }

    impl Drop for TestDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A dataplane with one queue whose polling core never runs (requests
    /// that ask it would wait), over `memory`.
    fn dataplane(memory: SharedMemory) -> Arc<Shared> {
        Arc::new(Shared {
            queues: vec![Arc::new(QueueShared::new(8).unwrap())],
            steering: Mutex::new(BTreeMap::new()),
            stop: Arc::new(AtomicBool::new(false)),
            name: "test".into(),
            node_id: 1,
            epoch: 1,
            memory,
            host_ring: None,
        })
    }

    fn memory_with(len: u32) -> SharedMemory {
        let mut memory = SharedMemory::new();
        memory
            .register(RegionSpec {
                id: 1,
                key: 1,
                len,
                permissions: Permissions::ALL,
            })
            .unwrap();
        memory
    }

    fn client(path: &Path) -> UnixStream {
        let stream = UnixStream::connect(path).unwrap();
        // Only so that a server that never answers fails the test rather
        // than hanging it.
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        stream
    }

    fn answer(stream: &UnixStream) -> Response<RegionDump> {
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }

    fn ask_line(stream: &UnixStream, request: &Request) -> Response<RegionDump> {
        let mut line = serde_json::to_string(request).unwrap();
        line.push('\n');
        match (&*stream).write_all(line.as_bytes()) {
            Ok(()) => {}
            // A connection past the limit may be answered and closed before
            // the request is written: its answer is still there to read.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            Err(e) => panic!("writing the request: {e}"),
        }
        answer(stream)
    }

    fn closed_for(response: Response<RegionDump>) -> CloseReason {
        match response {
            Response::Closed(closed) => {
                assert_eq!(closed.message, closed.reason.to_string());
                closed.reason
            }
            other => panic!("not closed: {other:?}"),
        }
    }

    /// Sets the stop flag when dropped, also when a test fails.
    struct StopOnDrop<'a>(&'a AtomicBool);

    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }

    /// Runs `serve` with `limits` on a socket in `dir` while `client` runs,
    /// then stops it.
    fn serving(dir: &TestDir, limits: ControlLimits, client: impl FnOnce(&Path)) {
        serving_over(dir, memory_with(4096), limits, client)
    }

    fn serving_over(
        dir: &TestDir,
        memory: SharedMemory,
        limits: ControlLimits,
        client: impl FnOnce(&Path),
    ) {
        let shared = dataplane(memory);
        let path = dir.join("c.sock");
        let listener = bind_control(&path).unwrap();
        std::thread::scope(|s| {
            let server = s.spawn(|| serve(&listener.listener, &shared, &[], limits));
            let stop = StopOnDrop(&shared.stop);
            client(&path);
            drop(stop);
            assert_eq!(server.join().unwrap(), None);
        });
    }

    const ROOMY: ControlLimits = ControlLimits {
        connections: 2,
        idle: Duration::from_secs(60),
        line_bytes: 1024,
    };

    fn a_dump() -> Request {
        Request::RegionDumpRange {
            id: 1,
            queue: 0,
            offset: 8,
            len: Some(8),
        }
    }

    #[test]
    fn connections_past_the_limit_are_refused_saying_the_limit() {
        let dir = TestDir::new("connections");
        serving(&dir, ROOMY, |path| {
            let first = client(path);
            let second = client(path);
            // Accepted in order, after the other two.
            let third = client(path);
            assert_eq!(
                closed_for(answer(&third)),
                CloseReason::TooManyConnections { limit: 2 }
            );
            assert!(matches!(ask_line(&second, &a_dump()), Response::Ok(_)));
            drop(first);
            // Served once the first connection's thread has seen it close:
            // a bounded number of tries, however slow the machine.
            for attempt in 0.. {
                assert!(
                    attempt < 10_000,
                    "the closed connection's place never came back"
                );
                let again = client(path);
                match ask_line(&again, &a_dump()) {
                    Response::Ok(v) => {
                        assert_eq!(v.data, "00".repeat(8));
                        break;
                    }
                    Response::Closed(c)
                        if c.reason == (CloseReason::TooManyConnections { limit: 2 }) =>
                    {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    other => panic!("{other:?}"),
                }
            }
        });
    }

    #[test]
    fn a_connection_without_a_whole_request_is_closed_saying_so() {
        let dir = TestDir::new("idle");
        let limits = ControlLimits {
            idle: Duration::from_secs(1),
            ..ROOMY
        };
        serving(&dir, limits, |path| {
            let silent = client(path);
            assert_eq!(
                closed_for(answer(&silent)),
                CloseReason::Idle { limit_s: 1 }
            );
            // Part of a request, never finished: closed as well.
            let trickling = client(path);
            (&trickling).write_all(br#"{"request":"#).unwrap();
            assert_eq!(
                closed_for(answer(&trickling)),
                CloseReason::Idle { limit_s: 1 }
            );
            // A client that asks in time is answered, each request given
            // the whole wait.
            let prompt = client(path);
            assert!(matches!(ask_line(&prompt, &a_dump()), Response::Ok(_)));
            assert!(matches!(ask_line(&prompt, &a_dump()), Response::Ok(_)));
        });
    }

    #[test]
    fn a_client_reading_slowly_has_the_idle_limit_for_a_whole_answer() {
        let dir = TestDir::new("slow-reader");
        let limits = ControlLimits {
            idle: Duration::from_secs(1),
            ..ROOMY
        };
        serving_over(&dir, memory_with(MAX_DUMP_BYTES), limits, |path| {
            let slow = client(path);
            let mut line = serde_json::to_string(&Request::RegionDumpRange {
                id: 1,
                queue: 0,
                offset: 0,
                len: Some(MAX_DUMP_BYTES),
            })
            .unwrap();
            line.push('\n');
            (&slow).write_all(line.as_bytes()).unwrap();
            // 4 KiB every 50 ms: each write of the answer would find room
            // in time, but the whole answer (2 MiB of hex) would take 25 s.
            let whole = 2 * MAX_DUMP_BYTES as usize;
            let (mut received, mut ended) = (0, false);
            let mut chunk = [0u8; 4096];
            for _ in 0..2_000 {
                match (&slow).read(&mut chunk) {
                    Ok(0) => {
                        ended = true;
                        break;
                    }
                    Ok(n) => received += n,
                    Err(e) => panic!("the server neither wrote nor closed: {e}"),
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            assert!(ended, "the connection was not closed");
            assert!(
                received < whole,
                "the whole answer ({received} bytes) was written to a slow reader"
            );
        });
    }

    #[test]
    fn a_request_line_past_the_limit_is_refused_and_the_connection_closed() {
        let dir = TestDir::new("long-line");
        serving(&dir, ROOMY, |path| {
            let long = client(path);
            // Four times the limit, no newline: fits in the socket's
            // buffer, so the write does not wait for the server.
            (&long).write_all(&[b' '; 4096]).unwrap();
            assert_eq!(
                closed_for(answer(&long)),
                CloseReason::RequestTooLong { limit_bytes: 1024 }
            );
            let mut rest = Vec::new();
            let _ = (&long).read_to_end(&mut rest);
            assert!(rest.is_empty(), "nothing after the closing line");
            // A request of the limit's length exactly is read.
            let padded = client(path);
            let mut line = serde_json::to_string(&a_dump()).unwrap();
            line.extend(std::iter::repeat_n(' ', 1024 - line.len()));
            line.push('\n');
            (&padded).write_all(line.as_bytes()).unwrap();
            assert!(matches!(answer(&padded), Response::Ok(_)));
            // And through `call`, the reason in words.
            let err = Client::new(path, Duration::from_secs(60))
                .workload_phase(0, 0, None, &"x".repeat(1 << 20))
                .unwrap_err();
            assert_eq!(err.code, ErrorCode::Closed, "{err:?}");
            assert!(err.message.contains("at most 1024 bytes"), "{err:?}");
        });
    }

    #[test]
    fn dumps_are_bounded_and_read_in_windows() {
        let region = 2 * MAX_DUMP_BYTES;
        let shared = dataplane(memory_with(region));
        let whole = handle(Request::RegionDump { id: 1, queue: 0 }, &shared).unwrap_err();
        assert!(
            whole.code == ErrorCode::BadRequest
                && whole.message.contains(&MAX_DUMP_BYTES.to_string())
                && whole.message.contains("--offset")
                && whole.message.contains("region_dump_range"),
            "{whole:?}"
        );
        let window = |offset, len| {
            handle(
                Request::RegionDumpRange {
                    id: 1,
                    queue: 0,
                    offset,
                    len,
                },
                &shared,
            )
        };
        let Ok(Answer::RegionDump(last)) = window(MAX_DUMP_BYTES, None) else {
            panic!("no dump")
        };
        assert_eq!(
            (last.offset, last.region_len, last.data.len()),
            (MAX_DUMP_BYTES, region, 2 * MAX_DUMP_BYTES as usize)
        );
        let err = window(0, Some(MAX_DUMP_BYTES + 8)).unwrap_err();
        assert!(err.message.contains("MAX_DUMP_BYTES"), "{err:?}");
        let err = window(region - 8, Some(16)).unwrap_err();
        assert!(err.message.contains("past its end"), "{err:?}");
        let err = window(region + 1, None).unwrap_err();
        assert!(err.message.contains("past the end"), "{err:?}");
        let small = dataplane(memory_with(64));
        let Ok(Answer::RegionDump(all)) = handle(Request::RegionDump { id: 1, queue: 0 }, &small)
        else {
            panic!("no dump")
        };
        assert_eq!(all.data, "00".repeat(64));
    }

    #[test]
    fn a_polling_thread_that_panicked_stops_the_dataplane_and_is_named() {
        let dir = TestDir::new("panic");
        let path = dir.join("c.sock");
        let listener = bind_control(&path).unwrap();
        let shared = dataplane(SharedMemory::new());
        let (ready, go) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || -> FinalReport {
            let _ = go.recv();
            panic!("bad request on the polling core")
        });
        let threads = vec![thread];
        ready.send(()).unwrap();
        // Not asked to stop: `serve` returns only because the thread ended.
        let (done, served) = std::sync::mpsc::channel();
        let ended = std::thread::scope(|s| {
            s.spawn(|| {
                done.send(serve(
                    &listener.listener,
                    &shared,
                    &threads,
                    ControlLimits::PROTOCOL,
                ))
            });
            // It returns within one accept poll (20 ms); a minute means it
            // did not notice, and stopping it ends the test instead of
            // hanging it.
            served
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| {
                    shared.stop.store(true, Ordering::Relaxed);
                    served.recv().unwrap()
                })
        });
        assert_eq!(
            ended,
            Some(Ended::ThreadDied(0)),
            "the polling thread's end went unnoticed"
        );
        let err = finish(&shared, threads, &path, Finish::Ran).unwrap_err();
        assert!(
            err.contains("queue 0's polling thread panicked: bad request on the polling core"),
            "{err}"
        );
        assert!(!path.exists(), "the socket is removed");
    }

    #[test]
    fn only_a_stale_socket_is_replaced() {
        let dir = TestDir::new("stale");
        let path = dir.join("c.sock");
        std::fs::write(&path, "precious").unwrap();
        let err = bind_control(&path).unwrap_err();
        assert!(
            err.contains(&path.display().to_string())
                && err.contains("a regular file")
                && err.contains("--socket"),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious");
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        let err = bind_control(&path).unwrap_err();
        assert!(err.contains("a directory"), "{err}");
        std::fs::remove_dir(&path).unwrap();

        let live = bind_control(&path).unwrap();
        // Refused at the lock; and a live socket is refused for itself too
        // (one whose dataplane holds no lock, as an older oaed's).
        let err = bind_control(&path).unwrap_err();
        assert!(err.contains("another dataplane is listening"), "{err}");
        let err = clear_stale_socket(&path).unwrap_err();
        assert!(err.contains("another dataplane is listening on"), "{err}");
        // Closed without removing its name: a stale socket, replaced.
        drop(live);
        assert!(path.exists());
        let again = bind_control(&path).unwrap();
        assert!(UnixStream::connect(&path).is_ok());
        drop(again);

        // A stale socket while another dataplane holds the lock (it is
        // between judging the socket stale and linking its own): left
        // alone, not unlinked from under it.
        let starting = lock_control(&path).unwrap();
        let stale = std::fs::metadata(&path).unwrap().ino();
        let err = bind_control(&path).unwrap_err();
        assert!(err.contains("listening or starting"), "{err}");
        assert_eq!(std::fs::metadata(&path).unwrap().ino(), stale);
        drop(starting);

        // Nothing is left of the private directories; the lock file stays.
        let mut left: Vec<_> = std::fs::read_dir(&dir.0)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                std::ffi::OsString::from("c.sock"),
                std::ffi::OsString::from("c.sock.lock")
            ]
        );
    }

    /// Set in the process that [`the_control_socket_is_never_open_to_others`]
    /// runs itself in, under umask 000.
    const UMASK_0_CHILD: &str = "OAED_TEST_BIND_UNDER_UMASK_0";

    #[test]
    fn the_control_socket_is_never_open_to_others() {
        // The umask is the whole process's, and the other tests run beside
        // this one: set it only in a process of its own, which runs this
        // test alone.
        if std::env::var_os(UMASK_0_CHILD).is_none() {
            let me = std::env::current_exe().unwrap();
            let out = std::process::Command::new("sh")
                .args(["-c", r#"umask 000 && exec "$0" "$@""#])
                .arg(&me)
                .args([
                    "--exact",
                    "daemon::tests::the_control_socket_is_never_open_to_others",
                    "--nocapture",
                ])
                .env(UMASK_0_CHILD, "1")
                .output()
                .unwrap();
            let (stdout, stderr) = (
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
            );
            assert!(
                out.status.success() && stdout.contains("1 passed"),
                "{me:?} under umask 000: {}\n--- stdout:\n{stdout}\n--- stderr:\n{stderr}",
                out.status
            );
            return;
        }
        let dir = TestDir::new("umask");
        let probe = dir.join("probe");
        std::fs::write(&probe, "").unwrap();
        let mode = |p: &Path| std::fs::symlink_metadata(p).map(|m| m.permissions().mode() & 0o777);
        assert_eq!(mode(&probe).unwrap(), 0o666, "running under umask 000");
        let path = dir.join("c.sock");
        let watching = AtomicBool::new(true);
        let mut seen = Vec::new();
        std::thread::scope(|s| {
            // Looks at the socket's name as often as it can while it is
            // bound again and again: any mode but 0600 there is a moment
            // in which others could connect.
            let watcher = s.spawn(|| {
                let mut looks = 0u64;
                let mut wrong = Vec::new();
                while watching.load(Ordering::Relaxed) {
                    if let Ok(m) = mode(&path)
                        && m != 0o600
                    {
                        wrong.push(m);
                    }
                    looks += 1;
                }
                (looks, wrong)
            });
            for _ in 0..2000 {
                let listener = bind_control(&path).unwrap();
                drop(listener);
                std::fs::remove_file(&path).unwrap();
            }
            watching.store(false, Ordering::Relaxed);
            let (looks, wrong) = watcher.join().unwrap();
            assert!(looks > 0);
            seen = wrong;
        });
        let modes: Vec<String> = seen.iter().take(10).map(|m| format!("{m:o}")).collect();
        assert!(
            seen.is_empty(),
            "the socket's name was seen {} times with a mode other than 600: {modes:?}",
            seen.len()
        );
    }
}
