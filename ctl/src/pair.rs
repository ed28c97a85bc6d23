//! `oaectl pair up|down`: a pair to drive by hand. Two namespaces joined
//! by a veth pair, a dataplane in each from a deployment file, left
//! running with their sockets where `oaectl --name` finds them, and
//! removed again by `pair down`, which needs only the pair's name.
//!
//! What `pair up` made is kept in `/run/oae/pairs/<pair>/` (the
//! deployment as run, each dataplane's log and state, and `pair.json`, the
//! record `pair down` reads).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use oae_client::control::{Client, ErrorCode};
use oae_client::pair::{PairDataplane, PairDown, PairUp};
use oae_common::mac::parse_mac;
use oae_config::CONTROL_DIR;
use oae_os::child::{self, Ended};
use oae_os::private_dir::PrivateDir;
use oae_pmd::netns::{self, VethPair};

use crate::demo;
use crate::failure::Failure;
use crate::out;

/// How long `pair up` waits for the link to come up.
const UP_WITHIN: Duration = Duration::from_secs(30);

#[derive(clap::Subcommand)]
pub enum PairCmd {
    /// Makes namespaces oae-<PAIR>-a and oae-<PAIR>-b, a veth pair between
    /// them and a dataplane in each, waits for their link to come up and
    /// leaves them running: drive them with `oaectl --name <PAIR>-<dataplane>`
    /// (e.g. `oaectl --name pair-a status`).
    Up {
        /// The pair's name: 1 to 8 lowercase letters or digits.
        #[arg(default_value = "pair")]
        pair: String,
        /// Deployment file with two dataplanes and `[topology] kind =
        /// "veth-pair"`; the embedded configs/veth-pair.toml by default.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Keep the file's link rounds and idle policy even when the
        /// polling threads share this machine's CPUs (by default they are
        /// raised so a descheduled peer does not look dead).
        #[arg(long)]
        as_configured: bool,
        /// The oaed to run; by default the one beside this oaectl.
        #[arg(long)]
        oaed: Option<PathBuf>,
    },
    /// Stops the pair's dataplanes (by their sockets, then by their PIDs)
    /// and removes its namespaces and files. A pair that is not up is
    /// left as it is, saying so.
    Down {
        #[arg(default_value = "pair")]
        pair: String,
    },
}

pub fn run(cmd: &PairCmd, json: bool) -> Result<(), Failure> {
    match cmd {
        PairCmd::Up {
            pair,
            config,
            as_configured,
            oaed,
        } => {
            let up = up(pair, config.as_deref(), *as_configured, oaed.as_deref())?;
            if json {
                return Ok(out::json(&up)?);
            }
            print_up(&up);
        }
        PairCmd::Down { pair } => {
            let down = down(pair)?;
            if json {
                return Ok(out::json(&down)?);
            }
            print_down(&down);
        }
    }
    Ok(())
}

fn checked_name(pair: &str) -> Result<&str, Failure> {
    let ok = (1..=8).contains(&pair.len())
        && pair
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if ok {
        Ok(pair)
    } else {
        Err(Failure::usage(format!(
            "pair name '{pair}': use 1 to 8 lowercase letters or digits, e.g. lab1"
        )))
    }
}

fn pair_dir(pair: &str) -> PathBuf {
    Path::new(CONTROL_DIR).join("pairs").join(pair)
}

fn namespaces(pair: &str) -> [String; 2] {
    [format!("oae-{pair}-a"), format!("oae-{pair}-b")]
}

/// The pair's /24: 10.254.N, N from its name.
fn subnet(pair: &str) -> u8 {
    let h = pair
        .bytes()
        .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    (h % 250) as u8 + 1
}

