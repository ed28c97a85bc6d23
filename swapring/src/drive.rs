//! Reference drivers for each side: the loops the peer binary, the
//! two-process tests and the examples run. Each checks what it receives
//! (order, exactly-once, decisions matching the state they were swapped
//! against) and is bounded by a count, by counted liveness, and by a
//! wall-clock deadline checked outside the per-message path.

use std::time::{Duration, Instant};

use crate::bilateral::{HostSlot, IpuSlot, Phase, SlotReport, SwapOutcome, Withdraw};
use crate::fito::{FitoAgent, FitoHost, Message, MsgKind, SchedDecision};
use crate::layout::{RING_DECISIONS, RING_MESSAGES, RING_VERB_REQUESTS, RING_VERB_RESPONSES};
use crate::liveness::{Peer, PeerWatch, STAT_LOST_RACES, STAT_SWAPS, STAT_WITHDRAWN};
use crate::region::{Region, Side};
use crate::ring::{RECORD_WORDS, Record};
use crate::verbs::{VerbRecord, VerbsDevice, VerbsHost};

/// Limits on one run of a driver.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// Exchanges to complete.
    pub count: u64,
    /// Own idle polls without a peer move before the peer is declared gone.
    pub quiet_limit: u64,
    /// Safety net for tests; never consulted per message.
    pub deadline: Duration,
}

/// How a driver run ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Exchanges completed (messages + decisions, swaps, responses).
    pub done: u64,
    /// Records those exchanges carried (bilateral: a swap moves a batch).
    pub records: u64,
    pub withdrawn: u64,
    pub lost_races: u64,
    /// The peer stopped interacting (counted, not timed).
    pub peer_gone: bool,
    pub deadline_hit: bool,
    /// The first broken promise seen, if any.
    pub violation: Option<String>,
}

impl Report {
    pub fn line(&self) -> String {
        format!(
            "done={} records={} withdrawn={} lost_races={} peer_gone={} deadline_hit={} violation={}",
            self.done,
            self.records,
            self.withdrawn,
            self.lost_races,
            self.peer_gone,
            self.deadline_hit,
            self.violation.as_deref().unwrap_or("none")
        )
    }
}

/// Counts idle polls against the peer's interaction counter and the
/// deadline; `Some(why)` says the loop must end.
struct Idle<'a> {
    watch: PeerWatch,
    peer: crate::liveness::SideBlock<'a>,
    deadline: Instant,
    polls: u64,
}

/// Quiet polls between looks at whether the peer's process still exists.
const PROCESS_CHECK_POLLS: u64 = 4096;

enum Stop {
    PeerGone,
    Deadline,
}

impl<'a> Idle<'a> {
    /// Waits (bounded by the deadline) for the peer to attach, so its start-up
    /// time is not counted against its liveness.
    fn new(region: &'a Region, me: Side, bounds: &Bounds) -> Self {
        let peer = region.side(me.peer());
        let deadline = Instant::now() + bounds.deadline;
        while peer.attachments() == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        Idle {
            watch: PeerWatch::new(peer.interactions(), bounds.quiet_limit),
            peer,
            deadline,
            polls: 0,
        }
    }

    /// One poll that found nothing to do.
    fn idle(&mut self) -> Option<Stop> {
        self.polls += 1;
        if self.polls.is_multiple_of(4096) && Instant::now() > self.deadline {
            return Some(Stop::Deadline);
        }
        match self.watch.observe(self.peer.interactions()) {
            Peer::Gone => return Some(Stop::PeerGone),
            // A peer process that has ended is gone whatever the count: on
            // a loaded machine each of our polls can give the CPU away for
            // a time slice, and the count would take minutes.
            Peer::Quiet(polls)
                if polls.is_multiple_of(PROCESS_CHECK_POLLS)
                    && self.peer.pid() != 0
                    && !crate::owner::process_alive(self.peer.pid()) =>
            {
                return Some(Stop::PeerGone);
            }
            _ => {}
        }
        // Two sides share few CPUs: give the peer the core.
        std::thread::yield_now();
        None
    }

