//! What a completion touches: the verbs in flight and whoever waits for
//! them (an application, a host program, `oaectl`, a workload). A view of
//! the pipeline without its ports and transport, so that a completion is
//! handled as the transport drains it.

use hdrhistogram::Histogram;
use oae_client::api::{AppError, Completion};
use oae_client::control::{Answer, ControlError, ErrorCode, OutputView, VerbAnswer};
use oae_client::outcome::Outcome;
use oae_client::stats::PipelineCounters;
use oae_proto::verb::{Output, VerbError};
use oae_proto::{Nanos, PATH_BASE, SharedMemory, Store, VerbId};

use super::commands::QueueShared;
use super::discovery::Discovery;
use super::outcomes::VerbOutcomes;
use super::receives::Receives;
use super::transfers::Transfers;
use super::{ControlWaiter, InFlight, Origin};
use crate::host::HostPort;
use crate::log::{QueueLog, Severity};
use crate::transport::TransportEvent;
use crate::workload::LinkWorkloads;

pub(super) struct Completer<'p> {
    pub(super) log: &'p mut QueueLog,
    /// How the queue finds its neighbours, if it does: its vacant links
    /// have nothing to say.
    pub(super) discovery: Option<&'p Discovery>,
    pub(super) inflight: &'p mut [Option<InFlight>],
    pub(super) free_ids: &'p mut Vec<u32>,
    pub(super) latency: &'p mut Histogram<u64>,
    pub(super) outcomes: &'p mut VerbOutcomes,
    pub(super) shared: &'p QueueShared,
    pub(super) counters: &'p mut PipelineCounters,
    pub(super) host: &'p mut Option<HostPort>,
    pub(super) control_waiting: &'p mut [Option<ControlWaiter>],
    pub(super) memory: &'p SharedMemory,
    pub(super) workloads: &'p mut LinkWorkloads,
    pub(super) receives: &'p mut Receives,
    pub(super) transfers: &'p mut Transfers,
}

impl Completer<'_> {
    /// One event of the transport, in the order the transport raised it.
    pub(super) fn handle(&mut self, event: TransportEvent<'_>, now: Nanos) {
        match event {
            TransportEvent::Completed { id, result } => self.complete(id, result, now),
            TransportEvent::Notice(severity, what) => self.log.say(now, severity, &what),
            TransportEvent::NeverHeard(link) => {
                if self.discovery.is_none_or(|d| !d.is_vacant(link)) {
                    let kind = if link >= PATH_BASE { "path" } else { "link" };
                    self.log.say(
                        now,
                        Severity::Warn,
                        &format!(
                            "{kind} {link} has not heard its peer: is the peer's dataplane \
                             running, and the wire between them up?"
                        ),
                    );
                }
            }
            TransportEvent::PeerRestarted {
                link,
                node,
                notice: what,
            } => {
                self.log.say(now, Severity::Warn, &what);
                self.workloads.peer_restarted(link, node);
            }
            TransportEvent::Received { id, len, imm, .. } => {
                let unclaimed = self.receives.received(
                    (id, len, imm),
                    self.memory,
                    self.host.as_mut(),
                    self.counters,
                );
                if let Some(what) = unclaimed {
                    self.log.say(now, Severity::Warn, &what);
                }
            }
        }
    }

    fn complete(&mut self, id: VerbId, result: &Result<Output, VerbError>, now: Nanos) {
        let index = id.0 as usize;
        let Some(entry) = self.inflight.get_mut(index).and_then(Option::take) else {
            return;
        };
        self.free_ids.push(index as u32);
        self.counters.verbs_ended += 1;
        let latency = now.saturating_sub(entry.submitted);
        let _ = self.latency.record(latency.max(1));
        let outcome = Outcome::of_verb(result);
        self.outcomes.count(entry.kind, outcome);
        match entry.origin {
            Origin::App(app_id) => {
                let completion = Completion {
                    id: app_id,
                    result: result.map_err(AppError::Verb),
                    latency_ns: latency,
                };
                deliver(self.shared, self.counters, completion);
            }
            Origin::Host(origin, host_id) => {
                if let Some(host) = self.host {
                    host.complete(
                        origin,
                        Completion {
                            id: host_id,
                            result: result.map_err(AppError::Verb),
                            latency_ns: latency,
                        },
                    );
                }
            }
            Origin::HostPart(transfer) => {
                if let (Some(host), Some((origin, c))) = (
                    self.host.as_mut(),
                    self.transfers.part_done(transfer, result, now),
                ) {
                    host.complete(origin, c);
                }
            }
            Origin::Control(waiter) => {
                if let Some(w) = self.control_waiting.get_mut(waiter).and_then(Option::take) {
                    let answer = match result {
                        Ok(output) => Ok(Answer::Verb(VerbAnswer {
                            result: self.view(output, w.landing),
                            latency_ns: latency,
                        })),
                        Err(_) => Err(ControlError::verb(
                            ErrorCode::VerbFailed,
                            outcome,
                            format!("verb failed, no effect: {}", outcome.describe()),
                        )),
                    };
                    let _ = w.reply.send(answer);
                }
            }
            Origin::Workload(slot, lane) => {
                self.workloads.complete(slot, lane, result, latency, now)
            }
        }
    }
}

impl Completer<'_> {
    /// An `oaectl verb`'s output, with the bytes a READ or bilateral swap
    /// landed read back from its local block.
    fn view(&self, output: &Output, landing: Option<(u16, u32, u16)>) -> OutputView {
        match landing {
            Some((region, offset, len)) => self.memory.with_block(region, offset, len, |landed| {
                OutputView::new(output, landed)
            }),
            None => OutputView::new(output, &[]),
        }
    }
}

/// Hands a completion to the application; one that finds its queue full
/// is counted, never dropped silently.
pub(super) fn deliver(
    shared: &QueueShared,
    counters: &mut PipelineCounters,
    completion: Completion,
) {
    if shared.completions.push(completion).is_err() {
        counters.app_completions_lost += 1;
    }
}
