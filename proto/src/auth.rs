//! Authenticated links: a tag on every frame, a replay window, and keys
//! rolled without a pause. Sans-IO like the rest of the core: bytes in,
//! bytes out.
//!
//! An authenticated frame is the OAE frame, unchanged (CRC included),
//! followed by a 24-byte trailer:
//!
//! ```text
//! byte  0      key number used (0-3)
//! byte  1      key numbers the sender accepts (bit n: key n), for key rolls
//! bytes 2-7    packet number (48 bits, big-endian): 1, 2, ... per process
//! bytes 8-23   AES-128-GMAC tag over the OAE frame and trailer bytes 0-7
//! ```
//!
//! Each direction of each link has its own AES-128 key, derived from the
//! link's 256-bit key with HKDF-SHA256 over the link's identity as its
//! sender sees it ([`LinkIdentity`]: the sender's and the receiver's MAC
//! addresses and the channel between them). Two directions, or two links
//! sharing a pair of MACs and a key, therefore never use one nonce under
//! one key, whatever their packet numbers. The 96-bit nonce is the
//! sender epoch (frame bytes 8-11) and trailer bytes 0-7. A receiver
//! checks, before anything else looks at the frame: the trailer is there,
//! the key number is one it holds, the tag verifies, and the frame is not
//! a replay (see [`ReplayWindow`]). Cryptography is RustCrypto's
//! (`aes-gcm`, `hkdf`, `sha2`); nothing here is hand-made.

use aes_gcm::aead::AeadInPlace;
use aes_gcm::aead::consts::U12;
use aes_gcm::{Aes128Gcm, KeyInit, Nonce, Tag};
use hkdf::Hkdf;
use sha2::Sha256;

/// Bytes an authenticated frame carries after the OAE frame.
pub const AUTH_TRAILER_LEN: usize = 24;
/// Key numbers: two live at once during a roll, four to choose from.
pub const KEY_NUMBERS: usize = 4;
/// Frames older than the newest by this many packet numbers are refused
/// (as WireGuard's and MACsec's windows refuse them).
pub const REPLAY_WINDOW: u64 = 64;
const TAG_LEN: usize = 16;
const MAX_PACKET_NUMBER: u64 = (1 << 48) - 1;

/// A link's 256-bit key. Its `Debug` never shows the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct LinkKey(pub [u8; 32]);

impl core::fmt::Debug for LinkKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("LinkKey(<secret>)")
    }
}

/// Why an authenticated link dropped a frame, with a stable code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AuthError {
    /// Too short to hold a frame and its trailer: sent without
    /// authentication, or cut.
    Unauthenticated = 1,
    /// A key number this end does not hold (unknown, or retired).
    UnknownKey = 2,
    /// The tag does not verify: forged, corrupted, or another key.
    BadTag = 3,
    /// A packet number already seen, or too old for the window.
    Replayed = 4,
    /// From an incarnation of the peer older than one already heard.
    OldEpoch = 5,
}

impl AuthError {
    pub const ALL: [AuthError; 5] = [
        AuthError::Unauthenticated,
        AuthError::UnknownKey,
        AuthError::BadTag,
        AuthError::Replayed,
        AuthError::OldEpoch,
    ];

    pub fn name(self) -> &'static str {
        match self {
            AuthError::Unauthenticated => "unauthenticated",
            AuthError::UnknownKey => "unknown_key",
            AuthError::BadTag => "bad_tag",
            AuthError::Replayed => "replayed",
            AuthError::OldEpoch => "old_epoch",
        }
    }
}

/// What an authenticated link counts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct AuthStats {
    pub sealed: u64,
    pub verified: u64,
    /// Frames dropped, by [`AuthError`] in [`AuthError::ALL`] order.
    pub dropped: [u64; 5],
    /// Switches of the key frames are sent under.
    pub key_switches: u64,
    /// Frames that could not be sealed (no room for the trailer in the
    /// buffer lent, or packet numbers spent) and so were not sent: the
    /// link finds them lost, as any loss.
    pub unsealed: u64,
}

