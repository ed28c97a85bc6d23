//! Children of a trial: pinned in a namespace, bounded in time, ended by
//! their own PIDs, and the tail of a log for an error.

use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use oae_os::child::Supervised;
use oae_pmd::netns::VethPair;

/// `program` in namespace `side` of `pair`, pinned to `core` with
/// `taskset`; `ip netns exec` and `taskset` both exec in place, so the
/// child's PID is the program's and stopping it stops the program.
pub(super) fn pinned(pair: &VethPair, side: usize, core: usize, program: &str) -> Command {
    let mut cmd = pair.command(side, "taskset");
    cmd.args(["-c", &core.to_string(), program]);
    cmd
}

/// A child process with its output in a log file, stopped by its own PID:
/// SIGTERM, then SIGKILL if it does not exit within 15 s (so the child can
/// remove what it created: oaectl its namespaces and dataplanes, testpmd
/// its EAL files).
pub(super) struct Bounded {
    process: Supervised,
    what: &'static str,
    log: std::path::PathBuf,
    /// Where [`Bounded::send`] writes, for a child driven by commands.
    input: Option<std::process::ChildStdin>,
}

impl Bounded {
    pub(super) fn spawn(cmd: Command, log: &Path, what: &'static str) -> Result<Bounded, String> {
        Bounded::start(cmd, log, what, Stdio::null())
    }

    /// [`Bounded::spawn`] with its standard input kept for
    /// [`Bounded::send`] (an interactive program, driven by commands).
    pub(super) fn spawn_driven(
        cmd: Command,
        log: &Path,
        what: &'static str,
    ) -> Result<Bounded, String> {
        let mut b = Bounded::start(cmd, log, what, Stdio::piped())?;
        b.input = b.process.take_stdin();
        Ok(b)
    }

    fn start(
        mut cmd: Command,
        log: &Path,
        what: &'static str,
        stdin: Stdio,
    ) -> Result<Bounded, String> {
        let out = File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        cmd.stdin(stdin).stdout(out).stderr(err);
        let process = Supervised::spawn(&mut cmd, what, Duration::from_secs(15))
            .map_err(|e| format!("{e} (is it installed? cargo xtask setup)"))?;
        Ok(Bounded {
            process,
            what,
            log: log.to_path_buf(),
            input: None,
        })
    }

    /// Writes `line` to the child's standard input.
    pub(super) fn send(&mut self, line: &str) -> Result<(), String> {
        use std::io::Write;
        let input = self
            .input
            .as_mut()
            .ok_or_else(|| format!("{} takes no commands", self.what))?;
        writeln!(input, "{line}")
            .and_then(|()| input.flush())
            .map_err(|e| format!("{}: cannot send '{line}': {e}", self.what))
    }

    /// Its log so far.
    pub(super) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the log holds `needle`, the child exits, or `limit`.
    pub(super) fn wait_for_line(&mut self, needle: &str, limit: Duration) -> Result<(), String> {
        self.wait_until(|log| log.contains(needle), limit)
    }

    /// Waits until `ready` holds of the log, the child exits, or `limit`.
    pub(super) fn wait_until(
        &mut self,
        ready: impl Fn(&str) -> bool,
        limit: Duration,
    ) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        loop {
            if std::fs::read_to_string(&self.log).is_ok_and(|t| ready(&t)) {
                return Ok(());
            }
            if let Some(status) = self.process.exited() {
                return Err(format!(
                    "{} exited ({status}) before it was ready:\n{}",
                    self.what,
                    tail(&self.log)
                ));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{} was not ready after {limit:?}:\n{}",
                    self.what,
                    tail(&self.log)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for the child to exit by itself, up to `limit`.
    pub(super) fn wait(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        self.process.wait_for(limit)
    }

    /// Its process id while it runs.
    pub(super) fn pid(&self) -> Option<u32> {
        self.process.id()
    }

    /// The CPU time the child has used so far, while it runs.
    pub(super) fn cpu(&self) -> Option<oae_os::cpu::CpuTime> {
        self.process.id().and_then(oae_os::cpu::of_process)
    }

    pub(super) fn stop(&mut self) {
        if let Some((_, true)) = self.process.stop(false) {
            eprintln!("oae-perf: {} ignored SIGTERM; killed it", self.what);
        }
    }
}

/// Runs `cmd` to completion within `limit`, its output in `log`.
pub(super) fn run_bounded(
    cmd: Command,
    log: &Path,
    limit: Duration,
    what: &'static str,
) -> Result<std::process::ExitStatus, String> {
    run_measured(cmd, log, limit, what).map(|(status, _)| status)
}

/// [`run_bounded`], also returning the CPU time the child used.
pub(super) fn run_measured(
    cmd: Command,
    log: &Path,
    limit: Duration,
    what: &'static str,
) -> Result<(std::process::ExitStatus, Option<oae_os::cpu::CpuTime>), String> {
    let mut child = Bounded::spawn(cmd, log, what)?;
    match child.wait(limit) {
        Some(status) => Ok((status, child.process.cpu())),
        None => {
            child.stop();
            Err(format!(
                "{what} did not finish within {limit:?}; stopped it:\n{}",
                tail(log)
            ))
        }
    }
}

/// The last lines of a log, for error messages.
pub(super) fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(12)..].join("\n")
}
