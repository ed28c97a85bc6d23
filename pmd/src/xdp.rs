//! The XDP program in front of the AF_XDP sockets, from userspace.
//!
//! [`Steering::attach`] loads `oae_steer` (built from `ebpf/` by this
//! crate's build script and embedded in the binary) onto one interface. From
//! then on OAE frames (EtherType 0x88B5) received on queue `q` go to the
//! AF_XDP socket registered for `q` with [`Steering::register_socket`], or
//! are dropped and counted as [`Counter::NoSocket`] while there is none;
//! every other frame continues to the kernel stack. [`Steering::set_faults`]
//! makes the program drop or corrupt frames, or cut the link, on demand:
//! OAE frames by default, or, with a wider [`FaultScope`], every IPv4
//! frame or the TCP and UDP segments of one port instead (so a kernel TCP
//! peer on the same link can be hurt the same way). Dropping the
//! [`Steering`] detaches the program.
//!
//! Attaching needs root (or CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON). The
//! interface is looked up in the network namespace of the calling thread.

use std::fmt;
use std::io;
use std::os::fd::AsRawFd;
use std::str::FromStr;
use std::sync::{Mutex, MutexGuard, PoisonError};

use aya::Ebpf;
use aya::maps::{Array, MapData, MapError, PerCpuArray, PerCpuValues, XskMap};
use aya::programs::{ProgramError, Xdp, xdp::XdpLink};
use nix::errno::Errno;
use nix::net::if_::if_nametoindex;
use oae_common::{CORRUPT_RANDOM_OFFSET, MAX_QUEUES, PPM, RngState};

pub use oae_common::{Counter, FaultConfig, FaultScope};

/// The object file `build.rs` produced from `ebpf/`.
static OBJECT: &[u8] = aya::include_bytes_aligned!(env!("OAE_EBPF_OBJECT"));

/// Where the program runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum XdpMode {
    /// Driver mode if the interface supports it, otherwise skb mode.
    #[default]
    Auto,
    /// Native XDP, in the driver before any socket buffer is allocated.
    Driver,
    /// Generic XDP, after the kernel has built a socket buffer: works on
    /// every interface, slower.
    Skb,
}

impl XdpMode {
    pub const fn name(self) -> &'static str {
        match self {
            XdpMode::Auto => "auto",
            XdpMode::Driver => "driver",
            XdpMode::Skb => "skb",
        }
    }
}

impl fmt::Display for XdpMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for XdpMode {
    type Err = String;

    fn from_str(s: &str) -> Result<XdpMode, String> {
        match s {
            "auto" => Ok(XdpMode::Auto),
            "driver" | "drv" | "native" => Ok(XdpMode::Driver),
            "skb" | "generic" => Ok(XdpMode::Skb),
            _ => Err(format!(
                "unknown XDP mode '{s}': expected auto, driver or skb"
            )),
        }
    }
}

/// What went wrong, phrased as what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    #[error(
        "network interface '{iface}' does not exist in this network namespace: check the name \
         with `ip link` (or `ip -n <namespace> link`)"
    )]
    InterfaceNotFound { iface: String },

    #[error(
        "{action}: permission denied ({detail}); run as root, or grant CAP_BPF, CAP_NET_ADMIN \
         and CAP_PERFMON"
    )]
    PermissionDenied { action: String, detail: String },

    #[error(
        "an XDP program is already attached to {iface}: detach it with \
         `ip link set dev {iface} xdp off` (or stop the process that attached it)"
    )]
    AlreadyAttached { iface: String },

    #[error("{iface} refused the XDP program in {mode} mode ({detail}){}", mode_hint(*mode))]
    ModeUnsupported {
        iface: String,
        mode: XdpMode,
        detail: String,
    },

    #[error("the kernel rejected the XDP program: {detail}")]
    Rejected { detail: String },

    #[error("queue {queue} is out of range: the XDP program steers queues 0 to {}", MAX_QUEUES - 1)]
    QueueOutOfRange { queue: u32 },

    #[error("invalid fault configuration: {0}")]
    InvalidFaults(String),

    #[error("{action}: {detail}")]
    Bpf { action: String, detail: String },

    #[error("cannot enter network namespace '{ns}' ({detail}): check it with `ip netns list`")]
    Namespace { ns: String, detail: String },
}

