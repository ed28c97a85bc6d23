//! A host program's handle on a dataplane's host ring: the verbs API of
//! `embed::EmbeddedQueue` across the (emulated) PCIe boundary, the
//! same over both ring modes.
//!
//! Attaching claims the ring (FITO: one process per ring) or a free swap
//! slot (bilateral: one per process, as many processes as slots); a claim
//! held by a live process is refused with its pid, one left by a dead
//! process is taken over under a new generation, so nothing it left in
//! flight reaches the new holder.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use oae_swapring::bilateral::{HostSlot, Withdraw};
use oae_swapring::layout::{Mode, RING_VERB_REQUESTS, RING_VERB_RESPONSES};
use oae_swapring::owner::{self, Claim, ClaimRefused};
use oae_swapring::region::{Region, RegionError, Side};
use oae_swapring::ring::{RECORD_WORDS, Record};
use oae_swapring::verbs::{VerbRecord, VerbsHost};

use super::HostMode;
use super::codec::{
    MAX_VERB_RECORDS, Records, decode_completion, decode_received, encode_local, encode_receive,
    encode_submission, generation, is_received, posts_receive,
};
use crate::api::{
    AppError, Completion, LocalSubmission, NotSubmitted, ReceivePost, Received, Submission,
};

/// What a host process holds on a bilateral ring.
struct Bilateral {
    slot: usize,
    batch: usize,
    /// Verbs' records not yet offered, and how many verbs they are.
    pending: Vec<Record>,
    pending_verbs: usize,
    /// The batch out on the slot: its records (to re-offer if withdrawn)
    /// and how many verbs; `None` while the slot is the host's.
    offered: Option<usize>,
    offered_records: Vec<Record>,
    answer: Vec<Record>,
}

enum End {
    Fito,
    Bilateral(Bilateral),
}

/// What [`HostQueue::poll_answer`] gives.
// A receive's outcome carries its message, a completion does not: both
// are taken by value once each and never stored in bulk.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug)]
pub enum HostAnswer {
    Completion(Completion),
    Received(Received),
}

/// Counters of a host queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct HostQueueCounters {
    /// Exchanges taken (bilateral) and offers withdrawn to add verbs.
    pub exchanges: u64,
    pub withdrawn: u64,
    /// Completions for an earlier holder of the ring or slot, dropped.
    pub foreign_completions: u64,
    /// Completion records that did not decode (answered by id).
    pub undecodable: u64,
    /// Swaps whose answer was tagged for another offer (a corrupt region).
    pub corrupt_exchanges: u64,
    /// Records a dead earlier holder of the slot left in it, voided when
    /// this process claimed it: an offered batch withdrawn (the dataplane
    /// took none of it) or an answer discarded (its completions were the
    /// dead holder's).
    pub inherited_records: u64,
}

/// Why a host program could not attach to a host ring.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error(transparent)]
    Region(#[from] RegionError),
    #[error("{}: rings of {capacity} records are too small for a host ring", path.display())]
    RingTooSmall { path: PathBuf, capacity: u64 },
    #[error(
        "{}: the FITO host ring is held by process {holder}; it serves one host process \
         (single-producer rings): give each process its own ring, or run the ring in \
         mode = \"bilateral\"",
        path.display()
    )]
    RingHeld { path: PathBuf, holder: u32 },
    #[error(
        "{}: every one of its {} slots is held by a live process ({}); raise [host] processes \
         in the dataplane's configuration",
        path.display(),
        holders.len(),
        holders.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
    )]
    SlotsHeld { path: PathBuf, holders: Vec<u32> },
}

/// A host program's handle on a dataplane's host ring.
pub struct HostQueue {
    region: Region,
    claim: Claim,
    end: End,
    /// Verbs the dataplane took (or may have) and has not completed.
    in_flight: usize,
    /// Most verbs in flight: the ring's capacity.
    capacity: usize,
    /// Completions made on this side or taken from exchanges, in order.
    ready: VecDeque<Completion>,
    /// Posted receives' outcomes (messages, or why not), in order.
    received: VecDeque<Received>,
    counters: HostQueueCounters,
}

