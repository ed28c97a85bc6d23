//! Exhaustive model checking of the real link protocol with `stateright`.
//!
//! The model's state is two real [`oae_proto::Node`]s plus the set of frames
//! in flight, as the bytes `poll_transmit` produced. Every transition runs the
//! real code: `handle_frame` (parse and all), `handle_timeout`, `submit` and
//! `poll_transmit`. Nothing about the protocol is re-described here; the
//! invariants (named as in `docs/SEMANTICS.md`) look only at what the nodes
//! report through the [`Observer`] hooks and `poll_event`, their memory and
//! their link status and counters, against a sequential model of the word
//! computed here.
//!
//! Actions: deliver a frame to the node that did not send it; let a round
//! elapse at a node (its clock moves to its `poll_timeout()`: time is an
//! input, there is no clock); submit the next verb of a fixed script. After
//! each, the node's `poll_transmit` is drained onto the wire. Bring-up is in
//! the model: the nodes start fresh and their first frames are HELLOs.
//!
//! Two channels. The *unordered* one is lossy and duplicating: a frame, once
//! sent, stays in the set and may be delivered any number of times (zero =
//! lost), in any order relative to every other frame. The *FIFO* one is the
//! shape of a point-to-point link (a cable, a veth pair): each direction is
//! a queue whose head is delivered or lost, so frames arrive in the order
//! they were sent or not at all. Links that say they are `ordered` find
//! losses by order; on the unordered channel that setting reverses
//! transfers that were only late, and the invariants must hold all the same. The rounds per node and the script
//! are bounded, which makes the space finite; the bounds and what they cost
//! are next to the tests at the end.
//!
//! State identity. A link's counters only grow, so a duplicate the node
//! discards would make a "new" node and the space would be infinite; the
//! core therefore leaves its counters (which record, never steer) out of a
//! node's `Hash` and `Eq`, and the [`Recorder`] keeps which of the counters
//! the properties read are non-zero. Everything else in a node is part of
//! the state, byte for byte. The [`Recorder`] keeps what the
//! properties need in a canonical order for the same reason.
//!
//! Run with `cargo test -p oae-tests --test model_check -- --nocapture` to
//! see the state counts; a broken invariant prints the action path to it.

use std::collections::BTreeSet;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Instant;

use oae_proto::wire::{Frame, MAX_FRAME, SLICE, Transition};
use oae_proto::{
    Block, Event, LinkConfig, Node, Observer, Output, Permissions, PostedReceive, Refusal,
    RegionRef, RegionSpec, Verb, VerbError, VerbId,
};
use stateright::{Checker, Expectation, HasDiscoveries, Model, Property};

const REGION: RegionRef = RegionRef { id: 1, key: 42 };
/// Where each node's receives are: receive `r` is its bytes `8r..8r + 8`.
const MAILBOX: u16 = 2;
const RECEIVE_LEN: u16 = 8;
/// The one word every verb of the script targets (the region is one word).
const WORD: u32 = 0;
const LINK: u16 = 0;
const EPOCH: u32 = 1;
const NODE_IDS: [u64; 2] = [0xA, 0xB];

// ----- observer ---------------------------------------------------------------

/// A transfer as its initiator numbered it: `(slot, seq)` (one epoch per
/// node, no restarts in this model).
type Attempt = (u16, u16);

/// A completion pulled from `poll_event`, with the attempt it reports on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Completion {
    id: VerbId,
    /// The verb's latest attempt when it completed (`None`: never sent).
    attempt: Option<Attempt>,
    result: Result<Output, VerbError>,
}

/// What a node told us through the observer hooks and its completions,
/// kept in a canonical form: sorted where only the multiset matters, in
/// order where the order matters (applications, which the memory check
/// replays). A plain log would also record how independent callbacks
/// interleaved, which no property looks at and which multiplied the state
/// space.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct Recorder {
    /// Initiator side: every attempt put on the wire, sorted.
    sent: Vec<(Attempt, VerbId)>,
    /// Each verb's latest attempt, sorted by verb.
    latest: Vec<(VerbId, Attempt)>,
    /// Completions, sorted by verb (a duplicate would sit next to the first).
    completed: Vec<Completion>,
    /// Target side: applications of the peer's transfers, in order.
    applied: Vec<Attempt>,
    /// Commits and reversals, sorted (multisets: a repeat is a bug to see).
    committed: Vec<Attempt>,
    reversed: Vec<Attempt>,
    local_landed: Vec<VerbId>,
    /// Receives reported filled, in the order reported: (receive id, len,
    /// immediate data).
    received: Vec<(u64, u16, Option<u32>)>,
    /// Which of the link counters the properties read are non-zero
    /// (overruns, protocol violations, malformed, unreachable declared):
    /// the core leaves counters out of a node's identity, so the model
    /// keeps the part its properties see.
    alarms: u8,
}

fn insert_sorted<T: Ord>(v: &mut Vec<T>, x: T) {
    let at = v.partition_point(|y| *y <= x);
    v.insert(at, x);
}

impl Recorder {
    fn complete(&mut self, id: VerbId, result: Result<Output, VerbError>) {
        let attempt = self.latest.iter().find(|(v, _)| *v == id).map(|&(_, a)| a);
        let at = self.completed.partition_point(|c| c.id <= id);
        self.completed.insert(
            at,
            Completion {
                id,
                attempt,
                result,
            },
        );
    }
}

