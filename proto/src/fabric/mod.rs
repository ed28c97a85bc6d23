//! The fabric: a node's links joined into a network of nodes.
//!
//! - **Routes.** Every link carries ADVERT frames: the sender's routes as a
//!   distance vector, and its view of the membership ([`routes`]). Nothing
//!   is configured beyond the links themselves.
//! - **Paths.** A verb for a node that is not a neighbour, or whose link is
//!   not usable, travels on a *path*: an OAE link between the two nodes
//!   whose frames are carried in FORWARD frames, relayed hop by hop along
//!   the routes of the moment. A path is an ordinary [`Link`] with
//!   `ordered = false` (its frames may take different routes), so every
//!   guarantee of a link holds end to end: the verb is applied at its
//!   target exactly once or has no effect there, and its issuer learns
//!   which. Relays apply nothing; they only pass frames on.
//! - **Failover.** When a link is suspected dead, verbs queued on it move
//!   to the path to its peer, and new verbs for that peer take the path.
//! - **Resolution.** Transfers in doubt on a link that is not usable are
//!   settled with the peer over the path: the initiator sends the decision
//!   it would have sent on the link (RESOLVE), the target carries it out on
//!   the link's slot and answers (RESOLVED).

pub mod envelope;
pub mod routes;

use std::collections::VecDeque;

use crate::config::{ConfigError, LinkConfig, Nanos};
use crate::link::{Link, Shared};
use crate::memory::Store;
use crate::unhashed::Unhashed;
use crate::wire::{self, MAX_FRAME, Transition};
use crate::{LinkId, Observer};
use envelope::{Forward, Kind, Outcome, Resolution};
use routes::{Heard, MAX_NODES, Member, Routes};

/// Link ids from here up name paths; below it, links.
pub const PATH_BASE: LinkId = 0x4000;

/// The default bound of a link's relay queue: 64 paths of 16 slots
/// through one link, each with every frame it may have in flight.
pub const RELAY_QUEUE: usize = 64 * (2 * 16 + 2);
/// Relay queue entries allocated when a link is added; more on demand.
const RELAY_QUEUE_START: usize = 64;

/// How a node's fabric behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FabricConfig {
    /// Settings of every path (one per node reached through the fabric).
    /// `ordered` must be off, and `max_class` below the links' so that a
    /// path's frame fits inside a FORWARD.
    pub path: LinkConfig,
    /// Each link sends its node's routes every this many of its rounds,
    /// and at once when they change.
    pub advert_rounds: u64,
    /// FORWARD frames waiting per link; more are dropped and counted (the
    /// paths they belong to find the loss and send again). Room for what
    /// the paths through one link keep in flight (a path holds at most its
    /// slots' requests, their answers and a tick unanswered each way), so
    /// that only a fabric far larger than its links, or a neighbour that
    /// floods, meets the bound; the queue grows to it on demand.
    pub relay_queue: usize,
    /// Hops a FORWARD may take before it is dropped.
    pub max_hops: u8,
}

impl FabricConfig {
    /// Paths shaped after `link`, the configuration of the node's links.
    pub fn for_links(link: &LinkConfig) -> FabricConfig {
        FabricConfig {
            path: LinkConfig {
                slots: link.slots.min(16),
                receive_credits: link.receive_credits.min(16),
                max_class: link.max_class.saturating_sub(1),
                ordered: false,
                unreachable_after_rounds: link.unreachable_after_rounds.max(8),
                // Bring-up crosses several hops: no faster than a round.
                hello_interval: link.hello_interval.max(link.min_round),
                echo_patience_rounds: 3,
                submit_queue: link.submit_queue.min(1024),
                ..*link
            },
            advert_rounds: 4,
            relay_queue: RELAY_QUEUE,
            // As far as a route can reach.
            max_hops: routes::NO_ROUTE - 1,
        }
    }

