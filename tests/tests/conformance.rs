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

/// Every clause of `clauses` passed in the tester's output.
fn passed(out: &CommandOutput, clauses: &[&str]) {
    for clause in clauses {
        assert!(
            out.stdout
                .lines()
                .any(|l| l.starts_with("PASS") && l[6..].starts_with(clause)),
            "{clause} did not pass:\n{out}"
        );
    }
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
    assert!(passes >= 25, "{passes} clauses passed:\n{out}");
    passed(&out, &["D1 D4"]);
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
    passed(&out, &["A1", "A2", "F1"]);
}

/// An authenticated link: dataplane a has a key, and the tester, given the
/// same key, seals every frame it sends, checks the trailer of every frame
/// a sends, and sends frames that fail authentication for each reason.
#[test]
fn oaed_with_a_key_authenticates_every_frame() {
    if !require_root("oaed_with_a_key_authenticates_every_frame") {
        return;
    }
    const KEY: &str = "c0f0a11ce0b0b0c0ffee00d15ea5e0123456789abcdef0fedcba98765432100a";
    let d = Dataplanes::start_alone(
        "confauth",
        &Options {
            slots: 32,
            min_round_ns: Some(50_000_000),
            auth_key: Some(KEY),
            ..Options::default()
        },
    );
    let out = tester(&d, &["--base", "4096", "--auth-key", KEY]);
    println!("{}", out.stdout);
    passed(&out, &["AUTH", "V1 V2 R20 R23", "F1"]);
    // Each forged frame was counted by its reason.
    let link = d.stats(0).queues[0].links[0].clone();
    for reason in [
        "bad_tag",
        "unknown_key",
        "unauthenticated",
        "old_epoch",
        "replayed",
    ] {
        assert!(
            link.auth_dropped.get(reason).copied() >= Some(1),
            "{reason}: {link:?}"
        );
    }
}

/// A link keyed by identity: the tester, with b's identity (which a
/// trusts), takes part in a's handshake written from PROTOCOL.md alone,
/// derives the link key, and runs the authentication clauses under it.
#[test]
fn oaed_agrees_a_key_with_a_tester_written_from_the_text() {
    if !require_root("oaed_agrees_a_key_with_a_tester_written_from_the_text") {
        return;
    }
    let d = Dataplanes::start_alone(
        "confid",
        &Options {
            slots: 32,
            min_round_ns: Some(50_000_000),
            identities: true,
            ..Options::default()
        },
    );
    let identity = oae_tests::dataplanes::identity_file(&d.dir, "b");
    let out = tester(
        &d,
        &[
            "--base",
            "4096",
            "--identity-file",
            identity.to_str().expect("utf-8 path"),
        ],
    );
    println!("{}", out.stdout);
    assert!(
        out.stdout
            .contains("link keyed by a handshake with the IUT's identity"),
        "{out}"
    );
    passed(&out, &["AUTH", "V1 V2 R20 R23", "F1"]);
    let link = d.stats(0).queues[0].links[0].clone();
    assert_eq!(link.get("handshakes_completed"), 1, "{link:?}");
}

/// A link with `ordered = false`: the tester checks that a `seen` past an
/// unanswered REQUEST does not reverse it, patience does.
#[test]
fn oaed_on_an_unordered_link_waits_for_patience() {
    if !require_root("oaed_on_an_unordered_link_waits_for_patience") {
        return;
    }
    let d = Dataplanes::start_alone(
        "confuno",
        &Options {
            slots: 32,
            min_round_ns: Some(50_000_000),
            unordered: true,
            ..Options::default()
        },
    );
    let submit = format!(
        "{} --socket {} verb",
        binary("oaectl").display(),
        d.sockets[0].display()
    );
    let out = tester(&d, &["--base", "4096", "--unordered", "--submit", &submit]);
    println!("{}", out.stdout);
    passed(&out, &["I3 (patience)", "V1 V2 R20 R23", "F1"]);
}
