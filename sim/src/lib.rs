//! Deterministic, seeded simulation of OAE nodes over faulty links.
//!
//! N nodes run the real `oae-proto` core, fully meshed, or joined into a
//! fabric (ring, line or mesh) whose nodes route verbs to each other over
//! several hops. The network loses, duplicates, corrupts (bit flips anywhere
//! in a frame), delays and reorders frames, takes links down and up, cuts
//! links for good, partitions the fabric and heals it, restarts nodes and
//! scrambles their routing state, all drawn from one seed. After every step the oracle ([`ledger`]) checks the invariants of
//! `docs/SEMANTICS.md` by name; a failure carries a one-line replay command.

mod addresses;
mod discovery;
mod keys;
pub mod ledger;
pub mod scale;
pub use oae_common::rng;
pub use oae_common::topology::{self, Shape};

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;

use ledger::{Check, KEY, LANDING, Ledger, MAILBOX, REGION, Record, Violation, violation};
use oae_proto::auth::{AUTH_TRAILER_LEN, Authenticator, LinkIdentity, LinkKey};
use oae_proto::verb::MAX_MCAS_WORDS;
use oae_proto::wire::MAX_FRAME;
use oae_proto::{
    Block, Event, FabricConfig, LinkConfig, LinkId, McasWord, Nanos, Node, Observer, PATH_BASE,
    Permissions, PostedReceive, Refusal, RegionRef, RegionSpec, SubmitError, Verb, VerbError,
    VerbId,
};
use rng::Rng;

/// Chance that a frame sent is followed by a recorded handshake message
/// replayed onto a link, with keys agreed by handshake.
const REPLAY_PPM: u32 = 5_000;

/// What the network does to frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Faults {
    pub loss_ppm: u32,
    pub duplicate_ppm: u32,
    /// Frames that get 1 to 3 bits flipped anywhere.
    pub corrupt_ppm: u32,
    /// Extra one-way delay, uniform in `0..jitter` (or exponential with
    /// mean `jitter` if `exponential_delay`): reorders frames.
    pub jitter: Nanos,
    pub exponential_delay: bool,
    /// Link outages over the run (each a few dozen round trips long).
    pub link_flaps: u32,
    /// Node restarts over the run (memory and issuers lost, new epoch).
    pub restarts: u32,
    /// Links cut for good (each leaves the fabric connected).
    pub cuts: u32,
    /// Partitions of the fabric into two sides, each healed later.
    pub partitions: u32,
    /// A node's routing state overwritten with arbitrary values.
    pub scrambles: u32,
    /// Once every link has come up, every node's routing and membership
    /// state is overwritten at the same moment: a start from arbitrary
    /// state, from which the fabric must converge.
    pub scramble_all: bool,
    /// Cuts fall early in the workload (its first eighth), and from then on the
    /// cut link's ends address every verb to each other: failover timed
    /// under load.
    pub busy_cuts: bool,
    /// A cut takes one direction first and the other up to 50 link round
    /// trips later, as a real one does when each end's interface goes at
    /// its own moment: meanwhile one end hears a peer that is deaf to it.
    pub one_way_cuts: bool,
}

impl Faults {
    pub const NONE: Faults = Faults {
        loss_ppm: 0,
        duplicate_ppm: 0,
        corrupt_ppm: 0,
        jitter: 0,
        exponential_delay: false,
        link_flaps: 0,
        restarts: 0,
        cuts: 0,
        partitions: 0,
        scrambles: 0,
        scramble_all: false,
        busy_cuts: false,
        one_way_cuts: false,
    };
}

/// A named fault class of the standard campaign.
#[derive(Clone, Copy, Debug)]
pub struct Scenario {
    pub name: &'static str,
    pub faults: Faults,
    /// A fabric of this shape and size, verbs addressed to any node; or
    /// none: a full mesh, verbs on the link to their target.
    pub fabric: Option<(Shape, usize)>,
}

pub const SCENARIOS: [Scenario; 9] = [
    Scenario {
        name: "clean",
        faults: Faults::NONE,
        fabric: None,
    },
    Scenario {
        name: "loss",
        faults: Faults {
            loss_ppm: 20_000,
            ..Faults::NONE
        },
        fabric: None,
    },
    Scenario {
        name: "duplication",
        faults: Faults {
            duplicate_ppm: 50_000,
            ..Faults::NONE
        },
        fabric: None,
    },
    Scenario {
        name: "corruption",
        faults: Faults {
            corrupt_ppm: 20_000,
            ..Faults::NONE
        },
        fabric: None,
    },
    Scenario {
        name: "reordering",
        faults: Faults {
            jitter: 30_000,
            ..Faults::NONE
        },
        fabric: None,
    },
    Scenario {
        name: "link-flap",
        faults: Faults {
            link_flaps: 3,
            ..Faults::NONE
        },
        fabric: None,
    },
    Scenario {
        name: "restart",
        faults: Faults {
            restarts: 2,
            ..Faults::NONE
        },
        fabric: None,
    },
    Scenario {
        name: "mixed",
        faults: Faults {
            loss_ppm: 10_000,
            duplicate_ppm: 20_000,
            corrupt_ppm: 10_000,
            jitter: 10_000,
            exponential_delay: true,
            link_flaps: 2,
            restarts: 1,
            ..Faults::NONE
        },
        fabric: None,
    },
    Scenario {
        name: "heavy",
        faults: Faults {
            loss_ppm: 150_000,
            duplicate_ppm: 100_000,
            corrupt_ppm: 50_000,
            jitter: 50_000,
            exponential_delay: false,
            link_flaps: 4,
            restarts: 2,
            ..Faults::NONE
        },
        fabric: None,
    },
];

/// The fabric's fault classes: verbs between every pair of nodes, relayed
/// over several hops, through cut links, partitions, restarts and
/// scrambled routing state.
pub const FABRIC_SCENARIOS: [Scenario; 10] = [
    Scenario {
        name: "ring-clean",
        faults: Faults::NONE,
        fabric: Some((Shape::Ring, 5)),
    },
    Scenario {
        name: "ring-cut",
        faults: Faults {
            loss_ppm: 5_000,
            cuts: 1,
            ..Faults::NONE
        },
        fabric: Some((Shape::Ring, 5)),
    },
    Scenario {
        name: "ring-failover",
        faults: Faults {
            cuts: 1,
            busy_cuts: true,
            ..Faults::NONE
        },
        fabric: Some((Shape::Ring, 5)),
    },
    Scenario {
        name: "ring-one-way",
        faults: Faults {
            cuts: 1,
            busy_cuts: true,
            one_way_cuts: true,
            ..Faults::NONE
        },
        fabric: Some((Shape::Ring, 5)),
    },
    Scenario {
        name: "ring-partition",
        faults: Faults {
            partitions: 2,
            ..Faults::NONE
        },
        fabric: Some((Shape::Ring, 5)),
    },
    Scenario {
        name: "mesh-flap",
        faults: Faults {
            loss_ppm: 5_000,
            link_flaps: 4,
            cuts: 1,
            ..Faults::NONE
        },
        fabric: Some((Shape::Mesh, 4)),
    },
    Scenario {
        name: "line-restart",
        faults: Faults {
            restarts: 2,
            ..Faults::NONE
        },
        fabric: Some((Shape::Line, 4)),
    },
    Scenario {
        name: "ring-scramble",
        faults: Faults {
            loss_ppm: 5_000,
            scrambles: 4,
            ..Faults::NONE
        },
        fabric: Some((Shape::Ring, 5)),
    },
    Scenario {
        name: "scramble-start",
        faults: Faults {
            loss_ppm: 5_000,
            scramble_all: true,
            ..Faults::NONE
        },
        fabric: Some((Shape::Ring, 5)),
    },
    Scenario {
        name: "fabric-mixed",
        faults: Faults {
            loss_ppm: 10_000,
            duplicate_ppm: 10_000,
            corrupt_ppm: 10_000,
            jitter: 10_000,
            exponential_delay: false,
            link_flaps: 2,
            restarts: 1,
            cuts: 1,
            partitions: 1,
            scrambles: 2,
            scramble_all: false,
            busy_cuts: false,
            one_way_cuts: false,
        },
        fabric: Some((Shape::Ring, 5)),
    },
];

pub fn scenario(name: &str) -> Option<Scenario> {
    SCENARIOS
        .iter()
        .chain(&FABRIC_SCENARIOS)
        .chain(&scale::SCALE_SCENARIOS)
        .copied()
        .find(|s| s.name == name)
}

