//! A known-answer vector for the key agreement (PROTOCOL.md, "Key
//! agreement"), written to `vectors/handshake-kat.txt`: two identities,
//! their MACs, epochs and node ids, the ephemeral secrets, the three
//! HANDSHAKE frames, the link key, and the first frame sealed under it.
//!
//! The handshake is run twice: by the core's `KeyAgreement`s, and again
//! from the specification's text alone (snow with the ephemeral secrets
//! fixed, the prologue, payloads and link key built here as PROTOCOL.md
//! says); the bytes must agree. `OAE_WRITE_VECTORS=1` rewrites the file.

use std::sync::Arc;

use hkdf::Hkdf;
use oae_proto::auth::{AUTH_TRAILER_LEN, Authenticator, LinkIdentity, LinkKey};
use oae_proto::handshake::{KeyAgreement, KeyAgreementConfig, Outcome};
use oae_proto::identity::{IdentitySecret, Trust};
use oae_proto::wire::{self, Context, Frame, Knowledge, Role, Transition};
use sha2::{Digest, Sha256};

const A_MAC: [u8; 6] = [0x02, 0x0a, 0xe0, 0x00, 0x00, 0x01];
const B_MAC: [u8; 6] = [0x02, 0x0a, 0xe0, 0x00, 0x00, 0x02];
const CHANNEL: u32 = 0;
const A_SECRET: [u8; 32] = [0xa1; 32];
const B_SECRET: [u8; 32] = [0xb2; 32];
const A_EPOCH: u32 = 7;
const A_NODE: u64 = 0x0a;
const B_EPOCH: u32 = 9;
const B_NODE: u64 = 0x0b;
const A_SEED: [u8; 32] = [0x5a; 32];
const B_SEED: [u8; 32] = [0x5b; 32];

fn hex(b: &[u8]) -> String {
    oae_common::hex::encode(b)
}

fn agreement(
    secret: [u8; 32],
    peer: [u8; 32],
    link: LinkIdentity,
    seed: [u8; 32],
    me: (u32, u64),
) -> KeyAgreement {
    let cfg = KeyAgreementConfig {
        identity: Arc::new(IdentitySecret::from_bytes(secret)),
        trust: Arc::new(Trust::of([IdentitySecret::from_bytes(peer).public()])),
        seed,
        retry_interval: 1_000_000,
        retry_limit: 1_000_000_000,
        rekey_after: 1 << 32,
    };
    KeyAgreement::new(cfg, link, me)
}

/// The prologue: `oae handshake v1`, initiator MAC, responder MAC, channel.
fn prologue() -> Vec<u8> {
    named(A_MAC, B_MAC)
}

/// The link as an end names it (itself first), in the prologue's form.
fn named(first: [u8; 6], second: [u8; 6]) -> Vec<u8> {
    let mut p = b"oae handshake v1".to_vec();
    p.extend_from_slice(&first);
    p.extend_from_slice(&second);
    p.extend_from_slice(&CHANNEL.to_be_bytes());
    p
}

/// The ephemeral secret of an end's first handshake on this link, as the
/// core draws it from its seed and the link as it names it (not part of
/// the protocol: any random secret will do; here so the vector replays).
fn ephemeral(seed: [u8; 32], link: Vec<u8>) -> [u8; 32] {
    let handshake_seed: [u8; 32] = Sha256::new()
        .chain_update(b"oae handshake seed")
        .chain_update(seed)
        .chain_update(link)
        .chain_update(1u64.to_be_bytes())
        .finalize()
        .into();
    Sha256::new()
        .chain_update(b"oae noise random")
        .chain_update(handshake_seed)
        .chain_update(0u64.to_be_bytes())
        .finalize()
        .into()
}

fn a_ephemeral() -> [u8; 32] {
    ephemeral(A_SEED, named(A_MAC, B_MAC))
}

fn b_ephemeral() -> [u8; 32] {
    ephemeral(B_SEED, named(B_MAC, A_MAC))
}

fn payload(epoch: u32, node: u64) -> [u8; 12] {
    let mut p = [0u8; 12];
    p[..4].copy_from_slice(&epoch.to_be_bytes());
    p[4..].copy_from_slice(&node.to_be_bytes());
    p
}

