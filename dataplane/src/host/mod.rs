//! The dataplane's end of the host ring: it creates the swap-ring region,
//! as a device exposes its BAR, and its polling core serves it between
//! bursts ([`HostPort`]). Host programs attach with
//! [`oae_client::host::HostQueue`].

use std::path::PathBuf;

use oae_swapring::cost::CostModel;

mod port;

use oae_client::host::HostMode;
pub use port::{HostOrigin, HostPort};

/// Where host programs attach, and what the region emulates.
#[derive(Debug, Clone)]
pub struct HostRing {
    pub path: PathBuf,
    /// Verbs one host process may have in flight (records per FITO ring).
    pub capacity: u64,
    pub cost: CostModel,
    pub mode: HostMode,
    /// Host processes a bilateral ring serves at once (its slots).
    pub processes: u64,
    /// Records one bilateral exchange carries each way.
    pub batch: u64,
}
