//! Network namespaces joined by a veth pair: the two-host topology the
//! default configuration, the tests and the benchmarks run on.
//!
//! Names are unique per process and call, so concurrent runs never collide;
//! dropping a [`VethPair`] deletes both namespaces, which deletes the veth
//! pair and detaches whatever XDP program was attached to it.

use std::fs::File;
use std::io;
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use nix::sched::{CloneFlags, setns};
use oae_common::mac::{format_mac, parse_mac};

/// Two namespaces, `ns[0]` and `ns[1]`, with interface `ifname[i]` of the
/// veth pair in `ns[i]`, addressed `ip[i]/24`, both up.
#[derive(Debug)]
pub struct VethPair {
    pub ns: [String; 2],
    pub ifname: [String; 2],
    pub ip: [Ipv4Addr; 2],
    pub mac: [[u8; 6]; 2],
    cleanup: bool,
}

impl VethPair {
    /// Creates the pair. `tag` (a few lowercase letters) makes the names
    /// recognisable: `oae-<tag>-<pid>-<n>-a` / `-b`.
    pub fn create(tag: &str) -> io::Result<VethPair> {
        Self::create_with_macs(tag, None)
    }

    /// Like [`VethPair::create`], giving the two ends these MAC addresses
    /// (so a configuration can name its peer in advance).
    pub fn create_with_macs(tag: &str, macs: Option<[[u8; 6]; 2]>) -> io::Result<VethPair> {
        Self::create_with_queues(tag, macs, 1)
    }

