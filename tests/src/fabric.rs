//! Several real dataplanes (`oaed` processes), each in a namespace of its
//! own: all on one Ethernet segment (a bridge in a hub namespace), each
//! with a link to every other (a triangle for three); or joined as a graph,
//! a veth pair per link, running the fabric. Dropping a [`Fabric`] stops
//! every process by its PID and deletes the namespaces.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{MutexGuard, PoisonError};
use std::time::Duration;

use oae_client::control::Client;
use oae_client::status::{FabricStatus, LinkStatus};
use oae_common::mac::format_mac;
use oae_config::deployment::{Naming, fabric_idle, fabric_node_toml};
use oae_os::child::Supervised;
use oae_pmd::netns::{Graph, Segment};
use oae_sim::Shape;

use crate::oaed::{
    ONE_SET_AT_A_TIME, SHARED_CPU_MIN_ROUND_NS, await_oaed, binary, regions_toml, shut_down,
    spawn_oaed, start_oaed,
};

/// How the dataplanes are joined.
pub enum Net {
    /// One segment, a link from each node to every other.
    Segment(Segment),
    /// A veth pair per edge of a shape, the fabric on, each node's
    /// neighbours named as the configuration says.
    Graph(Graph, Vec<Vec<usize>>, Naming),
}

impl Net {
    /// A command that runs `program` in node `i`'s namespace.
    pub fn command(&self, i: usize, program: &str) -> std::process::Command {
        match self {
            Net::Segment(s) => s.command(i, program),
            Net::Graph(g, ..) => g.command(i, program),
        }
    }

    fn nodes(&self) -> usize {
        match self {
            Net::Segment(s) => s.ns.len(),
            Net::Graph(g, ..) => g.ns.len(),
        }
    }

    fn config(&self, i: usize) -> String {
        match self {
            Net::Segment(s) => node_config(i, s.ns.len()),
            Net::Graph(_, adj, naming) => fabric_node_toml(
                i,
                &adj[i],
                SHARED_CPU_MIN_ROUND_NS,
                fabric_idle(adj.len()),
                *naming,
            ),
        }
    }
}

pub struct Fabric {
    pub net: Net,
    pub dir: PathBuf,
    pub sockets: Vec<PathBuf>,
    children: Vec<Option<Supervised>>,
    /// When the first dataplane was started, and how long starting all of
    /// them in turn took (each one's control socket awaited).
    pub launched: std::time::Instant,
    pub launching: Duration,
    // Last, so it is released after the processes and namespaces are gone.
    _turn: MutexGuard<'static, ()>,
}

/// Node `i`'s MAC; its node id is `i + 1`.
pub fn mac(i: usize) -> [u8; 6] {
    [2, 0x0a, 0xe0, 0, 1, i as u8 + 1]
}

impl Fabric {
    /// `n` dataplanes on one segment, each with one queue carrying a link to
    /// every other, started and waited for until every link is up.
    pub fn start(tag: &str, n: usize) -> Fabric {
        let turn = ONE_SET_AT_A_TIME
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let macs: Vec<[u8; 6]> = (0..n).map(mac).collect();
        let segment = Segment::create(tag, &macs).expect("create the segment");
        let dir = std::env::temp_dir().join(format!("oae-test-{}", segment.hub));
        let fabric = Fabric::launch_all(Net::Segment(segment), dir, turn);
        fabric.wait_for(
            Duration::from_secs(30),
            "every link of every node up",
            |f| {
                (0..n).all(|i| {
                    let links = f.links(i);
                    links.len() == n - 1 && links.iter().all(|l| l.state.up)
                })
            },
        );
        fabric
    }

    /// `shape` of `n` dataplanes, a veth pair per link, each running the
    /// fabric (their cores sleep when idle if the nodes outnumber the
    /// CPUs); waited for until every node holds the same view of all `n`.
    pub fn start_graph(tag: &str, shape: Shape, n: usize) -> Fabric {
        Fabric::start_graph_named(tag, shape, n, Naming::Listed)
    }

    /// As [`Fabric::start_graph`], each node's neighbours named as
    /// `naming` says.
    pub fn start_graph_named(tag: &str, shape: Shape, n: usize, naming: Naming) -> Fabric {
        let turn = ONE_SET_AT_A_TIME
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let graph = Graph::create(tag, n, &shape.edges(n)).expect("create the namespaces");
        let dir = std::env::temp_dir().join(format!("oae-test-{}", graph.ns[0]));
        let net = Net::Graph(graph, shape.neighbours(n), naming);
        let fabric = Fabric::launch_all(net, dir, turn);
        fabric.wait_for(
            Duration::from_secs(60),
            "every node's view holds every node",
            |f| f.views_agree(n),
        );
        fabric
    }

