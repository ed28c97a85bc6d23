//! The batched bilateral variants: one exchange carries a batch each way,
//! so the agent pays one PCIe AtomicOp per batch rather than per decision.
//!
//! * Scheduling: two slots. The host offers every idle cpu together with
//!   the head of its run queue (as many tasks as idle cpus), the agent
//!   answers with its assignments (the same FIFO policy), and the whole
//!   assignment commits against exactly that offer. A cpu that goes idle
//!   while one batch is out goes out at once in a batch on the other slot.
//!   A task taken back while offered voids its batch (withdraw) and the
//!   rest go back to the head of the queue, in order.
//! * Key-value: the window is split over two slots, each carrying half of
//!   the requests in flight; one refills while the other is answered.

use std::collections::VecDeque;
use std::time::Instant;

use hdrhistogram::Histogram;
use oae_common::rng::Rng;

use super::{
    CommitOutcome, Idle, KV_GET, KV_KEYS, KV_PUT, MsgKind, NEVER, NO_CPU, RunConfig, RunResult,
    SchedDecision, Sim, answered, now_ns,
};
use crate::bilateral::{HostSlot, Withdraw};
use crate::region::{Region, Side};
use crate::ring::{RECORD_WORDS, Record};

/// Scheduling batches out at once.
const SCHED_SLOTS: u32 = 2;
/// Key-value requests in flight are split over this many slots.
const KV_SLOTS: u32 = 2;
/// Marks an unused word of an offer or answer.
const NONE: u64 = u64::MAX;

/// Words of a scheduling offer: a count word, then one word per idle cpu,
/// then one per candidate task (`task | seq << 32`).
fn sched_words(cpus: u32) -> usize {
    1 + 2 * cpus as usize
}

/// Slots and records per slot for scheduling: two, so a cpu that goes
/// idle while one batch is out is offered at once on the other.
pub(super) fn sched_geometry(cfg: &RunConfig) -> (u32, u32) {
    (
        SCHED_SLOTS,
        sched_words(cfg.cpus).div_ceil(RECORD_WORDS) as u32,
    )
}

/// Slots and records per slot for key-value.
pub(super) fn kv_geometry(cfg: &RunConfig) -> (u32, u32) {
    (KV_SLOTS, cfg.window.div_ceil(KV_SLOTS).max(1))
}

fn word(records: &[Record], i: usize) -> u64 {
    records
        .get(i / RECORD_WORDS)
        .map_or(NONE, |r| r[i % RECORD_WORDS])
}

fn set_word(records: &mut [Record], i: usize, value: u64) {
    records[i / RECORD_WORDS][i % RECORD_WORDS] = value;
}

/// The agent's policy over a batched offer: FIFO, the i-th queued task on
/// the i-th idle cpu. Answer: a count word, then `cpu | task << 16 | seq
/// << 32` per assignment.
pub(super) fn assign_cpus(offer: &[Record], answer: &mut [Record]) -> usize {
    let counts = word(offer, 0);
    let (cpus, tasks) = ((counts & 0xffff) as usize, (counts >> 16 & 0xffff) as usize);
    // No more assignments than the answer holds, whatever the offer says.
    let room = (answer.len() * RECORD_WORDS).saturating_sub(1);
    let n = cpus.min(tasks).min(room);
    let records = (1 + n).div_ceil(RECORD_WORDS).min(answer.len());
    for r in answer[..records].iter_mut() {
        *r = [NONE; RECORD_WORDS];
    }
    set_word(answer, 0, n as u64);
    for i in 0..n {
        let cpu = word(offer, 1 + i);
        let task = word(offer, 1 + cpus + i);
        let assignment = cpu | ((task & 0xffff) << 16) | (task >> 32 << 32);
        set_word(answer, 1 + i, assignment);
    }
    records
}

/// One slot's batch, as the host keeps it.
struct Out<'a> {
    slot: HostSlot<'a>,
    /// Whether a batch is out; if so, its cpus and its tasks in queue
    /// order.
    out: bool,
    cpus: Vec<u32>,
    tasks: Vec<u32>,
}

/// The host's side of the slots. Buffers are sized once: the loop
/// allocates nothing per offer, as FITO's does not per message.
struct SchedHost<'a> {
    outs: Vec<Out<'a>>,
    /// Per task: the slot whose batch holds it ([`NO_SLOT`] if none).
    offered_in: Vec<usize>,
    /// Per task, while a batch is settled: assigned by the agent.
    assigned: Vec<bool>,
    /// Per cpu: in a batch out.
    cpu_offered: Vec<bool>,
    queue: VecDeque<u32>,
    records: Vec<Record>,
    answer: Vec<Record>,
    withdrawn: u64,
}

