//! The dataplanes a demo started, in namespaces it made: each with its
//! control socket, state directory and log in one private working
//! directory (made fresh by `mkdtemp`, files created only if absent and
//! never through a link: the demo runs as root). Dropping it asks each to
//! shut down, ends those that do not by their PIDs, and removes the
//! directory, on success, failure and Ctrl-C alike.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use oae_client::control::Client;
use oae_os::child::Supervised;
use oae_os::private_dir::PrivateDir;

pub struct Running {
    pub dataplanes: Vec<Supervised>,
    pub sockets: Vec<PathBuf>,
    /// Dropped after the dataplanes are stopped (fields drop after
    /// `Drop::drop`), which removes it.
    dir: PrivateDir,
}

impl Running {
    /// An empty set over a new private working directory `<prefix>XXXXXX`.
    pub fn new(prefix: &str) -> Result<Running, String> {
        Ok(Running {
            dataplanes: Vec::new(),
            sockets: Vec::new(),
            dir: PrivateDir::create(prefix)?,
        })
    }

    /// Writes a new file `name` in the working directory (mode 0600: it
    /// may hold link keys) and returns its path.
    pub fn write_file(&self, name: &str, text: &str) -> Result<PathBuf, String> {
        self.dir.write_file(name, text)
    }

    /// Starts `cmd` (oaed, in its namespace, with its configuration) as
    /// dataplane `name`, with its socket, state directory and log here.
    pub fn start(&mut self, mut cmd: Command, name: &str, oaed: &Path) -> Result<(), String> {
        let socket = self.dir.join(&format!("{name}.sock"));
        let log = self.dir.create_file(&format!("{name}.log"))?;
        cmd.arg("--socket")
            .arg(&socket)
            .arg("--state-dir")
            .arg(self.dir.join(&format!("{name}.state")))
            .stdout(Stdio::null())
            .stderr(log);
        // A shutdown request is answered within the drain (2 s): beyond
        // that, the dataplane is killed by its PID.
        let dataplane = Supervised::spawn(&mut cmd, name, Duration::from_secs(6))
            .map_err(|e| format!("{e} ({})", oaed.display()))?;
        self.dataplanes.push(dataplane);
        self.sockets.push(socket);
        Ok(())
    }

    /// The last lines of dataplane `name`'s log.
    pub fn log_tail(&self, name: &str) -> String {
        let text =
            std::fs::read_to_string(self.dir.join(&format!("{name}.log"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(8)..].join("\n")
    }

    /// Every dataplane's log tail, headed by its name.
    pub fn logs(&self) -> String {
        self.dataplanes
            .iter()
            .map(|d| format!("--- {}:\n{}\n", d.name(), self.log_tail(d.name())))
            .collect()
    }

    /// An error if Ctrl-C was pressed or a dataplane has exited (with its
    /// log tail).
    pub fn check(&mut self, interrupted: &AtomicBool) -> Result<(), String> {
        if interrupted.load(Ordering::Relaxed) {
            return Err("interrupted".into());
        }
        for i in 0..self.dataplanes.len() {
            if let Some(status) = self.dataplanes[i].exited() {
                let name = self.dataplanes[i].name().to_string();
                return Err(format!(
                    "dataplane {name} exited ({status}):\n{}",
                    self.log_tail(&name)
                ));
            }
        }
        Ok(())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        for socket in &self.sockets {
            let _ = Client::new(socket, Duration::from_secs(2)).shutdown();
        }
        for d in &mut self.dataplanes {
            let pid = d.id();
            if let Some((_, true)) = d.stop(true) {
                eprintln!(
                    "oaectl: dataplane {} (pid {pid:?}) did not stop; killed it",
                    d.name()
                );
            }
        }
    }
}