fn mode_hint(mode: XdpMode) -> &'static str {
    match mode {
        XdpMode::Driver => {
            "; use skb mode, or check the MTU (native XDP on veth allows at most 3506 bytes)"
        }
        XdpMode::Auto | XdpMode::Skb => "",
    }
}

/// The program's counters, each summed over all CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XdpCounters {
    /// OAE frames redirected to an AF_XDP socket (the socket may still drop
    /// them if its receive ring is full; the socket's statistics say so).
    pub steered: u64,
    /// Frames of other EtherTypes handed to the kernel stack (those in the
    /// fault scope included, unless a fault dropped them).
    pub passed: u64,
    /// Frames in the fault scope dropped by the fault injector.
    pub dropped_by_fault: u64,
    /// Frames in the fault scope with one bit flipped by the fault injector.
    pub corrupted_by_fault: u64,
    /// OAE frames dropped because no socket was registered for their queue.
    pub no_socket: u64,
}

impl XdpCounters {
    pub fn get(&self, counter: Counter) -> u64 {
        match counter {
            Counter::Steered => self.steered,
            Counter::Passed => self.passed,
            Counter::DroppedByFault => self.dropped_by_fault,
            Counter::CorruptedByFault => self.corrupted_by_fault,
            Counter::NoSocket => self.no_socket,
        }
    }

    fn slot(&mut self, counter: Counter) -> &mut u64 {
        match counter {
            Counter::Steered => &mut self.steered,
            Counter::Passed => &mut self.passed,
            Counter::DroppedByFault => &mut self.dropped_by_fault,
            Counter::CorruptedByFault => &mut self.corrupted_by_fault,
            Counter::NoSocket => &mut self.no_socket,
        }
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &XdpCounters) -> XdpCounters {
        let mut delta = XdpCounters::default();
        for c in Counter::ALL {
            *delta.slot(c) = self.get(c).saturating_sub(earlier.get(c));
        }
        delta
    }

    /// `(name, value)` for every counter, in [`Counter::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        Counter::ALL.into_iter().map(|c| (c.name(), self.get(c)))
    }
}

impl fmt::Display for XdpCounters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (name, value)) in self.iter().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            write!(f, "{sep}{name}={value}")?;
        }
        Ok(())
    }
}

/// `oae_steer` attached to one interface. Detached on drop.
pub struct Steering {
    // Declared first so it is dropped first: the program leaves the
    // interface before its maps and program file descriptors close.
    _link: XdpLink,
    iface: String,
    mode: XdpMode,
    maps: Mutex<Maps>,
    _ebpf: Ebpf,
}

struct Maps {
    sockets: XskMap<MapData>,
    faults: Array<MapData, FaultConfig>,
    counters: PerCpuArray<MapData, u64>,
    rng: PerCpuArray<MapData, RngState>,
    /// What was last written to `faults`; only userspace writes it.
    current_faults: FaultConfig,
}

impl Steering {
    /// Loads the program and attaches it to `iface` (in the calling
    /// thread's network namespace). With [`XdpMode::Auto`], driver mode is
    /// tried first; [`Steering::mode`] tells which one was used.
    /// [`Steering::attach`] to `iface` inside network namespace `ns`, where
    /// the interface's name means something, from a thread that enters it:
    /// the caller's own namespace is left alone.
    pub fn attach_in_netns(ns: &str, iface: &str, mode: XdpMode) -> Result<Steering, XdpError> {
        let (ns, iface) = (ns.to_string(), iface.to_string());
        std::thread::spawn(move || {
            crate::netns::enter(&ns).map_err(|e| XdpError::Namespace {
                ns: ns.clone(),
                detail: e.to_string(),
            })?;
            Steering::attach(&iface, mode)
        })
        .join()
        .map_err(|_| XdpError::Bpf {
            action: "attaching the XDP program".into(),
            detail: "the thread that entered the namespace panicked".into(),
        })?
    }

