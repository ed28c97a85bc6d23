//! Model checks of both ring protocols under every interleaving loom finds.
//! Run with:
//! `RUSTFLAGS="--cfg loom" cargo test -p oae-swapring --release --test loom`
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use oae_swapring::AtomicU64;
use oae_swapring::bilateral::{
    DECISION_WORDS, Decision, HostSlot, IpuSlot, SLOT_WORDS, SlotReport, SlotView, SwapOutcome,
    Withdraw,
};
use oae_swapring::cost::CostModel;
use oae_swapring::relax;
use oae_swapring::ring::{RECORD_WORDS, RingView, ring_words};

/// Bounding preemptions keeps each model under a minute; bugs in two-party
/// protocols like these show up within two or three preemptions.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
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

fn decide(state: &[u64; RECORD_WORDS], out: &mut Decision) {
    for (i, w) in out.iter_mut().enumerate() {
        *w = state[i] * 10 + 1;
    }
}

/// The host offers A, may withdraw it and offer B instead, while the IPU
/// tries to swap. Exactly one exchange commits, both sides agree on which
/// offer it was made against, and its decision is the one computed on
/// exactly that state.
#[test]
fn bilateral_exchange_is_all_or_nothing() {
    model(|| {
        let shared = words(SLOT_WORDS);
        let theirs = shared.clone();
        let ipu = thread::spawn(move || {
            let mut slot = IpuSlot::new(SlotView::new(&theirs), CostModel::zero());
            let mut lost = 0;
            loop {
                match slot.try_swap(decide) {
                    SwapOutcome::Swapped { epoch } => return (epoch, lost),
                    SwapOutcome::Lost => lost += 1,
                    SwapOutcome::NothingOffered => relax(),
                }
            }
        });
        let mut host = HostSlot::new(SlotView::new(&shared), CostModel::zero());
        let a = [1; RECORD_WORDS];
        let b = [2; RECORD_WORDS];
        let epoch_a = host.offer(&a).unwrap();
        let (offered, epoch) = match host.withdraw() {
            Withdraw::Withdrawn => (b, host.offer(&b).unwrap()),
            Withdraw::AlreadySwapped => (a, epoch_a),
            Withdraw::NotOffered => panic!("offer vanished"),
        };
        let mut got = [0; DECISION_WORDS];
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
        let mut want = [0; DECISION_WORDS];
        decide(&offered, &mut want);
        assert_eq!(
            got, want,
            "decision was not computed on the state it was swapped with"
        );
        assert!(matches!(host.view().inspect(), SlotReport::Consistent(_)));
    });
}
