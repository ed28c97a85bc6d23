//! The Wave-like experiment: scheduling offload and a key-value service,
//! with the host and the IPU side as two threads over one shared region.
//!
//! Scheduling: `cpus` simulated host cores run `tasks` simulated tasks. A
//! running task runs for a while, then blocks, yields or exits (and is
//! replaced); a blocked task wakes later. A task that wakes is sometimes
//! taken back before it gets a cpu (a signal consumed, a migration): it
//! blocks again without running. That is what makes an in-flight decision
//! stale, and more of them go stale the longer decisions take.
//!
//! * FITO: every event goes to the agent as a message; the agent (FIFO
//!   policy) sends "run T on C" back; the host commits or aborts it.
//! * Bilateral: one swap slot per cpu. An idle cpu is offered together with
//!   the next runnable tasks; the agent picks one (the same FIFO policy) and
//!   its choice is swapped in against exactly that offer. A task taken back
//!   while offered is withdrawn from the offer first.
//!
//! Key-value: the host keeps `window` requests in flight (GET or PUT on a
//! table held by the IPU side), over the FITO rings or over swap slots.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use oae_common::rng::Rng;

use crate::bilateral::{HostSlot, IpuSlot, SwapOutcome, Withdraw};
use crate::cost::CostModel;
use crate::fito::{
    CommitOutcome, FitoAgent, FitoHost, HostTasks, Message, Mitigations, MsgKind, SchedDecision,
    TaskState, Wakeup,
};
use crate::layout::{Geometry, Mode, RING_DECISIONS, RING_MESSAGES};
use crate::region::{Region, RegionConfig, Side, unique_shm_path};
use crate::ring::{RECORD_WORDS, Record};

mod batched;

/// One protocol variant under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    Fito(Mitigations),
    /// One exchange per decision: a slot per simulated cpu (scheduling) or
    /// per request in flight (key-value).
    Bilateral,
    /// One exchange carries a batch each way: every idle cpu and the head
    /// of the run queue against the agent's assignments (scheduling), or a
    /// batch of requests against their answers (key-value).
    BilateralBatched,
}

