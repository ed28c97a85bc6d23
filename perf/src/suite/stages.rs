//! The report's account of where a verb's time goes, stage by stage, on
//! each side's polling core (the stage account every queue keeps).

use std::fmt::Write;

use oae_client::stats::Stage;

use super::Measurement;
use super::figures::fmt_fig;

/// One row per OAE trial and side that carries an account, medians over
/// the repetitions.
pub(super) fn section(out: &mut String, ms: &[Measurement]) {
    let with_account: Vec<&Measurement> = ms
        .iter()
        .filter(|m| m.subject == "oae" && m.metrics.contains_key("stage_a_total_ns"))
        .collect();
    if with_account.is_empty() {
        return;
    }
    out.push_str(
        "## Where a verb's time goes\n\nNanoseconds of each side's polling core per verb \
         completed, by stage, from the queue's stage account: one loop iteration in 64 \
         on average, at random intervals, timed at each stage's end, less a clock read's \
         own cost; only iterations that moved something, their time per frame received \
         times the frames that side received per verb. Side a runs the workload, side b answers. `link` is the sans-IO core with the memory; `idle \
         iter` is what one iteration that found nothing costs.\n\n",
    );
    let mut header = String::from("| trial | side |");
    let mut rule = String::from("|---|---|");
    for stage in Stage::ALL {
        let _ = write!(header, " {} |", stage.name().replace('_', " "));
        rule.push_str("---|");
    }
    let _ = writeln!(out, "{header} total | idle iter |\n{rule}---|---|");
    for m in with_account {
        let trial: Vec<String> = m
            .params
            .iter()
            .filter(|(k, _)| *k != "placement")
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        for side in ["a", "b"] {
            if !m.metrics.contains_key(&format!("stage_{side}_total_ns")) {
                continue;
            }
            let _ = write!(
                out,
                "| {} {} | {side} |",
                m.experiment.name(),
                trial.join(" ")
            );
            let fig = |name: &str| fmt_fig(m.metrics.get(&format!("stage_{side}_{name}")), 1.0, 0);
            for stage in Stage::ALL {
                let _ = write!(out, " {} |", fig(&format!("{}_ns", stage.name())));
            }
            let _ = writeln!(out, " {} | {} |", fig("total_ns"), fig("idle_iteration_ns"));
        }
    }
    out.push('\n');
}
