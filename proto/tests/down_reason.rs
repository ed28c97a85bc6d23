//! A link that cannot come up says why, when the frames it drops tell:
//! two ends of one identity, an epoch gone back at either end, a peer
//! whose frames carry an authentication trailer, another wire version.
//! A peer that is merely absent gives no reason, and a reason is gone once
//! the link is up.

use oae_proto::auth::{AUTH_TRAILER_LEN, Authenticator, LinkIdentity, LinkKey};
use oae_proto::wire::{MAX_FRAME, Malformed};
use oae_proto::*;

const MS: Nanos = 1_000_000;

fn node(id: u64, epoch: u32) -> Node {
    let mut n = Node::new(id, epoch);
    n.add_link(LinkConfig::default()).unwrap();
    n
}

/// Runs both nodes on a perfect wire, timers included, from `from` to
/// `until` in steps of 100 µs.
fn run(a: &mut Node, b: &mut Node, from: Nanos, until: Nanos) {
    let mut buf = [0u8; MAX_FRAME];
    let mut now = from;
    while now <= until {
        for _ in 0..64 {
            let mut moved = false;
            while let Some(len) = a.poll_transmit(0, now, &mut buf) {
                b.handle_frame(0, &buf[..len], now);
                moved = true;
            }
            while let Some(len) = b.poll_transmit(0, now, &mut buf) {
                a.handle_frame(0, &buf[..len], now);
                moved = true;
            }
            if !moved {
                break;
            }
        }
        a.handle_timeout(now);
        b.handle_timeout(now);
        now += MS / 10;
    }
    while a.poll_event().is_some() {}
    while b.poll_event().is_some() {}
}

fn up(n: &Node) -> bool {
    n.link_status(0).unwrap().up
}

fn malformed(n: &Node, m: Malformed) -> u64 {
    let i = Malformed::ALL.iter().position(|&x| x == m).unwrap();
    n.link_stats(0).unwrap().malformed[i]
}

#[test]
fn an_absent_peer_gives_no_reason() {
    let mut a = node(0xA, 1);
    let mut silent = node(0xB, 1);
    let mut buf = [0u8; MAX_FRAME];
    for t in 0..100 {
        while a.poll_transmit(0, t * MS, &mut buf).is_some() {}
        a.handle_timeout(t * MS);
    }
    let s = a.link_status(0).unwrap();
    assert!(!s.up && s.unreachable);
    assert_eq!((s.down_reason, s.down_reason_frames), (None, 0));
    // Nor does a pair that comes up.
    run(&mut a, &mut silent, 100 * MS, 110 * MS);
    assert!(up(&a) && up(&silent));
    assert_eq!(a.link_down_reason(0), None);
}

/// Two dataplanes with one node id and one epoch (copies of one state
/// directory): each takes the other's HELLO for its own identity, both
/// take the role Bob and drop each other's answers as inconsistent (R6).
/// Once one of them is given its own id, the link comes up and the
/// reason is gone.
#[test]
fn one_node_id_and_epoch_at_both_ends_is_named() {
    let mut a = node(7, 3);
    let mut b = node(7, 3);
    run(&mut a, &mut b, 0, 50 * MS);
    for n in [&a, &b] {
        let s = n.link_status(0).unwrap();
        assert!(!s.up, "{s:?}");
        assert_eq!(s.down_reason, Some(DownReason::SameIdentity), "{s:?}");
        assert!(s.down_reason_frames >= DOWN_REASON_FRAMES, "{s:?}");
    }
    // Whichever HELLO went first, the answers naming the other's epoch
    // are dropped as inconsistent.
    let dropped = malformed(&a, Malformed::Inconsistent) + malformed(&b, Malformed::Inconsistent);
    assert!(dropped > 0, "{:?} {:?}", a.link_stats(0), b.link_stats(0));
    let mut fixed = node(8, 1);
    run(&mut a, &mut fixed, 50 * MS, 60 * MS);
    assert!(up(&a) && up(&fixed));
    assert_eq!(a.link_status(0).unwrap().down_reason, None);
}

