//! The dataplane's TOML configuration. Every setting is checked before
//! anything starts; a refusal names the file, the setting and what to do.
//!
//! A file holds either one dataplane (its settings at top level, as in
//! `configs/host-nic.toml`) or several under `[dataplane.<name>]`, with the
//! network and the demo's workload beside them (the `deployment` module, as in
//! `configs/veth-pair.toml`): `oaed --name` reads its own table.

use std::fmt;
use std::path::{Path, PathBuf};

use oae_common::mac::parse_mac;
use oae_proto::auth::LinkKey;
use oae_proto::config::LinkConfig;
use oae_proto::identity::{PublicIdentity, Trust};
use oae_proto::memory::{MAX_REGIONS, Permissions, RegionSpec};
use serde::{Deserialize, Serialize};

/// A refused configuration: where, and what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub kind: ConfigErrorKind,
    /// Where (the file, the dataplane, the setting), what is wrong, and
    /// what to do: for a person.
    pub message: String,
}

/// The kinds of [`ConfigError`], by stable name: programs match on these,
/// never on the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfigErrorKind {
    /// The file could not be read.
    Unreadable,
    /// Not TOML of the configuration's shape: a syntax error, an unknown
    /// setting, a value of the wrong type.
    Syntax,
    /// Well-formed, but a value is out of its range or settings disagree.
    Invalid,
    /// A configuration could not be written out (a deployment's per-node
    /// files).
    Unwritable,
}

impl ConfigError {
    pub fn new(kind: ConfigErrorKind, message: impl Into<String>) -> ConfigError {
        ConfigError {
            kind,
            message: message.into(),
        }
    }

    /// A value out of its range, or settings that disagree.
    pub fn invalid(message: impl Into<String>) -> ConfigError {
        ConfigError::new(ConfigErrorKind::Invalid, message)
    }
}

impl ConfigErrorKind {
    /// Its stable name.
    pub fn name(self) -> &'static str {
        match self {
            ConfigErrorKind::Unreadable => "unreadable",
            ConfigErrorKind::Syntax => "syntax",
            ConfigErrorKind::Invalid => "invalid",
            ConfigErrorKind::Unwritable => "unwritable",
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

/// One dataplane process.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Names the process in logs, sockets and state; defaults to the
    /// `[dataplane.<name>]` key.
    #[serde(default)]
    pub name: String,
    /// Unique among the nodes that talk to each other; breaks role ties.
    /// None: the dataplane makes its own from its identity and an address
    /// unique in its fabric (docs/PROTOCOL.md, "Addresses").
    #[serde(default)]
    pub node_id: Option<u64>,
    /// Unix socket of the control interface (mode 0600).
    #[serde(default)]
    pub control_socket: Option<PathBuf>,
    /// Where the incarnation counter lives; it must survive restarts, so a
    /// restarted dataplane is recognised as a new incarnation.
    #[serde(default)]
    pub state_dir: Option<PathBuf>,
    /// The identity's secret key (made on first start, mode 0600), for
    /// links whose keys are agreed by identity; by default
    /// `<state_dir>/identity.key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_file: Option<PathBuf>,
    /// One polling core per queue.
    #[serde(rename = "queue")]
    pub queues: Vec<QueueConfig>,
    /// Registered memory, the same regions on every queue's node.
    #[serde(default, rename = "region")]
    pub regions: Vec<RegionConfig>,
    /// DPDK's environment, for queues with `driver = "dpdk"`.
    #[serde(default)]
    pub dpdk: Option<DpdkSettings>,
    /// Where host programs attach when the dataplane runs on an IPU: a
    /// swap-ring region standing in for the PCIe BAR.
    #[serde(default)]
    pub host: Option<HostSettings>,
    /// The metrics endpoint (off unless `listen` is set).
    #[serde(default)]
    pub metrics: Option<MetricsSettings>,
}

/// `[metrics]`: Prometheus and OpenMetrics text at `http://<listen>/metrics`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsSettings {
    /// An IP address and port, e.g. `127.0.0.1:9464` (port 0: any free
    /// port, printed at start). The endpoint has no authentication: keep
    /// it on loopback or a management network.
    pub listen: std::net::SocketAddr,
}

/// The host ring (the `host` module): the dataplane creates it, the polling
/// core of `queue` serves it, host programs attach to it.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HostSettings {
    /// The region's file, e.g. `/dev/shm/oae-host-a`.
    pub ring: PathBuf,
    #[serde(default)]
    pub queue: u16,
    /// How many verbs one host process may have in flight (the records of
    /// each FITO ring).
    #[serde(default = "default_host_capacity")]
    pub capacity: u64,
    /// Emulated PCIe costs, as `read=750,write=200,doorbell=1600,atomic=1000`
    /// (the default) or `zero`.
    #[serde(default)]
    pub pcie_cost: Option<String>,
    /// `fito` (request and response rings, one host process) or
    /// `bilateral` (a swap slot per host process, batches each way).
    #[serde(default)]
    pub mode: oae_client::host::HostMode,
    /// How many host processes may attach at once: 1 for a FITO ring (its
    /// rings have one producer); up to 64 bilateral, 4 unless set.
    #[serde(default)]
    pub processes: Option<u64>,
    /// Bilateral: records one exchange carries each way.
    #[serde(default = "default_host_batch")]
    pub batch: u64,
}

fn default_host_capacity() -> u64 {
    256
}

fn default_host_batch() -> u64 {
    oae_swapring::bilateral::MAX_SLOT_BATCH
}

/// A host ring as [`HostSettings::to_host_ring`] checked it: where host
/// programs attach, and what the region emulates.
#[derive(Debug, Clone)]
pub struct HostRing {
    pub path: PathBuf,
    /// Verbs one host process may have in flight (records per FITO ring).
    pub capacity: u64,
    pub cost: oae_swapring::cost::CostModel,
    pub mode: oae_client::host::HostMode,
    /// Host processes a bilateral ring serves at once (its slots).
    pub processes: u64,
    /// Records one bilateral exchange carries each way.
    pub batch: u64,
}

impl HostSettings {
    /// A ring at `ring` in `mode`, every other setting its default.
    pub fn new(ring: PathBuf, mode: oae_client::host::HostMode) -> HostSettings {
        HostSettings {
            ring,
            queue: 0,
            capacity: default_host_capacity(),
            pcie_cost: None,
            mode,
            processes: None,
            batch: default_host_batch(),
        }
    }

    pub fn to_host_ring(&self) -> Result<HostRing, String> {
        let cost = match &self.pcie_cost {
            Some(spec) => oae_swapring::cost::CostModel::parse(spec)
                .map_err(|e| format!("host.pcie_cost = \"{spec}\": {e}"))?,
            None => oae_swapring::cost::CostModel::default(),
        };
        use oae_client::host::{HostMode, MAX_VERB_RECORDS};
        let records = MAX_VERB_RECORDS as u64;
        let max_batch = oae_swapring::bilateral::MAX_SLOT_BATCH;
        if !(records..=65_536).contains(&self.capacity) {
            return Err(format!(
                "host.capacity = {} must be from {records} (the records of the largest verb) \
                 to 65536",
                self.capacity
            ));
        }
        let processes = match self.mode {
            HostMode::Fito => 1,
            HostMode::Bilateral => self.processes.unwrap_or(4),
        };
        match self.mode {
            HostMode::Fito if self.processes.is_some_and(|n| n != 1) => {
                return Err(format!(
                    "host.processes = {}: a FITO host ring serves one host process; set \
                     mode = \"bilateral\" for several, or give each process its own ring",
                    self.processes.unwrap_or(1)
                ));
            }
            HostMode::Bilateral if !(1..=64).contains(&processes) => {
                return Err(format!("host.processes = {processes} must be from 1 to 64"));
            }
            HostMode::Bilateral if !(records..=max_batch).contains(&self.batch) => {
                return Err(format!(
                    "host.batch = {} must be from {records} (the records of the largest verb) \
                     to {max_batch}",
                    self.batch
                ));
            }
            _ => {}
        }
        Ok(HostRing {
            path: self.ring.clone(),
            capacity: self.capacity,
            cost,
            mode: self.mode,
            processes,
            batch: self.batch,
        })
    }
}

/// The protocol a queue runs.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum TransportKind {
    #[default]
    Oae,
    /// A model of RoCE's RC transport (not RoCE), for comparison.
    RcModel,
}

