//! Registered memory and the verbs engine: tentative application with an undo
//! record, word locks held until commit or reversal, and refusal with no
//! effect for anything outside what a region allows.
//!
//! The engine is written once, over [`Store`]: where the bytes and word locks
//! live. [`Memory`] keeps them in plain arrays owned by one node (the
//! simulator, the model checker, one polling core); [`SharedMemory`] keeps
//! them in CPU atomics that every polling core of a dataplane shares, so a
//! verb arriving on any link sees and changes the same bytes.

mod local;
mod shared;

pub use local::Memory;
#[cfg(not(loom))]
pub use shared::Lender;
pub use shared::{MAX_REGIONS, SharedMemory};

use core::ops::Range;

use crate::verb::{MAX_BLOCK, MAX_MCAS_WORDS, Refusal, Request};

/// What a region lets peers do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Permissions(u8);

impl Permissions {
    pub const READ: Permissions = Permissions(1);
    pub const WRITE: Permissions = Permissions(2);
    /// CAS, FETCH_ADD, SWAP and MULTI-WORD COMMIT.
    pub const ATOMIC: Permissions = Permissions(4);
    pub const ALL: Permissions = Permissions(7);

    pub const fn union(self, other: Permissions) -> Permissions {
        Permissions(self.0 | other.0)
    }

    pub const fn contains(self, other: Permissions) -> bool {
        self.0 & other.0 == other.0
    }

    /// Parses `"rwa"`-style strings (any order, no repeats).
    pub fn parse(s: &str) -> Option<Permissions> {
        let mut p = Permissions(0);
        for c in s.chars() {
            let bit = match c {
                'r' => Permissions::READ,
                'w' => Permissions::WRITE,
                'a' => Permissions::ATOMIC,
                _ => return None,
            };
            if p.contains(bit) {
                return None;
            }
            p = p.union(bit);
        }
        Some(p)
    }
}

/// Prints the `"rwa"` form [`Permissions::parse`] reads.
impl core::fmt::Display for Permissions {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for (bit, c) in [
            (Permissions::READ, 'r'),
            (Permissions::WRITE, 'w'),
            (Permissions::ATOMIC, 'a'),
        ] {
            if self.contains(bit) {
                core::fmt::Write::write_char(f, c)?;
            }
        }
        Ok(())
    }
}

/// A region to register.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RegionSpec {
    pub id: u16,
    pub key: u32,
    /// Bytes; a positive multiple of 8.
    pub len: u32,
    pub permissions: Permissions,
}

impl RegionSpec {
    fn check(&self) -> Result<(), RegisterError> {
        if self.len == 0 || !self.len.is_multiple_of(8) {
            return Err(RegisterError::BadLength(self.len));
        }
        Ok(())
    }

    fn facts(&self) -> RegionFacts {
        RegionFacts {
            key: self.key,
            permissions: self.permissions,
            len: self.len as usize,
        }
    }
}

/// Why a region could not be registered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegisterError {
    DuplicateId(u16),
    /// Length zero or not a multiple of 8.
    BadLength(u32),
    /// A shared memory holds at most [`MAX_REGIONS`] regions.
    TooMany,
    /// The region's words and their locks (`bytes` in all) could not be
    /// allocated: the process's memory limit is below what it asks.
    OutOfMemory {
        bytes: u64,
    },
    /// The memory that host programs map the region from could not be
    /// made (an `errno`).
    NotLent {
        errno: i32,
    },
}

impl RegionSpec {
    /// What registering the region takes from the heap: its bytes and a
    /// lock word per 8-byte word.
    pub fn footprint(&self) -> u64 {
        2 * u64::from(self.len)
    }
}

/// A zeroed vector of `n` items, or `OutOfMemory` for the `bytes` asked
/// where the allocator refuses (a memory limit), instead of aborting.
pub(crate) fn zeroed<T>(
    n: usize,
    zero: impl FnMut() -> T,
    bytes: u64,
) -> Result<Vec<T>, RegisterError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| RegisterError::OutOfMemory { bytes })?;
    v.resize_with(n, zero);
    Ok(v)
}

