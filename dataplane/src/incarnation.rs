//! Who a dataplane is while it runs: its epoch (new at every start), its
//! identity (when it agrees keys or makes its node id) and its node id
//! (configured, or made from the identity and an address).

use std::path::Path;
use std::sync::Arc;

use oae_config::Config;
use oae_proto::identity::IdentitySecret;

#[derive(Clone)]
pub struct Incarnation {
    pub node_id: u64,
    pub epoch: u32,
    pub identity: Option<Arc<IdentitySecret>>,
}

impl Incarnation {
    /// The next incarnation of the dataplane `config` describes, with its
    /// state in `state_dir`: the epoch stored there grows by one.
    pub fn begin(config: &Config, state_dir: &Path) -> Result<Incarnation, String> {
        Incarnation::at(config, state_dir, crate::epoch::next(state_dir)?)
    }

    /// The dataplane as incarnation `epoch` (an embedding application's).
    pub fn at(config: &Config, state_dir: &Path, epoch: u32) -> Result<Incarnation, String> {
        let identity = config
            .needs_identity()
            .then(|| crate::identity::load_or_create(&config.identity_file(state_dir)))
            .transpose()?
            .map(Arc::new);
        let node_id = match (config.node_id, &identity) {
            (Some(id), _) => id,
            (None, Some(identity)) => crate::address::made_node_id(state_dir, &identity.public())?,
            (None, None) => return Err("no identity to make a node id from".into()),
        };
        Ok(Incarnation {
            node_id,
            epoch,
            identity,
        })
    }

    /// A stand-in that touches no file, for checking a configuration.
    pub fn rehearsal(config: &Config) -> Incarnation {
        Incarnation {
            node_id: config.node_id.unwrap_or(1),
            epoch: 1,
            identity: Some(Arc::new(IdentitySecret::from_bytes([1; 32]))),
        }
    }
}
