//! The tester as the IUT's peer on the link: bring-up, the order slice,
//! and the liveness traffic every clause runs over (TICKs answered at
//! once, TICKs of its own while it is Alice), written from
//! docs/PROTOCOL.md.

use std::time::{Duration, Instant};

use crate::frame::{self, HELLO, Header, Received, TICK, TOCK};
use crate::wire::RawSocket;

/// What the IUT's HELLO says about it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Iut {
    pub epoch: u32,
    pub node_id: u64,
    pub slots: u16,
    pub credits: u16,
    pub max_class: u8,
    /// The peer epoch the IUT knew when it last said HELLO.
    pub knows_epoch: u32,
}

pub struct Peer {
    socket: RawSocket,
    iut_mac: [u8; 6],
    pub epoch: u32,
    pub node_id: u64,
    pub iut: Iut,
    pub bob: bool,
    order: u32,
    /// Highest order of the IUT's frames received (see `seen()`).
    pub seen: u32,
    /// Orders of the IUT's frames owed an answer the tester has not sent:
    /// `seen` must not pass the oldest (PROTOCOL.md, Order).
    owed: std::collections::BTreeSet<u32>,
    /// The IUT's last order number, to check it counts by one.
    iut_order: u32,
    /// Rules of "Frames" the IUT's frames broke, for clause F1.
    pub frame_faults: Vec<String>,
    last_sent: Instant,
    /// How long the tester, as Alice, stays quiet before it ticks, and the
    /// round length it advertises.
    pub round: Duration,
    tick_no: u32,
    pub ticks_answered: u64,
    pub iut_ticks: Vec<(Instant, u64)>,
    /// TOCKs the IUT sent, the last kept.
    pub tocks: u64,
    pub last_tock: Option<Received>,
    /// While `Some`, the IUT's TICKs are held here unanswered, with when
    /// each came, until `answer_held` (clause O3).
    pub held_ticks: Option<std::collections::VecDeque<(Instant, Received)>>,
    /// The fabric's frames (ADVERT, FORWARD) the IUT sent, set aside for
    /// the fabric clauses: no other clause expects them.
    pub fabric: Vec<Received>,
    /// On an authenticated link: seals what the tester sends and checks
    /// the trailer of everything it receives.
    pub auth: Option<crate::auth::Sealer>,
}

/// The longest the tester waits for an answer that is due.
pub const ANSWER: Duration = Duration::from_secs(2);

impl Peer {
    pub fn new(socket: RawSocket, iut_mac: [u8; 6], round: Duration) -> Peer {
        Peer {
            socket,
            iut_mac,
            epoch: 0,
            node_id: 0,
            iut: Iut::default(),
            bob: true,
            order: 0,
            seen: 0,
            owed: Default::default(),
            iut_order: 0,
            frame_faults: Vec::new(),
            last_sent: Instant::now(),
            round,
            tick_no: 0,
            ticks_answered: 0,
            iut_ticks: Vec::new(),
            tocks: 0,
            last_tock: None,
            held_ticks: None,
            fabric: Vec::new(),
            auth: None,
        }
    }

    /// A header of this end's after bring-up: level 2, its role, its next
    /// order number and what it has seen.
    pub fn header(&mut self, transition: (u8, u8), class: u8, field: u32) -> Header {
        self.order = match self.order.wrapping_add(1) {
            0 => 1,
            n => n,
        };
        Header {
            class,
            level: 2,
            bob: self.bob,
            transition,
            previous_committed: false,
            field,
            sender_epoch: self.epoch,
            receiver_epoch: self.iut.epoch,
            order: self.order,
            seen: self.seen(),
        }
    }

    /// What this end has seen: the highest order received such that every
    /// frame up to it owed an answer has had one.
    pub fn seen(&self) -> u32 {
        match self.owed.first() {
            Some(&oldest) => self.seen.min(oldest.wrapping_sub(1)),
            None => self.seen,
        }
    }

    /// A frame of the IUT's the tester owes an answer (REQUEST, COMMIT,
    /// REVERSE), until `answered`.
    pub fn owe(&mut self, f: &Received) {
        self.note_seen(f);
        self.owed.insert(f.header.order);
    }

    pub fn answered(&mut self, f: &Received) {
        self.owed.remove(&f.header.order);
    }

    /// Claims every frame received so far seen and answered: what a peer
    /// says when an owed frame's answer was lost (or, here, never sent).
    pub fn forget_owed(&mut self) {
        self.owed.clear();
    }

    /// Sends an OAE frame, sealed on an authenticated link.
    pub fn send(&mut self, bytes: &[u8]) {
        match &mut self.auth {
            Some(sealer) => {
                let sealed = sealer.seal(bytes);
                self.send_raw(&sealed);
            }
            None => self.send_raw(bytes),
        }
    }

