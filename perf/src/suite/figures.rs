//! Reading and printing figures: a measurement by name, a ratio of two,
//! and a figure in as few digits as it deserves.

use super::{Experiment, Figure, Measurement};

pub(super) fn find<'a>(
    ms: &'a [Measurement],
    e: Experiment,
    subject: &str,
    params: &[(&str, &str)],
) -> Option<&'a Measurement> {
    ms.iter().find(|m| {
        m.experiment == e
            && m.subject == subject
            && params.iter().all(|(k, v)| m.param(k) == Some(*v))
    })
}

pub(super) fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

pub(super) fn fmt_fig(f: Option<&Figure>, scale: f64, digits: usize) -> String {
    match f {
        Some(Figure {
            median: Some(m),
            min: Some(lo),
            max: Some(hi),
            values,
        }) if values.len() > 1 => format!(
            "{:.digits$} [{:.digits$}–{:.digits$}]",
            m / scale,
            lo / scale,
            hi / scale
        ),
        Some(Figure {
            median: Some(m), ..
        }) => format!("{:.digits$}", m / scale),
        _ => "–".into(),
    }
}