impl Observer for Recorder {
    fn sent(&mut self, link: u16, epoch: u32, slot: u16, seq: u16, id: VerbId) {
        assert_eq!((link, epoch), (LINK, EPOCH));
        insert_sorted(&mut self.sent, ((slot, seq), id));
        match self.latest.iter_mut().find(|(v, _)| *v == id) {
            Some(l) => l.1 = (slot, seq),
            None => insert_sorted(&mut self.latest, (id, (slot, seq))),
        }
    }
    fn applied(&mut self, link: u16, peer_epoch: u32, slot: u16, seq: u16) {
        assert_eq!((link, peer_epoch), (LINK, EPOCH));
        self.applied.push((slot, seq));
    }
    fn committed(&mut self, link: u16, peer_epoch: u32, slot: u16, seq: u16) {
        assert_eq!((link, peer_epoch), (LINK, EPOCH));
        insert_sorted(&mut self.committed, (slot, seq));
    }
    fn reversed(&mut self, link: u16, peer_epoch: u32, slot: u16, seq: u16) {
        assert_eq!((link, peer_epoch), (LINK, EPOCH));
        insert_sorted(&mut self.reversed, (slot, seq));
    }
    fn local_landed(&mut self, id: VerbId) {
        insert_sorted(&mut self.local_landed, id);
    }
}

// ----- state ------------------------------------------------------------------

/// A frame on the wire: who sent it (it goes to the other node) and its bytes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Msg {
    from: u8,
    bytes: Arc<[u8]>,
}

/// What carries frames between the two nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Channel {
    /// Lossy, duplicating, reordering: every frame ever sent may be
    /// delivered again at any time.
    Unordered,
    /// Lossy and in order: per direction, the oldest frame is delivered or
    /// lost.
    Fifo,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    nodes: [Node<Recorder>; 2],
    channel: Channel,
    /// Unordered channel: every frame ever sent; delivery does not remove one.
    net: BTreeSet<Msg>,
    /// FIFO channel: the frames each node sent that are still on the way.
    lanes: [Vec<Arc<[u8]>>; 2],
    /// Each node's clock (the `now` of its last `handle_timeout`).
    now: [u64; 2],
    /// `RoundElapsed` steps taken per node.
    rounds: [u8; 2],
    /// Verbs of the script submitted so far (they are submitted in order).
    submitted: u8,
    /// FIFO channel: frames lost so far.
    losses: u8,
    /// Unordered channel: deliveries so far.
    deliveries: u8,
}

impl State {
    fn pull_events(&mut self, i: usize) {
        while let Some(e) = self.nodes[i].poll_event() {
            match e {
                Event::Completed { id, result, .. } => {
                    self.nodes[i].observer_mut().complete(id, result)
                }
                Event::Received { id, len, imm, .. } => {
                    self.nodes[i].observer_mut().received.push((id, len, imm))
                }
                Event::Link { .. } | Event::Untrusted { .. } => {}
            }
        }
        let st = self.nodes[i].link_stats(LINK).expect("one link");
        let alarms = u8::from(st.overruns != 0)
            | u8::from(st.protocol_violations != 0) << 1
            | u8::from(st.malformed.iter().any(|&c| c != 0)) << 2
            | u8::from(st.unreachable_declared != 0) << 3;
        self.nodes[i].observer_mut().alarms = alarms;
    }

    fn deliver(&mut self, to: usize, bytes: &[u8]) {
        self.nodes[to].handle_frame(LINK, bytes, self.now[to]);
        self.pull_events(to);
        self.drain(to);
    }

    /// Everything node `i` has to say goes onto the wire.
    fn drain(&mut self, i: usize) {
        let mut buf = [0u8; MAX_FRAME];
        while let Some(len) = self.nodes[i].poll_transmit(LINK, self.now[i], &mut buf) {
            let bytes = Arc::from(&buf[..len]);
            match self.channel {
                Channel::Unordered => {
                    self.net.insert(Msg {
                        from: i as u8,
                        bytes,
                    });
                }
                Channel::Fifo => self.lanes[i].push(bytes),
            }
        }
        self.pull_events(i);
    }
}

// ----- model ------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Action {
    /// Deliver (a copy of) a frame to the node that did not send it.
    Deliver(Msg),
    /// FIFO channel: the oldest frame node `i` sent reaches the other node…
    DeliverOldest(u8),
    /// … or is lost.
    LoseOldest(u8),
    /// Node's clock moves to its `poll_timeout()` and it handles the timeout.
    RoundElapsed(u8),
    /// The next verb of the script is submitted at its node.
    Submit(u8),
}

struct LinkModel {
    cfg: LinkConfig,
    channel: Channel,
    /// Verb `k` is `VerbId(k)`, submitted at node `script[k].0` against the
    /// peer's word.
    script: Vec<(u8, Verb)>,
    /// `RoundElapsed` steps allowed at each node.
    max_rounds: [u8; 2],
    /// FIFO channel: frames that may be lost in one run. A lost answer
    /// makes the sender repeat its frame when the peer's next one shows it
    /// was seen, so every loss can cost a frame more: without a bound the
    /// space is infinite.
    max_losses: u8,
    /// Unordered channel: deliveries in one run, for the same reason (a
    /// frame that is never delivered is a loss there).
    max_deliveries: u8,
    /// Receives each node posts before anything happens.
    receives: u8,
    /// The `sometimes` properties this configuration must reach.
    examples: &'static [&'static str],
}

fn cas(expected: u64, new: u64) -> Verb {
    Verb::CompareAndSwap {
        target: REGION,
        offset: WORD,
        expected,
        new,
    }
}

fn faa(add: u64) -> Verb {
    Verb::FetchAdd {
        target: REGION,
        offset: WORD,
        add,
    }
}

/// A SEND whose one byte and immediate data name it: `tag`, nonzero.
fn send(tag: u8) -> Verb {
    Verb::Send {
        imm: Some(u32::from(tag)),
        data: Block::new(&[tag]).expect("one byte"),
    }
}

