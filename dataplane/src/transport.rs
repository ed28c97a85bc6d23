//! The protocol a queue runs between its driver and its applications: OAE,
//! or the model of RoCE's RC transport it is compared with. Both are
//! sans-IO and act on the dataplane's one shared memory; the pipeline drives
//! either through [`Transport`] and is compiled once per transport, so
//! nothing is dispatched per frame.

use std::collections::VecDeque;

use oae_proto::Opcode;
use oae_proto::address::{self, MAX_ADDRESS};
use oae_proto::verb::{Output, Verb, VerbError};
use oae_proto::{
    DownReason, Event, LinkChange, LinkId, Nanos, NoObserver, Node, PATH_BASE, PostError,
    PostedReceive, SharedMemory, Store, TransmitBuffers, VerbId,
};
use oae_rc_model::{RcEndpoint, RcEvent};

use crate::log::Severity;
use crate::report::{fabric_counters, link_state, stats_report};
use oae_client::api::NotSubmitted;
use oae_client::control::{ControlError, KeyChange, KeyState};
use oae_client::stats::{LinkCounters, named_counters};
use oae_client::status::{
    FabricStatus, LinkState, PathStatus, ProtocolStatus, RcStatus, RouteStatus,
};
use oae_proto::auth::{Authenticator, LinkIdentity, LinkKey};
use oae_proto::handshake::KeyAgreementConfig;

/// What a transport tells the pipeline.
pub enum TransportEvent<'a> {
    /// A verb's one completion, lent where the transport keeps it.
    Completed {
        id: VerbId,
        result: &'a Result<Output, VerbError>,
    },
    /// Something worth a log line (a link came up, the QP failed).
    Notice(Severity, String),
    /// `link` (or path) gave up on a peer it never heard: worth a line
    /// unless the link has no peer yet (a vacant link of a discovering
    /// queue).
    NeverHeard(LinkId),
    /// The node at the other end of `link` (or path) is a new incarnation:
    /// whatever a workload knew of its memory is gone.
    PeerRestarted {
        link: LinkId,
        node: u64,
        notice: String,
    },
    /// Receive `id` of `link` holds a message of `len` bytes.
    Received {
        link: LinkId,
        id: u64,
        len: u16,
        imm: Option<u32>,
    },
}

