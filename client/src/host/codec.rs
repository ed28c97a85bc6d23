//! Verbs and completions as host-ring records, in either ring mode.
//!
//! A verb (or a completion) is a byte message cut into 48-byte record
//! payloads: the first record names the kind, how many records the message
//! takes (at most [`MAX_VERB_RECORDS`]) and the generation of the host
//! process's claim; the rest are continuations with the same id. A message
//! is always published whole (one ring publish, or one swap), so a reader
//! never sees part of one.
//!
//! Record tag: bits 0-7 the kind, 8-15 the records in the message, 16-31
//! the claim's generation (its low 16 bits).

use oae_proto::verb::MAX_MCAS_WORDS;
use oae_proto::{
    Block, McasWord, Opcode, Output, Refusal, RegionRef, ReverseReason, Verb, VerbError,
};
use oae_swapring::verbs::{VERB_PAYLOAD_BYTES, VerbRecord};

use crate::api::{
    AppError, Completion, Destination, LocalSubmission, LocalVerb, Message, NotSubmitted,
    ReceivePost, Received, Submission,
};

/// Most records one verb or one completion takes.
pub const MAX_VERB_RECORDS: usize = 8;
const MAX_MESSAGE: usize = MAX_VERB_RECORDS * VERB_PAYLOAD_BYTES;
/// Region id, key and offset lead every request.
const HEAD: usize = 10;
/// Largest WRITE the host ring carries. A READ or BILATERAL SWAP moves up
/// to [`oae_proto::verb::MAX_BLOCK`]: its bytes land in local memory and its
/// completion carries only their length.
pub const MAX_WRITE: usize = MAX_MESSAGE - HEAD;

// Kinds of a first record: the verb (its code on the wire, `Opcode::code`),
// a receive posted, or the outcome of a completion. A completion's result
// names its verb by the same code.
const POST_RECEIVE: u8 = 14;
const DONE: u8 = 16;
const NOT_SUBMITTED: u8 = 17;
const FAILED: u8 = 18;
/// A posted receive's message, bytes included.
const RECEIVED: u8 = 19;
/// A receive never posted, or given back, and why.
const RECEIVE_FAILED: u8 = 20;
/// A received message's flags and immediate lead its bytes.
const RECEIVED_HEAD: usize = 5;
/// Largest receive the host ring posts: its message comes back whole in
/// the completion, so it holds what one message carries.
pub const MAX_RECEIVE: usize = MAX_MESSAGE - RECEIVED_HEAD;
/// Every record of a message after its first.
const CONTINUED: u8 = 0xff;
/// Set on a WRITE's, READ's or SEND's kind when it names a block of the
/// dataplane's memory (region, offset, a u32 length) for its bytes or its
/// landing ([`LocalSubmission`]).
const FROM_LOCAL: u8 = 0x20;
/// Set on a verb's kind when its message starts with a destination: a
/// byte ([`TO_LINK`] or [`TO_NODE`]) and a u64. A verb for the queue's
/// first link carries none.
const ADDRESSED: u8 = 0x40;
const TO_LINK: u8 = 1;
const TO_NODE: u8 = 2;

// The verbs' codes stay below the outcomes'.
const _: () = assert!(Opcode::ALL[Opcode::COUNT - 1].code() < POST_RECEIVE);
const _: () = assert!(POST_RECEIVE < DONE);
const _: () = assert!(DONE | FROM_LOCAL | ADDRESSED < CONTINUED);

/// A message's records, without allocating.
#[derive(Clone, Copy, Debug)]
pub struct Records {
    records: [VerbRecord; MAX_VERB_RECORDS],
    len: usize,
}

impl Records {
    pub fn as_slice(&self) -> &[VerbRecord] {
        &self.records[..self.len]
    }
}

fn tag(kind: u8, records: usize, generation: u32) -> u32 {
    u32::from(kind) | ((records as u32) << 8) | ((generation & 0xffff) << 16)
}

/// The kind byte of a record's tag.
pub fn kind(r: &VerbRecord) -> u8 {
    r.tag as u8
}

/// How many records the message that `first` starts takes: `None` if it
/// does not start one.
pub fn message_records(first: &VerbRecord) -> Option<usize> {
    let n = usize::from((first.tag >> 8) as u8);
    (kind(first) != CONTINUED && (1..=MAX_VERB_RECORDS).contains(&n)).then_some(n)
}

