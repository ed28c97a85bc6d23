//! Routes learned from the neighbours' adverts (distance vector), and the
//! membership view they imply.
//!
//! Two distances per node travel in every advert: over *usable* links (up
//! and not suspected), which traffic follows and which changes within a
//! few round trips of a link falling silent; and over links that are
//! merely *up* (not yet declared unreachable after the links' configured
//! silent rounds), which the membership follows, so that a neighbour only
//! slow for a moment, anywhere in the fabric, does not change the view.
//!
//! Everything here is derived from the last advert of each usable
//! neighbour: a node keeps no route of its own making. That is what makes
//! it self-stabilising. Whatever the tables hold after a fault (or after
//! the simulator scrambles them), the next advert from every neighbour
//! replaces that neighbour's vector whole. A route to a node that no longer
//! exists can circle a loop, one hop longer each time, until it reaches
//! [`NO_ROUTE`] hops and is gone.

use crate::LinkId;

/// Most nodes a fabric holds (routes, paths, members).
pub const MAX_NODES: usize = 256;
/// The hop count that means "no route" (RIP's infinity): it bounds how long
/// a stale route can circle a loop, and the fabric's diameter (63 hops).
pub const NO_ROUTE: u8 = 64;

/// One incarnation of a node: a restart is a new member.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Member {
    pub node: u64,
    pub epoch: u32,
}

impl Member {
    /// Whether an ADVERT may name this member: epochs start at 1 (0 means
    /// "unknown" on the wire), and an ADVERT with an entry of epoch 0 is
    /// malformed, dropped whole. The tables take only such members, so
    /// whatever a node holds, every advert it sends is accepted.
    pub fn advertisable(&self) -> bool {
        self.epoch != 0
    }
}

/// An entry of a neighbour's advert.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Heard {
    pub member: Member,
    /// Hops over usable links ([`NO_ROUTE`]: none).
    pub hops: u8,
    /// Hops over links that are up ([`NO_ROUTE`]: none).
    pub reach: u8,
}

/// A page of a neighbour's advert (PROTOCOL.md A1), besides its entries:
/// the neighbour's view, and the node ids the page covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Page {
    /// The sender's view number and digest.
    pub view: (u64, u64),
    /// The node ids the page covers, both ends included: its entries are
    /// the sender's whole vector over that range.
    pub first: u64,
    pub last: u64,
}

/// How this node reaches another: the first link and the hops to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Route {
    pub member: Member,
    pub hops: u8,
    pub via: LinkId,
}

/// The live members as this node sees them: itself and every node it has a
/// route to. Numbered: the number grows whenever the members change here,
/// and a node takes any larger number a neighbour advertises, so after the
/// routes settle every node of a connected fabric holds the same view.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct View {
    pub number: u64,
    /// Sorted by node id.
    pub members: Vec<Member>,
}

