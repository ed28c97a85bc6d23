//! Payloads of the fabric's frames (state 3): ADVERT and FORWARD, and what
//! a FORWARD carries. Decoding borrows, never allocates and never panics.

use super::routes::{Heard, Member, Page};
use crate::wire::SLICE;

/// ADVERT, one page of the sender's vector: view number u64, view digest
/// u64, count u8, the lowest and the highest node id the page covers (u64
/// each), then count × (node u64, epoch u32, hops over usable links u8,
/// hops over up links u8), node ids ascending and within the range.
pub const ADVERT_HEAD: usize = 33;
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

/// Entries an ADVERT page holds in a payload of `capacity` bytes.
pub fn advert_room(capacity: usize) -> usize {
    (capacity.saturating_sub(ADVERT_HEAD) / ADVERT_ENTRY).min(255)
}

/// Writes the ADVERT page that starts at node id `first` from `entries`
/// (the sender's vector from `first` on, ascending): as many as `p`
/// holds. Returns how many went in, and where the next page starts if
/// entries are left (the page then ends just below it).
pub fn encode_advert(
    p: &mut [u8],
    view: (u64, u64),
    first: u64,
    entries: impl Iterator<Item = Heard>,
) -> (usize, Option<u64>) {
    let room = advert_room(p.len());
    let mut entries = entries.peekable();
    let mut n = 0;
    while n < room
        && let Some(h) = entries.next()
    {
        let at = ADVERT_HEAD + n * ADVERT_ENTRY;
        p[at..at + 8].copy_from_slice(&h.member.node.to_be_bytes());
        p[at + 8..at + 12].copy_from_slice(&h.member.epoch.to_be_bytes());
        p[at + 12] = h.hops;
        p[at + 13] = h.reach;
        n += 1;
    }
    let next = entries.peek().map(|h| h.member.node);
    let last = next.map_or(u64::MAX, |node| node.saturating_sub(1));
    p[..8].copy_from_slice(&view.0.to_be_bytes());
    p[8..16].copy_from_slice(&view.1.to_be_bytes());
    p[16] = n as u8;
    p[17..25].copy_from_slice(&first.to_be_bytes());
    p[25..33].copy_from_slice(&last.to_be_bytes());
    (n, next)
}

/// Decodes an ADVERT page into `out` (cleared first), or `None` if the
/// payload is malformed: a range that ends before it starts, an entry
/// outside it, out of order or of epoch 0, or bytes after the entries.
pub fn decode_advert(p: &[u8], out: &mut Vec<Heard>) -> Option<Page> {
    let head = p.get(..ADVERT_HEAD)?;
    let count = usize::from(head[16]);
    let end = advert_len(count);
    let entries = p.get(ADVERT_HEAD..end)?;
    if !crate::verb::all_zero(&p[end..]) {
        return None;
    }
    let u64_at = |at: usize| u64::from_be_bytes(head[at..at + 8].try_into().expect("8 bytes"));
    let page = Page {
        view: (u64_at(0), u64_at(8)),
        first: u64_at(17),
        last: u64_at(25),
    };
    if page.first > page.last {
        return None;
    }
    out.clear();
    let mut below = None;
    for e in entries.chunks_exact(ADVERT_ENTRY) {
        let member = Member {
            node: u64::from_be_bytes(e[..8].try_into().ok()?),
            epoch: u32::from_be_bytes(e[8..12].try_into().ok()?),
        };
        let in_order = below.is_none_or(|b| member.node > b);
        let in_range = (page.first..=page.last).contains(&member.node);
        if !member.advertisable() || !in_order || !in_range {
            return None;
        }
        below = Some(member.node);
        out.push(Heard {
            member,
            hops: e[12],
            reach: e[13],
        });
    }
    Some(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(node: u64, hops: u8) -> Heard {
        Heard {
            member: Member { node, epoch: 1 },
            hops,
            reach: hops,
        }
    }

    #[test]
    fn advert_round_trips_and_refuses_trailing_bytes() {
        let mut p = [0u8; 100];
        let entries = [entry(7, 0), entry(9, 64)];
        let written = encode_advert(&mut p, (4, 5), 0, entries.iter().copied());
        assert_eq!(written, (2, None));
        let mut out = Vec::new();
        let page = Page {
            view: (4, 5),
            first: 0,
            last: u64::MAX,
        };
        assert_eq!(decode_advert(&p, &mut out), Some(page));
        assert_eq!(out, entries);
        p[99] = 1;
        assert_eq!(decode_advert(&p, &mut out), None);
    }

    /// Pages cover the node ids end to end: each ends just below the
    /// next one's first entry, the last at the top of the range.
    #[test]
    fn a_vector_too_long_for_one_page_goes_in_pages_that_cover_every_id() {
        let entries: Vec<Heard> = (1..=10).map(|n| entry(n * 10, 1)).collect();
        let mut p = [0u8; ADVERT_HEAD + 4 * ADVERT_ENTRY];
        let (mut first, mut pages, mut out) = (0, Vec::new(), Vec::new());
        loop {
            p.fill(0);
            let from = entries.iter().copied().filter(|h| h.member.node >= first);
            let (n, next) = encode_advert(&mut p, (1, 2), first, from);
            let page = decode_advert(&p, &mut out).expect("decodes");
            assert_eq!(out.len(), n);
            pages.push((page.first, page.last, out.len()));
            match next {
                Some(node) => first = node,
                None => break,
            }
        }
        assert_eq!(pages, [(0, 49, 4), (50, 89, 4), (90, u64::MAX, 2)]);
    }

    #[test]
    fn advert_pages_refuse_entries_out_of_order_or_out_of_range() {
        let mut out = Vec::new();
        let mut p = [0u8; 100];
        encode_advert(&mut p, (1, 1), 0, [entry(9, 1), entry(7, 1)].into_iter());
        assert_eq!(decode_advert(&p, &mut out), None, "descending");
        let mut p = [0u8; 100];
        encode_advert(&mut p, (1, 1), 8, [entry(7, 1)].into_iter());
        assert_eq!(decode_advert(&p, &mut out), None, "below the range");
        let mut p = [0u8; 100];
        encode_advert(&mut p, (1, 1), 8, [entry(9, 1)].into_iter());
        p[25..33].copy_from_slice(&5u64.to_be_bytes());
        assert_eq!(
            decode_advert(&p, &mut out),
            None,
            "a range ending before it starts"
        );
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
