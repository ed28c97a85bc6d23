//! Which network namespace this process is in.

use std::os::unix::fs::MetadataExt;

/// The name of the network namespace this process is in, if it is one
/// `ip netns add` named (a file in /run/netns bound to it): what `ip netns
/// identify` says.
pub fn named() -> Option<String> {
    let mine = std::fs::metadata("/proc/self/ns/net").ok()?;
    std::fs::read_dir("/run/netns").ok()?.find_map(|entry| {
        let entry = entry.ok()?;
        let theirs = std::fs::metadata(entry.path()).ok()?;
        (theirs.dev() == mine.dev() && theirs.ino() == mine.ino())
            .then(|| entry.file_name().to_string_lossy().into_owned())
    })
}
