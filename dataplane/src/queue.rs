//! Building a queue: its driver (AF_XDP behind the XDP program, or a DPDK
//! port), its transport with a link per peer over the dataplane's shared
//! memory, and the pipeline around them, type-erased at the thread boundary
//! so the loop is monomorphised per driver and transport.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use oae_common::mac::{format_mac, parse_mac};
use oae_pmd::Driver;
use oae_pmd::afxdp::{AfXdp, AfXdpConfig, BindMode, BusyPoll};
#[cfg(feature = "dpdk")]
use oae_pmd::dpdk::{Dpdk, DpdkConfig, init_eal};
use oae_pmd::xdp::{Steering, XdpMode};
use oae_proto::LinkId;
use oae_proto::auth::LinkIdentity;
use oae_proto::handshake::KeyAgreementConfig;
use oae_proto::identity::IdentitySecret;
use oae_proto::{
    FabricConfig, HELLO_BACKOFF_LIMIT, LinkConfig, NoObserver, Node, RegisterError, SharedMemory,
    Store,
};
use oae_rc_model::RcEndpoint;
use oae_swapring::words::SharedWords;

use crate::host::HostPort;
use crate::incarnation::Incarnation;
use crate::pipeline::{Discovery, FinalReport, Pipeline, Port, QueueInfo, QueueShared};
use crate::transport::{LinkKeys, Oae, RcModel, Transport};
use oae_config::{
    BindModeSetting, Config, DiscoverySettings, DriverKind, PollSettings, QueueConfig, SteerBy,
    TransportKind, XdpModeSetting,
};

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

/// The identities of the authenticated links a process runs (`oaed`: all
/// its queues; embedded queues: those running in the application, see
/// the `embed` module). Two links sharing an identity would derive one key
/// and count packet numbers alike, so they would share nonces: start-up
/// refuses the second (queues on VLAN subinterfaces of one NIC share its
/// MAC, for one). It is refused whatever their keys, since a key can be
/// rolled to another's while the links run.
#[derive(Clone, Debug, Default)]
pub struct AuthenticatedLinks(HashSet<LinkIdentity>);

impl AuthenticatedLinks {
    /// The identities claimed here that `earlier` (a copy taken before a
    /// queue was built) lacks: the new queue's.
    pub fn claimed_since(&self, earlier: &AuthenticatedLinks) -> Vec<LinkIdentity> {
        self.0.difference(&earlier.0).copied().collect()
    }

    /// Gives up the identities of a queue that stopped.
    pub fn release(&mut self, identities: &[LinkIdentity]) {
        for identity in identities {
            self.0.remove(identity);
        }
    }

    fn claim(&mut self, index: usize, identity: LinkIdentity) -> Result<(), String> {
        if self.0.insert(identity) {
            return Ok(());
        }
        Err(format!(
            "queue {index}: its link from {} to {} on channel {} is authenticated, and another \
             queue of this process already links those MACs on that channel: they could \
             share nonces (a key can be rolled to the other's). Give the interfaces distinct \
             MACs",
            format_mac(identity.local_mac),
            format_mac(identity.peer_mac),
            identity.channel,
        ))
    }
}

/// The dataplane's one registered memory, with the configured regions:
/// every queue's node gets a handle on it.
pub fn build_memory(config: &Config) -> Result<SharedMemory, String> {
    register_regions(SharedMemory::new(), config)
}

/// The memory `oaed` starts with: as [`build_memory`], and with a host
/// ring every region's bytes in a file beside it that host programs map,
/// as an RDMA program reads and writes its registered buffers. Once per
/// process: the files' mappings last as long as it.
pub fn build_daemon_memory(config: &Config) -> Result<SharedMemory, String> {
    let memory = SharedMemory::new();
    if let Some(host) = &config.host {
        crate::host::clear_stale(&host.ring)?;
        let ring = host.ring.clone();
        memory.lend_from(Box::new(move |spec| {
            let path = oae_client::host::region_file(&ring, spec.id);
            let words = SharedWords::create(&path, spec.len as usize / 8).map_err(|e| {
                let errno = match &e {
                    oae_swapring::region::RegionError::Io { source, .. } => source
                        .raw_os_error()
                        .unwrap_or(nix::errno::Errno::EIO as i32),
                    _ => nix::errno::Errno::EIO as i32,
                };
                tracing::error!("region {}: {e}", spec.id);
                RegisterError::NotLent { errno }
            })?;
            // Mapped for the life of the process: regions stay registered.
            Ok(Box::leak(Box::new(words)).words())
        }));
    }
    register_regions(memory, config)
}

