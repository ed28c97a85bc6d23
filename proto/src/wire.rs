//! The OAE frame: what travels after the Ethernet II header.
//!
//! Layout (every multi-byte field big-endian; see `docs/PROTOCOL.md`):
//!
//! ```text
//! slice 0  context   protocol | liveness | state | transition | field (u32)
//! slice 1  epochs    sender epoch (u32) | receiver epoch (u32)
//! slice 2  order     sender's transmit order (u32) | highest order seen (u32)
//! slice 3…           payload
//! last 4 bytes       CRC32C over every byte before it
//! ```
//!
//! A frame is `64 << class` bytes; the class sits in the protocol byte, so the
//! size is never a free-form length. Parsing borrows the input and never
//! allocates; any byte string either parses or yields a [`Malformed`] reason.

/// IEEE 802 local experimental EtherType used by OAE frames (defined beside
/// the XDP program's types, which steer by it).
pub const ETHERTYPE: u16 = oae_common::OAE_ETHERTYPE;
/// Length of the Ethernet II header in front of every OAE frame.
pub const ETH_HEADER_LEN: usize = oae_common::ETH_HEADER_LEN;
/// The only protocol version this implementation speaks (2: the order
/// slice, which lets an ordered link find a loss without a timer).
pub const VERSION: u8 = 2;
/// Bytes in a slice, the unit every frame is made of.
pub const SLICE: usize = 8;
/// Smallest frame: eight slices.
pub const MIN_FRAME: usize = 64;
/// Largest class the codec understands (64 << 7 = 8192 bytes).
pub const MAX_CODEC_CLASS: u8 = 7;
/// Largest class this implementation sends or accepts: 1024 bytes fits a
/// 1500-byte MTU with the Ethernet header.
pub const MAX_CLASS: u8 = 4;
/// Largest frame this implementation sends or accepts.
pub const MAX_FRAME: usize = MIN_FRAME << MAX_CLASS;
/// Bytes before the payload: context, epoch and order slices.
pub const HEADER_LEN: usize = 3 * SLICE;
/// Where the order slice starts.
const ORDER_AT: usize = 2 * SLICE;
/// Bytes after the payload: the CRC32C.
pub const TRAILER_LEN: usize = 4;

/// Payload bytes carried by a frame of `class`.
pub const fn payload_capacity(class: u8) -> usize {
    (MIN_FRAME << class) - HEADER_LEN - TRAILER_LEN
}

/// Frame size of `class` in bytes.
pub const fn frame_len(class: u8) -> usize {
    MIN_FRAME << class
}

/// Smallest class whose payload holds `payload` bytes, if any up to `max_class`.
pub fn class_for_payload(payload: usize, max_class: u8) -> Option<u8> {
    (0..=max_class).find(|&c| payload_capacity(c) >= payload)
}

/// Which state machine a frame drives (the `state` byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Machine {
    /// The link itself: bring-up and liveness.
    Link,
    /// One slot's alternating-bit transfer channel.
    Slot,
    /// The fabric over the links: routes, membership, relayed frames.
    Fabric,
}

/// The `transition` byte: what this frame does to its state machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transition {
    /// Link bring-up; the liveness byte carries the sender's knowledge level.
    Hello,
    /// Liveness probe; the field carries the tick number.
    Tick,
    /// Reflection of a tick.
    Tock,
    /// Key agreement before bring-up (`handshake`); the field carries the
    /// message number.
    Handshake,
    /// Initiator → target: a verb, applied tentatively on arrival.
    Request,
    /// Target → initiator: reflected context and the verb's result.
    Echo,
    /// Initiator → target: the tentative transfer becomes permanent.
    Commit,
    /// Target → initiator: the commit has been applied.
    CommitAck,
    /// Target → initiator: the transfer was refused and left no trace.
    Refuse,
    /// Initiator → target: remove every trace of the transfer.
    Reverse,
    /// Target → initiator: every trace is gone.
    ReverseAck,
    /// To a neighbour: this node's routes and view of the membership.
    Advert,
    /// Hop by hop: a frame for another node, relayed towards it.
    Forward,
}

