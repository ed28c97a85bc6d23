//! Bilateral swap slots: a batch of the host's records and a batch of the
//! IPU's records change hands in one atomic step, or not at all.
//!
//! Each slot holds a control word, the host's half (the batch offered) and
//! the IPU's half (the batch swapped back). Each half is a header line
//! (record count, and a tag) followed by up to `batch` records. The control
//! word packs `{epoch, alternating bit, phase}`:
//!
//! * `Idle` / `Swapped`: the host owns the slot. It may write its half.
//! * `Offered(epoch)`: the host has written its half and offers it. The IPU
//!   reads it, computes its answer, writes its half tagged with `epoch`, then
//!   tries one compare-and-swap `Offered(epoch, a) -> Swapped(epoch, !a)`.
//! * The host may change its mind only by withdrawing the offer with its own
//!   compare-and-swap `Offered(epoch, a) -> Idle(epoch+1, a)`.
//!
//! Exactly one of the two compare-and-swaps wins. If the IPU wins, both
//! batches are committed together, every record of each: the answer was
//! computed against exactly the batch it was swapped with, and the host
//! applies it before any later change of its own. If the host wins, no
//! record of the IPU's batch is ever visible and the host re-offers from the
//! same alternating bit with a new `epoch`. `epoch` changes on every host
//! transition, so a compare-and-swap prepared against an older offer can
//! never succeed (no ABA), and a stale answer cannot be committed at all.
//! The alternating bit flips once per committed batch, however many records
//! it carried.

use crate::cost::CostModel;
use crate::ring::{RECORD_WORDS, Record};
use crate::sync::{AtomicU64, Ordering};

/// Most records a slot's half may carry.
pub const MAX_SLOT_BATCH: u64 = 64;
/// The control word's cache line: the word itself, then the owner word.
const CTL_LINE: usize = 8;
const CTL: usize = 0;
const OWNER: usize = 1;
/// Offsets inside a half: its header line, then the records.
const COUNT: usize = 0;
const TAG: usize = 1;
const RECORDS: usize = RECORD_WORDS;

/// Words of one half: a header line and `batch` records.
pub const fn half_words(batch: usize) -> usize {
    RECORD_WORDS * (1 + batch)
}

/// Words of a slot whose halves carry `batch` records each.
pub const fn slot_words(batch: usize) -> usize {
    CTL_LINE + 2 * half_words(batch)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Idle = 0,
    Offered = 1,
    Swapped = 2,
}

/// A decoded control word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ctl {
    pub epoch: u64,
    pub alt: bool,
    pub phase: Phase,
}

impl Ctl {
    pub fn encode(self) -> u64 {
        (self.epoch << 3) | (u64::from(self.alt) << 2) | self.phase as u64
    }

    /// `None` for a word no protocol step writes (phase 3).
    pub fn decode(word: u64) -> Option<Ctl> {
        let phase = match word & 3 {
            0 => Phase::Idle,
            1 => Phase::Offered,
            2 => Phase::Swapped,
            _ => return None,
        };
        Some(Ctl {
            epoch: word >> 3,
            alt: word & 4 != 0,
            phase,
        })
    }
}

/// One slot's words.
#[derive(Clone, Copy)]
pub struct SlotView<'a> {
    words: &'a [AtomicU64],
    batch: usize,
}

impl<'a> SlotView<'a> {
    /// `words` must be exactly [`slot_words`]`(batch)` long.
    pub fn new(words: &'a [AtomicU64], batch: usize) -> Self {
        assert!(batch >= 1, "a slot carries at least one record each way");
        assert_eq!(words.len(), slot_words(batch), "slot words for its batch");
        SlotView { words, batch }
    }

    /// Records each half may carry.
    pub fn batch(&self) -> usize {
        self.batch
    }

    pub fn ctl(&self) -> Ctl {
        let word = self.words[CTL].load(Ordering::Acquire);
        Ctl::decode(word).unwrap_or(Ctl {
            epoch: word >> 3,
            alt: false,
            phase: Phase::Idle,
        })
    }

