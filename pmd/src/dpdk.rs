//! A DPDK ethdev port behind the burst [`Driver`] interface.
//!
//! [`init_eal`] starts DPDK's environment once per process, with the
//! arguments a configuration gives (vdevs such as `net_memif0,role=server`,
//! `net_af_xdp0,iface=eth0` or `net_ring0`; `--in-memory`, `--file-prefix`,
//! `--no-huge`). [`Dpdk::new`] then opens one port by its device name with
//! one receive and one transmit queue and a pool of mbufs of its own.
//!
//! # Buffer ownership
//!
//! A [`Mbuf`] is neither `Copy` nor `Clone`: the type system keeps one
//! holder per mbuf, and [`Driver::tx_burst`] and [`Driver::release`] take
//! the handles back. The driver counts the mbufs its caller holds; dropped
//! while any are out, it leaks its pool rather than free memory a handle
//! still points into. A handle dropped without being given back leaks its
//! mbuf (the pool shrinks by one); it never frees memory twice.

use std::ffi::{CStr, CString, c_char, c_int};
use std::fmt;
use std::path::PathBuf;
use std::ptr::{self, NonNull};
use std::slice;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

use dpdk_sys as sys;

use crate::{Burst, Driver, DriverStats, MAX_BURST};

/// Why DPDK could not be started or a port opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DpdkError {
    /// What was being done, in the user's terms.
    pub what: String,
    /// DPDK's explanation (from `rte_strerror`), with a hint where one helps.
    pub detail: String,
}

impl fmt::Display for DpdkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.what, self.detail)
    }
}

impl std::error::Error for DpdkError {}

fn error(what: impl Into<String>, detail: impl Into<String>) -> DpdkError {
    DpdkError {
        what: what.into(),
        detail: detail.into(),
    }
}

/// DPDK's text for error number `code` (positive or negative).
fn strerror(code: c_int) -> String {
    // SAFETY: rte_strerror returns a pointer to a static or thread-local
    // NUL-terminated string for any value.
    let text = unsafe { CStr::from_ptr(sys::rte_strerror(code.abs())) };
    text.to_string_lossy().into_owned()
}

/// `rte_errno` of this thread, as text.
fn last_error() -> String {
    // SAFETY: reads a thread-local integer.
    strerror(unsafe { sys::oae_errno() })
}

/// What became of the one `rte_eal_init` call a process may make: the
/// arguments it was given and, if it failed, why. DPDK cannot retry a
/// failed initialisation, so a failure is kept and repeated.
static EAL: Mutex<Option<EalStart>> = Mutex::new(None);

struct EalStart {
    args: Vec<String>,
    outcome: Result<(), DpdkError>,
}

/// Starts DPDK's environment abstraction layer with `args` (without a
/// program name), once per process. Called again with the same arguments
/// it does nothing; with others it refuses, since the EAL cannot restart.
///
/// The EAL pins the calling thread to its main core; this thread's CPU
/// affinity is restored afterwards, so threads it starts later are placed
/// by the caller, not by DPDK.
/// Refuses `net_af_xdp` on 4 KiB pages. The PMD hands the kernel mbufs as
/// AF_XDP descriptors; without hugepages many mbufs straddle a page
/// boundary, and the kernel drops those frames without a trace in DPDK's
/// counters (on veth, most of a run's frames: measured).
fn check_af_xdp_memory(args: &[String]) -> Result<(), DpdkError> {
    let af_xdp = args.iter().any(|a| {
        a.trim_start_matches("--vdev")
            .trim_start_matches('=')
            .starts_with("net_af_xdp")
    });
    if af_xdp && args.iter().any(|a| a == "--no-huge") {
        return Err(error(
            "starting DPDK",
            "net_af_xdp needs hugepage memory: with --no-huge its mbufs cross 4 KiB page \
             boundaries and the kernel silently drops the frames they carry. Reserve \
             hugepages (echo 256 > /proc/sys/vm/nr_hugepages, with hugetlbfs mounted) and \
             leave --no-huge out (the default EAL arguments then use --in-memory)"
                .to_string(),
        ));
    }
    Ok(())
}

/// Where [`reserve_hugepages`] mounts hugetlbfs if nothing has.
const HUGETLBFS: &str = "/dev/hugepages";

