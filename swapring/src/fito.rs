//! The FITO baseline, shaped after ghOSt as Wave carries it over PCIe:
//! a message ring host -> IPU (`{type, length, seqnum, payload}` events,
//! each carrying a task's sequence number), a decision ring IPU -> host
//! ("run task T on cpu C", with the task seqnum and the agent barrier the
//! agent saw), and a host-side commit that aborts decisions gone stale
//! while they were in flight.
//!
//! Placement, which decides what each access costs (see [`CostModel`]):
//! the message ring lives in IPU memory (the host writes it with posted
//! MMIO writes, the IPU reads it locally); the decision ring lives in IPU
//! memory too, so the host pays a non-posted read for its tail and for each
//! entry, unless decisions are prestaged (the agent DMA-writes them into
//! host memory ahead of use) or prefetched (one bulk read per batch).
//! Index write-backs (head updates) are posted and not charged.

use crate::cost::CostModel;
use crate::liveness::{
    STAT_ABORTED, STAT_COMMITTED, STAT_NONPOSTED_READS, STAT_RECEIVED, STAT_REFUSED_FULL,
    STAT_SENT, SideBlock,
};
use crate::ring::{Consumer, Producer, RECORD_WORDS, Record, RingFull};

/// Wave's PCIe mitigations, each switchable on its own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mitigations {
    /// Coalesce messages (and decisions) and publish each batch with one
    /// doorbell, instead of one uncached write and doorbell per message.
    pub write_batching: bool,
    /// The agent writes decisions into host memory, so the host reads them
    /// locally instead of with non-posted MMIO reads.
    pub prestaged_decisions: bool,
    /// The host pulls every ready decision with one bulk read instead of
    /// one non-posted read per entry.
    pub prefetch: bool,
}

impl Mitigations {
    pub const fn none() -> Self {
        Mitigations {
            write_batching: false,
            prestaged_decisions: false,
            prefetch: false,
        }
    }
    pub const fn all() -> Self {
        Mitigations {
            write_batching: true,
            prestaged_decisions: true,
            prefetch: true,
        }
    }
}

/// How the host learns that decisions arrived.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Wakeup {
    /// The IPU raises MSI-X per published batch; the host pays its delivery.
    #[default]
    Interrupt,
    /// The host polls the decision ring's tail (remote unless prestaged).
    Poll,
}

/// What a message says happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum MsgKind {
    TaskNew = 1,
    TaskWakeup = 2,
    TaskBlocked = 3,
    TaskYield = 4,
    TaskExit = 5,
    TaskPreempt = 6,
    /// A generic request (the key-value workload, or anything else).
    Request = 16,
}

impl MsgKind {
    pub fn from_u16(v: u16) -> Option<MsgKind> {
        Some(match v {
            1 => MsgKind::TaskNew,
            2 => MsgKind::TaskWakeup,
            3 => MsgKind::TaskBlocked,
            4 => MsgKind::TaskYield,
            5 => MsgKind::TaskExit,
            6 => MsgKind::TaskPreempt,
            16 => MsgKind::Request,
            _ => return None,
        })
    }
}

/// Payload words of a message (the first record word is its header).
pub const MSG_PAYLOAD_WORDS: usize = RECORD_WORDS - 1;

/// A ghOSt-shaped message: `{type, length, seqnum, payload}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    pub kind: MsgKind,
    /// The task's sequence number after the event this message reports.
    pub seqnum: u32,
    /// Payload bytes that matter (at most `8 * MSG_PAYLOAD_WORDS`).
    pub length: u16,
    /// By convention word 0 is `task | cpu << 32` for task events.
    pub payload: [u64; MSG_PAYLOAD_WORDS],
}

impl Message {
    /// A task event on `task`, last seen on `cpu`, with `extra` in word 1.
    pub fn task(kind: MsgKind, task: u32, cpu: u32, seqnum: u32, extra: u64) -> Self {
        let mut payload = [0; MSG_PAYLOAD_WORDS];
        payload[0] = u64::from(task) | (u64::from(cpu) << 32);
        payload[1] = extra;
        Message {
            kind,
            seqnum,
            length: 16,
            payload,
        }
    }

    pub fn task_id(&self) -> u32 {
        self.payload[0] as u32
    }
    pub fn cpu(&self) -> u32 {
        (self.payload[0] >> 32) as u32
    }

    pub fn encode(&self) -> Record {
        let mut r = [0; RECORD_WORDS];
        r[0] = u64::from(self.kind as u16)
            | (u64::from(self.length) << 16)
            | (u64::from(self.seqnum) << 32);
        r[1..].copy_from_slice(&self.payload);
        r
    }