fn link_config(slots: u16, max_attempts: u32, ordered: bool) -> LinkConfig {
    LinkConfig {
        slots,
        receive_credits: slots,
        max_class: 0,
        unreachable_after_rounds: 2,
        ordered,
        echo_patience_rounds: 1,
        rtt_multiplier: 1,
        min_round: 1000,
        initial_rtt: 1000,
        hello_interval: 1000,
        max_attempts,
        submit_queue: 4,
    }
}

impl Model for LinkModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let nodes = [0, 1].map(|i| {
            let mut n = Node::with_observer(NODE_IDS[i], EPOCH, Recorder::default());
            n.add_link(self.cfg).expect("valid config");
            n.register(RegionSpec {
                id: REGION.id,
                key: REGION.key,
                len: 8,
                permissions: Permissions::ATOMIC,
            })
            .expect("one region");
            n.register(RegionSpec {
                id: MAILBOX,
                key: REGION.key,
                len: u32::from(RECEIVE_LEN) * u32::from(self.receives.max(1)),
                permissions: Permissions::READ,
            })
            .expect("the mailbox");
            for r in 0..self.receives {
                n.post_receive(
                    LINK,
                    PostedReceive {
                        id: u64::from(r),
                        region: MAILBOX,
                        offset: u32::from(r) * u32::from(RECEIVE_LEN),
                        len: RECEIVE_LEN,
                    },
                )
                .expect("room for the receives");
            }
            n
        });
        let mut s = State {
            nodes,
            channel: self.channel,
            net: BTreeSet::new(),
            lanes: [Vec::new(), Vec::new()],
            now: [0, 0],
            rounds: [0, 0],
            submitted: 0,
            losses: 0,
            deliveries: 0,
        };
        // Fresh nodes: their first words are HELLOs.
        s.drain(0);
        s.drain(1);
        vec![s]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        if usize::from(s.submitted) < self.script.len() {
            actions.push(Action::Submit(s.submitted));
        }
        for i in 0..2u8 {
            if s.rounds[usize::from(i)] < self.max_rounds[usize::from(i)] {
                actions.push(Action::RoundElapsed(i));
            }
        }
        if s.deliveries < self.max_deliveries {
            actions.extend(s.net.iter().cloned().map(Action::Deliver));
        }
        for i in 0..2u8 {
            if !s.lanes[usize::from(i)].is_empty() {
                actions.push(Action::DeliverOldest(i));
                if s.losses < self.max_losses {
                    actions.push(Action::LoseOldest(i));
                }
            }
        }
    }

    fn next_state(&self, s: &State, action: Action) -> Option<State> {
        let mut s = s.clone();
        match action {
            Action::Deliver(msg) => {
                s.deliveries += 1;
                s.deliver(1 - usize::from(msg.from), &msg.bytes);
            }
            Action::DeliverOldest(from) => {
                let bytes = s.lanes[usize::from(from)].remove(0);
                s.deliver(1 - usize::from(from), &bytes);
            }
            Action::LoseOldest(from) => {
                s.losses += 1;
                s.lanes[usize::from(from)].remove(0);
            }
            Action::RoundElapsed(i) => {
                let i = usize::from(i);
                let now = s.nodes[i].poll_timeout().expect("one link").max(s.now[i]);
                s.now[i] = now;
                s.rounds[i] += 1;
                s.nodes[i].handle_timeout(now);
                s.pull_events(i);
                s.drain(i);
            }
            Action::Submit(k) => {
                let (i, verb) = self.script[usize::from(k)];
                let i = usize::from(i);
                s.nodes[i]
                    .submit(LINK, VerbId(u64::from(k)), &verb)
                    .expect("the script's verbs are valid and the queue has room");
                s.submitted += 1;
                s.pull_events(i);
                s.drain(i);
            }
        }
        Some(s)
    }

    fn format_action(&self, action: &Action) -> String {
        match action {
            Action::Deliver(m) => format!(
                "Deliver {} -> {}: {}",
                m.from,
                1 - m.from,
                describe(&m.bytes)
            ),
            Action::DeliverOldest(i) => format!("Deliver oldest {i} -> {}", 1 - i),
            Action::LoseOldest(i) => format!("Lose oldest {i} -> {}", 1 - i),
            Action::RoundElapsed(i) => format!("RoundElapsed(node {i})"),
            Action::Submit(k) => {
                let (i, verb) = self.script[usize::from(*k)];
                let what = match verb {
                    Verb::CompareAndSwap { expected, new, .. } => format!("CAS {expected}->{new}"),
                    Verb::FetchAdd { add, .. } => format!("FETCH_ADD +{add}"),
                    other => format!("{other:?}"),
                };
                format!("Submit verb {k} at node {i}: {what}")
            }
        }
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut p = vec![
            Property::always(INVARIANTS[0].0, holds::<0>),
            Property::always(INVARIANTS[1].0, holds::<1>),
            Property::always(INVARIANTS[2].0, holds::<2>),
            Property::always(INVARIANTS[3].0, holds::<3>),
            Property::always(INVARIANTS[4].0, holds::<4>),
            Property::always(INVARIANTS[5].0, holds::<5>),
            Property::always(INVARIANTS[6].0, holds::<6>),
            Property::always(INVARIANTS[7].0, holds::<7>),
        ];

        for (name, example) in EXAMPLES {
            if self.examples.contains(&name) {
                p.push(Property::sometimes(name, example));
            }
        }
        p
    }
}

type Check = fn(&LinkModel, &State) -> Result<(), String>;

