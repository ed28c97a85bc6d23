//! A live pair of nodes and an oracle for what a node must do with a frame it
//! did not ask for. Shared by `tests/tests/wire_props.rs` and the cargo-fuzz
//! target `fuzz/fuzz_targets/node.rs` (included there by path), so the
//! property test and the fuzzer check exactly the same things.
//!
//! Depends on `oae_proto` only.

use oae_proto::verb::{self, Request};
use oae_proto::wire::{
    self, Frame, Knowledge, MAX_CODEC_CLASS, MAX_FRAME, Malformed, Role, Transition,
};
use oae_proto::*;

/// The region every node of the live pair registers.
pub const REGION: RegionRef = RegionRef { id: 1, key: 42 };
/// The region of the donor pair whose traffic is replayed at the live pair.
/// Same id, a key far from [`REGION`]'s, so replayed requests are refused
/// (`BadKey`) deep inside the verbs engine rather than applied.
pub const DONOR_REGION: RegionRef = RegionRef {
    id: 1,
    key: 0xD0D0_D0D0,
};
pub const REGION_LEN: u32 = 256;
/// Slots (and credits) of every link: few, so that a copy of the pair is
/// cheap (each slot keeps its last answer, a frame of the largest class)
/// and the fuzz target runs ten times as many inputs a second.
pub const SLOTS: u16 = 8;
/// Frames `pump` moves before it declares a livelock.
const PUMP_LIMIT: usize = 100_000;

/// The bytes `wire::build` makes from a parsed frame's fields: equal to the
/// input iff parsing is canonical. Shared with the fuzz target `frame`.
pub fn rebuild(f: &Frame<'_>) -> Vec<u8> {
    let mut again = vec![0u8; MAX_FRAME];
    let len = wire::build(
        &mut again,
        &f.context,
        (f.sender_epoch, f.receiver_epoch),
        (f.order, f.seen),
        |p| p.copy_from_slice(f.payload),
    );
    again.truncate(len);
    again
}

/// One verb of every kind for throwing bytes at `decode_output`: READ and
/// BILATERAL SWAP of `len` bytes, a MULTI-WORD COMMIT of `count` words
/// expecting `expected`. Shared with the fuzz target `frame`.
pub fn every_kind(
    len: u16,
    count: usize,
    expected: [u64; verb::MAX_MCAS_WORDS],
) -> [Verb; Opcode::COUNT] {
    let t = RegionRef { id: 1, key: 2 };
    let mut words = [McasWord::default(); verb::MAX_MCAS_WORDS];
    for (w, e) in words.iter_mut().zip(expected) {
        *w = McasWord {
            offset: 0,
            expected: e,
            new: 1,
        };
    }
    Opcode::ALL.map(|kind| match kind {
        Opcode::Read => Verb::Read {
            target: t,
            offset: 0,
            local_region: t.id,
            local_offset: 0,
            len,
        },
        Opcode::Write => Verb::Write {
            target: t,
            offset: 0,
            data: Block::new(&[1; 3]).unwrap(),
        },
        Opcode::CompareAndSwap => Verb::CompareAndSwap {
            target: t,
            offset: 0,
            expected: expected[0],
            new: 0,
        },
        Opcode::FetchAdd => Verb::FetchAdd {
            target: t,
            offset: 0,
            add: 1,
        },
        Opcode::Swap => Verb::Swap {
            target: t,
            offset: 0,
            new: 1,
        },
        Opcode::MultiWordCommit => Verb::multi_word_commit(t, &words[..count]).unwrap(),
        Opcode::BilateralSwap => Verb::BilateralSwap {
            target: t,
            offset: 0,
            local_region: 1,
            local_offset: 0,
            len,
        },
        Opcode::Send => Verb::Send {
            imm: Some(expected[0] as u32),
            data: Block::new(&[1; 3]).unwrap(),
        },
    })
}

/// Two nodes as in `proto/tests/pair.rs`: epoch 1, ids 0xA and 0xB, one
/// link each with the default configuration but [`SLOTS`] slots and
/// credits, region 1 of 256 bytes.
pub fn pair(key: u32) -> [Node; 2] {
    let mut nodes = [Node::new(0xA, 1), Node::new(0xB, 1)];
    let cfg = LinkConfig {
        slots: SLOTS,
        receive_credits: SLOTS,
        ..LinkConfig::default()
    };
    for n in &mut nodes {
        let link = n.add_link(cfg).unwrap();
        assert_eq!(link, 0);
        n.register(RegionSpec {
            id: REGION.id,
            key,
            len: REGION_LEN,
            permissions: Permissions::ALL,
        })
        .unwrap();
    }
    nodes
}

