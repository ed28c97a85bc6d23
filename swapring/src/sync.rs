//! The atomics the protocols use: std's normally, loom's under `--cfg loom`
//! so the model checker can explore every interleaving of the same code.

#[cfg(loom)]
pub use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
pub use std::sync::atomic::{AtomicU64, Ordering};

/// What a waiting loop does between polls. Under loom a spin must yield or
/// the model checker never schedules the thread being waited for.
#[inline]
pub fn relax() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}
