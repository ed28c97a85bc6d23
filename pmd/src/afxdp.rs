//! An AF_XDP socket (xsk-rs over libxdp) behind the burst [`Driver`]
//! interface.
//!
//! The socket never loads an XDP program of its own: the oae steering
//! program owns the interface's XDP hook and its XSKMAP, and the caller
//! registers [`AfXdp::fd`] there for the socket's queue. Until then nothing
//! reaches the socket.
//!
//! # Frame ownership
//!
//! The UMEM is split into `frame_count` frames, each of which is in exactly
//! one place at any time:
//!
//! * **free**: in the driver's preallocated free list;
//! * **fill**: handed to the kernel for reception (fill ring, or received
//!   and waiting in the rx ring);
//! * **caller**: returned by [`Driver::rx_burst`] or [`Driver::alloc`] and
//!   not yet given back;
//! * **tx**: on the transmit ring or awaiting its completion.
//!
//! A per-frame table records which, and every handle the caller passes in is
//! checked against it: a handle used after it was released or transmitted,
//! or one of another driver that names a frame this one has not handed out,
//! panics instead of letting the kernel and the caller touch the same
//! memory. That table is what makes the byte slices of [`Driver::frame`]
//! and [`Driver::frame_mut`] sound. (A handle copied from another driver
//! that happens to name a frame the caller holds here goes unnoticed, but
//! only ever reaches memory the kernel leaves alone.)
//!
//! The fill ring is kept full: it is topped up from the free list on every
//! [`Driver::rx_burst`], and [`Driver::alloc`] only hands out free frames
//! the fill ring is not owed, so transmission never starves reception.
//! Frames waiting in the rx ring come from the shared pool: a caller that
//! falls behind on reception slows its own transmission (allocation fails
//! until it catches up) and the kernel sees a full rx ring rather than an
//! empty fill ring while the free list has frames. The completion ring is
//! reaped on every call that moves frames.

use std::ffi::c_void;
use std::fmt;
use std::io;
use std::iter;
use std::mem;
use std::net::UdpSocket;
use std::num::NonZeroU32;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::slice;
use std::thread;
use std::time::{Duration, Instant};

use xsk_rs::config::{
    BindFlags, FrameSize, Interface, LibxdpFlags, QueueSize, SocketConfig, UmemConfig,
};
use xsk_rs::{CompQueue, FillQueue, RxQueue, Socket, TxQueue, Umem};

use crate::{Burst, Driver, DriverStats, MAX_BURST};

/// The driver's buffer handle: a frame's address in the UMEM and its length.
pub use xsk_rs::FrameDesc;

/// Shortest frame the driver transmits: an Ethernet header. The kernel
/// rejects empty descriptors and loses the frame when it does.
pub const MIN_FRAME: usize = 14;

/// Bytes the kernel reserves at the head of every frame for XDP.
const XDP_HEADROOM: usize = 256;

/// `setsockopt` option (Linux 6.17+): how many descriptors one `sendto`
/// moves in copy mode (the default is 32).
const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;

/// `setsockopt` options of preferred busy polling (Linux 5.11+; the same
/// numbers on every architecture this builds for).
const SO_BUSY_POLL: libc::c_int = 46;
const SO_PREFER_BUSY_POLL: libc::c_int = 69;
const SO_BUSY_POLL_BUDGET: libc::c_int = 70;

/// How long a queue reported busy is retried: long enough for the kernel
/// to finish releasing a socket closed just before.
const BUSY_GRACE: Duration = Duration::from_secs(1);

/// Longest interface name the kernel accepts (`IFNAMSIZ` - 1).
const MAX_IFNAME: usize = 15;

/// How the socket binds to its queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BindMode {
    /// Zero-copy where the driver supports it, copy otherwise.
    #[default]
    Auto,
    /// Zero-copy or fail with [`AfXdpError::ZeroCopyUnsupported`].
    ZeroCopy,
    /// Copy mode, which every driver supports.
    Copy,
}

impl BindMode {
    pub const fn name(self) -> &'static str {
        match self {
            BindMode::Auto => "auto",
            BindMode::ZeroCopy => "zero-copy",
            BindMode::Copy => "copy",
        }
    }
}

impl fmt::Display for BindMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where and how to open an AF_XDP socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AfXdpConfig {
    /// Interface to bind, in the calling thread's network namespace.
    pub iface: String,
    /// Receive queue of `iface` to bind.
    pub queue_id: u32,
    /// Bytes per UMEM frame: 2048 or 4096. A frame carries at most this
    /// minus 256 bytes of packet.
    pub frame_size: u32,
    /// Frames in the UMEM, fill ring reservation included.
    pub frame_count: u32,
    /// Fill ring entries; this many frames are reserved for reception.
    /// A power of two.
    pub fill_size: u32,
    /// Completion ring entries, which also bounds the frames in flight for
    /// transmission. A power of two.
    pub comp_size: u32,
    /// Receive ring entries. A power of two.
    pub rx_size: u32,
    /// Transmit ring entries. A power of two.
    pub tx_size: u32,
    pub mode: BindMode,
    /// Bind with `XDP_USE_NEED_WAKEUP`: the kernel says when it needs a
    /// system call to make progress, so a busy-polling loop makes fewer.
    pub need_wakeup: bool,
    /// Preferred busy polling: the socket's own system calls run the
    /// queue's NAPI processing, instead of interrupts and softirqs.
    pub busy_poll: Option<BusyPoll>,
}

