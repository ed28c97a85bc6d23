//! Arbitrary bytes against an authenticated link's receiver.
//!
//! A sender seals eight genuine frames (classes 0 to 2). The input is a
//! list of operations, each a tag byte and its bytes: raw bytes offered as
//! a frame, a genuine frame offered again, or a genuine frame with bytes of
//! the input XORed into it (frame and trailer alike) or cut short. The
//! oracle: the receiver accepts exactly the genuine frames, unchanged, each
//! once; everything else is refused; every offer is counted once, verified
//! or dropped by reason. Nothing may panic.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use oae_proto::auth::{AUTH_TRAILER_LEN, Authenticator, LinkIdentity, LinkKey};

const A_TO_B: LinkIdentity = LinkIdentity {
    local_mac: [2, 0, 0, 0, 0, 1],
    peer_mac: [2, 0, 0, 0, 0, 2],
    channel: 0,
};

/// The genuine frames and a fresh receiver, made once: each input gets a
/// copy of the receiver (key derivation is the slow part, not the check).
fn setup() -> &'static (Vec<Vec<u8>>, Authenticator) {
    static SETUP: OnceLock<(Vec<Vec<u8>>, Authenticator)> = OnceLock::new();
    SETUP.get_or_init(|| {
        let key = LinkKey([0x42; 32]);
        let mut sender = Authenticator::new(A_TO_B, 0, &key);
        let genuine = (0..8u8)
            .map(|i| {
                let size = 64usize << (i % 3);
                let mut buf = vec![i; size + AUTH_TRAILER_LEN];
                buf[8..12].copy_from_slice(&9u32.to_be_bytes());
                let len = sender.seal(&mut buf, size).expect("room");
                buf.truncate(len);
                buf
            })
            .collect();
        (genuine, Authenticator::new(A_TO_B.reversed(), 0, &key))
    })
}

fuzz_target!(|data: &[u8]| {
    let (genuine, fresh) = setup();
    let mut receiver = fresh.clone();
    let mut accepted = [false; 8];
    let mut offers = 0u64;
    let mut rest = data;
    while let Some((&op, tail)) = rest.split_first() {
        let n = usize::from(tail.first().copied().unwrap_or(0)).min(tail.len());
        let (bytes, next) = tail.split_at(n);
        rest = next;
        let pick = usize::from(op >> 3) % genuine.len();
        let offered = match op % 4 {
            0 => bytes.to_vec(),
            1 => genuine[pick].clone(),
            2 => {
                let mut f = genuine[pick].clone();
                let at = usize::from(bytes.first().copied().unwrap_or(0)) * 7 % f.len();
                for (i, b) in bytes.iter().skip(1).enumerate() {
                    let k = (at + i) % f.len();
                    f[k] ^= b;
                }
                f
            }
            _ => {
                let f = &genuine[pick];
                f[..usize::from(bytes.first().copied().unwrap_or(0)) % f.len()].to_vec()
            }
        };
        offers += 1;
        let result = receiver.open(&offered);
        let which = genuine.iter().position(|g| *g == offered);
        match (result, which) {
            (Ok(frame), Some(i)) => {
                assert!(!accepted[i], "genuine frame {i} accepted twice");
                accepted[i] = true;
                assert_eq!(frame, &offered[..offered.len() - AUTH_TRAILER_LEN]);
            }
            (Ok(_), None) => panic!("accepted a frame nobody sealed: {offered:02x?}"),
            (Err(_), Some(i)) => assert!(accepted[i], "genuine frame {i} refused"),
            (Err(_), None) => {}
        }
        let s = receiver.stats();
        assert_eq!(s.verified + s.dropped.iter().sum::<u64>(), offers);
    }
});
