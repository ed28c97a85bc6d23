//! Build orchestration for oae. Two commands from a fresh machine:
//!
//! * `cargo xtask run`  — the main job (today: the fault-injection simulator
//!   campaign, one table row per fault class);
//! * `cargo xtask test` — every check: formatting, lints, unit, property,
//!   simulator-campaign and model-checking tests, and the benchmarks in quick mode.
//!
//! Each first installs what it needs, idempotently.

use std::io::{BufRead, BufReader};
use std::process::{Command, ExitCode, Stdio};

const USAGE: &str = "\
usage: cargo xtask <command>

  run     run the main job: the simulator campaign over every fault class
  test    run every test (what CI runs)
  soak    a long simulator campaign: cargo xtask soak [--seeds N] [--verbs N]
  bench   the core micro-benchmark at full length
  fuzz    run the fuzz targets (installs cargo-fuzz): cargo xtask fuzz [SECONDS]
  setup   install what the project needs (done by the commands above)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("run") => setup().and_then(|()| run_main_job(&args[1..])),
        Some("test") => setup().and_then(|()| test()),
        Some("soak") => setup().and_then(|()| soak(&args[1..])),
        Some("bench") => setup().and_then(|()| {
            cargo(
                &["bench", "-p", "oae-perf", "--bench", "cas_round_trip"],
                &[],
            )
        }),
        Some("fuzz") => setup().and_then(|()| fuzz(&args[1..])),
        Some("setup") => setup(),
        Some("-h" | "--help") | None => {
            eprintln!("{USAGE}");
            return if args.is_empty() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
        Some(other) => Err(format!("unknown command '{other}'\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Installs what every command needs. Idempotent: rustup skips installed
/// components quickly.
fn setup() -> Result<(), String> {
    run(
        "rustup",
        &["component", "add", "rustfmt", "clippy"],
        &[],
        "install the rustfmt and clippy components",
    )
}

fn run_main_job(extra: &[String]) -> Result<(), String> {
    let mut args = vec!["run", "--release", "-p", "oae-sim", "--", "table"];
    args.extend(extra.iter().map(String::as_str));
    cargo(&args, &[])
}

fn soak(extra: &[String]) -> Result<(), String> {
    let mut args = vec![
        "run",
        "--release",
        "-p",
        "oae-sim",
        "--",
        "soak",
        "--seeds",
        "1000",
    ];
    args.extend(extra.iter().map(String::as_str));
    cargo(&args, &[])
}

fn test() -> Result<(), String> {
    cargo(&["fmt", "--all", "--check"], &[])?;
    cargo(
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
        &[],
    )?;
    cargo(
        &["bench", "-p", "oae-perf", "--bench", "cas_round_trip"],
        &[("OAE_BENCH_QUICK", "1")],
    )?;
    let mut totals = [0u64; 3];
    let tests = cargo_test(&["test", "--workspace", "--all-targets"], &mut totals);
    let docs = tests.and_then(|()| cargo_test(&["test", "--workspace", "--doc"], &mut totals));
    let [passed, failed, ignored] = totals;
    println!("tests: {passed} passed, {failed} failed, {ignored} skipped");
    docs
}

fn fuzz(extra: &[String]) -> Result<(), String> {
    let seconds = extra.first().map(String::as_str).unwrap_or("60");
    seconds
        .parse::<u32>()
        .map_err(|_| format!("fuzz takes a number of seconds per target, got '{seconds}'"))?;
    if !Command::new("cargo")
        .args(["+nightly", "fuzz", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
    {
        run(
            "cargo",
            &["install", "cargo-fuzz", "--locked"],
            &[],
            "install cargo-fuzz",
        )?;
    }
    for target in ["frame", "node"] {
        let max_time = format!("-max_total_time={seconds}");
        run(
            "cargo",
            &["+nightly", "fuzz", "run", target, "--", &max_time],
            &[],
            &format!("fuzz target {target}"),
        )
        .map_err(|e| format!("{e} (run from the fuzz/ directory's parent)"))?;
    }
    Ok(())
}

fn cargo(args: &[&str], env: &[(&str, &str)]) -> Result<(), String> {
    run("cargo", args, env, &format!("cargo {}", args.join(" ")))
}

fn run(program: &str, args: &[&str], env: &[(&str, &str)], what: &str) -> Result<(), String> {
    eprintln!("xtask: {program} {}", args.join(" "));
    let status = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .status()
        .map_err(|e| format!("{what}: cannot start {program}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed ({status})"))
    }
}

/// Runs `cargo test`, passing its output through, and adds every test
/// binary's passed, failed and ignored counts to `totals`.
fn cargo_test(args: &[&str], totals: &mut [u64; 3]) -> Result<(), String> {
    eprintln!("xtask: cargo {}", args.join(" "));
    let mut child = Command::new("cargo")
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start cargo: {e}"))?;
    let stdout = child.stdout.take().expect("piped");
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|e| format!("reading cargo test output: {e}"))?;
        println!("{line}");
        if let Some(rest) = line.strip_prefix("test result: ") {
            for part in rest.split(['.', ';']) {
                let mut words = part.split_whitespace();
                if let (Some(n), Some(kind)) = (words.next(), words.next())
                    && let Ok(n) = n.parse::<u64>()
                {
                    match kind {
                        "passed" => totals[0] += n,
                        "failed" => totals[1] += n,
                        "ignored" => totals[2] += n,
                        _ => {}
                    }
                }
            }
        }
    }
    let status = child
        .wait()
        .map_err(|e| format!("waiting for cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("cargo {} failed ({status})", args.join(" ")))
    }
}