/// Moves frames both ways until neither side has anything to say, keeping a
/// copy of every frame in `capture`.
pub fn pump(nodes: &mut [Node; 2], now: Nanos, capture: &mut Vec<Vec<u8>>) {
    // Room for the trailer of an authenticated link's largest frame.
    let mut buf = [0u8; MAX_FRAME + auth::AUTH_TRAILER_LEN];
    for _ in 0..PUMP_LIMIT {
        let mut moved = false;
        for from in 0..2 {
            if let Some(len) = nodes[from].poll_transmit(0, now, &mut buf) {
                capture.push(buf[..len].to_vec());
                nodes[1 - from].handle_frame(0, &buf[..len], now);
                moved = true;
            }
        }
        if !moved {
            return;
        }
    }
    panic!("the pair is still talking after {PUMP_LIMIT} frames: livelock");
}

/// Lets `rounds` liveness rounds pass, pumping after each; returns the time.
pub fn run_rounds(
    nodes: &mut [Node; 2],
    mut now: Nanos,
    rounds: usize,
    capture: &mut Vec<Vec<u8>>,
) -> Nanos {
    for _ in 0..rounds {
        now = nodes
            .iter()
            .filter_map(|n| n.poll_timeout())
            .min()
            .expect("links have timers")
            .max(now);
        for n in nodes.iter_mut() {
            n.handle_timeout(now);
        }
        pump(nodes, now, capture);
    }
    now
}

/// A pair whose link is up and has exchanged ticks and tocks; returns it,
/// the current time and every frame it sent.
pub fn live_pair() -> ([Node; 2], Nanos, Vec<Vec<u8>>) {
    live(pair(REGION.key))
}

/// The identity of the live pair's link, as node 0 names it.
const SEALED_LINK: auth::LinkIdentity = auth::LinkIdentity {
    local_mac: [2, 0, 0, 0, 0, 0xa],
    peer_mac: [2, 0, 0, 0, 0, 0xb],
    channel: 0,
};

/// As [`live_pair`], with the link authenticated on both ends: every
/// frame returned is sealed (AES-GCM trailer), and was accepted once.
pub fn live_sealed_pair() -> ([Node; 2], Nanos, Vec<Vec<u8>>) {
    let mut nodes = pair(REGION.key);
    let key = auth::LinkKey([0x5e; 32]);
    for (n, identity) in nodes.iter_mut().zip([SEALED_LINK, SEALED_LINK.reversed()]) {
        n.authenticate_link(0, auth::Authenticator::new(identity, 0, &key))
            .unwrap();
    }
    live(nodes)
}

fn live(mut nodes: [Node; 2]) -> ([Node; 2], Nanos, Vec<Vec<u8>>) {
    let mut capture = Vec::new();
    pump(&mut nodes, 0, &mut capture);
    let now = run_rounds(&mut nodes, 0, 4, &mut capture);
    for n in &mut nodes {
        let status = n.link_status(0).unwrap();
        assert!(status.up && !status.unreachable, "{status:?}");
        while n.poll_event().is_some() {}
    }
    assert!(
        nodes[0].link_stats(0).unwrap().ticks_sent > 0,
        "ticks flowed"
    );
    (nodes, now, capture)
}

