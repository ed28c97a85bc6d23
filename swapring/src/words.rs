//! A file of 64-bit words mapped shared by a dataplane and its host
//! programs: a registered region that host programs read and write in
//! place, as an RDMA program reads a READ's bytes in its own registered
//! buffer. The same guarded mapping as the host ring's region, without a
//! header: the file is the region's bytes.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;

use crate::region::{Mapping, RegionError, create_private};

/// A mapped file of words.
pub struct SharedWords {
    mapping: Mapping,
    path: PathBuf,
}

impl SharedWords {
    /// Creates `path` (it must not exist, not even as a symbolic link),
    /// readable and writable by its owner only, `words` zeroed words long,
    /// and maps it.
    pub fn create(path: impl AsRef<Path>, words: usize) -> Result<SharedWords, RegionError> {
        let path = path.as_ref().to_path_buf();
        let file = create_private(&path)?;
        match Mapping::new(&file, &path, 8 * words as u64, true) {
            Ok(mapping) => Ok(SharedWords { mapping, path }),
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                Err(e)
            }
        }
    }

    /// Maps the words another process created at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<SharedWords, RegionError> {
        let path = path.as_ref().to_path_buf();
        let io = |op, source| RegionError::Io {
            op,
            path: path.clone(),
            source,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| io("open", e))?;
        let len = file.metadata().map_err(|e| io("stat", e))?.len();
        if len == 0 || !len.is_multiple_of(8) {
            return Err(io(
                "map",
                std::io::Error::other(format!(
                    "{len} bytes is not a positive number of 8-byte words"
                )),
            ));
        }
        let mapping = Mapping::new(&file, &path, len, false)?;
        Ok(SharedWords { mapping, path })
    }

    pub fn words(&self) -> &[AtomicU64] {
        self.mapping.words()
    }

    /// Whether the file was cut short under the mapping (the words read
    /// zero from then on).
    pub fn cut(&self) -> bool {
        self.mapping.cut()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::region::unique_shm_path;
    use std::sync::atomic::Ordering;

    #[test]
    fn words_written_on_one_side_are_read_on_the_other_and_the_file_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let path = unique_shm_path("oae-words");
        let made = SharedWords::create(&path, 4).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(
            SharedWords::create(&path, 4).is_err(),
            "never replaces a file"
        );
        let seen = SharedWords::open(&path).unwrap();
        assert_eq!(seen.words().len(), 4);
        made.words()[3].store(0xfeed, Ordering::Release);
        assert_eq!(seen.words()[3].load(Ordering::Acquire), 0xfeed);
        std::fs::write(&path, b"odd").unwrap();
        assert!(SharedWords::open(&path).is_err(), "3 bytes are not words");
        std::fs::remove_file(&path).unwrap();
    }
}