/// Makes at least `pages` hugepages of the default size free, raising
/// `vm.nr_hugepages` if needed, and mounts hugetlbfs if no mount exists.
/// For tests and benchmarks that run DPDK on a machine of their own (it
/// changes system settings; needs root). Returns the free pages.
pub fn reserve_hugepages(pages: u64) -> Result<u64, String> {
    let meminfo = |key: &str| -> u64 {
        std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix(key))
                    .and_then(|v| v.trim().parse().ok())
            })
            .unwrap_or(0)
    };
    let free = meminfo("HugePages_Free:");
    if free < pages {
        let total = meminfo("HugePages_Total:") + (pages - free);
        std::fs::write("/proc/sys/vm/nr_hugepages", total.to_string())
            .map_err(|e| format!("cannot reserve {pages} hugepages (run as root): {e}"))?;
    }
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    if !mounts
        .lines()
        .any(|l| l.split_whitespace().nth(2) == Some("hugetlbfs"))
    {
        std::fs::create_dir_all(HUGETLBFS).map_err(|e| format!("creating {HUGETLBFS}: {e}"))?;
        let ok = std::process::Command::new("mount")
            .args(["-t", "hugetlbfs", "nodev", HUGETLBFS])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return Err(format!("cannot mount hugetlbfs on {HUGETLBFS}"));
        }
    }
    let free = meminfo("HugePages_Free:");
    if free < pages {
        return Err(format!(
            "asked for {pages} free hugepages, the kernel gave {free} (memory too fragmented?)"
        ));
    }
    Ok(free)
}