    pub fn validate(&self, link: &LinkConfig) -> Result<(), ConfigError> {
        self.path.validate()?;
        let fail = |field, problem: &str| {
            Err(ConfigError {
                field,
                problem: problem.into(),
            })
        };
        if self.path.ordered {
            return fail("path.ordered", "must be false: relayed frames may reorder");
        }
        if self.path.max_class >= link.max_class {
            return fail(
                "path.max_class",
                "must be below the links' max_class: a path's frame travels inside a FORWARD",
            );
        }
        if link.unreachable_after_rounds <= crate::link::SUSPECT_AFTER_ROUNDS {
            return fail(
                "unreachable_after_rounds",
                "must be at least 3 with the fabric: a link is suspected after 2 silent \
                 rounds, and its queued verbs move to another path before it is declared \
                 unreachable",
            );
        }
        if self.advert_rounds == 0 || self.relay_queue == 0 || self.max_hops == 0 {
            return fail(
                "fabric",
                "advert_rounds, relay_queue and max_hops must be at least 1",
            );
        }
        Ok(())
    }
}

/// Counters of the fabric; never reset while the node lives.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FabricStats {
    pub adverts_sent: u64,
    pub adverts_received: u64,
    /// ADVERT or FORWARD payloads that did not decode.
    pub malformed: u64,
    /// FORWARD frames passed on towards another node.
    pub relayed: u64,
    /// FORWARD frames that reached this node.
    pub delivered: u64,
    pub dropped_no_route: u64,
    pub dropped_hops: u64,
    pub dropped_queue_full: u64,
    /// The most FORWARD frames that waited for one link at once.
    pub relay_queue_peak: u64,
    /// Relayed or path frames too large for the next link's frames.
    pub dropped_too_large: u64,
    /// A path was needed and the table of paths was full.
    pub dropped_no_path: u64,
    /// Relayed frames that waited on a link that stopped being usable.
    pub dropped_link_lost: u64,
    pub paths_opened: u64,
    /// Queued verbs moved from a suspected link to a path.
    pub verbs_rerouted: u64,
    pub resolves_sent: u64,
    /// Decisions carried out here for a peer's link.
    pub resolved_as_target: u64,
    /// RESOLVE or RESOLVED frames this node could not act on: stale, or
    /// from a node it has no single link to.
    pub resolves_ignored: u64,
    /// Transfers of this node settled by an answer over a path.
    pub resolved_as_initiator: u64,
}

/// A FORWARD payload waiting for its link.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Relay {
    len: u16,
    payload: [u8; wire::payload_capacity(wire::MAX_CLASS)],
}

/// What the fabric keeps per link.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Port {
    up: bool,
    usable: bool,
    /// The node at the other end (0 before its HELLO).
    peer: u64,
    peer_epoch: u32,
    relays: VecDeque<Relay>,
    /// Another whole advert is wanted (its pages go after the pages of
    /// the one under way, if any).
    advert_due: bool,
    /// The first node id of the next page of the advert under way.
    advert_page: Option<u64>,
    /// The fabric's frames and the link's own take turns on the link.
    fabric_next: bool,
    last_advert_round: u64,
    last_resolve_round: u64,
}

/// An end-to-end path to another node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Path {
    pub peer: u64,
    pub link: Link,
    /// The link its last frame went out on.
    via: Option<LinkId>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Fabric {
    cfg: FabricConfig,
    routes: Routes,
    ports: Vec<Port>,
    pub paths: Vec<Path>,
    /// Where the next look for a path frame starts, so paths share links.
    next_path: usize,
    /// Scratch space, kept to avoid allocating or zeroing per frame.
    heard: Unhashed<Vec<Heard>>,
    scratch: Unhashed<Box<[u8; MAX_FRAME]>>,
    resolutions: Unhashed<Vec<Resolution>>,
    /// Counters record, never steer: not part of the state.
    stats: Unhashed<FabricStats>,
    /// The routes changed since paths were last matched against them
    /// ([`Fabric::settle_readdressed`]).
    routes_new: bool,
}