    fn ctl_word(&self) -> &AtomicU64 {
        &self.words[CTL]
    }

    /// The word a host process claims the slot with ([`crate::owner`]).
    pub fn owner_word(&self) -> &'a AtomicU64 {
        &self.words[OWNER]
    }

    fn state_half(&self) -> usize {
        CTL_LINE
    }

    fn answer_half(&self) -> usize {
        CTL_LINE + half_words(self.batch)
    }

    fn header(&self, half: usize) -> (u64, u64) {
        (
            self.words[half + COUNT].load(Ordering::Relaxed),
            self.words[half + TAG].load(Ordering::Relaxed),
        )
    }

    fn read_records(&self, half: usize, out: &mut [Record]) {
        for (i, record) in out.iter_mut().enumerate() {
            let at = half + RECORDS + i * RECORD_WORDS;
            for (word, slot) in record.iter_mut().zip(&self.words[at..at + RECORD_WORDS]) {
                *word = slot.load(Ordering::Relaxed);
            }
        }
    }

    fn write_half(&self, half: usize, tag: u64, records: &[Record]) {
        self.words[half + COUNT].store(records.len() as u64, Ordering::Relaxed);
        self.words[half + TAG].store(tag, Ordering::Relaxed);
        for (i, record) in records.iter().enumerate() {
            let at = half + RECORDS + i * RECORD_WORDS;
            for (slot, word) in self.words[at..at + RECORD_WORDS].iter().zip(record) {
                slot.store(*word, Ordering::Relaxed);
            }
        }
    }

    /// Checks the slot as a crash survivor or a test would see it.
    pub fn inspect(&self) -> SlotReport {
        let raw = self.words[CTL].load(Ordering::Acquire);
        let Some(ctl) = Ctl::decode(raw) else {
            return SlotReport::Corrupt { raw };
        };
        if ctl.phase == Phase::Swapped {
            let (count, tag) = self.header(self.answer_half());
            if tag != ctl.epoch || count > self.batch as u64 {
                return SlotReport::HalfApplied {
                    ctl,
                    answer_tag: tag,
                };
            }
        }
        SlotReport::Consistent(ctl)
    }
}

/// What [`SlotView::inspect`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotReport {
    Consistent(Ctl),
    /// Swapped, but the answer visible was made for another offer (or
    /// claims more records than the slot holds).
    HalfApplied {
        ctl: Ctl,
        answer_tag: u64,
    },
    /// A control word no protocol step produces.
    Corrupt {
        raw: u64,
    },
}

/// Why the host may not offer on a slot now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OfferRefused {
    #[error("slot is offered to the IPU; withdraw or wait for the swap first")]
    Offered,
    /// Offering over it would discard a committed exchange.
    #[error("slot holds a swapped answer not yet taken; take it first")]
    Untaken,
    #[error("a batch of {records} records does not fit a slot of {batch}")]
    TooMany { records: usize, batch: usize },
}

/// Outcome of [`HostSlot::withdraw`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Withdraw {
    /// The offer is void; no answer was or will be committed against it.
    Withdrawn,
    /// The IPU's swap won: the answer must be taken and applied first.
    AlreadySwapped,
    /// Nothing was offered.
    NotOffered,
}

/// A committed exchange, as the host sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exchange {
    /// The offer the answer was made against.
    pub epoch: u64,
    /// The alternating bit after the swap.
    pub alt: bool,
    /// Records in the answer.
    pub count: usize,
}

/// A swap that shows an answer for another offer: impossible unless the
/// region is corrupt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("slot swapped at epoch {epoch} but its answer is tagged {tag} with {count} records")]
pub struct HalfApplied {
    pub epoch: u64,
    pub tag: u64,
    pub count: u64,
}

/// The host's handle on one slot. The slot (control word and both halves)
/// is in host memory; the IPU reaches it with PCIe AtomicOps and DMA.
pub struct HostSlot<'a> {
    slot: SlotView<'a>,
    cost: CostModel,
}

