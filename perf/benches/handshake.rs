//! What agreeing a link's key by identity costs on the core: each step of
//! the Noise XX handshake (`oae_proto::handshake`) as the two ends take
//! it, and a whole handshake, beside deriving one public identity (an
//! X25519 base-point multiplication, the unit of the cost). A handshake
//! runs at bring-up and after a restart, never per frame.
//!
//! `cargo bench -p oae-perf --bench handshake` (`-- --quick` for a short
//! run). docs/BENCHMARKS.md quotes one run.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use oae_proto::auth::LinkIdentity;
use oae_proto::handshake::{KeyAgreement, KeyAgreementConfig, Outcome};
use oae_proto::identity::{IdentitySecret, Trust};
use oae_proto::wire::Frame;

const A_TO_B: LinkIdentity = LinkIdentity {
    local_mac: [2, 0, 0, 0, 0, 1],
    peer_mac: [2, 0, 0, 0, 0, 2],
    channel: 0,
};

fn agreement(me: u8, peer: u8, link: LinkIdentity, seed: u64) -> KeyAgreement {
    let mut s = [me; 32];
    s[..8].copy_from_slice(&seed.to_be_bytes());
    let cfg = KeyAgreementConfig {
        identity: Arc::new(IdentitySecret::from_bytes([me; 32])),
        trust: Arc::new(Trust::of([IdentitySecret::from_bytes([peer; 32]).public()])),
        seed: s,
        retry_interval: 1_000_000,
        retry_limit: 1_000_000_000,
        rekey_after: 1 << 32,
    };
    KeyAgreement::new(cfg, link, (1, u64::from(me)))
}

/// Nanoseconds spent in each of the five steps of one handshake.
fn handshake(seed: u64) -> [u128; 5] {
    let mut a = agreement(1, 2, A_TO_B, seed);
    let mut b = agreement(2, 1, A_TO_B.reversed(), seed);
    let (mut m1, mut m2, mut m3) = ([0u8; 256], [0u8; 256], [0u8; 256]);
    let mut t = [0u128; 5];
    let mut step = |i: usize, f: &mut dyn FnMut()| {
        let start = Instant::now();
        f();
        t[i] = start.elapsed().as_nanos();
    };
    step(0, &mut || {
        a.poll_transmit(0, &mut m1).expect("message 1");
    });
    step(1, &mut || {
        b.handle(&Frame::parse(&m1).unwrap(), 0);
        b.poll_transmit(0, &mut m2).expect("message 2");
    });
    step(2, &mut || {
        let o = a.handle(&Frame::parse(&m2).unwrap(), 0);
        assert!(matches!(o, Outcome::Keyed(_)));
        a.poll_transmit(0, &mut m3).expect("message 3");
    });
    step(3, &mut || {
        let o = b.handle(&Frame::parse(&m3).unwrap(), 0);
        assert!(matches!(o, Outcome::Keyed(_)));
    });
    t[4] = t[..4].iter().sum();
    black_box((&a, &b));
    t
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick") || !args.iter().any(|a| a == "--bench");
    let rounds: u64 = if quick { 200 } else { 2_000 };
    let core = oae_perf::pin_preferred(None);
    let mut all: Vec<[u128; 5]> = (0..rounds).map(handshake).collect();
    let secret = IdentitySecret::from_bytes([7; 32]);
    let start = Instant::now();
    for _ in 0..rounds {
        black_box(black_box(&secret).public());
    }
    let base = start.elapsed().as_nanos() as f64 / rounds as f64;
    println!("one core ({core:?}), {rounds} handshakes, median and best per step, us");
    println!("{:<44} {:>8} {:>8}", "step", "median", "best");
    let names = [
        "a: message 1 (e)",
        "b: takes 1, message 2 (e, ee, s, es)",
        "a: takes 2, keys, message 3 (s, se)",
        "b: takes 3, keys",
        "whole handshake (both ends' CPU)",
    ];
    for (i, name) in names.iter().enumerate() {
        all.sort_by_key(|t| t[i]);
        let median = all[all.len() / 2][i] as f64 / 1e3;
        let best = all[0][i] as f64 / 1e3;
        println!("{name:<44} {median:>8.1} {best:>8.1}");
    }
    println!(
        "{:<44} {:>8.1}",
        "one X25519 base-point multiplication",
        base / 1e3
    );
}
