//! How oaectl says it did not do what was asked: a stable code, words for
//! people, and an exit status by class, so a script can tell "no dataplane
//! there" from "the verb failed" without reading the words.

use std::process::ExitCode;

use oae_client::control::{ControlError, ErrorCode, ErrorReport};

use crate::out;

/// Exit statuses, one per class of failure (`oaectl --help` lists them).
pub const EXIT_STATUSES: &str = "\
Exit status: 0 done; 1 failed (local or dataplane error, see the code); \
2 bad arguments or request; 3 no dataplane on the socket, or not yours; \
4 refused (not found, conflict, unsupported, shutting down); \
5 the verb failed or was not submitted, with no effect; \
6 busy or timed out, try again. With --json, a failure prints \
{\"error\": …, \"code\": …} on standard output.";

/// Why a command failed.
#[derive(Debug)]
pub struct Failure {
    error: ControlError,
    /// The answer on standard output already says it failed (a demo's
    /// report with its check failed): `--json` prints nothing more there.
    answered: bool,
}

impl Failure {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Failure {
        Failure::from(ControlError::new(code, message))
    }

    /// An argument out of its range or contradicting another.
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure::new(ErrorCode::BadRequest, message)
    }

    /// A check that failed after its report was printed, the report saying
    /// so.
    pub fn answered(message: impl Into<String>) -> Failure {
        Failure {
            answered: true,
            ..Failure::new(ErrorCode::Failed, message)
        }
    }

    pub fn exit_status(&self) -> u8 {
        exit_status(self.error.code)
    }

    /// Says so (as JSON on standard output with `--json`, else on standard
    /// error) and gives the exit status of its class.
    pub fn report(&self, json: bool) -> ExitCode {
        if json && !self.answered {
            // A failure to print the report leaves the exit status to tell.
            let _ = out::json(&ErrorReport::from(&self.error));
        } else {
            eprintln!("oaectl: {}", self.error.message);
        }
        ExitCode::from(self.exit_status())
    }
}

pub fn exit_status(code: ErrorCode) -> u8 {
    match code {
        ErrorCode::Failed | ErrorCode::Io | ErrorCode::Closed | ErrorCode::Protocol => 1,
        ErrorCode::BadRequest => 2,
        ErrorCode::NoDataplane | ErrorCode::Denied => 3,
        ErrorCode::NotFound
        | ErrorCode::Conflict
        | ErrorCode::Unsupported
        | ErrorCode::ShuttingDown => 4,
        ErrorCode::VerbFailed | ErrorCode::VerbNotSubmitted => 5,
        ErrorCode::Busy | ErrorCode::Timeout => 6,
    }
}

impl From<ControlError> for Failure {
    fn from(error: ControlError) -> Failure {
        Failure {
            error,
            answered: false,
        }
    }
}

/// What failed on oaectl's side (a file, a namespace, a check), in words.
impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::new(ErrorCode::Failed, message)
    }
}

impl From<&str> for Failure {
    fn from(message: &str) -> Failure {
        Failure::new(ErrorCode::Failed, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_class_and_the_listed_statuses_are_the_ones_given() {
        let codes = [
            ErrorCode::BadRequest,
            ErrorCode::NotFound,
            ErrorCode::Conflict,
            ErrorCode::Unsupported,
            ErrorCode::VerbFailed,
            ErrorCode::VerbNotSubmitted,
            ErrorCode::Busy,
            ErrorCode::ShuttingDown,
            ErrorCode::Timeout,
            ErrorCode::Failed,
            ErrorCode::NoDataplane,
            ErrorCode::Denied,
            ErrorCode::Io,
            ErrorCode::Closed,
            ErrorCode::Protocol,
        ];
        for code in codes {
            let status = exit_status(code);
            assert!(
                EXIT_STATUSES.contains(&format!("{status} ")),
                "{code:?} exits {status}, which the help does not list"
            );
        }
    }
}