impl Variant {
    /// Every variant the experiment compares, in report order.
    pub fn all() -> [(&'static str, Variant); 7] {
        let only = |m: Mitigations| Variant::Fito(m);
        [
            ("fito-none", only(Mitigations::none())),
            (
                "fito-batching",
                only(Mitigations {
                    write_batching: true,
                    ..Mitigations::none()
                }),
            ),
            (
                "fito-prestaged",
                only(Mitigations {
                    prestaged_decisions: true,
                    ..Mitigations::none()
                }),
            ),
            (
                "fito-prefetch",
                only(Mitigations {
                    prefetch: true,
                    ..Mitigations::none()
                }),
            ),
            ("fito-all", only(Mitigations::all())),
            ("bilateral", Variant::Bilateral),
            ("bilateral-batched", Variant::BilateralBatched),
        ]
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    Sched,
    KeyValue,
}

/// Parameters of one run.
#[derive(Clone, Copy, Debug)]
pub struct RunConfig {
    pub workload: Workload,
    pub variant: Variant,
    pub cost: CostModel,
    pub wakeup: Wakeup,
    /// When the run ends.
    pub until: Until,
    pub cpus: u32,
    pub tasks: u32,
    /// Requests in flight (key-value).
    pub window: u32,
    pub seed: u64,
    /// Host on cpu 0, agent on cpu 1 (needs two CPUs).
    pub pin: bool,
    /// Runnable tasks are taken back at a constant rate while they wait
    /// (`TAKE_BACK_MEAN_NS`): what makes decisions go stale. Off, a task
    /// leaves the runnable state only by getting a cpu, so no decision
    /// goes stale however long it takes (a test of the machinery itself).
    pub take_back: bool,
    /// Clock origin both sides stamp against; `run` resets it.
    pub epoch: Instant,
}

/// When a run ends.
#[derive(Clone, Copy, Debug)]
pub enum Until {
    /// After this long: a benchmark's measurement window.
    Elapsed(Duration),
    /// Once the run has counted at least `at_least` of everything, however
    /// long that takes on a slow machine or under an emulator (a test's
    /// verdict is a count, never a rate); `at_most` only ends a run that
    /// would never get there.
    Counted {
        at_least: Progress,
        at_most: Duration,
    },
}

impl Until {
    fn reached(&self, now_ns: u64, progress: Progress) -> bool {
        let after = |d: Duration| now_ns >= d.as_nanos() as u64;
        match *self {
            Until::Elapsed(d) => after(d),
            Until::Counted { at_least, at_most } => {
                (progress.completed >= at_least.completed
                    && progress.aborted >= at_least.aborted
                    && progress.withdrawn >= at_least.withdrawn)
                    || after(at_most)
            }
        }
    }
}

/// What a run has counted so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Committed decisions (sched) or answered requests (key-value).
    pub completed: u64,
    /// Decisions received and aborted.
    pub aborted: u64,
    /// Offers withdrawn before a swap.
    pub withdrawn: u64,
}

/// What one run measured.
#[derive(Clone, Debug, Default)]
pub struct RunResult {
    pub seconds: f64,
    /// Committed decisions (sched) or answered requests (key-value).
    pub completed: u64,
    pub per_second: f64,
    pub latency_p50_ns: u64,
    pub latency_p99_ns: u64,
    /// Decisions the host received but aborted, by ghOSt outcome name.
    pub aborted: Vec<(&'static str, u64)>,
    pub aborted_total: u64,
    /// Round-trip time spent on decisions that were then aborted.
    pub wasted_ns: u64,
    /// Offers withdrawn before a swap (bilateral) — not wasted agent work
    /// unless the agent had already computed on them.
    pub withdrawn: u64,
    /// The agent's swaps that lost to a withdrawal.
    pub lost_swaps: u64,
    /// Fraction of simulated cpu time spent running tasks.
    pub cpu_busy: f64,
}

const NO_CPU: u32 = u32::MAX;
const RUN_NS: (u64, u64) = (2_000, 8_000);
const BLOCK_NS: (u64, u64) = (5_000, 20_000);
/// A runnable task is taken back (blocks without running) at a constant
/// rate while it waits: the mean time to that is this. The chance that it
/// happens while a decision is in flight grows with the flight time, which
/// is what the mitigations shorten.
const TAKE_BACK_MEAN_NS: f64 = 200_000.0;
/// Messages the agent reads before it next decides.
const AGENT_DRAIN: usize = 16;
const NEVER: u64 = u64::MAX;

/// A message the host could not post yet (ring full): kept, never lost.
type Outbox = VecDeque<Message>;

struct Sim {
    rng: Rng,
    take_back: bool,
    tasks: HostTasks,
    /// Per task: when it next wakes (blocked), stops running (running), or
    /// is taken back (runnable); `NEVER` if nothing is due.
    due_ns: Vec<u64>,
    runnable_since: Vec<u64>,
    /// Per cpu: task and since when, for the busy fraction.
    busy_since: Vec<u64>,
    busy_ns: u64,
    latency: Histogram<u64>,
    committed: u64,
    aborted: [u64; 5],
    wasted_ns: u64,
}

impl Sim {
    fn new(cfg: &RunConfig) -> Sim {
        let mut sim = Sim {
            rng: Rng::new(cfg.seed),
            take_back: cfg.take_back,
            tasks: HostTasks::new(cfg.tasks as usize, cfg.cpus as usize),
            due_ns: vec![NEVER; cfg.tasks as usize],
            runnable_since: vec![0; cfg.tasks as usize],
            busy_since: vec![0; cfg.cpus as usize],
            busy_ns: 0,
            latency: Histogram::new_with_bounds(1, 10_000_000_000, 3).expect("histogram bounds"),
            committed: 0,
            aborted: [0; 5],
            wasted_ns: 0,
        };
        // Start with every task blocked, waking at a random early time.
        for t in 0..cfg.tasks {
            sim.tasks.event(t, MsgKind::TaskBlocked);
            sim.due_ns[t as usize] = sim.rng.between(0, BLOCK_NS.1);
        }
        sim
    }

    /// Advances every task whose time has come; each change is reported
    /// through `report(task, kind, cpu_it_left, seq)`. `may_take_back`
    /// decides whether a runnable task can be taken back now (the
    /// bilateral host first withdraws the offer holding it).
    fn advance(
        &mut self,
        now: u64,
        mut may_take_back: impl FnMut(&mut Sim, u32) -> bool,
        mut report: impl FnMut(u32, MsgKind, u32, u32),
    ) {
        for t in 0..self.tasks.tasks() as u32 {
            if self.due_ns[t as usize] > now {
                continue;
            }
            match self.tasks.state(t) {
                TaskState::Blocked | TaskState::Absent | TaskState::Dead => {
                    let kind = if self.tasks.state(t) == TaskState::Dead {
                        MsgKind::TaskNew
                    } else {
                        MsgKind::TaskWakeup
                    };
                    let seq = self.tasks.event(t, kind);
                    self.runnable_since[t as usize] = now;
                    self.due_ns[t as usize] = self.taken_back_at(now);
                    report(t, kind, NO_CPU, seq);
                }
                TaskState::Runnable => {
                    if !may_take_back(self, t) {
                        continue;
                    }
                    if self.tasks.state(t) != TaskState::Runnable {
                        // It got a cpu while its offer was being settled.
                        continue;
                    }
                    let seq = self.tasks.event(t, MsgKind::TaskBlocked);
                    self.due_ns[t as usize] = now + self.rng.between(BLOCK_NS.0, BLOCK_NS.1);
                    report(t, MsgKind::TaskBlocked, NO_CPU, seq);
                }
                TaskState::Running(cpu) => {
                    self.busy_ns += now - self.busy_since[cpu as usize];
                    let roll = self.rng.below(10);
                    let kind = match roll {
                        0..=5 => MsgKind::TaskBlocked,
                        6..=8 => MsgKind::TaskYield,
                        _ => MsgKind::TaskExit,
                    };
                    let seq = self.tasks.event(t, kind);
                    self.due_ns[t as usize] = match kind {
                        MsgKind::TaskBlocked => now + self.rng.between(BLOCK_NS.0, BLOCK_NS.1),
                        MsgKind::TaskExit => now + self.rng.between(0, BLOCK_NS.0),
                        _ => {
                            self.runnable_since[t as usize] = now;
                            self.taken_back_at(now)
                        }
                    };
                    report(t, kind, cpu, seq);
                }
            }
        }
    }

