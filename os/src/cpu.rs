//! CPU time used: by the calling thread, by this process, and by the
//! children it has reaped, so throughput can be set against the CPU it
//! cost.

use nix::sys::resource::{UsageWho, getrusage};
use nix::sys::time::TimeVal;
use serde::{Deserialize, Serialize};

/// User and system CPU time, in seconds (in `oaed`'s stats as `cpu`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuTime {
    pub user_s: f64,
    pub system_s: f64,
}

impl CpuTime {
    pub fn total_s(&self) -> f64 {
        self.user_s + self.system_s
    }

    /// What was used between `earlier` and `self`.
    pub fn since(&self, earlier: &CpuTime) -> CpuTime {
        CpuTime {
            user_s: (self.user_s - earlier.user_s).max(0.0),
            system_s: (self.system_s - earlier.system_s).max(0.0),
        }
    }

    /// Summed over threads.
    pub fn add(&mut self, o: &CpuTime) {
        self.user_s += o.user_s;
        self.system_s += o.system_s;
    }

    fn of(who: UsageWho) -> CpuTime {
        // getrusage fails only for an invalid `who`, and these are valid.
        let Ok(u) = getrusage(who) else {
            return CpuTime::default();
        };
        CpuTime {
            user_s: seconds(u.user_time()),
            system_s: seconds(u.system_time()),
        }
    }
}

fn seconds(t: TimeVal) -> f64 {
    t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6
}

/// CPU time of the calling thread so far.
pub fn this_thread() -> CpuTime {
    CpuTime::of(UsageWho::RUSAGE_THREAD)
}

/// CPU time of this process so far, every thread included.
pub fn this_process() -> CpuTime {
    CpuTime::of(UsageWho::RUSAGE_SELF)
}

/// CPU time of running process `pid` so far (all its threads), from
/// `/proc/<pid>/stat`; `None` once it has exited.
pub fn of_process(pid: u32) -> Option<CpuTime> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields count from
    // the last ')'. utime and stime are fields 14 and 15, in clock ticks.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: f64 = fields.next()?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|&t| t > 0)? as f64;
    Some(CpuTime {
        user_s: utime / ticks,
        system_s: stime / ticks,
    })
}

/// CPU time of every child reaped so far (and of what they reaped).
pub fn reaped_children() -> CpuTime {
    CpuTime::of(UsageWho::RUSAGE_CHILDREN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spinning_shows_as_user_time_of_the_thread_and_the_process() {
        let (thread0, process0) = (this_thread(), this_process());
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(50) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let thread = this_thread().since(&thread0);
        let process = this_process().since(&process0);
        // Bounded below only: a loaded machine may give the thread less CPU
        // than wall time, but 50 ms of spinning is never under 1 ms of it.
        assert!(thread.total_s() > 0.001, "{thread:?}");
        assert!(
            process.total_s() >= thread.total_s() * 0.9,
            "{process:?} {thread:?}"
        );
    }
}
