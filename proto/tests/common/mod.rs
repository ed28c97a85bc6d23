//! The two nodes every test of the core starts from: node ids 0xA and 0xB,
//! epoch 1, one link with `cfg`, and region 1 (key 42, 256 bytes, every
//! permission).

use oae_proto::wire::MAX_FRAME;
use oae_proto::{LinkConfig, Nanos, Node, Permissions, RegionRef, RegionSpec};

pub const R: RegionRef = RegionRef { id: 1, key: 42 };

#[allow(
    dead_code,
    reason = "each test crate takes what it needs of this module"
)]
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

/// Moves frames both ways until neither side has anything to say.
#[allow(
    dead_code,
    reason = "each test crate takes what it needs of this module"
)]
pub fn pump<M: oae_proto::Store>(nodes: &mut [Node<oae_proto::NoObserver, M>; 2], now: Nanos) {
    let mut buf = [0u8; MAX_FRAME];
    loop {
        let mut moved = false;
        for from in 0..2 {
            while let Some(len) = nodes[from].poll_transmit(0, now, &mut buf) {
                nodes[1 - from].handle_frame(0, &buf[..len], now);
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
}