    /// When a task that became runnable at `now` is taken back, unless it
    /// gets a cpu first.
    fn taken_back_at(&mut self, now: u64) -> u64 {
        if self.take_back {
            now + self.rng.exponential(TAKE_BACK_MEAN_NS) as u64
        } else {
            NEVER
        }
    }

    /// Commits a decision; `decided_at` is when the agent made it.
    fn commit(&mut self, d: &SchedDecision, now: u64, decided_at: u64) -> CommitOutcome {
        let outcome = self.tasks.commit(d, None);
        if outcome == CommitOutcome::Committed {
            self.committed += 1;
            let waited = now
                .saturating_sub(self.runnable_since[d.task as usize])
                .max(1);
            let _ = self.latency.record(waited);
            self.due_ns[d.task as usize] = now + self.rng.between(RUN_NS.0, RUN_NS.1);
            self.busy_since[d.cpu as usize] = now;
        } else {
            let i = CommitOutcome::ALL
                .iter()
                .position(|o| *o == outcome)
                .expect("listed outcome");
            self.aborted[i] += 1;
            self.wasted_ns += now.saturating_sub(decided_at);
        }
        outcome
    }

    fn progress(&self, withdrawn: u64) -> Progress {
        Progress {
            completed: self.committed,
            aborted: self.aborted.iter().skip(1).sum(),
            withdrawn,
        }
    }

    fn finish(&mut self, now: u64, seconds: f64) -> RunResult {
        for c in 0..self.tasks.cpus() as u32 {
            if self.tasks.running_on(c).is_some() {
                self.busy_ns += now - self.busy_since[c as usize];
            }
        }
        let aborted: Vec<_> = CommitOutcome::ALL
            .iter()
            .zip(self.aborted)
            .skip(1)
            .map(|(o, n)| (o.name(), n))
            .collect();
        RunResult {
            seconds,
            completed: self.committed,
            per_second: self.committed as f64 / seconds,
            latency_p50_ns: self.latency.value_at_quantile(0.5),
            latency_p99_ns: self.latency.value_at_quantile(0.99),
            aborted_total: aborted.iter().map(|(_, n)| n).sum(),
            aborted,
            wasted_ns: self.wasted_ns,
            cpu_busy: self.busy_ns as f64 / (now as f64 * self.tasks.cpus() as f64),
            ..RunResult::default()
        }
    }
}

/// Runs one configuration to completion (until `cfg.until`, plus a short
/// drain) and returns what it measured.
pub fn run(cfg: &RunConfig) -> RunResult {
    let (mode, mitigations) = match cfg.variant {
        Variant::Fito(m) => (Mode::Fito, m),
        Variant::Bilateral | Variant::BilateralBatched => (Mode::Bilateral, Mitigations::none()),
    };
    let (slots, slot_batch) = match (cfg.workload, cfg.variant) {
        (Workload::Sched, Variant::BilateralBatched) => batched::sched_geometry(cfg),
        (Workload::KeyValue, Variant::BilateralBatched) => batched::kv_geometry(cfg),
        (Workload::Sched, _) => (cfg.cpus, 1),
        (Workload::KeyValue, _) => (cfg.window, 1),
    };
    let config = RegionConfig {
        mode,
        geometry: Geometry {
            ring_capacity: 256,
            slots: u64::from(slots),
            slot_batch: u64::from(slot_batch),
        },
        cost: cfg.cost,
        mitigations,
        wakeup: cfg.wakeup,
    };
    let region = Arc::new(
        Region::create(unique_shm_path("oae-wavebench"), &config)
            .expect("create the shared region"),
    );
    let stop = Arc::new(AtomicBool::new(false));
    // One clock origin for both sides, so an agent's timestamp means the
    // same instant to the host.
    let cfg = &RunConfig {
        epoch: Instant::now(),
        ..*cfg
    };
    let agent = {
        let (region, stop, cfg) = (region.clone(), stop.clone(), *cfg);
        thread::spawn(move || {
            if cfg.pin {
                let _ = oae_os::pin::pin_current_thread(1);
            }
            match (cfg.workload, cfg.variant) {
                (Workload::Sched, Variant::Fito(_)) => fito_sched_agent(&region, &stop, &cfg),
                (Workload::Sched, Variant::Bilateral) => {
                    bilateral_agent(&region, &stop, &cfg, choose_task)
                }
                (Workload::KeyValue, Variant::Fito(_)) => fito_kv_agent(&region, &stop, &cfg),
                (Workload::KeyValue, Variant::Bilateral) => {
                    bilateral_agent(&region, &stop, &cfg, kv_answer)
                }
                (Workload::Sched, Variant::BilateralBatched) => {
                    bilateral_agent(&region, &stop, &cfg, batched::assign_cpus)
                }
                (Workload::KeyValue, Variant::BilateralBatched) => {
                    bilateral_agent(&region, &stop, &cfg, kv_answer)
                }
            }
        })
    };
    let affinity = oae_os::pin::Affinity::current();
    if cfg.pin {
        let _ = oae_os::pin::pin_current_thread(0);
    }
    let result = match (cfg.workload, cfg.variant) {
        (Workload::Sched, Variant::Fito(_)) => fito_sched_host(&region, cfg),
        (Workload::Sched, Variant::Bilateral) => bilateral_sched_host(&region, cfg),
        (Workload::KeyValue, Variant::Fito(_)) => fito_kv_host(&region, cfg),
        (Workload::KeyValue, Variant::Bilateral) => bilateral_kv_host(&region, cfg),
        (Workload::Sched, Variant::BilateralBatched) => batched::sched_host(&region, cfg),
        (Workload::KeyValue, Variant::BilateralBatched) => batched::kv_host(&region, cfg),
    };
    stop.store(true, Ordering::Release);
    let lost = agent.join().expect("agent thread");
    if let Some(before) = affinity {
        before.restore();
    }
    RunResult {
        lost_swaps: lost,
        ..result
    }
}

/// Counts polls that found nothing. Unpinned, host and agent may share a
/// CPU, and a spinning thread would hold it for a whole time slice while
/// its peer waits: then every so often it gives the core away. Pinned to
/// CPUs of their own, they spin like the polling cores they stand for.
struct Idle {
    polls: u64,
    share_cpu: bool,
}

impl Idle {
    fn new(cfg: &RunConfig) -> Self {
        Idle {
            polls: 0,
            share_cpu: !cfg.pin,
        }
    }