impl Fabric {
    pub fn new(cfg: FabricConfig, me: Member, links: usize) -> Fabric {
        let mut f = Fabric {
            cfg,
            routes: Routes::new(me),
            ports: Vec::new(),
            // Grown as paths open (rarely, and never on a frame's way): a
            // path holds a link, over a kilobyte, and most nodes need few.
            paths: Vec::new(),
            next_path: 0,
            heard: Unhashed(Vec::with_capacity(MAX_NODES)),
            scratch: Unhashed(Box::new([0; MAX_FRAME])),
            resolutions: Unhashed(Vec::with_capacity(usize::from(crate::config::MAX_SLOTS))),
            stats: Unhashed(FabricStats::default()),
            routes_new: false,
        };
        for _ in 0..links {
            f.add_port();
        }
        f
    }

    pub fn add_port(&mut self) {
        let port = self.new_port();
        self.ports.push(port);
    }

    /// Link `index` starts again for another neighbour: its port as new.
    pub fn renew_port(&mut self, index: usize) {
        let port = self.new_port();
        self.ports[index] = port;
    }

    fn new_port(&self) -> Port {
        Port {
            up: false,
            usable: false,
            peer: 0,
            peer_epoch: 0,
            relays: VecDeque::with_capacity(self.cfg.relay_queue.min(RELAY_QUEUE_START)),
            advert_due: false,
            advert_page: None,
            fabric_next: true,
            last_advert_round: 0,
            last_resolve_round: 0,
        }
    }

    pub fn routes(&self) -> &Routes {
        &self.routes
    }

    pub fn routes_mut(&mut self) -> &mut Routes {
        &mut self.routes
    }

    pub fn stats(&self) -> &FabricStats {
        &self.stats
    }

    pub fn path_index(&self, node: u64) -> Option<usize> {
        self.paths.iter().position(|p| p.peer == node)
    }

    /// The path to `node`, opened if there is none and room for one.
    pub fn path_to(&mut self, node: u64) -> Option<usize> {
        if let Some(i) = self.path_index(node) {
            return Some(i);
        }
        if self.paths.len() >= MAX_NODES {
            return None;
        }
        let id = PATH_BASE + self.paths.len() as LinkId;
        self.paths.push(Path {
            peer: node,
            link: Link::with_verbs(id, self.cfg.path, 0),
            via: None,
        });
        self.stats.paths_opened += 1;
        Some(self.paths.len() - 1)
    }

    /// The path a verb for `node` takes when no usable link leads there:
    /// the path to it if a route exists, or if one was opened before (the
    /// routes are converging after a change); the verb then waits on the
    /// path for a route, as long as the path's bring-up rules allow.
    pub fn path_for(&mut self, node: u64) -> Option<usize> {
        let i = match self.routes.route(node) {
            Some(_) => self.path_to(node)?,
            None => self.path_index(node)?,
        };
        // The fabric's word that the node is there: a path that gave up on
        // bring-up (its HELLOs cross several busy hops) tries again rather
        // than fail the verb.
        self.paths[i].link.expect_peer();
        Some(i)
    }

    /// The routes changed: every link tells its neighbour, and every
    /// neighbour now reachable another way gets a path, brought up before
    /// any verb needs it, so that failing over to it costs no bring-up.
    /// Paths to other nodes open when a verb first needs one: a path keeps
    /// itself alive, so opening one to every node would cost frames in the
    /// square of the fabric's size.
    fn routes_changed(&mut self) {
        self.routes_new = true;
        for p in &mut self.ports {
            p.advert_due = true;
        }
        for i in 0..self.ports.len() {
            let peer = self.ports[i].peer;
            if peer != 0 && self.routes.route(peer).is_some() {
                let _ = self.path_to(peer);
            }
        }
    }

    // ----- receive ----------------------------------------------------------