impl HostQueue {
    /// Attaches to the ring a dataplane created at `path`, waiting up to
    /// `attempts` short polls for it to appear. A file that is not a host
    /// ring of this version is refused with what is wrong; a ring (FITO) or
    /// every slot (bilateral) held by live processes, with their pids.
    pub fn attach(path: impl AsRef<Path>, attempts: u32) -> Result<HostQueue, AttachError> {
        let path = path.as_ref();
        let region = Region::open_when_ready(path, attempts)?;
        let geometry = region.geometry();
        if geometry.ring_capacity < MAX_VERB_RECORDS as u64 {
            return Err(AttachError::RingTooSmall {
                path: path.to_path_buf(),
                capacity: geometry.ring_capacity,
            });
        }
        let pid = std::process::id();
        let mut counters = HostQueueCounters::default();
        let (claim, end) = match region.mode() {
            Mode::Fito => {
                let claim = owner::claim(region.ring_owner_word(), pid, owner::process_alive)
                    .map_err(|ClaimRefused::Held { pid: holder }| AttachError::RingHeld {
                        path: path.to_path_buf(),
                        holder,
                    })?;
                (claim, End::Fito)
            }
            Mode::Bilateral => {
                let (claim, end, inherited) = claim_slot(&region, path, pid)?;
                counters.inherited_records = inherited;
                (claim, end)
            }
        };
        region.attach_as(Side::Host);
        Ok(HostQueue {
            capacity: geometry.ring_capacity as usize,
            region,
            claim,
            end,
            in_flight: 0,
            ready: VecDeque::new(),
            received: VecDeque::new(),
            counters,
        })
    }

    pub fn mode(&self) -> HostMode {
        match self.end {
            End::Fito => HostMode::Fito,
            End::Bilateral(_) => HostMode::Bilateral,
        }
    }

    /// The slot this process holds on a bilateral ring.
    pub fn slot(&self) -> Option<usize> {
        match &self.end {
            End::Fito => None,
            End::Bilateral(b) => Some(b.slot),
        }
    }

    pub fn counters(&self) -> HostQueueCounters {
        self.counters
    }

    /// Verbs submitted and not yet completed.
    pub fn outstanding(&self) -> usize {
        self.in_flight
            + match &self.end {
                End::Fito => 0,
                End::Bilateral(b) => b.pending_verbs + b.offered.unwrap_or(0),
            }
    }

