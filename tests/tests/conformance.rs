//! `oae-conform` against `oaed`: dataplane a runs alone, and the tester
//! plays its peer from b's namespace with b's MAC, over the real veth
//! pair, AF_XDP and XDP program. Every clause must pass. Needs root.

use oae_common::mac::format_mac;
use oae_tests::dataplanes::{
    Dataplanes, LOCAL_REGION, MACS, Options, TARGET_KEY, TARGET_REGION, binary,
};
use oae_tests::{CommandOutput, require_root, run};

/// Dataplane `i`'s MAC as text.
fn mac(i: usize) -> String {
    format_mac(MACS[i])
}

/// Runs `oae-conform` from b's namespace against dataplane a with `extra`
/// arguments; every clause it runs must pass.
fn tester(d: &Dataplanes, extra: &[&str]) -> CommandOutput {
    let conform = binary("oae-conform");
    let out = run(d
        .pair
        .command(1, conform.to_str().expect("utf-8 path"))
        .args(["--iface", &d.pair.ifname[1], "--iut-mac", &mac(0)])
        .args(["--region", &TARGET_REGION.to_string()])
        .args(["--key", &format!("{TARGET_KEY:#x}")])
        .args(["--region-len", "65536"])
        .args(extra));
    assert!(out.success(), "{out}\noaed's log:\n{}", d.log(0));
    out
}

#[test]
fn oaed_passes_every_clause() {
    if !require_root("oaed_passes_every_clause") {
        return;
    }
    let d = Dataplanes::start_alone(
        "conf",
        &Options {
            slots: 32,
            // Fewer credits than slots, so the `no credit` refusal can be shown.
            credits: Some(8),
            // The tester is a process of its own on a shared machine: a
            // round long enough that a descheduled tester is not dead.
            min_round_ns: Some(50_000_000),
            ..Options::default()
        },
    );
    // How the tester makes dataplane a initiate verbs towards it.
    let submit = format!(
        "{} --socket {} verb",
        binary("oaectl").display(),
        d.sockets[0].display()
    );
    let out = tester(
        &d,
        &[
            "--base",
            "4096",
            "--no-atomics",
            &format!("{LOCAL_REGION}:2"),
            "--iut-read-lands-in",
            &format!("{LOCAL_REGION}:0"),
            "--submit",
            &submit,
        ],
    );
    println!("{}", out.stdout);
    let passes = out.stdout.lines().filter(|l| l.starts_with("PASS")).count();
    assert!(passes >= 24, "{passes} clauses passed:\n{out}");
    assert!(
        !out.stdout.contains("not checked"),
        "every clause in full:\n{out}"
    );
    // And the dataplane saw a peer that broke the rules on purpose, and
    // counted it.
    let link = d.stats(0).queues[0].links[0].clone();
    assert!(
        link.malformed.get("bad_crc").copied() >= Some(1),
        "{link:?}"
    );
    // The TOCKs the tester sent late for superseded TICKs were taken as
    // answers (R16), not counted stale.
    assert!(
        link.counters.get("late_tocks").copied() >= Some(1),
        "{link:?}"
    );
}

/// The fabric's frames: dataplane a runs the fabric on its link, and the
/// tester checks its ADVERTs and FORWARDs.
#[test]
fn oaed_with_the_fabric_sends_its_frames_as_specified() {
    if !require_root("oaed_with_the_fabric_sends_its_frames_as_specified") {
        return;
    }
    let d = Dataplanes::start_alone(
        "confab",
        &Options {
            slots: 32,
            min_round_ns: Some(50_000_000),
            fabric: true,
            ..Options::default()
        },
    );
    let out = tester(&d, &["--fabric"]);
    println!("{}", out.stdout);
    for clause in ["A1", "A2", "F1"] {
        assert!(
            out.stdout
                .lines()
                .any(|l| l.starts_with("PASS") && l[6..].starts_with(clause)),
            "{clause} did not pass:\n{out}"
        );
    }
}