impl core::fmt::Display for RegisterError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RegisterError::DuplicateId(id) => write!(f, "region {id} is already registered"),
            RegisterError::BadLength(len) => write!(
                f,
                "region length {len} is not a positive multiple of 8 bytes"
            ),
            RegisterError::TooMany => write!(
                f,
                "a dataplane's shared memory holds at most {} regions",
                MAX_REGIONS
            ),
            RegisterError::OutOfMemory { bytes } => write!(
                f,
                "cannot allocate the region's {bytes} bytes (its words and a lock word \
                 each): the process's memory limit is lower; make the region smaller or \
                 raise the limit"
            ),
            RegisterError::NotLent { errno } => write!(
                f,
                "cannot make the file host programs map the region from: {}",
                std::io::Error::from_raw_os_error(*errno)
            ),
        }
    }
}

/// Who holds a word lock: a slot of a link, on the target or initiator side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LockOwner(u32);

impl LockOwner {
    const FREE: u32 = 0;

    /// The owner as a nonzero number (zero marks a free word).
    pub fn get(self) -> u32 {
        self.0
    }

    /// A tentative transfer being applied here for a peer.
    pub fn target(link: u16, slot: u16) -> LockOwner {
        LockOwner(1 + ((u32::from(link) << 17) | u32::from(slot)))
    }

    /// The local block of a bilateral swap this node initiated.
    pub fn initiator(link: u16, slot: u16) -> LockOwner {
        LockOwner(1 + ((u32::from(link) << 17) | (1 << 16) | u32::from(slot)))
    }
}

/// What a region is, without its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionFacts {
    pub key: u32,
    pub permissions: Permissions,
    /// Bytes.
    pub len: usize,
}

impl RegionFacts {
    /// The bytes `[offset, offset + len)`, if they are inside the region
    /// and not empty.
    pub fn check(&self, offset: u32, len: usize) -> Result<Range<usize>, Refusal> {
        let start = offset as usize;
        let end = start.checked_add(len).ok_or(Refusal::OutOfBounds)?;
        if len == 0 || end > self.len {
            return Err(Refusal::OutOfBounds);
        }
        Ok(start..end)
    }
}

/// The words (8-byte units) a byte range touches.
fn words(range: &Range<usize>) -> Range<usize> {
    range.start / 8..range.end.div_ceil(8)
}

/// The trace a tentative transfer leaves: which byte ranges it locked and
/// changed, and their bytes from before. Reversal puts them back. Its ranges
/// never share a word, so releasing one never frees another's lock.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Undo {
    region: usize,
    count: u8,
    ranges: [(u32, u16); MAX_MCAS_WORDS],
    saved: [u8; MAX_BLOCK],
}

impl core::fmt::Debug for Undo {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Undo")
            .field("region", &self.region)
            .field("ranges", &&self.ranges[..usize::from(self.count)])
            .finish()
    }
}

impl Default for Undo {
    fn default() -> Undo {
        Undo {
            region: 0,
            count: 0,
            ranges: [(0, 0); MAX_MCAS_WORDS],
            saved: [0; MAX_BLOCK],
        }
    }
}

impl Undo {
    /// True if applying left nothing to undo or unlock (reads, failed compares).
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    fn ranges(&self) -> impl Iterator<Item = Range<usize>> + '_ {
        self.ranges[..usize::from(self.count)]
            .iter()
            .map(|&(at, len)| at as usize..at as usize + usize::from(len))
    }

    fn record<S: Store + ?Sized>(&mut self, store: &S, region: usize, range: Range<usize>) {
        debug_assert!(self.count == 0 || self.region == region);
        self.region = region;
        let saved_at: usize = self.ranges().map(|r| r.len()).sum();
        let len = range.len();
        store.load(
            region,
            range.start,
            &mut self.saved[saved_at..saved_at + len],
        );
        self.ranges[usize::from(self.count)] = (range.start as u32, len as u16);
        self.count += 1;
    }
}