/// Shape of one run.
#[derive(Clone, Copy, Debug)]
pub struct SimConfig {
    pub nodes: usize,
    pub verbs: usize,
    /// Verbs each node keeps outstanding.
    pub outstanding: usize,
    pub link: LinkConfig,
    /// One-way wire delay before jitter.
    pub delay: Nanos,
    /// Bytes of the region every node registers (a multiple of 8).
    pub region_len: u32,
    /// Simulated time allowed after the last submission for everything to
    /// complete; past it the run fails the liveness invariant.
    pub settle_time: Nanos,
    /// Authenticated links: every frame sealed by its sender and opened by
    /// its receiver (`oae_proto::auth`), as `[queue.auth]` does.
    pub auth: bool,
    /// Links keyed by identity (`oae_proto::handshake`), as `[queue.auth]
    /// identity = true` does: a handshake before bring-up and after every
    /// restart, keys renewed every few hundred frames, and recorded
    /// handshake messages replayed onto any link.
    pub agree_keys: bool,
    /// Share of verbs drawn as SENDs, in parts per million; every node
    /// then keeps receives posted on its links and paths (a few at a
    /// time, and now and then none, so some SENDs find no receive). Zero
    /// draws nothing for messages: a seed replays as it did before SEND.
    pub messages_ppm: u32,
    /// Chance per node and step that its application takes back one of
    /// its posted receives (`Node::cancel_receive`), in parts per million.
    pub withdraw_ppm: u32,
    /// Nodes make their own addresses (`oae_proto::address`), from a space
    /// one larger than the fabric, and the fabric starts as two that
    /// merge: a fabric run only.
    pub addresses: bool,
    /// Links are not listed but found (`oae_proto::discovery`): each node's
    /// links are a pool bound to the neighbours it hears on its ports.
    pub discover: bool,
    /// With `discover`: a neighbour whose link is not up this many one-way
    /// delays after it was found is let go (short, so that runs let some go).
    pub forget_after_delays: u32,
}

impl Default for SimConfig {
    fn default() -> SimConfig {
        SimConfig {
            nodes: 3,
            verbs: 1000,
            outstanding: 6,
            link: LinkConfig {
                slots: 4,
                receive_credits: 3,
                min_round: 20_000,
                initial_rtt: 20_000,
                hello_interval: 50_000,
                // Room for every verb a node keeps outstanding, not the
                // dataplane's thousands: a verb takes a kilobyte, and a
                // fabric of 256 nodes has a thousand links.
                submit_queue: 64,
                ..LinkConfig::default()
            },
            delay: 5_000,
            region_len: 128,
            settle_time: 2_000_000_000,
            auth: false,
            agree_keys: false,
            addresses: false,
            discover: false,
            forget_after_delays: 6,
            messages_ppm: 0,
            withdraw_ppm: 0,
        }
    }
}

/// What a run did, for the campaign table.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub verbs: u64,
    pub ok: u64,
    pub err: u64,
    pub orphaned: u64,
    pub reversals: u64,
    pub retries: u64,
    pub refusals: u64,
    pub presumed_commits: u64,
    /// Frames found lost because the peer had seen a later one.
    pub lost_by_order: u64,
    /// Frames given up on after `echo_patience_rounds` (unordered links).
    pub lost_by_patience: u64,
    pub probes: u64,
    pub frames: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub corrupted: u64,
    pub link_down_drops: u64,
    pub flaps: u64,
    pub restarts: u64,
    pub malformed_counted: u64,
    pub steps: u64,
    pub checks: u64,
    pub sim_time: Nanos,
    /// Longest submit-to-completion time of any verb.
    pub max_latency: Nanos,
    pub cuts: u64,
    pub partitions: u64,
    pub scrambles: u64,
    /// FORWARD frames relayed by a node on the way to another.
    pub relayed: u64,
    /// ADVERT pages sent, and their bytes.
    pub adverts: u64,
    pub advert_bytes: u64,
    /// Queued verbs moved from a suspected link to a path.
    pub rerouted: u64,
    /// In-doubt transfers settled over another path.
    pub resolved: u64,
    /// Cuts after which a verb between the cut link's ends completed over
    /// a path, and the most and the sum of the round trips (of 2 × the
    /// wire delay) from the cut to that completion.
    pub reroutes: u64,
    pub reroute_rtts_max: u64,
    pub reroute_rtts_sum: u64,
    /// The same for the first such verb that never went out on the cut
    /// link (none of its attempts in doubt there).
    pub fresh_reroutes: u64,
    pub fresh_reroute_rtts_max: u64,
    pub fresh_reroute_rtts_sum: u64,
    /// The largest view number any node reached.
    pub max_view: u64,
    /// Addresses given up to a lower node id (N3), and of those, between
    /// the node away for half the run (restarted meanwhile) and another,
    /// once it is back and asks for the address it last held.
    pub address_yields: u64,
    pub rejoin_yields: u64,
    /// Addresses given up to a node of the other of the two fabrics the
    /// run started as, once they merged.
    pub merge_yields: u64,
    /// With `discover`: neighbours bound to links, let go (their links
    /// never heard them in time), and announcements sent.
    pub neighbours_found: u64,
    pub neighbours_forgotten: u64,
    pub announcements: u64,
    /// Frames authenticated links dropped, by `AuthError` in
    /// `AuthError::ALL` order.
    pub auth_dropped: [u64; 5],
    /// Frames an authenticated link could not seal (and so lost).
    pub auth_unsealed: u64,
    /// SENDs issued, messages reported received, and SENDs refused
    /// because no receive was posted.
    pub sends: u64,
    pub messages: u64,
    pub no_receive: u64,
    /// Receives taken back by their application, and attempts the core
    /// refused because a message held the receive.
    pub withdrawn: u64,
    pub withdraw_refused: u64,
    /// With keys agreed by handshake: handshakes completed, and recorded
    /// handshake messages replayed onto links.
    pub handshakes: u64,
    pub replayed: u64,
}

impl Report {
    pub fn add(&mut self, o: &Report) {
        self.verbs += o.verbs;
        self.ok += o.ok;
        self.err += o.err;
        self.orphaned += o.orphaned;
        self.reversals += o.reversals;
        self.retries += o.retries;
        self.refusals += o.refusals;
        self.presumed_commits += o.presumed_commits;
        self.lost_by_order += o.lost_by_order;
        self.lost_by_patience += o.lost_by_patience;
        self.probes += o.probes;
        self.frames += o.frames;
        self.lost += o.lost;
        self.duplicated += o.duplicated;
        self.corrupted += o.corrupted;
        self.link_down_drops += o.link_down_drops;
        self.flaps += o.flaps;
        self.restarts += o.restarts;
        self.malformed_counted += o.malformed_counted;
        self.steps += o.steps;
        self.checks += o.checks;
        self.sim_time += o.sim_time;
        self.max_latency = self.max_latency.max(o.max_latency);
        self.cuts += o.cuts;
        self.partitions += o.partitions;
        self.scrambles += o.scrambles;
        self.relayed += o.relayed;
        self.adverts += o.adverts;
        self.advert_bytes += o.advert_bytes;
        self.rerouted += o.rerouted;
        self.resolved += o.resolved;
        self.reroutes += o.reroutes;
        self.reroute_rtts_max = self.reroute_rtts_max.max(o.reroute_rtts_max);
        self.reroute_rtts_sum += o.reroute_rtts_sum;
        self.fresh_reroutes += o.fresh_reroutes;
        self.fresh_reroute_rtts_max = self.fresh_reroute_rtts_max.max(o.fresh_reroute_rtts_max);
        self.fresh_reroute_rtts_sum += o.fresh_reroute_rtts_sum;
        self.max_view = self.max_view.max(o.max_view);
        self.address_yields += o.address_yields;
        self.rejoin_yields += o.rejoin_yields;
        self.merge_yields += o.merge_yields;
        self.neighbours_found += o.neighbours_found;
        self.neighbours_forgotten += o.neighbours_forgotten;
        self.announcements += o.announcements;
        for (a, b) in self.auth_dropped.iter_mut().zip(o.auth_dropped) {
            *a += b;
        }
        self.auth_unsealed += o.auth_unsealed;
        self.sends += o.sends;
        self.messages += o.messages;
        self.no_receive += o.no_receive;
        self.withdrawn += o.withdrawn;
        self.withdraw_refused += o.withdraw_refused;
        self.handshakes += o.handshakes;
        self.replayed += o.replayed;
    }
}

/// A run that broke an invariant, with how to replay it.
#[derive(Clone, Debug)]
pub struct Failure {
    pub violation: Violation,
    pub at: Nanos,
    pub step: u64,
    pub replay: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invariant {} broken at t={}ns (step {}): {}\nreplay: {}",
            self.violation.invariant, self.at, self.step, self.violation.detail, self.replay
        )
    }
}

