//! Atomic verbs: what an initiator asks of a peer's registered memory, how a
//! request and its result are laid out in a frame's payload, and every way a
//! verb can fail.

use crate::wire::{self, SLICE};

/// Most bytes one WRITE, READ or BILATERAL SWAP moves (fits a 1024-byte frame).
pub const MAX_BLOCK: usize = 960;
/// Most words one MULTI-WORD COMMIT compares and swaps.
pub const MAX_MCAS_WORDS: usize = 8;

/// Inline, fixed-capacity bytes: verbs carry data without allocating.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Block {
    len: u16,
    bytes: [u8; MAX_BLOCK],
}

impl Block {
    pub const EMPTY: Block = Block {
        len: 0,
        bytes: [0; MAX_BLOCK],
    };

    /// `None` if `data` is longer than [`MAX_BLOCK`].
    pub fn new(data: &[u8]) -> Option<Block> {
        if data.len() > MAX_BLOCK {
            return None;
        }
        let mut b = Block::EMPTY;
        b.bytes[..data.len()].copy_from_slice(data);
        b.len = data.len() as u16;
        Some(b)
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// Makes `self` a copy of `src`, writing only the bytes either uses.
    fn assign(&mut self, src: &Block) {
        // Bytes past a block's length stay zero, as `Block::new` leaves
        // them, so equal blocks compare and hash equal.
        let old = self.len();
        self.bytes[..src.len()].copy_from_slice(src.as_slice());
        if old > src.len() {
            self.bytes[src.len()..old].fill(0);
        }
        self.len = src.len;
    }

    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl core::fmt::Debug for Block {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Block({} bytes)", self.len)
    }
}

/// A region on the target: its id and the access key it was registered with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RegionRef {
    pub id: u16,
    pub key: u32,
}

/// One word of a MULTI-WORD COMMIT.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct McasWord {
    /// Byte offset, 8-aligned.
    pub offset: u32,
    pub expected: u64,
    pub new: u64,
}

/// A verb against a peer's registered memory. Offsets are bytes; atomic
/// words are 8-byte aligned little-endian u64s.
#[allow(
    clippy::large_enum_variant,
    reason = "data travels inline so submitting a verb never allocates"
)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verb {
    /// The target's block `target[offset..+len]` lands in the initiator's
    /// `local_region[local_offset..+len]`; the completion carries its length.
    Read {
        target: RegionRef,
        offset: u32,
        local_region: u16,
        local_offset: u32,
        len: u16,
    },
    Write {
        target: RegionRef,
        offset: u32,
        data: Block,
    },
    CompareAndSwap {
        target: RegionRef,
        offset: u32,
        expected: u64,
        new: u64,
    },
    FetchAdd {
        target: RegionRef,
        offset: u32,
        add: u64,
    },
    Swap {
        target: RegionRef,
        offset: u32,
        new: u64,
    },
    /// Compare-and-swap of up to [`MAX_MCAS_WORDS`] words: all or nothing.
    MultiWordCommit {
        target: RegionRef,
        count: u8,
        words: [McasWord; MAX_MCAS_WORDS],
    },
    /// The initiator's block `local_region[local_offset..+len]` and the
    /// target's block `target[offset..+len]` trade places: both commit or neither.
    BilateralSwap {
        target: RegionRef,
        offset: u32,
        local_region: u16,
        local_offset: u32,
        len: u16,
    },
    /// A message: delivered whole, once, into the receive the target's
    /// application posted first on this link, with `imm` beside it (as
    /// RDMA's SEND WITH IMMEDIATE). Refused at once with
    /// [`Refusal::NoReceive`] if none is posted.
    Send { imm: Option<u32>, data: Block },
}

/// Declares the one list of verb kinds: each kind's code on the wire, its
/// short name (JSON's `"op"`, `oaectl verb`, metrics' `verb` label, the
/// workload's `verbs`) and its name in docs/PROTOCOL.md. Everything else
/// that lists kinds derives from [`Opcode::ALL`] or matches on `Opcode`
/// exhaustively, so a new kind is added here and the compiler names every
/// place that must handle it.
macro_rules! opcodes {
    ($($kind:ident = $code:literal, $name:literal, $spec:literal;)+) => {
        /// Operation codes on the wire (docs/PROTOCOL.md, "Verbs").
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum Opcode {
            $($kind = $code,)+
        }

        impl Opcode {
            /// Every kind, in code order.
            pub const ALL: [Opcode; [$($code),+].len()] = [$(Opcode::$kind),+];

            /// The stable short name.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Opcode::$kind => $name,)+
                }
            }

            /// The name docs/PROTOCOL.md's table gives it.
            pub const fn spec_name(self) -> &'static str {
                match self {
                    $(Opcode::$kind => $spec,)+
                }
            }

            /// The kind with this code on the wire, if any.
            pub const fn from_code(code: u8) -> Option<Opcode> {
                match code {
                    $($code => Some(Opcode::$kind),)+
                    _ => None,
                }
            }
        }
    };
}