/// The claim generation a first record was written under (low 16 bits).
pub fn generation(r: &VerbRecord) -> u16 {
    (r.tag >> 16) as u16
}

fn cut(id: u64, kind: u8, generation: u32, bytes: &[u8]) -> Records {
    let n = bytes.len().div_ceil(VERB_PAYLOAD_BYTES).max(1);
    let mut records = [VerbRecord::new(0, 0, &[]).expect("empty fits"); MAX_VERB_RECORDS];
    for (i, r) in records.iter_mut().take(n).enumerate() {
        let at = i * VERB_PAYLOAD_BYTES;
        let chunk = &bytes[at.min(bytes.len())..(at + VERB_PAYLOAD_BYTES).min(bytes.len())];
        let k = if i == 0 { kind } else { CONTINUED };
        *r = VerbRecord::new(id, tag(k, n, generation), chunk).expect("a chunk fits");
    }
    Records { records, len: n }
}

/// Joins a message's payloads; `None` if the records do not form one
/// message (wrong count, a foreign id, a first record in the middle).
fn join<'b>(records: &[VerbRecord], buf: &'b mut [u8; MAX_MESSAGE]) -> Option<&'b [u8]> {
    let first = records.first()?;
    if message_records(first)? != records.len() {
        return None;
    }
    let mut len = 0;
    for (i, r) in records.iter().enumerate() {
        if r.id != first.id || (i > 0 && kind(r) != CONTINUED) {
            return None;
        }
        // Every record but the last is full.
        if i + 1 < records.len() && r.data().len() != VERB_PAYLOAD_BYTES {
            return None;
        }
        buf[len..len + r.data().len()].copy_from_slice(r.data());
        len += r.data().len();
    }
    Some(&buf[..len])
}

struct Writer {
    buf: [u8; MAX_MESSAGE],
    len: usize,
}

impl Writer {
    fn new() -> Self {
        Writer {
            buf: [0; MAX_MESSAGE],
            len: 0,
        }
    }
    fn put(&mut self, bytes: &[u8]) {
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }
    fn head(&mut self, t: &RegionRef, offset: u32) {
        self.put(&t.id.to_le_bytes());
        self.put(&t.key.to_le_bytes());
        self.put(&offset.to_le_bytes());
    }
    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

struct Reader<'b> {
    b: &'b [u8],
    at: usize,
}

impl<'b> Reader<'b> {
    fn take(&mut self, n: usize) -> Option<&'b [u8]> {
        let s = self.b.get(self.at..self.at + n)?;
        self.at += n;
        Some(s)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn rest(&mut self) -> &'b [u8] {
        let s = &self.b[self.at.min(self.b.len())..];
        self.at = self.b.len();
        s
    }
    fn done(&self) -> bool {
        self.at == self.b.len()
    }
}

/// Writes `to` at the start of a request; returns its kind with
/// [`ADDRESSED`] set if it named one.
fn put_destination(w: &mut Writer, kind: u8, to: Destination) -> u8 {
    let (to, value) = match to {
        Destination::FirstLink => return kind,
        Destination::Link(link) => (TO_LINK, u64::from(link)),
        Destination::Node(node) => (TO_NODE, node),
    };
    w.put(&[to]);
    w.put(&value.to_le_bytes());
    kind | ADDRESSED
}

fn read_destination(r: &mut Reader<'_>, kind: u8) -> Option<Destination> {
    if kind & ADDRESSED == 0 {
        return Some(Destination::FirstLink);
    }
    match (r.u8()?, r.u64()?) {
        (TO_LINK, link) => Some(Destination::Link(u16::try_from(link).ok()?)),
        (TO_NODE, node) => Some(Destination::Node(node)),
        _ => None,
    }
}