    /// `None` for an unknown type or a length longer than the payload.
    pub fn decode(r: &Record) -> Option<Message> {
        let kind = MsgKind::from_u16(r[0] as u16)?;
        let length = (r[0] >> 16) as u16;
        if usize::from(length) > 8 * MSG_PAYLOAD_WORDS {
            return None;
        }
        let mut payload = [0; MSG_PAYLOAD_WORDS];
        payload.copy_from_slice(&r[1..]);
        Some(Message {
            kind,
            seqnum: (r[0] >> 32) as u32,
            length,
            payload,
        })
    }
}

/// "Run `task` on `cpu`", as the agent decided it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedDecision {
    pub task: u32,
    pub cpu: u32,
    /// The task's seqnum the agent's decision is based on (`task_barrier`).
    pub task_seqnum: u32,
    /// Messages the agent had consumed when it decided (`agent_barrier`).
    pub agent_barrier: u64,
    /// Free for the workload (a request id, a timestamp).
    pub cookie: u64,
}

impl SchedDecision {
    pub fn encode(&self) -> Record {
        let mut r = [0; RECORD_WORDS];
        r[0] = u64::from(self.task) | (u64::from(self.cpu) << 32);
        r[1] = u64::from(self.task_seqnum);
        r[2] = self.agent_barrier;
        r[3] = self.cookie;
        r
    }

    pub fn decode(r: &Record) -> SchedDecision {
        SchedDecision {
            task: r[0] as u32,
            cpu: (r[0] >> 32) as u32,
            task_seqnum: r[1] as u32,
            agent_barrier: r[2],
            cookie: r[3],
        }
    }
}

/// How the host's commit of a decision ended (ghOSt's transaction states).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitOutcome {
    Committed,
    /// The task changed (woke, blocked, yielded...) after the agent saw it.
    TargetStale,
    /// The task is not runnable: blocked, running, exited or unknown.
    TargetNotRunnable,
    /// The agent had not consumed every message the host sent before it.
    AgentStale,
    /// The cpu is running another task.
    CpuBusy,
}

impl CommitOutcome {
    pub const ALL: [CommitOutcome; 5] = [
        CommitOutcome::Committed,
        CommitOutcome::TargetStale,
        CommitOutcome::TargetNotRunnable,
        CommitOutcome::AgentStale,
        CommitOutcome::CpuBusy,
    ];
    pub fn name(self) -> &'static str {
        match self {
            CommitOutcome::Committed => "COMMITTED",
            CommitOutcome::TargetStale => "TARGET_STALE",
            CommitOutcome::TargetNotRunnable => "TARGET_NOT_RUNNABLE",
            CommitOutcome::AgentStale => "AGENT_STALE",
            CommitOutcome::CpuBusy => "CPU_BUSY",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskState {
    Absent,
    Runnable,
    Running(u32),
    Blocked,
    Dead,
}

/// The host kernel's view of tasks and cpus: the enforcement side. Sized
/// once; events and commits do not allocate.
pub struct HostTasks {
    tasks: Vec<(TaskState, u32)>,
    cpus: Vec<Option<u32>>,
}

impl HostTasks {
    pub fn new(tasks: usize, cpus: usize) -> Self {
        HostTasks {
            tasks: vec![(TaskState::Absent, 0); tasks],
            cpus: vec![None; cpus],
        }
    }

    pub fn state(&self, task: u32) -> TaskState {
        self.tasks[task as usize].0
    }
    pub fn seqnum(&self, task: u32) -> u32 {
        self.tasks[task as usize].1
    }
    pub fn running_on(&self, cpu: u32) -> Option<u32> {
        self.cpus[cpu as usize]
    }
    pub fn cpus(&self) -> usize {
        self.cpus.len()
    }
    pub fn tasks(&self) -> usize {
        self.tasks.len()
    }

    /// Applies an event the host saw happen to `task` and returns its new
    /// seqnum (what the message to the agent carries).
    pub fn event(&mut self, task: u32, kind: MsgKind) -> u32 {
        let (state, seq) = self.tasks[task as usize];
        if let TaskState::Running(cpu) = state
            && matches!(
                kind,
                MsgKind::TaskBlocked
                    | MsgKind::TaskYield
                    | MsgKind::TaskExit
                    | MsgKind::TaskPreempt
            )
        {
            self.cpus[cpu as usize] = None;
        }
        let next = match kind {
            MsgKind::TaskNew | MsgKind::TaskWakeup | MsgKind::TaskYield | MsgKind::TaskPreempt => {
                TaskState::Runnable
            }
            MsgKind::TaskBlocked => TaskState::Blocked,
            MsgKind::TaskExit => TaskState::Dead,
            MsgKind::Request => state,
        };
        let seq = seq.wrapping_add(1);
        self.tasks[task as usize] = (next, seq);
        seq
    }

    /// ghOSt's transaction commit: checks the decision against the host's
    /// current state and applies it only if nothing it relied on changed.
    /// `agent_barrier_now` (messages posted so far) enables the agent
    /// barrier check, as a per-cpu ghOSt agent does; `None` skips it.
    pub fn commit(&mut self, d: &SchedDecision, agent_barrier_now: Option<u64>) -> CommitOutcome {
        let Some(&(state, seq)) = self.tasks.get(d.task as usize) else {
            return CommitOutcome::TargetNotRunnable;
        };
        if let Some(now) = agent_barrier_now
            && d.agent_barrier < now
        {
            return CommitOutcome::AgentStale;
        }
        if seq != d.task_seqnum {
            return CommitOutcome::TargetStale;
        }
        if state != TaskState::Runnable {
            return CommitOutcome::TargetNotRunnable;
        }
        match self.cpus.get(d.cpu as usize) {
            Some(None) => {}
            _ => return CommitOutcome::CpuBusy,
        }
        self.cpus[d.cpu as usize] = Some(d.task);
        self.tasks[d.task as usize].0 = TaskState::Running(d.cpu);
        CommitOutcome::Committed
    }
}

/// The host's end of the FITO rings.
pub struct FitoHost<'a> {
    messages: Producer<'a>,
    decisions: Consumer<'a>,
    cost: CostModel,
    mitigations: Mitigations,
    wakeup: Wakeup,
    doorbells_seen: u64,
    posted: u64,
    side: SideBlock<'a>,
}

impl<'a> FitoHost<'a> {
    pub fn new(
        messages: Producer<'a>,
        decisions: Consumer<'a>,
        cost: CostModel,
        mitigations: Mitigations,
        wakeup: Wakeup,
        side: SideBlock<'a>,
    ) -> Self {
        let doorbells_seen = decisions.view().doorbells();
        let posted = messages.view().tail();
        FitoHost {
            messages,
            decisions,
            cost,
            mitigations,
            wakeup,
            doorbells_seen,
            posted,
            side,
        }
    }

