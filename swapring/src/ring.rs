//! A bounded single-producer single-consumer ring of fixed-size records,
//! laid out in shared words so two processes (or loom threads) can use it.
//!
//! Indexes run freely (never wrap in practice: 2^64 records). The producer
//! writes records with relaxed stores and makes them visible with one Release
//! store of `tail`; the consumer reads `tail` with Acquire, copies records,
//! and returns space with one Release store of `head`. A full ring refuses
//! the record and counts the refusal: nothing is dropped silently.
//!
//! Records are read and written word by word through atomics rather than as
//! plain memory: the two sides are separate processes, and atomics keep every
//! access defined without any `unsafe` here.

use crate::sync::{AtomicU64, Ordering};

/// Words in one record: 64 bytes, one OAE frame, one cache line.
pub const RECORD_WORDS: usize = 8;
/// Control words ahead of each ring's records; each index gets its own
/// cache line so producer and consumer do not false-share.
pub const RING_CTL_WORDS: usize = 32;
const HEAD: usize = 0;
const TAIL: usize = 8;
const DOORBELL: usize = 16;
const REFUSED_FULL: usize = 24;

/// One record, as words.
pub type Record = [u64; RECORD_WORDS];

/// Words a ring of `capacity` records occupies.
pub const fn ring_words(capacity: usize) -> usize {
    RING_CTL_WORDS + capacity * RECORD_WORDS
}

/// The ring refused a record: it holds `capacity` unconsumed records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("ring full ({capacity} records unconsumed)")]
pub struct RingFull {
    pub capacity: u64,
}

/// A view of one ring's words.
#[derive(Clone, Copy)]
pub struct RingView<'a> {
    ctl: &'a [AtomicU64],
    records: &'a [AtomicU64],
    capacity: u64,
}

impl<'a> RingView<'a> {
    /// `words` must be exactly [`ring_words`]`(capacity)` long.
    pub fn new(words: &'a [AtomicU64], capacity: usize) -> Self {
        assert!(capacity > 0, "a ring needs at least one record");
        assert_eq!(
            words.len(),
            ring_words(capacity),
            "ring words do not match its capacity"
        );
        let (ctl, records) = words.split_at(RING_CTL_WORDS);
        RingView {
            ctl,
            records,
            capacity: capacity as u64,
        }
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }
    /// Records consumed so far (as last published by the consumer).
    pub fn head(&self) -> u64 {
        self.ctl[HEAD].load(Ordering::Acquire)
    }
    /// Records published so far.
    pub fn tail(&self) -> u64 {
        self.ctl[TAIL].load(Ordering::Acquire)
    }
    /// How many times the producer rang the doorbell (one per publish).
    pub fn doorbells(&self) -> u64 {
        self.ctl[DOORBELL].load(Ordering::Acquire)
    }
    /// How many records the ring refused because it was full.
    pub fn refused_full(&self) -> u64 {
        self.ctl[REFUSED_FULL].load(Ordering::Relaxed)
    }

    fn record(&self, index: u64) -> &'a [AtomicU64] {
        let at = (index % self.capacity) as usize * RECORD_WORDS;
        &self.records[at..at + RECORD_WORDS]
    }

    /// The producer's handle. Only one may exist across both processes.
    pub fn producer(self) -> Producer<'a> {
        let tail = self.ctl[TAIL].load(Ordering::Acquire);
        Producer {
            ring: self,
            staged_tail: tail,
            published_tail: tail,
            head_seen: self.head(),
        }
    }

    /// The consumer's handle. Only one may exist across both processes.
    pub fn consumer(self) -> Consumer<'a> {
        let head = self.head();
        Consumer {
            ring: self,
            head,
            tail_seen: head,
            bad_tails: 0,
        }
    }
}

/// Writes records; they become visible only at [`Producer::publish`].
pub struct Producer<'a> {
    ring: RingView<'a>,
    staged_tail: u64,
    published_tail: u64,
    /// The consumer's head as last read: re-read only when the ring looks
    /// full, so the common case touches no line the consumer writes.
    head_seen: u64,
}

impl<'a> Producer<'a> {
    /// Writes `record` after the staged ones, not yet visible.
    pub fn stage(&mut self, record: &Record) -> Result<(), RingFull> {
        if self.in_flight() >= self.ring.capacity {
            self.head_seen = self.ring.head();
            if self.in_flight() >= self.ring.capacity {
                self.ring.ctl[REFUSED_FULL].fetch_add(1, Ordering::Relaxed);
                return Err(RingFull {
                    capacity: self.ring.capacity,
                });
            }
        }
        for (slot, word) in self.ring.record(self.staged_tail).iter().zip(record) {
            slot.store(*word, Ordering::Relaxed);
        }
        self.staged_tail += 1;
        Ok(())
    }

