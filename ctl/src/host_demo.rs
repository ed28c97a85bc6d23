//! `oaectl demo --host-ring MODE`: the demo's pair with a host program in
//! front of dataplane a, as on an IPU: dataplane a serves a host ring (FITO
//! or bilateral, the default emulated PCIe costs), and `oaectl host-verbs`,
//! a process of its own, keeps a window of FETCH-ADDs in flight through
//! the ring, dataplane a, the link and dataplane b. The ledger: the words
//! at b moved by exactly the verbs the host program saw succeed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use oae_client::control::Client;
use oae_client::host::HostMode;
use oae_client::host::load::{CheckedLoad, LoadReport};
use oae_config::HostSettings;
use oae_config::deployment::Deployment;
use oae_os::child::Supervised;
use oae_os::private_dir::PrivateDir;

/// The target the host program adds to: region 1 of dataplane b.
const TARGET_REGION: u16 = 1;
const TARGET_KEY: u32 = 0x0ae1;
const STEP: Duration = Duration::from_secs(5);
/// Beyond its seconds, how long the host program may take to drain.
const DRAIN: Duration = Duration::from_secs(30);

/// What the host program is to do.
pub struct HostDemo {
    pub mode: HostMode,
    pub window: usize,
    /// The CPU the host program is pinned to.
    pub core: Option<usize>,
    pub ring: PathBuf,
}

impl HostDemo {
    /// Gives dataplane a (the first) a host ring of `mode` on its queue 0.
    pub fn configure(
        deployment: &mut Deployment,
        mode: HostMode,
        window: usize,
        core: Option<usize>,
    ) -> Result<HostDemo, String> {
        let ring = PathBuf::from(format!("/dev/shm/oae-demo-host-{}", std::process::id()));
        let a = deployment
            .dataplane
            .values_mut()
            .next()
            .ok_or("the deployment has no dataplane")?;
        let settings = HostSettings::new(ring.clone(), mode);
        settings.to_host_ring()?;
        if window == 0 || window as u64 > settings.capacity {
            return Err(format!(
                "--host-window {window}: use 1 to {}",
                settings.capacity
            ));
        }
        a.host = Some(settings);
        Ok(HostDemo {
            mode,
            window,
            core,
            ring,
        })
    }

    /// Runs the host program for `seconds` against the running pair
    /// (`sockets`: a's and b's control sockets).
    pub fn run(&self, sockets: &[PathBuf], seconds: f64) -> Result<CheckedLoad, String> {
        let target = &sockets[1];
        let before = words(target, self.window)?;
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut cmd = Command::new(exe);
        cmd.arg("host-verbs")
            .arg(&self.ring)
            .args(["--region", &TARGET_REGION.to_string()])
            .args(["--key", &format!("{TARGET_KEY:#x}")])
            .args(["--window", &self.window.to_string()])
            .args(["--count", &u64::MAX.to_string()])
            .args(["--seconds", &seconds.to_string()])
            .args(["--timeout", &(seconds as u64 + DRAIN.as_secs()).to_string()])
            .arg("--json");
        if let Some(core) = self.core {
            cmd.args(["--core", &core.to_string()]);
        }
        let out = run_bounded(cmd, Duration::from_secs_f64(seconds) + 2 * DRAIN)?;
        let load: LoadReport = serde_json::from_str(out.trim())
            .map_err(|e| format!("oaectl host-verbs said {out:?}: {e}"))?;
        let after = words(target, self.window)?;
        let added = after.wrapping_sub(before);
        Ok(CheckedLoad {
            exact: added == load.ok && load.unexpected == 0 && load.unfinished == 0,
            added,
            load,
        })
    }
}

/// The sum of the first `n` words of the target region.
fn words(socket: &Path, n: usize) -> Result<u64, String> {
    let dump = Client::new(socket, STEP).region_dump(TARGET_REGION, 0, None)?;
    let hex = &dump.data;
    let mut sum = 0u64;
    for w in 0..n {
        let at = 16 * w;
        let digits = hex
            .get(at..at + 16)
            .ok_or("the region is shorter than the window")?;
        let word: [u8; 8] = oae_common::hex::decode(digits)
            .map_err(|e| format!("the region dump: {e}"))?
            .try_into()
            .map_err(|_| "the region dump: a word is 8 bytes")?;
        sum = sum.wrapping_add(u64::from_le_bytes(word));
    }
    Ok(sum)
}

/// Runs `cmd` (the one child-process supervisor ends it by its pid if it
/// overstays `limit`) and returns what it printed; fails with what it said
/// if it failed.
fn run_bounded(mut cmd: Command, limit: Duration) -> Result<String, String> {
    let dir = PrivateDir::create("oae-host-verbs-")?;
    let (out_path, err_path) = (dir.join("out"), dir.join("err"));
    cmd.stdout(dir.create_file("out")?)
        .stderr(dir.create_file("err")?);
    let mut child = Supervised::spawn(&mut cmd, "oaectl host-verbs", Duration::from_secs(5))
        .map_err(|e| e.to_string())?;
    let status = child.wait_for(limit);
    drop(child);
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let (stdout, stderr) = (read(&out_path), read(&err_path));
    match status {
        Some(s) if s.success() => Ok(stdout),
        Some(s) => Err(format!("oaectl host-verbs failed ({s}): {stdout}{stderr}")),
        None => Err(format!(
            "oaectl host-verbs overstayed {limit:?} and was ended: {stderr}"
        )),
    }
}
