//! One registered memory behind several nodes on several threads, as a
//! dataplane's polling cores share it: the verbs engine gives the same
//! results over `SharedMemory` as over a node's own `Memory`, and cores
//! hammering the same words with CAS, FETCH_ADD, MULTI-WORD COMMIT and
//! BILATERAL SWAP (word locks), and with block WRITEs and READs over them
//! (span bits), over lossy links keep an exact ledger and never see a
//! verb half applied.

use oae_proto::memory::{LockOwner, Undo};
use oae_proto::verb::{MAX_MCAS_WORDS, Opcode, Request};
use oae_proto::{
    Event, LinkConfig, McasWord, Memory, NoObserver, Node, Output, Permissions, RegionRef,
    RegionSpec, SharedMemory, Store, Verb, VerbId,
};
use proptest::prelude::*;

const SHARED: RegionRef = RegionRef { id: 1, key: 7 };
const LOCAL: u16 = 2;
/// Where a READ lands in the local region, clear of the swapped token at 0.
const READ_LANDS_AT: u32 = 64;

fn spec(id: u16, len: u32) -> RegionSpec {
    RegionSpec {
        id,
        key: 7,
        len,
        permissions: Permissions::ALL,
    }
}

/// One step of the single-threaded comparison: a request on words 0..8, and
/// what happens to it afterwards.
#[derive(Clone, Debug)]
enum Step {
    Apply {
        op: Opcode,
        word: u32,
        len: u16,
        value: u64,
        slot: u16,
    },
    Commit(u16),
    Reverse(u16),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (
            prop::sample::select(Opcode::ALL.to_vec()),
            0u32..64,
            1u16..24,
            any::<u64>(),
            0u16..4
        )
            .prop_map(|(op, word, len, value, slot)| Step::Apply {
                op,
                word,
                len,
                value: value % 4,
                slot
            }),
        (0u16..4).prop_map(Step::Commit),
        (0u16..4).prop_map(Step::Reverse),
    ]
}

fn request(op: Opcode, at: u32, len: u16, value: u64, data: &[u8]) -> Request<'_> {
    let mut words = [McasWord::default(); MAX_MCAS_WORDS];
    words[0] = McasWord {
        offset: at & !7,
        expected: value,
        new: value + 1,
    };
    words[1] = McasWord {
        offset: (at & !7) ^ 8,
        expected: value,
        new: value + 2,
    };
    match op {
        Opcode::Read => Request::Read {
            target: SHARED,
            offset: at,
            len,
        },
        Opcode::Write => Request::Write {
            target: SHARED,
            offset: at,
            data: &data[..usize::from(len)],
        },
        Opcode::CompareAndSwap => Request::CompareAndSwap {
            target: SHARED,
            offset: at,
            expected: value,
            new: value + 1,
        },
        Opcode::FetchAdd => Request::FetchAdd {
            target: SHARED,
            offset: at,
            add: value,
        },
        Opcode::Swap => Request::Swap {
            target: SHARED,
            offset: at,
            new: value + 3,
        },
        Opcode::MultiWordCommit => Request::MultiWordCommit {
            target: SHARED,
            count: 2,
            words,
        },
        Opcode::BilateralSwap => Request::BilateralSwap {
            target: SHARED,
            offset: at,
            data: &data[..usize::from(len)],
        },
        // No store takes a SEND (a link delivers it into a receive): both
        // refuse it alike.
        Opcode::Send => Request::Send {
            imm: Some(value as u32),
            data: &data[..usize::from(len)],
        },
    }
}

/// Runs `steps` on `store`, returning every result and the final bytes.
fn run(store: &mut impl Store, steps: &[Step]) -> (Vec<Result<Vec<u8>, String>>, Vec<u8>) {
    store.register(spec(1, 64)).unwrap();
    let mut undo: [Option<Undo>; 4] = Default::default();
    let data: Vec<u8> = (1..=32).collect();
    let mut results = Vec::new();
    for s in steps {
        match *s {
            Step::Apply {
                op,
                word,
                len,
                value,
                slot,
            } => {
                if undo[usize::from(slot)].is_some() {
                    continue;
                }
                let mut u = Undo::default();
                let mut out = [0u8; 128];
                let r = store.apply(
                    &request(op, word, len, value, &data),
                    LockOwner::target(0, slot),
                    &mut u,
                    &mut out,
                );
                results.push(r.map(|n| out[..n].to_vec()).map_err(|e| format!("{e:?}")));
                if r.is_ok() && !u.is_empty() {
                    undo[usize::from(slot)] = Some(u);
                }
            }
            Step::Commit(slot) => {
                if let Some(u) = undo[usize::from(slot)].take() {
                    store.commit(&u);
                }
            }
            Step::Reverse(slot) => {
                if let Some(u) = undo[usize::from(slot)].take() {
                    store.reverse(&u);
                }
            }
        }
    }
    for u in undo.iter().flatten() {
        store.reverse(u);
    }
    assert_eq!(store.locked_words(), 0);
    (results, store.snapshot(1).unwrap())
}

