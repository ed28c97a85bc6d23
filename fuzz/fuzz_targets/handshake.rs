//! Arbitrary handshake messages against both ends of a key agreement
//! (`oae_proto::handshake`).
//!
//! A genuine handshake between a and b is recorded once: message 1 (a's),
//! message 2 (b's answer) and message 3 (a's), and the key both derive.
//! Each input starts from a that has sent message 1 and b that has sent
//! nothing. The input is a list of operations, each a tag byte and its
//! bytes, offered to a or b: arbitrary bytes as any message's body, a
//! genuine message, or a genuine message with bytes of the input XORed
//! into it. The oracle: a link is keyed only by a genuine Noise message
//! (message 2 at a, message 3 at b after b answered the genuine message
//! 1; the frame's epochs around it are not the handshake's, and may be
//! anything), and only with the genuine key; nothing may panic.

#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use oae_proto::auth::{LinkIdentity, LinkKey};
use oae_proto::handshake::{self, KeyAgreement, KeyAgreementConfig, Outcome};
use oae_proto::identity::{IdentitySecret, Trust};
use oae_proto::wire::{self, Frame, Transition};

const A_TO_B: LinkIdentity = LinkIdentity {
    local_mac: [2, 0, 0, 0, 0, 1],
    peer_mac: [2, 0, 0, 0, 0, 2],
    channel: 0,
};

struct Setup {
    a: KeyAgreement,
    b: KeyAgreement,
    /// The genuine frames of messages 1, 2 and 3, and the key.
    genuine: [Vec<u8>; 3],
    key: LinkKey,
}

fn agreement(me: u8, peer: u8, link: LinkIdentity) -> KeyAgreement {
    let cfg = KeyAgreementConfig {
        identity: Arc::new(IdentitySecret::from_bytes([me; 32])),
        trust: Arc::new(Trust::of([IdentitySecret::from_bytes([peer; 32]).public()])),
        seed: [me; 32],
        retry_interval: 1_000,
        retry_limit: 8_000,
        rekey_after: 1 << 32,
    };
    KeyAgreement::new(cfg, link, (u32::from(me), u64::from(me)))
}

fn frame_of(buf: &[u8]) -> Frame<'_> {
    Frame::parse(buf).expect("a handshake frame")
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let mut a = agreement(1, 2, A_TO_B);
        let b = agreement(2, 1, A_TO_B.reversed());
        let mut buf = [0u8; 256];
        let l1 = a.poll_transmit(0, &mut buf).expect("message 1");
        let m1 = buf[..l1].to_vec();
        let (a_sent, b_fresh) = (a.clone(), b.clone());
        let mut b_run = b;
        assert_eq!(b_run.handle(&frame_of(&m1), 0), Outcome::Nothing);
        let l2 = b_run.poll_transmit(0, &mut buf).expect("message 2");
        let m2 = buf[..l2].to_vec();
        let Outcome::Keyed(key) = a.handle(&frame_of(&m2), 0) else {
            panic!("a keys on message 2")
        };
        let l3 = a.poll_transmit(0, &mut buf).expect("message 3");
        let m3 = buf[..l3].to_vec();
        assert_eq!(b_run.handle(&frame_of(&m3), 0), Outcome::Keyed(key.clone()));
        Setup {
            a: a_sent,
            b: b_fresh,
            genuine: [m1, m2, m3],
            key,
        }
    })
}

/// A handshake frame carrying `body` as message `number`.
fn wrap(number: u8, body: &[u8]) -> Vec<u8> {
    let mut buf = [0u8; 256];
    let len = handshake::write_frame(&mut buf, number, (7, 0), &body[..body.len().min(200)]);
    buf[..len].to_vec()
}

/// The message number and Noise message a handshake frame carries.
fn message(frame: &[u8]) -> (u32, &[u8]) {
    let f = Frame::parse(frame).expect("parsed before");
    let len = usize::from(u16::from_be_bytes([f.payload[0], f.payload[1]])).min(200);
    (f.context.field, &f.payload[2..2 + len])
}

fuzz_target!(|data: &[u8]| {
    let s = setup();
    let (mut a, mut b) = (s.a.clone(), s.b.clone());
    let mut b_answered_genuine = false;
    let mut rest = data;
    let mut now = 0;
    while let Some((&op, tail)) = rest.split_first() {
        let n = usize::from(tail.first().copied().unwrap_or(0)).min(tail.len());
        let (bytes, next) = tail.split_at(n);
        rest = next;
        now += 100;
        let pick = usize::from(op >> 4) % 3;
        let offered = match (op >> 1) % 4 {
            0 => wrap(pick as u8 + 1, bytes),
            1 => s.genuine[pick].clone(),
            2 => {
                let mut f = s.genuine[pick].clone();
                let at = 24 + usize::from(bytes.first().copied().unwrap_or(0));
                for (i, x) in bytes.iter().skip(1).enumerate() {
                    let k = (at + i) % (f.len() - 4);
                    f[k] ^= x;
                }
                wire::seal(&mut f);
                f
            }
            _ => {
                // Time passes: retries and give-ups at both ends.
                now += 1_000 * u64::from(bytes.first().copied().unwrap_or(1));
                a.handle_timeout(now);
                b.handle_timeout(now);
                let mut buf = [0u8; 256];
                let _ = a.poll_transmit(now, &mut buf);
                let _ = b.poll_transmit(now, &mut buf);
                continue;
            }
        };
        let Ok(frame) = Frame::parse(&offered) else {
            continue;
        };
        if frame.context.transition != Transition::Handshake {
            continue;
        }
        let to_a = op & 1 == 0;
        let end = if to_a { &mut a } else { &mut b };
        let outcome = end.handle(&frame, now);
        let same = |i: usize| message(&offered) == message(&s.genuine[i]);
        if !to_a && same(0) {
            b_answered_genuine = true;
        }
        if let Outcome::Keyed(key) = outcome {
            let genuine = if to_a {
                same(1)
            } else {
                same(2) && b_answered_genuine
            };
            assert!(genuine, "keyed by a message that is not the genuine one");
            assert_eq!(key, s.key, "keyed with another key");
        }
    }
});
