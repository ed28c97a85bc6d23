//! One port of a polling core: a driver queue on one interface, the links
//! whose peers it reaches, and its bursts. A core serves one port per
//! interface its links run over (one on a pair; one per neighbour in a
//! fabric of veth pairs).

use oae_common::MAX_OAE_FRAME_ON_WIRE;
use oae_pmd::{Burst, Driver, MAX_BURST};
use oae_proto::LinkId;
use oae_proto::wire::{ETH_HEADER_LEN, eth};
use oae_proto::{Nanos, TransmitBuffers};

use oae_proto::discovery::{ANNOUNCE_MAC, is_announcement};

use super::discovery::{Discovery, PortRef};
use super::stages::StageClock;
use super::tap::Tap;
use crate::transport::Transport;
use oae_client::stats::{PipelineCounters, Stage};
use oae_config::KickPolicy;

/// Adaptive kicks: frames held at most before a kick…
const KICK_AT_FRAMES: usize = 32;
/// …and loop iterations at most.
const KICK_AFTER_ITERATIONS: u32 = 4;

pub struct Port<D: Driver> {
    pub driver: D,
    /// The interface (or DPDK port) it runs on, as captures name it.
    name: String,
    mac: [u8; 6],
    /// The queue's links on this port, and each one's peer: those listed,
    /// or the neighbours found so far.
    links: Vec<(LinkId, [u8; 6])>,
    /// The link the next transmitted frame is asked of, round robin.
    tx_next: usize,
    rx: Burst<D::Buf>,
    tx: Burst<D::Buf>,
    /// Bytes of the frames in `tx`, counted as sent once they are.
    tx_filled_bytes: u64,
    spare: Burst<D::Buf>,
    adaptive_kicks: bool,
    /// Frames the last receive burst brought, and the one before.
    received: usize,
    received_before: usize,
    /// Iterations the frames waiting for a kick have been held.
    held_for: u32,
    /// Frames queued since the last kick (with adaptive kicks).
    unkicked: usize,
}

impl<D: Driver> Port<D> {
    pub fn new(
        mut driver: D,
        name: String,
        links: Vec<(LinkId, [u8; 6])>,
        kicks: KickPolicy,
    ) -> Port<D> {
        let adaptive_kicks = kicks == KickPolicy::Adaptive;
        driver.hold_kicks(adaptive_kicks);
        Port {
            name,
            mac: driver.mac(),
            driver,
            links,
            tx_next: 0,
            rx: Burst::new(),
            tx: Burst::new(),
            tx_filled_bytes: 0,
            spare: Burst::new(),
            adaptive_kicks,
            received: 0,
            received_before: 0,
            held_for: 0,
            unkicked: 0,
        }
    }

    /// With adaptive kicks, after a transmit: the frames queued wait for
    /// the next iteration while receive bursts keep coming (two in a row
    /// brought frames: their answers will join them), up to a bound; they
    /// go at once when one came back empty. One verb in flight never
    /// waits: its answer never finds a second burst behind it.
    fn settle_kick(&mut self) {
        if !self.adaptive_kicks {
            return;
        }
        if self.unkicked == 0 {
            return;
        }
        self.held_for += 1;
        let coming = self.received > 0 && self.received_before > 0;
        if !coming || self.unkicked >= KICK_AT_FRAMES || self.held_for > KICK_AFTER_ITERATIONS {
            self.flush();
        }
    }

    /// Sends whatever waits for a kick: before the core sleeps.
    pub fn flush(&mut self) {
        if self.unkicked > 0 {
            self.driver.kick();
            // A kick the device turned away (busy, ring full) leaves frames
            // on the ring: they are kicked again next iteration.
            self.unkicked = self.driver.unkicked();
        }
        self.held_for = 0;
    }

    /// Frames queued that no kick has sent yet.
    pub fn has_unsent(&self) -> bool {
        self.unkicked > 0
    }

    /// The queue's links on this port, and each one's peer MAC.
    pub fn links(&self) -> &[(LinkId, [u8; 6])] {
        &self.links
    }

    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The peer of `link`, if it is on this port.
    pub fn peer_of(&self, link: LinkId) -> Option<[u8; 6]> {
        self.links.iter().find(|(l, _)| *l == link).map(|(_, p)| *p)
    }

    /// Takes `link` off this port: discovery let its neighbour go.
    pub(super) fn unbind(&mut self, link: LinkId) {
        self.links.retain(|(l, _)| *l != link);
        self.tx_next = 0;
    }