/// Every frame a donor pair sends while carrying each kind of verb through
/// every transition: requests, echoes, commits and their acks, a refusal, a
/// reversal and its ack, ticks and tocks. Same node ids and epochs as the
/// live pair, so these frames pass its epoch checks.
pub fn donor_frames() -> Vec<Vec<u8>> {
    let mut n = pair(DONOR_REGION.key);
    let mut cap = Vec::new();
    pump(&mut n, 0, &mut cap);
    let now = run_rounds(&mut n, 0, 3, &mut cap);
    let t = DONOR_REGION;
    let words = [
        McasWord {
            offset: 0,
            expected: 0,
            new: 1,
        },
        McasWord {
            offset: 8,
            expected: 0,
            new: 2,
        },
        McasWord {
            offset: 16,
            expected: 0,
            new: 3,
        },
    ];
    let verbs = [
        Verb::Read {
            target: t,
            offset: 0,
            local_region: t.id,
            local_offset: 64,
            len: 16,
        },
        Verb::Write {
            target: t,
            offset: 32,
            data: Block::new(b"donor bytes").unwrap(),
        },
        Verb::Write {
            target: t,
            offset: 0,
            data: Block::new(&[0x5A; 200]).unwrap(),
        },
        Verb::CompareAndSwap {
            target: t,
            offset: 64,
            expected: 0,
            new: 9,
        },
        Verb::FetchAdd {
            target: t,
            offset: 72,
            add: 3,
        },
        Verb::Swap {
            target: t,
            offset: 80,
            new: 4,
        },
        Verb::multi_word_commit(t, &words).unwrap(),
        Verb::BilateralSwap {
            target: t,
            offset: 128,
            local_region: 1,
            local_offset: 128,
            len: 24,
        },
        Verb::FetchAdd {
            target: RegionRef {
                id: t.id,
                key: t.key ^ 1,
            },
            offset: 0,
            add: 1,
        },
    ];
    for (i, v) in verbs.into_iter().enumerate() {
        n[0].submit(0, VerbId(i as u64), &v).unwrap();
        pump(&mut n, now, &mut cap);
    }
    // A request lost on the wire: the initiator reverses it after its
    // patience runs out, then retries it.
    n[0].submit(
        0,
        VerbId(99),
        &Verb::Swap {
            target: t,
            offset: 88,
            new: 5,
        },
    )
    .unwrap();
    let mut buf = [0u8; MAX_FRAME];
    let len = n[0].poll_transmit(0, now, &mut buf).expect("the request");
    cap.push(buf[..len].to_vec());
    run_rounds(&mut n, now, 6, &mut cap);
    let mut completed = 0;
    while let Some(e) = n[0].poll_event() {
        if let Event::Completed { .. } = e {
            completed += 1;
        }
    }
    assert_eq!(completed, verbs.len() + 1, "every donor verb completed");
    cap
}

/// Real frames to mutate: the live pair's own and the donor's.
pub fn captured_frames() -> Vec<Vec<u8>> {
    let (_, _, mut frames) = live_pair();
    frames.extend(donor_frames());
    frames
}

/// What a node must do with a frame, decided from the frame and the link's
/// public status alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Counted in `malformed` under this reason, and nothing else happens.
    Malformed(Malformed),
    /// Counted in `stale_epoch`, and nothing else happens.
    StaleEpoch,
    /// Counted in `stale_slot_frames`, and nothing else happens.
    StaleSlot,
    /// Of the current incarnations, but its knowledge level, role bit or
    /// class is not what bring-up agreed: counted as `inconsistent` before
    /// the link reads anything else (it is not heard from the peer).
    Disagrees,
    /// Well-formed and of the current incarnations: the state machine acts
    /// on it (it may still find it stale or a protocol violation).
    Live,
}

impl Expect {
    pub fn is_garbage(self) -> bool {
        self != Expect::Live
    }
}