/// The two ciphers of one key number: this end's sending direction and
/// the peer's.
#[derive(Clone)]
struct DirectionKeys {
    send: Aes128Gcm,
    receive: Aes128Gcm,
}

/// Frames already accepted, by (sender epoch, packet number): the newest
/// packet number and a bitmap of the 64 below it. Updated only by frames
/// whose tag verified.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayWindow {
    epoch: u32,
    top: u64,
    seen: u64,
}

impl ReplayWindow {
    /// Whether a frame may be new; `accept` records it once its tag is good.
    pub fn check(&self, epoch: u32, pn: u64) -> Result<(), AuthError> {
        if epoch < self.epoch {
            return Err(AuthError::OldEpoch);
        }
        if epoch > self.epoch || pn > self.top {
            return Ok(());
        }
        let behind = self.top - pn;
        if behind >= REPLAY_WINDOW || self.seen & (1 << behind) != 0 {
            return Err(AuthError::Replayed);
        }
        Ok(())
    }

    pub fn accept(&mut self, epoch: u32, pn: u64) {
        if epoch > self.epoch {
            *self = ReplayWindow {
                epoch,
                top: pn,
                seen: 1,
            };
        } else if pn > self.top {
            let ahead = pn - self.top;
            self.seen = if ahead >= REPLAY_WINDOW {
                0
            } else {
                self.seen << ahead
            } | 1;
            self.top = pn;
        } else {
            self.seen |= 1 << (self.top - pn);
        }
    }
}

/// What tells one authenticated link from every other that could share its
/// key: the two MAC addresses and the channel between them. Links between
/// the same two MACs (two queues of one veth pair, steered by queue) differ
/// in their channel, which both ends know alike: the queue number a veth
/// carries the frames on, or 0 where the peer's MAC alone steers the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LinkIdentity {
    pub local_mac: [u8; 6],
    pub peer_mac: [u8; 6],
    pub channel: u32,
}

impl LinkIdentity {
    /// The same link as its peer names it.
    pub fn reversed(self) -> LinkIdentity {
        LinkIdentity {
            local_mac: self.peer_mac,
            peer_mac: self.local_mac,
            channel: self.channel,
        }
    }
}

/// One link's authentication: its keys by number, the key it sends
/// under, the packet number, the replay window.
#[derive(Clone)]
pub struct Authenticator {
    identity: LinkIdentity,
    keys: [Option<DirectionKeys>; KEY_NUMBERS],
    sending: u8,
    /// A key added by a roll: sent under once the peer accepts it.
    rolling_to: Option<u8>,
    /// The key a roll left: retired once both ends send under the new one.
    rolled_from: Option<u8>,
    /// Key numbers the peer said it accepts, in its last good frame.
    peer_accepts: u8,
    next_pn: u64,
    window: ReplayWindow,
    stats: AuthStats,
    /// Keys that renew themselves, for keys agreed by a handshake.
    ratchet: Option<Ratchet>,
}

/// A key agreed by a handshake renews itself every `after` frames this end
/// sends under it: the next key is derived from it (HKDF-SHA256, info
/// `oae rekey v1`) and rolled to as an operator's roll is, both ends
/// deriving the same key whichever rolls first.
#[derive(Clone)]
struct Ratchet {
    latest: LinkKey,
    after: u64,
    sent: u64,
}

impl Ratchet {
    fn next(&self) -> LinkKey {
        let mut okm = [0u8; 32];
        Hkdf::<Sha256>::new(None, &self.latest.0)
            .expand(b"oae rekey v1", &mut okm)
            .expect("32 bytes is a valid HKDF-SHA256 output length");
        LinkKey(okm)
    }
}

impl core::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Authenticator")
            .field("sending", &self.sending)
            .field("accepts", &self.accepts())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// The AES-128 key of frames sent along `link` (as its sender names it):
