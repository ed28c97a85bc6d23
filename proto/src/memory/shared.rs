//! Registered memory that every polling core of a dataplane shares: bytes in
//! `AtomicU64` words, taken with CPU compare-and-swaps. A verb arriving on
//! any link sees and changes the same bytes; locks keep their meaning across
//! cores (held by a tentative transfer from its application to its commit or
//! reversal).
//!
//! Two kinds of lock cover every word, so that a verb pays one
//! compare-and-swap whether it names one word or many:
//!
//! - A **word lock** per data word, taken by verbs on one word (the
//!   atomics, a multi-word commit word by word, short reads and writes).
//!   Zero when free; otherwise its holder (the core's tag and the slot's
//!   [`LockOwner`]) and, while the holder applies its verb, `APPLYING`.
//! - A **span word** per [`SPAN_WORDS`] data words, taken by verbs on
//!   several words (block reads, writes and swaps): its low half marks the
//!   words a verb is applying, its high half those a tentative transfer
//!   keeps, one bit per word.
//!
//! A verb that meets a tentative transfer's lock of either kind refuses
//! `Locked`, as a single core does. One that meets a verb being applied
//! waits for it (a few hundred instructions, no I/O), with one rule that
//! keeps waits from forming a cycle: a verb on several words waits holding
//! its span bits (in ascending order, as everyone takes them), while a verb
//! on one word that meets span bits being applied lets go of everything it
//! holds before it waits. Each kind takes its lock and then looks at the
//! other kind (a compare-and-swap, then a load, both sequentially
//! consistent): of two verbs that take the same word by different kinds at
//! once, at least one sees the other.
//!
//! The data words are read and written with relaxed atomics: only the holder
//! of a word's lock touches it, and the locks' acquire (taking or looking)
//! and release (keeping or freeing) order those accesses between cores.
//! Under `--cfg loom` the same code runs on loom's atomics
//! (`proto/tests/loom.rs`), with a sequentially consistent fence between the
//! take and the look instead of sequentially consistent accesses, which loom
//! does not model.

use core::ops::Range;
use std::sync::{Mutex, OnceLock};

#[cfg(loom)]
use loom::sync::Arc;
#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering, fence};
#[cfg(not(loom))]
use std::sync::Arc;
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU64, Ordering};

use super::{LockOwner, RegionFacts, RegionSpec, RegisterError, Store, zeroed};
use crate::verb::Refusal;

/// EINVAL (Linux), without a libc dependency: a lender's words of the
/// wrong length.
#[cfg(not(loom))]
const EINVAL: i32 = 22;

/// Regions one shared memory can hold.
pub const MAX_REGIONS: usize = 64;

/// The word lock's mark for "a core is applying a verb to this word now".
const APPLYING: u64 = 1 << 63;

/// Data words one span word covers.
pub const SPAN_WORDS: usize = 32;

/// How a lock is taken, and the other kind looked at, so that of two verbs
/// doing so at once at least one sees the other.
#[cfg(not(loom))]
const TAKE: Ordering = Ordering::SeqCst;
#[cfg(not(loom))]
const LOOK: Ordering = Ordering::SeqCst;
#[cfg(loom)]
const TAKE: Ordering = Ordering::AcqRel;
#[cfg(loom)]
const LOOK: Ordering = Ordering::Acquire;

/// Between a take and a look: nothing where the accesses are sequentially
/// consistent; under loom, which treats those as acquire-release, a fence.
#[inline]
fn between_take_and_look() {
    #[cfg(loom)]
    fence(Ordering::SeqCst);
}

struct SharedRegion {
    spec: RegionSpec,
    data: Words,
    /// One per data word.
    locks: Box<[AtomicU64]>,
    /// One per [`SPAN_WORDS`] data words.
    spans: Box<[AtomicU64]>,
}

/// Where a region's data words live: the heap, or memory lent for the
/// process's life (a file host programs map, [`SharedMemory::lend_from`]).
enum Words {
    Owned(Box<[AtomicU64]>),
    #[cfg(not(loom))]
    Lent(&'static [AtomicU64]),
}

impl core::ops::Deref for Words {
    type Target = [AtomicU64];

