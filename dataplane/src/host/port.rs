//! The dataplane's end of the host ring, served by its polling core
//! between bursts, in either mode:
//!
//! * FITO: verbs arrive on the request ring, completions leave on the
//!   response ring with one posted write per burst.
//! * Bilateral: each host process has a swap slot. An offer carries a batch
//!   of the process's verbs; the port answers it with a batch of that
//!   process's completions, and one AtomicOp commits both: the verbs become
//!   the dataplane's exactly when the completions become the host's. An
//!   offer with no verbs waits until there are completions for it.
//!
//! Every verb a host process submitted completes once: with its result,
//! with the reason it had no effect, or, if the process that submitted it
//! is gone (its claim taken over), it is counted as orphaned.

use std::collections::VecDeque;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use oae_swapring::bilateral::{IpuSlot, SwapOutcome};
use oae_swapring::cost::CostModel;
use oae_swapring::layout::{Geometry, Mode, RING_VERB_REQUESTS, RING_VERB_RESPONSES};
use oae_swapring::owner::{Claim, process_alive};
use oae_swapring::region::{Region, RegionConfig, Side};
use oae_swapring::ring::{RECORD_WORDS, Record};
use oae_swapring::verbs::{VerbRecord, VerbsDevice};

use oae_client::api::{AppError, Completion, NotSubmitted, Received};
use oae_client::host::HostMode;
use oae_client::host::codec::{
    HostRequest, MAX_VERB_RECORDS, Records, decode_request, encode_completion, encode_received,
    generation, message_records,
};
use oae_client::stats::HostPortCounters;
use oae_config::HostRing;

/// Which host process a verb came from: its slot (0 on a FITO ring) and the
/// generation of that process's claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostOrigin {
    pub slot: u16,
    pub generation: u16,
}

/// Per host process on a bilateral ring.
struct SlotState {
    /// The claim generation the process's offers carry.
    generation: u16,
    /// Its completions' records, whole messages, oldest first; sized once.
    waiting: VecDeque<VerbRecord>,
}

enum Serve {
    Fito {
        /// Completions' records the response ring had no room for yet.
        waiting: VecDeque<VerbRecord>,
    },
    Bilateral {
        slots: Vec<SlotState>,
        /// Where the next round of slots starts, so none is starved.
        next: usize,
        /// The offer being served, copied out of its slot.
        offer: Vec<Record>,
        answer: Vec<Record>,
        scratch: Vec<Record>,
    },
}

/// The dataplane's end of the host ring.
pub struct HostPort {
    region: Region,
    /// Read from the header once: the polling core serves the ring every
    /// burst.
    cost: CostModel,
    serve: Serve,
    counters: HostPortCounters,
}

impl HostPort {
    /// Creates the region at `ring.path` (mode 0600), replacing a ring a
    /// dead dataplane left there.
    pub fn create(ring: &HostRing) -> Result<HostPort, String> {
        remove_stale_ring(&ring.path)?;
        let (mode, slots, slot_batch) = match ring.mode {
            HostMode::Fito => (Mode::Fito, 0, 1),
            HostMode::Bilateral => (Mode::Bilateral, ring.processes, ring.batch),
        };
        let region = Region::create(
            &ring.path,
            &RegionConfig {
                mode,
                geometry: Geometry {
                    ring_capacity: ring.capacity,
                    slots,
                    slot_batch,
                },
                cost: ring.cost,
                ..RegionConfig::default()
            },
        )
        .map_err(|e| format!("host ring: {e}"))?;
        region.attach_as(Side::Ipu);
        // Every verb a host process may have in flight can wait here as a
        // completion of its largest size.
        let waiting = ring.capacity as usize * MAX_VERB_RECORDS;
        let serve = match ring.mode {
            HostMode::Fito => Serve::Fito {
                waiting: VecDeque::with_capacity(waiting),
            },
            HostMode::Bilateral => Serve::Bilateral {
                slots: (0..ring.processes)
                    .map(|_| SlotState {
                        generation: 0,
                        waiting: VecDeque::with_capacity(waiting),
                    })
                    .collect(),
                next: 0,
                offer: Vec::with_capacity(ring.batch as usize),
                answer: vec![[0; RECORD_WORDS]; ring.batch as usize],
                scratch: vec![[0; RECORD_WORDS]; ring.batch as usize],
            },
        };
        Ok(HostPort {
            cost: region.config().cost,
            region,
            serve,
            counters: HostPortCounters::default(),
        })
    }

