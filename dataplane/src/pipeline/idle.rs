//! What a polling core does when its loop finds nothing to do: keep
//! spinning, yield the CPU, or sleep on its sockets until a frame, a
//! submission, a control request or its links' next timer.
//!
//! `sleep` polls for `spin_us` first, yielding every couple of
//! microseconds, so a burst of traffic never waits for a wakeup, and a peer
//! on the same CPU runs almost at once. A sleeping core cannot miss its own ticks (it sleeps
//! at most until the transport's next timeout) nor its peer's frames (the
//! socket wakes it); a peer that sleeps is therefore never taken for dead:
//! it answers every frame as soon as the frame arrives, and the liveness
//! rules count rounds, not how often a core polls.

use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering, fence};
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, ppoll};
use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::sys::time::TimeSpec;
use oae_proto::Nanos;

use oae_client::stats::IdleCounters;
use oae_config::{IdlePolicy, PollSettings};

/// Longest sleep: control requests that arrive meanwhile wake the core, but
/// a bound keeps anything unforeseen from stalling it for long.
const MAX_SLEEP: Duration = Duration::from_millis(10);
/// Longest sleep of a core that serves a host ring, whose submissions come
/// through shared memory with no doorbell to wake it.
pub const HOST_RING_SLEEP: Duration = Duration::from_micros(100);
/// Shorter sleeps than this are spun instead: a wakeup costs about as much.
const MIN_SLEEP: Duration = Duration::from_micros(20);
/// While polling before a sleep, a yield at most this often (ns): often
/// enough that a peer on the same CPU runs within a couple of microseconds,
/// rarely enough that the system calls do not delay a core of its own.
const YIELD_EVERY: Nanos = 2_000;

/// Wakes a sleeping polling core: an eventfd it sleeps on, written only
/// while it says it sleeps.
pub struct Waker {
    fd: EventFd,
    sleeping: AtomicBool,
}

impl Waker {
    pub fn new() -> Result<Waker, String> {
        let fd = EventFd::from_flags(EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC)
            .map_err(|e| format!("cannot create the polling core's eventfd: {e}"))?;
        Ok(Waker {
            fd,
            sleeping: AtomicBool::new(false),
        })
    }

    /// Called after queueing work for the core.
    pub fn wake(&self) {
        // Pairs with the fence in `sleep`: either the core sees the work
        // queued before it sleeps, or this sees it sleeping.
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) {
            // A full counter (2^64 - 2 wakes unread) cannot happen: the
            // core reads it every time it wakes.
            let _ = self.fd.write(1);
        }
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The idle policy of one core and how long it has been idle.
pub struct Idle {
    policy: IdlePolicy,
    spin: Nanos,
    idle_since: Option<Nanos>,
    last_yield: Nanos,
    counters: IdleCounters,
}

/// What an idle core should do now.
pub enum Rest {
    /// Poll again at once.
    Spin,
    Yield,
    /// Sleep at most this long.
    Sleep(Duration),
}

impl Idle {
    pub fn new(settings: &PollSettings) -> Idle {
        Idle {
            policy: settings.idle,
            spin: Nanos::from(settings.spin_us()) * 1_000,
            idle_since: None,
            last_yield: 0,
            counters: IdleCounters::default(),
        }
    }

    pub fn counters(&self) -> IdleCounters {
        self.counters
    }

    pub fn busy(&mut self) {
        self.idle_since = None;
    }

    /// An iteration at `now` found nothing to do; `next_timer` is when the
    /// transport next has work of its own, `cap` the longest sleep allowed.
    pub fn rest(&mut self, now: Nanos, next_timer: Option<Nanos>, cap: Duration) -> Rest {
        self.counters.idle_iterations += 1;
        let since = *self.idle_since.get_or_insert(now);
        let spun_enough = now.saturating_sub(since) >= self.spin;
        let rest = match self.policy {
            IdlePolicy::Spin => Rest::Spin,
            IdlePolicy::Yield => Rest::Yield,
            // The spin before sleeping yields between polls: on a core of
            // its own that costs a system call and returns at once; on a
            // core shared with the peer it hands the CPU over, so the
            // peer answers now rather than after this core's spin.
            IdlePolicy::Sleep if !spun_enough => {
                if now.saturating_sub(self.last_yield) >= YIELD_EVERY {
                    Rest::Yield
                } else {
                    Rest::Spin
                }
            }
            IdlePolicy::Sleep => {
                let to_timer =
                    next_timer.map_or(MAX_SLEEP, |t| Duration::from_nanos(t.saturating_sub(now)));
                let sleep = to_timer.min(MAX_SLEEP).min(cap);
                if sleep < MIN_SLEEP {
                    Rest::Yield
                } else {
                    Rest::Sleep(sleep)
                }
            }
        };
        if matches!(rest, Rest::Yield) {
            self.counters.yields += 1;
            self.last_yield = now;
        }
        rest
    }

    /// Sleeps up to `limit` on `sockets` and `waker`, unless `pending` (run
    /// after the core has said it sleeps) finds work already queued.
    pub fn sleep(
        &mut self,
        limit: Duration,
        sockets: &[BorrowedFd<'_>],
        waker: &Waker,
        pending: impl Fn() -> bool,
    ) {
        waker.sleeping.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if pending() {
            waker.sleeping.store(false, Ordering::Relaxed);
            return;
        }
        let mut fds: arrayvec::ArrayVec<PollFd<'_>, 17> = arrayvec::ArrayVec::new();
        fds.push(PollFd::new(waker.fd(), PollFlags::POLLIN));
        for s in sockets.iter().take(16) {
            fds.push(PollFd::new(*s, PollFlags::POLLIN));
        }
        let started = std::time::Instant::now();
        let timeout = TimeSpec::from_duration(limit);
        let ready = ppoll(&mut fds, Some(timeout), None).unwrap_or(0);
        waker.sleeping.store(false, Ordering::Relaxed);
        if fds[0]
            .revents()
            .is_some_and(|r| r.contains(PollFlags::POLLIN))
        {
            let _ = waker.fd.read();
        }
        self.counters.sleeps += 1;
        self.counters.slept_ns += started.elapsed().as_nanos() as u64;
        if ready > 0 {
            // Woken by work: the next idle stretch spins first again. A
            // core woken by its timer goes back to sleep without spinning.
            self.counters.woken += 1;
            self.idle_since = None;
        }
    }
}
