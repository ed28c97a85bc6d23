//! A node's authenticated links: frames sealed on their way out and
//! opened on their way in, by the link's [`Authenticator`], inside the
//! core, so every host of it (the dataplane, the simulator, the fuzzers,
//! the benchmarks) gets authentication by asking for it.

use crate::auth::{AuthError, Authenticator};
use crate::{DownReason, LinkId, Nanos, Node, Observer, OneBuffer, Store, TransmitBuffers};

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

    pub(crate) fn is_authenticated(&self, link: LinkId) -> bool {
        self.link_auth(link).is_some()
    }

    /// The frame inside `bytes`, checked if `link` is authenticated;
    /// `None` if the check failed (counted, and told to the link when the
    /// failure says why it is not coming up).
    pub(crate) fn open<'a>(&mut self, link: LinkId, bytes: &'a [u8]) -> Option<&'a [u8]> {
        let Some(auth) = self.link_auth_mut(link) else {
            return Some(bytes);
        };
        match auth.open(bytes) {
            Ok(frame) => Some(frame),
            Err(e) => {
                self.note_auth_drop(link, e, bytes);
                None
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