/// How long a memif client waits for its server's socket file.
const MEMIF_SERVER_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Waits (bounded) for the socket file of every memif client's server: a
/// client whose server has not created its socket yet fails to start
/// (EPERM), and two dataplanes are usually started together.
fn wait_for_memif_servers(args: &[String]) {
    let sockets: Vec<&str> = args
        .iter()
        .map(|a| a.trim_start_matches("--vdev").trim_start_matches('='))
        .filter(|v| v.starts_with("net_memif"))
        .filter(|v| v.split(',').any(|kv| kv == "role=client"))
        .filter(|v| v.split(',').any(|kv| kv == "socket-abstract=no"))
        .filter_map(|v| v.split(',').find_map(|kv| kv.strip_prefix("socket=")))
        .collect();
    let deadline = std::time::Instant::now() + MEMIF_SERVER_WAIT;
    for socket in sockets {
        while !std::path::Path::new(socket).exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

pub fn init_eal(args: &[String]) -> Result<(), DpdkError> {
    check_af_xdp_memory(args)?;
    wait_for_memif_servers(args);
    let mut eal = EAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(EalStart {
        args: started,
        outcome,
    }) = eal.as_ref()
    {
        return if started == args {
            outcome.clone()
        } else {
            Err(error(
                "starting DPDK",
                format!(
                    "the EAL already runs in this process with arguments {started:?}; it \
                     starts once, so give every DPDK queue the same [dpdk] settings"
                ),
            ))
        };
    }
    let mut argv: Vec<CString> = Vec::with_capacity(args.len() + 1);
    argv.push(CString::new("oae").expect("no NUL"));
    for a in args {
        argv.push(CString::new(a.as_str()).map_err(|_| {
            error(
                "starting DPDK",
                format!("EAL argument {a:?} contains a NUL byte"),
            )
        })?);
    }
    // The EAL keeps pointers into argv for the life of the process.
    let argv: &'static mut [*mut c_char] = Box::leak(
        argv.into_iter()
            .map(CString::into_raw)
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    remove_runtime_dir_at_exit();
    // The EAL pins the calling thread to its main lcore; put it back.
    let affinity = oae_os::pin::Affinity::current();
    // SAFETY: argv holds argc valid NUL-terminated strings that live for the
    // rest of the process; the EAL is initialised at most once (guarded by
    // the lock held here).
    let rc = unsafe { sys::rte_eal_init(argv.len() as c_int, argv.as_mut_ptr()) };
    if let Some(before) = affinity {
        before.restore();
    }
    let outcome = if rc < 0 {
        Err(error(
            format!("starting DPDK with {args:?}"),
            format!(
                "{}; check the vdev names and options (e.g. net_memif0,role=server,\
                 socket=/tmp/x.sock); without hugepages use --no-huge --no-shconf \
                 (--no-huge cannot go with --in-memory)",
                last_error()
            ),
        ))
    } else {
        Ok(())
    };
    note_runtime_dir();
    *eal = Some(EalStart {
        args: args.to_vec(),
        outcome: outcome.clone(),
    });
    outcome
}

/// The EAL's runtime directory (`/var/run/dpdk/<file-prefix>`), to remove
/// when the process exits.
static RUNTIME_DIR: OnceLock<PathBuf> = OnceLock::new();

/// The EAL makes a runtime directory even with `--no-shconf` (and even
/// when it fails to start) and leaves it behind. Registered before
/// `rte_eal_init`, this runs after the EAL's own exit handlers have removed
/// their files, and removes the directory only if it is empty, so nothing
/// DPDK still uses is ever removed.
fn remove_runtime_dir_at_exit() {
    extern "C" fn remove() {
        if let Some(dir) = RUNTIME_DIR.get() {
            let _ = std::fs::remove_dir(dir);
        }
    }
    // SAFETY: `remove` is a plain function that only touches the file
    // system; if registration fails the directory merely stays.
    unsafe { libc::atexit(remove) };
}

/// Records the runtime directory `rte_eal_init` chose.
fn note_runtime_dir() {
    // SAFETY: returns a pointer to the EAL's static, NUL-terminated path
    // buffer (empty if initialisation failed before choosing one).
    let dir = unsafe { CStr::from_ptr(sys::rte_eal_get_runtime_dir()) };
    let dir = dir.to_string_lossy();
    if !dir.is_empty() {
        let _ = RUNTIME_DIR.set(PathBuf::from(dir.into_owned()));
    }
}

/// Where and how to open a port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DpdkConfig {
    /// The device name, e.g. `net_memif0` or `net_af_xdp0` (a vdev given
    /// to [`init_eal`]) or a PCI address.
    pub port: String,
    /// Receive descriptors.
    pub rx_ring: u16,
    /// Transmit descriptors.
    pub tx_ring: u16,
    /// Mbufs in the port's pool (receive ring, transmit ring and caller
    /// together).
    pub mbufs: u32,
}

impl DpdkConfig {
    pub fn new(port: impl Into<String>) -> DpdkConfig {
        DpdkConfig {
            port: port.into(),
            rx_ring: 1024,
            tx_ring: 1024,
            mbufs: 8191,
        }
    }

    /// Checks what can be checked before DPDK runs.
    pub fn validate(&self) -> Result<(), DpdkError> {
        let bad = |detail: String| Err(error("invalid DPDK port configuration", detail));
        if self.port.is_empty() {
            return bad("port is empty: name the device, e.g. \"net_memif0\"".into());
        }
        for (name, n) in [("rx_ring", self.rx_ring), ("tx_ring", self.tx_ring)] {
            if !n.is_power_of_two() || n < 64 {
                return bad(format!(
                    "{name} {n}: use a power of two of at least 64, e.g. 1024"
                ));
            }
        }
        let least = u32::from(self.rx_ring) + u32::from(self.tx_ring) + 2 * MAX_BURST as u32;
        if self.mbufs < least {
            return bad(format!(
                "mbufs {}: the rings alone hold {}, so use at least {least}",
                self.mbufs,
                u32::from(self.rx_ring) + u32::from(self.tx_ring)
            ));
        }
        Ok(())
    }
}

/// One single-segment mbuf, owned by whoever holds this handle, with
/// where its packet starts, its length and its room: reading and writing
/// a frame call nothing; the length reaches the mbuf when it is sent.
#[repr(transparent)]
pub struct Mbuf(sys::oae_frame);

// SAFETY: an mbuf belongs to exactly one holder at a time (the handle is
// neither Copy nor Clone), and DPDK's mempool returns it from any thread.
unsafe impl Send for Mbuf {}

impl fmt::Debug for Mbuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Mbuf({:p}, {} bytes)", self.0.mbuf, self.0.len)
    }
}

/// One started port, its queue 0 and its mbuf pool.
pub struct Dpdk {
    port: u16,
    name: String,
    pool: NonNull<sys::rte_mempool>,
    mac: [u8; 6],
    /// Mbufs the caller holds.
    outstanding: usize,
    /// Received mbufs given back, kept to carry the next frames sent
    /// instead of going back to the pool and out of it again.
    reused: Burst<Mbuf>,
    /// Where the shim writes a burst's frames (kept, not zeroed per call).
    scratch: [sys::oae_frame; MAX_BURST],
    stats: DriverStats,
}

// SAFETY: the port's queue 0 and the pool are used by whichever single
// thread owns this value; DPDK allows a queue to move between threads as
// long as two never use it at once, which `&mut self` guarantees.
unsafe impl Send for Dpdk {}