fn register_regions(mut memory: SharedMemory, config: &Config) -> Result<SharedMemory, String> {
    for r in &config.regions {
        let spec = r.to_spec().map_err(|e| format!("region {}: {e}", r.id))?;
        memory
            .register(spec)
            .map_err(|e| format!("region {}: {e}", spec.id))?;
    }
    Ok(memory)
}

/// Builds queue `index` of `config`: its driver (for AF_XDP, after
/// attaching the XDP program to the interface, once per interface; for
/// DPDK, after starting the EAL, once per process), its node with a link
/// per peer over `memory`, and its pipeline. Must run in the network
/// namespace of the interface.
pub fn build_queue(
    config: &Config,
    index: usize,
    me: &Incarnation,
    memory: &SharedMemory,
    steering: &mut BTreeMap<String, Steering>,
    authenticated: &mut AuthenticatedLinks,
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
    let transport = transport(config, index, me, memory)?;
    let mut plan = Vec::new();
    for (iface, links) in q.ports() {
        let links = links
            .into_iter()
            .map(|(l, m)| Ok((l, parse_mac(m).ok_or("peer MACs were validated")?)))
            .collect::<Result<Vec<_>, String>>()?;
        plan.push((iface.to_string(), links));
    }
    let parts = Parts {
        channel: channel(q),
        shared: Arc::new(QueueShared::new(4096)?),
        inflight,
        poll: q.poll,
        info: QueueInfo {
            index: index as u16,
            iface: q.label().to_string(),
            queue_id: q.queue_id,
            core: q.core,
            driver: String::new(),
            mac: String::new(),
            discovers: q.discovery().is_some(),
        },
        host: match &config.host {
            Some(h) if usize::from(h.queue) == index => Some(HostPort::create(&h.to_host_ring()?)?),
            _ => None,
        },
        discovery: q.discovery(),
    };
    let shared = Arc::clone(&parts.shared);
    let run = match q.driver {
        DriverKind::AfXdp => {
            let mut ports = Vec::new();
            for (iface, links) in plan {
                ports.push(Port::new(
                    open_afxdp(q, &iface, steering)?,
                    iface,
                    links,
                    q.poll.kicks,
                ));
            }
            claim_identities(q, index, &ports, parts.channel, authenticated)?;
            let name = format!("af_xdp ({})", ports[0].driver.bind_mode());
            assemble(ports, name, transport, parts)?
        }
        #[cfg(feature = "dpdk")]
        DriverKind::Dpdk => {
            let driver = open_dpdk(config, q)?;
            let name = format!("dpdk ({})", driver.name());
            let links = plan.into_iter().flat_map(|(_, links)| links).collect();
            let ports = vec![Port::new(
                driver,
                q.label().to_string(),
                links,
                q.poll.kicks,
            )];
            claim_identities(q, index, &ports, parts.channel, authenticated)?;
            assemble(ports, name, transport, parts)?
        }
        #[cfg(not(feature = "dpdk"))]
        DriverKind::Dpdk => return Err(oae_config::NO_DPDK.into()),
    };
    Ok(BuiltQueue { shared, run })
}

/// Each link of `ports` as both its ends name it in key derivation.
fn identities<D: Driver>(
    ports: &[Port<D>],
    channel: u32,
) -> impl Iterator<Item = (LinkId, LinkIdentity)> + '_ {
    ports.iter().flat_map(move |port| {
        port.links().iter().map(move |&(link, peer)| {
            let identity = LinkIdentity {
                local_mac: port.mac(),
                peer_mac: peer,
                channel,
            };
            (link, identity)
        })
    })
}

/// Registers the identities of an authenticated queue's links, refusing one
/// another queue already has.
fn claim_identities<D: Driver>(
    q: &QueueConfig,
    index: usize,
    ports: &[Port<D>],
    channel: u32,
    authenticated: &mut AuthenticatedLinks,
) -> Result<(), String> {
    if q.auth.is_none() {
        return Ok(());
    }
    identities(ports, channel).try_for_each(|(_, identity)| authenticated.claim(index, identity))
}

