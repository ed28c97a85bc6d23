//! Two real dataplanes (`oaed` processes) in two fresh network namespaces
//! joined by a veth pair, for end-to-end tests. Dropping a [`Dataplanes`]
//! stops both processes by their PIDs and deletes the namespaces (which
//! detaches their XDP programs).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{MutexGuard, PoisonError};
use std::time::Duration;

use oae_client::control::{
    Client, ControlError, VerbAnswer, VerbSpec, WorkloadReport, WorkloadSpec, from_hex,
};
use oae_client::stats::{DataplaneStats, HostPortCounters, LinkCounters};
use oae_client::status::{DataplaneStatus, LinkStatus, OaeLinkStatus};
use oae_common::mac::format_mac;
use oae_config::Config;
use oae_config::deployment::Deployment;
use oae_os::child::Supervised;
use oae_pmd::netns::VethPair;

pub use crate::oaed::{
    LOCAL_REGION, SHARED_CPU_MIN_ROUND_NS, SHARED_CPU_UNREACHABLE_ROUNDS, TARGET_KEY,
    TARGET_REGION, binary, polling_turn, shut_down, start_oaed,
};
use crate::oaed::{ONE_SET_AT_A_TIME, regions_toml};

/// MACs of the two veth ends, as the generated configuration names them.
pub const MACS: [[u8; 6]; 2] = [[2, 0x0a, 0xe0, 0, 0, 1], [2, 0x0a, 0xe0, 0, 0, 2]];

/// Settings that differ between tests.
#[derive(Clone, Debug)]
pub struct Options {
    pub slots: u16,
    /// Receive credits offered; `None`: one per slot.
    pub credits: Option<u16>,
    pub unreachable_after_rounds: u32,
    /// Pin the dataplanes to cores 0 and 1.
    pub pin: bool,
    /// Shortest round; `None` keeps the link's default (20 µs).
    pub min_round_ns: Option<u64>,
    pub driver: TestDriver,
    /// Run the RC model instead of OAE on the link.
    pub rc_model: bool,
    /// Give dataplane a a host ring with these PCIe costs (`zero`, or
    /// e.g. `read=750`): see [`host_ring_path`].
    pub host_ring_cost: Option<&'static str>,
    /// Further lines of dataplane a's `[host]` table (`mode = ...`).
    pub host_ring_settings: &'static str,
    /// With `host_ring_cost`: dataplane b has a host ring too, at
    /// [`host_ring_path_of`]`(pair, 1)`.
    pub host_rings_on_both: bool,
    /// Queues per veth end, one polling core and one link each, steered by
    /// queue (AF_XDP only).
    pub queues: u32,
    /// Every queue's `[queue.poll]` table, e.g. `idle = "sleep"`.
    pub poll: Option<&'static str>,
    /// Give dataplane a a metrics endpoint on its namespace's loopback,
    /// on a port it picks (see [`Dataplanes::metrics_addr`]).
    pub metrics: bool,
    /// Authenticate both ends' links with this key (64 hex digits).
    pub auth_key: Option<&'static str>,
    /// With `auth_key`: only dataplane `i` (0: a, 1: b) has it, a
    /// misconfiguration whose link never comes up (start the pair with
    /// [`Dataplanes::start_alone`] and [`Dataplanes::launch`]: `start`
    /// waits for the link).
    pub auth_only_on: Option<usize>,
    /// Join each queue's links into a fabric (`fabric = true`).
    pub fabric: bool,
    /// `ordered = false` on every link: losses found by patience.
    pub unordered: bool,
    /// Keys agreed by identity (`[queue.auth] identity = true`): each
    /// dataplane's identity file is made in its state directory before the
    /// configuration is written, and each trusts the other's identity.
    pub identities: bool,
    /// With `identities`: dataplane `i` (0: a, 1: b) is not in its peer's
    /// trust list (start with [`Dataplanes::start_alone`]).
    pub distrust: Option<usize>,
    /// With `identities`: `rekey_after` of every link.
    pub rekey_after: Option<u64>,
    /// Dataplane `i` (0: a, 1: b) lists no peer: it finds its neighbour.
    pub discover_on: [bool; 2],
    /// The body of `[queue.discovery]` where a dataplane finds its
    /// neighbour (its defaults if none).
    pub discovery: Option<&'static str>,
    /// No `node_id`: each dataplane makes its own (docs/PROTOCOL.md,
    /// "Addresses").
    pub made_ids: bool,
    /// With `made_ids`: the address each dataplane last held, written in
    /// its state directory before it first starts.
    pub stored_address: Option<u16>,
}

