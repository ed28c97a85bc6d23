//! The sans-IO core of Open Atomic Ethernet.
//!
//! A [`Node`] owns registered memory and any number of links. It takes frames
//! (`handle_frame`), the passage of time (`handle_timeout`) and verbs
//! (`submit`) in, and gives frames (`poll_transmit`) and events
//! (`poll_event`) out. It never reads a clock, opens a socket or spawns a
//! thread, so the same code runs under the dataplane's polling loop, the
//! deterministic simulator and the model checker.
//!
//! Guarantees are stated in `docs/SEMANTICS.md`; the wire format in
//! `docs/PROTOCOL.md`.

pub mod address;
pub mod auth;
pub mod config;
pub mod crc;
pub mod discovery;
mod down_reason;
pub mod fabric;
pub mod handshake;
pub mod identity;
mod link;
pub mod memory;
mod sealing;
mod unhashed;
pub mod verb;
pub mod wire;

use std::collections::VecDeque;

pub use config::{ConfigError, LinkConfig, Nanos};
pub use down_reason::{DOWN_REASON_FRAMES, DownReason};
pub use fabric::routes::{Member, Route, View};
pub use fabric::{FabricConfig, FabricStats, PATH_BASE};
pub use link::{
    HELLO_BACKOFF_LIMIT, LinkStats, LinkStatus, MAX_POSTED_RECEIVES, PostError, PostedReceive,
};
pub use memory::{Memory, Permissions, RegionSpec, RegisterError, SharedMemory, Store};
pub use sealing::NoSuchLink;
pub use verb::{
    Block, McasWord, Opcode, Output, Refusal, RegionRef, ReverseReason, Verb, VerbError,
};

use auth::Authenticator;
use fabric::Fabric;
use handshake::KeyAgreement;
use link::{Link, Received, Shared};
use unhashed::Unhashed;

/// The issuer's name for a verb, echoed in its completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VerbId(pub u64);

/// Index of a link within its node.
pub type LinkId = u16;

/// What a node tells its user. `Err` in a completion means no effect, at the
/// target or in the initiator's local block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// A submitted verb's one and only completion. `Err` means no effect.
    Completed {
        link: LinkId,
        id: VerbId,
        result: Result<Output, VerbError>,
    },
    Link {
        link: LinkId,
        change: LinkChange,
    },
    /// The peer on `link` proved an identity the node does not trust: the
    /// link was refused a key.
    Untrusted {
        link: LinkId,
        identity: identity::PublicIdentity,
    },
    /// A message filled the receive the application posted as `id`: its
    /// first `len` bytes, with the SEND's immediate data. Receives of a
    /// link are reported in the order they were posted.
    Received {
        link: LinkId,
        id: u64,
        len: u16,
        imm: Option<u32>,
    },
}

// Events are queued and copied by value on every completion: a block verb's
// bytes land in local memory instead, so an event stays two cache lines.
const _: () = assert!(size_of::<Event>() <= 128);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkChange {
    /// Both ends know that the other knows them.
    Up,
    /// The configured number of round trips passed in silence.
    Unreachable,
    /// The peer came back as a new incarnation.
    PeerRestarted,
    /// The peer proved a trusted identity and the link has a new key
    /// ([`Node::key_agreement`] names the peer).
    Keyed,
}

/// Hooks for watching transfers on both sides, for tracing and for the
/// simulator's ledger. Every method defaults to nothing, so the dataplane's
/// [`NoObserver`] costs nothing.
pub trait Observer {
    /// The initiator put verb `id` on the wire as `(slot, seq)` of `link`.
    fn sent(&mut self, _link: LinkId, _epoch: u32, _slot: u16, _seq: u16, _id: VerbId) {}
    /// The target applied `(slot, seq)` from the peer's incarnation `peer_epoch` tentatively.
    fn applied(&mut self, _link: LinkId, _peer_epoch: u32, _slot: u16, _seq: u16) {}
    /// The target made it permanent.
    fn committed(&mut self, _link: LinkId, _peer_epoch: u32, _slot: u16, _seq: u16) {}
    /// The target removed every trace of it.
    fn reversed(&mut self, _link: LinkId, _peer_epoch: u32, _slot: u16, _seq: u16) {}
    /// The initiator landed the block of a committed READ or bilateral swap
    /// in the verb's local block.
    fn local_landed(&mut self, _id: VerbId) {}
}