/// HKDF-SHA256, no salt, info = `oae link v2 ` ‖ sender MAC ‖ receiver MAC
/// ‖ channel (32 bits, big-endian).
fn direction_key(key: &LinkKey, link: &LinkIdentity) -> Aes128Gcm {
    let mut info = *b"oae link v2 ................";
    info[12..18].copy_from_slice(&link.local_mac);
    info[18..24].copy_from_slice(&link.peer_mac);
    info[24..28].copy_from_slice(&link.channel.to_be_bytes());
    let mut okm = [0u8; 16];
    Hkdf::<Sha256>::new(None, &key.0)
        .expand(&info, &mut okm)
        .expect("16 bytes is a valid HKDF-SHA256 output length");
    Aes128Gcm::new(&okm.into())
}

impl Authenticator {
    /// The link `identity`, sending under key `number`.
    pub fn new(identity: LinkIdentity, number: u8, key: &LinkKey) -> Authenticator {
        let mut a = Authenticator {
            identity,
            keys: Default::default(),
            sending: number % KEY_NUMBERS as u8,
            rolling_to: None,
            rolled_from: None,
            peer_accepts: 0,
            next_pn: 1,
            window: ReplayWindow::default(),
            stats: AuthStats::default(),
            ratchet: None,
        };
        a.add_key(a.sending, key);
        a
    }

    pub fn stats(&self) -> &AuthStats {
        &self.stats
    }

    /// The key numbers held, as trailer byte 1 carries them.
    pub fn accepts(&self) -> u8 {
        self.keys
            .iter()
            .enumerate()
            .filter(|(_, k)| k.is_some())
            .fold(0, |bits, (n, _)| bits | 1 << n)
    }

    pub fn sending(&self) -> u8 {
        self.sending
    }

    /// The key a roll will send under once the peer accepts it.
    pub fn rolling_to(&self) -> Option<u8> {
        self.rolling_to
    }

    /// Accepts frames under key `number` from now on (replacing what that
    /// number held). Nothing is sent under it until [`Authenticator::use_key`]
    /// or a roll switches to it.
    pub fn add_key(&mut self, number: u8, key: &LinkKey) {
        let n = usize::from(number) % KEY_NUMBERS;
        self.keys[n] = Some(DirectionKeys {
            send: direction_key(key, &self.identity),
            receive: direction_key(key, &self.identity.reversed()),
        });
    }

