//! The Wireshark dissector (tools/wireshark/oae.lua) run by tshark: on
//! frames scapy builds from docs/PROTOCOL.md, independently of the Rust
//! codec, and on a capture of a live pair of dataplanes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use oae_client::control::{OutputView, VerbSpec};
use oae_os::child::Supervised;
use oae_tests::dataplanes::{Dataplanes, Options, TARGET_KEY, TARGET_REGION, binary};
use oae_tests::{SCAPY_PYTHON, run};

const FIELDS: &[&str] = &[
    "frame.number",
    "oae.transition",
    "oae.verb.opcode",
    "oae.result.old",
    "oae.answers",
    "oae.reflected.match",
    "oae.crc.good",
    "oae.refuse.reason",
    "oae.slot",
    "oae.seq",
    "oae.hello.node_id",
    "oae.forward.kind",
    "oae.result.committed",
    "oae.prev_committed",
    "oae.verb.expected",
    "oae.verb.new",
    "oae.sender_epoch",
    "oae.receiver_epoch",
    "oae.order",
    "oae.seen",
    "oae.liveness.level",
    "oae.liveness.role",
    "oae.malformed",
    "_ws.lua.error",
    "frame.packet_flags_direction",
    "frame.interface_name",
    "oae.auth.key_number",
    "oae.auth.accepts",
    "oae.auth.packet_number",
    "oae.advert.first",
    "oae.advert.last",
    "oae.advert.node_id",
    "oae.advert.route_hops",
    "oae.handshake.message",
    "oae.handshake.len",
    "oae.handshake.ephemeral",
    "oae.announcement",
    "oae.hello.node_id",
    "eth.dst",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("oae-dissector-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Each frame's fields, by name (several values joined with commas).
fn dissect(capture: &Path) -> Vec<HashMap<&'static str, String>> {
    let script = workspace().join("tools/wireshark/oae.lua");
    let mut cmd = Command::new("tshark");
    cmd.arg("-X")
        .arg(format!("lua_script:{}", script.display()))
        .arg("-r")
        .arg(capture)
        .args(["-Y", "oae", "-T", "fields", "-E", "separator=|"]);
    for f in FIELDS {
        cmd.args(["-e", f]);
    }
    let out = run(&mut cmd);
    assert!(out.success(), "{out}");
    assert!(
        !out.stderr.contains("Lua"),
        "the script loads cleanly: {out}"
    );
    let frames: Vec<HashMap<&'static str, String>> = out
        .stdout
        .lines()
        .map(|line| {
            FIELDS
                .iter()
                .copied()
                .zip(line.split('|').map(String::from))
                .collect()
        })
        .collect();
    // A Lua error inside a frame shows only in its tree, not on stderr.
    assert!(
        frames.iter().all(|f| f["_ws.lua.error"].is_empty()),
        "the dissector failed on a frame: {out}"
    );
    frames
}

#[test]
fn tshark_decodes_every_field_of_frames_built_from_the_protocol_document() {
    let dir = scratch("scapy");
    let capture = dir.join("frames.pcap");
    let out = run(Command::new(SCAPY_PYTHON)
        .arg(workspace().join("tests/dissector/frames.py"))
        .arg(&capture));
    assert!(out.success(), "{out}");
    let frames = dissect(&capture);
    let show = format!("{frames:#?}");
    assert_eq!(frames.len(), 15, "{show}");
    let field = |i: usize, name: &str| frames[i][name].as_str();

    assert_eq!(field(0, "oae.transition"), "HELLO", "{show}");
    assert_eq!(
        field(0, "oae.hello.node_id"),
        "0x000000000000000a",
        "{show}"
    );
    let header = |i| {
        [
            "oae.sender_epoch",
            "oae.receiver_epoch",
            "oae.order",
            "oae.seen",
            "oae.liveness.level",
            "oae.liveness.role",
        ]
        .map(|k| field(i, k))
    };
    assert_eq!(header(0), ["7", "0", "0", "0", "0", "0"], "{show}");
    assert_eq!(header(2), ["9", "7", "3", "3", "2", "1"], "{show}");
    // A CAS and its ECHO: the echo reflects the request's context slice, so
    // it names it and its old value is decoded by the request's verb.
    assert_eq!(field(1, "oae.transition"), "REQUEST", "{show}");
    assert_eq!(field(1, "oae.verb.opcode"), "3", "{show}");
    assert_eq!(
        (field(1, "oae.slot"), field(1, "oae.seq")),
        ("1", "5"),
        "{show}"
    );
    assert_eq!(
        (field(1, "oae.verb.expected"), field(1, "oae.verb.new")),
        ("0", "7"),
        "{show}"
    );
    assert_eq!(field(2, "oae.transition"), "ECHO", "{show}");
    assert_eq!(field(2, "oae.answers"), "2", "{show}");
    assert_eq!(field(2, "oae.reflected.match"), "1", "{show}");
    assert_eq!(field(2, "oae.result.old"), "42", "{show}");
    // A REFUSE reflecting a slice nobody sent is flagged, its reason named.
    assert_eq!(field(3, "oae.transition"), "REFUSE", "{show}");
    assert_eq!(field(3, "oae.reflected.match"), "0", "{show}");
    assert_eq!(field(3, "oae.refuse.reason"), "7", "{show}");
    // The same CAS with a broken CRC.
    assert_eq!(field(4, "oae.crc.good"), "0", "{show}");
    assert!(
        frames
            .iter()
            .enumerate()
            .all(|(i, f)| [4, 8, 12].contains(&i) || !f["oae.crc.good"].contains('0')),
        "{show}"
    );
    // A FORWARD's relayed frame is dissected in place.
    assert_eq!(field(5, "oae.transition"), "FORWARD,REQUEST", "{show}");
    assert_eq!(field(5, "oae.forward.kind"), "1", "{show}");
    assert_eq!(field(5, "oae.verb.opcode"), "4", "{show}");
    // A multi-word commit riding a commit (previous-committed bit), and its
    // result.
    assert_eq!(field(6, "oae.verb.opcode"), "6", "{show}");
    assert_eq!(field(6, "oae.prev_committed"), "1", "{show}");
    assert_eq!(field(7, "oae.answers"), "7", "{show}");
    assert_eq!(field(7, "oae.result.committed"), "1", "{show}");
    assert_eq!(field(7, "oae.result.old"), "1,3", "{show}");
    // A request with a bad CRC never reached anyone: nothing answers it.
    assert_eq!(field(8, "oae.crc.good"), "0", "{show}");
    assert_eq!(field(9, "oae.reflected.match"), "0", "{show}");
    // What a receiver refuses is said, not guessed at.
    assert!(
        field(10, "oae.malformed").contains("does not decode"),
        "{show}"
    );
    assert!(
        field(11, "oae.malformed").contains("unknown version 1"),
        "{show}"
    );
    assert!(
        field(12, "oae.malformed").contains("shorter than 64"),
        "{show}"
    );
    assert!(
        frames[..10].iter().all(|f| f["oae.malformed"].is_empty()),
        "{show}"
    );
    // An authenticated frame: its trailer decoded, nothing refused.
    assert_eq!(field(13, "oae.transition"), "HELLO", "{show}");
    assert_eq!(
        [
            "oae.auth.key_number",
            "oae.auth.accepts",
            "oae.auth.packet_number"
        ]
        .map(|k| field(13, k)),
        ["1", "0x03", &0x0102_0304_0506u64.to_string()],
        "{show}"
    );
    assert!(field(13, "oae.malformed").is_empty(), "{show}");
    // An ADVERT page: its range and each entry.
    assert_eq!(field(14, "oae.transition"), "ADVERT", "{show}");
    assert_eq!(
        [
            "oae.advert.first",
            "oae.advert.last",
            "oae.advert.node_id",
            "oae.advert.route_hops"
        ]
        .map(|k| field(14, k)),
        [
            "0x0000000000000000",
            "0x000000000000000f",
            "0x000000000000000a,0x000000000000000c",
            "0,64"
        ],
        "{show}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `oaectl capture` on a live pair while CAS verbs run: every frame
/// decodes with a good CRC and a known transition, and every CAS REQUEST
/// captured with its ECHO is answered by it, with the old value its
/// expected value says (each CAS moves the word from n to n + 1).
#[test]
fn tshark_decodes_what_oaectl_captures_on_a_live_pair() {
    if !oae_tests::require_root("tshark_decodes_what_oaectl_captures_on_a_live_pair") {
        return;
    }
    let d = Dataplanes::start("wshark", &Options::default());
    let dir = scratch("live");
    let capture = dir.join("a.pcapng");
    let mut cmd = Command::new(binary("oaectl"));
    cmd.arg("--socket")
        .arg(&d.sockets[0])
        .args(["capture", "--count", "300", "--seconds", "20", "-w"])
        .arg(&capture)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut oaectl = Supervised::spawn(&mut cmd, "oaectl capture", Duration::from_secs(5)).unwrap();
    // CAS verbs until the capture has its frames: it starts on the polling
    // core at a moment this test cannot see.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut n = 0u64;
    let status = loop {
        if let Some(status) = oaectl.exited() {
            break status;
        }
        assert!(Instant::now() < deadline, "the capture never finished");
        let v = d
            .verb(
                0,
                VerbSpec::Cas {
                    region: TARGET_REGION,
                    key: TARGET_KEY,
                    offset: 64,
                    expected: n,
                    new: n + 1,
                },
            )
            .expect("CAS");
        assert_eq!(
            v.result,
            OutputView::Cas {
                old: n,
                swapped: true
            },
            "{v:?}"
        );
        n += 1;
    };
    assert!(status.success(), "oaectl capture: {status}");
    assert!(capture.exists(), "no capture written");

    let frames = dissect(&capture);
    let show = format!("{} frames after {n} CAS: {frames:#?}", frames.len());
    assert_eq!(frames.len(), 300, "{show}");
    assert!(frames.iter().all(|f| f["oae.crc.good"] == "1"), "{show}");
    assert!(
        frames
            .iter()
            .all(|f| TRANSITIONS.contains(&f["oae.transition"].as_str())),
        "{show}"
    );
    // Both directions (pcapng: 1 inbound, 2 outbound), on dataplane a's interface.
    for direction in ["0x00000001", "0x00000002"] {
        assert!(
            frames
                .iter()
                .any(|f| f["frame.packet_flags_direction"] == direction),
            "direction {direction}: {show}"
        );
    }
    assert!(
        frames
            .iter()
            .all(|f| f["frame.interface_name"] == d.pair.ifname[0]),
        "{show}"
    );
    let mut answered = 0;
    for request in frames
        .iter()
        .filter(|f| f["oae.transition"] == "REQUEST" && f["oae.verb.opcode"] == "3")
    {
        let number = &request["frame.number"];
        if let Some(echo) = frames
            .iter()
            .find(|f| f["oae.transition"] == "ECHO" && &f["oae.answers"] == number)
        {
            assert_eq!(
                echo["oae.result.old"], request["oae.verb.expected"],
                "{show}"
            );
            answered += 1;
        }
    }
    assert!(answered > 0, "no CAS and its ECHO in the capture: {show}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A pair keyed by identity, b started again and again until a's capture
/// is full: each start is a handshake (PROTOCOL.md, "Key agreement"),
/// whose three messages tshark names, with their Noise lengths, beside the
/// sealed frames after them.
#[test]
fn tshark_decodes_a_live_handshake() {
    if !oae_tests::require_root("tshark_decodes_a_live_handshake") {
        return;
    }
    let options = Options {
        identities: true,
        ..Options::default()
    };
    let mut d = Dataplanes::start("wshake", &options);
    let dir = scratch("handshake");
    let capture = dir.join("a.pcapng");
    let mut cmd = Command::new(binary("oaectl"));
    cmd.arg("--socket")
        .arg(&d.sockets[0])
        .args(["capture", "--count", "200", "--seconds", "20", "-w"])
        .arg(&capture)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut oaectl = Supervised::spawn(&mut cmd, "oaectl capture", Duration::from_secs(5)).unwrap();
    // The capture starts on a's polling core at a moment this test cannot
    // see: b restarts (a handshake each time) until the capture is full.
    let mut restarts = 0;
    let status = loop {
        if let Some(status) = oaectl.exited() {
            break status;
        }
        assert!(restarts < 20, "the capture never finished");
        d.stop(1);
        d.launch(1);
        d.wait_up(Duration::from_secs(20));
        restarts += 1;
    };
    assert!(status.success(), "oaectl capture: {status}");
    let frames = dissect(&capture);
    let show = format!(
        "{} frames after {restarts} restarts: {frames:#?}",
        frames.len()
    );
    let handshakes: Vec<_> = frames
        .iter()
        .filter(|f| f["oae.transition"] == "HANDSHAKE")
        .collect();
    // Message n's Noise length: e and a 12-byte payload; e, s and two
    // tags more; s and two tags.
    for (message, len) in [("1", "44"), ("2", "108"), ("3", "76")] {
        assert!(
            handshakes
                .iter()
                .any(|f| f["oae.handshake.message"] == message && f["oae.handshake.len"] == len),
            "message {message}: {show}"
        );
    }
    assert!(
        handshakes.iter().all(|f| f["oae.malformed"].is_empty()
            && f["oae.crc.good"] == "1"
            && f["oae.auth.key_number"].is_empty()),
        "{show}"
    );
    // The frames after a handshake are sealed under the agreed key.
    assert!(
        frames
            .iter()
            .any(|f| f["oae.transition"] == "HELLO" && !f["oae.auth.key_number"].is_empty()),
        "{show}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

const TRANSITIONS: &[&str] = &[
    "HELLO",
    "TICK",
    "TOCK",
    "REQUEST",
    "ECHO",
    "COMMIT",
    "COMMIT_ACK",
    "REFUSE",
    "REVERSE",
    "REVERSE_ACK",
];

#[test]
fn oaectl_capture_refuses_what_it_cannot_do_with_the_fix() {
    let nowhere =
        std::env::temp_dir().join(format!("oae-no-dataplane-{}.sock", std::process::id()));
    let capture = |args: &[&str]| {
        run(Command::new(binary("oaectl"))
            .arg("--socket")
            .arg(&nowhere)
            .arg("capture")
            .args(args)
            .args(["-w", "/dev/null"]))
    };
    for (args, fix) in [
        (&["--count", "0"][..], "use 1 to 10000 frames"),
        (&["--seconds", "99"][..], "at most 20"),
        (&[][..], "start one with `oaed --config <file>`"),
    ] {
        let out = capture(args);
        assert!(!out.success(), "{out}");
        assert!(out.stderr.contains(fix), "{args:?}: {out}");
    }
}

/// A pair that lists no peers: its announcements (PROTOCOL.md, D1), sent
/// and received, are HELLOs to the multicast MAC, named as such, each
/// carrying its sender's node id.
#[test]
fn tshark_names_live_announcements() {
    if !oae_tests::require_root("tshark_names_live_announcements") {
        return;
    }
    let options = Options {
        discover_on: [true, true],
        discovery: Some("announce_every_ms = 5\nforget_after_ms = 5"),
        ..Options::default()
    };
    let d = Dataplanes::start("wannounce", &options);
    let dir = scratch("announce");
    let capture = dir.join("a.pcapng");
    let out = run(Command::new(binary("oaectl"))
        .arg("--socket")
        .arg(&d.sockets[0])
        .args(["capture", "--count", "40", "--seconds", "20", "-w"])
        .arg(&capture));
    assert!(out.success(), "{out}");
    let frames = dissect(&capture);
    let show = format!("{frames:#?}");
    let announcements: Vec<_> = frames
        .iter()
        .filter(|f| f["oae.announcement"] == "1" || f["oae.announcement"] == "True")
        .collect();
    assert!(!announcements.is_empty(), "{show}");
    for f in &announcements {
        assert_eq!(f["eth.dst"], "03:0a:e0:00:00:01", "{show}");
        assert_eq!(f["oae.transition"], "HELLO", "{show}");
        assert!(
            ["0x0000000000000001", "0x0000000000000002"].contains(&&*f["oae.hello.node_id"]),
            "{show}"
        );
        assert!(
            f["oae.malformed"].is_empty() && f["oae.crc.good"] == "1",
            "{show}"
        );
    }
    // None of the link's own frames is taken for one.
    assert!(
        frames
            .iter()
            .any(|f| f["eth.dst"] != "03:0a:e0:00:00:01" && f["oae.announcement"].is_empty()),
        "{show}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
