//! Pinning the calling thread to CPUs, and putting its affinity back.

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;

/// The calling thread's CPU affinity, to put back later.
#[derive(Clone, Copy, Debug)]
pub struct Affinity(CpuSet);

impl Affinity {
    /// The calling thread's affinity now; `None` if the kernel will not say.
    pub fn current() -> Option<Affinity> {
        sched_getaffinity(Pid::from_raw(0)).ok().map(Affinity)
    }

    /// Makes it the calling thread's affinity again.
    pub fn restore(&self) {
        let _ = sched_setaffinity(Pid::from_raw(0), &self.0);
    }

    /// The CPUs it allows, ascending.
    pub fn cpus(&self) -> Vec<usize> {
        (0..CpuSet::count())
            .filter(|&c| self.0.is_set(c).unwrap_or(false))
            .collect()
    }
}

/// Pins the calling thread to CPU `cpu` alone.
pub fn pin_current_thread(cpu: usize) -> Result<(), String> {
    let mut only = CpuSet::new();
    only.set(cpu)
        .map_err(|e| format!("cannot pin to CPU {cpu}: {e}"))?;
    sched_setaffinity(Pid::from_raw(0), &only)
        .map_err(|e| format!("cannot pin to CPU {cpu}: {e} (is it online and allowed?)"))
}

/// Pins the calling thread to `preferred` if this thread may run there,
/// else to the last CPU it may run on (CPU 0 tends to take more
/// interrupts). Returns the CPU, or `None` if pinning failed.
pub fn pin_preferred(preferred: Option<usize>) -> Option<usize> {
    let cpus = Affinity::current()?.cpus();
    let cpu = preferred
        .filter(|p| cpus.contains(p))
        .or_else(|| cpus.last().copied())?;
    pin_current_thread(cpu).ok().map(|()| cpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_thread_runs_where_it_was_pinned_and_can_go_back() {
        let before = Affinity::current().expect("affinity");
        let cpu = *before.cpus().last().expect("some CPU");
        std::thread::spawn(move || {
            pin_current_thread(cpu).unwrap();
            assert_eq!(Affinity::current().unwrap().cpus(), [cpu]);
            before.restore();
            assert_eq!(Affinity::current().unwrap().cpus(), before.cpus());
            assert_eq!(pin_preferred(Some(usize::MAX - 1)), Some(cpu));
        })
        .join()
        .unwrap();
        assert!(pin_current_thread(CpuSet::count() + 1).is_err());
    }
}
