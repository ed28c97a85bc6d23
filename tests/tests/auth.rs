//! Authenticated links on a live pair: what a forger or a replayer could
//! do to a link without a key, and what `[queue.auth]` makes of the same
//! frames; a key at one end only, named in status and log; a key roll
//! under a running workload; the control socket's refusal of a user that
//! is not root.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use oae_client::control::{
    CaptureReport, ControlError, ErrorCode, FaultChange, KeyChange, KeyState, OutputView,
    VerbAnswer, VerbSpec, WorkloadReport, from_hex,
};
use oae_client::stats::LinkCounters;
use oae_client::status::{DataplaneStatus, ProtocolStatus};
use oae_common::mac::format_mac;
use oae_pmd::netns::VethPair;
use oae_proto::DownReason;
use oae_tests::dataplanes::{
    Dataplanes, LOCAL_REGION, MACS, Options, SHARED_CPU_MIN_ROUND_NS, TARGET_KEY, TARGET_REGION,
    binary, polling_turn,
};
use oae_tests::{CommandOutput, SCAPY_PYTHON, run};

const KEY: &str = "5e1f0aa11ce0b0b0c0ffee00d15ea5e0123456789abcdef0fedcba9876543210";
const NEW_KEY: &str = "a1b2c3d4e5f60718293a4b5c6d7e8f90112233445566778899aabbccddeeff00";

/// Dataplane `i`'s MAC as text.
fn mac(i: usize) -> String {
    format_mac(MACS[i])
}

fn forge() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scapy/forge.py")
}

fn link(d: &Dataplanes, i: usize) -> LinkCounters {
    d.stats(i).queues[0].links[0].clone()
}

fn peer_epoch(d: &Dataplanes, i: usize) -> u32 {
    match &d.link(i).state.protocol {
        ProtocolStatus::Oae(o) => o.peer_epoch,
        ProtocolStatus::RcModel(_) => panic!("an OAE link"),
    }
}

/// Dataplane b's side puts a HELLO claiming to be b, with a larger epoch,
/// on the wire to a.
fn forged_hello(d: &Dataplanes, how: &str) {
    let epoch = peer_epoch(d, 0) + 1000;
    let out = run(d.pair.command(1, SCAPY_PYTHON).arg(forge()).args([
        "hello",
        &d.pair.ifname[1],
        &mac(1),
        &mac(0),
        "2",
        &epoch.to_string(),
        how,
    ]));
    assert!(out.success(), "{out}");
}

/// Frames as captured (hex, Ethernet header first) sent again from
/// dataplane `i`'s side of the wire.
fn replay(d: &Dataplanes, i: usize, frames: &[String]) {
    let out = run(d
        .pair
        .command(i, SCAPY_PYTHON)
        .arg(forge())
        .args(["raw", &d.pair.ifname[i]])
        .args(frames));
    assert!(out.success(), "{out}");
}

fn cas(d: &Dataplanes, offset: u32, expected: u64) -> Result<VerbAnswer, ControlError> {
    d.verb(
        0,
        VerbSpec::Cas {
            region: TARGET_REGION,
            key: TARGET_KEY,
            offset,
            expected,
            new: expected + 1,
        },
    )
}

/// A 960-byte WRITE and its READ back: the largest frames (1024 bytes,
/// 1048 with the trailer) cross the authenticated link whole, and none
/// is left unsealed.
fn largest_frames_cross(d: &Dataplanes) {
    let data = "a5".repeat(960);
    let answer = |v: Result<VerbAnswer, ControlError>| v.expect("the verb completes");
    let written = answer(d.verb(
        0,
        VerbSpec::Write {
            region: TARGET_REGION,
            key: TARGET_KEY,
            offset: 1024,
            data: data.clone(),
        },
    ));
    assert_eq!(written.result, OutputView::Write);
    let read = answer(d.verb(
        0,
        VerbSpec::Read {
            region: TARGET_REGION,
            key: TARGET_KEY,
            offset: 1024,
            local_region: LOCAL_REGION,
            local_offset: 1024,
            len: 960,
        },
    ));
    assert_eq!(read.result, OutputView::Read { data });
    for i in 0..2 {
        assert_eq!(link(d, i).get("auth_unsealed"), 0, "dataplane {i}");
    }
}

fn key_change(d: &Dataplanes, i: usize, change: KeyChange) -> KeyState {
    d.client(i)
        .key(0, 0, change)
        .unwrap_or_else(|e| panic!("key change on {i}: {e:?}"))
}

/// Two dataplanes whose link is authenticated under `KEY`.
fn authenticated_pair(tag: &str) -> Dataplanes {
    Dataplanes::start(
        tag,
        &Options {
            auth_key: Some(KEY),
            ..Options::default()
        },
    )
}