/// Settings of preferred busy polling (`SO_PREFER_BUSY_POLL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BusyPoll {
    /// `SO_BUSY_POLL`: how long one system call may poll, microseconds.
    pub usecs: u32,
    /// `SO_BUSY_POLL_BUDGET`: most packets one poll processes.
    pub budget: u32,
}

impl Default for BusyPoll {
    fn default() -> BusyPoll {
        BusyPoll {
            usecs: 20,
            budget: MAX_BURST as u32,
        }
    }
}

impl Default for AfXdpConfig {
    fn default() -> AfXdpConfig {
        AfXdpConfig {
            iface: String::new(),
            queue_id: 0,
            frame_size: 2048,
            frame_count: 4096,
            fill_size: 2048,
            comp_size: 2048,
            rx_size: 2048,
            tx_size: 2048,
            mode: BindMode::Auto,
            need_wakeup: true,
            busy_poll: None,
        }
    }
}

impl AfXdpConfig {
    /// The defaults, on `iface` queue `queue_id`.
    pub fn new(iface: impl Into<String>, queue_id: u32) -> AfXdpConfig {
        AfXdpConfig {
            iface: iface.into(),
            queue_id,
            ..AfXdpConfig::default()
        }
    }

    /// Checks what can be checked without the kernel.
    pub fn validate(&self) -> Result<(), AfXdpError> {
        let bad = |msg: String| Err(AfXdpError::Config(msg));
        if self.iface.is_empty() {
            return bad("iface is empty: name the interface to bind, e.g. \"oae0\"".into());
        }
        if self.iface.len() > MAX_IFNAME
            || self
                .iface
                .chars()
                .any(|c| c == '/' || c == '\0' || c.is_whitespace())
        {
            return bad(format!(
                "iface {:?} is not an interface name: at most {MAX_IFNAME} bytes, \
                 without '/', whitespace or NUL",
                self.iface
            ));
        }
        if self.frame_size != 2048 && self.frame_size != 4096 {
            return bad(format!(
                "frame_size {}: use 2048 or 4096 (an AF_XDP frame is a power of two \
                 from 2048 bytes up to the page size)",
                self.frame_size
            ));
        }
        for (name, size) in [
            ("fill_size", self.fill_size),
            ("comp_size", self.comp_size),
            ("rx_size", self.rx_size),
            ("tx_size", self.tx_size),
        ] {
            if !size.is_power_of_two() {
                return bad(format!(
                    "{name} {size}: ring sizes must be powers of two, e.g. {}",
                    size.max(1).next_power_of_two()
                ));
            }
        }
        let least = u64::from(self.fill_size) + MAX_BURST as u64;
        if u64::from(self.frame_count) < least {
            return bad(format!(
                "frame_count {} leaves too few frames to transmit: frames in the fill \
                 ring are reserved for reception, so use at least fill_size + {MAX_BURST} \
                 = {least}, or a smaller fill_size",
                self.frame_count
            ));
        }
        Ok(())
    }
}

/// Why an AF_XDP socket could not be opened.
#[derive(Debug)]
pub enum AfXdpError {
    /// The configuration cannot work; the message says what to change.
    Config(String),
    /// No interface of that name in this network namespace.
    InterfaceMissing { iface: String },
    /// The interface has no such queue. `queues` is how many receive
    /// queues it reports, when it reports them.
    QueueOutOfRange {
        iface: String,
        queue_id: u32,
        queues: Option<u32>,
    },
    /// Creating or binding the socket needs privileges this process lacks.
    PermissionDenied { what: String, source: io::Error },
    /// [`BindMode::ZeroCopy`] was asked for and the driver cannot do it.
    ZeroCopyUnsupported { iface: String, source: io::Error },
    /// Another socket is bound to this queue (and stayed so for a second:
    /// the kernel frees a closed socket's queue shortly after the close).
    QueueBusy {
        iface: String,
        queue_id: u32,
        source: io::Error,
    },
    /// Anything else the kernel or libxdp refused.
    Os { what: String, source: io::Error },
}

