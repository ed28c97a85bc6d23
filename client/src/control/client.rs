//! A client's end of the control socket: one request line out, one answer
//! line back, each answer of the type its request names.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::error::{ControlError, ErrorCode};
use super::{
    CaptureReport, FaultChange, FaultsSet, HistReport, KeyChange, KeyState, PhaseStarted,
    ReceivedAnswer, RegionAdded, RegionDump, RegionView, Request, Stopping, VerbAnswer, VerbSpec,
    WorkloadReport, WorkloadSpec, WorkloadStarted,
};
use crate::stats::DataplaneStats;
use crate::status::DataplaneStatus;

/// One answer line: `A` is the answer's type, fixed by the request.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Response<A> {
    Ok(A),
    Error(ControlError),
    /// The last line of a connection: `oaed` closes it after this, for the
    /// reason given.
    Closed(Closed),
}

/// Why `oaed` closed a control connection, and the limit it met.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Closed {
    #[serde(flatten)]
    pub reason: CloseReason,
    /// The reason in words, with what to do.
    pub message: String,
}

impl From<CloseReason> for Closed {
    fn from(reason: CloseReason) -> Closed {
        Closed {
            reason,
            message: reason.to_string(),
        }
    }
}

/// Why a control connection was closed. The names (`reason` in JSON) are
/// stable: clients match on them, never on the message.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case", tag = "reason")]
pub enum CloseReason {
    /// [`MAX_CONTROL_CONNECTIONS`] were open already.
    TooManyConnections { limit: usize },
    /// A request line grew past [`MAX_REQUEST_LINE_BYTES`].
    RequestTooLong { limit_bytes: usize },
    /// No whole request came within [`CONTROL_IDLE_TIMEOUT`].
    Idle { limit_s: u64 },
}

impl core::fmt::Display for CloseReason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            CloseReason::TooManyConnections { limit } => write!(
                f,
                "the dataplane serves at most {limit} control connections at once \
                 (MAX_CONTROL_CONNECTIONS) and that many are open: close idle ones, \
                 or retry when one ends"
            ),
            CloseReason::RequestTooLong { limit_bytes } => write!(
                f,
                "a request line is at most {limit_bytes} bytes (MAX_REQUEST_LINE_BYTES); \
                 this one was longer, so the connection is closed: send one JSON request \
                 per line"
            ),
            CloseReason::Idle { limit_s } => write!(
                f,
                "no whole request came within {limit_s} s (CONTROL_IDLE_TIMEOUT), so the \
                 connection is closed: connect again to send one"
            ),
        }
    }
}

/// A dataplane's control socket, asked one request per connection.
#[derive(Debug, Clone)]
pub struct Client {
    socket: PathBuf,
    timeout: Duration,
}

