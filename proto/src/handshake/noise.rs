//! Noise_XX_25519_ChaChaPoly_SHA256, by `snow`, as the key agreement uses
//! it: each call takes the handshake's random seed and the messages so far,
//! so a handshake in progress can be rebuilt from what it keeps (and the
//! node stays `Clone`, as the model checker and the simulator need).

use hkdf::Hkdf;
use sha2::{Digest, Sha256};
use snow::params::{CipherChoice, DHChoice, HashChoice};
use snow::resolvers::{CryptoResolver, DefaultResolver};
use snow::types::{Cipher, Dh, Hash, Random};
use snow::{Builder, HandshakeState};

use crate::auth::LinkKey;
use crate::identity::{IDENTITY_LEN, IdentitySecret, PublicIdentity};

pub const PATTERN: &str = "Noise_XX_25519_ChaChaPoly_SHA256";
/// Largest handshake message: message 2 is e (32), s sealed (48) and a
/// sealed payload.
pub const MAX_MESSAGE: usize = 32 + 48 + PAYLOAD_LEN + 16;
/// The payload every message carries: the sender's epoch (u32) and node
/// id (u64), big-endian; sealed in messages 2 and 3.
pub const PAYLOAD_LEN: usize = 12;

/// Why a handshake message was not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rejected;

/// Random bytes for one handshake: SHA-256 of the seed and a counter, so a
/// simulator's seed replays a handshake exactly and a dataplane's seed
/// comes from the operating system.
struct SeededRandom {
    seed: [u8; 32],
    counter: u64,
}

impl Random for SeededRandom {
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), snow::Error> {
        for chunk in dest.chunks_mut(32) {
            let block = Sha256::new()
                .chain_update(b"oae noise random")
                .chain_update(self.seed)
                .chain_update(self.counter.to_be_bytes())
                .finalize();
            self.counter += 1;
            chunk.copy_from_slice(&block[..chunk.len()]);
        }
        Ok(())
    }
}

struct SeededResolver([u8; 32]);

impl CryptoResolver for SeededResolver {
    fn resolve_rng(&self) -> Option<Box<dyn Random>> {
        Some(Box::new(SeededRandom {
            seed: self.0,
            counter: 0,
        }))
    }
    fn resolve_dh(&self, choice: &DHChoice) -> Option<Box<dyn Dh>> {
        DefaultResolver.resolve_dh(choice)
    }
    fn resolve_hash(&self, choice: &HashChoice) -> Option<Box<dyn Hash>> {
        DefaultResolver.resolve_hash(choice)
    }
    fn resolve_cipher(&self, choice: &CipherChoice) -> Option<Box<dyn Cipher>> {
        DefaultResolver.resolve_cipher(choice)
    }
}

/// What one side brings to a handshake.
pub struct Side<'a> {
    pub identity: &'a IdentitySecret,
    /// Bound into the handshake hash: both ends must give the same bytes.
    pub prologue: &'a [u8],
    pub seed: [u8; 32],
    pub payload: [u8; PAYLOAD_LEN],
}

impl Side<'_> {
    fn build(&self, initiator: bool) -> HandshakeState {
        let params = PATTERN.parse().expect("a valid Noise pattern");
        let builder = Builder::with_resolver(params, Box::new(SeededResolver(self.seed)))
            .local_private_key(self.identity.as_bytes())
            .and_then(|b| b.prologue(self.prologue))
            .expect("each is set once");
        if initiator {
            builder.build_initiator()
        } else {
            builder.build_responder()
        }
        .expect("the resolver has every primitive of the pattern")
    }
}

/// A finished handshake: the peer's proven identity and payload, the link
/// key both ends derived.
pub struct Agreed {
    pub peer: PublicIdentity,
    pub peer_payload: [u8; PAYLOAD_LEN],
    pub key: LinkKey,
}

fn write(hs: &mut HandshakeState, payload: &[u8]) -> Vec<u8> {
    let mut out = [0u8; MAX_MESSAGE];
    let len = hs
        .write_message(payload, &mut out)
        .expect("the message fits and it is this side's turn");
    out[..len].to_vec()
}

fn read(hs: &mut HandshakeState, message: &[u8]) -> Result<[u8; PAYLOAD_LEN], Rejected> {
    let mut payload = [0u8; MAX_MESSAGE];
    let len = hs
        .read_message(message, &mut payload)
        .map_err(|_| Rejected)?;
    payload[..len].try_into().map_err(|_| Rejected)
}