opcodes! {
    Read = 1, "read", "READ";
    Write = 2, "write", "WRITE";
    CompareAndSwap = 3, "cas", "CAS";
    FetchAdd = 4, "faa", "FETCH_ADD";
    Swap = 5, "swap", "SWAP";
    MultiWordCommit = 6, "mcas", "MULTI-WORD COMMIT";
    BilateralSwap = 7, "bswap", "BILATERAL SWAP";
    Send = 8, "send", "SEND";
}

// Codes run from 1 with no gap, so `index` is dense and matches the C
// library's `OAE_OP_*` numbers; a retired code would need `index` spelt out.
const _: () = {
    let mut i = 0;
    while i < Opcode::COUNT {
        assert!(Opcode::ALL[i] as usize == i + 1);
        i += 1;
    }
};

impl Opcode {
    /// How many kinds there are: the length of per-kind tables.
    pub const COUNT: usize = Opcode::ALL.len();

    /// Every kind's short name, in code order.
    pub const NAMES: [&'static str; Opcode::COUNT] = {
        let mut names = [""; Opcode::COUNT];
        let mut i = 0;
        while i < Opcode::COUNT {
            names[i] = Opcode::ALL[i].name();
            i += 1;
        }
        names
    };

    /// The code on the wire (and in the host ring's records).
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// A dense index from 0, for per-kind tables.
    pub const fn index(self) -> usize {
        self as usize - 1
    }
}

impl std::fmt::Display for Opcode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A verb name that is none of [`Opcode::NAMES`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownVerb(pub String);

impl std::fmt::Display for UnknownVerb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unknown verb '{}': use {}",
            self.0,
            Opcode::NAMES.join(", ")
        )
    }
}

impl std::error::Error for UnknownVerb {}

impl std::str::FromStr for Opcode {
    type Err = UnknownVerb;

    fn from_str(name: &str) -> Result<Opcode, UnknownVerb> {
        Opcode::ALL
            .into_iter()
            .find(|op| op.name() == name)
            .ok_or_else(|| UnknownVerb(name.to_string()))
    }
}

impl Verb {
    /// Makes `self` a copy of `src`. Where both hold the same verb, only the
    /// bytes `src` uses are written (a WRITE's block for its length, a word
    /// verb's few fields): `*self = *src` moves the whole kilobyte enum,
    /// whichever verb it holds, and a verb store reuses its places for the
    /// same verbs again and again.
    pub fn assign(&mut self, src: &Verb) {
        match (&mut *self, src) {
            (
                Verb::Write {
                    target,
                    offset,
                    data,
                },
                Verb::Write {
                    target: t,
                    offset: o,
                    data: d,
                },
            ) => {
                (*target, *offset) = (*t, *o);
                data.assign(d);
            }
            (Verb::Send { imm, data }, Verb::Send { imm: i, data: d }) => {
                *imm = *i;
                data.assign(d);
            }
            (
                Verb::CompareAndSwap {
                    target,
                    offset,
                    expected,
                    new,
                },
                Verb::CompareAndSwap {
                    target: t,
                    offset: o,
                    expected: e,
                    new: n,
                },
            ) => (*target, *offset, *expected, *new) = (*t, *o, *e, *n),
            (
                Verb::FetchAdd {
                    target,
                    offset,
                    add,
                },
                Verb::FetchAdd {
                    target: t,
                    offset: o,
                    add: a,
                },
            ) => (*target, *offset, *add) = (*t, *o, *a),
            (
                Verb::Swap {
                    target,
                    offset,
                    new,
                },
                Verb::Swap {
                    target: t,
                    offset: o,
                    new: n,
                },
            ) => (*target, *offset, *new) = (*t, *o, *n),
            (
                Verb::Read {
                    target,
                    offset,
                    local_region,
                    local_offset,
                    len,
                },
                Verb::Read {
                    target: t,
                    offset: o,
                    local_region: lr,
                    local_offset: lo,
                    len: n,
                },
            ) => (*target, *offset, *local_region, *local_offset, *len) = (*t, *o, *lr, *lo, *n),
            (dst, src) => *dst = *src,
        }
    }

    /// The initiator's own block a READ or BILATERAL SWAP lands in, as
    /// `(region, offset, len)`. A swap's is locked from sending until the
    /// outcome is known (its bytes are sent); a READ's only while its bytes
    /// land, as an RDMA READ's buffer is not held.
    pub fn local_block(&self) -> Option<(u16, u32, u16)> {
        match *self {
            Verb::Read {
                local_region,
                local_offset,
                len,
                ..
            }
            | Verb::BilateralSwap {
                local_region,
                local_offset,
                len,
                ..
            } => Some((local_region, local_offset, len)),
            _ => None,
        }
    }

