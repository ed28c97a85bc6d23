//! Parser robustness: property tests of the wire codec, the verb codec, and
//! a live node fed bytes it never asked for.

#[path = "wire_props/harness.rs"]
mod harness;

use std::sync::OnceLock;

use harness::{Expect, Feeder, SealedFeeder};
use oae_proto::verb::{self, MAX_BLOCK, MAX_MCAS_WORDS, Request};
use oae_proto::wire::{
    self, Context, Frame, Knowledge, MAX_CLASS, MAX_CODEC_CLASS, MAX_FRAME, Malformed, Role, SLICE,
    TRAILER_LEN, Transition,
};
use oae_proto::*;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;

// ----- strategies ------------------------------------------------------------

const TRANSITIONS: [Transition; 10] = [
    Transition::Hello,
    Transition::Tick,
    Transition::Tock,
    Transition::Request,
    Transition::Echo,
    Transition::Commit,
    Transition::CommitAck,
    Transition::Refuse,
    Transition::Reverse,
    Transition::ReverseAck,
];

fn knowledge() -> impl Strategy<Value = Knowledge> {
    prop_oneof![
        Just(Knowledge::Nothing),
        Just(Knowledge::KnowYou),
        Just(Knowledge::KnowYouKnowMe),
    ]
}

fn role() -> impl Strategy<Value = Role> {
    prop_oneof![Just(Role::Alice), Just(Role::Bob)]
}

fn transition() -> impl Strategy<Value = Transition> {
    proptest::sample::select(&TRANSITIONS[..])
}

/// Any context the codec accepts, with a class in `classes`.
fn context(classes: std::ops::RangeInclusive<u8>) -> impl Strategy<Value = Context> {
    (
        classes,
        knowledge(),
        role(),
        transition(),
        any::<bool>(),
        any::<u32>(),
    )
        .prop_map(|(class, knowledge, role, transition, pc, field)| Context {
            class,
            knowledge,
            role,
            transition,
            // Only initiator slot frames may carry the flag.
            previous_committed: pc && transition.from_initiator(),
            field,
        })
}

/// A valid frame: context of class 0..=MAX_CLASS, a non-zero sender epoch,
/// any receiver epoch, and payload bytes that fit the class.
#[derive(Clone, Debug)]
struct FrameSpec {
    context: Context,
    sender_epoch: u32,
    receiver_epoch: u32,
    /// The order slice: zero on HELLO, a place in the order otherwise.
    order: u32,
    seen: u32,
    payload: Vec<u8>,
}

impl FrameSpec {
    fn build(&self) -> Vec<u8> {
        // Stale bytes in the buffer must not leak into the frame.
        let mut buf = vec![0xA5; MAX_FRAME];
        let len = wire::build(
            &mut buf,
            &self.context,
            (self.sender_epoch, self.receiver_epoch),
            (self.order, self.seen),
            |p| p[..self.payload.len()].copy_from_slice(&self.payload),
        );
        buf.truncate(len);
        buf
    }
}

fn frame_spec() -> impl Strategy<Value = FrameSpec> {
    context(0..=MAX_CLASS).prop_flat_map(|context| {
        let cap = wire::payload_capacity(context.class);
        (
            Just(context),
            1..=u32::MAX,
            any::<u32>(),
            (1..=u32::MAX, any::<u32>()),
            vec(any::<u8>(), 0..=cap),
        )
            .prop_map(
                |(context, sender_epoch, receiver_epoch, (order, seen), payload)| {
                    let hello = context.transition == Transition::Hello;
                    FrameSpec {
                        context,
                        sender_epoch,
                        receiver_epoch,
                        order: if hello { 0 } else { order },
                        seen: if hello { 0 } else { seen },
                        payload,
                    }
                },
            )
    })
}

fn region_ref() -> impl Strategy<Value = RegionRef> {
    (any::<u16>(), any::<u32>()).prop_map(|(id, key)| RegionRef { id, key })
}

/// Block lengths with the edges well represented.
fn block_len() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => 0..=MAX_BLOCK,
        2 => 0..=16usize,
        1 => Just(0usize),
        1 => Just(1usize),
        1 => Just(MAX_BLOCK),
    ]
}

fn bytes_of_block_len() -> impl Strategy<Value = Vec<u8>> {
    block_len().prop_flat_map(|n| vec(any::<u8>(), n))
}

fn mcas_word() -> impl Strategy<Value = McasWord> {
    (any::<u32>(), any::<u64>(), any::<u64>()).prop_map(|(offset, expected, new)| McasWord {
        offset,
        expected,
        new,
    })
}

