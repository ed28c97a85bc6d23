//! Neighbours found, not listed, in the simulator (`--discover`): each
//! node's port `p` faces `adj[i][p]`, its links are a pool bound to the
//! neighbours it hears (PROTOCOL.md, "Discovery"), through the core's own
//! bindings (`oae_proto::discovery`), as the dataplane's ports bind them.
//! Announcements go out on every port and through the fault model; a
//! restarted node finds its neighbours again; a link whose neighbour did
//! not heard its neighbour in time is made new for the next.

use oae_proto::discovery::{DiscoveryConfig, Neighbours, Stranger};
use oae_proto::wire::MAX_FRAME;
use oae_proto::{LinkId, Nanos, Node};

use crate::keys::mac;
use crate::ledger::{Check, violation};
use crate::{SimConfig, Tap};

/// Announcements every 20 round trips, and a neighbour let go if its link
/// is not up `forget_after_delays` one-way delays after it was found: both
/// often within one run, under loss and flaps.
fn config(cfg: &SimConfig) -> DiscoveryConfig {
    DiscoveryConfig {
        announce_every: 40 * cfg.delay,
        forget_after: u64::from(cfg.forget_after_delays) * cfg.delay,
    }
}

/// Every node's bindings, and each link's neighbour.
pub struct Discovery {
    cfg: DiscoveryConfig,
    bindings: Vec<Neighbours>,
    /// Node `i`'s link `l` runs to node `peers[i][l]`, once bound.
    peers: Vec<Vec<Option<usize>>>,
    pub found: u64,
    pub forgotten: u64,
    pub announcements: u64,
}

/// What becomes of a frame that reached node `to` on its port facing
/// `from`.
pub enum Arrival {
    /// For this link.
    Link(LinkId),
    /// An announcement, or a frame no link was left for: no link's.
    Nowhere,
}

impl Discovery {
    pub fn new(adj: &[Vec<usize>], sim: &SimConfig) -> Discovery {
        let cfg = config(sim);
        Discovery {
            bindings: adj
                .iter()
                .map(|ports| Neighbours::new(cfg, ports.len() as u16, ports.len()))
                .collect(),
            peers: adj.iter().map(|ports| vec![None; ports.len()]).collect(),
            cfg,
            found: 0,
            forgotten: 0,
            announcements: 0,
        }
    }

    /// The node node `i`'s link `l` runs to, if bound.
    pub fn peer(&self, i: usize, l: LinkId) -> Option<usize> {
        self.peers[i].get(usize::from(l)).copied().flatten()
    }

    /// Node `i`'s link to node `j`, if it found `j`.
    pub fn link_to(&self, i: usize, j: usize) -> Option<LinkId> {
        self.peers[i]
            .iter()
            .position(|&p| p == Some(j))
            .map(|l| l as LinkId)
    }

    /// A frame from `from` reached `to` on port `port`: D3, D4, D5.
    pub fn arrive(
        &mut self,
        to: usize,
        port: usize,
        from: usize,
        announcement: bool,
        now: Nanos,
    ) -> Arrival {
        let source = mac(from);
        if let Some(link) = self.bindings[to].bound(port as u8, source) {
            return if announcement {
                Arrival::Nowhere
            } else {
                Arrival::Link(link)
            };
        }
        match self.bindings[to].stranger(port as u8, source, announcement, now) {
            Stranger::Found { link, announcement } => {
                self.found += 1;
                self.peers[to][usize::from(link)] = Some(from);
                if announcement {
                    Arrival::Nowhere
                } else {
                    Arrival::Link(link)
                }
            }
            Stranger::NoVacantLink => Arrival::Nowhere,
        }
    }

    /// Node `i` restarted: a new process, with no binding.
    pub fn restarted(&mut self, i: usize, ports: usize) {
        self.bindings[i] = Neighbours::new(self.cfg, ports as u16, ports);
        self.peers[i].fill(None);
    }

    /// The ports of node `i` due to announce now, each announcement written
    /// by the node (D1).
    pub fn announcements(
        &mut self,
        i: usize,
        node: &Node<Tap>,
        now: Nanos,
    ) -> Vec<(usize, Vec<u8>)> {
        let mut out = Vec::new();
        let mut buf = [0u8; MAX_FRAME];
        for port in 0..self.peers[i].len() {
            if self.bindings[i].announce_due(port, now)
                && let Some(len) = node.write_announcement(&mut buf)
            {
                self.announcements += 1;
                out.push((port, buf[..len].to_vec()));
            }
        }
        out
    }

    /// Neighbours of node `i` its links never heard in time, let go
    /// and their links made new (D6).
    pub fn forget(&mut self, i: usize, node: &mut Node<Tap>, now: Nanos) {
        while let Some((link, _)) = self.bindings[i].forget_one(now, |l| node.link_renewable(l)) {
            assert!(node.renew_link(link), "a renewable link renews");
            self.peers[i][usize::from(link)] = None;
            self.forgotten += 1;
        }
    }

    pub fn poll_timeout(&self, i: usize) -> Option<Nanos> {
        self.bindings[i].poll_timeout()
    }

    /// `link_to_its_neighbour`: a link that is up runs to the node its
    /// binding names, and no node binds one neighbour twice.
    pub fn check(&self, i: usize, node: &Node<Tap>, ids: &[u64]) -> Check {
        for (l, peer) in self.peers[i].iter().enumerate() {
            let Some(status) = node.link_status(l as LinkId).filter(|s| s.up) else {
                continue;
            };
            let Some(j) = *peer else {
                return violation(
                    "link_to_its_neighbour",
                    format!("node {i}'s link {l} is up with no neighbour bound"),
                );
            };
            if status.peer_id != ids[j] {
                return violation(
                    "link_to_its_neighbour",
                    format!(
                        "node {i}'s link {l} is bound to node {j} but up with node id {:#x}",
                        status.peer_id
                    ),
                );
            }
            if self.peers[i][..l].contains(peer) {
                return violation(
                    "link_to_its_neighbour",
                    format!("node {i} has two links bound to node {j}"),
                );
            }
        }
        Ok(())
    }
}
