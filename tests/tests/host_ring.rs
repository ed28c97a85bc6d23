//! Host programs and a dataplane in separate processes, over the host ring
//! (a swap-ring region standing in for an IPU's PCIe BAR), in both modes:
//! this test process (or `oaectl host-verbs`) is the host, `oaed` a is the
//! IPU side, `oaed` b its peer across a real veth link. Needs root.

use std::os::unix::fs::FileExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use oae_client::api::{
    AppError, Completion, Destination, LocalSubmission, LocalVerb, NotSubmitted, Submission,
};
use oae_client::control::{ErrorCode, OutputView, VerbSpec};
use oae_client::host::load::LoadReport;
use oae_client::host::{AttachError, HostQueue, MAX_WRITE, RegionError};
use oae_proto::verb::MAX_BLOCK;
use oae_proto::{Block, McasWord, Output, Refusal, RegionRef, Verb, VerbError};
use oae_swapring::report::RegionReport;
use oae_tests::dataplanes::{
    Dataplanes, LOCAL_REGION, Options, TARGET_KEY, TARGET_REGION, binary, host_ring_path,
};

const T: RegionRef = RegionRef {
    id: TARGET_REGION,
    key: TARGET_KEY,
};

const FITO: &str = "";
const BILATERAL: &str = "mode = \"bilateral\"\nprocesses = 3";
const BILATERAL_ALONE: &str = "mode = \"bilateral\"\nprocesses = 1";

fn start(tag: &str, cost: &'static str, settings: &'static str) -> (Dataplanes, HostQueue) {
    let d = Dataplanes::start(
        tag,
        &Options {
            host_ring_cost: Some(cost),
            host_ring_settings: settings,
            ..Options::default()
        },
    );
    let host = HostQueue::attach(host_ring_path(&d.pair), 100).expect("attach the host ring");
    (d, host)
}

/// Waits for verb `id`'s completion, bounded in time.
fn wait(host: &mut HostQueue, id: u64) -> Completion {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(c) = host.poll_completion() {
            assert_eq!(c.id, id, "completions come back with their ids");
            return c;
        }
        assert!(Instant::now() < deadline, "no completion for verb {id}");
        std::hint::spin_loop();
    }
}

/// Submits and waits for the one completion, bounded in time.
fn run(host: &mut HostQueue, id: u64, verb: Verb) -> Completion {
    run_to(host, Destination::FirstLink, id, verb)
}

/// [`run`], the verb sent to `to`.
fn run_to(host: &mut HostQueue, to: Destination, id: u64, verb: Verb) -> Completion {
    host.submit(Submission {
        to,
        ..Submission::to_first_link(id, verb)
    })
    .expect("room in the ring");
    wait(host, id)
}

fn word(d: &Dataplanes, offset: usize) -> u64 {
    let m = d.region(1, TARGET_REGION);
    u64::from_le_bytes(m[offset..offset + 8].try_into().unwrap())
}

/// `oaectl host-verbs` on dataplane a's ring: a host program of its own.
fn host_verbs(d: &Dataplanes, count: u64, window: usize) -> Command {
    let mut cmd = Command::new(binary("oaectl"));
    cmd.arg("host-verbs")
        .arg(host_ring_path(&d.pair))
        .args(["--region", &TARGET_REGION.to_string()])
        .args(["--key", &format!("{TARGET_KEY:#x}")])
        .args(["--offset", "0", "--json", "--timeout", "60"])
        .args(["--count", &count.to_string()])
        .args(["--window", &window.to_string()]);
    cmd
}

