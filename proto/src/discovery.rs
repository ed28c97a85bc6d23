//! Discovery: a queue whose configuration names only interfaces finds its
//! neighbours (PROTOCOL.md, "Discovery", rules D1-D7).
//!
//! A node announces itself on each of its ports with a HELLO that names
//! no receiver, sent to [`ANNOUNCE_MAC`]. The node keeps a pool of links
//! made at start; a frame from a MAC no link is bound to binds that MAC to
//! a vacant link, which then brings itself up towards it as a configured
//! link would (and agrees its keys, on an authenticated queue). This
//! module only keeps the bindings: it sees MACs and times, never a frame's
//! body, so the driver shell that owns the ports asks it what to do with a
//! frame from a stranger.

use crate::config::Nanos;
use crate::wire::{self, Context, Knowledge, Role, Transition};
use crate::{LinkConfig, LinkId};

/// Where announcements go: a locally administered multicast MAC (both low
/// bits of the first octet set), which no vendor assigns.
pub const ANNOUNCE_MAC: [u8; 6] = [0x03, 0x0a, 0xe0, 0x00, 0x00, 0x01];

/// Whether a frame sent to `destination` is an announcement: any
/// multicast destination (D2), as OAE sends no other.
#[inline]
pub fn is_announcement(destination: &[u8]) -> bool {
    destination.first().is_some_and(|b| b & 1 == 1)
}

/// How a node discovers its neighbours.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DiscoveryConfig {
    /// Each port announces the node this often (the first at once).
    pub announce_every: Nanos,
    /// A neighbour whose link has not heard it this long after it was
    /// found is let go, its link vacant again (D6).
    pub forget_after: Nanos,
}

impl Default for DiscoveryConfig {
    fn default() -> DiscoveryConfig {
        DiscoveryConfig {
            announce_every: 1_000_000_000,
            forget_after: 10_000_000_000,
        }
    }
}

/// A neighbour bound to a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Neighbour {
    /// The port it was heard on.
    pub port: u8,
    pub mac: [u8; 6],
    pub found_at: Nanos,
}

/// What to do with a frame from a MAC no link is bound to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stranger {
    /// A new neighbour, bound to `link`: the caller sets the link up for
    /// its MAC and, unless the frame was an announcement, hands it the
    /// frame (D3).
    Found { link: LinkId, announcement: bool },
    /// No vacant link is left: the frame is dropped and counted (D5).
    NoVacantLink,
}

/// The bindings of a node's pool of links to its neighbours' MACs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Neighbours {
    cfg: DiscoveryConfig,
    /// Each link of the pool, by its id: vacant, or bound.
    links: Vec<Option<Neighbour>>,
    /// When each port announces next.
    next_announcement: Vec<Nanos>,
}

impl Neighbours {
    /// Bindings for links `0..links` over `ports` ports, all vacant.
    pub fn new(cfg: DiscoveryConfig, links: u16, ports: usize) -> Neighbours {
        Neighbours {
            cfg,
            links: vec![None; usize::from(links)],
            next_announcement: vec![0; ports],
        }
    }

    /// A frame arrived on `port` from `source`, to which no link is bound.
    pub fn stranger(
        &mut self,
        port: u8,
        source: [u8; 6],
        announcement: bool,
        now: Nanos,
    ) -> Stranger {
        debug_assert!(self.bound(port, source).is_none());
        // D3: the lowest vacant link, so a restarted node numbers its
        // links as it found them
        let Some(link) = self.links.iter().position(Option::is_none) else {
            return Stranger::NoVacantLink;
        };
        self.links[link] = Some(Neighbour {
            port,
            mac: source,
            found_at: now,
        });
        Stranger::Found {
            link: link as LinkId,
            announcement,
        }
    }

    /// The link bound to `source` on `port`, if any.
    pub fn bound(&self, port: u8, source: [u8; 6]) -> Option<LinkId> {
        self.links
            .iter()
            .position(|n| n.is_some_and(|n| n.port == port && n.mac == source))
            .map(|l| l as LinkId)
    }

    /// The neighbour bound to `link`, if any.
    pub fn neighbour(&self, link: LinkId) -> Option<&Neighbour> {
        self.links.get(usize::from(link))?.as_ref()
    }

    /// Whether `port` announces now; if so, its next announcement is
    /// scheduled (D1).
    pub fn announce_due(&mut self, port: usize, now: Nanos) -> bool {
        let next = &mut self.next_announcement[port];
        if now < *next {
            return false;
        }
        *next = now.saturating_add(self.cfg.announce_every);
        true
    }

