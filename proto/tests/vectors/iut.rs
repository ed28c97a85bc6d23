//! The implementation under test as a vector sets it up: one node, one
//! link, two regions. Everything a vector does not name is the default of
//! the configuration reference (`docs/CONFIG.md`).

use oae_proto::{FabricConfig, LinkConfig, Node, Permissions, RegionSpec};

use super::text::{READ_ONLY, REGION, REGION_LEN};

/// What a vector's `iut` line says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setup {
    pub id: u64,
    pub epoch: u32,
    pub slots: u16,
    pub credits: u16,
    pub max_class: u8,
    /// The IUT runs the fabric (PROTOCOL.md, Fabric) with its defaults.
    pub fabric: bool,
}

impl Setup {
    pub const DEFAULT: Setup = Setup {
        id: 0x0A,
        epoch: 1,
        slots: 4,
        credits: 4,
        max_class: 4,
        fabric: false,
    };

    pub fn line(&self) -> String {
        let fabric = if self.fabric { " fabric=1" } else { "" };
        format!(
            "iut id={} epoch={} slots={} credits={} max_class={}{fabric}",
            self.id, self.epoch, self.slots, self.credits, self.max_class
        )
    }

    pub fn parse(line: &str) -> Setup {
        let mut s = Setup::DEFAULT;
        let words = line.strip_prefix("iut ").expect("an iut line");
        for w in words.split_whitespace() {
            let (k, v) = w.split_once('=').unwrap_or_else(|| panic!("{line}: {w}"));
            let v: u64 = v.parse().unwrap_or_else(|_| panic!("{line}: {w}"));
            match k {
                "id" => s.id = v,
                "epoch" => s.epoch = v as u32,
                "slots" => s.slots = v as u16,
                "credits" => s.credits = v as u16,
                "max_class" => s.max_class = v as u8,
                "fabric" => s.fabric = v == 1,
                _ => panic!("{line}: unknown setting {k}"),
            }
        }
        s
    }

    pub fn config(&self) -> LinkConfig {
        LinkConfig {
            slots: self.slots,
            receive_credits: self.credits,
            max_class: self.max_class,
            ..LinkConfig::default()
        }
    }

    pub fn node(&self) -> Node {
        let mut node = Node::new(self.id, self.epoch);
        let config = self.config();
        if self.fabric {
            node.enable_fabric(FabricConfig::for_links(&config), &config)
                .expect("a valid fabric");
        }
        node.add_link(config).expect("a valid link");
        for (r, permissions) in [(REGION, Permissions::ALL), (READ_ONLY, Permissions::READ)] {
            node.register(RegionSpec {
                id: r.id,
                key: r.key,
                len: REGION_LEN,
                permissions,
            })
            .expect("a valid region");
        }
        node
    }
}
