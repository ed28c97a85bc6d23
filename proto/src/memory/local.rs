//! One node's registered memory in plain arrays: the store of the simulator,
//! the model checker (which clones and hashes whole nodes) and the RC model.

use core::ops::Range;

use super::{LockOwner, RegionFacts, RegionSpec, RegisterError, Store, zeroed};
use crate::verb::Refusal;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Region {
    spec: RegionSpec,
    data: Vec<u8>,
    /// One entry per 8-byte word: the holder, or free.
    locks: Vec<u32>,
}

/// All registered regions of a node, owned by it alone, in the order they
/// were registered (a region's index never changes: undo records keep it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Memory {
    regions: Vec<Region>,
}

impl Memory {
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
        // A node has a handful of regions: a scan beats a map.
        self.regions.iter().position(|r| r.spec.id == id)
    }
}

impl Store for Memory {
    fn register(&mut self, spec: RegionSpec) -> Result<(), RegisterError> {
        spec.check()?;
        if self.index(spec.id).is_some() {
            return Err(RegisterError::DuplicateId(spec.id));
        }
        self.regions.push(Region {
            spec,
            data: zeroed(spec.len as usize, || 0, spec.footprint())?,
            locks: zeroed(spec.len as usize / 8, || LockOwner::FREE, spec.footprint())?,
        });
        Ok(())
    }

    fn find(&self, id: u16) -> Option<(usize, RegionFacts)> {
        let i = self.index(id)?;
        Some((i, self.regions[i].spec.facts()))
    }

    fn region_specs(&self) -> Vec<RegionSpec> {
        let mut specs: Vec<RegionSpec> = self.regions.iter().map(|r| r.spec).collect();
        specs.sort_by_key(|s| s.id);
        specs
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