/// The oracle. Assumes nothing was submitted on the node and that it has
/// transmitted nothing since the last tock it received (so it has no tick and
/// no transfer outstanding).
pub fn expect(node: &Node, bytes: &[u8]) -> Expect {
    let status = node.link_status(0).expect("link 0");
    let f = match Frame::parse(bytes) {
        Err(m) => return Expect::Malformed(m),
        Ok(f) => f,
    };
    let ctx = f.context;
    let p = f.payload;
    // A handshake reaches only links that agree keys by identity.
    if ctx.transition == Transition::Handshake {
        return Expect::Malformed(Malformed::Inconsistent);
    }
    if ctx.transition == Transition::Hello {
        if ctx.class != 0 {
            return Expect::Malformed(Malformed::Inconsistent);
        }
        let slots = u16::from_be_bytes([p[8], p[9]]);
        let credits = u16::from_be_bytes([p[10], p[11]]);
        let bad = ctx.field != 0
            || p[13..].iter().any(|&b| b != 0)
            || slots == 0
            || credits == 0
            || credits > slots
            || p[12] > MAX_CODEC_CLASS;
        if bad {
            return Expect::Malformed(Malformed::BadPayload);
        }
        if f.sender_epoch < status.peer_epoch {
            return Expect::StaleEpoch;
        }
        // A HELLO that names this incarnation took the other role against it.
        let peer_id = u64::from_be_bytes(p[..8].try_into().unwrap());
        let peer_role = if (node.epoch(), node.node_id()) < (f.sender_epoch, peer_id) {
            Role::Bob
        } else {
            Role::Alice
        };
        let knows_us = f.receiver_epoch == node.epoch() && ctx.knowledge > Knowledge::Nothing;
        return if knows_us && ctx.role != peer_role {
            Expect::Malformed(Malformed::Inconsistent)
        } else {
            Expect::Live
        };
    }
    if f.sender_epoch != status.peer_epoch || f.receiver_epoch != node.epoch() {
        return Expect::StaleEpoch;
    }
    // After bring-up every frame says its sender is up and has the other
    // role; TICK, COMMIT and REVERSE are the smallest class.
    let smallest = matches!(
        ctx.transition,
        Transition::Tick | Transition::Commit | Transition::Reverse
    );
    if ctx.knowledge != Knowledge::KnowYouKnowMe
        || ctx.role == status.role
        || (smallest && ctx.class != 0)
    {
        return Expect::Disagrees;
    }
    match ctx.transition {
        Transition::Hello | Transition::Handshake => unreachable!("handled above"),
        Transition::Tick if p[8..].iter().any(|&b| b != 0) => {
            Expect::Malformed(Malformed::BadPayload)
        }
        Transition::Tick => Expect::Live,
        // Well-formed for the link; this node runs no fabric, so nothing
        // more happens.
        Transition::Advert | Transition::Forward => Expect::Live,
        Transition::Tock if p[8..].iter().any(|&b| b != 0) => {
            Expect::Malformed(Malformed::BadPayload)
        }
        // No tick of this node is outstanding.
        Transition::Tock => Expect::StaleSlot,
        Transition::Request | Transition::Commit | Transition::Reverse => {
            if ctx.slot() >= SLOTS {
                Expect::Malformed(Malformed::Inconsistent)
            } else if ctx.transition != Transition::Request && p.iter().any(|&b| b != 0) {
                Expect::Malformed(Malformed::BadPayload)
            } else {
                Expect::Live
            }
        }
        // Nothing was submitted here, so no answer is awaited on any slot.
        Transition::Echo | Transition::Refuse | Transition::CommitAck | Transition::ReverseAck => {
            if ctx.slot() >= status.active_slots {
                Expect::Malformed(Malformed::Inconsistent)
            } else {
                Expect::StaleSlot
            }
        }
    }
}

fn malformed_index(m: Malformed) -> usize {
    Malformed::ALL.iter().position(|&x| x == m).unwrap()
}

/// Sum of the counters that account for garbage.
pub fn garbage_count(s: &LinkStats) -> u64 {
    s.malformed.iter().sum::<u64>() + s.stale_epoch + s.stale_slot_frames
}

/// Whether `bytes` is a well-formed REQUEST of the current incarnations that
/// names the live pair's region with its key: the only frame that may
/// legitimately change a target's memory.
fn is_keyed_request(node: &Node, bytes: &[u8]) -> bool {
    let Ok(f) = Frame::parse(bytes) else {
        return false;
    };
    let status = node.link_status(0).unwrap();
    f.context.transition == Transition::Request
        && f.sender_epoch == status.peer_epoch
        && f.receiver_epoch == node.epoch()
        && matches!(verb::decode_request(f.payload), Some(r) if request_target(&r) == Some(REGION))
}

fn request_target(r: &Request<'_>) -> Option<RegionRef> {
    Some(match *r {
        Request::Read { target, .. }
        | Request::Write { target, .. }
        | Request::CompareAndSwap { target, .. }
        | Request::FetchAdd { target, .. }
        | Request::Swap { target, .. }
        | Request::MultiWordCommit { target, .. }
        | Request::BilateralSwap { target, .. } => target,
        Request::Send { .. } => return None,
    })
}

/// Feeds frames to one node of a live pair and checks every one against the
/// oracle.
pub struct Feeder {
    pub nodes: [Node; 2],
    pub now: Nanos,
    /// The node that gets the frames.
    pub to: usize,
    /// Both nodes' memory before anything was fed.
    pub memory: [Memory; 2],
    pub start: LinkStats,
    pub fed: u64,
    pub garbage: u64,
    /// A forged but well-formed, correctly keyed REQUEST was applied: memory
    /// may legitimately differ from here on.
    pub applied: bool,
}