    /// A fabric frame `link` accepted from its peer.
    pub fn receive<O: Observer, M: Store>(
        &mut self,
        link: LinkId,
        transition: Transition,
        payload: &[u8],
        now: Nanos,
        links: &mut [Link],
        sh: &mut Shared<'_, O, M>,
    ) {
        match transition {
            Transition::Advert => {
                let Some(page) = envelope::decode_advert(payload, &mut self.heard) else {
                    self.stats.malformed += 1;
                    return;
                };
                self.stats.adverts_received += 1;
                if self.routes.heard(link, &page, &self.heard) {
                    self.routes_changed();
                    self.follow_unusable(links, sh);
                    // Unless following an unusable link did it already.
                    if self.routes_new {
                        self.settle_readdressed(links, sh);
                    }
                }
            }
            Transition::Forward => {
                let Some(fwd) = envelope::decode_forward(payload) else {
                    self.stats.malformed += 1;
                    return;
                };
                if fwd.dst == self.routes.me().node {
                    self.stats.delivered += 1;
                    self.deliver(&fwd, now, links, sh);
                } else if fwd.hops_left == 0 {
                    self.stats.dropped_hops += 1;
                } else {
                    self.stats.relayed += 1;
                    self.enqueue(fwd.dst, fwd.src, fwd.hops_left - 1, fwd.kind, fwd.body);
                }
            }
            _ => self.stats.malformed += 1,
        }
    }

    fn deliver<O: Observer, M: Store>(
        &mut self,
        fwd: &Forward<'_>,
        now: Nanos,
        links: &mut [Link],
        sh: &mut Shared<'_, O, M>,
    ) {
        match fwd.kind {
            Kind::Path => {
                let Some(i) = self.path_to(fwd.src) else {
                    self.stats.dropped_no_path += 1;
                    return;
                };
                // A fabric frame inside a path is meaningless: the path
                // counts it and nothing more happens.
                let _ = self.paths[i].link.handle_frame(fwd.body, now, sh);
            }
            Kind::Resolve => {
                let Some(res) = Resolution::decode(fwd.body) else {
                    self.stats.malformed += 1;
                    return;
                };
                let outcome = if res.target_epoch != sh.epoch {
                    Outcome::TargetRestarted
                } else {
                    let mut to_src = links
                        .iter_mut()
                        .enumerate()
                        .filter(|(_, l)| l.peer_id() == fwd.src);
                    let (settled, link) = match (to_src.next(), to_src.next()) {
                        // One link to the source: the decision is for it.
                        (Some((i, l)), None) => {
                            // F2: the source settles the link's transfers by
                            // another path because it cannot use the link:
                            // neither can this end, and its answer, routed
                            // now, must not go into it.
                            l.peer_lost_us_elsewhere();
                            (l.resolve(&res, sh), Some(i))
                        }
                        _ => (false, None),
                    };
                    if let Some(i) = link {
                        self.follow_state(i as LinkId, &links[i]);
                    }
                    if !settled {
                        self.stats.resolves_ignored += 1;
                        return;
                    }
                    Outcome::Settled
                };
                self.stats.resolved_as_target += 1;
                let mut body = [0; envelope::RESOLVED_LEN];
                res.encode_answer(outcome, &mut body);
                self.send_to(fwd.src, Kind::Resolved, &body);
            }
            Kind::Resolved => {
                let Some((res, outcome)) = Resolution::decode_answer(fwd.body) else {
                    self.stats.malformed += 1;
                    return;
                };
                if res.initiator_epoch != sh.epoch {
                    return;
                }
                let mut to_src = links
                    .iter()
                    .enumerate()
                    .filter(|(_, l)| l.peer_id() == fwd.src);
                let (Some((l, _)), None) = (to_src.next(), to_src.next()) else {
                    self.stats.resolves_ignored += 1;
                    return;
                };
                if links[l].resolved(&res, outcome, sh) {
                    self.stats.resolved_as_initiator += 1;
                    // A reversed verb goes again: over the path now, not
                    // when the link's next round comes.
                    self.follow(l as LinkId, links, sh);
                }
            }
        }
    }