    /// The next time something here is due: an announcement, or a found
    /// neighbour's time to be heard running out.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        let forget = self
            .links
            .iter()
            .flatten()
            .map(|n| n.found_at.saturating_add(self.cfg.forget_after));
        self.next_announcement.iter().copied().chain(forget).min()
    }

    /// The first neighbour found at least `forget_after` ago whose link
    /// `renewable` says never heard it (never learned its epoch) and holds
    /// nothing: unbound here, its
    /// link for the caller to renew (D6). A neighbour its link heard stays
    /// bound for the life of the node (D7), and one whose link holds a verb
    /// or a receive stays for now: each is looked at again
    /// `forget_after` later, so no deadline stays in the past.
    pub fn forget_one(
        &mut self,
        now: Nanos,
        mut renewable: impl FnMut(LinkId) -> bool,
    ) -> Option<(LinkId, Neighbour)> {
        let after = self.cfg.forget_after;
        for (l, binding) in self.links.iter_mut().enumerate() {
            let Some(n) = binding else {
                continue;
            };
            if now < n.found_at.saturating_add(after) {
                continue;
            }
            if renewable(l as LinkId) {
                return binding.take().map(|n| (l as LinkId, n));
            }
            n.found_at = now;
        }
        None
    }
}

/// Writes an announcement (D1) into `buf`: a sealed HELLO of class 0 from
/// `(node_id, epoch)` naming no receiver, with the offer of a link
/// configured as `cfg`. Returns its length.
pub fn write_announcement(buf: &mut [u8], node_id: u64, epoch: u32, cfg: &LinkConfig) -> usize {
    let ctx = Context {
        class: 0,
        knowledge: Knowledge::Nothing,
        role: Role::Alice,
        transition: Transition::Hello,
        previous_committed: false,
        field: 0,
    };
    let len = wire::compose(buf, &ctx, (epoch, 0), |p| {
        crate::link::write_hello_offer(p, node_id, cfg);
    });
    wire::seal(&mut buf[..len]);
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];
    const C: [u8; 6] = [2, 0, 0, 0, 0, 0xc];

    fn cfg() -> DiscoveryConfig {
        DiscoveryConfig {
            announce_every: 100,
            forget_after: 1_000,
        }
    }

    #[test]
    fn strangers_take_the_lowest_vacant_link_until_none_is_left() {
        let mut n = Neighbours::new(cfg(), 2, 1);
        let found = |link, announcement| Stranger::Found { link, announcement };
        assert_eq!(n.stranger(0, A, true, 5), found(0, true));
        assert_eq!(n.bound(0, A), Some(0));
        assert_eq!(n.bound(1, A), None, "a MAC is bound on its port");
        assert_eq!(n.stranger(0, B, false, 6), found(1, false));
        assert_eq!(n.stranger(0, C, false, 7), Stranger::NoVacantLink);
        assert_eq!(n.neighbour(1).map(|n| n.mac), Some(B));
    }

    #[test]
    fn only_neighbours_never_heard_are_forgotten_and_their_links_reused() {
        let mut n = Neighbours::new(cfg(), 2, 1);
        n.stranger(0, A, true, 0);
        n.stranger(0, B, true, 10);
        assert_eq!(n.poll_timeout(), Some(0), "the first announcement is due");
        assert!(n.announce_due(0, 0));
        assert_eq!(n.poll_timeout(), Some(100));
        // Not yet: a thousand has not passed.
        assert_eq!(n.forget_one(999, |_| true), None);
        n.announce_due(0, 999);
        // A's link heard it (D7); B's did not (D6).
        let forgotten = n.forget_one(1_010, |l| l == 1);
        assert_eq!(forgotten.map(|(l, n)| (l, n.mac)), Some((1, B)));
        assert_eq!(n.forget_one(1_010, |l| l == 1), None);
        assert_eq!(n.bound(0, A), Some(0));
        // A kept neighbour's deadline moved on: none is left in the past,
        // or a polling loop would find a timer due on every turn.
        n.announce_due(0, 1_010);
        assert!(
            n.poll_timeout().is_some_and(|t| t > 1_010),
            "{:?}",
            n.poll_timeout()
        );
        // The vacant link takes the next stranger.
        assert!(matches!(
            n.stranger(0, C, false, 5_000),
            Stranger::Found { link: 1, .. }
        ));
    }

    #[test]
    fn each_port_announces_on_its_own_schedule() {
        let mut n = Neighbours::new(cfg(), 1, 2);
        assert!(n.announce_due(0, 0));
        assert!(!n.announce_due(0, 99));
        assert!(n.announce_due(1, 50));
        assert!(n.announce_due(0, 100));
    }

    #[test]
    fn an_announcement_is_a_hello_naming_no_receiver() {
        let mut buf = [0u8; wire::MAX_FRAME];
        let len = write_announcement(&mut buf, 0x77, 9, &LinkConfig::default());
        let frame = wire::Frame::parse(&buf[..len]).expect("a well-formed frame");
        assert_eq!(frame.context.transition, Transition::Hello);
        assert_eq!((frame.sender_epoch, frame.receiver_epoch), (9, 0));
        assert_eq!(&frame.payload[..8], &0x77u64.to_be_bytes());
        assert!(is_announcement(&ANNOUNCE_MAC));
        assert!(!is_announcement(&A));
    }
}