impl<'a> HostSlot<'a> {
    pub fn new(slot: SlotView<'a>, cost: CostModel) -> Self {
        HostSlot { slot, cost }
    }

    /// Writes `records` into the host half and offers them for a swap;
    /// returns the offer's `epoch`. The IPU learns of it from a posted write
    /// (it polls its own copy), so the host pays one posted write per batch.
    pub fn offer(&mut self, records: &[Record]) -> Result<u64, OfferRefused> {
        self.offer_tagged(0, records)
    }

    /// As [`HostSlot::offer`], with a tag word the IPU reads with the batch
    /// (the host ring puts its owner's generation there).
    pub fn offer_tagged(&mut self, tag: u64, records: &[Record]) -> Result<u64, OfferRefused> {
        if records.len() > self.slot.batch {
            return Err(OfferRefused::TooMany {
                records: records.len(),
                batch: self.slot.batch,
            });
        }
        let ctl = self.slot.ctl();
        match ctl.phase {
            Phase::Idle => {}
            Phase::Offered => return Err(OfferRefused::Offered),
            Phase::Swapped => return Err(OfferRefused::Untaken),
        }
        self.slot.write_half(self.slot.state_half(), tag, records);
        let epoch = ctl.epoch + 1;
        self.slot.ctl_word().store(
            Ctl {
                epoch,
                alt: ctl.alt,
                phase: Phase::Offered,
            }
            .encode(),
            Ordering::Release,
        );
        self.cost.posted_write();
        Ok(epoch)
    }

    /// Takes the offer back, unless the IPU's swap already won.
    pub fn withdraw(&mut self) -> Withdraw {
        let ctl = self.slot.ctl();
        match ctl.phase {
            Phase::Idle => return Withdraw::NotOffered,
            Phase::Swapped => return Withdraw::AlreadySwapped,
            Phase::Offered => {}
        }
        let void = Ctl {
            epoch: ctl.epoch + 1,
            alt: ctl.alt,
            phase: Phase::Idle,
        };
        match self.slot.ctl_word().compare_exchange(
            ctl.encode(),
            void.encode(),
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => {
                self.cost.posted_write();
                Withdraw::Withdrawn
            }
            // Only the IPU's swap changes an offered slot besides us.
            Err(_) => Withdraw::AlreadySwapped,
        }
    }

    /// Whether an offer is out (neither swapped nor withdrawn yet).
    pub fn offered(&self) -> bool {
        self.slot.ctl().phase == Phase::Offered
    }

    /// Records in the host half: the batch offered last (the count as
    /// written, at most a whole batch).
    pub fn offered_records(&self) -> u64 {
        let (count, _) = self.slot.header(self.slot.state_half());
        count.min(self.slot.batch as u64)
    }

    /// If the IPU swapped, copies its batch into `out` (which must hold a
    /// whole batch), hands the slot back to the host (phase `Idle`) and
    /// returns the exchange.
    pub fn take(&mut self, out: &mut [Record]) -> Result<Option<Exchange>, HalfApplied> {
        assert!(out.len() >= self.slot.batch, "room for a whole batch");
        let ctl = self.slot.ctl();
        if ctl.phase != Phase::Swapped {
            return Ok(None);
        }
        let half = self.slot.answer_half();
        let (count, tag) = self.slot.header(half);
        if tag != ctl.epoch || count > self.slot.batch as u64 {
            return Err(HalfApplied {
                epoch: ctl.epoch,
                tag,
                count,
            });
        }
        let count = count as usize;
        self.slot.read_records(half, &mut out[..count]);
        self.slot.ctl_word().store(
            Ctl {
                phase: Phase::Idle,
                ..ctl
            }
            .encode(),
            Ordering::Release,
        );
        Ok(Some(Exchange {
            epoch: ctl.epoch,
            alt: ctl.alt,
            count,
        }))
    }

    pub fn view(&self) -> SlotView<'a> {
        self.slot
    }
}

