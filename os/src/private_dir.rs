//! A private working directory for what a tool writes (logs, sockets,
//! state): made fresh by `mkdtemp` (a new name, mode 0700, never a
//! directory someone else made first), with files created only if absent
//! and never through a symbolic link. A tool running as root can then not
//! be made to write where another user points it, as it could in a
//! predictable `/tmp/<name>-<pid>`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

pub struct PrivateDir {
    path: PathBuf,
    /// Left in place when dropped.
    kept: bool,
}

impl PrivateDir {
    /// A new directory `<prefix>XXXXXX` in the system's temporary
    /// directory, readable only by its owner.
    pub fn create(prefix: &str) -> Result<PrivateDir, String> {
        PrivateDir::create_in(&std::env::temp_dir(), prefix)
    }

    /// A new directory `<prefix>XXXXXX` in `parent`.
    pub fn create_in(parent: &Path, prefix: &str) -> Result<PrivateDir, String> {
        let template = parent.join(format!("{prefix}XXXXXX"));
        let path = nix::unistd::mkdtemp(&template).map_err(|e| {
            format!(
                "cannot create a private directory {}: {e}",
                template.display()
            )
        })?;
        Ok(PrivateDir { path, kept: false })
    }

    /// A new directory at `path`, mode 0700, for what outlives the tool
    /// (`oaectl pair up`): refused, with [`std::io::ErrorKind::AlreadyExists`],
    /// if anything is there. Removed when dropped unless [`kept`].
    ///
    /// [`kept`]: PrivateDir::keep
    pub fn create_at(path: &Path) -> std::io::Result<PrivateDir> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new().mode(0o700).create(path)?;
        Ok(PrivateDir {
            path: path.to_path_buf(),
            kept: false,
        })
    }

    /// Leaves the directory and what it holds in place.
    pub fn keep(mut self) -> PathBuf {
        self.kept = true;
        self.path.clone()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Creates `name` here, mode 0600: refused if anything (a file, a
    /// symbolic link) is already at that name.
    pub fn create_file(&self, name: &str) -> Result<File, String> {
        create_new_private(&self.join(name))
    }

    /// Writes a new file `name` here (mode 0600: it may hold link keys),
    /// refused like [`PrivateDir::create_file`], and returns its path.
    pub fn write_file(&self, name: &str, text: &str) -> Result<PathBuf, String> {
        let path = self.join(name);
        self.create_file(name)?
            .write_all(text.as_bytes())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path)
    }
}

/// Creates the file at `path`, mode 0600, only if nothing is there: with
/// `O_EXCL` and `O_NOFOLLOW` a planted file or symbolic link makes it fail
/// instead of being written through.
pub fn create_new_private(path: &Path) -> Result<File, String> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        if !self.kept {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn made_fresh_private_and_removed() {
        let dir = PrivateDir::create("oae-private-test-").unwrap();
        let path = dir.path().to_path_buf();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{}", path.display());
        let other = PrivateDir::create("oae-private-test-").unwrap();
        assert_ne!(other.path(), dir.path());
        let f = dir.create_file("a.log").unwrap();
        let mode = f.metadata().unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        drop((dir, other));
        assert!(!path.exists());
    }

    #[test]
    fn one_made_at_a_path_is_refused_if_taken_and_kept_if_asked() {
        let parent = PrivateDir::create("oae-private-test-").unwrap();
        let path = parent.join("pair");
        let dir = PrivateDir::create_at(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let taken = PrivateDir::create_at(&path).err().unwrap();
        assert_eq!(taken.kind(), std::io::ErrorKind::AlreadyExists);
        dir.write_file("pids", "1").unwrap();
        assert_eq!(dir.keep(), path);
        assert!(path.join("pids").exists(), "kept");
        drop(PrivateDir::create_at(&parent.join("other")).unwrap());
        assert!(!parent.join("other").exists(), "not kept: removed");
    }

    #[test]
    fn planted_files_and_links_are_refused_not_written_through() {
        let dir = PrivateDir::create("oae-private-test-").unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, "untouched").unwrap();
        std::os::unix::fs::symlink(&victim, dir.join("a.log")).unwrap();
        let err = dir.create_file("a.log").unwrap_err();
        assert!(err.contains("a.log"), "{err}");
        std::fs::write(dir.join("b.log"), "planted").unwrap();
        assert!(dir.create_file("b.log").is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
        assert_eq!(
            std::fs::read_to_string(dir.join("b.log")).unwrap(),
            "planted"
        );
    }
}
