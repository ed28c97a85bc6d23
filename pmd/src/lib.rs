//! Poll-mode drivers behind one burst interface.
//!
//! A [`Driver`] moves frames between a NIC queue and its caller in bursts.
//! Buffers are owned explicitly: a [`Driver::Buf`] handle received from
//! [`Driver::rx_burst`] or [`Driver::alloc`] belongs to the caller until it is
//! handed back through [`Driver::tx_burst`] (which may accept only a prefix
//! of the burst) or [`Driver::release`]. A received buffer may be
//! transmitted as is (a reflector needs no copy). Nothing here allocates per
//! packet: buffers come from a pool sized when the driver is created.

use std::os::fd::BorrowedFd;

use arrayvec::ArrayVec;

/// Most frames one burst carries.
pub const MAX_BURST: usize = 64;

/// A burst of buffer handles, on the stack.
pub type Burst<B> = ArrayVec<B, MAX_BURST>;

/// A poll-mode driver bound to one receive/transmit queue pair.
pub trait Driver {
    /// An owned handle to one frame buffer.
    type Buf;

    /// Appends received frames to `out`, at most its remaining capacity, and
    /// returns how many. Also keeps the receive side supplied with free
    /// buffers, so the NIC never drops for lack of them while the pool has
    /// any.
    fn rx_burst(&mut self, out: &mut Burst<Self::Buf>) -> usize;

    /// Appends up to `n` free buffers for transmission to `out` (bounded by
    /// its remaining capacity); returns how many. Fewer than asked means the
    /// pool is empty for now: frames in flight come back as the NIC
    /// completes them.
    fn alloc(&mut self, out: &mut Burst<Self::Buf>, n: usize) -> usize;

    /// The frame's current contents (Ethernet header included).
    fn frame<'a>(&'a self, buf: &'a Self::Buf) -> &'a [u8];

    /// Sets the frame's length to `len` and returns its bytes for writing.
    /// Panics if `len` exceeds [`Driver::frame_capacity`].
    fn frame_mut<'a>(&'a mut self, buf: &'a mut Self::Buf, len: usize) -> &'a mut [u8];

    /// Largest frame a buffer holds.
    fn frame_capacity(&self) -> usize;

    /// Queues the front of `bufs` for transmission, in order, and removes
    /// those accepted from `bufs`; returns how many. The rest (transmit ring
    /// full) stay with the caller, who retries or releases them.
    fn tx_burst(&mut self, bufs: &mut Burst<Self::Buf>) -> usize;

    /// Returns every buffer in `bufs` to the pool without sending it and
    /// leaves `bufs` empty.
    fn release(&mut self, bufs: &mut Burst<Self::Buf>);

    /// Counters of this queue, the kernel's included where it keeps them.
    /// May make a system call: not for the per-packet path.
    fn stats(&mut self) -> DriverStats;

    /// The interface's MAC address, for the source of transmitted frames.
    fn mac(&self) -> [u8; 6];

    /// Whether [`Driver::tx_burst`] leaves the system call that makes the
    /// kernel send (the kick) to [`Driver::kick`], so a caller can send the
    /// frames of several bursts with one. Drivers whose transmission needs
    /// no system call ignore it.
    fn hold_kicks(&mut self, _hold: bool) {}

    /// Frames queued for transmission whose kick is held.
    fn unkicked(&mut self) -> usize {
        0
    }

    /// Makes the NIC send every frame queued for transmission.
    fn kick(&mut self) {}

    /// A descriptor that polls readable when frames arrive, for an idle
    /// polling core to sleep on; `None` if the driver has none.
    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
}

