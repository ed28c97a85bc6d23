//! Links keyed by identity (`Node::agree_keys`): a Noise XX handshake
//! before bring-up, a fresh key for each incarnation, strangers refused,
//! and no link up at either end until both hold the key.

mod common;

use std::sync::Arc;

use common::{R, pair_with};
use oae_proto::auth::{AUTH_TRAILER_LEN, LinkIdentity};
use oae_proto::handshake::KeyAgreementConfig;
use oae_proto::identity::{IdentitySecret, Trust};
use oae_proto::wire::MAX_FRAME;
use oae_proto::*;

const MACS: [[u8; 6]; 2] = [[2, 0, 0, 0, 0, 0xA], [2, 0, 0, 0, 0, 0xB]];
const MS: Nanos = 1_000_000;

fn secret(i: u8) -> IdentitySecret {
    IdentitySecret::from_bytes([i + 1; 32])
}

fn agree(node: &mut Node, i: usize, me: u8, trusted: &[u8], seed: u8) {
    agree_rekeying(
        node,
        i,
        me,
        trusted,
        seed,
        KeyAgreementConfig::DEFAULT_REKEY_AFTER,
    );
}

fn agree_rekeying(node: &mut Node, i: usize, me: u8, trusted: &[u8], seed: u8, rekey_after: u64) {
    let cfg = KeyAgreementConfig {
        identity: Arc::new(secret(me)),
        trust: Arc::new(Trust::of(trusted.iter().map(|&t| secret(t).public()))),
        seed: [seed; 32],
        retry_interval: MS,
        retry_limit: 8 * MS,
        rekey_after,
    };
    let link = LinkIdentity {
        local_mac: MACS[i],
        peer_mac: MACS[1 - i],
        channel: 0,
    };
    node.agree_keys(0, cfg, link).expect("link 0");
}

/// Moves frames both ways until neither side has anything to say; `lose`
/// decides, per frame (sender and the frame), whether it is lost.
fn pump(n: &mut [Node; 2], now: Nanos, lose: &mut impl FnMut(usize, &[u8]) -> bool) -> usize {
    let mut buf = [0u8; MAX_FRAME + AUTH_TRAILER_LEN];
    let mut moved = 0;
    loop {
        let before = moved;
        for from in 0..2 {
            while let Some(len) = n[from].poll_transmit(0, now, &mut buf) {
                if !lose(from, &buf[..len]) {
                    n[1 - from].handle_frame(0, &buf[..len], now);
                }
                moved += 1;
            }
        }
        if moved == before {
            return moved;
        }
    }
}

fn run(n: &mut [Node; 2], from: Nanos, to: Nanos, lose: &mut impl FnMut(usize, &[u8]) -> bool) {
    let mut now = from;
    while now <= to {
        for node in n.iter_mut() {
            node.handle_timeout(now);
        }
        pump(n, now, lose);
        now += MS / 4;
    }
}

fn events(n: &mut Node) -> Vec<Event> {
    std::iter::from_fn(|| n.poll_event()).collect()
}

fn faa(n: &mut [Node; 2], id: u64, now: Nanos) -> Result<Output, VerbError> {
    n[0].submit(
        0,
        VerbId(id),
        &Verb::FetchAdd {
            target: R,
            offset: 0,
            add: 1,
        },
    )
    .unwrap();
    run(n, now, now + 4 * MS, &mut |_, _| false);
    events(&mut n[0])
        .into_iter()
        .find_map(|e| match e {
            Event::Completed {
                id: VerbId(i),
                result,
                ..
            } if i == id => Some(result),
            _ => None,
        })
        .expect("the verb completed")
}

fn up(n: &Node) -> bool {
    n.link_status(0).unwrap().up
}