/// A verb of any kind the codec carries, and the initiator's local block
/// (the bytes a BILATERAL SWAP sends; empty for every other verb).
fn verb_with_local() -> impl Strategy<Value = (Verb, Vec<u8>)> {
    prop_oneof![
        (
            region_ref(),
            any::<u32>(),
            any::<u16>(),
            any::<u32>(),
            block_len()
        )
            .prop_map(|(target, offset, local_region, local_offset, len)| (
                Verb::Read {
                    target,
                    offset,
                    local_region,
                    local_offset,
                    len: len as u16
                },
                vec![]
            )),
        (region_ref(), any::<u32>(), bytes_of_block_len()).prop_map(|(target, offset, data)| (
            Verb::Write {
                target,
                offset,
                data: Block::new(&data).unwrap()
            },
            vec![]
        )),
        (region_ref(), any::<u32>(), any::<u64>(), any::<u64>()).prop_map(
            |(target, offset, expected, new)| (
                Verb::CompareAndSwap {
                    target,
                    offset,
                    expected,
                    new
                },
                vec![]
            )
        ),
        (region_ref(), any::<u32>(), any::<u64>()).prop_map(|(target, offset, add)| (
            Verb::FetchAdd {
                target,
                offset,
                add
            },
            vec![]
        )),
        (region_ref(), any::<u32>(), any::<u64>()).prop_map(|(target, offset, new)| (
            Verb::Swap {
                target,
                offset,
                new
            },
            vec![]
        )),
        (region_ref(), vec(mcas_word(), 1..=MAX_MCAS_WORDS))
            .prop_map(|(target, words)| (Verb::multi_word_commit(target, &words).unwrap(), vec![])),
        (
            region_ref(),
            any::<u32>(),
            any::<u16>(),
            any::<u32>(),
            bytes_of_block_len()
        )
            .prop_map(|(target, offset, local_region, local_offset, local)| (
                Verb::BilateralSwap {
                    target,
                    offset,
                    local_region,
                    local_offset,
                    len: local.len() as u16,
                },
                local
            )),
        (proptest::option::of(any::<u32>()), bytes_of_block_len()).prop_map(|(imm, data)| (
            Verb::Send {
                imm,
                data: Block::new(&data).unwrap()
            },
            vec![]
        )),
    ]
}

/// A successful output the target could send for `verb`, and the block a
/// READ or BILATERAL SWAP returns with it (empty for other verbs).
fn output_for(verb: Verb) -> BoxedStrategy<(Output, Vec<u8>)> {
    match verb {
        Verb::Read { len, .. } => vec(any::<u8>(), usize::from(len))
            .prop_map(move |b| (Output::Read { len }, b))
            .boxed(),
        Verb::BilateralSwap { len, .. } => vec(any::<u8>(), usize::from(len))
            .prop_map(move |b| (Output::BilateralSwap { len }, b))
            .boxed(),
        other => word_output_for(other).prop_map(|o| (o, Vec::new())).boxed(),
    }
}

/// A successful output of a verb that returns no block.
fn word_output_for(verb: Verb) -> BoxedStrategy<Output> {
    match verb {
        Verb::Read { .. } | Verb::BilateralSwap { .. } => unreachable!("block verbs"),
        Verb::Write { .. } => Just(Output::Write).boxed(),
        Verb::Send { .. } => Just(Output::Send).boxed(),
        Verb::CompareAndSwap { expected, .. } => prop_oneof![Just(expected), any::<u64>()]
            .prop_map(move |old| Output::CompareAndSwap {
                old,
                swapped: old == expected,
            })
            .boxed(),
        Verb::FetchAdd { .. } => any::<u64>()
            .prop_map(|old| Output::FetchAdd { old })
            .boxed(),
        Verb::Swap { .. } => any::<u64>().prop_map(|old| Output::Swap { old }).boxed(),
        Verb::MultiWordCommit { count, words, .. } => {
            // Each word either matched (old = expected) or held something else.
            vec(proptest::option::of(any::<u64>()), usize::from(count))
                .prop_map(move |olds| {
                    let mut old = [0u64; MAX_MCAS_WORDS];
                    for (k, o) in olds.iter().enumerate() {
                        old[k] = o.unwrap_or(words[k].expected);
                    }
                    let committed = (0..usize::from(count)).all(|k| old[k] == words[k].expected);
                    Output::MultiWordCommit {
                        committed,
                        count,
                        old,
                    }
                })
                .boxed()
        }
    }
}