    /// Queues a FORWARD from this node to `dst`.
    fn send_to(&mut self, dst: u64, kind: Kind, body: &[u8]) {
        let (me, hops) = (self.routes.me().node, self.cfg.max_hops);
        self.enqueue(dst, me, hops, kind, body);
    }

    /// Queues a FORWARD on the link its destination is routed through.
    fn enqueue(&mut self, dst: u64, src: u64, hops_left: u8, kind: Kind, body: &[u8]) {
        let Some(route) = self.routes.route(dst) else {
            self.stats.dropped_no_route += 1;
            return;
        };
        let port = &mut self.ports[usize::from(route.via)];
        if port.relays.len() >= self.cfg.relay_queue {
            self.stats.dropped_queue_full += 1;
            return;
        }
        let len = envelope::FORWARD_HEAD + body.len();
        let mut relay = Relay {
            len: len as u16,
            payload: [0; wire::payload_capacity(wire::MAX_CLASS)],
        };
        envelope::encode_forward(&mut relay.payload, dst, src, hops_left, kind, body);
        port.relays.push_back(relay);
        let waiting = port.relays.len() as u64;
        self.stats.relay_queue_peak = self.stats.relay_queue_peak.max(waiting);
    }

    // ----- transmit ---------------------------------------------------------

    /// Whether the fabric's frame goes before the link's own next on
    /// `link`: they take turns, so relays neither wait behind a busy
    /// link's answers nor hold them up.
    pub fn turn(&self, link: LinkId) -> bool {
        self.ports[usize::from(link)].fabric_next
    }

    /// A frame went out on `link`: the fabric's, or the link's own.
    pub fn sent(&mut self, link: LinkId, fabric: bool) {
        self.ports[usize::from(link)].fabric_next = !fabric;
    }

    /// The next fabric frame for `link`, if one is due: its ADVERT, a
    /// relayed frame, or a frame of a path routed through it.
    pub fn poll_transmit<O: Observer, M: Store>(
        &mut self,
        link: LinkId,
        l: &mut Link,
        now: Nanos,
        buf: &mut [u8],
        sh: &mut Shared<'_, O, M>,
    ) -> Option<usize> {
        if !l.is_up() {
            return None;
        }
        let port = &mut self.ports[usize::from(link)];
        if port.advert_page.is_none() && port.advert_due {
            port.advert_due = false;
            port.advert_page = Some(0);
            port.last_advert_round = l.round();
        }
        if let Some(first) = port.advert_page {
            return self.send_advert(link, first, l, now, buf, sh.epoch);
        }
        while let Some(relay) = self.ports[usize::from(link)].relays.pop_front() {
            let len = usize::from(relay.len);
            match wire::class_for_payload(len, l.class_to_peer()) {
                Some(class) => {
                    return Some(l.send_fabric(
                        sh.epoch,
                        now,
                        buf,
                        Transition::Forward,
                        class,
                        |p| p[..len].copy_from_slice(&relay.payload[..len]),
                    ));
                }
                None => self.stats.dropped_too_large += 1,
            }
        }
        self.poll_paths(link, l, now, buf, sh)
    }

    /// The page of `link`'s advert that starts at node id `first`, in the
    /// smallest class that holds the entries it carries.
    fn send_advert(
        &mut self,
        link: LinkId,
        first: u64,
        l: &mut Link,
        now: Nanos,
        buf: &mut [u8],
        epoch: u32,
    ) -> Option<usize> {
        let largest = l.class_to_peer();
        let room = envelope::advert_room(wire::payload_capacity(largest));
        let port = &mut self.ports[usize::from(link)];
        if room == 0 {
            // Frames too small for an entry: a peer that runs no fabric.
            port.advert_page = None;
            return None;
        }
        let entries = self.routes.advert(link, first).take(room).count();
        let class =
            wire::class_for_payload(envelope::advert_len(entries), largest).unwrap_or(largest);
        let view = self.routes.view_id();
        let routes = &self.routes;
        let mut next = None;
        let len = l.send_fabric(epoch, now, buf, Transition::Advert, class, |p| {
            next = envelope::encode_advert(p, view, first, routes.advert(link, first)).1;
        });
        port.advert_page = next;
        self.stats.adverts_sent += 1;
        Some(len)
    }