#[test]
fn trusted_ends_agree_a_key_bring_the_link_up_and_carry_verbs() {
    let mut n = pair_with(LinkConfig::default());
    agree(&mut n[0], 0, 0, &[1], 1);
    agree(&mut n[1], 1, 1, &[0], 2);
    run(&mut n, 0, 4 * MS, &mut |_, _| false);
    assert!(up(&n[0]) && up(&n[1]));
    for (i, node) in n.iter_mut().enumerate() {
        let ev = events(node);
        assert!(
            ev.contains(&Event::Link {
                link: 0,
                change: LinkChange::Keyed
            }),
            "{ev:?}"
        );
        let peer = node.key_agreement(0).unwrap().peer().copied().unwrap();
        assert_eq!(peer.identity, secret(1 - i as u8).public());
        assert_eq!(peer.node_id, [0xB, 0xA][i]);
        assert!(node.link_auth(0).unwrap().stats().verified > 0);
    }
    assert!(faa(&mut n, 1, 5 * MS).is_ok());
}

#[test]
fn a_restarted_peer_agrees_a_new_key_and_old_frames_are_dropped() {
    let mut n = pair_with(LinkConfig::default());
    agree(&mut n[0], 0, 0, &[1], 1);
    agree(&mut n[1], 1, 1, &[0], 2);
    let mut captured = Vec::new();
    run(&mut n, 0, 4 * MS, &mut |from, f| {
        if from == 0 {
            captured.push(f.to_vec());
        }
        false
    });
    assert!(faa(&mut n, 1, 5 * MS).is_ok());
    // b restarts: a new incarnation with a new seed, same identity.
    let [a, _] = n;
    let mut b = Node::new(0xB, 2);
    b.add_link(LinkConfig::default()).unwrap();
    b.register(RegionSpec {
        id: R.id,
        key: R.key,
        len: 256,
        permissions: Permissions::ALL,
    })
    .unwrap();
    let mut n = [a, b];
    agree(&mut n[1], 1, 1, &[0], 3);
    let old_key = n[0].link_auth(0).unwrap().stats().clone();
    run(&mut n, 10 * MS, 20 * MS, &mut |_, _| false);
    assert!(up(&n[0]) && up(&n[1]));
    assert!(events(&mut n[0]).contains(&Event::Link {
        link: 0,
        change: LinkChange::PeerRestarted
    }));
    // a started the first handshake (the lower MAC), b the second.
    let stats = n[0].key_agreement(0).unwrap().stats();
    assert_eq!(
        (stats.initiated, stats.answered, stats.completed),
        (1, 1, 2)
    );
    // Every frame the old key sealed is refused by the new incarnation.
    let dropped = |n: &Node| n.link_auth(0).unwrap().stats().dropped.iter().sum::<u64>();
    let before = dropped(&n[1]);
    for f in captured.iter().filter(|f| f.len() != 256) {
        n[1].handle_frame(0, f, 21 * MS);
    }
    assert_eq!(
        dropped(&n[1]) - before,
        captured.iter().filter(|f| f.len() != 256).count() as u64
    );
    assert!(old_key.verified > 0);
    assert!(faa(&mut n, 2, 22 * MS).is_ok());
}

#[test]
fn a_stranger_is_refused_and_its_frames_never_reach_the_link() {
    let mut n = pair_with(LinkConfig::default());
    agree(&mut n[0], 0, 0, &[1], 1);
    // b proves identity 2, which a does not trust.
    agree(&mut n[1], 1, 2, &[0], 2);
    run(&mut n, 0, 40 * MS, &mut |_, _| false);
    assert!(!up(&n[0]) && !up(&n[1]));
    let stranger = secret(2).public();
    assert!(events(&mut n[0]).contains(&Event::Untrusted {
        link: 0,
        identity: stranger
    }));
    let a = n[0].key_agreement(0).unwrap();
    assert!(a.stats().untrusted >= 1 && a.peer().is_none());
    assert_eq!(n[0].link_down_reason(0), Some(DownReason::PeerUntrusted));
    assert_eq!(n[0].link_stats(0).unwrap().rx_frames, 0);
    // b may hold a key of its own handshake's (a refused its message 3
    // and tells no one why): it never verified a frame under it.
    assert!(n[1].link_auth(0).is_none_or(|a| a.stats().verified == 0));
}