proptest! {
    #[test]
    fn shared_and_local_memory_give_the_same_results(steps in prop::collection::vec(step(), 1..60)) {
        let local = run(&mut Memory::default(), &steps);
        let shared = run(&mut SharedMemory::new(), &steps);
        prop_assert_eq!(local, shared);
    }
}

/// An initiator with a local region and a target over one core's handle on
/// the shared memory, joined by a wire that loses every `drop_every`-th
/// frame in either direction.
struct LossyPair {
    initiator: Node,
    target: Node<NoObserver, SharedMemory>,
    now: u64,
    sent: u64,
    drop_every: u64,
}

impl LossyPair {
    fn new(core: u16, memory: &SharedMemory, drop_every: u64) -> LossyPair {
        let cfg = LinkConfig::default();
        let mut initiator = Node::new(0x100 + u64::from(core), 1);
        initiator.add_link(cfg).unwrap();
        initiator.register(spec(LOCAL, 64 + READ_LANDS_AT)).unwrap();
        let mut target = Node::with_memory(0x1, 1, NoObserver, memory.for_core(core));
        target.add_link(cfg).unwrap();
        LossyPair {
            initiator,
            target,
            now: 1,
            sent: 0,
            drop_every,
        }
    }

    /// One microsecond of the wire: frames both ways, timers, and the
    /// initiator's completion if one came.
    fn step(&mut self, lossy: bool) -> Option<(VerbId, Result<Output, oae_proto::VerbError>)> {
        let mut buf = [0u8; oae_proto::wire::MAX_FRAME];
        self.now += 1_000;
        while let Some(len) = self.initiator.poll_transmit(0, self.now, &mut buf) {
            self.sent += 1;
            if !lossy || !self.sent.is_multiple_of(self.drop_every) {
                self.target.handle_frame(0, &buf[..len], self.now);
            }
        }
        while let Some(len) = self.target.poll_transmit(0, self.now, &mut buf) {
            self.sent += 1;
            if !lossy || !self.sent.is_multiple_of(self.drop_every) {
                self.initiator.handle_frame(0, &buf[..len], self.now);
            }
        }
        self.initiator.handle_timeout(self.now);
        self.target.handle_timeout(self.now);
        while self.target.poll_event().is_some() {}
        while let Some(e) = self.initiator.poll_event() {
            if let Event::Completed { id, result, .. } = e {
                return Some((id, result));
            }
        }
        None
    }

    fn quiescent(&self) -> bool {
        self.initiator.is_quiescent() && self.target.is_quiescent()
    }
}

/// One core's workload. Word 0 takes FETCH_ADDs, word 1 CAS increments,
/// words 2 and 3 multi-word increments of both, words 4.. one token per core
/// that BILATERAL SWAPs trade with the cores' local blocks, and the two
/// words after the tokens block WRITEs of a pair of equal values. Block
/// READs from word 2 to the end check that words 2 and 3 are equal, and
/// the pair too: a verb seen half applied would show.
struct Core {
    pair: LossyPair,
    index: u64,
    cores: u64,
    next: u64,
    rounds: u64,
    in_flight: bool,
    cas_guess: u64,
    mcas_guess: [u64; 2],
    ledger: Ledger,
}

/// What one core saw succeed.
#[derive(Default, Debug)]
struct Ledger {
    adds: u64,
    cas_wins: u64,
    mcas_wins: u64,
    pair_writes: u64,
    reads: u64,
}

impl Core {
    fn new(index: u64, cores: u64, rounds: u64, memory: &SharedMemory) -> Core {
        Core {
            // Different loss patterns per core, so their reversals fall at
            // different moments.
            pair: LossyPair::new(index as u16, memory, 7 + 2 * index),
            index,
            cores,
            next: 0,
            rounds,
            in_flight: false,
            cas_guess: 0,
            mcas_guess: [0, 0],
            ledger: Ledger::default(),
        }
    }

