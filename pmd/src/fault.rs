//! A driver wrapper that injects the XDP program's faults into the OAE
//! frames a driver receives, decided by the same dice
//! ([`FaultConfig::roll`]): loss, corruption and a link taken down, for
//! tests that run without XDP or root (as smoltcp's `FaultInjector` wraps a
//! `phy::Device`). A seed gives the same faults to the same frames here as
//! in the XDP program on one CPU.

use oae_common::{ETH_HEADER_LEN, FaultConfig, FaultRoll, FaultScope, OAE_ETHERTYPE, RngState};

use crate::{Burst, Driver};

/// What the injector did to the frames it saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCounters {
    /// OAE frames received and rolled for.
    pub in_scope: u64,
    pub dropped_by_fault: u64,
    pub corrupted_by_fault: u64,
}

/// `inner` with faults on the OAE frames it receives.
pub struct FaultInjector<D: Driver> {
    inner: D,
    faults: FaultConfig,
    dice: RngState,
    counters: FaultCounters,
}

/// The injector acts on OAE frames only; a wider scope is the XDP
/// program's (it needs the IP headers parsed as the kernel sees them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the in-memory fault injector acts on OAE frames only, not on {0} frames")]
pub struct ScopeNotOae(pub FaultScope);

impl<D: Driver> FaultInjector<D> {
    /// `inner` with no faults yet.
    pub fn new(inner: D) -> FaultInjector<D> {
        let faults = FaultConfig::default();
        FaultInjector {
            inner,
            faults,
            dice: RngState::seeded(faults.seed, 0),
            counters: FaultCounters::default(),
        }
    }

    /// Faults from now on; a new seed restarts the dice, as in the XDP
    /// program.
    pub fn set_faults(&mut self, faults: FaultConfig) -> Result<(), ScopeNotOae> {
        match faults.scope() {
            Some(FaultScope::Oae) => {}
            Some(other) => return Err(ScopeNotOae(other)),
            None => return Err(ScopeNotOae(FaultScope::Ipv4)),
        }
        if self.dice.needs_seed(faults.seed) {
            self.dice = RngState::seeded(faults.seed, 0);
        }
        self.faults = faults;
        Ok(())
    }

    pub fn counters(&self) -> FaultCounters {
        self.counters
    }

    pub fn inner(&self) -> &D {
        &self.inner
    }

    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// Rolls for the frame at `out[i]`: true if it was dropped (taken out
    /// of `out` into `dropped`).
    fn roll(&mut self, out: &mut Burst<D::Buf>, i: usize, dropped: &mut Burst<D::Buf>) -> bool {
        let frame = self.inner.frame(&out[i]);
        let is_oae = frame.len() >= ETH_HEADER_LEN
            && u16::from_be_bytes([frame[12], frame[13]]) == OAE_ETHERTYPE;
        if !is_oae || self.faults.is_clear() {
            return false;
        }
        self.counters.in_scope += 1;
        let len = frame.len();
        match self.faults.roll(&mut self.dice, len as u32) {
            FaultRoll::Keep => false,
            FaultRoll::Drop => {
                self.counters.dropped_by_fault += 1;
                dropped.push(out.remove(i));
                true
            }
            FaultRoll::Corrupt { offset, bit } => {
                self.counters.corrupted_by_fault += 1;
                self.inner.frame_mut(&mut out[i], len)[offset as usize] ^= 1 << bit;
                false
            }
        }
    }
}

impl<D: Driver> Driver for FaultInjector<D> {
    type Buf = D::Buf;

    fn rx_burst(&mut self, out: &mut Burst<D::Buf>) -> usize {
        let first = out.len();
        let received = self.inner.rx_burst(out);
        let mut dropped = Burst::new();
        let mut i = first;
        while i < out.len() {
            if !self.roll(out, i, &mut dropped) {
                i += 1;
            }
        }
        let lost = dropped.len();
        self.inner.release(&mut dropped);
        received - lost
    }

    fn tx_burst(&mut self, bufs: &mut Burst<D::Buf>) -> usize {
        self.inner.tx_burst(bufs)
    }

    forward_to_inner!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::{MemConfig, mem_pair};

