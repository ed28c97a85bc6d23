//! Authenticated key agreement on one link (PROTOCOL.md, "Key agreement"):
//! the two ends prove their identities to each other with a Noise XX
//! handshake and derive a fresh link key for this incarnation of the link,
//! which then keys the link's frame authenticator ([`crate::auth`]).
//!
//! An end with no key initiates; the other answers. Message 1 and 3 repeat
//! on a backed-off timer until answered; message 2 is sent again whenever
//! its message 1 comes again. The initiator keys the link when it sends
//! message 3, and is confirmed by the first frame it verifies under that
//! key; the responder keys it when message 3 verifies. Until then the keys
//! in force stay: a forged, replayed or unfinished handshake changes
//! nothing.

mod noise;

use std::sync::Arc;

use sha2::{Digest, Sha256};
use snow::HandshakeState;

use crate::auth::{LinkIdentity, LinkKey};
use crate::config::Nanos;
use crate::identity::{IdentitySecret, PublicIdentity, Trust};
use crate::wire::{self, Context, Frame, Knowledge, Role, Transition};

pub use noise::{MAX_MESSAGE, PATTERN};

/// Times message 3 goes unanswered before the initiator starts over.
const CONFIRM_TRIES: u32 = 4;

/// Retry intervals a handshake being answered waits for message 3 before
/// it is given up (a message 1 replayed by a stranger is never finished).
const RESPOND_PATIENCE: u64 = 4;

/// Class of every handshake frame (256 bytes: message 2 and its length).
pub const HANDSHAKE_CLASS: u8 = 2;

/// What a node brings to every link's key agreement.
#[derive(Clone, Debug)]
pub struct KeyAgreementConfig {
    pub identity: Arc<IdentitySecret>,
    pub trust: Arc<Trust>,
    /// Random bytes from which every handshake's ephemeral keys are drawn
    /// (the operating system's in a dataplane, the seed's in a simulator).
    pub seed: [u8; 32],
    /// A handshake message not answered is sent again after this long,
    /// doubling up to `retry_limit`.
    pub retry_interval: Nanos,
    pub retry_limit: Nanos,
    /// The agreed key is renewed after this many frames sent under it
    /// (`auth::Authenticator::ratchet_every`).
    pub rekey_after: u64,
}

impl KeyAgreementConfig {
    /// Frames sent under one key before it is renewed, by default: well
    /// inside AES-GCM's limits for one key.
    pub const DEFAULT_REKEY_AFTER: u64 = 1 << 32;
}

/// Who the peer proved to be, and what it said of itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AgreedPeer {
    pub identity: PublicIdentity,
    pub epoch: u32,
    pub node_id: u64,
}

/// What a link's key agreement counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HandshakeStats {
    /// Handshakes this end started (message 1 with a new ephemeral key).
    pub initiated: u64,
    /// Handshakes of the peer's this end answered (message 2).
    pub answered: u64,
    /// Handshakes finished here with a trusted peer: the link keyed.
    pub completed: u64,
    /// Messages sent again because no answer came.
    pub retransmitted: u64,
    /// Messages that did not verify or did not fit the handshake in
    /// progress: forged, replayed, corrupted or late.
    pub rejected: u64,
    /// Peers that proved an identity not in the trust list.
    pub untrusted: u64,
    /// Frames dropped because the link has no key yet.
    pub before_keys: u64,
    /// Message 1s both ends sent at once, settled by the MAC rule.
    pub crossed: u64,
    /// Handshakes answered whose message 3 never came (given up).
    pub abandoned: u64,
}

/// What a handshake frame did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Nothing,
    /// Key the link with this key from now on.
    Keyed(LinkKey),
    /// The peer proved this identity, which is not trusted: refused.
    Untrusted(PublicIdentity),
}

/// A snow handshake state, kept between messages; `Clone` leaves it
/// behind, and it is rebuilt from the handshake's seed and messages when
/// next needed.
#[derive(Default)]
struct Live(Option<Box<HandshakeState>>);

impl Clone for Live {
    fn clone(&self) -> Live {
        Live(None)
    }
}