impl fmt::Display for AfXdpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AfXdpError::Config(msg) => write!(f, "invalid AF_XDP configuration: {msg}"),
            AfXdpError::InterfaceMissing { iface } => write!(
                f,
                "no interface '{iface}' in this network namespace: check `ip link`, or \
                 enter the namespace that holds it first"
            ),
            AfXdpError::QueueOutOfRange {
                iface,
                queue_id,
                queues: Some(n),
            } => write!(
                f,
                "'{iface}' has no queue {queue_id}: it has {n} receive queue(s), so use a \
                 queue id below {n} (or add channels with `ethtool -L {iface}`)"
            ),
            AfXdpError::QueueOutOfRange {
                iface,
                queue_id,
                queues: None,
            } => write!(
                f,
                "binding to queue {queue_id} of '{iface}' was rejected as invalid: the \
                 queue id is probably beyond the interface's queues (see `ethtool -l {iface}`)"
            ),
            AfXdpError::PermissionDenied { what, source } => write!(
                f,
                "{what}: {source}; AF_XDP needs CAP_NET_RAW (and CAP_BPF or \
                 CAP_NET_ADMIN for the XDP program): run as root or grant them"
            ),
            AfXdpError::ZeroCopyUnsupported { iface, source } => write!(
                f,
                "'{iface}' cannot bind AF_XDP in zero-copy mode ({source}); use \
                 BindMode::Auto or BindMode::Copy"
            ),
            AfXdpError::QueueBusy {
                iface,
                queue_id,
                source,
            } => write!(
                f,
                "queue {queue_id} of '{iface}' is already bound to another AF_XDP socket \
                 ({source}); close that one or use another queue"
            ),
            AfXdpError::Os { what, source } => write!(f, "{what}: {source}"),
        }
    }
}

impl std::error::Error for AfXdpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AfXdpError::PermissionDenied { source, .. }
            | AfXdpError::ZeroCopyUnsupported { source, .. }
            | AfXdpError::QueueBusy { source, .. }
            | AfXdpError::Os { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Where the driver's frames are, for checking that none leaked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BufferCounts {
    /// In the free list.
    pub free: usize,
    /// Owned by the kernel for reception (fill ring or rx ring).
    pub fill: usize,
    /// On the transmit ring or awaiting completion.
    pub tx: usize,
    /// Held by the caller.
    pub caller: usize,
}

impl BufferCounts {
    /// Every frame the driver owns; equals the UMEM's frame count when the
    /// caller holds none.
    pub fn driver_owned(&self) -> usize {
        self.free + self.fill + self.tx
    }
}

/// System calls the driver made to wake the kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wakeups {
    /// `sendto` calls that drove transmission.
    pub tx: u64,
    /// `poll` calls made because the fill ring asked for one.
    pub fill: u64,
    /// Wakeups that failed with an unexpected error.
    pub failed: u64,
    /// `recvfrom` calls that ran the queue's processing (busy polling).
    pub busy_polls: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    Free,
    Fill,
    Caller,
    Tx,
}

/// One AF_XDP socket on one queue, with a UMEM of its own.
pub struct AfXdp {
    // The queues hold the socket, which holds the UMEM mapping: dropping
    // the last of them closes the socket before the memory is unmapped.
    rx: RxQueue,
    tx: TxQueue,
    fill: FillQueue,
    comp: CompQueue,
    umem: Umem,
    /// Each frame's descriptor as the UMEM first handed it out (canonical
    /// address, length 0); frames return to the free list in this form.
    pristine: Box<[FrameDesc]>,
    owner: Box<[Owner]>,
    free: Vec<FrameDesc>,
    scratch: [FrameDesc; MAX_BURST],
    frame_shift: u32,
    fill_size: u32,
    /// Frames the kernel holds for reception: fill ring and rx ring.
    in_fill: usize,
    tx_in_flight: usize,
    comp_size: usize,
    tx_size: u32,
    zero_copy: bool,
    need_wakeup: bool,
    busy_poll: bool,
    /// `tx_burst` only queues: [`Driver::kick`] sends.
    hold_kicks: bool,
    tx_budget: Option<u32>,
    mac: [u8; 6],
    stats: DriverStats,
    wakeups: Wakeups,
}

impl fmt::Debug for AfXdp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AfXdp")
            .field("fd", &self.fd())
            .field("bind_mode", &self.bind_mode())
            .field("frames", &self.owner.len())
            .field("free", &self.free.len())
            .field("in_fill", &self.in_fill)
            .field("tx_in_flight", &self.tx_in_flight)
            .finish_non_exhaustive()
    }
}

