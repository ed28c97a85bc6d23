//! End to end over real links: two `oaed` processes in fresh network
//! namespaces, AF_XDP sockets on a veth pair, the XDP program loaded by aya,
//! driven through their control sockets. Needs root.

use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use oae_client::control::{
    Client, ControlError, ErrorCode, FaultChange, FaultsSet, HistReport, OutputView, RegionAdded,
    RegionDump, RegionView, Stopping, VerbAnswer, VerbSpec, WorkloadReport, from_hex, to_hex,
};
use oae_client::demo::DemoReport;
use oae_client::outcome::Outcome;
use oae_client::stats::{DataplaneStats, IdleCounters};
use oae_client::status::{DataplaneStatus, QueueFabric};
use oae_common::mac::{format_mac, parse_mac};
use oae_pmd::netns::VethPair;
use oae_tests::dataplanes::{
    Dataplanes, LOCAL_REGION, MACS, Options, SHARED_CPU_MIN_ROUND_NS, TARGET_KEY, TARGET_REGION,
    TestDriver, binary, polling_turn, shut_down, start_oaed,
};
use oae_tests::{CommandOutput, SCAPY_PYTHON, json_answer, json_failure, run};

fn verb(d: &Dataplanes, spec: VerbSpec) -> Result<OutputView, ControlError> {
    Ok(d.verb(0, spec)?.result)
}

fn target(offset: u32) -> (u16, u32, u32) {
    (TARGET_REGION, TARGET_KEY, offset)
}

#[test]
fn links_come_up_with_distinct_roles_and_epochs() {
    if !oae_tests::require_root("links_come_up_with_distinct_roles_and_epochs") {
        return;
    }
    let d = Dataplanes::start("up", &Options::default());
    let ((a_up, a), (b_up, b)) = (d.oae_link(0), d.oae_link(1));
    let logs = || {
        format!(
            "a: {a:?}\nb: {b:?}\n--- a's log:\n{}\n--- b's log:\n{}",
            d.log(0),
            d.log(1)
        )
    };
    assert!(a_up, "{}", logs());
    assert!(b_up, "{}", logs());
    assert_ne!(a.role, b.role, "one Alice, one Bob");
    assert_eq!(a.peer_epoch, b.epoch);
    assert_eq!(b.peer_epoch, a.epoch);
    assert_eq!(a.peer_id, 2);
    let xdp = &d.stats(1).xdp[0].counters;
    assert!(xdp.get("steered").copied() > Some(0), "{xdp:?}");
}

#[test]
fn every_verb_end_to_end() {
    if !oae_tests::require_root("every_verb_end_to_end") {
        return;
    }
    every_verb(&Dataplanes::start("verbs", &Options::default()));
}

/// The same dataplanes and pipeline over DPDK: net_memif ports joined by a
/// memif socket.
#[test]
fn every_verb_over_dpdk_memif() {
    if !oae_tests::require_root("every_verb_over_dpdk_memif") {
        return;
    }
    let options = Options {
        driver: TestDriver::DpdkMemif,
        ..Options::default()
    };
    let d = Dataplanes::start("memif", &options);
    let status = d.status(0);
    assert!(
        status.queues[0].queue.driver.starts_with("dpdk"),
        "{status:?}"
    );
    every_verb(&d);
    // No XDP program runs here, so there is no fault injector: said, not
    // silently ignored.
    let err = d
        .client(0)
        .fault(FaultChange {
            drop_ppm: Some(1),
            ..Default::default()
        })
        .unwrap_err();
    assert!(
        err.code == ErrorCode::Unsupported && err.message.contains("no XDP program"),
        "{err:?}"
    );
}

/// And over DPDK's net_af_xdp ports on the veth pair, on hugepage memory
/// (on 4 KiB pages the kernel drops the frames of mbufs that straddle a
/// page; oaed refuses that setup).
#[test]
fn every_verb_over_dpdk_af_xdp() {
    if !oae_tests::require_root("every_verb_over_dpdk_af_xdp") {
        return;
    }
    let options = Options {
        driver: TestDriver::DpdkAfXdp,
        ..Options::default()
    };
    every_verb(&Dataplanes::start("dpxdp", &options));
}

/// The model of RoCE's RC transport in the same pipeline: its verbs end to
/// end; the ones RC lacks refused with the reason.
#[test]
fn rc_model_runs_the_rc_verbs_end_to_end() {
    if !oae_tests::require_root("rc_model_runs_the_rc_verbs_end_to_end") {
        return;
    }
    let options = Options {
        rc_model: true,
        ..Options::default()
    };
    let d = Dataplanes::start("rcverbs", &options);
    assert_eq!(d.status(0).queues[0].transport, "rc-model");
    let (region, key, _) = target(0);
    let write = VerbSpec::Write {
        region,
        key,
        offset: 64,
        data: to_hex(&[7u8; 24]),
    };
    assert_eq!(verb(&d, write), Ok(OutputView::Write));
    let read = VerbSpec::Read {
        region,
        key,
        offset: 64,
        local_region: LOCAL_REGION,
        local_offset: 512,
        len: 24,
    };
    assert_eq!(
        verb(&d, read),
        Ok(OutputView::Read {
            data: to_hex(&[7u8; 24])
        })
    );
    assert_eq!(&d.region(0, LOCAL_REGION)[512..536], &[7u8; 24]);
    let cas = VerbSpec::Cas {
        region,
        key,
        offset: 0,
        expected: 0,
        new: 42,
    };
    assert_eq!(
        verb(&d, cas),
        Ok(OutputView::Cas {
            old: 0,
            swapped: true
        })
    );
    let faa = VerbSpec::Faa {
        region,
        key,
        offset: 0,
        add: 8,
    };
    assert_eq!(verb(&d, faa), Ok(OutputView::Faa { old: 42 }));
    let swap = VerbSpec::Swap {
        region,
        key,
        offset: 0,
        new: 1,
    };
    let err = verb(&d, swap).unwrap_err();
    assert!(
        err.code == ErrorCode::VerbNotSubmitted && err.message.contains("not an RC verb"),
        "{err:?}"
    );
    let counters = d.link_counters(1);
    assert_eq!(counters.get("executed"), 4, "{counters:?}");
    let out = run(Command::new(binary("oaectl"))
        .arg("--socket")
        .arg(&d.sockets[0])
        .arg("status"));
    assert!(
        out.success() && out.stdout.contains("RC transport model (not RoCE)"),
        "{out}"
    );
}