/// Overrides of the RC model's settings; see `oae_rc_model::RcConfig`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RcSettings {
    pub max_outstanding: Option<u16>,
    pub max_rd_atomic: Option<u16>,
    pub ack_timeout_exp: Option<u8>,
    pub retry_count: Option<u8>,
    pub ack_coalesce: Option<u16>,
    pub responder_cache: Option<u16>,
    pub submit_queue: Option<usize>,
}

impl RcSettings {
    pub fn to_rc_config(&self) -> oae_rc_model::RcConfig {
        let d = oae_rc_model::RcConfig::default();
        oae_rc_model::RcConfig {
            max_outstanding: self.max_outstanding.unwrap_or(d.max_outstanding),
            max_rd_atomic: self.max_rd_atomic.unwrap_or(d.max_rd_atomic),
            ack_timeout_exp: self.ack_timeout_exp.unwrap_or(d.ack_timeout_exp),
            retry_count: self.retry_count.unwrap_or(d.retry_count),
            ack_coalesce: self.ack_coalesce.unwrap_or(d.ack_coalesce),
            responder_cache: self.responder_cache.unwrap_or(d.responder_cache),
            submit_queue: self.submit_queue.unwrap_or(d.submit_queue),
        }
    }
}

/// Which poll-mode driver serves a queue.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum DriverKind {
    /// An AF_XDP socket behind the oae XDP program (which also injects
    /// faults).
    #[default]
    AfXdp,
    /// A DPDK port (`dpdk_port`), e.g. a net_memif or net_af_xdp vdev.
    Dpdk,
}

/// Why a queue with `driver = "dpdk"` is refused by a build without the
/// `dpdk` feature (the aarch64 build leaves it out).
pub const NO_DPDK: &str = "driver = \"dpdk\", but this oaed was built without DPDK (cargo \
                           feature `dpdk`, which the aarch64 build leaves out): use driver = \
                           \"af-xdp\", or run a build with DPDK";

/// Free hugepages of the default size, from /proc/meminfo (0 if unknown).
fn free_hugepages() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("HugePages_Free:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The DPDK environment of one dataplane process.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DpdkSettings {
    /// Virtual devices, each passed as `--vdev=<text>`, e.g.
    /// `net_memif0,role=server,socket=/run/oae/memif.sock`.
    #[serde(default)]
    pub vdevs: Vec<String>,
    /// EAL arguments. By default `--no-pci --in-memory --log-level=error`
    /// where free hugepages exist, and `--no-pci --no-huge --no-shconf -m
    /// 512 --log-level=error` otherwise; a `--file-prefix` naming the
    /// dataplane and its process is added unless one is given.
    #[serde(default)]
    pub eal_args: Option<Vec<String>>,
}

impl DpdkSettings {
    /// The EAL's arguments for dataplane `name`.
    pub fn eal_args(&self, name: &str) -> Vec<String> {
        let mut args: Vec<String> = match &self.eal_args {
            Some(a) => a.clone(),
            None => {
                let memory: &[&str] = if free_hugepages() > 0 {
                    &["--in-memory"]
                } else {
                    &["--no-huge", "--no-shconf", "-m", "512"]
                };
                ["--no-pci"]
                    .iter()
                    .chain(memory)
                    .chain(&["--log-level=error"])
                    .map(|s| s.to_string())
                    .collect()
            }
        };
        if !args.iter().any(|a| a.starts_with("--file-prefix")) {
            args.push(format!("--file-prefix=oae-{name}-{}", std::process::id()));
        }
        args.extend(self.vdevs.iter().map(|v| format!("--vdev={v}")));
        args
    }
}

/// One NIC queue, its polling core and the OAE link it carries.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct QueueConfig {
    /// The interface (AF_XDP); for a DPDK queue only a label for reports,
    /// by default its `dpdk_port`.
    #[serde(default)]
    pub iface: String,
    #[serde(default)]
    pub queue_id: u32,
    /// CPU the polling thread is pinned to; none means unpinned.
    #[serde(default)]
    pub core: Option<usize>,
    /// MAC address of the one peer at the other end of this queue's link;
    /// or list several under `[[queue.peer]]`, one link each.
    #[serde(default)]
    pub peer_mac: Option<String>,
    #[serde(default, rename = "peer")]
    pub peers: Vec<PeerConfig>,
    /// How a queue with no peers listed finds its neighbours.
    #[serde(default)]
    pub discovery: Option<DiscoverySettings>,
    /// How frames of this queue's links reach this queue and no other: by
    /// the peer's MAC (an ntuple rule per MAC on a real NIC), or by the
    /// queue the peer sent on (a veth pair, whose receive queue is the
    /// sender's transmit queue).
    #[serde(default)]
    pub steer_by: SteerBy,
    #[serde(default)]
    pub driver: DriverKind,
    /// The protocol on the link: OAE, or the model of RoCE's RC transport.
    #[serde(default)]
    pub transport: TransportKind,
    /// Join this queue's links into a fabric: routes learned from the
    /// neighbours, verbs relayed to nodes that are not neighbours, failover
    /// when a link dies, transfers in doubt resolved over another path, an
    /// agreed membership (`oaectl members`). OAE only.
    #[serde(default)]
    pub fabric: bool,
    /// Settings of the RC model, for `transport = "rc-model"`.
    #[serde(default)]
    pub rc: RcSettings,
    /// DPDK: the device this queue opens, e.g. `net_memif0`.
    #[serde(default)]
    pub dpdk_port: Option<String>,
    #[serde(default)]
    pub xdp_mode: XdpModeSetting,
    #[serde(default)]
    pub bind_mode: BindModeSetting,
    /// Frame buffers: UMEM frames for AF_XDP, mbufs for DPDK (receive
    /// and transmit pools together).
    #[serde(default = "default_frames")]
    pub frames: u32,
    /// Entries of each ring (AF_XDP: fill, completion, receive, transmit;
    /// DPDK: receive and transmit descriptors). By default 2048 for
    /// AF_XDP and 1024 for DPDK, whose two rings share `frames`.
    #[serde(default)]
    pub ring_size: Option<u32>,
    /// Authenticated frames on the queue's links (off unless set): for
    /// links that leave a trusted rack.
    #[serde(default)]
    pub auth: Option<AuthSettings>,
    #[serde(default)]
    pub link: LinkSettings,
    #[serde(default)]
    pub poll: PollSettings,
}

/// How a queue's polling core polls (`[queue.poll]`).
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PollSettings {
    /// What the core does when a loop iteration finds nothing to do.
    #[serde(default)]
    pub idle: IdlePolicy,
    /// With `idle = "sleep"`: how long an idle core keeps polling (yielding
    /// between polls) before it sleeps, microseconds (default 50).
    pub spin_us: Option<u32>,
    /// When the transmit ring is kicked (AF_XDP: a `sendto` per kick).
    #[serde(default)]
    pub kicks: KickPolicy,
    /// AF_XDP preferred busy polling (`SO_PREFER_BUSY_POLL`): the polling
    /// core runs the queue's receive processing itself.
    #[serde(default)]
    pub busy_poll: bool,
}

impl PollSettings {
    pub const DEFAULT_SPIN_US: u32 = 50;

    pub fn spin_us(&self) -> u32 {
        self.spin_us.unwrap_or(Self::DEFAULT_SPIN_US)
    }

    fn validate(&self, driver: DriverKind) -> Result<(), String> {
        if self.spin_us() > 1_000_000 {
            return Err(format!(
                "poll.spin_us = {} is over a second: use at most 1000000",
                self.spin_us()
            ));
        }
        if driver == DriverKind::Dpdk {
            if self.idle == IdlePolicy::Sleep {
                return Err(
                    "poll.idle = \"sleep\" needs a socket to sleep on, which a DPDK \
                            queue has not: use \"spin\" or \"yield\""
                        .into(),
                );
            }
            if self.busy_poll {
                return Err(
                    "poll.busy_poll is an AF_XDP socket option: remove it for a DPDK \
                            queue"
                        .into(),
                );
            }
        }
        Ok(())
    }
}

