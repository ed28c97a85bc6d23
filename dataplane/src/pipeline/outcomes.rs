//! Verbs ended by kind and outcome, kept on the polling core in a table
//! made once (no allocation when a verb ends).

use oae_proto::Opcode;

use oae_client::outcome::{OUTCOME_CODES, Outcome};
use oae_client::stats::VerbCount;

#[derive(Debug, Clone)]
pub struct VerbOutcomes {
    table: Box<[[u64; OUTCOME_CODES]; Opcode::COUNT]>,
}

impl Default for VerbOutcomes {
    fn default() -> VerbOutcomes {
        VerbOutcomes {
            table: Box::new([[0; OUTCOME_CODES]; Opcode::COUNT]),
        }
    }
}

impl VerbOutcomes {
    pub fn count(&mut self, kind: Opcode, outcome: Outcome) {
        self.table[kind.index()][usize::from(outcome.code())] += 1;
    }

    /// The pairs that happened.
    pub fn report(&self) -> Vec<VerbCount> {
        let mut out = Vec::new();
        for (verb, row) in Opcode::ALL.iter().zip(self.table.iter()) {
            for outcome in Outcome::ALL {
                let count = row[usize::from(outcome.code())];
                if count > 0 {
                    out.push(VerbCount {
                        verb: verb.name().into(),
                        outcome: outcome.name().into(),
                        count,
                    });
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_report_only_what_happened() {
        let mut o = VerbOutcomes::default();
        o.count(Opcode::CompareAndSwap, Outcome::Ok);
        o.count(Opcode::CompareAndSwap, Outcome::Ok);
        o.count(Opcode::BilateralSwap, Outcome::RefusedLocked);
        let r = o.report();
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!(
            (r[0].verb.as_str(), r[0].outcome.as_str(), r[0].count),
            ("cas", "ok", 2)
        );
        assert_eq!(
            (r[1].verb.as_str(), r[1].outcome.as_str()),
            ("bswap", "refused_locked")
        );
    }
}
