//! The polling loop on the in-memory driver pair: two pipelines in one
//! process, no root, no NIC. Verdicts are counts; the clock only bounds a
//! loop that would never end.

use std::time::{Duration, Instant};

use oae_common::FaultConfig;
use oae_common::mac::format_mac;
use oae_pmd::fault::FaultInjector;
use oae_pmd::mem::{MemConfig, MemDriver, mem_pair};
use oae_proto::auth::{LinkIdentity, LinkKey};
use oae_proto::verb::{Output, RegionRef, Verb};
use oae_proto::{LinkConfig, NoObserver, Node, Permissions, RegionSpec, SharedMemory};

use super::*;
use crate::transport::{LinkKeys, Oae};
use oae_client::control::{Answer, ControlError, ErrorCode, OutputView};
use oae_client::outcome::Outcome;
use oae_config::{IdlePolicy, KickPolicy};
use std::sync::mpsc;

const MACS: [[u8; 6]; 3] = [[2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 3]];
const REGION: RegionRef = RegionRef { id: 1, key: 9 };
/// Outer bound of every loop here: only a hang reaches it.
const HANG: Duration = Duration::from_secs(60);

type Core<D = MemDriver> = Pipeline<D, Oae>;

/// How the cores of a test poll, and their link's settings.
#[derive(Clone, Copy)]
struct Setup {
    poll: PollSettings,
    link: LinkConfig,
    /// Links authenticated under one key, as `[queue.auth]` makes them.
    auth: bool,
}

impl Setup {
    fn kicks(kicks: KickPolicy) -> Setup {
        Setup {
            poll: PollSettings {
                kicks,
                ..PollSettings::default()
            },
            link: LinkConfig::default(),
            auth: false,
        }
    }
}

/// Node `i`'s core with one port, its one link to the other of two.
fn core<D: Driver>(driver: D, i: usize, setup: Setup) -> (Core<D>, Arc<QueueShared>) {
    core_with_ports(i, vec![(driver, 1 - i)], setup)
}

/// Node `i`'s core with a port per `(driver, peer)`: port `p` carries
/// link `p`, to node `peer` (MAC `MACS[peer]`).
fn core_with_ports<D: Driver>(
    i: usize,
    ports: Vec<(D, usize)>,
    setup: Setup,
) -> (Core<D>, Arc<QueueShared>) {
    let node = node(i, ports.len(), setup.link);
    let keys = match setup.auth {
        true => LinkKeys::Shared(0, LinkKey([0x42; 32])),
        false => LinkKeys::None,
    };
    let mut transport = Oae::new(node, keys);
    let peers: Vec<usize> = ports.iter().map(|&(_, peer)| peer).collect();
    for (link, &peer) in peers.iter().enumerate() {
        transport.link_identity(
            link as LinkId,
            LinkIdentity {
                local_mac: MACS[i],
                peer_mac: MACS[peer],
                channel: 0,
            },
        );
    }
    let ports = ports
        .into_iter()
        .enumerate()
        .map(|(p, (driver, peer))| {
            Port::new(
                driver,
                format!("mem{i}.{p}"),
                vec![(p as LinkId, MACS[peer])],
                setup.poll.kicks,
            )
        })
        .collect();
    let shared = Arc::new(QueueShared::new(256).expect("a waker"));
    let info = QueueInfo {
        index: 0,
        iface: format!("mem{i}"),
        queue_id: 0,
        core: None,
        driver: "mem".into(),
        mac: String::new(),
        discovers: false,
    };
    let core = Pipeline::new(
        ports,
        transport,
        info,
        shared.clone(),
        None,
        256,
        setup.poll,
    );
    (core, shared)
}