    pub fn path(&self) -> &Path {
        self.region.path()
    }

    /// The ring's claims as one word: it changes when a host process lets
    /// go of the ring (or its slot) or another claims it. One or a few
    /// loads, so a polling core can look every burst.
    pub fn claims(&self) -> u64 {
        let load = |w: &std::sync::atomic::AtomicU64| w.load(std::sync::atomic::Ordering::Acquire);
        match self.serve {
            Serve::Fito { .. } => load(self.region.ring_owner_word()),
            Serve::Bilateral { .. } => (0..self.region.slot_count()).fold(0, |all, s| {
                all.rotate_left(7) ^ load(self.region.slot(s).owner_word())
            }),
        }
    }

    /// Whether the process that sent a request under `origin` still holds
    /// its claim (a process that let go, or was replaced, does not).
    pub fn holds(&self, origin: HostOrigin) -> bool {
        let word = match self.serve {
            Serve::Fito { .. } => self.region.ring_owner_word(),
            Serve::Bilateral { .. } if usize::from(origin.slot) < self.region.slot_count() => {
                self.region.slot(usize::from(origin.slot)).owner_word()
            }
            Serve::Bilateral { .. } => return false,
        };
        Claim::of(word.load(std::sync::atomic::Ordering::Acquire))
            .is_some_and(|c| c.generation as u16 == origin.generation)
    }

    pub fn counters(&self) -> HostPortCounters {
        let waiting = match &self.serve {
            Serve::Fito { waiting } => messages(waiting),
            Serve::Bilateral { slots, .. } => slots.iter().map(|s| messages(&s.waiting)).sum(),
        };
        HostPortCounters {
            completions_waiting: waiting,
            ..self.counters
        }
    }

    /// Takes up to `max` requests (FITO), or serves every slot's offer
    /// (bilateral): each decoded verb or receive goes to `submit`; one that
    /// does not decode, or that `submit` refuses, is answered with the
    /// reason, and had no effect.
    pub fn take(
        &mut self,
        max: usize,
        mut submit: impl FnMut(HostOrigin, HostRequest) -> Result<(), NotSubmitted>,
    ) {
        if self.abandoned_if_cut() {
            return;
        }
        let published_before = self.counters.completions;
        let Self {
            region,
            cost,
            serve,
            counters,
        } = self;
        match serve {
            Serve::Fito { waiting } => {
                take_fito(region, *cost, max, waiting, counters, &mut submit);
            }
            Serve::Bilateral {
                slots,
                next,
                offer,
                answer,
                scratch,
            } => {
                let n = slots.len();
                for k in 0..n {
                    let s = (*next + k) % n;
                    let ipu = IpuSlot::with_scratch(region.slot(s), *cost, std::mem::take(scratch));
                    *scratch = serve_slot(
                        ipu,
                        s as u16,
                        &mut slots[s],
                        offer,
                        answer,
                        counters,
                        &mut submit,
                    );
                }
                *next = (*next + 1) % n.max(1);
            }
        }
        self.recount_if_cut(published_before);
    }

    /// Queues a completion for the host process that submitted the verb;
    /// published by [`HostPort::flush`] (FITO) or the process's next
    /// exchange (bilateral).
    pub fn complete(&mut self, origin: HostOrigin, c: Completion) {
        self.answer(origin, encode_completion(&c, u32::from(origin.generation)));
    }

    /// Queues a posted receive's outcome (its message, bytes and all) for
    /// the host process that posted it, as [`HostPort::complete`] does.
    pub fn complete_receive(&mut self, origin: HostOrigin, received: &Received) {
        self.answer(
            origin,
            encode_received(received, u32::from(origin.generation)),
        );
    }

    fn answer(&mut self, origin: HostOrigin, records: Records) {
        if self.abandoned_if_cut() {
            self.counters.completions_orphaned += 1;
            return;
        }
        let current = match &mut self.serve {
            Serve::Fito { waiting } => {
                let owner = ring_generation(&self.region);
                (owner == origin.generation).then_some(waiting)
            }
            Serve::Bilateral { slots, .. } => slots
                .get_mut(usize::from(origin.slot))
                .filter(|s| s.generation == origin.generation)
                .map(|s| &mut s.waiting),
        };
        match current {
            Some(waiting) => queue_answer(waiting, &mut self.counters, &records),
            None => self.counters.completions_orphaned += 1,
        }
    }