fn up(
    pair: &str,
    config: Option<&Path>,
    as_configured: bool,
    oaed: Option<&Path>,
) -> Result<PairUp, Failure> {
    let pair = checked_name(pair)?;
    let oaed = demo::oaed_path(oaed)?;
    let mut deployment = demo::load_deployment(config)?;
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let fitted = if as_configured {
        None
    } else {
        deployment.fit_to_cpus(cpus)
    };
    let macs = [0, 1].map(|i| parse_mac(&deployment.topology.macs[i]));
    let [Some(mac_a), Some(mac_b)] = macs else {
        return Err(Failure::usage("topology.macs: two MAC addresses"));
    };

    std::fs::create_dir_all(pair_dir(pair).parent().expect("under /run/oae"))
        .map_err(|e| format!("cannot create {CONTROL_DIR}/pairs (run as root): {e}"))?;
    let dir = PrivateDir::create_at(&pair_dir(pair)).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            Failure::new(
                ErrorCode::Conflict,
                format!("pair {pair} is up already: `oaectl pair down {pair}` removes it"),
            )
        } else {
            Failure::from(format!(
                "cannot create {} (run as root): {e}",
                pair_dir(pair).display()
            ))
        }
    })?;
    if let Some(f) = &fitted {
        outln!("{f}");
    }
    let text = deployment.to_toml().map_err(|e| e.to_string())?;
    let config_file = dir.write_file("deployment.toml", &text)?;

    let ns = namespaces(pair);
    outln!("making {} and {} joined by a veth pair ...", ns[0], ns[1]);
    let veth =
        VethPair::create_named(ns.clone(), Some([mac_a, mac_b]), 1, subnet(pair)).map_err(|e| {
            match e.kind() {
                std::io::ErrorKind::AlreadyExists => Failure::new(
                    ErrorCode::Conflict,
                    format!("{e}: `oaectl pair down {pair}` removes a pair's leftovers"),
                ),
                _ => Failure::from(format!("cannot create the namespaces (run as root): {e}")),
            }
        })?;
    // From here on, a failure takes down what was made.
    let mut undo = Undo {
        namespaces: ns.to_vec(),
        pids: Vec::new(),
    };
    let mut dataplanes = Vec::new();
    let mut children = Vec::new();
    for (i, name) in deployment.dataplane.keys().enumerate() {
        let socket = Path::new(CONTROL_DIR).join(format!("{pair}-{name}.sock"));
        let log = dir.create_file(&format!("{name}.log"))?;
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &veth.ns[i]])
            .arg(&oaed)
            .arg("--config")
            .arg(&config_file)
            .args(["--name", name])
            .arg("--socket")
            .arg(&socket)
            .arg("--state-dir")
            .arg(dir.join(&format!("{name}.state")))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        let child = child::start_detached(&mut cmd, name)
            .map_err(|e| format!("{e} ({})", oaed.display()))?;
        undo.pids.push(child.id());
        dataplanes.push(PairDataplane {
            name: name.clone(),
            namespace: veth.ns[i].clone(),
            iface: veth.ifname[i].clone(),
            pid: child.id(),
            socket: socket.display().to_string(),
            log: dir.join(&format!("{name}.log")).display().to_string(),
        });
        children.push(child);
    }
    await_links(&dataplanes, &mut children)?;
    let up = PairUp {
        pair: pair.to_string(),
        dir: dir.path().display().to_string(),
        namespaces: ns,
        dataplanes,
        fitted,
    };
    let record = serde_json::to_string_pretty(&up).map_err(|e| e.to_string())?;
    dir.write_file("pair.json", &record)?;
    undo.disarm();
    dir.keep();
    Ok(up)
}

/// What `pair up` made so far, taken down if it fails.
struct Undo {
    namespaces: Vec<String>,
    pids: Vec<u32>,
}

impl Undo {
    fn disarm(&mut self) {
        self.namespaces.clear();
        self.pids.clear();
    }
}

impl Drop for Undo {
    fn drop(&mut self) {
        for &pid in &self.pids {
            child::end_detached(pid, "oaed", false, Duration::from_secs(6));
        }
        for ns in &self.namespaces {
            let _ = netns::delete_namespace(ns);
        }
    }
}

