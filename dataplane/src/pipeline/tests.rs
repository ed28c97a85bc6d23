//! The polling loop on the in-memory driver pair: two pipelines in one
//! process, no root, no NIC. Verdicts are counts; the clock only bounds a
//! loop that would never end.

use std::time::{Duration, Instant};

use oae_common::FaultConfig;
use oae_pmd::fault::FaultInjector;
use oae_pmd::mem::{MemConfig, MemDriver, mem_pair};
use oae_proto::verb::{RegionRef, Verb};
use oae_proto::{LinkConfig, NoObserver, Node, Permissions, RegionSpec, SharedMemory};

use super::*;
use crate::config::KickPolicy;
use crate::transport::Oae;

const MACS: [[u8; 6]; 2] = [[2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]];
const REGION: RegionRef = RegionRef { id: 1, key: 9 };
/// Outer bound of every loop here: only a hang reaches it.
const HANG: Duration = Duration::from_secs(60);

type Core<D = MemDriver> = Pipeline<D, Oae>;

fn core<D: Driver>(driver: D, i: usize, kicks: KickPolicy) -> (Core<D>, Arc<QueueShared>) {
    let mut node = Node::with_memory(i as u64 + 1, 1, NoObserver, SharedMemory::new());
    node.add_link(LinkConfig::default()).expect("a link");
    node.register(RegionSpec {
        id: REGION.id,
        key: REGION.key,
        len: 4096,
        permissions: Permissions::ALL,
    })
    .expect("a region");
    let port = Port::new(driver, format!("mem{i}"), vec![(0, MACS[1 - i])], kicks);
    let shared = Arc::new(QueueShared::new(256).expect("a waker"));
    let info = QueueInfo {
        index: 0,
        iface: format!("mem{i}"),
        queue_id: 0,
        core: None,
        driver: "mem".into(),
        mac: String::new(),
        peer_macs: Vec::new(),
    };
    let poll = PollSettings {
        kicks,
        ..PollSettings::default()
    };
    let core = Pipeline::new(
        vec![port],
        Oae::new(node, None),
        info,
        shared.clone(),
        None,
        256,
        poll,
    );
    (core, shared)
}

/// Two cores joined by the in-memory pair, iterated until their link is up.
fn pair(kicks: KickPolicy) -> ([Core; 2], [Arc<QueueShared>; 2]) {
    let (a, b) = mem_pair(MemConfig::new(MACS[0]), MemConfig::new(MACS[1]));
    pair_of(a, b, kicks)
}

/// Two cores on drivers `a` and `b`, iterated until their link is up.
fn pair_of<D: Driver>(a: D, b: D, kicks: KickPolicy) -> ([Core<D>; 2], [Arc<QueueShared>; 2]) {
    let (a, sa) = core(a, 0, kicks);
    let (b, sb) = core(b, 1, kicks);
    let mut cores = [a, b];
    turn_until(&mut cores, "the link up", |cores| {
        cores
            .iter()
            .all(|c| c.transport.status(0).is_some_and(|s| s.up))
    });
    (cores, [sa, sb])
}

/// Iterates both cores in turn until `done`; panics saying what was
/// awaited if only the hang bound ends it.
fn turn_until<D: Driver>(
    cores: &mut [Core<D>; 2],
    what: &str,
    mut done: impl FnMut(&[Core<D>; 2]) -> bool,
) {
    let deadline = Instant::now() + HANG;
    while !done(cores) {
        assert!(Instant::now() < deadline, "no {what} after {HANG:?}");
        for c in cores.iter_mut() {
            c.iterate(true);
        }
    }
}

/// A FETCH-ADD of 1 to word `id` (of 512): verbs on words of their own
/// never wait for each other's locks.
fn faa(id: u64) -> Submission {
    Submission {
        id,
        verb: Verb::FetchAdd {
            target: REGION,
            offset: (id % 512) as u32 * 8,
            add: 1,
        },
    }
}

/// Submits `n` FETCH-ADDs at core 0 and iterates until all complete;
/// their results.
fn run_faa<D: Driver>(
    cores: &mut [Core<D>; 2],
    shared: &[Arc<QueueShared>; 2],
    n: u64,
) -> Vec<Completion> {
    let mut done = Vec::new();
    let mut next = 0;
    turn_until(cores, "completions of every verb", |_| {
        while next < n && shared[0].submit(faa(next)).is_ok() {
            next += 1;
        }
        while let Some(c) = shared[0].completions.pop() {
            done.push(c);
        }
        done.len() as u64 == n
    });
    done
}

fn driver_stats(c: &mut Core) -> DriverStats {
    c.ports[0].driver.stats()
}

