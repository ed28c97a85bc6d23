//! What a verb's bytes cost in copies. The core builds frames in the
//! buffer it is given and reads them where they lie, so a block's bytes
//! move between memory and frames only through the store's `load` and
//! `save`: counting those counts every copy of them. A 64-byte READ copies
//! 64 bytes at the target (its region into the echo) and 64 at the
//! initiator (the echo into the local block): no more than the frame
//! carries, on either side.

mod common;

use std::cell::Cell;
use std::ops::Range;

use common::{R, pump};
use oae_proto::memory::{LockOwner, RegionFacts};
use oae_proto::verb::Refusal;
use oae_proto::*;

/// A store that counts the bytes it copies in and out.
#[derive(Default)]
struct Counting {
    inner: Memory,
    loaded: Cell<u64>,
    saved: u64,
}

impl Store for Counting {
    fn register(&mut self, spec: RegionSpec) -> Result<(), RegisterError> {
        self.inner.register(spec)
    }
    fn find(&self, id: u16) -> Option<(usize, RegionFacts)> {
        self.inner.find(id)
    }
    fn region_specs(&self) -> Vec<RegionSpec> {
        self.inner.region_specs()
    }
    fn try_lock(
        &mut self,
        region: usize,
        words: Range<usize>,
        owner: LockOwner,
    ) -> Result<(), Refusal> {
        self.inner.try_lock(region, words, owner)
    }
    fn keep(&mut self, region: usize, words: Range<usize>, owner: LockOwner) {
        self.inner.keep(region, words, owner);
    }
    fn unlock(&mut self, region: usize, words: Range<usize>) {
        self.inner.unlock(region, words);
    }
    fn load(&self, region: usize, at: usize, out: &mut [u8]) {
        self.loaded.set(self.loaded.get() + out.len() as u64);
        self.inner.load(region, at, out);
    }
    fn save(&mut self, region: usize, at: usize, bytes: &[u8]) {
        self.saved += bytes.len() as u64;
        self.inner.save(region, at, bytes);
    }
    fn locked_words(&self) -> usize {
        self.inner.locked_words()
    }
    fn snapshot(&self, id: u16) -> Option<Vec<u8>> {
        self.inner.snapshot(id)
    }
}

fn counted_pair() -> [Node<NoObserver, Counting>; 2] {
    [0xA, 0xB].map(|id| {
        let mut n = Node::with_memory(id, 1, NoObserver, Counting::default());
        n.add_link(LinkConfig::default()).unwrap();
        n.register(RegionSpec {
            id: R.id,
            key: R.key,
            len: 256,
            permissions: Permissions::ALL,
        })
        .unwrap();
        n
    })
}

/// Bytes each node's store copied: (loaded, saved).
fn copied(n: &[Node<NoObserver, Counting>; 2]) -> [(u64, u64); 2] {
    [0, 1].map(|i| (n[i].memory().loaded.get(), n[i].memory().saved))
}

#[test]
fn a_64_byte_read_copies_no_more_than_its_frame_carries_on_either_side() {
    let mut n = counted_pair();
    pump(&mut n, 0);
    let before = copied(&n);
    let read = Verb::Read {
        target: R,
        offset: 64,
        local_region: R.id,
        local_offset: 128,
        len: 64,
    };
    n[0].submit(0, VerbId(1), &read).unwrap();
    pump(&mut n, 10);
    let done = std::iter::from_fn(|| n[0].poll_event())
        .find(|e| matches!(e, Event::Completed { .. }))
        .expect("the READ completes");
    assert!(
        matches!(
            done,
            Event::Completed {
                result: Ok(Output::Read { len: 64 }),
                ..
            }
        ),
        "{done:?}"
    );
    let after = copied(&n);
    let delta = |i: usize| (after[i].0 - before[i].0, after[i].1 - before[i].1);
    assert_eq!(
        delta(1),
        (64, 0),
        "the target: its region into the echo, once"
    );
    assert_eq!(
        delta(0),
        (0, 64),
        "the initiator: the echo into its local block, once"
    );
}