fn verb_and_output() -> impl Strategy<Value = (Verb, (Output, Vec<u8>))> {
    verb_with_local().prop_flat_map(|(verb, _)| (Just(verb), output_for(verb)))
}

/// One verb of every kind, with lengths and words taken from `seed`, for
/// throwing arbitrary bytes at `decode_output`.
fn every_kind(seed: u64) -> [Verb; Opcode::COUNT] {
    let len = (seed % (MAX_BLOCK as u64 + 1)) as u16;
    let count = 1 + (seed >> 16) as usize % MAX_MCAS_WORDS;
    harness::every_kind(len, count, [seed >> 8; MAX_MCAS_WORDS])
}

/// The request a target must decode from `verb`'s encoding.
fn expected_request<'a>(verb: &'a Verb, local: &'a [u8]) -> Request<'a> {
    match verb {
        &Verb::Read {
            target,
            offset,
            len,
            ..
        } => Request::Read {
            target,
            offset,
            len,
        },
        Verb::Write {
            target,
            offset,
            data,
        } => Request::Write {
            target: *target,
            offset: *offset,
            data: data.as_slice(),
        },
        &Verb::CompareAndSwap {
            target,
            offset,
            expected,
            new,
        } => Request::CompareAndSwap {
            target,
            offset,
            expected,
            new,
        },
        &Verb::FetchAdd {
            target,
            offset,
            add,
        } => Request::FetchAdd {
            target,
            offset,
            add,
        },
        &Verb::Swap {
            target,
            offset,
            new,
        } => Request::Swap {
            target,
            offset,
            new,
        },
        &Verb::MultiWordCommit {
            target,
            count,
            words,
        } => Request::MultiWordCommit {
            target,
            count,
            words,
        },
        &Verb::BilateralSwap { target, offset, .. } => Request::BilateralSwap {
            target,
            offset,
            data: local,
        },
        Verb::Send { imm, data } => Request::Send {
            imm: *imm,
            data: data.as_slice(),
        },
    }
}

// ----- wire codec --------------------------------------------------------------

