//! Addresses without an operator (PROTOCOL.md, "Addresses", rules
//! N1-N5). A node that is given no node id makes its own: the low 16 bits
//! are its *address*, a small integer unique within its fabric, and the
//! high 48 bits a *tag* drawn from its identity, so two nodes that chose
//! one address are still two members of a view and see their conflict.
//! Of two, the lower node id keeps the address; the other takes a free
//! one and comes back as a new incarnation under it.

use sha2::{Digest, Sha256};

use crate::fabric::routes::View;
use crate::identity::PublicIdentity;

/// Addresses run from 1 to this; 0 is none. (The simulator draws from
/// fewer, so that nodes meet on one address often.)
pub const MAX_ADDRESS: u16 = u16::MAX;

/// The top bit of a tag: node ids a node made itself have their top bit
/// set, configured ones not.
pub const MADE: u64 = 1 << 47;

/// The 48-bit tag of a node with `identity` (N1): the first six bytes of
/// SHA-256 over a label and the identity, top bit set.
pub fn tag_of(identity: &PublicIdentity) -> u64 {
    let digest = Sha256::new()
        .chain_update(b"oae address tag v1")
        .chain_update(identity.0)
        .finalize();
    let mut tag = [0u8; 8];
    tag[2..].copy_from_slice(&digest[..6]);
    u64::from_be_bytes(tag) | MADE
}

/// Whether `node_id` was made by its node (N1), not configured.
pub fn is_made(node_id: u64) -> bool {
    node_id >> 63 == 1
}

/// Whether two made node ids are one node's, at one address or two (N5).
pub fn same_node(a: u64, b: u64) -> bool {
    is_made(a) && is_made(b) && a >> 16 == b >> 16
}

/// The node id of the node tagged `tag` at `address` (N1).
pub fn node_id(tag: u64, address: u16) -> u64 {
    (tag & 0xffff_ffff_ffff) << 16 | u64::from(address)
}

/// The address in `node_id` (its low 16 bits; 0 is none).
pub fn address_of(node_id: u64) -> u16 {
    node_id as u16
}

/// The address a node tagged `tag` asks for first (N2): the one it last
/// held, or one drawn from its tag.
pub fn preferred(stored: Option<u16>, tag: u64, space: u16) -> u16 {
    match stored {
        Some(a) if a != 0 && a <= space => a,
        _ => candidate(tag, 0, space),
    }
}

/// The `attempt`-th address drawn from `tag`, from 1 to `space`.
fn candidate(tag: u64, attempt: u32, space: u16) -> u16 {
    let mixed = (tag ^ u64::from(attempt).wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .wrapping_mul(0xff51_afd7_ed55_8ccd);
    1 + ((mixed >> 32) % u64::from(space.max(1))) as u16
}

/// Whether node `me` must give up its address (N3): an agreed view holds
/// another member at that address with a lower node id. Returns that
/// holder's node id.
pub fn yields_to(view: &View, me: u64) -> Option<u64> {
    let mine = address_of(me);
    // A configured node id never yields (N1).
    if mine == 0 || !is_made(me) {
        return None;
    }
    view.members
        .iter()
        .map(|m| m.node)
        .find(|&n| n < me && address_of(n) == mine)
}

/// An address for the node tagged `tag` that no member of `view` holds
/// (N4), drawn from its tag so that two nodes yielding at once rarely
/// draw the same; never `avoid` (the address it yields).
/// Addresses from 1 to `space`; `None` if every one is held (the node
/// then keeps its own, N4).
pub fn free_address(view: &View, tag: u64, avoid: u16, space: u16) -> Option<u16> {
    let taken = |a: u16| a == avoid || view.members.iter().any(|m| address_of(m.node) == a);
    (1..)
        .map(|attempt| candidate(tag, attempt, space))
        .take(64)
        .find(|&a| !taken(a))
        .or_else(|| (1..=space).find(|&a| !taken(a)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::routes::Member;

    fn view(nodes: &[u64]) -> View {
        let mut members: Vec<Member> = nodes
            .iter()
            .map(|&node| Member { node, epoch: 1 })
            .collect();
        members.sort_by_key(|m| m.node);
        View { number: 1, members }
    }

    #[test]
    fn a_node_id_is_its_tag_and_its_address() {
        let tag = tag_of(&PublicIdentity([7; 32]));
        assert!((MADE..1 << 48).contains(&tag));
        let id = node_id(tag, 42);
        assert_eq!((id >> 16, address_of(id)), (tag, 42));
        assert!(is_made(id) && !is_made(42));
        assert!(same_node(id, node_id(tag, 7)) && !same_node(id, node_id(tag ^ 1, 42)));
        assert_ne!(tag, tag_of(&PublicIdentity([8; 32])));
    }

    #[test]
    fn the_lower_node_id_keeps_an_address_two_claim() {
        let (low, high) = (node_id(MADE | 1, 5), node_id(MADE | 2, 5));
        let v = view(&[5, low, high, node_id(MADE | 3, 6)]);
        assert_eq!(
            yields_to(&v, high),
            Some(5),
            "a configured id keeps its address"
        );
        assert_eq!(yields_to(&v, low), Some(5));
        assert_eq!(yields_to(&v, 5), None, "and never yields");
        assert_eq!(yields_to(&view(&[low, high]), high), Some(low));
        assert_eq!(yields_to(&v, node_id(MADE | 3, 6)), None);
    }

    #[test]
    fn a_yielding_node_takes_an_address_no_member_holds() {
        let v = view(&[node_id(1, 5), node_id(2, 5)]);
        let a = free_address(&v, 2, 5, MAX_ADDRESS).unwrap();
        assert!(a != 5 && a != 0);
        // Every address but one taken: that one.
        let all: Vec<u64> = (1..=MAX_ADDRESS)
            .filter(|&a| a != 77)
            .map(|a| node_id(9, a))
            .collect();
        assert_eq!(free_address(&view(&all), 2, 5, MAX_ADDRESS), Some(77));
        assert_eq!(
            free_address(&view(&[node_id(9, 1)]), 2, 2, 2),
            None,
            "none free"
        );
        assert_eq!(preferred(Some(12), 3, MAX_ADDRESS), 12);
        assert_ne!(preferred(None, 3, MAX_ADDRESS), 0);
        assert!(preferred(Some(12), 3, 4) <= 4);
    }
}
