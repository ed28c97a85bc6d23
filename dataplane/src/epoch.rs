//! The incarnation counter. A restarted dataplane must present a larger
//! epoch than any it used before, or its peer would take the new
//! incarnation's frames for the old one's: the counter lives in a file and
//! is made durable before any link comes up.

use std::path::Path;

use crate::state_file;

/// Reads the last epoch in `dir`, stores and returns the next one.
pub fn next(dir: &Path) -> Result<u32, String> {
    let last = state_file::read(dir, "epoch", "an epoch number")?.unwrap_or(0);
    let last = u32::try_from(last).map_err(|_| {
        format!(
            "{} holds {last}, more than an epoch can be: fix or remove it",
            dir.join("epoch").display()
        )
    })?;
    let next = last
        .checked_add(1)
        .ok_or_else(|| format!("{} is exhausted (u32::MAX)", dir.join("epoch").display()))?;
    state_file::store(dir, "epoch", u64::from(next))?;
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn epochs_grow_across_restarts_and_junk_is_refused() {
        let dir = std::env::temp_dir().join(format!("oae-epoch-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        assert_eq!(next(&dir), Ok(1));
        assert_eq!(next(&dir), Ok(2));
        fs::write(dir.join("epoch"), "banana").unwrap();
        assert!(next(&dir).unwrap_err().contains("not an epoch number"));
        fs::remove_dir_all(&dir).unwrap();
    }
}
