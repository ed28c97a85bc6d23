//! A cut's failover read from a capture of one of its ends: from the last
//! answer that end received over the cut link to the first it received
//! over a path, by its polling core's clock. Unlike the longest stall of a
//! workload, this is the failover alone: the machine's scheduling noise
//! elsewhere in the run does not count in it.

use oae_client::control::{CaptureReport, from_hex};
use oae_common::ETH_HEADER_LEN;
use oae_proto::fabric::envelope::{Kind, decode_forward};
use oae_proto::wire::{Frame, Transition};

/// Microseconds from the last ECHO received on `link_port` to the first
/// answer from node `peer` received on another port after it: an ECHO of
/// the path, or a RESOLVED settling a verb the link left in doubt; `None`
/// if the capture holds no such pair.
pub fn failover_us(capture: &CaptureReport, link_port: &str, peer: u64) -> Option<f64> {
    let link = capture.ports.iter().position(|p| p == link_port)?;
    let mut last_on_link = None;
    for f in capture.frames.iter().filter(|f| !f.outbound) {
        let Some(bytes) = from_hex(&f.hex).ok() else {
            continue;
        };
        let Some(frame) = bytes
            .get(ETH_HEADER_LEN..)
            .and_then(|b| Frame::parse(b).ok())
        else {
            continue;
        };
        let transition = frame.context.transition;
        if usize::from(f.port) == link {
            if transition == Transition::Echo {
                last_on_link = Some(f.t_ns);
            }
            continue;
        }
        if transition != Transition::Forward {
            continue;
        }
        let Some(fwd) = decode_forward(frame.payload) else {
            continue;
        };
        let answer = match fwd.kind {
            Kind::Path => Frame::parse(fwd.body)
                .is_ok_and(|inner| inner.context.transition == Transition::Echo),
            Kind::Resolved => true,
            _ => false,
        };
        if let (true, Some(last)) = (answer && fwd.src == peer, last_on_link) {
            return Some(f.t_ns.saturating_sub(last) as f64 / 1e3);
        }
    }
    None
}
