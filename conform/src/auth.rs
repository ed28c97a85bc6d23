//! Authenticated links as PROTOCOL.md ("Authenticated links") gives them,
//! written from the text: the keys each direction derives, the trailer the
//! tester puts on every frame it sends, and the checks on every frame it
//! receives. `--auth-key` turns it on.

use aes_gcm::aead::AeadInPlace;
use aes_gcm::{Aes128Gcm, KeyInit, Nonce};
use hkdf::Hkdf;
use sha2::Sha256;

pub const TRAILER: usize = 24;

/// One authenticated link as the tester sees it.
pub struct Sealer {
    send: Aes128Gcm,
    receive: Aes128Gcm,
    next_pn: u64,
    /// The IUT's newest (epoch, packet number), to check they only grow.
    iut_newest: (u32, u64),
}

/// The AES-128 key of the direction `from` → `to`: HKDF-SHA256 of the link
/// key, no salt, info `oae link v2 ` ‖ from ‖ to ‖ channel (big-endian).
fn direction(key: &[u8; 32], from: [u8; 6], to: [u8; 6], channel: u32) -> Aes128Gcm {
    let mut info = b"oae link v2 ".to_vec();
    info.extend(from);
    info.extend(to);
    info.extend(channel.to_be_bytes());
    let mut okm = [0u8; 16];
    Hkdf::<Sha256>::new(None, key)
        .expand(&info, &mut okm)
        .expect("16 bytes is a valid length");
    Aes128Gcm::new(&okm.into())
}

/// The GMAC tag of `frame` under `cipher`, with the nonce of sender epoch
/// (frame bytes 8-11) ‖ trailer bytes 0-7.
fn tag(cipher: &Aes128Gcm, frame: &[u8], head: &[u8; 8]) -> [u8; 16] {
    let mut nonce = [0u8; 12];
    nonce[..4].copy_from_slice(&frame[8..12]);
    nonce[4..].copy_from_slice(head);
    cipher
        .encrypt_in_place_detached(Nonce::from_slice(&nonce), frame, &mut [])
        .expect("GMAC of a frame")
        .into()
}

impl Sealer {
    pub fn new(key: [u8; 32], tester: [u8; 6], iut: [u8; 6], channel: u32) -> Sealer {
        Sealer {
            send: direction(&key, tester, iut, channel),
            receive: direction(&key, iut, tester, channel),
            next_pn: 1,
            iut_newest: (0, 0),
        }
    }

    /// `frame` with its trailer: key 0 (the only one the tester holds), the
    /// next packet number.
    pub fn seal(&mut self, frame: &[u8]) -> Vec<u8> {
        let pn = self.next_pn;
        self.next_pn += 1;
        self.seal_as(frame, 0, pn)
    }

    /// `frame` with a trailer naming key `key_no` and packet number `pn`,
    /// tagged under the tester's key.
    pub fn seal_as(&self, frame: &[u8], key_no: u8, pn: u64) -> Vec<u8> {
        let mut head = [0u8; 8];
        head[0] = key_no;
        head[1] = 0x01;
        head[2..].copy_from_slice(&pn.to_be_bytes()[2..]);
        let mut out = frame.to_vec();
        out.extend(head);
        out.extend(tag(&self.send, frame, &head));
        out
    }

    /// A packet number the tester has not used (for forged frames).
    pub fn take_pn(&mut self) -> u64 {
        self.next_pn += 1;
        self.next_pn - 1
    }