    /// A frame of a path whose route goes out through `link`, wrapped in a
    /// FORWARD.
    fn poll_paths<O: Observer, M: Store>(
        &mut self,
        link: LinkId,
        l: &mut Link,
        now: Nanos,
        buf: &mut [u8],
        sh: &mut Shared<'_, O, M>,
    ) -> Option<usize> {
        let n = self.paths.len();
        let me = self.routes.me().node;
        let inner = &mut self.scratch[..];
        for k in 0..n {
            let i = (self.next_path + k) % n;
            let peer = self.paths[i].peer;
            if self.routes.route(peer).is_none_or(|r| r.via != link) {
                continue;
            }
            let Some(len) = self.paths[i].link.poll_transmit(now, inner, sh) else {
                continue;
            };
            self.next_path = (i + 1) % n;
            self.paths[i].via = Some(link);
            let total = envelope::FORWARD_HEAD + len;
            let Some(class) = wire::class_for_payload(total, l.class_to_peer()) else {
                self.stats.dropped_too_large += 1;
                continue;
            };
            let hops = self.cfg.max_hops;
            return Some(
                l.send_fabric(sh.epoch, now, buf, Transition::Forward, class, |p| {
                    envelope::encode_forward(p, peer, me, hops, Kind::Path, &inner[..len])
                }),
            );
        }
        None
    }

    // ----- following the links ----------------------------------------------

    /// Follows `link` after it handled an input: a restart of its peer
    /// learned by the path, the routes through it, and while it is not
    /// usable, failover and resolution over the path to its peer.
    pub fn follow<O: Observer, M: Store>(
        &mut self,
        link: LinkId,
        links: &mut [Link],
        sh: &mut Shared<'_, O, M>,
    ) {
        let peer = links[usize::from(link)].peer_id();
        // A usable link hears its peer's restarts itself; the scans below
        // are for links that cannot, and stay off the path of every frame.
        let usable = links[usize::from(link)].is_usable();
        if !usable && let Some(p) = self.path_index(peer) {
            links[usize::from(link)].peer_restarted_elsewhere(self.paths[p].link.peer_epoch(), sh);
        }
        self.follow_state(link, &links[usize::from(link)]);
        if self.routes_new {
            self.settle_readdressed(links, sh);
        }
        if links[usize::from(link)].is_usable() || peer == 0 || self.routes.route(peer).is_none() {
            return;
        }
        // A peer reached by two links cannot tell which of them a
        // decision sent by another path is for: those links settle their
        // transfers themselves.
        if links.iter().filter(|o| o.peer_id() == peer).count() > 1 {
            return;
        }
        self.fail_over(&mut links[usize::from(link)], sh);
        self.resolve_doubts(link, &mut links[usize::from(link)], sh.epoch);
    }

    /// A route may now lead to the peer of a link that is not usable: its
    /// queued verbs move and its doubts are resolved at once, not at the
    /// link's next round.
    fn follow_unusable<O: Observer, M: Store>(
        &mut self,
        links: &mut [Link],
        sh: &mut Shared<'_, O, M>,
    ) {
        for i in 0..links.len() {
            if !links[i].is_usable() {
                self.follow(i as LinkId, links, sh);
            }
        }
    }