impl fmt::Debug for Dpdk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dpdk")
            .field("port", &self.port)
            .field("name", &self.name)
            .field("outstanding", &self.outstanding)
            .finish_non_exhaustive()
    }
}

impl Dpdk {
    /// Opens, configures and starts the port. [`init_eal`] must have run.
    pub fn new(config: &DpdkConfig) -> Result<Dpdk, DpdkError> {
        config.validate()?;
        if !matches!(
            *EAL.lock().unwrap_or_else(|e| e.into_inner()),
            Some(EalStart {
                outcome: Ok(()),
                ..
            })
        ) {
            return Err(error(
                format!("opening DPDK port {}", config.port),
                "the EAL is not running: call init_eal first (and check that it succeeded)",
            ));
        }
        let what = |step: &str| format!("{step} DPDK port {}", config.port);
        let name = CString::new(config.port.as_str())
            .map_err(|_| error(what("opening"), "the name contains a NUL byte"))?;
        let mut port = 0u16;
        // SAFETY: a NUL-terminated name and a valid out-pointer.
        let rc = unsafe { sys::rte_eth_dev_get_port_by_name(name.as_ptr(), &mut port) };
        if rc != 0 {
            // SAFETY: no arguments.
            let ports = unsafe { sys::rte_eth_dev_count_avail() };
            return Err(error(
                what("opening"),
                format!(
                    "no such device ({}); {ports} port(s) exist. Declare it as a vdev in the \
                     EAL arguments, e.g. --vdev={}",
                    strerror(rc),
                    config.port
                ),
            ));
        }
        // SAFETY: a valid port id.
        let socket = unsafe { sys::rte_eth_dev_socket_id(port) };
        // Unique for the process: a pool leaked by an earlier driver keeps
        // its name.
        static POOLS: AtomicU32 = AtomicU32::new(0);
        let pool_name = CString::new(format!(
            "oae_pool_{port}_{}",
            POOLS.fetch_add(1, Ordering::Relaxed)
        ))
        .expect("no NUL");
        let data_room = (sys::DEFAULT_DATAROOM + sys::RTE_PKTMBUF_HEADROOM) as u16;
        // SAFETY: a NUL-terminated unique name; sizes within DPDK's limits.
        let pool = unsafe {
            sys::rte_pktmbuf_pool_create(
                pool_name.as_ptr(),
                config.mbufs,
                256,
                0,
                data_room,
                socket,
            )
        };
        let pool = NonNull::new(pool).ok_or_else(|| {
            error(
                what("creating the mbuf pool of"),
                format!(
                    "{}; with --no-huge give the EAL enough memory (-m), or use fewer mbufs",
                    last_error()
                ),
            )
        })?;
        let fail = |step: &str, rc: c_int| {
            // SAFETY: the pool was created above and nothing uses it yet.
            unsafe { sys::rte_mempool_free(pool.as_ptr()) };
            error(what(step), strerror(rc))
        };
        let conf = sys::rte_eth_conf::default();
        // SAFETY: a valid port and a zeroed (default) configuration.
        let rc = unsafe { sys::rte_eth_dev_configure(port, 1, 1, &conf) };
        if rc != 0 {
            return Err(fail("configuring", rc));
        }
        // SAFETY: queue 0 of a configured port; default queue settings
        // (null); the pool outlives the queue (freed only after close).
        let rc = unsafe {
            sys::rte_eth_rx_queue_setup(
                port,
                0,
                config.rx_ring,
                socket as u32,
                ptr::null(),
                pool.as_ptr(),
            )
        };
        if rc != 0 {
            return Err(fail("setting up the receive queue of", rc));
        }
        // SAFETY: as above, for the transmit queue.
        let rc = unsafe {
            sys::rte_eth_tx_queue_setup(port, 0, config.tx_ring, socket as u32, ptr::null())
        };
        if rc != 0 {
            return Err(fail("setting up the transmit queue of", rc));
        }
        // SAFETY: a configured port with its queues set up.
        let rc = unsafe { sys::rte_eth_dev_start(port) };
        if rc != 0 {
            return Err(fail("starting", rc));
        }
        // Frames for the peer's MAC only would do, but vdevs differ in what
        // they filter; the pipeline checks the source itself. Not every
        // PMD supports the switch, which is fine.
        // SAFETY: a started port.
        let _ = unsafe { sys::rte_eth_promiscuous_enable(port) };
        let mut addr = sys::rte_ether_addr::default();
        // SAFETY: a valid port and out-pointer.
        unsafe { sys::rte_eth_macaddr_get(port, &mut addr) };
        Ok(Dpdk {
            port,
            name: config.port.clone(),
            pool,
            mac: addr.addr_bytes,
            outstanding: 0,
            reused: Burst::new(),
            scratch: [sys::oae_frame::default(); MAX_BURST],
            stats: DriverStats::default(),
        })
    }

