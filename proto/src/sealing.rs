//! A node's authenticated links: frames sealed on their way out and
//! opened on their way in, by the link's [`Authenticator`], inside the
//! core, so every host of it (the dataplane, the simulator, the fuzzers,
//! the benchmarks) gets authentication by asking for it.

use crate::auth::{AuthError, Authenticator, LinkIdentity};
use crate::handshake::{HANDSHAKE_CLASS, KeyAgreement, KeyAgreementConfig, Outcome};
use crate::wire::{self, Frame, Transition};
use crate::{
    DownReason, Event, LinkChange, LinkId, Nanos, Node, Observer, OneBuffer, Store, TransmitBuffers,
};

/// The link to authenticate does not exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoSuchLink(pub LinkId);

impl core::fmt::Display for NoSuchLink {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "no link {} to authenticate", self.0)
    }
}

impl std::error::Error for NoSuchLink {}

impl<O: Observer, M: Store> Node<O, M> {
    /// From now on, `link`'s frames are sealed with `auth`'s keys on the
    /// way out and opened on the way in; frames that fail are dropped and
    /// counted in `auth`'s stats. Both ends of a link must agree
    /// ([`crate::auth`]); a link takes its authenticator before it runs,
    /// and keeps it.
    pub fn authenticate_link(
        &mut self,
        link: LinkId,
        auth: Authenticator,
    ) -> Result<(), NoSuchLink> {
        let slot = self
            .auth
            .get_mut(usize::from(link))
            .ok_or(NoSuchLink(link))?;
        *slot = Some(Box::new(auth));
        Ok(())
    }

    /// `link`'s authenticator, if it has one: its stats and keys.
    pub fn link_auth(&self, link: LinkId) -> Option<&Authenticator> {
        self.auth.get(usize::from(link))?.as_deref()
    }

    /// `link`'s authenticator, to change its keys.
    pub fn link_auth_mut(&mut self, link: LinkId) -> Option<&mut Authenticator> {
        self.auth.get_mut(usize::from(link))?.as_deref_mut()
    }

    /// From now on, `link` is keyed by a handshake that proves both ends'
    /// identities ([`crate::handshake`]): no frame but the handshake's goes
    /// out or comes in until a trusted peer has agreed a key, and every
    /// frame after is sealed under it. `identity` names the link as
    /// [`Node::authenticate_link`]'s does.
    pub fn agree_keys(
        &mut self,
        link: LinkId,
        cfg: KeyAgreementConfig,
        identity: LinkIdentity,
    ) -> Result<(), NoSuchLink> {
        let me = (self.epoch, self.node_id);
        let slot = self
            .agreements
            .get_mut(usize::from(link))
            .ok_or(NoSuchLink(link))?;
        *slot = Some(Box::new(KeyAgreement::new(cfg, identity, me)));
        Ok(())
    }

    /// `link`'s key agreement, if it agrees keys: the peer it proved, its
    /// counters.
    pub fn key_agreement(&self, link: LinkId) -> Option<&KeyAgreement> {
        self.agreements.get(usize::from(link))?.as_deref()
    }

    fn key_agreement_mut(&mut self, link: LinkId) -> Option<&mut KeyAgreement> {
        self.agreements.get_mut(usize::from(link))?.as_deref_mut()
    }

    pub(crate) fn is_authenticated(&self, link: LinkId) -> bool {
        self.link_auth(link).is_some() || self.key_agreement(link).is_some()
    }

    /// The frame inside `bytes`, checked if `link` is authenticated;
    /// `None` if the check failed (counted, and told to the link when the
    /// failure says why it is not coming up) or the frame was the key
    /// agreement's.
    pub(crate) fn open<'a>(
        &mut self,
        link: LinkId,
        bytes: &'a [u8],
        now: Nanos,
    ) -> Option<&'a [u8]> {
        if self.key_agreement(link).is_some() {
            if is_handshake(bytes) {
                self.take_handshake(link, bytes, now);
                return None;
            }
            if self.link_auth(link).is_none() {
                self.key_agreement_mut(link)?.note_before_keys();
                return None;
            }
        }
        let Some(auth) = self.link_auth_mut(link) else {
            return Some(bytes);
        };
        match auth.open(bytes) {
            Ok(frame) => {
                if let Some(a) = self.key_agreement_mut(link) {
                    a.confirm();
                }
                Some(frame)
            }
            Err(e) => {
                self.note_auth_drop(link, e, bytes);
                None
            }
        }
    }

    fn take_handshake(&mut self, link: LinkId, bytes: &[u8], now: Nanos) {
        let Some(agreement) = self.agreements[usize::from(link)].as_deref_mut() else {
            return;
        };
        let Ok(frame) = Frame::parse(bytes) else {
            agreement.note_rejected();
            return;
        };
        match agreement.handle(&frame, now) {
            Outcome::Nothing => {}
            Outcome::Keyed(key) => {
                let mut auth = Authenticator::new(agreement.link(), 0, &key);
                auth.ratchet_every(agreement.rekey_after(), &key);
                self.auth[usize::from(link)] = Some(Box::new(auth));
                self.events.push_back(Event::Link {
                    link,
                    change: LinkChange::Keyed,
                });
            }
            Outcome::Untrusted(identity) => {
                self.links[usize::from(link)].diagnose(DownReason::PeerUntrusted);
                self.events.push_back(Event::Untrusted { link, identity });
            }
        }
    }

    fn note_auth_drop(&mut self, link: LinkId, error: AuthError, bytes: &[u8]) {
        if let Some(reason) = DownReason::of_auth(error, bytes) {
            self.note_dropped(link, reason);
        }
    }

    /// [`Node::poll_transmit_burst`] for an authenticated link: each frame
    /// sealed in its buffer. A frame that cannot be sealed (no room for the
    /// trailer, packet numbers spent) is counted (`unsealed`) and lost,
    /// which the link survives as any loss.
    pub(crate) fn poll_transmit_sealed(
        &mut self,
        link: LinkId,
        now: Nanos,
        max_datagrams: usize,
        out: &mut impl TransmitBuffers,
    ) -> usize {
        let mut sent = 0;
        if let Some(a) = self.key_agreement_mut(link) {
            if max_datagrams > 0
                && let Some(buf) = out.next_buffer()
                && let Some(len) = a.poll_transmit(now, buf)
            {
                out.filled(len);
                sent += 1;
            }
            // The link's own frames wait for a key.
            if self.link_auth(link).is_none() {
                return sent;
            }
        }
        while sent < max_datagrams {
            let Some(buf) = out.next_buffer() else {
                break;
            };
            let mut one = OneBuffer { buf, len: None };
            self.poll_transmit_plain(link, now, 1, &mut one);
            let Some(len) = one.len else {
                break;
            };
            let sealed = match self.link_auth_mut(link) {
                Some(auth) => auth.seal(one.buf, len),
                None => Some(len),
            };
            if let Some(len) = sealed {
                out.filled(len);
                sent += 1;
            }
        }
        sent
    }
}

/// Whether `bytes` is a handshake frame, by its size and context alone
/// (a sealed frame is never a frame's size: its trailer follows).
fn is_handshake(bytes: &[u8]) -> bool {
    bytes.len() == wire::frame_len(HANDSHAKE_CLASS)
        && Frame::parse(bytes).is_ok_and(|f| f.context.transition == Transition::Handshake)
}
