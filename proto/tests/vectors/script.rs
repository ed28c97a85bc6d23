//! The generator's side: a scripted peer that builds its frames with the
//! core's codec, feeds them to a real node and writes down, step by step,
//! what went in and what the node sent back.

use std::fmt::Write as _;

use oae_proto::verb::{self, Verb};
use oae_proto::wire::{
    self, Context, Frame, Knowledge, MAX_FRAME, Machine, Role, SLICE, Transition,
};
use oae_proto::{Event, Nanos, Node, PostedReceive, VerbId};

use super::iut::Setup;
use super::text::{REGION, counter, hex, received_text, result_text, verb_text};

/// The peer's node id in every vector.
pub const PEER_ID: u64 = 0x0B;

pub struct Script {
    pub name: &'static str,
    text: String,
    setup: Setup,
    iut: Node,
    now: Nanos,
    pub peer_epoch: u32,
    peer_order: u32,
    /// Highest order number of the IUT's frames the peer has received.
    pub peer_seen: u32,
    /// The IUT's frames, as the peer received them (the last is `last()`).
    sent: Vec<Vec<u8>>,
    verbs: u64,
}

/// A slot frame as the peer sends it.
pub struct SlotFrame {
    pub transition: Transition,
    pub slot: u16,
    pub seq: u16,
    pub previous_committed: bool,
    pub class: u8,
}

impl Script {
    pub fn new(
        name: &'static str,
        title: &str,
        clauses: &str,
        setup: Setup,
        peer_epoch: u32,
    ) -> Script {
        let mut text = String::new();
        writeln!(text, "oae-vector 1").unwrap();
        writeln!(text, "title {title}").unwrap();
        writeln!(text, "clause {clauses}").unwrap();
        writeln!(text, "{}", setup.line()).unwrap();
        Script {
            name,
            text,
            setup,
            iut: setup.node(),
            now: 0,
            peer_epoch,
            peer_order: 0,
            peer_seen: 0,
            sent: Vec::new(),
            verbs: 0,
        }
    }

    pub fn finish(self) -> (String, String) {
        assert!(
            self.iut.is_quiescent() || self.text.contains("\nidle"),
            "{}",
            self.name
        );
        (format!("{}.vec", self.name), self.text)
    }

    pub fn note(&mut self, comment: &str) {
        writeln!(self.text, "# {comment}").unwrap();
    }

    /// The peer's role: the other end of (epoch, node id).
    fn peer_role(&self) -> Role {
        if (self.setup.epoch, self.setup.id) < (self.peer_epoch, PEER_ID) {
            Role::Bob
        } else {
            Role::Alice
        }
    }

    /// Takes everything the IUT has to send now, then notes it is idle.
    pub fn drain(&mut self) -> Vec<Vec<u8>> {
        let mut buf = [0u8; MAX_FRAME];
        let mut out = Vec::new();
        while let Some(len) = self.iut.poll_transmit(0, self.now, &mut buf) {
            let frame = buf[..len].to_vec();
            writeln!(self.text, "send {}", hex(&frame)).unwrap();
            writeln!(self.text, "#   {}", summary(&frame)).unwrap();
            let parsed = Frame::parse(&frame).expect("the IUT sends well-formed frames");
            if parsed.order != 0 {
                self.peer_seen = parsed.order;
            }
            self.sent.push(frame.clone());
            out.push(frame);
        }
        writeln!(self.text, "idle").unwrap();
        out
    }

    /// Delivers `bytes` to the IUT as they are.
    pub fn recv(&mut self, bytes: &[u8]) {
        writeln!(self.text, "recv {}", hex(bytes)).unwrap();
        writeln!(self.text, "#   {}", summary(bytes)).unwrap();
        self.iut.handle_frame(0, bytes, self.now);
    }