    /// Records that can be staged now without refusal.
    pub fn room(&mut self) -> u64 {
        self.head_seen = self.ring.head();
        self.ring.capacity.saturating_sub(self.in_flight())
    }

    /// Records staged and not yet consumed. The head is the peer's word: one
    /// ahead of our tail (a corrupt peer) wraps to a huge count, so the ring
    /// reads as full rather than overwriting what it has not consumed.
    fn in_flight(&self) -> u64 {
        self.staged_tail.wrapping_sub(self.head_seen)
    }

    /// Makes every staged record visible at once and rings the doorbell;
    /// returns how many were published (0: nothing was staged, no doorbell).
    pub fn publish(&mut self) -> u64 {
        let count = self.staged_tail - self.published_tail;
        if count == 0 {
            return 0;
        }
        self.ring.ctl[TAIL].store(self.staged_tail, Ordering::Release);
        self.ring.ctl[DOORBELL].fetch_add(1, Ordering::Release);
        self.published_tail = self.staged_tail;
        count
    }

    /// Staged but not yet published.
    pub fn staged(&self) -> u64 {
        self.staged_tail - self.published_tail
    }

    pub fn view(&self) -> RingView<'a> {
        self.ring
    }
}

/// Reads records in order, each exactly once.
pub struct Consumer<'a> {
    ring: RingView<'a>,
    head: u64,
    tail_seen: u64,
    bad_tails: u64,
}

impl<'a> Consumer<'a> {
    /// Reads the producer's tail; returns how many records are ready. The
    /// tail is the peer's word: one behind the head, or more than a ring
    /// ahead of it, cannot come from a producer that follows the protocol,
    /// so nothing is taken (a wrapped difference would have the consumer
    /// read old records as new without end) and it is counted
    /// ([`Consumer::bad_tails`]).
    pub fn refresh(&mut self) -> u64 {
        let tail = self.ring.tail();
        match tail.checked_sub(self.head) {
            Some(ready) if ready <= self.ring.capacity => {
                self.tail_seen = tail;
                ready
            }
            _ => {
                self.tail_seen = self.head;
                self.bad_tails += 1;
                0
            }
        }
    }

    /// Refreshes that found the producer's tail behind the head or more
    /// than a ring ahead of it.
    pub fn bad_tails(&self) -> u64 {
        self.bad_tails
    }

    /// Records known ready without reading the tail again.
    pub fn ready(&self) -> u64 {
        self.tail_seen - self.head
    }

    /// Copies the next ready record (as of the last [`Consumer::refresh`])
    /// into `out`; its space is returned at [`Consumer::release`].
    pub fn take(&mut self, out: &mut Record) -> bool {
        if self.head == self.tail_seen {
            return false;
        }
        for (word, slot) in out.iter_mut().zip(self.ring.record(self.head)) {
            *word = slot.load(Ordering::Relaxed);
        }
        self.head += 1;
        true
    }

    /// Gives the space of every taken record back to the producer.
    pub fn release(&mut self) {
        self.ring.ctl[HEAD].store(self.head, Ordering::Release);
    }

    pub fn view(&self) -> RingView<'a> {
        self.ring
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn ring_of(capacity: usize) -> Vec<AtomicU64> {
        (0..ring_words(capacity))
            .map(|_| AtomicU64::new(0))
            .collect()
    }

    /// A producer that scribbles its tail behind the head, or more than a
    /// ring ahead, gets nothing taken: no record is read twice or made up.
    #[test]
    fn a_scribbled_tail_makes_nothing_ready_and_is_counted() {
        let words = ring_of(4);
        let view = RingView::new(&words, 4);
        let mut producer = view.producer();
        for i in 0..3 {
            producer.stage(&[i; RECORD_WORDS]).unwrap();
        }
        producer.publish();
        let mut consumer = view.consumer();
        assert_eq!(consumer.refresh(), 3);
        let mut r = [0; RECORD_WORDS];
        while consumer.take(&mut r) {}
        consumer.release();
        // Behind the head: a wrapped difference would be about 2^64.
        words[TAIL].store(1, Ordering::Release);
        assert_eq!(consumer.refresh(), 0);
        assert!(!consumer.take(&mut r));
        // More than a ring ahead.
        words[TAIL].store(3 + 5, Ordering::Release);
        assert_eq!(consumer.refresh(), 0);
        assert!(!consumer.take(&mut r));
        assert_eq!(consumer.bad_tails(), 2);
        // A whole ring ahead is possible, and taken.
        words[TAIL].store(3 + 4, Ordering::Release);
        assert_eq!(consumer.refresh(), 4);
        assert_eq!(consumer.bad_tails(), 2);
    }
}