/// The invariants of `docs/SEMANTICS.md` that a state can be checked
/// against, by name; `Err` says what is wrong.
const INVARIANTS: [(&str, Check); 8] = [
    ("exactly_once", exactly_once),
    ("no_trace_after_reversal", no_trace_after_reversal),
    ("isolation", isolation),
    ("linearizable", linearizable),
    ("no_overrun", no_overrun),
    ("single_completion", single_completion),
    ("message_whole", message_whole),
    ("message_order", message_order),
];

fn holds<const K: usize>(m: &LinkModel, s: &State) -> bool {
    (INVARIANTS[K].1)(m, s).is_ok()
}

type Example = fn(&LinkModel, &State) -> bool;

/// States a configuration can be asked to reach, to show that the space
/// really contains the paths the invariants are about.
const EXAMPLES: [(&str, Example); 10] = [
    ("a_message_received", a_message_received),
    ("refused_no_receive", refused_no_receive),
    ("all_verbs_completed", all_verbs_completed),
    ("a_reversal_happened", a_reversal_happened),
    ("ok_after_a_reversal", ok_after_a_reversal),
    ("an_err_completion", an_err_completion),
    ("commit_carried_by_a_request", commit_carried_by_a_request),
    ("refused_locked", refused_locked),
    ("declared_unreachable", declared_unreachable),
    ("up_again_after_unreachable", up_again_after_unreachable),
];

/// One line for a frame: what it does, for counterexample traces.
fn describe(bytes: &[u8]) -> String {
    match Frame::parse(bytes) {
        Err(m) => format!("malformed ({m:?})"),
        Ok(f) => {
            let c = f.context;
            let what = match c.transition {
                Transition::Hello => format!("Hello knowledge={:?}", c.knowledge),
                Transition::Tick | Transition::Tock => format!("{:?} #{}", c.transition, c.field),
                t => format!(
                    "{t:?} slot={} seq={}{}",
                    c.slot(),
                    c.seq(),
                    if c.previous_committed {
                        " prev_committed"
                    } else {
                        ""
                    }
                ),
            };
            format!(
                "{what} [epochs {}->{}, order {} seen {}, {} bytes]",
                f.sender_epoch,
                f.receiver_epoch,
                f.order,
                f.seen,
                bytes.len()
            )
        }
    }
}

// ----- what the logs say ------------------------------------------------------

/// One transfer: verb `id`'s attempt `(slot, seq)`, and what its target
/// recorded about it.
#[derive(Debug, Default)]
struct Transfer {
    attempt: Attempt,
    id: u64,
    applied: usize,
    committed: usize,
    reversed: usize,
    /// Position of the (first) application among the target's.
    applied_at: Option<usize>,
}

/// All transfers initiated by node `i`; fails if the target recorded
/// anything for a transfer that was never sent.
fn transfers(s: &State, i: usize) -> Result<Vec<Transfer>, String> {
    let init = s.nodes[i].observer();
    let target = s.nodes[1 - i].observer();
    let mut out: Vec<Transfer> = Vec::new();
    for &(attempt, id) in &init.sent {
        if out.last().is_some_and(|t| t.attempt == attempt) {
            return Err(format!("node {i} sent attempt {attempt:?} twice"));
        }
        out.push(Transfer {
            attempt,
            id: id.0,
            ..Transfer::default()
        });
    }
    let find = |a: &Attempt, what: &str| {
        out.iter()
            .position(|t| t.attempt == *a)
            .ok_or_else(|| format!("node {} {what} {a:?}, never sent by node {i}", 1 - i))
    };
    let mut counts = Vec::new();
    for (at, a) in target.applied.iter().enumerate() {
        counts.push((find(a, "applied")?, 0, Some(at)));
    }
    for a in &target.committed {
        counts.push((find(a, "committed")?, 1, None));
    }
    for a in &target.reversed {
        counts.push((find(a, "reversed")?, 2, None));
    }
    for (k, kind, at) in counts {
        let t = &mut out[k];
        match kind {
            0 => {
                t.applied += 1;
                if t.applied_at.is_none() {
                    t.applied_at = at;
                }
            }
            1 => t.committed += 1,
            _ => t.reversed += 1,
        }
    }
    Ok(out)
}

/// Each transfer is applied, committed and reversed at most once, never both
/// committed and reversed; a verb has at most one live application and one
/// commit; an `Ok` reports on an applied, never reversed transfer; an `Err`
/// leaves nothing committed and nothing live.
fn exactly_once(_: &LinkModel, s: &State) -> Result<(), String> {
    for i in 0..2 {
        let ts = transfers(s, i)?;
        for t in &ts {
            if t.applied > 1 || t.committed > 1 || t.reversed > 1 {
                return Err(format!("transfer applied/committed/reversed twice: {t:?}"));
            }
            if t.committed + t.reversed > t.applied || (t.committed == 1 && t.reversed == 1) {
                return Err(format!("inconsistent fate: {t:?}"));
            }
        }
        let ids: BTreeSet<u64> = ts.iter().map(|t| t.id).collect();
        for id in ids {
            let mine = || ts.iter().filter(move |t| t.id == id);
            let live = mine().filter(|t| t.applied > t.reversed).count();
            let committed = mine().filter(|t| t.committed > 0).count();
            if live > 1 || committed > 1 {
                return Err(format!(
                    "verb {id}: {live} live applications, {committed} commits"
                ));
            }
        }
        for c in &s.nodes[i].observer().completed {
            let id = c.id.0;
            match c.result {
                Ok(_) => {
                    let tr = c
                        .attempt
                        .ok_or_else(|| format!("verb {id} completed Ok without being sent"))?;
                    let t = ts
                        .iter()
                        .find(|t| t.attempt == tr)
                        .expect("every sent transfer is listed");
                    if t.reversed > 0 || t.applied == 0 {
                        return Err(format!("verb {id} completed Ok but its transfer {t:?}"));
                    }
                }
                // `Err` means no effect: nothing committed, and every
                // application already reversed (the initiator says `Err`
                // only after the target confirmed the reversal).
                Err(e) => {
                    if let Some(t) = ts
                        .iter()
                        .find(|t| t.id == id && (t.committed > 0 || t.applied > t.reversed))
                    {
                        return Err(format!("verb {id} completed {e:?} but {t:?}"));
                    }
                }
            }
        }
    }
    Ok(())
}