/// Waits until every dataplane answers with all its links up; a dataplane
/// that exits first fails it with its log.
fn await_links(
    dataplanes: &[PairDataplane],
    children: &mut [std::process::Child],
) -> Result<(), Failure> {
    let started = Instant::now();
    loop {
        for (d, c) in dataplanes.iter().zip(children.iter_mut()) {
            if let Ok(Some(status)) = c.try_wait() {
                return Err(Failure::from(format!(
                    "dataplane {} exited ({status}):\n{}",
                    d.name,
                    log_tail(&d.log)
                )));
            }
        }
        let up = dataplanes.iter().all(|d| {
            Client::new(Path::new(&d.socket), Duration::from_secs(1))
                .status()
                .is_ok_and(|s| s.all_up())
        });
        if up {
            return Ok(());
        }
        if started.elapsed() > UP_WITHIN {
            let logs: String = dataplanes
                .iter()
                .map(|d| format!("--- {}:\n{}\n", d.name, log_tail(&d.log)))
                .collect();
            return Err(Failure::new(
                ErrorCode::Timeout,
                format!("the link did not come up within {UP_WITHIN:?}\n{logs}"),
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn log_tail(path: &str) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(8)..].join("\n")
}

fn down(pair: &str) -> Result<PairDown, Failure> {
    let pair = checked_name(pair)?;
    let dir = pair_dir(pair);
    let record: Option<PairUp> = std::fs::read_to_string(dir.join("pair.json"))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok());
    let mut ended = Vec::new();
    for d in record.iter().flat_map(|r| &r.dataplanes) {
        let asked = Client::new(Path::new(&d.socket), Duration::from_secs(2))
            .shutdown()
            .is_ok();
        let how = match child::end_detached(d.pid, "oaed", asked, Duration::from_secs(6)) {
            Ended::Exited => "stopped",
            Ended::Killed => "killed",
            Ended::Gone => "gone",
        };
        ended.push((d.name.clone(), how.to_string()));
        // oaed's lock beside its socket, free once it is gone.
        let _ = std::fs::remove_file(format!("{}.lock", d.socket));
    }
    let mut removed = Vec::new();
    for ns in namespaces(pair) {
        if netns::namespace_exists(&ns) {
            netns::delete_namespace(&ns).map_err(|e| format!("cannot delete {ns}: {e}"))?;
            removed.push(ns);
        }
    }
    let had_dir = dir.exists();
    if had_dir {
        std::fs::remove_dir_all(&dir)
            .map_err(|e| format!("cannot remove {}: {e}", dir.display()))?;
    }
    Ok(PairDown {
        pair: pair.to_string(),
        was_down: !had_dir && removed.is_empty(),
        dataplanes: ended,
        namespaces_removed: removed,
    })
}

fn print_up(up: &PairUp) {
    outln!("pair {} is up:", up.pair);
    for d in &up.dataplanes {
        outln!(
            "  {} in {} on {} (pid {}): oaectl --name {}-{} status",
            d.name,
            d.namespace,
            d.iface,
            d.pid,
            up.pair,
            d.name
        );
    }
    outln!("  logs and state in {}", up.dir);
    outln!("  take it down with: oaectl pair down {}", up.pair);
}

fn print_down(down: &PairDown) {
    if down.was_down {
        outln!("pair {} is not up: nothing to remove", down.pair);
        return;
    }
    for (name, how) in &down.dataplanes {
        outln!("dataplane {name}: {how}");
    }
    outln!(
        "pair {} is down; namespaces removed: {}",
        down.pair,
        if down.namespaces_removed.is_empty() {
            "none left".to_string()
        } else {
            down.namespaces_removed.join(", ")
        }
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_names_are_short_and_plain() {
        assert!(checked_name("lab1").is_ok());
        for bad in ["", "Lab", "a-b", "../x", "toolongname"] {
            assert!(checked_name(bad).is_err(), "{bad}");
        }
        assert!((1..=250).contains(&subnet("pair")));
    }
}