/// How the two dataplanes reach each other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TestDriver {
    /// AF_XDP sockets on the veth pair, behind the oae XDP program.
    #[default]
    AfXdp,
    /// DPDK net_memif ports joined by a memif socket (a is the server).
    DpdkMemif,
    /// DPDK net_af_xdp ports on the veth pair.
    DpdkAfXdp,
}

/// Hugepages (2 MiB) net_af_xdp dataplanes need free: two EALs with
/// --in-memory and a 4096-mbuf pool each.
pub const DPDK_HUGEPAGES: u64 = 256;

impl Default for Options {
    fn default() -> Self {
        Options {
            slots: 32,
            credits: None,
            unreachable_after_rounds: SHARED_CPU_UNREACHABLE_ROUNDS,
            pin: false,
            min_round_ns: Some(SHARED_CPU_MIN_ROUND_NS),
            driver: TestDriver::AfXdp,
            rc_model: false,
            host_ring_cost: None,
            host_ring_settings: "",
            host_rings_on_both: false,
            queues: 1,
            poll: None,
            metrics: false,
            auth_key: None,
            fabric: false,
            unordered: false,
            auth_only_on: None,
            identities: false,
            distrust: None,
            rekey_after: None,
            discover_on: [false; 2],
            discovery: None,
            made_ids: false,
            stored_address: None,
        }
    }
}

pub struct Dataplanes {
    pub pair: VethPair,
    pub dir: PathBuf,
    pub config: PathBuf,
    pub sockets: [PathBuf; 2],
    children: [Option<Supervised>; 2],
    names: [&'static str; 2],
    // Last, so it is released after the processes and namespaces are gone.
    _turn: MutexGuard<'static, ()>,
}

impl Dataplanes {
    /// Makes the namespaces, writes the configuration, starts both
    /// dataplanes and waits until their link is up.
    pub fn start(tag: &str, options: &Options) -> Dataplanes {
        let mut d = Dataplanes::prepare(tag, options);
        d.launch(0);
        d.launch(1);
        d.wait_up(Duration::from_secs(20));
        d
    }

    /// Only dataplane a, its link waiting for a peer: for a tester that
    /// plays b's part on the wire, from b's namespace with b's MAC.
    pub fn start_alone(tag: &str, options: &Options) -> Dataplanes {
        let mut d = Dataplanes::prepare(tag, options);
        d.launch(0);
        d
    }

    /// The namespaces and the configuration, no dataplane started yet:
    /// [`Dataplanes::launch`] or [`Dataplanes::launch_with`] each.
    pub fn unstarted(tag: &str, options: &Options) -> Dataplanes {
        Dataplanes::prepare(tag, options)
    }

    /// Dataplane `i`'s process, while it runs.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.children[i].as_ref().and_then(Supervised::id)
    }

    /// The namespaces and the configuration, nothing started.
    fn prepare(tag: &str, options: &Options) -> Dataplanes {
        // A test that failed while holding the turn poisons the lock; the
        // turn is still free.
        let turn = ONE_SET_AT_A_TIME
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if options.driver == TestDriver::DpdkAfXdp {
            oae_pmd::dpdk::reserve_hugepages(DPDK_HUGEPAGES).expect("hugepages for net_af_xdp");
        }
        let pair = VethPair::create_with_queues(tag, Some(MACS), options.queues)
            .expect("create veth pair");
        let dir = test_dir(&pair);
        std::fs::create_dir_all(&dir).expect("test directory");
        let config = dir.join("deployment.toml");
        std::fs::write(&config, deployment(&pair, options)).expect("write config");
        if let Some(address) = options.stored_address {
            for name in ["a", "b"] {
                let state = state_dir(&dir, name);
                std::fs::create_dir_all(&state).expect("state directory");
                std::fs::write(state.join("address"), format!("{address}\n")).expect("address");
            }
        }
        let sockets = [dir.join("a.sock"), dir.join("b.sock")];
        Dataplanes {
            pair,
            dir,
            config,
            sockets,
            children: [None, None],
            names: ["a", "b"],
            _turn: turn,
        }
    }

