//! Bilateral swap slots: the host's state and the IPU's decision change
//! hands in one atomic step, or not at all.
//!
//! Each slot holds a control word, the host's half (the state offered) and
//! the IPU's half (the decision). The control word packs
//! `{epoch, alternating bit, phase}`:
//!
//! * `Idle` / `Swapped`: the host owns the slot. It may write its half.
//! * `Offered(epoch)`: the host has written its half and offers it. The IPU
//!   reads it, computes a decision, writes its half tagged with `epoch`, then
//!   tries one compare-and-swap `Offered(epoch, a) -> Swapped(epoch, !a)`.
//! * The host may change its mind only by withdrawing the offer with its own
//!   compare-and-swap `Offered(epoch, a) -> Idle(epoch+1, a)`.
//!
//! Exactly one of the two compare-and-swaps wins. If the IPU wins, both
//! halves are committed together: the decision was computed against exactly
//! the state it was swapped with, and the host applies it before any later
//! change of its own. If the host wins, the decision is never visible and
//! the host re-offers from the same alternating bit with a new `epoch`. `epoch`
//! changes on every host transition, so a compare-and-swap prepared against
//! an older offer can never succeed (no ABA), and a stale decision cannot be
//! committed at all.

use crate::cost::CostModel;
use crate::ring::{RECORD_WORDS, Record};
use crate::sync::{AtomicU64, Ordering};

/// Words per slot: control word on its own cache line, then the two halves.
pub const SLOT_WORDS: usize = 8 + 2 * RECORD_WORDS;
const CTL: usize = 0;
const STATE: usize = 8;
const DECISION: usize = 8 + RECORD_WORDS;
/// Words of a decision the IPU may use; the last word of its half carries
/// the `epoch` the decision was computed for.
pub const DECISION_WORDS: usize = RECORD_WORDS - 1;
/// A decision, as words.
pub type Decision = [u64; DECISION_WORDS];

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
}

impl<'a> SlotView<'a> {
    pub fn new(words: &'a [AtomicU64]) -> Self {
        assert_eq!(words.len(), SLOT_WORDS);
        SlotView { words }
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

    fn read_half(&self, at: usize, out: &mut [u64]) {
        for (word, slot) in out.iter_mut().zip(&self.words[at..at + RECORD_WORDS]) {
            *word = slot.load(Ordering::Relaxed);
        }
    }

    fn write_half(&self, at: usize, data: &[u64]) {
        for (slot, word) in self.words[at..at + RECORD_WORDS].iter().zip(data) {
            slot.store(*word, Ordering::Relaxed);
        }
    }

    /// Checks the slot as a crash survivor or a test would see it.
    pub fn inspect(&self) -> SlotReport {
        let raw = self.words[CTL].load(Ordering::Acquire);
        let Some(ctl) = Ctl::decode(raw) else {
            return SlotReport::Corrupt { raw };
        };
        if ctl.phase == Phase::Swapped {
            let tag = self.words[DECISION + DECISION_WORDS].load(Ordering::Relaxed);
            if tag != ctl.epoch {
                return SlotReport::HalfApplied {
                    ctl,
                    decision_tag: tag,
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
    /// Swapped, but the decision visible was made for another offer.
    HalfApplied {
        ctl: Ctl,
        decision_tag: u64,
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
    #[error("slot holds a swapped decision not yet taken; take it first")]
    Untaken,
}

/// Outcome of [`HostSlot::withdraw`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Withdraw {
    /// The offer is void; no decision was or will be committed against it.
    Withdrawn,
    /// The IPU's swap won: the decision must be taken and applied first.
    AlreadySwapped,
    /// Nothing was offered.
    NotOffered,
}

/// A committed exchange, as the host sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exchange {
    /// The offer the decision was made against.
    pub epoch: u64,
    /// The alternating bit after the swap.
    pub alt: bool,
}

/// A swap that shows a decision for another offer: impossible unless the
/// region is corrupt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("slot swapped at epoch {epoch} but its decision is tagged {tag}")]
pub struct HalfApplied {
    pub epoch: u64,
    pub tag: u64,
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

    /// Writes `state` into the host half and offers it for a swap; returns
    /// the offer's `epoch`. The IPU learns of it from a posted write (it polls
    /// its own copy), so the host pays one posted write.
    pub fn offer(&mut self, state: &Record) -> Result<u64, OfferRefused> {
        let ctl = self.slot.ctl();
        match ctl.phase {
            Phase::Idle => {}
            Phase::Offered => return Err(OfferRefused::Offered),
            Phase::Swapped => return Err(OfferRefused::Untaken),
        }
        self.slot.write_half(STATE, state);
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

    /// If the IPU swapped, copies its decision into `out`, hands the slot
    /// back to the host (phase `Idle`) and returns the exchange.
    pub fn take(&mut self, out: &mut Decision) -> Result<Option<Exchange>, HalfApplied> {
        let ctl = self.slot.ctl();
        if ctl.phase != Phase::Swapped {
            return Ok(None);
        }
        let mut half = [0u64; RECORD_WORDS];
        self.slot.read_half(DECISION, &mut half);
        let tag = half[DECISION_WORDS];
        if tag != ctl.epoch {
            return Err(HalfApplied {
                epoch: ctl.epoch,
                tag,
            });
        }
        out.copy_from_slice(&half[..DECISION_WORDS]);
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
        }))
    }

    pub fn view(&self) -> SlotView<'a> {
        self.slot
    }
}

/// Outcome of [`IpuSlot::try_swap`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwapOutcome {
    NothingOffered,
    /// Committed: the host will see this decision against offer `epoch`.
    Swapped {
        epoch: u64,
    },
    /// The host withdrew first; the decision was never visible.
    Lost,
}