proptest! {
    #[test]
    fn context_round_trips(c in context(0..=MAX_CODEC_CLASS)) {
        prop_assert_eq!(Context::decode(&c.encode()), Ok(c));
    }

    /// Decoding accepts only the canonical encoding: one slice, one meaning.
    #[test]
    fn context_decode_is_canonical(bytes in any::<[u8; SLICE]>()) {
        if let Ok(c) = Context::decode(&bytes) {
            prop_assert_eq!(c.encode(), bytes);
        }
    }

    #[test]
    fn frame_round_trips(spec in frame_spec()) {
        let bytes = spec.build();
        let class = spec.context.class;
        prop_assert_eq!(bytes.len(), wire::frame_len(class));
        let f = Frame::parse(&bytes).unwrap();
        prop_assert_eq!(f.context, spec.context);
        prop_assert_eq!(f.raw_context, spec.context.encode());
        prop_assert_eq!(f.sender_epoch, spec.sender_epoch);
        prop_assert_eq!((f.order, f.seen), (spec.order, spec.seen));
        prop_assert_eq!(f.receiver_epoch, spec.receiver_epoch);
        prop_assert_eq!(f.payload.len(), wire::payload_capacity(class));
        prop_assert_eq!(&f.payload[..spec.payload.len()], &spec.payload[..]);
        prop_assert!(f.payload[spec.payload.len()..].iter().all(|&b| b == 0));
    }

    #[test]
    fn zero_sender_epoch_is_inconsistent(spec in frame_spec()) {
        let bytes = FrameSpec { sender_epoch: 0, ..spec }.build();
        prop_assert_eq!(Frame::parse(&bytes).unwrap_err(), Malformed::Inconsistent);
    }

    #[test]
    fn reflection_is_an_involution(s in any::<[u8; SLICE]>()) {
        let r = wire::reflect(&s);
        prop_assert_eq!(wire::reflect(&r), s);
        prop_assert_eq!(&r[..4], &s[4..]);
        prop_assert_eq!(&r[4..], &s[..4]);
    }

    /// CRC32C detects every single-bit error, wherever it falls.
    #[test]
    fn any_single_bit_flip_is_rejected(
        (spec, bit) in frame_spec().prop_flat_map(|s| {
            let bits = wire::frame_len(s.context.class) * 8;
            (Just(s), 0..bits)
        })
    ) {
        let mut bytes = spec.build();
        bytes[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(Frame::parse(&bytes).is_err(), "bit {} flipped, still parses", bit);
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_decoders(
        bytes in vec(any::<u8>(), 0..2000),
        seed in any::<u64>(),
    ) {
        if let Ok(f) = Frame::parse(&bytes) {
            prop_assert_eq!(f.payload.len(), bytes.len() - 20);
        }
        if let Some(head) = bytes.first_chunk::<SLICE>() {
            let _ = Context::decode(head);
        }
        let _ = verb::decode_request(&bytes);
        for v in every_kind(seed) {
            let _ = verb::decode_output(&v, &bytes);
        }
    }

    /// Arbitrary frame bodies with a correct CRC (so parsing goes past the
    /// checksum): never a panic, and whatever parses is canonical, i.e.
    /// building it again gives back the same bytes.
    #[test]
    fn resealed_mutants_parse_canonically(
        spec in frame_spec(),
        edits in vec((any::<Index>(), 1..=255u8), 0..6),
        junk in vec(any::<u8>(), 0..(MAX_FRAME + 64)),
        shape in 0..4u8,
    ) {
        let mut bytes = spec.build();
        for (at, x) in &edits {
            let i = at.index(bytes.len());
            bytes[i] ^= x;
        }
        match shape {
            // Whole new body behind a real header.
            0 => {
                for (b, j) in bytes[SLICE..].iter_mut().zip(&junk) {
                    *b ^= j;
                }
            }
            1 => bytes.truncate(junk.len() % (bytes.len() + 1)),
            2 => bytes.extend_from_slice(&junk[..junk.len() % 64]),
            _ => {}
        }
        if bytes.len() >= TRAILER_LEN {
            wire::seal(&mut bytes);
        }
        if let Ok(f) = Frame::parse(&bytes) {
            prop_assert_eq!(harness::rebuild(&f), bytes.clone());
        }
        let _ = verb::decode_request(&bytes);
    }
}

// ----- verb codec -------------------------------------------------------------

proptest! {
    /// Every verb fits a frame of at most MAX_CLASS, and the target decodes
    /// from its encoding exactly the request that was sent.
    #[test]
    fn request_round_trips((verb, local) in verb_with_local()) {
        let class = verb.class(MAX_CLASS).expect("every valid verb fits the largest class");
        let cap = wire::payload_capacity(class);
        prop_assert!(verb.request_len() <= cap);
        let mut payload = vec![0u8; cap];
        verb::encode_request(&verb, &local, &mut payload);
        let decoded = verb::decode_request(&payload);
        prop_assert_eq!(decoded, Some(expected_request(&verb, &local)));
        // The target's result area (the echo's payload after the reflected
        // slice) holds the result: initiator and target agree on the class.
        prop_assert!(verb::result_fits(&decoded.unwrap(), cap - SLICE));
        // No padding needed, and every byte of the encoding is required.
        let n = verb.request_len();
        prop_assert_eq!(verb::decode_request(&payload[..n]), decoded);
        prop_assert_eq!(verb::decode_request(&payload[..n - 1]), None);
        // A stray byte after the request changes its meaning: refused.
        if n < cap {
            payload[n] = 1;
            prop_assert_eq!(verb::decode_request(&payload), None);
        }
    }

    #[test]
    fn output_round_trips((verb, (output, block)) in verb_and_output()) {
        let class = verb.class(MAX_CLASS).unwrap();
        let mut area = vec![0u8; wire::payload_capacity(class) - SLICE];
        prop_assert!(verb.result_len() <= area.len());
        verb::encode_output(&output, &block, &mut area);
        let want = Some((output, &block[..]));
        prop_assert_eq!(verb::decode_output(&verb, &area), want);
        let n = verb.result_len();
        prop_assert_eq!(verb::decode_output(&verb, &area[..n]), want);
        if n > 0 {
            prop_assert_eq!(verb::decode_output(&verb, &area[..n - 1]), None);
        }
        if n < area.len() {
            area[n] = 1;
            prop_assert_eq!(verb::decode_output(&verb, &area), None);
        }
    }

    /// An MCAS result whose `committed` flag disagrees with its words, or
    /// whose count is not the verb's, is never taken as a result.
    #[test]
    fn mcas_output_must_agree_with_its_words((verb, (output, _)) in verb_and_output()) {
        let (Verb::MultiWordCommit { .. }, Output::MultiWordCommit { .. }) = (verb, output) else {
            return Ok(());
        };
        let mut area = vec![0u8; verb.result_len()];
        verb::encode_output(&output, &[], &mut area);
        let mut lie = area.clone();
        lie[0] ^= 1;
        prop_assert_eq!(verb::decode_output(&verb, &lie), None);
        let mut miscounted = area;
        miscounted[1] = miscounted[1].wrapping_add(1);
        prop_assert_eq!(verb::decode_output(&verb, &miscounted), None);
    }
}

// ----- a live node -----------------------------------------------------------

fn frames() -> &'static [Vec<u8>] {
    static FRAMES: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    FRAMES.get_or_init(harness::captured_frames)
}

/// A real frame, edited, resized and (usually) resealed so it passes the CRC.
#[derive(Clone, Debug)]
struct Mutant {
    base: Index,
    resize: Option<usize>,
    edits: Vec<(Index, u8)>,
    reseal: bool,
}

impl Mutant {
    fn bytes(&self) -> Vec<u8> {
        let frames = frames();
        let mut f = frames[self.base.index(frames.len())].clone();
        if let Some(len) = self.resize {
            f.resize(len, 0);
        }
        if !f.is_empty() {
            for (at, x) in &self.edits {
                let i = at.index(f.len());
                f[i] ^= x;
            }
        }
        if self.reseal && f.len() >= TRAILER_LEN {
            wire::seal(&mut f);
        }
        f
    }
}

fn mutant() -> impl Strategy<Value = Mutant> {
    (
        any::<Index>(),
        proptest::option::weighted(0.1, 0..=(MAX_FRAME + 64)),
        vec((any::<Index>(), 1..=255u8), 0..6),
        proptest::bool::weighted(0.95),
    )
        .prop_map(|(base, resize, edits, reseal)| Mutant {
            base,
            resize,
            edits,
            reseal,
        })
}

#[test]
fn captured_frames_cover_every_transition() {
    let seen: Vec<Transition> = frames()
        .iter()
        .map(|f| {
            Frame::parse(f)
                .expect("real frames parse")
                .context
                .transition
        })
        .collect();
    for t in TRANSITIONS {
        assert!(seen.contains(&t), "no {t:?} captured");
    }
    let classes: Vec<u8> = frames()
        .iter()
        .map(|f| Frame::parse(f).unwrap().context.class)
        .collect();
    assert!(classes.iter().any(|&c| c > 0), "larger classes captured");
}

/// The mutants reach every verdict of the oracle, every parse failure and
/// every transition, so the property below is not just exercising the CRC.
#[test]
fn mutants_reach_every_verdict() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let (nodes, _, _) = harness::live_pair();
    let mut runner = TestRunner::deterministic();
    let mut verdicts = Vec::new();
    let mut transitions = Vec::new();
    for _ in 0..20_000 {
        let bytes = mutant().new_tree(&mut runner).unwrap().current().bytes();
        for n in &nodes {
            let v = harness::expect(n, &bytes);
            if !verdicts.contains(&v) {
                verdicts.push(v);
            }
        }
        if let Ok(f) = Frame::parse(&bytes)
            && !transitions.contains(&f.context.transition)
        {
            transitions.push(f.context.transition);
        }
    }
    for m in Malformed::ALL {
        assert!(
            verdicts.contains(&Expect::Malformed(m)),
            "no mutant is {m:?}: {verdicts:?}"
        );
    }
    for v in [
        Expect::StaleEpoch,
        Expect::StaleSlot,
        Expect::Disagrees,
        Expect::Live,
    ] {
        assert!(verdicts.contains(&v), "no mutant is {v:?}");
    }
    assert_eq!(transitions.len(), TRANSITIONS.len(), "{transitions:?}");
}