    /// Publishes waiting completions on a FITO ring, as many whole ones as
    /// the response ring takes, with one posted write. (A bilateral ring
    /// hands them over in exchanges, in [`HostPort::take`].)
    pub fn flush(&mut self) {
        if self.abandoned_if_cut() {
            return;
        }
        let Serve::Fito { waiting } = &mut self.serve else {
            return;
        };
        if waiting.is_empty() {
            return;
        }
        let published_before = self.counters.completions;
        let mut device = ipu_end(&self.region, self.cost);
        while let Some(first) = waiting.front() {
            let n = message_records(first).unwrap_or(1).min(waiting.len());
            let (a, b) = waiting.as_slices();
            let message: arrayvec::ArrayVec<VerbRecord, MAX_VERB_RECORDS> =
                a.iter().chain(b).take(n).copied().collect();
            if device.complete_all(&message).is_err() {
                break;
            }
            waiting.drain(..n);
            self.counters.completions += 1;
        }
        device.flush();
        self.recount_if_cut(published_before);
    }
}

impl HostPort {
    /// Completions published by a call during which the ring file was found
    /// cut went nowhere: they count as orphaned, not completed.
    fn recount_if_cut(&mut self, published_before: u64) {
        if self.region.cut() {
            let lost = self.counters.completions - published_before;
            self.counters.completions = published_before;
            self.counters.completions_orphaned += lost;
            self.abandoned_if_cut();
        }
    }

    /// True once the ring file was cut short under the mapping, which then
    /// reads zeros ([`Region::cut`]): nothing there is a host's any more.
    /// The first time, what waited for the host is counted orphaned.
    fn abandoned_if_cut(&mut self) -> bool {
        if !self.region.cut() {
            return false;
        }
        if self.counters.ring_cut == 0 {
            self.counters.ring_cut = 1;
            let orphan = |waiting: &mut VecDeque<VerbRecord>| {
                let n = messages(waiting);
                waiting.clear();
                n
            };
            self.counters.completions_orphaned += match &mut self.serve {
                Serve::Fito { waiting } => orphan(waiting),
                Serve::Bilateral { slots, .. } => {
                    slots.iter_mut().map(|s| orphan(&mut s.waiting)).sum()
                }
            };
        }
        true
    }
}

/// Removes the ring a dataplane that is gone left at `path`. Refuses,
/// saying so, to take the ring of a dataplane still running (its host
/// programs would lose it without a word) or anything that is not a host
/// ring (a file of someone else's, a link).
fn remove_stale_ring(path: &Path) -> Result<(), String> {
    let refuse = |what: String| {
        Err(format!(
            "{} {what}: remove it, or set [host] ring to another path",
            path.display()
        ))
    };
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return refuse(format!("cannot be examined ({e})")),
        Ok(m) if !m.file_type().is_file() => {
            return refuse("exists and is not a host ring file".into());
        }
        // Another user's file is not mapped at all: its owner could cut it
        // short under the mapping (SIGBUS). In a sticky directory such as
        // /dev/shm, nobody else can replace a file of ours meanwhile.
        Ok(m) if m.uid() != nix::unistd::geteuid().as_raw() => {
            return refuse(format!("belongs to another user (uid {})", m.uid()));
        }
        Ok(_) => {}
    }
    match Region::open(path) {
        Ok(region) => {
            let pid = region.side(Side::Ipu).pid();
            if pid != 0 && process_alive(pid) {
                return refuse(format!(
                    "is the host ring of a running dataplane (pid {pid}); stop it first"
                ));
            }
        }
        Err(e) => return refuse(format!("exists and is not a host ring ({e})")),
    }
    std::fs::remove_file(path).map_err(|e| {
        format!(
            "{} was left by a dataplane that is gone and cannot be replaced: {e}",
            path.display()
        )
    })
}

