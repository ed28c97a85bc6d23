//! Surviving a region file cut short under its mapping.
//!
//! A shared mapping reaches past the end of a file that was truncated
//! after it was mapped, and touching a page there raises SIGBUS, which
//! kills the process. Any process with the file's owner's rights can cut it
//! (`truncate -s 0 /dev/shm/oae-host`), so without this one host program
//! could kill the dataplane serving every other. Here, as compositors do
//! for their clients' shared buffers, a SIGBUS inside a guarded mapping
//! puts private zeroed memory in place of the whole mapping and returns:
//! the access that faulted is made again and reads zeros, the mapping is
//! marked cut, and the side that owns it stops serving it. A SIGBUS
//! anywhere else goes to the handler that was there before (Rust's own,
//! which reports a stack overflow, or the default, which ends the process).
//!
//! This is the one module with a signal handler; it only loads atomics,
//! maps memory and forwards the signal, all of which are async-signal-safe.

use std::io;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The most mappings one process guards at once: rings are few (a
/// dataplane has one, a host program attaches one), and a dataplane with a
/// host ring maps each of its regions (at most 64) as a file too.
pub const MAX_GUARDED: usize = 128;

struct Entry {
    /// Start of the mapping; 0 while the entry is free.
    base: AtomicUsize,
    /// Its length; 0 until the entry is whole, and while it is freed.
    len: AtomicUsize,
    cut: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Entry = Entry {
    base: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    cut: AtomicBool::new(false),
};

static GUARDED: [Entry; MAX_GUARDED] = [FREE; MAX_GUARDED];

/// The SIGBUS action in place before ours, to hand other faults to; also
/// records that ours is installed.
static PREVIOUS: OnceLock<Result<libc::sigaction, i32>> = OnceLock::new();

/// A mapping's entry in the guarded set, freed on drop (before the
/// mapping is unmapped).
#[derive(Debug)]
pub struct Guard {
    index: usize,
}

/// Why a mapping could not be guarded.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    #[error("this process already guards {MAX_GUARDED} shared regions, the most it can")]
    Full,
    #[error("cannot install the SIGBUS handler that guards shared regions: {0}")]
    Handler(io::Error),
}

impl Guard {
    /// Guards `len` bytes mapped at `base`: a SIGBUS within them is survived
    /// as this module says.
    ///
    /// # Safety
    ///
    /// `base..base + len` must be a shared mapping the caller made and owns,
    /// and the guard must be dropped before it is unmapped: the handler
    /// maps over that range.
    #[allow(unsafe_code)]
    pub(crate) unsafe fn new(base: *mut libc::c_void, len: usize) -> Result<Guard, GuardError> {
        assert!(!base.is_null() && len > 0, "a mapping to guard");
        install()?;
        let index = GUARDED
            .iter()
            .position(|e| {
                e.base
                    .compare_exchange(0, base as usize, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            })
            .ok_or(GuardError::Full)?;
        let entry = &GUARDED[index];
        entry.cut.store(false, Ordering::Relaxed);
        entry.len.store(len, Ordering::Release);
        Ok(Guard { index })
    }

    /// True once the file was found cut short: the mapping now holds
    /// private zeros, and nothing written there reaches the other side.
    pub fn cut(&self) -> bool {
        GUARDED[self.index].cut.load(Ordering::Acquire)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let entry = &GUARDED[self.index];
        entry.len.store(0, Ordering::Release);
        entry.base.store(0, Ordering::Release);
    }
}

fn install() -> Result<(), GuardError> {
    let previous = PREVIOUS.get_or_init(|| {
        #[allow(unsafe_code)]
        // SAFETY: `sigaction` with a zeroed, then filled, action struct and
        // a valid out-pointer; the handler only does what a signal handler
        // may (see `on_sigbus`). The previous action is read first and kept
        // before ours is installed, so ours can always forward.
        unsafe {
            let mut previous: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut previous) != 0 {
                return Err(io::Error::last_os_error().raw_os_error().unwrap_or(0));
            }
            let mut ours: libc::sigaction = std::mem::zeroed();
            ours.sa_sigaction = on_sigbus as *const () as libc::sighandler_t;
            ours.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut ours.sa_mask);
            if libc::sigaction(libc::SIGBUS, &ours, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error().raw_os_error().unwrap_or(0));
            }
            Ok(previous)
        }
    });
    match previous {
        Ok(_) => Ok(()),
        Err(errno) => Err(GuardError::Handler(io::Error::from_raw_os_error(*errno))),
    }
}