/// Direction bit of the transition byte.
const REVERSE_DIRECTION: u8 = 0x80;
/// Flag on initiator slot frames: the previous transfer on this slot was
/// committed by the initiator; the target must commit it before acting.
const PREVIOUS_COMMITTED: u8 = 0x40;
const TRANSITION_CODE: u8 = 0x1F;

impl Transition {
    pub fn machine(self) -> Machine {
        self.code().0
    }

    fn code(self) -> (Machine, u8) {
        match self {
            Transition::Hello => (Machine::Link, 1),
            Transition::Tick => (Machine::Link, 2),
            Transition::Tock => (Machine::Link, 3),
            Transition::Handshake => (Machine::Link, 4),
            Transition::Request => (Machine::Slot, 1),
            Transition::Echo => (Machine::Slot, 2),
            Transition::Commit => (Machine::Slot, 3),
            Transition::CommitAck => (Machine::Slot, 4),
            Transition::Refuse => (Machine::Slot, 5),
            Transition::Reverse => (Machine::Slot, 6),
            Transition::ReverseAck => (Machine::Slot, 7),
            Transition::Advert => (Machine::Fabric, 1),
            Transition::Forward => (Machine::Fabric, 2),
        }
    }

    fn from_code(machine: Machine, code: u8) -> Option<Transition> {
        Some(match (machine, code) {
            (Machine::Link, 1) => Transition::Hello,
            (Machine::Link, 2) => Transition::Tick,
            (Machine::Link, 3) => Transition::Tock,
            (Machine::Link, 4) => Transition::Handshake,
            (Machine::Slot, 1) => Transition::Request,
            (Machine::Slot, 2) => Transition::Echo,
            (Machine::Slot, 3) => Transition::Commit,
            (Machine::Slot, 4) => Transition::CommitAck,
            (Machine::Slot, 5) => Transition::Refuse,
            (Machine::Slot, 6) => Transition::Reverse,
            (Machine::Slot, 7) => Transition::ReverseAck,
            (Machine::Fabric, 1) => Transition::Advert,
            (Machine::Fabric, 2) => Transition::Forward,
            _ => return None,
        })
    }

    /// Reverse transitions undo or refuse; forward ones make progress.
    pub fn is_reverse(self) -> bool {
        matches!(
            self,
            Transition::Refuse | Transition::Reverse | Transition::ReverseAck
        )
    }

    /// Frames the initiator of a slot transfer sends (the rest come from the target).
    pub fn from_initiator(self) -> bool {
        matches!(
            self,
            Transition::Request | Transition::Commit | Transition::Reverse
        )
    }

    /// Frames whose payload starts with the reflected context of the frame they answer.
    pub fn reflects(self) -> bool {
        matches!(
            self,
            Transition::Tock
                | Transition::Echo
                | Transition::CommitAck
                | Transition::Refuse
                | Transition::ReverseAck
        )
    }
}

/// The sender's knowledge of the link, carried in the liveness byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Knowledge {
    /// I have not heard you.
    Nothing = 0,
    /// I know you (your epoch).
    KnowYou = 1,
    /// I know that you know me.
    KnowYouKnowMe = 2,
}

/// Which end of the link the sender is (chosen at bring-up by comparing
/// epochs, then node ids; no clock involved).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// Originates liveness ticks.
    Alice,
    /// Reflects them.
    Bob,
}

const LIVENESS_KNOWLEDGE: u8 = 0x03;
const LIVENESS_ROLE_BOB: u8 = 0x04;
const LIVENESS_RESERVED: u8 = !(LIVENESS_KNOWLEDGE | LIVENESS_ROLE_BOB);

