//! A deployment: several dataplanes in one file (`[dataplane.<name>]`),
//! the network `oaectl demo` builds for them (`[topology]`) and the demo's
//! workload (`[demo]`), and the overrides the demo and the benchmarks apply
//! to every queue. `oaed` reads only its own table (`Config::load`).

use std::collections::BTreeMap;
use std::path::Path;

use oae_common::mac::parse_mac;
use serde::{Deserialize, Serialize};

use crate::{
    Config, ConfigError, ConfigErrorKind, IdlePolicy, KickPolicy, TransportKind, in_file, read,
    toml_error,
};

/// How a multi-dataplane file's network is built.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// `veth-pair`: two namespaces joined by a veth pair, made by `oaectl demo`.
    pub kind: TopologyKind,
    /// MAC given to each end of the pair, in `[dataplane]` key order.
    #[serde(default)]
    pub macs: Vec<String>,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum TopologyKind {
    VethPair,
}

/// The default workload of `oaectl demo`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DemoSettings {
    #[serde(default = "default_demo_seconds")]
    pub seconds: f64,
    /// Independent verb streams (each owns its words, one verb in flight).
    #[serde(default = "default_lanes")]
    pub lanes: u32,
    /// Loss injected in the middle third of the run, parts per million.
    #[serde(default = "default_loss_ppm")]
    pub loss_ppm: u32,
    /// Frames with one bit flipped in the middle third, parts per million.
    #[serde(default)]
    pub corrupt_ppm: u32,
    /// Link flaps spread over the middle third: the link goes down for
    /// `flap_ms`, then comes back.
    #[serde(default)]
    pub flaps: u32,
    #[serde(default = "default_flap_ms")]
    pub flap_ms: u32,
    /// The verbs to mix (read, write, cas, faa, swap, mcas, bswap); empty
    /// means CAS, FAA, WRITE, MCAS and BSWAP, less what the transport lacks.
    #[serde(default)]
    pub verbs: Vec<String>,
    #[serde(default)]
    pub seed: u64,
}

/// When each of `flaps` link flaps of `flap_ms` goes down and comes back,
/// in seconds from the start of a window of `window` seconds: spread evenly
/// over it, each a quarter into its share. The demo and the suite's TCP
/// baseline place their flaps alike.
pub fn flap_times(flaps: u32, flap_ms: u32, window: f64) -> impl Iterator<Item = (f64, f64)> {
    let share = window / f64::from(flaps.max(1));
    (0..flaps).map(move |k| {
        let down = share * (f64::from(k) + 0.25);
        (down, down + f64::from(flap_ms) / 1e3)
    })
}

fn default_flap_ms() -> u32 {
    50
}

fn default_demo_seconds() -> f64 {
    9.0
}

fn default_lanes() -> u32 {
    32
}

fn default_loss_ppm() -> u32 {
    10_000
}

impl DemoSettings {
    /// Lanes a demo may run: each owns 64 bytes of a 64 KiB region.
    pub const MAX_LANES: u32 = 1024;

    /// Whether anything is injected in the middle third.
    pub fn impaired(&self) -> bool {
        self.loss_ppm > 0 || self.corrupt_ppm > 0 || self.flaps > 0
    }

    /// What is injected in the middle third, in words.
    pub fn impairment(&self) -> String {
        let pct = |ppm: u32| f64::from(ppm) / 1e4;
        let mut parts = Vec::new();
        if self.loss_ppm > 0 {
            parts.push(format!("{} % loss", pct(self.loss_ppm)));
        }
        if self.corrupt_ppm > 0 {
            parts.push(format!("{} % corruption", pct(self.corrupt_ppm)));
        }
        if self.flaps > 0 {
            parts.push(format!("{} link flaps of {} ms", self.flaps, self.flap_ms));
        }
        if parts.is_empty() {
            "no faults".into()
        } else {
            parts.join(", ")
        }
    }