/// What the core reports through its observer hooks, in order.
#[derive(Clone, Copy, Debug)]
enum Seen {
    Sent(u16, u32, u16, u16, VerbId),
    Applied(u16, u32, u16, u16),
    Committed(u16, u32, u16, u16),
    Reversed(u16, u32, u16, u16),
    LocalLanded(VerbId),
}

#[derive(Default)]
pub(crate) struct Tap(Vec<Seen>);

impl Observer for Tap {
    fn sent(&mut self, link: u16, epoch: u32, slot: u16, seq: u16, id: VerbId) {
        self.0.push(Seen::Sent(link, epoch, slot, seq, id));
    }
    fn applied(&mut self, link: u16, peer_epoch: u32, slot: u16, seq: u16) {
        self.0.push(Seen::Applied(link, peer_epoch, slot, seq));
    }
    fn committed(&mut self, link: u16, peer_epoch: u32, slot: u16, seq: u16) {
        self.0.push(Seen::Committed(link, peer_epoch, slot, seq));
    }
    fn reversed(&mut self, link: u16, peer_epoch: u32, slot: u16, seq: u16) {
        self.0.push(Seen::Reversed(link, peer_epoch, slot, seq));
    }
    fn local_landed(&mut self, id: VerbId) {
        self.0.push(Seen::LocalLanded(id));
    }
}

/// Bytes of one receive in a node's mailbox region: messages are drawn up
/// to a little longer, so a few are refused `ReceiveTooSmall`.
const RECEIVE_LEN: u32 = 40;
/// Receives a node's mailbox holds.
const RECEIVE_CELLS: u32 = 64;

/// The simulator's side of messages: its own stream of draws (so runs
/// without messages draw exactly as before), and each node's free cells.
struct Mailboxes {
    rng: Rng,
    /// Receives kept posted on each link and path.
    depth: usize,
    /// Chance per node and step that it posts nothing (receives run out).
    starve_ppm: u32,
    free: Vec<Vec<u32>>,
    next_receive: u64,
    /// Node, link and cell of each posted receive, by receive id.
    cells: std::collections::BTreeMap<u64, (usize, LinkId, u32)>,
    /// Which receives are taken back, and when: a stream of its own, so
    /// runs without withdrawals draw as before.
    withdrawals: Rng,
}

impl Mailboxes {
    fn new(seed: u64, nodes: usize) -> Mailboxes {
        let mut rng = Rng::new(seed ^ 0x5E4D_5E4D_5E4D_5E4D);
        Mailboxes {
            depth: 1 + rng.below(3) as usize,
            starve_ppm: [0, 20_000, 200_000][rng.below(3) as usize],
            rng,
            free: vec![(0..RECEIVE_CELLS).rev().collect(); nodes],
            next_receive: 1,
            cells: Default::default(),
            withdrawals: Rng::new(seed ^ 0x0057_D7A4_0057_D7A4),
        }
    }