    pub fn opcode(&self) -> Opcode {
        match self {
            Verb::Read { .. } => Opcode::Read,
            Verb::Write { .. } => Opcode::Write,
            Verb::CompareAndSwap { .. } => Opcode::CompareAndSwap,
            Verb::FetchAdd { .. } => Opcode::FetchAdd,
            Verb::Swap { .. } => Opcode::Swap,
            Verb::MultiWordCommit { .. } => Opcode::MultiWordCommit,
            Verb::BilateralSwap { .. } => Opcode::BilateralSwap,
            Verb::Send { .. } => Opcode::Send,
        }
    }

    /// The target's region the verb acts on; a SEND names none (it lands
    /// wherever the target's application posted its receive).
    pub fn target(&self) -> Option<RegionRef> {
        match *self {
            Verb::Read { target, .. }
            | Verb::Write { target, .. }
            | Verb::CompareAndSwap { target, .. }
            | Verb::FetchAdd { target, .. }
            | Verb::Swap { target, .. }
            | Verb::MultiWordCommit { target, .. }
            | Verb::BilateralSwap { target, .. } => Some(target),
            Verb::Send { .. } => None,
        }
    }

    /// Convenience constructor; `None` if more than [`MAX_MCAS_WORDS`] words.
    pub fn multi_word_commit(target: RegionRef, words: &[McasWord]) -> Option<Verb> {
        if words.is_empty() || words.len() > MAX_MCAS_WORDS {
            return None;
        }
        let mut w = [McasWord::default(); MAX_MCAS_WORDS];
        w[..words.len()].copy_from_slice(words);
        Some(Verb::MultiWordCommit {
            target,
            count: words.len() as u8,
            words: w,
        })
    }

    /// Whether a MULTI-WORD COMMIT names one offset twice. A target takes
    /// such a request (the last write to the word wins, PROTOCOL.md V1),
    /// but an application that asks for it has asked for two new values of
    /// one word: the dataplane refuses to send it.
    pub fn names_a_word_twice(&self) -> bool {
        let Verb::MultiWordCommit { count, words, .. } = self else {
            return false;
        };
        let words = &words[..usize::from(*count).min(MAX_MCAS_WORDS)];
        words
            .iter()
            .enumerate()
            .any(|(k, w)| words[..k].iter().any(|v| v.offset == w.offset))
    }

    /// Bytes of request payload this verb needs.
    pub fn request_len(&self) -> usize {
        REQUEST_HEADER
            + match self {
                Verb::Read { .. } => 4 + 2,
                Verb::Write { data, .. } => 4 + 2 + data.len(),
                Verb::CompareAndSwap { .. } => 4 + 8 + 8,
                Verb::FetchAdd { .. } | Verb::Swap { .. } => 4 + 8,
                Verb::MultiWordCommit { count, .. } => usize::from(*count) * 20,
                Verb::BilateralSwap { len, .. } => 4 + 2 + usize::from(*len),
                Verb::Send { data, .. } => 2 + data.len(),
            }
    }

    /// Bytes of echo payload (after the reflected slice) its result needs.
    pub fn result_len(&self) -> usize {
        match self {
            Verb::Read { len, .. } | Verb::BilateralSwap { len, .. } => 2 + usize::from(*len),
            Verb::Write { .. } | Verb::Send { .. } => 0,
            Verb::CompareAndSwap { .. } | Verb::FetchAdd { .. } | Verb::Swap { .. } => 8,
            Verb::MultiWordCommit { count, .. } => 2 + 8 * usize::from(*count),
        }
    }

    /// The frame class both the request and its echo fit in (they share it,
    /// so the target never needs a bigger buffer than the initiator chose).
    pub fn class(&self, max_class: u8) -> Option<u8> {
        let need = self.request_len().max(SLICE + self.result_len());
        wire::class_for_payload(need, max_class)
    }
}

/// Request header: opcode, word count (MCAS) or 0, region id, region key.
/// A SEND's: opcode, flags ([`SEND_IMMEDIATE`]), two zero bytes, immediate
/// data (zero without the flag).
const REQUEST_HEADER: usize = 8;

/// A SEND's flag: its immediate data is present.
const SEND_IMMEDIATE: u8 = 1;

