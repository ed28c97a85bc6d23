//! Liveness by counted interactions, never by a clock.
//!
//! Each side bumps its own interaction counter every time it polls or acts.
//! The other side notices a dead peer when it has itself polled `limit`
//! times in a row without seeing that counter move. No wall-clock timeout is
//! involved, so a slow-but-alive peer is only declared gone if it made no
//! move at all while the survivor made `limit` of its own. (The reference
//! drivers in `drive` also take a quiet peer whose process has ended as
//! gone: on a loaded machine `limit` polls that each yield the CPU can
//! take minutes.)

use crate::sync::{AtomicU64, Ordering};

const INTERACTIONS: usize = 0;
const PID: usize = 1;
const ATTACHED: usize = 2;
const STATS: usize = 4;
/// Free-form counters per side (see the `STAT_*` constants).
pub const SIDE_STATS: usize = 12;

pub const STAT_SENT: usize = 0;
pub const STAT_RECEIVED: usize = 1;
pub const STAT_REFUSED_FULL: usize = 2;
pub const STAT_COMMITTED: usize = 3;
pub const STAT_ABORTED: usize = 4;
pub const STAT_SWAPS: usize = 5;
pub const STAT_WITHDRAWN: usize = 6;
pub const STAT_LOST_RACES: usize = 7;
/// Non-posted reads this side was charged (emulated PCIe reads it waited on).
pub const STAT_NONPOSTED_READS: usize = 8;

/// One side's block of the header: written only by that side.
#[derive(Clone, Copy)]
pub struct SideBlock<'a> {
    words: &'a [AtomicU64],
    /// Local copy of the counter, so a bump is a plain store, not a
    /// read-modify-write on a shared line.
    count: u64,
}

impl<'a> SideBlock<'a> {
    pub fn new(words: &'a [AtomicU64]) -> Self {
        assert!(words.len() >= STATS + SIDE_STATS);
        let count = words[INTERACTIONS].load(Ordering::Relaxed);
        SideBlock { words, count }
    }

    /// Records one interaction of this side.
    #[inline]
    pub fn bump(&mut self) {
        self.count = self.count.wrapping_add(1);
        self.words[INTERACTIONS].store(self.count, Ordering::Release);
    }

    pub fn interactions(&self) -> u64 {
        self.words[INTERACTIONS].load(Ordering::Acquire)
    }

    pub fn attach(&self, pid: u32) {
        self.words[PID].store(u64::from(pid), Ordering::Relaxed);
        self.words[ATTACHED].fetch_add(1, Ordering::Release);
    }

    /// How many times a process attached as this side.
    pub fn attachments(&self) -> u64 {
        self.words[ATTACHED].load(Ordering::Acquire)
    }

    pub fn pid(&self) -> u32 {
        self.words[PID].load(Ordering::Relaxed) as u32
    }

    #[inline]
    pub fn add_stat(&self, which: usize, n: u64) {
        self.words[STATS + which].fetch_add(n, Ordering::Relaxed);
    }

    pub fn stat(&self, which: usize) -> u64 {
        self.words[STATS + which].load(Ordering::Relaxed)
    }
}

/// What the survivor concluded about its peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// The peer's counter moved since the previous observation.
    Alive,
    /// Unchanged for this many of our own polls, still under the limit.
    Quiet(u64),
    /// Unchanged for `limit` polls in a row.
    Gone,
}

/// Counts our own polls since the peer's counter last moved.
#[derive(Clone, Copy, Debug)]
pub struct PeerWatch {
    last: u64,
    quiet_polls: u64,
    limit: u64,
}

/// Our polls without a peer move before it is declared gone. Generous: a
/// live peer on a shared 2-CPU machine can be descheduled for milliseconds.
pub const DEFAULT_QUIET_LIMIT: u64 = 1 << 21;

impl PeerWatch {
    pub fn new(peer_counter_now: u64, limit: u64) -> Self {
        PeerWatch {
            last: peer_counter_now,
            quiet_polls: 0,
            limit: limit.max(1),
        }
    }

    /// Call once per poll of ours with the peer's counter as read now.
    #[inline]
    pub fn observe(&mut self, peer_counter: u64) -> Peer {
        if peer_counter != self.last {
            self.last = peer_counter;
            self.quiet_polls = 0;
            return Peer::Alive;
        }
        self.quiet_polls += 1;
        if self.quiet_polls >= self.limit {
            Peer::Gone
        } else {
            Peer::Quiet(self.quiet_polls)
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn gone_only_after_limit_quiet_polls_and_reset_by_a_move() {
        let mut watch = PeerWatch::new(5, 3);
        assert_eq!(watch.observe(5), Peer::Quiet(1));
        assert_eq!(watch.observe(5), Peer::Quiet(2));
        assert_eq!(watch.observe(6), Peer::Alive);
        assert_eq!(watch.observe(6), Peer::Quiet(1));
        assert_eq!(watch.observe(6), Peer::Quiet(2));
        assert_eq!(watch.observe(6), Peer::Gone);
    }
}
