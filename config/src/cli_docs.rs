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
/// `oaectl-status.1`, `oaectl-verb-cas.1`) into `dir`, creating it;
/// returns the pages written, in the command tree's order.
pub fn man_pages(cmd: clap::Command, dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut pages = Vec::new();
    page_names(&cmd, cmd.get_name(), &mut pages);
    // Not built first: `generate_to` builds with the help subcommand
    // disabled, so no `help` pages appear.
    clap_mangen::generate_to(cmd, dir)?;
    let pages: Vec<PathBuf> = pages
        .into_iter()
        .map(|p| dir.join(format!("{p}.1")))
        .collect();
    if let Some(missing) = pages.iter().find(|p| !p.exists()) {
        return Err(io::Error::other(format!(
            "{} was not written",
            missing.display()
        )));
    }
    Ok(pages)
}

/// The page of `cmd` (named `name`) and of every subcommand below it.
fn page_names(cmd: &clap::Command, name: &str, out: &mut Vec<String>) {
    out.push(name.to_string());
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        page_names(sub, &format!("{name}-{}", sub.get_name()), out);
    }
}
