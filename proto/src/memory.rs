//! Registered memory and the verbs engine: tentative application with an undo
//! record, word locks held until commit or reversal, and refusal with no
//! effect for anything outside what a region allows.

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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionSpec {
    pub id: u16,
    pub key: u32,
    /// Bytes; a positive multiple of 8.
    pub len: u32,
    pub permissions: Permissions,
}

/// Why a region could not be registered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegisterError {
    DuplicateId(u16),
    /// Length zero or not a multiple of 8.
    BadLength(u32),
}

impl core::fmt::Display for RegisterError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RegisterError::DuplicateId(id) => write!(f, "region {id} is already registered"),
            RegisterError::BadLength(len) => write!(
                f,
                "region length {len} is not a positive multiple of 8 bytes"
            ),
        }
    }
}

/// Who holds a word lock: a slot of a link, on the target or initiator side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LockOwner(u32);

impl LockOwner {
    const FREE: u32 = 0;

    /// A tentative transfer being applied here for a peer.
    pub fn target(link: u16, slot: u16) -> LockOwner {
        LockOwner(1 + ((u32::from(link) << 17) | u32::from(slot)))
    }

    /// The local block of a bilateral swap this node initiated.
    pub fn initiator(link: u16, slot: u16) -> LockOwner {
        LockOwner(1 + ((u32::from(link) << 17) | (1 << 16) | u32::from(slot)))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Region {
    id: u16,
    key: u32,
    permissions: Permissions,
    data: Vec<u8>,
    /// One entry per 8-byte word.
    locks: Vec<u32>,
}

impl Region {
    fn check(&self, offset: u32, len: usize) -> Result<core::ops::Range<usize>, Refusal> {
        let start = offset as usize;
        let end = start.checked_add(len).ok_or(Refusal::OutOfBounds)?;
        if len == 0 || end > self.data.len() {
            return Err(Refusal::OutOfBounds);
        }
        Ok(start..end)
    }

    fn words(range: &core::ops::Range<usize>) -> core::ops::Range<usize> {
        range.start / 8..range.end.div_ceil(8)
    }

    fn unlocked(&self, range: &core::ops::Range<usize>) -> Result<(), Refusal> {
        if self.locks[Region::words(range)]
            .iter()
            .any(|&l| l != LockOwner::FREE)
        {
            return Err(Refusal::Locked);
        }
        Ok(())
    }

    fn set_lock(&mut self, range: &core::ops::Range<usize>, owner: u32) {
        for l in &mut self.locks[Region::words(range)] {
            *l = owner;
        }
    }

    fn word(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.data[at..at + 8].try_into().expect("eight bytes"))
    }

    fn set_word(&mut self, at: usize, v: u64) {
        self.data[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }
}

/// The trace a tentative transfer leaves: which byte ranges it locked and
/// changed, and their bytes from before. Reversal puts them back.
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

    fn record(&mut self, region: &Region, region_index: usize, range: core::ops::Range<usize>) {
        debug_assert!(self.count == 0 || self.region == region_index);
        self.region = region_index;
        let saved_at: usize = self.ranges[..usize::from(self.count)]
            .iter()
            .map(|r| usize::from(r.1))
            .sum();
        let len = range.len();
        self.saved[saved_at..saved_at + len].copy_from_slice(&region.data[range.clone()]);
        self.ranges[usize::from(self.count)] = (range.start as u32, len as u16);
        self.count += 1;
    }
}

/// All registered regions of a node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Memory {
    regions: Vec<Region>,
}

impl Memory {
    pub fn register(&mut self, spec: RegionSpec) -> Result<(), RegisterError> {
        if spec.len == 0 || !spec.len.is_multiple_of(8) {
            return Err(RegisterError::BadLength(spec.len));
        }
        let at = match self.regions.binary_search_by_key(&spec.id, |r| r.id) {
            Ok(_) => return Err(RegisterError::DuplicateId(spec.id)),
            Err(at) => at,
        };
        self.regions.insert(
            at,
            Region {
                id: spec.id,
                key: spec.key,
                permissions: spec.permissions,
                data: vec![0; spec.len as usize],
                locks: vec![LockOwner::FREE; spec.len as usize / 8],
            },
        );
        Ok(())
    }

