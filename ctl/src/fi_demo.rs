//! `oaectl demo --fi-pingpong SIZE`: libfabric's own `fi_pingpong` over
//! OAE. Both dataplanes serve a host ring in host memory; fi_pingpong's
//! server runs on dataplane b's ring and its client on a's, each loading
//! the oae provider (`liboae-fi.so`, from `--fi-provider`), as host
//! programs that need no NIC; their out-of-band exchange uses loopback.
//! The figures are fi_pingpong's own.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use oae_client::demo::FiPingpongRow;
use oae_client::host::HostMode;
use oae_config::HostSettings;
use oae_config::deployment::Deployment;
use oae_os::child::Supervised;
use oae_os::private_dir::PrivateDir;

/// How long fi_pingpong's server may take to listen, and either may take
/// beyond its iterations' worth.
const STEP: Duration = Duration::from_secs(30);

pub struct FiDemo {
    pub size: u32,
    pub iterations: u32,
    /// The directory holding `liboae-fi.so` (libfabric's `FI_PROVIDER_PATH`).
    pub provider: PathBuf,
    /// The CPUs the client (a) and server (b) are pinned to.
    pub cores: Option<[usize; 2]>,
    /// fi_pingpong gives up its CPU when it finds nothing to do (the
    /// provider's FI_OAE_YIELD), for when it shares it with a dataplane.
    pub yield_cpu: bool,
    rings: [PathBuf; 2],
}

impl FiDemo {
    /// Gives both dataplanes a FITO host ring in host memory (no emulated
    /// PCIe cost: the host programs share the machine with the dataplanes).
    pub fn configure(
        deployment: &mut Deployment,
        size: u32,
        iterations: u32,
        provider: PathBuf,
        cores: Option<[usize; 2]>,
        yield_cpu: bool,
    ) -> Result<FiDemo, String> {
        if !provider.join("liboae-fi.so").exists() {
            return Err(format!(
                "--fi-provider {}: no liboae-fi.so there; build it with `cargo xtask \
                 install-c` (it installs PREFIX/lib/libfabric/liboae-fi.so)",
                provider.display()
            ));
        }
        if !(1..=1_000_000).contains(&iterations) {
            return Err(format!("--fi-iterations {iterations}: use 1 to 1000000"));
        }
        let rings = [0, 1]
            .map(|i| PathBuf::from(format!("/dev/shm/oae-demo-fi-{}-{i}", std::process::id())));
        if deployment.dataplane.len() != 2 {
            return Err("--fi-pingpong runs on a pair of dataplanes".into());
        }
        for (dataplane, ring) in deployment.dataplane.values_mut().zip(&rings) {
            let mut settings = HostSettings::new(ring.clone(), HostMode::Fito);
            settings.pcie_cost = Some("zero".into());
            settings.to_host_ring()?;
            dataplane.host = Some(settings);
        }
        Ok(FiDemo {
            size,
            iterations,
            provider,
            cores,
            yield_cpu,
            rings,
        })
    }

    /// Runs fi_pingpong's server on dataplane b and its client on a
    /// (`sockets`: their control sockets); returns the client's row.
    pub fn run(&self, sockets: &[PathBuf]) -> Result<FiPingpongRow, String> {
        let dir = PrivateDir::create("oae-fi-pingpong-")?;
        let port = (40000 + std::process::id() % 20000) as u16;
        let mut server = self.fi_pingpong(1, sockets);
        server
            .args(["-B", &port.to_string()])
            .stdout(dir.create_file("server.out")?)
            .stderr(dir.create_file("server.err")?);
        let mut server = Supervised::spawn(&mut server, "fi_pingpong server", STEP)
            .map_err(|e| e.to_string())?;
        let said = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        let started = std::time::Instant::now();
        while !oae_os::tcp::listening(port) {
            if server.exited().is_some() || started.elapsed() > STEP {
                return Err(format!(
                    "fi_pingpong's server never listened on port {port}: {}{}",
                    said("server.out"),
                    said("server.err")
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut client = self.fi_pingpong(0, sockets);
        client
            .args(["-P", &port.to_string(), "127.0.0.1"])
            .stdout(dir.create_file("client.out")?)
            .stderr(dir.create_file("client.err")?);
        let mut client = Supervised::spawn(&mut client, "fi_pingpong client", STEP)
            .map_err(|e| e.to_string())?;
        let client_status = client.wait_for(STEP + self.bound());
        let server_status = server.wait_for(STEP);
        let out = said("client.out");
        let ok = client_status.is_some_and(|s| s.success())
            && server_status.is_some_and(|s| s.success());
        let row = FiPingpongRow::parse_all(&out).into_iter().next();
        match row {
            Some(row) if ok => Ok(row),
            _ => Err(format!(
                "fi_pingpong over oae failed (client {client_status:?}, server \
                 {server_status:?}):\nclient: {out}{}\nserver: {}{}",
                said("client.err"),
                said("server.out"),
                said("server.err")
            )),
        }
    }

    /// fi_pingpong on dataplane `i`'s host ring, pinned if asked.
    fn fi_pingpong(&self, i: usize, sockets: &[PathBuf]) -> Command {
        let mut cmd = match self.cores {
            Some(cores) => {
                let mut c = Command::new("taskset");
                c.args(["-c", &cores[i].to_string(), "fi_pingpong"]);
                c
            }
            None => Command::new("fi_pingpong"),
        };
        cmd.args(["-p", "oae", "-e", "rdm"])
            .args(["-S", &self.size.to_string()])
            .args(["-I", &self.iterations.to_string()])
            .env("FI_PROVIDER_PATH", &self.provider)
            .env("FI_OAE_RING", &self.rings[i])
            .env("FI_OAE_CONTROL", &sockets[i])
            .env("FI_OAE_YIELD", if self.yield_cpu { "1" } else { "0" });
        cmd
    }

    /// Generous time for the iterations: a millisecond each.
    fn bound(&self) -> Duration {
        Duration::from_millis(u64::from(self.iterations))
    }
}

/// The provider directory `cargo xtask install-c` makes beside the
/// workspace's binaries, if `oaectl` runs from there.
pub fn default_provider() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let target = exe
        .parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("."));
    target.join("oae-c/lib/libfabric")
}