/// Counters of one driver queue. Kernel counters are zero where the driver
/// has none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DriverStats {
    /// Frames returned by [`Driver::rx_burst`].
    pub rx_packets: u64,
    /// Frames the NIC has finished transmitting (not merely queued).
    pub tx_packets: u64,
    /// Transmit bursts cut short because the transmit ring was full.
    pub tx_ring_full: u64,
    /// `alloc` calls that found the pool empty.
    pub alloc_failed: u64,
    /// Buffers `alloc` handed out that a receive had brought (DPDK: an
    /// answer carried in a received mbuf, not a fresh one).
    pub buffers_reused: u64,
    /// Frames the driver received but could not hand out, and dropped
    /// (DPDK: frames chained over several mbufs).
    pub rx_unsupported: u64,
    /// Kernel: frames dropped for reasons other than a full ring or an
    /// empty fill ring.
    pub kernel_rx_dropped: u64,
    /// Kernel: frames dropped because the receive ring was full.
    pub kernel_rx_ring_full: u64,
    /// Kernel: receives that found the fill ring empty.
    pub kernel_fill_ring_empty: u64,
    /// Kernel: invalid receive descriptors.
    pub kernel_rx_invalid: u64,
    /// Kernel: invalid transmit descriptors.
    pub kernel_tx_invalid: u64,
    /// Kernel: times the transmit ring was found empty.
    pub kernel_tx_ring_empty: u64,
    /// System calls that made the kernel transmit (AF_XDP `sendto`).
    pub tx_kicks: u64,
    /// System calls that ran the queue's receive processing (AF_XDP
    /// preferred busy polling).
    pub busy_polls: u64,
}

impl DriverStats {
    /// Adds another queue's counters (a core serving several ports).
    pub fn add(&mut self, o: &DriverStats) {
        self.rx_packets += o.rx_packets;
        self.tx_packets += o.tx_packets;
        self.tx_ring_full += o.tx_ring_full;
        self.alloc_failed += o.alloc_failed;
        self.buffers_reused += o.buffers_reused;
        self.rx_unsupported += o.rx_unsupported;
        self.kernel_rx_dropped += o.kernel_rx_dropped;
        self.kernel_rx_ring_full += o.kernel_rx_ring_full;
        self.kernel_fill_ring_empty += o.kernel_fill_ring_empty;
        self.kernel_rx_invalid += o.kernel_rx_invalid;
        self.kernel_tx_invalid += o.kernel_tx_invalid;
        self.kernel_tx_ring_empty += o.kernel_tx_ring_empty;
        self.tx_kicks += o.tx_kicks;
        self.busy_polls += o.busy_polls;
    }
}

/// The [`Driver`] methods a wrapper (`fault::FaultInjector`,
/// `capture::Capture`) leaves to its `inner` driver: every one but
/// `rx_burst` and `tx_burst`, which wrappers change.
macro_rules! forward_to_inner {
    () => {
        fn alloc(&mut self, out: &mut $crate::Burst<D::Buf>, n: usize) -> usize {
            self.inner.alloc(out, n)
        }

        fn frame<'a>(&'a self, buf: &'a D::Buf) -> &'a [u8] {
            self.inner.frame(buf)
        }

        fn frame_mut<'a>(&'a mut self, buf: &'a mut D::Buf, len: usize) -> &'a mut [u8] {
            self.inner.frame_mut(buf, len)
        }

        fn frame_capacity(&self) -> usize {
            self.inner.frame_capacity()
        }

        fn release(&mut self, bufs: &mut $crate::Burst<D::Buf>) {
            self.inner.release(bufs)
        }

        fn stats(&mut self) -> $crate::DriverStats {
            self.inner.stats()
        }

        fn mac(&self) -> [u8; 6] {
            self.inner.mac()
        }

        fn hold_kicks(&mut self, hold: bool) {
            self.inner.hold_kicks(hold)
        }

        fn unkicked(&mut self) -> usize {
            self.inner.unkicked()
        }

        fn kick(&mut self) {
            self.inner.kick()
        }

        fn wait_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
            self.inner.wait_fd()
        }
    };
}

// AF_XDP rings and UMEM memory are only reachable through unsafe code,
// which stays in this module.
#[allow(unsafe_code)]
pub mod afxdp;
// DPDK's API is C; the driver's unsafe calls stay in this module.
pub mod capture;
#[cfg(feature = "dpdk")]
#[allow(unsafe_code)]
pub mod dpdk;
pub mod fault;
pub mod mem;
pub mod netns;
pub mod xdp;