/// The sequential model of one target's word: the script's verbs replayed
/// (by this file's own arithmetic, not the core's) in the order the target
/// applied them, skipping reversed transfers.
///
/// Exact because the target locks a word a transfer changed until that
/// transfer commits or is reversed (checked by `isolation`), so a later
/// application always saw the effects of the earlier non-reversed ones and
/// none of the reversed ones.
struct Replay {
    /// The old value each live application saw.
    seen: Vec<(Attempt, u64)>,
    /// The word's value.
    value: u64,
    /// Live, uncommitted applications that changed the word.
    locked: usize,
}

fn replay(m: &LinkModel, s: &State, initiator: usize) -> Result<Replay, String> {
    let mut ts = transfers(s, initiator)?;
    ts.retain(|t| t.applied > 0 && t.reversed == 0 && !is_send(m, t.id));
    ts.sort_by_key(|t| t.applied_at);
    let mut r = Replay {
        seen: Vec::new(),
        value: 0,
        locked: 0,
    };
    for t in ts {
        let old = r.value;
        let new = match m.script[t.id as usize].1 {
            Verb::CompareAndSwap { expected, new, .. } => (old == expected).then_some(new),
            Verb::FetchAdd { add, .. } => Some(old.wrapping_add(add)),
            other => unreachable!("the script has no {other:?}"),
        };
        r.seen.push((t.attempt, old));
        if let Some(new) = new {
            r.value = new;
            if t.committed == 0 {
                r.locked += 1;
            }
        }
    }
    Ok(r)
}

fn is_send(m: &LinkModel, id: u64) -> bool {
    matches!(m.script[id as usize].1, Verb::Send { .. })
}

/// Tentative SENDs of node `initiator`'s at its peer: each holds the word
/// of its one byte in a receive.
fn tentative_sends(m: &LinkModel, s: &State, initiator: usize) -> Result<usize, String> {
    let ts = transfers(s, initiator)?;
    Ok(ts
        .iter()
        .filter(|t| is_send(m, t.id) && t.applied > t.reversed && t.committed == 0)
        .count())
}

/// What receive `r` of node `node` holds: the tag of the SEND in it (0:
/// none).
fn receive_tag(s: &State, node: usize, r: u64) -> u8 {
    let bytes = s.nodes[node].memory().bytes(MAILBOX).expect("registered");
    bytes[r as usize * usize::from(RECEIVE_LEN)]
}

/// Every receive reported holds one SEND of the peer's script, whole (its
/// length and immediate data), committed at the target, and never failed
/// at its initiator; no SEND is reported twice.
fn message_whole(m: &LinkModel, s: &State) -> Result<(), String> {
    for target in 0..2 {
        let initiator = 1 - target;
        let ts = transfers(s, initiator)?;
        let mut seen = BTreeSet::new();
        for &(r, len, imm) in &s.nodes[target].observer().received {
            let tag = receive_tag(s, target, r);
            let k = usize::from(tag).wrapping_sub(1);
            let Some(&(
                from,
                Verb::Send {
                    imm: sent_imm,
                    data,
                },
            )) = m.script.get(k)
            else {
                return Err(format!("node {target} receive {r} holds tag {tag}"));
            };
            if usize::from(from) != initiator || usize::from(len) != data.len() || imm != sent_imm {
                return Err(format!(
                    "node {target} receive {r}: {len} bytes, {imm:?} for verb {k}"
                ));
            }
            if !ts.iter().any(|t| t.id == k as u64 && t.committed == 1) {
                return Err(format!("node {target} reported verb {k} uncommitted"));
            }
            let failed = s.nodes[initiator]
                .observer()
                .completed
                .iter()
                .any(|c| c.id.0 == k as u64 && c.result.is_err());
            if failed || !seen.insert(k) {
                return Err(format!("verb {k} reported twice or after failing"));
            }
        }
    }
    Ok(())
}

/// Receives are reported in the order posted, and hold messages in the
/// order their initiator submitted them.
fn message_order(_: &LinkModel, s: &State) -> Result<(), String> {
    for target in 0..2 {
        let received = &s.nodes[target].observer().received;
        for (k, &(r, ..)) in received.iter().enumerate() {
            if r != k as u64 {
                return Err(format!("node {target} reported receive {r} {k}th"));
            }
        }
        let tags: Vec<u8> = received
            .iter()
            .map(|&(r, ..)| receive_tag(s, target, r))
            .collect();
        if tags.windows(2).any(|w| w[0] >= w[1]) {
            return Err(format!("node {target} received messages {tags:?}"));
        }
    }
    Ok(())
}

fn word(s: &State, node: usize) -> u64 {
    let bytes = s.nodes[node].memory().bytes(REGION.id).expect("registered");
    u64::from_le_bytes(bytes[..8].try_into().expect("one word"))
}

/// Each node's word is what the applied-and-not-reversed verbs make of it,
/// in the order they were applied.
fn no_trace_after_reversal(m: &LinkModel, s: &State) -> Result<(), String> {
    for target in 0..2 {
        let r = replay(m, s, 1 - target)?;
        if word(s, target) != r.value {
            return Err(format!(
                "node {target}: word is {}, the model says {}",
                word(s, target),
                r.value
            ));
        }
    }
    Ok(())
}

