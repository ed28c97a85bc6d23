//! One node's registered memory in plain arrays: the store of the simulator,
//! the model checker (which clones and hashes whole nodes) and the RC model.

use core::ops::Range;

use super::{LockOwner, RegionFacts, RegionSpec, RegisterError, Store};
use crate::verb::Refusal;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Region {
    spec: RegionSpec,
    data: Vec<u8>,
    /// One entry per 8-byte word: the holder, or free.
    locks: Vec<u32>,
}

/// All registered regions of a node, owned by it alone.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Memory {
    regions: Vec<Region>,
}

impl Memory {
    /// Registered regions: id, key, length, permissions.
    pub fn regions(&self) -> impl Iterator<Item = RegionSpec> + '_ {
        self.regions.iter().map(|r| r.spec)
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
        self.regions.binary_search_by_key(&id, |r| r.spec.id).ok()
    }
}

impl Store for Memory {
    fn register(&mut self, spec: RegionSpec) -> Result<(), RegisterError> {
        spec.check()?;
        let at = match self.regions.binary_search_by_key(&spec.id, |r| r.spec.id) {
            Ok(_) => return Err(RegisterError::DuplicateId(spec.id)),
            Err(at) => at,
        };
        self.regions.insert(
            at,
            Region {
                spec,
                data: vec![0; spec.len as usize],
                locks: vec![LockOwner::FREE; spec.len as usize / 8],
            },
        );
        Ok(())
    }

    fn find(&self, id: u16) -> Option<(usize, RegionFacts)> {
        let i = self.index(id)?;
        Some((i, self.regions[i].spec.facts()))
    }

    fn region_specs(&self) -> Vec<RegionSpec> {
        self.regions().collect()
    }

    fn try_lock(
        &mut self,
        region: usize,
        words: Range<usize>,
        owner: LockOwner,
    ) -> Result<(), Refusal> {
        let locks = &mut self.regions[region].locks[words];
        if locks.iter().any(|&l| l != LockOwner::FREE) {
            return Err(Refusal::Locked);
        }
        locks.fill(owner.get());
        Ok(())
    }

    fn keep(&mut self, _region: usize, _words: Range<usize>, _owner: LockOwner) {
        // `try_lock` already wrote the owner: nobody else can see the words
        // between the two calls.
    }

    fn unlock(&mut self, region: usize, words: Range<usize>) {
        self.regions[region].locks[words].fill(LockOwner::FREE);
    }

    fn load(&self, region: usize, at: usize, out: &mut [u8]) {
        out.copy_from_slice(&self.regions[region].data[at..at + out.len()]);
    }

    fn save(&mut self, region: usize, at: usize, bytes: &[u8]) {
        self.regions[region].data[at..at + bytes.len()].copy_from_slice(bytes);
    }

    fn locked_words(&self) -> usize {
        Memory::locked_words(self)
    }

    fn snapshot(&self, id: u16) -> Option<Vec<u8>> {
        self.bytes(id).map(<[u8]>::to_vec)
    }

    fn with_block<R>(&self, region: u16, offset: u32, len: u16, f: impl FnOnce(&[u8]) -> R) -> R {
        let at = offset as usize;
        let bytes = self
            .bytes(region)
            .expect("a locked block's region stays registered");
        f(&bytes[at..at + usize::from(len)])
    }
}