/// What an idle polling core does.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum IdlePolicy {
    /// Keep polling: the lowest latency, a whole CPU always.
    #[default]
    Spin,
    /// Poll, but give the CPU to any other runnable thread between polls.
    Yield,
    /// Sleep on the socket until a frame, a submission, a control request
    /// or the link's next timer, as DPDK's receive interrupt mode does.
    Sleep,
}

/// When a polling core kicks its transmit ring.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum KickPolicy {
    /// Held while receive bursts keep coming (so one system call sends
    /// the answers of several), for a bounded number of frames and loop
    /// iterations; at once when a receive burst comes back empty.
    #[default]
    Adaptive,
    /// After every transmit burst.
    Immediate,
}

/// A peer this queue has a link to.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PeerConfig {
    pub mac: String,
    /// The interface this peer is reached through, if not the queue's own
    /// `iface` (AF_XDP): one polling core serves a port per interface, as a
    /// fabric node of veth pairs needs.
    #[serde(default)]
    pub iface: Option<String>,
}

/// `[queue.discovery]`: a queue that lists no peers finds its neighbours
/// (docs/PROTOCOL.md, "Discovery"): it announces itself on each of its
/// interfaces, and each neighbour heard takes one of the links made for
/// them at start.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DiscoverySettings {
    /// Interfaces to find neighbours on beside the queue's own `iface`
    /// (a fabric node of veth pairs has one per neighbour).
    #[serde(default)]
    pub more_ifaces: Vec<String>,
    /// Links made at start for neighbours to take, all interfaces
    /// together; a neighbour heard when all are taken is dropped and
    /// counted (`no_vacant_link`).
    #[serde(default = "default_neighbours")]
    pub neighbours: u16,
    /// Each interface announces the dataplane this often.
    #[serde(default = "default_announce_every_ms")]
    pub announce_every_ms: u64,
    /// A neighbour its link has not heard this long after it was found
    /// is let go and its link made vacant (one it heard stays).
    #[serde(default = "default_forget_after_ms")]
    pub forget_after_ms: u64,
}

impl Default for DiscoverySettings {
    fn default() -> DiscoverySettings {
        DiscoverySettings {
            more_ifaces: Vec::new(),
            neighbours: default_neighbours(),
            announce_every_ms: default_announce_every_ms(),
            forget_after_ms: default_forget_after_ms(),
        }
    }
}

fn default_neighbours() -> u16 {
    8
}

fn default_announce_every_ms() -> u64 {
    1000
}

fn default_forget_after_ms() -> u64 {
    10_000
}

impl DiscoverySettings {
    fn validate(&self, q: &QueueConfig) -> Result<(), String> {
        if !(1..=64).contains(&self.neighbours) {
            return Err(format!(
                "discovery.neighbours = {}: give 1 to 64 links for neighbours to take",
                self.neighbours
            ));
        }
        if self.announce_every_ms == 0 || self.announce_every_ms > 60_000 {
            return Err(format!(
                "discovery.announce_every_ms = {}: give 1 to 60000",
                self.announce_every_ms
            ));
        }
        if self.forget_after_ms > 3_600_000 {
            return Err(format!(
                "discovery.forget_after_ms = {}: give at most 3600000 (an hour)",
                self.forget_after_ms
            ));
        }
        if self.forget_after_ms < self.announce_every_ms {
            return Err(format!(
                "discovery.forget_after_ms = {} is shorter than announce_every_ms = {}: a \
                 neighbour would be let go before it is heard again",
                self.forget_after_ms, self.announce_every_ms
            ));
        }
        if !self.more_ifaces.is_empty() && q.driver != DriverKind::AfXdp {
            return Err(
                "discovery.more_ifaces is for AF_XDP queues; a DPDK queue finds its \
                 neighbours on its own port"
                    .into(),
            );
        }
        for (k, i) in self.more_ifaces.iter().enumerate() {
            if i.is_empty() || i.len() > 15 {
                return Err(format!(
                    "discovery.more_ifaces: '{i}' must be an interface name of 1 to 15 bytes"
                ));
            }
            if *i == q.iface || self.more_ifaces[..k].contains(i) {
                return Err(format!(
                    "discovery.more_ifaces names {i} twice (with iface): one port per interface"
                ));
            }
        }
        Ok(())
    }

    pub fn to_discovery_config(&self) -> oae_proto::discovery::DiscoveryConfig {
        oae_proto::discovery::DiscoveryConfig {
            announce_every: self.announce_every_ms * 1_000_000,
            forget_after: self.forget_after_ms * 1_000_000,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum SteerBy {
    #[default]
    PeerMac,
    Queue,
}

fn default_frames() -> u32 {
    4096
}

impl QueueConfig {
    /// What reports call the queue's interface.
    pub fn label(&self) -> &str {
        match (&self.dpdk_port, self.iface.is_empty()) {
            (Some(port), true) => port,
            _ => &self.iface,
        }
    }

    /// How the queue finds its neighbours, if it lists none: it discovers
    /// them (with `[queue.discovery]`'s settings, or the defaults).
    pub fn discovery(&self) -> Option<DiscoverySettings> {
        if self.peer_mac.is_some() || !self.peers.is_empty() {
            return None;
        }
        Some(self.discovery.clone().unwrap_or_default())
    }

    /// Links the queue's transport is made with: one per listed peer, or
    /// the pool its discovered neighbours take.
    pub fn link_count(&self) -> usize {
        match self.discovery() {
            Some(d) => usize::from(d.neighbours),
            None => self.peer_macs().len(),
        }
    }

    /// The MACs of this queue's peers, link 0 first.
    pub fn peer_macs(&self) -> Vec<&str> {
        self.peer_mac
            .iter()
            .map(String::as_str)
            .chain(self.peers.iter().map(|p| p.mac.as_str()))
            .collect()
    }

    /// The interfaces the queue's links run over, the queue's own first,
    /// each with its listed links (index and peer MAC) in link order; a
    /// queue that discovers its neighbours has none listed.
    pub fn ports(&self) -> Vec<(&str, Vec<(u16, &str)>)> {
        let mut ports: Vec<(&str, Vec<(u16, &str)>)> = vec![(self.iface.as_str(), Vec::new())];
        if let Some(d) = &self.discovery {
            ports.extend(d.more_ifaces.iter().map(|i| (i.as_str(), Vec::new())));
        }
        let own = self.peer_mac.iter().map(|m| (m.as_str(), None));
        let listed = self
            .peers
            .iter()
            .map(|p| (p.mac.as_str(), p.iface.as_deref()));
        for (link, (mac, iface)) in own.chain(listed).enumerate() {
            let iface = iface.unwrap_or(&self.iface);
            match ports.iter_mut().find(|(i, _)| *i == iface) {
                Some((_, links)) => links.push((link as u16, mac)),
                None => ports.push((iface, vec![(link as u16, mac)])),
            }
        }
        ports
    }

    /// The ring size in force.
    pub fn ring_size(&self) -> u32 {
        self.ring_size.unwrap_or(match self.driver {
            DriverKind::AfXdp => 2048,
            DriverKind::Dpdk => 1024,
        })
    }
}

#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum XdpModeSetting {
    /// Driver mode where the NIC supports it, generic (skb) mode otherwise.
    #[default]
    Auto,
    Driver,
    Skb,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum BindModeSetting {
    /// Zero-copy where the driver allows it, copy mode otherwise.
    #[default]
    Auto,
    ZeroCopy,
    Copy,
}

/// `[queue.auth]`: every frame of the queue's links carries an AES-128-GMAC
/// tag (docs/PROTOCOL.md, "Authenticated links"); frames without a good
/// tag, replays and frames of older epochs are dropped. The key is either
/// shared (`key`, the same at both ends: a closed rack) or agreed by
/// identity (`identity = true`: a handshake proves both ends' identities
/// and agrees a fresh key per link incarnation, "Key agreement").
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSettings {
    /// 64 hex digits, the same at both ends of the link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<SecretKey>,
    /// The key number `key` goes by (0-3), for later rolls.
    #[serde(default)]
    pub key_number: u8,
    /// Agree the key by identity: the dataplane's identity file (made on
    /// first start, mode 0600) against the peer's, which must be trusted.
    #[serde(default)]
    pub identity: bool,
    /// Identities trusted to bring a link up (64 hex digits each: what
    /// `oaed --show-identity` prints on the peer).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trusted: Vec<String>,
    /// A file of trusted identities, one per line (`#` starts a comment),
    /// read at start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trusted_file: Option<PathBuf>,
    /// Frames sent under one agreed key before it is renewed (default
    /// 2^32).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rekey_after: Option<u64>,
}

impl AuthSettings {
    fn validate(&self) -> Result<(), String> {
        match (&self.key, self.identity) {
            (Some(_), true) => {
                return Err(
                    "[queue.auth] has both key and identity = true: a link's key is \
                            either shared (key) or agreed by identity; remove one"
                        .into(),
                );
            }
            (None, false) => {
                return Err(
                    "[queue.auth] needs key = \"<64 hex digits>\" (a shared key) or \
                            identity = true with trusted identities"
                        .into(),
                );
            }
            _ => {}
        }
        if usize::from(self.key_number) >= oae_proto::auth::KEY_NUMBERS {
            return Err(format!(
                "auth.key_number = {}: key numbers are 0 to {}",
                self.key_number,
                oae_proto::auth::KEY_NUMBERS - 1
            ));
        }
        if !self.identity {
            if !self.trusted.is_empty() || self.trusted_file.is_some() || self.rekey_after.is_some()
            {
                return Err(
                    "auth.trusted, trusted_file and rekey_after are for keys agreed \
                            by identity: set identity = true instead of key"
                        .into(),
                );
            }
            return Ok(());
        }
        if self.key_number != 0 {
            return Err("auth.key_number is for a shared key: an agreed key starts at 0".into());
        }
        if self.trusted.is_empty() && self.trusted_file.is_none() {
            return Err(
                "identity = true trusts no one: list the peers' identities in \
                        auth.trusted (oaed --show-identity prints a dataplane's) or name a \
                        trusted_file"
                    .into(),
            );
        }
        if self.rekey_after == Some(0) {
            return Err("auth.rekey_after = 0: give the frames per key, at least 1".into());
        }
        parse_identities(self.trusted.iter().map(String::as_str), "auth.trusted")?;
        Ok(())
    }

    /// The identities trusted: `trusted` and the lines of `trusted_file`.
    pub fn trust(&self) -> Result<Trust, String> {
        let mut all = parse_identities(self.trusted.iter().map(String::as_str), "auth.trusted")?;
        if let Some(path) = &self.trusted_file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read auth.trusted_file {}: {e}", path.display()))?;
            let lines = text
                .lines()
                .map(|l| l.split('#').next().unwrap_or("").trim())
                .filter(|l| !l.is_empty());
            all.extend(parse_identities(lines, &path.display().to_string())?);
        }
        Ok(Trust::of(all))
    }

    pub fn rekey_after(&self) -> u64 {
        self.rekey_after
            .unwrap_or(oae_proto::handshake::KeyAgreementConfig::DEFAULT_REKEY_AFTER)
    }
}

fn parse_identities<'a>(
    texts: impl Iterator<Item = &'a str>,
    whence: &str,
) -> Result<Vec<PublicIdentity>, String> {
    texts
        .map(|t| {
            PublicIdentity::from_hex(t).map_err(|e| {
                let shown: String = t.chars().take(70).collect();
                format!("{whence}: '{shown}': {e}")
            })
        })
        .collect()
}

/// A key from a configuration file. `Debug` never shows it; serializing
/// writes it (a configuration file written again, as `oaectl demo` does
/// for its dataplanes, mode 0600).
#[derive(Clone)]
pub struct SecretKey(LinkKey);

impl SecretKey {
    pub fn link_key(&self) -> LinkKey {
        self.0.clone()
    }
}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<secret>")
    }
}

