//! The emulated PCIe costs are charged where the protocol says: a host
//! without prestaged decisions pays non-posted reads for each decision, a
//! host with them pays none.

use std::time::{Duration, Instant};

use oae_swapring::cost::CostModel;
use oae_swapring::drive::{self, Bounds};
use oae_swapring::fito::{Mitigations, Wakeup};
use oae_swapring::layout::{Geometry, Mode};
use oae_swapring::region::{Region, RegionConfig, unique_shm_path};

const DECISIONS: u64 = 50;
const READ_NS: u64 = 200_000;

fn exchange(mitigations: Mitigations) -> Duration {
    let config = RegionConfig {
        mode: Mode::Fito,
        geometry: Geometry {
            ring_capacity: 8,
            slots: 0,
            slot_batch: 1,
        },
        cost: CostModel {
            nonposted_read_ns: READ_NS,
            ..CostModel::zero()
        },
        mitigations,
        wakeup: Wakeup::Interrupt,
    };
    let region = Region::create(unique_shm_path("oae-swapring-cost"), &config).unwrap();
    let bounds = Bounds {
        count: DECISIONS,
        quiet_limit: 1_000_000,
        deadline: Duration::from_secs(30),
    };
    let start = Instant::now();
    let (host, agent) = std::thread::scope(|s| {
        let agent = s.spawn(|| drive::fito_agent(&region, bounds));
        (drive::fito_host(&region, bounds), agent.join().unwrap())
    });
    let took = start.elapsed();
    assert_eq!(
        (host.done, agent.done),
        (DECISIONS, DECISIONS),
        "{} / {}",
        host.line(),
        agent.line()
    );
    assert_eq!(host.violation, None);
    took
}

#[test]
fn remote_decisions_cost_non_posted_reads_and_prestaged_ones_do_not() {
    let remote = exchange(Mitigations::none());
    // At least the entry read of every decision (plus tail reads).
    assert!(
        remote >= Duration::from_nanos(DECISIONS * READ_NS),
        "{remote:?}"
    );
    let prestaged = exchange(Mitigations {
        prestaged_decisions: true,
        ..Mitigations::none()
    });
    assert!(
        prestaged < remote / 2,
        "prestaged {prestaged:?} vs remote {remote:?}"
    );
}