    const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 2];

    /// `n` frames of `ethertype` from a to b, each 64 bytes and numbered.
    fn send(a: &mut impl Driver, n: usize, ethertype: u16) {
        for k in 0..n {
            let mut burst = Burst::new();
            assert_eq!(a.alloc(&mut burst, 1), 1);
            let frame = a.frame_mut(&mut burst[0], 64);
            frame.fill(0);
            frame[..6].copy_from_slice(&B);
            frame[6..12].copy_from_slice(&A);
            frame[12..14].copy_from_slice(&ethertype.to_be_bytes());
            frame[14] = k as u8;
            assert_eq!(a.tx_burst(&mut burst), 1);
            a.kick();
        }
    }

    /// Every frame b receives, as bytes.
    fn receive(b: &mut impl Driver) -> Vec<Vec<u8>> {
        let mut frames = Vec::new();
        loop {
            let mut burst = Burst::new();
            if b.rx_burst(&mut burst) == 0 {
                return frames;
            }
            frames.extend(burst.iter().map(|f| b.frame(f).to_vec()));
            b.release(&mut burst);
        }
    }

    fn pair() -> (crate::mem::MemDriver, FaultInjector<crate::mem::MemDriver>) {
        let (a, b) = mem_pair(MemConfig::new(A), MemConfig::new(B));
        (a, FaultInjector::new(b))
    }

    #[test]
    fn drops_and_corruption_follow_the_shared_dice_and_are_counted() {
        let faults = FaultConfig {
            drop_ppm: 200_000,
            corrupt_ppm: 200_000,
            seed: 9,
            ..FaultConfig::default()
        };
        // The same rolls, made directly: what the XDP program would decide
        // for 100 frames of 64 bytes on CPU 0.
        let mut dice = RngState::seeded(9, 0);
        let decided: Vec<FaultRoll> = (0..100).map(|_| faults.roll(&mut dice, 64)).collect();
        let (mut a, mut b) = pair();
        b.set_faults(faults).unwrap();
        send(&mut a, 100, OAE_ETHERTYPE);
        let got = receive(&mut b);
        let kept: Vec<(usize, &FaultRoll)> = decided
            .iter()
            .enumerate()
            .filter(|(_, r)| **r != FaultRoll::Drop)
            .collect();
        assert_eq!(got.len(), kept.len());
        for (frame, (k, roll)) in got.iter().zip(&kept) {
            let mut expected = vec![0u8; 64];
            expected[..6].copy_from_slice(&B);
            expected[6..12].copy_from_slice(&A);
            expected[12..14].copy_from_slice(&OAE_ETHERTYPE.to_be_bytes());
            expected[14] = *k as u8;
            if let FaultRoll::Corrupt { offset, bit } = roll {
                expected[*offset as usize] ^= 1 << bit;
            }
            assert_eq!(frame, &expected, "frame {k}: {roll:?}");
        }
        let count =
            |want: fn(&FaultRoll) -> bool| decided.iter().filter(|r| want(r)).count() as u64;
        let c = b.counters();
        assert_eq!(c.in_scope, 100);
        assert_eq!(c.dropped_by_fault, count(|r| *r == FaultRoll::Drop));
        assert_eq!(
            c.corrupted_by_fault,
            count(|r| matches!(r, FaultRoll::Corrupt { .. }))
        );
        assert!(c.dropped_by_fault > 0 && c.corrupted_by_fault > 0, "{c:?}");
    }

    #[test]
    fn a_link_down_drops_every_oae_frame_and_nothing_else() {
        let (mut a, mut b) = pair();
        b.set_faults(FaultConfig {
            link_down: 1,
            ..FaultConfig::default()
        })
        .unwrap();
        send(&mut a, 5, OAE_ETHERTYPE);
        send(&mut a, 3, 0x0800);
        assert_eq!(receive(&mut b).len(), 3, "only the IPv4 frames");
        assert_eq!(b.counters().dropped_by_fault, 5);
        // The dropped frames' buffers went back to b's pool.
        assert_eq!(b.inner().held_by_caller(), 0);
        b.set_faults(FaultConfig::default()).unwrap();
        send(&mut a, 5, OAE_ETHERTYPE);
        assert_eq!(receive(&mut b).len(), 5, "the link is up again");
    }

    #[test]
    fn a_wider_scope_is_refused() {
        let (_, mut b) = pair();
        let ipv4 = FaultConfig::default().with_scope(FaultScope::Ipv4);
        assert_eq!(b.set_faults(ipv4), Err(ScopeNotOae(FaultScope::Ipv4)));
    }
}