/// A HANDSHAKE frame as PROTOCOL.md lays it out.
fn frame(number: u8, epochs: (u32, u32), message: &[u8]) -> Vec<u8> {
    let ctx = Context {
        class: 2,
        knowledge: Knowledge::Nothing,
        role: Role::Alice,
        transition: Transition::Handshake,
        previous_committed: false,
        field: u32::from(number),
    };
    let mut buf = [0u8; 256];
    let len = wire::build(&mut buf, &ctx, epochs, (0, 0), |p| {
        p[..2].copy_from_slice(&(message.len() as u16).to_be_bytes());
        p[2..2 + message.len()].copy_from_slice(message);
    });
    buf[..len].to_vec()
}

/// snow's primitives with no randomness: the ephemeral keys are fixed.
struct Fixed;

impl snow::types::Random for Fixed {
    fn try_fill_bytes(&mut self, _: &mut [u8]) -> Result<(), snow::Error> {
        panic!("the ephemeral secrets are fixed: nothing is drawn")
    }
}

impl snow::resolvers::CryptoResolver for Fixed {
    fn resolve_rng(&self) -> Option<Box<dyn snow::types::Random>> {
        Some(Box::new(Fixed))
    }
    fn resolve_dh(&self, c: &snow::params::DHChoice) -> Option<Box<dyn snow::types::Dh>> {
        snow::resolvers::DefaultResolver.resolve_dh(c)
    }
    fn resolve_hash(&self, c: &snow::params::HashChoice) -> Option<Box<dyn snow::types::Hash>> {
        snow::resolvers::DefaultResolver.resolve_hash(c)
    }
    fn resolve_cipher(
        &self,
        c: &snow::params::CipherChoice,
    ) -> Option<Box<dyn snow::types::Cipher>> {
        snow::resolvers::DefaultResolver.resolve_cipher(c)
    }
}

/// The handshake from the specification: (frames 1-3, link key).
fn from_the_text() -> ([Vec<u8>; 3], [u8; 32]) {
    let params: snow::params::NoiseParams = "Noise_XX_25519_ChaChaPoly_SHA256".parse().unwrap();
    let (ea, eb, p) = (a_ephemeral(), b_ephemeral(), prologue());
    let mut a = snow::Builder::with_resolver(params.clone(), Box::new(Fixed))
        .local_private_key(&A_SECRET)
        .unwrap()
        .prologue(&p)
        .unwrap()
        .fixed_ephemeral_key_for_testing_only(&ea)
        .build_initiator()
        .unwrap();
    let mut b = snow::Builder::with_resolver(params, Box::new(Fixed))
        .local_private_key(&B_SECRET)
        .unwrap()
        .prologue(&p)
        .unwrap()
        .fixed_ephemeral_key_for_testing_only(&eb)
        .build_responder()
        .unwrap();
    let (mut m, mut out) = ([0u8; 200], [0u8; 200]);
    let n1 = a.write_message(&payload(A_EPOCH, A_NODE), &mut m).unwrap();
    let f1 = frame(1, (A_EPOCH, 0), &m[..n1]);
    b.read_message(&m[..n1], &mut out).unwrap();
    let n2 = b.write_message(&payload(B_EPOCH, B_NODE), &mut m).unwrap();
    let f2 = frame(2, (B_EPOCH, 0), &m[..n2]);
    a.read_message(&m[..n2], &mut out).unwrap();
    let n3 = a.write_message(&payload(A_EPOCH, A_NODE), &mut m).unwrap();
    // The initiator names the epoch of the key it now holds.
    let f3 = frame(3, (A_EPOCH, B_EPOCH), &m[..n3]);
    b.read_message(&m[..n3], &mut out).unwrap();
    let h = a.get_handshake_hash().to_vec();
    assert_eq!(h, b.get_handshake_hash());
    let (k1, k2) = a.dangerously_get_raw_split();
    let mut key = [0u8; 32];
    Hkdf::<Sha256>::new(Some(&h), &[k1, k2].concat())
        .expand(b"oae link key v1", &mut key)
        .unwrap();
    ([f1, f2, f3], key)
}