impl Serialize for SecretKey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&oae_client::control::to_hex(&self.0.0))
    }
}

impl<'de> Deserialize<'de> for SecretKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<SecretKey, D::Error> {
        let text = String::deserialize(d)?;
        oae_client::control::parse_key(&text)
            .map(SecretKey)
            .map_err(|e| serde::de::Error::custom(format!("auth.key: {e}")))
    }
}

/// Overrides of the link's protocol settings; see `oae_proto::LinkConfig`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSettings {
    pub slots: Option<u16>,
    pub credits: Option<u16>,
    pub max_class: Option<u8>,
    pub unreachable_after_rounds: Option<u32>,
    /// The link delivers frames in order (true unless a path may reorder).
    pub ordered: Option<bool>,
    pub echo_patience_rounds: Option<u32>,
    pub rtt_multiplier: Option<u32>,
    pub min_round_ns: Option<u64>,
    pub initial_rtt_ns: Option<u64>,
    pub hello_interval_ns: Option<u64>,
    pub max_attempts: Option<u32>,
    pub submit_queue: Option<usize>,
}

impl LinkSettings {
    /// The key in `[queue.link]` of a `LinkConfig` field, for errors that
    /// name the setting to change.
    pub fn file_key(field: &str) -> &str {
        match field {
            "receive_credits" => "credits",
            "min_round" => "min_round_ns",
            "initial_rtt" => "initial_rtt_ns",
            "hello_interval" => "hello_interval_ns",
            other => other,
        }
    }