    fn deref(&self) -> &[AtomicU64] {
        match self {
            Words::Owned(words) => words,
            #[cfg(not(loom))]
            Words::Lent(words) => words,
        }
    }
}

/// Lends every region registered from then on its data words, `len / 8`
/// of them, zeroed (the caller keeps them mapped for the life of the
/// process); an error refuses the registration.
#[cfg(not(loom))]
pub type Lender = dyn Fn(&RegionSpec) -> Result<&'static [AtomicU64], RegisterError> + Send + Sync;

/// What taking one word's lock came to.
enum Take {
    Taken,
    /// A tentative transfer holds the word: `Locked`.
    Held,
    /// A verb on several words is being applied to it: nothing is held
    /// now; try again once it is done ([`SharedRegion::wait_for_span`]).
    Yield,
}

/// The span words `words` touch, each with the mask of its words among them.
fn spans(words: Range<usize>) -> impl Iterator<Item = (usize, u64)> {
    let first = words.start / SPAN_WORDS;
    let last = (words.end - 1) / SPAN_WORDS;
    (first..=last).map(move |g| {
        let from = words.start.max(g * SPAN_WORDS) - g * SPAN_WORDS;
        let to = words.end.min((g + 1) * SPAN_WORDS) - g * SPAN_WORDS;
        // At most SPAN_WORDS (32) bits: the shift never overflows.
        (g, ((1u64 << (to - from)) - 1) << from)
    })
}

impl SharedRegion {
    /// Words that a lock of either kind holds, among `words`.
    fn locked_in(&self, words: Range<usize>) -> usize {
        words
            .filter(|&w| {
                let span = self.spans[w / SPAN_WORDS].load(Ordering::Relaxed);
                let bit = 1u64 << (w % SPAN_WORDS);
                self.locks[w].load(Ordering::Relaxed) != 0 || span & (bit | bit << 32) != 0
            })
            .count()
    }

    /// Takes word `w`'s lock for `holder`, then looks at its span bits.
    fn take_word(&self, w: usize, holder: u64) -> Take {
        let lock = &self.locks[w];
        let bit = 1u64 << (w % SPAN_WORDS);
        let mut spins = 0;
        loop {
            match lock.compare_exchange_weak(0, holder | APPLYING, TAKE, Ordering::Relaxed) {
                Ok(_) => {}
                // Free but the weak exchange failed spuriously, or another
                // core is mid-verb on it: kept or freed within that verb.
                Err(held) if held == 0 || held & APPLYING != 0 => {
                    wait_turn(&mut spins);
                    continue;
                }
                Err(_) => return Take::Held,
            }
            between_take_and_look();
            let span = self.spans[w / SPAN_WORDS].load(LOOK);
            if span & (bit | bit << 32) == 0 {
                return Take::Taken;
            }
            lock.store(0, Ordering::Release);
            return if span & bit << 32 != 0 {
                Take::Held
            } else {
                Take::Yield
            };
        }
    }

    /// Takes the span bits of `words` (two or more) for a verb being
    /// applied, then waits out any verb on one of them.
    fn take_span(&self, words: Range<usize>) -> Result<(), Refusal> {
        let mut spins = 0;
        for (g, mask) in spans(words.clone()) {
            let span = &self.spans[g];
            loop {
                let v = span.load(Ordering::Relaxed);
                if v & mask << 32 != 0 {
                    self.free_span(words.start..(g * SPAN_WORDS).max(words.start));
                    return Err(Refusal::Locked);
                }
                if v & mask != 0 {
                    // Another verb on several words: it finishes without
                    // waiting for anything this one holds.
                    wait_turn(&mut spins);
                    continue;
                }
                if span
                    .compare_exchange_weak(v, v | mask, TAKE, Ordering::Relaxed)
                    .is_ok()
                {
                    break;
                }
            }
        }
        between_take_and_look();
        if self.locks[words.clone()].iter().all(|l| l.load(LOOK) == 0) {
            return Ok(());
        }
        for w in words.clone() {
            loop {
                let held = self.locks[w].load(LOOK);
                if held == 0 {
                    break;
                }
                if held & APPLYING == 0 {
                    self.free_span(words);
                    return Err(Refusal::Locked);
                }
                // A verb on this one word, applied now: it either saw these
                // span bits and lets go, or finishes.
                wait_turn(&mut spins);
            }
        }
        Ok(())
    }