/// `oaectl key roll` on dataplane `i`, with the key in `key_file`.
fn roll(d: &Dataplanes, i: usize, key_file: &Path) -> CommandOutput {
    run(Command::new(binary("oaectl"))
        .arg("--socket")
        .arg(&d.sockets[i])
        .args(["key", "roll", "--key-file"])
        .arg(key_file))
}

/// The attack, shown on a link without authentication: one forged HELLO
/// makes a believe b restarted.
#[test]
fn without_a_key_a_forged_hello_declares_a_restart() {
    if !oae_tests::require_root("without_a_key_a_forged_hello_declares_a_restart") {
        return;
    }
    let d = Dataplanes::start("noauth", &Options::default());
    assert_eq!(link(&d, 0).get("peer_restarts"), 0);
    forged_hello(&d, "plain");
    d.wait_for(Duration::from_secs(10), "a to take b for restarted", |d| {
        link(d, 0).get("peer_restarts") == 1
    });
}

/// Only a has the key: the link never comes up, and each end says why in
/// its status (as `oaectl --json status` prints it) and, once, in its log,
/// with the fix: a drops b's frames as unauthenticated, b finds a trailer
/// behind a's.
#[test]
fn a_key_at_one_end_only_is_named_in_status_and_log() {
    if !oae_tests::require_root("a_key_at_one_end_only_is_named_in_status_and_log") {
        return;
    }
    let options = Options {
        auth_key: Some(KEY),
        auth_only_on: Some(0),
        ..Options::default()
    };
    // `start` would wait for a link that cannot come up.
    let mut d = Dataplanes::start_alone("auth1", &options);
    d.launch(1);
    let expected = [
        DownReason::PeerUnauthenticated,
        DownReason::PeerAuthenticated,
    ];
    let status = |d: &Dataplanes, i: usize| -> CommandOutput {
        let out = run(Command::new(binary("oaectl"))
            .arg("--socket")
            .arg(&d.sockets[i])
            .args(["--json", "status"]));
        assert!(out.success(), "{out}");
        out
    };
    let reason = |out: &CommandOutput| {
        let status: DataplaneStatus =
            serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out}"));
        let (_, l) = status.links().next().unwrap_or_else(|| panic!("{out}"));
        match &l.state.protocol {
            ProtocolStatus::Oae(o) => (l.state.up, o.down_reason.clone()),
            ProtocolStatus::RcModel(_) => panic!("an OAE link: {out}"),
        }
    };
    d.wait_for(
        Duration::from_secs(20),
        "both ends to say why the link is not coming up",
        |d| {
            (0..2).all(|i| {
                reason(&status(d, i))
                    .1
                    .is_some_and(|r| r.reason == expected[i])
            })
        },
    );
    for (i, want) in expected.into_iter().enumerate() {
        let out = status(&d, i);
        let (up, why) = reason(&out);
        let why = why.unwrap_or_else(|| panic!("{out}"));
        assert!(!up, "{out}");
        assert_eq!((why.reason, why.code), (want, want.code()), "{out}");
        assert!(
            why.text.contains("give both ends the same") && why.text.contains("or neither"),
            "{out}"
        );
        // The text status says it under the link's line.
        let text = run(Command::new(binary("oaectl"))
            .arg("--socket")
            .arg(&d.sockets[i])
            .arg("status"));
        assert!(
            text.success()
                && text
                    .stdout
                    .contains(&format!("not coming up: {}", want.name())),
            "{text}"
        );
    }
    let told = |d: &Dataplanes, i: usize| {
        d.log(i)
            .lines()
            .filter(|l| l.contains("not coming up"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    d.wait_for(Duration::from_secs(10), "both logs to say why", |d| {
        (0..2).all(|i| !told(d, i).is_empty())
    });
    for (i, want) in expected.into_iter().enumerate() {
        let lines = told(&d, i);
        assert!(
            lines.len() == 1 && lines[0].contains(want.name()) && lines[0].contains(want.text()),
            "once, naming {}:\n{}",
            want.name(),
            d.log(i)
        );
    }
    let dropped = link(&d, 0).auth_dropped.get("unauthenticated").copied();
    assert!(dropped.is_some_and(|n| n > 0), "{dropped:?}");
    assert!(
        link(&d, 1)
            .malformed
            .get("wrong_length")
            .is_some_and(|&n| n > 0)
    );
}

/// The same forgeries against authenticated links, and replays of real
/// frames: each dropped by reason before the link reads it; the link
/// stays up, memory holds what the verbs did and nothing else. Then a roll
/// retires the old key, and frames under it are refused as such.
#[test]
fn with_a_key_forgeries_and_replays_are_dropped_by_reason() {
    if !oae_tests::require_root("with_a_key_forgeries_and_replays_are_dropped_by_reason") {
        return;
    }
    let d = authenticated_pair("auth");
    forged_hello(&d, "plain");
    forged_hello(&d, "junk-tag");
    d.wait_for(Duration::from_secs(10), "both forged HELLOs dropped", |d| {
        let l = link(d, 0);
        l.auth_dropped.get("unauthenticated") == Some(&1)
            && l.auth_dropped.get("bad_tag") == Some(&1)
    });
    assert_eq!(link(&d, 0).get("peer_restarts"), 0);
    largest_frames_cross(&d);

    // b drops a fifth of what it receives, so a's frames include
    // REVERSEs; a records what it sends while a CAS chain runs.
    let drop = FaultChange {
        drop_ppm: Some(200_000),
        seed: Some(5),
        ..FaultChange::default()
    };
    d.client(1).fault(drop).expect("faults on b");
    let report: CaptureReport = std::thread::scope(|s| {
        let capture = s.spawn(|| d.client(0).capture(0, 2000, 10.0));
        let mut n = 0;
        while !capture.is_finished() && n < 5000 {
            match cas(&d, 128, n) {
                Ok(_) => n += 1,
                Err(e) => assert_eq!(e.code, ErrorCode::VerbFailed, "{e:?}"),
            }
        }
        capture.join().expect("capture thread").expect("capture")
    });
    d.client(1)
        .fault(FaultChange {
            drop_ppm: Some(0),
            ..FaultChange::default()
        })
        .expect("faults off");
    // Slot frames a sent: REQUESTs (code 1) and REVERSEs (code 6).
    let sent = |code: u8| -> Vec<String> {
        report
            .frames
            .iter()
            .filter(|f| f.outbound)
            .map(|f| f.hex.clone())
            .filter(|hex| {
                let b = from_hex(hex).expect("hex");
                b.len() > 18 && b[16] == 2 && b[17] & 0x1f == code
            })
            .take(20)
            .collect()
    };
    let (requests, reverses) = (sent(1), sent(6));
    assert!(
        !requests.is_empty() && !reverses.is_empty(),
        "{} frames",
        report.frames.len()
    );

    let before = d.region(1, TARGET_REGION);
    let dropped_before = link(&d, 1)
        .auth_dropped
        .get("replayed")
        .copied()
        .unwrap_or(0);
    replay(&d, 0, &requests);
    replay(&d, 0, &reverses);
    let replayed = (requests.len() + reverses.len()) as u64;
    d.wait_for(Duration::from_secs(10), "every replay dropped", |d| {
        link(d, 1)
            .auth_dropped
            .get("replayed")
            .copied()
            .unwrap_or(0)
            - dropped_before
            == replayed
    });
    assert_eq!(
        d.region(1, TARGET_REGION),
        before,
        "a replay changed b's memory"
    );
    let word = u64::from_le_bytes(before[128..136].try_into().unwrap());
    cas(&d, 128, word).expect("the link still runs verbs");

    // Both ends roll to a new key; the old one is retired at both, and
    // frames under it are refused as under an unknown key.
    let key_file = d.dir.join("new.key");
    std::fs::write(&key_file, NEW_KEY).expect("key file");
    let out = roll(&d, 0, &key_file);
    assert!(
        out.success() && out.stdout.contains("rolling to key 1"),
        "{out}"
    );
    key_change(
        &d,
        1,
        KeyChange::Roll {
            key: NEW_KEY.into(),
        },
    );
    d.wait_for(
        Duration::from_secs(10),
        "both ends to send under key 1 only",
        |d| {
            (0..2).all(|i| {
                let s = key_change(d, i, KeyChange::Show);
                s.sending == 1 && s.accepted == [1]
            })
        },
    );
    replay(&d, 0, &requests);
    d.wait_for(
        Duration::from_secs(10),
        "frames under the retired key dropped",
        |d| {
            link(d, 1)
                .auth_dropped
                .get("unknown_key")
                .copied()
                .unwrap_or(0)
                >= requests.len() as u64
        },
    );
    cas(&d, 128, word + 1).expect("the link runs verbs under the new key");
    // A key that is not hex, with a character of two bytes where a digit
    // pair would be cut: refused with the reason, and the polling core
    // (which applies key changes) lives on. It used to panic there.
    let junk = d.client(0).key(
        0,
        0,
        KeyChange::Add {
            number: 3,
            key: "a\u{e9}a".repeat(16),
        },
    );
    let err = junk.expect_err("a key that is not hex is refused");
    assert!(
        err.code == ErrorCode::BadRequest && err.message.contains("not a hex digit"),
        "{err:?}"
    );
    cas(&d, 128, word + 2).expect("the polling core still runs verbs");
}

/// `oaectl key roll` at both ends in the middle of a workload: not one verb
/// fails, and both memories equal the workload's ledger.
#[test]
fn a_key_roll_under_a_workload_fails_no_verb() {
    if !oae_tests::require_root("a_key_roll_under_a_workload_fails_no_verb") {
        return;
    }
    let d = authenticated_pair("roll");
    d.start_workload(8, 3.0, 11);
    let status = |d: &Dataplanes| -> WorkloadReport {
        d.client(0)
            .workload_status(0, 0, None)
            .expect("workload status")
    };
    d.wait_for(Duration::from_secs(10), "the workload under way", |d| {
        status(d).completed > 100
    });
    let key_file = d.dir.join("new.key");
    std::fs::write(&key_file, NEW_KEY).expect("key file");
    for i in [1, 0] {
        let out = roll(&d, i, &key_file);
        assert!(out.success(), "{out}");
    }
    let r = d.finished_workload(Duration::from_secs(30));
    d.assert_workload_exact(&r);
    assert!(
        link(&d, 0).get("auth_key_switches") == 1 && link(&d, 1).get("auth_key_switches") == 1,
        "{:?}",
        link(&d, 0)
    );
}

/// A user the test makes, removed when dropped.
struct TestUser(String);

impl TestUser {
    fn create() -> TestUser {
        let name = format!("oaetest{}", std::process::id());
        let out = run(Command::new("useradd").args(["--system", "--no-create-home", &name]));
        assert!(out.success(), "{out}");
        TestUser(name)
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.0).status();
    }
}

#[test]
fn the_control_socket_refuses_a_user_that_is_not_root() {
    if !oae_tests::require_root("the_control_socket_refuses_a_user_that_is_not_root") {
        return;
    }
    let d = Dataplanes::start("ctluser", &Options::default());
    let user = TestUser::create();
    let out = run(Command::new("runuser")
        .args(["-u", &user.0, "--"])
        .arg(binary("oaectl"))
        .arg("--socket")
        .arg(&d.sockets[0])
        .args(["key", "show"]));
    assert!(!out.success(), "{out}");
    assert!(
        out.stderr.contains("the control socket is private"),
        "{out}"
    );
    let out = run(Command::new(binary("oaectl"))
        .arg("--socket")
        .arg(&d.sockets[0])
        .arg("status"));
    assert!(out.success(), "root is answered: {out}");
}

/// Two authenticated queues on two interfaces that share a MAC (as VLAN
/// subinterfaces of one NIC do; here a second veth pair given the first's
/// MACs): links to one peer on one channel would derive one key and share
/// nonces. `--check` cannot see MACs; start-up refuses, naming the link.
#[test]
fn authenticated_queues_sharing_a_mac_pair_are_refused_at_start() {
    if !oae_tests::require_root("authenticated_queues_sharing_a_mac_pair_are_refused_at_start") {
        return;
    }
    // Were the queues not refused, its oaed would poll two of them.
    let _turn = polling_turn();
    let pair = VethPair::create_with_macs("samemac", Some(MACS)).expect("veth pair");
    pair.add_link(["oae2", "oae3"], MACS, None)
        .expect("second veth pair, same MACs");
    let dir = oae_os::private_dir::PrivateDir::create("oae-samemac").expect("test directory");
    let queue = |iface: &str| {
        format!(
            "[[queue]]\niface = \"{iface}\"\npeer_mac = \"{}\"\n\
             [queue.link]\nmin_round_ns = {SHARED_CPU_MIN_ROUND_NS}\n\
             [queue.auth]\nkey = \"{KEY}\"\n",
            mac(1)
        )
    };
    let text = format!(
        "name = \"a\"\nnode_id = 1\n{}{}[[region]]\nid = 1\nkey = 7\nlen = 4096\nperms = \"rwa\"\n",
        queue(&pair.ifname[0]),
        queue("oae2")
    );
    let config = dir.write_file("a.toml", &text).expect("config");
    let check = run(Command::new(binary("oaed"))
        .arg("--config")
        .arg(&config)
        .arg("--check"));
    assert!(check.success(), "--check cannot see MACs: {check}");
    // Bounded: were the queues not refused, oaed would run until killed.
    let out = run(pair
        .command(0, "timeout")
        .arg("60")
        .arg(binary("oaed"))
        .arg("--config")
        .arg(&config)
        .arg("--socket")
        .arg(dir.join("a.sock"))
        .arg("--state-dir")
        .arg(dir.join("state")));
    assert!(!out.success(), "{out}");
    assert_ne!(out.status.code(), Some(124), "ran until killed: {out}");
    assert!(
        out.stderr.contains(&format!(
            "queue 1: its link from {} to {} on channel 0 is authenticated, and another queue",
            mac(0),
            mac(1)
        )),
        "{out}"
    );
}
