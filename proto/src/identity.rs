//! Who a node is: a long-lived X25519 key pair (its identity, distinct
//! from its address), and the list of identities a node lets join.

use snow::params::DHChoice;
use snow::resolvers::{CryptoResolver, DefaultResolver};

/// Bytes of an identity, public or secret.
pub const IDENTITY_LEN: usize = 32;

/// A node's secret identity key. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct IdentitySecret([u8; IDENTITY_LEN]);

impl core::fmt::Debug for IdentitySecret {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "IdentitySecret(<secret> of {})", self.public())
    }
}

impl IdentitySecret {
    /// The identity whose secret is `bytes` (32 random bytes: any value is
    /// a valid X25519 secret, clamped where it is used).
    pub fn from_bytes(bytes: [u8; IDENTITY_LEN]) -> IdentitySecret {
        IdentitySecret(bytes)
    }

    pub fn as_bytes(&self) -> &[u8; IDENTITY_LEN] {
        &self.0
    }

    /// The public half, by which peers know this node.
    pub fn public(&self) -> PublicIdentity {
        let mut dh = DefaultResolver
            .resolve_dh(&DHChoice::Curve25519)
            .expect("the default resolver has X25519");
        dh.set(&self.0);
        let mut public = [0u8; IDENTITY_LEN];
        public.copy_from_slice(dh.pubkey());
        PublicIdentity(public)
    }
}

/// A node's public identity: its X25519 public key.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PublicIdentity(pub [u8; IDENTITY_LEN]);

impl PublicIdentity {
    /// Parses 64 hex digits.
    pub fn from_hex(text: &str) -> Result<PublicIdentity, String> {
        let bytes = oae_common::hex::decode(text.trim())
            .map_err(|e| format!("an identity is 64 hex digits: {e}"))?;
        let len = bytes.len();
        bytes
            .try_into()
            .map(PublicIdentity)
            .map_err(|_| format!("an identity is 64 hex digits (32 bytes), not {}", 2 * len))
    }

    /// The first eight bytes in hex: enough to tell identities apart in a
    /// log line.
    pub fn short(&self) -> String {
        self.to_string()[..16].to_string()
    }
}

impl core::fmt::Display for PublicIdentity {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&oae_common::hex::encode(&self.0))
    }
}

impl core::fmt::Debug for PublicIdentity {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "PublicIdentity({})", self.short())
    }
}

/// The identities a node lets bring a link up: a link whose peer proves
/// any other identity is refused.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trust {
    trusted: Vec<PublicIdentity>,
}

impl Trust {
    pub fn of(identities: impl IntoIterator<Item = PublicIdentity>) -> Trust {
        let mut trusted: Vec<_> = identities.into_iter().collect();
        trusted.sort();
        trusted.dedup();
        Trust { trusted }
    }

    pub fn trusts(&self, identity: &PublicIdentity) -> bool {
        self.trusted.binary_search(identity).is_ok()
    }

    pub fn len(&self) -> usize {
        self.trusted.len()
    }

    pub fn is_empty(&self) -> bool {
        self.trusted.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_identity_is_the_x25519_public_key_and_round_trips_as_hex() {
        // RFC 7748, section 6.1: Alice's secret and public key.
        let secret = PublicIdentity::from_hex(
            "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a",
        )
        .unwrap();
        let public = IdentitySecret::from_bytes(secret.0).public();
        assert_eq!(
            public.to_string(),
            "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"
        );
        assert_eq!(PublicIdentity::from_hex(&public.to_string()), Ok(public));
        assert!(PublicIdentity::from_hex("zz").is_err());
        assert!(PublicIdentity::from_hex(&"g".repeat(64)).is_err());
    }

    #[test]
    fn trust_holds_exactly_its_list() {
        let a = IdentitySecret::from_bytes([1; 32]).public();
        let b = IdentitySecret::from_bytes([2; 32]).public();
        let trust = Trust::of([a, a]);
        assert!(trust.trusts(&a) && !trust.trusts(&b));
        assert_eq!(trust.len(), 1);
        assert!(!format!("{:?}", IdentitySecret::from_bytes([1; 32])).contains("0101"));
    }
}