/// Makes way for a dataplane that serves a host ring at `ring`: a ring a
/// dead dataplane left there is removed, with the region files beside it
/// ([`oae_client::host::region_file`]); a live one is refused.
pub fn clear_stale(ring: &Path) -> Result<(), String> {
    remove_stale_ring(ring)?;
    let (Some(dir), Some(name)) = (ring.parent(), ring.file_name()) else {
        return Ok(());
    };
    let prefix = format!("{}.region-", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    Ok(())
}

/// The generation of the FITO ring's current claim (low 16 bits).
fn ring_generation(region: &Region) -> u16 {
    let word = region
        .ring_owner_word()
        .load(std::sync::atomic::Ordering::Acquire);
    Claim::of(word).map_or(0, |c| c.generation as u16)
}

/// Whole messages in a waiting list.
fn messages(waiting: &VecDeque<VerbRecord>) -> u64 {
    waiting
        .iter()
        .filter(|r| message_records(r).is_some())
        .count() as u64
}

/// The dataplane's end of the verb rings, for one burst.
fn ipu_end(region: &Region, cost: CostModel) -> VerbsDevice<'_> {
    VerbsDevice::new(
        region.ring(RING_VERB_REQUESTS).consumer(),
        region.ring(RING_VERB_RESPONSES).producer(),
        cost,
        region.side(Side::Ipu),
    )
}

fn take_fito(
    region: &Region,
    cost: CostModel,
    max: usize,
    waiting: &mut VecDeque<VerbRecord>,
    counters: &mut HostPortCounters,
    submit: &mut impl FnMut(HostOrigin, HostRequest) -> Result<(), NotSubmitted>,
) {
    let mut owner = ring_generation(region);
    let mut device = ipu_end(region, cost);
    let mut message = arrayvec::ArrayVec::<VerbRecord, MAX_VERB_RECORDS>::new();
    for _ in 0..max {
        let Some(first) = device.poll_request() else {
            break;
        };
        message.clear();
        // The id is the record's first word either way.
        let id = first.as_ref().map_or_else(|raw| raw[0], |r| r.id);
        let generation = first.as_ref().map_or(owner, generation);
        if let Ok(first) = first {
            message.push(first);
            // A message is published whole: its other records are there.
            for _ in 1..message_records(&first).unwrap_or(1) {
                match device.poll_request() {
                    Some(Ok(r)) => message.push(r),
                    _ => break,
                }
            }
        }
        if from_gone_holder(generation, &mut owner, || ring_generation(region)) {
            counters.requests_orphaned += 1;
            continue;
        }
        let origin = HostOrigin {
            slot: 0,
            generation,
        };
        accept(&message, id, origin, waiting, counters, submit);
    }
    counters.bad_tails += device.bad_tails();
    device.release();
}

/// Whether a request of `generation` came from a holder that has since let
/// the ring go. `owner` is the claim as last read: a holder claims before
/// it publishes, so a request of another generation is judged against the
/// claim read again now, after the request (a stale read would orphan the
/// first verbs of a holder that claimed a moment ago).
fn from_gone_holder(generation: u16, owner: &mut u16, read_owner: impl FnOnce() -> u16) -> bool {
    if generation == *owner {
        return false;
    }
    *owner = read_owner();
    generation != *owner
}

/// Hands one message's verb to `submit`, or answers why it had no effect.
fn accept(
    message: &[VerbRecord],
    id: u64,
    origin: HostOrigin,
    waiting: &mut VecDeque<VerbRecord>,
    counters: &mut HostPortCounters,
    submit: &mut impl FnMut(HostOrigin, HostRequest) -> Result<(), NotSubmitted>,
) {
    counters.requests += 1;
    let generation = u32::from(origin.generation);
    let request = decode_request(message);
    let why = match request {
        Some(r) => match submit(origin, r) {
            Ok(()) => return,
            Err(why) => why,
        },
        None => {
            counters.undecodable += 1;
            NotSubmitted::Undecodable
        }
    };
    let refusal = match request {
        Some(HostRequest::Receive(_)) => encode_received(
            &Received {
                id,
                result: Err(why),
            },
            generation,
        ),
        _ => encode_completion(
            &Completion {
                id,
                result: Err(AppError::NotSubmitted(why)),
                latency_ns: 0,
            },
            generation,
        ),
    };
    queue_answer(waiting, counters, &refusal);
}