#[derive(Clone)]
enum Initiating {
    /// Message 1 sent; waiting for message 2.
    AwaitingReply {
        seed: [u8; 32],
        msg1: Vec<u8>,
        live: Live,
    },
    /// Message 3 sent and the link keyed; waiting for a frame that
    /// verifies under the key.
    Confirming { msg2: Vec<u8>, msg3: Vec<u8> },
}

#[derive(Clone)]
struct Responding {
    seed: [u8; 32],
    msg1: Vec<u8>,
    msg2: Vec<u8>,
    live: Live,
    since: Nanos,
}

/// One link's key agreement.
#[derive(Clone)]
pub struct KeyAgreement {
    cfg: KeyAgreementConfig,
    link: LinkIdentity,
    /// This end's epoch and node id, in every message's payload.
    me: (u32, u64),
    handshakes: u64,
    initiating: Option<Initiating>,
    responding: Option<Responding>,
    /// The peer of the key in force.
    peer: Option<AgreedPeer>,
    /// A message due now: 1, 2 or 3.
    due: Option<u8>,
    retry_at: Nanos,
    tries: u32,
    /// No new handshake before this (after an untrusted peer).
    not_before: Nanos,
    stats: HandshakeStats,
}

/// The handshake's state as the protocol sees it: what is under way,
/// its messages, the key's peer and what is due. Timers, counters and
/// the live Noise state (rebuilt from the messages) are left out.
type Logical<'a> = (
    LinkIdentity,
    (u32, u64),
    u64,
    Option<(u8, &'a [u8], &'a [u8])>,
    Option<(&'a [u8], &'a [u8])>,
    Option<AgreedPeer>,
    Option<u8>,
    u32,
);

impl KeyAgreement {
    fn logical(&self) -> Logical<'_> {
        let initiating = self.initiating.as_ref().map(|i| match i {
            Initiating::AwaitingReply { msg1, .. } => (1, &msg1[..], &[][..]),
            Initiating::Confirming { msg2, msg3 } => (2, &msg2[..], &msg3[..]),
        });
        let responding = self.responding.as_ref().map(|r| (&r.msg1[..], &r.msg2[..]));
        (
            self.link,
            self.me,
            self.handshakes,
            initiating,
            responding,
            self.peer,
            self.due,
            self.tries.min(CONFIRM_TRIES + 1),
        )
    }
}

/// Equal when the protocol state is ([`Logical`]): the model checker's
/// view of a key agreement.
impl PartialEq for KeyAgreement {
    fn eq(&self, other: &KeyAgreement) -> bool {
        self.logical() == other.logical()
    }
}

impl Eq for KeyAgreement {}

impl core::hash::Hash for KeyAgreement {
    fn hash<H: core::hash::Hasher>(&self, h: &mut H) {
        self.logical().hash(h);
    }
}