    pub fn to_link_config(&self) -> LinkConfig {
        let d = LinkConfig::default();
        LinkConfig {
            slots: self.slots.unwrap_or(d.slots),
            receive_credits: self.credits.unwrap_or(d.receive_credits),
            max_class: self.max_class.unwrap_or(d.max_class),
            unreachable_after_rounds: self
                .unreachable_after_rounds
                .unwrap_or(d.unreachable_after_rounds),
            ordered: self.ordered.unwrap_or(d.ordered),
            echo_patience_rounds: self.echo_patience_rounds.unwrap_or(d.echo_patience_rounds),
            rtt_multiplier: self.rtt_multiplier.unwrap_or(d.rtt_multiplier),
            min_round: self.min_round_ns.unwrap_or(d.min_round),
            initial_rtt: self.initial_rtt_ns.unwrap_or(d.initial_rtt),
            hello_interval: self.hello_interval_ns.unwrap_or(d.hello_interval),
            max_attempts: self.max_attempts.unwrap_or(d.max_attempts),
            submit_queue: self.submit_queue.unwrap_or(d.submit_queue),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RegionConfig {
    pub id: u16,
    pub key: u32,
    /// Bytes, a positive multiple of 8.
    pub len: u32,
    /// Any of `r`, `w`, `a` (atomics).
    pub perms: String,
}

impl RegionConfig {
    pub fn to_spec(&self) -> Result<RegionSpec, String> {
        let permissions = Permissions::parse(&self.perms).ok_or_else(|| {
            format!(
                "region {}: perms = \"{}\" is not a combination of r, w and a",
                self.id, self.perms
            )
        })?;
        if self.len == 0 || !self.len.is_multiple_of(8) {
            return Err(format!(
                "region {}: len = {} must be a positive multiple of 8",
                self.id, self.len
            ));
        }
        Ok(RegionSpec {
            id: self.id,
            key: self.key,
            len: self.len,
            permissions,
        })
    }
}

impl Config {
    /// Makes the queues `n` copies of the first, queue `k` on queue `k` of
    /// its interface (AF_XDP, steered by queue) or on memif interface `k`.
    pub fn replicate_first_queue(&mut self, n: u32) -> Result<(), String> {
        if !(1..=64).contains(&n) {
            return Err(format!("queues = {n}: give 1 to 64"));
        }
        let first = self
            .queues
            .first()
            .cloned()
            .ok_or("the dataplane has no queue to copy")?;
        let memif = match (first.driver, first.dpdk_port.as_deref()) {
            (DriverKind::AfXdp, _) => None,
            (DriverKind::Dpdk, Some(port)) if port.starts_with("net_memif") => Some(port),
            (DriverKind::Dpdk, port) => {
                return Err(format!(
                    "several queues are made for AF_XDP and DPDK net_memif queues, not for \
                     dpdk_port = {port:?}"
                ));
            }
        };
        let vdev = match memif {
            Some(port) => self
                .dpdk
                .as_ref()
                .and_then(|d| d.vdevs.iter().find(|v| v.split(',').next() == Some(port)))
                .cloned()
                .ok_or_else(|| format!("no [dpdk] vdev declares {port}"))?,
            None => String::new(),
        };
        self.queues = (0..n)
            .map(|k| {
                let mut q = first.clone();
                match memif {
                    None => {
                        q.queue_id = k;
                        if n > 1 {
                            q.steer_by = SteerBy::Queue;
                        }
                    }
                    Some(_) => q.dpdk_port = Some(format!("net_memif{k}")),
                }
                q
            })
            .collect();
        if let (Some(port), Some(dpdk)) = (memif, self.dpdk.as_mut()) {
            dpdk.vdevs.retain(|v| v.split(',').next() != Some(port));
            for k in 0..n {
                let rest = vdev.split_once(',').map_or("", |(_, rest)| rest);
                dpdk.vdevs.push(format!("net_memif{k},{rest},id={k}"));
            }
        }
        Ok(())
    }
}

/// Where dataplanes listen unless configured otherwise.
pub const CONTROL_DIR: &str = "/run/oae";

/// The control socket of dataplane `name` when its file names none.
pub fn default_control_socket(name: &str) -> PathBuf {
    Path::new(CONTROL_DIR).join(format!("{name}.sock"))
}

impl Config {
    /// Loads one dataplane: the whole file, or `[dataplane.<name>]` of a
    /// multi-dataplane file.
    pub fn load(path: &Path, name: Option<&str>) -> Result<Config, ConfigError> {
        Config::from_text(&read(path)?, path, name)
    }

    /// [`Config::load`] of `text`, the contents of file `path` (named in
    /// errors only): what `oaed --check` accepts.
    pub fn from_text(text: &str, path: &Path, name: Option<&str>) -> Result<Config, ConfigError> {
        let table: toml::Table = text.parse().map_err(|e| toml_error(path, e))?;
        if let Some(dataplanes) = table.get("dataplane").and_then(toml::Value::as_table) {
            // A deployment (the `deployment` module): this process reads its own
            // table; the network and the demo are oaectl's business.
            let names: Vec<String> = dataplanes.keys().cloned().collect();
            let name = name.ok_or_else(|| {
                in_file(
                    path,
                    format!(
                        "the file holds several dataplanes ({}): choose one with --name",
                        names.join(", ")
                    ),
                )
            })?;
            let section = dataplanes.get(name).ok_or_else(|| {
                in_file(
                    path,
                    format!(
                        "no [dataplane.{name}] here; there are: {}",
                        names.join(", ")
                    ),
                )
            })?;
            let mut cfg: Config = section
                .clone()
                .try_into()
                .map_err(|e: toml::de::Error| in_file(path, format!("[dataplane.{name}]: {e}")))?;
            if cfg.name.is_empty() {
                cfg.name = name.to_string();
            }
            cfg.validate().map_err(|e| in_file(path, e))?;
            Ok(cfg)
        } else {
            let mut cfg: Config = toml::from_str(text).map_err(|e| toml_error(path, e))?;
            if let Some(name) = name
                && cfg.name.is_empty()
            {
                cfg.name = name.to_string();
            }
            if cfg.name.is_empty() {
                return Err(in_file(path, "name: give the dataplane a name".into()));
            }
            cfg.validate().map_err(|e| in_file(path, e))?;
            Ok(cfg)
        }
    }

    /// One dataplane from TOML text (the single-dataplane form).
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let cfg: Config = toml::from_str(text)
            .map_err(|e| ConfigError::new(ConfigErrorKind::Syntax, e.to_string()))?;
        cfg.validate().map_err(ConfigError::invalid)?;
        Ok(cfg)
    }

    pub fn validate(&self) -> Result<(), String> {
        let ctx = |e: String| format!("dataplane '{}': {e}", self.name);
        if self.name.is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(ctx(format!(
                "name '{}' must be non-empty letters, digits, '-' or '_'",
                self.name
            )));
        }
        if let Some(id) = self.node_id
            && oae_proto::address::is_made(id)
        {
            return Err(ctx(format!(
                "node_id = {id:#x}: node ids from 2^63 are the ones dataplanes make \
                 themselves (docs/PROTOCOL.md, \"Addresses\"); give a smaller one, or none"
            )));
        }
        if self.queues.is_empty() {
            return Err(ctx("add at least one [[queue]]".into()));
        }
        if self.queues.len() > usize::from(u16::MAX) {
            return Err(ctx("too many queues".into()));
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        for (i, q) in self.queues.iter().enumerate() {
            let at = |e: String| {
                ctx(format!(
                    "queue {i} ({} queue {}): {e}",
                    q.label(),
                    q.queue_id
                ))
            };
            if (q.driver == DriverKind::AfXdp && q.iface.is_empty()) || q.iface.len() > 15 {
                return Err(at(format!(
                    "iface = '{}' must be an interface name of 1 to 15 bytes",
                    q.iface
                )));
            }
            self.check_peers(i, q).map_err(at)?;
            if let Some(core) = q.core
                && core >= cores
            {
                return Err(at(format!(
                    "core = {core}, but this machine has cores 0 to {}",
                    cores - 1
                )));
            }
            if !q.frames.is_power_of_two() || !(256..=1 << 20).contains(&q.frames) {
                return Err(at(format!(
                    "frames = {} must be a power of two from 256 to 1048576",
                    q.frames
                )));
            }
            let ring = q.ring_size();
            if !ring.is_power_of_two() || !(64..=q.frames).contains(&ring) {
                return Err(at(format!(
                    "ring_size = {ring} must be a power of two from 64 to frames ({})",
                    q.frames
                )));
            }
            q.poll.validate(q.driver).map_err(at)?;
            match q.driver {
                DriverKind::AfXdp if q.dpdk_port.is_some() => {
                    return Err(at(
                        "dpdk_port is set but driver is af-xdp: add driver = \"dpdk\" or \
                         remove dpdk_port"
                            .into(),
                    ));
                }
                DriverKind::AfXdp => {}
                DriverKind::Dpdk if !cfg!(feature = "dpdk") => {
                    return Err(at(NO_DPDK.into()));
                }
                DriverKind::Dpdk => {
                    if q.dpdk_port.as_deref().is_none_or(str::is_empty) {
                        return Err(at(
                            "driver = \"dpdk\" needs dpdk_port, the device to open (e.g. \
                             \"net_memif0\", declared in [dpdk] vdevs)"
                                .into(),
                        ));
                    }
                    if self.dpdk.is_none() {
                        return Err(at(
                            "driver = \"dpdk\" needs a [dpdk] table (vdevs, eal_args)".into(),
                        ));
                    }
                    if ring > 4096 || q.frames < 2 * ring + 128 {
                        return Err(at(format!(
                            "a DPDK queue's two rings of ring_size = {ring} need frames >= \
                             {} (and ring_size <= 4096)",
                            2 * ring + 128
                        )));
                    }
                }
            }
            let link = q.link.to_link_config();
            link.validate().map_err(|e| {
                let key = LinkSettings::file_key(e.field);
                at(format!("link.{key}: {}", e.problem))
            })?;
            if q.fabric {
                check_fabric_links(&link).map_err(at)?;
            }
            match q.transport {
                TransportKind::RcModel => {
                    q.rc.to_rc_config()
                        .validate()
                        .map_err(|e| at(format!("rc.{e}")))?
                }
                TransportKind::Oae if q.rc != RcSettings::default() => {
                    return Err(at(
                        "[queue.rc] is set but transport is oae: add transport = \"rc-model\" \
                         or remove it"
                            .into(),
                    ));
                }
                TransportKind::Oae => {}
            }
            if self.queues[..i]
                .iter()
                .any(|o| o.label() == q.label() && o.queue_id == q.queue_id)
            {
                return Err(at("the same interface queue appears twice".into()));
            }
        }
        if let Some(h) = &self.host {
            if usize::from(h.queue) >= self.queues.len() {
                return Err(ctx(format!(
                    "host.queue = {}, but there are queues 0 to {}",
                    h.queue,
                    self.queues.len() - 1
                )));
            }
            if h.ring.as_os_str().is_empty() || h.ring.is_dir() {
                return Err(ctx(format!(
                    "host.ring = \"{}\" must name a file (e.g. /dev/shm/oae-host-{})",
                    h.ring.display(),
                    self.name
                )));
            }
            h.to_host_ring().map_err(ctx)?;
        }
        self.check_regions().map_err(ctx)
    }

    /// What registering the regions at start needs: at most
    /// `MAX_REGIONS`, each well formed and defined once, all together
    /// within what this process may allocate.
    fn check_regions(&self) -> Result<(), String> {
        if self.regions.len() > MAX_REGIONS {
            return Err(format!(
                "{} regions: a dataplane holds at most {MAX_REGIONS}",
                self.regions.len()
            ));
        }
        let mut ids = std::collections::BTreeSet::new();
        let mut specs = Vec::new();
        for r in &self.regions {
            specs.push(r.to_spec()?);
            if !ids.insert(r.id) {
                return Err(format!("region {} is defined twice", r.id));
            }
        }
        regions_fit_memory(&specs)
    }

    /// A queue's peers: at least one, each a MAC, none twice on the queue,
    /// and none the same as on another queue of the interface unless frames
    /// are steered by queue (so the queues can be told apart).
    fn check_peers(&self, index: usize, q: &QueueConfig) -> Result<(), String> {
        let macs = q.peer_macs();
        if q.discovery.is_some() && !macs.is_empty() {
            return Err(
                "[queue.discovery] is for a queue that lists no peers: remove it, or \
                 remove the peers and let the queue find them"
                    .into(),
            );
        }
        if let Some(d) = q.discovery() {
            d.validate(q)?;
            if q.transport == TransportKind::RcModel {
                return Err(
                    "transport = \"rc-model\" runs one queue pair to a listed peer: \
                     give peer_mac (a queue that lists no peers finds them, with OAE)"
                        .into(),
                );
            }
        }
        let ifaces: Vec<&str> = q.ports().into_iter().map(|(i, _)| i).collect();
        for (j, other) in self.queues[..index].iter().enumerate() {
            let finds = macs.is_empty();
            let other_finds = other.peer_mac.is_none() && other.peers.is_empty();
            let shared = other.ports().into_iter().any(|(i, _)| ifaces.contains(&i));
            if shared
                && other.driver == q.driver
                && (finds || other_finds)
                && (q.steer_by == SteerBy::PeerMac || other.steer_by == SteerBy::PeerMac)
            {
                return Err(format!(
                    "queue {j} runs on an interface of this queue's too: a queue that finds \
                     its neighbours takes every OAE frame of its interfaces unless frames are \
                     steered by queue. Set steer_by = \"queue\" on both (a veth pair), or \
                     list the peers"
                ));
            }
        }
        if q.fabric && q.transport == TransportKind::RcModel {
            return Err(
                "fabric = true needs transport = \"oae\": the RC model has no fabric".into(),
            );
        }
        if let Some(a) = &q.auth {
            if q.transport == TransportKind::RcModel {
                return Err(
                    "[queue.auth] needs transport = \"oae\": the RC model's frames \
                            carry no tag"
                        .into(),
                );
            }
            a.validate()?;
        }
        if macs.len() > 1 && q.transport == TransportKind::RcModel {
            return Err(format!(
                "transport = \"rc-model\" runs one queue pair per queue, but {} peers are \
                 listed: give each its own queue",
                macs.len()
            ));
        }
        if macs.len() > 64 {
            return Err(format!("{} peers on one queue: at most 64", macs.len()));
        }
        for p in &q.peers {
            match p.iface.as_deref() {
                Some(_) if q.driver != DriverKind::AfXdp => {
                    return Err(format!(
                        "peer {}: iface is for AF_XDP queues; a DPDK queue reaches its peers \
                         through its own port",
                        p.mac
                    ));
                }
                Some(i) if i.is_empty() || i.len() > 15 => {
                    return Err(format!(
                        "peer {}: iface = '{i}' must be an interface name of 1 to 15 bytes",
                        p.mac
                    ));
                }
                _ => {}
            }
        }
        for (k, mac) in macs.iter().enumerate() {
            parse_mac(mac).ok_or_else(|| {
                format!("peer MAC '{mac}' is not a MAC address like 02:00:00:00:00:01")
            })?;
            if macs[..k].iter().any(|m| m.eq_ignore_ascii_case(mac)) {
                return Err(format!("peer {mac} is listed twice: one link per peer"));
            }
        }
        for (j, other) in self.queues[..index].iter().enumerate() {
            if other.label() != q.label() || other.driver != q.driver {
                continue;
            }
            let shared = macs
                .iter()
                .find(|m| other.peer_macs().iter().any(|o| o.eq_ignore_ascii_case(m)));
            if let Some(mac) = shared
                && (q.steer_by == SteerBy::PeerMac || other.steer_by == SteerBy::PeerMac)
            {
                return Err(format!(
                    "peer {mac} is also a peer of queue {j} on {}: steered by peer MAC, the two \
                     queues cannot be told apart. Give the peer one MAC per queue (macvlan or \
                     VFs, with an ntuple rule each), or on a veth pair set steer_by = \"queue\" \
                     on both",
                    q.label()
                ));
            }
        }
        Ok(())
    }

    pub fn control_socket(&self) -> PathBuf {
        self.control_socket
            .clone()
            .unwrap_or_else(|| default_control_socket(&self.name))
    }

    /// The identity file, with the state directory `state_dir` in force.
    pub fn identity_file(&self, state_dir: &Path) -> PathBuf {
        self.identity_file
            .clone()
            .unwrap_or_else(|| state_dir.join("identity.key"))
    }

    /// Whether any queue agrees its links' keys by identity.
    /// Whether the dataplane needs its identity: to agree keys, or to make
    /// its node id.
    pub fn needs_identity(&self) -> bool {
        self.agrees_keys() || self.node_id.is_none()
    }

    pub fn agrees_keys(&self) -> bool {
        self.queues
            .iter()
            .any(|q| q.auth.as_ref().is_some_and(|a| a.identity))
    }

    pub fn state_dir(&self) -> PathBuf {
        self.state_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("/var/lib/oae/{}", self.name)))
    }
}