impl AfXdp {
    /// Opens and binds the socket and fills its fill ring. The caller must
    /// be in the interface's network namespace (see [`crate::netns::enter`]).
    pub fn new(config: &AfXdpConfig) -> Result<AfXdp, AfXdpError> {
        config.validate()?;
        let iface = config.iface.as_str();
        if nix::net::if_::if_nametoindex(iface).is_err() {
            return Err(AfXdpError::InterfaceMissing {
                iface: iface.to_string(),
            });
        }
        let mac = read_mac(iface)?;

        let umem_config = UmemConfig::builder()
            .frame_size(FrameSize::new(config.frame_size).map_err(config_error)?)
            .fill_queue_size(QueueSize::new(config.fill_size).map_err(config_error)?)
            .comp_queue_size(QueueSize::new(config.comp_size).map_err(config_error)?)
            .build()
            .map_err(config_error)?;
        let frame_count = NonZeroU32::new(config.frame_count)
            .ok_or_else(|| AfXdpError::Config("frame_count is 0".into()))?;
        let mut bind = match config.mode {
            BindMode::Auto => BindFlags::empty(),
            BindMode::ZeroCopy => BindFlags::XDP_ZEROCOPY,
            BindMode::Copy => BindFlags::XDP_COPY,
        };
        if config.need_wakeup {
            bind |= BindFlags::XDP_USE_NEED_WAKEUP;
        }
        let socket_config = SocketConfig::builder()
            .rx_queue_size(QueueSize::new(config.rx_size).map_err(config_error)?)
            .tx_queue_size(QueueSize::new(config.tx_size).map_err(config_error)?)
            .libxdp_flags(LibxdpFlags::XSK_LIBXDP_FLAGS_INHIBIT_PROG_LOAD)
            .bind_flags(bind)
            .build();
        let name: Interface = iface
            .parse()
            .map_err(|_| AfXdpError::Config(format!("iface {iface:?} contains NUL")))?;

        // The kernel frees a closed socket's queue from a work queue, so a
        // queue released a moment ago can still read as taken.
        let busy_until = Instant::now() + BUSY_GRACE;
        let Bound {
            umem,
            descs,
            tx,
            rx,
            fill,
            comp,
        } = loop {
            match Bound::new(config, umem_config, frame_count, socket_config, &name) {
                Err(AfXdpError::QueueBusy { .. }) if Instant::now() < busy_until => {
                    thread::sleep(Duration::from_millis(5));
                }
                other => break other?,
            }
        };

        let fd = rx.fd().as_raw_fd();
        let zero_copy = bound_zero_copy(fd).map_err(|source| AfXdpError::Os {
            what: "reading the socket's XDP_OPTIONS".into(),
            source,
        })?;
        // Best effort: before 6.17 the kernel has no such option and copy
        // mode moves 32 frames per `sendto`, which `kick_tx` copes with.
        let tx_budget = (!zero_copy)
            .then(|| set_tx_budget(fd, config.tx_size).ok())
            .flatten();
        if let Some(b) = config.busy_poll {
            set_busy_poll(fd, b).map_err(|source| AfXdpError::Os {
                what: format!(
                    "enabling preferred busy polling ({} us, budget {}); \
                     set busy_poll = false if this kernel lacks it",
                    b.usecs, b.budget
                ),
                source,
            })?;
        }

        let frames = descs.len();
        let mut driver = AfXdp {
            rx,
            tx,
            fill,
            comp,
            umem,
            free: descs.clone(),
            pristine: descs.into_boxed_slice(),
            owner: vec![Owner::Free; frames].into_boxed_slice(),
            scratch: [FrameDesc::default(); MAX_BURST],
            frame_shift: config.frame_size.trailing_zeros(),
            fill_size: config.fill_size,
            in_fill: 0,
            tx_in_flight: 0,
            comp_size: config.comp_size as usize,
            tx_size: config.tx_size,
            zero_copy,
            need_wakeup: config.need_wakeup,
            busy_poll: config.busy_poll.is_some(),
            hold_kicks: false,
            tx_budget,
            mac,
            stats: DriverStats::default(),
            wakeups: Wakeups::default(),
        };
        driver.refill();
        Ok(driver)
    }

    /// The socket, for registering in the steering program's XSKMAP.
    pub fn fd(&self) -> RawFd {
        self.rx.fd().as_raw_fd()
    }

    /// What the bind obtained: [`BindMode::ZeroCopy`] or [`BindMode::Copy`].
    pub fn bind_mode(&self) -> BindMode {
        if self.zero_copy {
            BindMode::ZeroCopy
        } else {
            BindMode::Copy
        }
    }

    /// Frames one `sendto` may move in copy mode, if the kernel let it be
    /// raised from its default of 32.
    pub fn tx_budget(&self) -> Option<u32> {
        self.tx_budget
    }

    /// Frames in the UMEM.
    pub fn frame_count(&self) -> usize {
        self.owner.len()
    }

    /// Frames in the free list now: the pool [`Driver::alloc`] and the fill
    /// ring draw from.
    pub fn free_buffers(&self) -> usize {
        self.free.len()
    }

    /// Where every frame is, after reaping finished transmissions.
    pub fn buffers(&mut self) -> BufferCounts {
        self.reap_completions();
        let (free, fill, tx) = (self.free.len(), self.in_fill, self.tx_in_flight);
        BufferCounts {
            free,
            fill,
            tx,
            caller: self.owner.len() - free - fill - tx,
        }
    }

    /// Wakeup system calls so far.
    pub fn wakeups(&self) -> Wakeups {
        self.wakeups
    }

    fn index(&self, desc: &FrameDesc) -> Option<usize> {
        let i = desc.addr() >> self.frame_shift;
        (i < self.owner.len()).then_some(i)
    }

    fn frame_end(&self, i: usize) -> usize {
        (i + 1) << self.frame_shift
    }