    /// Waits until no verb on several words is being applied to word `w`,
    /// taking nothing: the verb that is can only be waiting for word locks
    /// to be let go, so it finishes.
    fn wait_for_span(&self, w: usize, spins: &mut u32) {
        let bit = 1u64 << (w % SPAN_WORDS);
        while self.spans[w / SPAN_WORDS].load(Ordering::Relaxed) & bit != 0 {
            wait_turn(spins);
        }
    }

    /// Frees the span bits of `words` (taken or kept).
    fn free_span(&self, words: Range<usize>) {
        if words.is_empty() {
            return;
        }
        for (g, mask) in spans(words) {
            self.spans[g].fetch_and(!(mask | mask << 32), Ordering::Release);
        }
    }
}

struct Table {
    /// Filled in order, never emptied: a region stays registered for the
    /// life of the dataplane, so an index found once stays valid.
    regions: Box<[OnceLock<SharedRegion>]>,
    registering: Mutex<()>,
    #[cfg(not(loom))]
    lender: OnceLock<Box<Lender>>,
}

/// One core's handle on a dataplane's shared memory. Clone it with
/// [`SharedMemory::for_core`] for each polling core.
#[derive(Clone)]
pub struct SharedMemory {
    table: Arc<Table>,
    /// Set in every lock this handle takes, above the owner's 32 bits, so
    /// slots of different cores' links never look alike.
    tag: u64,
}

impl Default for SharedMemory {
    fn default() -> SharedMemory {
        SharedMemory::new()
    }
}

impl core::fmt::Debug for SharedMemory {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SharedMemory")
            .field("core", &((self.tag >> 32) - 1))
            .field("regions", &self.region_specs())
            .finish()
    }
}

impl SharedMemory {
    /// An empty memory, and the handle of core 0.
    pub fn new() -> SharedMemory {
        SharedMemory {
            table: Arc::new(Table {
                regions: (0..MAX_REGIONS).map(|_| OnceLock::new()).collect(),
                registering: Mutex::new(()),
                #[cfg(not(loom))]
                lender: OnceLock::new(),
            }),
            tag: 1 << 32,
        }
    }

    /// Regions registered from now on take their data words from `lender`
    /// (host-mappable files) instead of the heap; their locks stay on the
    /// heap. Set once, before the first registration; false if it was set
    /// before.
    #[cfg(not(loom))]
    pub fn lend_from(&self, lender: Box<Lender>) -> bool {
        self.table.lender.set(lender).is_ok()
    }

    /// The handle a polling core uses: the same bytes and locks.
    pub fn for_core(&self, core: u16) -> SharedMemory {
        SharedMemory {
            table: self.table.clone(),
            tag: (u64::from(core) + 1) << 32,
        }
    }

    fn region(&self, index: usize) -> &SharedRegion {
        self.table.regions[index]
            .get()
            .expect("indices come from find, and regions stay registered")
    }

    /// Words touching bytes `bytes` of region `index` that tentative
    /// transfers hold now: a window's count costs the window, not the
    /// memory.
    pub fn locked_words_in(&self, index: usize, bytes: Range<usize>) -> usize {
        if bytes.is_empty() {
            return 0;
        }
        self.region(index)
            .locked_in(bytes.start / 8..bytes.end.div_ceil(8))
    }

    fn registered(&self) -> impl Iterator<Item = &SharedRegion> {
        self.table.regions.iter().map_while(OnceLock::get)
    }

    fn holder(&self, owner: LockOwner) -> u64 {
        self.tag | u64::from(owner.get())
    }
}