/// Slice 0: the frame's mission, reflected back by the receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Context {
    /// log2(frame size / 64).
    pub class: u8,
    pub knowledge: Knowledge,
    pub role: Role,
    pub transition: Transition,
    /// Only meaningful on initiator slot frames; see [`PREVIOUS_COMMITTED`].
    pub previous_committed: bool,
    /// Slot frames: slot << 16 | sequence. Tick/tock: tick number.
    pub field: u32,
}

impl Context {
    /// A slot frame's context field.
    pub fn slot_field(slot: u16, seq: u16) -> u32 {
        (u32::from(slot) << 16) | u32::from(seq)
    }

    pub fn slot(&self) -> u16 {
        (self.field >> 16) as u16
    }

    /// Sequence number of the transfer on its slot; its low bit is the
    /// alternating bit, the upper bits keep reordered frames from aliasing.
    pub fn seq(&self) -> u16 {
        self.field as u16
    }

    pub fn encode(&self) -> [u8; SLICE] {
        let (machine, code) = self.transition.code();
        let mut transition = code;
        if self.transition.is_reverse() {
            transition |= REVERSE_DIRECTION;
        }
        if self.previous_committed {
            transition |= PREVIOUS_COMMITTED;
        }
        let role = match self.role {
            Role::Alice => 0,
            Role::Bob => LIVENESS_ROLE_BOB,
        };
        let f = self.field.to_be_bytes();
        [
            (VERSION << 4) | self.class,
            self.knowledge as u8 | role,
            match machine {
                Machine::Link => 1,
                Machine::Slot => 2,
                Machine::Fabric => 3,
            },
            transition,
            f[0],
            f[1],
            f[2],
            f[3],
        ]
    }

    // Inlined for the reason `Frame::parse` is.
    #[inline]
    pub fn decode(bytes: &[u8; SLICE]) -> Result<Context, Malformed> {
        let version = bytes[0] >> 4;
        if version != VERSION {
            return Err(Malformed::UnknownVersion);
        }
        let class = bytes[0] & 0x0F;
        if class > MAX_CODEC_CLASS {
            return Err(Malformed::BadClass);
        }
        let liveness = bytes[1];
        if liveness & LIVENESS_RESERVED != 0 {
            return Err(Malformed::ReservedBits);
        }
        let knowledge = match liveness & LIVENESS_KNOWLEDGE {
            0 => Knowledge::Nothing,
            1 => Knowledge::KnowYou,
            2 => Knowledge::KnowYouKnowMe,
            _ => return Err(Malformed::ReservedBits),
        };
        let role = if liveness & LIVENESS_ROLE_BOB != 0 {
            Role::Bob
        } else {
            Role::Alice
        };
        let machine = match bytes[2] {
            1 => Machine::Link,
            2 => Machine::Slot,
            3 => Machine::Fabric,
            _ => return Err(Malformed::UnknownTransition),
        };
        let transition = Transition::from_code(machine, bytes[3] & TRANSITION_CODE)
            .ok_or(Malformed::UnknownTransition)?;
        if (bytes[3] & REVERSE_DIRECTION != 0) != transition.is_reverse() {
            return Err(Malformed::WrongDirection);
        }
        let previous_committed = bytes[3] & PREVIOUS_COMMITTED != 0;
        if previous_committed && !transition.from_initiator() {
            return Err(Malformed::ReservedBits);
        }
        if bytes[3] & !(TRANSITION_CODE | REVERSE_DIRECTION | PREVIOUS_COMMITTED) != 0 {
            return Err(Malformed::ReservedBits);
        }
        Ok(Context {
            class,
            knowledge,
            role,
            transition,
            previous_committed,
            field: u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]),
        })
    }
}

/// The reflection of a context slice: its two 32-bit halves swapped, so the
/// sender sees which half was its own and which the peer's.
pub fn reflect(slice: &[u8; SLICE]) -> [u8; SLICE] {
    let mut out = [0; SLICE];
    out[..4].copy_from_slice(&slice[4..]);
    out[4..].copy_from_slice(&slice[..4]);
    out
}