pub(crate) fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|e| {
        ConfigError::new(
            ConfigErrorKind::Unreadable,
            format!("cannot read config {}: {e}", path.display()),
        )
    })
}

/// Refuses regions that together need more than this process may
/// allocate (their bytes and a lock word per 8-byte word), naming the
/// limit: at `--check` for the configured ones, and for `region add` with
/// those already registered.
pub fn regions_fit_memory(specs: &[RegionSpec]) -> Result<(), String> {
    let footprint: u64 = specs.iter().map(RegionSpec::footprint).sum();
    match oae_os::memory::limit() {
        Some(limit) if footprint > limit.bytes => Err(format!(
            "the regions need {footprint} bytes (their bytes and a lock word per 8-byte \
             word), above this process's memory limit of {} bytes ({}): make them smaller \
             or raise the limit",
            limit.bytes, limit.source
        )),
        _ => Ok(()),
    }
}

pub(crate) fn toml_error(path: &Path, e: toml::de::Error) -> ConfigError {
    ConfigError::new(ConfigErrorKind::Syntax, format!("{}: {e}", path.display()))
}

pub(crate) fn in_file(path: &Path, e: String) -> ConfigError {
    ConfigError::invalid(format!("{}: {e}", path.display()))
}

/// A fabric's paths are derived from its links' settings (`FabricConfig::
/// for_links`), so a path setting the fabric refuses is fixed in `[queue.link]`.
fn check_fabric_links(link: &LinkConfig) -> Result<(), String> {
    let fabric = oae_proto::FabricConfig::for_links(link);
    fabric.validate(link).map_err(|e| match e.field {
        "path.max_class" => format!(
            "fabric = true needs link.max_class >= 1 (it is {}): a relayed frame travels \
             inside a FORWARD of a class above its own",
            link.max_class
        ),
        "unreachable_after_rounds" => format!("link.unreachable_after_rounds: {}", e.problem),
        field => format!("fabric: {field}: {}", e.problem),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = r#"
        name = "a"
        node_id = 1
        [[queue]]
        iface = "eth0"
        peer_mac = "02:00:00:00:00:02"
        [queue.link]
        slots = 128
        credits = 128
        [[region]]
        id = 1
        key = 7
        len = 4096
        perms = "rwa"
    "#;

    fn parse_one(text: &str) -> Result<Config, String> {
        let cfg: Config = toml::from_str(text).map_err(|e| e.to_string())?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// A dataplane with two queues on eth0: `first` and `second` are the
    /// bodies of their tables after `iface`/`queue_id`.
    fn two_queues(first: &str, second: &str) -> Result<Config, String> {
        parse_one(&format!(
            "name = \"x\"\nnode_id = 1\n\
             [[queue]]\niface = \"eth0\"\nqueue_id = 0\n{first}\n\
             [[queue]]\niface = \"eth0\"\nqueue_id = 1\n{second}\n"
        ))
    }

    #[test]
    fn auth_keys_are_checked_and_never_shown() {
        let key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
        let with =
            |auth: &str| parse_one(&ONE.replace("[queue.link]", &format!("{auth}\n[queue.link]")));
        let cfg = with(&format!("[queue.auth]\nkey = \"{key}\"\nkey_number = 2")).unwrap();
        let auth = cfg.queues[0].auth.as_ref().unwrap();
        assert_eq!(auth.key_number, 2);
        assert!(
            !format!("{cfg:?}").contains("aabbcc"),
            "Debug hides the key"
        );
        // Written again (as `oaectl demo` does), the key survives.
        assert!(toml::to_string(&cfg).unwrap().contains(key));
        let short = with("[queue.auth]\nkey = \"0011\"").unwrap_err();
        assert!(short.contains("32 bytes (64 hex digits), not 2"), "{short}");
        let junk = with("[queue.auth]\nkey = \"zz\"").unwrap_err();
        assert!(junk.contains("64 hex digits"), "{junk}");
        let number = with(&format!("[queue.auth]\nkey = \"{key}\"\nkey_number = 4")).unwrap_err();
        assert!(number.contains("key numbers are 0 to 3"), "{number}");
        let rc = with(&format!(
            "transport = \"rc-model\"\n[queue.auth]\nkey = \"{key}\""
        ))
        .unwrap_err();
        assert!(rc.contains("needs transport = \"oae\""), "{rc}");
    }

    #[test]
    fn keys_agreed_by_identity_are_checked_with_the_fix() {
        let key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
        let with =
            |auth: &str| parse_one(&ONE.replace("[queue.link]", &format!("{auth}\n[queue.link]")));
        let cfg = with(&format!(
            "[queue.auth]\nidentity = true\ntrusted = [\"{key}\"]\nrekey_after = 100"
        ))
        .unwrap();
        let auth = cfg.queues[0].auth.as_ref().unwrap();
        assert_eq!(auth.trust().unwrap().len(), 1);
        assert_eq!(auth.rekey_after(), 100);
        assert!(cfg.agrees_keys());
        let both = with(&format!("[queue.auth]\nidentity = true\nkey = \"{key}\"")).unwrap_err();
        assert!(both.contains("remove one"), "{both}");
        let neither = with("[queue.auth]\nkey_number = 1").unwrap_err();
        assert!(neither.contains("identity = true"), "{neither}");
        let alone = with("[queue.auth]\nidentity = true").unwrap_err();
        assert!(alone.contains("oaed --show-identity"), "{alone}");
        let junk = with("[queue.auth]\nidentity = true\ntrusted = [\"caf\u{e9}\"]").unwrap_err();
        assert!(junk.contains("64 hex digits"), "{junk}");
        let shared = with(&format!(
            "[queue.auth]\nkey = \"{key}\"\ntrusted = [\"{key}\"]"
        ))
        .unwrap_err();
        assert!(shared.contains("set identity = true"), "{shared}");
        // A trusted file: one identity a line, comments and blank lines.
        let file = std::env::temp_dir().join(format!("oae-trusted-{}", std::process::id()));
        std::fs::write(&file, format!("# rack 7\n{key}  # a\n\n")).unwrap();
        let cfg = with(&format!(
            "[queue.auth]\nidentity = true\ntrusted_file = \"{}\"",
            file.display()
        ))
        .unwrap();
        assert_eq!(
            cfg.queues[0].auth.as_ref().unwrap().trust().unwrap().len(),
            1
        );
        std::fs::write(&file, "nope\n").unwrap();
        let bad = cfg.queues[0].auth.as_ref().unwrap().trust().unwrap_err();
        assert!(bad.contains("'nope'"), "{bad}");
        std::fs::remove_file(&file).unwrap();
    }

    #[test]
    fn many_links_and_queues_are_checked_with_what_to_fix() {
        let a = "peer_mac = \"02:00:00:00:00:0a\"";
        let b = "peer_mac = \"02:00:00:00:00:0b\"";
        let peers = "[[queue.peer]]\nmac = \"02:00:00:00:00:0a\"\n\
                     [[queue.peer]]\nmac = \"02:00:00:00:00:0c\"";
        // Distinct peers per queue, or several peers on one queue: fine.
        let cfg = two_queues(a, peers).unwrap_err();
        assert!(cfg.contains("cannot be told apart"), "{cfg}");
        let cfg = two_queues(a, b).unwrap();
        assert_eq!(cfg.queues[1].peer_macs(), ["02:00:00:00:00:0b"]);
        let cfg = two_queues(b, peers).unwrap();
        assert_eq!(cfg.queues[1].peer_macs().len(), 2);
        // The same peer on two queues of one interface: only when steered
        // by queue, on both.
        let refused = two_queues(a, a).unwrap_err();
        assert!(refused.contains("steer_by = \"queue\""), "{refused}");
        let veth = "steer_by = \"queue\"";
        let half = two_queues(&format!("{a}\n{veth}"), a).unwrap_err();
        assert!(half.contains("cannot be told apart"), "{half}");
        two_queues(&format!("{a}\n{veth}"), &format!("{a}\n{veth}")).unwrap();
        // A queue that lists no peer finds them, alone on its interface
        // or steered by queue; a peer twice, a bad MAC, many peers on an
        // RC queue.
        let none = two_queues("", b).unwrap_err();
        assert!(none.contains("finds its neighbours"), "{none}");
        let cfg = two_queues(
            veth,
            &format!(
                "{b}
{veth}"
            ),
        )
        .unwrap();
        assert!(cfg.queues[0].discovery().is_some() && cfg.queues[1].discovery().is_none());
        assert_eq!(cfg.queues[0].link_count(), 8);
        let twice = two_queues(
            &format!("{a}\n[[queue.peer]]\nmac = \"02:00:00:00:00:0A\""),
            b,
        )
        .unwrap_err();
        assert!(twice.contains("listed twice"), "{twice}");
        let bad = two_queues("[[queue.peer]]\nmac = \"nope\"", b).unwrap_err();
        assert!(bad.contains("not a MAC address"), "{bad}");
        let rc = two_queues(&format!("transport = \"rc-model\"\n{peers}"), b).unwrap_err();
        assert!(rc.contains("give each its own queue"), "{rc}");
    }

    #[test]
    fn discovery_settings_are_read_and_bad_ones_refused_with_the_fix() {
        let q = |body: &str| {
            Config::from_toml(&format!(
                "name = \"a\"\nnode_id = 1\n[[queue]]\niface = \"r0\"\n{body}"
            ))
        };
        let cfg = q("[queue.discovery]\nmore_ifaces = [\"r1\"]\nneighbours = 2\n").unwrap();
        let ports: Vec<_> = cfg.queues[0].ports().into_iter().map(|(i, _)| i).collect();
        assert_eq!(ports, ["r0", "r1"]);
        assert_eq!(cfg.queues[0].link_count(), 2);
        for (body, fix) in [
            ("[queue.discovery]\nneighbours = 0", "give 1 to 64"),
            (
                "[queue.discovery]\nmore_ifaces = [\"r0\"]",
                "names r0 twice",
            ),
            (
                "[queue.discovery]\nannounce_every_ms = 0",
                "give 1 to 60000",
            ),
            (
                "[queue.discovery]\nforget_after_ms = 10\nannounce_every_ms = 100",
                "let go before it is heard again",
            ),
            (
                "peer_mac = \"02:00:00:00:00:02\"\n[queue.discovery]\nneighbours = 2",
                "lists no peers",
            ),
            ("transport = \"rc-model\"", "give peer_mac"),
            (
                "[queue.discovery]\nmore_ifaces = [\"r1\"]\n[[queue]]\niface = \"r1\"\n\
                 peer_mac = \"02:00:00:00:00:02\"",
                "runs on an interface of this queue's too",
            ),
        ] {
            let refused = q(body).unwrap_err().to_string();
            assert!(refused.contains(fix), "{body}: {refused}");
        }
    }

    #[cfg(feature = "dpdk")]
    #[test]
    fn poll_settings_are_read_and_those_a_driver_cannot_honour_refused() {
        let with = |driver: &str, poll: &str| {
            parse_one(&format!(
                "{}\n[dpdk]\nvdevs = [\"net_ring0\"]\n",
                ONE.replace("iface = \"eth0\"", driver).replace(
                    "[queue.link]",
                    &format!("[queue.poll]\n{poll}\n[queue.link]")
                )
            ))
        };
        let afxdp = "iface = \"eth0\"";
        let dpdk = "driver = \"dpdk\"\ndpdk_port = \"net_ring0\"";
        let cfg = with(
            afxdp,
            "idle = \"sleep\"\nkicks = \"adaptive\"\nbusy_poll = true",
        )
        .unwrap();
        let p = cfg.queues[0].poll;
        assert_eq!(
            (p.idle, p.kicks, p.busy_poll),
            (IdlePolicy::Sleep, KickPolicy::Adaptive, true)
        );
        assert_eq!(p.spin_us(), PollSettings::DEFAULT_SPIN_US);
        with(dpdk, "idle = \"yield\"").unwrap();
        let sleep = with(dpdk, "idle = \"sleep\"").unwrap_err();
        assert!(sleep.contains("use \"spin\" or \"yield\""), "{sleep}");
        let busy = with(dpdk, "busy_poll = true").unwrap_err();
        assert!(busy.contains("remove it for a DPDK queue"), "{busy}");
        let long = with(afxdp, "spin_us = 5000000").unwrap_err();
        assert!(long.contains("use at most 1000000"), "{long}");
        let typo = with(afxdp, "idle = \"nap\"").unwrap_err();
        assert!(typo.contains("spin") && typo.contains("sleep"), "{typo}");
    }

    #[test]
    fn a_good_config_loads_with_its_overrides() {
        let cfg = parse_one(ONE).unwrap();
        assert_eq!(cfg.queues[0].link.to_link_config().slots, 128);
        assert_eq!(cfg.queues[0].frames, 4096);
        assert_eq!(cfg.control_socket(), PathBuf::from("/run/oae/a.sock"));
    }

    #[cfg(feature = "dpdk")]
    #[test]
    fn dpdk_queues_default_their_rings_and_eal_arguments() {
        let text = format!(
            "{}\n[dpdk]\nvdevs = [\"net_ring0\"]\n",
            ONE.replace(
                "iface = \"eth0\"",
                "driver = \"dpdk\"\ndpdk_port = \"net_ring0\"",
            )
        );
        let cfg = parse_one(&text).unwrap();
        let q = &cfg.queues[0];
        assert_eq!((q.ring_size(), q.label()), (1024, "net_ring0"));
        let args = cfg.dpdk.unwrap().eal_args("a");
        assert!(args.contains(&"--vdev=net_ring0".to_string()), "{args:?}");
        assert!(
            args.iter().any(|a| a.starts_with("--file-prefix=oae-a-")),
            "{args:?}"
        );
        assert!(
            args.contains(&"--in-memory".to_string()) ^ args.contains(&"--no-huge".to_string()),
            "{args:?}"
        );
    }

    #[test]
    fn refusals_carry_a_kind_by_stable_name() {
        let path = Path::new("/nonexistent/oae.toml");
        let kind = |r: Result<Config, ConfigError>| r.map(drop).unwrap_err().kind;
        assert_eq!(kind(Config::load(path, None)), ConfigErrorKind::Unreadable);
        let unknown = ONE.replace("slots = 128", "slotz = 128");
        assert_eq!(
            kind(Config::from_text(&unknown, path, None)),
            ConfigErrorKind::Syntax
        );
        assert_eq!(kind(Config::from_toml("name = [")), ConfigErrorKind::Syntax);
        let invalid = ONE.replace("slots = 128", "slots = 0");
        assert_eq!(
            kind(Config::from_text(&invalid, path, None)),
            ConfigErrorKind::Invalid
        );
        assert_eq!(kind(Config::from_toml(&invalid)), ConfigErrorKind::Invalid);
        let names: Vec<&str> = [
            ConfigErrorKind::Unreadable,
            ConfigErrorKind::Syntax,
            ConfigErrorKind::Invalid,
            ConfigErrorKind::Unwritable,
        ]
        .iter()
        .map(|k| k.name())
        .collect();
        assert_eq!(names, ["unreadable", "syntax", "invalid", "unwritable"]);
    }

    #[test]
    fn mistakes_are_refused_with_what_to_fix() {
        // A build without DPDK refuses every DPDK queue for that reason.
        let dpdk = |expected| {
            if cfg!(feature = "dpdk") {
                expected
            } else {
                "built without DPDK"
            }
        };
        let host = |table: &str| format!("{ONE}\n[host]\n{table}\n");
        let cases = [
            (
                ONE.replace("slots = 128", "slotz = 128"),
                "unknown field `slotz`",
            ),
            (
                host("ring = \"/dev/shm/x\"\nqueue = 3"),
                "host.queue = 3, but there are queues 0 to 0",
            ),
            (
                host("ring = \"/dev/shm/x\"\ncapacity = 0"),
                "host.capacity = 0 must be from 8 (the records of the largest verb) to 65536",
            ),
            (
                host("ring = \"/dev/shm/x\"\npcie_cost = \"reed=750\""),
                "host.pcie_cost",
            ),
            (
                host("ring = \"/dev/shm/x\"\nprocesses = 2"),
                "a FITO host ring serves one host process; set mode = \"bilateral\"",
            ),
            (
                host("ring = \"/dev/shm/x\"\nmode = \"bilateral\"\nbatch = 4"),
                "host.batch = 4 must be from 8",
            ),
            (
                host("ring = \"/dev/shm/x\"\nmode = \"bilateral\"\nprocesses = 0"),
                "host.processes = 0 must be from 1 to 64",
            ),
            (
                host("ring = \"/dev/shm/x\"\nmode = \"swap\""),
                "unknown variant `swap`, expected `fito` or `bilateral`",
            ),
            (host("ring = \"/tmp\""), "must name a file"),
            (
                ONE.replace("02:00:00:00:00:02", "02:00:00"),
                "is not a MAC address",
            ),
            (
                ONE.replace("credits = 128", "credits = 999"),
                "link.credits",
            ),
            (
                ONE.replace("slots = 128", "slots = 128\nmax_class = 0")
                    .replace(
                        "peer_mac = \"02:00:00:00:00:02\"",
                        "peer_mac = \"02:00:00:00:00:02\"\nfabric = true",
                    ),
                "fabric = true needs link.max_class >= 1 (it is 0)",
            ),
            (
                ONE.replace("\"rwa\"", "\"rwx\""),
                "not a combination of r, w and a",
            ),
            (
                ONE.replace("len = 4096", "len = 4097"),
                "positive multiple of 8",
            ),
            (
                ONE.replace("iface = \"eth0\"", "iface = \"eth0\"\ncore = 4096"),
                "this machine has cores",
            ),
            (
                ONE.replace("iface = \"eth0\"", "iface = \"eth0\"\nframes = 1000"),
                "power of two",
            ),
            (
                ONE.replace("node_id = 1", "node_id = 0x8000000000000001"),
                "give a smaller one, or none",
            ),
            (
                ONE.replace("iface = \"eth0\"", "iface = \"eth0\"\ndriver = \"dpdk\""),
                dpdk("needs dpdk_port"),
            ),
            (
                ONE.replace(
                    "iface = \"eth0\"",
                    "iface = \"eth0\"\ndriver = \"dpdk\"\ndpdk_port = \"net_ring0\"",
                ),
                dpdk("needs a [dpdk] table"),
            ),
            (
                ONE.replace(
                    "iface = \"eth0\"",
                    "iface = \"eth0\"\ndpdk_port = \"net_ring0\"",
                ),
                "driver is af-xdp",
            ),
            (
                format!(
                    "{}\n[dpdk]\nvdevs = [\"net_ring0\"]\n",
                    ONE.replace(
                        "iface = \"eth0\"",
                        "driver = \"dpdk\"\ndpdk_port = \"net_ring0\"\nring_size = 4096",
                    )
                ),
                dpdk("need frames >= 8320"),
            ),
        ];
        for (text, expected) in cases {
            let err = parse_one(&text).expect_err(expected);
            assert!(err.contains(expected), "'{err}' should say '{expected}'");
        }
    }
}