/// The RC model under loss from the XDP fault map: go-back-N and the ACK
/// timeout recover every frame, and the ledger matches both memories.
#[test]
fn rc_model_recovers_from_loss_with_go_back_n_and_timeouts() {
    if !oae_tests::require_root("rc_model_recovers_from_loss_with_go_back_n_and_timeouts") {
        return;
    }
    let options = Options {
        rc_model: true,
        ..Options::default()
    };
    let d = Dataplanes::start("rcloss", &options);
    d.start_workload(16, 3.0, 8);
    // Verbs completed before the phase, half a second in (both asserted
    // below).
    wait_workload_under_way(&d, Duration::from_millis(500));
    d.client(0)
        .workload_phase(0, 0, None, "loss")
        .expect("phase");
    drop_for(&d, 10_000, 3, Duration::from_millis(1500));
    let r = wait_workload(&d, Duration::from_secs(30));
    assert!(xdp_counter(&d, "dropped_by_fault") > 0);
    let a = d.link_counters(0);
    assert!(a.get("retransmissions") > 0, "{a:?}");
    assert_eq!(r.failed, 0, "no QP failed at 1 % loss: {r:?}");
    // Verbs completed from the phase's start on are counted in it too.
    assert_eq!(r.phases.len(), 1);
    assert_eq!(r.phases[0].name, "loss");
    assert!(r.phases[0].completed > 0 && r.phases[0].completed < r.completed);
    assert!(r.phases[0].started_s > 0.3, "{:?}", r.phases[0]);
    assert_eq!(
        r.per_verb
            .iter()
            .map(|(k, _)| k.as_str())
            .collect::<Vec<_>>(),
        ["read", "write", "cas", "faa"],
        "the default mix less what RC lacks (reads learn the lanes)"
    );
    assert_exactly_once(&d, &r);
}

/// Every verb from a to b, each result checked, then verbs outside the
/// registered memory refused with no effect.
fn every_verb(d: &Dataplanes) {
    let (region, key, _) = target(0);
    let w = verb(
        d,
        VerbSpec::Write {
            region,
            key,
            offset: 64,
            data: to_hex(&[7u8; 24]),
        },
    );
    assert_eq!(w, Ok(OutputView::Write));
    assert_eq!(
        verb(
            d,
            VerbSpec::Read {
                region,
                key,
                offset: 64,
                local_region: LOCAL_REGION,
                local_offset: 512,
                len: 24
            }
        ),
        Ok(OutputView::Read {
            data: to_hex(&[7u8; 24])
        })
    );
    assert_eq!(
        verb(
            d,
            VerbSpec::Cas {
                region,
                key,
                offset: 0,
                expected: 0,
                new: 41
            }
        ),
        Ok(OutputView::Cas {
            old: 0,
            swapped: true
        })
    );
    assert_eq!(
        verb(
            d,
            VerbSpec::Cas {
                region,
                key,
                offset: 0,
                expected: 0,
                new: 99
            }
        ),
        Ok(OutputView::Cas {
            old: 41,
            swapped: false
        })
    );
    assert_eq!(
        verb(
            d,
            VerbSpec::Faa {
                region,
                key,
                offset: 0,
                add: 1
            }
        ),
        Ok(OutputView::Faa { old: 41 })
    );
    assert_eq!(
        verb(
            d,
            VerbSpec::Swap {
                region,
                key,
                offset: 8,
                new: 5
            }
        ),
        Ok(OutputView::Swap { old: 0 })
    );
    assert_eq!(
        verb(
            d,
            VerbSpec::Mcas {
                region,
                key,
                words: vec![(0, 42, 1), (8, 5, 2)]
            }
        ),
        Ok(OutputView::Mcas {
            committed: true,
            old: vec![42, 5]
        })
    );
    assert_eq!(
        verb(
            d,
            VerbSpec::Mcas {
                region,
                key,
                words: vec![(0, 1, 10), (8, 999, 20)]
            }
        ),
        Ok(OutputView::Mcas {
            committed: false,
            old: vec![1, 2]
        })
    );
    // Bilateral swap: a's local block (zeros) trades places with b's 7s.
    assert_eq!(
        verb(
            d,
            VerbSpec::Bswap {
                region,
                key,
                offset: 64,
                local_region: LOCAL_REGION,
                local_offset: 0,
                len: 24
            }
        ),
        Ok(OutputView::Bswap {
            data: to_hex(&[7u8; 24])
        })
    );
    assert_eq!(&d.region(0, LOCAL_REGION)[..24], &[7u8; 24]);
    let b = d.region(1, TARGET_REGION);
    assert_eq!(&b[64..88], &[0u8; 24]);
    assert_eq!(u64::from_le_bytes(b[0..8].try_into().unwrap()), 1);
    assert_eq!(u64::from_le_bytes(b[8..16].try_into().unwrap()), 2);

    // Outside the registered memory: refused, and nothing changes.
    let before = d.region(1, TARGET_REGION);
    for bad in [
        VerbSpec::Cas {
            region,
            key,
            offset: 65536,
            expected: 0,
            new: 1,
        },
        VerbSpec::Write {
            region: 9,
            key,
            offset: 0,
            data: "ff".into(),
        },
        VerbSpec::Faa {
            region,
            key: key + 1,
            offset: 0,
            add: 1,
        },
        VerbSpec::Faa {
            region,
            key,
            offset: 3,
            add: 1,
        },
    ] {
        let err = verb(d, bad.clone()).expect_err("refused");
        assert!(
            err.code == ErrorCode::VerbFailed
                && err
                    .outcome
                    .is_some_and(|o| o.name().starts_with("refused_")),
            "{bad:?}: {err:?}"
        );
    }
    assert_eq!(d.region(1, TARGET_REGION), before);
    assert_eq!(d.link(1).state.locked_words, 0);
}

