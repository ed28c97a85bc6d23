//! Shell completions and manual pages, generated from a binary's clap
//! definition so they cannot drift from the arguments it takes. `oaed` and
//! `oaectl` both print theirs; `cargo xtask install-cli-docs` installs them.

use std::io;
use std::path::{Path, PathBuf};

pub use clap_complete::Shell;

/// Writes `cmd`'s completion script for `shell` to `out`.
pub fn completions(mut cmd: clap::Command, shell: Shell, out: &mut impl io::Write) {
    let name = cmd.get_name().to_string();
    clap_complete::generate(shell, &mut cmd, name, out);
}

/// Writes `cmd`'s manual page and one for each of its subcommands (as
/// `oaectl-status.1`) into `dir`, creating it; returns the pages written,
/// sorted.
pub fn man_pages(cmd: clap::Command, dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let name = cmd.get_name().to_string();
    // Not built first: `generate_to` builds with the help subcommand
    // disabled, so no `help` pages appear.
    clap_mangen::generate_to(cmd, dir)?;
    let mut pages = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let file = path.file_name().and_then(|f| f.to_str()).unwrap_or("");
        if file.ends_with(".1")
            && (file == format!("{name}.1") || file.starts_with(&format!("{name}-")))
        {
            pages.push(path);
        }
    }
    pages.sort();
    Ok(pages)
}
