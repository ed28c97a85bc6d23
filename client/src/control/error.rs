//! Why a control request was not done, as a code clients match on and a
//! message people read.

use serde::{Deserialize, Serialize};

use crate::outcome::Outcome;

/// Why the dataplane did not do what a control request asked, or why the
/// request did not reach it. `code` (and `outcome`, for a verb) are stable:
/// clients match on them, never on `message`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct ControlError {
    pub code: ErrorCode,
    /// What happened and what to do, for a person.
    pub message: String,
    /// For [`ErrorCode::VerbFailed`] and [`ErrorCode::VerbNotSubmitted`]:
    /// the verb's outcome, by its stable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
}

/// The kinds of [`ControlError`]. Their names (`code` in JSON) are stable:
/// a new kind takes a new name and none is reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The request did not parse, or an argument is out of its range: the
    /// message says which and what is allowed.
    BadRequest,
    /// A queue, link, node, region or workload it names does not exist.
    NotFound,
    /// It exists but its state does not allow this now (a capture already
    /// running, a workload not started): the message says what to wait for.
    Conflict,
    /// This dataplane cannot do it at all (no XDP program to inject faults,
    /// a transport without keys).
    Unsupported,
    /// The verb was submitted and failed with no effect; `outcome` says why.
    VerbFailed,
    /// The verb never reached a link; `outcome` says why.
    VerbNotSubmitted,
    /// The polling core did not answer in time or has too many requests
    /// waiting: retry.
    Busy,
    /// The dataplane is stopping and takes no new work.
    ShuttingDown,
    /// What was waited for did not happen in the time asked (a `recv`
    /// that no message filled; its receive was withdrawn).
    Timeout,
    /// Something failed on the dataplane's side (an XDP map update, a
    /// region registration): the message says what.
    Failed,
    /// Client side: no dataplane listens on the socket.
    NoDataplane,
    /// Client side: the socket is not this user's to use.
    Denied,
    /// Client side: the connection failed or timed out midway.
    Io,
    /// The dataplane closed the connection (a limit met); the message says
    /// which.
    Closed,
    /// The answer was not what the protocol says: client and dataplane are
    /// of different versions.
    Protocol,
}

impl ControlError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ControlError {
        ControlError {
            code,
            message: message.into(),
            outcome: None,
        }
    }

    /// A verb that failed or was not submitted, with its outcome.
    pub fn verb(code: ErrorCode, outcome: Outcome, message: impl Into<String>) -> ControlError {
        ControlError {
            code,
            message: message.into(),
            outcome: Some(outcome),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ControlError {
        ControlError::new(ErrorCode::BadRequest, message)
    }

    pub fn not_found(message: impl Into<String>) -> ControlError {
        ControlError::new(ErrorCode::NotFound, message)
    }

    pub fn conflict(message: impl Into<String>) -> ControlError {
        ControlError::new(ErrorCode::Conflict, message)
    }

    pub fn unsupported(message: impl Into<String>) -> ControlError {
        ControlError::new(ErrorCode::Unsupported, message)
    }

    pub fn failed(message: impl Into<String>) -> ControlError {
        ControlError::new(ErrorCode::Failed, message)
    }

    /// The same error, its message prefixed with where it happened.
    pub fn within(mut self, context: impl core::fmt::Display) -> ControlError {
        self.message = format!("{context}: {}", self.message);
        self
    }
}

/// What a command line tool prints on standard output, with `--json`, when
/// it did not do what was asked: `error` for a person, `code` (and
/// `outcome`, for a verb) for a program. `oaectl --json` prints this, and
/// only this, on failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorReport {
    pub error: String,
    pub code: ErrorCode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
}

impl From<&ControlError> for ErrorReport {
    fn from(e: &ControlError) -> ErrorReport {
        ErrorReport {
            error: e.message.clone(),
            code: e.code,
            outcome: e.outcome,
        }
    }
}

/// For callers whose errors are still text: the message, the code left
/// behind.
impl From<ControlError> for String {
    fn from(e: ControlError) -> String {
        e.message
    }
}

impl ErrorCode {
    /// Its name in JSON.
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Conflict => "conflict",
            ErrorCode::Unsupported => "unsupported",
            ErrorCode::VerbFailed => "verb_failed",
            ErrorCode::VerbNotSubmitted => "verb_not_submitted",
            ErrorCode::Busy => "busy",
            ErrorCode::ShuttingDown => "shutting_down",
            ErrorCode::Timeout => "timeout",
            ErrorCode::Failed => "failed",
            ErrorCode::NoDataplane => "no_dataplane",
            ErrorCode::Denied => "denied",
            ErrorCode::Io => "io",
            ErrorCode::Closed => "closed",
            ErrorCode::Protocol => "protocol",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_travel_by_their_stable_names() {
        let e = ControlError::verb(
            ErrorCode::VerbFailed,
            Outcome::RefusedBadKey,
            "verb failed, no effect: refused by the target: wrong region key",
        );
        let json = serde_json::to_string(&e).expect("serialises");
        assert_eq!(
            json,
            r#"{"code":"verb_failed","message":"verb failed, no effect: refused by the target: wrong region key","outcome":"refused_bad_key"}"#
        );
        assert_eq!(serde_json::from_str::<ControlError>(&json).ok(), Some(e));
        for code in [ErrorCode::BadRequest, ErrorCode::Busy, ErrorCode::Protocol] {
            let json = serde_json::to_string(&code).expect("serialises");
            assert_eq!(json, format!("\"{}\"", code.name()));
        }
    }
}