    fn poll(&mut self, progressed: bool) {
        if progressed {
            self.polls = 0;
            return;
        }
        self.polls += 1;
        if self.share_cpu && self.polls.is_multiple_of(64) {
            thread::yield_now();
        }
    }
}

fn now_ns(epoch: Instant) -> u64 {
    epoch.elapsed().as_nanos() as u64
}

fn fito_host<'a>(region: &'a Region) -> FitoHost<'a> {
    let c = region.config();
    FitoHost::new(
        region.ring(RING_MESSAGES).producer(),
        region.ring(RING_DECISIONS).consumer(),
        c.cost,
        c.mitigations,
        c.wakeup,
        region.attach_as(Side::Host),
    )
}

fn fito_agent<'a>(region: &'a Region) -> FitoAgent<'a> {
    let c = region.config();
    FitoAgent::new(
        region.ring(RING_MESSAGES).consumer(),
        region.ring(RING_DECISIONS).producer(),
        c.cost,
        c.mitigations,
        region.attach_as(Side::Ipu),
    )
}

/// Host sends the abort back so the agent frees the cpu it had promised.
const TXN_ABORTED: MsgKind = MsgKind::TaskPreempt;

fn post_all(host: &mut FitoHost<'_>, outbox: &mut Outbox) {
    while let Some(m) = outbox.front() {
        if host.post(m).is_err() {
            break;
        }
        outbox.pop_front();
    }
    host.flush();
}

fn fito_sched_host(region: &Region, cfg: &RunConfig) -> RunResult {
    let mut host = fito_host(region);
    let mut sim = Sim::new(cfg);
    let mut outbox: Outbox = VecDeque::with_capacity(4 * cfg.tasks as usize);
    let mut idle = Idle::new(cfg);
    let epoch = cfg.epoch;
    let mut now = 0;
    while !cfg.until.reached(now, sim.progress(0)) {
        now = now_ns(epoch);
        sim.advance(
            now,
            |_, _| true,
            |t, kind, cpu, seq| outbox.push_back(Message::task(kind, t, cpu, seq, now)),
        );
        let mut progressed = !outbox.is_empty();
        post_all(&mut host, &mut outbox);
        while let Some(d) = host.poll_decision() {
            progressed = true;
            let now = now_ns(epoch);
            let outcome = sim.commit(&d, now, d.cookie);
            host.record(outcome);
            if outcome != CommitOutcome::Committed {
                // Carried as a preempt with a marker so the agent frees the cpu.
                outbox.push_back(Message::task(
                    TXN_ABORTED,
                    d.task,
                    d.cpu,
                    d.task_seqnum,
                    u64::MAX,
                ));
            }
        }
        idle.poll(progressed);
    }
    sim.finish(now_ns(epoch), now as f64 / 1e9)
}