/// Why a byte string is not an acceptable OAE frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Malformed {
    /// Shorter than its class says (or than one frame).
    Truncated,
    /// Longer than its class says: slice count does not match the class.
    WrongLength,
    UnknownVersion,
    /// Class beyond what the codec or this implementation accepts.
    BadClass,
    BadCrc,
    UnknownTransition,
    /// Direction bit disagrees with the transition.
    WrongDirection,
    ReservedBits,
    /// Fields valid one by one but not together (e.g. a zero sender epoch).
    Inconsistent,
    /// The payload does not decode for this transition.
    BadPayload,
}

impl Malformed {
    pub const ALL: [Malformed; 10] = [
        Malformed::Truncated,
        Malformed::WrongLength,
        Malformed::UnknownVersion,
        Malformed::BadClass,
        Malformed::BadCrc,
        Malformed::UnknownTransition,
        Malformed::WrongDirection,
        Malformed::ReservedBits,
        Malformed::Inconsistent,
        Malformed::BadPayload,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Malformed::Truncated => "truncated",
            Malformed::WrongLength => "wrong_length",
            Malformed::UnknownVersion => "unknown_version",
            Malformed::BadClass => "bad_class",
            Malformed::BadCrc => "bad_crc",
            Malformed::UnknownTransition => "unknown_transition",
            Malformed::WrongDirection => "wrong_direction",
            Malformed::ReservedBits => "reserved_bits",
            Malformed::Inconsistent => "inconsistent",
            Malformed::BadPayload => "bad_payload",
        }
    }
}

/// A parsed frame borrowing its bytes.
#[derive(Clone, Copy, Debug)]
pub struct Frame<'a> {
    pub context: Context,
    /// The context slice exactly as received, for reflection.
    pub raw_context: [u8; SLICE],
    pub sender_epoch: u32,
    pub receiver_epoch: u32,
    /// The sender's link-wide transmit number for this frame (0 on HELLO).
    pub order: u32,
    /// The highest order number of the receiver's frames that the sender
    /// had received, and answered where an answer was due, when it sent
    /// this frame (0: none).
    pub seen: u32,
    pub payload: &'a [u8],
}