/// A request as decoded by the target; the data of a WRITE or BSWAP stays
/// borrowed from the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request<'a> {
    Read {
        target: RegionRef,
        offset: u32,
        len: u16,
    },
    Write {
        target: RegionRef,
        offset: u32,
        data: &'a [u8],
    },
    CompareAndSwap {
        target: RegionRef,
        offset: u32,
        expected: u64,
        new: u64,
    },
    FetchAdd {
        target: RegionRef,
        offset: u32,
        add: u64,
    },
    Swap {
        target: RegionRef,
        offset: u32,
        new: u64,
    },
    MultiWordCommit {
        target: RegionRef,
        count: u8,
        words: [McasWord; MAX_MCAS_WORDS],
    },
    BilateralSwap {
        target: RegionRef,
        offset: u32,
        data: &'a [u8],
    },
    Send {
        imm: Option<u32>,
        data: &'a [u8],
    },
}

impl Request<'_> {
    /// The kind of verb requested.
    pub fn opcode(&self) -> Opcode {
        match self {
            Request::Read { .. } => Opcode::Read,
            Request::Write { .. } => Opcode::Write,
            Request::CompareAndSwap { .. } => Opcode::CompareAndSwap,
            Request::FetchAdd { .. } => Opcode::FetchAdd,
            Request::Swap { .. } => Opcode::Swap,
            Request::MultiWordCommit { .. } => Opcode::MultiWordCommit,
            Request::BilateralSwap { .. } => Opcode::BilateralSwap,
            Request::Send { .. } => Opcode::Send,
        }
    }
}

struct Writer<'a> {
    buf: &'a mut [u8],
    at: usize,
}

impl Writer<'_> {
    fn put(&mut self, bytes: &[u8]) {
        self.buf[self.at..self.at + bytes.len()].copy_from_slice(bytes);
        self.at += bytes.len();
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.buf.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }
    /// Unused payload must be zero, so one frame has one meaning.
    fn rest_is_zero(&self) -> bool {
        all_zero(&self.buf[self.at..])
    }
}

/// True if every byte is zero (written to vectorise: frames check this on
/// every payload).
pub fn all_zero(bytes: &[u8]) -> bool {
    bytes.iter().fold(0u8, |acc, &b| acc | b) == 0
}

/// Writes the request for `verb` into a payload area. `local_block` is the
/// initiator's block for a bilateral swap (ignored otherwise).
pub fn encode_request(verb: &Verb, local_block: &[u8], payload: &mut [u8]) {
    let mut w = Writer {
        buf: payload,
        at: 0,
    };
    let Some(target) = verb.target() else {
        let Verb::Send { imm, data } = verb else {
            unreachable!("only a SEND names no region")
        };
        let flags = if imm.is_some() { SEND_IMMEDIATE } else { 0 };
        w.put(&[verb.opcode().code(), flags, 0, 0]);
        w.put(&imm.unwrap_or(0).to_be_bytes());
        w.put(&(data.len() as u16).to_be_bytes());
        w.put(data.as_slice());
        return;
    };
    let count = match verb {
        Verb::MultiWordCommit { count, .. } => *count,
        _ => 0,
    };
    w.put(&[verb.opcode().code(), count]);
    w.put(&target.id.to_be_bytes());
    w.put(&target.key.to_be_bytes());
    match verb {
        Verb::Read { offset, len, .. } => {
            w.put(&offset.to_be_bytes());
            w.put(&len.to_be_bytes());
        }
        Verb::Write { offset, data, .. } => {
            w.put(&offset.to_be_bytes());
            w.put(&(data.len() as u16).to_be_bytes());
            w.put(data.as_slice());
        }
        Verb::CompareAndSwap {
            offset,
            expected,
            new,
            ..
        } => {
            w.put(&offset.to_be_bytes());
            w.put(&expected.to_be_bytes());
            w.put(&new.to_be_bytes());
        }
        Verb::FetchAdd { offset, add: v, .. } | Verb::Swap { offset, new: v, .. } => {
            w.put(&offset.to_be_bytes());
            w.put(&v.to_be_bytes());
        }
        Verb::MultiWordCommit { count, words, .. } => {
            for word in &words[..usize::from(*count)] {
                w.put(&word.offset.to_be_bytes());
                w.put(&word.expected.to_be_bytes());
                w.put(&word.new.to_be_bytes());
            }
        }
        Verb::BilateralSwap { offset, .. } => {
            w.put(&offset.to_be_bytes());
            w.put(&(local_block.len() as u16).to_be_bytes());
            w.put(local_block);
        }
        Verb::Send { .. } => unreachable!("encoded above"),
    }
}