#[test]
fn arp_and_udp_still_pass_with_xdp_attached() {
    if !oae_tests::require_root("arp_and_udp_still_pass_with_xdp_attached") {
        return;
    }
    let d = Dataplanes::start("arp", &Options::default());
    let out = run(d.pair.command(0, "ping").args([
        "-c",
        "3",
        "-i",
        "0.2",
        "-W",
        "2",
        &d.pair.ip[1].to_string(),
    ]));
    assert!(out.success(), "ping through the XDP program failed:\n{out}");
    // UDP both ways with a plain socket in each namespace.
    let b_addr = format!("{}:7777", d.pair.ip[1]);
    let (bound, is_bound) = mpsc::channel();
    let receiver = {
        let ns = d.pair.ns[1].clone();
        let addr = b_addr.clone();
        std::thread::spawn(move || {
            oae_pmd::netns::enter(&ns).unwrap();
            let s = std::net::UdpSocket::bind(&addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            // Only fails if the test already gave up waiting.
            let _ = bound.send(());
            let mut buf = [0u8; 64];
            let (n, from) = s.recv_from(&mut buf).unwrap();
            s.send_to(&buf[..n], from).unwrap();
            buf[..n].to_vec()
        })
    };
    // A datagram sent before the bind would be answered "port unreachable"
    // and lost, so a sends only once b's socket exists.
    if let Err(e) = is_bound.recv_timeout(Duration::from_secs(5)) {
        panic!("waiting for the UDP receiver to bind {b_addr} in b's namespace: {e}");
    }
    let ns = d.pair.ns[0].clone();
    let echoed = std::thread::spawn(move || {
        oae_pmd::netns::enter(&ns).unwrap();
        let s = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.send_to(b"hello over udp", &b_addr).unwrap();
        let mut buf = [0u8; 64];
        let n = s.recv(&mut buf).unwrap();
        buf[..n].to_vec()
    })
    .join()
    .unwrap();
    assert_eq!(receiver.join().unwrap(), b"hello over udp");
    assert_eq!(echoed, b"hello over udp");
    let passed = xdp_counter_of(&d, 1, "passed");
    assert!(
        passed >= 4,
        "ARP, ICMP and UDP went to the kernel: passed = {passed}"
    );
    assert!(d.link(0).state.up);
}

fn workload(d: &Dataplanes) -> WorkloadReport {
    d.client(0)
        .workload_status(0, 0, None)
        .expect("workload status")
}

/// Waits (bounded) until the workload has run for `lead` by its own clock
/// and completed verbs, so that a fault injected next hits a workload under
/// way, that far into it.
fn wait_workload_under_way(d: &Dataplanes, lead: Duration) {
    d.wait_for(
        lead + Duration::from_secs(10),
        &format!("the workload to run for {lead:?} and complete verbs"),
        |d| {
            let r = workload(d);
            r.elapsed_s >= lead.as_secs_f64() && r.completed > 0
        },
    );
}

fn wait_workload(d: &Dataplanes, limit: Duration) -> WorkloadReport {
    d.wait_for(limit, "the workload to finish", |d| !workload(d).running);
    workload(d)
}

/// Both sides' memory equals the ledger's model, and no result
/// contradicted it.
fn assert_exactly_once(d: &Dataplanes, r: &WorkloadReport) {
    assert_eq!(r.mismatches, 0, "results contradicting the ledger: {r:?}");
    let remote = from_hex(&r.expected_remote).unwrap();
    let local = from_hex(&r.expected_local).unwrap();
    assert_eq!(
        &d.region(1, TARGET_REGION)[..remote.len()],
        &remote[..],
        "target memory vs ledger"
    );
    assert_eq!(
        &d.region(0, LOCAL_REGION)[..local.len()],
        &local[..],
        "local memory vs ledger"
    );
    assert!(r.completed > 0);
}

fn faults(d: &Dataplanes, change: FaultChange) {
    for i in 0..2 {
        d.client(i).fault(change.clone()).expect("fault set");
    }
}

/// Both XDP programs drop `ppm` of the OAE frames (dice seeded with
/// `seed`) for `how_long`, then none.
fn drop_for(d: &Dataplanes, ppm: u32, seed: u64, how_long: Duration) {
    faults(
        d,
        FaultChange {
            drop_ppm: Some(ppm),
            seed: Some(seed),
            ..Default::default()
        },
    );
    // The fault window itself, not a wait for readiness: the workload runs
    // under loss for this long.
    std::thread::sleep(how_long);
    faults(
        d,
        FaultChange {
            drop_ppm: Some(0),
            ..Default::default()
        },
    );
}

/// XDP counter `name` of dataplane `i`'s interface.
fn xdp_counter_of(d: &Dataplanes, i: usize, name: &str) -> u64 {
    let stats = d.stats(i);
    match stats.xdp.first().and_then(|x| x.counters.get(name)) {
        Some(&n) => n,
        None => panic!("no XDP counter {name} at dataplane {i}: {stats:?}"),
    }
}

/// XDP counter `name`, both interfaces together.
fn xdp_counter(d: &Dataplanes, name: &str) -> u64 {
    (0..2).map(|i| xdp_counter_of(d, i, name)).sum()
}

#[test]
fn loss_and_corruption_from_the_xdp_fault_map_keep_exactly_once() {
    if !oae_tests::require_root("loss_and_corruption_from_the_xdp_fault_map_keep_exactly_once") {
        return;
    }
    let d = Dataplanes::start("faults", &Options::default());
    d.start_workload(16, 4.0, 3);
    wait_workload_under_way(&d, Duration::from_millis(500));
    drop_for(&d, 20_000, 9, Duration::from_millis(1200));
    faults(
        &d,
        FaultChange {
            corrupt_ppm: Some(20_000),
            corrupt_offset: Some(u32::MAX),
            ..Default::default()
        },
    );
    // The corruption window itself, as in `drop_for`: nothing is awaited.
    std::thread::sleep(Duration::from_millis(1200));
    faults(
        &d,
        FaultChange {
            corrupt_ppm: Some(0),
            ..Default::default()
        },
    );
    let r = wait_workload(&d, Duration::from_secs(30));
    assert!(xdp_counter(&d, "dropped_by_fault") > 0);
    assert!(xdp_counter(&d, "corrupted_by_fault") > 0);
    let malformed: u64 = (0..2)
        .map(|i| d.link_counters(i).get("malformed_total"))
        .sum();
    assert!(malformed > 0, "corrupted frames are caught and counted");
    // The link is ordered (veth): every loss is found by order, none waits
    // for patience.
    let (a, b) = (d.link_counters(0), d.link_counters(1));
    assert!(
        a.get("lost_by_order") > 0,
        "losses found by order; a: {a:?}"
    );
    assert_eq!(a.get("lost_by_patience"), 0, "a: {a:?}");
    assert_eq!(b.get("lost_by_patience"), 0, "b: {b:?}");
    assert_exactly_once(&d, &r);
    assert!(d.link(0).state.up);
}

/// A polling core's CPU time so far (seconds) and its idle counters.
fn polling_cpu(d: &Dataplanes, i: usize) -> (f64, IdleCounters) {
    let q = d.stats(i).queues.swap_remove(0);
    (q.cpu.total_s(), q.idle)
}

#[test]
fn sleeping_cores_keep_the_link_up_and_leave_the_cpu() {
    if !oae_tests::require_root("sleeping_cores_keep_the_link_up_and_leave_the_cpu") {
        return;
    }
    // 10 ms rounds: a sleeping core wakes into CPUs that other tests'
    // spinning dataplanes (and anything else on a loaded machine) hold, and
    // a peer must be silent for 8 rounds before it is declared unreachable
    // (the link's default, which this test once ran with); 2 ms rounds gave
    // that only 16 ms, less than a loaded machine's wakeup.
    let options = Options {
        poll: Some("idle = \"sleep\""),
        min_round_ns: Some(10_000_000),
        ..Options::default()
    };
    let d = Dataplanes::start("sleep", &options);
    let before: Vec<_> = (0..2)
        .map(|i| (d.oae_link(i).1, d.link_counters(i), polling_cpu(&d, i).0))
        .collect();
    // An idle stretch of a second, about 100 of the links' 10 ms rounds,
    // watched throughout: the point is what happens while nothing does.
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(1) {
        for i in 0..2 {
            let link = d.link(i);
            assert!(link.state.up, "side {i} while idle: {link:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let wall = started.elapsed().as_secs_f64();
    for (i, (link_before, counters_before, cpu_before)) in before.iter().enumerate() {
        let (link, counted) = (d.oae_link(i).1, d.link_counters(i));
        let (cpu, idle) = polling_cpu(&d, i);
        let heard = counted.get("rx_frames") - counters_before.get("rx_frames");
        // Liveness ran while the cores slept: a tick or its tock every
        // round (bounded below loosely: a loaded machine stretches rounds),
        // and neither end saw its peer restart or vanish.
        assert!(
            heard >= 25,
            "side {i}: {heard} frames in {wall:.2} s: {counted:?}"
        );
        assert_eq!(
            link.peer_epoch, link_before.peer_epoch,
            "side {i}: {link:?}"
        );
        assert_eq!(
            counted.get("unreachable_declared"),
            counters_before.get("unreachable_declared"),
            "side {i}: {counted:?}"
        );
        // A spinning core uses all of the wall time; a sleeping one a
        // sliver (the bound leaves room for a loaded machine's wakeups).
        let used = cpu - cpu_before;
        eprintln!(
            "side {i}: {used:.3} s of CPU in {wall:.2} s idle, {heard} frames heard, {idle:?}"
        );
        assert!(
            used < 0.5 * wall,
            "side {i} used {used:.3} s of CPU in {wall:.2} s idle: {idle:?}"
        );
        assert!(idle.sleeps > 0, "side {i}: {idle:?}");
    }
    // Asleep or not, a verb gets its answer, and a workload keeps
    // exactly-once.
    let (region, key, offset) = target(64);
    let out = verb(
        &d,
        VerbSpec::Cas {
            region,
            key,
            offset,
            expected: 0,
            new: 7,
        },
    )
    .expect("CAS on a sleeping pair");
    assert_eq!(
        out,
        OutputView::Cas {
            old: 0,
            swapped: true
        }
    );
    d.start_workload(16, 1.0, 5);
    let r = wait_workload(&d, Duration::from_secs(30));
    assert!(r.completed > 0, "{r:?}");
    assert_exactly_once(&d, &r);
}

#[test]
fn link_down_and_up_from_the_xdp_fault_map_keep_exactly_once() {
    if !oae_tests::require_root("link_down_and_up_from_the_xdp_fault_map_keep_exactly_once") {
        return;
    }
    let d = Dataplanes::start("flap", &Options::default());
    d.start_workload(16, 5.0, 4);
    wait_workload_under_way(&d, Duration::from_millis(800));
    faults(
        &d,
        FaultChange {
            link_down: Some(true),
            ..Default::default()
        },
    );
    d.wait_for(
        Duration::from_secs(10),
        "a to declare the link unreachable",
        |d| d.oae_link(0).1.unreachable,
    );
    faults(
        &d,
        FaultChange {
            link_down: Some(false),
            ..Default::default()
        },
    );
    d.wait_up(Duration::from_secs(10));
    let r = wait_workload(&d, Duration::from_secs(30));
    assert!(xdp_counter(&d, "dropped_by_fault") > 0);
    assert_exactly_once(&d, &r);
    assert_eq!(d.oae_link(0).1.in_doubt, 0);
    assert_eq!(d.link(1).state.locked_words, 0);
}

#[test]
fn killing_the_target_mid_workload_is_noticed_and_resolved() {
    if !oae_tests::require_root("killing_the_target_mid_workload_is_noticed_and_resolved") {
        return;
    }
    let options = Options {
        unreachable_after_rounds: 8,
        ..Options::default()
    };
    let mut d = Dataplanes::start("kill", &options);
    let first_epoch = d.oae_link(1).1.epoch;
    d.start_workload(16, 6.0, 5);
    wait_workload_under_way(&d, Duration::from_millis(1000));
    d.kill9(1);
    // The survivor notices within the configured number of round trips: 8
    // rounds of a few ms here (SHARED_CPU_MIN_ROUND_NS), so two seconds is
    // generous.
    d.wait_for(Duration::from_secs(2), "a to notice b is gone", |d| {
        d.oae_link(0).1.unreachable
    });
    d.launch(1);
    d.wait_up(Duration::from_secs(10));
    let restarted = d.oae_link(1).1;
    assert!(restarted.epoch > first_epoch, "a new incarnation");
    assert_eq!(d.oae_link(0).1.peer_epoch, restarted.epoch);
    let r = wait_workload(&d, Duration::from_secs(30));
    // Verbs in doubt when b died completed as PeerRestarted (their effects
    // died with b's memory); the lanes re-read the new memory and the
    // ledger still matches both sides exactly.
    assert_exactly_once(&d, &r);
    assert_eq!(d.oae_link(0).1.in_doubt, 0);
}

#[test]
fn killing_the_initiator_presumes_commit_at_the_target() {
    if !oae_tests::require_root("killing_the_initiator_presumes_commit_at_the_target") {
        return;
    }
    let mut d = Dataplanes::start("killa", &Options::default());
    d.start_workload(16, 30.0, 6);
    wait_workload_under_way(&d, Duration::from_millis(800));
    d.kill9(0);
    d.launch(0);
    d.wait_up(Duration::from_secs(10));
    // Whatever a's dead incarnation left tentative at b was committed, so no
    // word stays locked and nothing is left to reverse.
    d.wait_for(
        Duration::from_secs(5),
        "b to resolve a's tentative transfers",
        |d| {
            let l = d.link(1);
            l.state.locked_words == 0 && l.state.oae().is_some_and(|o| o.tentative == 0)
        },
    );
    let counters = d.link_counters(1);
    let presumed = counters.get("presumed_commits");
    let restarts = counters.get("peer_restarts");
    assert_eq!(restarts, 1);
    // The new a works normally.
    let (region, key, _) = target(0);
    verb(
        &d,
        VerbSpec::Faa {
            region,
            key,
            offset: 4096,
            add: 1,
        },
    )
    .expect("verb after restart");
    eprintln!("presumed commits: {presumed}");
}

/// Frames crafted with scapy from a's namespace, with a's MAC so they reach
/// b's link: each is counted as malformed for its reason and dropped, and
/// the link stays up.
#[test]
fn malformed_frames_from_scapy_are_counted_and_dropped() {
    if !oae_tests::require_root("malformed_frames_from_scapy_are_counted_and_dropped") {
        return;
    }
    let d = Dataplanes::start("scapy", &Options::default());
    let before = d.link_counters(1).malformed;
    let valid = hello_frame();
    let mut bad_crc = valid.clone();
    let last = bad_crc.len() - 1;
    bad_crc[last] ^= 0xff;
    let mut bad_version = valid.clone();
    bad_version[0] = (0xF << 4) | (bad_version[0] & 0x0F);
    oae_proto::wire::seal(&mut bad_version);
    let mut wrong_slices = valid.clone();
    wrong_slices.extend_from_slice(&[0u8; 64]);
    let random: Vec<u8> = (0..64u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let frames = [
        ("truncated", valid[..40].to_vec()),
        ("bad crc", bad_crc),
        ("unknown version", bad_version),
        ("wrong slice count", wrong_slices),
        ("random bytes", random),
    ];
    let script = format!(
        "from scapy.all import Ether, Raw, sendp\n\
         for h in {hexes:?}:\n    \
         sendp(Ether(src='02:0a:e0:00:00:01', dst='02:0a:e0:00:00:02', type=0x88b5)/Raw(bytes.fromhex(h)), iface='{iface}', count=3, verbose=0)\n",
        hexes = frames.iter().map(|(_, f)| to_hex(f)).collect::<Vec<_>>(),
        iface = d.pair.ifname[0],
    );
    let out = run(d.pair.command(0, SCAPY_PYTHON).args(["-c", &script]));
    assert!(out.success(), "scapy failed: {out}");
    d.wait_for(Duration::from_secs(5), "15 malformed frames counted", |d| {
        d.link_counters(1).get("malformed_total") >= 15
    });
    let after = d.link_counters(1).malformed;
    let grew: Vec<&String> = after
        .iter()
        .filter(|&(k, v)| *v > before.get(k).copied().unwrap_or(0))
        .map(|(k, _)| k)
        .collect();
    assert!(
        grew.len() >= 3,
        "several distinct reasons counted: {after:?}"
    );
    assert!(d.link(1).state.up);
    assert!(d.link(0).state.up);
    let (region, key, _) = target(0);
    verb(
        &d,
        VerbSpec::Faa {
            region,
            key,
            offset: 0,
            add: 1,
        },
    )
    .expect("the link still works");
}

/// A well-formed HELLO from a node nobody knows: the template the
/// malformed frames are cut from.
fn hello_frame() -> Vec<u8> {
    let mut node = oae_proto::Node::new(77, 1);
    let link = node.add_link(oae_proto::LinkConfig::default()).unwrap();
    let mut buf = [0u8; oae_proto::wire::MAX_FRAME];
    let n = node.poll_transmit(link, 0, &mut buf).expect("a hello");
    buf[..n].to_vec()
}

#[test]
fn bad_configs_are_refused_with_what_to_fix() {
    let dir = std::env::temp_dir().join(format!("oae-badcfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../configs/veth-pair.toml"
    ))
    .unwrap();
    let cases = [
        (
            good.replace("slots = 64", "slotz = 64"),
            "unknown field `slotz`",
        ),
        (
            good.replace("credits = 64", "credits = 100"),
            "link.credits",
        ),
        (good.replace("perms = \"rwa\"", "perms = \"rwx\""), "perms"),
        (
            good.replace("peer_mac = \"02:0a:e0:00:00:02\"", "peer_mac = \"nope\""),
            "not a MAC address",
        ),
        (
            // Dataplane a's core: `--name a` checks a's table.
            good.replace("core = 0", "core = 999"),
            "this machine has cores",
        ),
        ("this is = not toml [".to_string(), "TOML"),
        // Bounds start-up needs, checked before it: these used to pass the
        // check and then abort at start.
        (
            good.replace(
                "credits = 64\n",
                "credits = 64\nsubmit_queue = 1000000000000\n",
            ),
            "link.submit_queue: must be from 1 to 65536",
        ),
        (
            good.replace(
                "credits = 64\n",
                "credits = 64\nsubmit_queue = 9223372036854775807\n",
            ),
            "link.submit_queue",
        ),
        (
            good.clone()
                + &(10..110)
                    .map(|id| {
                        format!(
                            "[[dataplane.a.region]]\nid = {id}\nkey = 1\nlen = 8\nperms = \"r\"\n"
                        )
                    })
                    .collect::<String>(),
            "102 regions: a dataplane holds at most 64",
        ),
        (
            good.replacen(
                "credits = 64\n",
                "credits = 64\n[dataplane.a.queue.auth]\nkey = \"a\u{e9}a\"\n",
                1,
            ),
            "not a hex digit",
        ),
    ];
    for (i, (text, expected)) in cases.iter().enumerate() {
        let path = dir.join(format!("bad{i}.toml"));
        std::fs::write(&path, text).unwrap();
        let out = run(Command::new(binary("oaed"))
            .arg("--config")
            .arg(&path)
            .args(["--name", "a", "--check"]));
        assert!(!out.success(), "case {i} accepted: {out}");
        assert!(
            out.stderr.to_lowercase().contains(&expected.to_lowercase()),
            "case {i}: stderr should mention '{expected}': {out}"
        );
    }
    // A region larger than the process may allocate: refused by the check
    // with the limit named (it used to abort at start).
    let huge = dir.join("huge-region.toml");
    std::fs::write(&huge, good.replace("len = 65536", "len = 4294967288")).unwrap();
    let out = run(Command::new("sh").arg("-c").arg(format!(
        "ulimit -v 6000000 && exec {} --config {} --name a --check",
        binary("oaed").display(),
        huge.display()
    )));
    assert!(
        !out.success(),
        "a region over the memory limit was accepted: {out}"
    );
    // The lowest limit is named: ulimit -v here, or a smaller machine's.
    assert!(
        out.stderr.contains("memory limit of")
            && ["RLIMIT_AS", "memory.max", "MemTotal"]
                .iter()
                .any(|l| out.stderr.contains(l)),
        "the refusal should name the limit: {out}"
    );
    for (name, path) in [
        (
            "host-nic.toml",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/host-nic.toml"),
        ),
        (
            "ipu.toml",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/ipu.toml"),
        ),
    ] {
        let out = run(Command::new(binary("oaed")).args(["--config", path, "--check"]));
        assert!(
            out.success() && out.stdout.contains("valid"),
            "{name} checks: {out}"
        );
    }
    for (file, name) in [
        (
            concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/dpdk-memif.toml"),
            "a",
        ),
        (
            concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/dpdk-memif.toml"),
            "b",
        ),
        (
            concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/dpdk-af-xdp.toml"),
            "a",
        ),
        (
            concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/dpdk-af-xdp.toml"),
            "b",
        ),
    ] {
        let out =
            run(Command::new(binary("oaed")).args(["--config", file, "--name", name, "--check"]));
        assert!(
            out.success() && out.stdout.contains("valid"),
            "{file} {name}: {out}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// DPDK's own failures come back from oaed as messages that say what to
/// fix, and oaed exits non-zero.
#[test]
fn dpdk_errors_say_what_to_fix() {
    let dir = std::env::temp_dir().join(format!("oae-dpdkerr-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = |dpdk: &str, port: &str| {
        format!(
            "name = \"e\"\nnode_id = 1\ncontrol_socket = \"{dir}/e.sock\"\n\
             state_dir = \"{dir}/state\"\n[dpdk]\n{dpdk}\n[[queue]]\ndriver = \"dpdk\"\n\
             dpdk_port = \"{port}\"\npeer_mac = \"02:00:00:00:00:02\"\n",
            dir = dir.display()
        )
    };
    let prefix = format!("--file-prefix=oae-dpdkerr-{}", std::process::id());
    let mut cases = vec![
        (
            config("vdevs = [\"net_bogus0\"]", "net_bogus0"),
            "check the vdev names",
        ),
        (
            config("vdevs = [\"net_ring0\"]", "net_memif7"),
            "--vdev=net_memif7",
        ),
    ];
    let hugepages = std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("HugePages_Total:") && !l.ends_with(" 0"));
    if !hugepages {
        // Without hugepages, EAL arguments that need them are refused with
        // the alternative.
        cases.push((
            config(
                &format!("vdevs = [\"net_ring0\"]\neal_args = [\"--no-pci\", \"{prefix}\"]"),
                "net_ring0",
            ),
            "--no-huge --no-shconf",
        ));
    }
    for (i, (text, expected)) in cases.iter().enumerate() {
        let path = dir.join(format!("case{i}.toml"));
        std::fs::write(&path, text).unwrap();
        let out = run(Command::new(binary("oaed")).arg("--config").arg(&path));
        assert!(!out.success(), "case {i} started: {out}");
        assert!(
            out.stderr.contains(expected),
            "case {i}: stderr should say '{expected}': {out}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
    // The hugepage case asked for DPDK's shared configuration, which DPDK
    // keeps in its runtime directory after the failed start.
    let runtime = format!(
        "/var/run/dpdk/{}",
        prefix.trim_start_matches("--file-prefix=")
    );
    let _ = std::fs::remove_dir_all(runtime);
}

#[test]
fn ctl_against_a_stopped_daemon_says_so() {
    let socket = std::env::temp_dir().join(format!("oae-nobody-{}.sock", std::process::id()));
    let out = run(Command::new(binary("oaectl"))
        .arg("--socket")
        .arg(&socket)
        .arg("status"));
    assert!(!out.success(), "{out}");
    assert!(out.stderr.contains("no dataplane is listening"), "{out}");
    let out = run(Command::new(binary("oaectl")).args(["fault", "set", "drop=2"]));
    assert!(!out.success(), "{out}");
    assert!(out.stderr.contains("between 0 and 1"), "{out}");
}

/// `--json` on the commands that need no dataplane, and on failures before
/// one is reached: one document on standard output, or one error report
/// with its code and the exit status of its class.
#[test]
fn ctl_json_without_a_dataplane_is_one_answer_or_one_error() {
    let ctl = |args: &[&str]| run(Command::new(binary("oaectl")).args(args));
    let dir = std::env::temp_dir().join(format!("oae-ctl-json-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory for manual pages");
    let socket = dir.join("nobody.sock");
    let socket = socket.to_str().expect("a UTF-8 path");
    json_failure(
        &ctl(&["--socket", socket, "status", "--json"]),
        ErrorCode::NoDataplane,
        3,
    );
    json_failure(
        &ctl(&["--json", "fault", "set", "drop=2"]),
        ErrorCode::BadRequest,
        2,
    );
    json_failure(
        &ctl(&["--json", "watch", "--interval", "inf"]),
        ErrorCode::BadRequest,
        2,
    );
    json_failure(
        &ctl(&["--json", "no-such-command"]),
        ErrorCode::BadRequest,
        2,
    );
    json_failure(
        &ctl(&["--json", "demo", "--config", "/nonexistent/oae.toml"]),
        ErrorCode::BadRequest,
        2,
    );
    json_failure(
        &ctl(&["--json", "swap-ring", "/nonexistent/oae-ring"]),
        ErrorCode::Failed,
        1,
    );
    json_failure(
        &ctl(&[
            "--json",
            "host-verbs",
            "/nonexistent/oae-ring",
            "--region",
            "1",
            "--key",
            "1",
        ]),
        ErrorCode::Failed,
        1,
    );
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Script {
        shell: String,
        script: String,
    }
    let script: Script = json_answer(&ctl(&["--json", "completions", "bash"]));
    assert!(script.shell == "bash" && script.script.contains("oaectl"));
    let man_dir = dir.to_str().expect("a UTF-8 path");
    let pages: Vec<std::path::PathBuf> = json_answer(&ctl(&["--json", "man", man_dir]));
    assert!(
        !pages.is_empty() && pages.iter().all(|p| p.is_file()),
        "{pages:?}"
    );
    // Asking for help is not a failure, JSON or not.
    let out = ctl(&["--json", "--help"]);
    assert!(out.success() && out.stdout.contains("Exit status"), "{out}");
    std::fs::remove_dir_all(&dir).expect("remove the manual pages");
}

/// `oaectl demo --json`: its report alone on standard output, the progress
/// and the table on standard error.
#[test]
fn ctl_demo_json_prints_its_report_alone() {
    if !oae_tests::require_root("ctl_demo_json_prints_its_report_alone") {
        return;
    }
    let _turn = polling_turn();
    let out = run(Command::new(binary("oaectl")).args([
        "demo",
        "--json",
        "--seconds",
        "1",
        "--min-round-us",
        &(SHARED_CPU_MIN_ROUND_NS / 1000).to_string(),
    ]));
    let report: DemoReport = json_answer(&out);
    assert!(report.exactly_once, "{out}");
    assert!(
        out.stderr.contains("setting up") && out.stderr.contains("removed"),
        "{out}"
    );
}

/// Output to a reader that has gone (`oaectl stats | head -1`) ends
/// oaectl quietly; a refresh interval that is no number of seconds is
/// refused with the range. Both used to panic.
#[test]
fn ctl_survives_a_closed_pipe_and_refuses_an_endless_interval() {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let out = run(Command::new(binary("oaectl"))
        .args(["completions", "bash"])
        .stdout(writer));
    assert!(
        out.success(),
        "a closed pipe should end oaectl quietly: {out}"
    );
    assert!(!out.stderr.contains("panicked"), "{out}");
    for interval in ["inf", "NaN", "0.01", "1e9"] {
        let out = run(Command::new(binary("oaectl")).args(["watch", "--interval", interval]));
        assert!(!out.success(), "--interval {interval} accepted: {out}");
        assert!(
            out.stderr.contains("0.05 to 3600") || out.stderr.contains("not a number"),
            "--interval {interval}: {out}"
        );
        assert!(!out.stderr.contains("panicked"), "{out}");
    }
}

#[test]
fn ctl_drives_a_running_dataplane() {
    if !oae_tests::require_root("ctl_drives_a_running_dataplane") {
        return;
    }
    let d = Dataplanes::start("ctl", &Options::default());
    let ctl = |args: &[&str]| {
        run(Command::new(binary("oaectl"))
            .arg("--socket")
            .arg(&d.sockets[0])
            .args(args))
    };
    let out = ctl(&["status"]);
    assert!(out.success() && out.stdout.contains(" up "), "{out}");
    let out = ctl(&[
        "verb",
        "cas",
        "--region",
        "1",
        "--key",
        // As the configuration writes it.
        &format!("{TARGET_KEY:#x}"),
        "--offset",
        "16",
        "--expected",
        "0",
        "--new",
        "9",
    ]);
    assert!(
        out.success() && out.stdout.contains("cas: old 0, swapped"),
        "{out}"
    );
    // Text that is not hex, as a WRITE's data or in a key file, is refused
    // saying so: neither oaectl nor the polling core panics (both once
    // did), and the core goes on serving the steps below.
    let key = format!("{TARGET_KEY:#x}");
    let out = ctl(&[
        "verb", "write", "--region", "1", "--key", &key, "--offset", "32", "--data", "a\u{e9}a",
    ]);
    assert!(
        !out.success()
            && out.stderr.contains("not a hex digit")
            && !out.stderr.contains("panicked"),
        "{out}"
    );
    let junk_key = d.dir.join("junk.key");
    std::fs::write(&junk_key, "a\u{e9}a\n").expect("write a key file");
    let junk_key = junk_key.to_str().expect("a UTF-8 path");
    let out = ctl(&["key", "add", "1", "--key-file", junk_key]);
    assert!(
        !out.success()
            && out.stderr.contains("not a hex digit")
            && !out.stderr.contains("panicked"),
        "{out}"
    );
    let out = ctl(&["region", "list"]);
    assert!(out.success() && out.stdout.contains("rwa"), "{out}");
    let out = ctl(&["region", "add", "--id", "5", "--key", "1", "--len", "64"]);
    assert!(out.success(), "{out}");
    let out = ctl(&["fault", "set", "drop=1%", "seed=3"]);
    assert!(out.success() && out.stdout.contains("10000"), "{out}");
    let out = ctl(&["fault", "clear"]);
    assert!(out.success(), "{out}");
    let out = ctl(&["stats", "--json"]);
    assert!(out.success(), "{out}");
    let stats: DataplaneStats = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("stats --json is not its type ({e}): {out}"));
    assert!(stats.queues[0].links[0].get("requests_sent") >= 1, "{out}");
    let out = ctl(&["hist"]);
    assert!(
        out.success() && out.stdout.contains("p99") && out.stdout.contains("cumulative"),
        "{out}"
    );
    // Grouped tables of what is not zero, each counter with its rate.
    let out = ctl(&["stats", "--interval", "0.1"]);
    assert!(
        out.success()
            && ["loop", "links", "verbs ended", "requests_sent", "/s"]
                .iter()
                .all(|w| out.stdout.contains(w))
            && !out.stdout.contains("buckets"),
        "{out}"
    );
    let out = ctl(&["watch", "--count", "1"]);
    assert!(out.success() && out.stdout.contains("steered"), "{out}");
    let out = ctl(&[
        "verb", "faa", "--region", "1", "--key", "1", "--offset", "0", "--add", "1",
    ]);
    assert!(
        !out.success() && out.stderr.contains("wrong region key"),
        "{out}"
    );
    // A SEND to a dataplane that posts no receive: refused in its round
    // trip, saying why.
    let out = ctl(&["verb", "send", "--data", "6869", "--imm", "7"]);
    assert!(
        !out.success() && out.stderr.contains("no receive was posted"),
        "{out}"
    );
    // Two new values for one word: refused before it is sent, and b's word
    // keeps the CAS's 9. (A target would apply it, the last write winning.)
    let key = format!("{TARGET_KEY:#x}");
    let out = ctl(&[
        "verb", "mcas", "--region", "1", "--key", &key, "--word", "16:9:1", "--word", "16:9:2",
    ]);
    assert!(
        !out.success() && out.stderr.contains("names one word twice"),
        "{out}"
    );
    let word = u64::from_le_bytes(d.region(1, TARGET_REGION)[16..24].try_into().unwrap());
    assert_eq!(word, 9, "a refused MCAS changed b's memory");
    ctl_answers_every_command_as_its_serde_type(&ctl);
}

/// `--json` on every command that asks a dataplane: each answer is one
/// document of the serde type oaed writes, and each failure one error
/// report with its code and the exit status of its class.
fn ctl_answers_every_command_as_its_serde_type(ctl: &dyn Fn(&[&str]) -> CommandOutput) {
    let key = TARGET_KEY.to_string();
    let answer: VerbAnswer = json_answer(&ctl(&[
        "--json", "verb", "swap", "--region", "1", "--key", &key, "--offset", "24", "--new", "5",
    ]));
    assert_eq!(answer.result, OutputView::Swap { old: 0 });
    let _: DataplaneStatus = json_answer(&ctl(&["status", "--json"]));
    // A dataplane with no fabric: no queue to list.
    let fabrics: Vec<QueueFabric> = json_answer(&ctl(&["members", "--json"]));
    assert!(fabrics.is_empty(), "{fabrics:?}");
    let stats: DataplaneStats = json_answer(&ctl(&["stats", "--json"]));
    let swaps = stats.queues[0].verbs.iter().find(|v| v.verb == "swap");
    assert_eq!(
        swaps.map(|v| (v.outcome.as_str(), v.count)),
        Some(("ok", 1))
    );
    let hist: HistReport = json_answer(&ctl(&["hist", "--json"]));
    assert!(hist.latency_ns.count >= 2, "{hist:?}");
    let regions: Vec<RegionView> = json_answer(&ctl(&["region", "list", "--json"]));
    assert!(
        regions.iter().any(|r| r.id == 1 && r.perms == "rwa"),
        "{regions:?}"
    );
    let added: RegionAdded = json_answer(&ctl(&[
        "region", "add", "--id", "6", "--key", "1", "--len", "64", "--json",
    ]));
    assert_eq!(added.registered, 6);
    let dump: RegionDump = json_answer(&ctl(&["region", "dump", "--id", "6", "--json"]));
    assert_eq!(dump.data, "00".repeat(64));
    let set: Vec<FaultsSet> = json_answer(&ctl(&["fault", "set", "corrupt=2%", "--json"]));
    assert_eq!(set[0].faults.corrupt_ppm, 20_000);
    let _: Vec<FaultsSet> = json_answer(&ctl(&["fault", "clear", "--json"]));
    let watch = ctl(&["watch", "--count", "2", "--interval", "0.05", "--json"]);
    assert!(watch.success(), "{watch}");
    assert_eq!(
        watch.stdout.lines().count(),
        2,
        "one object a refresh: {watch}"
    );
    /// What a line of `watch --json` holds (and more).
    #[derive(serde::Deserialize)]
    struct WatchLine {
        #[allow(dead_code, reason = "read to check its type")]
        status: DataplaneStatus,
        #[allow(dead_code, reason = "read to check its type")]
        stats: DataplaneStats,
    }
    for line in watch.stdout.lines() {
        let _: WatchLine = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a status and stats line ({e}): {line}"));
    }
    ctl_fails_every_command_as_an_error_report(ctl);
    let stopping: Stopping = json_answer(&ctl(&["shutdown", "--json"]));
    assert!(stopping.stopping);
}

/// `--json` failures against a running dataplane: only the error report
/// on standard output, the code of what went wrong and its exit status.
fn ctl_fails_every_command_as_an_error_report(ctl: &dyn Fn(&[&str]) -> CommandOutput) {
    let out = ctl(&[
        "--json", "verb", "faa", "--region", "1", "--key", "1", "--offset", "0", "--add", "1",
    ]);
    let report = json_failure(&out, ErrorCode::VerbFailed, 5);
    assert_eq!(report.outcome, Some(Outcome::RefusedBadKey), "{out}");
    assert!(report.error.contains("wrong region key"), "{out}");
    let out = ctl(&[
        "--json", "verb", "write", "--region", "1", "--key", "1", "--offset", "0", "--data", "zz",
    ]);
    assert!(
        json_failure(&out, ErrorCode::BadRequest, 2)
            .error
            .contains("not a hex digit"),
        "{out}"
    );
    let out = ctl(&["--json", "region", "dump", "--id", "77"]);
    json_failure(&out, ErrorCode::NotFound, 4);
    let out = ctl(&["--json", "hist", "--queue", "9"]);
    json_failure(&out, ErrorCode::NotFound, 4);
    let out = ctl(&["--json", "recv", "--region", "1", "--timeout", "0"]);
    json_failure(&out, ErrorCode::BadRequest, 2);
    let out = ctl(&["--json", "key", "show"]);
    json_failure(&out, ErrorCode::Unsupported, 4);
    let out = ctl(&["--json", "fault", "set", "--scope", "oae", "scope=ipv4"]);
    json_failure(&out, ErrorCode::BadRequest, 2);
    let out = ctl(&[
        "--json",
        "capture",
        "--count",
        "0",
        "-w",
        "/tmp/never.pcapng",
    ]);
    json_failure(&out, ErrorCode::BadRequest, 2);
    let out = ctl(&["--json", "verb", "no-such-verb"]);
    json_failure(&out, ErrorCode::BadRequest, 2);
}

/// A dataplane on two interfaces, one with a smaller MTU: a fault change
/// the smaller one refuses (a corruption offset past its frames) changes
/// neither interface, and one both take is set on both.
#[test]
fn a_fault_change_one_interface_refuses_changes_none() {
    if !oae_tests::require_root("a_fault_change_one_interface_refuses_changes_none") {
        return;
    }
    // Its oaed polls two queues: not beside another test's dataplanes.
    let _turn = polling_turn();
    let pair = VethPair::create_with_macs("faultall", Some(MACS)).expect("veth pair");
    let far = ["02:0a:e0:00:00:03", "02:0a:e0:00:00:04"];
    let far_macs = far.map(|m| parse_mac(m).expect("MAC"));
    pair.add_link(["oae2", "oae3"], far_macs, Some(1100))
        .expect("second veth pair");
    let dir = oae_os::private_dir::PrivateDir::create("oae-faultall").expect("test directory");
    let queue = |iface: &str, peer: &str| {
        format!(
            "[[queue]]\niface = \"{iface}\"\npeer_mac = \"{peer}\"\n\
             [queue.link]\nmin_round_ns = {SHARED_CPU_MIN_ROUND_NS}\n"
        )
    };
    let text = format!(
        "name = \"a\"\nnode_id = 1\n{}{}[[region]]\nid = 1\nkey = 7\nlen = 4096\nperms = \"rwa\"\n",
        queue(&pair.ifname[0], &format_mac(MACS[1])),
        queue("oae2", far[1])
    );
    let config = dir.write_file("a.toml", &text).expect("config");
    let (socket, log) = (dir.join("a.sock"), dir.join("a.log"));
    let mut cmd = pair.command(0, binary("oaed").to_str().expect("utf-8 path"));
    cmd.arg("--config")
        .arg(&config)
        .arg("--socket")
        .arg(&socket)
        .arg("--state-dir")
        .arg(dir.join("state"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"));
    let mut oaed = start_oaed(cmd, &socket, &log);
    let client = Client::new(&socket, Duration::from_secs(30));
    let ask = |change: FaultChange| client.fault(change);
    let corrupt_port_9_at = |offset| FaultChange {
        corrupt_ppm: Some(1000),
        corrupt_offset: Some(offset),
        scope: Some("port:9".parse().expect("scope")),
        ..Default::default()
    };
    let corrupt_ppm = || -> Vec<(String, u32)> {
        client
            .stats()
            .expect("stats")
            .xdp
            .iter()
            .map(|x| (x.iface.clone(), x.faults.corrupt_ppm))
            .collect()
    };

    // oae2's frames end at 1100 + 14 bytes: offset 1200 is past them. The
    // interfaces are visited in name order, oae0 first: a change applied
    // interface by interface would have set oae0 before oae2 refused it.
    let err = ask(corrupt_port_9_at(1200)).unwrap_err();
    assert!(
        err.code == ErrorCode::BadRequest
            && err.message.contains("oae2: ")
            && err.message.contains("no interface was changed"),
        "{err:?}"
    );
    let untouched = corrupt_ppm();
    assert_eq!(untouched.len(), 2, "{untouched:?}");
    assert!(untouched.iter().all(|(_, ppm)| *ppm == 0), "{untouched:?}");

    let set = ask(corrupt_port_9_at(1000)).expect("within both");
    assert_eq!(set.len(), 2, "{set:?}");
    let changed = corrupt_ppm();
    assert!(changed.iter().all(|(_, ppm)| *ppm == 1000), "{changed:?}");
    assert!(shut_down(&mut oaed, &socket), "oaed exits by itself");
}

/// A message between two dataplanes on real links: b posts a receive
/// (`recv`), a's `oaectl verb send` fills it, b's waiting client gets the
/// bytes and the immediate data, and they are in b's memory; a `recv` that
/// no message fills gives its receive back when its time is up.
#[test]
fn a_send_fills_a_receive_posted_through_the_control_socket() {
    if !oae_tests::require_root("a_send_fills_a_receive_posted_through_the_control_socket") {
        return;
    }
    let d = Dataplanes::start("msg", &Options::default());
    d.wait_up(Duration::from_secs(30));
    let b = d.client(1);
    let waiting = std::thread::spawn(move || b.recv(0, 0, (TARGET_REGION, 512, 64), 20_000));
    // The receive is posted when b's link says so.
    d.wait_for(Duration::from_secs(20), "b's receive posted", |d| {
        d.oae_link(1).1.posted_receives == 1
    });
    let out = run(Command::new(binary("oaectl"))
        .arg("--socket")
        .arg(&d.sockets[0])
        .args(["verb", "send", "--data", "68656c6c6f", "--imm", "7"]));
    assert!(out.success() && out.stdout.contains("sent"), "{out}");
    let got = waiting
        .join()
        .expect("the receiving thread")
        .unwrap_or_else(|e| panic!("recv: {e}\n--- b:\n{}", d.log(1)));
    assert_eq!(
        (got.len, got.imm, got.data.as_str()),
        (5, Some(7), "68656c6c6f")
    );
    assert_eq!(&d.region(1, TARGET_REGION)[512..517], b"hello");
    assert_eq!(d.link_counters(1).get("messages_received"), 1);
    // Nothing comes: the receive is withdrawn, and the client told so.
    let out = run(Command::new(binary("oaectl"))
        .arg("--socket")
        .arg(&d.sockets[1])
        .args([
            "recv",
            "--region",
            &TARGET_REGION.to_string(),
            "--timeout",
            "0.2",
        ]));
    assert!(
        !out.success() && out.stderr.contains("the receive was withdrawn"),
        "{out}"
    );
    // The same with --json: one error report, timed out, exit status 6.
    let out = run(Command::new(binary("oaectl"))
        .arg("--socket")
        .arg(&d.sockets[1])
        .args([
            "--json",
            "recv",
            "--region",
            &TARGET_REGION.to_string(),
            "--timeout",
            "0.2",
        ]));
    json_failure(&out, ErrorCode::Timeout, 6);
    assert_eq!(d.oae_link(1).1.posted_receives, 0);
}