/// Serves one bilateral slot: if its process offers verbs, or waits while
/// completions are ready for it, swaps its completions in against its
/// verbs; only once the swap commits are the verbs submitted.
fn serve_slot<'r>(
    mut ipu: IpuSlot<'r>,
    slot: u16,
    state: &mut SlotState,
    offer: &mut Vec<Record>,
    answer: &mut [Record],
    counters: &mut HostPortCounters,
    submit: &mut impl FnMut(HostOrigin, HostRequest) -> Result<(), NotSubmitted>,
) -> Vec<Record> {
    let generation = match ipu.read_offer() {
        Ok(Some(read)) => {
            offer.clear();
            offer.extend_from_slice(read.records);
            read.tag as u16
        }
        Ok(None) => return ipu.into_scratch(),
        Err(_) => {
            counters.bad_offers += 1;
            return ipu.into_scratch();
        }
    };
    if generation != state.generation {
        // A new process holds the slot: what the last one left is orphaned.
        counters.completions_orphaned += messages(&state.waiting);
        state.waiting.clear();
        state.generation = generation;
    }
    if offer.is_empty() && state.waiting.is_empty() {
        return ipu.into_scratch();
    }
    // Whole completions, oldest first, as many as the answer holds.
    let mut n = 0;
    let mut answered = 0;
    while n < state.waiting.len() {
        let len = message_records(&state.waiting[n]).unwrap_or(1);
        if n + len > answer.len() || n + len > state.waiting.len() {
            break;
        }
        for (a, r) in answer[n..n + len]
            .iter_mut()
            .zip(state.waiting.range(n..n + len))
        {
            *a = r.encode();
        }
        n += len;
        answered += 1;
    }
    match ipu.swap(&answer[..n]) {
        SwapOutcome::Swapped { .. } => {
            counters.swaps += 1;
            counters.completions += answered;
            state.waiting.drain(..n);
        }
        SwapOutcome::Lost => {
            // The process withdrew first: none of its verbs were taken.
            counters.lost_swaps += 1;
            return ipu.into_scratch();
        }
        SwapOutcome::NothingOffered => return ipu.into_scratch(),
    }
    let origin = HostOrigin { slot, generation };
    let mut at = 0;
    let mut message = arrayvec::ArrayVec::<VerbRecord, MAX_VERB_RECORDS>::new();
    while at < offer.len() {
        message.clear();
        let first = VerbRecord::decode(&offer[at]);
        let len = first
            .as_ref()
            .and_then(message_records)
            .unwrap_or(1)
            .min(offer.len() - at);
        for r in &offer[at..at + len] {
            if let Some(r) = VerbRecord::decode(r) {
                message.push(r);
            }
        }
        let id = offer[at][0];
        if message.len() != len {
            message.clear();
        }
        accept(&message, id, origin, &mut state.waiting, counters, submit);
        at += len;
    }
    ipu.into_scratch()
}

/// Waiting completions never grow past their first capacity: serving the
/// host allocates nothing, and a completion that finds no room is counted.
fn queue_answer(
    waiting: &mut VecDeque<VerbRecord>,
    counters: &mut HostPortCounters,
    records: &Records,
) {
    if waiting.len() + records.as_slice().len() > waiting.capacity() {
        counters.completions_lost += 1;
        return;
    }
    waiting.extend(records.as_slice().iter().copied());
}

#[cfg(test)]
mod tests {
    use oae_proto::{RegionRef, Verb};
    use oae_swapring::region::unique_shm_path;

    use super::*;
    use oae_client::api::{Destination, Message, ReceivePost, Submission};
    use oae_client::host::HostQueue;
    use oae_proto::Block;

    fn ring(mode: HostMode) -> HostRing {
        HostRing {
            path: unique_shm_path("oae-host-port"),
            capacity: 64,
            cost: CostModel::zero(),
            mode,
            processes: 2,
            batch: 8,
        }
    }

    fn faa(id: u64) -> Submission {
        let verb = Verb::FetchAdd {
            target: RegionRef { id: 1, key: 1 },
            offset: 0,
            add: 1,
        };
        Submission::to_first_link(id, verb)
    }

    /// The ids `take` hands on, and from which generation.
    fn taken(port: &mut HostPort) -> Vec<(u64, u16)> {
        let mut got = Vec::new();
        port.take(64, |origin, s| {
            got.push((s.id(), origin.generation));
            Ok(())
        });
        got
    }