/// Decodes a request payload; `None` if it is not a well-formed request.
pub fn decode_request(payload: &[u8]) -> Option<Request<'_>> {
    let mut r = Reader {
        buf: payload,
        at: 0,
    };
    let op = Opcode::from_code(r.u8()?)?;
    if op == Opcode::Send {
        return decode_send(r);
    }
    let count = r.u8()?;
    let target = RegionRef {
        id: r.u16()?,
        key: r.u32()?,
    };
    if count != 0 && op != Opcode::MultiWordCommit {
        return None;
    }
    let request = match op {
        Opcode::Read => {
            let offset = r.u32()?;
            let len = r.u16()?;
            if usize::from(len) > MAX_BLOCK {
                return None;
            }
            Request::Read {
                target,
                offset,
                len,
            }
        }
        Opcode::Write | Opcode::BilateralSwap => {
            let offset = r.u32()?;
            let len = r.u16()?;
            if usize::from(len) > MAX_BLOCK {
                return None;
            }
            let data = r.take(usize::from(len))?;
            if op == Opcode::Write {
                Request::Write {
                    target,
                    offset,
                    data,
                }
            } else {
                Request::BilateralSwap {
                    target,
                    offset,
                    data,
                }
            }
        }
        Opcode::Send => unreachable!("decoded above"),
        Opcode::CompareAndSwap => Request::CompareAndSwap {
            target,
            offset: r.u32()?,
            expected: r.u64()?,
            new: r.u64()?,
        },
        Opcode::FetchAdd => Request::FetchAdd {
            target,
            offset: r.u32()?,
            add: r.u64()?,
        },
        Opcode::Swap => Request::Swap {
            target,
            offset: r.u32()?,
            new: r.u64()?,
        },
        Opcode::MultiWordCommit => {
            if count == 0 || usize::from(count) > MAX_MCAS_WORDS {
                return None;
            }
            let mut words = [McasWord::default(); MAX_MCAS_WORDS];
            for w in &mut words[..usize::from(count)] {
                *w = McasWord {
                    offset: r.u32()?,
                    expected: r.u64()?,
                    new: r.u64()?,
                };
            }
            Request::MultiWordCommit {
                target,
                count,
                words,
            }
        }
    };
    r.rest_is_zero().then_some(request)
}

/// A SEND's request after its opcode.
fn decode_send(mut r: Reader<'_>) -> Option<Request<'_>> {
    let flags = r.u8()?;
    if flags & !SEND_IMMEDIATE != 0 || r.u16()? != 0 {
        return None;
    }
    let imm = r.u32()?;
    let imm = if flags & SEND_IMMEDIATE != 0 {
        Some(imm)
    } else if imm == 0 {
        None
    } else {
        return None;
    };
    let len = r.u16()?;
    if usize::from(len) > MAX_BLOCK {
        return None;
    }
    let data = r.take(usize::from(len))?;
    r.rest_is_zero().then_some(Request::Send { imm, data })
}

/// Whether the result of `request` fits in `space` bytes of echo payload.
pub fn result_fits(request: &Request<'_>, space: usize) -> bool {
    request.result_len() <= space
}

impl Request<'_> {
    /// Bytes of echo payload (after the reflected slice) its result takes.
    pub fn result_len(&self) -> usize {
        match self {
            Request::Read { len, .. } => 2 + usize::from(*len),
            Request::BilateralSwap { data, .. } => 2 + data.len(),
            Request::Write { .. } | Request::Send { .. } => 0,
            Request::CompareAndSwap { .. } | Request::FetchAdd { .. } | Request::Swap { .. } => 8,
            Request::MultiWordCommit { count, .. } => 2 + 8 * usize::from(*count),
        }
    }
}

/// What a verb returns on success. A block verb's bytes are not here: they
/// landed in the initiator's local block before the completion was raised,
/// so an output is a few words and a completion fits a cache line or two.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Output {
    /// `len` bytes read, now in the verb's local block.
    Read {
        len: u16,
    },
    Write,
    /// The word's value before the verb; swapped iff it equalled `expected`.
    CompareAndSwap {
        old: u64,
        swapped: bool,
    },
    FetchAdd {
        old: u64,
    },
    Swap {
        old: u64,
    },
    /// Whether every word matched (and was swapped), and every word's value
    /// before the verb.
    MultiWordCommit {
        committed: bool,
        count: u8,
        old: [u64; MAX_MCAS_WORDS],
    },
    /// The target's `len`-byte block, now in the verb's local block.
    BilateralSwap {
        len: u16,
    },
    /// The message is in the target's receive.
    Send,
}

impl Output {
    /// The kind of verb that gave this output.
    pub fn opcode(&self) -> Opcode {
        match self {
            Output::Read { .. } => Opcode::Read,
            Output::Write => Opcode::Write,
            Output::CompareAndSwap { .. } => Opcode::CompareAndSwap,
            Output::FetchAdd { .. } => Opcode::FetchAdd,
            Output::Swap { .. } => Opcode::Swap,
            Output::MultiWordCommit { .. } => Opcode::MultiWordCommit,
            Output::BilateralSwap { .. } => Opcode::BilateralSwap,
            Output::Send => Opcode::Send,
        }
    }
}