    /// One poll that found work: the peer is evidently alive.
    fn busy(&mut self) -> Option<Stop> {
        self.polls += 1;
        if self.polls.is_multiple_of(4096) && Instant::now() > self.deadline {
            return Some(Stop::Deadline);
        }
        self.watch.observe(self.peer.interactions());
        None
    }
}

fn stopped(report: &mut Report, stop: Stop) {
    match stop {
        Stop::PeerGone => report.peer_gone = true,
        Stop::Deadline => report.deadline_hit = true,
    }
}

/// Host side of the FITO rings: posts `count` wakeup messages (payload
/// word 1 = global index) and expects one decision per message, in order.
pub fn fito_host(region: &Region, bounds: Bounds) -> Report {
    let cfg = region.config();
    let me = region.attach_as(Side::Host);
    let mut host = FitoHost::new(
        region.ring(RING_MESSAGES).producer(),
        region.ring(RING_DECISIONS).consumer(),
        cfg.cost,
        cfg.mitigations,
        cfg.wakeup,
        me,
    );
    let mut idle = Idle::new(region, Side::Host, &bounds);
    let mut report = Report::default();
    let (mut posted, mut expected) = (0u64, 0u64);
    while expected < bounds.count {
        let mut progressed = false;
        while posted < bounds.count {
            let task = (posted % 64) as u32;
            let msg = Message::task(MsgKind::TaskWakeup, task, 0, posted as u32, posted);
            if host.post(&msg).is_err() {
                break;
            }
            posted += 1;
            progressed = true;
        }
        host.flush();
        while let Some(d) = host.poll_decision() {
            if d.cookie != expected && report.violation.is_none() {
                report.violation = Some(format!(
                    "decision for message {} arrived when {expected} was due",
                    d.cookie
                ));
            }
            expected += 1;
            progressed = true;
        }
        let stop = if progressed { idle.busy() } else { idle.idle() };
        if let Some(stop) = stop {
            stopped(&mut report, stop);
            break;
        }
    }
    report.done = expected;
    report
}

/// IPU side of the FITO rings: one decision per message, checking that
/// messages arrive exactly once and in order.
pub fn fito_agent(region: &Region, bounds: Bounds) -> Report {
    let cfg = region.config();
    let me = region.attach_as(Side::Ipu);
    let mut agent = FitoAgent::new(
        region.ring(RING_MESSAGES).consumer(),
        region.ring(RING_DECISIONS).producer(),
        cfg.cost,
        cfg.mitigations,
        me,
    );
    let mut idle = Idle::new(region, Side::Ipu, &bounds);
    let mut report = Report::default();
    let mut pending: Option<SchedDecision> = None;
    let mut next = 0u64;
    while report.done < bounds.count {
        let mut progressed = false;
        loop {
            if let Some(d) = pending {
                if agent.decide(&d).is_err() {
                    break;
                }
                pending = None;
                report.done += 1;
                progressed = true;
            }
            let Some(msg) = agent.poll_message() else {
                break;
            };
            progressed = true;
            match msg {
                Ok(m) if m.payload[1] == next => {
                    pending = Some(SchedDecision {
                        task: m.task_id(),
                        cpu: 0,
                        task_seqnum: m.seqnum,
                        agent_barrier: agent.barrier(),
                        cookie: next,
                    });
                    next += 1;
                }
                other => {
                    report
                        .violation
                        .get_or_insert(format!("message {next} expected, got {other:?}"));
                    next += 1;
                }
            }
        }
        agent.flush();
        let stop = if progressed { idle.busy() } else { idle.idle() };
        if let Some(stop) = stop {
            stopped(&mut report, stop);
            break;
        }
    }
    agent.flush();
    report
}