/// Outcome of [`IpuSlot::swap`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwapOutcome {
    NothingOffered,
    /// Committed: the host will see this answer against offer `epoch`.
    Swapped {
        epoch: u64,
    },
    /// The host withdrew first; the answer was never visible.
    Lost,
}

/// An offer as the IPU read it.
#[derive(Debug, PartialEq, Eq)]
pub struct OfferRead<'s> {
    pub epoch: u64,
    pub tag: u64,
    pub records: &'s [Record],
}

/// The host's half claims more records than the slot holds: it cannot have
/// been written by [`HostSlot::offer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("offer at epoch {epoch} claims {count} records; the slot holds {batch}")]
pub struct BadOffer {
    pub epoch: u64,
    pub count: u64,
    pub batch: usize,
}

/// The IPU's handle on one slot. One IPU thread per slot.
pub struct IpuSlot<'a> {
    slot: SlotView<'a>,
    cost: CostModel,
    /// The control word of the offer last read: the swap must find it
    /// unchanged.
    read: Option<Ctl>,
    /// Copies of the offer and of the answer, sized once.
    offer: Vec<Record>,
    answer: Vec<Record>,
}

impl<'a> IpuSlot<'a> {
    pub fn new(slot: SlotView<'a>, cost: CostModel) -> Self {
        let mut ipu = Self::with_scratch(slot, cost, Vec::new());
        ipu.answer = vec![[0; RECORD_WORDS]; slot.batch];
        ipu
    }

    /// A handle that copies offers into `scratch` (grown to the batch if it
    /// is shorter): a caller that makes a handle per poll hands the buffer
    /// from one to the next ([`IpuSlot::into_scratch`]) and allocates
    /// nothing. Only [`IpuSlot::try_swap`] needs more, once.
    pub fn with_scratch(slot: SlotView<'a>, cost: CostModel, mut scratch: Vec<Record>) -> Self {
        if scratch.len() < slot.batch {
            scratch.resize(slot.batch, [0; RECORD_WORDS]);
        }
        IpuSlot {
            offer: scratch,
            answer: Vec::new(),
            slot,
            cost,
            read: None,
        }
    }

    /// The offer buffer, for the next handle.
    pub fn into_scratch(self) -> Vec<Record> {
        self.offer
    }

    /// Whether an offer is waiting (read from the IPU's own copy: free).
    pub fn offered(&self) -> bool {
        self.slot.ctl().phase == Phase::Offered
    }

