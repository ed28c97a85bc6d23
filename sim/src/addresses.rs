//! Addresses without an operator in the simulator (`--addresses`): every
//! node makes its own node id from a tag and an address (PROTOCOL.md,
//! "Addresses"), drawn from one address more than there are nodes, so that
//! nodes meet on an address often; the fabric starts as two that merge;
//! a node that must yield (N3) comes back as a new incarnation at a free
//! address (N4); a restarted node asks for the address it last held,
//! which another may have taken meanwhile.

use oae_proto::Node;
use oae_proto::address::{self, address_of, free_address, node_id, preferred};

use crate::Tap;
use crate::ledger::{Check, violation};
use crate::rng::Rng;

pub struct Addresses {
    /// Each node's tag: its identity's, the same in every incarnation.
    tags: Vec<u64>,
    /// Addresses run from 1 to this.
    space: u16,
}

impl Addresses {
    /// Tags for `nodes` nodes, drawn from `seed`, and the node id each
    /// starts with.
    pub fn new(seed: u64, nodes: usize) -> (Addresses, Vec<u64>) {
        let mut rng = Rng::new(seed ^ 0xadd2_e55e_5000_0000);
        let mut tags: Vec<u64> = Vec::with_capacity(nodes);
        while tags.len() < nodes {
            let tag = rng.below(address::MADE) | address::MADE;
            if !tags.contains(&tag) {
                tags.push(tag);
            }
        }
        let space = nodes as u16 + 1;
        let ids = tags
            .iter()
            .map(|&t| node_id(t, preferred(None, t, space)))
            .collect();
        (Addresses { tags, space }, ids)
    }

    /// The node whose id (in any incarnation, at any address) is `id`.
    pub fn index_of(&self, id: u64) -> Option<usize> {
        self.tags.iter().position(|&t| t == id >> 16)
    }

    /// If node `i` must give up its address (N3): the node it yields to,
    /// and the id it takes (N4).
    pub fn yielded(&self, i: usize, node: &Node<Tap>) -> Option<(usize, u64)> {
        let holder = node.address_holder()?;
        let view = node.view()?;
        let me = node.node_id();
        let tag = self.tags[i];
        let new = free_address(view, tag, address_of(me), self.space)?;
        Some((self.index_of(holder)?, node_id(tag, new)))
    }
}

/// `addresses_unique`: once the run settled, no two nodes hold one
/// address, and each holds one.
pub fn check_unique(ids: &[u64]) -> Check {
    for (i, &a) in ids.iter().enumerate() {
        if address_of(a) == 0 {
            return violation("addresses_unique", format!("node {i} holds no address"));
        }
        if let Some(j) = ids[..i]
            .iter()
            .position(|&b| address_of(b) == address_of(a))
        {
            return violation(
                "addresses_unique",
                format!(
                    "nodes {j} and {i} both hold address {} ({:#x}, {a:#x})",
                    address_of(a),
                    ids[j]
                ),
            );
        }
    }
    Ok(())
}
