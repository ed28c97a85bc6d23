//! A workload's contended mode: every lane of every workload that names the
//! same words hammers them at once, from any queue, link or node. Word 0
//! takes FETCH_ADD +1, word 1 CAS increments, words 2 and 3 MULTI-WORD
//! COMMITs that increment both together. No lane can predict the others,
//! so instead of a model of the bytes the workload counts what took effect;
//! summed over every workload on the words, the counts must equal the
//! memory (exactly once, across cores and links).

use oae_proto::Opcode;
use oae_proto::verb::{MAX_MCAS_WORDS, McasWord, Output, RegionRef, Verb};

use oae_client::control::ContendedCounts;

/// The verbs contended mode runs.
pub const KINDS: [Opcode; 3] = [
    Opcode::FetchAdd,
    Opcode::CompareAndSwap,
    Opcode::MultiWordCommit,
];

pub struct Contention {
    target: RegionRef,
    /// Byte offset of word 0.
    base: u32,
    /// The last values seen of words 1, 2 and 3: what the next CAS and
    /// MULTI-WORD COMMIT expect.
    cas_guess: u64,
    mcas_guess: [u64; 2],
    counts: ContendedCounts,
}

impl Contention {
    pub fn new(target: RegionRef, base: u32) -> Contention {
        Contention {
            target,
            base,
            cas_guess: 0,
            mcas_guess: [0, 0],
            counts: ContendedCounts::default(),
        }
    }

    /// The next contended verb of `kind`, written into `verb`.
    pub fn make(&self, kind: Opcode, verb: &mut Verb) {
        let (target, base) = (self.target, self.base);
        *verb = match kind {
            Opcode::CompareAndSwap => Verb::CompareAndSwap {
                target,
                offset: base + 8,
                expected: self.cas_guess,
                new: self.cas_guess + 1,
            },
            Opcode::MultiWordCommit => {
                let [w2, w3] = self.mcas_guess;
                let mut words = [McasWord::default(); MAX_MCAS_WORDS];
                words[0] = McasWord {
                    offset: base + 16,
                    expected: w2,
                    new: w2 + 1,
                };
                words[1] = McasWord {
                    offset: base + 24,
                    expected: w3,
                    new: w3 + 1,
                };
                Verb::MultiWordCommit {
                    target,
                    count: 2,
                    words,
                }
            }
            Opcode::FetchAdd => Verb::FetchAdd {
                target,
                offset: base,
                add: 1,
            },
            Opcode::Read | Opcode::Write | Opcode::Swap | Opcode::BilateralSwap | Opcode::Send => {
                unreachable!("contended mode runs {KINDS:?} only, never {kind}")
            }
        };
    }

    /// Counts what a completed verb did; false if its output is not one
    /// of the verb's.
    pub fn book(&mut self, output: &Output) -> bool {
        match *output {
            Output::FetchAdd { .. } => self.counts.adds += 1,
            Output::CompareAndSwap { old, swapped } => {
                self.counts.cas_wins += u64::from(swapped);
                self.cas_guess = old + u64::from(swapped);
            }
            Output::MultiWordCommit { committed, old, .. } => {
                self.counts.mcas_wins += u64::from(committed);
                let step = u64::from(committed);
                self.mcas_guess = [old[0] + step, old[1] + step];
            }
            _ => return false,
        }
        true
    }

    pub fn counts(&self) -> ContendedCounts {
        self.counts
    }
}