    /// Like [`VethPair::create_with_macs`], each end with `queues` receive
    /// and transmit queues. A veth delivers a frame sent on transmit queue
    /// `k` to the peer's receive queue `k`.
    pub fn create_with_queues(
        tag: &str,
        macs: Option<[[u8; 6]; 2]>,
        queues: u32,
    ) -> io::Result<VethPair> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let base = format!("oae-{tag}-{}-{n}", std::process::id());
        let ns = [format!("{base}-a"), format!("{base}-b")];
        // Interface names are limited to 15 bytes and live inside their own
        // namespace, so they need not be unique.
        let ifname = ["oae0".to_string(), "oae1".to_string()];
        // Host-local addresses: 10.<pid-derived>.<n>.{1,2}, never routed out
        // of these namespaces.
        let octet = (std::process::id() % 250) as u8 + 1;
        let ip = [
            Ipv4Addr::new(10, octet, (n % 250) as u8, 1),
            Ipv4Addr::new(10, octet, (n % 250) as u8, 2),
        ];
        let mut pair = VethPair {
            ns,
            ifname,
            ip,
            mac: [[0; 6]; 2],
            cleanup: true,
        };
        pair.build(macs, queues)?;
        Ok(pair)
    }

    /// A pair whose namespaces are named `ns`, made to outlive this process
    /// (`oaectl pair up`): nothing is deleted on drop, and a name that is
    /// taken is refused. The ends are addressed 10.254.`net`.1 and .2.
    pub fn create_named(
        ns: [String; 2],
        macs: Option<[[u8; 6]; 2]>,
        queues: u32,
        net: u8,
    ) -> io::Result<VethPair> {
        if let Some(taken) = ns.iter().find(|n| namespace_exists(n)) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("namespace {taken} exists already"),
            ));
        }
        let mut pair = VethPair {
            ns,
            ifname: ["oae0".to_string(), "oae1".to_string()],
            ip: [
                Ipv4Addr::new(10, 254, net, 1),
                Ipv4Addr::new(10, 254, net, 2),
            ],
            mac: [[0; 6]; 2],
            cleanup: false,
        };
        if let Err(e) = pair.build(macs, queues) {
            for n in &pair.ns {
                let _ = delete_namespace(n);
            }
            return Err(e);
        }
        Ok(pair)
    }

    fn build(&mut self, macs: Option<[[u8; 6]; 2]>, queues: u32) -> io::Result<()> {
        for ns in &self.ns {
            ip(&["netns", "add", ns])?;
        }
        let queues = queues.to_string();
        let counts = ["numtxqueues", &queues, "numrxqueues", &queues];
        // Each end is born in its own namespace: no name is ever taken in
        // the caller's namespace, so pairs can be made concurrently.
        let mut args = vec!["link", "add", &self.ifname[0]];
        args.extend(counts);
        args.extend([
            "netns",
            &self.ns[0],
            "type",
            "veth",
            "peer",
            "name",
            &self.ifname[1],
        ]);
        args.extend(counts);
        args.extend(["netns", &self.ns[1]]);
        ip(&args)?;
        for i in 0..2 {
            let (ns, ifname) = (&self.ns[i], &self.ifname[i]);
            ip_in(ns, &["link", "set", "lo", "up"])?;
            if let Some(macs) = macs {
                ip_in(
                    ns,
                    &["link", "set", ifname, "address", &format_mac(macs[i])],
                )?;
            }
            ip_in(
                ns,
                &["addr", "add", &format!("{}/24", self.ip[i]), "dev", ifname],
            )?;
            ip_in(ns, &["link", "set", ifname, "up"])?;
            self.mac[i] = read_mac(ns, ifname)?;
        }
        Ok(())
    }

    /// Adds a second veth pair between the same two namespaces: interface
    /// `ifname[i]` with MAC `mac[i]` in `ns[i]`, both up, unaddressed. It
    /// goes when the namespaces do. Tests use it for a dataplane with two
    /// queues, or for two interfaces that share a MAC as VLANs of one NIC
    /// do (this kernel need not have 8021q).
    pub fn add_link(
        &self,
        ifname: [&str; 2],
        mac: [[u8; 6]; 2],
        mtu: Option<u32>,
    ) -> io::Result<()> {
        ip_in(
            &self.ns[0],
            &[
                "link",
                "add",
                ifname[0],
                "type",
                "veth",
                "peer",
                "name",
                ifname[1],
                "netns",
                &self.ns[1],
            ],
        )?;
        for i in 0..2 {
            let (ns, ifname) = (&self.ns[i], ifname[i]);
            ip_in(ns, &["link", "set", ifname, "address", &format_mac(mac[i])])?;
            if let Some(mtu) = mtu {
                ip_in(ns, &["link", "set", ifname, "mtu", &mtu.to_string()])?;
            }
            ip_in(ns, &["link", "set", ifname, "up"])?;
        }
        Ok(())
    }

    /// Keeps the namespaces after drop (for debugging a failed run).
    pub fn keep(&mut self) {
        self.cleanup = false;
    }

    /// A command that runs `program` inside namespace `i`.
    pub fn command(&self, i: usize, program: &str) -> Command {
        command_in(&self.ns[i], program)
    }
}

/// Whether a named network namespace `name` exists (`ip netns add` makes
/// its file in /run/netns).
pub fn namespace_exists(name: &str) -> bool {
    std::path::Path::new("/run/netns").join(name).exists()
}

/// Deletes named namespace `name`, and with it its interfaces and their
/// XDP programs.
pub fn delete_namespace(name: &str) -> io::Result<()> {
    ip(&["netns", "delete", name])
}

impl Drop for VethPair {
    fn drop(&mut self) {
        if self.cleanup {
            for ns in &self.ns {
                let _ = ip(&["netns", "delete", ns]);
            }
        }
    }
}

/// `n` namespaces on one Ethernet segment: namespace `ns[i]` has interface
/// `ifname` (one end of a veth pair) with MAC `mac[i]` and address
/// `ip[i]/24`; the other end of each pair is a port of one bridge in a hub
/// namespace of its own. Every namespace, hub included, is deleted on drop.
#[derive(Debug)]
pub struct Segment {
    pub hub: String,
    pub ns: Vec<String>,
    pub ifname: String,
    pub ip: Vec<Ipv4Addr>,
    pub mac: Vec<[u8; 6]>,
}