    /// Checks the settings; a refusal is `(setting, what is wrong)`, for the
    /// caller to name the setting as its user wrote it.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if !(self.seconds > 0.0 && self.seconds <= 3600.0) {
            return Err((
                "seconds",
                format!("= {} must be in (0, 3600]", self.seconds),
            ));
        }
        if !(1..=Self::MAX_LANES).contains(&self.lanes) {
            return Err((
                "lanes",
                format!("= {} must be from 1 to {}", self.lanes, Self::MAX_LANES),
            ));
        }
        for (field, ppm) in [
            ("loss_ppm", self.loss_ppm),
            ("corrupt_ppm", self.corrupt_ppm),
        ] {
            if ppm > 1_000_000 {
                return Err((field, format!("= {ppm} is more than 1000000 (every frame)")));
            }
        }
        if self.flaps > 100 {
            return Err(("flaps", format!("= {} is more than 100", self.flaps)));
        }
        if self.flaps > 0 {
            // Each flap and the gap after it must fit in the middle third.
            let room_ms = self.seconds * 1e3 / 3.0 / f64::from(self.flaps);
            if !(1..=10_000).contains(&self.flap_ms) || f64::from(self.flap_ms) * 2.0 > room_ms {
                return Err((
                    "flap_ms",
                    format!(
                        "= {} must be 1 to 10000 and at most half of the middle third's \
                         share per flap ({room_ms:.0} ms): fewer flaps or more seconds",
                        self.flap_ms
                    ),
                ));
            }
        }
        if let Some(v) = self
            .verbs
            .iter()
            .find(|v| v.parse::<oae_proto::Opcode>().is_err())
        {
            return Err((
                "verbs",
                format!("has '{v}': use {}", oae_proto::Opcode::NAMES.join(", ")),
            ));
        }
        Ok(())
    }
}

impl Default for DemoSettings {
    fn default() -> Self {
        DemoSettings {
            seconds: default_demo_seconds(),
            lanes: default_lanes(),
            loss_ppm: default_loss_ppm(),
            corrupt_ppm: 0,
            flaps: 0,
            flap_ms: default_flap_ms(),
            verbs: Vec::new(),
            seed: 0,
        }
    }
}

/// A file with several dataplanes.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Deployment {
    pub topology: Topology,
    pub dataplane: BTreeMap<String, Config>,
    #[serde(default)]
    pub demo: DemoSettings,
}