/// The records of a verb, or why the host ring cannot carry it.
pub fn encode_submission(s: &Submission, generation: u32) -> Result<Records, &'static str> {
    let mut w = Writer::new();
    let kind = put_destination(&mut w, s.verb.opcode().code(), s.to);
    // What a WRITE's or SEND's bytes may take after the rest.
    let room = MAX_MESSAGE - w.len;
    match &s.verb {
        Verb::Read {
            target,
            offset,
            local_region,
            local_offset,
            len,
        }
        | Verb::BilateralSwap {
            target,
            offset,
            local_region,
            local_offset,
            len,
        } => {
            w.head(target, *offset);
            w.put(&local_region.to_le_bytes());
            w.put(&local_offset.to_le_bytes());
            w.put(&len.to_le_bytes());
        }
        Verb::Write {
            target,
            offset,
            data,
        } => {
            if HEAD + data.len() > room {
                return Err(
                    "a WRITE over the host ring carries at most 374 bytes (365 to a \
                            named link or node)",
                );
            }
            w.head(target, *offset);
            w.put(data.as_slice());
        }
        Verb::CompareAndSwap {
            target,
            offset,
            expected,
            new,
        } => {
            w.head(target, *offset);
            w.put(&expected.to_le_bytes());
            w.put(&new.to_le_bytes());
        }
        Verb::FetchAdd {
            target,
            offset,
            add: operand,
        }
        | Verb::Swap {
            target,
            offset,
            new: operand,
        } => {
            w.head(target, *offset);
            w.put(&operand.to_le_bytes());
        }
        Verb::MultiWordCommit {
            target,
            count,
            words,
        } => {
            w.head(target, 0);
            w.put(&[*count]);
            for word in words.iter().take(usize::from(*count)) {
                w.put(&word.offset.to_le_bytes());
                w.put(&word.expected.to_le_bytes());
                w.put(&word.new.to_le_bytes());
            }
        }
        Verb::Send { imm, data } => {
            if 1 + 4 + data.len() > room {
                return Err(
                    "a SEND over the host ring carries at most 379 bytes (370 to a \
                            named link or node)",
                );
            }
            w.put(&[u8::from(imm.is_some())]);
            w.put(&imm.unwrap_or(0).to_le_bytes());
            w.put(data.as_slice());
        }
    }
    Ok(cut(s.id, kind, generation, w.bytes()))
}

/// The dataplane side: the verb a message asks for, or `None` if the
/// records are not one [`encode_submission`] writes.
pub fn decode_submission(records: &[VerbRecord]) -> Option<Submission> {
    let mut buf = [0; MAX_MESSAGE];
    let b = join(records, &mut buf)?;
    let mut r = Reader { b, at: 0 };
    let kind = kind(&records[0]);
    let to = read_destination(&mut r, kind)?;
    let opcode = Opcode::from_code(kind & !ADDRESSED)?;
    if opcode == Opcode::Send {
        let imm = match (r.u8()?, r.u32()?) {
            (0, 0) => None,
            (1, imm) => Some(imm),
            _ => return None,
        };
        let data = Block::new(r.rest())?;
        return Some(Submission {
            id: records[0].id,
            verb: Verb::Send { imm, data },
            to,
        });
    }
    let target = RegionRef {
        id: r.u16()?,
        key: r.u32()?,
    };
    let offset = r.u32()?;
    let verb = match opcode {
        Opcode::Send => unreachable!("decoded above"),
        Opcode::Read => Verb::Read {
            target,
            offset,
            local_region: r.u16()?,
            local_offset: r.u32()?,
            len: r.u16()?,
        },
        Opcode::Write => Verb::Write {
            target,
            offset,
            data: Block::new(r.rest())?,
        },
        Opcode::CompareAndSwap => Verb::CompareAndSwap {
            target,
            offset,
            expected: r.u64()?,
            new: r.u64()?,
        },
        Opcode::FetchAdd => Verb::FetchAdd {
            target,
            offset,
            add: r.u64()?,
        },
        Opcode::Swap => Verb::Swap {
            target,
            offset,
            new: r.u64()?,
        },
        Opcode::MultiWordCommit => {
            let count = usize::from(r.u8()?);
            if count == 0 || count > MAX_MCAS_WORDS {
                return None;
            }
            let mut words = [McasWord::default(); MAX_MCAS_WORDS];
            for w in words.iter_mut().take(count) {
                *w = McasWord {
                    offset: r.u32()?,
                    expected: r.u64()?,
                    new: r.u64()?,
                };
            }
            Verb::multi_word_commit(target, &words[..count])?
        }
        Opcode::BilateralSwap => Verb::BilateralSwap {
            target,
            offset,
            local_region: r.u16()?,
            local_offset: r.u32()?,
            len: r.u16()?,
        },
    };
    r.done().then_some(Submission {
        id: records[0].id,
        verb,
        to,
    })
}

