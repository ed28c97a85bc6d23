//! A host program's end of the host ring: a dataplane running on an IPU's
//! cores exposes a swap-ring region standing in for the PCIe BAR
//! ([`oae_swapring`]); a program attaches with [`HostQueue`] and uses the
//! same verbs API as an in-process application: `submit` a
//! [`crate::api::Submission`], `poll_completion` for its one
//! [`crate::api::Completion`].
//!
//! Two modes ([`HostMode`]), one API: FITO rings (verbs forward on one
//! ring, completions back on another; one host process per ring), or
//! bilateral swap slots (one per host process: a batch of verbs and a batch
//! of completions change hands in one atomic exchange). A verb or a
//! completion is one or more 64-byte records ([`codec`]); every verb fits,
//! the multi-word commit included, with WRITE data up to [`MAX_WRITE`]
//! bytes. A READ or BILATERAL SWAP moves up to
//! [`oae_proto::verb::MAX_BLOCK`] bytes: they land in the dataplane's
//! registered memory, and the completion carries their length.

pub mod codec;
pub mod load;
mod queue;

pub use codec::{MAX_VERB_RECORDS, MAX_WRITE};

/// The file host programs map region `id` of the dataplane whose host ring
/// is `ring` from: beside the ring, `<ring>.region-<id>`.
pub fn region_file(ring: &std::path::Path, id: u16) -> std::path::PathBuf {
    let mut name = ring.as_os_str().to_owned();
    name.push(format!(".region-{id}"));
    std::path::PathBuf::from(name)
}
pub use oae_swapring::region::RegionError;
pub use oae_swapring::words::SharedWords;
pub use queue::{AttachError, HostAnswer, HostQueue, HostQueueCounters};

/// How host programs and the dataplane exchange verbs and completions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HostMode {
    /// Request and response rings (Wave's shape); one host process.
    #[default]
    Fito,
    /// A swap slot per host process; batches swapped atomically.
    Bilateral,
}