impl Store for SharedMemory {
    fn register(&mut self, spec: RegionSpec) -> Result<(), RegisterError> {
        spec.check()?;
        // Registration is rare and off the hot path; the mutex only keeps
        // two registrations from taking the same slot or the same id.
        let _one_at_a_time = self
            .table
            .registering
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if self.registered().any(|r| r.spec.id == spec.id) {
            return Err(RegisterError::DuplicateId(spec.id));
        }
        let slot = self
            .table
            .regions
            .iter()
            .find(|slot| slot.get().is_none())
            .ok_or(RegisterError::TooMany)?;
        let words = spec.len as usize / 8;
        let zero = || AtomicU64::new(0);
        #[cfg(not(loom))]
        let data = match self.table.lender.get() {
            Some(lend) => {
                let lent = lend(&spec)?;
                if lent.len() != words {
                    return Err(RegisterError::NotLent { errno: EINVAL });
                }
                Words::Lent(lent)
            }
            None => Words::Owned(zeroed(words, zero, spec.footprint())?.into_boxed_slice()),
        };
        #[cfg(loom)]
        let data = Words::Owned(zeroed(words, zero, spec.footprint())?.into_boxed_slice());
        let region = SharedRegion {
            spec,
            data,
            locks: zeroed(words, zero, spec.footprint())?.into_boxed_slice(),
            spans: zeroed(words.div_ceil(SPAN_WORDS), zero, spec.footprint())?.into_boxed_slice(),
        };
        if slot.set(region).is_err() {
            unreachable!("slots are filled under the registration mutex");
        }
        Ok(())
    }

    fn find(&self, id: u16) -> Option<(usize, RegionFacts)> {
        self.registered()
            .position(|r| r.spec.id == id)
            .map(|i| (i, self.region(i).spec.facts()))
    }

    fn region_specs(&self) -> Vec<RegionSpec> {
        let mut specs: Vec<RegionSpec> = self.registered().map(|r| r.spec).collect();
        specs.sort_by_key(|s| s.id);
        specs
    }

    fn try_lock(
        &mut self,
        region: usize,
        words: Range<usize>,
        owner: LockOwner,
    ) -> Result<(), Refusal> {
        let r = self.region(region);
        if words.len() > 1 {
            return r.take_span(words);
        }
        let mut spins = 0;
        loop {
            match r.take_word(words.start, self.holder(owner)) {
                Take::Taken => return Ok(()),
                Take::Held => return Err(Refusal::Locked),
                Take::Yield => r.wait_for_span(words.start, &mut spins),
            }
        }
    }