    fn verbs_host(&self) -> VerbsHost<'_> {
        VerbsHost::new(
            self.region.ring(RING_VERB_REQUESTS).producer(),
            self.region.ring(RING_VERB_RESPONSES).consumer(),
            self.region.config().cost,
            self.region.side(Side::Host),
        )
    }

    /// Submits a verb; gives it back when as many verbs as the ring holds
    /// are outstanding, or the ring (FITO) or the next batch (bilateral)
    /// has no room: poll completions, then retry. A verb the host ring
    /// cannot carry completes at once with the reason.
    ///
    /// A FITO ring publishes the verb at once. A bilateral ring gathers
    /// verbs into the next batch, offered at the next
    /// [`HostQueue::poll_completion`] or [`HostQueue::flush`] (or when the
    /// batch is full), so verbs submitted together cross in one exchange.
    // As `EmbeddedQueue::submit`: the verb comes back by value for a retry;
    // boxing it would allocate once per submission.
    #[allow(clippy::result_large_err)]
    pub fn submit(&mut self, submission: Submission) -> Result<(), Submission> {
        let records = match encode_submission(&submission, self.claim.generation) {
            Ok(r) => r,
            Err(why) => {
                self.ready.push_back(Completion {
                    id: submission.id,
                    result: Err(AppError::NotSubmitted(NotSubmitted::Invalid(why))),
                    latency_ns: 0,
                });
                return Ok(());
            }
        };
        if self.publish(&records) {
            Ok(())
        } else {
            Err(submission)
        }
    }

    /// Submits a WRITE or SEND whose bytes the dataplane takes from a block
    /// of its memory (which this process maps, [`super::region_file`]);
    /// given back as [`HostQueue::submit`] gives a verb back.
    pub fn submit_local(&mut self, s: LocalSubmission) -> Result<(), LocalSubmission> {
        let records = encode_local(&s, self.claim.generation);
        if self.publish(&records) {
            Ok(())
        } else {
            Err(s)
        }
    }

    /// Posts a receive: the next message on its link lands in its block
    /// of the dataplane's memory and comes back, bytes and all, from
    /// [`HostQueue::poll_received`]. It counts as outstanding until then;
    /// given back as [`HostQueue::submit`] gives a verb back. One the ring
    /// cannot carry (longer than [`super::codec::MAX_RECEIVE`]) comes back
    /// at once with the reason.
    pub fn post_receive(&mut self, post: ReceivePost) -> Result<(), ReceivePost> {
        let records = match encode_receive(&post, self.claim.generation) {
            Ok(r) => r,
            Err(why) => {
                self.received.push_back(Received {
                    id: post.id,
                    result: Err(NotSubmitted::Invalid(why)),
                });
                return Ok(());
            }
        };
        if self.publish(&records) {
            Ok(())
        } else {
            Err(post)
        }
    }

    /// Puts one request's records on the ring (FITO) or in the next batch
    /// (bilateral); false if there is no room.
    fn publish(&mut self, records: &Records) -> bool {
        if self.outstanding() >= self.capacity {
            return false;
        }
        match &mut self.end {
            End::Fito => {
                let mut host = self.verbs_host();
                if host.submit_all(records.as_slice()).is_err() {
                    return false;
                }
                host.flush();
                self.in_flight += 1;
            }
            End::Bilateral(b) => {
                if b.pending.len() + records.as_slice().len() > b.batch {
                    self.exchange();
                }
                let End::Bilateral(b) = &mut self.end else {
                    unreachable!("the mode does not change");
                };
                if b.pending.len() + records.as_slice().len() > b.batch {
                    return false;
                }
                b.pending
                    .extend(records.as_slice().iter().map(VerbRecord::encode));
                b.pending_verbs += 1;
            }
        }
        true
    }

    /// Offers the verbs gathered for a bilateral ring's next batch (if the
    /// slot is free; otherwise they go with the exchange after the one out).
    pub fn flush(&mut self) {
        self.exchange();
    }

    /// The next completion, if one is there. A record that does not decode
    /// (a dataplane of another version) completes its id with the reason.
    pub fn poll_completion(&mut self) -> Option<Completion> {
        if self.ready.is_empty() || self.has_pending() {
            self.poll_ring();
        }
        self.ready.pop_front()
    }

    /// The next posted receive's outcome, if one is there: its message, or
    /// why it was refused.
    pub fn poll_received(&mut self) -> Option<Received> {
        if self.received.is_empty() || self.has_pending() {
            self.poll_ring();
        }
        self.received.pop_front()
    }

    /// The next answer of either kind, oldest kind first: a verb's
    /// completion, else a receive's outcome. Moves the ring along once,
    /// only when neither is waiting here (a caller that takes both kinds
    /// costs one poll, not one per kind).
    pub fn poll_answer(&mut self) -> Option<HostAnswer> {
        if (self.ready.is_empty() && self.received.is_empty()) || self.has_pending() {
            self.poll_ring();
        }
        match self.ready.pop_front() {
            Some(c) => Some(HostAnswer::Completion(c)),
            None => self.received.pop_front().map(HostAnswer::Received),
        }
    }

    fn has_pending(&self) -> bool {
        matches!(&self.end, End::Bilateral(b) if b.pending_verbs > 0)
    }

    fn poll_ring(&mut self) {
        match &self.end {
            End::Fito => self.poll_fito(),
            End::Bilateral(_) => self.exchange(),
        }
    }

    fn poll_fito(&mut self) {
        let mut host = VerbsHost::new(
            self.region.ring(RING_VERB_REQUESTS).producer(),
            self.region.ring(RING_VERB_RESPONSES).consumer(),
            self.region.config().cost,
            self.region.side(Side::Host),
        );
        let mut message = arrayvec::ArrayVec::<VerbRecord, MAX_VERB_RECORDS>::new();
        while let Some(first) = host.poll_completion() {
            message.clear();
            let Ok(first) = first else {
                self.counters.undecodable += 1;
                continue;
            };
            message.push(first);
            // A message is published whole: its other records are there.
            for _ in 1..super::codec::message_records(&first).unwrap_or(1) {
                match host.poll_completion() {
                    Some(Ok(r)) => message.push(r),
                    _ => break,
                }
            }
            deliver(
                &message,
                self.claim.generation,
                &mut self.in_flight,
                (&mut self.ready, &mut self.received),
                &mut self.counters,
            );
            if !self.ready.is_empty() || !self.received.is_empty() {
                break;
            }
        }
        host.release();
    }

    /// Moves the bilateral exchange along: takes a swap, withdraws a
    /// verb-less offer to put verbs in it, offers what is pending (or a
    /// verb-less batch that waits for completions).
    fn exchange(&mut self) {
        let Self {
            region,
            claim,
            end,
            in_flight,
            ready,
            received,
            counters,
            ..
        } = self;
        let End::Bilateral(b) = end else {
            return;
        };
        region.side(Side::Host).bump();
        let cost = region.config().cost;
        let mut slot = HostSlot::new(region.slot(b.slot), cost);
        // An offer without verbs only waits for completions: take it back
        // to put the pending verbs in it.
        if b.offered == Some(0) && b.pending_verbs > 0 {
            match slot.withdraw() {
                Withdraw::Withdrawn => {
                    counters.withdrawn += 1;
                    b.offered = None;
                }
                Withdraw::AlreadySwapped | Withdraw::NotOffered => {}
            }
        }
        if let Some(verbs) = b.offered {
            match slot.take(&mut b.answer) {
                Ok(Some(x)) => {
                    counters.exchanges += 1;
                    // The batch's verbs are the dataplane's from now on.
                    *in_flight += verbs;
                    b.offered = None;
                    take_answer(
                        &b.answer[..x.count],
                        claim.generation,
                        in_flight,
                        (ready, received),
                        counters,
                    );
                }
                Ok(None) => return,
                Err(_) => {
                    // A corrupt region: the exchange cannot be trusted
                    // either way; it stays counted and untaken.
                    counters.corrupt_exchanges += 1;
                    return;
                }
            }
        }
        if b.pending_verbs == 0 && *in_flight == 0 {
            return;
        }
        b.offered_records.clear();
        b.offered_records.append(&mut b.pending);
        match slot.offer_tagged(u64::from(claim.generation), &b.offered_records) {
            Ok(_) => {
                b.offered = Some(b.pending_verbs);
                b.pending_verbs = 0;
            }
            Err(_) => {
                // The slot is not ours to offer on (taken over?): keep the
                // verbs pending.
                b.pending.append(&mut b.offered_records);
            }
        }
    }

    /// Takes back every verb the dataplane has not taken: on a bilateral
    /// ring, the batch not yet swapped (if the withdrawal wins) and the
    /// verbs not yet offered, each completing as [`NotSubmitted::Recalled`]
    /// with no effect; returns how many. A FITO ring cannot: a published
    /// request may be read at any time, so its verbs stay in doubt until
    /// they complete (0).
    ///
    /// For a program that gave up on its dataplane (its interaction
    /// counter stopped), this separates the verbs that certainly had no
    /// effect from those the dataplane took.
    pub fn recall(&mut self) -> usize {
        let Self {
            region,
            end,
            ready,
            received,
            ..
        } = self;
        let End::Bilateral(b) = end else {
            return 0;
        };
        let mut slot = HostSlot::new(region.slot(b.slot), region.config().cost);
        if b.offered.is_some() && slot.withdraw() == Withdraw::Withdrawn {
            b.offered = None;
            b.pending.splice(0..0, b.offered_records.drain(..));
        }
        let mut recalled = 0;
        let mut at = 0;
        while at < b.pending.len() {
            let Some(first) = VerbRecord::decode(&b.pending[at]) else {
                break;
            };
            if posts_receive(&first) {
                received.push_back(Received {
                    id: first.id,
                    result: Err(NotSubmitted::Recalled),
                });
            } else {
                ready.push_back(Completion {
                    id: first.id,
                    result: Err(AppError::NotSubmitted(NotSubmitted::Recalled)),
                    latency_ns: 0,
                });
            }
            recalled += 1;
            at += super::codec::message_records(&first).unwrap_or(1);
        }
        b.pending.clear();
        b.pending_verbs = 0;
        recalled
    }

    /// The dataplane's liveness counter: it moves while its polling core
    /// serves the ring.
    pub fn dataplane_interactions(&self) -> u64 {
        self.region.side(Side::Ipu).interactions()
    }
}

