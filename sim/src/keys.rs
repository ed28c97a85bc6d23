//! Links keyed by identity in the simulator (`--agree-keys`): every node
//! has an identity every other trusts, every link agrees its key by the
//! core's handshake (PROTOCOL.md, "Key agreement"), keys renew every few
//! hundred frames, and an adversary on the wire replays recorded handshake
//! messages onto any link at any time.

use std::sync::Arc;

use oae_proto::auth::LinkIdentity;
use oae_proto::handshake::{HANDSHAKE_CLASS, KeyAgreementConfig};
use oae_proto::identity::{IdentitySecret, PublicIdentity, Trust};
use oae_proto::wire;
use oae_proto::{HELLO_BACKOFF_LIMIT, LinkId, Node};

use crate::ledger::{Check, violation};
use crate::rng::Rng;
use crate::{SimConfig, Tap, node_id};

/// Frames sent under one key before it renews: small, so a run renews
/// keys many times under its workload.
const REKEY_AFTER: u64 = 300;
/// Handshake messages the adversary keeps to replay.
const RECORDED: usize = 64;

/// Every node's identity, computed once, and the trust list of them all.
pub struct Identities {
    secrets: Vec<Arc<IdentitySecret>>,
    publics: Vec<PublicIdentity>,
    trust: Arc<Trust>,
}

impl Identities {
    pub fn new(nodes: usize) -> Identities {
        let secrets: Vec<_> = (0..nodes).map(|i| Arc::new(identity(i))).collect();
        let publics: Vec<_> = secrets.iter().map(|s| s.public()).collect();
        Identities {
            trust: Arc::new(Trust::of(publics.iter().copied())),
            secrets,
            publics,
        }
    }
}

/// Node `i`'s identity (the same in every incarnation).
fn identity(i: usize) -> IdentitySecret {
    let mut secret = [0u8; 32];
    secret[..8].copy_from_slice(&(i as u64 + 1).to_be_bytes());
    secret[8..16].copy_from_slice(b"oae-sim!");
    IdentitySecret::from_bytes(secret)
}

/// The MAC the simulator gives node `i`.
pub fn mac(i: usize) -> [u8; 6] {
    node_id(i).to_be_bytes()[2..].try_into().expect("6 bytes")
}

/// Node `i` (in incarnation `epoch`) agrees the keys of its links to
/// `peers`, trusting every node of the run.
pub fn agree(
    ids: &Identities,
    node: &mut Node<Tap>,
    cfg: &SimConfig,
    peers: &[usize],
    i: usize,
    epoch: u32,
) {
    // Each incarnation draws its ephemeral keys from its own seed.
    let mut seed = [0u8; 32];
    seed[..8].copy_from_slice(&(i as u64).to_be_bytes());
    seed[8..12].copy_from_slice(&epoch.to_be_bytes());
    for (k, &peer) in peers.iter().enumerate() {
        let link = LinkIdentity {
            local_mac: mac(i),
            peer_mac: mac(peer),
            channel: 0,
        };
        let agreement = KeyAgreementConfig {
            identity: Arc::clone(&ids.secrets[i]),
            trust: Arc::clone(&ids.trust),
            seed,
            retry_interval: cfg.link.hello_interval,
            retry_limit: HELLO_BACKOFF_LIMIT.min(64 * cfg.link.hello_interval),
            rekey_after: REKEY_AFTER,
        };
        node.agree_keys(k as LinkId, agreement, link)
            .expect("the node's own link");
    }
}

/// An adversary that records handshake messages and replays them.
pub struct Replayer {
    rng: Rng,
    recorded: Vec<Vec<u8>>,
    next: usize,
    pub replayed: u64,
}

impl Replayer {
    /// A stream of its own, so runs without it draw as before.
    pub fn new(seed: u64) -> Replayer {
        Replayer {
            rng: Rng::new(seed ^ 0x004E_015E_4E01_5E4E),
            recorded: Vec::with_capacity(RECORDED),
            next: 0,
            replayed: 0,
        }
    }

