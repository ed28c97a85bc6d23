//! The batched bilateral variants: one exchange carries a batch each way,
//! so the agent pays one PCIe AtomicOp per batch rather than per decision.
//!
//! * Scheduling: one slot. The host offers every idle cpu together with
//!   the head of its run queue (as many tasks as idle cpus), the agent
//!   answers with its assignments (the same FIFO policy), and the whole
//!   assignment commits against exactly that offer. A task taken back while
//!   offered voids the offer (withdraw) and the rest go back to the head of
//!   the queue, in order.
//! * Key-value: the window is split over two slots, each carrying half of
//!   the requests in flight; one refills while the other is answered.

use std::collections::VecDeque;
use std::time::Instant;

use hdrhistogram::Histogram;
use oae_common::rng::Rng;

use super::{
    CommitOutcome, Idle, KV_GET, KV_KEYS, KV_PUT, MsgKind, NEVER, NO_CPU, RunConfig, RunResult,
    SchedDecision, Sim, now_ns,
};
use crate::bilateral::{HostSlot, Withdraw};
use crate::region::{Region, Side};
use crate::ring::{RECORD_WORDS, Record};

/// Key-value requests in flight are split over this many slots.
const KV_SLOTS: u32 = 2;
/// Marks an unused word of an offer or answer.
const NONE: u64 = u64::MAX;

/// Words of a scheduling offer: a count word, then one word per idle cpu,
/// then one per candidate task (`task | seq << 32`).
fn sched_words(cpus: u32) -> usize {
    1 + 2 * cpus as usize
}

/// Slots and records per slot for scheduling.
pub(super) fn sched_geometry(cfg: &RunConfig) -> (u32, u32) {
    (1, sched_words(cfg.cpus).div_ceil(RECORD_WORDS) as u32)
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
    let n = cpus.min(tasks);
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

/// The host's side of the one slot. Buffers are sized once: the loop
/// allocates nothing per offer, as FITO's does not per message.
struct SchedHost<'a> {
    slot: HostSlot<'a>,
    /// Whether a batch is out; if so, its tasks in queue order.
    out: bool,
    out_tasks: Vec<u32>,
    /// Per task: on offer now; or, while settling, assigned by the agent.
    offered: Vec<bool>,
    assigned: Vec<bool>,
    queue: VecDeque<u32>,
    records: Vec<Record>,
    answer: Vec<Record>,
    withdrawn: u64,
}

impl SchedHost<'_> {
    /// Hands the tasks of the batch out that the agent did not assign (and
    /// that are not `except`) back to the head of the queue, in order.
    fn requeue(&mut self, except: u32) {
        self.out = false;
        for &t in self.out_tasks.iter().rev() {
            self.offered[t as usize] = false;
            if !self.assigned[t as usize] && t != except {
                self.queue.push_front(t);
            }
            self.assigned[t as usize] = false;
        }
        self.out_tasks.clear();
    }

    /// Takes a swapped batch, if there is one, and commits its assignments.
    fn settle(&mut self, sim: &mut Sim, now: u64) -> bool {
        if !self.out {
            return false;
        }
        let Ok(Some(_)) = self.slot.take(&mut self.answer) else {
            return false;
        };
        let n = word(&self.answer, 0) as usize;
        for i in 0..n.min(self.out_tasks.len()) {
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
        self.requeue(NO_CPU);
        true
    }

    /// A runnable task is being taken back: if it is on offer, void the
    /// offer first (or, if the agent's swap won, apply it first).
    fn take_back(&mut self, sim: &mut Sim, t: u32, now: u64) -> bool {
        if !self.offered[t as usize] {
            if let Some(at) = self.queue.iter().position(|&q| q == t) {
                self.queue.remove(at);
            }
            return true;
        }
        match self.slot.withdraw() {
            Withdraw::Withdrawn => {
                self.withdrawn += 1;
                self.requeue(t);
                true
            }
            Withdraw::AlreadySwapped | Withdraw::NotOffered => {
                if !self.settle(sim, now) {
                    return false;
                }
                if let Some(at) = self.queue.iter().position(|&q| q == t) {
                    self.queue.remove(at);
                }
                true
            }
        }
    }

    /// Offers every idle cpu with as many tasks from the head of the queue.
    fn offer(&mut self, sim: &Sim, cpus: u32) -> bool {
        if self.out || self.queue.is_empty() {
            return false;
        }
        let records = &mut self.records;
        records.fill([NONE; RECORD_WORDS]);
        let mut idle = 0;
        for c in (0..cpus).filter(|&c| sim.tasks.running_on(c).is_none()) {
            idle += 1;
            set_word(records, idle, u64::from(c));
        }
        if idle == 0 {
            return false;
        }
        let n = idle.min(self.queue.len());
        for i in 0..n {
            let t = self.queue.pop_front().expect("n tasks queued");
            self.offered[t as usize] = true;
            self.out_tasks.push(t);
            let seq = u64::from(sim.tasks.seqnum(t));
            set_word(records, 1 + idle + i, u64::from(t) | (seq << 32));
        }
        set_word(records, 0, idle as u64 | ((n as u64) << 16));
        self.slot
            .offer(records)
            .expect("with no batch out the slot is the host's");
        self.out = true;
        true
    }
}

pub(super) fn sched_host(region: &Region, cfg: &RunConfig) -> RunResult {
    let cost = region.config().cost;
    let _me = region.attach_as(Side::Host);
    let batch = region.geometry().slot_batch as usize;
    let mut host = SchedHost {
        slot: HostSlot::new(region.slot(0), cost),
        out: false,
        out_tasks: Vec::with_capacity(cfg.cpus as usize),
        offered: vec![false; cfg.tasks as usize],
        assigned: vec![false; cfg.tasks as usize],
        queue: VecDeque::with_capacity(cfg.tasks as usize),
        records: vec![[NONE; RECORD_WORDS]; batch],
        answer: vec![[0; RECORD_WORDS]; batch],
        withdrawn: 0,
    };
    let mut sim = Sim::new(cfg);
    let epoch = Instant::now();
    let end = cfg.duration.as_nanos() as u64;
    let mut now = 0;
    let mut woken: VecDeque<u32> = VecDeque::with_capacity(cfg.tasks as usize);
    let mut idle = Idle::new(cfg);
    while now < end {
        now = now_ns(epoch);
        // Take the swap first: an assignment already committed applies
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
    let end = cfg.duration.as_nanos() as u64;
    let (mut now, mut done) = (0, 0u64);
    let mut window_left = cfg.window as usize;
    let mut idle = Idle::new(cfg);
    while now < end {
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