    pub fn attach(iface: &str, mode: XdpMode) -> Result<Steering, XdpError> {
        let ifindex = if_nametoindex(iface).map_err(|_| XdpError::InterfaceNotFound {
            iface: iface.to_string(),
        })?;

        let mut ebpf = Ebpf::load(OBJECT).map_err(|e| load_error(&e))?;
        // Maps first: a missing one is a build problem, found before the
        // program touches any traffic.
        let mut maps = Maps {
            sockets: take_map(&mut ebpf, oae_common::maps::SOCKETS)?,
            faults: take_map(&mut ebpf, oae_common::maps::FAULTS)?,
            counters: take_map(&mut ebpf, oae_common::maps::COUNTERS)?,
            rng: take_map(&mut ebpf, oae_common::maps::RNG)?,
            current_faults: FaultConfig::default(),
        };
        maps.write_faults(&FaultConfig::default())?;

        let program: &mut Xdp = ebpf
            .program_mut(oae_common::PROGRAM)
            .ok_or_else(|| XdpError::Bpf {
                action: "loading the XDP program".into(),
                detail: format!(
                    "the embedded object has no program named {}",
                    oae_common::PROGRAM
                ),
            })?
            .try_into()
            .map_err(|e: ProgramError| bpf("loading the XDP program", &e))?;
        program.load().map_err(|e| load_error(&e))?;

        let (link_id, used) = match mode {
            XdpMode::Driver | XdpMode::Skb => (attach_in(program, iface, ifindex, mode)?, mode),
            XdpMode::Auto => match attach_in(program, iface, ifindex, XdpMode::Driver) {
                Ok(id) => (id, XdpMode::Driver),
                Err(XdpError::ModeUnsupported { .. }) => (
                    attach_in(program, iface, ifindex, XdpMode::Skb)?,
                    XdpMode::Skb,
                ),
                Err(e) => return Err(e),
            },
        };
        let link = program
            .take_link(link_id)
            .map_err(|e| bpf("keeping the XDP link", &e))?;

        Ok(Steering {
            _link: link,
            iface: iface.to_string(),
            mode: used,
            maps: Mutex::new(maps),
            _ebpf: ebpf,
        })
    }

    /// The interface the program is attached to.
    pub fn iface(&self) -> &str {
        &self.iface
    }

    /// The mode actually in use: [`XdpMode::Driver`] or [`XdpMode::Skb`],
    /// never [`XdpMode::Auto`].
    pub fn mode(&self) -> XdpMode {
        self.mode
    }

    /// Steers OAE frames received on `queue_id` to `socket`, an AF_XDP
    /// socket bound to that queue of this interface (the kernel drops
    /// frames redirected to a socket bound elsewhere). Replaces any socket
    /// registered before for the queue.
    pub fn register_socket(&self, queue_id: u32, socket: impl AsRawFd) -> Result<(), XdpError> {
        check_queue(queue_id)?;
        self.maps()
            .sockets
            .set(queue_id, socket.as_raw_fd(), 0)
            .map_err(|e| {
                map_error(
                    &format!("registering the AF_XDP socket of queue {queue_id}"),
                    &e,
                )
            })
    }

    /// Stops steering `queue_id`: its OAE frames are dropped and counted as
    /// [`Counter::NoSocket`] again.
    pub fn unregister_socket(&self, queue_id: u32) -> Result<(), XdpError> {
        check_queue(queue_id)?;
        self.maps().sockets.unset(queue_id).map_err(|e| {
            map_error(
                &format!("unregistering the AF_XDP socket of queue {queue_id}"),
                &e,
            )
        })
    }

