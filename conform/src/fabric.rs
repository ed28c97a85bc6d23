//! The fabric's frames as PROTOCOL.md ("Fabric") gives them, checked on
//! an IUT that runs the fabric (`--fabric`): ADVERT's layout, class,
//! view digest and poisoned reverse, and FORWARD's envelope.

use std::time::{Duration, Instant};

use crate::ctx::{Ctx, Outcome, fail};
use crate::frame::{self, Received};

pub const ADVERT: (u8, u8) = (3, 1);
pub const FORWARD: (u8, u8) = (3, 2);
const ADVERT_HEAD: usize = 33;
const ADVERT_ENTRY: usize = 14;
const NO_ROUTE: u8 = 64;

/// An ADVERT entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    node: u64,
    epoch: u32,
    hops: u8,
    reach: u8,
}

struct Advert {
    view: u64,
    digest: u64,
    /// The node ids the page covers.
    first: u64,
    last: u64,
    entries: Vec<Entry>,
}

fn decode(f: &Received) -> Result<Advert, String> {
    let p = f.payload();
    let count = usize::from(p[16]);
    let end = ADVERT_HEAD + count * ADVERT_ENTRY;
    if end > p.len() {
        return fail(format!(
            "{count} entries overflow a class {} frame",
            f.header.class
        ));
    }
    if p[end..].iter().any(|&b| b != 0) {
        return fail("bytes after the last entry are not zero");
    }
    let u64_at = |at: usize| u64::from_be_bytes(p[at..at + 8].try_into().unwrap());
    let entries = (0..count)
        .map(|i| {
            let at = ADVERT_HEAD + i * ADVERT_ENTRY;
            Entry {
                node: u64_at(at),
                epoch: u32::from_be_bytes(p[at + 8..at + 12].try_into().unwrap()),
                hops: p[at + 12],
                reach: p[at + 13],
            }
        })
        .collect::<Vec<Entry>>();
    let (first, last) = (u64_at(17), u64_at(25));
    if first > last {
        return fail(format!(
            "a page from node {first:#x} to {last:#x}: it ends before it starts"
        ));
    }
    if let Some(e) = entries.iter().find(|e| !(first..=last).contains(&e.node)) {
        return fail(format!(
            "entry {e:?} lies outside the page's range {first:#x}..={last:#x}"
        ));
    }
    if entries.windows(2).any(|w| w[0].node >= w[1].node) {
        return fail(format!("entries not in ascending node id: {entries:?}"));
    }
    Ok(Advert {
        view: u64_at(0),
        digest: u64_at(8),
        first,
        last,
        entries,
    })
}

/// FNV-1a, 64 bits, over each member's node id (u64) then epoch (u32),
/// both big-endian, members in ascending node id.
fn digest(members: &mut [(u64, u32)]) -> u64 {
    members.sort_unstable();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &(node, epoch) in members.iter() {
        for b in node.to_be_bytes().into_iter().chain(epoch.to_be_bytes()) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// One ADVERT against every rule the text gives it.
fn check_advert(c: &Ctx, f: &Received) -> Result<Advert, String> {
    let a = decode(f)?;
    let needed = ADVERT_HEAD + a.entries.len() * ADVERT_ENTRY;
    let smallest = (0..=4).find(|&k| frame::capacity(k) >= needed).unwrap_or(4);
    if f.header.class != smallest {
        return fail(format!(
            "an ADVERT of {} entries ({needed} bytes) in class {}: the smallest holding it is {smallest}",
            a.entries.len(),
            f.header.class
        ));
    }
    // Two nodes: one page names them all.
    if (a.first, a.last) != (0, u64::MAX) {
        return fail(format!(
            "a page covering {:#x}..={:#x} where one page holds the whole vector",
            a.first, a.last
        ));
    }
    let iut = c.peer.iut;
    let me = a.entries.iter().find(|e| e.node == iut.node_id);
    match me {
        Some(e) if (e.epoch, e.hops, e.reach) == (iut.epoch, 0, 0) => {}
        other => {
            return fail(format!(
                "the IUT's own entry is {other:?}, not the IUT at 0 hops"
            ));
        }
    }
    // The view's members: the sender and every node it names (each one
    // it can reach, at 16 where that is back through this link).
    let mut members: Vec<(u64, u32)> = a.entries.iter().map(|e| (e.node, e.epoch)).collect();
    if digest(&mut members) != a.digest {
        return fail(format!(
            "view digest {:#018x}; FNV-1a over members {members:?} is {:#018x}",
            a.digest,
            digest(&mut members.clone())
        ));
    }
    Ok(a)
}

/// The next ADVERT the IUT sends, waiting at most `limit`.
fn next_advert(c: &mut Ctx, limit: Duration) -> Option<Received> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(i) = c.peer.fabric.iter().position(|f| f.transition() == ADVERT) {
            return Some(c.peer.fabric.remove(i));
        }
        let left = deadline.checked_duration_since(Instant::now())?;
        c.peer.next(left.min(Duration::from_millis(20)));
    }
}