/// An observer that observes nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NoObserver;

impl Observer for NoObserver {}

/// Why a verb was not accepted (it gets no completion).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubmitError {
    UnknownLink(LinkId),
    /// No link and no route leads to this node (yet).
    NoRoute(u64),
    /// The link's submission queue is full: retry after draining completions.
    QueueFull,
    /// The verb can never be carried: explains what is wrong with it.
    Invalid(&'static str),
}

impl core::fmt::Display for SubmitError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SubmitError::UnknownLink(l) => write!(f, "no link {l}"),
            SubmitError::NoRoute(n) => write!(f, "no link or route to node {n:#x}"),
            SubmitError::QueueFull => write!(f, "submission queue full"),
            SubmitError::Invalid(why) => write!(f, "invalid verb: {why}"),
        }
    }
}

impl std::error::Error for SubmitError {}

/// One OAE endpoint: its memory, its links, its pending events. The memory
/// is the node's own ([`Memory`]) or shared with other nodes on other cores
/// ([`SharedMemory`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node<O: Observer = NoObserver, M: Store = Memory> {
    node_id: u64,
    epoch: u32,
    memory: M,
    links: Vec<Link>,
    /// Routes, paths and membership over the links, once enabled.
    fabric: Option<Box<Fabric>>,
    events: VecDeque<Event>,
    observer: O,
    /// Each link's authentication, once asked for
    /// ([`Node::authenticate_link`]). Boxed, as few links have one; out of
    /// the node's identity, as the model checker runs links without keys.
    auth: Unhashed<Vec<Option<Box<Authenticator>>>>,
    /// Each link's key agreement, for links that agree their keys by
    /// identity ([`Node::agree_keys`]).
    agreements: Unhashed<Vec<Option<Box<KeyAgreement>>>>,
}

impl Node<NoObserver> {
    pub fn new(node_id: u64, epoch: u32) -> Node<NoObserver> {
        Node::with_observer(node_id, epoch, NoObserver)
    }
}

impl<O: Observer> Node<O> {
    /// `epoch` names this incarnation and must grow across restarts (a peer
    /// takes a larger epoch as a restart, a smaller one as stale); `node_id`
    /// (e.g. the MAC) breaks ties when choosing link roles.
    pub fn with_observer(node_id: u64, epoch: u32, observer: O) -> Node<O> {
        Node::with_memory(node_id, epoch, observer, Memory::default())
    }
}

impl<O: Observer, M: Store> Node<O, M> {
    /// A node over `memory`, e.g. one core's handle on a dataplane's
    /// [`SharedMemory`].
    pub fn with_memory(node_id: u64, epoch: u32, observer: O, memory: M) -> Node<O, M> {
        assert!(epoch != 0, "epoch 0 means 'unknown' on the wire");
        Node {
            node_id,
            epoch,
            memory,
            links: Vec::new(),
            fabric: None,
            events: VecDeque::with_capacity(1024),
            observer,
            auth: Unhashed(Vec::new()),
            agreements: Unhashed(Vec::new()),
        }
    }

    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    pub fn node_id(&self) -> u64 {
        self.node_id
    }

    pub fn observer(&self) -> &O {
        &self.observer
    }

    pub fn observer_mut(&mut self) -> &mut O {
        &mut self.observer
    }

    pub fn memory(&self) -> &M {
        &self.memory
    }