    /// The peer's HELLO at `knowledge`, naming the IUT's epoch or 0.
    pub fn hello_bytes(&self, knowledge: Knowledge, names_iut: bool) -> Vec<u8> {
        let ctx = Context {
            class: 0,
            knowledge,
            role: self.peer_role(),
            transition: Transition::Hello,
            previous_committed: false,
            field: 0,
        };
        let receiver = if names_iut { self.setup.epoch } else { 0 };
        let mut buf = [0u8; MAX_FRAME];
        let len = wire::build(&mut buf, &ctx, (self.peer_epoch, receiver), (0, 0), |p| {
            p[..8].copy_from_slice(&PEER_ID.to_be_bytes());
            p[8..10].copy_from_slice(&self.setup.slots.to_be_bytes());
            p[10..12].copy_from_slice(&self.setup.credits.to_be_bytes());
            p[12] = self.setup.max_class;
        });
        buf[..len].to_vec()
    }

    pub fn hello(&mut self, knowledge: Knowledge, names_iut: bool) {
        let bytes = self.hello_bytes(knowledge, names_iut);
        self.recv(&bytes);
    }

    /// The usual start: the IUT's HELLO, the peer's answer naming it, the
    /// IUT's HELLO at level 2. Both ends are then up.
    pub fn up(&mut self) {
        self.drain();
        self.hello(Knowledge::KnowYou, true);
        self.drain();
    }

    /// A frame of the peer's after bring-up with its next order number;
    /// `fill` writes the payload.
    pub fn frame_bytes(&mut self, ctx: Context, fill: impl FnOnce(&mut [u8])) -> Vec<u8> {
        self.peer_order += 1;
        let mut buf = [0u8; MAX_FRAME];
        let len = wire::build(
            &mut buf,
            &ctx,
            (self.peer_epoch, self.setup.epoch),
            (self.peer_order, self.peer_seen),
            fill,
        );
        buf[..len].to_vec()
    }

    /// The context every frame of the peer's carries after bring-up.
    pub fn context(&self, transition: Transition, class: u8, field: u32) -> Context {
        Context {
            class,
            knowledge: Knowledge::KnowYouKnowMe,
            role: self.peer_role(),
            transition,
            previous_committed: false,
            field,
        }
    }

    pub fn slot_bytes(&mut self, f: SlotFrame, fill: impl FnOnce(&mut [u8])) -> Vec<u8> {
        let ctx = Context {
            previous_committed: f.previous_committed,
            ..self.context(f.transition, f.class, Context::slot_field(f.slot, f.seq))
        };
        self.frame_bytes(ctx, fill)
    }

    /// A REQUEST for `verb` on `slot`, `seq` (with `local` as the
    /// initiator's block of a bilateral swap).
    pub fn request(
        &mut self,
        slot: u16,
        seq: u16,
        previous_committed: bool,
        verb: &Verb,
        local: &[u8],
    ) {
        let class = verb.class(self.setup.max_class).expect("fits");
        let bytes = self.slot_bytes(
            SlotFrame {
                transition: Transition::Request,
                slot,
                seq,
                previous_committed,
                class,
            },
            |p| verb::encode_request(verb, local, p),
        );
        self.recv(&bytes);
    }

    /// COMMIT or REVERSE of `slot`, `seq`.
    pub fn decide(&mut self, transition: Transition, slot: u16, seq: u16) {
        let bytes = self.slot_bytes(
            SlotFrame {
                transition,
                slot,
                seq,
                previous_committed: false,
                class: 0,
            },
            |_| {},
        );
        self.recv(&bytes);
    }

    /// The peer's answer to the IUT's frame `frame`: `transition`, the
    /// reflected context, then `fill`.
    pub fn answer_bytes(
        &mut self,
        frame: &[u8],
        transition: Transition,
        fill: impl FnOnce(&mut [u8]),
    ) -> Vec<u8> {
        let f = Frame::parse(frame).expect("the IUT's frame");
        let ctx = Context {
            previous_committed: false,
            ..self.context(transition, f.context.class, f.context.field)
        };
        let reflected = wire::reflect(&f.raw_context);
        self.frame_bytes(ctx, |p| {
            p[..SLICE].copy_from_slice(&reflected);
            fill(&mut p[SLICE..]);
        })
    }

    pub fn answer(&mut self, frame: &[u8], transition: Transition, fill: impl FnOnce(&mut [u8])) {
        let bytes = self.answer_bytes(frame, transition, fill);
        self.recv(&bytes);
    }