    /// One receive burst, each OAE frame handed to the link of its source;
    /// on a queue that finds its neighbours, a stranger's frame binds it
    /// to a vacant link (`discovery`, with this port's index).
    pub(super) fn receive<T: Transport>(
        &mut self,
        transport: &mut T,
        counters: &mut PipelineCounters,
        mut tap: Option<(&mut Tap, u8)>,
        mut discovery: Option<(&mut Discovery, u8)>,
        clock: &mut StageClock,
        now: Nanos,
    ) {
        self.rx.clear();
        let n = self.driver.rx_burst(&mut self.rx);
        clock.mark(Stage::DriverReceive);
        self.received_before = self.received;
        self.received = n;
        if n == 0 {
            return;
        }
        counters.rx_frames += n as u64;
        for buf in &self.rx {
            let frame = self.driver.frame(buf);
            counters.rx_bytes += frame.len() as u64;
            let Some(payload) = eth::oae_payload(frame) else {
                counters.rx_not_oae += 1;
                continue;
            };
            let (destination, source) = (&frame[..6], &frame[6..12]);
            let announcement = is_announcement(destination);
            if announcement {
                counters.rx_announcements += 1;
                if let Some((tap, port)) = tap.as_mut() {
                    tap.record(*port, false, frame, now);
                }
            }
            // A handful of peers at most: a scan beats a map.
            let link = match self.links.iter().find(|(_, p)| p == source) {
                // D4: an announcement is never a link's, not even its
                // neighbour's (a HELLO naming no receiver would tell an up
                // link its peer lost it).
                Some(_) if announcement => continue,
                Some(&(link, _)) => link,
                None => {
                    let mine = announcement || destination == self.mac;
                    let Some((d, index)) = discovery.as_mut().filter(|_| mine) else {
                        counters.rx_foreign += 1;
                        continue;
                    };
                    let source: [u8; 6] = source.try_into().expect("six bytes");
                    let port = PortRef {
                        index: *index,
                        mac: self.mac,
                        name: &self.name,
                    };
                    let found = d.stranger(port, source, announcement, transport, counters, now);
                    let Some((link, announcement)) = found else {
                        continue;
                    };
                    self.links.push((link, source));
                    if announcement {
                        continue;
                    }
                    link
                }
            };
            if let Some((tap, port)) = tap.as_mut()
                && !announcement
            {
                tap.record(*port, false, frame, now);
            }
            transport.handle_frame(link, payload, now);
        }
        self.driver.release(&mut self.rx);
        clock.mark(Stage::Link);
    }

    /// Queues this node's announcement (docs/PROTOCOL.md, "Discovery", D1)
    /// for the next transmit burst, as `write` writes it; none if no
    /// buffer is free (the next is due in an `announce_every`).
    pub(super) fn announce(
        &mut self,
        write: impl FnOnce(&mut [u8]) -> Option<usize>,
        counters: &mut PipelineCounters,
        tap: Option<(&mut Tap, u8)>,
        now: Nanos,
    ) {
        if self.spare.is_empty() {
            self.driver.alloc(&mut self.spare, MAX_BURST);
        }
        if self.tx.is_full() {
            return;
        }
        let Some(mut buf) = self.spare.pop() else {
            return;
        };
        let frame = self
            .driver
            .frame_mut(&mut buf, MAX_OAE_FRAME_ON_WIRE as usize);
        let Some(len) = write(&mut frame[ETH_HEADER_LEN..]) else {
            self.spare.push(buf);
            return;
        };
        let frame = self.driver.frame_mut(&mut buf, ETH_HEADER_LEN + len);
        self.tx_filled_bytes += frame.len() as u64;
        eth::write_header(frame, ANNOUNCE_MAC, self.mac);
        if let Some((tap, port)) = tap {
            tap.record(port, true, frame, now);
        }
        counters.tx_announcements += 1;
        self.tx.push(buf);
    }

    /// Transmit bursts until the port's links have nothing more to send or
    /// the ring is full.
    pub(super) fn transmit<T: Transport>(
        &mut self,
        transport: &mut T,
        counters: &mut PipelineCounters,
        tap: Option<(&mut Tap, u8)>,
        clock: &mut StageClock,
        now: Nanos,
    ) {
        self.fill_and_send(transport, counters, tap, clock, now);
        self.settle_kick();
        clock.mark(Stage::DriverTransmit);
    }