/// Node `i` (id `i + 1`) with `links` links and [`REGION`].
fn node(i: usize, links: usize, link: LinkConfig) -> Node<NoObserver, SharedMemory> {
    let mut node = Node::with_memory(i as u64 + 1, 1, NoObserver, SharedMemory::new());
    for _ in 0..links {
        node.add_link(link).expect("a link");
    }
    node.register(RegionSpec {
        id: REGION.id,
        key: REGION.key,
        len: 4096,
        permissions: Permissions::ALL,
    })
    .expect("a region");
    node
}

/// Node `i`'s core that lists no peer and finds them: `links` links for
/// neighbours to take, announcing every millisecond and letting go after
/// `forget_after` of a neighbour its link never heard.
fn discovering_core(
    driver: MemDriver,
    i: usize,
    links: u16,
    forget_after: Nanos,
) -> (Core, Arc<QueueShared>) {
    let setup = Setup::kicks(KickPolicy::Immediate);
    let node = node(i, usize::from(links), setup.link);
    let port = Port::new(driver, format!("mem{i}"), Vec::new(), setup.poll.kicks);
    let info = QueueInfo {
        iface: format!("mem{i}"),
        discovers: true,
        ..QueueInfo::default()
    };
    let shared = Arc::new(QueueShared::new(256).expect("a waker"));
    let cfg = oae_proto::discovery::DiscoveryConfig {
        announce_every: 1_000_000,
        forget_after,
    };
    let core = Pipeline::new(
        vec![port],
        Oae::new(node, LinkKeys::None),
        info,
        shared.clone(),
        None,
        256,
        setup.poll,
    )
    .discovering(Discovery::new(cfg, links, 1, 0));
    (core, shared)
}

/// Two cores joined by the in-memory pair, iterated until their link is up.
fn pair(kicks: KickPolicy) -> ([Core; 2], [Arc<QueueShared>; 2]) {
    let (a, b) = mem_pair(MemConfig::new(MACS[0]), MemConfig::new(MACS[1]));
    pair_of(a, b, Setup::kicks(kicks))
}

/// Two cores on drivers `a` and `b`, iterated until their link is up.
fn pair_of<D: Driver>(a: D, b: D, setup: Setup) -> ([Core<D>; 2], [Arc<QueueShared>; 2]) {
    let (a, sa) = core(a, 0, setup);
    let (b, sb) = core(b, 1, setup);
    let mut cores = [a, b];
    turn_until(&mut cores, "the link up", |cores| {
        cores
            .iter()
            .all(|c| c.transport.status(0).is_some_and(|s| s.up))
    });
    (cores, [sa, sb])
}

/// Iterates every core in turn until `done`; panics saying what was
/// awaited if only the hang bound ends it.
fn turn_until<D: Driver, const N: usize>(
    cores: &mut [Core<D>; N],
    what: &str,
    mut done: impl FnMut(&[Core<D>; N]) -> bool,
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
    let verb = Verb::FetchAdd {
        target: REGION,
        offset: (id % 512) as u32 * 8,
        add: 1,
    };
    Submission::to_first_link(id, verb)
}