const NO_SLOT: usize = usize::MAX;

impl SchedHost<'_> {
    /// Ends slot `s`'s batch: its tasks the agent did not assign (and that
    /// are not `except`) go back to the head of the queue, in order.
    fn requeue(&mut self, s: usize, except: u32) {
        let out = &mut self.outs[s];
        out.out = false;
        for &c in &out.cpus {
            self.cpu_offered[c as usize] = false;
        }
        out.cpus.clear();
        for &t in out.tasks.iter().rev() {
            self.offered_in[t as usize] = NO_SLOT;
            if !self.assigned[t as usize] && t != except {
                self.queue.push_front(t);
            }
            self.assigned[t as usize] = false;
        }
        out.tasks.clear();
    }

    /// Takes slot `s`'s swap, if there is one, and commits its assignments.
    fn settle_slot(&mut self, s: usize, sim: &mut Sim, now: u64) -> bool {
        if !self.outs[s].out {
            return false;
        }
        let Ok(Some(_)) = self.outs[s].slot.take(&mut self.answer) else {
            return false;
        };
        let n = word(&self.answer, 0) as usize;
        for i in 0..n.min(self.outs[s].tasks.len()) {
            let a = word(&self.answer, 1 + i);
            let d = SchedDecision {
                task: (a >> 16 & 0xffff) as u32,
                cpu: (a & 0xffff) as u32,
                task_seqnum: (a >> 32) as u32,
                agent_barrier: 0,
                cookie: 0,
            };
            self.assigned[d.task as usize] = true;
            let outcome = sim.commit(&d, now, now);
            debug_assert_eq!(
                outcome,
                CommitOutcome::Committed,
                "a swapped assignment cannot be stale"
            );
        }
        self.requeue(s, NO_CPU);
        true
    }

    /// Takes every swap there is, oldest batch first.
    fn settle(&mut self, sim: &mut Sim, now: u64) -> bool {
        let mut any = false;
        for s in 0..self.outs.len() {
            any |= self.settle_slot(s, sim, now);
        }
        any
    }

    /// A runnable task is being taken back: if it is on offer, void its
    /// batch first (or, if the agent's swap won, apply it first).
    fn take_back(&mut self, sim: &mut Sim, t: u32, now: u64) -> bool {
        let s = self.offered_in[t as usize];
        if s == NO_SLOT {
            if let Some(at) = self.queue.iter().position(|&q| q == t) {
                self.queue.remove(at);
            }
            return true;
        }
        match self.outs[s].slot.withdraw() {
            Withdraw::Withdrawn => {
                self.withdrawn += 1;
                self.requeue(s, t);
                true
            }
            Withdraw::AlreadySwapped | Withdraw::NotOffered => {
                if !self.settle_slot(s, sim, now) {
                    return false;
                }
                if let Some(at) = self.queue.iter().position(|&q| q == t) {
                    self.queue.remove(at);
                }
                true
            }
        }
    }

    /// Offers every idle cpu not in a batch yet, with as many tasks from
    /// the head of the queue, on a free slot.
    fn offer(&mut self, sim: &Sim, cpus: u32) -> bool {
        if self.queue.is_empty() {
            return false;
        }
        let Some(s) = self.outs.iter().position(|o| !o.out) else {
            return false;
        };
        let out = &mut self.outs[s];
        for c in 0..cpus {
            if !self.cpu_offered[c as usize] && sim.tasks.running_on(c).is_none() {
                out.cpus.push(c);
            }
        }
        let idle = out.cpus.len();
        if idle == 0 {
            return false;
        }
        let records = &mut self.records;
        records.fill([NONE; RECORD_WORDS]);
        for (i, &c) in out.cpus.iter().enumerate() {
            self.cpu_offered[c as usize] = true;
            set_word(records, 1 + i, u64::from(c));
        }
        let n = idle.min(self.queue.len());
        for i in 0..n {
            let t = self.queue.pop_front().expect("n tasks queued");
            self.offered_in[t as usize] = s;
            out.tasks.push(t);
            let seq = u64::from(sim.tasks.seqnum(t));
            set_word(records, 1 + idle + i, u64::from(t) | (seq << 32));
        }
        set_word(records, 0, idle as u64 | ((n as u64) << 16));
        out.slot
            .offer(records)
            .expect("a slot with no batch out is the host's");
        out.out = true;
        true
    }
}

