//! Why a link is not coming up, when the frames it received tell: a
//! misconfiguration the protocol sees but cannot mend (one end
//! authenticated and the other not, two ends of one identity, an epoch
//! that went back). Each link records the reason of the last such frame
//! it dropped while not up, and how many in a row gave it (set on the drop
//! path only, cleared when the link comes up); `oaectl status` shows it
//! with the fix. A link whose peer is merely absent has none: it received
//! nothing to tell.

use crate::auth::{AUTH_TRAILER_LEN, AuthError};
use crate::wire::{Frame, Malformed, Transition};

/// Frames in a row that must give one reason before it is reported: a
/// frame corrupted on the wire, or one left over from the peer's last
/// incarnation, gives a reason once and does not make a diagnosis.
pub const DOWN_REASON_FRAMES: u32 = 3;

/// Why a link is not coming up. The codes and names are stable: tools
/// match on them, never on the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DownReason {
    /// This end authenticates; the peer's frames carry no trailer.
    PeerUnauthenticated = 1,
    /// This end does not authenticate; the peer's frames carry a trailer.
    PeerAuthenticated = 2,
    /// The peer's frames carry a tag that does not verify here.
    KeyMismatch = 3,
    /// The peer's frames are under a key number this end does not hold.
    UnknownKey = 4,
    /// The peer's HELLOs carry this end's own node id and epoch: neither
    /// end can take a role, and each drops the other's answers (R6).
    SameIdentity = 5,
    /// The peer's frames carry an epoch below the one this end already
    /// heard from it (R5, or `old_epoch` on an authenticated link).
    PeerEpochWentBack = 6,
    /// The peer's HELLOs name an epoch of this end above this end's own.
    EpochWentBack = 7,
    /// The peer's frames carry another wire-format version.
    WireVersion = 8,
    /// The peer proved, in a handshake, an identity this end does not
    /// trust (keys agreed by identity).
    PeerUntrusted = 9,
    /// The peer agrees its keys by identity (it sends HANDSHAKEs) and this
    /// end does not: it has a shared key, or no authentication.
    PeerAgreesKeys = 10,
}

impl DownReason {
    pub const ALL: [DownReason; 10] = [
        DownReason::PeerUnauthenticated,
        DownReason::PeerAuthenticated,
        DownReason::KeyMismatch,
        DownReason::UnknownKey,
        DownReason::SameIdentity,
        DownReason::PeerEpochWentBack,
        DownReason::EpochWentBack,
        DownReason::WireVersion,
        DownReason::PeerUntrusted,
        DownReason::PeerAgreesKeys,
    ];

