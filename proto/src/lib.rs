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

pub mod config;
mod link;
pub mod memory;
pub mod verb;
pub mod wire;

use std::collections::VecDeque;

pub use config::{ConfigError, LinkConfig, Nanos};
pub use link::{LinkStats, LinkStatus};
pub use memory::{Memory, Permissions, RegionSpec, RegisterError, SharedMemory, Store};
pub use verb::{Block, McasWord, Output, Refusal, RegionRef, ReverseReason, Verb, VerbError};

use link::{Link, Shared};

/// The issuer's name for a verb, echoed in its completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VerbId(pub u64);

/// Index of a link within its node.
pub type LinkId = u16;

/// What a node tells its user.
#[allow(
    clippy::large_enum_variant,
    reason = "results carry their bytes inline so completing a verb never allocates"
)]
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
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkChange {
    /// Both ends know that the other knows them.
    Up,
    /// The configured number of round trips passed in silence.
    Unreachable,
    /// The peer came back as a new incarnation.
    PeerRestarted,
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
    /// The initiator wrote the peer's block of a committed bilateral swap locally.
    fn local_swapped(&mut self, _id: VerbId) {}
}

/// An observer that observes nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NoObserver;

impl Observer for NoObserver {}

/// Why a verb was not accepted (it gets no completion).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubmitError {
    UnknownLink(LinkId),
    /// The link's submission queue is full: retry after draining completions.
    QueueFull,
    /// The verb can never be carried: explains what is wrong with it.
    Invalid(&'static str),
}

impl core::fmt::Display for SubmitError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SubmitError::UnknownLink(l) => write!(f, "no link {l}"),
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
    events: VecDeque<Event>,
    observer: O,
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
            events: VecDeque::with_capacity(1024),
            observer,
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
        self.links.push(Link::new(id, cfg));
        Ok(id)
    }

    pub fn links(&self) -> usize {
        self.links.len()
    }

    pub fn link_status(&self, link: LinkId) -> Option<LinkStatus> {
        self.links
            .get(usize::from(link))
            .map(|l| l.status(self.epoch))
    }

    pub fn link_stats(&self, link: LinkId) -> Option<&LinkStats> {
        self.links.get(usize::from(link)).map(|l| l.stats())
    }

    /// Nothing tentative, queued or awaiting an answer on any link.
    pub fn is_quiescent(&self) -> bool {
        self.links.iter().all(|l| l.is_quiescent())
    }

    /// Transfers this node initiated whose outcome it does not know yet.
    pub fn in_doubt(&self) -> usize {
        self.links.iter().map(|l| l.in_doubt()).sum()
    }

    /// Queues a verb for `link`. Accepted verbs get exactly one
    /// [`Event::Completed`]; refused ones get an error here and nothing else.
    pub fn submit(&mut self, link: LinkId, id: VerbId, verb: Verb) -> Result<(), SubmitError> {
        let max_class = self
            .links
            .get(usize::from(link))
            .ok_or(SubmitError::UnknownLink(link))?
            .max_class();
        check_verb(&verb, &self.memory)?;
        if verb.class(max_class).is_none() {
            return Err(SubmitError::Invalid(
                "needs a larger frame than this link's max_class",
            ));
        }
        let (l, mut sh) = self.split(link);
        if l.submit(id, &verb, &mut sh) {
            Ok(())
        } else {
            Err(SubmitError::QueueFull)
        }
    }

    /// Takes one received OAE frame (without Ethernet header). Malformed
    /// frames are counted in the link's stats and dropped.
    pub fn handle_frame(&mut self, link: LinkId, frame: &[u8], now: Nanos) {
        if usize::from(link) < self.links.len() {
            let (l, mut sh) = self.split(link);
            l.handle_frame(frame, now, &mut sh);
        }
    }

    /// Writes the next frame due on `link` into `buf` (at least
    /// [`wire::MAX_FRAME`] bytes) and returns its length.
    pub fn poll_transmit(&mut self, link: LinkId, now: Nanos, buf: &mut [u8]) -> Option<usize> {
        if usize::from(link) >= self.links.len() {
            return None;
        }
        let (l, mut sh) = self.split(link);
        l.poll_transmit(now, buf, &mut sh)
    }

    /// When `handle_timeout` next has work to do.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        self.links.iter().map(|l| l.poll_timeout()).min()
    }

    pub fn handle_timeout(&mut self, now: Nanos) {
        for i in 0..self.links.len() {
            let (l, mut sh) = self.split(i as LinkId);
            l.handle_timeout(now, &mut sh);
        }
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn split(&mut self, link: LinkId) -> (&mut Link, Shared<'_, O, M>) {
        (
            &mut self.links[usize::from(link)],
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

/// Rejects verbs that no target could accept, before they take a slot.
fn check_verb(verb: &Verb, memory: &impl Store) -> Result<(), SubmitError> {
    let invalid = |why| Err(SubmitError::Invalid(why));
    match *verb {
        Verb::Read { len, .. } if len == 0 || usize::from(len) > verb::MAX_BLOCK => {
            invalid("read length must be 1..=960 bytes")
        }
        Verb::Write { data, .. } if data.is_empty() => invalid("write of no bytes"),
        Verb::MultiWordCommit { count, .. }
            if count == 0 || usize::from(count) > verb::MAX_MCAS_WORDS =>
        {
            invalid("multi-word commit takes 1..=8 words")
        }
        Verb::BilateralSwap {
            local_region,
            local_offset,
            len,
            ..
        } => {
            if len == 0 || usize::from(len) > verb::MAX_BLOCK {
                return invalid("bilateral swap length must be 1..=960 bytes");
            }
            memory
                .check_local(local_region, local_offset, len)
                .map_err(|_| SubmitError::Invalid("local block is not inside a local region"))
        }
        _ => Ok(()),
    }
}