    /// The index of a frame the caller holds, or a panic naming the misuse.
    fn caller_frame(&self, desc: &FrameDesc, op: &str) -> usize {
        match self.index(desc) {
            Some(i)
                if self.owner[i] == Owner::Caller
                    && desc.addr() + desc.lengths().data() <= self.frame_end(i) =>
            {
                i
            }
            Some(i) => not_callers(op, desc, Some(self.owner[i])),
            None => not_callers(op, desc, None),
        }
    }

    fn give_back(&mut self, i: usize) {
        self.owner[i] = Owner::Free;
        self.free.push(self.pristine[i]);
    }

    fn reap_completions(&mut self) {
        while self.tx_in_flight > 0 {
            // SAFETY: the completion ring only returns addresses this socket
            // put on its transmit ring, each once (checked below); the
            // descriptors written are plain values in `scratch`.
            let n = unsafe { self.comp.consume(&mut self.scratch) };
            for k in 0..n {
                let desc = self.scratch[k];
                let i = self.index(&desc).expect("completion inside the UMEM");
                assert_eq!(self.owner[i], Owner::Tx, "completed a frame never sent");
                self.give_back(i);
            }
            self.tx_in_flight -= n;
            self.stats.tx_packets += n as u64;
            if n < MAX_BURST {
                break;
            }
        }
    }

    /// Free entries of the fill ring: frames it is owed.
    fn fill_room(&mut self) -> usize {
        self.fill.nb_free(self.fill_size) as usize
    }

    fn refill(&mut self) {
        if self.free.is_empty() {
            return;
        }
        let k = self.fill_room().min(self.free.len());
        if k == 0 {
            return;
        }
        let from = self.free.len() - k;
        // SAFETY: the frames offered are free (in the free list and nowhere
        // else); they are marked as the kernel's below and leave the free
        // list, so nothing in user space touches them until the rx ring
        // returns them.
        let done = unsafe { self.fill.produce(&self.free[from..]) };
        for desc in self.free.drain(from..from + done) {
            let i = desc.addr() >> self.frame_shift;
            self.owner[i] = Owner::Fill;
        }
        self.in_fill += done;
        if done > 0 && self.fill.needs_wakeup() {
            // Zero-copy drivers stop receiving once the fill ring runs dry
            // and wait for this poll to restart.
            match self.fill.wakeup(self.rx.fd_mut(), 0) {
                Ok(()) => self.wakeups.fill += 1,
                Err(_) => self.wakeups.failed += 1,
            }
        }
    }

    /// Descriptors on the transmit ring the kernel has not taken yet.
    fn tx_pending(&mut self) -> u32 {
        self.tx_size - self.tx.nb_free(self.tx_size)
    }

    /// Makes the kernel send what is on the transmit ring. Copy mode sends
    /// inside `sendto` itself, a bounded batch per call, so it is called
    /// until the ring is drained or stops draining; zero-copy only needs a
    /// kick when the driver asked for one (or always, without need-wakeup).
    fn kick_tx(&mut self) {
        let mut pending = self.tx_pending();
        let mut before = u32::MAX;
        while pending > 0 && pending < before {
            if self.zero_copy && self.need_wakeup && !self.tx.needs_wakeup() {
                return;
            }
            if self.tx.wakeup().is_err() {
                self.wakeups.failed += 1;
                return;
            }
            self.wakeups.tx += 1;
            if self.zero_copy {
                return;
            }
            before = pending;
            pending = self.tx_pending();
        }
    }
}

impl AfXdp {
    /// With preferred busy polling, an empty receive ring is this thread's
    /// cue to run the queue's processing itself: a non-blocking `recvfrom`
    /// does, within the socket's busy-poll budget.
    fn run_napi(&mut self) {
        let fd = self.fd();
        // SAFETY: a zero-length receive into no buffer: the kernel writes
        // nothing to user memory; `fd` is this driver's open socket.
        let rc = unsafe {
            libc::recvfrom(
                fd,
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        if rc < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EAGAIN) {
            self.wakeups.failed += 1;
        } else {
            self.wakeups.busy_polls += 1;
        }
    }
}

/// A socket bound to its queue, with its UMEM and the UMEM's frames.
struct Bound {
    umem: Umem,
    descs: Vec<FrameDesc>,
    tx: TxQueue,
    rx: RxQueue,
    fill: FillQueue,
    comp: CompQueue,
}

impl Bound {
    fn new(
        config: &AfXdpConfig,
        umem_config: UmemConfig,
        frame_count: NonZeroU32,
        socket_config: SocketConfig,
        name: &Interface,
    ) -> Result<Bound, AfXdpError> {
        let (umem, descs) = Umem::new(umem_config, frame_count, false)
            .map_err(|e| os_error(format!("creating a {frame_count}-frame UMEM"), &e))?;
        // SAFETY: the UMEM was created just above and is used by this socket
        // only, so the shared-UMEM case of `Socket::new`'s contract (an
        // already bound pair needs the inhibit flag to avoid a double free)
        // cannot arise; the flag is set regardless.
        let created = unsafe { Socket::new(socket_config, &umem, name, config.queue_id) };
        let (tx, rx, rings) = created.map_err(|e| bind_error(config, &e))?;
        let (fill, comp) = rings.ok_or_else(|| AfXdpError::Os {
            what: format!("binding to '{}' queue {}", config.iface, config.queue_id),
            source: io::Error::other("libxdp returned no fill and completion rings"),
        })?;
        Ok(Bound {
            umem,
            descs,
            tx,
            rx,
            fill,
            comp,
        })
    }
}

impl Driver for AfXdp {
    type Buf = FrameDesc;