extern "C" fn on_sigbus(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    #[allow(unsafe_code)]
    // SAFETY: the kernel hands a SA_SIGINFO handler a valid siginfo.
    let (code, address) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    // Only an access past the end of the file is a cut: a hardware memory
    // error, an alignment fault or a signal sent by a process is not.
    if code == libc::BUS_ADRERR && GUARDED.iter().any(|e| replaced_if_inside(e, address)) {
        return;
    }
    forward(signal, info, context);
}

/// Puts private zeros in place of `entry`'s mapping if `address` is inside
/// it and it was not replaced before (a fault in a replaced mapping is not
/// a cut, and is forwarded). True if it did.
fn replaced_if_inside(entry: &Entry, address: usize) -> bool {
    let base = entry.base.load(Ordering::Acquire);
    let len = entry.len.load(Ordering::Acquire);
    // A slot freed and taken again between the two loads would pair one
    // mapping's base with another's length: read the base once more.
    if base == 0 || entry.base.load(Ordering::Acquire) != base {
        return false;
    }
    if address < base || address - base >= len || entry.cut.load(Ordering::Acquire) {
        return false;
    }
    // errno belongs to the code the signal interrupted.
    let errno = io::Error::last_os_error().raw_os_error().unwrap_or(0);
    #[allow(unsafe_code)]
    // SAFETY: `base..base + len` is a live mapping of this process: a guard
    // is dropped only after every view of its mapping is gone and before it
    // is unmapped, and this fault came from a view. It is replaced whole by
    // private memory of the same size and protection; views keep their
    // addresses and now read zeros. errno is then put back as it was.
    let replaced = unsafe {
        let replaced = libc::mmap(
            base as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE,
            -1,
            0,
        );
        *libc::__errno_location() = errno;
        replaced != libc::MAP_FAILED
    };
    if replaced {
        entry.cut.store(true, Ordering::Release);
    }
    replaced
}

/// Hands a SIGBUS that is not ours to the action there before: calls its
/// handler, or puts a default or ignoring action back and raises the
/// signal again (it is blocked until the handler returns), so it ends the
/// process as it would have without us, a signal a process sent included.
fn forward(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    let Some(Ok(previous)) = PREVIOUS.get() else {
        return;
    };
    let handler = previous.sa_sigaction;
    #[allow(unsafe_code)]
    // SAFETY: `previous` is the action the kernel reported before ours was
    // installed; a handler address there is a function of the kind its
    // flags say, and is called as the kernel would have called it.
    unsafe {
        if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
            libc::sigaction(libc::SIGBUS, previous, std::ptr::null_mut());
            libc::raise(libc::SIGBUS);
        } else if previous.sa_flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                std::mem::transmute(handler);
            f(signal, info, context);
        } else {
            let f: extern "C" fn(libc::c_int) = std::mem::transmute(handler);
            f(signal);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_taken_and_given_back() {
        // Addresses in the first pages, which nothing maps, so no fault can
        // fall there. Other tests take and free entries meanwhile.
        let fake = |i: usize| (i * 4096) as *mut libc::c_void;
        let guards: Vec<Guard> = (1..=4)
            .map(|i| {
                #[allow(unsafe_code)]
                // SAFETY: nothing is mapped there, so the handler never
                // maps over them.
                unsafe { Guard::new(fake(i), 4096) }.unwrap()
            })
            .collect();
        let taken: Vec<(usize, usize)> = (1..)
            .zip(&guards)
            .map(|(i, g)| (g.index, fake(i) as usize))
            .collect();
        assert!(guards.iter().all(|g| !g.cut()));
        drop(guards);
        for (index, address) in taken {
            assert_ne!(GUARDED[index].base.load(Ordering::Relaxed), address);
        }
    }
}