pub(super) fn sched_host(region: &Region, cfg: &RunConfig) -> RunResult {
    let cost = region.config().cost;
    let _me = region.attach_as(Side::Host);
    let batch = region.geometry().slot_batch as usize;
    let cpus = cfg.cpus as usize;
    let mut host = SchedHost {
        outs: (0..region.slot_count())
            .map(|s| Out {
                slot: HostSlot::new(region.slot(s), cost),
                out: false,
                cpus: Vec::with_capacity(cpus),
                tasks: Vec::with_capacity(cpus),
            })
            .collect(),
        offered_in: vec![NO_SLOT; cfg.tasks as usize],
        assigned: vec![false; cfg.tasks as usize],
        cpu_offered: vec![false; cpus],
        queue: VecDeque::with_capacity(cfg.tasks as usize),
        records: vec![[NONE; RECORD_WORDS]; batch],
        answer: vec![[0; RECORD_WORDS]; batch],
        withdrawn: 0,
    };
    let mut sim = Sim::new(cfg);
    let epoch = Instant::now();
    let mut now = 0;
    let mut woken: VecDeque<u32> = VecDeque::with_capacity(cfg.tasks as usize);
    let mut idle = Idle::new(cfg);
    while !cfg.until.reached(now, sim.progress(host.withdrawn)) {
        now = now_ns(epoch);
        // Take the swaps first: assignments already committed apply
        // before any later change of the host's state.
        let mut progressed = host.settle(&mut sim, now);
        sim.advance(
            now,
            |sim, t| host.take_back(sim, t, now),
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
        host.queue.extend(woken.drain(..));
        progressed |= host.offer(&sim, cfg.cpus);
        idle.poll(progressed);
    }
    let mut result = sim.finish(now_ns(epoch), now as f64 / 1e9);
    result.withdrawn = host.withdrawn;
    result
}

pub(super) fn kv_host(region: &Region, cfg: &RunConfig) -> RunResult {
    let cost = region.config().cost;
    let _me = region.attach_as(Side::Host);
    let batch = region.geometry().slot_batch as usize;
    let mut slots: Vec<HostSlot<'_>> = (0..region.slot_count())
        .map(|i| HostSlot::new(region.slot(i), cost))
        .collect();
    let mut rng = Rng::new(cfg.seed);
    let mut latency =
        Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3).expect("histogram bounds");
    let mut sent_at = vec![NEVER; slots.len()];
    let mut in_flight = vec![0usize; slots.len()];
    let mut answer = vec![[0u64; RECORD_WORDS]; batch];
    let mut requests = vec![[0u64; RECORD_WORDS]; batch];
    let epoch = Instant::now();
    let (mut now, mut done) = (0, 0u64);
    let mut window_left = cfg.window as usize;
    let mut idle = Idle::new(cfg);
    while !cfg.until.reached(now, answered(done)) {
        now = now_ns(epoch);
        let mut progressed = false;
        for (i, slot) in slots.iter_mut().enumerate() {
            if sent_at[i] != NEVER {
                let Ok(Some(x)) = slot.take(&mut answer) else {
                    continue;
                };
                let waited = now_ns(epoch).saturating_sub(sent_at[i]).max(1);
                let _ = latency.record_n(waited, x.count as u64);
                done += x.count as u64;
                window_left += in_flight[i];
                sent_at[i] = NEVER;
            }
            let n = batch.min(window_left);
            if n == 0 {
                continue;
            }
            for r in requests[..n].iter_mut() {
                let op = if rng.below(10) < 9 { KV_GET } else { KV_PUT };
                *r = [0; RECORD_WORDS];
                r[0] = u64::from(op);
                r[1] = rng.below(KV_KEYS as u64);
                r[2] = rng.next_u64();
            }
            slot.offer(&requests[..n])
                .expect("an answered slot is the host's");
            in_flight[i] = n;
            window_left -= n;
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

    #[test]
    fn fifo_assigns_the_queue_head_to_the_idle_cpus_in_order() {
        let cpus = 4;
        let mut offer = vec![[NONE; RECORD_WORDS]; sched_words(cpus).div_ceil(RECORD_WORDS)];
        // Idle cpus 1 and 3; three candidates (only two get a cpu).
        set_word(&mut offer, 0, 2 | (3 << 16));
        set_word(&mut offer, 1, 1);
        set_word(&mut offer, 2, 3);
        for (i, t) in [7u64, 9, 11].into_iter().enumerate() {
            set_word(&mut offer, 3 + i, t | ((100 + t) << 32));
        }
        let mut answer = vec![[0; RECORD_WORDS]; offer.len()];
        let records = assign_cpus(&offer, &mut answer);
        assert_eq!(records, 1);
        assert_eq!(word(&answer, 0), 2);
        assert_eq!(word(&answer, 1), 1 | (7 << 16) | (107 << 32));
        assert_eq!(word(&answer, 2), 3 | (9 << 16) | (109 << 32));
    }
}
