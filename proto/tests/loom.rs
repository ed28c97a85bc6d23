//! The shared memory's cross-core protocol under every interleaving loom
//! finds: word locks taken with compare-and-swap, waits for a verb another
//! core is applying, and reversal. Run with:
//! `RUSTFLAGS="--cfg loom" cargo test -p oae-proto --release --test loom`
#![cfg(loom)]

use loom::thread;
use oae_proto::memory::{LockOwner, Undo};
use oae_proto::verb::{MAX_MCAS_WORDS, Refusal, Request};
use oae_proto::{McasWord, Permissions, RegionRef, RegionSpec, SharedMemory, Store};

const R: RegionRef = RegionRef { id: 1, key: 7 };

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(f);
}

fn memory() -> SharedMemory {
    let mut m = SharedMemory::new();
    m.register(RegionSpec {
        id: 1,
        key: 7,
        len: 32,
        permissions: Permissions::ALL,
    })
    .unwrap();
    m
}

fn word(m: &SharedMemory, at: usize) -> u64 {
    u64::from_le_bytes(m.snapshot(1).unwrap()[at..at + 8].try_into().unwrap())
}

/// Applies `request` and, if it left a trace, commits or reverses it.
fn apply_then(
    m: &mut SharedMemory,
    request: &Request<'_>,
    commit: bool,
) -> Result<Vec<u8>, Refusal> {
    let mut undo = Undo::default();
    let mut out = [0u8; 96];
    let n = m.apply(request, LockOwner::target(0, 1), &mut undo, &mut out)?;
    if commit {
        m.commit(&undo);
    } else {
        m.reverse(&undo);
    }
    Ok(out[..n].to_vec())
}

/// Two cores add to one word: each add happens exactly once or is refused
/// `Locked` with no effect; a reversed add leaves no trace.
#[test]
fn fetch_adds_from_two_cores_are_exact() {
    model(|| {
        let m = memory();
        let mut theirs = m.for_core(1);
        let other = thread::spawn(move || {
            let add = Request::FetchAdd {
                target: R,
                offset: 0,
                add: 1,
            };
            apply_then(&mut theirs, &add, true).is_ok()
        });
        let mut mine = m.for_core(0);
        let add = Request::FetchAdd {
            target: R,
            offset: 0,
            add: 10,
        };
        let mine_ok = apply_then(&mut mine, &add, true).is_ok();
        let reversed = Request::FetchAdd {
            target: R,
            offset: 0,
            add: 100,
        };
        let _ = apply_then(&mut mine, &reversed, false);
        let theirs_ok = other.join().unwrap();
        assert_eq!(word(&m, 0), u64::from(theirs_ok) + 10 * u64::from(mine_ok));
        assert_eq!(m.locked_words(), 0);
    });
}

/// Two multi-word commits over the same two words, listed in opposite
/// orders: no deadlock, and the words always move together.
#[test]
fn multi_word_commits_in_opposite_orders_neither_deadlock_nor_tear() {
    model(|| {
        let m = memory();
        let mcas = |first: u32, second: u32, new: u64| {
            let mut words = [McasWord::default(); MAX_MCAS_WORDS];
            words[0] = McasWord {
                offset: first,
                expected: 0,
                new,
            };
            words[1] = McasWord {
                offset: second,
                expected: 0,
                new,
            };
            words
        };
        let mut theirs = m.for_core(1);
        let other = thread::spawn(move || {
            let words = mcas(8, 0, 2);
            let req = Request::MultiWordCommit {
                target: R,
                count: 2,
                words,
            };
            apply_then(&mut theirs, &req, true).map(|out| out[0] == 1)
        });
        let mut mine = m.for_core(0);
        let words = mcas(0, 8, 1);
        let req = Request::MultiWordCommit {
            target: R,
            count: 2,
            words,
        };
        let mine_won = apply_then(&mut mine, &req, true).map(|out| out[0] == 1);
        let theirs_won = other.join().unwrap();
        let (a, b) = (word(&m, 0), word(&m, 8));
        assert_eq!(a, b, "the two words moved together");
        let winners = [mine_won == Ok(true), theirs_won == Ok(true)];
        assert!(
            winners.iter().filter(|&&w| w).count() <= 1,
            "only one commit from zero"
        );
        assert_eq!(
            a,
            if winners[0] {
                1
            } else if winners[1] {
                2
            } else {
                0
            }
        );
        assert_eq!(m.locked_words(), 0);
    });
}

/// A read on one core while another writes two words and reverses the
/// write: the read sees both old words, or is refused; never the half-applied
/// or the reversed bytes.
#[test]
fn a_read_never_sees_a_reversed_or_half_applied_write() {
    model(|| {
        let m = memory();
        let mut theirs = m.for_core(1);
        let other = thread::spawn(move || {
            let data = [0xAB; 16];
            let write = Request::Write {
                target: R,
                offset: 4,
                data: &data,
            };
            let _ = apply_then(&mut theirs, &write, false);
        });
        let mut mine = m.for_core(0);
        let read = Request::Read {
            target: R,
            offset: 0,
            len: 24,
        };
        match apply_then(&mut mine, &read, true) {
            Ok(out) => assert!(out[2..].iter().all(|&b| b == 0), "read {out:?}"),
            Err(why) => assert_eq!(why, Refusal::Locked),
        }
        other.join().unwrap();
        assert!(m.snapshot(1).unwrap().iter().all(|&b| b == 0));
        assert_eq!(m.locked_words(), 0);
    });
}