fn load_report(out: &oae_tests::CommandOutput) -> LoadReport {
    assert!(out.success(), "{out}");
    serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn every_verb_from_the_host_through_the_dataplane_fito() {
    every_verb("hostverbs", FITO, "fito");
}

#[test]
fn every_verb_from_the_host_through_the_dataplane_bilateral() {
    every_verb("hostverbb", BILATERAL, "bilateral");
}

/// Every verb, end to end, with the emulated PCIe costs on: results as the
/// peer's memory says, refusals with no effect.
fn every_verb(tag: &str, settings: &'static str, mode: &str) {
    if !oae_tests::require_root(tag) {
        return;
    }
    let (d, mut host) = start(
        tag,
        "read=750,write=200,doorbell=1600,atomic=1000",
        settings,
    );
    let bytes: Vec<u8> = (0..MAX_WRITE).map(|i| i as u8).collect();
    let data = Block::new(&bytes).unwrap();
    let c = run(
        &mut host,
        1,
        Verb::Write {
            target: T,
            offset: 64,
            data,
        },
    );
    assert_eq!(c.result, Ok(Output::Write));
    assert_eq!(
        &d.region(1, TARGET_REGION)[64..64 + MAX_WRITE],
        data.as_slice()
    );
    // A READ of the largest block lands in the dataplane's local region;
    // its completion is one record that says how much landed.
    let c = run(
        &mut host,
        2,
        Verb::Read {
            target: T,
            offset: 64,
            local_region: LOCAL_REGION,
            local_offset: 4096,
            len: MAX_BLOCK as u16,
        },
    );
    assert_eq!(
        c.result,
        Ok(Output::Read {
            len: MAX_BLOCK as u16
        })
    );
    let landed = &d.region(0, LOCAL_REGION)[4096..4096 + MAX_BLOCK];
    assert_eq!(landed, &d.region(1, TARGET_REGION)[64..64 + MAX_BLOCK]);
    assert_eq!(&landed[..MAX_WRITE], &bytes[..]);
    let c = run(
        &mut host,
        3,
        Verb::CompareAndSwap {
            target: T,
            offset: 0,
            expected: 0,
            new: 41,
        },
    );
    assert_eq!(
        c.result,
        Ok(Output::CompareAndSwap {
            old: 0,
            swapped: true
        })
    );
    let c = run(
        &mut host,
        4,
        Verb::FetchAdd {
            target: T,
            offset: 0,
            add: 1,
        },
    );
    assert_eq!(c.result, Ok(Output::FetchAdd { old: 41 }));
    let c = run(
        &mut host,
        5,
        Verb::Swap {
            target: T,
            offset: 0,
            new: 7,
        },
    );
    assert_eq!(c.result, Ok(Output::Swap { old: 42 }));
    assert_eq!(word(&d, 0), 7);
    let c = run(
        &mut host,
        6,
        Verb::BilateralSwap {
            target: T,
            offset: 0,
            local_region: LOCAL_REGION,
            local_offset: 0,
            len: 8,
        },
    );
    assert_eq!(c.result, Ok(Output::BilateralSwap { len: 8 }));
    assert_eq!(&d.region(0, LOCAL_REGION)[..8], &7u64.to_le_bytes());
    assert!(c.latency_ns > 0, "the dataplane reports its latency");

    // Refusals: a wrong key at the target, and what a record cannot carry.
    let c = run(
        &mut host,
        7,
        Verb::FetchAdd {
            target: RegionRef { key: 1, ..T },
            offset: 0,
            add: 1,
        },
    );
    assert_eq!(
        c.result,
        Err(AppError::Verb(VerbError::Refused(Refusal::BadKey)))
    );
    assert_eq!(
        word(&d, 0),
        0,
        "the bilateral swap took 7; the refused add did nothing"
    );
    // A multi-word commit takes several records each way.
    let words: Vec<McasWord> = (0..8)
        .map(|i| McasWord {
            offset: 1024 + 8 * i,
            expected: 0,
            new: 100 + u64::from(i),
        })
        .collect();
    let mcas = Verb::multi_word_commit(T, &words).unwrap();
    match run(&mut host, 8, mcas).result {
        Ok(Output::MultiWordCommit {
            committed: true,
            count: 8,
            old,
        }) => assert_eq!(old, [0; 8]),
        other => panic!("{other:?}"),
    }
    for i in 0..8 {
        assert_eq!(word(&d, 1024 + 8 * i), 100 + i as u64);
    }
    let too_long = Verb::Write {
        target: T,
        offset: 0,
        data: Block::new(&vec![0; MAX_WRITE + 1]).unwrap(),
    };
    match run(&mut host, 9, too_long).result {
        Err(AppError::NotSubmitted(NotSubmitted::Invalid(why))) => {
            assert!(why.contains("374 bytes"), "{why}")
        }
        other => panic!("{other:?}"),
    }
    let counters = d.host_counters(0);
    assert_eq!(counters.requests, 8, "{counters:?}");
    assert_eq!(counters.completions_lost, 0, "{counters:?}");
    assert_eq!(counters.completions_orphaned, 0, "{counters:?}");
    if mode == "bilateral" {
        assert!(counters.swaps >= 8, "{counters:?}");
    }

    // The operator's view of the same region.
    let out = oae_tests::run(
        std::process::Command::new(binary("oaectl"))
            .arg("swap-ring")
            .arg(host_ring_path(&d.pair)),
    );
    assert!(out.success(), "{out}");
    assert!(out.stdout.contains(&format!("{mode} mode")), "{out}");
    let holder = format!("held by pid {}", std::process::id());
    assert!(out.stdout.contains(&holder), "the claim shows: {out}");
    // And as its serde type, with the same claim.
    let out = oae_tests::run(
        std::process::Command::new(binary("oaectl"))
            .args(["--json", "swap-ring"])
            .arg(host_ring_path(&d.pair)),
    );
    let report: RegionReport = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("not a region report ({e}): {out}"));
    let claims = report
        .ring_claim
        .iter()
        .chain(report.slot_claims.iter().flatten());
    assert_eq!(report.mode, mode, "{report:?}");
    assert!(
        claims.map(|c| c.pid).any(|pid| pid == std::process::id()),
        "{report:?}"
    );
}

