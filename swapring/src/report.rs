//! What a region holds, as `oaectl swap-ring` shows it: serde types, so
//! its `--json` is the same data as its table.

use serde::{Deserialize, Serialize};

/// A whole region: its geometry, each side's counters, its rings, its
/// slots and who holds them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegionReport {
    pub path: String,
    pub version: u64,
    /// `fito` or `bilateral`.
    pub mode: String,
    pub ring_capacity: u64,
    pub slots: u64,
    pub slot_batch: u64,
    pub cost: String,
    pub mitigations: MitigationsReport,
    pub host_wakeup: String,
    pub host: SideReport,
    pub ipu: SideReport,
    pub rings: Vec<RingReport>,
    pub slot_states: SlotStates,
    /// The FITO rings' holder, if held.
    pub ring_claim: Option<ClaimReport>,
    /// Each swap slot's holder, if held.
    pub slot_claims: Vec<Option<ClaimReport>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MitigationsReport {
    pub write_batching: bool,
    pub prestaged_decisions: bool,
    pub prefetch: bool,
}

/// One side's counters (the host's or the IPU's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SideReport {
    pub pid: u32,
    pub attachments: u64,
    pub interactions: u64,
    pub sent: u64,
    pub received: u64,
    pub refused_full: u64,
    pub committed: u64,
    pub aborted: u64,
    pub swaps: u64,
    pub withdrawn: u64,
    pub lost_races: u64,
    pub nonposted_reads: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RingReport {
    pub ring: String,
    pub capacity: u64,
    pub head: u64,
    pub tail: u64,
    pub queued: u64,
    pub doorbells: u64,
    pub refused_full: u64,
}

/// How many swap slots are in each state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotStates {
    pub idle: u64,
    pub offered: u64,
    pub swapped: u64,
    pub half_applied: u64,
    pub corrupt: u64,
}

/// A process's claim on a ring or a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimReport {
    pub pid: u32,
    pub generation: u32,
}