    fn fill_and_send<T: Transport>(
        &mut self,
        transport: &mut T,
        counters: &mut PipelineCounters,
        mut tap: Option<(&mut Tap, u8)>,
        clock: &mut StageClock,
        now: Nanos,
    ) {
        let links = self.links.len();
        if links == 0 && self.tx.is_empty() {
            return;
        }
        loop {
            if self.spare.is_empty() {
                self.driver.alloc(&mut self.spare, MAX_BURST);
                clock.mark(Stage::DriverTransmit);
            }
            // Each link in turn fills what room is left of the burst in
            // one call; the burst is done when every link in a row has
            // nothing to send.
            let mut idle_links = 0;
            while self.tx.len() < MAX_BURST && !self.spare.is_empty() && idle_links < links {
                let (link, peer) = &self.links[self.tx_next];
                // No division per iteration: a loop that mostly finds
                // nothing to send pays for every instruction here.
                self.tx_next += 1;
                if self.tx_next == links {
                    self.tx_next = 0;
                }
                // Links share a burst: each takes its share per turn.
                let left = MAX_BURST - self.tx.len();
                let room = if links == 1 {
                    left
                } else {
                    left.div_ceil(links)
                };
                // The addresses are borrowed where they lie: copied into a
                // temporary, they were stored in halves and read back
                // whole, which stalls the load.
                let mut buffers = Buffers {
                    filled_bytes: &mut self.tx_filled_bytes,
                    driver: &mut self.driver,
                    spare: &mut self.spare,
                    tx: &mut self.tx,
                    peer,
                    mac: &self.mac,
                    tap: tap.as_mut().map(|(t, p)| (&mut **t, *p, now)),
                };
                if transport.poll_transmit_burst(*link, now, room, &mut buffers) == 0 {
                    idle_links += 1;
                } else {
                    idle_links = 0;
                }
            }
            clock.mark(Stage::TransmitBuild);
            let exhausted = idle_links >= links;
            if self.tx.is_empty() {
                return;
            }
            let queued = self.tx.len();
            let sent = self.driver.tx_burst(&mut self.tx);
            counters.tx_frames += sent as u64;
            // The bytes filled since the last burst, less those of the
            // frames still queued (only when the ring was full).
            let left: u64 = if sent == queued {
                0
            } else {
                self.tx
                    .iter()
                    .map(|b| self.driver.frame(b).len() as u64)
                    .sum()
            };
            counters.tx_bytes += self.tx_filled_bytes - left;
            self.tx_filled_bytes = left;
            self.unkicked += sent;
            if sent < queued {
                // Ring full: the rest goes out with the next burst.
                counters.tx_ring_full += 1;
                return;
            }
            if exhausted || self.spare.is_empty() {
                return;
            }
        }
    }
}

/// A port's spare transmit buffers, lent to the core one at a time and
/// written in place; each one filled joins the transmit burst with its
/// Ethernet header.
struct Buffers<'a, D: Driver> {
    driver: &'a mut D,
    spare: &'a mut Burst<D::Buf>,
    tx: &'a mut Burst<D::Buf>,
    /// Bytes of the frames filled and not yet counted as sent.
    filled_bytes: &'a mut u64,
    /// Destination and source MAC.
    peer: &'a [u8; 6],
    mac: &'a [u8; 6],
    /// A capture in progress, this port's index in it, and the time.
    tap: Option<(&'a mut Tap, u8, Nanos)>,
}

impl<D: Driver> TransmitBuffers for Buffers<'_, D> {
    fn next_buffer(&mut self) -> Option<&mut [u8]> {
        if self.tx.is_full() {
            return None;
        }
        let buf = self.spare.last_mut()?;
        // Room for the largest frame and, on an authenticated link, its
        // trailer.
        let frame = self.driver.frame_mut(buf, MAX_OAE_FRAME_ON_WIRE as usize);
        Some(&mut frame[ETH_HEADER_LEN..])
    }

    fn filled(&mut self, len: usize) {
        let mut buf = self.spare.pop().expect("a buffer was lent");
        let frame = self.driver.frame_mut(&mut buf, ETH_HEADER_LEN + len);
        *self.filled_bytes += frame.len() as u64;
        eth::write_header(frame, *self.peer, *self.mac);
        if let Some((tap, port, now)) = self.tap.as_mut() {
            tap.record(*port, true, frame, *now);
        }
        self.tx.push(buf);
    }
}