impl Client {
    /// Waits up to `timeout` for each answer.
    pub fn new(socket: impl Into<PathBuf>, timeout: Duration) -> Client {
        Client {
            socket: socket.into(),
            timeout,
        }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    pub fn status(&self) -> Result<DataplaneStatus, ControlError> {
        self.call(&Request::Status)
    }

    pub fn stats(&self) -> Result<DataplaneStats, ControlError> {
        self.call(&Request::Stats)
    }

    pub fn hist(&self, queue: u16) -> Result<HistReport, ControlError> {
        self.call(&Request::Hist { queue })
    }

    /// Runs `verb` on `queue`'s `link`, or, with `node`, on whatever link
    /// or path reaches that node.
    pub fn verb(
        &self,
        queue: u16,
        link: u16,
        node: Option<u64>,
        verb: VerbSpec,
    ) -> Result<VerbAnswer, ControlError> {
        self.call(&Request::Verb {
            queue,
            link,
            node,
            verb,
        })
    }

    pub fn region_add(
        &self,
        id: u16,
        key: u32,
        len: u32,
        perms: &str,
    ) -> Result<RegionAdded, ControlError> {
        self.call(&Request::RegionAdd {
            id,
            key,
            len,
            perms: perms.to_string(),
        })
    }

    pub fn region_list(&self) -> Result<Vec<RegionView>, ControlError> {
        self.call(&Request::RegionList)
    }

    /// Bytes `offset..offset + len` of region `id` (`len` left out: to its
    /// end).
    pub fn region_dump(
        &self,
        id: u16,
        offset: u32,
        len: Option<u32>,
    ) -> Result<RegionDump, ControlError> {
        match (offset, len) {
            (0, None) => self.call(&Request::RegionDump { id, queue: 0 }),
            _ => self.call(&Request::RegionDumpRange {
                id,
                queue: 0,
                offset,
                len,
            }),
        }
    }

    pub fn fault(&self, change: FaultChange) -> Result<Vec<FaultsSet>, ControlError> {
        self.call(&Request::Fault(change))
    }

    pub fn workload_start(&self, spec: WorkloadSpec) -> Result<WorkloadStarted, ControlError> {
        self.call(&Request::WorkloadStart(spec))
    }

    /// The workload that runs, or ran, on `queue`'s `link` or towards
    /// `node`.
    pub fn workload_status(
        &self,
        queue: u16,
        link: u16,
        node: Option<u64>,
    ) -> Result<WorkloadReport, ControlError> {
        self.call(&Request::WorkloadStatus { queue, link, node })
    }

    pub fn workload_phase(
        &self,
        queue: u16,
        link: u16,
        node: Option<u64>,
        name: &str,
    ) -> Result<PhaseStarted, ControlError> {
        self.call(&Request::WorkloadPhase {
            queue,
            link,
            node,
            name: name.to_string(),
        })
    }

    pub fn capture(
        &self,
        queue: u16,
        count: u32,
        seconds: f64,
    ) -> Result<CaptureReport, ControlError> {
        self.call(&Request::Capture {
            queue,
            count,
            seconds,
        })
    }

    pub fn key(&self, queue: u16, link: u16, change: KeyChange) -> Result<KeyState, ControlError> {
        self.call(&Request::Key {
            queue,
            link,
            change,
        })
    }

    /// Posts a receive on `queue`'s `link` and waits for its message (the
    /// client's own timeout must outlast `timeout_ms`).
    pub fn recv(
        &self,
        queue: u16,
        link: u16,
        (region, offset, len): (u16, u32, u16),
        timeout_ms: u32,
    ) -> Result<ReceivedAnswer, ControlError> {
        self.call(&Request::Recv {
            queue,
            link,
            region,
            offset,
            len,
            timeout_ms,
        })
    }

    pub fn shutdown(&self) -> Result<Stopping, ControlError> {
        self.call(&Request::Shutdown)
    }

    /// Sends one request and reads its answer as `A`. Errors say whether
    /// the dataplane is there at all.
    fn call<A: DeserializeOwned>(&self, request: &Request) -> Result<A, ControlError> {
        let socket = self.socket.display();
        let stream = UnixStream::connect(&self.socket).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                ControlError::new(
                    ErrorCode::NoDataplane,
                    format!(
                        "no dataplane is listening on {socket} ({e}); start one with \
                         `oaed --config <file>`"
                    ),
                )
            }
            std::io::ErrorKind::PermissionDenied => ControlError::new(
                ErrorCode::Denied,
                format!(
                    "permission denied on {socket}: the control socket is private to its \
                     owner (mode 0600)"
                ),
            ),
            _ => io_error(format!("cannot connect to {socket}: {e}")),
        })?;
        stream
            .set_read_timeout(Some(self.timeout))
            .and_then(|()| stream.set_write_timeout(Some(self.timeout)))
            .map_err(|e| io_error(format!("{socket}: {e}")))?;
        let mut line = serde_json::to_string(request)
            .map_err(|e| ControlError::bad_request(format!("request not encoded: {e}")))?;
        line.push('\n');
        let mut reader = BufReader::new(&stream);
        let mut answer = String::new();
        if let Err(e) = (&stream).write_all(line.as_bytes()) {
            // Closed by the daemon before the request was all sent (it was
            // too long): its last line says why.
            if matches!(
                e.kind(),
                std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
            ) && reader.read_line(&mut answer).is_ok()
                && let Ok(Response::<serde::de::IgnoredAny>::Closed(closed)) =
                    serde_json::from_str(&answer)
            {
                return Err(closed.into_error(&self.socket));
            }
            return Err(io_error(format!("sending to {socket}: {e}")));
        }
        reader
            .read_line(&mut answer)
            .map_err(|e| io_error(format!("waiting for {socket}: {e}")))?;
        if answer.is_empty() {
            return Err(io_error(format!(
                "{socket} closed the connection without answering"
            )));
        }
        match serde_json::from_str::<Response<A>>(&answer).map_err(|e| {
            ControlError::new(
                ErrorCode::Protocol,
                format!(
                    "{socket} answered what this client does not understand ({e}): are oaectl \
                     and oaed from the same build?"
                ),
            )
        })? {
            Response::Ok(answer) => Ok(answer),
            Response::Error(e) => Err(e),
            Response::Closed(closed) => Err(closed.into_error(&self.socket)),
        }
    }
}

fn io_error(message: String) -> ControlError {
    ControlError::new(ErrorCode::Io, message)
}

impl Closed {
    fn into_error(self, socket: &Path) -> ControlError {
        ControlError::new(
            ErrorCode::Closed,
            format!("{}: {}", socket.display(), self.message),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_reasons_keep_their_names_on_the_wire() {
        let closed = Response::<()>::Closed(CloseReason::TooManyConnections { limit: 32 }.into());
        let line = serde_json::to_value(&closed).unwrap();
        assert_eq!(line["closed"]["reason"], "too_many_connections");
        assert_eq!(line["closed"]["limit"], 32);
        assert!(line["closed"]["message"].as_str().unwrap().contains("32"));
        let Response::<serde::de::IgnoredAny>::Closed(back) = serde_json::from_value(line).unwrap()
        else {
            panic!("not a closing line")
        };
        assert_eq!(back.reason, CloseReason::TooManyConnections { limit: 32 });
        for (reason, name) in [
            (
                CloseReason::RequestTooLong { limit_bytes: 65536 },
                "request_too_long",
            ),
            (CloseReason::Idle { limit_s: 60 }, "idle"),
        ] {
            let v = serde_json::to_value(Closed::from(reason)).unwrap();
            assert_eq!(v["reason"], name, "{v}");
        }
    }
}