impl<'a> Frame<'a> {
    /// Parses one OAE frame (without Ethernet header). Never panics.
    // R1: a frame that does not parse is malformed, and why
    // Inlined: returned through memory, the result is written a byte at a
    // time and read back wider, which stalls the load.
    #[inline]
    pub fn parse(bytes: &'a [u8]) -> Result<Frame<'a>, Malformed> {
        if bytes.len() < MIN_FRAME {
            return Err(Malformed::Truncated);
        }
        let raw_context: [u8; SLICE] = bytes[..SLICE].try_into().expect("length checked");
        let context = Context::decode(&raw_context)?;
        if context.class > MAX_CLASS {
            return Err(Malformed::BadClass);
        }
        let len = frame_len(context.class);
        if bytes.len() < len {
            return Err(Malformed::Truncated);
        }
        if bytes.len() > len {
            return Err(Malformed::WrongLength);
        }
        let (body, crc) = bytes.split_at(len - TRAILER_LEN);
        let crc = u32::from_be_bytes(crc.try_into().expect("four bytes"));
        if crate::crc::crc32c(body) != crc {
            return Err(Malformed::BadCrc);
        }
        let sender_epoch = u32::from_be_bytes(body[8..12].try_into().expect("four bytes"));
        let receiver_epoch = u32::from_be_bytes(body[12..16].try_into().expect("four bytes"));
        let order = u32::from_be_bytes(body[ORDER_AT..ORDER_AT + 4].try_into().expect("four"));
        let seen = u32::from_be_bytes(body[ORDER_AT + 4..HEADER_LEN].try_into().expect("four"));
        // HELLO and HANDSHAKE precede any order; every other frame has a
        // place in it.
        let hello = matches!(
            context.transition,
            Transition::Hello | Transition::Handshake
        );
        if sender_epoch == 0 || hello != (order == 0) || (hello && seen != 0) {
            return Err(Malformed::Inconsistent);
        }
        Ok(Frame {
            context,
            raw_context,
            sender_epoch,
            receiver_epoch,
            order,
            seen,
            payload: &body[HEADER_LEN..],
        })
    }
}

/// Writes a frame into `buf` in place: header, epochs, the order slice
/// (`order`, `seen`), the payload written by `fill` (which gets the whole
/// payload area, zeroed), and the CRC. Returns the frame length. `buf` must
/// hold `frame_len(context.class)` bytes.
pub fn build(
    buf: &mut [u8],
    context: &Context,
    epochs: (u32, u32),
    order: (u32, u32),
    fill: impl FnOnce(&mut [u8]),
) -> usize {
    let len = compose(buf, context, epochs, fill);
    stamp_order(&mut buf[..len], order.0, order.1);
    seal(&mut buf[..len]);
    len
}

/// [`build`] without the order slice and the CRC: for a frame whose place in
/// the link's order is known only when it is sent ([`stamp_order`], then
/// [`seal`]).
pub fn compose(
    buf: &mut [u8],
    context: &Context,
    (sender_epoch, receiver_epoch): (u32, u32),
    fill: impl FnOnce(&mut [u8]),
) -> usize {
    let len = frame_len(context.class);
    let frame = &mut buf[..len];
    frame[..SLICE].copy_from_slice(&context.encode());
    frame[8..12].copy_from_slice(&sender_epoch.to_be_bytes());
    frame[12..16].copy_from_slice(&receiver_epoch.to_be_bytes());
    frame[ORDER_AT..HEADER_LEN].fill(0);
    let payload = &mut frame[HEADER_LEN..len - TRAILER_LEN];
    payload.fill(0);
    fill(payload);
    len
}

/// Writes the order slice of a frame (the CRC must be computed after).
pub fn stamp_order(frame: &mut [u8], order: u32, seen: u32) {
    frame[ORDER_AT..ORDER_AT + 4].copy_from_slice(&order.to_be_bytes());
    frame[ORDER_AT + 4..HEADER_LEN].copy_from_slice(&seen.to_be_bytes());
}

/// Whether order number `a` comes after `b`, in serial-number arithmetic
/// (RFC 1982): numbers wrap at 2^32, and of two numbers less than 2^31
/// apart the one ahead is the later.
pub fn order_after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// Recomputes the CRC of a complete frame after its body was edited.
pub fn seal(frame: &mut [u8]) {
    let len = frame.len();
    let crc = crate::crc::crc32c(&frame[..len - TRAILER_LEN]);
    frame[len - TRAILER_LEN..].copy_from_slice(&crc.to_be_bytes());
}

/// Ethernet II framing around OAE frames; the dataplane's drivers use it,
/// the core itself only sees OAE frames.
pub mod eth {
    use super::{ETH_HEADER_LEN, ETHERTYPE};

