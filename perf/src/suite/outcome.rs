//! What one repetition of a subject measured.

use std::collections::BTreeMap;

use oae_client::control::Percentiles;

/// What one repetition measured.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub metrics: BTreeMap<String, f64>,
    /// `(quantile, us)` points, if the subject reports a distribution.
    pub cdf: Vec<(f64, f64)>,
    /// The p99.9 the distribution is ranked by among repetitions.
    pub tail_us: f64,
    /// One line for the progress display.
    pub headline: String,
}

impl Outcome {
    pub(super) fn set(&mut self, name: &str, v: f64) {
        self.metrics.insert(name.to_string(), v);
    }

    /// The cores each side used while measured (CPU time over wall time),
    /// and, for a subject with a `rate` (verbs or frames per second), that
    /// rate per CPU-second of both sides together.
    pub(super) fn set_cpu(&mut self, cores: [f64; 2], rate: Option<f64>) {
        self.set("cpu_a_cores", cores[0]);
        self.set("cpu_b_cores", cores[1]);
        if let Some(rate) = rate {
            self.set("per_cpu_s", rate / (cores[0] + cores[1]).max(1e-9));
        }
    }
}

pub(super) fn percentiles(o: &mut Outcome, prefix: &str, l: &Percentiles) {
    for (name, ns) in [
        ("p50_us", l.p50),
        ("p90_us", l.p90),
        ("p99_us", l.p99),
        ("p999_us", l.p999),
        ("max_us", l.max),
    ] {
        o.set(&format!("{prefix}{name}"), ns as f64 / 1e3);
    }
}
