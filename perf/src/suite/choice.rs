//! The choices a trial makes: which driver, which cores, how the polling
//! cores idle and kick, and the rounds that keep shared cores from looking dead.

use std::process::Command;

pub(super) const VETH_PAIR: &str = include_str!("../../../configs/veth-pair.toml");
pub(super) const DPDK_AF_XDP: &str = include_str!("../../../configs/dpdk-af-xdp.toml");
pub(super) const DPDK_MEMIF: &str = include_str!("../../../configs/dpdk-memif.toml");

/// Hugepages net_af_xdp needs (oae_pmd::dpdk refuses it on 4 KiB pages:
/// the kernel drops frames whose mbufs straddle a page), for two oaed
/// processes or one testpmd.
pub(super) const HUGEPAGES: u64 = 256;

/// Liveness round of line-rate and latency trials on two cores: 2 ms, so
/// that a polling thread descheduled by other work on these shared vCPUs
/// is not taken for a dead peer. Failure trials keep the deployed 20 us.
pub(super) const SHARED_CPU_MIN_ROUND_US: u64 = 2_000;
/// With both ends on one core, each waits a whole time slice for the
/// other: a round well above the scheduler's slice.
pub(super) const SAME_CORE_MIN_ROUND_US: u64 = 20_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverChoice {
    AfXdp,
    DpdkAfXdp,
    DpdkMemif,
}

impl DriverChoice {
    pub fn name(self) -> &'static str {
        match self {
            DriverChoice::AfXdp => "af-xdp",
            DriverChoice::DpdkAfXdp => "dpdk net_af_xdp",
            DriverChoice::DpdkMemif => "dpdk net_memif",
        }
    }

    pub(super) fn config(self) -> (&'static str, &'static str) {
        match self {
            DriverChoice::AfXdp => ("veth-pair.toml", VETH_PAIR),
            DriverChoice::DpdkAfXdp => ("dpdk-af-xdp.toml", DPDK_AF_XDP),
            DriverChoice::DpdkMemif => ("dpdk-memif.toml", DPDK_MEMIF),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Side a and side b on cores of their own.
    CrossCore,
    /// Both sides on side a's core.
    SameCore,
}

impl Placement {
    pub fn name(self) -> &'static str {
        match self {
            Placement::CrossCore => "cross-core",
            Placement::SameCore => "same-core",
        }
    }

    pub(super) fn cores(self, cores: [usize; 2]) -> [usize; 2] {
        match self {
            Placement::CrossCore => cores,
            Placement::SameCore => [cores[0], cores[0]],
        }
    }
}

/// How the dataplanes of a trial poll (`oaectl demo --idle --kicks
/// --busy-poll`); the default is the deployments': spin, immediate kicks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PollChoice {
    pub idle: Option<&'static str>,
    pub kicks: Option<&'static str>,
    pub busy_poll: bool,
}

impl PollChoice {
    pub const SLEEP: PollChoice = PollChoice {
        idle: Some("sleep"),
        kicks: None,
        busy_poll: false,
    };

    /// For the report and log names: `default`, or what differs from it.
    pub fn name(&self) -> String {
        let mut parts = Vec::new();
        if let Some(i) = self.idle {
            parts.push(format!("idle {i}"));
        }
        if let Some(k) = self.kicks {
            parts.push(format!("{k} kicks"));
        }
        if self.busy_poll {
            parts.push("busy poll".to_string());
        }
        if parts.is_empty() {
            "default".into()
        } else {
            parts.join(" + ")
        }
    }

    pub(super) fn args(&self, cmd: &mut Command) {
        if let Some(i) = self.idle {
            cmd.args(["--idle", i]);
        }
        if let Some(k) = self.kicks {
            cmd.args(["--kicks", k]);
        }
        if self.busy_poll {
            cmd.arg("--busy-poll");
        }
    }
}