/// The channel of a queue's links, which both ends know alike and which
/// keeps the authentication keys of links between the same two MACs
/// apart: the queue number for queues steered by queue (a veth carries
/// transmit queue k to the peer's receive queue k, so queue k links to the
/// peer's queue k), and 0 where the peer's MAC steers the link (the
/// configuration check lets a MAC pair have only one such queue).
fn channel(q: &QueueConfig) -> u32 {
    match q.steer_by {
        SteerBy::Queue => q.queue_id,
        SteerBy::PeerMac => 0,
    }
}

/// Queue `index`'s transport: for OAE a node with a link per peer (and
/// its fabric), for the RC model an endpoint.
fn transport(
    config: &Config,
    index: usize,
    me: &Incarnation,
    memory: &SharedMemory,
) -> Result<AnyTransport, String> {
    let q = &config.queues[index];
    let link_cfg = q.link.to_link_config();
    let core_memory = memory.for_core(index as u16);
    Ok(match q.transport {
        TransportKind::Oae => {
            let mut node = Node::with_memory(me.node_id, me.epoch, NoObserver, core_memory);
            for _ in 0..q.link_count() {
                node.add_link(link_cfg)
                    .map_err(|e| format!("link.{}: {}", e.field, e.problem))?;
            }
            if q.fabric {
                node.enable_fabric(FabricConfig::for_links(&link_cfg), &link_cfg)
                    .map_err(|e| format!("fabric: {}: {}", e.field, e.problem))?;
            }
            AnyTransport::Oae(Oae::new(
                node,
                link_keys(q, &link_cfg, me.identity.as_ref())?,
            ))
        }
        TransportKind::RcModel => AnyTransport::Rc(RcModel {
            endpoint: RcEndpoint::new(q.rc.to_rc_config(), core_memory)?,
        }),
    })
}

/// How queue `q`'s links are keyed: a shared key, or keys agreed by the
/// node's `identity` against the trusted identities.
fn link_keys(
    q: &QueueConfig,
    link: &LinkConfig,
    identity: Option<&Arc<IdentitySecret>>,
) -> Result<LinkKeys, String> {
    let Some(auth) = &q.auth else {
        return Ok(LinkKeys::None);
    };
    if let Some(key) = &auth.key {
        return Ok(LinkKeys::Shared(auth.key_number, key.link_key()));
    }
    let identity = identity.ok_or(
        "auth.identity = true, but no identity was loaded for this dataplane (identity_file)",
    )?;
    Ok(LinkKeys::Agreed(KeyAgreementConfig {
        identity: Arc::clone(identity),
        trust: Arc::new(auth.trust()?),
        seed: crate::identity::handshake_seed()?,
        retry_interval: link.hello_interval,
        retry_limit: HELLO_BACKOFF_LIMIT,
        rekey_after: auth.rekey_after(),
    }))
}

/// What start-up does with `config` short of the operating system (no
/// interface, socket, thread or file): registers the regions and builds
/// every queue's transport and host ring settings, as [`build_queue`]
/// does. What `oaed --check` accepts must pass this (the configuration
/// fuzz target and a property test hold it to that).
pub fn rehearse(config: &Config) -> Result<(), String> {
    let memory = build_memory(config)?;
    // Rehearsed with a stand-in: the identity file is read or made at start.
    let me = Incarnation::rehearsal(config);
    for index in 0..config.queues.len() {
        transport(config, index, &me, &memory).map_err(|e| format!("queue {index}: {e}"))?;
    }
    if let Some(h) = &config.host {
        h.to_host_ring()?;
    }
    Ok(())
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
    /// What tells this queue's links from another queue's links between
    /// the same MACs (see [`channel`]).
    channel: u32,
    shared: Arc<QueueShared>,
    inflight: usize,
    poll: PollSettings,
    info: QueueInfo,
    host: Option<HostPort>,
    /// How the queue finds its neighbours, if it lists none.
    discovery: Option<DiscoverySettings>,
}

/// The queue's loop over `driver` and `transport`, as a value a thread can
/// run.
fn assemble<D>(
    ports: Vec<Port<D>>,
    driver_name: String,
    transport: AnyTransport,
    parts: Parts,
) -> Result<Box<dyn FnOnce(Duration) -> FinalReport + Send>, String>
where
    D: Driver + Send + 'static,
    D::Buf: Send,
{
    match transport {
        AnyTransport::Oae(t) => runner(ports, driver_name, t, parts),
        AnyTransport::Rc(t) => runner(ports, driver_name, t, parts),
    }
}