    /// Applies `faults` to the frames of its scope received from now on
    /// (OAE frames unless `faults.scope` says otherwise), and restarts the
    /// dice from `faults.seed` on every CPU: the same configuration and the
    /// same frames give the same faults. (Frames that arrive while the
    /// configuration changes may see a mix.)
    pub fn set_faults(&self, faults: &FaultConfig) -> Result<(), XdpError> {
        self.check_faults(faults)?;
        let mut maps = self.maps();
        maps.write_faults(faults)?;
        maps.reset_dice()
    }

    /// Whether [`Steering::set_faults`] would take `faults` on this
    /// interface (a corruption offset is bounded by its MTU), changing
    /// nothing: so a change meant for several interfaces can be checked on
    /// all before any is changed.
    pub fn check_faults(&self, faults: &FaultConfig) -> Result<(), XdpError> {
        validate(faults)?;
        check_offset(faults, &self.iface)
    }

    /// The fault configuration in force.
    pub fn faults(&self) -> FaultConfig {
        self.maps().current_faults
    }

    /// The counters, summed over CPUs; all zero if the kernel fails to
    /// report them ([`Steering::try_counters`] returns the error instead).
    pub fn counters(&self) -> XdpCounters {
        self.try_counters().unwrap_or_default()
    }

    /// The counters, summed over CPUs.
    pub fn try_counters(&self) -> Result<XdpCounters, XdpError> {
        let maps = self.maps();
        let mut out = XdpCounters::default();
        for c in Counter::ALL {
            let per_cpu = maps
                .counters
                .get(&(c as u32), 0)
                .map_err(|e| map_error(&format!("reading the {} counter", c.name()), &e))?;
            *out.slot(c) = per_cpu.iter().copied().fold(0u64, u64::wrapping_add);
        }
        Ok(out)
    }

    /// Sets every counter back to zero.
    pub fn reset_counters(&self) -> Result<(), XdpError> {
        let mut maps = self.maps();
        for c in Counter::ALL {
            let zeros = per_cpu_zeros()?;
            maps.counters
                .set(c as u32, zeros, 0)
                .map_err(|e| map_error(&format!("resetting the {} counter", c.name()), &e))?;
        }
        Ok(())
    }

    fn maps(&self) -> MutexGuard<'_, Maps> {
        // Every map update is a single system call: a panic elsewhere while
        // the lock was held cannot have left them half-written.
        self.maps.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for Steering {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Steering")
            .field("iface", &self.iface)
            .field("mode", &self.mode)
            .field("faults", &self.faults())
            .finish_non_exhaustive()
    }
}

impl Maps {
    fn write_faults(&mut self, faults: &FaultConfig) -> Result<(), XdpError> {
        self.faults
            .set(0, faults, 0)
            .map_err(|e| map_error("writing the fault configuration", &e))?;
        self.current_faults = *faults;
        Ok(())
    }

    /// Zeroed dice reseed themselves from the configured seed on their
    /// next frame.
    fn reset_dice(&mut self) -> Result<(), XdpError> {
        let zeros = per_cpu_zeros()?;
        self.rng
            .set(0, zeros, 0)
            .map_err(|e| map_error("resetting the fault dice", &e))
    }
}

fn per_cpu_zeros<T: aya::Pod + Default>() -> Result<PerCpuValues<T>, XdpError> {
    let cpus = aya::util::nr_cpus().map_err(|(path, e)| XdpError::Bpf {
        action: "counting the CPUs".into(),
        detail: format!("{path}: {e}"),
    })?;
    PerCpuValues::try_from(vec![T::default(); cpus]).map_err(|e| XdpError::Bpf {
        action: "preparing per-CPU values".into(),
        detail: e.to_string(),
    })
}

fn validate(faults: &FaultConfig) -> Result<(), XdpError> {
    for (name, ppm) in [("drop", faults.drop_ppm), ("corrupt", faults.corrupt_ppm)] {
        if ppm > PPM {
            return Err(XdpError::InvalidFaults(format!(
                "{name} probability is {ppm} parts per million; at most {PPM}"
            )));
        }
    }
    match faults.scope() {
        None => Err(XdpError::InvalidFaults(format!(
            "scope value {} is unknown: {}",
            faults.scope,
            oae_common::InvalidScope
        ))),
        Some(FaultScope::Port(0)) => Err(XdpError::InvalidFaults(format!(
            "scope port:0 matches no segment: {}",
            oae_common::InvalidScope
        ))),
        Some(_) => Ok(()),
    }
}

