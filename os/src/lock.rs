//! An exclusive lock one process holds for its life on a file beside what
//! it guards (`flock`, released by the kernel when the process ends, however
//! it ends): two processes that would race to claim one name, such as two
//! dataplanes starting on one control socket, take turns on the lock first.
//! The lock file is opened without following a link and only if this user
//! owns it, so a planted file can neither redirect nor hold the lock.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// The held lock; dropping it releases it. The file stays: removing it
/// would let a third process lock a new file while a second holds the old.
#[derive(Debug)]
pub struct HeldLock {
    _lock: Flock<File>,
    path: PathBuf,
}

impl HeldLock {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Why a lock was not taken.
#[derive(Debug, PartialEq, Eq)]
pub enum LockError {
    /// Another process holds it.
    Held,
    /// The file could not be used as a lock; the text says why.
    Unusable(String),
}

/// Takes the exclusive lock on `path`, creating it (mode 0600) if absent,
/// without waiting.
pub fn hold_exclusive(path: &Path) -> Result<HeldLock, LockError> {
    let unusable = |e: String| LockError::Unusable(format!("{}: {e}", path.display()));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .mode(0o600)
        .open(path)
        .map_err(|e| unusable(e.to_string()))?;
    let owner = file.metadata().map_err(|e| unusable(e.to_string()))?.uid();
    if owner != nix::unistd::geteuid().as_raw() {
        return Err(unusable(format!(
            "owned by uid {owner}, not by this user: remove it"
        )));
    }
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(HeldLock {
            _lock: lock,
            path: path.to_path_buf(),
        }),
        Err((_, Errno::EWOULDBLOCK)) => Err(LockError::Held),
        Err((_, e)) => Err(unusable(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::private_dir::PrivateDir;

    #[test]
    fn one_holder_at_a_time_and_free_again_once_dropped() {
        let dir = PrivateDir::create("oae-lock-test").unwrap();
        let path = dir.join("x.lock");
        let first = hold_exclusive(&path).unwrap();
        assert_eq!(hold_exclusive(&path).unwrap_err(), LockError::Held);
        drop(first);
        let again = hold_exclusive(&path).unwrap();
        assert_eq!(again.path(), path);
    }

    #[test]
    fn a_symbolic_link_is_not_followed() {
        let dir = PrivateDir::create("oae-lock-link").unwrap();
        let target = dir.join("target");
        std::fs::write(&target, b"keep").unwrap();
        let link = dir.join("x.lock");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(matches!(hold_exclusive(&link), Err(LockError::Unusable(_))));
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    }
}
