//! `oaed --config <file> [--name <dataplane>]`: runs one OAE dataplane.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use oae_dataplane::config::Config;
use oae_dataplane::daemon::{self, Overrides};

/// Runs an OAE dataplane: one pinned polling core per configured queue,
/// controlled through a Unix socket (see `oaectl`).
#[derive(Parser)]
#[command(version)]
struct Args {
    /// TOML configuration (see configs/).
    #[arg(long, short)]
    config: PathBuf,
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
}

fn main() -> ExitCode {
    let args = Args::parse();
    let config = match Config::load(&args.config, args.name.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("oaed: {e}");
            return ExitCode::from(2);
        }
    };
    if args.check {
        println!("{}: configuration is valid", args.config.display());
        return ExitCode::SUCCESS;
    }
    let overrides = Overrides {
        control_socket: args.socket,
        state_dir: args.state_dir,
    };
    match daemon::run(config, overrides) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("oaed: {e}");
            ExitCode::FAILURE
        }
    }
}
