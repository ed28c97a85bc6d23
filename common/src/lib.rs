//! Types shared by the XDP program (`ebpf/`, built for `bpfel-unknown-none`)
//! and userspace (`pmd/`). `no_std`, `#[repr(C)]`, plain old data: both sides
//! read the same bytes out of the same BPF maps.

#![no_std]
#![cfg_attr(feature = "user", allow(unsafe_code))]

/// EtherType of OAE frames (IEEE local experimental 2).
pub const OAE_ETHERTYPE: u16 = 0x88B5;

/// Length of the Ethernet header the XDP program skips (no VLAN tags).
pub const ETH_HEADER_LEN: usize = 14;

/// Map names, as the XDP program declares them and userspace looks them up.
pub mod maps {
    /// XSKMAP: receive queue index → AF_XDP socket.
    pub const SOCKETS: &str = "OAE_SOCKETS";
    /// ARRAY with one [`super::FaultConfig`] at index 0.
    pub const FAULTS: &str = "OAE_FAULTS";
    /// PERCPU_ARRAY of u64 indexed by [`super::Counter`].
    pub const COUNTERS: &str = "OAE_COUNTERS";
    /// PERCPU_ARRAY of [`super::RngState`] at index 0: the fault dice.
    pub const RNG: &str = "OAE_RNG";
}

/// Name of the XDP program inside the object file.
pub const PROGRAM: &str = "oae_steer";

/// Capacity of the XSKMAP: receive queues one interface can steer to.
pub const MAX_QUEUES: u32 = 64;

/// Per-CPU counters kept by the XDP program.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// OAE frames redirected to an AF_XDP socket.
    Steered = 0,
    /// Frames of other EtherTypes handed to the kernel stack.
    Passed = 1,
    /// OAE frames dropped by the fault injector (probabilistic or link down).
    DroppedByFault = 2,
    /// OAE frames with one bit flipped by the fault injector (then steered).
    CorruptedByFault = 3,
    /// OAE frames that arrived on a queue with no socket bound (dropped).
    NoSocket = 4,
}

impl Counter {
    pub const ALL: [Counter; 5] = [
        Counter::Steered,
        Counter::Passed,
        Counter::DroppedByFault,
        Counter::CorruptedByFault,
        Counter::NoSocket,
    ];
    pub const COUNT: u32 = Self::ALL.len() as u32;

    pub const fn name(self) -> &'static str {
        match self {
            Counter::Steered => "steered",
            Counter::Passed => "passed",
            Counter::DroppedByFault => "dropped_by_fault",
            Counter::CorruptedByFault => "corrupted_by_fault",
            Counter::NoSocket => "no_socket",
        }
    }
}

/// Offset value meaning "flip a bit at a random offset inside the OAE payload".
pub const CORRUPT_RANDOM_OFFSET: u32 = u32::MAX;

/// One million: probabilities are in parts per million.
pub const PPM: u32 = 1_000_000;

/// Fault injection applied by the XDP program to received OAE frames.
/// All zero means no faults.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultConfig {
    /// Probability, in parts per million, of dropping an OAE frame.
    pub drop_ppm: u32,
    /// Probability, in parts per million, of flipping one bit.
    pub corrupt_ppm: u32,
    /// Byte offset from the start of the Ethernet frame of the flipped bit,
    /// or [`CORRUPT_RANDOM_OFFSET`] for a random byte of the OAE payload.
    pub corrupt_offset: u32,
    /// Non-zero: drop every OAE frame (the link is down).
    pub link_down: u32,
    /// Seed of the per-CPU dice; changing it restarts the sequence, so the
    /// same seed and the same frames give the same faults.
    pub seed: u64,
}

/// Per-CPU generator state of the fault dice (xorshift64*).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RngState {
    /// The seed this state was derived from; a new seed in the config
    /// reseeds.
    pub seed: u64,
    pub state: u64,
}

#[cfg(feature = "user")]
// SAFETY: FaultConfig is repr(C), Copy, and every bit pattern is valid.
unsafe impl aya::Pod for FaultConfig {}

#[cfg(feature = "user")]
// SAFETY: RngState is repr(C), Copy, and every bit pattern is valid.
unsafe impl aya::Pod for RngState {}