/// A host program names where a verb goes: the peer by its node id, a link
/// of the queue; a link or node the queue has no way to is refused with
/// the reason, and nothing happens.
#[test]
fn host_verbs_name_their_destination() {
    let (d, mut host) = start("hostto", "zero", FITO);
    let peer = d.oae_link(0).1.peer_id;
    let add = |n| Verb::FetchAdd {
        target: T,
        offset: 64,
        add: n,
    };
    let by_node = run_to(&mut host, Destination::Node(peer), 1, add(1));
    assert!(
        matches!(by_node.result, Ok(Output::FetchAdd { old: 0 })),
        "{by_node:?}"
    );
    let by_link = run_to(&mut host, Destination::Link(0), 2, add(2));
    assert!(
        matches!(by_link.result, Ok(Output::FetchAdd { old: 1 })),
        "{by_link:?}"
    );
    let no_link = run_to(&mut host, Destination::Link(7), 3, add(4));
    assert!(
        matches!(
            no_link.result,
            Err(AppError::NotSubmitted(NotSubmitted::NoSuchLink(_)))
        ),
        "{no_link:?}"
    );
    let nobody = run_to(&mut host, Destination::Node(0xdead_beef), 4, add(8));
    assert!(
        matches!(
            nobody.result,
            Err(AppError::NotSubmitted(NotSubmitted::NoRoute(_)))
        ),
        "{nobody:?}"
    );
    assert_eq!(word(&d, 64), 3, "only the two verbs that went took effect");
}

#[test]
fn a_window_of_host_verbs_completes_exactly_once_fito() {
    window_exactly_once("hostwin", FITO);
}

#[test]
fn a_window_of_host_verbs_completes_exactly_once_bilateral() {
    window_exactly_once("hostwib", BILATERAL);
}

