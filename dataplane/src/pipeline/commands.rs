//! The control interface of a polling core: what the rest of the process
//! shares with it, the questions it answers between bursts, and its answers.

use oae_common::mac::format_mac;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::time::Duration;

use crossbeam_queue::ArrayQueue;
use oae_pmd::Driver;
use oae_proto::verb::Verb;
use oae_proto::{LinkId, Nanos, RegionSpec, RegisterError, Store};

use super::idle::Waker;
use super::tap::{CaptureBuffer, FinishedCapture, Tap};
use super::{ControlWaiter, Origin, Pipeline, RecvRequest, Target, driver_counters};
use crate::transport::Transport;
use crate::workload::Aim;
use oae_client::api::{AppError, Completion, Submission};
use oae_client::control::{
    Answer, ControlError, ErrorCode, HistReport, KeyChange, Percentiles, PhaseStarted, RegionAdded,
    RegionView, WorkloadSpec,
};
use oae_client::outcome::Outcome;
use oae_client::stats::{HostStats, LatencyBuckets, LinkCounters, QueueStats};
use oae_client::status::{LinkStatus, QueueStatus};

/// What the rest of the process shares with one polling core.
pub struct QueueShared {
    pub commands: ArrayQueue<Command>,
    pub submissions: ArrayQueue<Submission>,
    pub completions: ArrayQueue<Completion>,
    /// Set to stop: no new work, finish or reverse what is in flight, exit.
    /// Through [`QueueShared::request_stop`], which wakes a sleeping core.
    pub stop: AtomicBool,
    pub stopped: AtomicBool,
    /// The address the dataplane must take, once its node id lost its own
    /// to a lower one (docs/PROTOCOL.md, "Addresses", N3); 0 while none.
    pub readdress: AtomicU32,
    /// Wakes the polling core when it sleeps (`poll.idle = "sleep"`).
    pub(super) waker: Waker,
}

impl QueueShared {
    pub fn new(depth: usize) -> Result<QueueShared, String> {
        Ok(QueueShared {
            commands: ArrayQueue::new(64),
            submissions: ArrayQueue::new(depth),
            completions: ArrayQueue::new(depth),
            stop: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            readdress: AtomicU32::new(0),
            waker: Waker::new()?,
        })
    }

    /// Queues a verb for the polling core; a full queue hands it back.
    #[allow(clippy::result_large_err, reason = "handed back for a retry")]
    pub fn submit(&self, submission: Submission) -> Result<(), Submission> {
        self.submissions.push(submission)?;
        self.waker.wake();
        Ok(())
    }

    /// The address the dataplane must come back at, if its own was lost.
    pub fn readdress(&self) -> Option<u16> {
        match self.readdress.load(Ordering::Acquire) {
            0 => None,
            a => u16::try_from(a).ok(),
        }
    }

    /// Asks the polling core to stop: no new work, finish or reverse what
    /// is in flight, exit.
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.waker.wake();
    }

    /// Asks the polling core a control question and waits up to `timeout`
    /// for its answer (it answers between bursts).
    pub fn ask(&self, what: CommandKind, timeout: Duration) -> Result<Answer, ControlError> {
        let (reply, answer) = mpsc::sync_channel(1);
        self.commands.push(Command { what, reply }).map_err(|_| {
            ControlError::new(
                ErrorCode::Busy,
                "the polling core is busy with control requests; retry",
            )
        })?;
        self.waker.wake();
        answer.recv_timeout(timeout).map_err(|_| {
            ControlError::new(
                ErrorCode::Busy,
                format!("the polling core did not answer within {timeout:?}"),
            )
        })?
    }
}

/// A control request for a polling core, with where to send the answer.
pub struct Command {
    pub what: CommandKind,
    pub reply: SyncSender<Result<Answer, ControlError>>,
}

pub enum CommandKind {
    Status,
    Stats,
    Hist,
    /// Boxed: control requests are rare, and the other kinds stay small.
    Verb(LinkId, Box<Verb>),
    /// A verb for a node, by whatever link or path reaches it.
    VerbTo(u64, Box<Verb>),
    RegionAdd(RegionSpec),
    RegionList,
    WorkloadStart(WorkloadSpec),
    WorkloadStatus(Aim),
    WorkloadPhase(Aim, String),
    /// Changes a link's keys.
    Key(LinkId, KeyChange),
    /// Posts a receive and answers with the message it takes.
    Recv(RecvRequest),
    /// Records the next frames received and sent into `buffer`, for at
    /// most `within`; answered at once, the frames handed back on `done`.
    Capture {
        buffer: Box<CaptureBuffer>,
        within: Duration,
        done: SyncSender<FinishedCapture>,
    },
}

impl<D: Driver, T: Transport> Pipeline<D, T> {
    /// The peer MAC of `link`: listed, or found; `None` while it is vacant.
    fn peer_of(&self, link: LinkId) -> Option<[u8; 6]> {
        self.ports.iter().find_map(|p| p.peer_of(link))
    }

    pub(super) fn status(&self) -> QueueStatus {
        // A queue that finds its neighbours shows the links bound to one.
        let links = (0..self.links)
            .filter_map(|l| {
                let link = l as LinkId;
                Some(LinkStatus {
                    link,
                    peer_mac: format_mac(self.peer_of(link)?),
                    peer_node: self.transport.peer_node(link),
                    state: self.transport.status(link)?,
                })
            })
            .collect();
        QueueStatus {
            queue: self.info.clone(),
            transport: self.transport.name().into(),
            links,
            in_flight: self.inflight.iter().filter(|e| e.is_some()).count(),
            workload_running: self.workloads.any_running(),
            fabric: self.transport.fabric(),
        }
    }

