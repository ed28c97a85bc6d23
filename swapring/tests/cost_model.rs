//! The emulated PCIe costs are charged where the protocol says: a host
//! without prestaged decisions pays non-posted reads for each decision, a
//! host with them pays none. Judged by the reads charged, counted in the
//! host's shared stats, never by how long the exchange took.

use std::time::Duration;

use oae_swapring::cost::CostModel;
use oae_swapring::drive::{self, Bounds};
use oae_swapring::fito::{Mitigations, Wakeup};
use oae_swapring::layout::{Geometry, Mode};
use oae_swapring::liveness::STAT_NONPOSTED_READS;
use oae_swapring::region::{Region, RegionConfig, Side, unique_shm_path};

const DECISIONS: u64 = 50;

/// Non-posted reads the host was charged for `DECISIONS` decisions.
fn reads_charged(mitigations: Mitigations) -> u64 {
    let config = RegionConfig {
        mode: Mode::Fito,
        geometry: Geometry {
            ring_capacity: 8,
            slots: 0,
            slot_batch: 1,
        },
        cost: CostModel {
            nonposted_read_ns: 1_000,
            ..CostModel::zero()
        },
        mitigations,
        wakeup: Wakeup::Interrupt,
    };
    let region = Region::create(unique_shm_path("oae-swapring-cost"), &config).unwrap();
    let bounds = Bounds {
        count: DECISIONS,
        quiet_limit: 1_000_000,
        deadline: Duration::from_secs(60),
    };
    let (host, agent) = std::thread::scope(|s| {
        let agent = s.spawn(|| drive::fito_agent(&region, bounds));
        (drive::fito_host(&region, bounds), agent.join().unwrap())
    });
    assert_eq!(
        (host.done, agent.done),
        (DECISIONS, DECISIONS),
        "{} / {}",
        host.line(),
        agent.line()
    );
    assert_eq!(host.violation, None);
    assert_eq!(region.side(Side::Ipu).stat(STAT_NONPOSTED_READS), 0);
    region.side(Side::Host).stat(STAT_NONPOSTED_READS)
}

#[test]
fn remote_decisions_cost_non_posted_reads_and_prestaged_ones_do_not() {
    // At least the entry read of every decision (plus tail reads).
    let remote = reads_charged(Mitigations::none());
    assert!(
        remote >= DECISIONS,
        "{remote} reads for {DECISIONS} decisions"
    );
    let prestaged = reads_charged(Mitigations {
        prestaged_decisions: true,
        ..Mitigations::none()
    });
    assert_eq!(prestaged, 0, "prestaged decisions are read locally");
}