fn fito_sched_agent(region: &Region, stop: &AtomicBool, cfg: &RunConfig) -> u64 {
    let mut agent = fito_agent(region);
    let n = cfg.tasks as usize;
    let mut runnable = vec![false; n];
    let mut seq = vec![0u32; n];
    let mut placed = vec![NO_CPU; n];
    let mut queued = vec![false; n];
    let mut queue: VecDeque<u32> = VecDeque::with_capacity(n);
    let mut cpu_free = vec![true; cfg.cpus as usize];
    let mut outbox: VecDeque<SchedDecision> = VecDeque::with_capacity(n);
    let epoch = cfg.epoch;
    let mut idle = Idle::new(cfg);
    while !stop.load(Ordering::Acquire) {
        let mut progressed = false;
        // Bounded, so a steady stream of events cannot keep the agent
        // from deciding.
        for _ in 0..AGENT_DRAIN {
            let Some(Ok(m)) = agent.poll_message() else {
                break;
            };
            progressed = true;
            let t = m.task_id() as usize;
            let aborted_txn = m.kind == TXN_ABORTED && m.payload[1] == u64::MAX;
            if !aborted_txn {
                // An abort carries the decision's old seqnum, not news.
                seq[t] = m.seqnum;
            }
            if m.cpu() != NO_CPU
                && (aborted_txn || !matches!(m.kind, MsgKind::TaskNew | MsgKind::TaskWakeup))
            {
                cpu_free[m.cpu() as usize] = true;
                if placed[t] == m.cpu() {
                    placed[t] = NO_CPU;
                }
            }
            if aborted_txn {
                // The host's newer messages for this task say what it is.
            } else {
                runnable[t] = matches!(
                    m.kind,
                    MsgKind::TaskNew
                        | MsgKind::TaskWakeup
                        | MsgKind::TaskYield
                        | MsgKind::TaskPreempt
                );
            }
            if runnable[t] && placed[t] == NO_CPU && !queued[t] {
                queued[t] = true;
                queue.push_back(t as u32);
            }
        }
        for (cpu, free) in cpu_free.iter_mut().enumerate() {
            if !*free {
                continue;
            }
            while let Some(t) = queue.pop_front() {
                queued[t as usize] = false;
                if runnable[t as usize] && placed[t as usize] == NO_CPU {
                    placed[t as usize] = cpu as u32;
                    *free = false;
                    outbox.push_back(SchedDecision {
                        task: t,
                        cpu: cpu as u32,
                        task_seqnum: seq[t as usize],
                        agent_barrier: agent.barrier(),
                        cookie: 0,
                    });
                    break;
                }
            }
        }
        while let Some(d) = outbox.front() {
            // Stamped when sent, with the host's clock origin unknown here:
            // the host measures waste from its own receipt, see below.
            let d = SchedDecision {
                cookie: epoch.elapsed().as_nanos() as u64,
                ..*d
            };
            if agent.decide(&d).is_err() {
                break;
            }
            outbox.pop_front();
        }
        agent.flush();
        idle.poll(progressed);
    }
    0
}

/// Candidates an offer carries, one word each: `task | seq << 32`.
const CANDIDATES: usize = RECORD_WORDS - 1;
const NO_CHOICE: u64 = u64::MAX;

/// The agent's policy over a one-cpu offer: FIFO, the first candidate.
fn choose_task(offer: &[Record], answer: &mut [Record]) -> usize {
    let state = offer.first().copied().unwrap_or([0; RECORD_WORDS]);
    let count = (state[0] >> 32) as usize;
    answer[0] = [0; RECORD_WORDS];
    answer[0][0] = if count == 0 { NO_CHOICE } else { 0 };
    answer[0][1] = state[1];
    1
}

/// The agent: answers every slot's offer with `decide`, one AtomicOp per
/// exchange whatever its batch.
fn bilateral_agent(
    region: &Region,
    stop: &AtomicBool,
    cfg: &RunConfig,
    decide: fn(&[Record], &mut [Record]) -> usize,
) -> u64 {
    let cost = region.config().cost;
    let mut me = region.attach_as(Side::Ipu);
    let mut slots: Vec<IpuSlot<'_>> = (0..region.slot_count())
        .map(|i| IpuSlot::new(region.slot(i), cost))
        .collect();
    let mut lost = 0;
    let mut idle = Idle::new(cfg);
    while !stop.load(Ordering::Acquire) {
        let mut progressed = false;
        for slot in slots.iter_mut() {
            me.bump();
            match slot.try_swap(decide) {
                SwapOutcome::NothingOffered => {}
                SwapOutcome::Swapped { .. } => progressed = true,
                SwapOutcome::Lost => {
                    lost += 1;
                    progressed = true;
                }
            }
        }
        idle.poll(progressed);
    }
    lost
}

struct Offer {
    candidates: [u32; CANDIDATES],
    count: usize,
    offered_at: u64,
}