/// The IPU's handle on one slot. One IPU thread per slot.
pub struct IpuSlot<'a> {
    slot: SlotView<'a>,
    cost: CostModel,
}

impl<'a> IpuSlot<'a> {
    pub fn new(slot: SlotView<'a>, cost: CostModel) -> Self {
        IpuSlot { slot, cost }
    }

    /// Whether an offer is waiting (read from the IPU's own copy: free).
    pub fn offered(&self) -> bool {
        self.slot.ctl().phase == Phase::Offered
    }

    /// If the host offers a state, computes `decide(state)` and swaps it in
    /// with one PCIe AtomicOp compare-and-swap.
    pub fn try_swap(&mut self, decide: impl FnOnce(&Record, &mut Decision)) -> SwapOutcome {
        let ctl = self.slot.ctl();
        if ctl.phase != Phase::Offered {
            return SwapOutcome::NothingOffered;
        }
        let mut state = [0u64; RECORD_WORDS];
        self.slot.read_half(STATE, &mut state);
        let mut half = [0u64; RECORD_WORDS];
        decide(
            &state,
            (&mut half[..DECISION_WORDS])
                .try_into()
                .expect("decision width"),
        );
        half[DECISION_WORDS] = ctl.epoch;
        // Written before the swap, visible only through it: if the swap
        // loses, the host never reads this half.
        self.slot.write_half(DECISION, &half);
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

    pub fn view(&self) -> SlotView<'a> {
        self.slot
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn words() -> Vec<AtomicU64> {
        (0..SLOT_WORDS).map(|_| AtomicU64::new(0)).collect()
    }

    #[test]
    fn an_untaken_exchange_cannot_be_offered_over() {
        let w = words();
        let mut host = HostSlot::new(SlotView::new(&w), CostModel::zero());
        let mut ipu = IpuSlot::new(SlotView::new(&w), CostModel::zero());
        assert_eq!(ipu.try_swap(|_, _| {}), SwapOutcome::NothingOffered);
        let epoch = host.offer(&[5; RECORD_WORDS]).unwrap();
        assert_eq!(host.offer(&[6; RECORD_WORDS]), Err(OfferRefused::Offered));
        assert_eq!(
            ipu.try_swap(|s, d| d[0] = s[0] + 1),
            SwapOutcome::Swapped { epoch }
        );
        assert_eq!(host.offer(&[6; RECORD_WORDS]), Err(OfferRefused::Untaken));
        assert_eq!(host.withdraw(), Withdraw::AlreadySwapped);
        let mut d = [0; DECISION_WORDS];
        assert_eq!(host.take(&mut d), Ok(Some(Exchange { epoch, alt: true })));
        assert_eq!(d[0], 6);
        assert_eq!(host.take(&mut d), Ok(None));
        assert_eq!(host.withdraw(), Withdraw::NotOffered);
    }

    #[test]
    fn a_withdrawn_offer_voids_the_swap_prepared_against_it() {
        let w = words();
        let mut host = HostSlot::new(SlotView::new(&w), CostModel::zero());
        let mut ipu = IpuSlot::new(SlotView::new(&w), CostModel::zero());
        host.offer(&[1; RECORD_WORDS]).unwrap();
        // The IPU reads the offer, then the host withdraws before the CAS.
        let outcome = ipu.try_swap(|_, _| assert_eq!(host.withdraw(), Withdraw::Withdrawn));
        assert_eq!(outcome, SwapOutcome::Lost);
        let mut d = [0; DECISION_WORDS];
        assert_eq!(host.take(&mut d), Ok(None), "a lost swap is never visible");
        let again = host.offer(&[2; RECORD_WORDS]).unwrap();
        assert_eq!(
            ipu.try_swap(|s, d| d[0] = s[0]),
            SwapOutcome::Swapped { epoch: again }
        );
        assert_eq!(
            host.take(&mut d),
            Ok(Some(Exchange {
                epoch: again,
                alt: true
            }))
        );
        assert_eq!(d[0], 2);
        assert!(matches!(host.view().inspect(), SlotReport::Consistent(_)));
    }

    #[test]
    fn inspect_flags_a_swap_whose_decision_is_for_another_offer() {
        let w = words();
        let mut host = HostSlot::new(SlotView::new(&w), CostModel::zero());
        let mut ipu = IpuSlot::new(SlotView::new(&w), CostModel::zero());
        let epoch = host.offer(&[1; RECORD_WORDS]).unwrap();
        ipu.try_swap(|_, _| {});
        w[DECISION + DECISION_WORDS].store(epoch + 7, Ordering::Relaxed);
        assert!(matches!(
            host.view().inspect(),
            SlotReport::HalfApplied { .. }
        ));
        let mut d = [0; DECISION_WORDS];
        assert_eq!(
            host.take(&mut d),
            Err(HalfApplied {
                epoch,
                tag: epoch + 7
            })
        );
        w[CTL].store(3, Ordering::Relaxed);
        assert_eq!(host.view().inspect(), SlotReport::Corrupt { raw: 3 });
    }
}