    /// Starts dataplane `i` (again).
    pub fn launch(&mut self, i: usize) {
        let oaed = binary("oaed");
        self.launch_with(i, &[], &oaed, None);
    }

    /// Starts dataplane `i` as `oaed` behind `wrapper` (a program and its
    /// arguments that exec what follows, such as `setpriv --reuid=…`),
    /// with its socket and state directory in `dir` if given.
    pub fn launch_with(&mut self, i: usize, wrapper: &[&str], oaed: &Path, dir: Option<&Path>) {
        assert!(self.children[i].is_none(), "dataplane {i} is running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path(i))
            .expect("log file");
        if let Some(dir) = dir {
            self.sockets[i] = dir.join(format!("{}.sock", self.names[i]));
        }
        let state = state_dir(dir.unwrap_or(&self.dir), self.names[i]);
        let mut cmd = match wrapper.split_first() {
            None => self.pair.command(i, oaed.to_str().expect("utf-8 path")),
            Some((program, args)) => {
                let mut cmd = self.pair.command(i, program);
                cmd.args(args).arg(oaed);
                cmd
            }
        };
        cmd.arg("--config")
            .arg(&self.config)
            .args(["--name", self.names[i]])
            .arg("--socket")
            .arg(&self.sockets[i])
            .arg("--state-dir")
            .arg(state)
            .stdout(Stdio::null())
            .stderr(log);
        self.children[i] = Some(start_oaed(cmd, &self.sockets[i], &self.log_path(i)));
    }

    /// Where dataplane `i` serves its metrics, from the line it logs
    /// before it answers on its control socket.
    pub fn metrics_addr(&self, i: usize) -> String {
        let log = self.log(i);
        log.lines()
            .rev()
            .find_map(|l| l.split_once("metrics at http://"))
            .and_then(|(_, rest)| rest.split_once("/metrics"))
            .map(|(addr, _)| addr)
            .unwrap_or_else(|| panic!("dataplane {i} logged no metrics address:\n{log}"))
            .to_string()
    }

    pub fn log_path(&self, i: usize) -> PathBuf {
        self.dir.join(format!("{}.log", self.names[i]))
    }

    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.log_path(i)).unwrap_or_default()
    }

    /// Kills dataplane `i` with SIGKILL: no draining, no detaching.
    pub fn kill9(&mut self, i: usize) {
        // `ip netns exec` execs oaed in place, so the child PID is oaed's.
        let mut oaed = self.children[i].take().expect("running");
        oaed.kill9().expect("kill -9 and reap");
    }

    /// Asks dataplane `i` to shut down and waits for it (bounded).
    pub fn stop(&mut self, i: usize) -> std::process::ExitStatus {
        let _ = self.client(i).shutdown();
        let mut oaed = self.children[i].take().expect("running");
        match oaed.wait_for(Duration::from_secs(10)) {
            Some(status) => status,
            None => {
                oaed.kill9();
                panic!("oaed {i} did not stop within 10 s:\n{}", self.log(i));
            }
        }
    }

    /// Dataplane `i`'s control socket, each answer awaited up to 30 s.
    pub fn client(&self, i: usize) -> Client {
        Client::new(&self.sockets[i], Duration::from_secs(30))
    }

    pub fn status(&self, i: usize) -> DataplaneStatus {
        self.client(i).status().expect("status")
    }

    /// Dataplane `i`'s first link (queue 0's link 0).
    pub fn link(&self, i: usize) -> LinkStatus {
        let status = self.status(i);
        let (_, link) = status.links().next().expect("a link");
        link.clone()
    }

    pub fn stats(&self, i: usize) -> DataplaneStats {
        self.client(i).stats().expect("stats")
    }

    /// Dataplane `i`'s first link as an OAE link: up or not, and its state
    /// machine.
    pub fn oae_link(&self, i: usize) -> (bool, OaeLinkStatus) {
        let link = self.link(i);
        match link.state.oae() {
            Some(oae) => (link.state.up, oae.clone()),
            None => panic!("dataplane {i}'s first link does not run OAE: {link:?}"),
        }
    }

    /// The counters of dataplane `i`'s first link.
    pub fn link_counters(&self, i: usize) -> LinkCounters {
        let stats = self.stats(i);
        match stats.queues.first().and_then(|q| q.links.first()) {
            Some(link) => link.clone(),
            None => panic!("dataplane {i} has no link: {stats:?}"),
        }
    }

    /// The host ring's counters at dataplane `i` (its queue 0 serves it).
    pub fn host_counters(&self, i: usize) -> HostPortCounters {
        let stats = self.stats(i);
        match stats.queues.first().and_then(|q| q.host.as_ref()) {
            Some(host) => host.counters,
            None => panic!("dataplane {i} serves no host ring: {stats:?}"),
        }
    }

    /// Waits until both ends report every link of every queue up.
    pub fn wait_up(&self, limit: Duration) {
        self.wait_for(limit, "every link up at both ends", |d| {
            (0..2).all(|i| {
                d.children[i].is_some() && d.client(i).status().is_ok_and(|status| status.all_up())
            })
        });
    }

    /// Polls `cond` every 50 ms until it holds; panics with the logs after
    /// `limit`.
    pub fn wait_for(&self, limit: Duration, what: &str, mut cond: impl FnMut(&Self) -> bool) {
        let logs = || format!("--- a:\n{}\n--- b:\n{}", self.log(0), self.log(1));
        crate::poll_until(limit, what, || cond(self), logs);
    }

    /// Starts dataplane a's workload on its first link: `lanes` lanes in
    /// b's target region and a's local one, for `seconds`, from `seed`.
    pub fn start_workload(&self, lanes: u32, seconds: f64, seed: u64) {
        self.client(0)
            .workload_start(WorkloadSpec {
                region: TARGET_REGION,
                key: TARGET_KEY,
                local_region: LOCAL_REGION,
                lanes,
                seconds,
                seed,
                ..Default::default()
            })
            .unwrap_or_else(|e| panic!("start the workload: {e:?}\n{}", self.log(0)));
    }

    /// Dataplane a's workload (queue 0, link 0) once it has finished.
    pub fn finished_workload(&self, limit: Duration) -> WorkloadReport {
        let status = |d: &Dataplanes| -> WorkloadReport {
            d.client(0)
                .workload_status(0, 0, None)
                .expect("workload status")
        };
        self.wait_for(limit, "the workload to finish", |d| !status(d).running);
        status(self)
    }

    /// Dataplane a's finished workload failed no verb, and both memories
    /// hold what its ledger says (b's target region, a's local one).
    pub fn assert_workload_exact(&self, r: &WorkloadReport) {
        assert!(
            r.completed > 100 && r.failed == 0 && r.mismatches == 0,
            "{r:?}"
        );
        let at = r.first_byte;
        let remote = from_hex(&r.expected_remote).expect("hex");
        let local = from_hex(&r.expected_local).expect("hex");
        assert_eq!(
            &self.region(1, TARGET_REGION)[at..at + remote.len()],
            &remote[..]
        );
        assert_eq!(
            &self.region(0, LOCAL_REGION)[at..at + local.len()],
            &local[..]
        );
    }

    /// Runs `verb` from dataplane `i` on its queue 0's first link, through
    /// the control socket.
    pub fn verb(&self, i: usize, verb: VerbSpec) -> Result<VerbAnswer, ControlError> {
        self.client(i).verb(0, 0, None, verb)
    }

    /// Region `id` of dataplane `i`, as bytes.
    pub fn region(&self, i: usize, id: u16) -> Vec<u8> {
        let dump = self
            .client(i)
            .region_dump(id, 0, None)
            .expect("region dump");
        oae_client::control::from_hex(&dump.data).expect("hex")
    }
}