impl View {
    /// A digest of the members, carried in adverts so neighbours can tell
    /// whether they agree (FNV-1a over node ids and epochs).
    pub fn digest(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for m in &self.members {
            for b in m
                .node
                .to_be_bytes()
                .into_iter()
                .chain(m.epoch.to_be_bytes())
            {
                h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        h
    }
}

/// What one neighbour last told this node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct Neighbour {
    /// The link is up (not declared unreachable): its neighbour's vector
    /// counts for the membership.
    up: bool,
    /// Up and not suspected: its neighbour's vector counts for routes.
    usable: bool,
    vector: Vec<Heard>,
    /// The neighbour's view number and digest.
    view: (u64, u64),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Routes {
    me: Member,
    neighbours: Vec<Neighbour>,
    /// Over usable links, sorted by node id; never holds `me`.
    table: Vec<Route>,
    /// Over links that are up, likewise: the other members.
    reach: Vec<Route>,
    view: View,
    /// `view.digest()`, kept as the members change: every ADVERT page
    /// carries it.
    digest: u64,
}

impl Routes {
    pub fn new(me: Member) -> Routes {
        let view = View {
            number: 1,
            members: vec![me],
        };
        Routes {
            me,
            neighbours: Vec::new(),
            table: Vec::with_capacity(MAX_NODES),
            reach: Vec::with_capacity(MAX_NODES),
            digest: view.digest(),
            view,
        }
    }

    pub fn me(&self) -> Member {
        self.me
    }

    pub fn table(&self) -> &[Route] {
        &self.table
    }

    pub fn view(&self) -> &View {
        &self.view
    }

    /// The view's number and digest, as ADVERTs carry them.
    pub fn view_id(&self) -> (u64, u64) {
        (self.view.number, self.digest)
    }

    /// Every usable neighbour advertises the view this node holds.
    pub fn agreed(&self) -> bool {
        let mine = self.view_id();
        self.neighbours
            .iter()
            .filter(|n| n.usable)
            .all(|n| n.view == mine)
    }

    pub fn route(&self, node: u64) -> Option<&Route> {
        self.table
            .binary_search_by_key(&node, |r| r.member.node)
            .ok()
            .map(|i| &self.table[i])
    }

    fn neighbour(&mut self, link: LinkId) -> &mut Neighbour {
        let i = usize::from(link);
        if self.neighbours.len() <= i {
            self.neighbours.resize_with(i + 1, Neighbour::default);
        }
        &mut self.neighbours[i]
    }

    /// Whether `link` is up, and whether it carries traffic now (up and
    /// not suspected). A suspected link's routes go at once, so traffic
    /// takes another path within a few round trips; its neighbour's vector
    /// still counts for the membership until the link is declared
    /// unreachable (failure detection counted in the link's rounds), so a
    /// neighbour that is only slow does not leave the view. A link that
    /// goes down forgets the vector: it is learned again, whole, from the
    /// neighbour's next advert. True if anything to advertise changed.
    pub fn set_state(&mut self, link: LinkId, up: bool, usable: bool) -> bool {
        let usable = up && usable;
        let n = self.neighbour(link);
        if (n.up, n.usable) == (up, usable) {
            return false;
        }
        n.up = up;
        n.usable = usable;
        if !up {
            n.vector.clear();
            n.view = (0, 0);
        }
        self.recompute()
    }

    /// A page of a neighbour's advert on `link`: its whole vector over the
    /// page's range of node ids, and its view. True if anything to
    /// advertise changed.
    ///
    /// The page replaces every entry of the range, whatever the copy held
    /// (in any order, after a fault): the pages of one advert cover every
    /// node id, so one whole advert leaves nothing of the copy before it.
    pub fn heard(&mut self, link: LinkId, page: &Page, entries: &[Heard]) -> bool {
        let n = self.neighbour(link);
        if !n.up {
            return false;
        }
        let view = page.view;
        n.view = view;
        let range = page.first..=page.last;
        n.vector.retain(|h| !range.contains(&h.member.node));
        let room = MAX_NODES.saturating_sub(n.vector.len());
        n.vector.extend(entries.iter().take(room).copied());
        n.vector.sort_unstable_by_key(|h| h.member.node);
        // A larger number is taken, and passed on.
        let adopted = view.0 > self.view.number;
        if adopted {
            self.view.number = view.0;
        }
        self.recompute() || adopted
    }

    /// The entries to advertise on `link` from node id `first` on, in
    /// ascending node id: this node at 0 hops and every node reached, each
    /// distance that goes out through `link` itself poisoned (split
    /// horizon with poisoned reverse: a neighbour never learns a way back
    /// through itself).
    pub fn advert(&self, link: LinkId, first: u64) -> impl Iterator<Item = Heard> + '_ {
        let hops = move |table: &[Route], node: u64| match table
            .binary_search_by_key(&node, |r| r.member.node)
        {
            Ok(i) if table[i].via != link => table[i].hops,
            _ => NO_ROUTE,
        };
        let entry = move |r: &Route| Heard {
            member: r.member,
            hops: hops(&self.table, r.member.node),
            reach: hops(&self.reach, r.member.node),
        };
        let me = self.me.node;
        let split = self.reach.partition_point(|r| r.member.node < me);
        let (below, above) = self.reach.split_at(split);
        below
            .iter()
            .map(entry)
            .chain(core::iter::once(Heard {
                member: self.me,
                hops: 0,
                reach: 0,
            }))
            .chain(above.iter().map(entry))
            .filter(move |h| h.member.node >= first)
    }

    /// Rebuilds both tables from the neighbours' vectors and renumbers the
    /// view if its members changed. True if anything a neighbour hears of
    /// (routes, reach, view) changed.
    fn recompute(&mut self) -> bool {
        let (before, reach_before) = (self.table.clone(), self.reach.clone());
        let mut table = core::mem::take(&mut self.table);
        table.clear();
        let mut reach = core::mem::take(&mut self.reach);
        reach.clear();
        for (l, n) in self.neighbours.iter().enumerate() {
            for h in n.vector.iter().filter(|h| h.member.node != self.me.node) {
                if n.usable {
                    offer(&mut table, h.member, h.hops, l as LinkId);
                }
                if n.up {
                    offer(&mut reach, h.member, h.reach, l as LinkId);
                }
            }
        }
        let mut changed = table != before || reach != reach_before;
        self.table = table;
        self.reach = reach;
        let members = self.members();
        if members != self.view.members {
            self.view.members = members;
            self.view.number = self.view.number.saturating_add(1);
            self.digest = self.view.digest();
            changed = true;
        }
        changed
    }

    /// This node and every node reached over links that are up.
    fn members(&self) -> Vec<Member> {
        let mut m: Vec<Member> = self.reach.iter().map(|r| r.member).collect();
        let at = m.partition_point(|x| x.node < self.me.node);
        m.insert(at, self.me);
        m
    }

    /// Overwrites every piece of control state with arbitrary values, as a
    /// memory fault might: the simulator checks that the fabric recovers.
    pub fn scramble(&mut self, mut next: impl FnMut() -> u64) {
        for n in &mut self.neighbours {
            n.view = (next(), next());
            n.vector.clear();
            for _ in 0..next() % 4 {
                n.vector.push(Heard {
                    member: Member {
                        node: next() % 8 + 0x0200_0000_0000,
                        epoch: next() as u32 % 4,
                    },
                    hops: (next() % 20) as u8,
                    reach: (next() % 20) as u8,
                });
            }
        }
        self.view.number = next() % 1000;
        self.view.members.clear();
        self.recompute();
    }
}

/// Takes a neighbour's offer of `member` at `hops` (its distance) through
/// `via` into `table` if it is better: the newest incarnation first, then
/// the fewest hops, then the first link offering it (a total order, so
/// equal inputs give equal tables).
///
/// A member no advert may name is never taken, whatever the stored vector
/// holds (a fault can put anything there): this node advertises its
/// tables, and an advert its neighbours refused would leave their copy of
/// its vector, and whatever stale routes and members it names, in place
/// for good instead of until its next advert.
fn offer(table: &mut Vec<Route>, member: Member, hops: u8, via: LinkId) {
    let hops = hops.saturating_add(1);
    if hops >= NO_ROUTE || !member.advertisable() {
        return;
    }
    let route = Route { member, hops, via };
    match table.binary_search_by_key(&member.node, |r| r.member.node) {
        Ok(i) => {
            let r = table[i];
            if (member.epoch, core::cmp::Reverse(hops))
                > (r.member.epoch, core::cmp::Reverse(r.hops))
            {
                table[i] = route;
            }
        }
        Err(i) if table.len() < MAX_NODES => table.insert(i, route),
        Err(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page covering every node id: a whole advert.
    fn whole(view: (u64, u64)) -> Page {
        Page {
            view,
            first: 0,
            last: u64::MAX,
        }
    }

    fn m(node: u64) -> Member {
        Member { node, epoch: 1 }
    }

    /// An entry `hops` away over usable links and over up ones.
    fn h(member: Member, hops: u8) -> Heard {
        Heard {
            member,
            hops,
            reach: hops,
        }
    }

    #[test]
    fn shortest_route_wins_and_poisoned_reverse_hides_it_from_its_link() {
        let mut r = Routes::new(m(1));
        r.set_state(0, true, true);
        r.set_state(1, true, true);
        r.heard(0, &whole((1, 0)), &[h(m(2), 0), h(m(3), 2)]);
        r.heard(1, &whole((1, 0)), &[h(m(3), 0)]);
        assert_eq!(r.route(3).map(|x| (x.via, x.hops)), Some((1, 1)));
        assert_eq!(r.route(2).map(|x| (x.via, x.hops)), Some((0, 1)));
        let on1: Vec<_> = r.advert(1, 0).collect();
        assert!(on1.contains(&h(m(3), NO_ROUTE)), "{on1:?}");
        assert!(on1.contains(&h(m(2), 1)), "{on1:?}");
        assert_eq!(r.view().members, vec![m(1), m(2), m(3)]);
    }

    #[test]
    fn a_suspected_link_loses_its_routes_and_a_dead_one_its_members() {
        let mut r = Routes::new(m(1));
        r.set_state(0, true, true);
        r.heard(0, &whole((1, 0)), &[h(m(2), 0), h(m(3), 1)]);
        let n = r.view().number;
        // Suspected: the routes go, the members stay, and the advert says
        // so: reached, but no route.
        assert!(r.set_state(0, true, false));
        assert!(r.route(2).is_none());
        assert_eq!(r.view().members, vec![m(1), m(2), m(3)]);
        assert_eq!(r.view().number, n);
        let out: Vec<_> = r.advert(1, 0).collect();
        assert!(
            out.contains(&Heard {
                member: m(3),
                hops: NO_ROUTE,
                reach: 2
            }),
            "{out:?}"
        );
        // Declared unreachable: the members go too, in a new view.
        r.set_state(0, false, false);
        assert_eq!(r.view().members, vec![m(1)]);
        assert!(r.view().number > n);
    }

    #[test]
    fn a_newer_incarnation_wins_over_fewer_hops() {
        let mut r = Routes::new(m(1));
        r.set_state(0, true, true);
        r.set_state(1, true, true);
        r.heard(0, &whole((1, 0)), &[h(m(2), 0)]);
        let newer = Member { node: 2, epoch: 2 };
        r.heard(1, &whole((1, 0)), &[h(newer, 3)]);
        assert_eq!(r.route(2).map(|x| (x.member, x.via)), Some((newer, 1)));
        assert_eq!(r.view().members, vec![m(1), newer]);
    }

    /// Whatever a fault leaves in the copies of the neighbours' vectors,
    /// every advert the node sends decodes at its neighbours: a refused
    /// one would leave their copy of its vector, and any phantom member it
    /// names, in place for good.
    #[test]
    fn every_advert_decodes_whatever_the_state() {
        use super::super::envelope::{decode_advert, encode_advert};
        use crate::wire::{MAX_CLASS, payload_capacity};
        for seed in 0..1000u64 {
            let mut r = Routes::new(m(1));
            for l in 0..3 {
                r.set_state(l, true, l != 2);
            }
            let mut x = seed;
            r.scramble(|| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                x >> 11
            });
            assert!(
                r.view().members.iter().all(Member::advertisable),
                "seed {seed}"
            );
            for l in 0..3 {
                let mut p = [0u8; payload_capacity(MAX_CLASS)];
                let view = (r.view().number, r.view().digest());
                let (n, next) = encode_advert(&mut p, view, 0, r.advert(l, 0));
                assert_eq!(next, None, "seed {seed}: one page holds it");
                let mut out = Vec::new();
                let page = decode_advert(&p, &mut out).map(|page| page.view);
                assert_eq!(page, Some(view), "seed {seed}");
                assert_eq!(out.len(), n, "seed {seed}");
            }
        }
    }

    #[test]
    fn scrambled_state_is_replaced_by_the_next_adverts() {
        let mut r = Routes::new(m(1));
        r.set_state(0, true, true);
        let mut x = 7u64;
        r.scramble(|| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            x >> 11
        });
        r.heard(0, &whole((5000, 0)), &[h(m(2), 0)]);
        assert_eq!(r.table().len(), 1);
        assert_eq!(r.view().members, vec![m(1), m(2)]);
        assert!(r.view().number >= 5000);
    }
}
