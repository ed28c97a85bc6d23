//! Child processes ended by their own PIDs: asked to stop, given a bounded
//! time, then killed and reaped, also when the owner unwinds.

use std::io;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::cpu::{self, CpuTime};

/// How often a bounded wait looks at the child.
const POLL: Duration = Duration::from_millis(20);

/// A running child that dropping ends: SIGTERM, then SIGKILL after its
/// grace period, always reaped.
#[derive(Debug)]
pub struct Supervised {
    child: Option<Child>,
    name: String,
    grace: Duration,
    cpu: Option<CpuTime>,
}

impl Supervised {
    /// Starts `cmd`; `name` is what messages call it.
    pub fn spawn(cmd: &mut Command, name: &str, grace: Duration) -> io::Result<Supervised> {
        let child = cmd
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("cannot start {name}: {e}")))?;
        Ok(Supervised {
            child: Some(child),
            name: name.to_string(),
            grace,
            cpu: None,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn id(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Its standard input, if it was spawned with one piped (once).
    pub fn take_stdin(&mut self) -> Option<std::process::ChildStdin> {
        self.child.as_mut()?.stdin.take()
    }

    /// Its exit status if it has exited (then it is reaped).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        let before = cpu::reaped_children();
        let status = self.child.as_mut()?.try_wait().ok().flatten()?;
        self.note_cpu(&before);
        Some(status)
    }

    /// The CPU time it used, once reaped. Read as what this process's
    /// reaped children used across the reaping, so it is exact when no
    /// other thread reaps a child at the same moment.
    pub fn cpu(&self) -> Option<CpuTime> {
        self.cpu
    }

    fn note_cpu(&mut self, before: &CpuTime) {
        if self.cpu.is_none() {
            self.cpu = Some(cpu::reaped_children().since(before));
        }
    }

    /// Waits up to `limit` for it to exit by itself.
    pub fn wait_for(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.exited() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(POLL);
        }
    }

    /// SIGKILL, no grace, then reaps it.
    pub fn kill9(&mut self) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        let _ = child.kill();
        let before = cpu::reaped_children();
        let status = child.wait().ok()?;
        self.note_cpu(&before);
        Some(status)
    }

    /// Ends it: SIGTERM (unless `asked` says it was asked another way, such
    /// as a shutdown request), up to the grace period to exit, then
    /// SIGKILL. Returns its status and whether it had to be killed.
    pub fn stop(&mut self, asked: bool) -> Option<(ExitStatus, bool)> {
        let pid = self.id()?;
        if !asked {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
        }
        if let Some(status) = self.wait_for(self.grace) {
            self.child = None;
            return Some((status, false));
        }
        self.kill9().map(|status| (status, true))
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        let _ = self.stop(false);
    }
}

/// Starts `cmd` to outlive this process (the dataplanes `oaectl pair up`
/// leaves running), in a process group of its own so that a Ctrl-C at
/// this terminal does not reach it. Dropping the `Child` leaves it
/// running; [`end_detached`] ends it later by its PID.
pub fn start_detached(cmd: &mut Command, name: &str) -> io::Result<Child> {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0)
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot start {name}: {e}")))
}

/// How [`end_detached`] found a process.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// It was gone already, or its PID is another program's now.
    Gone,
    /// It exited within the grace period.
    Exited,
    /// It had to be killed.
    Killed,
}

/// Ends a process [`start_detached`] left running, by `pid`, if that is
/// still program `comm` (a PID can be reused): SIGTERM (unless `asked`
/// says it was asked another way), up to `grace`, then SIGKILL. It is no
/// longer this process's child, so it is watched through /proc.
pub fn end_detached(pid: u32, comm: &str, asked: bool, grace: Duration) -> Ended {
    if !is_running(pid, comm) {
        return Ended::Gone;
    }
    let target = Pid::from_raw(pid as i32);
    if !asked {
        let _ = kill(target, Signal::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if !is_running(pid, comm) {
            return Ended::Exited;
        }
        std::thread::sleep(POLL);
    }
    let _ = kill(target, Signal::SIGKILL);
    // SIGKILL cannot be refused; its end is bounded by the kernel.
    for _ in 0..250 {
        if !is_running(pid, comm) {
            break;
        }
        std::thread::sleep(POLL);
    }
    Ended::Killed
}

/// Whether `pid` is program `comm` and not a zombie.
pub fn is_running(pid: u32, comm: &str) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // "pid (comm) state ...": comm may hold spaces and parentheses.
    let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
        return false;
    };
    let name = &stat[open + 1..close];
    let state = stat[close + 1..].split_whitespace().next();
    name == comm && !matches!(state, Some("Z" | "X"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_ended_by_its_pid_and_reaped() {
        let grace = Duration::from_secs(5);
        let mut quick = Supervised::spawn(Command::new("true").arg("x"), "true", grace).unwrap();
        assert!(quick.wait_for(Duration::from_secs(10)).unwrap().success());
        assert!(quick.cpu().is_some(), "a reaped child's CPU time is known");
        // `sleep` dies of SIGTERM at once.
        let mut sleeper =
            Supervised::spawn(Command::new("sleep").arg("60"), "sleep", grace).unwrap();
        let (status, killed) = sleeper.stop(false).unwrap();
        assert!(!status.success() && !killed, "{status:?}");
        // One that ignores SIGTERM is killed after its grace period.
        let mut stubborn = Supervised::spawn(
            Command::new("sh").args(["-c", "trap '' TERM; sleep 60"]),
            "stubborn",
            Duration::from_millis(200),
        )
        .unwrap();
        assert!(stubborn.wait_for(Duration::from_millis(100)).is_none());
        let (_, killed) = stubborn.stop(false).unwrap();
        assert!(killed);
        let err =
            Supervised::spawn(&mut Command::new("/nonexistent/oae"), "nothing", grace).unwrap_err();
        assert!(err.to_string().contains("cannot start nothing"), "{err}");
    }

    #[test]
    fn a_detached_process_is_ended_by_its_pid_only_while_it_is_that_program() {
        let mut child = start_detached(Command::new("sleep").arg("60"), "sleep").unwrap();
        let pid = child.id();
        // Its own process group: a Ctrl-C here would not reach it.
        let group = nix::unistd::getpgid(Some(Pid::from_raw(pid as i32))).unwrap();
        assert_eq!(group.as_raw(), pid as i32);
        assert!(is_running(pid, "sleep"));
        assert_eq!(
            end_detached(pid, "not-sleep", false, Duration::from_secs(5)),
            Ended::Gone,
            "another program's PID is left alone"
        );
        assert!(is_running(pid, "sleep"));
        // Reaped here only because this test is its parent; as a zombie it
        // counts as ended already.
        let waiter = std::thread::spawn(move || child.wait());
        assert_eq!(
            end_detached(pid, "sleep", false, Duration::from_secs(5)),
            Ended::Exited
        );
        assert!(!waiter.join().unwrap().unwrap().success());
        assert_eq!(
            end_detached(pid, "sleep", false, Duration::from_secs(5)),
            Ended::Gone
        );
    }
}