    /// Sends `bytes` as they are, trailer or not.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        let to = self.iut_mac;
        self.send_to(to, bytes);
    }

    /// Sends `bytes` as they are to `destination` (an announcement's
    /// multicast MAC, say).
    pub fn send_to(&mut self, destination: [u8; 6], bytes: &[u8]) {
        self.socket
            .send(destination, bytes)
            .unwrap_or_else(|e| panic!("oae-conform: cannot send: {e}"));
        self.last_sent = Instant::now();
    }

    /// This end's epoch now.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// The tester's own MAC address.
    pub fn mac(&self) -> [u8; 6] {
        self.socket.mac
    }

    pub fn iut_mac(&self) -> [u8; 6] {
        self.iut_mac
    }

    /// The next frame from the IUT as it came, within `limit`: for the key
    /// agreement, before the link has a key.
    pub fn recv_raw(&mut self, limit: std::time::Duration) -> Option<Vec<u8>> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            let (from, bytes) = self
                .socket
                .recv(left)
                .unwrap_or_else(|e| panic!("oae-conform: cannot receive: {e}"))?;
            if from == self.iut_mac {
                return Some(bytes);
            }
        }
    }

    pub fn send_frame(&mut self, h: &Header, payload: &[u8]) -> Vec<u8> {
        let bytes = frame::build(h, payload);
        self.send(&bytes);
        bytes
    }

    /// A HELLO of this end's at `level`, naming the IUT's epoch or not.
    pub fn hello_bytes(&self, level: u8, names_iut: bool) -> Vec<u8> {
        self.hello_from(self.epoch, self.bob, level, names_iut)
    }

    /// A HELLO as an incarnation `epoch` of this end, with the role bit
    /// `bob`, would send it.
    pub fn hello_from(&self, epoch: u32, bob: bool, level: u8, names_iut: bool) -> Vec<u8> {
        let h = Header {
            class: 0,
            level,
            bob,
            transition: HELLO,
            previous_committed: false,
            field: 0,
            sender_epoch: epoch,
            receiver_epoch: if names_iut { self.iut.epoch } else { 0 },
            order: 0,
            seen: 0,
        };
        let slots = self.iut.slots.max(1);
        let mut p = self.node_id.to_be_bytes().to_vec();
        p.extend(slots.to_be_bytes());
        p.extend(self.iut.credits.clamp(1, slots).to_be_bytes());
        p.push(4);
        frame::build(&h, &p)
    }

    pub fn hello(&mut self, level: u8, names_iut: bool) -> Vec<u8> {
        let bytes = self.hello_bytes(level, names_iut);
        self.send(&bytes);
        bytes
    }

    /// Starts a new incarnation of this end: numbers from 1 again.
    pub fn restart(&mut self, epoch: u32, node_id: u64) {
        self.epoch = epoch;
        self.node_id = node_id;
        self.order = 0;
        self.seen = 0;
        self.owed.clear();
        self.iut_order = 0;
        self.bob = (self.iut.epoch, self.iut.node_id) < (epoch, node_id);
    }

    /// The next frame from the IUT that is not liveness traffic, waiting
    /// at most `limit`. TICKs are answered here (R14), TOCKs taken, and
    /// this end ticks while it is Alice and has been quiet for a round.
    pub fn next(&mut self, limit: Duration) -> Option<Received> {
        let deadline = Instant::now() + limit;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            if !self.bob && self.epoch != 0 && now - self.last_sent >= self.round / 2 {
                let _ = self.tick();
            }
            let wait = (deadline - now).min(self.round / 4);
            let Some((from, bytes)) = self
                .socket
                .recv(wait)
                .unwrap_or_else(|e| panic!("oae-conform: cannot receive: {e}"))
            else {
                continue;
            };
            if from != self.iut_mac {
                continue;
            }
            // K6: the IUT repeats its message 3 until a frame of the
            // tester's verifies under the agreed key; a HANDSHAKE has no
            // trailer.
            if self.auth.is_some()
                && frame::parse(&bytes).is_ok_and(|f| f.transition() == frame::HANDSHAKE)
            {
                continue;
            }
            let bytes = match self.auth.as_mut().map(|a| a.open(&bytes)) {
                None => bytes,
                Some(Ok(frame)) => frame,
                Some(Err(e)) => {
                    self.frame_faults
                        .push(format!("authentication: {e}: {}", frame::hex(&bytes)));
                    continue;
                }
            };
            let f = match frame::parse(&bytes) {
                Ok(f) => f,
                Err(e) => {
                    self.frame_faults
                        .push(format!("{e}: {}", frame::hex(&bytes)));
                    continue;
                }
            };
            self.check(&f);
            match f.transition() {
                TICK if f.header.sender_epoch == self.iut.epoch => {
                    if let Some(held) = &mut self.held_ticks {
                        held.push_back((Instant::now(), f.clone()));
                        self.owe(&f);
                    } else {
                        self.answer_tick(&f);
                    }
                    continue;
                }
                crate::fabric::ADVERT | crate::fabric::FORWARD => {
                    self.note_seen(&f);
                    if self.fabric.len() < 64 {
                        self.fabric.push(f);
                    }
                    continue;
                }
                TOCK => {
                    self.note_seen(&f);
                    self.tocks += 1;
                    self.last_tock = Some(f);
                    continue;
                }
                _ => return Some(f),
            }
        }
    }

    /// Records a frame of the IUT's as seen (one that is owed no answer,
    /// or whose answer has gone out).
    pub fn note_seen(&mut self, f: &Received) {
        if f.header.order != 0 && f.header.sender_epoch == self.iut.epoch {
            self.seen = f.header.order;
        }
    }

    /// Answers the oldest TICK held, late; false if none is.
    pub fn answer_held(&mut self) -> bool {
        let Some((_, tick)) = self.held_ticks.as_mut().and_then(|h| h.pop_front()) else {
            return false;
        };
        self.answered(&tick);
        self.answer_tick(&tick);
        true
    }

    fn answer_tick(&mut self, tick: &Received) {
        let round_len = u64::from_be_bytes(tick.payload()[..8].try_into().unwrap());
        self.iut_ticks.push((Instant::now(), round_len));
        // A late answer must not take back what was said seen before.
        if tick.header.order.wrapping_sub(self.seen) as i32 > 0 {
            self.seen = tick.header.order;
        }
        let h = self.header(TOCK, tick.header.class, tick.header.field);
        let reflected = frame::reflect(&tick.bytes[..8]);
        self.send_frame(&h, &reflected);
        self.ticks_answered += 1;
    }

    /// Sends a TICK (any end may: R14) and returns it.
    pub fn tick(&mut self) -> Vec<u8> {
        self.tick_no = self.tick_no.wrapping_add(1);
        let h = self.header(TICK, 0, self.tick_no);
        let round = (self.round.as_nanos() as u64).to_be_bytes();
        self.send_frame(&h, &round)
    }

    /// The rules a frame of the IUT's must follow whatever the state: an
    /// order number one more than the last of this incarnation, level 2
    /// and the other role after bring-up, the class of its transition.
    fn check(&mut self, f: &Received) {
        let h = f.header;
        let mut fault = |what: String| {
            self.frame_faults
                .push(format!("{what}: {}", frame::hex(&f.bytes)))
        };
        if h.transition == HELLO {
            if h.class != 0 {
                fault("HELLO of class ≠ 0".into());
            }
            return;
        }
        if h.sender_epoch != self.iut.epoch || h.receiver_epoch != self.epoch {
            return;
        }
        if h.level != 2 || h.bob == self.bob {
            fault(format!(
                "level {} role bob={} after bring-up",
                h.level, h.bob
            ));
        }
        if matches!(h.transition, TICK | frame::COMMIT | frame::REVERSE) && h.class != 0 {
            fault(format!(
                "{} of class {}",
                frame::name(h.transition),
                h.class
            ));
        }
        let expected = match self.iut_order.wrapping_add(1) {
            0 => 1,
            n => n,
        };
        if self.iut_order != 0 && h.order != expected {
            fault(format!("order {} after {}", h.order, self.iut_order));
        }
        self.iut_order = h.order;
    }

    /// Waits for the IUT's HELLO and learns from it.
    pub fn learn(&mut self, limit: Duration) -> Option<Received> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            let f = self.next(deadline - Instant::now())?;
            if f.transition() == HELLO {
                let p = f.payload();
                self.iut = Iut {
                    epoch: f.header.sender_epoch,
                    node_id: u64::from_be_bytes(p[..8].try_into().unwrap()),
                    slots: u16::from_be_bytes([p[8], p[9]]),
                    credits: u16::from_be_bytes([p[10], p[11]]),
                    max_class: p[12],
                    knows_epoch: f.header.receiver_epoch,
                };
                return Some(f);
            }
        }
        None
    }

    /// Receives until `limit` has passed; the frames that came (liveness
    /// traffic aside).
    pub fn quiet(&mut self, limit: Duration) -> Vec<Received> {
        let deadline = Instant::now() + limit;
        let mut got = Vec::new();
        while let Some(f) = self.next(deadline.saturating_duration_since(Instant::now())) {
            got.push(f);
        }
        got
    }
}