#[test]
fn an_interrupted_handshake_never_leaves_either_end_up() {
    let mut n = pair_with(LinkConfig::default());
    agree(&mut n[0], 0, 0, &[1], 1);
    agree(&mut n[1], 1, 1, &[0], 2);
    // Every message 3 is lost for 20 ms, either way: whoever sent one
    // holds a key its peer never took. Neither end is ever up meanwhile.
    let mut lose_msg3 = |_: usize, f: &[u8]| f.len() == 256 && f[7] == 3;
    for step in 0..80 {
        let now = step * MS / 4;
        run(&mut n, now, now, &mut lose_msg3);
        assert!(!up(&n[0]) && !up(&n[1]), "up at {now} ns");
    }
    assert!(n[0].link_auth(0).is_some());
    run(&mut n, 20 * MS, 60 * MS, &mut |_, _| false);
    assert!(up(&n[0]) && up(&n[1]));
    assert!(faa(&mut n, 1, 61 * MS).is_ok());
}

#[test]
fn keys_renew_themselves_under_a_running_workload_with_no_verb_failed() {
    let mut n = pair_with(LinkConfig::default());
    agree_rekeying(&mut n[0], 0, 0, &[1], 1, 40);
    agree_rekeying(&mut n[1], 1, 1, &[0], 2, 40);
    run(&mut n, 0, 4 * MS, &mut |_, _| false);
    let mut now = 5 * MS;
    for id in 0..200 {
        // Eight verbs in flight, on eight words (no two contend).
        for k in 0..8 {
            n[0].submit(
                0,
                VerbId(id * 8 + k),
                &Verb::FetchAdd {
                    target: R,
                    offset: 8 * k as u32,
                    add: 1,
                },
            )
            .unwrap();
        }
        run(&mut n, now, now + MS, &mut |_, _| false);
        now += 2 * MS;
    }
    run(&mut n, now, now + 10 * MS, &mut |_, _| false);
    let completions: Vec<_> = events(&mut n[0])
        .into_iter()
        .filter_map(|e| match e {
            Event::Completed { result, .. } => Some(result),
            _ => None,
        })
        .collect();
    assert_eq!(completions.len(), 1600);
    let failed: Vec<_> = completions.iter().filter(|r| r.is_err()).collect();
    assert!(failed.is_empty(), "{} failed: {failed:?}", failed.len());
    let words = n[1].memory().bytes(1).unwrap();
    for k in 0..8 {
        let word = u64::from_le_bytes(words[8 * k..8 * k + 8].try_into().unwrap());
        assert_eq!(word, 200, "word {k}");
    }
    for node in &n {
        let a = node.link_auth(0).unwrap().stats();
        assert!(a.key_switches >= 20, "{a:?}");
        assert_eq!(a.dropped, [0; 5], "{a:?}");
    }
}

#[test]
fn a_peer_with_a_shared_key_or_none_is_told_this_end_agrees_keys() {
    use oae_proto::auth::{Authenticator, LinkKey};
    for shared in [true, false] {
        let mut n = pair_with(LinkConfig::default());
        agree(&mut n[0], 0, 0, &[1], 1);
        if shared {
            let link = LinkIdentity {
                local_mac: MACS[1],
                peer_mac: MACS[0],
                channel: 0,
            };
            n[1].authenticate_link(0, Authenticator::new(link, 0, &LinkKey([9; 32])))
                .unwrap();
        }
        run(&mut n, 0, 40 * MS, &mut |_, _| false);
        assert!(!up(&n[0]) && !up(&n[1]));
        assert_eq!(
            n[1].link_down_reason(0),
            Some(DownReason::PeerAgreesKeys),
            "shared key {shared}"
        );
    }
}