    /// Reads the offer waiting, if any (from the IPU's own copy of the
    /// host's posted writes: free). Nothing is committed until
    /// [`IpuSlot::swap`], which fails if the host withdrew meanwhile.
    pub fn read_offer(&mut self) -> Result<Option<OfferRead<'_>>, BadOffer> {
        let ctl = self.slot.ctl();
        self.read = None;
        if ctl.phase != Phase::Offered {
            return Ok(None);
        }
        let half = self.slot.state_half();
        let (count, tag) = self.slot.header(half);
        if count > self.slot.batch as u64 {
            return Err(BadOffer {
                epoch: ctl.epoch,
                count,
                batch: self.slot.batch,
            });
        }
        let count = count as usize;
        self.slot.read_records(half, &mut self.offer[..count]);
        self.read = Some(ctl);
        Ok(Some(OfferRead {
            epoch: ctl.epoch,
            tag,
            records: &self.offer[..count],
        }))
    }

    /// Swaps `answer` in against the offer [`IpuSlot::read_offer`] last
    /// returned, with one PCIe AtomicOp compare-and-swap.
    pub fn swap(&mut self, answer: &[Record]) -> SwapOutcome {
        let Some(ctl) = self.read.take() else {
            return SwapOutcome::NothingOffered;
        };
        assert!(answer.len() <= self.slot.batch, "an answer fits the slot");
        // Written before the swap, visible only through it: if the swap
        // loses, the host never reads this half.
        self.slot
            .write_half(self.slot.answer_half(), ctl.epoch, answer);
        let swapped = Ctl {
            epoch: ctl.epoch,
            alt: !ctl.alt,
            phase: Phase::Swapped,
        };
        self.cost.atomic();
        match self.slot.ctl_word().compare_exchange(
            ctl.encode(),
            swapped.encode(),
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => SwapOutcome::Swapped { epoch: ctl.epoch },
            Err(_) => SwapOutcome::Lost,
        }
    }

    /// If the host offers a batch, computes `decide(offer, answer)` (which
    /// returns how many answer records it wrote) and swaps the answer in.
    /// An offer that claims more records than the slot holds is left
    /// unanswered.
    pub fn try_swap(
        &mut self,
        decide: impl FnOnce(&[Record], &mut [Record]) -> usize,
    ) -> SwapOutcome {
        if self.answer.len() < self.slot.batch {
            self.answer.resize(self.slot.batch, [0; RECORD_WORDS]);
        }
        let mut answer = std::mem::take(&mut self.answer);
        let n = match self.read_offer() {
            Ok(Some(offer)) => decide(offer.records, &mut answer).min(answer.len()),
            Ok(None) | Err(_) => {
                self.answer = answer;
                return SwapOutcome::NothingOffered;
            }
        };
        let outcome = self.swap(&answer[..n]);
        self.answer = answer;
        outcome
    }

    pub fn view(&self) -> SlotView<'a> {
        self.slot
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn words(batch: usize) -> Vec<AtomicU64> {
        (0..slot_words(batch)).map(|_| AtomicU64::new(0)).collect()
    }

    fn plus_one(offer: &[Record], answer: &mut [Record]) -> usize {
        for (a, o) in answer.iter_mut().zip(offer) {
            *a = o.map(|w| w + 1);
        }
        offer.len()
    }

    #[test]
    fn an_untaken_exchange_cannot_be_offered_over() {
        let w = words(1);
        let mut host = HostSlot::new(SlotView::new(&w, 1), CostModel::zero());
        let mut ipu = IpuSlot::new(SlotView::new(&w, 1), CostModel::zero());
        assert_eq!(ipu.try_swap(plus_one), SwapOutcome::NothingOffered);
        let epoch = host.offer(&[[5; RECORD_WORDS]]).unwrap();
        assert_eq!(host.offer(&[[6; RECORD_WORDS]]), Err(OfferRefused::Offered));
        assert_eq!(ipu.try_swap(plus_one), SwapOutcome::Swapped { epoch });
        assert_eq!(host.offer(&[[6; RECORD_WORDS]]), Err(OfferRefused::Untaken));
        assert_eq!(host.withdraw(), Withdraw::AlreadySwapped);
        let mut d = [[0; RECORD_WORDS]; 1];
        assert_eq!(
            host.take(&mut d),
            Ok(Some(Exchange {
                epoch,
                alt: true,
                count: 1
            }))
        );
        assert_eq!(d[0], [6; RECORD_WORDS]);
        assert_eq!(host.take(&mut d), Ok(None));
        assert_eq!(host.withdraw(), Withdraw::NotOffered);
    }

    #[test]
    fn a_withdrawn_offer_voids_the_swap_prepared_against_it() {
        let w = words(1);
        let mut host = HostSlot::new(SlotView::new(&w, 1), CostModel::zero());
        let mut ipu = IpuSlot::new(SlotView::new(&w, 1), CostModel::zero());
        host.offer(&[[1; RECORD_WORDS]]).unwrap();
        // The IPU reads the offer, then the host withdraws before the CAS.
        let outcome = ipu.try_swap(|o, a| {
            assert_eq!(host.withdraw(), Withdraw::Withdrawn);
            plus_one(o, a)
        });
        assert_eq!(outcome, SwapOutcome::Lost);
        let mut d = [[0; RECORD_WORDS]; 1];
        assert_eq!(host.take(&mut d), Ok(None), "a lost swap is never visible");
        let again = host.offer(&[[2; RECORD_WORDS]]).unwrap();
        assert_eq!(
            ipu.try_swap(plus_one),
            SwapOutcome::Swapped { epoch: again }
        );
        assert_eq!(
            host.take(&mut d),
            Ok(Some(Exchange {
                epoch: again,
                alt: true,
                count: 1
            }))
        );
        assert_eq!(d[0], [3; RECORD_WORDS]);
        assert!(matches!(host.view().inspect(), SlotReport::Consistent(_)));
    }

    #[test]
    fn a_batch_goes_whole_each_way_under_one_alternating_bit() {
        let batch = 4;
        let w = words(batch);
        let mut host = HostSlot::new(SlotView::new(&w, batch), CostModel::zero());
        let mut ipu = IpuSlot::new(SlotView::new(&w, batch), CostModel::zero());
        let offer: Vec<Record> = (1..=3).map(|k| [k; RECORD_WORDS]).collect();
        let epoch = host.offer_tagged(77, &offer).unwrap();
        {
            let read = ipu.read_offer().unwrap().unwrap();
            assert_eq!(
                (read.epoch, read.tag, read.records),
                (epoch, 77, &offer[..])
            );
        }
        // The answer may be longer than the offer: up to the batch.
        let answer: Vec<Record> = (10..14).map(|k| [k; RECORD_WORDS]).collect();
        assert_eq!(ipu.swap(&answer), SwapOutcome::Swapped { epoch });
        let mut got = vec![[0; RECORD_WORDS]; batch];
        let x = host.take(&mut got).unwrap().unwrap();
        assert_eq!((x.count, x.alt), (4, true));
        assert_eq!(got, answer);
        assert_eq!(
            host.offer(&vec![[0; RECORD_WORDS]; batch + 1]),
            Err(OfferRefused::TooMany {
                records: batch + 1,
                batch
            })
        );
        // An empty batch is an exchange too: it flips the bit back.
        host.offer(&[]).unwrap();
        assert!(matches!(
            ipu.try_swap(|_, _| 0),
            SwapOutcome::Swapped { .. }
        ));
        assert!(!host.take(&mut got).unwrap().unwrap().alt);
    }

    #[test]
    fn inspect_flags_a_swap_whose_answer_is_for_another_offer() {
        let w = words(2);
        let view = SlotView::new(&w, 2);
        let mut host = HostSlot::new(view, CostModel::zero());
        let mut ipu = IpuSlot::new(view, CostModel::zero());
        let epoch = host.offer(&[[1; RECORD_WORDS]]).unwrap();
        ipu.try_swap(plus_one);
        let tag_at = view.answer_half() + TAG;
        w[tag_at].store(epoch + 7, Ordering::Relaxed);
        assert!(matches!(view.inspect(), SlotReport::HalfApplied { .. }));
        let mut d = [[0; RECORD_WORDS]; 2];
        assert_eq!(
            host.take(&mut d),
            Err(HalfApplied {
                epoch,
                tag: epoch + 7,
                count: 1
            })
        );
        w[tag_at].store(epoch, Ordering::Relaxed);
        w[view.answer_half() + COUNT].store(3, Ordering::Relaxed);
        assert!(matches!(view.inspect(), SlotReport::HalfApplied { .. }));
        w[CTL].store(3, Ordering::Relaxed);
        assert_eq!(view.inspect(), SlotReport::Corrupt { raw: 3 });
    }

    #[test]
    fn an_offer_claiming_more_than_the_slot_holds_is_refused_by_the_ipu() {
        let w = words(2);
        let view = SlotView::new(&w, 2);
        let mut host = HostSlot::new(view, CostModel::zero());
        let mut ipu = IpuSlot::new(view, CostModel::zero());
        let epoch = host.offer(&[[1; RECORD_WORDS]]).unwrap();
        w[view.state_half() + COUNT].store(9, Ordering::Relaxed);
        assert_eq!(
            ipu.read_offer(),
            Err(BadOffer {
                epoch,
                count: 9,
                batch: 2
            })
        );
        assert_eq!(ipu.swap(&[]), SwapOutcome::NothingOffered);
    }
}