/// The answer the bilateral drivers compute for one record of a batch: any
/// function of every word will do, so an answer made on a torn or other
/// record shows. Its last word is the digest of the whole batch, so an
/// answer swapped against another batch shows too.
pub fn bilateral_answer(state: &Record, batch_digest: u64) -> Record {
    let mix = state.iter().fold(0x9e37_79b9_7f4a_7c15u64, |acc, w| {
        (acc ^ w).wrapping_mul(0x1000_0000_01b3)
    });
    let mut out = [0; RECORD_WORDS];
    for (i, word) in out.iter_mut().enumerate() {
        *word = mix.rotate_left(i as u32 * 9) ^ state[0];
    }
    out[RECORD_WORDS - 1] = batch_digest;
    out
}

/// A digest of a batch's every word, in order.
pub fn batch_digest(batch: &[Record]) -> u64 {
    batch.iter().flatten().fold(batch.len() as u64, |acc, w| {
        (acc.rotate_left(5) ^ w).wrapping_mul(0x1000_0000_01b3)
    })
}

/// The IPU drivers' decision over a whole batch.
pub fn bilateral_decide(offer: &[Record], answer: &mut [Record]) -> usize {
    let digest = batch_digest(offer);
    for (a, s) in answer.iter_mut().zip(offer) {
        *a = bilateral_answer(s, digest);
    }
    offer.len()
}

fn bilateral_state(key: u64, slot: usize, changed: bool) -> Record {
    let mut s = [0u64; RECORD_WORDS];
    s[0] = key;
    s[1] = slot as u64;
    s[2] = u64::from(changed);
    for (i, w) in s.iter_mut().enumerate().skip(3) {
        *w = key.wrapping_mul(i as u64 + 1);
    }
    s
}

/// One slot's offer as the host driver remembers it.
struct Offered {
    batch: Vec<Record>,
    epoch: u64,
    changed: bool,
}

/// Host side of the swap slots: `count` exchanges spread over every slot,
/// each a batch of 1 to `slot_batch` records; every fifth offer is
/// withdrawn and changed before the IPU may have taken it. Checks each
/// answer record against the record it was swapped with and the batch it
/// came in, and the alternating bits against the exchanges counted.
pub fn bilateral_host(region: &Region, bounds: Bounds) -> Report {
    let cost = region.config().cost;
    let mut me = region.attach_as(Side::Host);
    let n = region.slot_count();
    let batch = region.geometry().slot_batch as usize;
    let mut slots: Vec<HostSlot<'_>> = (0..n)
        .map(|i| HostSlot::new(region.slot(i), cost))
        .collect();
    let mut offered: Vec<Option<Offered>> = (0..n).map(|_| None).collect();
    let mut taken = vec![0u64; n];
    let mut idle = Idle::new(region, Side::Host, &bounds);
    let mut report = Report::default();
    let mut issued = 0u64;
    let mut answer = vec![[0u64; RECORD_WORDS]; batch];
    'run: while report.done < bounds.count {
        let mut progressed = false;
        for i in 0..n {
            me.bump();
            match slots[i].take(&mut answer) {
                Err(half) => {
                    report.violation.get_or_insert(format!("slot {i}: {half}"));
                    break 'run;
                }
                Ok(Some(exchange)) => {
                    progressed = true;
                    let Some(offer) = offered[i].take() else {
                        report
                            .violation
                            .get_or_insert(format!("slot {i}: swapped with nothing offered"));
                        break 'run;
                    };
                    let mut want = vec![[0u64; RECORD_WORDS]; offer.batch.len()];
                    bilateral_decide(&offer.batch, &mut want);
                    if exchange.epoch != offer.epoch || answer[..exchange.count] != want[..] {
                        report.violation.get_or_insert(format!(
                            "slot {i}: exchange at epoch {} for offer {} carries an answer for another batch",
                            exchange.epoch, offer.epoch
                        ));
                    }
                    taken[i] += 1;
                    if exchange.alt != (taken[i] % 2 == 1) {
                        report.violation.get_or_insert(format!(
                            "slot {i}: alternating bit disagrees with {} exchanges",
                            taken[i]
                        ));
                    }
                    report.done += 1;
                    report.records += offer.batch.len() as u64;
                    me.add_stat(STAT_SWAPS, 1);
                }
                Ok(None) => {
                    // Every fifth offer changes before the IPU may have
                    // taken it: the host must withdraw it first.
                    if let Some(offer) = offered[i].as_mut()
                        && !offer.changed
                        && offer.batch[0][0] % 5 == 0
                    {
                        match slots[i].withdraw() {
                            Withdraw::Withdrawn => {
                                report.withdrawn += 1;
                                me.add_stat(STAT_WITHDRAWN, 1);
                                for record in offer.batch.iter_mut() {
                                    *record = bilateral_state(record[0], i, true);
                                }
                                offer.epoch = slots[i]
                                    .offer(&offer.batch)
                                    .expect("withdrawn slot is the host's");
                                offer.changed = true;
                                progressed = true;
                            }
                            Withdraw::AlreadySwapped => {}
                            Withdraw::NotOffered => {
                                report
                                    .violation
                                    .get_or_insert(format!("slot {i}: offer vanished"));
                            }
                        }
                    }
                }
            }
            if offered[i].is_none() && issued < bounds.count {
                let size = 1 + (issued as usize % batch);
                let records: Vec<Record> = (0..size)
                    .map(|k| bilateral_state(issued * 64 + k as u64, i, false))
                    .collect();
                let epoch = slots[i].offer(&records).expect("taken slot is the host's");
                offered[i] = Some(Offered {
                    batch: records,
                    epoch,
                    changed: false,
                });
                issued += 1;
                progressed = true;
            }
        }
        let stop = if progressed { idle.busy() } else { idle.idle() };
        if let Some(stop) = stop {
            stopped(&mut report, stop);
            break;
        }
    }
    if report.violation.is_none() {
        report.violation = check_slots(region, &taken);
    }
    report
}