impl Drop for HostQueue {
    /// Takes back a batch not yet taken (so the dataplane never runs verbs
    /// of a process that is gone) and gives the claim back.
    fn drop(&mut self) {
        let word = match &self.end {
            End::Fito => self.region.ring_owner_word(),
            End::Bilateral(b) => {
                let mut slot = HostSlot::new(self.region.slot(b.slot), self.region.config().cost);
                if slot.withdraw() == Withdraw::AlreadySwapped {
                    let mut answer = vec![[0; RECORD_WORDS]; b.batch];
                    let _ = slot.take(&mut answer);
                }
                self.region.slot(b.slot).owner_word()
            }
        };
        owner::release(word, self.claim);
    }
}

/// Claims the first slot no live process holds.
fn claim_slot(region: &Region, path: &Path, pid: u32) -> Result<(Claim, End, u64), AttachError> {
    let mut holders = Vec::new();
    for i in 0..region.slot_count() {
        let view = region.slot(i);
        match owner::claim(view.owner_word(), pid, owner::process_alive) {
            Ok(claim) => {
                let batch = view.batch();
                // A batch a dead holder left offered is void: withdraw it
                // (the dataplane took none of it); one it left swapped is
                // discarded (its completions were the dead holder's).
                let mut slot = HostSlot::new(view, region.config().cost);
                let offered = slot.offered_records();
                let inherited = match slot.withdraw() {
                    Withdraw::Withdrawn => offered,
                    Withdraw::AlreadySwapped => slot
                        .take(&mut vec![[0; RECORD_WORDS]; batch])
                        .ok()
                        .flatten()
                        .map_or(0, |x| x.count as u64),
                    Withdraw::NotOffered => 0,
                };
                let end = End::Bilateral(Bilateral {
                    slot: i,
                    batch,
                    pending: Vec::with_capacity(batch),
                    pending_verbs: 0,
                    offered: None,
                    offered_records: Vec::with_capacity(batch),
                    answer: vec![[0; RECORD_WORDS]; batch],
                });
                return Ok((claim, end, inherited));
            }
            Err(ClaimRefused::Held { pid }) => holders.push(pid),
        }
    }
    Err(AttachError::SlotsHeld {
        path: path.to_path_buf(),
        holders,
    })
}