pub trait Transport: Send + 'static {
    /// `"oae"` or `"rc-model"`.
    fn name(&self) -> &'static str;
    /// Whether it runs verbs of this kind.
    fn runs(&self, kind: Opcode) -> bool;
    /// Links, numbered from 0 in the order of the queue's peers.
    fn links(&self) -> usize;
    fn handle_frame(&mut self, link: LinkId, payload: &[u8], now: Nanos);
    fn poll_transmit(&mut self, link: LinkId, now: Nanos, buf: &mut [u8]) -> Option<usize>;
    /// Up to `max` frames of `link` into the buffers `out` lends, in one
    /// call; how many.
    fn poll_transmit_burst(
        &mut self,
        link: LinkId,
        now: Nanos,
        max: usize,
        out: &mut impl TransmitBuffers,
    ) -> usize {
        let mut sent = 0;
        while sent < max {
            let Some(buf) = out.next_buffer() else {
                break;
            };
            let Some(len) = self.poll_transmit(link, now, buf) else {
                break;
            };
            out.filled(len);
            sent += 1;
        }
        sent
    }
    fn poll_timeout(&self) -> Option<Nanos>;
    fn handle_timeout(&mut self, now: Nanos);
    fn submit(&mut self, link: LinkId, id: VerbId, verb: &Verb) -> Result<(), NotSubmitted>;
    /// Queues a verb for node `node` wherever it is: a link to it, or a
    /// path through the fabric. Returns the link or path that took it.
    fn submit_to(&mut self, node: u64, id: VerbId, verb: &Verb) -> Result<LinkId, NotSubmitted>;
    /// The fabric's status, if the transport runs one.
    fn fabric(&self) -> Option<FabricStatus> {
        None
    }
    /// Hands every event raised so far to `on`, oldest first.
    fn drain_events(&mut self, on: impl FnMut(TransportEvent<'_>));
    /// Nothing in flight and nothing owed to any peer.
    fn is_quiescent(&self) -> bool;
    /// The peer's node id, once the link has heard it.
    fn peer_node(&self, link: LinkId) -> Option<u64>;
    /// A link's state for `status`.
    fn status(&self, link: LinkId) -> Option<LinkState>;
    /// Every counter of a link, for `stats` (the pipeline fills in which
    /// link and peer).
    fn stats(&self, link: LinkId) -> LinkCounters;
    /// The memory the peers' verbs act on.
    fn memory(&self) -> &SharedMemory;
    /// Which link `link` is on the wire (authentication derives each
    /// direction's key from it).
    fn link_identity(&mut self, _link: LinkId, _identity: LinkIdentity) {}
    /// Writes the node's announcement (docs/PROTOCOL.md, "Discovery") into
    /// `buf`: `None` for a transport that does not discover neighbours.
    fn write_announcement(&self, _buf: &mut [u8]) -> Option<usize> {
        None
    }
    /// Whether `link` could be made new for another neighbour: it never
    /// came up and holds nothing.
    fn link_renewable(&self, _link: LinkId) -> bool {
        false
    }
    /// Makes `link` new for another neighbour, if it is renewable.
    fn renew_link(&mut self, _link: LinkId) -> bool {
        false
    }
    /// If a member of the agreed view with a lower node id holds this
    /// node's address (docs/PROTOCOL.md, "Addresses", N3): that member,
    /// and a free address to come back at (N4).
    fn address_yield(&self) -> Option<(u64, u16)> {
        None
    }
    /// Lends `link` a receive for its next SEND.
    fn post_receive(&mut self, _link: LinkId, _receive: PostedReceive) -> Result<(), ControlError> {
        Err(ControlError::unsupported(format!(
            "the {} transport has no SEND",
            self.name()
        )))
    }
    /// Withdraws a receive no message holds; false if one does (or it is
    /// not posted).
    fn cancel_receive(&mut self, _link: LinkId, _id: u64) -> bool {
        false
    }
    /// Changes a link's keys (`oaectl key`).
    fn change_key(&mut self, _link: LinkId, _change: &KeyChange) -> Result<KeyState, ControlError> {
        Err(ControlError::unsupported(format!(
            "the {} transport does not authenticate its frames",
            self.name()
        )))
    }
}

/// How a queue's links are keyed (`[queue.auth]`).
#[derive(Clone, Debug)]
pub enum LinkKeys {
    None,
    /// A key shared by both ends, under this key number.
    Shared(u8, LinkKey),
    /// Keys agreed by identity, per link incarnation.
    Agreed(KeyAgreementConfig),
}

/// OAE: one node per polling core, a link per peer, over its core's handle
/// on the shared memory.
pub struct Oae {
    pub node: Node<NoObserver, SharedMemory>,
    /// How the links are keyed, until `link_identity` gives each link its
    /// authenticator or key agreement (inside the node).
    keys: LinkKeys,
    /// Each link's reasons for not coming up already told in a notice
    /// since it was last up (bit n: the reason of code n): a reason is
    /// logged when it first appears, and again only after the link was up.
    told: Vec<u16>,
    /// Each link's untrusted peer already named since it was last up: its
    /// every handshake is refused, the identity logged once.
    told_untrusted: Vec<bool>,
    /// Reasons to tell, oldest first (one per reason per link per outage).
    down_notices: VecDeque<(LinkId, DownReason)>,
}

impl Oae {
    /// A link's change as the pipeline logs it; a link that came up may
    /// tell its reasons for being down again at its next outage.
    fn link_event(&mut self, link: LinkId, change: LinkChange) -> TransportEvent<'static> {
        let status = self.node.link_status(link);
        let (epoch, peer) = status.map_or((0, 0), |s| (s.peer_epoch, s.peer_id));
        if change == LinkChange::Up
            && let Some(told) = self.told.get_mut(usize::from(link))
        {
            *told = 0;
            self.told_untrusted[usize::from(link)] = false;
        }
        let kind = if link >= PATH_BASE { "path" } else { "link" };
        let peer_name = format!("node {peer:#x} (epoch {epoch})");
        let (severity, notice) = match change {
            LinkChange::Up => (Severity::Info, format!("{kind} {link} up to {peer_name}")),
            // Epoch 0: nothing was ever heard from the other end.
            LinkChange::Unreachable if epoch == 0 => return TransportEvent::NeverHeard(link),
            LinkChange::Unreachable => (
                Severity::Warn,
                format!(
                    "{kind} {link} down: {peer_name} stopped answering; its verbs wait for \
                     it or fail over"
                ),
            ),
            LinkChange::PeerRestarted => (
                Severity::Warn,
                format!(
                    "{kind} {link}: the peer restarted, now {peer_name}; what it held in \
                     doubt was settled"
                ),
            ),
            LinkChange::Keyed => (
                Severity::Info,
                format!("{kind} {link} keyed by a handshake with {peer_name}"),
            ),
        };
        match change {
            LinkChange::PeerRestarted => TransportEvent::PeerRestarted {
                link,
                node: self.node.link_peer(link).unwrap_or(peer),
                notice,
            },
            _ => TransportEvent::Notice(severity, notice),
        }
    }

    pub fn new(node: Node<NoObserver, SharedMemory>, keys: LinkKeys) -> Oae {
        Oae {
            told: vec![0; node.links()],
            told_untrusted: vec![false; node.links()],
            down_notices: VecDeque::with_capacity(DownReason::ALL.len()),
            node,
            keys,
        }
    }

    /// After a frame of `link` was handled or dropped: a reason for the
    /// link not coming up that is new since it was last up gets a notice.
    /// One field read when there is none.
    fn follow_down_reason(&mut self, link: LinkId) {
        let Some(reason) = self.node.link_down_reason(link) else {
            return;
        };
        let bit = 1 << reason.code();
        if let Some(told) = self.told.get_mut(usize::from(link))
            && *told & bit == 0
        {
            *told |= bit;
            self.down_notices.push_back((link, reason));
        }
    }
}