    fn rx_burst(&mut self, out: &mut Burst<FrameDesc>) -> usize {
        self.reap_completions();
        if !self.hold_kicks {
            self.kick_tx();
        }
        if self.busy_poll && self.rx.nb_avail(1) == 0 {
            self.run_napi();
        }
        let room = out.remaining_capacity();
        let ready = if room == 0 {
            0
        } else {
            self.rx.nb_avail(room as u32) as usize
        };
        let mut n = 0;
        if ready > 0 {
            let start = out.len();
            out.extend(iter::repeat_n(FrameDesc::default(), ready));
            // SAFETY: the rx ring only returns frames this socket put on its
            // fill ring, each once (checked below); they move to the
            // caller.
            n = unsafe { self.rx.consume(&mut out[start..]) };
            out.truncate(start + n);
            for desc in &out[start..] {
                let i = desc.addr() >> self.frame_shift;
                assert_eq!(self.owner[i], Owner::Fill, "received a frame never filled");
                self.owner[i] = Owner::Caller;
            }
            self.in_fill -= n;
            self.stats.rx_packets += n as u64;
        }
        self.refill();
        n
    }

    fn alloc(&mut self, out: &mut Burst<FrameDesc>, n: usize) -> usize {
        self.reap_completions();
        let asked = n.min(out.remaining_capacity());
        let spare = self.free.len().saturating_sub(self.fill_room());
        let k = asked.min(spare);
        for _ in 0..k {
            let desc = self.free.pop().expect("counted above");
            let i = desc.addr() >> self.frame_shift;
            self.owner[i] = Owner::Caller;
            out.push(desc);
        }
        if k < asked {
            self.stats.alloc_failed += 1;
        }
        k
    }

    fn frame<'a>(&'a self, buf: &'a FrameDesc) -> &'a [u8] {
        self.caller_frame(buf, "reading");
        // SAFETY: the frame is the caller's (checked above), so the kernel
        // neither writes it nor holds it in a ring, and the descriptor's
        // bytes lie inside it; the slice borrows `self`, so the mapping
        // outlives it and no `frame_mut` slice coexists with it.
        unsafe { self.umem.data(buf) }.contents()
    }

    fn frame_mut<'a>(&'a mut self, buf: &'a mut FrameDesc, len: usize) -> &'a mut [u8] {
        let i = self.caller_frame(buf, "writing");
        let capacity = self.frame_end(i) - buf.addr();
        assert!(
            len <= capacity,
            "frame length {len} exceeds this buffer's capacity of {capacity} bytes"
        );
        // SAFETY: as in `frame`: the frame is the caller's alone, so neither
        // the kernel nor another handle reaches these bytes.
        let mut data = unsafe { self.umem.data_mut(buf) };
        data.cursor().set_pos(len);
        let bytes = data.contents_mut();
        // SAFETY: `bytes` is the frame's first `len` bytes, inside the UMEM
        // mapping, which lives as long as `self`; the result borrows `self`
        // and `buf` mutably for 'a, so nothing else can read or write the
        // frame meanwhile, and the kernel does not touch a caller's frame.
        unsafe { slice::from_raw_parts_mut(bytes.as_mut_ptr(), bytes.len()) }
    }

    fn frame_capacity(&self) -> usize {
        (1 << self.frame_shift) - XDP_HEADROOM
    }

    fn tx_burst(&mut self, bufs: &mut Burst<FrameDesc>) -> usize {
        self.reap_completions();
        let ring_room = self.tx.nb_free(bufs.len() as u32) as usize;
        let k = bufs
            .len()
            .min(ring_room)
            .min(self.comp_size - self.tx_in_flight);
        for desc in &mut bufs[..k] {
            let i = self.caller_frame(desc, "transmitting");
            assert!(
                desc.lengths().data() >= MIN_FRAME,
                "transmitting a {}-byte frame: frames carry at least an Ethernet header \
                 ({MIN_FRAME} bytes)",
                desc.lengths().data()
            );
            // Multi-buffer flags from a received frame would make the
            // kernel wait for fragments that never come.
            desc.set_options(0);
            // Marked before the next is checked, so a handle that appears
            // twice in the burst is caught rather than queued twice.
            self.owner[i] = Owner::Tx;
        }
        // SAFETY: every descriptor offered was the caller's (checked above),
        // each once, and is now marked as the transmit side's, so user space
        // no longer touches it until the completion ring returns it.
        let done = unsafe { self.tx.produce(&bufs[..k]) };
        for desc in &bufs[done..k] {
            let i = desc.addr() >> self.frame_shift;
            self.owner[i] = Owner::Caller;
        }
        bufs.drain(..done);
        self.tx_in_flight += done;
        if !bufs.is_empty() {
            self.stats.tx_ring_full += 1;
        }
        if !self.hold_kicks || !bufs.is_empty() {
            self.kick_tx();
        }
        done
    }

