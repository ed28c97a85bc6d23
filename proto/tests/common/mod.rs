//! The two nodes every test of the core starts from: node ids 0xA and 0xB,
//! epoch 1, one link with `cfg`, and region 1 (key 42, 256 bytes, every
//! permission).

use oae_proto::{LinkConfig, Node, Permissions, RegionRef, RegionSpec};

pub const R: RegionRef = RegionRef { id: 1, key: 42 };

pub fn pair_with(cfg: LinkConfig) -> [Node; 2] {
    let mut nodes = [Node::new(0xA, 1), Node::new(0xB, 1)];
    for n in &mut nodes {
        n.add_link(cfg).unwrap();
        n.register(RegionSpec {
            id: R.id,
            key: R.key,
            len: 256,
            permissions: Permissions::ALL,
        })
        .unwrap();
    }
    nodes
}