impl Feeder {
    pub fn new(nodes: [Node; 2], now: Nanos, to: usize) -> Feeder {
        let memory = [nodes[0].memory().clone(), nodes[1].memory().clone()];
        let start = nodes[to].link_stats(0).unwrap().clone();
        Feeder {
            nodes,
            now,
            to,
            memory,
            start,
            fed: 0,
            garbage: 0,
            applied: false,
        }
    }

    /// Feeds one frame and checks the node did exactly what the oracle says.
    pub fn feed(&mut self, bytes: &[u8]) {
        let node = &mut self.nodes[self.to];
        let want = expect(node, bytes);
        let keyed = is_keyed_request(node, bytes);
        // Frames that do not parse, come from another incarnation or are
        // HELLOs with a bad payload must leave the link exactly as it was.
        let untouched = match Frame::parse(bytes) {
            Err(_) => true,
            Ok(f) => {
                matches!(want, Expect::StaleEpoch | Expect::Disagrees)
                    || f.context.transition == Transition::Hello
            }
        };
        let pre = node.link_stats(0).unwrap().clone();
        let pre_status = node.link_status(0).unwrap();
        let pre_timeout = node.poll_timeout();
        let pre_memory = node.memory().clone();
        node.handle_frame(0, bytes, self.now);
        let post = node.link_stats(0).unwrap().clone();
        self.fed += 1;
        let mut exact = pre.clone();
        exact.rx_frames += 1;
        match want {
            Expect::Malformed(m) => exact.malformed[malformed_index(m)] += 1,
            Expect::Disagrees => exact.malformed[malformed_index(Malformed::Inconsistent)] += 1,
            Expect::StaleEpoch => exact.stale_epoch += 1,
            Expect::StaleSlot => exact.stale_slot_frames += 1,
            Expect::Live => {}
        }
        if !untouched {
            // A frame of the peer's incarnation takes its place in the
            // link's order even if it answers nothing: it may reveal a gap,
            // and its `seen` may show a frame of ours lost (a forged one
            // can only make the node reverse or repeat, which is safe).
            exact.gaps_seen = post.gaps_seen;
            exact.lost_by_order = post.lost_by_order;
            exact.echo_missing = post.echo_missing;
        }
        if want.is_garbage() {
            self.garbage += 1;
            assert_eq!(post, exact, "{want:?} frame {bytes:02x?}");
            assert_eq!(node.memory(), &pre_memory, "{want:?} frame changed memory");
            let events: Vec<Event> = core::iter::from_fn(|| node.poll_event()).collect();
            if untouched {
                // Rejected before the link acted on it: no trace but the count.
                assert_eq!(events, [], "{want:?} frame raised events");
                // Only the diagnosis of why a down link is not coming up
                // may note a dropped frame.
                let mut status = node.link_status(0).unwrap();
                status.down_reason = pre_status.down_reason;
                status.down_reason_frames = pre_status.down_reason_frames;
                assert_eq!(status, pre_status, "{want:?}");
                assert_eq!(node.poll_timeout(), pre_timeout, "{want:?}");
            } else if pre_status.up {
                assert_eq!(events, [], "{want:?} frame raised events");
            } else {
                // A frame of the current incarnations other than HELLO proves
                // the peer is up and knows this end, even when it answers
                // nothing outstanding: a link that was down comes up.
                let up = Event::Link {
                    link: 0,
                    change: LinkChange::Up,
                };
                assert_eq!(events, [up], "{want:?} frame on a down link");
                assert!(node.link_status(0).unwrap().up);
            }
        } else {
            assert_eq!(post.rx_frames, exact.rx_frames);
            assert_eq!(post.tx_frames, pre.tx_frames, "handle_frame never sends");
            assert_eq!(
                post.malformed, pre.malformed,
                "well-formed frame counted malformed"
            );
            assert_eq!(
                post.stale_epoch, pre.stale_epoch,
                "current frame counted stale"
            );
            assert_eq!(post.completions_ok + post.completions_err, 0);
            while let Some(e) = node.poll_event() {
                assert!(
                    matches!(e, Event::Link { .. }),
                    "nothing was submitted, yet {e:?}"
                );
            }
            if post.transfers_applied != pre.transfers_applied {
                assert!(
                    keyed,
                    "a transfer was applied from a frame that is not a keyed request"
                );
                self.applied = true;
            }
        }
        if !self.applied {
            assert_eq!(node.memory(), &self.memory[self.to], "memory changed");
        }
    }

