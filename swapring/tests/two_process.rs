//! Both sides as separate processes over one real shared mapping: this
//! process plays one side, `oae-swapring-peer` the other. Then `kill -9` of
//! either side mid-run: the survivor must notice by counted interactions
//! and the region must show no half-applied swap.

use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use oae_swapring::bilateral::{HostSlot, Phase, SlotReport, Withdraw};
use oae_swapring::cost::CostModel;
use oae_swapring::drive::{self, Bounds, Report};
use oae_swapring::fito::Mitigations;
use oae_swapring::layout::{Geometry, Mode, RING_DECISIONS, RING_MESSAGES};
use oae_swapring::liveness::STAT_SWAPS;
use oae_swapring::region::{Region, RegionConfig, Side, unique_shm_path};

// Own idle polls (each yields the cpu) before the peer counts as gone: far
// more than a live peer descheduled on a busy 2-cpu machine ever causes.
const QUIET_LIMIT: u64 = 1_000_000;
const DEADLINE: Duration = Duration::from_secs(60);

fn bounds(count: u64) -> Bounds {
    Bounds {
        count,
        quiet_limit: QUIET_LIMIT,
        deadline: DEADLINE,
    }
}

fn region(mode: Mode, mitigations: Mitigations) -> Region {
    batched_region(mode, mitigations, 1)
}

/// Bilateral slots carrying up to `slot_batch` records each way.
fn batched_region(mode: Mode, mitigations: Mitigations, slot_batch: u64) -> Region {
    let config = RegionConfig {
        mode,
        geometry: Geometry {
            ring_capacity: 64,
            slots: 8,
            slot_batch,
        },
        cost: CostModel::zero(),
        mitigations,
        ..RegionConfig::default()
    };
    Region::create(unique_shm_path("oae-swapring-test"), &config).unwrap()
}

fn spawn_peer(scenario: &str, region: &Region, count: u64) -> Child {
    Command::new(env!("CARGO_BIN_EXE_oae-swapring-peer"))
        .arg(scenario)
        .arg(region.path())
        .arg(count.to_string())
        .arg(QUIET_LIMIT.to_string())
        .arg(DEADLINE.as_secs().to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the peer process")
}

/// Waits for the child at most `limit`, killing it (by its pid) if it
/// overstays; returns its status and what it printed.
fn finish(mut child: Child, limit: Duration) -> (ExitStatus, String) {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            return (status, String::from_utf8_lossy(&out.stdout).into_owned());
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("peer {} overstayed {limit:?}", child.id());
        }
        thread::sleep(Duration::from_millis(5));
    }
}

fn assert_clean(report: &Report, count: u64, peer: (ExitStatus, String)) {
    assert_eq!(report.violation, None, "{}", report.line());
    assert_eq!(report.done, count, "{}", report.line());
    assert!(peer.0.success(), "peer: {:?} {}", peer.0, peer.1);
    assert!(
        peer.1.contains(&format!("done={count} ")),
        "peer: {}",
        peer.1
    );
    assert!(peer.1.contains("violation=none"), "peer: {}", peer.1);
}

#[test]
fn fito_rings_deliver_every_message_and_decision_once_in_order() {
    for mitigations in [
        Mitigations::none(),
        Mitigations {
            write_batching: true,
            ..Mitigations::none()
        },
        Mitigations::all(),
    ] {
        let region = region(Mode::Fito, mitigations);
        let count = 20_000;
        let peer = spawn_peer("fito-agent", &region, count);
        let report = drive::fito_host(&region, bounds(count));
        assert_clean(&report, count, finish(peer, DEADLINE));
        let messages = region.ring(RING_MESSAGES);
        assert_eq!((messages.head(), messages.tail()), (count, count));
        assert_eq!(region.ring(RING_DECISIONS).tail(), count);
    }
}

#[test]
fn bilateral_swaps_commit_exactly_once_against_the_state_offered() {
    for slot_batch in [1, 5] {
        let region = batched_region(Mode::Bilateral, Mitigations::none(), slot_batch);
        let count = 20_000;
        let peer = spawn_peer("bilateral-agent", &region, count);
        let report = drive::bilateral_host(&region, bounds(count));
        let peer = finish(peer, DEADLINE);
        eprintln!(
            "batch {slot_batch}: host: {} / agent: {}",
            report.line(),
            peer.1.trim()
        );
        assert_clean(&report, count, peer.clone());
        assert_eq!(
            region.side(Side::Ipu).stat(STAT_SWAPS),
            count,
            "the IPU committed exactly the exchanges the host took"
        );
        // Batches of 1..=slot_batch records, each counted by both sides.
        let want_records: u64 = (0..count).map(|i| 1 + i % slot_batch).sum();
        assert_eq!(report.records, want_records, "{}", report.line());
        assert!(
            peer.1.contains(&format!("records={want_records} ")),
            "agent: {}",
            peer.1
        );
    }
}

#[test]
fn verbs_carrier_answers_every_request_once() {
    let region = region(Mode::Fito, Mitigations::none());
    let count = 20_000;
    let peer = spawn_peer("verbs-device", &region, count);
    let report = drive::verbs_host(&region, bounds(count));
    assert_clean(&report, count, finish(peer, DEADLINE));
}