/// Writes a result into an echo payload area (after the reflected slice).
/// `block` is a READ's or BILATERAL SWAP's bytes (the output holds only
/// their length); other outputs ignore it.
pub fn encode_output(output: &Output, block: &[u8], out: &mut [u8]) {
    let mut w = Writer { buf: out, at: 0 };
    match output {
        Output::Read { len } | Output::BilateralSwap { len } => {
            w.put(&len.to_be_bytes());
            w.put(&block[..usize::from(*len)]);
        }
        Output::Write | Output::Send => {}
        Output::CompareAndSwap { old, .. } | Output::FetchAdd { old } | Output::Swap { old } => {
            w.put(&old.to_be_bytes())
        }
        Output::MultiWordCommit {
            committed,
            count,
            old,
        } => {
            w.put(&[u8::from(*committed), *count]);
            for v in &old[..usize::from(*count)] {
                w.put(&v.to_be_bytes());
            }
        }
    }
}

/// Decodes the result the target sent for `verb`: the output, and for a READ
/// or BILATERAL SWAP the block's bytes, borrowed from `bytes` for the caller
/// to land (empty for other verbs). `None` if the result does not fit that
/// verb exactly (wrong length, wrong count, stray bytes).
pub fn decode_output<'a>(verb: &Verb, bytes: &'a [u8]) -> Option<(Output, &'a [u8])> {
    let mut r = Reader { buf: bytes, at: 0 };
    let mut block: &[u8] = &[];
    let output = match verb {
        Verb::Read { len, .. } | Verb::BilateralSwap { len, .. } => {
            if r.u16()? != *len {
                return None;
            }
            block = r.take(usize::from(*len))?;
            if matches!(verb, Verb::Read { .. }) {
                Output::Read { len: *len }
            } else {
                Output::BilateralSwap { len: *len }
            }
        }
        Verb::Write { .. } => Output::Write,
        Verb::Send { .. } => Output::Send,
        Verb::CompareAndSwap { expected, .. } => {
            let old = r.u64()?;
            Output::CompareAndSwap {
                old,
                swapped: old == *expected,
            }
        }
        Verb::FetchAdd { .. } => Output::FetchAdd { old: r.u64()? },
        Verb::Swap { .. } => Output::Swap { old: r.u64()? },
        Verb::MultiWordCommit { count, words, .. } => decode_mcas(&mut r, *count, words)?,
    };
    r.rest_is_zero().then_some((output, block))
}

fn decode_mcas(
    r: &mut Reader<'_>,
    count: u8,
    words: &[McasWord; MAX_MCAS_WORDS],
) -> Option<Output> {
    let committed = match r.u8()? {
        0 => false,
        1 => true,
        _ => return None,
    };
    if r.u8()? != count {
        return None;
    }
    let mut old = [0; MAX_MCAS_WORDS];
    for v in &mut old[..usize::from(count)] {
        *v = r.u64()?;
    }
    let all_match = words[..usize::from(count)]
        .iter()
        .zip(&old)
        .all(|(w, o)| w.expected == *o);
    (committed == all_match).then_some(Output::MultiWordCommit {
        committed,
        count,
        old,
    })
}

/// Why a target refused a transfer; it left no trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// The initiator sent without a credit (a protocol violation).
    NoCredit = 1,
    UnknownRegion = 2,
    BadKey = 3,
    OutOfBounds = 4,
    Malformed = 5,
    /// The region does not allow this verb.
    Forbidden = 6,
    /// A word is held by another tentative transfer; worth retrying.
    Locked = 7,
    /// An atomic word offset is not 8-byte aligned.
    Misaligned = 8,
    /// A SEND found no receive posted on the link. Final: the initiator
    /// learns it in this round trip and no timer makes it wait.
    NoReceive = 9,
    /// A SEND's message is longer than the receive posted first.
    ReceiveTooSmall = 10,
}

impl Refusal {
    pub fn from_u8(b: u8) -> Option<Refusal> {
        Some(match b {
            1 => Refusal::NoCredit,
            2 => Refusal::UnknownRegion,
            3 => Refusal::BadKey,
            4 => Refusal::OutOfBounds,
            5 => Refusal::Malformed,
            6 => Refusal::Forbidden,
            7 => Refusal::Locked,
            8 => Refusal::Misaligned,
            9 => Refusal::NoReceive,
            10 => Refusal::ReceiveTooSmall,
            _ => return None,
        })
    }

    /// Refusals that may succeed if the transfer is tried again later.
    pub fn is_transient(self) -> bool {
        matches!(self, Refusal::Locked | Refusal::NoCredit)
    }
}