impl Deployment {
    pub fn load(path: &Path) -> Result<Deployment, ConfigError> {
        let text = read(path)?;
        Self::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<Deployment, ConfigError> {
        let mut d: Deployment = toml::from_str(text).map_err(|e| toml_error(path, e))?;
        for (name, cfg) in &mut d.dataplane {
            if cfg.name.is_empty() {
                cfg.name.clone_from(name);
            }
            cfg.validate().map_err(|e| in_file(path, e))?;
        }
        match d.topology.kind {
            TopologyKind::VethPair => {
                if d.dataplane.len() != 2 {
                    return Err(in_file(
                        path,
                        format!(
                            "topology veth-pair needs exactly two [dataplane.<name>] tables, found {}",
                            d.dataplane.len()
                        ),
                    ));
                }
                if d.topology.macs.len() != 2 {
                    return Err(in_file(
                        path,
                        "topology.macs: give the two MAC addresses of the veth ends".into(),
                    ));
                }
                for mac in &d.topology.macs {
                    parse_mac(mac).ok_or_else(|| {
                        in_file(path, format!("topology.macs: '{mac}' is not a MAC address"))
                    })?;
                }
            }
        }
        d.demo
            .validate()
            .map_err(|(field, problem)| in_file(path, format!("demo.{field} {problem}")))?;
        Ok(d)
    }
}

/// The shortest liveness round of links whose polling threads share CPUs
/// with each other or the rest of the machine: a peer descheduled for a
/// time slice (milliseconds) must not look dead. The default 20 µs round
/// assumes polling cores of their own.
pub const SHARED_CPU_MIN_ROUND_NS: u64 = 2_000_000;

/// Silent rounds before a peer is declared unreachable on shared CPUs: 20,
/// so 40 ms at the shortest round (the link's default is 8).
pub const SHARED_CPU_UNREACHABLE_ROUNDS: u32 = 20;

/// Settings applied to every queue of every dataplane of a deployment, for
/// comparing transports, link widths, pinnings and queue counts on one setup
/// without editing its file.
#[derive(Debug, Clone, Default)]
pub struct QueueOverrides {
    /// `"oae"` or `"rc-model"`.
    pub transport: Option<String>,
    /// Slots, and as many receive credits.
    pub slots: Option<u16>,
    /// The polling core of each dataplane, in `[dataplane.*]` order.
    pub cores: Option<Vec<usize>>,
    pub min_round_ns: Option<u64>,
    /// Queues per dataplane, each a copy of its first with its own queue
    /// (AF_XDP: queue `k` of the interface, steered by queue; DPDK
    /// net_memif: port `net_memif<k>`, interface id `k` on the same socket).
    pub queues: Option<u32>,
    /// Every queue's `[queue.poll]` idle policy, kicks and busy polling.
    pub idle: Option<IdlePolicy>,
    pub kicks: Option<KickPolicy>,
    pub busy_poll: Option<bool>,
}

impl Deployment {
    /// Applies `o` to every queue of every dataplane, then checks the
    /// result as a file would be checked.
    pub fn apply(&mut self, o: &QueueOverrides) -> Result<(), ConfigError> {
        if let Some(cores) = &o.cores
            && cores.len() != self.dataplane.len()
        {
            return Err(ConfigError::invalid(format!(
                "give one core per dataplane: the deployment has {}, the override names {}",
                self.dataplane.len(),
                cores.len()
            )));
        }
        let transport = match o.transport.as_deref() {
            None => None,
            Some("oae") => Some(TransportKind::Oae),
            Some("rc-model") => Some(TransportKind::RcModel),
            Some(other) => {
                return Err(ConfigError::invalid(format!(
                    "transport '{other}': use oae or rc-model"
                )));
            }
        };
        for (i, cfg) in self.dataplane.values_mut().enumerate() {
            if let Some(n) = o.queues {
                cfg.replicate_first_queue(n).map_err(ConfigError::invalid)?;
            }
            for q in &mut cfg.queues {
                if let Some(t) = transport {
                    q.transport = t;
                }
                if let Some(cores) = &o.cores {
                    q.core = Some(cores[i]);
                }
                if let Some(slots) = o.slots {
                    q.link.slots = Some(slots);
                    q.link.credits = Some(slots);
                }
                if let Some(ns) = o.min_round_ns {
                    q.link.min_round_ns = Some(ns);
                }
                if let Some(idle) = o.idle {
                    q.poll.idle = idle;
                }
                if let Some(kicks) = o.kicks {
                    q.poll.kicks = kicks;
                }
                if let Some(on) = o.busy_poll {
                    q.poll.busy_poll = on;
                }
            }
            cfg.validate().map_err(ConfigError::invalid)?;
        }
        Ok(())
    }

    /// Polling threads of every dataplane together: one per queue.
    pub fn polling_threads(&self) -> usize {
        self.dataplane.values().map(|d| d.queues.len()).sum()
    }