/// Decodes an exchange's completions (whole messages, in order).
fn take_answer(
    answer: &[Record],
    generation: u32,
    in_flight: &mut usize,
    ready: Ready<'_>,
    counters: &mut HostQueueCounters,
) {
    let mut at = 0;
    let mut message = arrayvec::ArrayVec::<VerbRecord, MAX_VERB_RECORDS>::new();
    while at < answer.len() {
        message.clear();
        let len = VerbRecord::decode(&answer[at])
            .as_ref()
            .and_then(super::codec::message_records)
            .unwrap_or(1)
            .min(answer.len() - at);
        message.extend(answer[at..at + len].iter().filter_map(VerbRecord::decode));
        deliver(
            &message,
            generation,
            in_flight,
            (&mut *ready.0, &mut *ready.1),
            counters,
        );
        at += len;
    }
}

/// Where decoded answers go: verbs' completions, receives' outcomes.
type Ready<'a> = (&'a mut VecDeque<Completion>, &'a mut VecDeque<Received>);

/// One completion message to the caller, unless it was for an earlier
/// holder; one that does not decode completes its id with the reason.
fn deliver(
    message: &[VerbRecord],
    claim_generation: u32,
    in_flight: &mut usize,
    (ready, received): Ready<'_>,
    counters: &mut HostQueueCounters,
) {
    let Some(first) = message.first() else {
        counters.undecodable += 1;
        return;
    };
    if generation(first) != claim_generation as u16 {
        counters.foreign_completions += 1;
        return;
    }
    *in_flight = in_flight.saturating_sub(1);
    if is_received(first) {
        let outcome = decode_received(message).unwrap_or_else(|| {
            counters.undecodable += 1;
            Received {
                id: first.id,
                result: Err(NotSubmitted::Refused),
            }
        });
        received.push_back(outcome);
        return;
    }
    ready.push_back(match decode_completion(message) {
        Some(c) => c,
        None => {
            counters.undecodable += 1;
            Completion {
                id: first.id,
                result: Err(AppError::NotSubmitted(NotSubmitted::Refused)),
                latency_ns: 0,
            }
        }
    });
}