fn bilateral_sched_host(region: &Region, cfg: &RunConfig) -> RunResult {
    let cost = region.config().cost;
    let _me = region.attach_as(Side::Host);
    let mut slots: Vec<HostSlot<'_>> = (0..cfg.cpus as usize)
        .map(|c| HostSlot::new(region.slot(c), cost))
        .collect();
    let mut offers: Vec<Option<Offer>> = (0..cfg.cpus).map(|_| None).collect();
    let mut offered_in = vec![NO_CPU; cfg.tasks as usize];
    let mut queue: VecDeque<u32> = VecDeque::with_capacity(cfg.tasks as usize);
    let mut sim = Sim::new(cfg);
    let mut withdrawn = 0;
    let epoch = Instant::now();
    let mut now = 0;
    let mut woken: VecDeque<u32> = VecDeque::with_capacity(cfg.tasks as usize);
    let mut decision = [[0u64; RECORD_WORDS]; 1];

    // Applies a taken swap: commit the choice, hand the rest back.
    let settle = |sim: &mut Sim,
                  queue: &mut VecDeque<u32>,
                  offered_in: &mut [u32],
                  offer: Offer,
                  cpu: u32,
                  decision: &Record,
                  now: u64| {
        let chosen = decision[0];
        for i in (0..offer.count).rev() {
            let t = offer.candidates[i];
            offered_in[t as usize] = NO_CPU;
            if i as u64 != chosen {
                queue.push_front(t);
            }
        }
        if chosen != NO_CHOICE {
            let d = SchedDecision {
                task: decision[1] as u32,
                cpu,
                task_seqnum: (decision[1] >> 32) as u32,
                agent_barrier: 0,
                cookie: 0,
            };
            let outcome = sim.commit(&d, now, offer.offered_at);
            debug_assert_eq!(
                outcome,
                CommitOutcome::Committed,
                "a swapped decision cannot be stale"
            );
        }
    };

    let mut idle = Idle::new(cfg);
    while !cfg.until.reached(now, sim.progress(withdrawn)) {
        now = now_ns(epoch);
        let mut progressed = false;
        // Take every swap first: decisions already committed apply before
        // any later change of the host's state.
        for c in 0..cfg.cpus as usize {
            if offers[c].is_some()
                && let Ok(Some(_)) = slots[c].take(&mut decision)
            {
                let offer = offers[c].take().expect("offer present");
                settle(
                    &mut sim,
                    &mut queue,
                    &mut offered_in,
                    offer,
                    c as u32,
                    &decision[0],
                    now,
                );
                progressed = true;
            }
        }
        sim.advance(
            now,
            |sim, t| {
                let c = offered_in[t as usize];
                if c == NO_CPU {
                    if let Some(at) = queue.iter().position(|&q| q == t) {
                        queue.remove(at);
                    }
                    return true;
                }
                match slots[c as usize].withdraw() {
                    Withdraw::Withdrawn => {
                        withdrawn += 1;
                        let offer = offers[c as usize].take().expect("offer present");
                        for i in (0..offer.count).rev() {
                            let q = offer.candidates[i];
                            offered_in[q as usize] = NO_CPU;
                            if q != t {
                                queue.push_front(q);
                            }
                        }
                        true
                    }
                    Withdraw::AlreadySwapped | Withdraw::NotOffered => {
                        let Ok(Some(_)) = slots[c as usize].take(&mut decision) else {
                            return false;
                        };
                        let offer = offers[c as usize].take().expect("offer present");
                        settle(
                            sim,
                            &mut queue,
                            &mut offered_in,
                            offer,
                            c,
                            &decision[0],
                            now,
                        );
                        if let Some(at) = queue.iter().position(|&q| q == t) {
                            queue.remove(at);
                        }
                        true
                    }
                }
            },
            |t, kind, _cpu, _seq| {
                if matches!(
                    kind,
                    MsgKind::TaskNew | MsgKind::TaskWakeup | MsgKind::TaskYield
                ) {
                    woken.push_back(t);
                }
            },
        );
        progressed |= !woken.is_empty();
        queue.extend(woken.drain(..));
        // Offer every idle cpu that has no offer out, with the next tasks.
        for c in 0..cfg.cpus as usize {
            if offers[c].is_some() || sim.tasks.running_on(c as u32).is_some() || queue.is_empty() {
                continue;
            }
            let mut offer = Offer {
                candidates: [0; CANDIDATES],
                count: 0,
                offered_at: now,
            };
            let mut state = [0u64; RECORD_WORDS];
            while offer.count < CANDIDATES {
                let Some(t) = queue.pop_front() else { break };
                offer.candidates[offer.count] = t;
                offered_in[t as usize] = c as u32;
                state[1 + offer.count] = u64::from(t) | (u64::from(sim.tasks.seqnum(t)) << 32);
                offer.count += 1;
            }
            state[0] = c as u64 | ((offer.count as u64) << 32);
            slots[c]
                .offer(&[state])
                .expect("an idle cpu's slot is the host's");
            offers[c] = Some(offer);
            progressed = true;
        }
        idle.poll(progressed);
    }
    let mut result = sim.finish(now_ns(epoch), now as f64 / 1e9);
    result.withdrawn = withdrawn;
    result
}

