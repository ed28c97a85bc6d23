//! The protocol a queue runs between its driver and its applications: OAE,
//! or the model of RoCE's RC transport it is compared with. Both are
//! sans-IO; the pipeline drives either through [`Transport`] and is
//! compiled once per transport, so nothing is dispatched per frame.

use oae_proto::verb::{Output, Verb, VerbError};
use oae_proto::{Event, LinkChange, LinkId, Memory, Nanos, Node, RegionSpec, SubmitError, VerbId};
use oae_rc_model::{RcEndpoint, RcEvent};
use serde_json::{Value, json};

use crate::report::{link_report, stats_report};

/// What a transport tells the pipeline.
// Results carry their bytes inline, as the cores' events do.
#[allow(clippy::large_enum_variant)]
pub enum TransportEvent {
    Completed {
        id: VerbId,
        result: Result<Output, VerbError>,
    },
    /// Something worth a log line (the link came up, the QP failed).
    Notice(String),
}

pub trait Transport: Send + 'static {
    /// `"oae"` or `"rc-model"`.
    fn name(&self) -> &'static str;
    /// The workload verbs it runs (by `workload::Kind` name).
    fn verb_kinds(&self) -> &'static [&'static str];
    fn handle_frame(&mut self, payload: &[u8], now: Nanos);
    fn poll_transmit(&mut self, now: Nanos, buf: &mut [u8]) -> Option<usize>;
    fn poll_timeout(&self) -> Option<Nanos>;
    fn handle_timeout(&mut self, now: Nanos);
    /// Queues a verb; the error says why it was not accepted.
    fn submit(&mut self, id: VerbId, verb: Verb) -> Result<(), &'static str>;
    fn poll_event(&mut self) -> Option<TransportEvent>;
    /// Nothing in flight and nothing owed to the peer.
    fn is_quiescent(&self) -> bool;
    fn memory(&self) -> &Memory;
    fn register(&mut self, spec: RegionSpec) -> Result<(), String>;
    /// Link state for `status` (has `"up"`).
    fn status(&self) -> Value;
    /// Every counter, for `stats`.
    fn stats(&self) -> Value;
}

/// OAE: a node with its one link.
pub struct Oae {
    pub node: Node,
    pub link: LinkId,
}

impl Transport for Oae {
    fn name(&self) -> &'static str {
        "oae"
    }

    fn verb_kinds(&self) -> &'static [&'static str] {
        &["read", "write", "cas", "faa", "swap", "mcas", "bswap"]
    }

    fn handle_frame(&mut self, payload: &[u8], now: Nanos) {
        self.node.handle_frame(self.link, payload, now);
    }

    fn poll_transmit(&mut self, now: Nanos, buf: &mut [u8]) -> Option<usize> {
        self.node.poll_transmit(self.link, now, buf)
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        self.node.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Nanos) {
        self.node.handle_timeout(now);
    }

    fn submit(&mut self, id: VerbId, verb: Verb) -> Result<(), &'static str> {
        self.node.submit(self.link, id, verb).map_err(|e| match e {
            SubmitError::QueueFull => "submission queue full",
            SubmitError::Invalid(why) => why,
            SubmitError::UnknownLink(_) => "no such link",
        })
    }

    fn poll_event(&mut self) -> Option<TransportEvent> {
        Some(match self.node.poll_event()? {
            Event::Completed { id, result, .. } => TransportEvent::Completed { id, result },
            Event::Link { change, .. } => {
                let epoch = self.node.link_status(self.link).map_or(0, |s| s.peer_epoch);
                let what = match change {
                    LinkChange::Up => "up",
                    LinkChange::Unreachable => "unreachable",
                    LinkChange::PeerRestarted => "peer restarted",
                };
                TransportEvent::Notice(format!("link {what} (peer epoch {epoch})"))
            }
        })
    }

    fn is_quiescent(&self) -> bool {
        self.node.is_quiescent()
    }

    fn memory(&self) -> &Memory {
        self.node.memory()
    }

    fn register(&mut self, spec: RegionSpec) -> Result<(), String> {
        self.node.register(spec).map_err(|e| e.to_string())
    }

    fn status(&self) -> Value {
        serde_json::to_value(link_report(&self.node, self.link)).unwrap_or_default()
    }

    fn stats(&self) -> Value {
        stats_report(&self.node, self.link)
    }
}

/// The RC model: one queue pair, connected from the start.
pub struct RcModel {
    pub endpoint: RcEndpoint,
}

impl Transport for RcModel {
    fn name(&self) -> &'static str {
        "rc-model"
    }

    fn verb_kinds(&self) -> &'static [&'static str] {
        &["read", "write", "cas", "faa"]
    }

    fn handle_frame(&mut self, payload: &[u8], now: Nanos) {
        self.endpoint.handle_frame(payload, now);
    }

    fn poll_transmit(&mut self, now: Nanos, buf: &mut [u8]) -> Option<usize> {
        self.endpoint.poll_transmit(now, buf)
    }

    fn poll_timeout(&self) -> Option<Nanos> {
        self.endpoint.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Nanos) {
        self.endpoint.handle_timeout(now);
    }

    fn submit(&mut self, id: VerbId, verb: Verb) -> Result<(), &'static str> {
        self.endpoint.submit(id, verb).map_err(|e| match e {
            oae_rc_model::SubmitError::QueueFull => "submission queue full",
            oae_rc_model::SubmitError::NotAnRcVerb => {
                "not an RC verb: the RC model runs read, write, cas and faa"
            }
            oae_rc_model::SubmitError::QpError => "the RC model's queue pair has failed",
        })
    }

    fn poll_event(&mut self) -> Option<TransportEvent> {
        Some(match self.endpoint.poll_event()? {
            RcEvent::Completed { id, result } => TransportEvent::Completed { id, result },
            RcEvent::QpFailed(why) => {
                TransportEvent::Notice(format!("RC model QP failed: {why:?}"))
            }
        })
    }

    fn is_quiescent(&self) -> bool {
        self.endpoint.in_flight() == 0
    }

    fn memory(&self) -> &Memory {
        self.endpoint.memory()
    }

    fn register(&mut self, spec: RegionSpec) -> Result<(), String> {
        self.endpoint
            .memory_mut()
            .register(spec)
            .map_err(|e| e.to_string())
    }

    fn status(&self) -> Value {
        let failure = self.endpoint.failure().map(|f| format!("{f:?}"));
        json!({
            "transport": "rc-model",
            "up": failure.is_none(),
            "qp_failure": failure,
            "in_flight": self.endpoint.in_flight(),
        })
    }

    fn stats(&self) -> Value {
        let s = self.endpoint.stats();
        json!({
            "transport": "rc-model",
            "rx_frames": s.rx_frames,
            "tx_frames": s.tx_frames,
            "malformed_total": s.malformed,
            "requests_sent": s.requests_sent,
            "retransmissions": s.retransmissions,
            "timeouts": s.timeouts,
            "naks_received": s.naks_received,
            "acks_sent": s.acks_sent,
            "naks_sent": s.naks_sent,
            "executed": s.executed,
            "duplicates": s.duplicates,
            "cache_replays": s.cache_replays,
            "cache_misses": s.cache_misses,
            "out_of_order": s.out_of_order,
            "completions_ok": s.completions_ok,
            "completions_err": s.completions_err,
            // Names the OAE reports use, so tables can sum either.
            "reversals": s.retransmissions,
        })
    }
}