/// A fixed corruption offset must fall inside a frame the faults reach:
/// the longest OAE frame, or for wider scopes the interface's MTU plus the
/// Ethernet header. One past it would flip nothing, silently.
fn check_offset(faults: &FaultConfig, iface: &str) -> Result<(), XdpError> {
    if faults.corrupt_offset == CORRUPT_RANDOM_OFFSET {
        return Ok(());
    }
    let (limit, what) = match faults.scope() {
        Some(FaultScope::Oae) | None => (
            oae_common::MAX_OAE_FRAME_ON_WIRE,
            "the longest OAE frame, Ethernet header and authentication trailer included"
                .to_string(),
        ),
        Some(_) => {
            let mtu = std::fs::read_to_string(format!("/sys/class/net/{iface}/mtu"))
                .ok()
                .and_then(|t| t.trim().parse::<u32>().ok())
                .unwrap_or(u32::from(u16::MAX));
            (
                mtu + oae_common::ETH_HEADER_LEN as u32,
                format!("{iface}'s MTU ({mtu}) and the Ethernet header"),
            )
        }
    };
    if faults.corrupt_offset >= limit {
        return Err(XdpError::InvalidFaults(format!(
            "corrupt offset {} is past the end of every frame in scope: use 0 to {} \
             ({limit} bytes: {what}), or \"random\"",
            faults.corrupt_offset,
            limit - 1
        )));
    }
    Ok(())
}

fn check_queue(queue: u32) -> Result<(), XdpError> {
    if queue < MAX_QUEUES {
        Ok(())
    } else {
        Err(XdpError::QueueOutOfRange { queue })
    }
}

fn take_map<M>(ebpf: &mut Ebpf, name: &str) -> Result<M, XdpError>
where
    M: TryFrom<aya::maps::Map, Error = MapError>,
{
    let map = ebpf.take_map(name).ok_or_else(|| XdpError::Bpf {
        action: "loading the XDP program".into(),
        detail: format!("the embedded object has no map named {name}"),
    })?;
    M::try_from(map).map_err(|e| map_error(&format!("opening map {name}"), &e))
}

fn attach_in(
    program: &mut Xdp,
    iface: &str,
    ifindex: u32,
    mode: XdpMode,
) -> Result<aya::programs::xdp::XdpLinkId, XdpError> {
    let flags = match mode {
        XdpMode::Auto => aya::programs::XdpMode::Default,
        XdpMode::Driver => aya::programs::XdpMode::Driver,
        XdpMode::Skb => aya::programs::XdpMode::Skb,
    };
    program
        .attach_to_if_index(ifindex, flags)
        .map_err(|e| match errno(&e) {
            Some(Errno::EBUSY | Errno::EEXIST) => XdpError::AlreadyAttached {
                iface: iface.to_string(),
            },
            Some(Errno::EPERM | Errno::EACCES) => XdpError::PermissionDenied {
                action: format!("attaching the XDP program to {iface}"),
                detail: chain(&e),
            },
            Some(Errno::ENODEV) => XdpError::InterfaceNotFound {
                iface: iface.to_string(),
            },
            _ => XdpError::ModeUnsupported {
                iface: iface.to_string(),
                mode,
                detail: chain(&e),
            },
        })
}