/// IPU side of the swap slots: swaps `count` answers in, round robin.
pub fn bilateral_agent(region: &Region, bounds: Bounds) -> Report {
    let cost = region.config().cost;
    let mut me = region.attach_as(Side::Ipu);
    let n = region.slot_count();
    let mut slots: Vec<IpuSlot<'_>> = (0..n).map(|i| IpuSlot::new(region.slot(i), cost)).collect();
    let mut swaps = vec![0u64; n];
    let mut idle = Idle::new(region, Side::Ipu, &bounds);
    let mut report = Report::default();
    while report.done < bounds.count {
        let mut progressed = false;
        for (i, slot) in slots.iter_mut().enumerate() {
            me.bump();
            let mut records = 0;
            let outcome = slot.try_swap(|offer, answer| {
                records = offer.len() as u64;
                bilateral_decide(offer, answer)
            });
            match outcome {
                SwapOutcome::NothingOffered => {}
                SwapOutcome::Swapped { .. } => {
                    swaps[i] += 1;
                    report.done += 1;
                    report.records += records;
                    me.add_stat(STAT_SWAPS, 1);
                    progressed = true;
                }
                SwapOutcome::Lost => {
                    report.lost_races += 1;
                    me.add_stat(STAT_LOST_RACES, 1);
                    progressed = true;
                }
            }
        }
        let stop = if progressed { idle.busy() } else { idle.idle() };
        if let Some(stop) = stop {
            stopped(&mut report, stop);
            break;
        }
    }
    // Our swaps are the exchanges; the host may not have taken the last.
    report.violation = check_slots(region, &swaps);
    report
}

