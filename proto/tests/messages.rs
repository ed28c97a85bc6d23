//! SEND and RECV between two nodes on a perfect wire, and on one that
//! loses the echo: delivery into the receive posted first, refusals in the
//! same round trip, order, and no trace of a reversed attempt.

mod common;

use common::{R, pair_with, pump};
use oae_proto::wire::MAX_FRAME;
use oae_proto::*;

fn pair() -> [Node; 2] {
    let mut n = pair_with(LinkConfig::default());
    pump(&mut n, 0);
    n
}

fn send(data: &[u8], imm: Option<u32>) -> Verb {
    Verb::Send {
        imm,
        data: Block::new(data).unwrap(),
    }
}

fn receive(id: u64, offset: u32, len: u16) -> PostedReceive {
    PostedReceive {
        id,
        region: R.id,
        offset,
        len,
    }
}

fn events(n: &mut Node) -> Vec<Event> {
    std::iter::from_fn(|| n.poll_event()).collect()
}

fn completions(n: &mut Node) -> Vec<(VerbId, Result<Output, VerbError>)> {
    events(n)
        .into_iter()
        .filter_map(|e| match e {
            Event::Completed { id, result, .. } => Some((id, result)),
            _ => None,
        })
        .collect()
}

fn received(n: &mut Node) -> Vec<(u64, u16, Option<u32>)> {
    events(n)
        .into_iter()
        .filter_map(|e| match e {
            Event::Received { id, len, imm, .. } => Some((id, len, imm)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_message_lands_whole_in_the_receive_posted_first() {
    let mut n = pair();
    n[1].post_receive(0, receive(100, 64, 32)).unwrap();
    n[1].post_receive(0, receive(101, 128, 32)).unwrap();
    n[0].submit(0, VerbId(1), &send(b"hello, receiver", Some(7)))
        .unwrap();
    pump(&mut n, 1);
    assert_eq!(completions(&mut n[0]), [(VerbId(1), Ok(Output::Send))]);
    assert_eq!(received(&mut n[1]), [(100, 15, Some(7))]);
    assert_eq!(&n[1].memory().bytes(1).unwrap()[64..79], b"hello, receiver");
    assert_eq!(n[1].link_status(0).unwrap().posted_receives, 1);
    assert_eq!(n[1].link_stats(0).unwrap().messages_received, 1);
    assert_eq!(n[1].memory().locked_words(), 0);
}

#[test]
fn with_no_receive_posted_a_send_is_refused_in_one_round_trip() {
    let mut n = pair();
    n[0].submit(0, VerbId(1), &send(b"anyone?", None)).unwrap();
    let mut buf = [0u8; MAX_FRAME];
    // One request, one refusal: no timer, no retry.
    let len = n[0].poll_transmit(0, 1, &mut buf).unwrap();
    n[1].handle_frame(0, &buf[..len], 1);
    let len = n[1].poll_transmit(0, 1, &mut buf).unwrap();
    n[0].handle_frame(0, &buf[..len], 2);
    assert_eq!(
        completions(&mut n[0]),
        [(VerbId(1), Err(VerbError::Refused(Refusal::NoReceive)))]
    );
    assert_eq!(n[0].link_stats(0).unwrap().retries, 0);
    // A receive posted afterwards takes the next message, not that one.
    n[1].post_receive(0, receive(5, 0, 8)).unwrap();
    pump(&mut n, 3);
    assert!(received(&mut n[1]).is_empty());
    n[0].submit(0, VerbId(2), &send(b"now", None)).unwrap();
    pump(&mut n, 4);
    assert_eq!(received(&mut n[1]), [(5, 3, None)]);
}

#[test]
fn a_message_longer_than_its_receive_is_refused_and_the_receive_stays() {
    let mut n = pair();
    n[1].post_receive(0, receive(9, 0, 4)).unwrap();
    n[0].submit(0, VerbId(1), &send(b"too long", None)).unwrap();
    pump(&mut n, 1);
    assert_eq!(
        completions(&mut n[0]),
        [(VerbId(1), Err(VerbError::Refused(Refusal::ReceiveTooSmall)))]
    );
    assert_eq!(n[1].link_status(0).unwrap().posted_receives, 1);
    assert_eq!(&n[1].memory().bytes(1).unwrap()[..8], &[0; 8]);
    n[0].submit(0, VerbId(2), &send(b"fits", None)).unwrap();
    pump(&mut n, 2);
    assert_eq!(received(&mut n[1]), [(9, 4, None)]);
}

/// Messages submitted together go one at a time, and land in the order
/// sent, in the order the receives were posted; an immediate-only SEND
/// (no bytes) takes a receive too.
#[test]
fn messages_arrive_in_the_order_sent() {
    let mut n = pair();
    for k in 0..6u64 {
        n[1].post_receive(0, receive(k, 8 * k as u32, 8)).unwrap();
    }
    for k in 0..5u8 {
        n[0].submit(0, VerbId(u64::from(k)), &send(&[k; 8], None))
            .unwrap();
    }
    n[0].submit(0, VerbId(5), &send(&[], Some(0xFEED))).unwrap();
    assert_eq!(n[0].link_status(0).unwrap().queued_verbs, 6);
    pump(&mut n, 1);
    let got = received(&mut n[1]);
    assert_eq!(
        got,
        (0..5)
            .map(|k| (k, 8, None))
            .chain([(5, 0, Some(0xFEED))])
            .collect::<Vec<_>>()
    );
    for k in 0..5usize {
        assert_eq!(n[1].memory().bytes(1).unwrap()[8 * k], k as u8);
    }
}

/// The echo of a SEND is lost: the initiator reverses the attempt, the
/// target puts the receive's bytes back and posts it again, and the retry
/// fills it, once.
#[test]
fn a_reversed_send_leaves_no_trace_and_its_retry_lands_once() {
    let mut n = pair();
    n[1].post_receive(0, receive(1, 0, 16)).unwrap();
    n[0].submit(0, VerbId(1), &send(b"first try", None))
        .unwrap();
    let mut buf = [0u8; MAX_FRAME];
    let len = n[0].poll_transmit(0, 1, &mut buf).unwrap();
    n[1].handle_frame(0, &buf[..len], 1);
    assert_eq!(&n[1].memory().bytes(1).unwrap()[..9], b"first try");
    // The echo is lost; a later frame of the target's shows it.
    assert!(n[1].poll_transmit(0, 1, &mut buf).is_some());
    // Time passes until the initiator gives up on the echo by patience or
    // by a probe's answer; drive both ends until it is settled.
    let mut now = 2;
    while completions_pending(&n[0]) && now < 10_000_000_000 {
        now += 1_000_000;
        for node in n.iter_mut() {
            node.handle_timeout(now);
        }
        pump(&mut n, now);
    }
    assert_eq!(completions(&mut n[0]), [(VerbId(1), Ok(Output::Send))]);
    assert_eq!(received(&mut n[1]), [(1, 9, None)]);
    let stats = n[1].link_stats(0).unwrap();
    assert_eq!(
        (stats.transfers_reversed, stats.messages_received),
        (1, 1),
        "{stats:?}"
    );
    assert_eq!(n[1].memory().locked_words(), 0);
}

fn completions_pending(n: &Node) -> bool {
    n.link_status(0).unwrap().queued_verbs > 0 || n.in_doubt() > 0
}

#[test]
fn receives_outside_memory_or_too_many_are_refused() {
    let mut n = pair();
    assert!(matches!(
        n[1].post_receive(0, receive(1, 250, 16)),
        Err(PostError::BadBuffer(_))
    ));
    assert!(matches!(
        n[1].post_receive(0, receive(1, 0, 961)),
        Err(PostError::BadBuffer(_))
    ));
    let nowhere = PostedReceive {
        region: 9,
        ..receive(1, 0, 0)
    };
    assert!(matches!(
        n[1].post_receive(0, nowhere),
        Err(PostError::BadBuffer(_))
    ));
    assert_eq!(
        n[1].post_receive(3, receive(1, 0, 8)),
        Err(PostError::UnknownLink(3))
    );
    for k in 0..MAX_POSTED_RECEIVES as u64 {
        n[1].post_receive(0, receive(k, 0, 8)).unwrap();
    }
    assert_eq!(
        n[1].post_receive(0, receive(999, 0, 8)),
        Err(PostError::QueueFull)
    );
}