    pub fn register(&mut self, spec: RegionSpec) -> Result<(), RegisterError> {
        self.memory.register(spec)
    }

    pub fn add_link(&mut self, cfg: LinkConfig) -> Result<LinkId, ConfigError> {
        cfg.validate()?;
        let id = LinkId::try_from(self.links.len()).map_err(|_| ConfigError {
            field: "links",
            problem: "too many links".into(),
        })?;
        if id >= PATH_BASE {
            return Err(ConfigError {
                field: "links",
                problem: format!("at most {PATH_BASE} links"),
            });
        }
        self.links.push(Link::new(id, cfg));
        self.auth.push(None);
        self.agreements.push(None);
        if let Some(f) = &mut self.fabric {
            f.add_port();
        }
        Ok(id)
    }

    /// Joins this node's links into a fabric (`fabric` module docs): routes
    /// learned from the neighbours, paths to nodes that are not neighbours,
    /// failover and resolution of transfers in doubt over another path.
    /// `link` is the configuration of the node's links.
    pub fn enable_fabric(
        &mut self,
        cfg: FabricConfig,
        link: &LinkConfig,
    ) -> Result<(), ConfigError> {
        if self.fabric.is_some() {
            return Err(ConfigError {
                field: "fabric",
                problem: "already enabled on this node".into(),
            });
        }
        cfg.validate(link)?;
        let me = Member {
            node: self.node_id,
            epoch: self.epoch,
        };
        self.fabric = Some(Box::new(Fabric::new(cfg, me, self.links.len())));
        Ok(())
    }

    /// This node's routes, if the fabric is enabled (sorted by node id).
    pub fn routes(&self) -> &[Route] {
        self.fabric.as_ref().map_or(&[], |f| f.routes().table())
    }

    /// This node's view of the membership, if the fabric is enabled.
    pub fn view(&self) -> Option<&View> {
        self.fabric.as_ref().map(|f| f.routes().view())
    }

    /// This node's view number and digest (as its ADVERTs carry them), if
    /// the fabric is enabled: a cheap way to compare views.
    pub fn view_id(&self) -> Option<(u64, u64)> {
        self.fabric.as_ref().map(|f| f.routes().view_id())
    }

    /// The member of an agreed view this node must give its address up to
    /// (PROTOCOL.md, "Addresses", N3), if any: one at the same address
    /// with a lower node id.
    pub fn address_holder(&self) -> Option<u64> {
        let view = self.view().filter(|_| self.view_agreed())?;
        address::yields_to(view, self.node_id)
    }

    /// Whether every usable neighbour advertises the same view as this node.
    pub fn view_agreed(&self) -> bool {
        self.fabric.as_ref().is_some_and(|f| f.routes().agreed())
    }

    pub fn fabric_stats(&self) -> Option<&FabricStats> {
        self.fabric.as_ref().map(|f| f.stats())
    }