/// A peer restarted with a smaller epoch (its state directory lost): this
/// end drops its HELLOs as stale (R5) and says the peer's epoch went back;
/// the peer sees HELLOs naming a later epoch of its own than it has, and
/// says its own epoch went back.
#[test]
fn an_epoch_gone_back_is_named_at_both_ends() {
    let mut a = node(0xA, 1);
    let mut b = node(0xB, 5);
    run(&mut a, &mut b, 0, 5 * MS);
    assert!(up(&a) && up(&b));
    let mut b_again = node(0xB, 2);
    run(&mut a, &mut b_again, 5 * MS, 500 * MS);
    let sa = a.link_status(0).unwrap();
    let sb = b_again.link_status(0).unwrap();
    assert!(!sa.up && !sb.up, "{sa:?} {sb:?}");
    assert_eq!(
        sa.down_reason,
        Some(DownReason::PeerEpochWentBack),
        "{sa:?}"
    );
    assert_eq!(sb.down_reason, Some(DownReason::EpochWentBack), "{sb:?}");
    assert!(a.link_stats(0).unwrap().stale_epoch >= u64::from(DOWN_REASON_FRAMES));
}

/// This end has no key; the peer's frames carry an authentication trailer
/// behind a whole OAE frame: too long for their class (`wrong_length`),
/// and named for what they are.
#[test]
fn a_peer_that_authenticates_is_named_by_an_end_that_does_not() {
    let mut a = node(0xA, 1);
    let mut b = node(0xB, 1);
    let identity = LinkIdentity {
        local_mac: [2, 0, 0, 0, 0, 2],
        peer_mac: [2, 0, 0, 0, 0, 1],
        channel: 0,
    };
    b.authenticate_link(0, Authenticator::new(identity, 0, &LinkKey([7; 32])))
        .unwrap();
    let mut buf = [0u8; MAX_FRAME + AUTH_TRAILER_LEN];
    for t in 0..20 {
        let now = t * MS;
        // b seals its frames itself.
        while let Some(len) = b.poll_transmit(0, now, &mut buf) {
            a.handle_frame(0, &buf[..len], now);
        }
        while let Some(len) = a.poll_transmit(0, now, &mut buf) {
            // Dropped by b's authenticator: a plain frame is too short.
            assert!(len < 64 + AUTH_TRAILER_LEN);
        }
        a.handle_timeout(now);
        b.handle_timeout(now);
    }
    let s = a.link_status(0).unwrap();
    assert!(!s.up);
    assert_eq!(s.down_reason, Some(DownReason::PeerAuthenticated), "{s:?}");
    assert!(malformed(&a, Malformed::WrongLength) >= u64::from(DOWN_REASON_FRAMES));
}

/// Frames of another wire version are named; so is a reason the
/// transport reports (an authenticated link's drop), and a frame once
/// is not a diagnosis: it takes `DOWN_REASON_FRAMES` in a row.
#[test]
fn another_version_is_named_after_frames_in_a_row() {
    let mut a = node(0xA, 1);
    let mut b = node(0xB, 1);
    let mut buf = [0u8; MAX_FRAME];
    let len = b.poll_transmit(0, 0, &mut buf).unwrap();
    buf[0] = (3 << 4) | (buf[0] & 0x0f);
    for i in 1..=DOWN_REASON_FRAMES {
        a.handle_frame(0, &buf[..len], 0);
        let s = a.link_status(0).unwrap();
        assert_eq!(s.down_reason_frames, i);
        let told = (i >= DOWN_REASON_FRAMES).then_some(DownReason::WireVersion);
        assert_eq!(s.down_reason, told, "after {i} frames");
    }
    assert_eq!(malformed(&a, Malformed::UnknownVersion), 3);
    // Another reason starts its own count.
    a.note_dropped(0, DownReason::PeerUnauthenticated);
    assert_eq!(a.link_down_reason(0), None);
    a.note_dropped(0, DownReason::PeerUnauthenticated);
    a.note_dropped(0, DownReason::PeerUnauthenticated);
    assert_eq!(a.link_down_reason(0), Some(DownReason::PeerUnauthenticated));
}

/// A frame dropped while the link is up says nothing of why it would not
/// come up later: nothing is recorded.
#[test]
fn drops_while_up_are_not_recorded() {
    let mut a = node(0xA, 1);
    let mut b = node(0xB, 1);
    run(&mut a, &mut b, 0, 5 * MS);
    assert!(up(&a));
    for _ in 0..5 {
        a.note_dropped(0, DownReason::KeyMismatch);
    }
    let s = a.link_status(0).unwrap();
    assert_eq!((s.down_reason, s.down_reason_frames), (None, 0));
}
