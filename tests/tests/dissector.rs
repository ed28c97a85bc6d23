//! The Wireshark dissector (tools/wireshark/oae.lua) run by tshark: on
//! frames scapy builds from docs/PROTOCOL.md, independently of the Rust
//! codec, and on a capture of a live pair of dataplanes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use oae_os::child::Supervised;
use oae_tests::dataplanes::{Dataplanes, Options};
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
    out.stdout
        .lines()
        .map(|line| {
            FIELDS
                .iter()
                .copied()
                .zip(line.split('|').map(String::from))
                .collect()
        })
        .collect()
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
    assert_eq!(frames.len(), 8, "{show}");
    let field = |i: usize, name: &str| frames[i][name].as_str();

    assert_eq!(field(0, "oae.transition"), "HELLO", "{show}");
    assert_eq!(
        field(0, "oae.hello.node_id"),
        "0x000000000000000a",
        "{show}"
    );
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
            .all(|(i, f)| i == 4 || !f["oae.crc.good"].contains('0')),
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
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A live dataplane's frames, captured where the kernel sees them. AF_XDP
/// sends bypass the kernel's packet taps and its receives are redirected
/// before them, so while both dataplanes run nothing is captured; with
/// dataplane a stopped (its XDP program detached), what b sends to it
/// arrives through a's stack: its probes and, once it gives a up, HELLOs.
#[test]
fn tshark_decodes_what_a_live_dataplane_sends() {
    if !oae_tests::require_root("tshark_decodes_what_a_live_dataplane_sends") {
        return;
    }
    let mut d = Dataplanes::start("wshark", &Options::default());
    let epoch = d.link(1)["epoch"].to_string();
    d.stop(0);
    let dir = scratch("live");
    let capture = dir.join("from-b.pcapng");
    let mut cmd = d.pair.command(0, "tshark");
    cmd.args(["-i", &d.pair.ifname[0], "-f", "ether proto 0x88b5"])
        .args(["-c", "30", "-a", "duration:30", "-w"])
        .arg(&capture)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut tshark = Supervised::spawn(&mut cmd, "tshark", Duration::from_secs(5)).unwrap();
    let status = tshark
        .wait_for(Duration::from_secs(60))
        .expect("tshark ends by itself");
    assert!(status.success(), "tshark: {status}");

    let frames = dissect(&capture);
    let show = format!("{} frames: {frames:#?}", frames.len());
    assert_eq!(frames.len(), 30, "{show}");
    assert!(frames.iter().all(|f| f["oae.crc.good"] == "1"), "{show}");
    assert!(
        frames
            .iter()
            .all(|f| ["HELLO", "TICK", "TOCK"].contains(&f["oae.transition"].as_str())),
        "an idle link sends probes, then HELLOs: {show}"
    );
    let out = run(Command::new("tshark")
        .arg("-X")
        .arg(format!(
            "lua_script:{}",
            workspace().join("tools/wireshark/oae.lua").display()
        ))
        .arg("-r")
        .arg(&capture)
        .args(["-T", "fields", "-e", "oae.sender_epoch"]));
    assert!(out.success(), "{out}");
    assert!(
        out.stdout.lines().all(|e| e == epoch),
        "every frame is b's, epoch {epoch}: {out}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