/// Builds the pipeline; one loop is compiled per driver and transport.
fn runner<D, T>(
    ports: Vec<Port<D>>,
    driver_name: String,
    transport: T,
    parts: Parts,
) -> Result<Box<dyn FnOnce(Duration) -> FinalReport + Send>, String>
where
    D: Driver + Send + 'static,
    D::Buf: Send,
    T: Transport,
{
    let mut transport = transport;
    for (link, identity) in identities(&ports, parts.channel) {
        transport.link_identity(link, identity);
    }
    let info = QueueInfo {
        driver: driver_name,
        mac: format_mac(ports[0].mac()),
        ..parts.info
    };
    let port_count = ports.len();
    let mut pipeline = Pipeline::new(
        ports,
        transport,
        info,
        parts.shared,
        parts.host,
        parts.inflight,
        parts.poll,
    );
    if let Some(d) = parts.discovery {
        pipeline = pipeline.discovering(Discovery::new(
            d.to_discovery_config(),
            d.neighbours,
            port_count,
            parts.channel,
        ));
    }
    Ok(Box::new(move |drain| pipeline.run(drain)))
}

/// The queue's AF_XDP socket on `iface` (its own interface, or one a peer
/// is reached through), behind the XDP program attached once per interface.
fn open_afxdp(
    q: &QueueConfig,
    iface: &str,
    steering: &mut BTreeMap<String, Steering>,
) -> Result<AfXdp, String> {
    if !steering.contains_key(iface) {
        let mode = match q.xdp_mode {
            XdpModeSetting::Auto => XdpMode::Auto,
            XdpModeSetting::Driver => XdpMode::Driver,
            XdpModeSetting::Skb => XdpMode::Skb,
        };
        let s = Steering::attach(iface, mode).map_err(|e| e.to_string())?;
        steering.insert(iface.to_string(), s);
    }
    let ring = q.ring_size();
    let driver = AfXdp::new(&AfXdpConfig {
        iface: iface.to_string(),
        queue_id: q.queue_id,
        frame_count: q.frames,
        fill_size: ring,
        comp_size: ring,
        rx_size: ring,
        tx_size: ring,
        busy_poll: q.poll.busy_poll.then(BusyPoll::default),
        mode: match q.bind_mode {
            BindModeSetting::Auto => BindMode::Auto,
            BindModeSetting::ZeroCopy => BindMode::ZeroCopy,
            BindModeSetting::Copy => BindMode::Copy,
        },
        ..AfXdpConfig::default()
    })
    .map_err(|e| format!("{iface} queue {}: {e}", q.queue_id))?;
    steering[iface]
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout `oaectl demo --queues N` builds: N queues of one veth
    /// pair, the same peer MAC on each, steered by queue. Their links share
    /// MACs (and a key, if authenticated): only the channel tells their
    /// keys apart, so no two may have the same.
    #[test]
    fn queues_sharing_a_peer_have_channels_of_their_own() {
        let mut config = Config::from_toml(
            "name = \"a\"\nnode_id = 1\n[[queue]]\niface = \"oae0\"\n\
             peer_mac = \"02:0a:e0:00:00:02\"\n",
        )
        .unwrap();
        config.replicate_first_queue(4).unwrap();
        let channels: std::collections::BTreeSet<u32> = config.queues.iter().map(channel).collect();
        assert_eq!(channels.len(), 4, "{channels:?}");
        // One queue per peer MAC, steered by MAC: channel 0.
        let single = Config::from_toml(
            "name = \"a\"\nnode_id = 1\n[[queue]]\niface = \"oae0\"\nqueue_id = 3\n\
             peer_mac = \"02:0a:e0:00:00:02\"\n",
        )
        .unwrap();
        assert_eq!(channel(&single.queues[0]), 0);
    }

    /// The XDP side bounds corruption offsets by the longest OAE frame
    /// without seeing the core's constants: they must agree.
    #[test]
    fn the_fault_injectors_longest_frame_is_the_cores() {
        assert_eq!(
            oae_common::MAX_OAE_FRAME_ON_WIRE as usize,
            oae_common::ETH_HEADER_LEN
                + oae_proto::wire::MAX_FRAME
                + oae_proto::auth::AUTH_TRAILER_LEN
        );
    }
}