/// The old values `n` FETCH-ADDs returned, by id; panics on any failure.
fn olds(done: &[Completion]) -> Vec<(u64, u64)> {
    let mut olds: Vec<(u64, u64)> = done
        .iter()
        .map(|c| match c.result {
            Ok(Output::FetchAdd { old }) => (c.id, old),
            ref other => panic!("verb {}: {other:?}", c.id),
        })
        .collect();
    olds.sort_unstable();
    olds
}

#[test]
fn verbs_complete_exactly_once_between_two_cores_in_memory() {
    let (mut cores, shared) = pair(KickPolicy::Immediate);
    // Twice over the same 200 words: every verb applied once, so each
    // word's old value is 0, then 1.
    for round in 0..2 {
        let done = run_faa(&mut cores, &shared, 200);
        let want: Vec<(u64, u64)> = (0..200).map(|id| (id, round)).collect();
        assert_eq!(olds(&done), want);
    }
    assert_eq!(cores[0].counters.app_submitted, 400);
}

#[test]
fn with_immediate_kicks_nothing_waits_for_one() {
    let (mut cores, shared) = pair(KickPolicy::Immediate);
    run_faa(&mut cores, &shared, 50);
    for c in &mut cores {
        assert_eq!(c.ports[0].driver.unkicked(), 0);
        let s = driver_stats(c);
        assert!(s.tx_kicks >= 1 && s.tx_kicks <= s.tx_packets, "{s:?}");
    }
}

#[test]
fn adaptive_kicks_send_as_many_frames_with_no_more_kicks() {
    let (mut cores, shared) = pair(KickPolicy::Adaptive);
    let done = run_faa(&mut cores, &shared, 200);
    assert_eq!(olds(&done).len(), 200);
    for c in &mut cores {
        let s = driver_stats(c);
        assert!(s.tx_kicks <= s.tx_packets, "{s:?}");
    }
}

#[test]
fn a_refused_kick_is_tried_again_and_its_frames_still_go() {
    let (mut cores, shared) = pair(KickPolicy::Adaptive);
    cores[0].ports[0].driver.refuse_next_kicks(3);
    let done = run_faa(&mut cores, &shared, 20);
    assert_eq!(olds(&done).len(), 20);
}

#[test]
fn frames_of_another_ethertype_or_a_stranger_are_counted_not_taken() {
    let (mut cores, _shared) = pair(KickPolicy::Immediate);
    let before = cores[1].counters;
    let mut other = [0u8; 64];
    other[..6].copy_from_slice(&MACS[1]);
    other[6..12].copy_from_slice(&MACS[0]);
    other[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    cores[1].ports[0].driver.inject(&other);
    let mut stranger = [0u8; 64];
    stranger[..6].copy_from_slice(&MACS[1]);
    stranger[6..12].copy_from_slice(&[2, 9, 9, 9, 9, 9]);
    stranger[12..14].copy_from_slice(&oae_proto::wire::ETHERTYPE.to_be_bytes());
    cores[1].ports[0].driver.inject(&stranger);
    turn_until(&mut cores, "both frames counted", |cores| {
        let c = cores[1].counters;
        c.rx_not_oae > before.rx_not_oae && c.rx_foreign > before.rx_foreign
    });
    let c = cores[1].counters;
    assert_eq!(
        (
            c.rx_not_oae - before.rx_not_oae,
            c.rx_foreign - before.rx_foreign
        ),
        (1, 1)
    );
}

#[test]
fn verbs_complete_exactly_once_under_injected_loss_and_corruption() {
    let (a, b) = mem_pair(MemConfig::new(MACS[0]), MemConfig::new(MACS[1]));
    let (mut cores, shared) = pair_of(
        FaultInjector::new(a),
        FaultInjector::new(b),
        KickPolicy::Immediate,
    );
    for (i, c) in cores.iter_mut().enumerate() {
        c.ports[0]
            .driver
            .set_faults(FaultConfig {
                drop_ppm: 20_000,
                corrupt_ppm: 10_000,
                seed: 11 + i as u64,
                ..FaultConfig::default()
            })
            .expect("OAE frames in scope");
    }
    for round in 0..2 {
        let done = run_faa(&mut cores, &shared, 300);
        // Words of their own: each old value is the round, each verb
        // applied once however its frames fared.
        let want: Vec<(u64, u64)> = (0..300).map(|id| (id, round)).collect();
        assert_eq!(olds(&done), want);
    }
    let injected = cores.each_ref().map(|c| c.ports[0].driver.counters());
    let dropped: u64 = injected.iter().map(|c| c.dropped_by_fault).sum();
    let corrupted: u64 = injected.iter().map(|c| c.corrupted_by_fault).sum();
    assert!(dropped > 0 && corrupted > 0, "{injected:?}");
    // A corrupted frame fails its CRC: counted malformed, never applied.
    let malformed: u64 = cores
        .iter()
        .map(|c| c.transport.stats(0).get("malformed_total"))
        .sum();
    assert!(malformed > 0, "{injected:?}");
}
