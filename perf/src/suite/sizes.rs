//! The message-size sweep: WRITEs and READs of 64 to 960 bytes (the most
//! one frame carries), a window of them in flight over a real AF_XDP
//! link, as perftest's `ib_write_bw -a` and `ib_read_bw -a` sweep sizes.
//! Verbs per second, frames per second (Mpps, side a's queue, both
//! ways), the payload in Gb/s and everything on the wire in Gb/s.

use std::fmt::Write as _;

use oae_pmd::netns::VethPair;

use crate::sweep::{self, SweepVerb};

use super::figures::{find, fmt_fig};
use super::outcome::Outcome;
use super::{Measurement, Options};

/// Verbs in flight: enough to fill the link, as perftest's default tx
/// depth of 128 does.
pub const WINDOW: usize = 64;

pub(super) fn trial(opts: &Options, verb: SweepVerb, bytes: usize) -> Result<Outcome, String> {
    let pair = VethPair::create("sizes").map_err(|e| format!("creating the veth pair: {e}"))?;
    let r = sweep::run(&pair, verb, bytes, WINDOW, opts.secs, opts.cores)?;
    if r.failed > 0 {
        return Err(format!(
            "{} of the verbs failed, the first {}",
            r.failed,
            r.first_failure.unwrap_or("?")
        ));
    }
    let mut o = Outcome::default();
    o.set("verbs_per_s", r.verbs_per_s());
    o.set("mpps", r.mpps());
    o.set("payload_gbps", r.payload_gbps(bytes));
    o.set("wire_gbps", r.wire_gbps());
    o.set("frame_bytes", r.bytes as f64 / r.frames.max(1) as f64);
    o.set("verbs", r.verbs as f64);
    o.headline = format!(
        "{} {bytes} B: {:.0} verbs/s, {:.3} Mpps, {:.3} Gb/s payload",
        verb.name(),
        r.verbs_per_s(),
        r.mpps(),
        r.payload_gbps(bytes)
    );
    Ok(o)
}

pub(super) fn section(out: &mut String, ms: &[Measurement]) {
    let _ = writeln!(
        out,
        "## Message sizes\n\nWRITE and READ of each size, {WINDOW} in flight, issued by an \
         application thread through side a's embedded queue (as a program linking the \
         dataplane would) to side b over AF_XDP; frames and bytes are side a's queue, both \
         ways, headers and answers included (median [min–max]; n, mean and standard \
         deviation in the last section):\n\n\
         | verb | bytes | frame bytes (avg) | verbs/s (k) | Mpps | payload Gb/s | wire Gb/s |\n\
         |---|---|---|---|---|---|---|"
    );
    for verb in [SweepVerb::Write, SweepVerb::Read] {
        for bytes in sweep::SIZES {
            let Some(m) = find(
                ms,
                super::Experiment::Sizes,
                "oae",
                &[("verb", verb.name()), ("bytes", &bytes.to_string())],
            ) else {
                continue;
            };
            let f =
                |name: &str, scale: f64, digits: usize| fmt_fig(m.metrics.get(name), scale, digits);
            let _ = writeln!(
                out,
                "| {} | {bytes} | {} | {} | {} | {} | {} |",
                verb.name(),
                f("frame_bytes", 1.0, 0),
                f("verbs_per_s", 1e3, 1),
                f("mpps", 1.0, 3),
                f("payload_gbps", 1.0, 3),
                f("wire_gbps", 1.0, 3),
            );
        }
    }
    out.push('\n');
}
