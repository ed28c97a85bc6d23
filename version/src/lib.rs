//! What every OAE binary says to `--version`: the release and the commit
//! it was built from, so a report or a bug names exactly what ran.

/// The git commit (12 hex digits) the build started from, or "unknown".
pub const COMMIT: &str = env!("OAE_COMMIT");

/// `0.1.0 (commit 0123456789ab)`.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("OAE_COMMIT"),
    ")"
);

/// Whether `args` (without the program name) ask only for the version, as
/// a hand-written argument parser checks before anything else.
pub fn asked(args: &[String]) -> bool {
    matches!(args, [one] if one == "--version" || one == "-V")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_names_the_release_and_a_commit() {
        assert!(VERSION.starts_with(env!("CARGO_PKG_VERSION")));
        assert!(
            COMMIT == "unknown"
                || (COMMIT.len() == 12 && COMMIT.bytes().all(|b| b.is_ascii_hexdigit())),
            "{COMMIT}"
        );
        assert!(asked(&["--version".into()]) && !asked(&["--version".into(), "x".into()]));
    }
}