    /// Writes the Ethernet II header for an OAE frame.
    pub fn write_header(buf: &mut [u8], dst: [u8; 6], src: [u8; 6]) {
        buf[..6].copy_from_slice(&dst);
        buf[6..12].copy_from_slice(&src);
        buf[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
    }

    /// The OAE frame inside an Ethernet frame, if it is one.
    pub fn oae_payload(frame: &[u8]) -> Option<&[u8]> {
        if frame.len() < ETH_HEADER_LEN {
            return None;
        }
        (u16::from_be_bytes([frame[12], frame[13]]) == ETHERTYPE).then(|| &frame[ETH_HEADER_LEN..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(transition: Transition, class: u8) -> Context {
        Context {
            class,
            knowledge: Knowledge::KnowYouKnowMe,
            role: Role::Bob,
            transition,
            previous_committed: transition.from_initiator(),
            field: Context::slot_field(513, 0xBEEF),
        }
    }

    #[test]
    fn context_round_trips_for_every_transition() {
        use Transition::*;
        for t in [
            Hello, Tick, Tock, Handshake, Request, Echo, Commit, CommitAck, Refuse, Reverse,
            ReverseAck, Advert, Forward,
        ] {
            let c = sample(t, 2);
            assert_eq!(Context::decode(&c.encode()), Ok(c));
        }
    }

    #[test]
    fn frame_round_trips_and_crc_detects_a_flip() {
        let c = sample(Transition::Request, 1);
        let mut buf = [0u8; 256];
        let len = build(&mut buf, &c, (7, 9), (3, 2), |p| {
            p[..3].copy_from_slice(b"abc")
        });
        assert_eq!(len, 128);
        let f = Frame::parse(&buf[..len]).unwrap();
        assert_eq!((f.context, f.sender_epoch, f.receiver_epoch), (c, 7, 9));
        assert_eq!((f.order, f.seen), (3, 2));
        assert_eq!(&f.payload[..3], b"abc");
        assert_eq!(f.payload.len(), payload_capacity(1));
        buf[40] ^= 0x10;
        assert_eq!(Frame::parse(&buf[..len]).unwrap_err(), Malformed::BadCrc);
    }

    #[test]
    fn size_comes_from_class_only() {
        let c = sample(Transition::Echo, 0);
        let mut buf = [0u8; 256];
        let len = build(&mut buf, &c, (1, 1), (1, 0), |_| {});
        assert_eq!(
            Frame::parse(&buf[..len - 8]).unwrap_err(),
            Malformed::Truncated
        );
        assert_eq!(
            Frame::parse(&buf[..len + 8]).unwrap_err(),
            Malformed::WrongLength
        );
    }

    #[test]
    fn unknown_version_and_wrong_direction_are_refused() {
        let c = sample(Transition::Reverse, 0);
        let mut s = c.encode();
        s[0] = (1 << 4) | (s[0] & 0x0F);
        assert_eq!(Context::decode(&s), Err(Malformed::UnknownVersion));
        let mut s = c.encode();
        s[3] &= !REVERSE_DIRECTION;
        assert_eq!(Context::decode(&s), Err(Malformed::WrongDirection));
    }

    #[test]
    fn hello_has_no_order_and_everything_else_has_one() {
        let mut buf = [0u8; 64];
        let hello = sample(Transition::Hello, 0);
        let hello = Context {
            previous_committed: false,
            field: 0,
            ..hello
        };
        let len = build(&mut buf, &hello, (1, 0), (0, 0), |_| {});
        assert!(Frame::parse(&buf[..len]).is_ok());
        let len = build(&mut buf, &hello, (1, 0), (5, 0), |_| {});
        assert_eq!(
            Frame::parse(&buf[..len]).unwrap_err(),
            Malformed::Inconsistent
        );
        let echo = sample(Transition::Echo, 0);
        let len = build(&mut buf, &echo, (1, 1), (0, 4), |_| {});
        assert_eq!(
            Frame::parse(&buf[..len]).unwrap_err(),
            Malformed::Inconsistent
        );
    }

    #[test]
    fn order_comparison_wraps() {
        assert!(order_after(2, 1));
        assert!(!order_after(1, 1));
        assert!(!order_after(1, 2));
        assert!(order_after(3, u32::MAX - 2));
        assert!(!order_after(u32::MAX - 2, 3));
    }

    #[test]
    fn reflection_swaps_halves_and_is_an_involution() {
        let s = [1, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(reflect(&s), [5, 6, 7, 8, 1, 2, 3, 4]);
        assert_eq!(reflect(&reflect(&s)), s);
    }
}
