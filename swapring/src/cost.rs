//! The PCIe cost model, charged by the endpoints as calibrated busy-waits.
//!
//! This is an emulation: both "sides" are processes on one machine sharing
//! ordinary memory, so nothing here is slow by itself. Each access that would
//! cross PCIe on a real host/IPU pair spins for the configured time, measured
//! with [`std::time::Instant`], on the side that would stall. A zero disables
//! that part. Which accesses cross PCIe is decided by where each structure
//! lives (see `docs/SWAPRING.md`, "Cost model").

use std::fmt;
use std::time::Instant;

/// Nanoseconds charged for each kind of PCIe interaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CostModel {
    /// A read of memory on the other side of the link: a non-posted request
    /// that stalls the reader for a full round trip (host MMIO read of the
    /// IPU's BAR, or an IPU DMA read of host memory).
    pub nonposted_read_ns: u64,
    /// Publishing stores to the other side. Posted writes do not wait for
    /// completion, but uncached MMIO stores drain one by one; charged once per
    /// publish, so coalescing messages into one publish pays it once.
    pub posted_write_ns: u64,
    /// MSI-X delivery: from the device's write of the interrupt to the host
    /// handler running. Charged to the host per interrupt it takes.
    pub doorbell_ns: u64,
    /// A PCIe AtomicOp (CAS, Swap, FetchAdd): non-posted, a full round trip,
    /// charged to the requester.
    pub atomic_ns: u64,
}

impl Default for CostModel {
    /// The figures quoted for Wave on Mount Evans: ~750 ns MMIO read, ~1.6 us
    /// MSI-X; an AtomicOp is taken as a round trip plus the completer's work.
    fn default() -> Self {
        CostModel {
            nonposted_read_ns: 750,
            posted_write_ns: 200,
            doorbell_ns: 1600,
            atomic_ns: 1000,
        }
    }
}

/// The most one interaction may be charged: 1 ms, a thousand times a
/// real PCIe round trip. A cost is a busy-wait on every access, so an
/// unbounded one (set by mistake, or written into a ring's header by a
/// process that attaches to it) would stall its reader for as long as it
/// says.
pub const MAX_COST_NS: u64 = 1_000_000;

/// Why a cost specification was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CostParseError {
    #[error("cost item {0:?} is not key=value")]
    NotKeyValue(String),
    #[error("unknown cost key {0:?}; expected read, write, doorbell or atomic")]
    UnknownKey(String),
    #[error("cost {key}={value:?} is not a number of nanoseconds")]
    NotANumber { key: String, value: String },
    #[error("cost {key}={ns} ns is more than {MAX_COST_NS} ns (1 ms) an interaction")]
    TooLarge { key: String, ns: u64 },
}

impl CostModel {
    /// Every cost disabled: the protocols run at memory speed.
    pub const fn zero() -> Self {
        CostModel {
            nonposted_read_ns: 0,
            posted_write_ns: 0,
            doorbell_ns: 0,
            atomic_ns: 0,
        }
    }

    /// Starts from the defaults and applies a comma-separated list of
    /// `key=ns` items: `read`, `write`, `doorbell`, `atomic`; `zero` (alone
    /// or first) starts from all zeros instead.
    pub fn parse(spec: &str) -> Result<Self, CostParseError> {
        let mut cost = CostModel::default();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if item == "zero" {
                cost = CostModel::zero();
                continue;
            }
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| CostParseError::NotKeyValue(item.to_owned()))?;
            let ns: u64 = value
                .trim()
                .parse()
                .map_err(|_| CostParseError::NotANumber {
                    key: key.to_owned(),
                    value: value.to_owned(),
                })?;
            match key.trim() {
                "read" | "nonposted_read_ns" => cost.nonposted_read_ns = ns,
                "write" | "posted_write_ns" => cost.posted_write_ns = ns,
                "doorbell" | "doorbell_ns" | "msix" => cost.doorbell_ns = ns,
                "atomic" | "atomic_ns" => cost.atomic_ns = ns,
                other => return Err(CostParseError::UnknownKey(other.to_owned())),
            }
            if ns > MAX_COST_NS {
                return Err(CostParseError::TooLarge {
                    key: key.trim().to_owned(),
                    ns,
                });
            }
        }
        Ok(cost)
    }

    /// The largest of the four costs.
    pub fn largest_ns(&self) -> u64 {
        self.to_words().into_iter().max().unwrap_or(0)
    }

    #[inline]
    pub fn nonposted_read(&self) {
        spin_ns(self.nonposted_read_ns);
    }
    #[inline]
    pub fn posted_write(&self) {
        spin_ns(self.posted_write_ns);
    }
    #[inline]
    pub fn doorbell(&self) {
        spin_ns(self.doorbell_ns);
    }
    #[inline]
    pub fn atomic(&self) {
        spin_ns(self.atomic_ns);
    }

    pub(crate) fn to_words(self) -> [u64; 4] {
        [
            self.nonposted_read_ns,
            self.posted_write_ns,
            self.doorbell_ns,
            self.atomic_ns,
        ]
    }

    pub(crate) fn from_words(w: [u64; 4]) -> Self {
        CostModel {
            nonposted_read_ns: w[0],
            posted_write_ns: w[1],
            doorbell_ns: w[2],
            atomic_ns: w[3],
        }
    }
}

impl fmt::Display for CostModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "read={},write={},doorbell={},atomic={}",
            self.nonposted_read_ns, self.posted_write_ns, self.doorbell_ns, self.atomic_ns
        )
    }
}

/// Spins for `ns` nanoseconds of wall time. The clock read (tens of ns) is
/// the resolution; the spin never sleeps, as a stalled CPU would not.
#[inline]
pub fn spin_ns(ns: u64) {
    if ns == 0 {
        return;
    }
    let start = Instant::now();
    while (start.elapsed().as_nanos() as u64) < ns {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_applies_items_over_defaults() {
        let c = CostModel::parse("read=0, atomic=500").unwrap();
        assert_eq!(
            c,
            CostModel {
                nonposted_read_ns: 0,
                atomic_ns: 500,
                ..CostModel::default()
            }
        );
        assert_eq!(
            CostModel::parse("zero,doorbell=7").unwrap(),
            CostModel {
                doorbell_ns: 7,
                ..CostModel::zero()
            }
        );
        assert_eq!(
            CostModel::parse(&CostModel::default().to_string()).unwrap(),
            CostModel::default()
        );
        assert!(matches!(
            CostModel::parse("bogus=1"),
            Err(CostParseError::UnknownKey(_))
        ));
        assert!(matches!(
            CostModel::parse("read=x"),
            Err(CostParseError::NotANumber { .. })
        ));
        assert!(matches!(
            CostModel::parse("read"),
            Err(CostParseError::NotKeyValue(_))
        ));
    }

    #[test]
    fn spin_waits_at_least_the_cost() {
        let start = Instant::now();
        spin_ns(200_000);
        assert!(start.elapsed().as_nanos() >= 200_000);
    }
}