    fn launch_all(net: Net, dir: PathBuf, turn: MutexGuard<'static, ()>) -> Fabric {
        std::fs::create_dir_all(&dir).expect("test directory");
        let n = net.nodes();
        let sockets = (0..n).map(|i| dir.join(format!("n{i}.sock"))).collect();
        let mut fabric = Fabric {
            net,
            dir,
            sockets,
            children: (0..n).map(|_| None).collect(),
            launched: std::time::Instant::now(),
            launching: Duration::ZERO,
            _turn: turn,
        };
        // All at once, as the machines of a rack power up: each then
        // waited for in turn.
        let mut started: Vec<Supervised> = (0..n).map(|i| spawn_oaed(fabric.command(i))).collect();
        for (i, oaed) in started.iter_mut().enumerate() {
            await_oaed(oaed, &fabric.sockets[i], &fabric.log_path(i));
        }
        fabric.children = started.into_iter().map(Some).collect();
        fabric.launching = fabric.launched.elapsed();
        fabric
    }

    /// Starts node `i`'s dataplane (again, after [`Fabric::kill9`]: a new
    /// incarnation, its memory zeroed).
    pub fn launch(&mut self, i: usize) {
        let cmd = self.command(i);
        self.children[i] = Some(start_oaed(cmd, &self.sockets[i], &self.log_path(i)));
    }

    /// The command that starts node `i`'s dataplane, its configuration
    /// written.
    fn command(&self, i: usize) -> std::process::Command {
        let config = self.dir.join(format!("n{i}.toml"));
        std::fs::write(&config, self.net.config(i)).expect("write config");
        let log = self.log_path(i);
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("log file");
        let mut cmd = self
            .net
            .command(i, binary("oaed").to_str().expect("utf-8 path"));
        cmd.arg("--config")
            .arg(&config)
            .arg("--socket")
            .arg(&self.sockets[i])
            .arg("--state-dir")
            .arg(self.dir.join(format!("n{i}.state")))
            .stdout(Stdio::null())
            .stderr(log_file);
        cmd
    }

    /// Kills node `i`'s dataplane with SIGKILL: no drain, no goodbye.
    pub fn kill9(&mut self, i: usize) {
        if let Some(mut oaed) = self.children[i].take() {
            oaed.kill9();
        }
    }

    /// Node `i`'s view of the fabric (its first queue's), if it answers.
    pub fn fabric(&self, i: usize) -> Option<FabricStatus> {
        let s = self.client(i).status().ok()?;
        s.queues.into_iter().next()?.fabric
    }

    /// Every node answers with the same view, of `n` members.
    pub fn views_agree(&self, n: usize) -> bool {
        let views: Vec<_> = (0..self.sockets.len()).map(|i| self.fabric(i)).collect();
        views.iter().all(|v| {
            v.as_ref().is_some_and(|v| {
                v.members.len() == n
                    && views[0]
                        .as_ref()
                        .is_some_and(|f| (f.view, &f.members) == (v.view, &v.members))
            })
        })
    }

    pub fn log_path(&self, i: usize) -> PathBuf {
        self.dir.join(format!("n{i}.log"))
    }

    pub fn logs(&self) -> String {
        (0..self.sockets.len())
            .map(|i| {
                let log = std::fs::read_to_string(self.log_path(i)).unwrap_or_default();
                format!("--- node {i}:\n{log}")
            })
            .collect()
    }

    /// Node `i`'s control socket, each answer awaited up to 30 s.
    pub fn client(&self, i: usize) -> Client {
        Client::new(&self.sockets[i], Duration::from_secs(30))
    }

    /// Node `i`'s links, from its status (every queue's); none if it does
    /// not answer.
    pub fn links(&self, i: usize) -> Vec<LinkStatus> {
        self.client(i)
            .status()
            .ok()
            .map(|s| s.links().map(|(_, l)| l.clone()).collect())
            .unwrap_or_default()
    }

    /// Polls `cond` every 50 ms until it holds; panics with the logs after
    /// `limit`.
    pub fn wait_for(&self, limit: Duration, what: &str, mut cond: impl FnMut(&Self) -> bool) {
        crate::poll_until(limit, what, || cond(self), || self.logs());
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        for (i, oaed) in self.children.iter_mut().enumerate() {
            if let Some(mut oaed) = oaed.take() {
                shut_down(&mut oaed, &self.sockets[i]);
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Node `i` of `n`: one queue on the segment, a link to every other node,
/// the tests' two regions.
fn node_config(i: usize, n: usize) -> String {
    let peers: String = (0..n)
        .filter(|&j| j != i)
        .map(|j| format!("[[queue.peer]]\nmac = \"{}\"\n", format_mac(mac(j))))
        .collect();
    format!(
        r#"name = "n{i}"
node_id = {node}

[[queue]]
iface = "oae0"
queue_id = 0
[queue.link]
slots = 32
credits = 32
min_round_ns = {SHARED_CPU_MIN_ROUND_NS}
{peers}{regions}"#,
        node = i + 1,
        regions = regions_toml(""),
    )
}