impl Transport for Oae {
    fn name(&self) -> &'static str {
        "oae"
    }

    fn runs(&self, _: Opcode) -> bool {
        true
    }

    fn links(&self) -> usize {
        self.node.links()
    }

    fn handle_frame(&mut self, link: LinkId, payload: &[u8], now: Nanos) {
        // The node opens an authenticated link's frames itself, and
        // records why it dropped one as it records its own drops.
        self.node.handle_frame(link, payload, now);
        self.follow_down_reason(link);
    }

    fn poll_transmit(&mut self, link: LinkId, now: Nanos, buf: &mut [u8]) -> Option<usize> {
        self.node.poll_transmit(link, now, buf)
    }

    fn poll_transmit_burst(
        &mut self,
        link: LinkId,
        now: Nanos,
        max: usize,
        out: &mut impl TransmitBuffers,
    ) -> usize {
        self.node.poll_transmit_burst(link, now, max, out)
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        self.node.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Nanos) {
        self.node.handle_timeout(now);
    }

    fn submit(&mut self, link: LinkId, id: VerbId, verb: &Verb) -> Result<(), NotSubmitted> {
        self.node.submit(link, id, verb).map_err(NotSubmitted::from)
    }

    fn submit_to(&mut self, node: u64, id: VerbId, verb: &Verb) -> Result<LinkId, NotSubmitted> {
        self.node
            .submit_to(node, id, verb)
            .map_err(NotSubmitted::from)
    }

    fn fabric(&self) -> Option<FabricStatus> {
        let view = self.node.view()?;
        let paths = self
            .node
            .paths()
            .filter_map(|(id, node)| {
                let s = self.node.link_status(id)?;
                Some(PathStatus {
                    node,
                    up: s.up,
                    srtt_ns: s.srtt,
                })
            })
            .collect();
        Some(FabricStatus {
            view: view.number,
            members: view.members.iter().map(|m| (m.node, m.epoch)).collect(),
            agreed: self.node.view_agreed(),
            routes: self
                .node
                .routes()
                .iter()
                .map(|r| RouteStatus {
                    node: r.member.node,
                    epoch: r.member.epoch,
                    hops: r.hops,
                    via: r.via,
                })
                .collect(),
            paths,
            in_doubt: self.node.in_doubt(),
            locked_words: self.node.memory().locked_words(),
            counters: fabric_counters(self.node.fabric_stats()?),
        })
    }

    fn drain_events(&mut self, mut on: impl FnMut(TransportEvent<'_>)) {
        while let Some((link, reason)) = self.down_notices.pop_front() {
            on(TransportEvent::Notice(
                Severity::Warn,
                format!(
                    "link {link} is not coming up: {} (code {}): {}",
                    reason.name(),
                    reason.code(),
                    reason.text()
                ),
            ));
        }
        loop {
            let changed = match self.node.peek_event() {
                None => break,
                Some(Event::Completed { id, result, .. }) => {
                    on(TransportEvent::Completed { id: *id, result });
                    None
                }
                Some(&Event::Link { link, change }) => Some((link, change)),
                Some(&Event::Received { link, id, len, imm }) => {
                    on(TransportEvent::Received { link, id, len, imm });
                    None
                }
                Some(Event::Untrusted { link, .. })
                    if std::mem::replace(&mut self.told_untrusted[usize::from(*link)], true) =>
                {
                    None
                }
                Some(Event::Untrusted { link, identity }) => {
                    on(TransportEvent::Notice(
                        Severity::Warn,
                        format!(
                            "link {link} refused: its peer proved identity {identity}, which is \
                         not in the trust list"
                        ),
                    ));
                    None
                }
            };
            self.node.pop_event();
            if let Some((link, change)) = changed {
                on(self.link_event(link, change));
            }
        }
    }

    fn is_quiescent(&self) -> bool {
        self.node.is_quiescent()
    }

    fn peer_node(&self, link: LinkId) -> Option<u64> {
        let s = self.node.link_status(link)?;
        (s.peer_epoch != 0).then_some(s.peer_id)
    }

    fn status(&self, link: LinkId) -> Option<LinkState> {
        link_state(&self.node, link)
    }

    fn stats(&self, link: LinkId) -> LinkCounters {
        let auth = self.node.link_auth(link).map(Authenticator::stats);
        stats_report(&self.node, link, auth)
    }

    fn write_announcement(&self, buf: &mut [u8]) -> Option<usize> {
        self.node.write_announcement(buf)
    }

    fn link_renewable(&self, link: LinkId) -> bool {
        self.node.link_renewable(link)
    }

    fn address_yield(&self) -> Option<(u64, u16)> {
        let holder = self.node.address_holder()?;
        let me = self.node.node_id();
        let view = self.node.view()?;
        // None free: the node keeps its address (N4), the conflict stays.
        let free = address::free_address(view, me >> 16, address::address_of(me), MAX_ADDRESS)?;
        Some((holder, free))
    }

    fn renew_link(&mut self, link: LinkId) -> bool {
        let renewed = self.node.renew_link(link);
        if renewed {
            self.told[usize::from(link)] = 0;
            self.told_untrusted[usize::from(link)] = false;
        }
        renewed
    }

    fn link_identity(&mut self, link: LinkId, identity: LinkIdentity) {
        // A link the node has: the queue names its own links.
        let _ = match &self.keys {
            LinkKeys::None => Ok(()),
            LinkKeys::Shared(number, key) => self
                .node
                .authenticate_link(link, Authenticator::new(identity, *number, key)),
            LinkKeys::Agreed(cfg) => self.node.agree_keys(link, cfg.clone(), identity),
        };
    }

    fn post_receive(&mut self, link: LinkId, receive: PostedReceive) -> Result<(), ControlError> {
        self.node.post_receive(link, receive).map_err(|e| match e {
            PostError::UnknownLink(_) => ControlError::not_found(e.to_string()),
            PostError::QueueFull => ControlError::conflict(e.to_string()),
            PostError::BadBuffer(_) => ControlError::bad_request(e.to_string()),
        })
    }

    fn cancel_receive(&mut self, link: LinkId, id: u64) -> bool {
        self.node.cancel_receive(link, id)
    }

    fn change_key(&mut self, link: LinkId, change: &KeyChange) -> Result<KeyState, ControlError> {
        let a = self.node.link_auth_mut(link).ok_or_else(|| {
            ControlError::unsupported(format!(
                "link {link} is not authenticated: give its queue an [queue.auth] key in the \
                     configuration (a link cannot start authenticating while it runs)"
            ))
        })?;
        change.apply(a).map_err(ControlError::bad_request)?;
        Ok(KeyState::of(a))
    }

    fn memory(&self) -> &SharedMemory {
        self.node.memory()
    }
}