/// A key-value run's progress: requests answered (none are aborted).
fn answered(done: u64) -> Progress {
    Progress {
        completed: done,
        ..Progress::default()
    }
}

/// Key-value table size on the IPU side.
const KV_KEYS: usize = 4096;
const KV_GET: u32 = 1;
const KV_PUT: u32 = 2;

fn fito_kv_host(region: &Region, cfg: &RunConfig) -> RunResult {
    let mut host = fito_host(region);
    let mut rng = Rng::new(cfg.seed);
    let mut latency =
        Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3).expect("histogram bounds");
    let mut sent_at = vec![0u64; cfg.window as usize];
    let mut free: Vec<u32> = (0..cfg.window).collect();
    let epoch = Instant::now();
    let (mut now, mut done) = (0, 0u64);
    let mut idle = Idle::new(cfg);
    while !cfg.until.reached(now, answered(done)) {
        now = now_ns(epoch);
        let mut progressed = false;
        while let Some(&slot) = free.last() {
            let key = rng.below(KV_KEYS as u64);
            let op = if rng.below(10) < 9 { KV_GET } else { KV_PUT };
            let mut msg = Message::task(MsgKind::Request, slot, 0, op, key);
            msg.payload[2] = rng.next_u64();
            if host.post(&msg).is_err() {
                break;
            }
            free.pop();
            sent_at[slot as usize] = now;
            progressed = true;
        }
        host.flush();
        while let Some(d) = host.poll_decision() {
            let now = now_ns(epoch);
            let _ = latency.record(now.saturating_sub(sent_at[d.task as usize]).max(1));
            free.push(d.task);
            done += 1;
            progressed = true;
        }
        idle.poll(progressed);
    }
    let seconds = now as f64 / 1e9;
    RunResult {
        seconds,
        completed: done,
        per_second: done as f64 / seconds,
        latency_p50_ns: latency.value_at_quantile(0.5),
        latency_p99_ns: latency.value_at_quantile(0.99),
        ..RunResult::default()
    }
}

fn fito_kv_agent(region: &Region, stop: &AtomicBool, cfg: &RunConfig) -> u64 {
    let mut agent = fito_agent(region);
    let mut table = vec![0u64; KV_KEYS];
    let mut pending: Option<SchedDecision> = None;
    let mut idle = Idle::new(cfg);
    while !stop.load(Ordering::Acquire) {
        let mut progressed = false;
        loop {
            if let Some(d) = pending {
                if agent.decide(&d).is_err() {
                    break;
                }
                pending = None;
            }
            let Some(Ok(m)) = agent.poll_message() else {
                break;
            };
            progressed = true;
            let key = m.payload[1] as usize % KV_KEYS;
            let value = if m.seqnum == KV_PUT {
                table[key] = m.payload[2];
                m.payload[2]
            } else {
                table[key]
            };
            pending = Some(SchedDecision {
                task: m.task_id(),
                cpu: 0,
                task_seqnum: m.seqnum,
                agent_barrier: 0,
                cookie: value,
            });
        }
        agent.flush();
        idle.poll(progressed);
    }
    0
}

/// Offer layout for key-value: one record per request, `[op, key,
/// value]`; answer one record per request, `[value]`.
fn kv_answer(offer: &[Record], answer: &mut [Record]) -> usize {
    // The table lives in the IPU's memory; one per process is enough here.
    static TABLE: [std::sync::atomic::AtomicU64; KV_KEYS] =
        [const { std::sync::atomic::AtomicU64::new(0) }; KV_KEYS];
    for (state, out) in offer.iter().zip(answer.iter_mut()) {
        let key = state[1] as usize % KV_KEYS;
        out[0] = if state[0] == u64::from(KV_PUT) {
            TABLE[key].store(state[2], Ordering::Relaxed);
            state[2]
        } else {
            TABLE[key].load(Ordering::Relaxed)
        };
    }
    offer.len()
}

