//! What a node without authentication believes, and what an authenticated
//! link (`oae_proto::auth`) makes of the same frames: a REQUEST forged from
//! a captured one (its CRC recomputed, which needs no key), and a REQUEST
//! captured and replayed once its slot's 16-bit sequence number has come
//! round again.

mod common;

use common::{R, pair_with};
use oae_proto::auth::{AUTH_TRAILER_LEN, AuthError, Authenticator, LinkIdentity, LinkKey};
use oae_proto::wire::{self, MAX_FRAME};
use oae_proto::*;

const ADD_AT: usize = wire::HEADER_LEN + 12;
const MACS: [[u8; 6]; 2] = [[2, 0, 0, 0, 0, 0xA], [2, 0, 0, 0, 0, 0xB]];

fn faa(add: u64) -> Verb {
    Verb::FetchAdd {
        target: R,
        offset: 0,
        add,
    }
}

fn word0(n: &Node) -> u64 {
    u64::from_le_bytes(n.memory().bytes(1).unwrap()[..8].try_into().unwrap())
}

/// The wire between the two nodes, whose links are authenticated or not
/// (`Node::authenticate_link`: the nodes seal and open the frames
/// themselves).
struct Wire;

impl Wire {
    fn new(n: &mut [Node; 2], auth: bool) -> Wire {
        if auth {
            let key = LinkKey([0x33; 32]);
            for (i, node) in n.iter_mut().enumerate() {
                let link = LinkIdentity {
                    local_mac: MACS[i],
                    peer_mac: MACS[1 - i],
                    channel: 0,
                };
                node.authenticate_link(0, Authenticator::new(link, 0, &key))
                    .expect("link 0");
            }
        }
        Wire
    }

    /// The next frame `from` sends, as it goes on the wire.
    fn take(&mut self, n: &mut [Node; 2], from: usize, now: Nanos) -> Option<Vec<u8>> {
        let mut buf = [0u8; MAX_FRAME + AUTH_TRAILER_LEN];
        let len = n[from].poll_transmit(0, now, &mut buf)?;
        Some(buf[..len].to_vec())
    }

    /// Hands `bytes` to node `to`; what its authentication dropped it for,
    /// if it did.
    fn give(
        &mut self,
        n: &mut [Node; 2],
        to: usize,
        bytes: &[u8],
        now: Nanos,
    ) -> Result<(), AuthError> {
        let dropped = |n: &Node| n.link_auth(0).map(|a| a.stats().dropped);
        let before = dropped(&n[to]);
        n[to].handle_frame(0, bytes, now);
        match (before, dropped(&n[to])) {
            (Some(before), Some(after)) if before != after => {
                let i = (0..before.len())
                    .find(|&i| after[i] != before[i])
                    .expect("a counter moved");
                Err(AuthError::ALL[i])
            }
            _ => Ok(()),
        }
    }

    fn pump(&mut self, n: &mut [Node; 2], now: Nanos) {
        loop {
            let mut moved = false;
            for from in 0..2 {
                while let Some(f) = self.take(n, from, now) {
                    self.give(n, 1 - from, &f, now)
                        .expect("genuine frames open");
                    moved = true;
                }
            }
            if !moved {
                break;
            }
        }
    }
}

/// A captured FETCH_ADD of 1, its addend changed to 1000 and its CRC
/// recomputed, delivered in place of the real one.
fn forge_the_addend(auth: bool) -> (u64, Result<(), AuthError>) {
    let mut n = pair_with(LinkConfig::default());
    let mut w = Wire::new(&mut n, auth);
    w.pump(&mut n, 0);
    n[0].submit(0, VerbId(1), &faa(1)).unwrap();
    let mut forged = w.take(&mut n, 0, 1).expect("the request");
    forged[ADD_AT..ADD_AT + 8].copy_from_slice(&1000u64.to_be_bytes());
    let oae_len = forged.len() - if auth { AUTH_TRAILER_LEN } else { 0 };
    wire::seal(&mut forged[..oae_len]);
    let delivered = w.give(&mut n, 1, &forged, 1);
    // A dropped frame is a loss: the link's probe finds it and the
    // transfer goes again.
    for t in 1..=20 {
        let now = t * 1_000_000;
        for node in n.iter_mut() {
            node.handle_timeout(now);
        }
        w.pump(&mut n, now);
    }
    (word0(&n[1]), delivered)
}

#[test]
fn a_forged_request_is_applied_without_a_key_and_dropped_with_one() {
    let (word, delivered) = forge_the_addend(false);
    assert_eq!(delivered, Ok(()));
    assert_eq!(word, 1000, "the forged addend was applied");
    let (word, delivered) = forge_the_addend(true);
    assert_eq!(delivered, Err(AuthError::BadTag));
    assert_eq!(
        word, 1,
        "only the genuine request (found lost, sent again) was applied"
    );
}

/// One slot, so every transfer takes the next sequence number of slot 0:
/// after 65,536 transfers the number a captured REQUEST carried is due
/// again. Replayed then, it is taken for new without a key; with one, its
/// packet number is long past and it is refused.
fn replay_after_the_sequence_wraps(auth: bool) -> (u64, Result<(), AuthError>) {
    let cfg = LinkConfig {
        slots: 1,
        receive_credits: 1,
        ..LinkConfig::default()
    };
    let mut n = pair_with(cfg);
    let mut w = Wire::new(&mut n, auth);
    w.pump(&mut n, 0);
    let mut captured = None;
    let mut now = 1;
    for i in 0..65_536u64 {
        n[0].submit(0, VerbId(i), &faa(1)).unwrap();
        if i == 0 {
            let f = w.take(&mut n, 0, now).expect("the first request");
            w.give(&mut n, 1, &f, now).unwrap();
            captured = Some(f);
        }
        w.pump(&mut n, now);
        now += 1;
        while n[0].poll_event().is_some() {}
    }
    assert_eq!(word0(&n[1]), 65_536, "every verb applied once");
    // The last transfer's commit rides on the next request: the slot's
    // next sequence number is the captured one's.
    let replayed = w.give(&mut n, 1, &captured.expect("captured"), now);
    w.pump(&mut n, now + 1);
    (word0(&n[1]), replayed)
}

#[test]
fn a_request_replayed_after_its_sequence_wraps_is_new_without_a_key_only() {
    let (word, replayed) = replay_after_the_sequence_wraps(false);
    assert_eq!(replayed, Ok(()));
    assert_eq!(
        word, 65_537,
        "the replayed request was applied a second time"
    );
    let (word, replayed) = replay_after_the_sequence_wraps(true);
    assert_eq!(replayed, Err(AuthError::Replayed));
    assert_eq!(word, 65_536);
}