/// The RC model: one queue pair, connected from the start.
pub struct RcModel {
    pub endpoint: RcEndpoint<SharedMemory>,
}

impl Transport for RcModel {
    fn name(&self) -> &'static str {
        "rc-model"
    }

    fn runs(&self, kind: Opcode) -> bool {
        oae_rc_model::runs(kind)
    }

    fn links(&self) -> usize {
        1
    }

    fn handle_frame(&mut self, _link: LinkId, payload: &[u8], now: Nanos) {
        self.endpoint.handle_frame(payload, now);
    }

    fn poll_transmit(&mut self, _link: LinkId, now: Nanos, buf: &mut [u8]) -> Option<usize> {
        self.endpoint.poll_transmit(now, buf)
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        self.endpoint.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Nanos) {
        self.endpoint.handle_timeout(now);
    }

    fn submit_to(&mut self, node: u64, _: VerbId, _: &Verb) -> Result<LinkId, NotSubmitted> {
        // One queue pair to one peer, addressed by link only.
        Err(NotSubmitted::NoRoute(node))
    }

    fn submit(&mut self, link: LinkId, id: VerbId, verb: &Verb) -> Result<(), NotSubmitted> {
        if link != 0 {
            return Err(NotSubmitted::NoSuchLink(link));
        }
        self.endpoint.submit(id, *verb).map_err(|e| match e {
            oae_rc_model::SubmitError::QueueFull => NotSubmitted::QueueFull,
            oae_rc_model::SubmitError::NotAnRcVerb => NotSubmitted::NotForTransport,
            oae_rc_model::SubmitError::QpError => NotSubmitted::QpFailed,
            oae_rc_model::SubmitError::BadLocalBlock => {
                NotSubmitted::Invalid("local block is not inside a local region")
            }
        })
    }

    fn drain_events(&mut self, mut on: impl FnMut(TransportEvent<'_>)) {
        while let Some(event) = self.endpoint.poll_event() {
            match event {
                RcEvent::Completed { id, result } => {
                    on(TransportEvent::Completed {
                        id,
                        result: &result,
                    });
                }
                RcEvent::QpFailed(why) => {
                    on(TransportEvent::Notice(
                        Severity::Warn,
                        format!("RC model QP failed: {why:?}"),
                    ));
                }
            }
        }
    }

    fn is_quiescent(&self) -> bool {
        self.endpoint.in_flight() == 0
    }

    fn peer_node(&self, _link: LinkId) -> Option<u64> {
        // RC has no handshake that names the peer.
        None
    }

    fn status(&self, _link: LinkId) -> Option<LinkState> {
        let qp_failure = self.endpoint.failure().map(|f| format!("{f:?}"));
        Some(LinkState {
            up: qp_failure.is_none(),
            locked_words: self.endpoint.memory().locked_words(),
            protocol: ProtocolStatus::RcModel(RcStatus {
                qp_failure,
                in_flight: self.endpoint.in_flight(),
            }),
        })
    }

    fn stats(&self, _link: LinkId) -> LinkCounters {
        let s = self.endpoint.stats();
        LinkCounters {
            counters: named_counters([
                ("rx_frames", s.rx_frames),
                ("tx_frames", s.tx_frames),
                ("malformed_total", s.malformed),
                ("requests_sent", s.requests_sent),
                ("retransmissions", s.retransmissions),
                ("timeouts", s.timeouts),
                ("naks_received", s.naks_received),
                ("acks_sent", s.acks_sent),
                ("naks_sent", s.naks_sent),
                ("executed", s.executed),
                ("duplicates", s.duplicates),
                ("cache_replays", s.cache_replays),
                ("cache_misses", s.cache_misses),
                ("out_of_order", s.out_of_order),
                ("completions_ok", s.completions_ok),
                ("completions_err", s.completions_err),
                // Names the OAE reports use, so tables can sum either.
                ("reversals", s.retransmissions),
            ]),
            ..LinkCounters::default()
        }
    }

    fn memory(&self) -> &SharedMemory {
        self.endpoint.memory()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oae_client::status::OaeLinkStatus;
    use oae_proto::LinkConfig;

    const MACS: [[u8; 6]; 2] = [[2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]];

    /// End `i` of a link between `MACS`, node id `id`, epoch 1, with the
    /// key (number, bytes) if any.
    fn end(i: usize, id: u64, key: Option<(u8, u8)>) -> Oae {
        let mut node = Node::with_memory(id, 1, NoObserver, SharedMemory::new());
        node.add_link(LinkConfig::default()).unwrap();
        let keys = key.map_or(LinkKeys::None, |(n, b)| {
            LinkKeys::Shared(n, LinkKey([b; 32]))
        });
        let mut t = Oae::new(node, keys);
        t.link_identity(
            0,
            LinkIdentity {
                local_mac: MACS[i],
                peer_mac: MACS[1 - i],
                channel: 0,
            },
        );
        t
    }

    /// Runs both ends on a perfect wire for 50 ms of their time; returns
    /// each end's notices.
    fn run(ends: &mut [Oae; 2]) -> [Vec<String>; 2] {
        let mut buf = [0u8; 2048];
        let mut notices = [Vec::new(), Vec::new()];
        for step in 0..500 {
            let now = step * 100_000;
            for from in 0..2 {
                while let Some(len) = ends[from].poll_transmit(0, now, &mut buf) {
                    ends[1 - from].handle_frame(0, &buf[..len], now);
                }
            }
            for (end, notices) in ends.iter_mut().zip(&mut notices) {
                end.handle_timeout(now);
                end.drain_events(|event| {
                    if let TransportEvent::Notice(_, n) = event {
                        notices.push(n);
                    }
                });
            }
        }
        notices
    }

    /// Buffers as a port lends them: room for the largest frame on the
    /// wire, Ethernet header aside.
    struct Lent {
        room: usize,
        lent: Vec<u8>,
        /// The frames written, in order.
        frames: Vec<Vec<u8>>,
    }

    impl Lent {
        fn new(room: usize) -> Lent {
            Lent {
                room,
                lent: Vec::new(),
                frames: Vec::new(),
            }
        }
    }

    impl TransmitBuffers for Lent {
        fn next_buffer(&mut self) -> Option<&mut [u8]> {
            self.lent = vec![0; self.room];
            Some(&mut self.lent)
        }

        fn filled(&mut self, len: usize) {
            let mut frame = std::mem::take(&mut self.lent);
            frame.truncate(len);
            self.frames.push(frame);
        }
    }

    /// Runs both ends in bursts through buffers of `room` bytes until `end
    /// 0`'s verb `id` completes (or 500 steps); its result.
    fn burst_until_done(
        ends: &mut [Oae; 2],
        room: usize,
        id: VerbId,
    ) -> Option<Result<Output, VerbError>> {
        for step in 0..500 {
            let now = step * 100_000;
            for from in 0..2 {
                let mut out = Lent::new(room);
                ends[from].poll_transmit_burst(0, now, 64, &mut out);
                for frame in &out.frames {
                    ends[1 - from].handle_frame(0, frame, now);
                }
            }
            for end in ends.iter_mut() {
                end.handle_timeout(now);
            }
            let mut completed = None;
            ends[0].drain_events(|event| {
                if let TransportEvent::Completed { id: done, result } = event
                    && done == id
                {
                    completed = Some(*result);
                }
            });
            if completed.is_some() {
                return completed;
            }
        }
        None
    }

    /// Two authenticated ends, up, with a region each; end 0 has submitted
    /// a 960-byte WRITE (a 1024-byte frame) as verb `id`.
    fn largest_write_submitted(id: VerbId) -> [Oae; 2] {
        let mut ends = [end(0, 1, Some((0, 7))), end(1, 2, Some((0, 7)))];
        for e in &mut ends {
            e.node
                .register(oae_proto::RegionSpec {
                    id: 1,
                    key: 9,
                    len: 4096,
                    permissions: oae_proto::Permissions::ALL,
                })
                .unwrap();
        }
        run(&mut ends);
        let write = Verb::Write {
            target: oae_proto::RegionRef { id: 1, key: 9 },
            offset: 0,
            data: oae_proto::Block::new(&[0x5a; 960]).unwrap(),
        };
        ends[0].submit(0, id, &write).unwrap();
        ends
    }

    /// An authenticated link carries the largest frames in the buffers the
    /// port lends: a 960-byte WRITE (a 1024-byte frame, 1048 with its
    /// trailer) completes, and nothing is left unsealed.
    #[test]
    fn an_authenticated_link_carries_its_largest_frames() {
        let mut ends = largest_write_submitted(VerbId(7));
        let room = oae_common::MAX_OAE_FRAME_ON_WIRE as usize - oae_proto::wire::ETH_HEADER_LEN;
        let done = burst_until_done(&mut ends, room, VerbId(7));
        assert_eq!(done, Some(Ok(Output::Write)));
        for (i, e) in ends.iter().enumerate() {
            let a = e.node.link_auth(0).unwrap().stats();
            assert_eq!(a.unsealed, 0, "end {i}: {a:?}");
            assert!(a.sealed > 0 && a.verified > 0, "end {i}: {a:?}");
        }
    }

    /// A buffer with no room for the trailer: the frame is not sent, and
    /// that is counted, never silent.
    #[test]
    fn a_frame_with_no_room_for_its_trailer_is_counted_unsealed() {
        let mut ends = largest_write_submitted(VerbId(7));
        let mut out = Lent::new(oae_proto::wire::MAX_FRAME);
        ends[0].poll_transmit_burst(0, 50_000_000, 64, &mut out);
        let a = ends[0].node.link_auth(0).unwrap().stats();
        assert_eq!(a.unsealed, 1, "{a:?}");
    }

    fn oae_status(t: &Oae) -> (bool, OaeLinkStatus) {
        let s = t.status(0).unwrap();
        match s.protocol {
            ProtocolStatus::Oae(o) => (s.up, o),
            ProtocolStatus::RcModel(_) => panic!("an OAE link"),
        }
    }

    /// Both ends stay down, each naming `reasons[i]` in its status (JSON
    /// included) and in one notice.
    fn named(ends: [Oae; 2], reasons: [DownReason; 2]) {
        let mut ends = ends;
        let notices = run(&mut ends);
        for i in 0..2 {
            let (up, o) = oae_status(&ends[i]);
            assert!(!up, "end {i}: {o:?}");
            let d = o
                .down_reason
                .as_ref()
                .unwrap_or_else(|| panic!("end {i}: {o:?}"));
            assert_eq!(d.reason, reasons[i], "end {i}");
            let json = serde_json::to_value(&o).unwrap();
            assert_eq!(json["down_reason"]["reason"], reasons[i].name(), "{json}");
            let told: Vec<_> = notices[i]
                .iter()
                .filter(|n| n.contains("not coming up"))
                .collect();
            assert_eq!(told.len(), 1, "end {i}, once: {:?}", notices[i]);
            assert!(
                told[0].contains(reasons[i].name()) && told[0].contains(reasons[i].text()),
                "{}",
                told[0]
            );
        }
    }

    /// Each misconfiguration of a pair, as both ends name it.
    #[test]
    fn each_mismatch_is_named_at_both_ends() {
        let cases = [
            (
                "one end authenticated and the other not",
                [end(0, 1, Some((0, 7))), end(1, 2, None)],
                [
                    DownReason::PeerUnauthenticated,
                    DownReason::PeerAuthenticated,
                ],
            ),
            (
                "two keys",
                [end(0, 1, Some((0, 7))), end(1, 2, Some((0, 8)))],
                [DownReason::KeyMismatch; 2],
            ),
            (
                "two key numbers",
                [end(0, 1, Some((1, 7))), end(1, 2, Some((0, 7)))],
                [DownReason::UnknownKey; 2],
            ),
            (
                "one node id and epoch at both ends",
                [end(0, 5, Some((0, 7))), end(1, 5, Some((0, 7)))],
                [DownReason::SameIdentity; 2],
            ),
        ];
        for (case, ends, reasons) in cases {
            eprintln!("case: {case}");
            named(ends, reasons);
        }
    }

    #[test]
    fn one_key_at_both_ends_comes_up_and_names_nothing() {
        let mut ends = [end(0, 1, Some((0, 7))), end(1, 2, Some((0, 7)))];
        let notices = run(&mut ends);
        for (i, e) in ends.iter().enumerate() {
            let (up, o) = oae_status(e);
            assert!(up && o.down_reason.is_none(), "end {i}: {o:?}");
            assert!(
                notices[i].iter().all(|n| !n.contains("not coming up")),
                "{:?}",
                notices[i]
            );
        }
    }
}
