//! Payloads of the fabric's frames (state 3): ADVERT and FORWARD, and what
//! a FORWARD carries. Decoding borrows, never allocates and never panics.

use super::routes::{Heard, Member};
use crate::wire::SLICE;

/// ADVERT: view number u64, view digest u64, count u8, then count ×
/// (node u64, epoch u32, hops over usable links u8, hops over up links u8).
pub const ADVERT_HEAD: usize = 17;
pub const ADVERT_ENTRY: usize = 14;

/// FORWARD: destination u64, source u64, hops left u8, kind u8, body length
/// u16, then the body.
pub const FORWARD_HEAD: usize = 20;

/// What a FORWARD carries to its destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A frame of the end-to-end path between source and destination: a
    /// whole OAE frame with its own CRC.
    Path = 1,
    /// Settle an in-doubt transfer of the source's link to the destination.
    Resolve = 2,
    /// The destination's answer to a RESOLVE.
    Resolved = 3,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Path,
            2 => Kind::Resolve,
            3 => Kind::Resolved,
            _ => return None,
        })
    }
}

/// A parsed FORWARD payload.
#[derive(Clone, Copy, Debug)]
pub struct Forward<'a> {
    pub dst: u64,
    pub src: u64,
    pub hops_left: u8,
    pub kind: Kind,
    pub body: &'a [u8],
}

pub fn decode_forward(p: &[u8]) -> Option<Forward<'_>> {
    let head = p.get(..FORWARD_HEAD)?;
    let len = usize::from(u16::from_be_bytes([head[18], head[19]]));
    let body = p.get(FORWARD_HEAD..FORWARD_HEAD + len)?;
    if !crate::verb::all_zero(&p[FORWARD_HEAD + len..]) {
        return None;
    }
    Some(Forward {
        dst: u64::from_be_bytes(head[..8].try_into().ok()?),
        src: u64::from_be_bytes(head[8..16].try_into().ok()?),
        hops_left: head[16],
        kind: Kind::from_u8(head[17])?,
        body,
    })
}

/// Writes a FORWARD payload; `p` must hold `FORWARD_HEAD + body.len()`.
pub fn encode_forward(p: &mut [u8], dst: u64, src: u64, hops_left: u8, kind: Kind, body: &[u8]) {
    p[..8].copy_from_slice(&dst.to_be_bytes());
    p[8..16].copy_from_slice(&src.to_be_bytes());
    p[16] = hops_left;
    p[17] = kind as u8;
    p[18..20].copy_from_slice(&(body.len() as u16).to_be_bytes());
    p[FORWARD_HEAD..FORWARD_HEAD + body.len()].copy_from_slice(body);
}

/// The body of a RESOLVE (and, with an outcome, of a RESOLVED): which
/// incarnations the transfer was between, and the decision frame's context
/// slice exactly as the initiator would send it on the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Resolution {
    pub initiator_epoch: u32,
    pub target_epoch: u32,
    pub decision: [u8; SLICE],
}

pub const RESOLVE_LEN: usize = 16;
pub const RESOLVED_LEN: usize = 17;

/// The target's answer to a RESOLVE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The decision is carried out: committed, or every trace gone.
    Settled = 1,
    /// The target incarnation the transfer was made with is gone.
    TargetRestarted = 2,
}

impl Resolution {
    pub fn encode(&self, out: &mut [u8; RESOLVE_LEN]) {
        out[..4].copy_from_slice(&self.initiator_epoch.to_be_bytes());
        out[4..8].copy_from_slice(&self.target_epoch.to_be_bytes());
        out[8..].copy_from_slice(&self.decision);
    }

    pub fn decode(b: &[u8]) -> Option<Resolution> {
        if b.len() != RESOLVE_LEN {
            return None;
        }
        Some(Resolution {
            initiator_epoch: u32::from_be_bytes(b[..4].try_into().ok()?),
            target_epoch: u32::from_be_bytes(b[4..8].try_into().ok()?),
            decision: b[8..16].try_into().ok()?,
        })
    }

