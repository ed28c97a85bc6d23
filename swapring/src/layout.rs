//! Where everything sits in the shared region, in 64-bit words.
//!
//! ```text
//! word 0        header (64 words): identity, geometry, cost model, flags
//! word 32       host side block (16 words): liveness counter, pid, stats
//! word 48       IPU side block  (16 words)
//! word 64       message ring     host -> IPU   (events / requests)
//!               decision ring    IPU -> host   (decisions)
//!               verb request ring   host -> IPU
//!               verb response ring  IPU -> host
//!               swap slots       (bilateral mode), slot_words(batch) each
//! ```

use crate::bilateral::{MAX_SLOT_BATCH, slot_words};
use crate::ring::{RECORD_WORDS, ring_words};

/// "OAESWAP1" read as a little-endian word.
pub const MAGIC: u64 = u64::from_le_bytes(*b"OAESWAP1");
/// Bumped whenever the layout or a protocol changes.
pub const VERSION: u64 = 2;
pub const HEADER_WORDS: usize = 64;
pub const HEADER_BYTES: usize = HEADER_WORDS * 8;
pub const RECORD_BYTES: u64 = (RECORD_WORDS * 8) as u64;
/// Largest geometry `open` accepts; keeps a corrupt header from asking for
/// an absurd mapping.
pub const MAX_RING_CAPACITY: u64 = 1 << 20;
pub const MAX_SLOTS: u64 = 1 << 16;

pub(crate) const W_MAGIC: usize = 0;
pub(crate) const W_VERSION: usize = 1;
pub(crate) const W_TOTAL_BYTES: usize = 2;
pub(crate) const W_MODE: usize = 3;
pub(crate) const W_RING_CAPACITY: usize = 4;
pub(crate) const W_RECORD_BYTES: usize = 5;
pub(crate) const W_SLOTS: usize = 6;
pub(crate) const W_FLAGS: usize = 7;
pub(crate) const W_COST: usize = 8; // 4 words
pub(crate) const W_SLOT_BATCH: usize = 12;
/// The host process that holds the verb rings (FITO host rings).
pub(crate) const W_RING_OWNER: usize = 13;
pub(crate) const W_HOST_SIDE: usize = 32;
pub(crate) const W_IPU_SIDE: usize = 48;
pub const SIDE_WORDS: usize = 16;

/// How the two sides talk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Event forward, decision back, stale decisions aborted (Wave/ghOSt).
    Fito = 1,
    /// Each decision is exchanged atomically against the state it was made on.
    Bilateral = 2,
}

impl Mode {
    pub fn from_word(w: u64) -> Option<Mode> {
        match w {
            1 => Some(Mode::Fito),
            2 => Some(Mode::Bilateral),
            _ => None,
        }
    }
}

/// Sizes of the rings and slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Records in each of the four rings.
    pub ring_capacity: u64,
    /// Swap slots (used in bilateral mode; may be 0 in FITO mode).
    pub slots: u64,
    /// Records each half of a slot carries: one exchange moves a batch of
    /// up to this many each way.
    pub slot_batch: u64,
}

impl Default for Geometry {
    fn default() -> Self {
        Geometry {
            ring_capacity: 256,
            slots: 16,
            slot_batch: 1,
        }
    }
}

/// Word offsets of each structure for a geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub rings: [usize; 4],
    pub ring_words: usize,
    pub slots: usize,
    pub total_words: usize,
}

pub const RING_MESSAGES: usize = 0;
pub const RING_DECISIONS: usize = 1;
pub const RING_VERB_REQUESTS: usize = 2;
pub const RING_VERB_RESPONSES: usize = 3;

impl Geometry {
    /// Offsets, or `None` when the geometry is out of bounds.
    pub fn layout(&self) -> Option<Layout> {
        if self.ring_capacity == 0
            || self.ring_capacity > MAX_RING_CAPACITY
            || self.slots > MAX_SLOTS
            || self.slot_batch == 0
            || self.slot_batch > MAX_SLOT_BATCH
        {
            return None;
        }
        let per_ring = ring_words(self.ring_capacity as usize);
        let first = HEADER_WORDS;
        let rings = [
            first,
            first + per_ring,
            first + 2 * per_ring,
            first + 3 * per_ring,
        ];
        let slots = first + 4 * per_ring;
        let total_words = slots + self.slots as usize * slot_words(self.slot_batch as usize);
        Some(Layout {
            rings,
            ring_words: per_ring,
            slots,
            total_words,
        })
    }

    /// Bytes a region of this geometry needs.
    pub fn bytes(&self) -> Option<u64> {
        self.layout().map(|l| (l.total_words * 8) as u64)
    }
}

/// Flag bits in the header: the FITO mitigations in force, so both sides
/// run the same protocol variant.
pub(crate) const FLAG_WRITE_BATCHING: u64 = 1 << 0;
pub(crate) const FLAG_PRESTAGED: u64 = 1 << 1;
pub(crate) const FLAG_PREFETCH: u64 = 1 << 2;
pub(crate) const FLAG_HOST_POLLS: u64 = 1 << 3;