    /// Sends under key `number` from the next frame. Only a key the peer
    /// said it accepts (byte 1 of its last good frame): a frame under any
    /// other would be dropped as `unknown_key` there, and the link with it.
    pub fn use_key(&mut self, number: u8) -> Result<(), &'static str> {
        let n = number % KEY_NUMBERS as u8;
        if self.keys[usize::from(n)].is_none() {
            return Err("no key under that number: add it first");
        }
        if n != self.sending && self.peer_accepts & (1 << n) == 0 {
            return Err(
                "the peer has not said it accepts that key number: add the key at the \
                 peer first (or roll, which switches once the peer accepts it)",
            );
        }
        if n != self.sending {
            self.sending = n;
            self.stats.key_switches += 1;
        }
        self.rolling_to = None;
        Ok(())
    }

    /// Stops accepting key `number`. The key frames are sent under stays.
    pub fn retire_key(&mut self, number: u8) -> Result<(), &'static str> {
        let n = number % KEY_NUMBERS as u8;
        if n == self.sending {
            return Err("frames are sent under that key: use another first");
        }
        self.keys[usize::from(n)] = None;
        Ok(())
    }

    /// A key roll: `key` is accepted at once under the next key number;
    /// frames go out under it as soon as the peer says it accepts it, and
    /// the old key is retired once the peer sends under the new one. Both
    /// ends roll to the same key, in any order: no frame is ever sent under
    /// a key the other end lacks. Returns the new key number.
    pub fn roll(&mut self, key: &LinkKey) -> u8 {
        let next = (self.sending + 1) % KEY_NUMBERS as u8;
        self.add_key(next, key);
        self.rolling_to = Some(next);
        self.rolled_from = Some(self.sending);
        self.follow_roll();
        next
    }

    /// Renews `key` (the key frames are sent under) every `frames` frames
    /// sent, and follows the peer's renewals. Only for a key both ends
    /// forget when either restarts (an agreed key): a key read from a file
    /// again after a restart would be behind the peer's.
    pub fn ratchet_every(&mut self, frames: u64, key: &LinkKey) {
        self.ratchet = Some(Ratchet {
            latest: key.clone(),
            after: frames.max(1),
            sent: 0,
        });
    }

    /// The next key of the ratchet, rolled to: when this end has sent its
    /// share under the current one, or when the peer already rolled (it
    /// accepts the next key number, which this end does not hold).
    fn ratchet_step(&mut self) {
        let Some(r) = &mut self.ratchet else {
            return;
        };
        let next = r.next();
        r.latest = next.clone();
        r.sent = 0;
        self.roll(&next);
    }

    fn rolling(&self) -> bool {
        self.rolling_to.is_some() || self.rolled_from.is_some()
    }

    fn follow_roll(&mut self) {
        if let Some(next) = self.rolling_to
            && self.peer_accepts & (1 << next) != 0
        {
            self.sending = next;
            self.rolling_to = None;
            self.stats.key_switches += 1;
        }
    }

    /// Appends the trailer to the `len`-byte frame at the start of `buf`
    /// and returns the authenticated frame's length; `None` if `buf` has no
    /// room or the packet numbers are spent (the link must not send).
    pub fn seal(&mut self, buf: &mut [u8], len: usize) -> Option<usize> {
        let sealed = self.seal_in_place(buf, len);
        if sealed.is_none() {
            self.stats.unsealed += 1;
        }
        sealed
    }

    fn seal_in_place(&mut self, buf: &mut [u8], len: usize) -> Option<usize> {
        if buf.len() < len + AUTH_TRAILER_LEN || len < 12 || self.next_pn > MAX_PACKET_NUMBER {
            return None;
        }
        let keys = self.keys[usize::from(self.sending)].as_ref()?;
        let pn = self.next_pn;
        self.next_pn += 1;
        let (frame, trailer) = buf.split_at_mut(len);
        trailer[0] = self.sending;
        trailer[1] = self.accepts();
        trailer[2..8].copy_from_slice(&pn.to_be_bytes()[2..]);
        let nonce = nonce(frame, &trailer[..8]);
        let tag = tag(&keys.send, &nonce, frame)?;
        trailer[8..AUTH_TRAILER_LEN].copy_from_slice(&tag);
        self.stats.sealed += 1;
        if let Some(r) = &mut self.ratchet {
            r.sent += 1;
            if r.sent >= r.after && !self.rolling() {
                self.ratchet_step();
            }
        }
        Some(len + AUTH_TRAILER_LEN)
    }

    /// Checks an authenticated frame and returns the OAE frame inside, or
    /// why it is dropped (counted here).
    pub fn open<'a>(&mut self, bytes: &'a [u8]) -> Result<&'a [u8], AuthError> {
        let result = self.verify(bytes);
        match result {
            Ok(_) => self.stats.verified += 1,
            Err(e) => self.stats.dropped[e as usize - 1] += 1,
        }
        result
    }

    fn verify<'a>(&mut self, bytes: &'a [u8]) -> Result<&'a [u8], AuthError> {
        if bytes.len() < 64 + AUTH_TRAILER_LEN {
            return Err(AuthError::Unauthenticated);
        }
        let (frame, trailer) = bytes.split_at(bytes.len() - AUTH_TRAILER_LEN);
        let number = trailer[0];
        let keys = self
            .keys
            .get(usize::from(number))
            .and_then(Option::as_ref)
            .ok_or(AuthError::UnknownKey)?;
        let epoch = u32::from_be_bytes([frame[8], frame[9], frame[10], frame[11]]);
        let mut pn = [0u8; 8];
        pn[2..].copy_from_slice(&trailer[2..8]);
        let pn = u64::from_be_bytes(pn);
        self.window.check(epoch, pn)?;
        let nonce = nonce(frame, &trailer[..8]);
        let expected = Tag::from_slice(&trailer[8..]);
        keys.receive
            .decrypt_in_place_detached(&nonce, frame, &mut [], expected)
            .map_err(|_| AuthError::BadTag)?;
        self.window.accept(epoch, pn);
        self.peer_accepts = trailer[1];
        let next = (self.sending + 1) % KEY_NUMBERS as u8;
        if self.ratchet.is_some()
            && !self.rolling()
            && self.peer_accepts & !self.accepts() & (1 << next) != 0
        {
            self.ratchet_step();
        }
        self.follow_roll();
        // Both ends send under the key the roll reached: the key it rolled
        // from is retired (a frame under it now is late, or forged).
        if let Some(old) = self.rolled_from
            && self.rolling_to.is_none()
            && number == self.sending
        {
            if old != self.sending {
                self.keys[usize::from(old)] = None;
            }
            self.rolled_from = None;
        }
        Ok(frame)
    }
}