#[test]
fn the_handshake_known_answer_vector_is_the_cores() {
    let link = LinkIdentity {
        local_mac: A_MAC,
        peer_mac: B_MAC,
        channel: CHANNEL,
    };
    let mut a = agreement(A_SECRET, B_SECRET, link, A_SEED, (A_EPOCH, A_NODE));
    let mut b = agreement(
        B_SECRET,
        A_SECRET,
        link.reversed(),
        B_SEED,
        (B_EPOCH, B_NODE),
    );
    let mut buf = [0u8; 256];
    let mut send = |from: &mut KeyAgreement, to: &mut KeyAgreement| {
        let len = from.poll_transmit(0, &mut buf).expect("a message");
        let f = buf[..len].to_vec();
        (to.handle(&Frame::parse(&f).unwrap(), 0), f)
    };
    let (_, f1) = send(&mut a, &mut b);
    let (at_a, f2) = send(&mut b, &mut a);
    let (at_b, f3) = send(&mut a, &mut b);
    let (Outcome::Keyed(ka), Outcome::Keyed(kb)) = (at_a, at_b) else {
        panic!("both ends keyed")
    };
    assert_eq!(ka, kb);
    let (text_frames, text_key) = from_the_text();
    assert_eq!(
        [&f1, &f2, &f3],
        [&text_frames[0], &text_frames[1], &text_frames[2]]
    );
    assert_eq!(ka.0, text_key);

    // The first frame a seals under the key: its HELLO naming b's epoch.
    let mut sealer = Authenticator::new(link, 0, &LinkKey(text_key));
    let hello = Context {
        class: 0,
        knowledge: Knowledge::KnowYou,
        role: Role::Alice,
        transition: Transition::Hello,
        previous_committed: false,
        field: 0,
    };
    let mut sealed = [0u8; 64 + AUTH_TRAILER_LEN];
    let len = wire::build(&mut sealed, &hello, (A_EPOCH, B_EPOCH), (0, 0), |p| {
        p[..8].copy_from_slice(&A_NODE.to_be_bytes());
        p[8..10].copy_from_slice(&64u16.to_be_bytes());
        p[10..12].copy_from_slice(&64u16.to_be_bytes());
        p[12] = 4;
    });
    let sealed_len = sealer.seal(&mut sealed, len).expect("room for the trailer");

    let public = |s: [u8; 32]| IdentitySecret::from_bytes(s).public().to_string();
    let text = format!(
        "# Key agreement, known answer (docs/PROTOCOL.md, \"Key agreement\").\n\
         # Noise_XX_25519_ChaChaPoly_SHA256; every value hex; frames without Ethernet header.\n\
         # Generated by proto/tests/handshake_kat.rs (OAE_WRITE_VECTORS=1).\n\
         initiator_mac {}\nresponder_mac {}\nchannel {CHANNEL}\n\
         initiator_static_secret {}\ninitiator_identity {}\n\
         responder_static_secret {}\nresponder_identity {}\n\
         initiator_epoch {A_EPOCH}\ninitiator_node_id {A_NODE}\n\
         responder_epoch {B_EPOCH}\nresponder_node_id {B_NODE}\n\
         initiator_ephemeral_secret {}\nresponder_ephemeral_secret {}\n\
         prologue {}\n\
         frame_1 {}\nframe_2 {}\nframe_3 {}\n\
         link_key {}\n\
         # The initiator's HELLO at level 1 naming the responder's epoch, sealed under\n\
         # the link key (key number 0, packet number 1).\n\
         first_sealed_frame {}\n",
        hex(&A_MAC),
        hex(&B_MAC),
        hex(&A_SECRET),
        public(A_SECRET),
        hex(&B_SECRET),
        public(B_SECRET),
        hex(&a_ephemeral()),
        hex(&b_ephemeral()),
        hex(&prologue()),
        hex(&f1),
        hex(&f2),
        hex(&f3),
        hex(&text_key),
        hex(&sealed[..sealed_len]),
    );
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../vectors/handshake-kat.txt");
    if std::env::var_os("OAE_WRITE_VECTORS").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == text,
        "vectors/handshake-kat.txt is not what the core does now: run `cargo xtask vectors`"
    );
}