/// Runs `survivor` here while the peer process runs `scenario`, and kills
/// the peer with SIGKILL once `progress` shows `after` exchanges.
fn kill_peer_midway(
    mode: Mode,
    slot_batch: u64,
    scenario: &str,
    survivor: fn(&Region, Bounds) -> Report,
    progress: impl Fn(&Region) -> u64 + Send + Sync,
) -> (Region, Report) {
    let region = batched_region(mode, Mitigations::none(), slot_batch);
    let count = u64::MAX / 2;
    let mut peer = spawn_peer(scenario, &region, count);
    let pid = peer.id();
    let killed = AtomicBool::new(false);
    let report = thread::scope(|s| {
        s.spawn(|| {
            let start = Instant::now();
            while progress(&region) < 5_000 && start.elapsed() < Duration::from_secs(30) {
                thread::sleep(Duration::from_millis(1));
            }
            peer.kill().expect("SIGKILL the peer by its pid");
            peer.wait().unwrap();
            killed.store(true, Ordering::Release);
        });
        survivor(&region, bounds(count))
    });
    assert!(killed.load(Ordering::Acquire), "peer {pid} was killed");
    assert!(
        report.peer_gone,
        "survivor did not notice: {}",
        report.line()
    );
    assert!(
        !report.deadline_hit,
        "noticed by its process ending or by counting, not by the deadline: {}",
        report.line()
    );
    assert_eq!(report.violation, None, "{}", report.line());
    assert!(
        report.done >= 1_000,
        "exchanges happened before the kill: {}",
        report.line()
    );
    (region, report)
}

#[test]
fn host_survives_ipu_killed_during_bilateral_swaps() {
    host_survives_ipu_killed_mid_swap(1);
}

#[test]
fn host_survives_ipu_killed_mid_batch() {
    host_survives_ipu_killed_mid_swap(7);
}

fn host_survives_ipu_killed_mid_swap(slot_batch: u64) {
    let (region, report) = kill_peer_midway(
        Mode::Bilateral,
        slot_batch,
        "bilateral-agent",
        drive::bilateral_host,
        |r| r.side(Side::Ipu).stat(STAT_SWAPS),
    );
    // bilateral_host already checked every slot; check again from outside.
    // The IPU counts a swap just after its compare-and-swap, so a kill in
    // between leaves its counter one short of the slots' truth.
    let swaps = region.side(Side::Ipu).stat(STAT_SWAPS);
    let committed = report.done + pending_swaps(&region);
    assert!(
        swaps == committed || swaps + 1 == committed,
        "ipu counted {swaps}, slots show {committed}: {}",
        report.line()
    );
    // With the IPU gone the host knows exactly where each batch stands:
    // every offer still out withdraws (no record of it was taken), every
    // swap takes whole, and nothing else is left.
    let batch = slot_batch as usize;
    let mut answer = vec![[0u64; oae_swapring::ring::RECORD_WORDS]; batch];
    for i in 0..region.slot_count() {
        let mut slot = HostSlot::new(region.slot(i), CostModel::zero());
        match slot.withdraw() {
            Withdraw::Withdrawn | Withdraw::NotOffered => {}
            Withdraw::AlreadySwapped => {
                let taken = slot.take(&mut answer);
                assert!(
                    matches!(taken, Ok(Some(x)) if x.count >= 1 && x.count <= batch),
                    "slot {i}: {taken:?}"
                );
            }
        }
        assert!(
            matches!(region.slot(i).inspect(), SlotReport::Consistent(c) if c.phase == Phase::Idle),
            "slot {i}: {:?}",
            region.slot(i).inspect()
        );
    }
}

fn pending_swaps(region: &Region) -> u64 {
    (0..region.slot_count())
        .filter(|&i| region.slot(i).ctl().phase == Phase::Swapped)
        .count() as u64
}

#[test]
fn ipu_survives_host_killed_during_bilateral_swaps() {
    kill_peer_midway(
        Mode::Bilateral,
        1,
        "bilateral-host",
        drive::bilateral_agent,
        |r| r.side(Side::Ipu).stat(STAT_SWAPS),
    );
}

#[test]
fn ipu_survives_host_killed_mid_batch() {
    kill_peer_midway(
        Mode::Bilateral,
        7,
        "bilateral-host",
        drive::bilateral_agent,
        |r| r.side(Side::Ipu).stat(STAT_SWAPS),
    );
}

#[test]
fn host_survives_ipu_killed_during_fito_exchanges() {
    let (region, report) = kill_peer_midway(Mode::Fito, 1, "fito-agent", drive::fito_host, |r| {
        r.ring(RING_DECISIONS).tail()
    });
    // Unbatched, each decision is published alone and then its MSI-X rung;
    // a kill between the two leaves one decision the host was never told of.
    let published = region.ring(RING_DECISIONS).tail();
    assert!(
        published - report.done <= 1,
        "host took {} of {published} published decisions",
        report.done
    );
    let messages = region.ring(RING_MESSAGES);
    assert!(
        messages.head() <= messages.tail()
            && messages.tail() - messages.head() <= messages.capacity()
    );
}

#[test]
fn ipu_survives_host_killed_during_fito_exchanges() {
    let (region, report) = kill_peer_midway(Mode::Fito, 1, "fito-host", drive::fito_agent, |r| {
        r.ring(RING_DECISIONS).tail()
    });
    assert!(report.done <= region.ring(RING_MESSAGES).tail());
}