    /// Fits the links to a machine of `cpus` CPUs: when the polling threads
    /// are as many as the CPUs or more, they share them with each other or
    /// with everything else, so every link gets at least
    /// [`SHARED_CPU_MIN_ROUND_NS`] and [`SHARED_CPU_UNREACHABLE_ROUNDS`],
    /// and every queue that spins sleeps when idle instead. Returns what it
    /// changed, in words, or `None` when the threads have CPUs to spare.
    pub fn fit_to_cpus(&mut self, cpus: usize) -> Option<String> {
        let threads = self.polling_threads();
        if threads < cpus {
            return None;
        }
        let mut changed = Vec::new();
        for q in self.dataplane.values_mut().flat_map(|d| &mut d.queues) {
            if q.link
                .min_round_ns
                .is_none_or(|ns| ns < SHARED_CPU_MIN_ROUND_NS)
            {
                q.link.min_round_ns = Some(SHARED_CPU_MIN_ROUND_NS);
                q.link.unreachable_after_rounds = Some(
                    q.link
                        .unreachable_after_rounds
                        .unwrap_or(0)
                        .max(SHARED_CPU_UNREACHABLE_ROUNDS),
                );
                changed.push("round");
            }
            if q.poll.idle == IdlePolicy::Spin {
                q.poll.idle = IdlePolicy::Sleep;
                changed.push("idle");
            }
        }
        if changed.is_empty() {
            return None;
        }
        Some(format!(
            "{threads} polling threads on {cpus} CPUs share them: links take a round of at \
             least {} ms and {SHARED_CPU_UNREACHABLE_ROUNDS} silent rounds before a peer is \
             declared unreachable, and idle cores sleep, so a descheduled peer does not look \
             dead (give each polling core a CPU of its own to keep the file's settings)",
            SHARED_CPU_MIN_ROUND_NS / 1_000_000
        ))
    }

    /// The deployment as a file `oaed --config` reads.
    pub fn to_toml(&self) -> Result<String, ConfigError> {
        toml::to_string(self).map_err(|e| {
            ConfigError::new(
                ConfigErrorKind::Unwritable,
                format!("cannot write the deployment: {e}"),
            )
        })
    }
}

/// The region a fabric node's peers aim their verbs at, and its key.
pub const FABRIC_TARGET: (u16, u32) = (1, 0x0ae1);
/// The local region bilateral swaps trade with.
pub const FABRIC_LOCAL: u16 = 2;

/// How the polling cores of a fabric of `nodes` dataplanes on this machine
/// idle: they sleep on their sockets when the nodes outnumber the CPUs. A
/// spinning core then holds a CPU its neighbours need, and every frame
/// waits for a time slice (about 8 ms a hop on two vCPUs, neighbours and
/// relays alike), while a sleeping one wakes when its frame arrives.
pub fn fabric_idle(nodes: usize) -> IdlePolicy {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if nodes > cpus {
        IdlePolicy::Sleep
    } else {
        IdlePolicy::Spin
    }
}

/// How a fabric node's configuration names its neighbours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Naming {
    /// Node id `i + 1` and a `[[queue.peer]]` per neighbour, by MAC.
    Listed,
    /// Interfaces only: the node finds its neighbours and makes its node
    /// id (docs/PROTOCOL.md, "Discovery", "Addresses").
    InterfacesOnly,
}