    /// Keeps `frame` if it is a handshake message.
    pub fn record(&mut self, frame: &[u8]) {
        if frame.len() != wire::frame_len(HANDSHAKE_CLASS) {
            return;
        }
        if self.recorded.len() < RECORDED {
            self.recorded.push(frame.to_vec());
        } else {
            self.recorded[self.next] = frame.to_vec();
            self.next = (self.next + 1) % RECORDED;
        }
    }

    /// With chance `ppm`, a recorded message to deliver to any link end:
    /// (node, link, frame).
    pub fn replay(&mut self, ppm: u32, adj: &[Vec<usize>]) -> Option<(usize, LinkId, Vec<u8>)> {
        if self.recorded.is_empty() || !self.rng.chance_ppm(ppm) {
            return None;
        }
        let frame = self.recorded[self.rng.below(self.recorded.len() as u64) as usize].clone();
        let node = self.rng.below(adj.len() as u64) as usize;
        let link = self.rng.below(adj[node].len() as u64) as LinkId;
        self.replayed += 1;
        Some((node, link, frame))
    }
}

/// Handshakes node `node`'s links completed.
pub fn handshakes(node: &Node<Tap>) -> u64 {
    (0..node.links() as LinkId)
        .filter_map(|l| node.key_agreement(l))
        .map(|a| a.stats().completed)
        .sum()
}

/// `link_up_under_agreed_key`: a link end that is up runs under a key it
/// agreed with the node at the other end, of the incarnation it is up with
/// or a later one (whose HELLO is on its way): no forged, replayed or
/// unfinished handshake brought it up. And when both ends are up with
/// each other's current incarnations, each holds the key the other agreed
/// with it in those incarnations.
pub fn check_agreed(ids: &Identities, nodes: &[Node<Tap>], i: usize, adj: &[Vec<usize>]) -> Check {
    let node = &nodes[i];
    for (k, &peer) in adj[i].iter().enumerate() {
        let link = k as LinkId;
        let Some(status) = node.link_status(link).filter(|s| s.up) else {
            continue;
        };
        let agreed = node.key_agreement(link).and_then(|a| a.peer().copied());
        let expected = ids.publics[peer];
        let good = agreed.is_some_and(|p| {
            p.identity == expected && p.epoch >= status.peer_epoch && p.node_id == node_id(peer)
        });
        if !good || node.link_auth(link).is_none() {
            return violation(
                "link_up_under_agreed_key",
                format!(
                    "node {i} link {k} is up with node {peer} epoch {} under {agreed:?}",
                    status.peer_epoch
                ),
            );
        }
        let back = adj[peer].iter().position(|&n| n == i).expect("linked") as LinkId;
        let other = &nodes[peer];
        let mutual = status.peer_epoch == other.epoch()
            && other
                .link_status(back)
                .is_some_and(|s| s.up && s.peer_epoch == node.epoch());
        let other_agreed = other.key_agreement(back).and_then(|a| a.peer().copied());
        if mutual
            && (agreed.map(|p| p.epoch) != Some(other.epoch())
                || other_agreed.map(|p| p.epoch) != Some(node.epoch()))
        {
            return violation(
                "link_up_under_agreed_key",
                format!(
                    "nodes {i} and {peer} are up with each other's incarnations {} and {} \
                     under keys agreed with {agreed:?} and {other_agreed:?}",
                    node.epoch(),
                    other.epoch()
                ),
            );
        }
    }
    Ok(())
}

/// The links not up and their key agreements, for a liveness failure.
pub fn describe_down(nodes: &[Node<Tap>]) -> String {
    let mut out = String::new();
    for (i, n) in nodes.iter().enumerate() {
        for l in 0..n.links() as LinkId {
            let up = n.link_status(l).is_some_and(|s| s.up);
            if let (false, Some(a)) = (up, n.key_agreement(l)) {
                out += &format!("; node {i} link {l} down: {a:?}, auth {:?}", n.link_auth(l));
            }
        }
    }
    out
}
