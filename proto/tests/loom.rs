//! The shared memory's cross-core protocol under every interleaving loom
//! finds: word locks and span bits taken with compare-and-swap, a verb on
//! one word meeting one on several, waits for a verb another core is
//! applying, and reversal. Run with:
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

/// A FETCH_ADD (a word lock) on one core and a WRITE over that word and
/// its neighbour (span bits) on another: one of them applies first and the
/// other sees its result, or is refused with no effect; never both at once.
#[test]
fn a_one_word_verb_and_a_block_verb_on_the_same_word_take_turns() {
    model(|| {
        let m = memory();
        let mut theirs = m.for_core(1);
        let other = thread::spawn(move || {
            let data = [0x11; 16];
            let write = Request::Write {
                target: R,
                offset: 0,
                data: &data,
            };
            apply_then(&mut theirs, &write, true).is_ok()
        });
        let mut mine = m.for_core(0);
        let add = Request::FetchAdd {
            target: R,
            offset: 8,
            add: 1,
        };
        let added = apply_then(&mut mine, &add, true);
        let wrote = other.join().unwrap();
        let written = u64::from_le_bytes([0x11; 8]);
        let final_word = word(&m, 8);
        match (added, wrote) {
            (Ok(old), true) => {
                let old = u64::from_be_bytes(old[..8].try_into().unwrap());
                if old == 0 {
                    // The add first, then the write over it.
                    assert_eq!(final_word, written);
                } else {
                    assert_eq!((old, final_word), (written, written + 1));
                }
            }
            (Ok(_), false) => assert_eq!(final_word, 1),
            (Err(why), true) => {
                assert_eq!(why, Refusal::Locked);
                assert_eq!(final_word, written);
            }
            (Err(_), false) => panic!("both refused: one of them held nothing"),
        }
        assert_eq!(word(&m, 0), if wrote { written } else { 0 });
        assert_eq!(m.locked_words(), 0);
    });
}

/// A multi-word commit over words 0 and 2 (word locks, taken one after the
/// other) and a WRITE over words 1 to 3 (span bits) on another core: the
/// block verb waits holding its bits, the commit lets go of everything
/// before it waits, so neither waits for the other forever; and each is
/// all or nothing.
#[test]
fn a_multi_word_commit_and_a_block_write_across_it_do_not_deadlock() {
    model(|| {
        let m = memory();
        let mut theirs = m.for_core(1);
        let other = thread::spawn(move || {
            let data = [0x22; 16];
            let write = Request::Write {
                target: R,
                offset: 12,
                data: &data,
            };
            apply_then(&mut theirs, &write, false).is_ok()
        });
        let mut mine = m.for_core(0);
        let mut words = [McasWord::default(); MAX_MCAS_WORDS];
        words[0] = McasWord {
            offset: 0,
            expected: 0,
            new: 5,
        };
        words[1] = McasWord {
            offset: 16,
            expected: 0,
            new: 5,
        };
        let req = Request::MultiWordCommit {
            target: R,
            count: 2,
            words,
        };
        let committed = apply_then(&mut mine, &req, true).map(|out| out[0] == 1);
        other.join().unwrap();
        // The write was reversed: only the commit's words may have moved,
        // and together.
        let expect = if committed == Ok(true) { 5 } else { 0 };
        assert_eq!((word(&m, 0), word(&m, 16)), (expect, expect));
        assert_eq!(word(&m, 8), 0);
        assert_eq!(word(&m, 24), 0);
        assert_eq!(m.locked_words(), 0);
    });
}

/// Two block WRITEs on different words of one span word, on two cores:
/// their bits share a lock word but not a word, so neither is ever refused,
/// and both land.
#[test]
fn block_verbs_on_different_words_of_one_span_both_apply() {
    model(|| {
        let m = memory();
        let mut theirs = m.for_core(1);
        let other = thread::spawn(move || {
            let data = [0x33; 16];
            let write = Request::Write {
                target: R,
                offset: 16,
                data: &data,
            };
            apply_then(&mut theirs, &write, true)
        });
        let mut mine = m.for_core(0);
        let data = [0x44; 16];
        let write = Request::Write {
            target: R,
            offset: 0,
            data: &data,
        };
        assert_eq!(apply_then(&mut mine, &write, true), Ok(Vec::new()));
        assert_eq!(other.join().unwrap(), Ok(Vec::new()));
        let bytes = m.snapshot(1).unwrap();
        assert!(bytes[..16].iter().all(|&b| b == 0x44), "{bytes:?}");
        assert!(bytes[16..].iter().all(|&b| b == 0x33), "{bytes:?}");
        assert_eq!(m.locked_words(), 0);
    });
}
