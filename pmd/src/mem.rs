//! Two drivers joined in one process, with no NIC, kernel or root: what a
//! test of the pipeline drives instead of AF_XDP or DPDK.
//!
//! Each end owns a pool of frame buffers, sized when the pair is made, and
//! keeps the same ownership rules as the real drivers: a handle is the
//! caller's from `rx_burst` or `alloc` until `tx_burst` or `release` takes
//! it back, and a handle used twice panics. Frames sent wait in the end's
//! transmit ring until a kick copies them onto the wire to the other end
//! (at once unless kicks are held, as AF_XDP's `sendto`); the wire holds a
//! bounded number of frames and drops the rest, counted at the receiver as
//! a full receive ring. The wire's lock is taken once per kick and once per
//! receive burst; each frame on the wire is a copy of its own (a driver for
//! tests, not for speed). A bell per wire, readable while frames wait,
//! is the descriptor a sleeping core polls ([`Driver::wait_fd`]).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use std::os::fd::{AsFd, BorrowedFd};

use nix::sys::eventfd::{EfdFlags, EventFd};

use crate::{Burst, Driver, DriverStats};

/// Largest frame a buffer holds, as an AF_XDP frame of the default size.
pub const MEM_FRAME_CAPACITY: usize = 2048;
/// Shortest frame the drivers send: an Ethernet header.
const MIN_FRAME: usize = 14;

/// One end's settings.
#[derive(Clone, Copy, Debug)]
pub struct MemConfig {
    pub mac: [u8; 6],
    /// Buffers in this end's pool.
    pub frames: usize,
    /// Frames this end's transmit ring holds until a kick.
    pub tx_ring: usize,
    /// Frames the wire towards this end holds before it drops.
    pub rx_ring: usize,
}

impl MemConfig {
    pub fn new(mac: [u8; 6]) -> MemConfig {
        MemConfig {
            mac,
            frames: 256,
            tx_ring: 64,
            rx_ring: 256,
        }
    }
}

/// One direction of the wire: frames in order, and those dropped because
/// it was full.
struct Wire {
    frames: VecDeque<Box<[u8]>>,
    capacity: usize,
    dropped: u64,
    /// Readable while frames wait: what a sleeping core polls, as it polls
    /// an AF_XDP socket. Rung and drained under the wire's lock.
    bell: Arc<EventFd>,
}

impl Wire {
    fn push(&mut self, frame: &[u8]) {
        if self.frames.len() < self.capacity {
            self.frames.push_back(frame.into());
            // Non-blocking, and a counter read back at every drain: it
            // cannot fill.
            let _ = self.bell.write(1);
        } else {
            self.dropped += 1;
        }
    }
}

/// Two ends joined by two wires.
pub fn mem_pair(a: MemConfig, b: MemConfig) -> (MemDriver, MemDriver) {
    let wire = |capacity| {
        let bell = EventFd::from_flags(EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC)
            .expect("an eventfd for the in-memory wire");
        Arc::new(Mutex::new(Wire {
            frames: VecDeque::with_capacity(capacity),
            capacity,
            dropped: 0,
            bell: Arc::new(bell),
        }))
    };
    let (to_a, to_b) = (wire(a.rx_ring), wire(b.rx_ring));
    (
        MemDriver::new(a, to_a.clone(), to_b.clone()),
        MemDriver::new(b, to_b, to_a),
    )
}

/// A handle to one of an end's buffers.
#[derive(Debug, PartialEq, Eq)]
pub struct MemBuf(u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    Pool,
    Caller,
    /// In the transmit ring, waiting for a kick.
    Queued,
}

pub struct MemDriver {
    mac: [u8; 6],
    buffers: Vec<Box<[u8]>>,
    lens: Vec<usize>,
    owners: Vec<Owner>,
    free: Vec<u32>,
    queued: VecDeque<u32>,
    tx_ring: usize,
    hold_kicks: bool,
    inbound: Arc<Mutex<Wire>>,
    /// The inbound wire's bell.
    bell: Arc<EventFd>,
    outbound: Arc<Mutex<Wire>>,
    /// Kicks to refuse (as a busy kernel would), for tests of the retry.
    refuse_kicks: u32,
    stats: DriverStats,
}

impl MemDriver {
    fn new(cfg: MemConfig, inbound: Arc<Mutex<Wire>>, outbound: Arc<Mutex<Wire>>) -> MemDriver {
        let bell = Arc::clone(&lock(&inbound).bell);
        MemDriver {
            mac: cfg.mac,
            buffers: (0..cfg.frames)
                .map(|_| vec![0; MEM_FRAME_CAPACITY].into_boxed_slice())
                .collect(),
            lens: vec![0; cfg.frames],
            owners: vec![Owner::Pool; cfg.frames],
            free: (0..cfg.frames as u32).rev().collect(),
            queued: VecDeque::with_capacity(cfg.tx_ring),
            tx_ring: cfg.tx_ring,
            hold_kicks: false,
            bell,
            inbound,
            outbound,
            refuse_kicks: 0,
            stats: DriverStats::default(),
        }
    }