/// Where a node's registered memory lives: the bytes and one lock per 8-byte
/// word. A store provides the primitives; the verbs engine (the provided
/// methods) is the same for every store, so both keep one semantics.
///
/// Locking is in two steps. [`Store::try_lock`] takes words for the verb
/// being applied, all or none, and refuses `Locked` if a tentative transfer
/// holds any; [`Store::keep`] then turns them into a tentative transfer's
/// locks, or [`Store::unlock`] frees them. A store shared between cores may
/// make a second applier wait (briefly) for words taken but not yet kept or
/// freed; a verb never waits for a tentative transfer.
pub trait Store {
    fn register(&mut self, spec: RegionSpec) -> Result<(), RegisterError>;
    /// The region's index (for the other primitives) and facts. An index
    /// stays the region's for the life of the store: undo records keep it.
    fn find(&self, id: u16) -> Option<(usize, RegionFacts)>;
    /// Registered regions, in id order.
    fn region_specs(&self) -> Vec<RegionSpec>;
    /// Takes `words` of `region` for `owner`: all of them, or none and
    /// `Err(Locked)`.
    fn try_lock(
        &mut self,
        region: usize,
        words: Range<usize>,
        owner: LockOwner,
    ) -> Result<(), Refusal>;
    /// Takes the word at each of `offsets` (bytes, ascending, distinct) for
    /// `owner`, as `try_lock` takes one: all of them, or none and the
    /// refusal.
    fn try_lock_each(
        &mut self,
        region: usize,
        offsets: &[u32],
        owner: LockOwner,
    ) -> Result<(), Refusal> {
        for (k, &at) in offsets.iter().enumerate() {
            let word = at as usize / 8;
            if let Err(why) = self.try_lock(region, word..word + 1, owner) {
                for &taken in &offsets[..k] {
                    let taken = taken as usize / 8;
                    self.unlock(region, taken..taken + 1);
                }
                return Err(why);
            }
        }
        Ok(())
    }

    /// Words taken by `try_lock` stay locked until `unlock`: a tentative
    /// transfer's, or a bilateral swap's local block.
    fn keep(&mut self, region: usize, words: Range<usize>, owner: LockOwner);
    fn unlock(&mut self, region: usize, words: Range<usize>);
    /// Copies bytes `at..at + out.len()` of a region; the caller holds their words.
    fn load(&self, region: usize, at: usize, out: &mut [u8]);
    /// Writes bytes at `at`; the caller holds their words.
    fn save(&mut self, region: usize, at: usize, bytes: &[u8]);
    /// Number of locked words across all regions.
    fn locked_words(&self) -> usize;
    /// A copy of a region's bytes, for control and tests (allocates).
    fn snapshot(&self, id: u16) -> Option<Vec<u8>>;

    /// Calls `f` with a local block's bytes; the caller holds its words.
    fn with_block<R>(&self, region: u16, offset: u32, len: u16, f: impl FnOnce(&[u8]) -> R) -> R {
        let (i, _) = self
            .find(region)
            .expect("a locked block's region stays registered");
        let mut block = [0u8; MAX_BLOCK];
        let block = &mut block[..usize::from(len)];
        self.load(i, offset as usize, block);
        f(block)
    }

    /// The region `target` names, if its key and permissions allow `need`.
    fn region_for(
        &self,
        target: crate::verb::RegionRef,
        need: Permissions,
    ) -> Result<(usize, RegionFacts), Refusal> {
        let (i, facts) = self.find(target.id).ok_or(Refusal::UnknownRegion)?;
        if facts.key != target.key {
            return Err(Refusal::BadKey);
        }
        if !facts.permissions.contains(need) {
            return Err(Refusal::Forbidden);
        }
        Ok((i, facts))
    }

