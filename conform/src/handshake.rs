//! Key agreement as PROTOCOL.md ("Key agreement") gives it, written from
//! the text: the tester takes part in the IUT's Noise XX handshake with an
//! identity the IUT trusts, derives the link key, and from then on seals
//! and checks every frame under it. `--identity-file` turns it on.

use std::time::{Duration, Instant};

use hkdf::Hkdf;
use sha2::Sha256;
use snow::{Builder, HandshakeState};

use crate::frame::{self, HANDSHAKE, Header};
use crate::peer::Peer;

const PATTERN: &str = "Noise_XX_25519_ChaChaPoly_SHA256";
/// How often the tester repeats a message that has not been answered.
const REPEAT: Duration = Duration::from_millis(200);

/// What the handshake gave: the link key and the identity the IUT proved.
pub struct Agreed {
    pub key: [u8; 32],
    pub iut_identity: [u8; 32],
}

fn hex(b: &[u8]) -> String {
    frame::hex(b)
}

/// The 32-byte prologue: `oae handshake v1`, the initiator's MAC, the
/// responder's, the channel.
fn prologue(initiator: [u8; 6], responder: [u8; 6], channel: u32) -> Vec<u8> {
    let mut p = b"oae handshake v1".to_vec();
    p.extend(initiator);
    p.extend(responder);
    p.extend(channel.to_be_bytes());
    p
}

/// A HANDSHAKE frame: class 2, level 0, Alice, field = message number,
/// order 0; payload = length (u16) ‖ message.
fn handshake_frame(number: u8, epochs: (u32, u32), message: &[u8]) -> Vec<u8> {
    let h = Header {
        class: 2,
        level: 0,
        bob: false,
        transition: HANDSHAKE,
        previous_committed: false,
        field: u32::from(number),
        sender_epoch: epochs.0,
        receiver_epoch: epochs.1,
        order: 0,
        seen: 0,
    };
    let mut payload = (message.len() as u16).to_be_bytes().to_vec();
    payload.extend_from_slice(message);
    frame::build(&h, &payload)
}

/// The next HANDSHAKE message `number` from the IUT, within `limit`.
fn receive(peer: &mut Peer, number: u32, limit: Duration) -> Option<Vec<u8>> {
    let deadline = Instant::now() + limit;
    while let Some(bytes) = peer.recv_raw(deadline.saturating_duration_since(Instant::now())) {
        let Ok(f) = frame::parse(&bytes) else {
            continue;
        };
        if f.transition() != HANDSHAKE || f.header.field != number || f.header.class != 2 {
            continue;
        }
        let p = f.payload();
        let len = usize::from(u16::from_be_bytes([p[0], p[1]]));
        if len <= 108 && p[2 + len..].iter().all(|&b| b == 0) {
            return Some(p[2..2 + len].to_vec());
        }
    }
    None
}

/// The link key from a finished handshake: HKDF-SHA256, salt the handshake
/// hash, input both split keys, info `oae link key v1`.
fn link_key(mut hs: HandshakeState) -> Result<Agreed, String> {
    let iut_identity: [u8; 32] = hs
        .get_remote_static()
        .and_then(|s| s.try_into().ok())
        .ok_or("the IUT proved no identity")?;
    let h = hs.get_handshake_hash().to_vec();
    let (k1, k2) = hs.dangerously_get_raw_split();
    let mut key = [0u8; 32];
    Hkdf::<Sha256>::new(Some(&h), &[k1, k2].concat())
        .expand(b"oae link key v1", &mut key)
        .expect("32 bytes is a valid length");
    Ok(Agreed { key, iut_identity })
}

/// Runs the handshake with the IUT as the tester, of identity `secret`:
/// the end with the lower MAC starts it (K2), so the tester answers the
/// IUT's message 1 unless its own MAC is the lower.
pub fn agree(
    peer: &mut Peer,
    secret: &[u8; 32],
    channel: u32,
    limit: Duration,
) -> Result<Agreed, String> {
    let (me, iut) = (peer.mac(), peer.iut_mac());
    // Before bring-up the tester has no epoch yet: its frames say 1 (0 is
    // never a sender epoch); the key outlives the tester's incarnations.
    let epoch = peer.epoch.max(1);
    let payload = {
        let mut p = epoch.to_be_bytes().to_vec();
        p.extend(peer.node_id.to_be_bytes());
        p
    };
    let build = |initiator: bool, prologue: &[u8]| -> Result<HandshakeState, String> {
        let b = Builder::new(PATTERN.parse().expect("a valid pattern"))
            .local_private_key(secret)
            .and_then(|b| b.prologue(prologue))
            .map_err(|e| format!("Noise: {e}"))?;
        if initiator {
            b.build_initiator()
        } else {
            b.build_responder()
        }
        .map_err(|e| format!("Noise: {e}"))
    };
    let deadline = Instant::now() + limit;
    let left = || deadline.saturating_duration_since(Instant::now());
    let mut out = [0u8; 256];
    let mut read = [0u8; 256];
    if me < iut {
        let mut hs = build(true, &prologue(me, iut, channel))?;
        let n = hs
            .write_message(&payload, &mut out)
            .map_err(|e| e.to_string())?;
        let msg1 = handshake_frame(1, (epoch, 0), &out[..n]);
        let msg2 = loop {
            peer.send_raw(&msg1);
            if let Some(m) = receive(peer, 2, REPEAT.min(left())) {
                break m;
            }
            if left().is_zero() {
                return Err("no message 2 from the IUT".into());
            }
        };
        hs.read_message(&msg2, &mut read)
            .map_err(|e| format!("message 2 does not verify: {e}: {}", hex(&msg2)))?;
        let iut_epoch = u32::from_be_bytes(read[..4].try_into().expect("four bytes"));
        let n = hs
            .write_message(&payload, &mut out)
            .map_err(|e| e.to_string())?;
        peer.send_raw(&handshake_frame(3, (epoch, iut_epoch), &out[..n]));
        return link_key(hs);
    }
    let msg1 = receive(peer, 1, left()).ok_or("no message 1 from the IUT")?;
    let mut hs = build(false, &prologue(iut, me, channel))?;
    hs.read_message(&msg1, &mut read)
        .map_err(|e| format!("message 1 does not parse: {e}: {}", hex(&msg1)))?;
    let n = hs
        .write_message(&payload, &mut out)
        .map_err(|e| e.to_string())?;
    let msg2 = handshake_frame(2, (epoch, 0), &out[..n]);
    peer.send_raw(&msg2);
    // The IUT repeats message 1 while message 2 is lost: answer it again.
    let msg3 = loop {
        let Some(bytes) = peer.recv_raw(left()) else {
            return Err("no message 3 from the IUT".into());
        };
        let Ok(f) = frame::parse(&bytes) else {
            continue;
        };
        if f.transition() != HANDSHAKE {
            continue;
        }
        let p = f.payload();
        let len = usize::from(u16::from_be_bytes([p[0], p[1]])).min(108);
        match f.header.field {
            1 => peer.send_raw(&msg2),
            3 => break p[2..2 + len].to_vec(),
            _ => {}
        }
    };
    hs.read_message(&msg3, &mut read)
        .map_err(|e| format!("message 3 does not verify: {e}: {}", hex(&msg3)))?;
    link_key(hs)
}