    /// A frame arriving from the wire as if the peer had sent it (another
    /// EtherType, a foreign MAC, junk).
    pub fn inject(&self, frame: &[u8]) {
        lock(&self.inbound).push(frame);
    }

    /// The next `n` kicks send nothing, as a kernel that is busy.
    pub fn refuse_next_kicks(&mut self, n: u32) {
        self.refuse_kicks = n;
    }

    /// Buffers the caller holds now: zero between bursts, or one leaks.
    pub fn held_by_caller(&self) -> usize {
        self.owners.iter().filter(|&&o| o == Owner::Caller).count()
    }

    fn take(&mut self, want: Owner) -> Option<MemBuf> {
        let i = self.free.pop()?;
        self.owners[i as usize] = want;
        Some(MemBuf(i))
    }

    /// Checks that the caller owns `buf` and gives it to `to`.
    fn give(&mut self, buf: &MemBuf, to: Owner) {
        let owner = &mut self.owners[buf.0 as usize];
        assert_eq!(
            *owner,
            Owner::Caller,
            "buffer {} is not the caller's",
            buf.0
        );
        *owner = to;
        if to == Owner::Pool {
            self.free.push(buf.0);
        }
    }
}

fn lock(wire: &Mutex<Wire>) -> std::sync::MutexGuard<'_, Wire> {
    // A test that panicked while holding the wire leaves its frames valid.
    wire.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Driver for MemDriver {
    type Buf = MemBuf;

    fn rx_burst(&mut self, out: &mut Burst<MemBuf>) -> usize {
        let inbound = Arc::clone(&self.inbound);
        let mut wire = lock(&inbound);
        self.stats.kernel_rx_ring_full = wire.dropped;
        let mut n = 0;
        while !out.is_full() && !wire.frames.is_empty() {
            let Some(buf) = self.take(Owner::Caller) else {
                break;
            };
            let frame = wire.frames.pop_front().expect("a frame is waiting");
            let len = frame.len().min(MEM_FRAME_CAPACITY);
            self.buffers[buf.0 as usize][..len].copy_from_slice(&frame[..len]);
            self.lens[buf.0 as usize] = len;
            out.push(buf);
            n += 1;
        }
        if wire.frames.is_empty() {
            let _ = wire.bell.read();
        }
        self.stats.rx_packets += n as u64;
        n
    }

    fn alloc(&mut self, out: &mut Burst<MemBuf>, n: usize) -> usize {
        let mut given = 0;
        while given < n && !out.is_full() {
            let Some(buf) = self.take(Owner::Caller) else {
                self.stats.alloc_failed += 1;
                break;
            };
            self.lens[buf.0 as usize] = 0;
            out.push(buf);
            given += 1;
        }
        given
    }

    fn frame<'a>(&'a self, buf: &'a MemBuf) -> &'a [u8] {
        &self.buffers[buf.0 as usize][..self.lens[buf.0 as usize]]
    }

    fn frame_mut<'a>(&'a mut self, buf: &'a mut MemBuf, len: usize) -> &'a mut [u8] {
        assert!(len <= MEM_FRAME_CAPACITY, "a frame of {len} bytes");
        self.lens[buf.0 as usize] = len;
        &mut self.buffers[buf.0 as usize][..len]
    }

    fn frame_capacity(&self) -> usize {
        MEM_FRAME_CAPACITY
    }

    fn tx_burst(&mut self, bufs: &mut Burst<MemBuf>) -> usize {
        let room = self.tx_ring - self.queued.len();
        let accepted = bufs.len().min(room);
        if accepted < bufs.len() {
            self.stats.tx_ring_full += 1;
        }
        for buf in bufs.drain(..accepted) {
            assert!(
                self.lens[buf.0 as usize] >= MIN_FRAME,
                "a frame shorter than its header"
            );
            self.give(&buf, Owner::Queued);
            self.queued.push_back(buf.0);
        }
        if !self.hold_kicks && accepted > 0 {
            self.kick();
        }
        accepted
    }

    fn release(&mut self, bufs: &mut Burst<MemBuf>) {
        for buf in bufs.drain(..) {
            self.give(&buf, Owner::Pool);
        }
    }

    fn stats(&mut self) -> DriverStats {
        self.stats.kernel_rx_ring_full = lock(&self.inbound).dropped;
        self.stats
    }

    fn mac(&self) -> [u8; 6] {
        self.mac
    }

    fn hold_kicks(&mut self, hold: bool) {
        self.hold_kicks = hold;
    }

    fn unkicked(&mut self) -> usize {
        self.queued.len()
    }

    fn kick(&mut self) {
        if self.queued.is_empty() {
            return;
        }
        self.stats.tx_kicks += 1;
        if self.refuse_kicks > 0 {
            self.refuse_kicks -= 1;
            return;
        }
        let outbound = Arc::clone(&self.outbound);
        let mut wire = lock(&outbound);
        while let Some(i) = self.queued.pop_front() {
            wire.push(&self.buffers[i as usize][..self.lens[i as usize]]);
            self.owners[i as usize] = Owner::Pool;
            self.free.push(i);
            self.stats.tx_packets += 1;
        }
    }

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.bell.as_fd())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MACS: [[u8; 6]; 2] = [[2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]];

    fn pair() -> (MemDriver, MemDriver) {
        mem_pair(MemConfig::new(MACS[0]), MemConfig::new(MACS[1]))
    }

    /// Sends `frames` (each a byte repeated to 60 bytes) from `d`.
    fn send(d: &mut MemDriver, frames: &[u8]) -> usize {
        let mut bufs = Burst::new();
        assert_eq!(d.alloc(&mut bufs, frames.len()), frames.len());
        for (buf, &b) in bufs.iter_mut().zip(frames) {
            d.frame_mut(buf, 60).fill(b);
        }
        let sent = d.tx_burst(&mut bufs);
        d.release(&mut bufs);
        sent
    }

    fn receive(d: &mut MemDriver) -> Vec<u8> {
        let mut bufs = Burst::new();
        d.rx_burst(&mut bufs);
        let got = bufs.iter().map(|b| d.frame(b)[0]).collect();
        d.release(&mut bufs);
        got
    }

    /// Whether `d`'s descriptor polls readable now.
    fn rung(d: &MemDriver) -> bool {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        let mut fds = [PollFd::new(d.wait_fd().expect("a bell"), PollFlags::POLLIN)];
        poll(&mut fds, PollTimeout::ZERO).expect("poll") == 1
    }

    #[test]
    fn the_bell_rings_while_frames_wait_and_only_then() {
        let (mut a, mut b) = pair();
        assert!(!rung(&b), "nothing sent yet");
        send(&mut a, &[1, 2]);
        a.kick();
        assert!(rung(&b) && !rung(&a));
        assert_eq!(receive(&mut b), [1, 2]);
        assert!(!rung(&b), "drained");
        b.inject(&[7; 60]);
        assert!(rung(&b));
    }

    #[test]
    fn frames_cross_in_order_and_every_buffer_comes_back() {
        let (mut a, mut b) = pair();
        assert_eq!(send(&mut a, &[1, 2, 3]), 3);
        assert_eq!(receive(&mut b), [1, 2, 3]);
        assert_eq!(receive(&mut b), [0u8; 0]);
        assert_eq!((a.held_by_caller(), b.held_by_caller()), (0, 0));
        assert_eq!(a.free.len(), 256);
        let s = a.stats();
        assert_eq!((s.tx_packets, s.tx_kicks), (3, 1));
        assert_eq!(b.stats().rx_packets, 3);
    }

    #[test]
    fn held_kicks_keep_frames_until_the_kick_and_a_refused_kick_keeps_them() {
        let (mut a, mut b) = pair();
        a.hold_kicks(true);
        send(&mut a, &[1]);
        send(&mut a, &[2]);
        assert_eq!(a.unkicked(), 2);
        assert_eq!(receive(&mut b), [0u8; 0]);
        a.refuse_next_kicks(1);
        a.kick();
        assert_eq!((a.unkicked(), a.stats().tx_kicks), (2, 1));
        a.kick();
        assert_eq!((a.unkicked(), a.stats().tx_kicks), (0, 2));
        assert_eq!(receive(&mut b), [1, 2]);
    }

    #[test]
    fn a_full_transmit_ring_takes_the_front_and_a_full_wire_drops_counted() {
        let cfg = |mac| MemConfig {
            tx_ring: 4,
            rx_ring: 2,
            ..MemConfig::new(mac)
        };
        let (mut a, mut b) = mem_pair(cfg(MACS[0]), cfg(MACS[1]));
        a.hold_kicks(true);
        assert_eq!(send(&mut a, &[1, 2, 3, 4, 5, 6]), 4);
        assert_eq!(a.stats().tx_ring_full, 1);
        a.kick();
        assert_eq!(receive(&mut b), [1, 2]);
        assert_eq!(b.stats().kernel_rx_ring_full, 2);
    }

    #[test]
    fn an_empty_pool_is_counted_and_injected_frames_arrive() {
        let cfg = MemConfig {
            frames: 2,
            ..MemConfig::new(MACS[0])
        };
        let (mut a, mut b) = mem_pair(cfg, MemConfig::new(MACS[1]));
        let mut bufs = Burst::new();
        assert_eq!(a.alloc(&mut bufs, 3), 2);
        assert_eq!(a.stats().alloc_failed, 1);
        a.release(&mut bufs);
        b.inject(&[9; 60]);
        assert_eq!(receive(&mut b), [9]);
    }

    #[test]
    #[should_panic(expected = "is not the caller's")]
    fn a_buffer_handed_back_twice_panics() {
        let (mut a, _b) = pair();
        let mut bufs = Burst::new();
        a.alloc(&mut bufs, 1);
        let again = MemBuf(bufs[0].0);
        a.release(&mut bufs);
        let mut twice = Burst::new();
        twice.push(again);
        a.release(&mut twice);
    }
}