/// Found by the `node` fuzz target within a minute (the oracle was wrong,
/// not the core): a forged HELLO from a new incarnation of the peer takes the
/// link down; the next frame of that incarnation, though it answers nothing
/// (a stale slot frame), proves the peer knows this end, so the link comes
/// back up and says so.
#[test]
fn stale_slot_frame_brings_a_down_link_up() {
    let (nodes, now, _) = harness::live_pair();
    let mut feeder = Feeder::new(nodes, now, 0);
    let hello = Context {
        class: 0,
        knowledge: Knowledge::KnowYou,
        role: Role::Bob,
        transition: Transition::Hello,
        previous_committed: false,
        field: 0,
    };
    let mut buf = [0u8; MAX_FRAME];
    let len = wire::build(&mut buf, &hello, (7, 99), (0, 0), |p| {
        p[..8].copy_from_slice(&0xBu64.to_be_bytes());
        p[8..10].copy_from_slice(&64u16.to_be_bytes());
        p[10..12].copy_from_slice(&64u16.to_be_bytes());
        p[12] = MAX_CLASS;
    });
    assert_eq!(harness::expect(&feeder.nodes[0], &buf[..len]), Expect::Live);
    feeder.feed(&buf[..len]);
    let status = feeder.nodes[0].link_status(0).unwrap();
    assert!(!status.up && status.peer_epoch == 7, "{status:?}");
    let ack = Context {
        knowledge: Knowledge::KnowYouKnowMe,
        transition: Transition::CommitAck,
        field: Context::slot_field(0, 7),
        ..hello
    };
    let len = wire::build(&mut buf, &ack, (7, 1), (1, 0), |_| {});
    assert_eq!(
        harness::expect(&feeder.nodes[0], &buf[..len]),
        Expect::StaleSlot
    );
    feeder.feed(&buf[..len]);
    assert!(feeder.nodes[0].link_status(0).unwrap().up);
    feeder.finish();
}