    /// The IUT's user posts `verb` on the link.
    pub fn submit(&mut self, verb: Verb) {
        writeln!(self.text, "submit {}", verb_text(&verb)).unwrap();
        self.verbs += 1;
        self.iut
            .submit(0, VerbId(self.verbs), &verb)
            .expect("accepted");
    }

    /// The completion the IUT's user gets next.
    pub fn done(&mut self) {
        let result = loop {
            match self.iut.poll_event().expect("a completion") {
                Event::Completed { result, .. } => break result,
                Event::Link { .. } => continue,
                other => panic!("a completion expected, not {other:?}"),
            }
        };
        writeln!(self.text, "done {}", result_text(&result)).unwrap();
    }

    /// The IUT's user posts receive `id`: region 1's `len` bytes at
    /// `offset`.
    pub fn receive(&mut self, id: u64, offset: u32, len: u16) {
        writeln!(self.text, "receive {id} {offset} {len}").unwrap();
        let receive = PostedReceive {
            id,
            region: REGION.id,
            offset,
            len,
        };
        self.iut.post_receive(0, receive).expect("room for it");
    }

    /// The filled receive the IUT's user gets next.
    pub fn received(&mut self) -> (u64, u16, Option<u32>) {
        let got = loop {
            match self.iut.poll_event().expect("a filled receive") {
                Event::Received { id, len, imm, .. } => break (id, len, imm),
                Event::Link { .. } => continue,
                other => panic!("a filled receive expected, not {other:?}"),
            }
        };
        writeln!(self.text, "received {}", received_text(got)).unwrap();
        got
    }

    /// Checks a counter (its value is whatever the core has now).
    pub fn count(&mut self, name: &str) -> u64 {
        let value = counter(self.iut.link_stats(0).unwrap(), name);
        writeln!(self.text, "count {name} {value}").unwrap();
        value
    }

    /// Checks region 1's bytes at `offset`.
    pub fn memory(&mut self, offset: usize, len: usize) -> Vec<u8> {
        let bytes = self.iut.memory().bytes(1).unwrap()[offset..offset + len].to_vec();
        writeln!(self.text, "memory {offset} {}", hex(&bytes)).unwrap();
        bytes
    }

    /// Sets the clock and runs the timers due by then.
    pub fn at(&mut self, now: Nanos) {
        self.now = now;
        writeln!(self.text, "at {now}").unwrap();
        self.iut.handle_timeout(now);
    }

    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Moves the clock to the IUT's next timer until the IUT sends: shows
    /// it idle a nanosecond before each timer and returns what it sent
    /// when its timer ran.
    pub fn next_timer_frames(&mut self) -> Vec<Vec<u8>> {
        for _ in 0..64 {
            let due = self.iut.poll_timeout().expect("one link");
            assert!(due > self.now, "{}: a timer due now", self.name);
            if due > self.now + 1 {
                self.at(due - 1);
                assert!(
                    self.drain().is_empty(),
                    "{}: sent before its timer",
                    self.name
                );
            }
            self.at(due);
            let sent = self.drain();
            if !sent.is_empty() {
                return sent;
            }
        }
        panic!("{}: 64 timers and nothing sent", self.name)
    }

    /// The peer's epoch changes (it restarted): its order starts again.
    pub fn peer_restarts(&mut self, epoch: u32) {
        self.peer_epoch = epoch;
        self.peer_order = 0;
        self.peer_seen = 0;
    }
}

/// A frame in words, for the reader of a vector (comments: replayers
/// ignore them).
fn summary(bytes: &[u8]) -> String {
    let f = match Frame::parse(bytes) {
        Ok(f) => f,
        Err(m) => return format!("malformed: {}", m.name()),
    };
    let c = f.context;
    let mut s = format!(
        "{:?} class {} level {} {:?} epochs ({}, {}) order {} seen {}",
        c.transition,
        c.class,
        c.knowledge as u8,
        c.role,
        f.sender_epoch,
        f.receiver_epoch,
        f.order,
        f.seen
    );
    match c.transition.machine() {
        Machine::Slot => {
            write!(s, " slot {} seq {}", c.slot(), c.seq()).unwrap();
            if c.previous_committed {
                s.push_str(" previous-committed");
            }
        }
        _ if c.transition != Transition::Hello => write!(s, " field {}", c.field).unwrap(),
        _ => {}
    }
    s
}
