//! Which host process a ring or a swap slot belongs to: claimed with one
//! compare-and-swap on an owner word, never assumed.
//!
//! The word packs `pid | generation << 32`. A claim bumps the generation,
//! so whatever the previous owner left in flight (records it published,
//! answers on their way to it) can be told apart from the new owner's and
//! discarded rather than delivered to the wrong process. A word held by a
//! process that no longer exists (or is a zombie) may be claimed over; one
//! held by a live process, this one included, is refused with its pid.
//!
//! Liveness is probed by pid, so host programs and the dataplane must share
//! a pid namespace (one in another sees a live holder as gone), and a dead
//! holder's pid taken by an unrelated process keeps the claim held until
//! that process exits.

use crate::sync::{AtomicU64, Ordering};

/// A claim the caller now holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claim {
    pub pid: u32,
    /// Bumped by every claim; never 0 for a held claim.
    pub generation: u32,
}

impl Claim {
    fn word(self) -> u64 {
        u64::from(self.pid) | (u64::from(self.generation) << 32)
    }

    /// The claim a word records, or `None` when nobody holds it.
    pub fn of(word: u64) -> Option<Claim> {
        let pid = word as u32;
        (pid != 0).then_some(Claim {
            pid,
            generation: (word >> 32) as u32,
        })
    }
}

/// Why a claim failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClaimRefused {
    #[error("held by live process {pid}")]
    Held { pid: u32 },
}

/// Claims `word` for `pid`, taking it over from a dead holder if
/// `alive(holder)` says so.
pub fn claim(
    word: &AtomicU64,
    pid: u32,
    alive: impl Fn(u32) -> bool,
) -> Result<Claim, ClaimRefused> {
    assert_ne!(pid, 0, "pid 0 marks a free word");
    let mut current = word.load(Ordering::Acquire);
    loop {
        if let Some(holder) = Claim::of(current)
            && alive(holder.pid)
        {
            return Err(ClaimRefused::Held { pid: holder.pid });
        }
        let mine = Claim {
            pid,
            generation: ((current >> 32) as u32).wrapping_add(1).max(1),
        };
        match word.compare_exchange(current, mine.word(), Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Ok(mine),
            Err(now) => current = now,
        }
    }
}

/// Gives a claim back; a no-op if it was taken over meanwhile. The
/// generation stays, so the next claim still gets a new one.
pub fn release(word: &AtomicU64, claim: Claim) {
    let free = u64::from(claim.generation) << 32;
    let _ = word.compare_exchange(claim.word(), free, Ordering::AcqRel, Ordering::Acquire);
}

/// Whether process `pid` exists and has not exited (signal 0 probes
/// without sending; a zombie has exited, whoever has yet to reap it).
#[cfg(not(loom))]
pub fn process_alive(pid: u32) -> bool {
    // 0 and negative pids name process groups, not a process.
    let Some(pid) = i32::try_from(pid).ok().filter(|p| *p > 0) else {
        return false;
    };
    #[allow(unsafe_code)]
    // SAFETY: kill with signal 0 only checks that the process exists and
    // may be signalled; it touches no memory.
    let r = unsafe { libc::kill(pid, 0) };
    let exists = r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    exists && !is_zombie(pid)
}

/// From `/proc/PID/stat`: the state follows the parenthesised command name.
#[cfg(not(loom))]
fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let (_, after) = stat.rsplit_once(')')?;
            after.split_whitespace().next().map(|state| state == "Z")
        })
        .unwrap_or(false)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_live_holder_keeps_it_and_a_dead_one_loses_it_to_a_new_generation() {
        let word = AtomicU64::new(0);
        let first = claim(&word, 10, |_| true).unwrap();
        assert_eq!(
            first,
            Claim {
                pid: 10,
                generation: 1
            }
        );
        assert_eq!(
            claim(&word, 11, |_| true),
            Err(ClaimRefused::Held { pid: 10 })
        );
        let second = claim(&word, 11, |pid| pid != 10).unwrap();
        assert_eq!(
            second,
            Claim {
                pid: 11,
                generation: 2
            }
        );
        // The first holder's release no longer matches: it changes nothing.
        release(&word, first);
        assert_eq!(Claim::of(word.load(Ordering::Relaxed)), Some(second));
        release(&word, second);
        assert_eq!(Claim::of(word.load(Ordering::Relaxed)), None);
        let third = claim(&word, 10, |_| true).unwrap();
        assert_eq!(third.generation, 3);
    }

    #[test]
    fn this_process_is_alive_and_process_groups_and_zombies_are_not() {
        assert!(process_alive(std::process::id()));
        // kill(0) and kill(-1) would probe process groups.
        assert!(!process_alive(0));
        assert!(!process_alive(u32::MAX));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Exited but not reaped: a zombie until `wait`.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while process_alive(pid) {
            assert!(std::time::Instant::now() < deadline, "{pid} never exited");
            std::thread::yield_now();
        }
        assert!(is_zombie(pid as i32), "exited, not yet reaped");
        child.wait().unwrap();
        assert!(!process_alive(pid));
    }
}