    /// The device name the port was opened by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Mbufs the caller holds now.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }
}

/// This thread's place among the EAL's lcores. A thread that is no lcore
/// (a polling thread the dataplane started) has no mempool cache: every
/// mbuf the PMD takes or gives back goes through the pool's shared ring.
/// So a thread registers the first time it polls, and gives its lcore
/// back when it ends.
struct Lcore {
    /// This thread registered itself (and gives the lcore back).
    registered: bool,
    /// This thread is an lcore, registered here or by the EAL.
    lcore: bool,
}

impl Lcore {
    fn register() -> Lcore {
        // SAFETY: the EAL is initialised (a `Dpdk` exists, and polling
        // needs one); registering touches only this thread's state.
        let rc = unsafe { sys::oae_thread_register() };
        if rc < 0 {
            eprintln!(
                "oaed: DPDK: this polling thread could not become an lcore ({}): its mbufs \
                 go through the pool's ring, without a cache",
                last_error()
            );
        }
        Lcore {
            registered: rc == 0,
            lcore: rc >= 0,
        }
    }
}

impl Drop for Lcore {
    fn drop(&mut self) {
        if self.registered {
            // SAFETY: this thread registered itself and is ending.
            unsafe { sys::oae_thread_unregister() };
        }
    }
}

thread_local! {
    static LCORE: Lcore = Lcore::register();
}

/// Whether the calling thread is one of the EAL's lcores once it polls
/// (registering it if it polls for the first time), so that the mempool
/// caches its mbufs.
pub fn polling_thread_is_lcore() -> bool {
    LCORE.with(|l| l.lcore)
}

impl Driver for Dpdk {
    type Buf = Mbuf;

    fn rx_burst(&mut self, out: &mut Burst<Mbuf>) -> usize {
        LCORE.with(|_| ());
        let room = out.remaining_capacity();
        if room == 0 {
            return 0;
        }
        let mut chained = 0u16;
        // SAFETY: queue 0 of a started port, used by this thread only
        // (`&mut self`); `scratch` has room for `room` frames.
        let n = unsafe {
            sys::oae_rx_frames(
                self.port,
                0,
                self.pool.as_ptr(),
                self.scratch.as_mut_ptr(),
                room as u16,
                &mut chained,
            )
        };
        // A chained frame has no single slice to lend out: freed.
        self.stats.rx_unsupported += u64::from(chained);
        let n = usize::from(n);
        out.extend(self.scratch[..n].iter().map(|&f| Mbuf(f)));
        self.outstanding += n;
        self.stats.rx_packets += n as u64;
        n
    }

    fn alloc(&mut self, out: &mut Burst<Mbuf>, n: usize) -> usize {
        let want = n.min(out.remaining_capacity());
        let mut given = 0;
        while given < want {
            let Some(m) = self.reused.pop() else { break };
            out.push(m);
            given += 1;
        }
        self.stats.buffers_reused += given as u64;
        // All or nothing: on failure ask for half as many, down to one.
        let mut k = want - given;
        while k > 0 {
            let frames = self.scratch.as_mut_ptr();
            // SAFETY: the pool lives as long as `self`; `scratch` has room
            // for k <= MAX_BURST.
            if unsafe { sys::oae_alloc_frames(self.pool.as_ptr(), frames, k as u16) } == 0 {
                break;
            }
            k /= 2;
        }
        out.extend(self.scratch[..k].iter().map(|&f| Mbuf(f)));
        if given + k < want {
            self.stats.alloc_failed += 1;
        }
        self.outstanding += given + k;
        given + k
    }

    fn frame<'a>(&'a self, buf: &'a Mbuf) -> &'a [u8] {
        // SAFETY: the caller holds this single-segment mbuf (its handle is
        // borrowed for 'a), so its data room is valid and nobody else
        // writes it; `len` bytes from `data` lie inside it (`len` <=
        // `room`, as received or as `frame_mut` set it).
        unsafe { slice::from_raw_parts(buf.0.data, usize::from(buf.0.len)) }
    }