fn load_error(e: &(dyn std::error::Error + 'static)) -> XdpError {
    match errno(e) {
        Some(Errno::EPERM | Errno::EACCES) => XdpError::PermissionDenied {
            action: "loading the XDP program".into(),
            detail: chain(e),
        },
        _ => XdpError::Rejected { detail: chain(e) },
    }
}

fn map_error(action: &str, e: &MapError) -> XdpError {
    match errno(e) {
        Some(Errno::EPERM | Errno::EACCES) => XdpError::PermissionDenied {
            action: action.to_string(),
            detail: chain(e),
        },
        _ => bpf(action, e),
    }
}

fn bpf(action: &str, e: &(dyn std::error::Error + 'static)) -> XdpError {
    XdpError::Bpf {
        action: action.to_string(),
        detail: chain(e),
    }
}

/// The OS error code somewhere in `e`'s chain of causes.
fn errno(e: &(dyn std::error::Error + 'static)) -> Option<Errno> {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if let Some(code) = c
            .downcast_ref::<io::Error>()
            .and_then(io::Error::raw_os_error)
        {
            return Some(Errno::from_raw(code));
        }
        if let Some(code) = c
            .downcast_ref::<aya::sys::NetlinkError>()
            .and_then(aya::sys::NetlinkError::raw_os_error)
        {
            return Some(Errno::from_raw(code));
        }
        cause = c.source();
    }
    None
}

/// `e` and its causes on one line, skipping causes its message already
/// quotes.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let part = c.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        cause = c.source();
    }
    text
}

/// Why a fault setting could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FaultParseError(String);

/// Parses a whole fault configuration: settings as
/// [`apply_fault_setting`] takes them, separated by spaces or commas,
/// applied in order to [`FaultConfig::default`] (no faults). Reads back
/// what `FaultConfig`'s `Display` writes.
pub fn parse_faults(text: &str) -> Result<FaultConfig, FaultParseError> {
    let mut faults = FaultConfig::default();
    for setting in text.split([' ', ',']).filter(|s| !s.is_empty()) {
        apply_fault_setting(&mut faults, setting)?;
    }
    Ok(faults)
}

/// Applies one `key=value` setting:
///
/// * `drop=P`, `corrupt=P`: a probability, as a decimal (`0.01`), a
///   percentage (`1%`) or parts per million (`10000ppm`);
/// * `offset=N` (byte offset of the flipped bit from the start of the
///   frame) or `offset=random` (a random byte of the OAE payload);
/// * `link=down` / `link=up`;
/// * `seed=N` (decimal or `0x` hexadecimal);
/// * `scope=oae` (OAE frames, the default), `scope=ipv4` (every IPv4
///   frame) or `scope=port:N` (IPv4 TCP and UDP segments with source or
///   destination port N): the frames the other settings apply to.
pub fn apply_fault_setting(faults: &mut FaultConfig, setting: &str) -> Result<(), FaultParseError> {
    let (key, value) = setting.split_once('=').ok_or_else(|| {
        FaultParseError(format!(
            "'{setting}' is not key=value (keys: drop, corrupt, offset, link, seed, scope)"
        ))
    })?;
    let (key, value) = (key.trim(), value.trim());
    match key {
        "drop" => faults.drop_ppm = parse_probability(value)?,
        "corrupt" => faults.corrupt_ppm = parse_probability(value)?,
        "offset" => {
            faults.corrupt_offset = if value == "random" {
                CORRUPT_RANDOM_OFFSET
            } else {
                value
                    .parse::<u32>()
                    .ok()
                    .filter(|&o| o != CORRUPT_RANDOM_OFFSET)
                    .ok_or_else(|| {
                        FaultParseError(format!(
                            "offset '{value}' is neither a byte offset nor 'random'"
                        ))
                    })?
            }
        }
        "link" => {
            faults.link_down = match value {
                "down" => 1,
                "up" => 0,
                _ => {
                    return Err(FaultParseError(format!(
                        "link '{value}': expected up or down"
                    )));
                }
            }
        }
        "seed" => {
            let parsed = match value.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => value.parse(),
            };
            faults.seed = parsed
                .map_err(|_| FaultParseError(format!("seed '{value}' is not a 64-bit number")))?;
        }
        "scope" => *faults = faults.with_scope(parse_scope(value)?),
        _ => {
            return Err(FaultParseError(format!(
                "unknown fault setting '{key}' (keys: drop, corrupt, offset, link, seed, scope)"
            )));
        }
    }
    Ok(())
}