    /// Byte offset of the pair the block WRITEs write.
    fn pair_at(&self) -> u32 {
        32 + 8 * self.cores as u32
    }

    fn verb(&self, round: u64) -> Verb {
        match round % 6 {
            4 => {
                let v = ((self.index + 1) << 32 | round).to_le_bytes();
                let mut pair = [0u8; 16];
                pair[..8].copy_from_slice(&v);
                pair[8..].copy_from_slice(&v);
                Verb::Write {
                    target: SHARED,
                    offset: self.pair_at(),
                    data: oae_proto::verb::Block::new(&pair).expect("16 bytes fit"),
                }
            }
            // From word 2 to the pair's end.
            5 => Verb::Read {
                target: SHARED,
                offset: 16,
                local_region: LOCAL,
                local_offset: READ_LANDS_AT,
                len: self.pair_at() as u16,
            },
            _ => self.word_verb(round),
        }
    }

    fn word_verb(&self, round: u64) -> Verb {
        match round % 6 {
            0 => Verb::FetchAdd {
                target: SHARED,
                offset: 0,
                add: 1,
            },
            1 => Verb::CompareAndSwap {
                target: SHARED,
                offset: 8,
                expected: self.cas_guess,
                new: self.cas_guess + 1,
            },
            2 => {
                let [w2, w3] = self.mcas_guess;
                let mut words = [McasWord::default(); MAX_MCAS_WORDS];
                // Listed in descending order: the engine must sort them.
                words[0] = McasWord {
                    offset: 24,
                    expected: w3,
                    new: w3 + 1,
                };
                words[1] = McasWord {
                    offset: 16,
                    expected: w2,
                    new: w2 + 1,
                };
                Verb::MultiWordCommit {
                    target: SHARED,
                    count: 2,
                    words,
                }
            }
            _ => Verb::BilateralSwap {
                target: SHARED,
                offset: 32 + 8 * ((round / 6 + self.index) % self.cores) as u32,
                local_region: LOCAL,
                local_offset: 0,
                len: 8,
            },
        }
    }

    /// Submits the next verb if none is in flight, moves the wire one step,
    /// books a completion. False once every round is done and settled.
    fn step(&mut self) -> bool {
        if !self.in_flight && self.next < self.rounds {
            let verb = self.verb(self.next);
            self.pair
                .initiator
                .submit(0, VerbId(self.next), &verb)
                .expect("one verb at a time fits");
            self.next += 1;
            self.in_flight = true;
        }
        let done = self.next == self.rounds && !self.in_flight;
        if done && self.pair.quiescent() {
            return false;
        }
        // Lossless once the work is done, so the last commits arrive.
        if let Some((id, result)) = self.pair.step(!done) {
            assert_eq!(id, VerbId(self.next - 1), "one verb in flight per core");
            self.in_flight = false;
            self.book(result);
        }
        true
    }

    fn book(&mut self, result: Result<Output, oae_proto::VerbError>) {
        match result {
            Ok(Output::FetchAdd { .. }) => self.ledger.adds += 1,
            Ok(Output::CompareAndSwap { old, swapped }) => {
                self.ledger.cas_wins += u64::from(swapped);
                self.cas_guess = old + u64::from(swapped);
            }
            Ok(Output::MultiWordCommit { committed, old, .. }) => {
                self.ledger.mcas_wins += u64::from(committed);
                let step = u64::from(committed);
                self.mcas_guess = [old[1] + step, old[0] + step];
            }
            Ok(Output::Write) => self.ledger.pair_writes += 1,
            Ok(Output::Read { len }) => {
                let local = self.pair.initiator.memory().bytes(LOCAL).unwrap();
                let at = READ_LANDS_AT as usize;
                let bytes = &local[at..at + usize::from(len)];
                let pair = self.pair_at() as usize - 16;
                assert_eq!(
                    word(bytes, 0),
                    word(bytes, 8),
                    "a read saw a multi-word commit half applied: {bytes:?}"
                );
                assert_eq!(
                    word(bytes, pair),
                    word(bytes, pair + 8),
                    "a read saw a block write half applied: {bytes:?}"
                );
                self.ledger.reads += 1;
            }
            Ok(_) | Err(_) => {}
        }
    }

    fn token(&self) -> u64 {
        word(self.pair.initiator.memory().bytes(LOCAL).unwrap(), 0)
    }
}