/// Every slot consistent (no half-applied swap) and its alternating bit
/// equal to the parity of the exchanges `counted` on it, counting one
/// swapped but not yet taken when `counted` comes from the host.
pub fn check_slots(region: &Region, counted: &[u64]) -> Option<String> {
    for (i, &count) in counted.iter().enumerate() {
        match region.slot(i).inspect() {
            SlotReport::Consistent(ctl) => {
                let untaken = u64::from(ctl.phase == Phase::Swapped);
                let parity_taken = count % 2 == 1;
                let parity_with_untaken = (count + untaken) % 2 == 1;
                if ctl.alt != parity_taken && ctl.alt != parity_with_untaken {
                    return Some(format!(
                        "slot {i}: alternating bit {} after {count} exchanges ({ctl:?})",
                        ctl.alt
                    ));
                }
            }
            other => return Some(format!("slot {i}: {other:?}")),
        }
    }
    None
}

/// Host side of the verbs carrier: `count` requests, each answered once.
pub fn verbs_host(region: &Region, bounds: Bounds) -> Report {
    let cost = region.config().cost;
    let me = region.attach_as(Side::Host);
    let mut host = VerbsHost::new(
        region.ring(RING_VERB_REQUESTS).producer(),
        region.ring(RING_VERB_RESPONSES).consumer(),
        cost,
        me,
    );
    let mut idle = Idle::new(region, Side::Host, &bounds);
    let mut report = Report::default();
    let mut answered = vec![false; bounds.count as usize];
    let mut sent = 0u64;
    while report.done < bounds.count {
        let mut progressed = false;
        while sent < bounds.count {
            let body = sent.to_le_bytes();
            let request = VerbRecord::new(sent, 1, &body).expect("8 bytes fit");
            if host.submit(&request).is_err() {
                break;
            }
            sent += 1;
            progressed = true;
        }
        host.flush();
        while let Some(response) = host.poll_completion() {
            progressed = true;
            match response {
                Ok(r) if (r.id as usize) < answered.len() && !answered[r.id as usize] => {
                    let mut want = r.id.to_le_bytes();
                    want.reverse();
                    if r.tag != 2 || r.data() != want {
                        report
                            .violation
                            .get_or_insert(format!("response {} has the wrong body", r.id));
                    }
                    answered[r.id as usize] = true;
                    report.done += 1;
                }
                other => {
                    report
                        .violation
                        .get_or_insert(format!("unexpected or repeated response {other:?}"));
                }
            }
        }
        let stop = if progressed { idle.busy() } else { idle.idle() };
        if let Some(stop) = stop {
            stopped(&mut report, stop);
            break;
        }
    }
    report
}

/// IPU side of the verbs carrier: answers each request with its bytes
/// reversed and its tag plus one.
pub fn verbs_device(region: &Region, bounds: Bounds) -> Report {
    let cost = region.config().cost;
    let me = region.attach_as(Side::Ipu);
    let mut device = VerbsDevice::new(
        region.ring(RING_VERB_REQUESTS).consumer(),
        region.ring(RING_VERB_RESPONSES).producer(),
        cost,
        me,
    );
    let mut idle = Idle::new(region, Side::Ipu, &bounds);
    let mut report = Report::default();
    let mut pending: Option<VerbRecord> = None;
    while report.done < bounds.count {
        let mut progressed = false;
        loop {
            if let Some(r) = pending {
                if device.complete(&r).is_err() {
                    break;
                }
                pending = None;
                report.done += 1;
                progressed = true;
            }
            let Some(request) = device.poll_request() else {
                break;
            };
            progressed = true;
            match request {
                Ok(q) => {
                    let mut body = [0u8; crate::verbs::VERB_PAYLOAD_BYTES];
                    let data = q.data();
                    body[..data.len()].copy_from_slice(data);
                    body[..data.len()].reverse();
                    pending = Some(
                        VerbRecord::new(q.id, q.tag + 1, &body[..data.len()]).expect("same length"),
                    );
                }
                Err(raw) => {
                    report
                        .violation
                        .get_or_insert(format!("corrupt request {raw:?}"));
                }
            }
        }
        device.flush();
        let stop = if progressed { idle.busy() } else { idle.idle() };
        if let Some(stop) = stop {
            stopped(&mut report, stop);
            break;
        }
    }
    device.flush();
    report
}