    /// Sends `msg` to the agent: at once, or at the next [`FitoHost::flush`]
    /// when writes are batched. A full ring refuses it (and counts that).
    pub fn post(&mut self, msg: &Message) -> Result<(), RingFull> {
        self.side.bump();
        if let Err(full) = self.messages.stage(&msg.encode()) {
            self.side.add_stat(STAT_REFUSED_FULL, 1);
            return Err(full);
        }
        self.posted += 1;
        if !self.mitigations.write_batching {
            self.flush();
        }
        Ok(())
    }

    /// Publishes every staged message with one doorbell.
    pub fn flush(&mut self) {
        let n = self.messages.publish();
        if n > 0 {
            self.cost.posted_write();
            self.side.add_stat(STAT_SENT, n);
        }
    }

    /// Messages posted so far: the barrier the agent must have reached for
    /// its decisions not to be `AGENT_STALE`.
    pub fn agent_barrier(&self) -> u64 {
        self.posted
    }

    /// The next decision, if one arrived, paying what reaching it costs.
    pub fn poll_decision(&mut self) -> Option<SchedDecision> {
        self.side.bump();
        let remote = !self.mitigations.prestaged_decisions;
        if self.decisions.ready() == 0 {
            self.decisions.release();
            if self.wakeup == Wakeup::Interrupt {
                let rung = self.decisions.view().doorbells();
                if rung == self.doorbells_seen {
                    return None;
                }
                self.doorbells_seen = rung;
                self.cost.doorbell();
            }
            if remote {
                self.charge_nonposted_read();
            }
            if self.decisions.refresh() == 0 {
                return None;
            }
            if remote && self.mitigations.prefetch {
                self.charge_nonposted_read();
            }
        }
        if remote && !self.mitigations.prefetch {
            self.charge_nonposted_read();
        }
        let mut record = [0; RECORD_WORDS];
        let took = self.decisions.take(&mut record);
        debug_assert!(took);
        self.side.add_stat(STAT_RECEIVED, 1);
        Some(SchedDecision::decode(&record))
    }

    /// Waits out a non-posted read, and counts it in the shared stats:
    /// where the protocol charges reads is checked by count, not by time.
    fn charge_nonposted_read(&self) {
        self.cost.nonposted_read();
        self.side.add_stat(STAT_NONPOSTED_READS, 1);
    }

    /// Counts a commit outcome in the shared stats.
    pub fn record(&self, outcome: CommitOutcome) {
        let which = if outcome == CommitOutcome::Committed {
            STAT_COMMITTED
        } else {
            STAT_ABORTED
        };
        self.side.add_stat(which, 1);
    }

