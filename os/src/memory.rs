//! How much memory this process may have: the lowest of its address-space
//! limit (`ulimit -v`), its control group's `memory.max`, and the
//! machine's memory. A configuration can then be refused when it is
//! checked, with the limit named, rather than abort at start when an
//! allocation fails or be killed while it fills its memory.

use std::path::Path;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryLimit {
    pub bytes: u64,
    /// Which limit it is, as an operator would look it up.
    pub source: &'static str,
}

/// The lowest limit that applies, if any could be read.
pub fn limit() -> Option<MemoryLimit> {
    [address_space(), control_group(), machine()]
        .into_iter()
        .flatten()
        .min_by_key(|l| l.bytes)
}

fn address_space() -> Option<MemoryLimit> {
    let (soft, _) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_AS).ok()?;
    (soft != nix::sys::resource::RLIM_INFINITY).then_some(MemoryLimit {
        bytes: soft,
        source: "RLIMIT_AS, ulimit -v",
    })
}

/// cgroup v2: `0::/path` in /proc/self/cgroup, its `memory.max`.
fn control_group() -> Option<MemoryLimit> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = text.lines().find_map(|l| l.strip_prefix("0::"))?;
    let max = Path::new("/sys/fs/cgroup")
        .join(path.trim_start_matches('/'))
        .join("memory.max");
    let bytes = std::fs::read_to_string(max).ok()?.trim().parse().ok()?;
    Some(MemoryLimit {
        bytes,
        source: "the control group's memory.max",
    })
}

fn machine() -> Option<MemoryLimit> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(MemoryLimit {
        bytes: kib * 1024,
        source: "MemTotal, the machine's memory",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machine_has_a_limit_and_the_lowest_is_taken() {
        let m = machine().expect("/proc/meminfo has MemTotal");
        assert!(m.bytes > 1 << 20, "{m:?}");
        let l = limit().expect("at least the machine's");
        assert!(l.bytes <= m.bytes, "{l:?} {m:?}");
    }
}
