//! Bring-up against a peer that is absent, then present: HELLOs back off
//! while nobody answers, and the peer's own HELLO is answered at once.

mod common;

use oae_proto::wire::{Frame, MAX_FRAME, Transition};
use oae_proto::*;

const SECOND: Nanos = 1_000_000_000;

/// Runs `node` alone from `from` to `until`, returning when each frame it
/// sent went out.
fn alone(node: &mut Node, from: Nanos, until: Nanos) -> Vec<Nanos> {
    let mut buf = [0u8; MAX_FRAME];
    let mut sent = Vec::new();
    let mut now = from;
    while now <= until {
        while let Some(len) = node.poll_transmit(0, now, &mut buf) {
            let frame = Frame::parse(&buf[..len]).expect("a frame");
            assert_eq!(frame.context.transition, Transition::Hello);
            sent.push(now);
        }
        now = node
            .poll_timeout()
            .expect("a HELLO is always due")
            .max(now + 1);
        node.handle_timeout(now);
    }
    sent
}

#[test]
fn hellos_back_off_to_one_a_second_while_the_peer_is_absent() {
    let cfg = LinkConfig::default();
    let [mut a, _] = common::pair_with(cfg);
    let sent = alone(&mut a, 0, 600 * SECOND);
    let gaps: Vec<Nanos> = sent.windows(2).map(|w| w[1] - w[0]).collect();
    // The first ones at the configured interval, as before the peer is
    // declared unreachable: bring-up is not slowed when the peer is there.
    let fast = cfg.unreachable_after_rounds as usize;
    assert!(
        gaps[..fast].iter().all(|&g| g == cfg.hello_interval),
        "{:?}",
        &gaps[..fast + 2]
    );
    // Then doubling, never more than the limit apart.
    assert!(gaps.windows(2).all(|w| w[1] >= w[0]), "{gaps:?}");
    assert!(gaps.iter().all(|&g| g <= HELLO_BACKOFF_LIMIT), "{gaps:?}");
    assert_eq!(*gaps.last().unwrap(), HELLO_BACKOFF_LIMIT);
    // Ten minutes of an absent peer: about 600 HELLOs, not 600,000.
    assert!((600..=640).contains(&sent.len()), "{} HELLOs", sent.len());
}

#[test]
fn a_backed_off_end_answers_the_peers_hello_at_once() {
    let cfg = LinkConfig::default();
    let mut n = common::pair_with(cfg);
    let late = 300 * SECOND;
    alone(&mut n[0], 0, late);
    // The peer starts now; the first end's next HELLO of its own is up to a second away.
    let mut buf = [0u8; MAX_FRAME];
    let mut now = late + 1;
    for _ in 0..4 {
        for from in [1, 0] {
            while let Some(len) = n[from].poll_transmit(0, now, &mut buf) {
                n[1 - from].handle_frame(0, &buf[..len], now);
            }
        }
        now += 1;
    }
    assert!(n[0].link_status(0).unwrap().up && n[1].link_status(0).unwrap().up);
    assert!(
        now - late < 10,
        "up {} ns after the peer started",
        now - late
    );
}
