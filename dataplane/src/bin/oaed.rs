//! `oaed --config <file> [--name <dataplane>]`: runs one OAE dataplane.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use oae_config::Config;
use oae_config::cli_docs::{self, Shell};
use oae_dataplane::daemon::{self, Overrides};

/// Runs an OAE dataplane: one pinned polling core per configured queue,
/// controlled through a Unix socket (see `oaectl`).
#[derive(Parser)]
#[command(name = "oaed", version = oae_version::VERSION)]
struct Args {
    /// TOML configuration (see configs/).
    #[arg(long, short, required_unless_present_any = ["completions", "man"])]
    config: Option<PathBuf>,
    /// Which dataplane of a multi-dataplane file.
    #[arg(long)]
    name: Option<String>,
    /// Control socket, overriding the file's.
    #[arg(long)]
    socket: Option<PathBuf>,
    /// State directory (holds the incarnation counter), overriding the file's.
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Check the configuration and exit.
    #[arg(long)]
    check: bool,
    /// Print the dataplane's identity (made first if it has none: the
    /// identity file, in the state directory by default) and exit: what
    /// its peers list in `auth.trusted`.
    #[arg(long)]
    show_identity: bool,
    /// Print oaed's completion script for a shell and exit.
    #[arg(long, value_name = "SHELL", exclusive = true)]
    completions: Option<Shell>,
    /// Write oaed's manual page into DIR and exit.
    #[arg(long, value_name = "DIR", exclusive = true)]
    man: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(shell) = args.completions {
        cli_docs::completions(Args::command(), shell, &mut std::io::stdout());
        return ExitCode::SUCCESS;
    }
    if let Some(dir) = &args.man {
        return match cli_docs::man_pages(Args::command(), dir) {
            Ok(pages) => {
                for p in pages {
                    println!("{}", p.display());
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("oaed: writing the manual page into {}: {e}", dir.display());
                ExitCode::FAILURE
            }
        };
    }
    oae_dataplane::log::init();
    let Some(path) = args.config else {
        unreachable!("clap requires --config without --completions or --man");
    };
    let config = match Config::load(&path, args.name.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("{e}");
            return ExitCode::from(2);
        }
    };
    if args.check {
        println!("{}: configuration is valid", path.display());
        return ExitCode::SUCCESS;
    }
    if args.show_identity {
        let state_dir = args.state_dir.unwrap_or_else(|| config.state_dir());
        return match oae_dataplane::identity::public(&config.identity_file(&state_dir)) {
            Ok(public) => {
                println!("{public}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                tracing::error!("{e}");
                ExitCode::FAILURE
            }
        };
    }
    let overrides = Overrides {
        control_socket: args.socket,
        state_dir: args.state_dir,
    };
    match daemon::run(config, overrides) {
        Ok(daemon::Stopped::Asked) => ExitCode::SUCCESS,
        Ok(daemon::Stopped::Readdressed) => start_again(),
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs this program again in this process, with the same arguments: the
/// dataplane stopped to come back as a new incarnation at the address it
/// stored (docs/PROTOCOL.md, "Addresses", N4). A supervisor sees one
/// process throughout.
fn start_again() -> ExitCode {
    use std::os::unix::process::CommandExt;
    let program = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            tracing::error!("cannot find this program to start it again: {e}");
            return ExitCode::FAILURE;
        }
    };
    let e = std::process::Command::new(&program)
        .args(std::env::args_os().skip(1))
        .exec();
    tracing::error!("cannot start {} again: {e}", program.display());
    ExitCode::FAILURE
}