    fn release(&mut self, bufs: &mut Burst<FrameDesc>) {
        for desc in bufs.iter() {
            let i = self.caller_frame(desc, "releasing");
            self.give_back(i);
        }
        bufs.clear();
    }

    fn stats(&mut self) -> DriverStats {
        self.reap_completions();
        let mut stats = self.stats;
        stats.tx_kicks = self.wakeups.tx;
        stats.busy_polls = self.wakeups.busy_polls;
        // Kernel counters stay zero if the query fails: they are advisory,
        // and the socket is still usable.
        if let Ok(k) = self.rx.fd().xdp_statistics() {
            stats.kernel_rx_dropped = k.rx_dropped();
            stats.kernel_rx_ring_full = k.rx_ring_full();
            stats.kernel_fill_ring_empty = k.rx_fill_ring_empty_descs();
            stats.kernel_rx_invalid = k.rx_invalid_descs();
            stats.kernel_tx_invalid = k.tx_invalid_descs();
            stats.kernel_tx_ring_empty = k.tx_ring_empty_descs();
        }
        stats
    }

    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn hold_kicks(&mut self, hold: bool) {
        self.hold_kicks = hold;
        if !hold {
            self.kick_tx();
        }
    }

    fn unkicked(&mut self) -> usize {
        self.tx_pending() as usize
    }

    fn kick(&mut self) {
        self.kick_tx();
    }

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(AsFd::as_fd(self))
    }
}

impl AsRawFd for AfXdp {
    fn as_raw_fd(&self) -> RawFd {
        self.fd()
    }
}

impl AsFd for AfXdp {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the descriptor belongs to the socket the queues in `self`
        // keep open, so it stays open for as long as `self` is borrowed.
        unsafe { BorrowedFd::borrow_raw(self.fd()) }
    }
}

#[cold]
#[inline(never)]
fn not_callers(op: &str, desc: &FrameDesc, owner: Option<Owner>) -> ! {
    let whose = match owner {
        None => "outside this driver's UMEM",
        Some(Owner::Free) => "already released",
        Some(Owner::Fill) => "owned by the kernel for reception",
        Some(Owner::Tx) => "already queued for transmission",
        Some(Owner::Caller) => "longer than its frame",
    };
    panic!(
        "{op} a buffer the caller does not hold (addr {:#x}, {} bytes): {whose}; a handle \
         must come from this driver's rx_burst or alloc and be used until tx_burst or \
         release, once",
        desc.addr(),
        desc.lengths().data()
    )
}

fn config_error(e: impl fmt::Display) -> AfXdpError {
    AfXdpError::Config(e.to_string())
}