    #[test]
    fn the_ring_file_is_its_owners_alone_and_a_live_ring_is_never_replaced() {
        use std::os::unix::fs::PermissionsExt;
        let r = ring(HostMode::Fito);
        let port = HostPort::create(&r).unwrap();
        let mode = std::fs::metadata(&r.path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", r.path.display());
        // A second dataplane with the same path: this process serves it.
        let err = HostPort::create(&r).err().expect("a live ring is refused");
        assert!(err.contains("running dataplane"), "{err}");
        assert!(
            HostQueue::attach(&r.path, 1).is_ok(),
            "the live ring is intact"
        );
        drop(port);
        // What a dataplane that is gone left is replaced.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let left = Region::create(&r.path, &RegionConfig::default()).unwrap();
        left.side(Side::Ipu).attach(dead);
        // As a killed dataplane would: the file stays.
        std::mem::forget(left);
        drop(HostPort::create(&r).unwrap());
        assert!(!r.path.exists());
    }

    #[test]
    fn what_is_not_a_host_ring_is_refused_and_left_alone() {
        let r = ring(HostMode::Fito);
        std::fs::write(&r.path, "someone else's file").unwrap();
        let err = HostPort::create(&r).err().expect("refused");
        assert!(err.contains("not a host ring"), "{err}");
        assert_eq!(
            std::fs::read_to_string(&r.path).unwrap(),
            "someone else's file"
        );
        std::fs::remove_file(&r.path).unwrap();
        let victim = unique_shm_path("oae-host-port-victim");
        std::fs::write(&victim, "untouched").unwrap();
        std::os::unix::fs::symlink(&victim, &r.path).unwrap();
        let err = HostPort::create(&r).err().expect("refused");
        assert!(err.contains("not a host ring file"), "{err}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
        std::fs::remove_file(&r.path).unwrap();
        std::fs::remove_file(&victim).unwrap();
    }

    #[test]
    fn a_fito_request_read_after_its_process_let_go_is_not_run() {
        let r = ring(HostMode::Fito);
        let mut port = HostPort::create(&r).unwrap();
        let mut gone = HostQueue::attach(&r.path, 1).unwrap();
        gone.submit(faa(1)).unwrap();
        drop(gone);
        let mut next = HostQueue::attach(&r.path, 1).unwrap();
        next.submit(faa(2)).unwrap();
        let got = taken(&mut port);
        assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), [2], "{got:?}");
        let c = port.counters();
        assert_eq!((c.requests_orphaned, c.requests), (1, 1), "{c:?}");
    }

    /// The claim read before a new holder claimed and published: its first
    /// request must still run (it stalled a host program's first verb).
    #[test]
    fn a_request_from_a_holder_that_claimed_after_the_last_read_runs() {
        let mut owner = 3;
        assert!(!from_gone_holder(4, &mut owner, || 4));
        assert_eq!(owner, 4);
        // The holder it replaced is gone: its late request does not run.
        assert!(from_gone_holder(3, &mut owner, || 4));
        assert!(!from_gone_holder(4, &mut owner, || unreachable!(
            "read once"
        )));
    }

