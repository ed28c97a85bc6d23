//! `oae-raw`: the raw AF_XDP references on a fresh veth pair, generator
//! (ping-pong, then floods) in one namespace pinned to one core, reflector
//! in the other pinned to another. Needs root.
//!
//! ```text
//! oae-raw [--json] [--quick] [--secs S] [--window N] [--rounds N]
//!         [--generator-core C] [--reflector-core C]
//!         [--xdp-mode auto|driver|skb] [--bind-mode auto|copy|zero-copy]
//!         [--no-need-wakeup]
//! ```
//!
//! Prints a table; with `--json`, prints one JSON line instead and the
//! table on stderr.

use std::process::ExitCode;
use std::time::Duration;

use oae_perf::raw::{RawConfig, run_afxdp};
use oae_pmd::afxdp::{AfXdpConfig, BindMode};
use oae_pmd::xdp::XdpMode;

const USAGE: &str = "usage: oae-raw [--json] [--quick] [--secs S] [--window N] [--rounds N] \
                     [--generator-core C] [--reflector-core C] [--xdp-mode auto|driver|skb] \
                     [--bind-mode auto|copy|zero-copy] [--no-need-wakeup]";

struct Options {
    json: bool,
    raw: RawConfig,
    xdp_mode: XdpMode,
    afxdp: AfXdpConfig,
}

fn parse(args: impl IntoIterator<Item = String>) -> Result<Options, String> {
    let mut args = args.into_iter();
    let mut opts = Options {
        json: false,
        raw: RawConfig::default(),
        xdp_mode: XdpMode::Auto,
        afxdp: AfXdpConfig::default(),
    };
    // Applied after `--quick`, whichever comes first.
    let (mut secs, mut window, mut rounds) = (None, None, None);
    let (mut generator_core, mut reflector_core) = (None, None);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .ok_or_else(|| format!("{name} needs a value\n{USAGE}"))
        };
        match arg.as_str() {
            "--json" => opts.json = true,
            "--quick" => opts.raw = RawConfig::quick(),
            "--secs" => secs = Some(number::<f64>("--secs", &value("--secs")?)?),
            "--window" => window = Some(number("--window", &value("--window")?)?),
            "--rounds" => rounds = Some(number("--rounds", &value("--rounds")?)?),
            "--generator-core" => {
                generator_core = Some(number("--generator-core", &value("--generator-core")?)?)
            }
            "--reflector-core" => {
                reflector_core = Some(number("--reflector-core", &value("--reflector-core")?)?)
            }
            "--xdp-mode" => opts.xdp_mode = value("--xdp-mode")?.parse()?,
            "--bind-mode" => {
                opts.afxdp.mode = match value("--bind-mode")?.as_str() {
                    "auto" => BindMode::Auto,
                    "copy" => BindMode::Copy,
                    "zero-copy" | "zc" => BindMode::ZeroCopy,
                    other => {
                        return Err(format!(
                            "unknown bind mode '{other}': expected auto, copy or zero-copy"
                        ));
                    }
                }
            }
            "--no-need-wakeup" => opts.afxdp.need_wakeup = false,
            "-h" | "--help" => return Err(USAGE.to_string()),
            other => return Err(format!("unknown argument '{other}'\n{USAGE}")),
        }
    }
    if let Some(s) = secs {
        if !(s > 0.0 && s <= 3600.0) {
            return Err(format!(
                "--secs {s}: use a duration between 0 and 3600 seconds"
            ));
        }
        opts.raw.flood.duration = Duration::from_secs_f64(s);
    }
    if let Some(w) = window {
        opts.raw.windowed_flood = w;
    }
    if let Some(r) = rounds {
        opts.raw.ping_pong.rounds = r;
    }
    if let Some(c) = generator_core {
        opts.raw.generator_core = c;
    }
    if let Some(c) = reflector_core {
        opts.raw.reflector_core = c;
    }
    Ok(opts)
}

fn number<T: std::str::FromStr>(name: &str, text: &str) -> Result<T, String> {
    text.parse()
        .map_err(|_| format!("{name} '{text}' is not a number"))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if oae_version::asked(&args) {
        println!("oae-raw {}", oae_version::VERSION);
        return ExitCode::SUCCESS;
    }
    let opts = match parse(args) {
        Ok(opts) => opts,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match run_afxdp(&opts.raw, opts.xdp_mode, &opts.afxdp) {
        Ok(report) => {
            if opts.json {
                eprintln!("{}", report.to_text());
                println!("{}", report.to_json());
            } else {
                println!("{}", report.to_text());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("oae-raw: {e}");
            ExitCode::FAILURE
        }
    }
}