    /// Registered regions: id, key, length, permissions.
    pub fn regions(&self) -> impl Iterator<Item = RegionSpec> + '_ {
        self.regions.iter().map(|r| RegionSpec {
            id: r.id,
            key: r.key,
            len: r.data.len() as u32,
            permissions: r.permissions,
        })
    }

    /// A region's current bytes (tentative changes included).
    pub fn bytes(&self, id: u16) -> Option<&[u8]> {
        self.index(id).map(|i| self.regions[i].data.as_slice())
    }

    /// Number of locked words across all regions.
    pub fn locked_words(&self) -> usize {
        self.regions
            .iter()
            .map(|r| r.locks.iter().filter(|&&l| l != LockOwner::FREE).count())
            .sum()
    }

    fn index(&self, id: u16) -> Option<usize> {
        self.regions.binary_search_by_key(&id, |r| r.id).ok()
    }

    fn region_for(
        &self,
        target: crate::verb::RegionRef,
        need: Permissions,
    ) -> Result<usize, Refusal> {
        let i = self.index(target.id).ok_or(Refusal::UnknownRegion)?;
        let r = &self.regions[i];
        if r.key != target.key {
            return Err(Refusal::BadKey);
        }
        if !r.permissions.contains(need) {
            return Err(Refusal::Forbidden);
        }
        Ok(i)
    }

    /// Applies `request` tentatively for `owner`: checks everything first, so
    /// a refusal changes nothing; on success the changed words are locked,
    /// their old bytes are in `undo`, and the result is written to `out`
    /// (returning its length).
    pub fn apply(
        &mut self,
        request: &Request<'_>,
        owner: LockOwner,
        undo: &mut Undo,
        out: &mut [u8],
    ) -> Result<usize, Refusal> {
        undo.count = 0;
        match *request {
            Request::Read {
                target,
                offset,
                len,
            } => {
                let i = self.region_for(target, Permissions::READ)?;
                let r = &self.regions[i];
                let range = r.check(offset, usize::from(len))?;
                r.unlocked(&range)?;
                out[..2].copy_from_slice(&len.to_be_bytes());
                out[2..2 + range.len()].copy_from_slice(&r.data[range.clone()]);
                Ok(2 + range.len())
            }
            Request::Write {
                target,
                offset,
                data,
            } => {
                let i = self.region_for(target, Permissions::WRITE)?;
                let range = self.regions[i].check(offset, data.len())?;
                self.regions[i].unlocked(&range)?;
                let r = &mut self.regions[i];
                undo.record(r, i, range.clone());
                r.data[range.clone()].copy_from_slice(data);
                r.set_lock(&range, owner.0);
                Ok(0)
            }
            Request::BilateralSwap {
                target,
                offset,
                data,
            } => {
                let i = self.region_for(target, Permissions::READ.union(Permissions::WRITE))?;
                let range = self.regions[i].check(offset, data.len())?;
                self.regions[i].unlocked(&range)?;
                let r = &mut self.regions[i];
                undo.record(r, i, range.clone());
                out[..2].copy_from_slice(&(data.len() as u16).to_be_bytes());
                out[2..2 + data.len()].copy_from_slice(&r.data[range.clone()]);
                r.data[range.clone()].copy_from_slice(data);
                r.set_lock(&range, owner.0);
                Ok(2 + data.len())
            }
            Request::CompareAndSwap { target, offset, .. }
            | Request::FetchAdd { target, offset, .. }
            | Request::Swap { target, offset, .. } => {
                let i = self.region_for(target, Permissions::ATOMIC)?;
                let range = self.atomic_word(i, offset)?;
                let r = &mut self.regions[i];
                let old = r.word(range.start);
                let new = match *request {
                    Request::CompareAndSwap { expected, new, .. } => {
                        (old == expected).then_some(new)
                    }
                    Request::FetchAdd { add, .. } => Some(old.wrapping_add(add)),
                    Request::Swap { new, .. } => Some(new),
                    _ => unreachable!("matched above"),
                };
                if let Some(new) = new {
                    undo.record(r, i, range.clone());
                    r.set_word(range.start, new);
                    r.set_lock(&range, owner.0);
                }
                out[..8].copy_from_slice(&old.to_be_bytes());
                Ok(8)
            }
            Request::MultiWordCommit {
                target,
                count,
                words,
            } => {
                let i = self.region_for(target, Permissions::ATOMIC)?;
                let words = &words[..usize::from(count)];
                for w in words {
                    self.atomic_word(i, w.offset)?;
                }
                let r = &mut self.regions[i];
                let all_match = words
                    .iter()
                    .all(|w| r.word(w.offset as usize) == w.expected);
                out[0] = u8::from(all_match);
                out[1] = count;
                for (k, w) in words.iter().enumerate() {
                    out[2 + 8 * k..10 + 8 * k]
                        .copy_from_slice(&r.word(w.offset as usize).to_be_bytes());
                }
                if all_match {
                    for w in words {
                        let at = w.offset as usize;
                        undo.record(r, i, at..at + 8);
                        r.set_word(at, w.new);
                        r.set_lock(&(at..at + 8), owner.0);
                    }
                }
                Ok(2 + 8 * words.len())
            }
        }
    }

    fn atomic_word(&self, region: usize, offset: u32) -> Result<core::ops::Range<usize>, Refusal> {
        let r = &self.regions[region];
        let range = r.check(offset, 8)?;
        if !offset.is_multiple_of(8) {
            return Err(Refusal::Misaligned);
        }
        r.unlocked(&range)?;
        Ok(range)
    }

    /// Makes a tentative transfer permanent: its words are released.
    pub fn commit(&mut self, undo: &Undo) {
        if undo.is_empty() {
            return;
        }
        let r = &mut self.regions[undo.region];
        for &(offset, len) in &undo.ranges[..usize::from(undo.count)] {
            let range = offset as usize..offset as usize + usize::from(len);
            r.set_lock(&range, LockOwner::FREE);
        }
    }

    /// Removes every trace of a tentative transfer: old bytes back, in reverse
    /// order of recording so repeated words end at their first saved value.
    pub fn reverse(&mut self, undo: &Undo) {
        if undo.is_empty() {
            return;
        }
        let r = &mut self.regions[undo.region];
        let ranges = &undo.ranges[..usize::from(undo.count)];
        let mut end: usize = ranges.iter().map(|r| usize::from(r.1)).sum();
        for &(offset, len) in ranges.iter().rev() {
            let len = usize::from(len);
            let range = offset as usize..offset as usize + len;
            r.data[range.clone()].copy_from_slice(&undo.saved[end - len..end]);
            r.set_lock(&range, LockOwner::FREE);
            end -= len;
        }
    }

    /// Locks a local block for a bilateral swap; it stays as it is until
    /// `unlock_local`.
    pub fn lock_local(
        &mut self,
        region: u16,
        offset: u32,
        len: u16,
        owner: LockOwner,
    ) -> Result<(), Refusal> {
        let i = self.index(region).ok_or(Refusal::UnknownRegion)?;
        let range = self.regions[i].check(offset, usize::from(len))?;
        self.regions[i].unlocked(&range)?;
        self.regions[i].set_lock(&range, owner.0);
        Ok(())
    }

    /// Releases a local block, writing `replacement` into it if given (the
    /// peer's block, once the swap commits).
    pub fn unlock_local(&mut self, region: u16, offset: u32, len: u16, replacement: Option<&[u8]>) {
        let i = self.index(region).expect("locked region stays registered");
        let r = &mut self.regions[i];
        let range = offset as usize..offset as usize + usize::from(len);
        if let Some(bytes) = replacement {
            r.data[range.clone()].copy_from_slice(bytes);
        }
        r.set_lock(&range, LockOwner::FREE);
    }

    /// Validates a local block without locking it (at submission).
    pub fn check_local(&self, region: u16, offset: u32, len: u16) -> Result<(), Refusal> {
        let i = self.index(region).ok_or(Refusal::UnknownRegion)?;
        self.regions[i].check(offset, usize::from(len)).map(|_| ())
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
}