    /// A SEND of 0 to 44 bytes, with immediate data half the time.
    fn random_send(&mut self) -> Verb {
        let len = self.rng.below(u64::from(RECEIVE_LEN) + 5) as usize;
        let data: Vec<u8> = (0..len).map(|_| self.rng.below(256) as u8).collect();
        Verb::Send {
            imm: self
                .rng
                .chance_ppm(500_000)
                .then(|| self.rng.below(1 << 32) as u32),
            data: Block::new(&data).expect("small"),
        }
    }
}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Flight {
    at: Nanos,
    order: u64,
    to: usize,
    /// The receiver's port facing the sender (its link to it, where links
    /// are listed).
    port: u16,
    from: usize,
    /// Sent to every neighbour (PROTOCOL.md, D1), not by a link.
    announcement: bool,
    bytes: Vec<u8>,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Disruption {
    LinkDown(usize, usize),
    LinkUp(usize, usize),
    /// Down for good.
    Cut(usize, usize),
    /// Frames from the first node to the second lost for good (the other
    /// way follows with a `Cut`).
    CutOneWay(usize, usize),
    /// Every link between the nodes of a side (`Sim::sides`) and the rest
    /// goes down …
    Partition(usize),
    /// … and comes back.
    Heal(usize),
    Restart(usize),
    Scramble(usize),
    ScrambleAll,
}

struct Sim {
    cfg: SimConfig,
    faults: Faults,
    rng: Rng,
    now: Nanos,
    step: u64,
    nodes: Vec<Node<Tap>>,
    /// Each node's neighbours; link `k` of node `i` leads to `adj[i][k]`.
    adj: Vec<Vec<usize>>,
    /// Verbs addressed to any node through the fabric, not to a link.
    fabric: bool,
    net: BinaryHeap<Reverse<Flight>>,
    order: u64,
    down: Vec<Vec<bool>>,
    /// Partitions in force across each pair of nodes: each heals only its
    /// own.
    parted: Vec<Vec<u32>>,
    cut: Vec<Vec<bool>>,
    /// A verb drawn for a node that had no route to its target yet.
    stash: Vec<Option<(usize, Verb)>>,
    /// Cuts still waiting for a verb between their ends over a path.
    cuts_pending: Vec<PendingCut>,
    /// The nodes on one side of each partition.
    sides: Vec<Vec<bool>>,
    /// When every view first agreed (the fabric's convergence).
    converged_at: Option<Nanos>,
    /// Verbs that went out on a link (not a path) at least once: in doubt
    /// when that link is cut, and settled over a path before they go again.
    sent_on_link: Vec<bool>,
    disruptions: Vec<(Nanos, Disruption)>,
    ledger: Ledger,
    mailboxes: Mailboxes,
    issued: usize,
    outstanding: Vec<usize>,
    report: Report,
    /// With `agree_keys`: every node's identity, and the adversary
    /// replaying handshake messages.
    identities: Option<keys::Identities>,
    replayer: Option<keys::Replayer>,
    /// Each node's id now (it changes when the node yields its address).
    ids: Vec<u64>,
    /// With `addresses`: every node's tag, and the address space.
    addresses: Option<addresses::Addresses>,
    /// With `addresses`: the node away for half the run, and when it
    /// comes back.
    rejoiner: Option<(usize, Nanos)>,
    /// With `addresses`: the partition the run starts with, whose sides
    /// are the two fabrics that merge.
    merge_side: Option<usize>,
    /// With `discover`: the neighbours each node found.
    discovery: Option<discovery::Discovery>,
}

/// A cut link whose ends have not yet both been seen to reach each other
/// over a path: the first verb done over a path, and the first such verb
/// that never went out on the cut link (one in doubt there is settled over
/// the path before it goes again, which costs a round trip of the path).
struct PendingCut {
    at: Nanos,
    ends: (usize, usize),
    any: bool,
    fresh: bool,
}

/// One side of a partition: any proper subset of up to 63 nodes (a mask
/// drawn whole, as seeds recorded before larger fabrics replay), and in a
/// larger fabric the nodes within a random number of hops of a random node.
fn partition_side(rng: &mut Rng, adj: &[Vec<usize>]) -> Vec<bool> {
    let n = adj.len();
    if n < 64 {
        let mask = 1 + rng.below((1 << n) - 2);
        return (0..n).map(|i| mask & (1 << i) != 0).collect();
    }
    let centre = rng.below(n as u64) as usize;
    let radius = 1 + rng.below((topology::diameter(adj) / 2).max(1) as u64) as usize;
    let mut hops = vec![usize::MAX; n];
    hops[centre] = 0;
    let mut queue = std::collections::VecDeque::from([centre]);
    while let Some(a) = queue.pop_front() {
        for &b in &adj[a] {
            if hops[b] == usize::MAX && hops[a] < radius {
                hops[b] = hops[a] + 1;
                queue.push_back(b);
            }
        }
    }
    hops.into_iter().map(|h| h != usize::MAX).collect()
}

/// The node id the simulator gives node `i`.
pub(crate) fn node_id(i: usize) -> u64 {
    0x0200_0000_0000 + i as u64
}

/// Runs one seeded simulation and checks every invariant along the way.
pub fn run(cfg: &SimConfig, scenario: &Scenario, seed: u64) -> Result<Report, Failure> {
    let mut sim = Sim::new(*cfg, scenario, seed);
    match sim.run() {
        Ok(()) => Ok(sim.finish()),
        Err(violation) => Err(Failure {
            violation,
            at: sim.now,
            step: sim.step,
            replay: replay_command(cfg, scenario, seed),
        }),
    }
}

pub fn replay_command(cfg: &SimConfig, scenario: &Scenario, seed: u64) -> String {
    let f = scenario.faults;
    format!(
        "cargo run --release -p oae-sim -- run --scenario {} --seed {} --verbs {} --nodes {} --slots {} --credits {} \
         --loss-ppm {} --dup-ppm {} --corrupt-ppm {} --jitter-ns {}{} --flaps {} --restarts {}{}{}{}{}{}",
        scenario.name,
        seed,
        cfg.verbs,
        cfg.nodes,
        cfg.link.slots,
        cfg.link.receive_credits,
        f.loss_ppm,
        f.duplicate_ppm,
        f.corrupt_ppm,
        f.jitter,
        if f.exponential_delay { " --exponential-delay" } else { "" },
        f.link_flaps,
        f.restarts,
        if cfg.link.ordered { "" } else { " --unordered" },
        if cfg.agree_keys {
            " --agree-keys"
        } else if cfg.auth {
            " --auth"
        } else {
            ""
        },
        if cfg.messages_ppm > 0 {
            format!(
                " --messages-ppm {} --withdraw-ppm {}",
                cfg.messages_ppm, cfg.withdraw_ppm
            )
        } else {
            String::new()
        },
        if cfg.addresses { " --addresses" } else { "" },
        if cfg.discover {
            format!(" --discover --forget-after-delays {}", cfg.forget_after_delays)
        } else {
            String::new()
        }
    )
    .replace("\\\n         ", "")
}

impl Sim {
    fn new(mut cfg: SimConfig, scenario: &Scenario, seed: u64) -> Sim {
        let faults = scenario.faults;
        let mut rng = Rng::new(seed);
        let (shape, fabric) = match scenario.fabric {
            Some((shape, nodes)) => {
                cfg.nodes = nodes;
                (shape, true)
            }
            None => (Shape::Mesh, false),
        };
        let adj = shape.neighbours(cfg.nodes);
        let identities = cfg.agree_keys.then(|| keys::Identities::new(cfg.nodes));
        let (addresses, ids) = if cfg.addresses && fabric {
            let (a, ids) = addresses::Addresses::new(seed, cfg.nodes);
            (Some(a), ids)
        } else {
            (None, (0..cfg.nodes).map(node_id).collect::<Vec<_>>())
        };
        let nodes = (0..cfg.nodes)
            .map(|i| new_node(&cfg, &adj, i, (ids[i], 1), fabric, identities.as_ref()))
            .collect();
        // Disruptions are spread over the time the workload is expected to
        // take; the run heals after the last one.
        let span = (cfg.verbs as u64 / cfg.nodes as u64 + 1) * 40_000;
        let mut disruptions = Vec::new();
        for _ in 0..faults.link_flaps {
            let a = rng.below(cfg.nodes as u64) as usize;
            let b = if fabric {
                rng.pick(&adj[a])
            } else {
                (a + 1 + rng.below(cfg.nodes as u64 - 1) as usize) % cfg.nodes
            };
            let at = rng.below(span);
            let outage = 200_000 + rng.below(2_000_000);
            disruptions.push((at, Disruption::LinkDown(a.min(b), a.max(b))));
            disruptions.push((at + outage, Disruption::LinkUp(a.min(b), a.max(b))));
        }
        for _ in 0..faults.restarts {
            let n = rng.below(cfg.nodes as u64) as usize;
            disruptions.push((rng.below(span), Disruption::Restart(n)));
        }
        let mut cut = vec![vec![false; cfg.nodes]; cfg.nodes];
        for _ in 0..faults.cuts {
            // A link whose loss leaves every node a path to every other.
            for _ in 0..32 {
                let a = rng.below(cfg.nodes as u64) as usize;
                let b = rng.pick(&adj[a]);
                let mut after = cut.clone();
                after[a][b] = true;
                after[b][a] = true;
                if !cut[a][b] && topology::connected(&adj, &after) {
                    cut = after;
                    let at = if faults.busy_cuts {
                        span / 16 + rng.below(span / 16)
                    } else {
                        rng.below(span)
                    };
                    if faults.one_way_cuts {
                        let (from, to) = if rng.chance_ppm(500_000) {
                            (a, b)
                        } else {
                            (b, a)
                        };
                        let lag = rng.below(50) * 2 * cfg.delay;
                        disruptions.push((at, Disruption::CutOneWay(from, to)));
                        disruptions.push((at + lag, Disruption::Cut(a.min(b), a.max(b))));
                    } else {
                        disruptions.push((at, Disruption::Cut(a.min(b), a.max(b))));
                    }
                    break;
                }
            }
        }
        let mut sides = Vec::new();
        for _ in 0..faults.partitions {
            sides.push(partition_side(&mut rng, &adj));
            let at = rng.below(span);
            let outage = 500_000 + rng.below(2_000_000);
            disruptions.push((at, Disruption::Partition(sides.len() - 1)));
            disruptions.push((at + outage, Disruption::Heal(sides.len() - 1)));
        }
        let (merge_side, rejoiner) = if addresses.is_some() {
            // Two fabrics, each making its addresses, merge halfway.
            sides.push(partition_side(&mut rng, &adj));
            disruptions.push((0, Disruption::Partition(sides.len() - 1)));
            disruptions.push((span / 2, Disruption::Heal(sides.len() - 1)));
            // A node away from a quarter to three quarters of the run,
            // restarted meanwhile: the merge may give its address to
            // another, and it asks for it again when it rejoins.
            let away = rng.below(cfg.nodes as u64) as usize;
            sides.push((0..cfg.nodes).map(|i| i == away).collect());
            disruptions.push((span / 4, Disruption::Partition(sides.len() - 1)));
            disruptions.push((span / 4 + 1, Disruption::Restart(away)));
            disruptions.push((3 * span / 4, Disruption::Heal(sides.len() - 1)));
            (Some(sides.len() - 2), Some((away, 3 * span / 4)))
        } else {
            (None, None)
        };
        for _ in 0..faults.scrambles {
            let n = rng.below(cfg.nodes as u64) as usize;
            disruptions.push((rng.below(span), Disruption::Scramble(n)));
        }
        if faults.scramble_all {
            disruptions.push((span / 16 + rng.below(span / 16), Disruption::ScrambleAll));
        }
        disruptions.sort();
        disruptions.reverse();
        let adj_for_discovery = adj.clone();
        Sim {
            ledger: Ledger::new(
                cfg.nodes,
                cfg.region_len as usize,
                (RECEIVE_LEN * RECEIVE_CELLS) as usize,
            ),
            mailboxes: Mailboxes::new(seed, cfg.nodes),
            outstanding: vec![0; cfg.nodes],
            down: vec![vec![false; cfg.nodes]; cfg.nodes],
            parted: vec![vec![0; cfg.nodes]; cfg.nodes],
            cut: vec![vec![false; cfg.nodes]; cfg.nodes],
            stash: vec![None; cfg.nodes],
            cuts_pending: Vec::new(),
            sides,
            converged_at: None,
            sent_on_link: vec![false; cfg.verbs],
            adj,
            fabric,
            cfg,
            faults,
            rng,
            now: 0,
            step: 0,
            nodes,
            net: BinaryHeap::new(),
            order: 0,
            disruptions,
            issued: 0,
            report: Report::default(),
            replayer: cfg.agree_keys.then(|| keys::Replayer::new(seed)),
            identities,
            rejoiner,
            merge_side,
            ids,
            addresses,
            discovery: cfg
                .discover
                .then(|| discovery::Discovery::new(&adj_for_discovery, &cfg)),
        }
    }

    /// One step at `now`: frames due delivered, timers due run,
    /// disruptions due done, verbs submitted, frames sent, completions
    /// taken, every invariant of a step checked. True if it submitted.
    fn step(&mut self) -> Result<bool, Violation> {
        self.step += 1;
        self.deliver()?;
        for i in 0..self.nodes.len() {
            if self.nodes[i].poll_timeout().is_some_and(|t| t <= self.now) {
                self.nodes[i].handle_timeout(self.now);
                self.observe(i)?;
            }
        }
        self.disrupt()?;
        self.readdress();
        self.discover()?;
        let submitting = self.issued < self.cfg.verbs;
        if submitting {
            self.submit()?;
        }
        self.transmit()?;
        self.complete()?;
        self.post_receives();
        self.withdraw_receives()?;
        self.check_step()?;
        if self.fabric && self.converged_at.is_none() && self.views_agree() {
            self.converged_at = Some(self.now);
        }
        Ok(submitting)
    }

    fn run(&mut self) -> Check {
        let mut last_submit_at = 0;
        loop {
            if self.step()? {
                last_submit_at = self.now;
            }
            if self.issued == self.cfg.verbs && self.disruptions.is_empty() && self.settled() {
                return self.check_final();
            }
            if self.now > last_submit_at + self.cfg.settle_time {
                // The state of every node, for whoever replays the seed.
                if std::env::var_os("OAE_SIM_DEBUG").is_some() {
                    for r in self
                        .ledger
                        .records
                        .values()
                        .filter(|r| r.completion.is_none() && !r.orphaned)
                    {
                        eprintln!("incomplete: {r:?}");
                    }
                    for (i, n) in self.nodes.iter().enumerate() {
                        for l in all_links(n) {
                            eprintln!(
                                "node {i} link {l:#x} peer {:?}: {:?} {:?}",
                                n.link_peer(l),
                                n.link_status(l),
                                n.link_stats(l)
                            );
                        }
                        eprintln!(
                            "node {i} routes {:?} view {:?} stats {:?}",
                            n.routes(),
                            n.view(),
                            n.fabric_stats()
                        );
                    }
                }
                let complete = self
                    .ledger
                    .records
                    .values()
                    .all(|r| r.completion.is_some() || r.orphaned);
                if complete && self.fabric && !self.views_agree() {
                    let views: Vec<String> = self
                        .nodes
                        .iter()
                        .map(|n| format!("{:?}", n.view()))
                        .collect();
                    return violation(
                        "views_agree",
                        format!(
                            "views differ {} ns after the last submission: {}",
                            self.cfg.settle_time,
                            views.join(" / ")
                        ),
                    );
                }
                if complete {
                    let held: Vec<String> = self
                        .nodes
                        .iter()
                        .enumerate()
                        .map(|(i, n)| {
                            format!(
                                "node {i}: {} in doubt, {} words locked",
                                n.in_doubt(),
                                n.memory().locked_words()
                            )
                        })
                        .collect();
                    return violation(
                        "no_doubt_while_path",
                        format!(
                            "transfers still held although every node has a path: {}",
                            held.join(", ")
                        ),
                    );
                }
                return violation(
                    "liveness",
                    format!(
                        "not settled {} ns after the last submission: {} verbs incomplete{}",
                        self.cfg.settle_time,
                        self.ledger
                            .records
                            .values()
                            .filter(|r| r.completion.is_none() && !r.orphaned)
                            .count(),
                        keys::describe_down(&self.nodes)
                    ),
                );
            }
            self.advance();
        }
    }

    fn advance(&mut self) {
        let mut next = Nanos::MAX;
        if let Some(Reverse(f)) = self.net.peek() {
            next = next.min(f.at);
        }
        for n in &self.nodes {
            if let Some(t) = n.poll_timeout() {
                next = next.min(t);
            }
        }
        if let Some(d) = &self.discovery {
            for i in 0..self.nodes.len() {
                if let Some(t) = d.poll_timeout(i) {
                    next = next.min(t);
                }
            }
        }
        if let Some((t, _)) = self.disruptions.last() {
            next = next.min(*t);
        }
        self.now = next.max(self.now);
    }

    fn deliver(&mut self) -> Check {
        while self.net.peek().is_some_and(|Reverse(f)| f.at <= self.now) {
            let Reverse(f) = self.net.pop().expect("peeked");
            if self.down[f.from][f.to] || self.parted[f.from][f.to] > 0 || self.cut[f.from][f.to] {
                self.report.link_down_drops += 1;
                continue;
            }
            let link = match &mut self.discovery {
                Some(d) => {
                    let port = usize::from(f.port);
                    match d.arrive(f.to, port, f.from, f.announcement, self.now) {
                        discovery::Arrival::Link(link) => link,
                        discovery::Arrival::Nowhere => continue,
                    }
                }
                None => f.port,
            };
            // An authenticated node opens the frame itself, and counts
            // what it drops.
            self.nodes[f.to].handle_frame(link, &f.bytes, self.now);
            self.observe(f.to)?;
        }
        Ok(())
    }

    fn disrupt(&mut self) -> Check {
        while self.disruptions.last().is_some_and(|(t, _)| *t <= self.now) {
            let (_, d) = self.disruptions.pop().expect("checked");
            match d {
                Disruption::LinkDown(a, b) | Disruption::LinkUp(a, b) => {
                    let down = matches!(d, Disruption::LinkDown(..));
                    self.down[a][b] = down;
                    self.down[b][a] = down;
                    self.report.flaps += u64::from(down);
                }
                Disruption::Cut(a, b) | Disruption::CutOneWay(a, b) => {
                    // A cut begun one way was counted, and its failover
                    // timed, from then.
                    let begun = self.cut[a][b] || self.cut[b][a];
                    self.cut[a][b] = true;
                    if matches!(d, Disruption::Cut(..)) {
                        self.cut[b][a] = true;
                    }
                    if !begun {
                        self.report.cuts += 1;
                        self.cuts_pending.push(PendingCut {
                            at: self.now,
                            ends: (a.min(b), a.max(b)),
                            any: false,
                            fresh: false,
                        });
                    }
                }
                Disruption::Partition(side) | Disruption::Heal(side) => {
                    let down = matches!(d, Disruption::Partition(_));
                    let inside = &self.sides[side];
                    for a in 0..self.nodes.len() {
                        for &b in &self.adj[a] {
                            if inside[a] != inside[b] {
                                let parted = &mut self.parted[a][b];
                                *parted = if down { *parted + 1 } else { *parted - 1 };
                            }
                        }
                    }
                    self.report.partitions += u64::from(down);
                }
                Disruption::Restart(n) => self.restart(n),
                Disruption::Scramble(n) => {
                    self.report.scrambles += 1;
                    let rng = &mut self.rng;
                    self.nodes[n].scramble_fabric(|| rng.next_u64());
                }
                Disruption::ScrambleAll => {
                    for n in 0..self.nodes.len() {
                        self.report.scrambles += 1;
                        let rng = &mut self.rng;
                        self.nodes[n].scramble_fabric(|| rng.next_u64());
                    }
                }
            }
        }
        Ok(())
    }

    /// With `discover`: announcements due go out on every port (through
    /// the fault model), and neighbours their links did not hear in time
    /// are let go (D1, D6).
    fn discover(&mut self) -> Check {
        let Some(d) = &mut self.discovery else {
            return Ok(());
        };
        let mut out = Vec::new();
        for i in 0..self.nodes.len() {
            d.forget(i, &mut self.nodes[i], self.now);
            for (port, bytes) in d.announcements(i, &self.nodes[i], self.now) {
                out.push((i, port, bytes));
            }
        }
        for (i, port, bytes) in out {
            self.put_on_wire(i, self.adj[i][port], &bytes, true);
        }
        Ok(())
    }

    /// Every node that must give up its address (N3) comes back as a new
    /// incarnation at a free one (N4).
    fn readdress(&mut self) {
        let Some(a) = &self.addresses else {
            return;
        };
        let yielding: Vec<(usize, (usize, u64))> = (0..self.nodes.len())
            .filter_map(|i| a.yielded(i, &self.nodes[i]).map(|y| (i, y)))
            .collect();
        for (i, (holder, id)) in yielding {
            self.report.address_yields += 1;
            if let Some((away, back)) = self.rejoiner
                && self.now >= back
                && (i == away || holder == away)
            {
                self.report.rejoin_yields += 1;
            }
            if let Some(k) = self.merge_side
                && self.sides[k][i] != self.sides[k][holder]
            {
                self.report.merge_yields += 1;
            }
            self.ids[i] = id;
            self.restart(i);
        }
    }

    fn restart(&mut self, n: usize) {
        self.report.restarts += 1;
        self.account_node(n);
        let epoch = self.nodes[n].epoch() + 1;
        // A new process: with authentication, packet numbers from 1 and
        // no replay window yet.
        self.nodes[n] = new_node(
            &self.cfg,
            &self.adj,
            n,
            (self.ids[n], epoch),
            self.fabric,
            self.identities.as_ref(),
        );
        if let Some(d) = &mut self.discovery {
            d.restarted(n, self.adj[n].len());
        }
        self.ledger.node_restarted(n);
        self.mailboxes.free[n] = (0..RECEIVE_CELLS).rev().collect();
        self.mailboxes.cells.retain(|_, (node, ..)| *node != n);
        self.outstanding[n] = 0;
    }

    /// Folds a node's link counters into the report (before it is replaced).
    fn account_node(&mut self, n: usize) {
        if let Some(v) = self.nodes[n].view() {
            self.report.max_view = self.report.max_view.max(v.number);
        }
        if let Some(f) = self.nodes[n].fabric_stats() {
            self.report.relayed += f.relayed;
            self.report.rerouted += f.verbs_rerouted;
            self.report.resolved += f.resolved_as_initiator;
        }
        for l in all_links(&self.nodes[n]) {
            let s = self.nodes[n].link_stats(l).expect("link exists");
            self.report.reversals += s.reversals;
            self.report.retries += s.retries;
            self.report.refusals += s.refusals_received;
            self.report.presumed_commits += s.presumed_commits;
            self.report.lost_by_order += s.lost_by_order;
            self.report.lost_by_patience += s.lost_by_patience;
            self.report.probes += s.probes_sent;
            self.report.malformed_counted += s.malformed.iter().sum::<u64>();
        }
        self.report.handshakes += keys::handshakes(&self.nodes[n]);
        let (dropped, unsealed) = auth_counts(&self.nodes[n]);
        for (a, b) in self.report.auth_dropped.iter_mut().zip(dropped) {
            *a += b;
        }
        self.report.auth_unsealed += unsealed;
    }

    fn submit(&mut self) -> Check {
        for i in 0..self.nodes.len() {
            while self.outstanding[i] < self.cfg.outstanding && self.issued < self.cfg.verbs {
                let (j, verb) = match self.stash[i].take() {
                    Some(stashed) => stashed,
                    None => {
                        let j = match self.busy_cut_peer(i) {
                            Some(j) => j,
                            None => {
                                (i + 1 + self.rng.below(self.cfg.nodes as u64 - 1) as usize)
                                    % self.cfg.nodes
                            }
                        };
                        let send = self.cfg.messages_ppm > 0
                            && self.mailboxes.rng.chance_ppm(self.cfg.messages_ppm);
                        if send {
                            (j, self.mailboxes.random_send())
                        } else {
                            (j, random_verb(&mut self.rng, self.cfg.region_len))
                        }
                    }
                };
                let id = VerbId(self.issued as u64);
                let submitted = if self.fabric {
                    self.nodes[i].submit_to(self.ids[j], id, &verb).map(|_| ())
                } else {
                    match self.link_to(i, j) {
                        Some(link) => self.nodes[i].submit(link, id, &verb),
                        // Not found yet: as a fabric without a route.
                        None => Err(SubmitError::NoRoute(self.ids[j])),
                    }
                };
                match submitted {
                    Ok(()) => {}
                    // No route yet (bring-up, a partition): the same verb
                    // goes again on a later step.
                    Err(SubmitError::NoRoute(_)) => {
                        self.stash[i] = Some((j, verb));
                        break;
                    }
                    Err(e) => {
                        return violation(
                            "liveness",
                            format!("submission of {verb:?} refused: {e}"),
                        );
                    }
                }
                self.issued += 1;
                self.report.sends += u64::from(matches!(verb, Verb::Send { .. }));
                self.ledger.issue(
                    id,
                    Record {
                        verb,
                        issuer: i,
                        issuer_epoch: self.nodes[i].epoch(),
                        target: j,
                        submitted_at: self.now,
                        completion: None,
                        applied: 0,
                        committed: 0,
                        reversed: 0,
                        model_output: None,
                        model_block: None,
                        undo: Vec::new(),
                        sent_block: None,
                        landed: false,
                        orphaned: false,
                        target_lost: false,
                        receive: None,
                        delivered: false,
                    },
                );
                self.outstanding[i] += 1;
                self.observe(i)?;
            }
        }
        Ok(())
    }

    fn transmit(&mut self) -> Check {
        let mut buf = [0u8; MAX_FRAME + AUTH_TRAILER_LEN];
        for i in 0..self.nodes.len() {
            for l in 0..self.nodes[i].links() as u16 {
                // A vacant link has no one to send to (a port polls only
                // the links bound on it).
                if self.peer_of(i, l).is_none() {
                    continue;
                }
                while let Some(len) = self.nodes[i].poll_transmit(l, self.now, &mut buf) {
                    self.observe(i)?;
                    self.send(i, l, &buf[..len]);
                    self.replay();
                }
            }
        }
        Ok(())
    }

    /// Now and then, a recorded handshake message delivered to any link.
    fn replay(&mut self) {
        let Some(r) = &mut self.replayer else {
            return;
        };
        let Some((to, link, bytes)) = r.replay(REPLAY_PPM, &self.adj) else {
            return;
        };
        self.report.replayed += 1;
        self.order += 1;
        self.net.push(Reverse(Flight {
            at: self.now + self.cfg.delay,
            order: self.order,
            to,
            port: link,
            from: self.adj[to][usize::from(link)],
            announcement: false,
            bytes,
        }));
    }

    /// Puts a frame on the wire, through the fault model.
    fn send(&mut self, from: usize, link: u16, frame: &[u8]) {
        self.report.frames += 1;
        if let Some(r) = &mut self.replayer {
            r.record(frame);
        }
        if frame
            .get(2..4)
            .is_some_and(|t| t[0] == 3 && t[1] & 0x1f == 1)
        {
            self.report.adverts += 1;
            self.report.advert_bytes += frame.len() as u64;
        }
        let to = self.peer_of(from, link).expect("a bound link");
        self.put_on_wire(from, to, frame, false);
    }

    /// `frame` from node `from` to its neighbour `to`, through the fault
    /// model; an announcement or a link's frame.
    fn put_on_wire(&mut self, from: usize, to: usize, frame: &[u8], announcement: bool) {
        let f = self.faults;
        if self.rng.chance_ppm(f.loss_ppm) {
            self.report.lost += 1;
            return;
        }
        let copies = if self.rng.chance_ppm(f.duplicate_ppm) {
            self.report.duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let mut bytes = frame.to_vec();
            if self.rng.chance_ppm(f.corrupt_ppm) {
                self.report.corrupted += 1;
                for _ in 0..1 + self.rng.below(3) {
                    let bit = self.rng.below(bytes.len() as u64 * 8);
                    bytes[(bit / 8) as usize] ^= 1 << (bit % 8);
                }
            }
            let jitter = if f.jitter > 0 {
                self.rng.below(f.jitter)
            } else {
                0
            };
            self.order += 1;
            self.net.push(Reverse(Flight {
                at: self.now + self.cfg.delay + jitter,
                order: self.order,
                to,
                port: self.adj[to]
                    .iter()
                    .position(|&n| n == from)
                    .expect("linked") as u16,
                from,
                announcement,
                bytes,
            }));
        }
    }

    /// Feeds what node `i`'s core just did to the oracle.
    fn observe(&mut self, i: usize) -> Check {
        let seen = std::mem::take(&mut self.nodes[i].observer_mut().0);
        for s in seen {
            match s {
                Seen::Sent(link, epoch, slot, seq, id) => {
                    let (target, path) = self.channel(i, link);
                    if !path && let Some(on_link) = self.sent_on_link.get_mut(id.0 as usize) {
                        *on_link = true;
                    }
                    self.ledger
                        .sent(i, epoch, channel_key(target, path), slot, seq, id)
                }
                Seen::Applied(link, pe, slot, seq) => {
                    let key = self.attempt_key(i, link, pe, slot, seq);
                    self.ledger.applied(i, link, key)?
                }
                Seen::Committed(link, pe, slot, seq) => {
                    let key = self.attempt_key(i, link, pe, slot, seq);
                    self.ledger.committed(key)?
                }
                Seen::Reversed(link, pe, slot, seq) => {
                    let key = self.attempt_key(i, link, pe, slot, seq);
                    self.ledger.reversed(i, key)?
                }
                Seen::LocalLanded(id) => self.ledger.local_landed(id)?,
            }
        }
        if let Some(ids) = &self.identities {
            keys::check_agreed(ids, &self.nodes, i, &self.adj)?;
        }
        if let Some(d) = &self.discovery {
            d.check(i, &self.nodes[i], &self.ids)?;
        }
        Ok(())
    }

    /// The node at the other end of node `i`'s link or path, and whether
    /// it is a path.
    fn channel(&self, i: usize, link: LinkId) -> (usize, bool) {
        if link >= PATH_BASE {
            let peer = self.nodes[i].link_peer(link).expect("path exists");
            let index = match &self.addresses {
                Some(a) => a.index_of(peer).expect("a node's id"),
                None => (peer - node_id(0)) as usize,
            };
            (index, true)
        } else {
            (
                self.peer_of(i, link).expect("a link in use is bound"),
                false,
            )
        }
    }

    /// The node node `i`'s link `link` runs to: its neighbour on that
    /// port, or the one it found.
    fn peer_of(&self, i: usize, link: LinkId) -> Option<usize> {
        match &self.discovery {
            Some(d) => d.peer(i, link),
            None => Some(self.adj[i][usize::from(link)]),
        }
    }

    /// Node `i`'s link to its neighbour `j`, if it has one (found).
    fn link_to(&self, i: usize, j: usize) -> Option<LinkId> {
        match &self.discovery {
            Some(d) => d.link_to(i, j),
            None => self.adj[i]
                .iter()
                .position(|&n| n == j)
                .map(|l| l as LinkId),
        }
    }

    /// How the oracle names a transfer the target `i` saw on `link` from
    /// the initiator incarnation `peer_epoch`: the initiator's own name.
    fn attempt_key(
        &self,
        i: usize,
        link: LinkId,
        pe: u32,
        slot: u16,
        seq: u16,
    ) -> ledger::AttemptKey {
        let (initiator, path) = self.channel(i, link);
        (initiator, pe, channel_key(i, path), slot, seq)
    }

    fn complete(&mut self) -> Check {
        for i in 0..self.nodes.len() {
            while let Some(ev) = self.nodes[i].poll_event() {
                if let Event::Received { link, id, len, imm } = ev {
                    self.ledger.received(i, link, id, len, imm)?;
                    // The application is done with it: the cell is free.
                    let (.., cell) = self.mailboxes.cells.remove(&id).expect("posted");
                    self.mailboxes.free[i].push(cell);
                    self.report.messages += 1;
                }
                if let Event::Completed {
                    result: Err(VerbError::Refused(Refusal::NoReceive)),
                    ..
                } = ev
                {
                    self.report.no_receive += 1;
                }
                if let Event::Completed { id, result, link } = ev {
                    self.ledger.completed(id, self.now, result)?;
                    let rec = &self.ledger.records[&id];
                    let (target, submitted_at) = (rec.target, rec.submitted_at);
                    let current = rec.issuer_epoch == self.nodes[i].epoch();
                    if link >= PATH_BASE && result.is_ok() {
                        let fresh = !self.sent_on_link[id.0 as usize];
                        self.rerouted_verb_done((i, target), fresh);
                    }
                    self.report.max_latency = self.report.max_latency.max(self.now - submitted_at);
                    if current {
                        self.outstanding[i] -= 1;
                    }
                }
            }
        }
        Ok(())
    }

    /// The other end of a cut link `i` is an end of, with busy cuts.
    fn busy_cut_peer(&self, i: usize) -> Option<usize> {
        if !self.faults.busy_cuts {
            return None;
        }
        (0..self.nodes.len()).find(|&j| self.cut[i][j] || self.cut[j][i])
    }

    /// A verb between two nodes completed over a path: the first after a
    /// cut of their link times the failover.
    fn rerouted_verb_done(&mut self, (i, j): (usize, usize), fresh: bool) {
        let ends = (i.min(j), i.max(j));
        let rtt = 2 * self.cfg.delay;
        let Some(k) = self.cuts_pending.iter().position(|c| c.ends == ends) else {
            return;
        };
        let cut = &mut self.cuts_pending[k];
        let rtts = (self.now - cut.at).div_ceil(rtt);
        let r = &mut self.report;
        if !cut.any {
            cut.any = true;
            r.reroutes += 1;
            r.reroute_rtts_max = r.reroute_rtts_max.max(rtts);
            r.reroute_rtts_sum += rtts;
        }
        if fresh && !cut.fresh {
            cut.fresh = true;
            r.fresh_reroutes += 1;
            r.fresh_reroute_rtts_max = r.fresh_reroute_rtts_max.max(rtts);
            r.fresh_reroute_rtts_sum += rtts;
        }
        if cut.any && cut.fresh {
            self.cuts_pending.swap_remove(k);
        }
    }

    /// Keeps receives posted on every link and path, as an application
    /// would, unless this node's receives run out this step.
    fn post_receives(&mut self) {
        if self.cfg.messages_ppm == 0 {
            return;
        }
        let m = &mut self.mailboxes;
        for (i, node) in self.nodes.iter_mut().enumerate() {
            if m.rng.chance_ppm(m.starve_ppm) {
                continue;
            }
            for link in all_links(node) {
                let posted = node.link_status(link).expect("exists").posted_receives;
                for _ in posted..m.depth {
                    let Some(cell) = m.free[i].pop() else {
                        break;
                    };
                    let receive = PostedReceive {
                        id: m.next_receive,
                        region: MAILBOX,
                        offset: cell * RECEIVE_LEN,
                        len: RECEIVE_LEN as u16,
                    };
                    m.next_receive += 1;
                    node.post_receive(link, receive)
                        .expect("a posted receive fits its link");
                    m.cells.insert(receive.id, (i, link, cell));
                    let at = receive.offset as usize;
                    self.ledger
                        .posted(i, link, receive.id, at, RECEIVE_LEN as usize);
                }
            }
        }
    }

    /// Now and then an application takes back a receive it posted: the
    /// core gives it back only if no message is in it or arriving in it,
    /// as the oracle says.
    fn withdraw_receives(&mut self) -> Check {
        let m = &mut self.mailboxes;
        for (i, node) in self.nodes.iter_mut().enumerate() {
            if !m.withdrawals.chance_ppm(self.cfg.withdraw_ppm) {
                continue;
            }
            let mine: Vec<_> = m.cells.iter().filter(|(_, c)| c.0 == i).collect();
            if mine.is_empty() {
                continue;
            }
            let (&id, &(_, link, cell)) = mine[m.withdrawals.below(mine.len() as u64) as usize];
            let withdrawn = node.cancel_receive(link, id);
            self.ledger.withdrawn(i, link, id, withdrawn)?;
            if withdrawn {
                m.cells.remove(&id);
                m.free[i].push(cell);
                self.report.withdrawn += 1;
            } else {
                self.report.withdraw_refused += 1;
            }
        }
        Ok(())
    }

    /// Invariants checked after every step.
    fn check_step(&mut self) -> Check {
        for (i, n) in self.nodes.iter().enumerate() {
            let regions = [
                (
                    MAILBOX,
                    &self.ledger.mailbox[i],
                    "no_trace_after_reversal",
                    "the messages it received",
                ),
                (
                    LANDING,
                    &self.ledger.landing[i],
                    "linearizable",
                    "what its READs returned",
                ),
                (
                    REGION,
                    &self.ledger.model[i],
                    "no_trace_after_reversal",
                    "the sequential model",
                ),
            ];
            for (region, model, invariant, what) in regions {
                let real = n.memory().bytes(region).expect("registered");
                if let Some(at) = real.iter().zip(model).position(|(a, b)| a != b) {
                    let word = at & !7..(at & !7) + 8;
                    return violation(
                        invariant,
                        format!(
                            "node {i}'s region {region} differs from {what} at byte {at}: \
                             {:?} vs {:?}",
                            &real[word.clone()],
                            &model[word]
                        ),
                    );
                }
            }
            for l in all_links(n) {
                let st = n.link_status(l).expect("exists");
                let stats = n.link_stats(l).expect("exists");
                if st.credits_in_use > st.peer_credits || st.tentative > st.receive_credits {
                    return violation("no_overrun", format!("node {i} link {l}: {st:?}"));
                }
                if stats.overruns != 0 || stats.protocol_violations != 0 {
                    return violation(
                        "no_overrun",
                        format!(
                            "node {i} link {l}: {} overruns, {} protocol violations",
                            stats.overruns, stats.protocol_violations
                        ),
                    );
                }
            }
            self.ledger.checks_passed += 2;
        }
        Ok(())
    }

    fn settled(&self) -> bool {
        self.ledger
            .records
            .values()
            .all(|r| r.completion.is_some() || r.orphaned)
            && self.nodes.iter().all(|n| n.is_quiescent())
            && self.nodes.iter().all(|n| n.memory().locked_words() == 0)
            && (!self.fabric || self.views_agree())
            && (self.addresses.is_none() || addresses::check_unique(&self.ids).is_ok())
    }

    /// Every node holds the same view: the same number, and as members
    /// exactly the nodes that run, each as its current incarnation (no
    /// phantom a scramble made up, none left out). Checked once the
    /// disruptions are over, when the fabric is connected again.
    ///
    /// Views are compared by number and digest (64-bit FNV-1a over the
    /// members: the cost of a step must not grow with the square of the
    /// fabric), node 0's members exactly.
    fn views_agree(&self) -> bool {
        let first = self.nodes[0].view();
        // Members are in node id order; nodes that made their own ids are
        // not.
        let mut running: Vec<(u64, u32)> = self
            .nodes
            .iter()
            .map(|n| (n.node_id(), n.epoch()))
            .collect();
        running.sort_unstable();
        let exact = first.is_some_and(|v| {
            v.members.len() == running.len()
                && v.members
                    .iter()
                    .zip(&running)
                    .all(|(m, &(node, epoch))| (m.node, m.epoch) == (node, epoch))
        });
        let id = self.nodes[0].view_id();
        exact && self.nodes.iter().all(|n| n.view_id() == id)
    }

    fn check_final(&mut self) -> Check {
        self.ledger.check_final()?;
        if self.addresses.is_some() {
            addresses::check_unique(&self.ids)?;
        }
        self.check_auth()?;
        for (i, n) in self.nodes.iter().enumerate() {
            if n.in_doubt() != 0 {
                return violation(
                    "in_doubt_resolved",
                    format!("node {i} still has transfers in doubt"),
                );
            }
        }
        Ok(())
    }

    fn finish(mut self) -> Report {
        for n in 0..self.nodes.len() {
            self.account_node(n);
        }
        let mut r = self.report;
        r.verbs = self.ledger.records.len() as u64;
        for rec in self.ledger.records.values() {
            match rec.completion {
                Some((_, Ok(_))) => r.ok += 1,
                Some((_, Err(_))) => r.err += 1,
                None => r.orphaned += 1,
            }
        }
        if let Some(d) = &self.discovery {
            r.neighbours_found = d.found;
            r.neighbours_forgotten = d.forgotten;
            r.announcements = d.announcements;
        }
        r.steps = self.step;
        r.checks = self.ledger.checks_passed;
        r.sim_time = self.now;
        r
    }
}

impl Sim {
    /// Authentication drops only what the network broke: a bad tag or an
    /// unknown key number only for a corrupted frame, never a frame for
    /// want of a trailer.
    fn check_auth(&self) -> Check {
        // Nodes replaced by restarts are in the report; the running ones
        // are added here.
        let mut dropped = self.report.auth_dropped;
        let mut unsealed = self.report.auth_unsealed;
        for n in &self.nodes {
            let (d, u) = auth_counts(n);
            for (a, b) in dropped.iter_mut().zip(d) {
                *a += b;
            }
            unsealed += u;
        }
        if unsealed != 0 {
            return violation(
                "auth_seals_every_frame",
                format!("{unsealed} frames left unsealed"),
            );
        }
        let [unauthenticated, unknown_key, bad_tag, _, _] = dropped;
        // Keys agreed by handshake change at restarts: frames sealed under
        // a key the other end does not hold yet, or no longer, are dropped
        // as they cross.
        let changing = self.cfg.agree_keys;
        if unauthenticated != 0 || (!changing && bad_tag + unknown_key > self.report.corrupted) {
            return violation(
                "auth_drops_only_broken_frames",
                format!(
                    "{unauthenticated} frames without a trailer, {bad_tag} bad tags and \
                     {unknown_key} unknown keys for {} corrupted frames",
                    self.report.corrupted
                ),
            );
        }
        Ok(())
    }
}

/// Node `n`'s links authenticated under the simulator's key, as
/// `[queue.auth]` makes a dataplane's.
fn authenticate(node: &mut Node<Tap>, adj: &[Vec<usize>], n: usize) {
    let mac = |i: usize| -> [u8; 6] { node_id(i).to_be_bytes()[2..].try_into().expect("6 bytes") };
    for (k, &peer) in adj[n].iter().enumerate() {
        let link = LinkIdentity {
            local_mac: mac(n),
            peer_mac: mac(peer),
            channel: 0,
        };
        node.authenticate_link(
            k as LinkId,
            Authenticator::new(link, 0, &LinkKey([0x5a; 32])),
        )
        .expect("the node's own link");
    }
}

/// What a node's authenticated links dropped, by `AuthError`, and left
/// unsealed.
fn auth_counts(node: &Node<Tap>) -> ([u64; 5], u64) {
    let mut dropped = [0; 5];
    let mut unsealed = 0;
    for l in 0..node.links() as LinkId {
        if let Some(a) = node.link_auth(l) {
            for (d, x) in dropped.iter_mut().zip(a.stats().dropped) {
                *d += x;
            }
            unsealed += a.stats().unsealed;
        }
    }
    (dropped, unsealed)
}

/// A node's links and paths.
fn all_links(n: &Node<Tap>) -> Vec<LinkId> {
    (0..n.links() as LinkId)
        .chain(n.paths().map(|(l, _)| l))
        .collect()
}

/// The oracle's name for the channel of a transfer towards `target`.
fn channel_key(target: usize, path: bool) -> u32 {
    (target as u32) << 1 | u32::from(path)
}

/// Node `i` as `(id, epoch)`.
fn new_node(
    cfg: &SimConfig,
    adj: &[Vec<usize>],
    i: usize,
    (id, epoch): (u64, u32),
    fabric: bool,
    identities: Option<&keys::Identities>,
) -> Node<Tap> {
    let mut n = Node::with_observer(id, epoch, Tap::default());
    n.register(RegionSpec {
        id: REGION,
        key: KEY,
        len: cfg.region_len,
        permissions: Permissions::ALL,
    })
    .expect("valid region");
    n.register(RegionSpec {
        id: LANDING,
        key: KEY,
        len: cfg.region_len,
        permissions: Permissions::READ,
    })
    .expect("valid region");
    // Receives are the application's: no peer's verb may touch them.
    n.register(RegionSpec {
        id: MAILBOX,
        key: KEY,
        len: RECEIVE_LEN * RECEIVE_CELLS,
        permissions: Permissions::READ,
    })
    .expect("valid region");
    for _ in &adj[i] {
        n.add_link(cfg.link).expect("valid link config");
    }
    if let Some(ids) = identities {
        keys::agree(ids, &mut n, cfg, &adj[i], i, epoch);
    } else if cfg.auth {
        authenticate(&mut n, adj, i);
    }
    if fabric {
        n.enable_fabric(FabricConfig::for_links(&cfg.link), &cfg.link)
            .expect("valid fabric config");
    }
    n
}

/// A verb drawn so that verbs collide on a few words, compares sometimes
/// succeed, and a few verbs are refused (bad key, out of bounds).
fn random_verb(rng: &mut Rng, region_len: u32) -> Verb {
    let words = region_len / 8;
    let target = if rng.chance_ppm(20_000) {
        RegionRef {
            id: REGION,
            key: KEY ^ 1,
        }
    } else {
        RegionRef {
            id: REGION,
            key: KEY,
        }
    };
    let word = |rng: &mut Rng| (rng.below(u64::from(words.min(8))) as u32) * 8;
    let small = |rng: &mut Rng| rng.below(4);
    match rng.below(100) {
        0..=24 => Verb::CompareAndSwap {
            target,
            offset: word(rng),
            expected: small(rng),
            new: small(rng),
        },
        25..=44 => Verb::FetchAdd {
            target,
            offset: word(rng),
            add: 1 + small(rng),
        },
        45..=54 => Verb::Swap {
            target,
            offset: word(rng),
            new: small(rng),
        },
        55..=64 => {
            let len = 1 + rng.below(24) as usize;
            let offset = rng.below(u64::from(region_len) - len as u64 + 8) as u32;
            let data: Vec<u8> = (0..len).map(|_| rng.below(4) as u8).collect();
            Verb::Write {
                target,
                offset,
                data: Block::new(&data).expect("small"),
            }
        }
        65..=74 => {
            let len = 1 + rng.below(32) as u16;
            let offset = rng.below(u64::from(region_len) - u64::from(len) + 1) as u32;
            // READs land in the issuer's landing region, which no peer's
            // verb reaches (as an application's receive buffers), at the
            // offset they read from.
            Verb::Read {
                target,
                offset,
                local_region: LANDING,
                local_offset: offset,
                len,
            }
        }
        75..=87 => {
            let count = 1 + rng.below(MAX_MCAS_WORDS as u64) as usize;
            let ws: Vec<McasWord> = (0..count)
                .map(|_| McasWord {
                    offset: word(rng),
                    expected: small(rng),
                    new: small(rng),
                })
                .collect();
            Verb::multi_word_commit(target, &ws).expect("1..=8 words")
        }
        _ => {
            let len = 8 * (1 + rng.below(3) as u16);
            let max_start = u64::from(region_len) - u64::from(len);
            Verb::BilateralSwap {
                target,
                offset: rng.below(max_start + 1) as u32,
                local_region: REGION,
                local_offset: rng.below(max_start + 1) as u32,
                len,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use oae_proto::Opcode;

    use super::*;

    /// The simulator's mix (with messages) reaches every kind of verb the
    /// core has.
    #[test]
    fn the_random_mix_draws_every_kind_of_verb() {
        let mut rng = Rng::new(1);
        let mut mailboxes = Mailboxes::new(1, 2);
        let mut drawn = [0u32; Opcode::COUNT];
        for _ in 0..10_000 {
            drawn[random_verb(&mut rng, 128).opcode().index()] += 1;
        }
        drawn[mailboxes.random_send().opcode().index()] += 1;
        assert!(drawn.iter().all(|&n| n > 0), "draws by kind: {drawn:?}");
    }
}