    /// After everything was fed: the node counted every frame, the garbage
    /// ones as garbage; then the pair talks and lets time pass, and neither
    /// node's memory has changed.
    pub fn finish(mut self) {
        let post = self.nodes[self.to].link_stats(0).unwrap().clone();
        assert_eq!(post.rx_frames - self.start.rx_frames, self.fed);
        assert!(garbage_count(&post) - garbage_count(&self.start) >= self.garbage);
        let mut sink = Vec::new();
        pump(&mut self.nodes, self.now, &mut sink);
        run_rounds(&mut self.nodes, self.now, 3, &mut sink);
        for (i, n) in self.nodes.iter_mut().enumerate() {
            while let Some(e) = n.poll_event() {
                assert!(
                    matches!(e, Event::Link { .. }),
                    "nothing was submitted, yet node {i} raised {e:?}"
                );
            }
            if !self.applied {
                assert_eq!(n.memory(), &self.memory[i], "node {i}'s memory changed");
                assert_eq!(n.memory().locked_words(), 0);
            }
        }
    }
}

/// Feeds frames to one node of an authenticated live pair (see
/// [`live_sealed_pair`]). None was sealed for that node at that moment
/// (garbage, a sealed frame changed, or one it already accepted), so the
/// oracle is short: each is dropped by the node's authenticator and
/// counted there once, and the link never sees it.
pub struct SealedFeeder {
    pub nodes: [Node; 2],
    pub now: Nanos,
    /// The node that gets the frames.
    pub to: usize,
    memory: [Memory; 2],
    start: LinkStats,
    start_auth: auth::AuthStats,
    pub fed: u64,
}

fn auth_stats(node: &Node) -> auth::AuthStats {
    node.link_auth(0)
        .expect("an authenticated link")
        .stats()
        .clone()
}

impl SealedFeeder {
    pub fn new(nodes: [Node; 2], now: Nanos, to: usize) -> SealedFeeder {
        SealedFeeder {
            memory: [nodes[0].memory().clone(), nodes[1].memory().clone()],
            start: nodes[to].link_stats(0).unwrap().clone(),
            start_auth: auth_stats(&nodes[to]),
            nodes,
            now,
            to,
            fed: 0,
        }
    }

    /// Feeds one frame; it must be dropped by reason.
    pub fn feed(&mut self, bytes: &[u8]) {
        let node = &mut self.nodes[self.to];
        let before: u64 = auth_stats(node).dropped.iter().sum();
        node.handle_frame(0, bytes, self.now);
        let after: u64 = auth_stats(node).dropped.iter().sum();
        assert_eq!(
            after,
            before + 1,
            "a frame no one sealed for this node was not dropped by its \
             authenticator: {bytes:02x?}"
        );
        self.fed += 1;
    }

    /// The link saw none of it, and the pair still works.
    pub fn finish(mut self) {
        let node = &self.nodes[self.to];
        assert_eq!(
            node.link_stats(0).unwrap(),
            &self.start,
            "the link saw a frame"
        );
        assert_eq!(auth_stats(node).verified, self.start_auth.verified);
        let verified = self.nodes.each_ref().map(|n| auth_stats(n).verified);
        let mut sink = Vec::new();
        pump(&mut self.nodes, self.now, &mut sink);
        run_rounds(&mut self.nodes, self.now, 3, &mut sink);
        for (i, n) in self.nodes.iter_mut().enumerate() {
            assert!(
                auth_stats(n).verified > verified[i],
                "node {i} heard nothing after"
            );
            let status = n.link_status(0).unwrap();
            assert!(status.up && !status.unreachable, "node {i}: {status:?}");
            while let Some(e) = n.poll_event() {
                assert!(
                    matches!(e, Event::Link { .. }),
                    "nothing was submitted, yet node {i} raised {e:?}"
                );
            }
            assert_eq!(n.memory(), &self.memory[i], "node {i}'s memory changed");
        }
    }
}