/// The records of a receive, or why the host ring cannot post it.
pub fn encode_receive(p: &ReceivePost, generation: u32) -> Result<Records, &'static str> {
    if usize::from(p.len) > MAX_RECEIVE {
        return Err("a receive posted through the host ring holds at most 379 bytes");
    }
    let mut w = Writer::new();
    let kind = put_destination(&mut w, POST_RECEIVE, p.from);
    w.put(&p.region.to_le_bytes());
    w.put(&p.offset.to_le_bytes());
    w.put(&p.len.to_le_bytes());
    Ok(cut(p.id, kind, generation, w.bytes()))
}

/// The records of a WRITE or SEND from a local block.
pub fn encode_local(s: &LocalSubmission, generation: u32) -> Records {
    let mut w = Writer::new();
    let opcode = match s.verb {
        LocalVerb::Write { .. } => Opcode::Write,
        LocalVerb::Read { .. } => Opcode::Read,
        LocalVerb::Send { .. } => Opcode::Send,
    };
    let kind = put_destination(&mut w, opcode.code() | FROM_LOCAL, s.to);
    match s.verb {
        LocalVerb::Write { target, offset } | LocalVerb::Read { target, offset } => {
            w.head(&target, offset)
        }
        LocalVerb::Send { imm } => {
            w.put(&[u8::from(imm.is_some())]);
            w.put(&imm.unwrap_or(0).to_le_bytes());
        }
    }
    w.put(&s.local_region.to_le_bytes());
    w.put(&s.local_offset.to_le_bytes());
    w.put(&s.len.to_le_bytes());
    cut(s.id, kind, generation, w.bytes())
}

fn decode_local(records: &[VerbRecord]) -> Option<LocalSubmission> {
    let first = records.first()?;
    let mut buf = [0; MAX_MESSAGE];
    let mut r = Reader {
        b: join(records, &mut buf)?,
        at: 0,
    };
    let kind = kind(first);
    let to = read_destination(&mut r, kind)?;
    let opcode = Opcode::from_code(kind & !(ADDRESSED | FROM_LOCAL))?;
    let verb = match opcode {
        Opcode::Write | Opcode::Read => {
            let target = RegionRef {
                id: r.u16()?,
                key: r.u32()?,
            };
            let offset = r.u32()?;
            if opcode == Opcode::Write {
                LocalVerb::Write { target, offset }
            } else {
                LocalVerb::Read { target, offset }
            }
        }
        Opcode::Send => LocalVerb::Send {
            imm: match (r.u8()?, r.u32()?) {
                (0, 0) => None,
                (1, imm) => Some(imm),
                _ => return None,
            },
        },
        _ => return None,
    };
    let s = LocalSubmission {
        id: first.id,
        to,
        verb,
        local_region: r.u16()?,
        local_offset: r.u32()?,
        len: r.u32()?,
    };
    r.done().then_some(s)
}

/// What a host program asks of the dataplane.
// Decoded on the stack, one request at a time: boxing the verb would
// allocate once per request on the polling core.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug)]
pub enum HostRequest {
    Verb(Submission),
    /// A WRITE or SEND whose bytes are a block of the dataplane's memory.
    FromLocal(LocalSubmission),
    Receive(ReceivePost),
}

impl HostRequest {
    pub fn id(&self) -> u64 {
        match self {
            HostRequest::Verb(s) => s.id,
            HostRequest::FromLocal(s) => s.id,
            HostRequest::Receive(p) => p.id,
        }
    }
}

/// Whether a message's first record posts a receive (its refusal is then
/// a [`Received`], not a [`Completion`]).
pub fn posts_receive(first: &VerbRecord) -> bool {
    kind(first) & !ADDRESSED == POST_RECEIVE
}

/// The dataplane side: a verb or a receive; `None` if the records are not
/// one [`encode_submission`] or [`encode_receive`] writes.
pub fn decode_request(records: &[VerbRecord]) -> Option<HostRequest> {
    let first = records.first()?;
    if kind(first) & FROM_LOCAL != 0 && kind(first) != CONTINUED {
        return decode_local(records).map(HostRequest::FromLocal);
    }
    if !posts_receive(first) {
        return decode_submission(records).map(HostRequest::Verb);
    }
    let mut buf = [0; MAX_MESSAGE];
    let mut r = Reader {
        b: join(records, &mut buf)?,
        at: 0,
    };
    let from = read_destination(&mut r, kind(first))?;
    let post = ReceivePost {
        id: first.id,
        from,
        region: r.u16()?,
        offset: r.u32()?,
        len: r.u16()?,
    };
    (r.done() && usize::from(post.len) <= MAX_RECEIVE).then_some(HostRequest::Receive(post))
}

