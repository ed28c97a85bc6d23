//! How a verb ended, as one stable number: what the metrics endpoint labels
//! verbs with and what the C library hands back in a completion's status.

use oae_proto::verb::{Refusal, ReverseReason, VerbError};

use crate::api::{AppError, NotSubmitted};

/// The outcome of a completed verb. The codes are stable (a C program
/// compares against them): new outcomes take new codes, none is reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Outcome {
    Ok = 0,
    /// 1-15: the target refused it, by [`Refusal`] code.
    RefusedNoCredit = 1,
    RefusedUnknownRegion = 2,
    RefusedBadKey = 3,
    RefusedOutOfBounds = 4,
    RefusedMalformed = 5,
    RefusedForbidden = 6,
    RefusedLocked = 7,
    RefusedMisaligned = 8,
    RefusedNoReceive = 9,
    RefusedReceiveTooSmall = 10,
    Unreachable = 16,
    PeerRestarted = 17,
    EchoMissing = 18,
    EchoMismatch = 19,
    LocalLocked = 20,
    TooLarge = 21,
    /// 32-41: refused before it reached a link, by [`NotSubmitted`] code.
    NotSubmitted = 32,
    QueueFull = 33,
    ShuttingDown = 34,
    NotForTransport = 35,
    Undecodable = 36,
    Invalid = 37,
    NoSuchLink = 38,
    QpFailed = 39,
    NoRoute = 40,
    Recalled = 41,
}

/// One more than the largest code: the size of a table indexed by code.
pub const OUTCOME_CODES: usize = 42;

impl Outcome {
    pub const ALL: [Outcome; 27] = [
        Outcome::Ok,
        Outcome::RefusedNoCredit,
        Outcome::RefusedUnknownRegion,
        Outcome::RefusedBadKey,
        Outcome::RefusedOutOfBounds,
        Outcome::RefusedMalformed,
        Outcome::RefusedForbidden,
        Outcome::RefusedLocked,
        Outcome::RefusedMisaligned,
        Outcome::RefusedNoReceive,
        Outcome::RefusedReceiveTooSmall,
        Outcome::Unreachable,
        Outcome::PeerRestarted,
        Outcome::EchoMissing,
        Outcome::EchoMismatch,
        Outcome::LocalLocked,
        Outcome::TooLarge,
        Outcome::NotSubmitted,
        Outcome::QueueFull,
        Outcome::ShuttingDown,
        Outcome::NotForTransport,
        Outcome::Undecodable,
        Outcome::Invalid,
        Outcome::NoSuchLink,
        Outcome::QpFailed,
        Outcome::NoRoute,
        Outcome::Recalled,
    ];

    pub fn of<T>(result: &Result<T, AppError>) -> Outcome {
        match result {
            Ok(_) => Outcome::Ok,
            Err(AppError::Verb(e)) => Outcome::of_verb_error(e),
            Err(AppError::NotSubmitted(n)) => Outcome::of_not_submitted(*n),
        }
    }

    /// [`Outcome::of`] for a verb that reached a link, without copying its
    /// result (an `Output` can be a kilobyte).
    pub fn of_verb<T>(result: &Result<T, VerbError>) -> Outcome {
        match result {
            Ok(_) => Outcome::Ok,
            Err(e) => Outcome::of_verb_error(e),
        }
    }

    fn of_verb_error(e: &VerbError) -> Outcome {
        match e {
            VerbError::Refused(r) => match r {
                Refusal::NoCredit => Outcome::RefusedNoCredit,
                Refusal::UnknownRegion => Outcome::RefusedUnknownRegion,
                Refusal::BadKey => Outcome::RefusedBadKey,
                Refusal::OutOfBounds => Outcome::RefusedOutOfBounds,
                Refusal::Malformed => Outcome::RefusedMalformed,
                Refusal::Forbidden => Outcome::RefusedForbidden,
                Refusal::Locked => Outcome::RefusedLocked,
                Refusal::Misaligned => Outcome::RefusedMisaligned,
                Refusal::NoReceive => Outcome::RefusedNoReceive,
                Refusal::ReceiveTooSmall => Outcome::RefusedReceiveTooSmall,
            },
            VerbError::Unreachable => Outcome::Unreachable,
            VerbError::PeerRestarted => Outcome::PeerRestarted,
            VerbError::Exhausted(ReverseReason::EchoMissing) => Outcome::EchoMissing,
            VerbError::Exhausted(ReverseReason::EchoMismatch) => Outcome::EchoMismatch,
            VerbError::Exhausted(ReverseReason::LocalLocked) => Outcome::LocalLocked,
            VerbError::LocalLocked => Outcome::LocalLocked,
            VerbError::TooLarge => Outcome::TooLarge,
        }
    }