/// A word is locked exactly while a tentative transfer has changed it, and
/// never by two at once.
fn isolation(m: &LinkModel, s: &State) -> Result<(), String> {
    for target in 0..2 {
        let r = replay(m, s, 1 - target)?;
        let sends = tentative_sends(m, s, 1 - target)?;
        let locked = s.nodes[target].memory().locked_words();
        if locked != r.locked + sends || r.locked > 1 {
            return Err(format!(
                "node {target}: {locked} words locked, {} tentative changes and {sends} \
                 tentative messages",
                r.locked
            ));
        }
    }
    Ok(())
}

/// Every `Ok` output is what the sequential model returned for that verb
/// at its place in the apply order.
fn linearizable(m: &LinkModel, s: &State) -> Result<(), String> {
    for i in 0..2 {
        let r = replay(m, s, i)?;
        for c in &s.nodes[i].observer().completed {
            let Ok(output) = c.result else { continue };
            let id = c.id.0;
            if is_send(m, id) {
                if output != Output::Send {
                    return Err(format!("SEND {id} completed {output:?}"));
                }
                continue;
            }
            let tr = c.attempt.ok_or("Ok for a verb never sent")?;
            let old = r
                .seen
                .iter()
                .find(|(t, _)| *t == tr)
                .map(|(_, old)| *old)
                .ok_or_else(|| format!("verb {id} Ok but its transfer is not applied"))?;
            let expected = match m.script[id as usize].1 {
                Verb::CompareAndSwap { expected, .. } => Output::CompareAndSwap {
                    old,
                    swapped: old == expected,
                },
                Verb::FetchAdd { .. } => Output::FetchAdd { old },
                other => unreachable!("the script has no {other:?}"),
            };
            if output != expected {
                return Err(format!(
                    "verb {id}: got {output:?}, memory says {expected:?}"
                ));
            }
        }
    }
    Ok(())
}

/// No request arrived without a credit, no frame contradicted what its
/// receiver knew or failed to parse, and neither end uses more credits than
/// it was given or holds more tentative transfers than it offered.
fn no_overrun(_: &LinkModel, s: &State) -> Result<(), String> {
    for (i, n) in s.nodes.iter().enumerate() {
        let st = n.link_stats(LINK).expect("one link");
        let ls = n.link_status(LINK).expect("one link");
        if st.overruns != 0
            || st.protocol_violations != 0
            || st.malformed.iter().any(|&c| c != 0)
            || ls.credits_in_use > ls.peer_credits
            || ls.tentative > ls.receive_credits
        {
            return Err(format!("node {i}: {st:?} {ls:?}"));
        }
    }
    Ok(())
}

/// Each verb completes at most once, and only at the node that submitted it.
fn single_completion(m: &LinkModel, s: &State) -> Result<(), String> {
    for i in 0..2 {
        let mut seen = BTreeSet::new();
        for c in &s.nodes[i].observer().completed {
            let id = c.id.0;
            let ours = m
                .script
                .get(id as usize)
                .is_some_and(|v| usize::from(v.0) == i);
            if !ours || !seen.insert(id) {
                return Err(format!(
                    "node {i}: verb {id} completed twice or is not its own"
                ));
            }
        }
    }
    Ok(())
}

/// Every verb of the script completed `Ok`.
fn all_verbs_completed(m: &LinkModel, s: &State) -> bool {
    (0..m.script.len()).all(|k| {
        let i = usize::from(m.script[k].0);
        s.nodes[i]
            .observer()
            .completed
            .iter()
            .any(|c| c.id.0 == k as u64 && c.result.is_ok())
    })
}

fn an_err_completion(_: &LinkModel, s: &State) -> bool {
    s.nodes
        .iter()
        .any(|n| n.observer().completed.iter().any(|c| c.result.is_err()))
}

fn a_reversal_happened(_: &LinkModel, s: &State) -> bool {
    s.nodes.iter().any(|n| !n.observer().reversed.is_empty())
}

/// Some frames on the wire, parsed.
fn frames(s: &State) -> impl Iterator<Item = Frame<'_>> {
    let unordered = s.net.iter().map(|m| &m.bytes);
    unordered
        .chain(s.lanes.iter().flatten())
        .filter_map(|b| Frame::parse(b).ok())
}

/// A REQUEST told its target that the slot's previous transfer committed.
fn commit_carried_by_a_request(_: &LinkModel, s: &State) -> bool {
    frames(s).any(|f| f.context.transition == Transition::Request && f.context.previous_committed)
}

/// A target refused a transfer because the word was locked.
fn refused_locked(_: &LinkModel, s: &State) -> bool {
    frames(s).any(|f| {
        f.context.transition == Transition::Refuse
            && Refusal::from_u8(f.payload[SLICE]) == Some(Refusal::Locked)
    })
}

fn a_message_received(_: &LinkModel, s: &State) -> bool {
    s.nodes.iter().any(|n| !n.observer().received.is_empty())
}

/// A SEND found no receive posted and failed.
fn refused_no_receive(_: &LinkModel, s: &State) -> bool {
    s.nodes.iter().any(|n| {
        n.observer()
            .completed
            .iter()
            .any(|c| c.result == Err(VerbError::Refused(Refusal::NoReceive)))
    })
}

/// A node declared the link unreachable.
fn declared_unreachable(_: &LinkModel, s: &State) -> bool {
    s.nodes
        .iter()
        .any(|n| n.link_status(LINK).is_some_and(|l| l.unreachable))
}

