//! The dataplane's own node id, when its configuration gives none
//! (docs/PROTOCOL.md, "Addresses"): its identity's tag and an address,
//! the one it last held (kept in the state directory) or one drawn from
//! the tag; and what it does when a lower node id holds that address.

use std::path::Path;

use oae_proto::address::{self, MAX_ADDRESS};
use oae_proto::identity::PublicIdentity;

use crate::state_file;

const FILE: &str = "address";

/// The node id the dataplane with `identity` runs as: the address it last
/// held (N2), stored again as the one it holds now.
pub fn made_node_id(state_dir: &Path, identity: &PublicIdentity) -> Result<u64, String> {
    let stored = state_file::read(state_dir, FILE, "an address (1 to 65535)")?;
    let stored = match stored {
        Some(a) => Some(u16::try_from(a).ok().filter(|&a| a != 0).ok_or_else(|| {
            format!(
                "{} holds {a}, not an address (1 to 65535): fix or remove it",
                state_dir.join(FILE).display()
            )
        })?),
        None => None,
    };
    let tag = address::tag_of(identity);
    let chosen = address::preferred(stored, tag, MAX_ADDRESS);
    state_file::store(state_dir, FILE, u64::from(chosen))?;
    Ok(address::node_id(tag, chosen))
}

/// Gives the address up for `new` (N4): stored, so the incarnation that
/// follows runs at it.
pub fn give_up_for(state_dir: &Path, new: u16) -> Result<(), String> {
    state_file::store(state_dir, FILE, u64::from(new))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_address_held_last_is_asked_for_again_and_junk_is_refused() {
        let dir = std::env::temp_dir().join(format!("oae-address-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let me = PublicIdentity([3; 32]);
        let first = made_node_id(&dir, &me).unwrap();
        assert!(address::is_made(first));
        assert_eq!(
            made_node_id(&dir, &me).unwrap(),
            first,
            "stable across restarts"
        );
        give_up_for(&dir, 77).unwrap();
        assert_eq!(address::address_of(made_node_id(&dir, &me).unwrap()), 77);
        std::fs::write(dir.join(FILE), "0").unwrap();
        assert!(
            made_node_id(&dir, &me)
                .unwrap_err()
                .contains("not an address")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
