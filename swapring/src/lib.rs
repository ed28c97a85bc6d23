//! Emulated PCIe swap rings between a host process and an IPU-side process.
//!
//! Two ways for a host and a SmartNIC/IPU to cooperate over one shared
//! region that stands in for the PCIe BAR:
//!
//! * [`fito`]: the Wave/ghOSt shape. Events go forward on one ring,
//!   decisions come back on another, and the host's commit aborts decisions
//!   that went stale in flight. Wave's mitigations switch on one by one.
//! * [`bilateral`]: each decision is swapped atomically against the exact
//!   state it was computed from: both commit or neither, so a stale
//!   decision cannot be committed at all.
//!
//! PCIe costs are emulated by busy-waits ([`cost`]); liveness is counted in
//! interactions, not timed ([`liveness`]); [`verbs`] carries generic 64-byte
//! request/response records. See `docs/SWAPRING.md` for layout, protocols,
//! invariants and what is emulated.

// Under loom only the protocols are compiled, not the mapping that uses
// the layout and cost words.
#![cfg_attr(loom, allow(dead_code))]

pub mod bilateral;
pub mod cost;
#[cfg(not(loom))]
pub mod cut;
#[cfg(not(loom))]
pub mod drive;
pub mod fito;
pub mod layout;
pub mod liveness;
pub mod owner;
#[cfg(not(loom))]
pub mod region;
pub mod report;
pub mod ring;
mod sync;
pub mod verbs;
#[cfg(not(loom))]
pub mod wave;
#[cfg(not(loom))]
pub mod words;

/// The atomic word the shared structures are made of (loom's under `--cfg loom`).
pub use sync::AtomicU64;
pub use sync::relax;