/// A node declared the link unreachable and brought it up again.
fn up_again_after_unreachable(_: &LinkModel, s: &State) -> bool {
    s.nodes.iter().any(|n| {
        n.link_stats(LINK)
            .is_some_and(|st| st.unreachable_declared > 0)
            && n.link_status(LINK).is_some_and(|l| l.up)
    })
}

/// A verb completed `Ok` after an earlier attempt of it was reversed: the
/// retry path is live.
fn ok_after_a_reversal(_: &LinkModel, s: &State) -> bool {
    (0..2).any(|i| {
        let Ok(ts) = transfers(s, i) else {
            return false;
        };
        s.nodes[i]
            .observer()
            .completed
            .iter()
            .any(|c| c.result.is_ok() && ts.iter().any(|t| t.id == c.id.0 && t.reversed > 0))
    })
}

// ----- running ----------------------------------------------------------------

/// States generated (repeats included) before a run gives up: twice the
/// largest configuration below.
const MAX_STATES: usize = 5_000_000;

/// Explores the whole space breadth-first, prints its size, and fails with
/// the action path of any counterexample (and names any example not found).
/// The search stops soon after the first counterexample, so the path printed
/// is about as short as any, and gives up (failing) past `MAX_STATES`: a
/// broken core can make the space infinite (a duplicate applied again adds
/// again, without end).
fn run(name: &str, model: LinkModel) -> impl Checker<LinkModel> + use<> {
    let start = Instant::now();
    let checker = model
        .checker()
        .finish_when(HasDiscoveries::AnyFailures)
        .target_state_count(MAX_STATES)
        .spawn_bfs()
        .join();
    let elapsed = start.elapsed();
    println!(
        "model_check {name}: {} unique states, {} states generated, max depth {}, {:.1?}",
        checker.unique_state_count(),
        checker.state_count(),
        checker.max_depth(),
        elapsed
    );
    let model = checker.model();
    let mut failed = Vec::new();
    for p in model.properties() {
        let Expectation::Always = p.expectation else {
            continue;
        };
        let Some(path) = checker.discovery(p.name) else {
            continue;
        };
        let last = path.last_state().clone();
        let why = INVARIANTS
            .iter()
            .find(|(n, _)| *n == p.name)
            .map(|(_, check)| check(model, &last));
        println!("COUNTEREXAMPLE to {} ({name}): {why:?}", p.name);
        for (k, a) in path.into_actions().iter().enumerate() {
            println!("  {:3}. {}", k + 1, model.format_action(a));
        }
        for (i, n) in last.nodes.iter().enumerate() {
            println!("  node {i} observed: {:?}", n.observer());
            println!("  node {i} link: {:?}", n.link_status(LINK));
        }
        failed.push(p.name);
    }
    assert!(failed.is_empty(), "{name}: invariants broken: {failed:?}");
    assert!(
        checker.state_count() < MAX_STATES,
        "{name}: gave up after {MAX_STATES} states"
    );
    for p in model.properties() {
        if let Expectation::Sometimes = p.expectation {
            match checker.discovery(p.name) {
                Some(path) => println!(
                    "  example of {}: {} steps",
                    p.name,
                    path.into_actions().len()
                ),
                None => failed.push(p.name),
            }
        }
    }
    assert!(failed.is_empty(), "{name}: never reached: {failed:?}");
    checker.assert_properties();
    checker
}

/// A CAS and then a FETCH_ADD on the same word, both from node 0: the
/// result depends on their order, so the memory check is exact only if the
/// apply order is right.
fn same_word() -> Vec<(u8, Verb)> {
    vec![(0, cas(0, 1)), (0, faa(2))]
}

/// One configuration: a channel, whether the links say they are ordered,
/// slots (credits equal), attempts per verb, rounds per node, the script.
struct Bounds {
    channel: Channel,
    ordered: bool,
    slots: u16,
    attempts: u32,
    rounds: [u8; 2],
    script: Vec<(u8, Verb)>,
    /// Losses (FIFO) or deliveries (unordered) allowed.
    budget: u8,
    /// Receives each node posts first.
    receives: u8,
}