    fn frame_mut<'a>(&'a mut self, buf: &'a mut Mbuf, len: usize) -> &'a mut [u8] {
        let room = usize::from(buf.0.room);
        assert!(
            len <= room,
            "frame length {len} exceeds this mbuf's room of {room} bytes"
        );
        buf.0.len = len as u16;
        // SAFETY: as in `frame`, and the handle is borrowed mutably, so this
        // is the only slice of the mbuf; `len` fits its data room.
        unsafe { slice::from_raw_parts_mut(buf.0.data, len) }
    }

    fn frame_capacity(&self) -> usize {
        sys::DEFAULT_DATAROOM as usize
    }

    fn tx_burst(&mut self, bufs: &mut Burst<Mbuf>) -> usize {
        if bufs.is_empty() {
            return 0;
        }
        // `Mbuf` is a transparent `oae_frame`: the burst is the array the
        // shim reads.
        let frames = bufs.as_mut_ptr().cast::<sys::oae_frame>();
        // SAFETY: queue 0 of a started port, this thread only; `frames`
        // points at the burst's `len()` handles; the mbufs are ours, each
        // once; those accepted belong to the PMD from now on.
        let sent =
            usize::from(unsafe { sys::oae_tx_frames(self.port, 0, frames, bufs.len() as u16) });
        // The accepted handles are gone to the PMD: drop them unfreed.
        bufs.drain(..sent);
        self.outstanding -= sent;
        self.stats.tx_packets += sent as u64;
        if !bufs.is_empty() {
            self.stats.tx_ring_full += 1;
        }
        sent
    }

    fn release(&mut self, bufs: &mut Burst<Mbuf>) {
        let mut n = 0;
        self.outstanding -= bufs.len();
        for mut b in bufs.drain(..) {
            if b.0.reusable != 0 && !self.reused.is_full() {
                b.0.len = 0;
                self.reused.push(b);
            } else {
                self.scratch[n] = b.0;
                n += 1;
            }
        }
        if n > 0 {
            // SAFETY: the caller gave these mbufs back; each is freed once.
            unsafe { sys::oae_free_frames(self.scratch.as_mut_ptr(), n as u16) };
        }
    }

    fn stats(&mut self) -> DriverStats {
        let mut s = self.stats;
        let mut e = sys::rte_eth_stats::default();
        // SAFETY: a valid port and out-pointer.
        if unsafe { sys::rte_eth_stats_get(self.port, &mut e) } == 0 {
            s.kernel_rx_dropped = e.imissed;
            s.kernel_fill_ring_empty = e.rx_nombuf;
            s.kernel_rx_invalid = e.ierrors;
            s.kernel_tx_invalid = e.oerrors;
        }
        s
    }

    fn mac(&self) -> [u8; 6] {
        self.mac
    }
}

impl Drop for Dpdk {
    fn drop(&mut self) {
        let n = self.reused.len();
        let kept = self.reused.as_mut_ptr().cast::<sys::oae_frame>();
        // SAFETY: `Mbuf` is a transparent `oae_frame`; the mbufs kept for
        // reuse are the driver's own, freed once (their handles are
        // forgotten below, never used again).
        unsafe { sys::oae_free_frames(kept, n as u16) };
        self.reused.clear();
        // SAFETY: the port was started by `new`; stopping and closing it
        // frees the mbufs its rings hold.
        unsafe {
            sys::rte_eth_dev_stop(self.port);
            sys::rte_eth_dev_close(self.port);
        }
        if self.outstanding == 0 {
            // SAFETY: no ring and no handle refers to the pool any more.
            unsafe { sys::rte_mempool_free(self.pool.as_ptr()) };
        }
        // Otherwise handles still point into the pool: leaking it is the
        // only sound choice.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_mistakes_say_what_to_fix() {
        DpdkConfig::new("net_ring0").validate().unwrap();
        let check = |f: fn(&mut DpdkConfig), needle: &str| {
            let mut c = DpdkConfig::new("net_ring0");
            f(&mut c);
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains(needle), "{e:?} lacks {needle:?}");
        };
        check(|c| c.port.clear(), "name the device");
        check(|c| c.rx_ring = 1000, "power of two");
        check(|c| c.mbufs = 100, "at least 2176");
    }

    #[test]
    fn a_driver_and_its_buffers_can_move_to_the_polling_thread() {
        fn send<T: Send>() {}
        send::<Dpdk>();
        send::<Mbuf>();
    }
}