/// Many verbs in flight at once on a few words: each completes exactly
/// once, and the peer's memory holds the sum of those that succeeded (a
/// verb refused `Locked` by its contended word had no effect).
fn window_exactly_once(tag: &str, settings: &'static str) {
    if !oae_tests::require_root(tag) {
        return;
    }
    let (d, mut host) = start(tag, "zero", settings);
    const VERBS: u64 = 4000;
    const WINDOW: u64 = 64;
    let mut done = vec![false; VERBS as usize];
    let (mut sent, mut completed, mut added) = (0u64, 0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs(60);
    while completed < VERBS {
        while sent < VERBS && sent - completed < WINDOW {
            let verb = Verb::FetchAdd {
                target: T,
                offset: 8 * (sent % 8) as u32,
                add: 1,
            };
            match host.submit(Submission::to_first_link(sent, verb)) {
                Ok(()) => sent += 1,
                Err(_) => break,
            }
        }
        while let Some(c) = host.poll_completion() {
            assert!(!done[c.id as usize], "verb {} completed twice", c.id);
            done[c.id as usize] = true;
            match c.result {
                Ok(Output::FetchAdd { .. }) => added += 1,
                Err(AppError::Verb(VerbError::Refused(Refusal::Locked))) => {}
                other => panic!("verb {}: {other:?}", c.id),
            }
            completed += 1;
        }
        assert!(
            Instant::now() < deadline,
            "{completed} of {VERBS} completed, {sent} sent; host {:?}; dataplane a: {:?}",
            host.counters(),
            d.stats(0)
        );
    }
    let total: u64 = (0..8).map(|w| word(&d, 8 * w)).sum();
    assert_eq!(total, added);
    assert!(added > VERBS / 2, "only {added} of {VERBS} succeeded");
    assert_eq!(host.counters().foreign_completions, 0);
}

/// Three host processes on one bilateral ring at once, one slot each: the
/// test process and two `oaectl host-verbs`, all adding to one word. Each
/// sees only its own completions, each exactly once, and the word is the
/// sum of their successes.
#[test]
fn host_processes_share_a_bilateral_ring_one_slot_each() {
    if !oae_tests::require_root("host_processes_share_a_bilateral_ring_one_slot_each") {
        return;
    }
    let (d, mut host) = start("hostshare", "zero", BILATERAL);
    let children: Vec<_> = (0..2)
        .map(|_| {
            host_verbs(&d, 1000, 16)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn oaectl host-verbs")
        })
        .collect();
    let mine = oae_client::host::load::run(
        &mut host,
        &oae_client::host::load::Load {
            target: T,
            offset: 0,
            words: 16,
            count: 1000,
            window: 16,
            duration: None,
            deadline: Duration::from_secs(60),
        },
    );
    let mut reports = vec![mine];
    for child in children {
        let out = child.wait_with_output().expect("oaectl host-verbs ran");
        let out = oae_tests::CommandOutput {
            command: "oaectl host-verbs".into(),
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        reports.push(load_report(&out));
    }
    let mut slots: Vec<_> = reports.iter().map(|r| r.slot).collect();
    slots.sort();
    slots.dedup();
    assert_eq!(slots.len(), 3, "one slot each: {reports:?}");
    for r in &reports {
        assert_eq!(r.mode, "bilateral", "{r:?}");
        assert_eq!(
            (r.completed(), r.unfinished, r.unexpected),
            (1000, 0, 0),
            "{r:?}"
        );
        assert!(r.exchanges > 0, "{r:?}");
    }
    // The three add to the same 16 words: some verbs find a word locked by
    // another's and are refused with no effect.
    let ok: u64 = reports.iter().map(|r| r.ok).sum();
    let total: u64 = (0..16).map(|w| word(&d, 8 * w)).sum();
    assert_eq!(total, ok, "{reports:?}");
    assert!(ok > 0, "{reports:?}");
}

/// Application threads of one process, each with its own queue: on a
/// bilateral ring each attach claims a slot of its own, and the threads'
/// verbs run side by side, each completion reaching its own queue once.
#[test]
fn threads_of_one_process_each_have_their_own_queue() {
    if !oae_tests::require_root("threads_of_one_process_each_have_their_own_queue") {
        return;
    }
    let (d, first) = start("hostthreads", "zero", BILATERAL);
    let ring = host_ring_path(&d.pair);
    let load = oae_client::host::load::Load {
        target: T,
        offset: 512,
        words: 16,
        count: 1000,
        window: 16,
        duration: None,
        deadline: Duration::from_secs(60),
    };
    let mut queues = [Some(first), None, None];
    let threads: Vec<_> = queues
        .iter_mut()
        .map(|queue| {
            let (ring, queue) = (ring.clone(), queue.take());
            std::thread::spawn(move || {
                let mut queue =
                    queue.unwrap_or_else(|| HostQueue::attach(&ring, 100).expect("a free slot"));
                oae_client::host::load::run(&mut queue, &load)
            })
        })
        .collect();
    let reports: Vec<LoadReport> = threads
        .into_iter()
        .map(|t| t.join().expect("a thread's verbs"))
        .collect();
    let mut slots: Vec<_> = reports.iter().map(|r| r.slot).collect();
    slots.sort();
    slots.dedup();
    assert_eq!(slots.len(), 3, "a slot each: {reports:?}");
    for r in &reports {
        assert_eq!(
            (r.completed(), r.unfinished, r.unexpected),
            (1000, 0, 0),
            "{r:?}"
        );
    }
    let ok: u64 = reports.iter().map(|r| r.ok).sum();
    let total: u64 = (0..16).map(|w| word(&d, 512 + 8 * w)).sum();
    assert_eq!(total, ok, "{reports:?}");
}

#[test]
fn a_held_fito_ring_refuses_a_second_host_process() {
    held_ring_refuses("hostheldf", FITO, "held by process");
}

#[test]
fn a_bilateral_ring_with_every_slot_held_refuses_another() {
    held_ring_refuses("hostheldb", BILATERAL_ALONE, "every one of its 1 slots");
}

/// The claim is enforced, not assumed: while this process holds the ring
/// (or its only slot), `oaectl host-verbs` is refused naming our pid; once
/// we let go, it runs.
fn held_ring_refuses(tag: &str, settings: &'static str, why: &str) {
    if !oae_tests::require_root(tag) {
        return;
    }
    let (d, host) = start(tag, "zero", settings);
    let out = oae_tests::run(&mut host_verbs(&d, 10, 1));
    // With --json the refusal is one error report on standard output.
    let refusal = oae_tests::json_failure(&out, ErrorCode::Failed, 1).error;
    assert!(refusal.contains(why), "{out}");
    assert!(
        refusal.contains(&std::process::id().to_string()),
        "names the holder: {out}"
    );
    drop(host);
    let report = load_report(&oae_tests::run(&mut host_verbs(&d, 10, 1)));
    assert_eq!((report.ok, report.unexpected), (10, 0), "{report:?}");
}

/// `kill -9` of a host process while its batches are in flight: its slot
/// goes to the next process under a new generation. Whatever the dead
/// process left in flight is orphaned at the dataplane, never delivered to
/// the new holder, and the new holder's verbs count exactly.
#[test]
fn a_host_process_killed_mid_batch_leaves_its_slot_clean() {
    if !oae_tests::require_root("a_host_process_killed_mid_batch_leaves_its_slot_clean") {
        return;
    }
    let (d, host) = start("hostkillb", "zero", BILATERAL_ALONE);
    drop(host);
    let mut child = host_verbs(&d, 10_000_000, 64)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn oaectl host-verbs");
    d.wait_for(Duration::from_secs(30), "host verbs flowing", |d| {
        d.host_counters(0).swaps > 200
    });
    child.kill().expect("SIGKILL the host process by its pid");
    child.wait().expect("reap it");
    let mut host = HostQueue::attach(host_ring_path(&d.pair), 100)
        .expect("a dead process's slot can be claimed");
    assert_eq!(host.slot(), Some(0));
    // Every verb the dead process got in resolves at the dataplane (a
    // completion waiting for it, or one already orphaned) before we count.
    d.wait_for(
        Duration::from_secs(30),
        "the dead process's verbs resolved",
        |d| {
            let c = d.host_counters(0);
            c.requests
                == c.completions
                    + c.completions_waiting
                    + c.completions_orphaned
                    + c.completions_lost
        },
    );
    let words = |d: &Dataplanes| (0..64).map(|w| word(d, 8 * w)).sum::<u64>();
    let before = words(&d);
    let report = oae_client::host::load::run(
        &mut host,
        &oae_client::host::load::Load {
            target: T,
            offset: 0,
            words: 16,
            count: 2000,
            window: 16,
            duration: None,
            deadline: Duration::from_secs(60),
        },
    );
    assert_eq!((report.ok, report.unexpected), (2000, 0), "{report:?}");
    assert_eq!(host.counters().foreign_completions, 0);
    assert_eq!(words(&d), before + 2000, "{report:?}");
    // The dataplane's ledger: every verb it took ended as a completion
    // handed over or one orphaned with the process it was for.
    let c = d.host_counters(0);
    assert_eq!(c.requests, c.completions + c.completions_orphaned, "{c:?}");
    assert_eq!(c.completions_lost, 0, "{c:?}");
    // The dead process always had 64 verbs out, so the kill left some in
    // flight: voided in its slot (an offer or an answer), or orphaned here.
    let inherited = host.counters().inherited_records;
    assert!(
        c.completions_orphaned + inherited > 0,
        "the kill left nothing in flight: {c:?}, {inherited} records inherited"
    );
    eprintln!("after the kill: {c:?}, {inherited} records inherited");
}

#[test]
fn the_host_notices_a_dead_dataplane_by_counted_polls_fito() {
    notices_dead_dataplane("hostkill", FITO);
}

#[test]
fn the_host_notices_a_dead_dataplane_by_counted_polls_bilateral() {
    notices_dead_dataplane("hostkilb", BILATERAL);
}

/// kill -9 of the dataplane: the host notices because the dataplane's
/// interaction counter stops moving over its own polls (counted, not
/// timed), and nothing it submitted afterwards is ever answered. On a
/// bilateral ring it then knows the verb had no effect: it recalls the
/// batch the dataplane never swapped. A FITO ring cannot tell.
fn notices_dead_dataplane(tag: &str, settings: &'static str) {
    if !oae_tests::require_root(tag) {
        return;
    }
    let (mut d, mut host) = start(tag, "zero", settings);
    let c = run(
        &mut host,
        1,
        Verb::FetchAdd {
            target: T,
            offset: 0,
            add: 1,
        },
    );
    assert!(c.result.is_ok());
    d.kill9(0);
    let add = Verb::FetchAdd {
        target: T,
        offset: 0,
        add: 1,
    };
    host.submit(Submission::to_first_link(2, add))
        .expect("room");
    // A live polling core moves its counter every burst; a million of our
    // polls without a move means it is gone.
    const QUIET_POLLS: u64 = 1_000_000;
    let (mut last, mut quiet, mut polls) = (host.dataplane_interactions(), 0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs(30);
    while quiet < QUIET_POLLS {
        assert!(
            host.poll_completion().is_none(),
            "a dead dataplane answered"
        );
        let now = host.dataplane_interactions();
        if now == last {
            quiet += 1;
        } else {
            (last, quiet) = (now, 0);
        }
        polls += 1;
        assert!(
            Instant::now() < deadline,
            "still moving after {polls} polls"
        );
    }
    assert_eq!(
        word(&d, 0),
        1,
        "the verb after the kill had no effect at the peer"
    );
    if settings == FITO {
        assert_eq!(host.recall(), 0, "a FITO ring cannot take a verb back");
    } else {
        assert_eq!(host.recall(), 1, "the unswapped batch comes back");
        let c = host.poll_completion().expect("the recalled verb completes");
        assert_eq!(
            (c.id, c.result),
            (2, Err(AppError::NotSubmitted(NotSubmitted::Recalled)))
        );
        assert_eq!(host.outstanding(), 0);
    }
}

/// A file that is not a host ring is refused with what is wrong.
#[test]
fn a_file_that_is_not_a_host_ring_is_refused() {
    let path = format!("/dev/shm/oae-not-a-ring-{}", std::process::id());
    std::fs::write(&path, vec![0x42u8; 4096]).unwrap();
    let e = HostQueue::attach(&path, 1).err().expect("refused");
    std::fs::remove_file(&path).unwrap();
    assert!(
        matches!(e, AttachError::Region(RegionError::BadMagic { .. })),
        "{e}"
    );
    assert!(e.to_string().contains("magic"), "{e}");
}

/// A host that writes huge costs into the ring's header (each access of a
/// side that read them would spin that long) stalls no one: the
/// attached host and the dataplane keep the costs they validated, and a
/// host process attaching later is refused, saying why, instead of
/// hanging past its `--timeout`.
#[test]
fn a_cost_scribbled_into_the_header_stalls_no_one() {
    if !oae_tests::require_root("a_cost_scribbled_into_the_header_stalls_no_one") {
        return;
    }
    // The swap ring's header: the cost model is words 8 to 11.
    const W_COST: u64 = 8;
    let (d, mut host) = start("hostcost", "zero", FITO);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(host_ring_path(&d.pair))
        .expect("the ring's file");
    let scribble = |value: u64| {
        for w in W_COST..W_COST + 4 {
            file.write_all_at(&value.to_le_bytes(), 8 * w)
                .expect("scribble");
        }
    };
    // 20 s an access: enough to fail the bounded waits below, were it read.
    scribble(20_000_000_000);
    let add = Verb::FetchAdd {
        target: T,
        offset: 0,
        add: 1,
    };
    let c = run(&mut host, 1, add);
    assert!(
        matches!(c.result, Ok(Output::FetchAdd { .. })),
        "{:?}",
        c.result
    );
    drop(host);

    let mut refused = Command::new("timeout");
    let argv = host_verbs(&d, 10, 1);
    refused
        .arg("120")
        .arg(argv.get_program())
        .args(argv.get_args());
    let out = oae_tests::run(&mut refused);
    let refusal = oae_tests::json_failure(&out, ErrorCode::Failed, 1).error;
    assert!(
        refusal.contains("cost model") && refusal.contains("1 ms"),
        "{out}"
    );
    scribble(0);
    let report = load_report(&oae_tests::run(&mut host_verbs(&d, 10, 1)));
    assert_eq!((report.ok, report.unexpected), (10, 0), "{report:?}");
}

/// A process truncates the ring file under the running dataplane (anyone
/// with the ring owner's rights can): the polling core's next access used
/// to end oaed with SIGBUS. Now the ring is served no more and stats say
/// so, while the dataplane lives on and runs verbs over its link.
#[test]
fn a_ring_file_cut_short_ends_the_ring_not_the_dataplane() {
    if !oae_tests::require_root("a_ring_file_cut_short_ends_the_ring_not_the_dataplane") {
        return;
    }
    let (mut d, mut host) = start("hostcut", "zero", FITO);
    let add = Verb::FetchAdd {
        target: T,
        offset: 0,
        add: 1,
    };
    assert!(matches!(
        run(&mut host, 1, add).result,
        Ok(Output::FetchAdd { .. })
    ));
    std::fs::OpenOptions::new()
        .write(true)
        .open(host_ring_path(&d.pair))
        .expect("the ring's file")
        .set_len(0)
        .expect("truncate");
    let ring_cut = |d: &Dataplanes| d.host_counters(0).ring_cut;
    d.wait_for(Duration::from_secs(30), "the ring found cut", |d| {
        ring_cut(d) == 1
    });
    // The host's own mapping is cut too: it reads zeros, and no answer.
    drop(host);
    let cas = VerbSpec::Cas {
        region: TARGET_REGION,
        key: TARGET_KEY,
        offset: 8,
        expected: 0,
        new: 1,
    };
    let answer = d.verb(0, cas).expect("the dataplane still runs verbs");
    assert_eq!(
        answer.result,
        OutputView::Cas {
            old: 0,
            swapped: true
        },
        "{answer:?}"
    );
    assert_eq!(ring_cut(&d), 1);
    let status = d.stop(0);
    assert!(status.success(), "{status}:\n{}", d.log(0));
}

/// Dataplane b's SEND to a, sent again while a has not yet taken the
/// receive its host program posted (a refused SEND has no effect); bounded
/// by a count generous for a loaded machine (a minute and more of tries).
fn send_until_taken(d: &Dataplanes, spec: VerbSpec) {
    for _ in 0..12_000 {
        match d.verb(1, spec.clone()) {
            Ok(_) => return,
            Err(e) if e.message.contains("no receive") => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(e) => panic!("{e:?}"),
        }
    }
    panic!("dataplane a never took the posted receive");
}

/// Waits for the outcome of one posted receive, bounded in time.
fn received(host: &mut HostQueue) -> oae_client::api::Received {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(r) = host.poll_received() {
            return r;
        }
        assert!(Instant::now() < deadline, "no receive completed");
        std::hint::spin_loop();
    }
}

#[test]
fn a_host_receive_takes_the_peers_message_and_one_left_by_a_gone_process_is_withdrawn() {
    let (d, mut host) = start("hostrecv", "zero", FITO);
    let post = |id| oae_client::api::ReceivePost {
        id,
        from: Destination::FirstLink,
        region: LOCAL_REGION,
        offset: 512,
        len: 64,
    };
    let send = |data: &str, imm| VerbSpec::Send {
        data: data.into(),
        imm,
    };
    // Posted, then filled by the peer's SEND: bytes and immediate back on
    // the ring, and in the dataplane's block.
    host.post_receive(post(1)).expect("room in the ring");
    send_until_taken(&d, send("0badcafe", Some(7)));
    let r = received(&mut host);
    let m = r.result.expect("a message");
    assert_eq!(
        (r.id, m.imm, m.data.as_slice()),
        (1, Some(7), &[0x0b, 0xad, 0xca, 0xfe][..])
    );
    assert_eq!(
        &d.region(0, LOCAL_REGION)[512..516],
        &[0x0b, 0xad, 0xca, 0xfe]
    );
    // A receive whose process lets go of the ring is withdrawn once another
    // claims it: the peer's next SEND is refused, not swallowed.
    host.post_receive(post(2)).expect("room in the ring");
    assert_eq!(host.outstanding(), 1);
    drop(host);
    let mut host = HostQueue::attach(host_ring_path(&d.pair), 100).expect("attach again");
    // The new holder's first request is served in the burst that notices
    // the claim changed.
    let c = run(
        &mut host,
        3,
        Verb::FetchAdd {
            target: T,
            offset: 0,
            add: 0,
        },
    );
    assert!(c.result.is_ok(), "{c:?}");
    let refused = d.verb(1, send("01", None));
    let why = format!("{refused:?}");
    assert!(refused.is_err() && why.contains("no receive"), "{why}");
    // The new holder's own receive takes the next.
    host.post_receive(post(4)).expect("room in the ring");
    send_until_taken(&d, send("02", None));
    let r = received(&mut host);
    assert_eq!(r.id, 4, "{r:?}");
    assert_eq!(r.result.expect("a message").data.as_slice(), &[2]);
    assert!(
        host.poll_received().is_none(),
        "nothing for the receive that was withdrawn"
    );
}

#[test]
fn host_programs_map_the_dataplanes_regions_and_see_reads_land_in_place() {
    use std::sync::atomic::Ordering;
    let (d, mut host) = start("hostmap", "zero", FITO);
    let ring = host_ring_path(&d.pair);
    let local =
        oae_client::host::SharedWords::open(oae_client::host::region_file(&ring, LOCAL_REGION))
            .expect("dataplane a maps its regions beside its ring");
    let write = Verb::Write {
        target: T,
        offset: 1024,
        data: Block::new(&[0x5a; 16]).unwrap(),
    };
    assert!(run(&mut host, 1, write).result.is_ok());
    let read = Verb::Read {
        target: T,
        offset: 1024,
        local_region: LOCAL_REGION,
        local_offset: 2048,
        len: 16,
    };
    assert!(matches!(
        run(&mut host, 2, read).result,
        Ok(Output::Read { len: 16 })
    ));
    // The landed block, read in place: no control socket, no copy.
    for w in 0..2 {
        assert_eq!(
            local.words()[2048 / 8 + w].load(Ordering::Acquire),
            0x5a5a_5a5a_5a5a_5a5a
        );
    }
    // And what the host writes in place is the dataplane's memory: a
    // WRITE of a whole frame takes its bytes from there, not the ring.
    local.words()[8].store(0x1234, Ordering::Release);
    assert_eq!(d.region(0, LOCAL_REGION)[64..72], 0x1234u64.to_le_bytes());
    for w in 0..MAX_BLOCK / 8 {
        local.words()[512 + w].store(w as u64, Ordering::Release);
    }
    let from_local = |id, local_region| LocalSubmission {
        id,
        to: Destination::FirstLink,
        verb: LocalVerb::Write {
            target: T,
            offset: 8192,
        },
        local_region,
        local_offset: 4096,
        len: MAX_BLOCK as u32,
    };
    host.submit_local(from_local(3, LOCAL_REGION))
        .expect("room in the ring");
    let c = wait(&mut host, 3);
    assert!(matches!(c.result, Ok(Output::Write)), "{c:?}");
    let peer = d.region(1, TARGET_REGION);
    for w in 0..MAX_BLOCK / 8 {
        let at = 8192 + 8 * w;
        assert_eq!(peer[at..at + 8], (w as u64).to_le_bytes(), "word {w}");
    }
    host.submit_local(from_local(4, 99))
        .expect("room in the ring");
    let c = wait(&mut host, 4);
    assert!(
        matches!(
            c.result,
            Err(AppError::NotSubmitted(NotSubmitted::Invalid(_)))
        ),
        "a block outside the regions is refused: {c:?}"
    );
    // The files go with the dataplane.
    let path = local.path().to_path_buf();
    drop(d);
    assert!(!path.exists(), "{} outlived its dataplane", path.display());
}

#[test]
fn a_transfer_longer_than_a_frame_goes_a_frame_a_verb_and_completes_once() {
    use std::sync::atomic::Ordering;
    let (d, mut host) = start("hostxfer", "zero", FITO);
    let ring = host_ring_path(&d.pair);
    let local =
        oae_client::host::SharedWords::open(oae_client::host::region_file(&ring, LOCAL_REGION))
            .expect("dataplane a maps its regions beside its ring");
    // 5000 bytes (six frames, the last 200 bytes) from the mapped block.
    const LEN: u32 = 5000;
    for w in 0..LEN as usize / 8 {
        local.words()[w].store(0x0101_0101_0101_0101 * (w as u64 % 200), Ordering::Release);
    }
    let transfer = |id, verb, local_offset| LocalSubmission {
        id,
        to: Destination::FirstLink,
        verb,
        local_region: LOCAL_REGION,
        local_offset,
        len: LEN,
    };
    let write = LocalVerb::Write {
        target: T,
        offset: 16_384,
    };
    host.submit_local(transfer(1, write, 0))
        .expect("room in the ring");
    let c = wait(&mut host, 1);
    assert!(matches!(c.result, Ok(Output::Write)), "{c:?}");
    let mine = d.region(0, LOCAL_REGION)[..LEN as usize].to_vec();
    let peer = d.region(1, TARGET_REGION);
    assert_eq!(
        &peer[16_384..16_384 + LEN as usize],
        &mine[..],
        "every frame, once"
    );
    // Read back whole into another block: one completion for six READs.
    let read = LocalVerb::Read {
        target: T,
        offset: 16_384,
    };
    host.submit_local(transfer(2, read, 32_768))
        .expect("room in the ring");
    let c = wait(&mut host, 2);
    assert!(matches!(c.result, Ok(Output::Read { len: 5000 })), "{c:?}");
    let landed = d.region(0, LOCAL_REGION)[32_768..32_768 + LEN as usize].to_vec();
    assert_eq!(landed, mine);
    // One whose third frame runs past the peer's region: it completes once,
    // with that frame's refusal; the frames before it took effect, whole.
    let past = LocalVerb::Write {
        target: T,
        offset: 65_536 - 2_000,
    };
    host.submit_local(transfer(3, past, 0))
        .expect("room in the ring");
    let c = wait(&mut host, 3);
    assert!(
        matches!(
            c.result,
            Err(AppError::Verb(VerbError::Refused(Refusal::OutOfBounds)))
        ),
        "{c:?}"
    );
    let peer = d.region(1, TARGET_REGION);
    assert_eq!(&peer[65_536 - 2_000..65_536 - 80], &mine[..1_920]);
    assert!(host.poll_completion().is_none(), "one completion each");
    // Longer than 64 frames, or a SEND of more than one: refused whole.
    let too_long = LocalSubmission {
        len: oae_client::api::MAX_TRANSFER + 8,
        ..transfer(4, write, 0)
    };
    host.submit_local(too_long).expect("room in the ring");
    let c = wait(&mut host, 4);
    assert!(
        matches!(
            c.result,
            Err(AppError::NotSubmitted(NotSubmitted::Invalid(_)))
        ),
        "{c:?}"
    );
}