fn check(b: Bounds, examples: &'static [&'static str]) -> impl Checker<LinkModel> + use<> {
    let name = format!(
        "{:?} channel ({} {}), ordered={} slots={} attempts={} rounds={:?} verbs={}",
        b.channel,
        b.budget,
        match b.channel {
            Channel::Fifo => "losses",
            Channel::Unordered => "deliveries",
        },
        b.ordered,
        b.slots,
        b.attempts,
        b.rounds,
        b.script
            .iter()
            .map(|(i, v)| format!("n{i} {}", short(v)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    run(
        &name,
        LinkModel {
            cfg: link_config(b.slots, b.attempts, b.ordered),
            channel: b.channel,
            script: b.script,
            max_rounds: b.rounds,
            max_losses: if b.channel == Channel::Fifo {
                b.budget
            } else {
                0
            },
            max_deliveries: if b.channel == Channel::Unordered {
                b.budget
            } else {
                u8::MAX
            },
            receives: b.receives,
            examples,
        },
    )
}

fn short(v: &Verb) -> &'static str {
    match v {
        Verb::CompareAndSwap { .. } => "CAS",
        Verb::FetchAdd { .. } => "FAA",
        Verb::Send { .. } => "SEND",
        _ => "verb",
    }
}

const FIFO_LOSSES: u8 = 3;
const UNORDERED_DELIVERIES: u8 = 10;

/// Ordered links on the FIFO channel (the shape of a cable or a veth pair),
/// where losses are found by order. One slot, three rounds at node 0 and one
/// at node 1: node 0 can declare the link unreachable (the round in which
/// it came up counts as heard, then two silent ones), bring it back with
/// HELLOs and resynchronise; verbs are retried after a reversal, and the
/// FETCH_ADD's request can carry the CAS's commit. Measured: about 0.57 M
/// unique states, 7 s.
#[test]
fn fifo_one_slot() {
    check(
        Bounds {
            channel: Channel::Fifo,
            ordered: true,
            slots: 1,
            attempts: 2,
            rounds: [3, 1],
            script: same_word(),
            budget: FIFO_LOSSES,
            receives: 0,
        },
        &[
            "all_verbs_completed",
            "a_reversal_happened",
            "ok_after_a_reversal",
            "commit_carried_by_a_request",
            "declared_unreachable",
            "up_again_after_unreachable",
        ],
    );
}

/// Traffic both ways on one slot: each end is initiator and target, so a
/// lost answer shows up in the peer's own requests and decisions, and
/// decisions are repeated by order on both sides. About 0.5 M states, 7 s.
#[test]
fn fifo_one_slot_both_directions() {
    let mut script = same_word();
    script.push((1, faa(4)));
    check(
        Bounds {
            channel: Channel::Fifo,
            ordered: true,
            slots: 1,
            attempts: 1,
            rounds: [1, 1],
            script,
            budget: FIFO_LOSSES,
            receives: 0,
        },
        &[
            "all_verbs_completed",
            "a_reversal_happened",
            "an_err_completion",
            "commit_carried_by_a_request",
        ],
    );
}

/// Two slots: both verbs in flight at once, so a loss on one slot is found
/// by the other slot's answer, and the FETCH_ADD can find the word locked
/// by the tentative CAS (refused `Locked`, retried after a round). About
/// 43 k states.
#[test]
fn fifo_two_slots() {
    let checker = check(
        Bounds {
            channel: Channel::Fifo,
            ordered: true,
            slots: 2,
            attempts: 2,
            rounds: [1, 1],
            script: same_word(),
            budget: FIFO_LOSSES,
            receives: 0,
        },
        &[
            "all_verbs_completed",
            "a_reversal_happened",
            "ok_after_a_reversal",
            "refused_locked",
        ],
    );
    // The space really contains reversals: replay the example the checker
    // found and look at the target's own record of it.
    let path = checker.assert_any_discovery("a_reversal_happened");
    let last = path.last_state();
    let reversed = last.nodes[1].observer().reversed.first().copied();
    let reversed = reversed.expect("node 1 reversed a transfer");
    assert!(
        last.nodes[0]
            .observer()
            .sent
            .iter()
            .any(|(a, _)| *a == reversed)
    );
}

/// One slot on the unordered channel (loss, duplication, any reordering).
fn unordered_one_slot(ordered: bool) {
    check(
        Bounds {
            channel: Channel::Unordered,
            ordered,
            slots: 1,
            attempts: 2,
            rounds: [1, 1],
            script: same_word(),
            budget: UNORDERED_DELIVERIES,
            receives: 0,
        },
        &[
            "all_verbs_completed",
            "a_reversal_happened",
            "ok_after_a_reversal",
            "commit_carried_by_a_request",
        ],
    );
}

/// Links that say they may reorder: losses are found by patience. About
/// 0.22 M states, 4 s.
#[test]
fn unordered_one_slot_patience() {
    unordered_one_slot(false);
}

/// Links that wrongly say they are ordered: a frame overtaken by a later
/// one is taken for lost and its transfer reversed although it was only
/// late. Safety must not care. About 0.65 M states, 14 s.
#[test]
fn unordered_one_slot_taken_for_ordered() {
    unordered_one_slot(true);
}

/// Two slots on the unordered channel, both settings: larger, run by hand
/// with `cargo test -p oae-tests --test model_check -- --ignored --nocapture`.
#[test]
#[ignore = "over a minute; run by hand"]
fn unordered_two_slots() {
    for ordered in [false, true] {
        check(
            Bounds {
                channel: Channel::Unordered,
                ordered,
                slots: 2,
                attempts: 2,
                rounds: [1, 1],
                script: same_word(),
                budget: UNORDERED_DELIVERIES,
                receives: 0,
            },
            &[
                "all_verbs_completed",
                "a_reversal_happened",
                "refused_locked",
            ],
        );
    }
}

/// Three SENDs from node 0 on two slots, two receives posted at node 1:
/// each message lands whole in the receive posted first, once, in order,
/// and the third finds no receive and fails at once; with losses, an
/// attempt whose echo is lost is reversed (the receive's bytes put back)
/// and retried. About 84 k states, 2 s.
#[test]
fn fifo_messages() {
    check(
        Bounds {
            channel: Channel::Fifo,
            ordered: true,
            slots: 2,
            attempts: 2,
            rounds: [1, 1],
            script: vec![(0, send(1)), (0, send(2)), (0, send(3))],
            budget: FIFO_LOSSES,
            receives: 2,
        },
        &[
            "a_message_received",
            "refused_no_receive",
            "a_reversal_happened",
            "ok_after_a_reversal",
        ],
    );
}

/// Two SENDs from node 0 on one slot over the unordered channel (loss,
/// duplication, any reordering), one receive posted: a duplicated or late
/// REQUEST never fills a second receive or the same one twice, the second
/// SEND finds no receive, and a reversed attempt leaves its receive as it
/// was. About 0.44 M states, 14 s.
#[test]
fn unordered_messages() {
    check(
        Bounds {
            channel: Channel::Unordered,
            ordered: false,
            slots: 1,
            attempts: 2,
            rounds: [1, 1],
            script: vec![(0, send(1)), (0, send(2))],
            budget: UNORDERED_DELIVERIES,
            receives: 1,
        },
        &[
            "a_message_received",
            "refused_no_receive",
            "a_reversal_happened",
        ],
    );
}