    /// Applies `request` tentatively for `owner`: checks everything first, so
    /// a refusal changes nothing; on success the changed words are locked,
    /// their old bytes are in `undo`, and the result is written to `out`
    /// (returning its length).
    fn apply(
        &mut self,
        request: &Request<'_>,
        owner: LockOwner,
        undo: &mut Undo,
        out: &mut [u8],
    ) -> Result<usize, Refusal> {
        undo.count = 0;
        // Checked before any word is taken: a result that cannot be written
        // must not leave words locked (the link sizes `out` to fit).
        if out.len() < request.result_len() {
            return Err(Refusal::Malformed);
        }
        match *request {
            Request::Read {
                target,
                offset,
                len,
            } => {
                let (i, facts) = self.region_for(target, Permissions::READ)?;
                let range = facts.check(offset, usize::from(len))?;
                self.try_lock(i, words(&range), owner)?;
                out[..2].copy_from_slice(&len.to_be_bytes());
                self.load(i, range.start, &mut out[2..2 + range.len()]);
                self.unlock(i, words(&range));
                Ok(2 + range.len())
            }
            Request::Write {
                target,
                offset,
                data,
            } => {
                let (i, facts) = self.region_for(target, Permissions::WRITE)?;
                let range = facts.check(offset, data.len())?;
                self.try_lock(i, words(&range), owner)?;
                undo.record(self, i, range.clone());
                self.save(i, range.start, data);
                self.keep(i, words(&range), owner);
                Ok(0)
            }
            Request::BilateralSwap {
                target,
                offset,
                data,
            } => {
                let need = Permissions::READ.union(Permissions::WRITE);
                let (i, facts) = self.region_for(target, need)?;
                let range = facts.check(offset, data.len())?;
                self.try_lock(i, words(&range), owner)?;
                undo.record(self, i, range.clone());
                out[..2].copy_from_slice(&(data.len() as u16).to_be_bytes());
                self.load(i, range.start, &mut out[2..2 + data.len()]);
                self.save(i, range.start, data);
                self.keep(i, words(&range), owner);
                Ok(2 + data.len())
            }
            // A message lands in a receive the link hands to `deliver`.
            Request::Send { .. } => Err(Refusal::NoReceive),
            Request::CompareAndSwap { target, offset, .. }
            | Request::FetchAdd { target, offset, .. }
            | Request::Swap { target, offset, .. } => {
                let (i, facts) = self.region_for(target, Permissions::ATOMIC)?;
                let range = atomic_word(&facts, offset)?;
                self.try_lock(i, words(&range), owner)?;
                let old = load_word(self, i, range.start);
                let new = match *request {
                    Request::CompareAndSwap { expected, new, .. } => {
                        (old == expected).then_some(new)
                    }
                    Request::FetchAdd { add, .. } => Some(old.wrapping_add(add)),
                    Request::Swap { new, .. } => Some(new),
                    _ => unreachable!("matched above"),
                };
                match new {
                    Some(new) => {
                        undo.record(self, i, range.clone());
                        self.save(i, range.start, &new.to_le_bytes());
                        self.keep(i, words(&range), owner);
                    }
                    None => self.unlock(i, words(&range)),
                }
                out[..8].copy_from_slice(&old.to_be_bytes());
                Ok(8)
            }
            Request::MultiWordCommit {
                target,
                count,
                words: listed,
            } => {
                let (i, facts) = self.region_for(target, Permissions::ATOMIC)?;
                let listed = &listed[..usize::from(count)];
                for w in listed {
                    atomic_word(&facts, w.offset)?;
                }
                let distinct = DistinctWords::of(listed.iter().map(|w| w.offset));
                self.try_lock_each(i, distinct.as_slice(), owner)?;
                let all_match = listed
                    .iter()
                    .all(|w| load_word(self, i, w.offset as usize) == w.expected);
                out[0] = u8::from(all_match);
                out[1] = count;
                for (k, w) in listed.iter().enumerate() {
                    out[2 + 8 * k..10 + 8 * k]
                        .copy_from_slice(&load_word(self, i, w.offset as usize).to_be_bytes());
                }
                for &at in distinct.as_slice() {
                    let at = at as usize;
                    if all_match {
                        undo.record(self, i, at..at + 8);
                    }
                }
                if all_match {
                    // In the order given: the last write to a repeated word wins.
                    for w in listed {
                        self.save(i, w.offset as usize, &w.new.to_le_bytes());
                    }
                }
                for &at in distinct.as_slice() {
                    let word = at as usize / 8..at as usize / 8 + 1;
                    if all_match {
                        self.keep(i, word, owner);
                    } else {
                        self.unlock(i, word);
                    }
                }
                Ok(2 + 8 * listed.len())
            }
        }
    }

    /// Makes a tentative transfer permanent: its words are released.
    fn commit(&mut self, undo: &Undo) {
        for range in undo.ranges() {
            self.unlock(undo.region, words(&range));
        }
    }

    /// Removes every trace of a tentative transfer: old bytes back, then the
    /// words released, so no other core sees a half-restored transfer.
    fn reverse(&mut self, undo: &Undo) {
        let mut saved_at = 0;
        for range in undo.ranges() {
            let len = range.len();
            self.save(
                undo.region,
                range.start,
                &undo.saved[saved_at..saved_at + len],
            );
            saved_at += len;
        }
        self.commit(undo);
    }

