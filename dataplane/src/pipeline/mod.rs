//! One polling core: receive burst → OAE core → verbs → transmit burst, run
//! to completion, over any [`Driver`].
//!
//! The loop reads the clock once per burst. Everything it touches per packet
//! was allocated before it started: the in-flight table, the bursts, the
//! node's slots. Control requests (rare) arrive through a lock-free queue and
//! are answered on the same thread, between bursts (`commands`).

mod commands;
mod complete;
mod discovery;
pub mod idle;
mod outcomes;
mod port;
mod receives;
mod stages;
mod tap;
#[cfg(test)]
mod tests;
mod transfers;

pub use tap::{CaptureBuffer, FinishedCapture};

pub use commands::{Command, CommandKind, QueueShared};
pub use discovery::Discovery;
pub use oae_client::stats::IdleCounters;
pub use port::Port;
pub use receives::RecvRequest;

use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::SyncSender;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use oae_pmd::{Driver, DriverStats, MAX_BURST};
use oae_proto::LinkId;
use oae_proto::verb::MAX_BLOCK;
use oae_proto::verb::Verb;
use oae_proto::{Nanos, SharedMemory, VerbId};
use serde::Serialize;

use crate::host::{HostOrigin, HostPort};
use crate::log::{QueueLog, Severity};
use crate::transport::Transport;
use crate::workload::{Aim, LinkWorkloads};
use complete::Completer;
pub use oae_client::api::{AppError, Completion, Destination, NotSubmitted, Submission};
use oae_client::api::{LocalSubmission, LocalVerb, MAX_TRANSFER};
use oae_client::control::{Answer, ControlError, ErrorCode};
use oae_client::host::codec::HostRequest;
use oae_client::outcome::Outcome;
use oae_client::stats::{Counters, LinkCounters, PipelineCounters, Stage, named_counters};
pub use oae_client::status::QueueInfo;
use oae_config::PollSettings;
use oae_os::cpu::CpuTime;
use oae_proto::Opcode;
use outcomes::VerbOutcomes;
use stages::StageClock;