impl Drop for Dataplanes {
    fn drop(&mut self) {
        for i in 0..2 {
            if let Some(mut oaed) = self.children[i].take() {
                shut_down(&mut oaed, &self.sockets[i]);
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        // Left behind by a dataplane killed with -9: its ring, and its
        // regions' files beside it.
        for i in 0..2 {
            let ring = host_ring_path_of(&self.pair, i);
            for id in [TARGET_REGION, LOCAL_REGION] {
                let _ = std::fs::remove_file(oae_client::host::region_file(&ring, id));
            }
            let _ = std::fs::remove_file(ring);
        }
    }
}

/// The host ring dataplane a creates when `Options::host_ring_cost` is set.
pub fn host_ring_path(pair: &VethPair) -> PathBuf {
    host_ring_path_of(pair, 0)
}

/// The host ring of dataplane `i` (0: a, 1: b).
pub fn host_ring_path_of(pair: &VethPair, i: usize) -> PathBuf {
    PathBuf::from(format!("/dev/shm/oae-host-{}", pair.ns[i]))
}

/// The two dataplanes' configurations for `pair`, as `oaed` would load
/// them, for tests that run queues inside their own process.
pub fn configs(pair: &VethPair, o: &Options) -> [Config; 2] {
    let text = deployment(pair, o);
    let mut d = Deployment::parse(&text, Path::new("generated.toml")).expect("valid deployment");
    ["a", "b"].map(|name| d.dataplane.remove(name).expect("both dataplanes"))
}

/// Where a test keeps its configuration, logs, sockets and state.
fn test_dir(pair: &VethPair) -> PathBuf {
    std::env::temp_dir().join(format!("oae-test-{}", pair.ns[0]))
}

/// Dataplane `name`'s state directory in `dir`: its epoch and identity.
fn state_dir(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.state"))
}

/// Dataplane `name`'s identity file, as `oaed` finds it by default.
pub fn identity_file(dir: &Path, name: &str) -> PathBuf {
    state_dir(dir, name).join("identity.key")
}

/// `[queue.auth]` of dataplane `i` with keys agreed by identity: the
/// peer's identity trusted (made now if it has none), unless distrusted.
fn identity_auth(pair: &VethPair, o: &Options, i: usize, name: &str) -> String {
    let peer = ["a", "b"][1 - i];
    let dir = test_dir(pair);
    let public =
        |n: &str| oae_dataplane::identity::public(&identity_file(&dir, n)).expect("identity file");
    // Its own too: made before the configuration is written.
    public(name);
    let trusted = if o.distrust == Some(1 - i) {
        // A stranger's identity, so the list is not empty.
        "0".repeat(64)
    } else {
        public(peer).to_string()
    };
    let rekey = o
        .rekey_after
        .map_or_else(String::new, |n| format!("rekey_after = {n}\n"));
    format!("[dataplane.{name}.queue.auth]\nidentity = true\ntrusted = [\"{trusted}\"]\n{rekey}")
}

fn deployment(pair: &VethPair, o: &Options) -> String {
    let dpdk = |i: usize, name: &str| {
        let vdev = match o.driver {
            TestDriver::AfXdp => return String::new(),
            TestDriver::DpdkMemif => format!(
                // A path socket: an abstract one (memif's default) lives
                // in one network namespace, and the peers are in two.
                "net_memif0,role={},socket={},socket-abstract=no,mac={}",
                ["server", "client"][i],
                test_dir(pair).join("memif.sock").display(),
                format_mac(MACS[i])
            ),
            TestDriver::DpdkAfXdp => format!("net_af_xdp0,iface={}", pair.ifname[i]),
        };
        format!("[dataplane.{name}.dpdk]\nvdevs = [\"{vdev}\"]\n")
    };
    let queue_driver = match o.driver {
        TestDriver::AfXdp => "",
        TestDriver::DpdkMemif => "driver = \"dpdk\"\ndpdk_port = \"net_memif0\"\n",
        TestDriver::DpdkAfXdp => "driver = \"dpdk\"\ndpdk_port = \"net_af_xdp0\"\n",
    };
    let side = |i: usize, name: &str| {
        let core = if o.pin {
            format!("core = {i}\n")
        } else {
            String::new()
        };
        let steer = if o.queues > 1 {
            "steer_by = \"queue\"\n"
        } else {
            ""
        };
        let queues: String = (0..o.queues)
            .map(|q| {
                format!(
                    r#"
[[dataplane.{name}.queue]]
iface = "{iface}"
queue_id = {q}
{peer}{steer}{core}{queue_driver}{transport}{fabric}{discovery}
[dataplane.{name}.queue.link]
slots = {slots}
credits = {credits}
unreachable_after_rounds = {unreach}
{ordered}{min_round}{poll}{auth}"#,
                    auth = if o.identities {
                        identity_auth(pair, o, i, name)
                    } else {
                        o.auth_key
                            .filter(|_| o.auth_only_on.is_none_or(|only| only == i))
                            .map_or_else(String::new, |k| {
                                format!("[dataplane.{name}.queue.auth]\nkey = \"{k}\"\n")
                            })
                    },
                    poll = o.poll.map_or_else(String::new, |p| {
                        format!("[dataplane.{name}.queue.poll]\n{p}\n")
                    }),
                    fabric = if o.fabric { "fabric = true\n" } else { "" },
                    ordered = if o.unordered { "ordered = false\n" } else { "" },
                    transport = if o.rc_model {
                        "transport = \"rc-model\"\n"
                    } else {
                        ""
                    },
                    iface = pair.ifname[i],
                    peer = if o.discover_on[i] {
                        String::new()
                    } else {
                        format!("peer_mac = \"{}\"\n", format_mac(MACS[1 - i]))
                    },
                    discovery = match o.discovery.filter(|_| o.discover_on[i]) {
                        Some(body) => format!("[dataplane.{name}.queue.discovery]\n{body}\n"),
                        None => String::new(),
                    },
                    slots = o.slots,
                    credits = o.credits.unwrap_or(o.slots),
                    unreach = o.unreachable_after_rounds,
                    min_round = o
                        .min_round_ns
                        .map_or_else(String::new, |ns| format!("min_round_ns = {ns}\n")),
                )
            })
            .collect();
        format!(
            r#"
[dataplane.{name}]
{node}

{dpdk}
{queues}
{regions}"#,
            node = if o.made_ids {
                String::new()
            } else {
                format!("node_id = {}", i + 1)
            },
            dpdk = dpdk(i, name),
            regions = regions_toml(&format!("dataplane.{name}.")),
        )
    };
    let sides = if o.host_rings_on_both { 2 } else { 1 };
    let host: String = o.host_ring_cost.map_or_else(String::new, |cost| {
        (0..sides)
            .map(|i| {
                format!(
                    "\n[dataplane.{}.host]\nring = \"{}\"\npcie_cost = \"{cost}\"\n{}\n",
                    ["a", "b"][i],
                    host_ring_path_of(pair, i).display(),
                    o.host_ring_settings
                )
            })
            .collect()
    });
    let metrics = if o.metrics {
        "\n[dataplane.a.metrics]\nlisten = \"127.0.0.1:0\"\n"
    } else {
        ""
    };
    format!(
        "[topology]\nkind = \"veth-pair\"\nmacs = [\"{}\", \"{}\"]\n{}{}{host}{metrics}",
        format_mac(MACS[0]),
        format_mac(MACS[1]),
        side(0, "a"),
        side(1, "b")
    )
}

/// Runs `cmd` and returns (success, stdout, stderr). For assertions,
/// [`crate::run`] is better: its output shows the command and its status.
pub fn output(cmd: &mut Command) -> (bool, String, String) {
    let out = crate::run(cmd);
    (out.success(), out.stdout, out.stderr)
}
