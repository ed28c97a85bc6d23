//! The incarnation counter. A restarted dataplane must present a larger
//! epoch than any it used before, or its peer would take the new
//! incarnation's frames for the old one's: the counter lives in a file and
//! is made durable before any link comes up.

use std::fs;
use std::io::Write;
use std::path::Path;

/// Reads the last epoch in `dir`, stores and returns the next one.
pub fn next(dir: &Path) -> Result<u32, String> {
    fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create state directory {}: {e}", dir.display()))?;
    let path = dir.join("epoch");
    let last = match fs::read_to_string(&path) {
        Ok(text) => text.trim().parse::<u32>().map_err(|_| {
            format!(
                "{} holds '{}', not an epoch number: fix or remove it",
                path.display(),
                text.trim()
            )
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let next = last
        .checked_add(1)
        .ok_or_else(|| format!("{} is exhausted (u32::MAX)", path.display()))?;
    let tmp = dir.join("epoch.tmp");
    let write = || -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        writeln!(f, "{next}")?;
        f.sync_all()?;
        fs::rename(&tmp, &path)?;
        fs::File::open(dir)?.sync_all()
    };
    write().map_err(|e| format!("cannot store the epoch in {}: {e}", path.display()))?;
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;

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