impl Segment {
    /// Creates one namespace per MAC in `macs`, named
    /// `oae-<tag>-<pid>-<n>-<i>`, and the hub `...-hub`.
    pub fn create(tag: &str, macs: &[[u8; 6]]) -> io::Result<Segment> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let base = format!("oae-{tag}-{}-{n}", std::process::id());
        let octet = (std::process::id() % 250) as u8 + 1;
        let mut segment = Segment {
            hub: format!("{base}-hub"),
            ns: (0..macs.len()).map(|i| format!("{base}-{i}")).collect(),
            ifname: "oae0".into(),
            ip: (0..macs.len())
                .map(|i| Ipv4Addr::new(10, octet, 200 + (n % 50) as u8, i as u8 + 1))
                .collect(),
            mac: macs.to_vec(),
        };
        // Dropped on failure: whatever was made so far is deleted.
        ip(&["netns", "add", &segment.hub])?;
        ip_in(&segment.hub, &["link", "add", "br0", "type", "bridge"])?;
        ip_in(&segment.hub, &["link", "set", "br0", "up"])?;
        for i in 0..macs.len() {
            segment.join(i)?;
        }
        Ok(segment)
    }

    fn join(&mut self, i: usize) -> io::Result<()> {
        let (ns, port) = (self.ns[i].clone(), format!("p{i}"));
        ip(&["netns", "add", &ns])?;
        ip(&[
            "link",
            "add",
            &self.ifname,
            "netns",
            &ns,
            "type",
            "veth",
            "peer",
            "name",
            &port,
            "netns",
            &self.hub,
        ])?;
        ip_in(&self.hub, &["link", "set", &port, "master", "br0"])?;
        ip_in(&self.hub, &["link", "set", &port, "up"])?;
        ip_in(&ns, &["link", "set", "lo", "up"])?;
        let mac = format_mac(self.mac[i]);
        ip_in(&ns, &["link", "set", &self.ifname, "address", &mac])?;
        let addr = format!("{}/24", self.ip[i]);
        ip_in(&ns, &["addr", "add", &addr, "dev", &self.ifname])?;
        ip_in(&ns, &["link", "set", &self.ifname, "up"])
    }

    /// A command that runs `program` inside namespace `i`.
    pub fn command(&self, i: usize, program: &str) -> Command {
        command_in(&self.ns[i], program)
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        for ns in self.ns.iter().chain([&self.hub]) {
            let _ = ip(&["netns", "delete", ns]);
        }
    }
}

/// Namespaces joined as a graph: a veth pair per edge. Namespace `ns[i]`
/// has interface `f<j>` ([`Graph::ifname`]) towards node `j`, with MAC
/// [`Graph::mac`]`(i, j)`. Every namespace is deleted on drop, and the
/// pairs with them.
#[derive(Debug)]
pub struct Graph {
    pub ns: Vec<String>,
    pub edges: Vec<(usize, usize)>,
}

