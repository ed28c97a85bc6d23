//! Registered memory that every polling core of a dataplane shares: bytes in
//! `AtomicU64` words and one lock word per data word, taken with a CPU
//! compare-and-swap. A verb arriving on any link sees and changes the same
//! bytes; word locks keep their meaning across cores (held by a tentative
//! transfer from its application to its commit or reversal).
//!
//! A lock word is zero when free. Otherwise it names its holder (the core's
//! tag and the slot's [`LockOwner`]) and, while a core is applying one verb to
//! the word, the `APPLYING` bit. Another core that meets `APPLYING` waits for
//! that verb to finish (a few hundred instructions, no I/O); one that meets a
//! tentative transfer's lock refuses `Locked`, as a single core does. Every
//! verb takes its words in ascending order (a multi-word commit sorts them),
//! so cores waiting on each other cannot form a cycle.
//!
//! The data words are read and written with relaxed atomics: only the holder
//! of a word's lock touches it, and the lock's acquire (taking it) and
//! release (keeping or freeing it) order those accesses between cores. Under
//! `--cfg loom` the same code runs on loom's atomics (`proto/tests/loom.rs`).

use core::ops::Range;
use std::sync::{Mutex, OnceLock};

#[cfg(loom)]
use loom::sync::Arc;
#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
use std::sync::Arc;
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU64, Ordering};

use super::{LockOwner, RegionFacts, RegionSpec, RegisterError, Store, zeroed};
use crate::verb::Refusal;

/// Regions one shared memory can hold.
pub const MAX_REGIONS: usize = 64;

/// The lock word's mark for "a core is applying a verb to this word now".
const APPLYING: u64 = 1 << 63;

struct SharedRegion {
    spec: RegionSpec,
    data: Box<[AtomicU64]>,
    locks: Box<[AtomicU64]>,
}

struct Table {
    /// Filled in order, never emptied: a region stays registered for the
    /// life of the dataplane, so an index found once stays valid.
    regions: Box<[OnceLock<SharedRegion>]>,
    registering: Mutex<()>,
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
            }),
            tag: 1 << 32,
        }
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
        let words = bytes.start / 8..bytes.end.div_ceil(8);
        self.region(index).locks[words]
            .iter()
            .filter(|l| l.load(Ordering::Relaxed) != 0)
            .count()
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
        let region = SharedRegion {
            spec,
            data: zeroed(words, zero, spec.footprint())?.into_boxed_slice(),
            locks: zeroed(words, zero, spec.footprint())?.into_boxed_slice(),
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
        let locks = &self.region(region).locks;
        let applying = self.holder(owner) | APPLYING;
        let mut spins = 0;
        for w in words.clone() {
            loop {
                match locks[w].compare_exchange_weak(
                    0,
                    applying,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break,
                    // Free but the weak exchange failed spuriously, or
                    // another core is mid-verb on it: it will be kept or
                    // freed within that verb.
                    Err(held) if held == 0 || held & APPLYING != 0 => wait_turn(&mut spins),
                    Err(_) => {
                        for taken in words.start..w {
                            locks[taken].store(0, Ordering::Release);
                        }
                        return Err(Refusal::Locked);
                    }
                }
            }
        }
        Ok(())
    }

    fn keep(&mut self, region: usize, words: Range<usize>, owner: LockOwner) {
        let holder = self.holder(owner);
        for lock in &self.region(region).locks[words] {
            lock.store(holder, Ordering::Release);
        }
    }

    fn unlock(&mut self, region: usize, words: Range<usize>) {
        for lock in &self.region(region).locks[words] {
            lock.store(0, Ordering::Release);
        }
    }

    fn load(&self, region: usize, at: usize, out: &mut [u8]) {
        let data = &self.region(region).data;
        let mut done = 0;
        while done < out.len() {
            let byte = at + done;
            let word = data[byte / 8].load(Ordering::Relaxed).to_le_bytes();
            let from = byte % 8;
            let n = (8 - from).min(out.len() - done);
            out[done..done + n].copy_from_slice(&word[from..from + n]);
            done += n;
        }
    }

    fn save(&mut self, region: usize, at: usize, bytes: &[u8]) {
        let data = &self.region(region).data;
        let mut done = 0;
        while done < bytes.len() {
            let byte = at + done;
            let from = byte % 8;
            let n = (8 - from).min(bytes.len() - done);
            let cell = &data[byte / 8];
            let mut word = if n == 8 {
                [0; 8]
            } else {
                cell.load(Ordering::Relaxed).to_le_bytes()
            };
            word[from..from + n].copy_from_slice(&bytes[done..done + n]);
            cell.store(u64::from_le_bytes(word), Ordering::Relaxed);
            done += n;
        }
    }

    fn locked_words(&self) -> usize {
        self.registered()
            .map(|r| {
                r.locks
                    .iter()
                    .filter(|l| l.load(Ordering::Relaxed) != 0)
                    .count()
            })
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