    /// Paths opened so far: their link ids and the node each leads to.
    pub fn paths(&self) -> impl Iterator<Item = (LinkId, u64)> + '_ {
        self.fabric.iter().flat_map(|f| {
            f.paths
                .iter()
                .enumerate()
                .map(|(i, p)| (PATH_BASE + i as LinkId, p.peer))
        })
    }

    /// The node at the other end of a link or path (0 for a link whose
    /// peer has not said hello yet).
    pub fn link_peer(&self, link: LinkId) -> Option<u64> {
        if link >= PATH_BASE {
            let f = self.fabric.as_ref()?;
            return f.paths.get(usize::from(link - PATH_BASE)).map(|p| p.peer);
        }
        self.links.get(usize::from(link)).map(|l| l.peer_id())
    }

    /// Overwrites the fabric's control state (routes, views) with values
    /// drawn from `next`, as a memory fault might; it must recover by
    /// itself. For the simulator.
    pub fn scramble_fabric(&mut self, next: impl FnMut() -> u64) {
        if let Some(f) = &mut self.fabric {
            f.routes_mut().scramble(next);
        }
    }

    pub fn links(&self) -> usize {
        self.links.len()
    }

    /// A link's status, or a path's (ids from [`PATH_BASE`]).
    pub fn link_status(&self, link: LinkId) -> Option<LinkStatus> {
        self.any_link(link).map(|l| l.status(self.epoch))
    }

    /// Why `link` (or a path) is not coming up, once
    /// [`DOWN_REASON_FRAMES`] frames in a row it received and dropped
    /// told the same reason; `None` while it is up, or while nothing it
    /// received tells. A read of one field: cheap after every frame.
    pub fn link_down_reason(&self, link: LinkId) -> Option<DownReason> {
        self.any_link(link).and_then(|l| l.down_reason())
    }

    /// The driver or transport dropped a frame of `link` before the core
    /// saw it, for `reason` (an authenticated link's check failed): the
    /// link records it as it records its own drops (`link_down_reason`).
    pub fn note_dropped(&mut self, link: LinkId, reason: DownReason) {
        if let Some(l) = self.links.get_mut(usize::from(link)) {
            l.note_down_reason(reason);
        }
    }

    /// Writes this node's announcement (PROTOCOL.md, "Discovery", D1) into
    /// `buf`, offering what its first link offers; `None` without links.
    pub fn write_announcement(&self, buf: &mut [u8]) -> Option<usize> {
        let cfg = self.links.first()?.config();
        Some(discovery::write_announcement(
            buf,
            self.node_id,
            self.epoch,
            cfg,
        ))
    }

    /// Whether `link` could be made new for another neighbour: it never
    /// learned an incarnation of its peer since it was made or renewed (so
    /// never named one in a HELLO, and no peer can be up with it), and
    /// holds nothing (no verb, transfer or posted receive). A link whose
    /// peer may be up never is: the peer numbers its transfers on, and a
    /// new link would start again from 0 and refuse them all (D6, D7).
    pub fn link_renewable(&self, link: LinkId) -> bool {
        self.links.get(usize::from(link)).is_some_and(|l| {
            !l.knew_peer() && l.is_quiescent() && l.status(self.epoch).posted_receives == 0
        })
    }

    /// Makes `link` new for another neighbour (discovery let the last one
    /// go, D6): its state, keys and key agreement gone, its counters kept.
    /// Returns whether it did: only a [`Node::link_renewable`] link is.
    pub fn renew_link(&mut self, link: LinkId) -> bool {
        if !self.link_renewable(link) {
            return false;
        }
        let index = usize::from(link);
        self.links[index].renew();
        self.auth[index] = None;
        self.agreements[index] = None;
        if let Some(f) = &mut self.fabric {
            f.renew_port(index);
        }
        true
    }

    pub fn link_stats(&self, link: LinkId) -> Option<&LinkStats> {
        self.any_link(link).map(|l| l.stats())
    }

    fn any_link(&self, link: LinkId) -> Option<&Link> {
        if link >= PATH_BASE {
            let f = self.fabric.as_ref()?;
            return f.paths.get(usize::from(link - PATH_BASE)).map(|p| &p.link);
        }
        self.links.get(usize::from(link))
    }

    fn all_links(&self) -> impl Iterator<Item = &Link> {
        self.links.iter().chain(
            self.fabric
                .iter()
                .flat_map(|f| f.paths.iter().map(|p| &p.link)),
        )
    }

    /// Nothing tentative, queued or awaiting an answer on any link or path.
    pub fn is_quiescent(&self) -> bool {
        self.all_links().all(|l| l.is_quiescent())
    }

    /// Transfers this node initiated whose outcome it does not know yet.
    pub fn in_doubt(&self) -> usize {
        self.all_links().map(|l| l.in_doubt()).sum()
    }

    /// Queues a verb for `link` (or for a path, ids from [`PATH_BASE`]).
    /// Accepted verbs get exactly one [`Event::Completed`]; refused ones get
    /// an error here and nothing else.
    pub fn submit(&mut self, link: LinkId, id: VerbId, verb: &Verb) -> Result<(), SubmitError> {
        let max_class = self
            .any_link(link)
            .ok_or(SubmitError::UnknownLink(link))?
            .max_class();
        check_verb(verb, &self.memory)?;
        if verb.class(max_class).is_none() {
            return Err(SubmitError::Invalid(
                "needs a larger frame than this link's max_class",
            ));
        }
        let (links, fabric, mut sh) = self.parts();
        let l = if link >= PATH_BASE {
            &mut fabric.expect("checked").paths[usize::from(link - PATH_BASE)].link
        } else {
            &mut links[usize::from(link)]
        };
        if l.submit(id, verb, &mut sh) {
            Ok(())
        } else {
            Err(SubmitError::QueueFull)
        }
    }

    /// Lends `link` (or a path) `receive`, for the next SEND that arrives
    /// on it; [`Event::Received`] reports it filled.
    pub fn post_receive(&mut self, link: LinkId, receive: PostedReceive) -> Result<(), PostError> {
        let (links, fabric) = (&mut self.links, self.fabric.as_deref_mut());
        any_link_mut(links, fabric, link)
            .ok_or(PostError::UnknownLink(link))?
            .post_receive(receive, &self.memory)
    }

    /// Withdraws receive `id` from `link` (or a path) if no message is in
    /// it or arriving in it: true if it was withdrawn; false if it is not
    /// posted there or a message holds it (its [`Event::Received`] will
    /// come).
    pub fn cancel_receive(&mut self, link: LinkId, id: u64) -> bool {
        let (links, fabric) = (&mut self.links, self.fabric.as_deref_mut());
        any_link_mut(links, fabric, link).is_some_and(|l| l.cancel_receive(id))
    }

    /// Queues a verb for node `node`, wherever it is: on the link to it
    /// while that link is usable, else on the path to it through the
    /// fabric (which waits for a route while the routes converge; a verb
    /// too large for a path's frames waits on the link), else on the link
    /// (which may come back). Returns the link or path that took it; if
    /// the link later becomes unusable, the verb may move to the path and
    /// its completion then names the path.
    pub fn submit_to(&mut self, node: u64, id: VerbId, verb: &Verb) -> Result<LinkId, SubmitError> {
        let direct = self
            .links
            .iter()
            .position(|l| l.peer_id() == node && node != 0)
            .map(|d| d as LinkId);
        // A SEND follows the SENDs to `node` not yet decided, on the link
        // or path they are on, so it never overtakes them.
        if matches!(verb, Verb::Send { .. }) {
            let path = self.fabric.as_deref().and_then(|f| f.path_index(node));
            let behind = direct
                .into_iter()
                .chain(path.map(|p| PATH_BASE + p as LinkId))
                .find(|&l| self.any_link(l).is_some_and(|l| l.messages_pending()));
            if let Some(l) = behind {
                return self.submit(l, id, verb).map(|()| l);
            }
        }
        if let Some(d) = direct
            && (self.fabric.is_none() || self.links[usize::from(d)].is_usable())
        {
            return self.submit(d, id, verb).map(|()| d);
        }
        if let Some(p) = self.fabric.as_deref_mut().and_then(|f| f.path_for(node)) {
            let path = PATH_BASE + p as LinkId;
            let carried = self.any_link(path).is_some_and(|l| l.carries(verb));
            // A verb too large for a path's frames waits for the link.
            if carried || direct.is_none() {
                return self.submit(path, id, verb).map(|()| path);
            }
        }
        match direct {
            Some(d) => self.submit(d, id, verb).map(|()| d),
            None => Err(SubmitError::NoRoute(node)),
        }
    }

    /// Takes one received OAE frame (without Ethernet header). Malformed
    /// frames are counted in the link's stats and dropped.
    pub fn handle_frame(&mut self, link: LinkId, frame: &[u8], now: Nanos) {
        if usize::from(link) >= self.links.len() {
            return;
        }
        // An authenticated link checks the tag and the replay window
        // before anything reads the frame; what fails is counted, dropped,
        // and told as a reason the link is not coming up.
        let Some(frame) = self.open(link, frame, now) else {
            return;
        };
        let (links, fabric, mut sh) = self.parts();
        let received = links[usize::from(link)].handle_frame(frame, now, &mut sh);
        if let Some(f) = fabric {
            // First the link's new state (a frame may have brought it up,
            // and the routes must know before its ADVERT is taken).
            f.follow(link, links, &mut sh);
            if let Received::Fabric(t) = received {
                let payload = &frame[wire::HEADER_LEN..frame.len() - wire::TRAILER_LEN];
                f.receive(link, t, payload, now, links, &mut sh);
            }
        }
    }

    /// Writes the next frame due on `link` into `buf` (at least
    /// [`wire::MAX_FRAME`] bytes, and [`auth::AUTH_TRAILER_LEN`] more on an
    /// authenticated link) and returns its length: the fabric's
    /// frames for the link (its adverts, relayed frames, frames of paths
    /// routed through it) and the link's own, taking turns.
    pub fn poll_transmit(&mut self, link: LinkId, now: Nanos, buf: &mut [u8]) -> Option<usize> {
        let mut one = OneBuffer { buf, len: None };
        self.poll_transmit_burst(link, now, 1, &mut one);
        one.len
    }

    /// Writes up to `max_datagrams` frames due on `link` into the buffers
    /// `out` lends, in the order they must leave, and returns how many: a
    /// whole transmit burst in one call, the link found once for all of
    /// them. Frames as [`Node::poll_transmit`] takes them one by one.
    pub fn poll_transmit_burst(
        &mut self,
        link: LinkId,
        now: Nanos,
        max_datagrams: usize,
        out: &mut impl TransmitBuffers,
    ) -> usize {
        if self.is_authenticated(link) {
            return self.poll_transmit_sealed(link, now, max_datagrams, out);
        }
        self.poll_transmit_plain(link, now, max_datagrams, out)
    }

    /// [`Node::poll_transmit_burst`] with the frames as the link writes
    /// them.
    fn poll_transmit_plain(
        &mut self,
        link: LinkId,
        now: Nanos,
        max_datagrams: usize,
        out: &mut impl TransmitBuffers,
    ) -> usize {
        if usize::from(link) >= self.links.len() {
            return 0;
        }
        let (links, mut fabric, mut sh) = self.parts();
        let l = &mut links[usize::from(link)];
        let mut sent = 0;
        while sent < max_datagrams {
            let Some(buf) = out.next_buffer() else {
                break;
            };
            let len = match fabric.as_deref_mut() {
                None => l.poll_transmit(now, buf, &mut sh),
                Some(f) => {
                    let fabric_first = f.turn(link);
                    let mut len = None;
                    for fabric in [fabric_first, !fabric_first] {
                        len = if fabric {
                            f.poll_transmit(link, l, now, buf, &mut sh)
                        } else {
                            l.poll_transmit(now, buf, &mut sh)
                        };
                        if len.is_some() {
                            f.sent(link, fabric);
                            break;
                        }
                    }
                    len
                }
            };
            let Some(len) = len else {
                break;
            };
            out.filled(len);
            sent += 1;
        }
        sent
    }

    /// When `handle_timeout` next has work to do.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        let agreements = self.agreements.iter().flatten();
        self.all_links()
            .map(|l| l.poll_timeout())
            .chain(agreements.filter_map(|a| a.poll_timeout()))
            .min()
    }

    pub fn handle_timeout(&mut self, now: Nanos) {
        for a in self.agreements.iter_mut().flatten() {
            a.handle_timeout(now);
        }
        let (links, mut fabric, mut sh) = self.parts();
        for i in 0..links.len() {
            links[i].handle_timeout(now, &mut sh);
            if let Some(f) = fabric.as_deref_mut() {
                f.follow(i as LinkId, links, &mut sh);
            }
        }
        if let Some(f) = fabric {
            for p in &mut f.paths {
                p.link.handle_timeout(now, &mut sh);
            }
        }
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The oldest event, left in place: read it, then [`Node::pop_event`].
    pub fn peek_event(&self) -> Option<&Event> {
        self.events.front()
    }

    /// Drops the oldest event, once [`Node::peek_event`] has read it.
    pub fn pop_event(&mut self) {
        self.events.pop_front();
    }

    fn parts(&mut self) -> (&mut [Link], Option<&mut Fabric>, Shared<'_, O, M>) {
        (
            &mut self.links,
            self.fabric.as_deref_mut(),
            Shared {
                memory: &mut self.memory,
                events: &mut self.events,
                observer: &mut self.observer,
                epoch: self.epoch,
                node_id: self.node_id,
            },
        )
    }
}