impl core::fmt::Debug for KeyAgreement {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KeyAgreement")
            .field("link", &self.link)
            .field("peer", &self.peer)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl KeyAgreement {
    /// The agreement of `link`, for the node of epoch and id `me`.
    pub fn new(cfg: KeyAgreementConfig, link: LinkIdentity, me: (u32, u64)) -> KeyAgreement {
        KeyAgreement {
            cfg,
            link,
            me,
            handshakes: 0,
            initiating: None,
            responding: None,
            peer: None,
            due: None,
            retry_at: 0,
            tries: 0,
            not_before: 0,
            stats: HandshakeStats::default(),
        }
    }

    pub fn stats(&self) -> &HandshakeStats {
        &self.stats
    }

    /// The peer whose key the link runs under, if any.
    pub fn peer(&self) -> Option<&AgreedPeer> {
        self.peer.as_ref()
    }

    /// Whether the link has a key (confirmed or not).
    pub fn keyed(&self) -> bool {
        self.peer.is_some()
    }

    /// Whether the link's key is known to be the peer's too: taken from
    /// the peer's message 3, or, for the initiator, a frame verified
    /// under it (K6).
    pub fn confirmed(&self) -> bool {
        self.peer.is_some() && !matches!(self.initiating, Some(Initiating::Confirming { .. }))
    }

    pub fn identity(&self) -> PublicIdentity {
        self.cfg.identity.public()
    }

    pub fn rekey_after(&self) -> u64 {
        self.cfg.rekey_after
    }

    /// The link this agreement keys.
    pub fn link(&self) -> LinkIdentity {
        self.link
    }

    pub(crate) fn note_rejected(&mut self) {
        self.stats.rejected += 1;
    }

    pub(crate) fn note_before_keys(&mut self) {
        self.stats.before_keys += 1;
    }

    /// A frame verified under the key in force: the initiator's key is
    /// confirmed, and message 3 stops.
    pub fn confirm(&mut self) {
        if matches!(self.initiating, Some(Initiating::Confirming { .. })) {
            self.initiating = None;
            if self.due == Some(3) {
                self.due = None;
            }
        }
    }

    fn payload(&self) -> [u8; noise::PAYLOAD_LEN] {
        let mut p = [0u8; noise::PAYLOAD_LEN];
        p[..4].copy_from_slice(&self.me.0.to_be_bytes());
        p[4..].copy_from_slice(&self.me.1.to_be_bytes());
        p
    }

    /// The link's identity as the initiator names it, with the protocol:
    /// both ends bind the same bytes into the handshake.
    fn prologue(&self, initiator: bool) -> [u8; 32] {
        let link = if initiator {
            self.link
        } else {
            self.link.reversed()
        };
        let mut p = *b"oae handshake v1................";
        p[16..22].copy_from_slice(&link.local_mac);
        p[22..28].copy_from_slice(&link.peer_mac);
        p[28..32].copy_from_slice(&link.channel.to_be_bytes());
        p
    }

    fn next_seed(&mut self) -> [u8; 32] {
        self.handshakes += 1;
        // The link's identity too: a node's links share its seed, and no
        // two of them may draw the same ephemeral key.
        Sha256::new()
            .chain_update(b"oae handshake seed")
            .chain_update(self.cfg.seed)
            .chain_update(self.prologue(true))
            .chain_update(self.handshakes.to_be_bytes())
            .finalize()
            .into()
    }

    fn side<'a>(&'a self, seed: [u8; 32], prologue: &'a [u8]) -> noise::Side<'a> {
        noise::Side {
            identity: &self.cfg.identity,
            prologue,
            seed,
            payload: self.payload(),
        }
    }

    fn schedule_retry(&mut self, now: Nanos) {
        let wait = self
            .cfg
            .retry_interval
            .saturating_mul(1 << self.tries.min(20))
            .min(self.cfg.retry_limit.max(self.cfg.retry_interval));
        self.retry_at = now.saturating_add(wait);
        self.tries += 1;
    }

    /// When a message next needs sending again, if one waits for an answer.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        if self.due.is_some() {
            return None;
        }
        if let Some(r) = &self.responding {
            return Some(self.give_up_at(r));
        }
        if self.initiating.is_some() {
            return Some(self.retry_at);
        }
        self.peer.is_none().then_some(self.not_before)
    }

    fn give_up_at(&self, r: &Responding) -> Nanos {
        r.since
            .saturating_add(self.cfg.retry_interval.saturating_mul(RESPOND_PATIENCE))
    }

    pub fn handle_timeout(&mut self, now: Nanos) {
        if let Some(r) = &self.responding
            && now >= self.give_up_at(r)
        {
            // K3: message 3 never came; an end with no key starts its own.
            self.responding = None;
            self.stats.abandoned += 1;
            if self.due == Some(2) {
                self.due = None;
            }
        }
        if self.due.is_some() || self.initiating.is_none() || now < self.retry_at {
            return;
        }
        match self.initiating {
            Some(Initiating::Confirming { .. }) if self.tries >= CONFIRM_TRIES => {
                // Message 3 keeps going unanswered: the responder may have
                // lost the handshake (restarted, or a stranger's message 1
                // took its place). Start again; the key stays until the
                // new one is agreed.
                self.start(now);
            }
            Some(Initiating::Confirming { .. }) => {
                self.due = Some(3);
                self.stats.retransmitted += 1;
            }
            _ => {
                self.due = Some(1);
                self.stats.retransmitted += 1;
            }
        }
    }

    fn start(&mut self, now: Nanos) {
        let seed = self.next_seed();
        let prologue = self.prologue(true);
        let (hs, msg1) = noise::initiate(&self.side(seed, &prologue));
        self.initiating = Some(Initiating::AwaitingReply {
            seed,
            msg1,
            live: Live(Some(Box::new(hs))),
        });
        self.stats.initiated += 1;
        self.tries = 0;
        self.due = Some(1);
        self.retry_at = now;
    }

    /// Writes the handshake frame due now, if any, into `buf` (at least
    /// [`wire::frame_len`]`(HANDSHAKE_CLASS)` bytes). An end with no key
    /// and no handshake under way starts one.
    pub fn poll_transmit(&mut self, now: Nanos, buf: &mut [u8]) -> Option<usize> {
        if self.peer.is_none()
            && self.initiating.is_none()
            && self.responding.is_none()
            && now >= self.not_before
        {
            self.start(now);
        }
        let number = self.due.take()?;
        let message = match (number, &self.initiating, &self.responding) {
            (1, Some(Initiating::AwaitingReply { msg1, .. }), _) => msg1,
            (3, Some(Initiating::Confirming { msg3, .. }), _) => msg3,
            (2, _, Some(r)) => &r.msg2,
            _ => return None,
        };
        let peer_epoch = self.peer.map_or(0, |p| p.epoch);
        let len = write_frame(buf, number, (self.me.0, peer_epoch), message);
        if number != 2 {
            self.schedule_retry(now);
        }
        Some(len)
    }

    /// Takes a handshake frame.
    pub fn handle(&mut self, frame: &Frame<'_>, now: Nanos) -> Outcome {
        let Some((number, message)) = read_frame(frame) else {
            self.stats.rejected += 1;
            return Outcome::Nothing;
        };
        match number {
            1 => self.on_msg1(message, now),
            2 => self.on_msg2(message, now),
            _ => self.on_msg3(message, now),
        }
    }

    fn on_msg1(&mut self, msg1: &[u8], now: Nanos) -> Outcome {
        if let Some(r) = &self.responding {
            if r.msg1 == msg1 {
                self.due = Some(2);
                return Outcome::Nothing;
            }
            // One new answer per retry interval bounds what a flood of
            // message 1s costs (a Diffie-Hellman each).
            if now < r.since.saturating_add(self.cfg.retry_interval) {
                self.stats.rejected += 1;
                return Outcome::Nothing;
            }
        }
        if matches!(self.initiating, Some(Initiating::AwaitingReply { .. })) {
            self.stats.crossed += 1;
            // Both ends started: the one with the lower MAC stays the
            // initiator, the other answers.
            if self.link.local_mac < self.link.peer_mac {
                return Outcome::Nothing;
            }
            self.initiating = None;
        }
        let seed = self.next_seed();
        let prologue = self.prologue(false);
        match noise::respond(&self.side(seed, &prologue), msg1) {
            Ok((hs, msg2, _)) => {
                self.responding = Some(Responding {
                    seed,
                    msg1: msg1.to_vec(),
                    msg2,
                    live: Live(Some(Box::new(hs))),
                    since: now,
                });
                self.stats.answered += 1;
                self.due = Some(2);
            }
            Err(noise::Rejected) => self.stats.rejected += 1,
        }
        Outcome::Nothing
    }

    fn on_msg2(&mut self, msg2: &[u8], now: Nanos) -> Outcome {
        match self.initiating.take() {
            Some(Initiating::AwaitingReply { seed, msg1, live }) => {
                let prologue = self.prologue(true);
                let hs = match live.0 {
                    Some(hs) => *hs,
                    None => noise::initiate(&self.side(seed, &prologue)).0,
                };
                let trust = Arc::clone(&self.cfg.trust);
                match noise::complete_initiator(hs, msg2, &self.payload(), |p| trust.trusts(p)) {
                    Err(noise::Rejected) => {
                        self.stats.rejected += 1;
                        // A forged message 2 must not end the handshake:
                        // the state it spent is rebuilt from the seed.
                        self.initiating = Some(Initiating::AwaitingReply {
                            seed,
                            msg1,
                            live: Live(None),
                        });
                        Outcome::Nothing
                    }
                    Ok(Err(identity)) => self.refuse(identity, now),
                    Ok(Ok((msg3, agreed))) => {
                        self.initiating = Some(Initiating::Confirming {
                            msg2: msg2.to_vec(),
                            msg3,
                        });
                        self.tries = 0;
                        self.due = Some(3);
                        self.keyed_with(agreed)
                    }
                }
            }
            Some(Initiating::Confirming {
                msg2: answered,
                msg3,
            }) => {
                // The responder sent message 2 again: message 3 was lost.
                if answered == msg2 {
                    self.due = Some(3);
                } else {
                    self.stats.rejected += 1;
                }
                self.initiating = Some(Initiating::Confirming {
                    msg2: answered,
                    msg3,
                });
                Outcome::Nothing
            }
            None => {
                self.stats.rejected += 1;
                Outcome::Nothing
            }
        }
    }

    fn on_msg3(&mut self, msg3: &[u8], now: Nanos) -> Outcome {
        let Some(r) = self.responding.take() else {
            self.stats.rejected += 1;
            return Outcome::Nothing;
        };
        let hs = match r.live.0 {
            Some(hs) => *hs,
            None => {
                let prologue = self.prologue(false);
                match noise::respond(&self.side(r.seed, &prologue), &r.msg1) {
                    Ok((hs, _, _)) => hs,
                    Err(noise::Rejected) => unreachable!("message 1 was taken once already"),
                }
            }
        };
        match noise::complete_responder(hs, msg3) {
            Err(noise::Rejected) => {
                self.stats.rejected += 1;
                // Kept for the genuine message 3; the state is rebuilt.
                self.responding = Some(Responding {
                    live: Live(None),
                    ..r
                });
                Outcome::Nothing
            }
            Ok(agreed) if !self.cfg.trust.trusts(&agreed.peer) => self.refuse(agreed.peer, now),
            Ok(agreed) => {
                // The peer keyed the link with this handshake: a handshake
                // of ours still under way is superseded.
                self.initiating = None;
                if self.due != Some(2) {
                    self.due = None;
                }
                self.keyed_with(agreed)
            }
        }
    }

    fn refuse(&mut self, identity: PublicIdentity, now: Nanos) -> Outcome {
        self.stats.untrusted += 1;
        self.initiating = None;
        self.responding = None;
        self.due = None;
        // Try again, in case the trust list changes, no sooner than the
        // slowest retry.
        self.not_before = now.saturating_add(self.cfg.retry_limit);
        Outcome::Untrusted(identity)
    }

    fn keyed_with(&mut self, agreed: noise::Agreed) -> Outcome {
        let p = agreed.peer_payload;
        self.peer = Some(AgreedPeer {
            identity: agreed.peer,
            epoch: u32::from_be_bytes(p[..4].try_into().expect("four bytes")),
            node_id: u64::from_be_bytes(p[4..].try_into().expect("eight bytes")),
        });
        self.stats.completed += 1;
        Outcome::Keyed(agreed.key)
    }
}