/// Replaying the donor's real traffic verbatim at a live node exercises the
/// deep paths (requests refused for their key, then reversed) and changes
/// nothing.
#[test]
fn replayed_real_frames_are_accounted_for() {
    for to in 0..2 {
        let (nodes, now, _) = harness::live_pair();
        let mut feeder = Feeder::new(nodes, now, to);
        for f in frames() {
            feeder.feed(f);
        }
        assert!(!feeder.applied);
        let s = feeder.nodes[to].link_stats(0).unwrap().clone();
        if to == 1 {
            assert!(
                s.refusals_sent > 0,
                "replayed requests reached the verbs engine"
            );
        }
        feeder.finish();
    }
}

/// An authenticated pair's own traffic replayed at it, each frame as sent
/// and with one byte changed: all dropped by the authenticator, none
/// reaching the link, and the pair talks on.
#[test]
fn an_authenticated_node_drops_its_own_traffic_replayed_or_changed() {
    for to in 0..2 {
        let (nodes, now, capture) = harness::live_sealed_pair();
        let mut feeder = SealedFeeder::new(nodes, now, to);
        for f in &capture {
            feeder.feed(f);
            let mut changed = f.clone();
            let at = f.len() / 2;
            changed[at] ^= 0x10;
            feeder.feed(&changed);
        }
        assert!(capture.len() >= 4, "bring-up sent {} frames", capture.len());
        feeder.finish();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Arbitrary byte strings and mutated real frames fed to an
    /// authenticated live node: each dropped by its authenticator, the link
    /// untouched, memory unchanged.
    #[test]
    fn an_authenticated_node_drops_what_it_was_not_sent(
        to in 0..2usize,
        inputs in vec(vec(any::<u8>(), 0..2000), 0..16),
        mutants in vec(mutant(), 0..16),
    ) {
        let (nodes, now, _) = harness::live_sealed_pair();
        let mut feeder = SealedFeeder::new(nodes, now, to);
        for bytes in inputs.iter().cloned().chain(mutants.iter().map(Mutant::bytes)) {
            feeder.feed(&bytes);
        }
        feeder.finish();
    }

    /// Arbitrary byte strings fed to a live node: no panic, no change to
    /// memory, and each one counted (almost all fail the CRC).
    #[test]
    fn arbitrary_bytes_leave_a_live_node_unharmed(
        to in 0..2usize,
        inputs in vec(vec(any::<u8>(), 0..2000), 1..32),
    ) {
        let (nodes, now, _) = harness::live_pair();
        let mut feeder = Feeder::new(nodes, now, to);
        for bytes in &inputs {
            feeder.feed(bytes);
        }
        prop_assert_eq!(feeder.fed, inputs.len() as u64);
        prop_assert!(!feeder.applied, "random bytes forged a keyed request");
        feeder.finish();
    }

    /// Mutated real frames with their CRC recomputed, so they reach the
    /// context, epoch, slot and payload checks and the verbs engine.
    #[test]
    fn resealed_mutants_leave_a_live_node_unharmed(
        to in 0..2usize,
        mutants in vec(mutant(), 1..48),
    ) {
        let (nodes, now, _) = harness::live_pair();
        let mut feeder = Feeder::new(nodes, now, to);
        for m in &mutants {
            feeder.feed(&m.bytes());
        }
        prop_assert_eq!(feeder.fed, mutants.len() as u64);
        prop_assert!(!feeder.applied, "a mutant forged a keyed request");
        feeder.finish();
    }
}