/// Where a verb goes: a link of this queue, or a node that a link or the
/// fabric's paths reach. The verb is borrowed from whoever holds it: a
/// verb can be a kilobyte (a WRITE's block inline), and the link keeps
/// its own copy of what it sends.
pub(crate) enum Target<'a> {
    Link(LinkId, &'a Verb),
    Node(u64, &'a Verb),
}

impl<'a> Target<'a> {
    /// Where an application's submission goes.
    fn of(s: &'a Submission) -> Target<'a> {
        match s.to {
            Destination::FirstLink => Target::Link(0, &s.verb),
            Destination::Link(link) => Target::Link(link, &s.verb),
            Destination::Node(node) => Target::Node(node, &s.verb),
        }
    }
}

/// Why an application's MULTI-WORD COMMIT that names one word twice is
/// not sent: a target would keep the last of its new values.
const MCAS_WORD_TWICE: &str = "a multi-word commit names one word twice, asking for two new \
     values of it: name each word once";

/// Why a verb on a local block is not sent.
const LOCAL_BLOCK_OUTSIDE: &str = "the local block is not inside one of the dataplane's \
     regions";
const TRANSFER_TOO_LONG: &str = "a transfer is at most 61440 bytes (64 frames)";
const SEND_IS_ONE_FRAME: &str = "a SEND is one frame: at most 960 bytes";

/// Who is waiting for a verb.
#[derive(Clone, Copy)]
enum Origin {
    App(u64),
    /// A host program's verb, from the host ring: which program, its id.
    Host(HostOrigin, u64),
    /// A part of a host program's transfer longer than a frame (its index
    /// in `Transfers`).
    HostPart(u32),
    Control(usize),
    /// A workload's lane: the workload's slot, and the lane.
    Workload(u16, u32),
}

/// What one iteration did: whether anything moved, when it ran, and, if
/// nothing moved, when the transport's next timer is due.
struct Turn {
    moved: bool,
    now: Nanos,
    next_timer: Option<Nanos>,
}

/// An `oaectl verb` in flight: where its answer goes, and the local block
/// its bytes land in (READ, bilateral swap).
struct ControlWaiter {
    reply: SyncSender<Result<Answer, ControlError>>,
    landing: Option<(u16, u32, u16)>,
}

#[derive(Clone, Copy)]
struct InFlight {
    origin: Origin,
    submitted: Nanos,
    /// For the counts of outcomes.
    kind: Opcode,
}

pub struct Pipeline<D: Driver, T: Transport> {
    /// One per interface the queue's links run over.
    ports: Vec<Port<D>>,
    transport: T,
    /// How many links the transport has (all ports together).
    links: usize,
    info: QueueInfo,
    shared: Arc<QueueShared>,
    /// The host ring this polling core serves, in an IPU deployment.
    host: Option<HostPort>,
    /// Its claims as last seen ([`HostPort::claims`]): when they change,
    /// receives of processes that are gone are withdrawn.
    host_claims: u64,
    /// The loop's clock: the CPU's counter where it is steady (a clock
    /// read every iteration costs half of what the system clock does).
    clock: quanta::Clock,
    started: quanta::Instant,
    inflight: Vec<Option<InFlight>>,
    free_ids: Vec<u32>,
    control_waiting: Vec<Option<ControlWaiter>>,
    /// The dataplane's memory, where a READ or bilateral swap of `oaectl
    /// verb` landed, read back for its answer.
    memory: SharedMemory,
    workloads: LinkWorkloads,
    /// Receives posted by `oaectl recv`, each waiting for its message.
    receives: receives::Receives,
    /// Host transfers longer than a frame, by their parts.
    transfers: transfers::Transfers,
    /// Their completions made while the host ring was being served.
    host_finished: Vec<(HostOrigin, Completion)>,
    latency: Histogram<u64>,
    counters: PipelineCounters,
    outcomes: VerbOutcomes,
    idle: idle::Idle,
    /// A capture in progress (`oaectl capture`).
    tap: Option<tap::Tap>,
    stages: StageClock,
    /// How the queue finds its neighbours, if it lists none.
    discovery: Option<Discovery>,
    /// Its lines in oaed's log.
    log: QueueLog,
}

impl<D: Driver, T: Transport> Pipeline<D, T> {
    pub fn new(
        ports: Vec<Port<D>>,
        transport: T,
        info: QueueInfo,
        shared: Arc<QueueShared>,
        host: Option<HostPort>,
        inflight_capacity: usize,
        poll: PollSettings,
    ) -> Pipeline<D, T> {
        let links = transport.links();
        let memory = transport.memory().clone();
        let clock = quanta::Clock::new();
        let stages = StageClock::new(clock.clone());
        let log = QueueLog::new(format!("{} queue {}", info.iface, info.queue_id), 0);
        Pipeline {
            ports,
            transport,
            links,
            info,
            shared,
            host,
            host_claims: 0,
            started: clock.now(),
            clock,
            inflight: vec![None; inflight_capacity],
            free_ids: (0..inflight_capacity as u32).rev().collect(),
            control_waiting: Vec::new(),
            memory,
            workloads: LinkWorkloads::new(links),
            receives: receives::Receives::new(),
            transfers: transfers::Transfers::default(),
            host_finished: Vec::new(),
            latency: Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds"),
            counters: PipelineCounters::default(),
            outcomes: VerbOutcomes::default(),
            idle: idle::Idle::new(&poll),
            tap: None,
            stages,
            discovery: None,
            log,
        }
    }

    /// The pipeline of a queue that finds its neighbours: its links are
    /// bound to them as they are heard.
    pub fn discovering(mut self, discovery: Discovery) -> Pipeline<D, T> {
        self.discovery = Some(discovery);
        self
    }

    fn now(&self) -> Nanos {
        self.clock.now().duration_since(self.started).as_nanos() as Nanos
    }

    /// Runs until asked to stop, then drains for at most `drain` and returns
    /// the final counters.
    pub fn run(mut self, drain: Duration) -> FinalReport {
        while !self.shared.stop.load(Ordering::Relaxed) {
            let turn = self.iterate(true);
            if turn.moved {
                self.idle.busy();
            } else {
                self.rest(turn.now, turn.next_timer);
            }
        }
        self.workloads.stop();
        // Finish or reverse what is in flight: keep the link running, accept
        // nothing new.
        let until = Instant::now() + drain;
        while Instant::now() < until && !self.quiet() {
            self.iterate(false);
        }
        self.receives.shut_down(self.host.as_mut());
        self.refuse_queued_submissions();
        self.finish_capture();
        for port in &mut self.ports {
            port.flush();
        }
        let report = FinalReport {
            cpu: oae_os::cpu::this_thread(),
            idle: self.idle.counters(),
            queue: self.info.clone(),
            in_flight_at_exit: self.inflight.iter().filter(|e| e.is_some()).count(),
            pipeline: self.counters,
            driver: driver_counters(&self.driver_stats()),
            links: (0..self.links as LinkId)
                .map(|l| self.transport.stats(l))
                .collect(),
        };
        self.shared.stopped.store(true, Ordering::Release);
        report
    }

    fn quiet(&self) -> bool {
        self.transport.is_quiescent() && self.inflight.iter().all(Option::is_none)
    }

    /// What moved so far, as one sum of counters that only grow: an
    /// iteration that leaves it unchanged was idle.
    fn progress(&self) -> u64 {
        let c = &self.counters;
        c.rx_frames
            + c.tx_frames
            + c.tx_ring_full
            + c.app_submitted
            + c.app_refused
            // A request may start work the next iteration does (a workload).
            + c.control_requests
    }

    /// An iteration found nothing to do: spin, yield or sleep, as the
    /// queue's idle policy says. `now` is that iteration's time and
    /// `next_timer` the transport's next deadline as it found it: it ended
    /// a moment ago, and a clock read or a look at every link's timers
    /// costs as much as a spin.
    fn rest(&mut self, now: Nanos, next_timer: Option<Nanos>) {
        let cap = if self.host.is_some() {
            idle::HOST_RING_SLEEP
        } else {
            Duration::MAX
        };
        match self.idle.rest(now, next_timer, cap) {
            idle::Rest::Spin => {}
            idle::Rest::Yield => std::thread::yield_now(),
            idle::Rest::Sleep(limit) => {
                for port in &mut self.ports {
                    port.flush();
                }
                if self.ports.iter().any(Port::has_unsent) {
                    // The device turned a kick away: poll, do not sleep.
                    return;
                }
                let sockets: arrayvec::ArrayVec<BorrowedFd<'_>, 16> = self
                    .ports
                    .iter()
                    .filter_map(|p| p.driver.wait_fd())
                    .take(16)
                    .collect();
                let shared = &self.shared;
                self.idle.sleep(limit, &sockets, &shared.waker, || {
                    !shared.submissions.is_empty()
                        || !shared.commands.is_empty()
                        || shared.stop.load(Ordering::Relaxed)
                });
            }
        }
    }

    /// One burst: receive, timers, events, submissions, transmit.
    fn iterate(&mut self, accepting: bool) -> Turn {
        let before = self.progress();
        let (frames, verbs) = (self.counters.rx_frames, self.counters.verbs_ended);
        self.stages.begin();
        let now = self.now();
        self.counters.bursts += 1;
        self.receive(now);
        let mut next_timer = self.next_timer();
        let timer_due = next_timer.is_some_and(|t| t <= now);
        if timer_due {
            self.transport.handle_timeout(now);
            self.forget_neighbours(now);
            self.watch_address(now);
        }
        self.stages.mark(Stage::Timers);
        self.drain_events(now);
        self.stages.mark(Stage::Completion);
        if accepting {
            self.take_submissions(now);
            self.take_host_submissions(now);
            self.run_workload(now);
            self.take_commands(now);
            self.receives.expire(&mut self.transport, now);
        } else {
            self.run_workload(now);
        }
        self.stages.mark(Stage::Application);
        self.transmit(now);
        if let Some(host) = &mut self.host {
            host.flush();
        }
        if self.tap.as_ref().is_some_and(|t| t.done(now)) {
            self.finish_capture();
        }
        self.stages.mark(Stage::Other);
        let moved = self.progress() != before;
        // An iteration that moved nothing and ran no timer changed no
        // deadline: the one read at its start still holds for the rest.
        if timer_due && !moved {
            next_timer = self.next_timer();
        }
        self.stages.end(
            moved,
            self.counters.rx_frames - frames,
            self.counters.verbs_ended - verbs,
        );
        Turn {
            moved,
            now,
            next_timer,
        }
    }

    /// The transport's next deadline, or discovery's if sooner.
    fn next_timer(&self) -> Option<Nanos> {
        let transport = self.transport.poll_timeout();
        match self.discovery.as_ref().and_then(Discovery::poll_timeout) {
            Some(d) => Some(transport.map_or(d, |t| t.min(d))),
            None => transport,
        }
    }

    fn receive(&mut self, now: Nanos) {
        for (i, port) in self.ports.iter_mut().enumerate() {
            let tap = self.tap.as_mut().map(|t| (t, i as u8));
            port.receive(
                &mut self.transport,
                &mut self.counters,
                tap,
                self.discovery.as_mut().map(|d| (d, i as u8)),
                &mut self.stages,
                now,
            );
        }
        self.tell_discoveries(now);
    }

    /// A lower node id holds this dataplane's address (docs/PROTOCOL.md,
    /// "Addresses", N3): the process is told which address to come back
    /// at, once.
    fn watch_address(&mut self, now: Nanos) {
        if self.shared.readdress().is_some() {
            return;
        }
        if let Some((holder, free)) = self.transport.address_yield() {
            self.log.say(
                now,
                Severity::Warn,
                &format!(
                    "node {holder:#x} holds address {} too and has the lower node id: this \
                     dataplane gives the address up and comes back at address {free}",
                    oae_proto::address::address_of(holder)
                ),
            );
            self.shared
                .readdress
                .store(u32::from(free), Ordering::Release);
        }
    }

    /// Neighbours whose links did not come up in time are let go.
    fn forget_neighbours(&mut self, now: Nanos) {
        let Some(d) = &mut self.discovery else {
            return;
        };
        let ports = &mut self.ports;
        d.forget(
            now,
            &mut self.transport,
            &mut self.counters,
            |port, link| ports[usize::from(port)].unbind(link),
        );
        self.tell_discoveries(now);
    }

    fn tell_discoveries(&mut self, now: Nanos) {
        if let Some(d) = &mut self.discovery
            && d.has_notices()
        {
            for line in d.take_notices() {
                self.log.say(now, Severity::Info, &line);
            }
        }
    }

    fn transmit(&mut self, now: Nanos) {
        for (i, port) in self.ports.iter_mut().enumerate() {
            if let Some(d) = &mut self.discovery
                && d.announce_due(i, now)
            {
                let transport = &self.transport;
                let tap = self.tap.as_mut().map(|t| (t, i as u8));
                port.announce(
                    |buf| transport.write_announcement(buf),
                    &mut self.counters,
                    tap,
                    now,
                );
            }
            let tap = self.tap.as_mut().map(|t| (t, i as u8));
            port.transmit(
                &mut self.transport,
                &mut self.counters,
                tap,
                &mut self.stages,
                now,
            );
        }
    }

    /// The driver counters of every port, summed.
    fn driver_stats(&mut self) -> DriverStats {
        let mut sum = DriverStats::default();
        for p in &mut self.ports {
            sum.add(&p.driver.stats());
        }
        sum
    }

    fn drain_events(&mut self, now: Nanos) {
        let mut completer = Completer {
            log: &mut self.log,
            discovery: self.discovery.as_ref(),
            inflight: &mut self.inflight,
            free_ids: &mut self.free_ids,
            latency: &mut self.latency,
            outcomes: &mut self.outcomes,
            shared: &self.shared,
            counters: &mut self.counters,
            host: &mut self.host,
            control_waiting: &mut self.control_waiting,
            memory: &self.memory,
            workloads: &mut self.workloads,
            receives: &mut self.receives,
            transfers: &mut self.transfers,
        };
        self.transport
            .drain_events(|event| completer.handle(event, now));
    }

    fn submit(&mut self, origin: Origin, to: Target<'_>, now: Nanos) -> Result<(), NotSubmitted> {
        let verb = match to {
            Target::Link(_, verb) | Target::Node(_, verb) => verb,
        };
        let kind = verb.opcode();
        if verb.names_a_word_twice() {
            return Err(self.not_submitted(kind, NotSubmitted::Invalid(MCAS_WORD_TWICE)));
        }
        let Some(index) = self.free_ids.pop() else {
            return Err(self.not_submitted(kind, NotSubmitted::QueueFull));
        };
        let id = VerbId(u64::from(index));
        let submitted = match to {
            Target::Link(link, verb) => self.transport.submit(link, id, verb),
            Target::Node(node, verb) => self.transport.submit_to(node, id, verb).map(|_| ()),
        };
        match submitted {
            Ok(()) => {
                self.inflight[index as usize] = Some(InFlight {
                    origin,
                    submitted: now,
                    kind,
                });
                Ok(())
            }
            Err(e) => {
                self.free_ids.push(index);
                Err(self.not_submitted(kind, e))
            }
        }
    }

    /// Counts a verb refused before it reached a link, and hands back why.
    fn not_submitted(&mut self, kind: Opcode, why: NotSubmitted) -> NotSubmitted {
        let outcome = Outcome::of::<()>(&Err(AppError::NotSubmitted(why)));
        self.outcomes.count(kind, outcome);
        why
    }

    fn take_submissions(&mut self, now: Nanos) {
        // An empty queue's `pop` costs a fence; looking costs a load.
        if self.shared.submissions.is_empty() {
            return;
        }
        for _ in 0..MAX_BURST {
            let Some(s) = self.shared.submissions.pop() else {
                return;
            };
            match self.submit(Origin::App(s.id), Target::of(&s), now) {
                Ok(()) => self.counters.app_submitted += 1,
                Err(why) => {
                    self.counters.app_refused += 1;
                    self.deliver(Completion {
                        id: s.id,
                        result: Err(AppError::NotSubmitted(why)),
                        latency_ns: 0,
                    });
                }
            }
        }
    }

    /// A host program's verb on a block of the dataplane's memory: one
    /// verb, or a transfer of a frame a part (each part's WRITE bytes read
    /// as it is submitted). Refused whole if its first part is.
    fn submit_from_local(
        &mut self,
        origin: HostOrigin,
        local: LocalSubmission,
        now: Nanos,
    ) -> Result<(), NotSubmitted> {
        let one = |this: &Self, part: &LocalSubmission| {
            part.verb(this.transport.memory())
                .map(|verb| Submission {
                    id: local.id,
                    verb,
                    to: local.to,
                })
                .ok_or(NotSubmitted::Invalid(LOCAL_BLOCK_OUTSIDE))
        };
        if local.len as usize <= MAX_BLOCK {
            let s = one(self, &local)?;
            return self.submit(Origin::Host(origin, local.id), Target::of(&s), now);
        }
        let kind = match local.verb {
            _ if local.len > MAX_TRANSFER => return Err(NotSubmitted::Invalid(TRANSFER_TOO_LONG)),
            LocalVerb::Send { .. } => return Err(NotSubmitted::Invalid(SEND_IS_ONE_FRAME)),
            LocalVerb::Write { .. } => Opcode::Write,
            LocalVerb::Read { .. } => Opcode::Read,
        };
        let t = self
            .transfers
            .begin((origin, local.id), kind, local.len, now);
        for (k, (at, len)) in transfers::parts(local.len).enumerate() {
            let submitted = one(self, &local.part(at, len))
                .and_then(|s| self.submit(Origin::HostPart(t), Target::of(&s), now));
            match submitted {
                Ok(()) => self.transfers.part_submitted(t),
                Err(why) if k == 0 => {
                    self.transfers.abandon(t);
                    return Err(why);
                }
                Err(why) => {
                    self.host_finished
                        .extend(self.transfers.give_up(t, why, now));
                    return Ok(());
                }
            }
        }
        self.host_finished
            .extend(self.transfers.all_submitted(t, now));
        Ok(())
    }

    /// A burst's worth of verbs from the host ring; each one refused is
    /// answered on the ring with the reason.
    fn take_host_submissions(&mut self, now: Nanos) {
        let Some(mut host) = self.host.take() else {
            return;
        };
        host.take(MAX_BURST, |origin, request| {
            let submitted = match request {
                HostRequest::Verb(s) => {
                    self.submit(Origin::Host(origin, s.id), Target::of(&s), now)
                }
                HostRequest::FromLocal(local) => self.submit_from_local(origin, local, now),
                HostRequest::Receive(post) => {
                    self.receives.post_host(&mut self.transport, origin, post)
                }
            };
            match submitted {
                Ok(()) => self.counters.app_submitted += 1,
                Err(_) => self.counters.app_refused += 1,
            }
            submitted
        });
        // Transfers that ended while being submitted (their later parts
        // refused, the earlier ones done): answered now the ring is free.
        for (origin, c) in self.host_finished.drain(..) {
            host.complete(origin, c);
        }
        let claims = host.claims();
        if claims != self.host_claims {
            self.host_claims = claims;
            self.receives
                .withdraw_gone(&mut self.transport, |origin| host.holds(origin));
        }
        self.host = Some(host);
    }

    /// Hands a completion to the application; one that finds its queue full
    /// is counted, never dropped silently.
    fn deliver(&mut self, completion: Completion) {
        complete::deliver(&self.shared, &mut self.counters, completion);
    }

    fn refuse_queued_submissions(&mut self) {
        if let Some(host) = &mut self.host {
            // Bounded: the host ring holds at most its capacity.
            for _ in 0..1024 {
                let mut any = false;
                host.take(MAX_BURST, |_, _| {
                    any = true;
                    Err(NotSubmitted::ShuttingDown)
                });
                if !any {
                    break;
                }
            }
            host.flush();
        }
        while let Some(s) = self.shared.submissions.pop() {
            self.deliver(Completion {
                id: s.id,
                result: Err(AppError::NotSubmitted(NotSubmitted::ShuttingDown)),
                latency_ns: 0,
            });
        }
        while let Some(c) = self.shared.commands.pop() {
            let _ = c.reply.send(Err(ControlError::new(
                ErrorCode::ShuttingDown,
                "the dataplane is shutting down",
            )));
        }
    }

    fn run_workload(&mut self, now: Nanos) {
        let mut workloads = std::mem::take(&mut self.workloads);
        workloads.poll(now, |aim, slot, lane, verb| {
            let to = match aim {
                Aim::Link(link) => Target::Link(link, verb),
                Aim::Node(node) => Target::Node(node, verb),
            };
            self.submit(Origin::Workload(slot, lane), to, now).is_ok()
        });
        self.workloads = workloads;
    }
}

/// What a polling core reports when it stops.
#[derive(Debug, Serialize)]
pub struct FinalReport {
    pub queue: QueueInfo,
    /// CPU time the polling thread used, bring-up and drain included.
    pub cpu: CpuTime,
    pub idle: IdleCounters,
    pub in_flight_at_exit: usize,
    pub pipeline: PipelineCounters,
    pub driver: Counters,
    /// Each link's counters, link 0 first.
    pub links: Vec<LinkCounters>,
}

pub fn driver_counters(d: &DriverStats) -> Counters {
    named_counters([
        ("rx_packets", d.rx_packets),
        ("tx_packets", d.tx_packets),
        ("tx_ring_full", d.tx_ring_full),
        ("alloc_failed", d.alloc_failed),
        ("buffers_reused", d.buffers_reused),
        ("rx_unsupported", d.rx_unsupported),
        ("kernel_rx_dropped", d.kernel_rx_dropped),
        ("kernel_rx_ring_full", d.kernel_rx_ring_full),
        ("kernel_fill_ring_empty", d.kernel_fill_ring_empty),
        ("kernel_rx_invalid", d.kernel_rx_invalid),
        ("kernel_tx_invalid", d.kernel_tx_invalid),
        ("kernel_tx_ring_empty", d.kernel_tx_ring_empty),
        ("tx_kicks", d.tx_kicks),
        ("busy_polls", d.busy_polls),
    ])
}