fn bilateral_kv_host(region: &Region, cfg: &RunConfig) -> RunResult {
    let cost = region.config().cost;
    let _me = region.attach_as(Side::Host);
    let mut slots: Vec<HostSlot<'_>> = (0..cfg.window as usize)
        .map(|i| HostSlot::new(region.slot(i), cost))
        .collect();
    let mut rng = Rng::new(cfg.seed);
    let mut latency =
        Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3).expect("histogram bounds");
    let mut sent_at = vec![NEVER; cfg.window as usize];
    let mut answer = [[0u64; RECORD_WORDS]; 1];
    let epoch = Instant::now();
    let (mut now, mut done) = (0, 0u64);
    let mut idle = Idle::new(cfg);
    while !cfg.until.reached(now, answered(done)) {
        now = now_ns(epoch);
        let mut progressed = false;
        for (i, slot) in slots.iter_mut().enumerate() {
            if sent_at[i] != NEVER {
                if let Ok(Some(_)) = slot.take(&mut answer) {
                    let _ = latency.record(now_ns(epoch).saturating_sub(sent_at[i]).max(1));
                    done += 1;
                    sent_at[i] = NEVER;
                } else {
                    continue;
                }
            }
            let op = if rng.below(10) < 9 { KV_GET } else { KV_PUT };
            let mut state = [0u64; RECORD_WORDS];
            state[0] = u64::from(op);
            state[1] = rng.below(KV_KEYS as u64);
            state[2] = rng.next_u64();
            slot.offer(&[state]).expect("answered slot is the host's");
            sent_at[i] = now_ns(epoch);
            progressed = true;
        }
        idle.poll(progressed);
    }
    let seconds = now as f64 / 1e9;
    RunResult {
        seconds,
        completed: done,
        per_second: done as f64 / seconds,
        latency_p50_ns: latency.value_at_quantile(0.5),
        latency_p99_ns: latency.value_at_quantile(0.99),
        ..RunResult::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs one at a time: two runs at once would fight over the CPUs.
    /// Ends once `at_least` is counted, however slow the machine (an
    /// emulator runs these threads tens of times slower than a core); the
    /// time bound only ends a run that would never get there.
    fn counted(workload: Workload, variant: Variant, at_least: Progress) -> RunResult {
        counted_with(workload, variant, at_least, true)
    }

    fn counted_with(
        workload: Workload,
        variant: Variant,
        at_least: Progress,
        take_back: bool,
    ) -> RunResult {
        static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        run(&RunConfig {
            workload,
            variant,
            cost: CostModel::default(),
            wakeup: Wakeup::Interrupt,
            until: Until::Counted {
                at_least,
                at_most: Duration::from_secs(120),
            },
            cpus: 4,
            tasks: 32,
            window: 16,
            seed: 7,
            pin: false,
            take_back,
            epoch: Instant::now(),
        })
    }

    fn completed(n: u64) -> Progress {
        Progress {
            completed: n,
            ..Progress::default()
        }
    }

    /// With nothing taken back, no FITO decision can go stale, so the
    /// rings, the agent and the commits must carry decisions end to end at
    /// any speed.
    #[test]
    fn fito_decisions_commit_when_nothing_is_taken_back() {
        let fito = counted_with(
            Workload::Sched,
            Variant::Fito(Mitigations::none()),
            completed(100),
            false,
        );
        assert!(fito.completed >= 100, "{fito:?}");
    }

    /// Taken-back tasks make some FITO decisions stale, and the slower the
    /// round trip the more (under an emulator every one may be: the count
    /// of completed ones is the test above's, not this one's); bilateral
    /// decisions never go stale, their offers are withdrawn instead.
    #[test]
    fn fito_decisions_go_stale_and_bilateral_ones_never_do() {
        let fito = counted(
            Workload::Sched,
            Variant::Fito(Mitigations::none()),
            Progress {
                aborted: 1,
                ..Progress::default()
            },
        );
        eprintln!("fito: {fito:?}");
        assert!(
            fito.aborted_total > 0,
            "taken-back tasks must make some decisions stale: {fito:?}"
        );
        for variant in [Variant::Bilateral, Variant::BilateralBatched] {
            // Over many commits, and until some offer was taken back while
            // out; how many commit before that depends on the machine's
            // speed, so only what never happens is judged.
            let bilateral = counted(
                Workload::Sched,
                variant,
                Progress {
                    withdrawn: 1,
                    ..completed(2_000)
                },
            );
            eprintln!("{variant:?}: {bilateral:?}");
            assert!(bilateral.withdrawn > 0, "{bilateral:?}");
            assert_eq!(bilateral.aborted_total, 0, "{bilateral:?}");
        }
    }

    /// With nothing taken back, nothing is withdrawn: every bilateral swap
    /// commits, at any speed.
    #[test]
    fn bilateral_decisions_commit_when_nothing_is_taken_back() {
        for variant in [Variant::Bilateral, Variant::BilateralBatched] {
            let bilateral = counted_with(Workload::Sched, variant, completed(2_000), false);
            assert!(bilateral.completed >= 2_000, "{variant:?}: {bilateral:?}");
            assert_eq!(
                (bilateral.aborted_total, bilateral.withdrawn),
                (0, 0),
                "{variant:?}: {bilateral:?}"
            );
        }
    }

    #[test]
    fn key_value_requests_complete_in_both_modes() {
        for variant in [
            Variant::Fito(Mitigations::all()),
            Variant::Bilateral,
            Variant::BilateralBatched,
        ] {
            let r = counted(Workload::KeyValue, variant, completed(101));
            assert!(r.completed > 100, "{variant:?}: {r:?}");
        }
    }
}