fn nonce(frame: &[u8], head: &[u8]) -> Nonce<U12> {
    let mut n = [0u8; 12];
    n[..4].copy_from_slice(&frame[8..12]);
    n[4..].copy_from_slice(head);
    n.into()
}

/// The tag covers the frame as AAD; trailer bytes 0-7 are in the nonce,
/// so they are covered too (another nonce gives another tag).
fn tag(cipher: &Aes128Gcm, nonce: &Nonce<U12>, frame: &[u8]) -> Option<[u8; TAG_LEN]> {
    let t = cipher
        .encrypt_in_place_detached(nonce, frame, &mut [])
        .ok()?;
    Some(t.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 2];

    fn key(b: u8) -> LinkKey {
        LinkKey([b; 32])
    }

    fn link(channel: u32) -> LinkIdentity {
        LinkIdentity {
            local_mac: A,
            peer_mac: B,
            channel,
        }
    }

    /// Both ends of the link on `channel` between A and B, under one key.
    fn pair_on(channel: u32) -> (Authenticator, Authenticator) {
        (
            Authenticator::new(link(channel), 0, &key(7)),
            Authenticator::new(link(channel).reversed(), 0, &key(7)),
        )
    }

    fn pair() -> (Authenticator, Authenticator) {
        pair_on(0)
    }

    /// A 64-byte frame of `epoch` with `fill` in its payload, sealed.
    fn sealed(by: &mut Authenticator, epoch: u32, fill: u8) -> Vec<u8> {
        let mut buf = vec![fill; 64 + AUTH_TRAILER_LEN];
        buf[8..12].copy_from_slice(&epoch.to_be_bytes());
        let len = by.seal(&mut buf, 64).expect("room");
        assert_eq!(len, buf.len());
        buf
    }

    #[test]
    fn a_sealed_frame_opens_once_and_only_at_the_other_end() {
        let (mut a, mut b) = pair();
        let f = sealed(&mut a, 3, 0x55);
        assert_eq!(b.open(&f).map(<[u8]>::len), Ok(64));
        assert_eq!(b.open(&f), Err(AuthError::Replayed));
        // Its own frames reflected back do not verify: each direction has
        // its own key.
        let g = sealed(&mut a, 3, 0x55);
        assert_eq!(a.open(&g), Err(AuthError::BadTag));
        assert_eq!(b.stats().verified, 1);
        assert_eq!(b.stats().dropped[AuthError::Replayed as usize - 1], 1);
    }

    #[test]
    fn every_bit_of_frame_and_trailer_is_covered() {
        let (mut a, _) = pair();
        let f = sealed(&mut a, 3, 0x11);
        for byte in 0..f.len() {
            let mut b = pair().1;
            let mut g = f.clone();
            g[byte] ^= 0x04;
            let got = b.open(&g);
            assert!(got.is_err(), "byte {byte} flipped and accepted");
        }
    }

    #[test]
    fn wrong_key_missing_trailer_and_older_epochs_are_refused() {
        let (mut a, mut b) = pair();
        let mut stranger = Authenticator::new(link(0), 0, &key(8));
        assert_eq!(b.open(&sealed(&mut stranger, 3, 0)), Err(AuthError::BadTag));
        assert_eq!(b.open(&[0u8; 64]), Err(AuthError::Unauthenticated));
        let mut other_number = sealed(&mut a, 3, 0);
        other_number[64] = 2;
        assert_eq!(b.open(&other_number), Err(AuthError::UnknownKey));
        assert!(b.open(&sealed(&mut a, 4, 0)).is_ok());
        assert_eq!(b.open(&sealed(&mut a, 3, 0)), Err(AuthError::OldEpoch));
    }

    #[test]
    fn the_window_takes_late_frames_once_and_refuses_older_ones() {
        let (mut a, mut b) = pair();
        let frames: Vec<Vec<u8>> = (0..100).map(|i| sealed(&mut a, 1, i)).collect();
        assert!(b.open(&frames[99]).is_ok());
        assert!(b.open(&frames[40]).is_ok(), "59 behind: inside the window");
        assert_eq!(b.open(&frames[40]), Err(AuthError::Replayed));
        assert_eq!(b.open(&frames[30]), Err(AuthError::Replayed), "69 behind");
        for f in &frames[41..99] {
            assert!(b.open(f).is_ok());
        }
    }

    /// Both ends roll to a new key, in either order and with traffic in
    /// between: every frame opens, and the old key is retired at both.
    #[test]
    fn a_roll_loses_no_frame_whatever_the_order() {
        for a_first in [true, false] {
            let (mut a, mut b) = pair();
            let exchange = |a: &mut Authenticator, b: &mut Authenticator| {
                let f = sealed(a, 1, 0);
                assert!(b.open(&f).is_ok(), "a -> b under {}", f[64]);
                let g = sealed(b, 2, 0);
                assert!(a.open(&g).is_ok(), "b -> a under {}", g[64]);
            };
            exchange(&mut a, &mut b);
            if a_first {
                assert_eq!(a.roll(&key(9)), 1);
                exchange(&mut a, &mut b);
                b.roll(&key(9));
            } else {
                b.roll(&key(9));
                exchange(&mut a, &mut b);
                a.roll(&key(9));
            }
            for _ in 0..3 {
                exchange(&mut a, &mut b);
            }
            assert_eq!((a.sending(), b.sending()), (1, 1));
            assert_eq!((a.accepts(), b.accepts()), (0b10, 0b10), "key 0 retired");
        }
    }

    #[test]
    fn keys_are_used_and_retired_only_when_that_is_safe() {
        let (mut a, mut b) = pair();
        assert!(a.use_key(2).is_err(), "no key 2 yet");
        assert!(a.retire_key(0).is_err(), "frames go out under key 0");
        a.add_key(2, &key(1));
        let err = a.use_key(2).unwrap_err();
        assert!(err.contains("peer"), "b lacks key 2: {err}");
        b.add_key(2, &key(1));
        let f = sealed(&mut b, 1, 0);
        assert!(a.open(&f).is_ok());
        assert!(a.use_key(2).is_ok(), "b announced key 2");
        assert!(a.retire_key(0).is_ok());
        assert_eq!(a.accepts(), 0b100);
        assert_eq!(format!("{:?}", key(1)), "LinkKey(<secret>)");
    }

    /// Two links between the same MACs under one key (two queues of a veth
    /// pair) count packet numbers alike from 1 and share the sender epoch:
    /// only the channel in the key derivation keeps their nonces apart.
    #[test]
    fn links_sharing_macs_and_a_key_never_share_a_nonce_under_one_key() {
        let (mut a0, mut b0) = pair_on(0);
        let (mut a1, mut b1) = pair_on(1);
        let on_0 = sealed(&mut a0, 3, 0x11);
        let on_1 = sealed(&mut a1, 3, 0x11);
        // Same frame, same epoch, same packet number: same nonce, so the
        // tags must differ by key alone.
        assert_eq!(on_0[..64 + 8], on_1[..64 + 8]);
        assert_ne!(on_0[64 + 8..], on_1[64 + 8..]);
        // A frame captured on one link is forged on the other, and moves
        // nothing there: the genuine frame still opens.
        assert_eq!(b1.open(&on_0), Err(AuthError::BadTag));
        assert_eq!(b1.open(&on_1).map(<[u8]>::len), Ok(64));
        assert_eq!(b0.open(&on_1), Err(AuthError::BadTag));
        assert_eq!(b0.open(&on_0).map(<[u8]>::len), Ok(64));
    }
}