/// The link key: HKDF-SHA256 over both of Noise's split keys, salted with
/// the handshake hash (which covers the prologue: the link's identity).
fn finish(mut hs: HandshakeState, peer_payload: [u8; PAYLOAD_LEN]) -> Result<Agreed, Rejected> {
    let peer: [u8; IDENTITY_LEN] = hs
        .get_remote_static()
        .and_then(|s| s.try_into().ok())
        .ok_or(Rejected)?;
    let hash = hs.get_handshake_hash().to_vec();
    let (k1, k2) = hs.dangerously_get_raw_split();
    let mut secret = [0u8; 64];
    secret[..32].copy_from_slice(&k1);
    secret[32..].copy_from_slice(&k2);
    let mut key = [0u8; 32];
    Hkdf::<Sha256>::new(Some(&hash), &secret)
        .expand(b"oae link key v1", &mut key)
        .expect("32 bytes is a valid HKDF-SHA256 output length");
    Ok(Agreed {
        peer: PublicIdentity(peer),
        peer_payload,
        key: LinkKey(key),
    })
}

/// Message 1 (`-> e`), and the initiator's state after it.
pub fn initiate(me: &Side<'_>) -> (HandshakeState, Vec<u8>) {
    let mut hs = me.build(true);
    let msg1 = write(&mut hs, &me.payload);
    (hs, msg1)
}

/// The responder's answer to message 1 (`<- e, ee, s, es`), with its
/// state and the initiator's payload.
pub fn respond(
    me: &Side<'_>,
    msg1: &[u8],
) -> Result<(HandshakeState, Vec<u8>, [u8; PAYLOAD_LEN]), Rejected> {
    let mut hs = me.build(false);
    let payload = read(&mut hs, msg1)?;
    let msg2 = write(&mut hs, &me.payload);
    Ok((hs, msg2, payload))
}

/// The initiator takes message 2. The responder's identity is known from
/// here: `admit` decides whether to go on. Then message 3 (`-> s, se`).
pub fn complete_initiator(
    mut hs: HandshakeState,
    msg2: &[u8],
    payload: &[u8; PAYLOAD_LEN],
    admit: impl FnOnce(&PublicIdentity) -> bool,
) -> Result<Result<(Vec<u8>, Agreed), PublicIdentity>, Rejected> {
    let peer_payload = read(&mut hs, msg2)?;
    let peer = PublicIdentity(
        hs.get_remote_static()
            .and_then(|s| s.try_into().ok())
            .ok_or(Rejected)?,
    );
    if !admit(&peer) {
        return Ok(Err(peer));
    }
    let msg3 = write(&mut hs, payload);
    Ok(Ok((msg3, finish(hs, peer_payload)?)))
}

/// The responder takes message 3: the initiator's identity and the key.
pub fn complete_responder(mut hs: HandshakeState, msg3: &[u8]) -> Result<Agreed, Rejected> {
    let peer_payload = read(&mut hs, msg3)?;
    finish(hs, peer_payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side<'a>(identity: &'a IdentitySecret, seed: u8, prologue: &'a [u8]) -> Side<'a> {
        Side {
            identity,
            prologue,
            seed: [seed; 32],
            payload: [seed; PAYLOAD_LEN],
        }
    }

    #[test]
    fn both_ends_agree_on_one_key_and_learn_each_other() {
        let (a, b) = (
            IdentitySecret::from_bytes([1; 32]),
            IdentitySecret::from_bytes([2; 32]),
        );
        let (hs, msg1) = initiate(&side(&a, 10, b"link"));
        let (hs_b, msg2, p1) = respond(&side(&b, 20, b"link"), &msg1).unwrap();
        assert_eq!(p1, [10; PAYLOAD_LEN]);
        let (msg3, at_a) = complete_initiator(hs, &msg2, &[10; PAYLOAD_LEN], |_| true)
            .unwrap()
            .unwrap();
        let at_b = complete_responder(hs_b, &msg3).unwrap();
        assert_eq!(at_a.key, at_b.key);
        assert_eq!((at_a.peer, at_b.peer), (b.public(), a.public()));
        assert_eq!(at_a.peer_payload, [20; PAYLOAD_LEN]);
        assert_eq!(at_b.peer_payload, [10; PAYLOAD_LEN]);
        // The same seeds replay the same handshake: state can be rebuilt.
        assert_eq!(initiate(&side(&a, 10, b"link")).1, msg1);
        assert!(msg2.len() <= MAX_MESSAGE);
    }

    #[test]
    fn another_prologue_or_a_flipped_bit_is_rejected() {
        let (a, b) = (
            IdentitySecret::from_bytes([1; 32]),
            IdentitySecret::from_bytes([2; 32]),
        );
        let (hs, msg1) = initiate(&side(&a, 10, b"link"));
        // The responder names another link: message 2 does not verify.
        let (_, msg2, _) = respond(&side(&b, 20, b"other"), &msg1).unwrap();
        assert!(complete_initiator(hs, &msg2, &[0; PAYLOAD_LEN], |_| true).is_err());
        let (hs, _) = initiate(&side(&a, 10, b"link"));
        let (_, mut msg2, _) = respond(&side(&b, 20, b"link"), &msg1).unwrap();
        msg2[40] ^= 1;
        assert!(complete_initiator(hs, &msg2, &[0; PAYLOAD_LEN], |_| true).is_err());
    }
}
