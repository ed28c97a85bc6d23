//! Shared helpers for the whole-system tests.

use std::fmt;
use std::io::Write;
use std::process::{Command, ExitStatus};

pub mod dataplanes;
pub mod fabric;
pub mod oaed;

/// Debian's interpreter, the one `python3-scapy` is installed for: a pyenv
/// or virtualenv `python3` earlier on PATH would not find scapy.
pub const SCAPY_PYTHON: &str = "/usr/bin/python3";

/// Whether a root-only test may run: true as root; otherwise says why the
/// test is skipped and returns false. A root-only test starts with
/// `if !oae_tests::require_root("its_name") { return; }`.
pub fn require_root(test: &str) -> bool {
    // Unknown only without /proc; then the test runs and fails with the
    // real error rather than passing unseen.
    if effective_uid().is_none_or(|uid| uid == 0) {
        return true;
    }
    // Straight to the stream: the harness captures `eprintln!` and shows it
    // only for failed tests, and a skip must be seen in a passing run.
    let _ = writeln!(
        std::io::stderr().lock(),
        "skipped {test}: needs root (creates network namespaces, veth pairs and XDP \
         programs); run as root, as CI does"
    );
    false
}

/// The effective UID, from the kernel's own account: one number is not
/// worth a dependency.
fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    // "Uid:" is followed by the real, effective, saved and filesystem UIDs.
    let ids = status.lines().find_map(|line| line.strip_prefix("Uid:"))?;
    ids.split_whitespace().nth(1)?.parse().ok()
}

/// What a finished command said. Its `Display` shows everything (command
/// line, exit status, stdout, stderr), so `assert!(…, "{out}")` explains a
/// failure on its own.
#[derive(Debug, Clone)]
pub struct CommandOutput {
    /// The command line, as `Command`'s `Debug` quotes it.
    pub command: String,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl CommandOutput {
    pub fn success(&self) -> bool {
        self.status.success()
    }
}

impl fmt::Display for CommandOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} exited with {}\n--- stdout:\n{}\n--- stderr:\n{}",
            self.command, self.status, self.stdout, self.stderr
        )
    }
}

/// Runs `cmd` to the end and returns what it said; panics, naming it, only
/// if it cannot be started.
pub fn run(cmd: &mut Command) -> CommandOutput {
    let command = format!("{cmd:?}");
    let out = match cmd.output() {
        Ok(out) => out,
        Err(e) => panic!("cannot run {command}: {e}"),
    };
    CommandOutput {
        command,
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A `--json` command's answer: it succeeded and its standard output is
/// one JSON document of type `T`, with nothing before or after it.
pub fn json_answer<T: serde::de::DeserializeOwned>(out: &CommandOutput) -> T {
    assert!(out.success(), "{out}");
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("standard output is not one answer of its type ({e}): {out}"))
}

/// A `--json` command's failure: it exited with `status`, and its standard
/// output is one `{"error": …, "code": …}` naming `code`, in words.
pub fn json_failure(
    out: &CommandOutput,
    code: oae_client::control::ErrorCode,
    status: i32,
) -> oae_client::control::ErrorReport {
    assert_eq!(out.status.code(), Some(status), "the exit status: {out}");
    let report: oae_client::control::ErrorReport = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("standard output is not one error report ({e}): {out}"));
    assert_eq!(report.code, code, "{out}");
    assert!(
        !report.error.is_empty() && !report.error.contains("panicked"),
        "{out}"
    );
    report
}

/// Runs `cmd`, which must succeed; panics with everything it said if not.
pub fn run_ok(cmd: &mut Command) -> CommandOutput {
    let out = run(cmd);
    assert!(out.success(), "{out}");
    out
}

/// Polls `cond` every 50 ms until it holds; after `limit`, panics saying
/// what was awaited, with `context` (the processes' logs).
pub fn poll_until(
    limit: std::time::Duration,
    what: &str,
    mut cond: impl FnMut() -> bool,
    context: impl Fn() -> String,
) {
    let deadline = std::time::Instant::now() + limit;
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}\n{}",
            context()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