    /// The stable code (1-10).
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The stable name.
    pub fn name(self) -> &'static str {
        match self {
            DownReason::PeerUnauthenticated => "peer_unauthenticated",
            DownReason::PeerAuthenticated => "peer_authenticated",
            DownReason::KeyMismatch => "key_mismatch",
            DownReason::UnknownKey => "unknown_key",
            DownReason::SameIdentity => "same_identity",
            DownReason::PeerEpochWentBack => "peer_epoch_went_back",
            DownReason::EpochWentBack => "epoch_went_back",
            DownReason::WireVersion => "wire_version",
            DownReason::PeerUntrusted => "peer_untrusted",
            DownReason::PeerAgreesKeys => "peer_agrees_keys",
        }
    }

    pub fn from_name(name: &str) -> Option<DownReason> {
        DownReason::ALL.into_iter().find(|r| r.name() == name)
    }

    /// What the link received, and what to do about it.
    pub fn text(self) -> &'static str {
        match self {
            DownReason::PeerUnauthenticated => {
                "the peer's frames carry no authentication trailer: give both ends the same \
                 [queue.auth] (one key, or identity = true), or neither"
            }
            DownReason::PeerAuthenticated => {
                "the peer's frames carry an authentication trailer and this end's queue has no \
                 [queue.auth]: give both ends the same (one key, or identity = true), or neither"
            }
            DownReason::KeyMismatch => {
                "the peer's frames do not verify under this end's key: give both ends the same \
                 [queue.auth] key (and the same link: each end's peer_mac the other's MAC, the \
                 same steer_by and queue)"
            }
            DownReason::UnknownKey => {
                "the peer's frames are under a key number this end does not hold: give both \
                 ends the same key and key_number in [queue.auth] (or add the peer's key here \
                 with oaectl key add)"
            }
            DownReason::SameIdentity => {
                "the peer's HELLOs carry this end's own node id and epoch (two dataplanes with \
                 one node_id, or this end's frames coming back to it), so neither end can take \
                 a role: give every dataplane its own node_id"
            }
            DownReason::PeerEpochWentBack => {
                "the peer's frames carry an epoch below the one this end already heard from \
                 it: the peer restarted without its state directory. Restart this end too, and \
                 keep every dataplane's state_dir across restarts"
            }
            DownReason::EpochWentBack => {
                "the peer knows this end by a larger epoch than this end's own: this end \
                 restarted without its state directory. Restart the peer too, and keep every \
                 dataplane's state_dir across restarts"
            }
            DownReason::WireVersion => {
                "the peer's frames carry another wire-format version: run the same oae release \
                 at both ends"
            }
            DownReason::PeerUntrusted => {
                "the peer proved an identity this end does not trust (the log names it): if it \
                 is the node meant, add its identity (oaed --show-identity on the peer prints \
                 it) to [queue.auth] trusted or trusted_file, and restart this end"
            }
            DownReason::PeerAgreesKeys => {
                "the peer sends key agreement handshakes ([queue.auth] identity = true) and this \
                 end has a shared key or none: set identity = true at both ends, trusting each \
                 other's identity, or give both the same key"
            }
        }
    }

    /// What a frame an authenticated link dropped says, if anything. A
    /// whole OAE frame taken for one with a trailer (a frame of 128 bytes
    /// or more, from a peer without a key) fails as a bad tag or an
    /// unknown key number, and is told apart by parsing (only on this,
    /// the drop path).
    pub fn of_auth(error: AuthError, bytes: &[u8]) -> Option<DownReason> {
        let plain = Frame::parse(bytes);
        let handshake = plain
            .as_ref()
            .is_ok_and(|f| f.context.transition == Transition::Handshake);
        Some(match error {
            AuthError::Unauthenticated => DownReason::PeerUnauthenticated,
            AuthError::BadTag | AuthError::UnknownKey if handshake => DownReason::PeerAgreesKeys,
            AuthError::BadTag | AuthError::UnknownKey if plain.is_ok() => {
                DownReason::PeerUnauthenticated
            }
            AuthError::BadTag => DownReason::KeyMismatch,
            AuthError::UnknownKey => DownReason::UnknownKey,
            AuthError::OldEpoch => DownReason::PeerEpochWentBack,
            // A duplicate or a replay: nothing about the configuration.
            AuthError::Replayed => return None,
        })
    }

    /// What a frame the core found malformed says, if anything: an OAE
    /// frame with an authentication trailer behind it is too long for its
    /// class, and parses once the trailer is cut.
    pub(crate) fn of_malformed(m: Malformed, bytes: &[u8]) -> Option<DownReason> {
        match m {
            Malformed::UnknownVersion => Some(DownReason::WireVersion),
            Malformed::WrongLength
                if bytes.len() > AUTH_TRAILER_LEN
                    && Frame::parse(&bytes[..bytes.len() - AUTH_TRAILER_LEN]).is_ok() =>
            {
                Some(DownReason::PeerAuthenticated)
            }
            _ => None,
        }
    }
}

impl core::fmt::Display for DownReason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} ({})", self.name(), self.text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_names_are_distinct_and_read_back() {
        for (i, r) in DownReason::ALL.into_iter().enumerate() {
            assert_eq!(usize::from(r.code()), i + 1);
            assert_eq!(DownReason::from_name(r.name()), Some(r));
            assert!(r.text().contains(':'), "{r}: says what to do");
        }
        assert_eq!(DownReason::from_name("nonsense"), None);
    }
}