    /// Locks the local block of a READ or bilateral swap; it stays as it is until
    /// `unlock_local`.
    fn lock_local(
        &mut self,
        region: u16,
        offset: u32,
        len: u16,
        owner: LockOwner,
    ) -> Result<(), Refusal> {
        let (i, facts) = self.find(region).ok_or(Refusal::UnknownRegion)?;
        let range = facts.check(offset, usize::from(len))?;
        self.try_lock(i, words(&range), owner)?;
        self.keep(i, words(&range), owner);
        Ok(())
    }

    /// Releases a local block, writing `replacement` into it if given (the
    /// peer's block, once the swap commits).
    fn unlock_local(&mut self, region: u16, offset: u32, len: u16, replacement: Option<&[u8]>) {
        let (i, _) = self.find(region).expect("a locked region stays registered");
        let range = offset as usize..offset as usize + usize::from(len);
        if let Some(bytes) = replacement {
            self.save(i, range.start, bytes);
        }
        self.unlock(i, words(&range));
    }

    /// Writes a SEND's message tentatively into the start of a receive
    /// the application posted (`region[offset..+len]`, its own memory: no
    /// key or permission applies): the words it changes are locked for
    /// `owner` and their old bytes kept in `undo`, as a WRITE's are.
    fn deliver(
        &mut self,
        receive: (u16, u32, u16),
        message: &[u8],
        owner: LockOwner,
        undo: &mut Undo,
    ) -> Result<(), Refusal> {
        undo.count = 0;
        let (region, offset, len) = receive;
        if message.len() > usize::from(len) {
            return Err(Refusal::ReceiveTooSmall);
        }
        if message.is_empty() {
            return Ok(());
        }
        let (i, facts) = self.find(region).ok_or(Refusal::UnknownRegion)?;
        let range = facts.check(offset, message.len())?;
        self.try_lock(i, words(&range), owner)?;
        undo.record(self, i, range.clone());
        self.save(i, range.start, message);
        self.keep(i, words(&range), owner);
        Ok(())
    }

    /// Validates a local block without locking it (at submission).
    fn check_local(&self, region: u16, offset: u32, len: u16) -> Result<(), Refusal> {
        let (_, facts) = self.find(region).ok_or(Refusal::UnknownRegion)?;
        facts.check(offset, usize::from(len)).map(|_| ())
    }
}

fn atomic_word(facts: &RegionFacts, offset: u32) -> Result<Range<usize>, Refusal> {
    let range = facts.check(offset, 8)?;
    if !offset.is_multiple_of(8) {
        return Err(Refusal::Misaligned);
    }
    Ok(range)
}

fn load_word<S: Store + ?Sized>(store: &S, region: usize, at: usize) -> u64 {
    let mut w = [0u8; 8];
    store.load(region, at, &mut w);
    u64::from_le_bytes(w)
}

/// A multi-word commit's word offsets, ascending and without repeats: cores
/// that take words in one order cannot wait on each other in a cycle.
struct DistinctWords {
    offsets: [u32; MAX_MCAS_WORDS],
    len: usize,
}

impl DistinctWords {
    fn of(offsets: impl Iterator<Item = u32>) -> DistinctWords {
        let mut d = DistinctWords {
            offsets: [0; MAX_MCAS_WORDS],
            len: 0,
        };
        for at in offsets {
            d.offsets[d.len] = at;
            d.len += 1;
        }
        let sorted = &mut d.offsets[..d.len];
        sorted.sort_unstable();
        let mut kept = 0;
        for k in 0..sorted.len() {
            if k == 0 || sorted[k] != sorted[kept - 1] {
                sorted[kept] = sorted[k];
                kept += 1;
            }
        }
        d.len = kept;
        d
    }

