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
            ..
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

/// Every figure of every measurement with its count, minimum, mean,
/// median, maximum and standard deviation over the repetitions: what a
/// perftest user looks for beside the medians of the tables.
pub(super) fn statistics(out: &mut String, ms: &[Measurement]) {
    use std::fmt::Write as _;
    out.push_str(
        "## Every figure\n\nOver the repetitions that produced it: n, minimum, mean, median, \
         maximum and sample standard deviation.\n\n\
         | experiment | subject | setting | figure | n | min | mean | median | max | sd |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    let num = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.3}"));
    for m in ms {
        let setting: Vec<String> = m.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        for (name, f) in &m.metrics {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {name} | {} | {} | {} | {} | {} | {} |",
                m.experiment.name(),
                m.subject,
                setting.join(" "),
                f.values.len(),
                num(f.min),
                num(f.mean),
                num(f.median),
                num(f.max),
                num(f.stddev),
            );
        }
    }
    out.push('\n');
}