/// The dataplane side's records of a receive's outcome.
pub fn encode_received(received: &Received, generation: u32) -> Records {
    let mut w = Writer::new();
    let kind = match &received.result {
        Ok(m) => {
            w.put(&[u8::from(m.imm.is_some())]);
            w.put(&m.imm.unwrap_or(0).to_le_bytes());
            // The receive held at most what one message carries.
            let data = m.data.as_slice();
            w.put(&data[..data.len().min(MAX_RECEIVE)]);
            RECEIVED
        }
        Err(why) => {
            w.put(&[why.code()]);
            RECEIVE_FAILED
        }
    };
    cut(received.id, kind, generation, w.bytes())
}

/// Whether a message's first record is a receive's outcome.
pub fn is_received(first: &VerbRecord) -> bool {
    matches!(kind(first), RECEIVED | RECEIVE_FAILED)
}

/// The host side: a receive's outcome; `None` if the records are not one
/// [`encode_received`] writes.
pub fn decode_received(records: &[VerbRecord]) -> Option<Received> {
    let first = records.first()?;
    let mut buf = [0; MAX_MESSAGE];
    let mut r = Reader {
        b: join(records, &mut buf)?,
        at: 0,
    };
    let result = match kind(first) {
        RECEIVED => {
            let imm = match (r.u8()?, r.u32()?) {
                (0, 0) => None,
                (1, imm) => Some(imm),
                _ => return None,
            };
            Ok(Message {
                imm,
                data: Block::new(r.rest())?,
            })
        }
        RECEIVE_FAILED => Err(NotSubmitted::from_code(r.u8()?)),
        _ => return None,
    };
    r.done().then_some(Received {
        id: first.id,
        result,
    })
}

fn verb_error_code(e: &VerbError) -> (u8, u8) {
    match e {
        VerbError::Refused(r) => (1, *r as u8),
        VerbError::Unreachable => (2, 0),
        VerbError::PeerRestarted => (3, 0),
        VerbError::Exhausted(ReverseReason::EchoMissing) => (4, 1),
        VerbError::Exhausted(ReverseReason::EchoMismatch) => (4, 2),
        VerbError::Exhausted(ReverseReason::LocalLocked) => (4, 3),
        VerbError::LocalLocked => (5, 0),
        VerbError::TooLarge => (6, 0),
    }
}

fn verb_error(kind: u8, detail: u8) -> Option<VerbError> {
    Some(match (kind, detail) {
        (1, r) => VerbError::Refused(Refusal::from_u8(r)?),
        (2, _) => VerbError::Unreachable,
        (3, _) => VerbError::PeerRestarted,
        (4, 1) => VerbError::Exhausted(ReverseReason::EchoMissing),
        (4, 2) => VerbError::Exhausted(ReverseReason::EchoMismatch),
        (4, 3) => VerbError::Exhausted(ReverseReason::LocalLocked),
        (5, _) => VerbError::LocalLocked,
        (6, _) => VerbError::TooLarge,
        _ => return None,
    })
}

/// The dataplane side's records of a completion.
pub fn encode_completion(c: &Completion, generation: u32) -> Records {
    let mut w = Writer::new();
    w.put(&c.latency_ns.to_le_bytes());
    let kind = match &c.result {
        Ok(output) => {
            match output {
                Output::Read { len } | Output::BilateralSwap { len } => {
                    w.put(&[output.opcode().code()]);
                    w.put(&len.to_le_bytes());
                }
                Output::Write | Output::Send => w.put(&[output.opcode().code()]),
                Output::CompareAndSwap { old, swapped } => {
                    w.put(&[output.opcode().code()]);
                    w.put(&old.to_le_bytes());
                    w.put(&[u8::from(*swapped)]);
                }
                Output::FetchAdd { old } | Output::Swap { old } => {
                    w.put(&[output.opcode().code()]);
                    w.put(&old.to_le_bytes());
                }
                Output::MultiWordCommit {
                    committed,
                    count,
                    old,
                } => {
                    w.put(&[output.opcode().code(), u8::from(*committed), *count]);
                    for o in old.iter().take(usize::from(*count)) {
                        w.put(&o.to_le_bytes());
                    }
                }
            }
            DONE
        }
        Err(AppError::NotSubmitted(why)) => {
            w.put(&[why.code()]);
            NOT_SUBMITTED
        }
        Err(AppError::Verb(e)) => {
            let (kind, detail) = verb_error_code(e);
            w.put(&[kind, detail]);
            FAILED
        }
    };
    cut(c.id, kind, generation, w.bytes())
}

