//! Model checks of both ring protocols under every interleaving loom finds.
//! Run with:
//! `RUSTFLAGS="--cfg loom" cargo test -p oae-swapring --release --test loom`
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use oae_swapring::AtomicU64;
use oae_swapring::bilateral::{
    HostSlot, IpuSlot, SlotReport, SlotView, SwapOutcome, Withdraw, slot_words,
};
use oae_swapring::cost::CostModel;
use oae_swapring::relax;
use oae_swapring::ring::{RECORD_WORDS, Record, RingView, ring_words};

/// Bounding preemptions keeps each model under a minute; bugs in two-party
/// protocols like these show up within two or three preemptions.
fn model(f: impl Fn() + Sync + Send + 'static) {
    model_bounded(3, f);
}

fn model_bounded(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(preemptions);
    builder.check(f);
}

fn words(n: usize) -> Arc<Vec<AtomicU64>> {
    Arc::new((0..n).map(|_| AtomicU64::new(0)).collect())
}

/// Every word of record `k` is `k`, so a torn record shows.
fn record(k: u64) -> [u64; RECORD_WORDS] {
    [k; RECORD_WORDS]
}

fn ring_model(capacity: usize, records: u64, batch: u64) {
    model(move || {
        let shared = words(ring_words(capacity));
        let theirs = shared.clone();
        let producer = thread::spawn(move || {
            let mut p = RingView::new(&theirs, capacity).producer();
            let mut next = 1;
            while next <= records {
                let mut staged = 0;
                while staged < batch && next <= records && p.stage(&record(next)).is_ok() {
                    next += 1;
                    staged += 1;
                }
                if p.publish() == 0 {
                    relax();
                }
            }
        });
        let mut c = RingView::new(&shared, capacity).consumer();
        let mut want = 1;
        while want <= records {
            if c.ready() == 0 {
                c.release();
                c.refresh();
            }
            let mut got = [0; RECORD_WORDS];
            if c.take(&mut got) {
                assert_eq!(
                    got,
                    record(want),
                    "record lost, duplicated, reordered or torn"
                );
                want += 1;
            } else {
                relax();
            }
        }
        c.release();
        producer.join().unwrap();
        // Nothing more than was sent ever became visible.
        assert_eq!(c.refresh(), 0);
    });
}

#[test]
fn ring_one_record_at_a_time_through_a_ring_smaller_than_the_stream() {
    ring_model(2, 3, 1);
}

#[test]
fn ring_batched_publish() {
    ring_model(2, 3, 2);
}

/// Each answer record is a function of its offer record and of the whole
/// batch (its last word counts the batch's records and sums their first
/// words), so an answer computed on a torn or another batch shows.
fn decide(offer: &[Record], answer: &mut [Record]) -> usize {
    let digest = offer.iter().map(|r| r[0]).sum::<u64>() * 16 + offer.len() as u64;
    for (a, s) in answer.iter_mut().zip(offer) {
        for (i, w) in a.iter_mut().enumerate() {
            *w = s[i] * 10 + 1;
        }
        a[RECORD_WORDS - 1] = digest;
    }
    offer.len()
}

/// The host offers batch A, may withdraw it and offer batch B instead,
/// while the IPU tries to swap. Exactly one exchange commits, both sides
/// agree on which offer it was made against, and every record of its
/// answer was computed on exactly that batch.
fn bilateral_model(batch: usize, preemptions: usize) {
    model_bounded(preemptions, move || {
        let shared = words(slot_words(batch));
        let theirs = shared.clone();
        let ipu = thread::spawn(move || {
            let mut slot = IpuSlot::new(SlotView::new(&theirs, batch), CostModel::zero());
            let mut lost = 0;
            loop {
                match slot.try_swap(decide) {
                    SwapOutcome::Swapped { epoch } => return (epoch, lost),
                    SwapOutcome::Lost => lost += 1,
                    SwapOutcome::NothingOffered => relax(),
                }
            }
        });
        let mut host = HostSlot::new(SlotView::new(&shared, batch), CostModel::zero());
        let a: Vec<Record> = (0..batch as u64).map(|k| [1 + k; RECORD_WORDS]).collect();
        // B has a different length from A when the batch allows it.
        let b: Vec<Record> = (0..batch.div_ceil(2) as u64)
            .map(|k| [5 + k; RECORD_WORDS])
            .collect();
        let epoch_a = host.offer(&a).unwrap();
        let (offered, epoch) = match host.withdraw() {
            Withdraw::Withdrawn => (b.clone(), host.offer(&b).unwrap()),
            Withdraw::AlreadySwapped => (a.clone(), epoch_a),
            Withdraw::NotOffered => panic!("offer vanished"),
        };
        let mut got = vec![[0; RECORD_WORDS]; batch];
        let exchange = loop {
            match host.take(&mut got) {
                Ok(Some(x)) => break x,
                Ok(None) => relax(),
                Err(half) => panic!("half-applied swap visible: {half}"),
            }
        };
        let (ipu_epoch, _lost) = ipu.join().unwrap();
        assert_eq!(
            exchange.epoch, epoch,
            "host took an exchange for another offer"
        );
        assert_eq!(ipu_epoch, epoch, "the two sides disagree on the exchange");
        assert!(exchange.alt, "one exchange flips the alternating bit once");
        let mut want = vec![[0; RECORD_WORDS]; batch];
        let n = decide(&offered, &mut want);
        assert_eq!(
            &got[..exchange.count],
            &want[..n],
            "answer was not computed on the batch it was swapped with"
        );
        assert!(matches!(host.view().inspect(), SlotReport::Consistent(_)));
    });
}

#[test]
fn bilateral_exchange_is_all_or_nothing() {
    bilateral_model(1, 3);
}

/// Two records each way, and a withdrawn batch replaced by one of another
/// length. (Every record adds eight words of loads and stores to
/// interleave: three records take loom past a quarter of an hour.)
#[test]
fn bilateral_batch_is_all_or_nothing() {
    bilateral_model(2, 3);
}