/// The OS error under an xsk-rs error, if there is one.
fn os_cause(e: &(dyn std::error::Error + 'static)) -> io::Error {
    e.source()
        .and_then(|s| s.downcast_ref::<io::Error>())
        .and_then(io::Error::raw_os_error)
        .map(io::Error::from_raw_os_error)
        .unwrap_or_else(|| io::Error::other(e.to_string()))
}

fn os_error(what: String, e: &(dyn std::error::Error + 'static)) -> AfXdpError {
    let source = os_cause(e);
    match source.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => AfXdpError::PermissionDenied { what, source },
        _ => AfXdpError::Os { what, source },
    }
}

fn bind_error(config: &AfXdpConfig, e: &(dyn std::error::Error + 'static)) -> AfXdpError {
    let source = os_cause(e);
    let iface = config.iface.clone();
    let queue_id = config.queue_id;
    match source.raw_os_error() {
        Some(libc::ENODEV) => AfXdpError::InterfaceMissing { iface },
        Some(libc::EPERM | libc::EACCES) => AfXdpError::PermissionDenied {
            what: format!("binding an AF_XDP socket to '{iface}' queue {queue_id}"),
            source,
        },
        Some(libc::EOPNOTSUPP) if config.mode == BindMode::ZeroCopy => {
            AfXdpError::ZeroCopyUnsupported { iface, source }
        }
        Some(libc::EBUSY) => AfXdpError::QueueBusy {
            iface,
            queue_id,
            source,
        },
        Some(libc::EINVAL) => match rx_queue_count(&iface) {
            Some(n) if queue_id < n => AfXdpError::Os {
                what: format!("binding to '{iface}' queue {queue_id}"),
                source,
            },
            queues => AfXdpError::QueueOutOfRange {
                iface,
                queue_id,
                queues,
            },
        },
        _ => AfXdpError::Os {
            what: format!("binding to '{iface}' queue {queue_id}"),
            source,
        },
    }
}

/// The interface's Ethernet address, looked up in the calling thread's
/// network namespace (sysfs would show the mount's namespace instead).
fn read_mac(iface: &str) -> Result<[u8; 6], AfXdpError> {
    let os = |source: io::Error| AfXdpError::Os {
        what: format!("reading the MAC address of '{iface}'"),
        source,
    };
    let addrs = nix::ifaddrs::getifaddrs().map_err(|e| os(e.into()))?;
    addrs
        .filter(|a| a.interface_name == iface)
        .find_map(|a| a.address?.as_link_addr()?.addr())
        .ok_or_else(|| os(io::Error::other("the interface has no Ethernet address")))
}

fn bound_zero_copy(fd: RawFd) -> io::Result<bool> {
    let mut options = libc::xdp_options { flags: 0 };
    let mut len = mem::size_of::<libc::xdp_options>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `options`, which is
    // that large and outlives the call.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_XDP,
            libc::XDP_OPTIONS,
            (&raw mut options).cast::<c_void>(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(options.flags & libc::XDP_OPTIONS_ZEROCOPY != 0)
}

fn set_tx_budget(fd: RawFd, budget: u32) -> io::Result<u32> {
    set_u32_option(fd, libc::SOL_XDP, XDP_MAX_TX_SKB_BUDGET, budget).map(|()| budget)
}

fn set_busy_poll(fd: RawFd, b: BusyPoll) -> io::Result<()> {
    set_u32_option(fd, libc::SOL_SOCKET, SO_PREFER_BUSY_POLL, 1)?;
    set_u32_option(fd, libc::SOL_SOCKET, SO_BUSY_POLL, b.usecs)?;
    set_u32_option(fd, libc::SOL_SOCKET, SO_BUSY_POLL_BUDGET, b.budget)
}

/// `setsockopt` of a 32-bit option.
fn set_u32_option(
    fd: RawFd,
    level: libc::c_int,
    option: libc::c_int,
    value: u32,
) -> io::Result<()> {
    // SAFETY: the kernel reads exactly `size_of::<u32>()` bytes from
    // `value`, which outlives the call.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            option,
            (&raw const value).cast::<c_void>(),
            mem::size_of::<u32>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Receive queues the interface reports through ethtool, if it does.
fn rx_queue_count(iface: &str) -> Option<u32> {
    #[repr(C)]
    #[derive(Default)]
    struct EthtoolChannels {
        cmd: u32,
        max_rx: u32,
        max_tx: u32,
        max_other: u32,
        max_combined: u32,
        rx_count: u32,
        tx_count: u32,
        other_count: u32,
        combined_count: u32,
    }
    const ETHTOOL_GCHANNELS: u32 = 0x3c;

    if iface.len() > MAX_IFNAME {
        return None;
    }
    // Any socket of this namespace carries the ioctl.
    let socket = UdpSocket::bind(("0.0.0.0", 0)).ok()?;
    let mut channels = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..EthtoolChannels::default()
    };
    // SAFETY: `ifreq` is plain old data, for which all zeroes is a value.
    let mut request: libc::ifreq = unsafe { mem::zeroed() };
    for (dst, src) in request.ifr_name.iter_mut().zip(iface.bytes()) {
        *dst = src as libc::c_char;
    }
    request.ifr_ifru.ifru_data = (&raw mut channels).cast::<libc::c_char>();
    // SAFETY: the name is NUL-terminated (at most 15 bytes in a zeroed
    // 16-byte array) and `ifru_data` points at an `ethtool_channels`, which
    // is what SIOCETHTOOL with ETHTOOL_GCHANNELS reads and writes; both
    // outlive the call.
    let rc = unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCETHTOOL, &raw mut request) };
    (rc == 0).then_some(channels.rx_count + channels.combined_count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_driver_can_move_to_its_polling_thread() {
        fn send<T: Send>() {}
        send::<AfXdp>();
    }

    #[test]
    fn default_config_needs_only_an_interface() {
        let err = AfXdpConfig::default().validate().unwrap_err();
        assert!(err.to_string().contains("iface is empty"), "{err}");
        AfXdpConfig::new("oae0", 0).validate().unwrap();
    }

    #[test]
    fn validation_says_what_to_fix() {
        let check = |f: fn(&mut AfXdpConfig), needle: &str| {
            let mut c = AfXdpConfig::new("oae0", 0);
            f(&mut c);
            let msg = c.validate().unwrap_err().to_string();
            assert!(msg.contains(needle), "{msg:?} lacks {needle:?}");
        };
        check(|c| c.frame_size = 3000, "use 2048 or 4096");
        check(
            |c| c.rx_size = 1000,
            "rx_size 1000: ring sizes must be powers of two, e.g. 1024",
        );
        check(|c| c.fill_size = 0, "fill_size 0");
        check(|c| c.frame_count = 2048, "at least fill_size + 64 = 2112");
        check(|c| c.iface = "a/b".into(), "is not an interface name");
        check(|c| c.iface = "sixteen_letters_".into(), "at most 15 bytes");
    }
}