/// Why a verb failed. Every `Err` completion means: no effect at the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VerbError {
    /// The target refused it (after retries, for transient reasons).
    Refused(Refusal),
    /// The link was declared unreachable before the verb was sent.
    Unreachable,
    /// The target restarted: its memory, and whatever this verb did to it,
    /// belonged to an incarnation that no longer exists.
    PeerRestarted,
    /// Every attempt was reversed (loss, corruption); the last reason is kept.
    Exhausted(ReverseReason),
    /// The local block of a READ or BILATERAL SWAP stayed locked by other
    /// transfers through every attempt.
    LocalLocked,
    /// The verb needs a bigger frame than the peer accepts.
    TooLarge,
}

/// Why the initiator reversed an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReverseReason {
    /// No echo within the configured number of round trips.
    EchoMissing,
    /// The reflected context or the result did not match what was sent.
    EchoMismatch,
    /// A READ's echo came while another transfer held words of its local
    /// block, so its bytes could not land: the attempt is reversed (a READ
    /// has no effect at the target) and tried again.
    LocalLocked,
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: RegionRef = RegionRef { id: 3, key: 0xAB };

    #[test]
    fn assign_copies_every_verb_into_every_other() {
        let block = |n: usize| Block::new(&vec![0x5A; n]).unwrap();
        let all = [
            Verb::Read {
                target: R,
                offset: 8,
                local_region: 1,
                local_offset: 64,
                len: 16,
            },
            Verb::Write {
                target: R,
                offset: 16,
                data: block(40),
            },
            Verb::Write {
                target: R,
                offset: 24,
                data: block(3),
            },
            Verb::CompareAndSwap {
                target: R,
                offset: 32,
                expected: 1,
                new: 2,
            },
            Verb::CompareAndSwap {
                target: RegionRef { id: 4, key: 1 },
                offset: 40,
                expected: 3,
                new: 4,
            },
            Verb::FetchAdd {
                target: R,
                offset: 48,
                add: 5,
            },
            Verb::Swap {
                target: R,
                offset: 56,
                new: 6,
            },
            Verb::multi_word_commit(R, &[McasWord::default(); 2]).unwrap(),
            Verb::BilateralSwap {
                target: R,
                offset: 64,
                local_region: 2,
                local_offset: 8,
                len: 32,
            },
            Verb::Send {
                imm: Some(9),
                data: block(64),
            },
            Verb::Send {
                imm: None,
                data: block(2),
            },
        ];
        for dst in &all {
            for src in &all {
                let mut v = *dst;
                v.assign(src);
                assert_eq!(&v, src, "{dst:?} assigned {src:?}");
            }
        }
    }

    fn round_trip(verb: Verb, local: &[u8]) -> Request<'static> {
        let mut buf = vec![0u8; 1200];
        encode_request(&verb, local, &mut buf);
        let leaked: &'static [u8] = Box::leak(buf.into_boxed_slice());
        decode_request(leaked).expect("decodes")
    }

    #[test]
    fn requests_round_trip() {
        assert_eq!(
            round_trip(
                Verb::CompareAndSwap {
                    target: R,
                    offset: 16,
                    expected: 1,
                    new: 2
                },
                &[]
            ),
            Request::CompareAndSwap {
                target: R,
                offset: 16,
                expected: 1,
                new: 2
            }
        );
        let words = [McasWord {
            offset: 8,
            expected: 5,
            new: 6,
        }; 4];
        let v = Verb::multi_word_commit(R, &words).unwrap();
        match round_trip(v, &[]) {
            Request::MultiWordCommit {
                count: 4, words: w, ..
            } => assert_eq!(&w[..4], &words),
            other => panic!("{other:?}"),
        }
        let v = Verb::BilateralSwap {
            target: R,
            offset: 0,
            local_region: 1,
            local_offset: 8,
            len: 3,
        };
        assert_eq!(
            round_trip(v, b"xyz"),
            Request::BilateralSwap {
                target: R,
                offset: 0,
                data: b"xyz"
            }
        );
    }

    #[test]
    fn a_word_named_twice_is_told() {
        let word = |offset| McasWord {
            offset,
            expected: 0,
            new: 1,
        };
        let twice = Verb::multi_word_commit(R, &[word(0), word(8), word(0)]).unwrap();
        assert!(twice.names_a_word_twice());
        let once = Verb::multi_word_commit(R, &[word(0), word(8), word(16)]).unwrap();
        assert!(!once.names_a_word_twice());
        let cas = Verb::CompareAndSwap {
            target: R,
            offset: 0,
            expected: 0,
            new: 0,
        };
        assert!(!cas.names_a_word_twice());
    }

    #[test]
    fn mcas_of_four_words_fits_a_128_byte_frame() {
        let v = Verb::multi_word_commit(R, &[McasWord::default(); 4]).unwrap();
        assert_eq!(v.class(wire::MAX_CLASS), Some(1));
        let cas = Verb::CompareAndSwap {
            target: R,
            offset: 0,
            expected: 0,
            new: 0,
        };
        assert_eq!(cas.class(wire::MAX_CLASS), Some(0));
    }

    #[test]
    fn output_must_match_the_verb() {
        let v = Verb::CompareAndSwap {
            target: R,
            offset: 0,
            expected: 9,
            new: 1,
        };
        let mut buf = [0u8; 36];
        let out = Output::CompareAndSwap {
            old: 9,
            swapped: true,
        };
        encode_output(&out, &[], &mut buf);
        assert_eq!(decode_output(&v, &buf), Some((out, &[][..])));
        buf[20] = 1;
        assert_eq!(decode_output(&v, &buf), None);
    }

    #[test]
    fn a_block_result_is_borrowed_from_the_frame_and_its_output_is_its_length() {
        let block: Vec<u8> = (0..40).collect();
        for verb in [
            Verb::Read {
                target: R,
                offset: 0,
                local_region: 2,
                local_offset: 8,
                len: 40,
            },
            Verb::BilateralSwap {
                target: R,
                offset: 0,
                local_region: 2,
                local_offset: 8,
                len: 40,
            },
        ] {
            let out = match verb {
                Verb::Read { .. } => Output::Read { len: 40 },
                _ => Output::BilateralSwap { len: 40 },
            };
            let mut buf = [0u8; 64];
            encode_output(&out, &block, &mut buf);
            let (decoded, landed) = decode_output(&verb, &buf).expect("decodes");
            assert_eq!((decoded, landed), (out, &block[..]));
            assert_eq!(verb.local_block(), Some((2, 8, 40)));
            // A length that is not the verb's is a mismatch, not a short read.
            buf[1] = 39;
            assert_eq!(decode_output(&verb, &buf), None);
        }
        let cas = Verb::CompareAndSwap {
            target: R,
            offset: 0,
            expected: 0,
            new: 0,
        };
        assert_eq!(cas.local_block(), None);
    }

    #[test]
    fn every_kind_has_one_code_one_name_and_is_parsed_back_from_it() {
        let mut names = Opcode::NAMES.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Opcode::COUNT, "{:?}", Opcode::NAMES);
        for (i, op) in Opcode::ALL.into_iter().enumerate() {
            assert_eq!(op.index(), i);
            assert_eq!(Opcode::from_code(op.code()), Some(op));
            assert_eq!(op.name().parse::<Opcode>(), Ok(op));
        }
        let unknown = (0..=u8::MAX).filter(|&b| Opcode::from_code(b).is_none());
        assert_eq!(unknown.count(), 256 - Opcode::COUNT);
        let err = "frob".parse::<Opcode>().unwrap_err().to_string();
        assert!(
            err.contains("read, write, cas, faa, swap, mcas, bswap"),
            "{err}"
        );
    }

    #[test]
    fn a_request_with_an_unknown_opcode_is_no_verb() {
        let verb = Verb::FetchAdd {
            target: R,
            offset: 8,
            add: 1,
        };
        let mut buf = [0u8; 64];
        encode_request(&verb, &[], &mut buf);
        for code in 0..=u8::MAX {
            buf[0] = code;
            let decoded = decode_request(&buf);
            match Opcode::from_code(code) {
                Some(Opcode::FetchAdd) => {
                    assert_eq!(decoded.map(|r| r.opcode()), Some(Opcode::FetchAdd))
                }
                Some(_) => {}
                None => assert!(decoded.is_none(), "opcode {code} decoded"),
            }
        }
    }

    /// The verbs table of docs/PROTOCOL.md and this list agree on every
    /// code and name.
    #[test]
    fn the_specification_lists_the_same_kinds() {
        let spec = include_str!("../../docs/PROTOCOL.md");
        let verbs = spec
            .split("## Verbs")
            .nth(1)
            .and_then(|rest| rest.split("\n## ").next())
            .expect("PROTOCOL.md has a Verbs section");
        let rows: Vec<(u8, String)> = verbs
            .lines()
            .filter_map(|line| {
                let mut cells = line.split('|').map(str::trim).skip(1);
                let code = cells.next()?.parse().ok()?;
                Some((code, cells.next()?.to_string()))
            })
            .collect();
        let ours: Vec<(u8, String)> = Opcode::ALL
            .iter()
            .map(|op| (op.code(), op.spec_name().to_string()))
            .collect();
        assert_eq!(rows, ours);
    }
}
