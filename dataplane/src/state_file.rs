//! Numbers the dataplane keeps in its state directory across restarts
//! (its epoch, its address): one decimal number a file, replaced whole
//! and made durable before it is relied on.

use std::fs;
use std::io::Write;
use std::path::Path;

/// The number in `dir/name`, or `None` if there is no such file; a file
/// that holds anything else is refused, with the fix.
pub fn read(dir: &Path, name: &str, what: &str) -> Result<Option<u64>, String> {
    let path = dir.join(name);
    match fs::read_to_string(&path) {
        Ok(text) => text.trim().parse::<u64>().map(Some).map_err(|_| {
            format!(
                "{} holds '{}', not {what}: fix or remove it",
                path.display(),
                text.trim()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// Stores `value` in `dir/name` (made with `dir` if missing), durably:
/// written beside it, synced, renamed over it, the directory synced.
pub fn store(dir: &Path, name: &str, value: u64) -> Result<(), String> {
    fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create state directory {}: {e}", dir.display()))?;
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    let write = || -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        writeln!(f, "{value}")?;
        f.sync_all()?;
        fs::rename(&tmp, &path)?;
        fs::File::open(dir)?.sync_all()
    };
    write().map_err(|e| format!("cannot store {}: {e}", path.display()))
}