/// Submits `n` FETCH-ADDs at core 0 and iterates until all complete;
/// their results.
fn run_faa<D: Driver, const N: usize>(
    cores: &mut [Core<D>; N],
    shared: &[Arc<QueueShared>; N],
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
    // Bytes as well as frames: every frame at least a header and an OAE
    // header, and what one core sent the other received, byte for byte,
    // once the wire is empty.
    let (a, b) = (cores[0].counters, cores[1].counters);
    for c in [a, b] {
        assert!(
            c.tx_bytes >= c.tx_frames * 30 && c.rx_bytes >= c.rx_frames * 30,
            "{c:?}"
        );
    }
    assert_eq!(a.tx_frames, b.rx_frames, "{a:?} {b:?}");
    assert_eq!(a.tx_bytes, b.rx_bytes, "{a:?} {b:?}");
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

/// Two cores over fault injectors, with faults on once the link is up.
fn faulty_pair(setup: Setup) -> ([Core<FaultInjector<MemDriver>>; 2], [Arc<QueueShared>; 2]) {
    let (a, b) = mem_pair(MemConfig::new(MACS[0]), MemConfig::new(MACS[1]));
    let (mut cores, shared) = pair_of(FaultInjector::new(a), FaultInjector::new(b), setup);
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
    (cores, shared)
}

#[test]
fn verbs_complete_exactly_once_under_injected_loss_and_corruption() {
    let (mut cores, shared) = faulty_pair(Setup::kicks(KickPolicy::Immediate));
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

/// Sends `what` to a core as the control thread does; the receiver of its
/// answer.
fn command(
    shared: &QueueShared,
    what: CommandKind,
) -> mpsc::Receiver<Result<Answer, ControlError>> {
    let (reply, answer) = mpsc::sync_channel(1);
    if shared.commands.push(Command { what, reply }).is_err() {
        panic!("the command queue is full");
    }
    answer
}

/// Iterates both cores until `answer` comes.
fn answered<D: Driver, const N: usize>(
    cores: &mut [Core<D>; N],
    answer: &mpsc::Receiver<Result<Answer, ControlError>>,
) -> Result<Answer, ControlError> {
    let mut got = None;
    turn_until(cores, "an answer", |_| {
        got = answer.try_recv().ok();
        got.is_some()
    });
    got.expect("answered")
}

#[test]
fn control_requests_are_answered_between_bursts_with_their_types() {
    let (mut cores, shared) = pair(KickPolicy::Immediate);
    let ask = |cores: &mut [Core; 2], what| answered(cores, &command(&shared[0], what));
    match ask(&mut cores, CommandKind::Status) {
        Ok(Answer::QueueStatus(s)) => assert!(s.all_up(), "{s:?}"),
        other => panic!("{other:?}"),
    }
    let cas = |key, new| {
        Box::new(Verb::CompareAndSwap {
            target: RegionRef { id: REGION.id, key },
            offset: 64,
            expected: 0,
            new,
        })
    };
    match ask(&mut cores, CommandKind::Verb(0, cas(REGION.key, 7))) {
        Ok(Answer::Verb(v)) => assert_eq!(
            v.result,
            OutputView::Cas {
                old: 0,
                swapped: true
            }
        ),
        other => panic!("{other:?}"),
    }
    match ask(&mut cores, CommandKind::Verb(0, cas(REGION.key + 1, 8))) {
        Err(e) => assert_eq!(
            (e.code, e.outcome),
            (ErrorCode::VerbFailed, Some(Outcome::RefusedBadKey)),
            "{e:?}"
        ),
        other => panic!("a wrong key was not refused: {other:?}"),
    }
    match ask(&mut cores, CommandKind::Verb(3, cas(REGION.key, 9))) {
        Err(e) => assert_eq!(e.code, ErrorCode::VerbNotSubmitted, "{e:?}"),
        other => panic!("a verb on no link was not refused: {other:?}"),
    }
    match ask(&mut cores, CommandKind::Stats) {
        Ok(Answer::QueueStats(s)) => {
            assert_eq!(s.links.len(), 1);
            assert!(s.pipeline.control_requests >= 4, "{:?}", s.pipeline);
        }
        other => panic!("{other:?}"),
    }
    match ask(&mut cores, CommandKind::RegionList) {
        Ok(Answer::Regions(r)) => assert_eq!(r.iter().map(|r| r.id).collect::<Vec<_>>(), [1]),
        other => panic!("{other:?}"),
    }
    // b's word holds the one CAS that was applied.
    match answered(&mut cores, &command(&shared[1], CommandKind::Hist)) {
        Ok(Answer::Hist(h)) => assert_eq!(h.latency_ns.count, 0, "b ran no verb"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn sleeping_cores_are_woken_by_frames_submissions_and_requests() {
    let setup = Setup {
        poll: PollSettings {
            idle: IdlePolicy::Sleep,
            spin_us: Some(0),
            ..PollSettings::default()
        },
        // Rounds long enough that an idle core has time to sleep between
        // its ticks.
        link: LinkConfig {
            min_round: 2_000_000,
            ..LinkConfig::default()
        },
        auth: false,
    };
    let (a, b) = mem_pair(MemConfig::new(MACS[0]), MemConfig::new(MACS[1]));
    let (a, sa) = core(a, 0, setup);
    let (b, sb) = core(b, 1, setup);
    let threads = [a, b].map(|c| std::thread::spawn(move || c.run(Duration::from_millis(100))));
    // Each status request wakes a's core; the links come up as the cores
    // wake each other with frames.
    let deadline = Instant::now() + HANG;
    while !matches!(sa.ask(CommandKind::Status, HANG), Ok(Answer::QueueStatus(s)) if s.all_up()) {
        assert!(Instant::now() < deadline, "no link up after {HANG:?}");
        std::thread::yield_now();
    }
    let mut done = Vec::new();
    for id in 0..100 {
        sa.submit(faa(id)).expect("room for the verb");
        while done.len() as u64 <= id {
            assert!(Instant::now() < deadline, "verb {id} did not complete");
            match sa.completions.pop() {
                Some(c) => done.push(c),
                None => std::thread::yield_now(),
            }
        }
    }
    let want: Vec<(u64, u64)> = (0..100).map(|id| (id, 0)).collect();
    assert_eq!(olds(&done), want);
    // b is asked nothing but this: a wake beyond the one this request
    // makes came from a's frames ringing the driver's bell.
    let b_idle = match sb.ask(CommandKind::Stats, HANG) {
        Ok(Answer::QueueStats(s)) => s.idle,
        other => panic!("{other:?}"),
    };
    for s in [&sa, &sb] {
        s.request_stop();
    }
    let reports = threads.map(|t| t.join().expect("the core ran to its end"));
    assert!(b_idle.sleeps > 0 && b_idle.woken >= 2, "b: {b_idle:?}");
    let a_idle = reports[0].idle;
    assert!(a_idle.sleeps > 0 && a_idle.woken > 0, "a: {a_idle:?}");
}

#[test]
fn an_authenticated_link_drops_what_was_corrupted_and_keeps_exactly_once() {
    let (mut cores, shared) = faulty_pair(Setup {
        auth: true,
        ..Setup::kicks(KickPolicy::Immediate)
    });
    let done = run_faa(&mut cores, &shared, 300);
    let want: Vec<(u64, u64)> = (0..300).map(|id| (id, 0)).collect();
    assert_eq!(olds(&done), want);
    let corrupted: u64 = cores
        .iter()
        .map(|c| c.ports[0].driver.counters().corrupted_by_fault)
        .sum();
    // The core opened every frame before reading it: what was corrupted
    // failed its tag (or, rarely, its replay window or key number) and
    // never reached the link as a malformed frame.
    let stats = cores.each_ref().map(|c| c.transport.stats(0));
    let auth_dropped: u64 = stats.iter().flat_map(|s| s.auth_dropped.values()).sum();
    let malformed: u64 = stats.iter().map(|s| s.get("malformed_total")).sum();
    assert!(corrupted > 0, "{stats:?}");
    assert_eq!((auth_dropped, malformed), (corrupted, 0), "{stats:?}");
}

#[test]
fn a_core_with_two_ports_serves_both_links_in_turn() {
    let (ab, ba) = mem_pair(MemConfig::new(MACS[0]), MemConfig::new(MACS[1]));
    let (ac, ca) = mem_pair(MemConfig::new(MACS[0]), MemConfig::new(MACS[2]));
    let setup = Setup::kicks(KickPolicy::Adaptive);
    let (a, sa) = core_with_ports(0, vec![(ab, 1), (ac, 2)], setup);
    let (b, sb) = core_with_ports(1, vec![(ba, 0)], setup);
    let (c, sc) = core_with_ports(2, vec![(ca, 0)], setup);
    let mut cores = [a, b, c];
    let shared = [sa, sb, sc];
    turn_until(&mut cores, "every link up", |cores| {
        cores
            .iter()
            .all(|c| (0..c.links as LinkId).all(|l| c.transport.status(l).is_some_and(|s| s.up)))
    });
    // Submissions go to a's first link (port 0, to b); control verbs name
    // its second (port 1, to c).
    let done = run_faa(&mut cores, &shared, 100);
    let want: Vec<(u64, u64)> = (0..100).map(|id| (id, 0)).collect();
    assert_eq!(olds(&done), want);
    for k in 0..5u32 {
        let verb = Box::new(Verb::FetchAdd {
            target: REGION,
            offset: 8 * k,
            add: 1,
        });
        match answered(&mut cores, &command(&shared[0], CommandKind::Verb(1, verb))) {
            Ok(Answer::Verb(v)) => assert_eq!(v.result, OutputView::Faa { old: 0 }, "word {k}"),
            other => panic!("word {k} on link 1: {other:?}"),
        }
    }
    // Each of a's ports carried its own link's frames both ways, and no
    // core took a frame for a link it does not have.
    for (p, port) in cores[0].ports.iter_mut().enumerate() {
        let s = port.driver.stats();
        assert!(s.tx_packets > 0 && s.rx_packets > 0, "port {p}: {s:?}");
    }
    for c in &cores {
        assert_eq!(c.counters.rx_foreign, 0, "{:?}", c.counters);
    }
}

#[test]
fn two_cores_that_list_no_peer_find_each_other_and_run_verbs() {
    let (a, b) = mem_pair(MemConfig::new(MACS[0]), MemConfig::new(MACS[1]));
    let (a, sa) = discovering_core(a, 0, 4, 60_000_000_000);
    let (b, sb) = discovering_core(b, 1, 4, 60_000_000_000);
    let mut cores = [a, b];
    turn_until(&mut cores, "a link found and up", |cores| {
        cores.iter().all(|c| c.status().all_up())
    });
    let done = run_faa(&mut cores, &[sa, sb], 50);
    assert_eq!(olds(&done).len(), 50);
    for (c, peer) in cores.iter().zip([MACS[1], MACS[0]]) {
        let status = c.status();
        // One neighbour, on link 0; the three vacant links are not shown.
        let links: Vec<_> = status.links.iter().map(|l| (l.link, &l.peer_mac)).collect();
        assert_eq!(links, [(0, &format_mac(peer))], "{status:?}");
        assert_eq!(c.counters.neighbours_found, 1, "{:?}", c.counters);
        assert!(c.counters.tx_announcements >= 1, "{:?}", c.counters);
    }
}

#[test]
fn an_announcement_never_reaches_the_link_of_its_sender() {
    let (mut cores, shared) = pair(KickPolicy::Immediate);
    let mut frame = [0u8; 128];
    frame[..6].copy_from_slice(&oae_proto::discovery::ANNOUNCE_MAC);
    frame[6..12].copy_from_slice(&MACS[0]);
    frame[12..14].copy_from_slice(&oae_proto::wire::ETHERTYPE.to_be_bytes());
    // Core 0's announcement, as a restarted core 0 would send it: were
    // it the link's, a HELLO naming no receiver would tell core 1's up
    // link that its peer lost it.
    let len = cores[0]
        .transport
        .write_announcement(&mut frame[14..])
        .unwrap();
    let before = cores[1].transport.stats(0);
    for _ in 0..8 {
        cores[1].ports[0].driver.inject(&frame[..14 + len]);
    }
    turn_until(&mut cores, "the announcements counted", |cores| {
        cores[1].counters.rx_announcements == 8
    });
    let after = cores[1].transport.stats(0);
    // Nothing reached the link: it counted no frame, malformed or not.
    assert_eq!(after.malformed, before.malformed);
    assert_eq!(after.get("rx_frames"), before.get("rx_frames"));
    assert!(cores[1].status().all_up());
    assert_eq!(olds(&run_faa(&mut cores, &shared, 20)).len(), 20);
}

#[test]
fn a_stranger_never_heard_is_let_go_and_one_that_said_hello_is_kept() {
    let (a, _stranger) = mem_pair(MemConfig::new(MACS[0]), MemConfig::new(MACS[2]));
    // Let go after 1 ms unless its link heard it.
    let (a, _sa) = discovering_core(a, 0, 1, 1_000_000);
    let mut cores = [a];
    let mut frame = [0u8; 128];
    frame[..6].copy_from_slice(&oae_proto::discovery::ANNOUNCE_MAC);
    frame[6..12].copy_from_slice(&MACS[2]);
    frame[12..14].copy_from_slice(&oae_proto::wire::ETHERTYPE.to_be_bytes());
    let len = Node::new(9, 1).write_announcement(&mut frame[14..]);
    assert_eq!(len, None, "a node without links announces nothing");
    let mut node = Node::new(9, 1);
    node.add_link(LinkConfig::default()).unwrap();
    let len = node.write_announcement(&mut frame[14..]).unwrap();
    // An announcement binds the stranger, and its link never hears it.
    cores[0].ports[0].driver.inject(&frame[..14 + len]);
    turn_until(&mut cores, "the stranger found", |c| {
        c[0].counters.neighbours_found == 1
    });
    // A second stranger finds no vacant link while the first holds it.
    frame[6..12].copy_from_slice(&MACS[1]);
    cores[0].ports[0].driver.inject(&frame[..14 + len]);
    turn_until(&mut cores, "no vacant link", |c| {
        c[0].counters.no_vacant_link == 1
    });
    turn_until(&mut cores, "the stranger let go", |c| {
        c[0].counters.neighbours_forgotten == 1
    });
    assert!(cores[0].status().links.is_empty());
    // The second says HELLO to this core: its link learns its epoch, and
    // keeps it (D7), heard or not from then on.
    frame[..6].copy_from_slice(&MACS[0]);
    cores[0].ports[0].driver.inject(&frame[..14 + len]);
    turn_until(&mut cores, "the second found", |c| {
        c[0].counters.neighbours_found == 2
    });
    let found = cores[0].now();
    turn_until(&mut cores, "3 ms past its deadline", |c| {
        c[0].now() > found + 3_000_000
    });
    assert_eq!(cores[0].counters.neighbours_forgotten, 1);
    let status = cores[0].status();
    assert_eq!(status.links[0].peer_mac, format_mac(MACS[1]), "{status:?}");
}

#[test]
fn a_discovering_core_leaves_no_deadline_in_the_past_once_its_neighbour_is_kept() {
    let (a, b) = mem_pair(MemConfig::new(MACS[0]), MemConfig::new(MACS[1]));
    // Let go after 1 ms unless heard: these are, and are kept (D7).
    let (a, _) = discovering_core(a, 0, 2, 1_000_000);
    let (b, _) = discovering_core(b, 1, 2, 1_000_000);
    let mut cores = [a, b];
    turn_until(&mut cores, "a link found and up", |cores| {
        cores.iter().all(|c| c.status().all_up())
    });
    let start = cores[0].now();
    turn_until(&mut cores, "3 ms past the neighbour's deadline", |c| {
        c[0].now() > start + 3_000_000
    });
    for c in &mut cores {
        c.iterate(true);
        let now = c.now();
        let due = c.discovery.as_ref().and_then(Discovery::poll_timeout);
        assert!(
            due.is_some_and(|t| t > now),
            "{due:?} at {now}: a timer due every turn"
        );
        assert_eq!(c.counters.neighbours_forgotten, 0);
    }
}