    pub fn encode_answer(&self, outcome: Outcome, out: &mut [u8; RESOLVED_LEN]) {
        let mut head = [0; RESOLVE_LEN];
        self.encode(&mut head);
        out[..RESOLVE_LEN].copy_from_slice(&head);
        out[RESOLVE_LEN] = outcome as u8;
    }

    pub fn decode_answer(b: &[u8]) -> Option<(Resolution, Outcome)> {
        if b.len() != RESOLVED_LEN {
            return None;
        }
        let outcome = match b[RESOLVE_LEN] {
            1 => Outcome::Settled,
            2 => Outcome::TargetRestarted,
            _ => return None,
        };
        Some((Resolution::decode(&b[..RESOLVE_LEN])?, outcome))
    }
}

/// Bytes an ADVERT of `entries` entries needs.
pub fn advert_len(entries: usize) -> usize {
    ADVERT_HEAD + entries * ADVERT_ENTRY
}

/// Writes an ADVERT payload from `entries` (as many as `p` holds); returns
/// how many went in.
pub fn encode_advert(
    p: &mut [u8],
    view: (u64, u64),
    entries: impl Iterator<Item = Heard>,
) -> usize {
    p[..8].copy_from_slice(&view.0.to_be_bytes());
    p[8..16].copy_from_slice(&view.1.to_be_bytes());
    let room = (p.len() - ADVERT_HEAD) / ADVERT_ENTRY;
    let mut n = 0;
    for h in entries.take(room.min(255)) {
        let at = ADVERT_HEAD + n * ADVERT_ENTRY;
        p[at..at + 8].copy_from_slice(&h.member.node.to_be_bytes());
        p[at + 8..at + 12].copy_from_slice(&h.member.epoch.to_be_bytes());
        p[at + 12] = h.hops;
        p[at + 13] = h.reach;
        n += 1;
    }
    p[16] = n as u8;
    n
}

/// Decodes an ADVERT into `out` (cleared first): the view, or `None` if the
/// payload is malformed.
pub fn decode_advert(p: &[u8], out: &mut Vec<Heard>) -> Option<(u64, u64)> {
    let head = p.get(..ADVERT_HEAD)?;
    let count = usize::from(head[16]);
    let end = advert_len(count);
    let entries = p.get(ADVERT_HEAD..end)?;
    if !crate::verb::all_zero(&p[end..]) {
        return None;
    }
    out.clear();
    for e in entries.chunks_exact(ADVERT_ENTRY) {
        let member = Member {
            node: u64::from_be_bytes(e[..8].try_into().ok()?),
            epoch: u32::from_be_bytes(e[8..12].try_into().ok()?),
        };
        if !member.advertisable() {
            return None;
        }
        out.push(Heard {
            member,
            hops: e[12],
            reach: e[13],
        });
    }
    Some((
        u64::from_be_bytes(head[..8].try_into().ok()?),
        u64::from_be_bytes(head[8..16].try_into().ok()?),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advert_round_trips_and_refuses_trailing_bytes() {
        let mut p = [0u8; 100];
        let entries = [
            Heard {
                member: Member { node: 7, epoch: 3 },
                hops: 0,
                reach: 0,
            },
            Heard {
                member: Member { node: 9, epoch: 1 },
                hops: 16,
                reach: 2,
            },
        ];
        assert_eq!(encode_advert(&mut p, (4, 5), entries.iter().copied()), 2);
        let mut out = Vec::new();
        assert_eq!(decode_advert(&p, &mut out), Some((4, 5)));
        assert_eq!(out, entries);
        p[99] = 1;
        assert_eq!(decode_advert(&p, &mut out), None);
    }

    #[test]
    fn forward_round_trips_and_refuses_a_body_past_the_payload() {
        let mut p = [0u8; 64];
        encode_forward(&mut p, 1, 2, 15, Kind::Resolve, &[9; 16]);
        let f = decode_forward(&p).unwrap();
        assert_eq!(
            (f.dst, f.src, f.hops_left, f.kind, f.body),
            (1, 2, 15, Kind::Resolve, &[9u8; 16][..])
        );
        p[18..20].copy_from_slice(&100u16.to_be_bytes());
        assert!(decode_forward(&p).is_none());
    }
}
