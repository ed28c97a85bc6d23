//! This process as Prometheus' process collectors report one: CPU time,
//! memory, open files and start time, read from /proc.

use nix::unistd::{SysconfVar, sysconf};

/// A reading of this process.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessStats {
    /// User and system CPU time of every thread, seconds.
    pub cpu_seconds: f64,
    pub resident_bytes: u64,
    pub virtual_bytes: u64,
    pub open_fds: u64,
    pub max_fds: u64,
    /// When it started, seconds since the Unix epoch.
    pub start_time_seconds: f64,
}

impl ProcessStats {
    /// Reads /proc/self; `None` where /proc is not mounted.
    pub fn read() -> Option<ProcessStats> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // Fields after "(comm)", which may hold spaces: state is field 3.
        let rest = &stat[stat.rfind(')')? + 2..];
        let field = |n: usize| -> Option<u64> { rest.split(' ').nth(n - 3)?.parse().ok() };
        let ticks = sysconf(SysconfVar::CLK_TCK).ok().flatten()? as f64;
        let page = sysconf(SysconfVar::PAGE_SIZE).ok().flatten()? as u64;
        let boot = std::fs::read_to_string("/proc/stat")
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("btime "))?
            .trim()
            .parse::<f64>()
            .ok()?;
        let max_fds = std::fs::read_to_string("/proc/self/limits")
            .ok()?
            .lines()
            .find(|l| l.starts_with("Max open files"))?
            .split_whitespace()
            .nth(3)?
            .parse()
            .ok()?;
        Some(ProcessStats {
            cpu_seconds: (field(14)? + field(15)?) as f64 / ticks,
            start_time_seconds: boot + field(22)? as f64 / ticks,
            virtual_bytes: field(23)?,
            resident_bytes: field(24)? * page,
            open_fds: std::fs::read_dir("/proc/self/fd").ok()?.count() as u64,
            max_fds,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_read_as_it_is() {
        let before = ProcessStats::read().expect("/proc is mounted");
        let spin = std::time::Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(30) {
            std::hint::black_box(0u64);
        }
        let file = std::fs::File::open("/proc/self/stat").unwrap();
        let after = ProcessStats::read().unwrap();
        assert!(
            after.cpu_seconds >= before.cpu_seconds,
            "{before:?} {after:?}"
        );
        assert!(
            after.open_fds > before.open_fds,
            "the file just opened: {after:?}"
        );
        assert!(after.resident_bytes > 0 && after.virtual_bytes >= after.resident_bytes);
        assert!(after.max_fds >= after.open_fds);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        // Started before now, and within the last day of a test run.
        assert!(after.start_time_seconds <= now + 1.0 && after.start_time_seconds > now - 86_400.0);
        drop(file);
    }
}