    fn try_lock_each(
        &mut self,
        region: usize,
        offsets: &[u32],
        owner: LockOwner,
    ) -> Result<(), Refusal> {
        let r = self.region(region);
        let holder = self.holder(owner);
        let mut spins = 0;
        'attempt: loop {
            for (k, &at) in offsets.iter().enumerate() {
                let word = at as usize / 8;
                let why = match r.take_word(word, holder) {
                    Take::Taken => continue,
                    Take::Held => Some(Refusal::Locked),
                    Take::Yield => None,
                };
                for &taken in &offsets[..k] {
                    r.locks[taken as usize / 8].store(0, Ordering::Release);
                }
                match why {
                    Some(why) => return Err(why),
                    // Nothing held while it waits: a verb on several words
                    // may be waiting for the words this one took.
                    None => {
                        r.wait_for_span(word, &mut spins);
                        continue 'attempt;
                    }
                }
            }
            return Ok(());
        }
    }

    fn keep(&mut self, region: usize, words: Range<usize>, owner: LockOwner) {
        let r = self.region(region);
        if words.len() > 1 {
            for (g, mask) in spans(words) {
                // Applying bits, ours, become kept bits.
                r.spans[g].fetch_xor(mask | mask << 32, Ordering::Release);
            }
            return;
        }
        r.locks[words.start].store(self.holder(owner), Ordering::Release);
    }

    fn unlock(&mut self, region: usize, words: Range<usize>) {
        let r = self.region(region);
        if words.len() > 1 {
            r.free_span(words);
            return;
        }
        r.locks[words.start].store(0, Ordering::Release);
    }

    fn load(&self, region: usize, at: usize, out: &mut [u8]) {
        let data = &self.region(region).data;
        let (head, words, tail) = split_at_words(at, out.len());
        let mut word_at = at / 8;
        if head > 0 {
            let word = data[word_at].load(Ordering::Relaxed).to_le_bytes();
            out[..head].copy_from_slice(&word[at % 8..at % 8 + head]);
            word_at += 1;
        }
        let whole = &mut out[head..head + 8 * words];
        for (chunk, cell) in whole.chunks_exact_mut(8).zip(&data[word_at..]) {
            chunk.copy_from_slice(&cell.load(Ordering::Relaxed).to_le_bytes());
        }
        if tail > 0 {
            let word = data[word_at + words].load(Ordering::Relaxed).to_le_bytes();
            out[head + 8 * words..].copy_from_slice(&word[..tail]);
        }
    }

    fn save(&mut self, region: usize, at: usize, bytes: &[u8]) {
        let data = &self.region(region).data;
        let (head, words, tail) = split_at_words(at, bytes.len());
        let mut word_at = at / 8;
        // A part of a word keeps the word's other bytes.
        let patch = |cell: &AtomicU64, from: usize, part: &[u8]| {
            let mut word = cell.load(Ordering::Relaxed).to_le_bytes();
            word[from..from + part.len()].copy_from_slice(part);
            cell.store(u64::from_le_bytes(word), Ordering::Relaxed);
        };
        if head > 0 {
            patch(&data[word_at], at % 8, &bytes[..head]);
            word_at += 1;
        }
        let whole = &bytes[head..head + 8 * words];
        for (chunk, cell) in whole.chunks_exact(8).zip(&data[word_at..]) {
            let word = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
            cell.store(word, Ordering::Relaxed);
        }
        if tail > 0 {
            patch(&data[word_at + words], 0, &bytes[head + 8 * words..]);
        }
    }

    fn locked_words(&self) -> usize {
        self.registered()
            .map(|r| r.locked_in(0..r.locks.len()))
            .sum()
    }

    /// Read without taking locks: a snapshot for control and tests, which
    /// shows tentative changes and may mix words from before and after a
    /// verb that is being applied.
    fn snapshot(&self, id: u16) -> Option<Vec<u8>> {
        let (i, facts) = self.find(id)?;
        let mut bytes = vec![0; facts.len];
        self.load(i, 0, &mut bytes);
        Some(bytes)
    }
}

/// `len` bytes from byte `at`, as the bytes before the first word boundary
/// (in a word they share with others), the whole words, and the bytes after
/// the last whole word.
fn split_at_words(at: usize, len: usize) -> (usize, usize, usize) {
    let head = ((8 - at % 8) % 8).min(len);
    let words = (len - head) / 8;
    (head, words, len - head - 8 * words)
}

/// What a core waiting for another's verb does between tries: spin a
/// little, then give the CPU away now and then, so a holder descheduled on
/// this CPU can finish its verb. Under loom every try yields, or the model
/// never runs the holder.
#[inline]
fn wait_turn(spins: &mut u32) {
    *spins += 1;
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    if spins.is_multiple_of(64) {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::Permissions;

    #[test]
    fn a_window_counts_the_locked_words_it_touches() {
        let mut memory = SharedMemory::new();
        memory
            .register(RegionSpec {
                id: 1,
                key: 7,
                len: 64,
                permissions: Permissions::ALL,
            })
            .unwrap();
        let (index, _) = memory.find(1).unwrap();
        memory
            .try_lock(index, 2..4, LockOwner::target(0, 1))
            .unwrap();
        assert_eq!(memory.locked_words(), 2);
        // Words 2 and 3 are bytes 16..32.
        assert_eq!(memory.locked_words_in(index, 0..64), 2);
        assert_eq!(memory.locked_words_in(index, 0..16), 0);
        assert_eq!(memory.locked_words_in(index, 15..17), 1);
        assert_eq!(memory.locked_words_in(index, 31..40), 1);
        assert_eq!(memory.locked_words_in(index, 32..64), 0);
        assert_eq!(memory.locked_words_in(index, 20..20), 0);
    }
}