fn word(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

/// A shared memory whose token words hold 1..=cores.
fn shared_memory(cores: u64) -> SharedMemory {
    let mut memory = SharedMemory::new();
    // The counters, the tokens, the pair.
    memory
        .register(spec(1, 32 + 8 * cores as u32 + 16))
        .unwrap();
    for core in 0..cores {
        let at = 32 + 8 * core as u32;
        let mut undo = Undo::default();
        let write = Request::Write {
            target: SHARED,
            offset: at,
            data: &(core + 1).to_le_bytes(),
        };
        memory
            .apply(&write, LockOwner::target(0, 0), &mut undo, &mut [])
            .unwrap();
        memory.commit(&undo);
    }
    memory
}

/// The memory equals what the cores' completions say happened.
fn check_ledger(memory: &SharedMemory, cores: &[Core]) {
    let bytes = memory.snapshot(1).unwrap();
    let total = |f: fn(&Ledger) -> u64| cores.iter().map(|c| f(&c.ledger)).sum::<u64>();
    let stat = |f: fn(&oae_proto::LinkStats) -> u64| {
        cores
            .iter()
            .map(|c| f(c.pair.initiator.link_stats(0).unwrap()))
            .sum::<u64>()
    };
    let ledgers: Vec<_> = cores.iter().map(|c| &c.ledger).collect();
    let context = format!("ledgers {ledgers:?}, memory {:?}", &bytes[..32]);
    assert_eq!(
        memory.locked_words(),
        0,
        "every tentative transfer ended; {context}"
    );
    assert_eq!(
        word(&bytes, 0),
        total(|l| l.adds),
        "FETCH_ADDs, once each; {context}"
    );
    assert_eq!(
        word(&bytes, 8),
        total(|l| l.cas_wins),
        "CAS increments that won; {context}"
    );
    assert_eq!(
        word(&bytes, 16),
        total(|l| l.mcas_wins),
        "multi-word commits; {context}"
    );
    assert_eq!(
        word(&bytes, 24),
        total(|l| l.mcas_wins),
        "multi-word commits; {context}"
    );
    assert!(
        total(|l| l.cas_wins) > 0 && total(|l| l.mcas_wins) > 0,
        "{context}"
    );
    let pair = 32 + 8 * cores.len();
    assert_eq!(
        word(&bytes, pair),
        word(&bytes, pair + 8),
        "the pair's words moved together; {context}"
    );
    assert!(
        total(|l| l.pair_writes) > 0 && total(|l| l.reads) > 0,
        "block verbs ran; {context}"
    );
    let n = cores.len();
    let mut tokens: Vec<u64> = (0..n).map(|c| word(&bytes, 32 + 8 * c)).collect();
    tokens.extend(cores.iter().map(Core::token));
    tokens.sort_unstable();
    let mut expected: Vec<u64> = (1..=n as u64).chain(std::iter::repeat_n(0, n)).collect();
    expected.sort_unstable();
    assert_eq!(
        tokens, expected,
        "bilateral swaps moved tokens, never copied or lost one"
    );
    assert!(
        stat(|s| s.reversals) > 0,
        "losses caused reversals, so their traces were tested"
    );
    assert!(
        stat(|s| s.refusals_received) > 0,
        "cores met each other's locks"
    );
}

/// Cores taking turns on one thread: deterministic, and every core's
/// tentative transfers stay held while the others run, so they collide often.
#[test]
fn cores_taking_turns_on_shared_words_keep_an_exact_ledger() {
    const CORES: u64 = 3;
    let memory = shared_memory(CORES);
    let mut cores: Vec<Core> = (0..CORES)
        .map(|i| Core::new(i, CORES, 3_000, &memory))
        .collect();
    for _ in 0..10_000_000 {
        let mut busy = false;
        for c in &mut cores {
            busy |= c.step();
        }
        if !busy {
            check_ledger(&memory, &cores);
            return;
        }
    }
    panic!("the cores did not finish within ten million steps");
}

/// Cores on threads of their own, as polling cores run.
#[test]
fn cores_on_threads_hammering_shared_words_keep_an_exact_ledger() {
    const CORES: u64 = 3;
    let memory = shared_memory(CORES);
    let cores: Vec<Core> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..CORES)
            .map(|i| {
                let memory = &memory;
                scope.spawn(move || {
                    let mut core = Core::new(i, CORES, 20_000, memory);
                    for _ in 0..50_000_000 {
                        if !core.step() {
                            return core;
                        }
                    }
                    panic!("core {i} did not finish within fifty million steps");
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a core panicked"))
            .collect()
    });
    check_ledger(&memory, &cores);
}