    /// Routes come and go with the link's state; a restarted neighbour's
    /// old vector goes (it speaks anew); a usable link advertises every
    /// `advert_rounds` of its rounds.
    fn follow_state(&mut self, link: LinkId, l: &Link) {
        let (up, usable) = (l.is_up(), l.is_usable());
        let port = &mut self.ports[usize::from(link)];
        let restarted = l.peer_epoch() != port.peer_epoch;
        port.peer = l.peer_id();
        port.peer_epoch = l.peer_epoch();
        if (up, usable) == (port.up, port.usable) && !restarted {
            if usable && l.round() >= port.last_advert_round + self.cfg.advert_rounds {
                port.advert_due = true;
            }
            return;
        }
        port.up = up;
        port.usable = usable;
        port.advert_due = usable;
        port.advert_page = None;
        if !usable {
            self.stats.dropped_link_lost += port.relays.len() as u64;
            port.relays.clear();
        }
        let mut changed = false;
        if restarted {
            changed |= self.routes.set_state(link, false, false);
        }
        changed |= self.routes.set_state(link, up, usable);
        if changed {
            self.routes_changed();
        }
        if !usable {
            self.reroute_paths(link);
        }
    }

    /// A node that gave its address up came back as a new incarnation at
    /// another (PROTOCOL.md, "Addresses", N5): a path to its old node id
    /// settles what the old incarnation left by the restart rules as soon
    /// as a route names the new one, since no HELLO of the old id will
    /// ever come.
    /// A link that cannot hear its peer (cut, say) learns it the same way:
    /// its transfers in doubt could never be resolved over a path to the
    /// old node id.
    fn settle_readdressed<O: Observer, M: Store>(
        &mut self,
        links: &mut [Link],
        sh: &mut Shared<'_, O, M>,
    ) {
        self.routes_new = false;
        let routes = &self.routes;
        let back_elsewhere = |peer: u64, known: u32| {
            if known == 0 || !crate::address::is_made(peer) {
                return None;
            }
            routes.table().iter().map(|r| r.member).find(|m| {
                m.node != peer && crate::address::same_node(m.node, peer) && m.epoch > known
            })
        };
        let paths = self.paths.iter_mut().map(|p| &mut p.link);
        for link in paths.chain(links.iter_mut().filter(|l| !l.is_usable())) {
            if let Some(m) = back_elsewhere(link.peer_id(), link.peer_epoch()) {
                link.peer_restarted_elsewhere(m.epoch, sh);
            }
        }
    }

    /// `link` stopped being usable: the paths routed through it lost what
    /// they sent that way, and send it again (F1).
    fn reroute_paths(&mut self, link: LinkId) {
        for p in &mut self.paths {
            if p.via == Some(link) {
                p.via = None;
                p.link.route_lost();
            }
        }
    }

    /// Verbs queued on the unusable link `l`, and not yet sent, move to
    /// the path to its peer (those the path's frames can carry).
    fn fail_over<O: Observer, M: Store>(&mut self, l: &mut Link, sh: &mut Shared<'_, O, M>) {
        let Some(p) = self.path_for(l.peer_id()) else {
            self.stats.dropped_no_path += 1;
            return;
        };
        let moved = l.hand_over(&mut self.paths[p].link, sh);
        self.stats.verbs_rerouted += moved as u64;
    }

    /// Once per round of the unusable link `l`: a RESOLVE to its peer for
    /// every transfer it has not settled.
    fn resolve_doubts(&mut self, link: LinkId, l: &mut Link, epoch: u32) {
        let port = &mut self.ports[usize::from(link)];
        if l.round() <= port.last_resolve_round {
            return;
        }
        port.last_resolve_round = l.round();
        self.resolutions.clear();
        let resolutions = &mut self.resolutions;
        l.doubts(epoch, |r| resolutions.push(r));
        for i in 0..self.resolutions.len() {
            let mut body = [0; envelope::RESOLVE_LEN];
            self.resolutions[i].encode(&mut body);
            self.stats.resolves_sent += 1;
            self.send_to(l.peer_id(), Kind::Resolve, &body);
        }
    }
}
