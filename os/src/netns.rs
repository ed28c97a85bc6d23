//! Which network namespace this process is in.

/// Whether this process shares the network namespace of PID 1 (the
/// host's, outside containers); `None` if that cannot be read (PID 1's
/// namespace is root's to read).
pub fn in_the_hosts() -> Option<bool> {
    let mine = std::fs::read_link("/proc/self/ns/net").ok()?;
    let hosts = std::fs::read_link("/proc/1/ns/net").ok()?;
    Some(mine == hosts)
}
