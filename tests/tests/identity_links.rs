//! Links keyed by identity on a live pair (`[queue.auth] identity =
//! true`): the handshake over real AF_XDP sockets, the peer's identity in
//! status, keys renewed under a running workload with no verb failed, an
//! untrusted peer refused and named, and a node that comes back with a
//! new identity taken for a stranger.

use std::process::Command;
use std::time::Duration;

use oae_client::stats::LinkCounters;
use oae_client::status::ProtocolStatus;
use oae_tests::dataplanes::{Dataplanes, Options, binary, identity_file};
use oae_tests::run;

fn link(d: &Dataplanes, i: usize) -> LinkCounters {
    d.stats(i).queues[0].links[0].clone()
}

fn peer_identity(d: &Dataplanes, i: usize) -> Option<String> {
    match &d.link(i).state.protocol {
        ProtocolStatus::Oae(o) => o.peer_identity.clone(),
        ProtocolStatus::RcModel(_) => panic!("an OAE link"),
    }
}

/// What `oaed --show-identity` prints for dataplane `name`.
fn show_identity(d: &Dataplanes, name: &str) -> String {
    let out = run(Command::new(binary("oaed"))
        .arg("--config")
        .arg(&d.config)
        .args(["--name", name, "--state-dir"])
        .arg(d.dir.join(format!("{name}.state")))
        .arg("--show-identity"));
    assert!(out.success() && out.stdout.trim().len() == 64, "{out}");
    out.stdout.trim().to_string()
}

#[test]
fn keys_agreed_by_identity_carry_a_workload_and_renew_with_no_verb_failed() {
    if !oae_tests::require_root("keys_agreed_by_identity_carry_a_workload_and_renew") {
        return;
    }
    let options = Options {
        identities: true,
        rekey_after: Some(2_000),
        ..Options::default()
    };
    let d = Dataplanes::start("ident", &options);
    let ids = [show_identity(&d, "a"), show_identity(&d, "b")];
    for i in 0..2 {
        assert_eq!(peer_identity(&d, i).as_deref(), Some(&ids[1 - i][..]));
        let c = link(&d, i);
        assert!(c.get("handshakes_completed") >= 1, "{c:?}");
        assert!(
            d.log(i).contains(&format!("identity {}", ids[i])),
            "{}",
            d.log(i)
        );
    }
    d.start_workload(8, 2.0, 5);
    let r = d.finished_workload(Duration::from_secs(30));
    d.assert_workload_exact(&r);
    // Keys renewed under the workload: every 2 000 frames, at both ends.
    for i in 0..2 {
        let c = link(&d, i);
        assert!(c.get("auth_key_switches") >= 2, "{c:?}");
        assert_eq!(c.auth_dropped.values().sum::<u64>(), 0, "{c:?}");
    }
}

#[test]
fn an_untrusted_peer_is_refused_counted_and_named_in_the_log() {
    if !oae_tests::require_root("an_untrusted_peer_is_refused_counted_and_named_in_the_log") {
        return;
    }
    let options = Options {
        identities: true,
        distrust: Some(1),
        ..Options::default()
    };
    let mut d = Dataplanes::start_alone("distrust", &options);
    d.launch(1);
    let stranger = show_identity(&d, "b");
    d.wait_for(Duration::from_secs(20), "a to refuse b", |d| {
        link(d, 0).get("handshake_peers_untrusted") >= 1
    });
    let log = d.log(0);
    assert!(
        log.contains(&format!(
            "its peer proved identity {stranger}, which is not in the trust list"
        )),
        "{log}"
    );
    assert!(!d.link(0).state.up && !d.link(1).state.up);
    assert_eq!(peer_identity(&d, 0), None);
    let why = match &d.link(0).state.protocol {
        ProtocolStatus::Oae(o) => o.down_reason.clone(),
        ProtocolStatus::RcModel(_) => panic!("an OAE link"),
    };
    assert_eq!(
        why.map(|w| w.reason),
        Some(oae_proto::DownReason::PeerUntrusted)
    );
    assert_eq!(link(&d, 0).get("rx_frames"), 0, "{:?}", link(&d, 0));
}

#[test]
fn a_node_back_with_a_new_identity_is_a_stranger() {
    if !oae_tests::require_root("a_node_back_with_a_new_identity_is_a_stranger") {
        return;
    }
    let options = Options {
        identities: true,
        ..Options::default()
    };
    let mut d = Dataplanes::start("newid", &options);
    let old = show_identity(&d, "b");
    d.stop(1);
    std::fs::remove_file(identity_file(&d.dir, "b")).expect("b's identity file");
    d.launch(1);
    let new = show_identity(&d, "b");
    assert_ne!(old, new);
    d.wait_for(
        Duration::from_secs(20),
        "a to refuse b's new identity",
        |d| link(d, 0).get("handshake_peers_untrusted") >= 1,
    );
    assert!(
        d.log(0).contains(&format!("identity {new}")),
        "{}",
        d.log(0)
    );
    assert!(!d.link(1).state.up);
}