/// A1: the IUT advertises itself at once when the link is up, in one page
/// of the smallest class; once the tester has advertised itself, the IUT's
/// ADVERTs name it too, poisoned (its route goes out through this link),
/// under a view digest of both.
pub fn adverts(c: &mut Ctx) -> Outcome {
    let Some(first) = next_advert(c, Duration::from_secs(2)) else {
        return fail("no ADVERT within 2 s of the link coming up");
    };
    let first = check_advert(c, &first)?;
    let me = (c.peer.node_id, c.peer.epoch);
    // One page from node id 0 to the top, naming the tester alone: 47
    // bytes, class 1.
    let mut p = vec![0u8; frame::capacity(1)];
    p[..8].copy_from_slice(&1u64.to_be_bytes());
    p[8..16].copy_from_slice(&digest(&mut [me]).to_be_bytes());
    p[16] = 1;
    p[25..33].copy_from_slice(&u64::MAX.to_be_bytes());
    p[33..41].copy_from_slice(&me.0.to_be_bytes());
    p[41..45].copy_from_slice(&me.1.to_be_bytes());
    let h = c.peer.header(ADVERT, 1, 0);
    c.peer.send_frame(&h, &p);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let Some(f) = next_advert(c, left) else {
            return fail("after the tester's ADVERT, no ADVERT of the IUT's named the tester");
        };
        let a = check_advert(c, &f)?;
        let Some(tester) = a.entries.iter().find(|e| e.node == me.0) else {
            continue;
        };
        if (tester.epoch, tester.hops, tester.reach) != (me.1, NO_ROUTE, NO_ROUTE) {
            return fail(format!(
                "the IUT advertises the tester back on the link it came by as {tester:?}: \
                 poisoned reverse wants {NO_ROUTE} hops and reach"
            ));
        }
        if a.view <= first.view.max(1) && a.digest == first.digest {
            return fail("the view changed (the tester joined) but its number and digest did not");
        }
        return Ok(());
    }
}

/// A2: the path the IUT opens to the tester travels in FORWARD frames:
/// destination and source node ids, hops left, kind 1, the body's length
/// and a whole OAE frame of a smaller class than the link's.
pub fn forwards(c: &mut Ctx) -> Outcome {
    let deadline = Instant::now() + Duration::from_secs(5);
    let f = loop {
        if let Some(i) = c.peer.fabric.iter().position(|f| f.transition() == FORWARD) {
            break c.peer.fabric.remove(i);
        }
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return fail("no FORWARD in 5 s: the IUT opened no path to the tester");
        };
        c.peer.next(left.min(Duration::from_millis(20)));
    };
    let p = f.payload();
    let dest = u64::from_be_bytes(p[..8].try_into().unwrap());
    let source = u64::from_be_bytes(p[8..16].try_into().unwrap());
    let (hops_left, kind) = (p[16], p[17]);
    let len = usize::from(u16::from_be_bytes([p[18], p[19]]));
    if (dest, source) != (c.peer.node_id, c.peer.iut.node_id) {
        return fail(format!(
            "a FORWARD from {source} to {dest}: want from the IUT ({}) to the tester ({})",
            c.peer.iut.node_id, c.peer.node_id
        ));
    }
    if hops_left == 0 || kind != 1 {
        return fail(format!("a FORWARD with {hops_left} hops left, kind {kind}"));
    }
    let Some(body) = p.get(20..20 + len) else {
        return fail(format!("a FORWARD body of {len} bytes overflows its frame"));
    };
    if p[20 + len..].iter().any(|&b| b != 0) {
        return fail("bytes after a FORWARD's body are not zero");
    }
    match frame::parse(body) {
        Ok(inner) if inner.header.class < f.header.class || f.header.class == 4 => Ok(()),
        Ok(inner) => fail(format!(
            "a path frame of class {} in a FORWARD of class {}",
            inner.header.class, f.header.class
        )),
        Err(e) => fail(format!("the FORWARD's body is not an OAE frame: {e}")),
    }
}