    pub fn side(&mut self) -> &mut SideBlock<'a> {
        &mut self.side
    }
}

/// The agent's (IPU) end of the FITO rings.
pub struct FitoAgent<'a> {
    messages: Consumer<'a>,
    decisions: Producer<'a>,
    cost: CostModel,
    mitigations: Mitigations,
    consumed: u64,
    side: SideBlock<'a>,
}

impl<'a> FitoAgent<'a> {
    pub fn new(
        messages: Consumer<'a>,
        decisions: Producer<'a>,
        cost: CostModel,
        mitigations: Mitigations,
        side: SideBlock<'a>,
    ) -> Self {
        let consumed = messages.view().head();
        FitoAgent {
            messages,
            decisions,
            cost,
            mitigations,
            consumed,
            side,
        }
    }

    /// The next message (read from IPU memory: free). A record that does
    /// not decode is consumed and reported as `Some(Err(record))`.
    pub fn poll_message(&mut self) -> Option<Result<Message, Record>> {
        self.side.bump();
        if self.messages.ready() == 0 {
            self.messages.release();
            if self.messages.refresh() == 0 {
                return None;
            }
        }
        let mut record = [0; RECORD_WORDS];
        if !self.messages.take(&mut record) {
            return None;
        }
        self.consumed += 1;
        self.side.add_stat(STAT_RECEIVED, 1);
        Some(Message::decode(&record).ok_or(record))
    }

    /// Messages consumed so far: the agent barrier its decisions carry.
    pub fn barrier(&self) -> u64 {
        self.consumed
    }

    /// Sends a decision: at once, or at [`FitoAgent::flush`] when batched.
    pub fn decide(&mut self, d: &SchedDecision) -> Result<(), RingFull> {
        if let Err(full) = self.decisions.stage(&d.encode()) {
            self.side.add_stat(STAT_REFUSED_FULL, 1);
            return Err(full);
        }
        if !self.mitigations.write_batching {
            self.flush();
        }
        Ok(())
    }

    /// Publishes staged decisions with one doorbell (one MSI-X). Prestaged
    /// decisions are DMA-written into host memory: a posted write.
    pub fn flush(&mut self) {
        let n = self.decisions.publish();
        if n > 0 {
            if self.mitigations.prestaged_decisions {
                self.cost.posted_write();
            }
            self.side.add_stat(STAT_SENT, n);
        }
    }

    pub fn side(&mut self) -> &mut SideBlock<'a> {
        &mut self.side
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn message_round_trips_and_rejects_garbage() {
        let m = Message::task(MsgKind::TaskBlocked, 7, 3, 42, 99);
        let back = Message::decode(&m.encode()).unwrap();
        assert_eq!(back, m);
        assert_eq!((back.task_id(), back.cpu()), (7, 3));
        let mut bad = m.encode();
        bad[0] = (bad[0] & !0xffff) | 999;
        assert_eq!(Message::decode(&bad), None);
    }

    #[test]
    fn commit_aborts_stale_decisions_with_reasons() {
        let mut host = HostTasks::new(4, 2);
        let s0 = host.event(0, MsgKind::TaskNew);
        let d = SchedDecision {
            task: 0,
            cpu: 1,
            task_seqnum: s0,
            agent_barrier: 1,
            cookie: 0,
        };
        // The task blocked after the agent saw it runnable.
        let s1 = host.event(0, MsgKind::TaskBlocked);
        assert_eq!(host.commit(&d, None), CommitOutcome::TargetStale);
        let d1 = SchedDecision {
            task_seqnum: s1,
            ..d
        };
        assert_eq!(host.commit(&d1, None), CommitOutcome::TargetNotRunnable);
        let s2 = host.event(0, MsgKind::TaskWakeup);
        let d2 = SchedDecision {
            task_seqnum: s2,
            agent_barrier: 2,
            ..d
        };
        assert_eq!(host.commit(&d2, Some(3)), CommitOutcome::AgentStale);
        assert_eq!(host.commit(&d2, Some(2)), CommitOutcome::Committed);
        assert_eq!(host.running_on(1), Some(0));
        let s = host.event(1, MsgKind::TaskNew);
        let busy = SchedDecision {
            task: 1,
            cpu: 1,
            task_seqnum: s,
            agent_barrier: 0,
            cookie: 0,
        };
        assert_eq!(host.commit(&busy, None), CommitOutcome::CpuBusy);
        host.event(0, MsgKind::TaskBlocked);
        assert_eq!(host.running_on(1), None);
        assert_eq!(host.commit(&busy, None), CommitOutcome::Committed);
    }
}