    /// Another process truncates the ring file under the mapping: the
    /// port's next access used to end oaed with SIGBUS. Now it stops
    /// serving the ring, says so, and counts what it held as orphaned.
    #[test]
    fn a_ring_cut_short_is_served_no_more_and_what_it_held_is_counted() {
        let r = ring(HostMode::Fito);
        let mut port = HostPort::create(&r).unwrap();
        let mut host = HostQueue::attach(&r.path, 1).unwrap();
        for id in [1, 2] {
            host.submit(faa(id)).unwrap();
        }
        assert_eq!(taken(&mut port).len(), 2);
        let origin = HostOrigin {
            slot: 0,
            generation: ring_generation(&port.region),
        };
        let done = |id| Completion {
            id,
            result: Ok(oae_proto::verb::Output::FetchAdd { old: 0 }),
            latency_ns: 1,
        };
        // The first is queued before the cut, and published into it; the
        // second comes after the cut was found.
        port.complete(origin, done(1));
        assert_eq!(port.counters().completions_waiting, 1);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&r.path)
            .unwrap()
            .set_len(0)
            .unwrap();
        port.flush();
        assert_eq!(
            port.counters().completions_orphaned,
            1,
            "published into the cut"
        );
        port.complete(origin, done(2));
        assert!(taken(&mut port).is_empty());
        let c = port.counters();
        assert_eq!(
            (
                c.ring_cut,
                c.completions,
                c.completions_orphaned,
                c.completions_waiting
            ),
            (1, 0, 2, 0),
            "{c:?}"
        );
        drop(host);
    }

    #[test]
    fn each_bilateral_process_is_served_from_its_own_slot_and_generation() {
        let r = ring(HostMode::Bilateral);
        let mut port = HostPort::create(&r).unwrap();
        let mut a = HostQueue::attach(&r.path, 1).unwrap();
        let mut b = HostQueue::attach(&r.path, 1).unwrap();
        assert_ne!(a.slot(), b.slot());
        for id in 0..3 {
            a.submit(faa(id)).unwrap();
        }
        b.submit(faa(10)).unwrap();
        a.flush();
        b.flush();
        let mut got = taken(&mut port);
        got.sort();
        let ids: Vec<u64> = got.iter().map(|g| g.0).collect();
        assert_eq!(ids, [0, 1, 2, 10], "{got:?}");
        assert_eq!(port.counters().swaps, 2);
        // A third process finds both slots held, by live processes.
        match HostQueue::attach(&r.path, 1) {
            Err(oae_client::host::AttachError::SlotsHeld { holders, .. }) => {
                assert_eq!(holders, [std::process::id(); 2])
            }
            other => panic!("{:?}", other.err()),
        }
    }

    #[test]
    fn a_posted_receive_reaches_the_dataplane_and_its_message_comes_back_whole() {
        for mode in [HostMode::Fito, HostMode::Bilateral] {
            let r = ring(mode);
            let mut port = HostPort::create(&r).unwrap();
            let mut q = HostQueue::attach(&r.path, 10).unwrap();
            let post = |id, len| ReceivePost {
                id,
                from: Destination::Node(7),
                region: 3,
                offset: 64,
                len,
            };
            q.post_receive(post(1, 100)).unwrap();
            q.post_receive(post(2, 100)).unwrap();
            q.flush();
            let mut posted = Vec::new();
            port.take(64, |origin, request| match request {
                HostRequest::Receive(p) if p.id == 1 => {
                    posted.push((origin, p));
                    Ok(())
                }
                HostRequest::Receive(_) => Err(NotSubmitted::NoRoute(7)),
                other => panic!("{mode:?}: a receive came as verb {}", other.id()),
            });
            assert_eq!(posted.len(), 1, "{mode:?}");
            assert_eq!(posted[0].1, post(1, 100), "{mode:?}");
            let message = Message {
                imm: Some(0xfeed),
                data: Block::new(b"hello, receiver").unwrap(),
            };
            let filled = Received {
                id: 1,
                result: Ok(message),
            };
            port.complete_receive(posted[0].0, &filled);
            port.flush();
            let mut got = Vec::new();
            for _ in 0..10_000 {
                if let Some(r) = q.poll_received() {
                    got.push(r);
                }
                if got.len() == 2 {
                    break;
                }
                port.take(64, |_, _| Ok(()));
                port.flush();
            }
            assert_eq!(got.len(), 2, "{mode:?}: {got:?}");
            assert_eq!(q.outstanding(), 0, "{mode:?}");
            assert!(q.poll_completion().is_none(), "{mode:?}");
            let refused = got.iter().find(|r| r.id == 2).unwrap();
            assert!(
                matches!(refused.result, Err(NotSubmitted::NoRoute(_))),
                "{mode:?}: {refused:?}"
            );
            let message = got.iter().find(|r| r.id == 1).unwrap().result.unwrap();
            assert_eq!(message.imm, Some(0xfeed), "{mode:?}");
            assert_eq!(message.data.as_slice(), b"hello, receiver", "{mode:?}");
        }
    }

    #[test]
    fn a_receive_longer_than_the_ring_carries_is_refused_on_the_host() {
        let r = ring(HostMode::Fito);
        let _port = HostPort::create(&r).unwrap();
        let mut q = HostQueue::attach(&r.path, 10).unwrap();
        let post = ReceivePost {
            id: 9,
            from: Destination::FirstLink,
            region: 3,
            offset: 0,
            len: oae_client::host::codec::MAX_RECEIVE as u16 + 1,
        };
        q.post_receive(post).unwrap();
        let got = q.poll_received().expect("refused at once");
        assert!(
            matches!(got.result, Err(NotSubmitted::Invalid(why)) if why.contains("379")),
            "{got:?}"
        );
        assert_eq!(q.outstanding(), 0);
    }
}
