//! What one memory shared by every polling core costs per verb against the
//! per-queue memory it replaced: the verbs engine's apply + commit (the
//! target's whole share of a verb's memory work) on `Memory` (plain arrays,
//! one owner) and on `SharedMemory` (atomic words, a CAS-taken lock per
//! word and span bits for block verbs), side by side in one run on one
//! core, uncontended.
//!
//! `cargo bench -p oae-perf --bench shared_memory` (`-- --quick` for a
//! short run). Figures of one run are in docs/ARCHITECTURE.md.

use std::hint::black_box;
use std::time::Instant;

use oae_proto::memory::{LockOwner, Undo};
use oae_proto::verb::{MAX_MCAS_WORDS, Request};
use oae_proto::{McasWord, Memory, Permissions, RegionRef, RegionSpec, SharedMemory, Store};

const R: RegionRef = RegionRef { id: 1, key: 7 };

fn verbs() -> Vec<(&'static str, Request<'static>)> {
    static DATA: [u8; 256] = [5; 256];
    let mut words = [McasWord::default(); MAX_MCAS_WORDS];
    for (k, w) in words.iter_mut().enumerate().take(4) {
        *w = McasWord {
            offset: 8 * k as u32,
            expected: 0,
            new: 0,
        };
    }
    vec![
        (
            "faa",
            Request::FetchAdd {
                target: R,
                offset: 64,
                add: 1,
            },
        ),
        (
            "cas",
            Request::CompareAndSwap {
                target: R,
                offset: 72,
                expected: 0,
                new: 0,
            },
        ),
        (
            "mcas-4",
            Request::MultiWordCommit {
                target: R,
                count: 4,
                words,
            },
        ),
        (
            "read-64",
            Request::Read {
                target: R,
                offset: 128,
                len: 64,
            },
        ),
        (
            "write-256",
            Request::Write {
                target: R,
                offset: 256,
                data: &DATA,
            },
        ),
    ]
}

/// Nanoseconds per apply + commit of `request`, best of five runs.
fn per_verb(store: &mut impl Store, request: &Request<'_>, iterations: u32) -> f64 {
    let mut undo = Undo::default();
    let mut out = [0u8; 1024];
    let owner = LockOwner::target(0, 1);
    let mut best = f64::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        for _ in 0..iterations {
            store
                .apply(black_box(request), owner, &mut undo, &mut out)
                .expect("the bench's verbs are valid");
            store.commit(&undo);
        }
        best = best.min(start.elapsed().as_nanos() as f64 / f64::from(iterations));
    }
    best
}

fn main() {
    // Started without `--bench` (as `cargo test --all-targets` does), or
    // with `--quick`: a short run that only checks the bench works.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick") || !args.iter().any(|a| a == "--bench");
    let iterations = if quick { 20_000 } else { 1_000_000 };
    let spec = RegionSpec {
        id: 1,
        key: 7,
        len: 4096,
        permissions: Permissions::ALL,
    };
    let mut local = Memory::default();
    local.register(spec).expect("region");
    let mut shared = SharedMemory::new();
    shared.register(spec).expect("region");
    let core = oae_perf::pin_preferred(None);
    println!("apply + commit per verb, one core ({core:?}), uncontended, best of 5 x {iterations}");
    println!(
        "{:<10} {:>12} {:>12} {:>8}",
        "verb", "per-queue ns", "shared ns", "ratio"
    );
    for (name, request) in verbs() {
        let l = per_verb(&mut local, &request, iterations);
        let s = per_verb(&mut shared, &request, iterations);
        println!("{name:<10} {l:>12.1} {s:>12.1} {:>7.2}x", s / l);
    }
}