    /// Every counter of the queue, its links' and its driver's.
    fn stats(&mut self) -> QueueStats {
        let links = (0..self.links)
            .map(|l| {
                let link = l as LinkId;
                LinkCounters {
                    link,
                    peer_mac: self.peer_of(link).map(format_mac).unwrap_or_default(),
                    peer_node: self.transport.peer_node(link),
                    ..self.transport.stats(link)
                }
            })
            .collect();
        QueueStats {
            queue: self.info.clone(),
            pipeline: self.counters,
            verbs: self.outcomes.report(),
            host: self.host.as_ref().map(|h| HostStats {
                ring: h.path().display().to_string(),
                counters: h.counters(),
            }),
            driver: driver_counters(&self.driver_stats()),
            idle: self.idle.counters(),
            // Answered on the polling thread: its own CPU time.
            cpu: oae_os::cpu::this_thread(),
            transport: self.transport.name().into(),
            links,
            latency: LatencyBuckets::of(&self.latency),
            stages: self.stages.account(),
        }
    }

    pub(super) fn take_commands(&mut self, now: Nanos) {
        // An empty queue's `pop` costs a fence; looking costs a load.
        if self.shared.commands.is_empty() {
            return;
        }
        while let Some(cmd) = self.shared.commands.pop() {
            self.counters.control_requests += 1;
            let answer = match cmd.what {
                CommandKind::Status => Ok(Answer::QueueStatus(Box::new(self.status()))),
                CommandKind::Stats => Ok(Answer::QueueStats(Box::new(self.stats()))),
                CommandKind::Hist => Ok(Answer::Hist(HistReport {
                    queue: self.info.index,
                    latency_ns: Percentiles::of(&self.latency),
                })),
                verb @ (CommandKind::Verb(..) | CommandKind::VerbTo(..)) => {
                    let slot = match self.control_waiting.iter().position(Option::is_none) {
                        Some(i) => i,
                        None => {
                            self.control_waiting.push(None);
                            self.control_waiting.len() - 1
                        }
                    };
                    let to = match &verb {
                        CommandKind::Verb(link, verb) => Target::Link(*link, verb),
                        CommandKind::VerbTo(node, verb) => Target::Node(*node, verb),
                        _ => unreachable!("matched above"),
                    };
                    let landing = match &to {
                        Target::Link(_, verb) | Target::Node(_, verb) => verb.local_block(),
                    };
                    match self.submit(Origin::Control(slot), to, now) {
                        Ok(()) => {
                            self.control_waiting[slot] = Some(ControlWaiter {
                                reply: cmd.reply,
                                landing,
                            });
                            continue;
                        }
                        Err(e) => Err(ControlError::verb(
                            ErrorCode::VerbNotSubmitted,
                            Outcome::of::<()>(&Err(AppError::NotSubmitted(e))),
                            format!("verb not submitted: {e}"),
                        )),
                    }
                }
                // The memory is the dataplane's, shared by every queue: any
                // queue can register and list it. (Dumps are read by the
                // control thread, off every polling core.)
                CommandKind::RegionAdd(spec) => self
                    .transport
                    .memory()
                    .clone()
                    .register(spec)
                    .map_err(|e| {
                        let why = format!("region {} not registered: {e}", spec.id);
                        match e {
                            RegisterError::DuplicateId(_) => ControlError::conflict(why),
                            _ => ControlError::bad_request(why),
                        }
                    })
                    .map(|()| {
                        Answer::RegionAdded(RegionAdded {
                            registered: spec.id,
                        })
                    }),
                CommandKind::RegionList => Ok(Answer::Regions(
                    self.transport
                        .memory()
                        .region_specs()
                        .into_iter()
                        .map(|r| RegionView {
                            id: r.id,
                            key: r.key,
                            len: r.len,
                            perms: r.permissions.to_string(),
                        })
                        .collect(),
                )),
                CommandKind::WorkloadStart(spec) => {
                    // Aimed at a node: through the fabric if the queue runs
                    // one (the daemon has picked this queue for it).
                    let aim = match spec.node {
                        Some(node) if self.transport.fabric().is_some() => Aim::Node(node),
                        _ => Aim::Link(spec.link),
                    };
                    self.workloads
                        .start(aim, spec, self.transport.memory(), |kind| {
                            self.transport.runs(kind)
                        })
                        .map(|()| Answer::Accepted)
                }
                CommandKind::WorkloadPhase(aim, name) => {
                    self.workloads.begin_phase(aim, name, now).map(|()| {
                        Answer::PhaseStarted(PhaseStarted {
                            phase_started: true,
                        })
                    })
                }
                CommandKind::WorkloadStatus(aim) => self
                    .workloads
                    .status(aim, now)
                    .map(|report| Answer::Workload(Box::new(report))),
                CommandKind::Key(link, change) => {
                    self.transport.change_key(link, &change).map(Answer::Key)
                }
                CommandKind::Recv(ask) => {
                    self.receives.post(&mut self.transport, ask, cmd.reply, now);
                    continue;
                }
                CommandKind::Capture {
                    buffer,
                    within,
                    done,
                } => match self.tap {
                    Some(_) => Err(ControlError::conflict(format!(
                        "queue {} is already capturing: wait for that capture to end",
                        self.info.index
                    ))),
                    None => {
                        self.tap = Some(Tap::new(*buffer, within, now, done));
                        Ok(Answer::Accepted)
                    }
                },
            };
            let _ = cmd.reply.send(answer);
        }
    }

    /// Answers the capture in progress with what it recorded.
    pub(super) fn finish_capture(&mut self) {
        if let Some(tap) = self.tap.take() {
            let ports = self.ports.iter().map(|p| p.name().to_string()).collect();
            tap.finish(self.info.index, ports);
        }
    }
}