/// The configuration of node `i` of a fabric of veth pairs
/// (`oae_pmd::netns::Graph`: interface `f<j>` towards neighbour `j`): one
/// polling core whose links run over a port per neighbour, the fabric on,
/// the regions [`FABRIC_TARGET`] and [`FABRIC_LOCAL`], its neighbours
/// named as `naming` says. `min_round_ns` as the links need it (raise it
/// where polling cores share CPUs: a descheduled neighbour must not look
/// dead).
pub fn fabric_node_toml(
    i: usize,
    neighbours: &[usize],
    min_round_ns: u64,
    idle: IdlePolicy,
    naming: Naming,
) -> String {
    let idle = match idle {
        IdlePolicy::Spin => "spin",
        IdlePolicy::Yield => "yield",
        IdlePolicy::Sleep => "sleep",
    };
    let first = neighbours.first().copied().unwrap_or_default();
    let (node, peers) = match naming {
        Naming::Listed => {
            let peers: String = neighbours
                .iter()
                .map(|&j| {
                    let mac = oae_common::mac::format_mac(oae_common::topology::link_mac(j, i));
                    format!("[[queue.peer]]\nmac = \"{mac}\"\niface = \"f{j}\"\n")
                })
                .collect();
            (format!("node_id = {}", i + 1), peers)
        }
        Naming::InterfacesOnly => {
            let more: Vec<String> = neighbours[1..]
                .iter()
                .map(|j| format!("\"f{j}\""))
                .collect();
            let discovery = format!("[queue.discovery]\nmore_ifaces = [{}]\n", more.join(", "));
            (String::new(), discovery)
        }
    };
    let (target, key) = FABRIC_TARGET;
    format!(
        r#"name = "n{i}"
{node}

[[queue]]
iface = "f{first}"
queue_id = 0
fabric = true
[queue.link]
slots = 32
credits = 32
min_round_ns = {min_round_ns}
[queue.poll]
idle = "{idle}"
{peers}
[[region]]
id = {target}
key = {key}
len = 65536
perms = "rwa"

[[region]]
id = {FABRIC_LOCAL}
key = 2
len = 65536
perms = "rw"
"#,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SteerBy;

    const PAIR: &str = include_str!("../../configs/veth-pair.toml");

    #[test]
    fn polling_threads_as_many_as_the_cpus_get_shared_cpu_links() {
        let mut d = Deployment::parse(PAIR, Path::new("veth-pair.toml")).unwrap();
        assert_eq!(d.polling_threads(), 2);
        assert_eq!(d.fit_to_cpus(3), None, "a CPU to spare: as the file says");
        let said = d
            .fit_to_cpus(2)
            .expect("two threads on two CPUs share them");
        assert!(said.contains("2 polling threads on 2 CPUs"), "{said}");
        for q in d.dataplane.values().flat_map(|d| &d.queues) {
            assert_eq!(q.link.min_round_ns, Some(SHARED_CPU_MIN_ROUND_NS));
            assert_eq!(
                q.link.unreachable_after_rounds,
                Some(SHARED_CPU_UNREACHABLE_ROUNDS)
            );
            assert_eq!(q.poll.idle, IdlePolicy::Sleep);
        }
        // Already fitted: nothing more to say.
        assert_eq!(d.fit_to_cpus(2), None);
    }

    #[test]
    fn a_fabric_node_has_a_port_per_neighbour_and_validates() {
        let text = fabric_node_toml(1, &[0, 2], 2_000_000, IdlePolicy::Sleep, Naming::Listed);
        let cfg: Config = toml::from_str(&text).unwrap();
        assert_eq!(cfg.queues[0].poll.idle, IdlePolicy::Sleep);
        cfg.validate().unwrap();
        let q = &cfg.queues[0];
        assert!(q.fabric);
        let ports: Vec<_> = q.ports().into_iter().map(|(i, l)| (i, l.len())).collect();
        assert_eq!(ports, [("f0", 1), ("f2", 1)]);
        // Interfaces only: the same ports, no link listed, no node id.
        let text = fabric_node_toml(
            1,
            &[0, 2],
            2_000_000,
            IdlePolicy::Sleep,
            Naming::InterfacesOnly,
        );
        let cfg: Config = toml::from_str(&text).unwrap();
        cfg.validate().unwrap();
        let q = &cfg.queues[0];
        let ports: Vec<_> = q.ports().into_iter().map(|(i, l)| (i, l.len())).collect();
        assert_eq!(ports, [("f0", 0), ("f2", 0)]);
        assert!(cfg.node_id.is_none() && q.discovery().is_some());
    }

    #[test]
    fn overrides_reach_every_queue_and_are_checked() {
        let text = include_str!("../../configs/veth-pair.toml");
        let parse = || Deployment::parse(text, Path::new("x")).unwrap();
        let o = QueueOverrides {
            transport: Some("rc-model".into()),
            slots: Some(256),
            cores: Some(vec![1, 1]),
            min_round_ns: Some(2_000_000),
            queues: None,
            idle: Some(IdlePolicy::Sleep),
            kicks: Some(KickPolicy::Immediate),
            busy_poll: Some(true),
        };
        let mut d = parse();
        d.apply(&o).unwrap();
        // What oaed reads back is what was applied.
        let d = Deployment::parse(&d.to_toml().unwrap(), Path::new("x")).unwrap();
        for cfg in d.dataplane.values() {
            let q = &cfg.queues[0];
            assert_eq!(q.transport, TransportKind::RcModel);
            assert_eq!(q.core, Some(1));
            assert_eq!((q.link.slots, q.link.credits), (Some(256), Some(256)));
            assert_eq!(q.link.min_round_ns, Some(2_000_000));
            assert_eq!(q.poll.idle, IdlePolicy::Sleep);
            assert_eq!(q.poll.kicks, KickPolicy::Immediate);
            assert!(q.poll.busy_poll);
        }
        let one_core = QueueOverrides {
            cores: Some(vec![0]),
            ..QueueOverrides::default()
        };
        let e = parse().apply(&one_core).unwrap_err();
        assert!(e.to_string().contains("one core per dataplane"), "{e}");
        let bad = QueueOverrides {
            transport: Some("tcp".into()),
            ..QueueOverrides::default()
        };
        let e = parse().apply(&bad).unwrap_err();
        assert!(e.to_string().contains("tcp"), "{e}");
    }

    #[test]
    fn queues_are_copies_of_the_first_that_can_be_told_apart() {
        let two = QueueOverrides {
            queues: Some(2),
            ..QueueOverrides::default()
        };
        let text = include_str!("../../configs/veth-pair.toml");
        let mut d = Deployment::parse(text, Path::new("x")).unwrap();
        d.apply(&two).unwrap();
        for cfg in d.dataplane.values() {
            let ids: Vec<u32> = cfg.queues.iter().map(|q| q.queue_id).collect();
            assert_eq!(ids, [0, 1]);
            assert!(cfg.queues.iter().all(|q| q.steer_by == SteerBy::Queue));
        }
        let e = Deployment::parse(text, Path::new("x"))
            .unwrap()
            .apply(&QueueOverrides {
                queues: Some(0),
                ..QueueOverrides::default()
            })
            .unwrap_err();
        assert!(e.to_string().contains("1 to 64"), "{e}");
    }

    #[cfg(feature = "dpdk")]
    #[test]
    fn memif_queues_are_copies_of_the_first_on_interfaces_of_their_own() {
        let two = QueueOverrides {
            queues: Some(2),
            ..QueueOverrides::default()
        };
        let memif = include_str!("../../configs/dpdk-memif.toml");
        let mut d = Deployment::parse(memif, Path::new("x")).unwrap();
        d.apply(&two).unwrap();
        let a = d.dataplane.values().next().unwrap();
        let ports: Vec<_> = a
            .queues
            .iter()
            .map(|q| q.dpdk_port.clone().unwrap())
            .collect();
        assert_eq!(ports, ["net_memif0", "net_memif1"]);
        let vdevs = &a.dpdk.as_ref().unwrap().vdevs;
        assert!(
            vdevs[1].starts_with("net_memif1,") && vdevs[1].ends_with(",id=1"),
            "{vdevs:?}"
        );
    }

    #[test]
    fn demo_faults_must_fit_the_middle_third() {
        let mut d = DemoSettings {
            seconds: 1.5,
            flaps: 3,
            ..DemoSettings::default()
        };
        assert!(d.validate().is_ok(), "3 flaps of 50 ms fit in 0.5 s");
        d.flaps = 10;
        assert_eq!(d.validate().unwrap_err().0, "flap_ms");
        d.flaps = 0;
        d.corrupt_ppm = 2_000_000;
        assert_eq!(d.validate().unwrap_err().0, "corrupt_ppm");
        d.corrupt_ppm = 0;
        d.verbs = vec!["frob".into()];
        assert_eq!(d.validate().unwrap_err().0, "verbs");
        assert_eq!(
            DemoSettings {
                loss_ppm: 10_000,
                flaps: 2,
                ..DemoSettings::default()
            }
            .impairment(),
            "1 % loss, 2 link flaps of 50 ms"
        );
    }
}