/// A fault scope from `oae`, `ipv4` or `port:N`; anything else is refused
/// with what is accepted.
pub fn parse_scope(text: &str) -> Result<FaultScope, FaultParseError> {
    text.parse::<FaultScope>()
        .map_err(|e| FaultParseError(format!("scope '{text}': {e}")))
}

/// A probability in parts per million, from `0.25`, `25%` or `250000ppm`.
/// Decimal arithmetic throughout: `0.000001` is exactly 1 ppm.
pub fn parse_probability(text: &str) -> Result<u32, FaultParseError> {
    let bad = || {
        FaultParseError(format!(
            "probability '{text}' is not a number between 0 and 1 (also accepted: 5%, 500ppm)"
        ))
    };
    let ppm = if let Some(ppm) = text.strip_suffix("ppm") {
        ppm.trim().parse::<u64>().map_err(|_| bad())?
    } else if let Some(percent) = text.strip_suffix('%') {
        decimal_scaled(percent.trim(), 4).ok_or_else(bad)?
    } else {
        decimal_scaled(text, 6).ok_or_else(bad)?
    };
    u32::try_from(ppm)
        .ok()
        .filter(|&p| p <= PPM)
        .ok_or_else(bad)
}

/// `text * 10^scale` for a plain decimal `text`, if that is a whole number.
fn decimal_scaled(text: &str, scale: u32) -> Option<u64> {
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty() && frac.is_empty() {
        return None;
    }
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !digits(frac) {
        return None;
    }
    let frac = frac.trim_end_matches('0');
    let frac_len = u32::try_from(frac.len()).ok().filter(|&n| n <= scale)?;
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let frac: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    let unit = 10u64.checked_pow(scale)?;
    whole
        .checked_mul(unit)?
        .checked_add(frac.checked_mul(10u64.checked_pow(scale - frac_len)?)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probabilities_parse_exactly() {
        assert_eq!(parse_probability("0.01"), Ok(10_000));
        assert_eq!(parse_probability("0.000001"), Ok(1));
        assert_eq!(parse_probability(".5"), Ok(500_000));
        assert_eq!(parse_probability("1"), Ok(PPM));
        assert_eq!(parse_probability("1.000"), Ok(PPM));
        assert_eq!(parse_probability("0"), Ok(0));
        assert_eq!(parse_probability("2.5%"), Ok(25_000));
        assert_eq!(parse_probability("100%"), Ok(PPM));
        assert_eq!(parse_probability("500ppm"), Ok(500));
        for bad in [
            "",
            ".",
            "1.5",
            "0.0000001",
            "-0.1",
            "abc",
            "101%",
            "1000001ppm",
            "0.1.2",
            "1e-3",
        ] {
            assert!(parse_probability(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn settings_apply_in_order() {
        let f = parse_faults("drop=0.5, corrupt=1% offset=20 link=down seed=0x2a").unwrap();
        assert_eq!(
            f,
            FaultConfig {
                drop_ppm: 500_000,
                corrupt_ppm: 10_000,
                corrupt_offset: 20,
                link_down: 1,
                seed: 42,
                ..FaultConfig::default()
            }
        );
        let mut g = f;
        apply_fault_setting(&mut g, "link=up").unwrap();
        apply_fault_setting(&mut g, "offset=random").unwrap();
        assert_eq!(g.link_down, 0);
        assert_eq!(g.corrupt_offset, CORRUPT_RANDOM_OFFSET);
        assert_eq!(g.scope(), Some(FaultScope::Oae));
        apply_fault_setting(&mut g, "scope=port:6379").unwrap();
        assert_eq!(g.scope(), Some(FaultScope::Port(6379)));
        assert_eq!((g.drop_ppm, g.seed), (500_000, 42), "other settings kept");
        apply_fault_setting(&mut g, "scope=ipv4").unwrap();
        assert_eq!((g.scope(), g.port), (Some(FaultScope::Ipv4), 0));
        apply_fault_setting(&mut g, "scope=oae").unwrap();
        assert_eq!(g.scope(), Some(FaultScope::Oae));
        assert_eq!(parse_faults(""), Ok(FaultConfig::default()));
    }

    #[test]
    fn display_reads_back() {
        for text in [
            "drop=0.5 corrupt=0.000001 offset=20 link=down seed=42",
            "drop=0 corrupt=0 offset=random link=up seed=0",
            "drop=1 corrupt=0.25 offset=0 link=up seed=18446744073709551615",
            "drop=0.01 corrupt=0.001 offset=random link=up seed=1 scope=port:6379",
            "drop=0.05 corrupt=0 offset=random link=down seed=0 scope=ipv4",
        ] {
            let f = parse_faults(text).unwrap();
            assert_eq!(f.to_string(), text);
        }
    }

    #[test]
    fn bad_settings_say_what_is_expected() {
        for (bad, hint) in [
            ("drop", "key=value"),
            ("jitter=1", "unknown fault setting"),
            ("link=sideways", "up or down"),
            ("offset=-1", "random"),
            ("seed=x", "64-bit"),
            ("scope=tcp", "oae (OAE frames, the default), ipv4"),
            ("scope=port:0", "port:N"),
            ("scope=port:70000", "1 to 65535"),
        ] {
            let e = parse_faults(bad).unwrap_err();
            assert!(e.to_string().contains(hint), "{bad}: {e}");
        }
    }

    #[test]
    fn invalid_probabilities_are_refused() {
        let f = FaultConfig {
            corrupt_ppm: PPM + 1,
            ..FaultConfig::default()
        };
        assert!(matches!(validate(&f), Err(XdpError::InvalidFaults(_))));
        assert!(validate(&FaultConfig::default()).is_ok());
        let unknown = FaultConfig {
            scope: 9,
            ..FaultConfig::default()
        };
        let e = validate(&unknown).unwrap_err();
        assert!(e.to_string().contains("scope value 9 is unknown"), "{e}");
        let no_port = FaultConfig::default().with_scope(FaultScope::Port(0));
        assert!(matches!(
            validate(&no_port),
            Err(XdpError::InvalidFaults(_))
        ));
        let port = FaultConfig::default().with_scope(FaultScope::Port(6379));
        assert!(validate(&port).is_ok());
    }

    #[test]
    fn counters_subtract_and_print() {
        let a = XdpCounters {
            steered: 10,
            passed: 5,
            no_socket: 2,
            ..XdpCounters::default()
        };
        let b = XdpCounters {
            steered: 4,
            passed: 5,
            ..XdpCounters::default()
        };
        let d = a.since(&b);
        assert_eq!(d.get(Counter::Steered), 6);
        assert_eq!(d.get(Counter::Passed), 0);
        assert_eq!(
            d.to_string(),
            "steered=6 passed=0 dropped_by_fault=0 corrupted_by_fault=0 no_socket=2"
        );
    }

    #[test]
    fn modes_parse_and_print() {
        for m in [XdpMode::Auto, XdpMode::Driver, XdpMode::Skb] {
            assert_eq!(m.to_string().parse::<XdpMode>(), Ok(m));
        }
        assert!("turbo".parse::<XdpMode>().is_err());
    }

    #[test]
    fn errors_say_what_to_do() {
        let busy = XdpError::AlreadyAttached {
            iface: "oae0".into(),
        };
        assert!(busy.to_string().contains("ip link set dev oae0 xdp off"));
        let e = io::Error::from_raw_os_error(Errno::EBUSY as i32);
        assert_eq!(errno(&e), Some(Errno::EBUSY));
    }

    #[test]
    fn steering_can_be_shared_between_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<Steering>();
    }

    #[test]
    fn the_object_is_embedded() {
        // An ELF file for BPF: what build.rs produced, not a placeholder.
        assert_eq!(&OBJECT[..4], b"\x7fELF");
        assert_eq!(u16::from_le_bytes([OBJECT[18], OBJECT[19]]), 247);
    }
}