impl Graph {
    /// Creates `nodes` namespaces named `oae-<tag>-<pid>-<n>-<i>` and a
    /// veth pair for each of `edges`.
    pub fn create(tag: &str, nodes: usize, edges: &[(usize, usize)]) -> io::Result<Graph> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let base = format!("oae-{tag}-{}-{n}", std::process::id());
        let mut graph = Graph {
            ns: Vec::new(),
            edges: edges.to_vec(),
        };
        // Dropped on failure: whatever was made so far is deleted.
        for i in 0..nodes {
            let ns = format!("{base}-{i}");
            ip(&["netns", "add", &ns])?;
            graph.ns.push(ns);
            ip_in(&graph.ns[i], &["link", "set", "lo", "up"])?;
        }
        for &(a, b) in edges {
            let (fa, fb) = (Graph::ifname(b), Graph::ifname(a));
            ip(&[
                "link",
                "add",
                &fa,
                "netns",
                &graph.ns[a],
                "type",
                "veth",
                "peer",
                "name",
                &fb,
                "netns",
                &graph.ns[b],
            ])?;
            for (i, j) in [(a, b), (b, a)] {
                let (ns, ifname) = (&graph.ns[i], Graph::ifname(j));
                ip_in(
                    ns,
                    &[
                        "link",
                        "set",
                        &ifname,
                        "address",
                        &format_mac(Graph::mac(i, j)),
                    ],
                )?;
                ip_in(ns, &["link", "set", &ifname, "up"])?;
            }
        }
        Ok(graph)
    }

    /// Node `i`'s interface towards node `j`.
    pub fn ifname(j: usize) -> String {
        format!("f{j}")
    }

    /// The MAC of node `i`'s end of the pair to node `j`.
    pub fn mac(i: usize, j: usize) -> [u8; 6] {
        oae_common::topology::link_mac(i, j)
    }

    /// Takes the pair between `a` and `b` down (both ends), or brings it
    /// back up: a cable pulled and plugged in again.
    pub fn set_link(&self, a: usize, b: usize, up: bool) -> io::Result<()> {
        let state = if up { "up" } else { "down" };
        for (i, j) in [(a, b), (b, a)] {
            ip_in(&self.ns[i], &["link", "set", &Graph::ifname(j), state])?;
        }
        Ok(())
    }

    /// A command that runs `program` inside namespace `i`.
    pub fn command(&self, i: usize, program: &str) -> Command {
        command_in(&self.ns[i], program)
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        for ns in &self.ns {
            let _ = ip(&["netns", "delete", ns]);
        }
    }
}

/// A command that runs `program` inside namespace `ns`; `ip netns exec`
/// execs it in place, so the child's PID is the program's.
pub fn command_in(ns: &str, program: &str) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns, program]);
    cmd
}

/// Moves the calling thread into the named namespace (`/run/netns/<name>`).
/// Sockets, netlink requests and interface lookups made afterwards by this
/// thread happen there; other threads are unaffected.
pub fn enter(ns: &str) -> io::Result<()> {
    let file = File::open(format!("/run/netns/{ns}"))
        .map_err(|e| io::Error::new(e.kind(), format!("network namespace '{ns}': {e}")))?;
    setns(&file, CloneFlags::CLONE_NEWNET)
        .map_err(|e| io::Error::other(format!("entering network namespace '{ns}': {e}")))
}

/// Runs `ip <args>`, turning a failure into an error that quotes it.
pub fn ip(args: &[&str]) -> io::Result<()> {
    let out = Command::new("ip").args(args).output().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("running 'ip' (is iproute2 installed?): {e}"),
        )
    })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "'ip {}' failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// Runs `ip -n <ns> <args>`.
pub fn ip_in(ns: &str, args: &[&str]) -> io::Result<()> {
    let mut all = vec!["-n", ns];
    all.extend_from_slice(args);
    ip(&all)
}

fn read_mac(ns: &str, ifname: &str) -> io::Result<[u8; 6]> {
    let out = Command::new("ip")
        .args(["-n", ns, "-o", "link", "show", "dev", ifname])
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let addr = text
        .split_whitespace()
        .skip_while(|w| *w != "link/ether")
        .nth(1)
        .ok_or_else(|| io::Error::other(format!("no MAC address for {ifname} in {ns}")))?;
    parse_mac(addr).ok_or_else(|| io::Error::other(format!("bad MAC address '{addr}'")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_pings_and_vanishes_on_drop() {
        let pair = VethPair::create("unit").expect("create veth pair");
        let names = pair.ns.clone();
        let out = pair
            .command(0, "ping")
            .args(["-c", "1", "-W", "2", &pair.ip[1].to_string()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert_ne!(pair.mac[0], pair.mac[1]);
        drop(pair);
        for ns in names {
            assert!(!std::path::Path::new(&format!("/run/netns/{ns}")).exists());
        }
    }
}