/// Buffers a caller lends [`Node::poll_transmit_burst`], one at a time: a
/// driver's transmit frames, written in place.
pub trait TransmitBuffers {
    /// The next buffer to write a frame into, at least
    /// [`wire::MAX_FRAME`] bytes (and [`auth::AUTH_TRAILER_LEN`] more for a
    /// link whose frames are sealed after); `None` when the burst is full.
    fn next_buffer(&mut self) -> Option<&mut [u8]>;
    /// The buffer last lent now holds a frame of `len` bytes. A buffer
    /// lent and not filled stays the caller's, unused.
    fn filled(&mut self, len: usize);
}

/// One buffer, for [`Node::poll_transmit`].
struct OneBuffer<'a> {
    buf: &'a mut [u8],
    len: Option<usize>,
}

impl TransmitBuffers for OneBuffer<'_> {
    fn next_buffer(&mut self) -> Option<&mut [u8]> {
        self.len.is_none().then_some(&mut *self.buf)
    }

    fn filled(&mut self, len: usize) {
        self.len = Some(len);
    }
}

/// Rejects verbs that no target could accept, before they take a slot.
/// Link `link` of `links`, or the fabric's path of that id.
fn any_link_mut<'a>(
    links: &'a mut [Link],
    fabric: Option<&'a mut Fabric>,
    link: LinkId,
) -> Option<&'a mut Link> {
    if link >= PATH_BASE {
        let path = fabric?.paths.get_mut(usize::from(link - PATH_BASE))?;
        return Some(&mut path.link);
    }
    links.get_mut(usize::from(link))
}

fn check_verb(verb: &Verb, memory: &impl Store) -> Result<(), SubmitError> {
    check_local_block(verb, memory).map_err(SubmitError::Invalid)?;
    match *verb {
        Verb::Write { data, .. } if data.is_empty() => {
            Err(SubmitError::Invalid("write of no bytes"))
        }
        Verb::MultiWordCommit { count, .. }
            if count == 0 || usize::from(count) > verb::MAX_MCAS_WORDS =>
        {
            Err(SubmitError::Invalid("multi-word commit takes 1..=8 words"))
        }
        _ => Ok(()),
    }
}

/// Checks the local block of a READ or bilateral swap: 1 to 960 bytes
/// inside one of `memory`'s regions. Any other verb passes.
pub fn check_local_block(verb: &Verb, memory: &impl Store) -> Result<(), &'static str> {
    let Some((region, offset, len)) = verb.local_block() else {
        return Ok(());
    };
    if len == 0 || usize::from(len) > verb::MAX_BLOCK {
        return Err("a READ or bilateral swap moves 1..=960 bytes");
    }
    memory
        .check_local(region, offset, len)
        .map_err(|_| "local block is not inside a local region")
}
