//! The dataplane's identity file: the secret of its X25519 identity, made
//! on first start from the operating system's randomness and kept with
//! mode 0600, like an SSH host key. Links whose keys are agreed by
//! identity prove it to their peers (`oae_proto::handshake`).

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use oae_proto::identity::{IDENTITY_LEN, IdentitySecret, PublicIdentity};

/// Reads the identity in `path`, or makes one there if there is none.
/// A file others may read, a symbolic link, or one that is not an
/// identity is refused, with the fix.
pub fn load_or_create(path: &Path) -> Result<IdentitySecret, String> {
    match open(path) {
        Ok(secret) => Ok(secret),
        Err(e) if e.kind() == ErrorKind::NotFound => create(path),
        Err(e) => Err(describe(path, e)),
    }
}

/// The public identity of the file at `path`, made if missing.
pub fn public(path: &Path) -> Result<PublicIdentity, String> {
    load_or_create(path).map(|s| s.public())
}

fn describe(path: &Path, e: std::io::Error) -> String {
    if e.raw_os_error() == Some(nix::libc::ELOOP) {
        return format!(
            "identity file {} is a symbolic link: give the file itself (identity_file)",
            path.display()
        );
    }
    format!("cannot read identity file {}: {e}", path.display())
}

fn open(path: &Path) -> std::io::Result<IdentitySecret> {
    // Never through a link: the file is a secret.
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)?;
    let mode = file.metadata()?.permissions().mode();
    if mode & 0o077 != 0 {
        return Err(std::io::Error::other(format!(
            "others may read it (mode {:o}): chmod 600 {}",
            mode & 0o777,
            path.display()
        )));
    }
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    let secret = PublicIdentity::from_hex(text.trim()).map_err(|e| {
        std::io::Error::other(format!(
            "it does not hold an identity ({e}): remove it and a new identity is made \
             (the node's peers must then trust the new one)"
        ))
    })?;
    Ok(IdentitySecret::from_bytes(secret.0))
}

fn create(path: &Path) -> Result<IdentitySecret, String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create the directory of {}: {e}", path.display()))?;
    }
    let mut secret = [0u8; IDENTITY_LEN];
    getrandom::fill(&mut secret).map_err(|e| format!("no randomness for a new identity: {e}"))?;
    let hex = oae_common::hex::encode(&secret);
    // create_new: never over a file another process (or a link) put there.
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| format!("cannot create identity file {}: {e}", path.display()))?;
    writeln!(file, "{hex}")
        .and_then(|()| file.sync_all())
        .map_err(|e| format!("cannot write identity file {}: {e}", path.display()))?;
    Ok(IdentitySecret::from_bytes(secret))
}

/// A seed for a node's handshakes, from the operating system.
pub fn handshake_seed() -> Result<[u8; 32], String> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| format!("no randomness for handshakes: {e}"))?;
    Ok(seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_once_kept_private_and_refused_when_unsafe() {
        let dir = std::env::temp_dir().join(format!("oae-identity-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let path = dir.join("identity.key");
        let first = public(&path).unwrap();
        assert_eq!(public(&path).unwrap(), first, "the same identity again");
        let mode = fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let open = public(&path).unwrap_err();
        assert!(open.contains("chmod 600"), "{open}");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.join("link.key");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(public(&link).unwrap_err().contains("symbolic link"));
        fs::write(dir.join("junk.key"), "not hex\u{e9}").unwrap();
        fs::set_permissions(dir.join("junk.key"), fs::Permissions::from_mode(0o600)).unwrap();
        assert!(
            public(&dir.join("junk.key"))
                .unwrap_err()
                .contains("does not hold an identity")
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