/// Writes a handshake frame: the context names the message (1-3) in its
/// field; the payload is the message's length (u16) and the message (at
/// most the payload's room less two bytes).
pub fn write_frame(buf: &mut [u8], number: u8, epochs: (u32, u32), message: &[u8]) -> usize {
    let ctx = Context {
        class: HANDSHAKE_CLASS,
        knowledge: Knowledge::Nothing,
        role: Role::Alice,
        transition: Transition::Handshake,
        previous_committed: false,
        field: u32::from(number),
    };
    let len = wire::compose(buf, &ctx, epochs, |p| {
        p[..2].copy_from_slice(&(message.len() as u16).to_be_bytes());
        p[2..2 + message.len()].copy_from_slice(message);
    });
    wire::seal(&mut buf[..len]);
    len
}

/// The message a handshake frame carries, if the frame is one.
fn read_frame<'a>(frame: &Frame<'a>) -> Option<(u8, &'a [u8])> {
    let ctx = &frame.context;
    if ctx.class != HANDSHAKE_CLASS
        || ctx.knowledge != Knowledge::Nothing
        || ctx.role != Role::Alice
        || !(1..=3).contains(&ctx.field)
    {
        return None;
    }
    let p = frame.payload;
    let len = usize::from(u16::from_be_bytes([p[0], p[1]]));
    if len > MAX_MESSAGE || !crate::verb::all_zero(&p[2 + len..]) {
        return None;
    }
    Some((ctx.field as u8, &p[2..2 + len]))
}

#[cfg(test)]
mod tests;