/// The host side: the completion a message carries; `None` if the records
/// are not one [`encode_completion`] writes.
pub fn decode_completion(records: &[VerbRecord]) -> Option<Completion> {
    let mut buf = [0; MAX_MESSAGE];
    let b = join(records, &mut buf)?;
    let mut r = Reader { b, at: 0 };
    let latency_ns = r.u64()?;
    let result = match kind(&records[0]) {
        DONE => Ok(match Opcode::from_code(r.u8()?)? {
            Opcode::Read => Output::Read { len: r.u16()? },
            Opcode::BilateralSwap => Output::BilateralSwap { len: r.u16()? },
            Opcode::Write => Output::Write,
            Opcode::Send => Output::Send,
            Opcode::CompareAndSwap => Output::CompareAndSwap {
                old: r.u64()?,
                swapped: r.u8()? != 0,
            },
            Opcode::FetchAdd => Output::FetchAdd { old: r.u64()? },
            Opcode::Swap => Output::Swap { old: r.u64()? },
            Opcode::MultiWordCommit => {
                let committed = r.u8()? != 0;
                let count = r.u8()?;
                if usize::from(count) > MAX_MCAS_WORDS {
                    return None;
                }
                let mut old = [0; MAX_MCAS_WORDS];
                for o in old.iter_mut().take(usize::from(count)) {
                    *o = r.u64()?;
                }
                Output::MultiWordCommit {
                    committed,
                    count,
                    old,
                }
            }
        }),
        NOT_SUBMITTED => Err(AppError::NotSubmitted(NotSubmitted::from_code(r.u8()?))),
        FAILED => Err(AppError::Verb(verb_error(r.u8()?, r.u8()?)?)),
        _ => return None,
    };
    r.done().then_some(Completion {
        id: records[0].id,
        result,
        latency_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use oae_proto::verb::MAX_BLOCK;

    const T: RegionRef = RegionRef { id: 1, key: 0xae1 };

    fn mcas(words: usize) -> Verb {
        let w: Vec<McasWord> = (0..words)
            .map(|i| McasWord {
                offset: 8 * i as u32,
                expected: i as u64,
                new: u64::MAX - i as u64,
            })
            .collect();
        Verb::multi_word_commit(T, &w).unwrap()
    }

    fn verbs() -> Vec<Verb> {
        vec![
            Verb::Read {
                target: T,
                offset: 8,
                local_region: 2,
                local_offset: 0,
                len: MAX_BLOCK as u16,
            },
            Verb::Write {
                target: T,
                offset: 16,
                data: Block::new(&[7; MAX_WRITE]).unwrap(),
            },
            Verb::Write {
                target: T,
                offset: 16,
                data: Block::new(&[7; 38]).unwrap(),
            },
            Verb::CompareAndSwap {
                target: T,
                offset: 24,
                expected: 1,
                new: u64::MAX,
            },
            Verb::FetchAdd {
                target: T,
                offset: 32,
                add: 5,
            },
            Verb::Swap {
                target: T,
                offset: 40,
                new: 9,
            },
            mcas(1),
            mcas(MAX_MCAS_WORDS),
            Verb::BilateralSwap {
                target: T,
                offset: 48,
                local_region: 2,
                local_offset: 64,
                len: 16,
            },
            Verb::Send {
                imm: Some(0xfeed),
                data: Block::new(&[3; MAX_WRITE]).unwrap(),
            },
            Verb::Send {
                imm: None,
                data: Block::EMPTY,
            },
        ]
    }

    #[test]
    fn the_round_trips_cover_every_kind_of_verb() {
        let mut kinds: Vec<Opcode> = verbs().iter().map(Verb::opcode).collect();
        kinds.dedup();
        assert_eq!(kinds, Opcode::ALL);
    }

    #[test]
    fn every_verb_round_trips_in_as_few_records_as_it_needs() {
        let destinations = [
            Destination::FirstLink,
            Destination::Link(3),
            Destination::Node(0x0200_0000_0007),
        ];
        for (i, verb) in verbs().into_iter().enumerate() {
            let to = destinations[i % destinations.len()];
            let s = Submission {
                to,
                ..Submission::to_first_link(i as u64, verb)
            };
            let Ok(records) = encode_submission(&s, 0x1_0007) else {
                // The longest WRITE and SEND leave no room for a destination.
                assert_ne!(to, Destination::FirstLink, "{verb:?}");
                continue;
            };
            let r = records.as_slice();
            assert_eq!(message_records(&r[0]), Some(r.len()));
            assert!(r.iter().all(|x| generation(x) == 7), "{verb:?}");
            let back = decode_submission(r).unwrap();
            assert_eq!((back.id, back.verb, back.to), (s.id, s.verb, s.to));
            // Short messages stay one record, as before batching.
            if matches!(verb, Verb::FetchAdd { .. } | Verb::CompareAndSwap { .. }) {
                assert_eq!(r.len(), 1);
            }
        }
    }

    #[test]
    fn what_does_not_fit_is_refused_and_broken_messages_do_not_decode() {
        let write = |len: usize| Verb::Write {
            target: T,
            offset: 0,
            data: Block::new(&vec![0; len]).unwrap(),
        };
        let too_long = Submission::to_first_link(1, write(MAX_WRITE + 1));
        assert!(
            encode_submission(&too_long, 1)
                .unwrap_err()
                .contains("374 bytes")
        );
        // A destination takes room from the data.
        let addressed = |len| Submission {
            to: Destination::Node(9),
            ..Submission::to_first_link(1, write(len))
        };
        assert!(encode_submission(&addressed(MAX_WRITE - 9), 1).is_ok());
        assert!(encode_submission(&addressed(MAX_WRITE - 8), 1).is_err());
        let garbage = VerbRecord::new(3, 99 | (1 << 8), &[1, 2, 3]).unwrap();
        assert!(decode_submission(&[garbage]).is_none());
        let short = VerbRecord::new(
            3,
            u32::from(Opcode::CompareAndSwap.code()) | (1 << 8),
            &[0; 20],
        )
        .unwrap();
        assert!(decode_submission(&[short]).is_none());
        let big =
            encode_submission(&Submission::to_first_link(4, mcas(MAX_MCAS_WORDS)), 1).unwrap();
        let r = big.as_slice();
        assert!(r.len() > 1);
        assert!(decode_submission(&r[..r.len() - 1]).is_none(), "a part");
        assert!(decode_submission(&r[1..]).is_none(), "no first record");
        let mut foreign = r.to_vec();
        foreign[1] = VerbRecord::new(5, foreign[1].tag, foreign[1].data()).unwrap();
        assert!(decode_submission(&foreign).is_none(), "another id inside");
        // A READ without its local block (as the ring carried one before
        // READs landed locally) is not decoded.
        let read = |payload_len: usize| {
            let mut payload = [0u8; HEAD + 8];
            payload[..2].copy_from_slice(&T.id.to_le_bytes());
            payload[2..6].copy_from_slice(&T.key.to_le_bytes());
            payload[HEAD + 6..].copy_from_slice(&16u16.to_le_bytes());
            let tag = u32::from(Opcode::Read.code()) | (1 << 8);
            VerbRecord::new(6, tag, &payload[..payload_len]).unwrap()
        };
        assert!(decode_submission(&[read(HEAD + 8)]).is_some());
        assert!(decode_submission(&[read(HEAD + 2)]).is_none());
    }

    #[test]
    fn receives_and_their_messages_round_trip_and_are_never_taken_for_verbs() {
        for from in [
            Destination::FirstLink,
            Destination::Link(3),
            Destination::Node(u64::MAX),
        ] {
            let post = ReceivePost {
                id: 77,
                from,
                region: 2,
                offset: 4096,
                len: MAX_RECEIVE as u16,
            };
            let records = encode_receive(&post, 5).unwrap();
            assert!(posts_receive(&records.as_slice()[0]));
            assert!(decode_submission(records.as_slice()).is_none(), "{from:?}");
            match decode_request(records.as_slice()) {
                Some(HostRequest::Receive(back)) => assert_eq!(back, post),
                other => panic!("{from:?}: {other:?}"),
            }
        }
        let too_long = ReceivePost {
            id: 1,
            from: Destination::FirstLink,
            region: 2,
            offset: 0,
            len: MAX_RECEIVE as u16 + 1,
        };
        assert!(encode_receive(&too_long, 0).is_err());
        let verb = Submission::to_first_link(9, verbs()[0]);
        let records = encode_submission(&verb, 0).unwrap();
        assert!(matches!(
            decode_request(records.as_slice()),
            Some(HostRequest::Verb(s)) if s.id == 9
        ));
        // The largest message the ring carries, with and without an
        // immediate; and a refusal.
        let full = [0xa5; MAX_RECEIVE];
        for (imm, data) in [(Some(u32::MAX), &full[..]), (None, &b""[..])] {
            let r = Received {
                id: 4,
                result: Ok(Message {
                    imm,
                    data: Block::new(data).unwrap(),
                }),
            };
            let records = encode_received(&r, 1);
            assert!(is_received(&records.as_slice()[0]));
            assert!(decode_completion(records.as_slice()).is_none());
            let back = decode_received(records.as_slice()).unwrap();
            let m = back.result.unwrap();
            assert_eq!((back.id, m.imm, m.data.as_slice()), (4, imm, data));
        }
        let refused = Received {
            id: 5,
            result: Err(NotSubmitted::NoRoute(0)),
        };
        let back = decode_received(encode_received(&refused, 1).as_slice()).unwrap();
        assert!(matches!(back.result, Err(NotSubmitted::NoRoute(_))));
    }

    #[test]
    fn writes_and_sends_from_a_local_block_round_trip() {
        let target = RegionRef { id: 1, key: 0xabcd };
        for (verb, to) in [
            (
                LocalVerb::Write {
                    target,
                    offset: 4096,
                },
                Destination::Node(9),
            ),
            (LocalVerb::Send { imm: Some(3) }, Destination::FirstLink),
            (LocalVerb::Read { target, offset: 64 }, Destination::Link(1)),
            (LocalVerb::Send { imm: None }, Destination::Link(2)),
        ] {
            let s = LocalSubmission {
                id: 5,
                to,
                verb,
                local_region: 2,
                local_offset: 128,
                len: crate::api::MAX_TRANSFER,
            };
            let records = encode_local(&s, 1);
            assert_eq!(records.as_slice().len(), 1, "one record names the block");
            assert!(decode_submission(records.as_slice()).is_none());
            match decode_request(records.as_slice()) {
                Some(HostRequest::FromLocal(back)) => assert_eq!(back, s),
                other => panic!("{verb:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn every_completion_round_trips() {
        let results = [
            Ok(Output::Read {
                len: MAX_BLOCK as u16,
            }),
            Ok(Output::Write),
            Ok(Output::CompareAndSwap {
                old: 42,
                swapped: true,
            }),
            Ok(Output::FetchAdd { old: 7 }),
            Ok(Output::Swap { old: 8 }),
            Ok(Output::MultiWordCommit {
                committed: true,
                count: MAX_MCAS_WORDS as u8,
                old: [9; MAX_MCAS_WORDS],
            }),
            Ok(Output::BilateralSwap { len: 16 }),
            Ok(Output::Send),
            Err(AppError::Verb(VerbError::Refused(Refusal::BadKey))),
            Err(AppError::Verb(VerbError::Exhausted(
                ReverseReason::EchoMissing,
            ))),
            Err(AppError::Verb(VerbError::Unreachable)),
            Err(AppError::NotSubmitted(NotSubmitted::QueueFull)),
        ];
        for (i, result) in results.into_iter().enumerate() {
            let c = Completion {
                id: i as u64,
                result,
                latency_ns: 1234,
            };
            let records = encode_completion(&c, 3);
            // No data inline: every completion is a record, MCAS's two.
            assert!(records.as_slice().len() <= 2, "completion {i}");
            let back = decode_completion(records.as_slice()).unwrap();
            assert_eq!(back.id, c.id);
            assert_eq!(back.latency_ns, 1234);
            assert_eq!(back.result, c.result, "completion {i}");
        }
        // A reason with a detail the ring does not carry keeps its code.
        let c = Completion {
            id: 9,
            result: Err(AppError::NotSubmitted(NotSubmitted::Invalid("too long"))),
            latency_ns: 0,
        };
        let Err(AppError::NotSubmitted(back)) =
            decode_completion(encode_completion(&c, 0).as_slice())
                .unwrap()
                .result
        else {
            panic!("a refusal decodes as a refusal");
        };
        assert_eq!(back.code(), NotSubmitted::Invalid("").code());
    }
}