    fn of_not_submitted(n: NotSubmitted) -> Outcome {
        Outcome::from_code(Outcome::NotSubmitted as u8 + n.code()).unwrap_or(Outcome::NotSubmitted)
    }

    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(code: u8) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.code() == code)
    }

    /// Its label in metrics and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::RefusedNoCredit => "refused_no_credit",
            Outcome::RefusedUnknownRegion => "refused_unknown_region",
            Outcome::RefusedBadKey => "refused_bad_key",
            Outcome::RefusedOutOfBounds => "refused_out_of_bounds",
            Outcome::RefusedMalformed => "refused_malformed",
            Outcome::RefusedForbidden => "refused_forbidden",
            Outcome::RefusedLocked => "refused_locked",
            Outcome::RefusedMisaligned => "refused_misaligned",
            Outcome::RefusedNoReceive => "refused_no_receive",
            Outcome::RefusedReceiveTooSmall => "refused_receive_too_small",
            Outcome::Unreachable => "unreachable",
            Outcome::PeerRestarted => "peer_restarted",
            Outcome::EchoMissing => "echo_missing",
            Outcome::EchoMismatch => "echo_mismatch",
            Outcome::LocalLocked => "local_locked",
            Outcome::TooLarge => "too_large",
            Outcome::NotSubmitted => "not_submitted",
            Outcome::QueueFull => "queue_full",
            Outcome::ShuttingDown => "shutting_down",
            Outcome::NotForTransport => "not_for_transport",
            Outcome::Undecodable => "undecodable",
            Outcome::Invalid => "invalid",
            Outcome::NoSuchLink => "no_such_link",
            Outcome::QpFailed => "qp_failed",
            Outcome::NoRoute => "no_route",
            Outcome::Recalled => "recalled",
        }
    }

    /// What it means, for a person (`oae_strerror`).
    pub fn describe(self) -> &'static str {
        match self {
            Outcome::Ok => "success",
            Outcome::RefusedNoCredit => "refused by the target: sent without a credit",
            Outcome::RefusedUnknownRegion => "refused by the target: no such region",
            Outcome::RefusedBadKey => "refused by the target: wrong region key",
            Outcome::RefusedOutOfBounds => "refused by the target: outside the region",
            Outcome::RefusedMalformed => "refused by the target: the verb did not decode",
            Outcome::RefusedForbidden => {
                "refused by the target: the region does not allow this verb"
            }
            Outcome::RefusedLocked => {
                "refused by the target: a word stayed locked by another transfer"
            }
            Outcome::RefusedMisaligned => {
                "refused by the target: an atomic word offset is not 8-byte aligned"
            }
            Outcome::RefusedNoReceive => "refused by the target: no receive was posted",
            Outcome::RefusedReceiveTooSmall => {
                "refused by the target: the message is longer than its posted receive"
            }
            Outcome::Unreachable => "the link was declared unreachable; no effect",
            Outcome::PeerRestarted => "the target restarted; no effect on its new incarnation",
            Outcome::EchoMissing => "every attempt was reversed: an echo never came",
            Outcome::EchoMismatch => "every attempt was reversed: an echo did not match",
            Outcome::LocalLocked => "the local block of a READ or bilateral swap stayed locked",
            Outcome::TooLarge => "the verb needs a larger frame than the peer accepts",
            not_submitted => {
                NotSubmitted::from_code(not_submitted.code() - Outcome::NotSubmitted.code())
                    .summary()
            }
        }
    }
}

/// An outcome travels by its stable name (`refused_bad_key`).
impl serde::Serialize for Outcome {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Outcome {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Outcome, D::Error> {
        let name = String::deserialize(d)?;
        Outcome::ALL
            .into_iter()
            .find(|o| o.name() == name)
            .ok_or_else(|| serde::de::Error::custom(format!("no verb outcome is named '{name}'")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_and_fit_the_table() {
        for (i, a) in Outcome::ALL.iter().enumerate() {
            assert!(usize::from(a.code()) < OUTCOME_CODES, "{a:?}");
            assert_eq!(Outcome::from_code(a.code()), Some(*a));
            for b in &Outcome::ALL[i + 1..] {
                assert_ne!(a.name(), b.name());
            }
        }
        assert_eq!(Outcome::from_code(11), None);
    }

    #[test]
    fn every_refusal_before_a_link_has_its_own_outcome() {
        for code in 0..10 {
            let n = NotSubmitted::from_code(code);
            let o = Outcome::of::<()>(&Err(AppError::NotSubmitted(n)));
            assert_eq!(o.code(), 32 + code, "{n:?}");
        }
        let refused = Outcome::of::<()>(&Err(AppError::Verb(VerbError::Refused(Refusal::Locked))));
        assert_eq!(refused.code(), Refusal::Locked as u8);
    }

    #[test]
    fn a_verb_result_has_the_outcome_it_has_as_an_application_result() {
        let results: [Result<u8, VerbError>; 5] = [
            Ok(7),
            Err(VerbError::Refused(Refusal::BadKey)),
            Err(VerbError::Unreachable),
            Err(VerbError::PeerRestarted),
            Err(VerbError::LocalLocked),
        ];
        for r in results {
            assert_eq!(
                Outcome::of_verb(&r),
                Outcome::of(&r.map_err(AppError::Verb))
            );
        }
    }
}