    /// The OAE frame inside an IUT's frame, or what is wrong with its
    /// trailer.
    pub fn open(&mut self, bytes: &[u8]) -> Result<Vec<u8>, String> {
        if bytes.len() < 64 + TRAILER {
            return Err(format!("{} bytes: no room for a trailer", bytes.len()));
        }
        let (frame, trailer) = bytes.split_at(bytes.len() - TRAILER);
        let head: [u8; 8] = trailer[..8].try_into().expect("eight bytes");
        if head[0] != 0 || head[1] != 0x01 {
            return Err(format!(
                "trailer key {} accepts {:#04x}: with one key (0) at both ends, 0 and 0x01",
                head[0], head[1]
            ));
        }
        if tag(&self.receive, frame, &head)[..] != trailer[8..] {
            return Err("a tag that does not verify under the IUT's direction key".into());
        }
        let epoch = u32::from_be_bytes(frame[8..12].try_into().expect("four bytes"));
        let mut pn = [0u8; 8];
        pn[2..].copy_from_slice(&head[2..]);
        let pn = u64::from_be_bytes(pn);
        if (epoch, pn) <= self.iut_newest {
            return Err(format!(
                "packet number {pn} of epoch {epoch} after {:?}: numbers must grow",
                self.iut_newest
            ));
        }
        self.iut_newest = (epoch, pn);
        Ok(frame.to_vec())
    }
}

/// Frames that fail authentication, each one a TICK the IUT would answer
/// were it genuine: a bad tag, a key number the IUT does not hold, no
/// trailer, a replay of a frame it answered, and an older epoch. None is
/// answered, and a genuine TICK afterwards is: the link lives.
pub fn forged_frames(c: &mut crate::ctx::Ctx) -> crate::ctx::Outcome {
    use crate::ctx::{SILENCE, fail};
    use crate::frame::{self, TICK};
    if c.peer.auth.is_none() {
        return fail("give --auth-key");
    }
    let round = (c.peer.round.as_nanos() as u64).to_be_bytes();
    let tick = |c: &mut crate::ctx::Ctx, epoch: u32| {
        let mut h = c.peer.header(TICK, 0, 0x0A07);
        h.sender_epoch = epoch;
        frame::build(&h, &round)
    };
    // A forged TICK's silence is concluded after the silence every clause
    // uses; a genuine TICK's TOCK is waited for as long as any answer (a
    // loaded machine may be slow).
    let answered = |c: &mut crate::ctx::Ctx, bytes: &[u8]| {
        let before = c.peer.tocks;
        c.peer.send_raw(bytes);
        c.peer.quiet(SILENCE);
        c.peer.tocks > before
    };
    let answered_genuine = |c: &mut crate::ctx::Ctx, bytes: &[u8]| {
        let before = c.peer.tocks;
        c.peer.send_raw(bytes);
        let deadline = std::time::Instant::now() + crate::peer::ANSWER;
        while c.peer.tocks == before && std::time::Instant::now() < deadline {
            c.peer.next(SILENCE);
        }
        c.peer.tocks > before
    };
    let epoch = c.peer.epoch;
    let genuine = {
        let t = tick(c, epoch);
        c.peer.auth.as_mut().expect("checked").seal(&t)
    };
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    let t = tick(c, epoch);
    let mut bad_tag = c.peer.auth.as_mut().expect("checked").seal(&t);
    *bad_tag.last_mut().expect("a tag") ^= 1;
    cases.push(("a tag that does not verify (bad_tag)", bad_tag));
    let t = tick(c, epoch);
    let sealer = c.peer.auth.as_mut().expect("checked");
    let pn = sealer.take_pn();
    cases.push((
        "key number 3, which the IUT does not hold (unknown_key)",
        sealer.seal_as(&t, 3, pn),
    ));
    cases.push(("no trailer (unauthenticated)", tick(c, epoch)));
    let t = tick(c, epoch - 1);
    let sealer = c.peer.auth.as_mut().expect("checked");
    let pn = sealer.take_pn();
    cases.push((
        "sender epoch below the highest verified (old_epoch)",
        sealer.seal_as(&t, 0, pn),
    ));
    if !answered_genuine(c, &genuine) {
        return fail("a genuine sealed TICK was not answered");
    }
    cases.push(("the same sealed TICK again (replayed)", genuine));
    for (what, bytes) in cases {
        if answered(c, &bytes) {
            return fail(format!("a TICK with {what} was answered"));
        }
    }
    let t = tick(c, epoch);
    let sealed = c.peer.auth.as_mut().expect("checked").seal(&t);
    if !answered_genuine(c, &sealed) {
        return fail("after the forged frames a genuine TICK was not answered");
    }
    Ok(())
}