    fn as_slice(&self) -> &[u32] {
        &self.offsets[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verb::{McasWord, RegionRef};

    const R: RegionRef = RegionRef { id: 1, key: 7 };

    fn memory() -> Memory {
        let mut m = Memory::default();
        m.register(RegionSpec {
            id: 1,
            key: 7,
            len: 64,
            permissions: Permissions::ALL,
        })
        .unwrap();
        m
    }

    #[test]
    fn refusals_leave_no_effect() {
        let mut m = memory();
        let before = m.clone();
        let mut undo = Undo::default();
        let mut out = [0u8; 64];
        let bad = [
            (
                Request::FetchAdd {
                    target: RegionRef { id: 2, key: 7 },
                    offset: 0,
                    add: 1,
                },
                Refusal::UnknownRegion,
            ),
            (
                Request::FetchAdd {
                    target: RegionRef { id: 1, key: 8 },
                    offset: 0,
                    add: 1,
                },
                Refusal::BadKey,
            ),
            (
                Request::FetchAdd {
                    target: R,
                    offset: 64,
                    add: 1,
                },
                Refusal::OutOfBounds,
            ),
            (
                Request::FetchAdd {
                    target: R,
                    offset: 4,
                    add: 1,
                },
                Refusal::Misaligned,
            ),
            (
                Request::Write {
                    target: R,
                    offset: 60,
                    data: &[1; 8],
                },
                Refusal::OutOfBounds,
            ),
        ];
        for (req, why) in bad {
            assert_eq!(
                m.apply(&req, LockOwner::target(0, 0), &mut undo, &mut out),
                Err(why)
            );
            assert_eq!(m, before);
        }
    }

    #[test]
    fn reversal_restores_and_unlocks_commit_keeps() {
        let mut m = memory();
        let before = m.clone();
        let mut undo = Undo::default();
        let mut out = [0u8; 128];
        let req = Request::MultiWordCommit {
            target: R,
            count: 2,
            words: {
                let mut w = [McasWord::default(); MAX_MCAS_WORDS];
                w[0] = McasWord {
                    offset: 0,
                    expected: 0,
                    new: 5,
                };
                w[1] = McasWord {
                    offset: 0,
                    expected: 0,
                    new: 6,
                };
                w
            },
        };
        m.apply(&req, LockOwner::target(0, 1), &mut undo, &mut out)
            .unwrap();
        assert_eq!(
            m.bytes(1).unwrap()[0],
            6,
            "last write to a repeated word wins"
        );
        let read = Request::Read {
            target: R,
            offset: 0,
            len: 8,
        };
        let mut other = Undo::default();
        assert_eq!(
            m.apply(&read, LockOwner::target(0, 2), &mut other, &mut out),
            Err(Refusal::Locked)
        );
        m.reverse(&undo);
        assert_eq!(m, before);
        m.apply(&req, LockOwner::target(0, 1), &mut undo, &mut out)
            .unwrap();
        m.commit(&undo);
        assert_eq!(m.locked_words(), 0);
        assert_eq!(m.bytes(1).unwrap()[0], 6);
    }

    #[test]
    fn registering_a_region_later_never_moves_a_transfer_to_another() {
        // Regression: registering kept regions sorted by id, so a region
        // with a smaller id, registered while a transfer was tentative,
        // shifted the index its undo record kept.
        let mut m = Memory::default();
        let spec = |id| RegionSpec {
            id,
            key: 7,
            len: 64,
            permissions: Permissions::ALL,
        };
        m.register(spec(5)).unwrap();
        let mut undo = Undo::default();
        let write = Request::Write {
            target: RegionRef { id: 5, key: 7 },
            offset: 0,
            data: &[9; 8],
        };
        m.apply(&write, LockOwner::target(0, 1), &mut undo, &mut [])
            .unwrap();
        m.register(spec(1)).unwrap();
        m.reverse(&undo);
        assert_eq!(m.locked_words(), 0);
        assert!(m.bytes(5).unwrap().iter().all(|&b| b == 0));
        assert!(m.bytes(1).unwrap().iter().all(|&b| b == 0));
    }

    #[test]
    fn a_result_with_no_room_is_refused_before_any_word_is_taken() {
        let mut m = memory();
        let mut undo = Undo::default();
        let read = Request::Read {
            target: R,
            offset: 0,
            len: 16,
        };
        let mut small = [0u8; 10];
        assert_eq!(
            m.apply(&read, LockOwner::target(0, 1), &mut undo, &mut small),
            Err(Refusal::Malformed)
        );
        assert_eq!(m.locked_words(), 0);
    }
}
