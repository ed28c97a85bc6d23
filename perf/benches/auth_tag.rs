//! What authenticating a link costs per frame: sealing (appending the
//! AES-128-GMAC trailer) and opening (checking the trailer, the tag and the
//! replay window), for 64-byte frames (class 0, the budget's size) and the
//! largest class sent (1024 bytes), beside the CRC32C every frame already
//! carries. RustCrypto's AES and GHASH pick AES-NI and CLMUL at run time.
//!
//! `cargo bench -p oae-perf --bench auth_tag` (`-- --quick` for a short
//! run). docs/BENCHMARKS.md quotes one run.

use std::hint::black_box;
use std::time::Instant;

use oae_proto::auth::{AUTH_TRAILER_LEN, Authenticator, LinkIdentity, LinkKey};

const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const B: [u8; 6] = [2, 0, 0, 0, 0, 2];

/// Best of five runs of `iterations`, in ns per call.
fn best(iterations: u32, mut f: impl FnMut()) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        for _ in 0..iterations {
            f();
        }
        best = best.min(start.elapsed().as_nanos() as f64 / f64::from(iterations));
    }
    best
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick") || !args.iter().any(|a| a == "--bench");
    let iterations: u32 = if quick { 20_000 } else { 1_000_000 };
    let core = oae_perf::pin_preferred(None);
    let key = LinkKey([0x5e; 32]);
    println!(
        "per frame, one core ({core:?}), best of 5 x {iterations}; AES-NI {}, CLMUL {}",
        std::arch::is_x86_feature_detected!("aes"),
        std::arch::is_x86_feature_detected!("pclmulqdq")
    );
    println!(
        "{:<7} {:>9} {:>9} {:>9}",
        "frame", "seal ns", "open ns", "crc ns"
    );
    for size in [64usize, 1024] {
        let a_to_b = LinkIdentity {
            local_mac: A,
            peer_mac: B,
            channel: 0,
        };
        let mut sender = Authenticator::new(a_to_b, 0, &key);
        let mut buf = vec![0x11u8; size + AUTH_TRAILER_LEN];
        buf[8..12].copy_from_slice(&7u32.to_be_bytes());
        let seal = best(iterations, || {
            black_box(sender.seal(black_box(&mut buf), size));
        });
        // Opening needs a fresh packet number each time (a repeat is a
        // replay): seal them first, outside the timing, one after another
        // in one buffer as a receive ring holds them.
        let stride = size + AUTH_TRAILER_LEN;
        let mut frames = vec![0u8; stride * iterations as usize];
        for f in frames.chunks_exact_mut(stride) {
            f[..size].copy_from_slice(&buf[..size]);
            sender.seal(f, size).expect("room");
        }
        let mut open = f64::MAX;
        for _ in 0..5 {
            let mut receiver = Authenticator::new(a_to_b.reversed(), 0, &key);
            let start = Instant::now();
            for f in frames.chunks_exact(stride) {
                assert!(receiver.open(black_box(f)).is_ok());
            }
            open = open.min(start.elapsed().as_nanos() as f64 / f64::from(iterations));
        }
        let crc = best(iterations, || {
            black_box(crc32c::crc32c(black_box(&buf[..size - 4])));
        });
        println!("{size:<7} {seal:>9.1} {open:>9.1} {crc:>9.1}");
    }
}
