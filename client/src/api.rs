//! What an application exchanges with a polling core: submissions, their one
//! completion, and why a verb was not submitted, as an enum with stable
//! codes (the host ring carries the code, never the text).

use oae_proto::verb::{Block, Output, Verb, VerbError};
use oae_proto::{LinkId, SubmitError};

/// A verb submitted by an application (in process, or through the host
/// ring), and where it goes.
#[derive(Clone, Copy, Debug)]
pub struct Submission {
    /// The application's name for it, returned in its completion.
    pub id: u64,
    pub verb: Verb,
    pub to: Destination,
}

impl Submission {
    /// A verb for the queue's first link, as applications sent them before
    /// they named a destination.
    pub fn to_first_link(id: u64, verb: Verb) -> Submission {
        Submission {
            id,
            verb,
            to: Destination::FirstLink,
        }
    }
}

/// Where an application's verb goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Destination {
    /// The queue's first link.
    #[default]
    FirstLink,
    /// A link of the queue, in the order of its peers.
    Link(LinkId),
    /// A node, by its id: the link to it, or a path through the fabric.
    Node(u64),
}

/// A verb on a block of the dataplane's own registered memory, named by
/// the host ring instead of carried by it, as an RDMA verb names a
/// registered buffer: a WRITE's or SEND's bytes are read from the block
/// when the dataplane takes the verb, a READ lands in it. A WRITE or READ
/// longer than a frame ([`oae_proto::verb::MAX_BLOCK`]), up to
/// [`MAX_TRANSFER`], is split into verbs of a frame each and completes
/// once; a SEND is one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalSubmission {
    pub id: u64,
    pub to: Destination,
    pub verb: LocalVerb,
    pub local_region: u16,
    pub local_offset: u32,
    pub len: u32,
}

/// The longest transfer a [`LocalSubmission`] makes: 64 frames.
pub const MAX_TRANSFER: u32 = 64 * oae_proto::verb::MAX_BLOCK as u32;

/// What a [`LocalSubmission`] does with its block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalVerb {
    Write {
        target: oae_proto::RegionRef,
        offset: u32,
    },
    Read {
        target: oae_proto::RegionRef,
        offset: u32,
    },
    Send {
        imm: Option<u32>,
    },
}

impl LocalSubmission {
    /// The part `len` bytes long, `at` bytes into the transfer: its block
    /// and its target that far in.
    pub fn part(&self, at: u32, len: u32) -> LocalSubmission {
        let verb = match self.verb {
            LocalVerb::Write { target, offset } => LocalVerb::Write {
                target,
                offset: offset.wrapping_add(at),
            },
            LocalVerb::Read { target, offset } => LocalVerb::Read {
                target,
                offset: offset.wrapping_add(at),
            },
            send @ LocalVerb::Send { .. } => send,
        };
        LocalSubmission {
            verb,
            local_offset: self.local_offset.wrapping_add(at),
            len,
            ..*self
        }
    }

    /// The verb of a transfer of one frame at most, its bytes (a WRITE's,
    /// a SEND's) read from the dataplane's `memory` now; `None` if the
    /// block is not inside one of its regions or is longer than a frame.
    pub fn verb(&self, memory: &impl oae_proto::Store) -> Option<Verb> {
        let len = u16::try_from(self.len)
            .ok()
            .filter(|&l| usize::from(l) <= oae_proto::verb::MAX_BLOCK)?;
        let (region, at) = (self.local_region, self.local_offset);
        memory.check_local(region, at, len).ok()?;
        let bytes = || memory.with_block(region, at, len, Block::new);
        Some(match self.verb {
            LocalVerb::Write { target, offset } => Verb::Write {
                target,
                offset,
                data: bytes()?,
            },
            LocalVerb::Read { target, offset } => Verb::Read {
                target,
                offset,
                local_region: region,
                local_offset: at,
                len,
            },
            LocalVerb::Send { imm } => Verb::Send {
                imm,
                data: bytes()?,
            },
        })
    }
}

/// A receive a program posts through the host ring: the block of the
/// dataplane's registered memory its message lands in, on the link that
/// `from` names (a node's receive is posted on the link to it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReceivePost {
    /// The program's name for it, returned with its message.
    pub id: u64,
    pub from: Destination,
    pub region: u16,
    pub offset: u32,
    pub len: u16,
}

/// What a posted receive came to: the message that filled it (its bytes
/// travel back with it), or why it was never posted or was given back.
#[derive(Clone, Copy, Debug)]
pub struct Received {
    pub id: u64,
    pub result: Result<Message, NotSubmitted>,
}

/// A message a SEND delivered.
#[derive(Clone, Copy, Debug)]
pub struct Message {
    pub imm: Option<u32>,
    pub data: Block,
}

/// The one completion of a submitted verb. `Err` means it had no effect,
/// at the target or in a READ's or bilateral swap's local block.
#[derive(Clone, Copy, Debug)]
pub struct Completion {
    pub id: u64,
    pub result: Result<Output, AppError>,
    /// From the burst that submitted it to the burst that completed it.
    pub latency_ns: u64,
}

// Completions are queued by value between cores: with a READ's or bilateral
// swap's bytes landing in local memory, one stays two cache lines.
const _: () = assert!(size_of::<Completion>() <= 128);

/// Why an application's verb did nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppError {
    Verb(VerbError),
    /// Refused before it reached the link.
    NotSubmitted(NotSubmitted),
}

/// Why a verb was refused before it reached a link. The codes are stable:
/// they cross the host ring, and a reader that meets a code it does not
/// know gets [`NotSubmitted::Refused`], never a wrong reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotSubmitted {
    /// A reason this build of the reader has no name for.
    Refused,
    QueueFull,
    ShuttingDown,
    /// The queue's transport does not run this verb (the RC model runs
    /// read, write, cas and faa).
    NotForTransport,
    /// The host ring's record did not decode.
    Undecodable,
    /// The verb can never be carried; the text says why (it does not
    /// cross the host ring).
    Invalid(&'static str),
    /// The queue has no such link.
    NoSuchLink(LinkId),
    /// The RC model's queue pair has failed.
    QpFailed,
    /// No link and no route through the fabric leads to this node.
    NoRoute(u64),
    /// A host program took the verb back from a bilateral host ring before
    /// the dataplane took it (the dataplane is gone, or the program quits).
    Recalled,
}

impl NotSubmitted {
    pub fn code(self) -> u8 {
        match self {
            NotSubmitted::Refused => 0,
            NotSubmitted::QueueFull => 1,
            NotSubmitted::ShuttingDown => 2,
            NotSubmitted::NotForTransport => 3,
            NotSubmitted::Undecodable => 4,
            NotSubmitted::Invalid(_) => 5,
            NotSubmitted::NoSuchLink(_) => 6,
            NotSubmitted::QpFailed => 7,
            NotSubmitted::NoRoute(_) => 8,
            NotSubmitted::Recalled => 9,
        }
    }

    /// The reason a code names; details that do not cross the ring are
    /// left out.
    pub fn from_code(code: u8) -> NotSubmitted {
        match code {
            1 => NotSubmitted::QueueFull,
            2 => NotSubmitted::ShuttingDown,
            3 => NotSubmitted::NotForTransport,
            4 => NotSubmitted::Undecodable,
            5 => NotSubmitted::Invalid("the dataplane found the verb invalid"),
            6 => NotSubmitted::NoSuchLink(LinkId::MAX),
            7 => NotSubmitted::QpFailed,
            8 => NotSubmitted::NoRoute(0),
            9 => NotSubmitted::Recalled,
            _ => NotSubmitted::Refused,
        }
    }
}

impl From<SubmitError> for NotSubmitted {
    fn from(e: SubmitError) -> NotSubmitted {
        match e {
            SubmitError::QueueFull => NotSubmitted::QueueFull,
            SubmitError::Invalid(why) => NotSubmitted::Invalid(why),
            SubmitError::UnknownLink(link) => NotSubmitted::NoSuchLink(link),
            SubmitError::NoRoute(node) => NotSubmitted::NoRoute(node),
        }
    }
}

impl NotSubmitted {
    /// The reason in words, without the details a variant may carry: what
    /// a completion's status code says (`oae_strerror`).
    pub fn summary(self) -> &'static str {
        match self {
            NotSubmitted::Refused => "refused by the dataplane",
            NotSubmitted::QueueFull => "submission queue full: poll completions, then retry",
            NotSubmitted::ShuttingDown => "the dataplane is shutting down",
            NotSubmitted::NotForTransport => {
                "not an RC verb: the RC model runs read, write, cas and faa"
            }
            NotSubmitted::Undecodable => "the dataplane could not decode the request record",
            NotSubmitted::Invalid(_) => "invalid verb",
            NotSubmitted::NoSuchLink(_) => "no such link on this queue",
            NotSubmitted::QpFailed => "the RC model's queue pair has failed",
            NotSubmitted::NoRoute(_) => "no link or route to that node",
            NotSubmitted::Recalled => "taken back before the dataplane took it",
        }
    }
}

impl core::fmt::Display for NotSubmitted {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            NotSubmitted::Invalid(why) => write!(f, "invalid verb: {why}"),
            NotSubmitted::NoSuchLink(link) if link != LinkId::MAX => {
                write!(f, "no link {link} on this queue")
            }
            NotSubmitted::NoRoute(node) if node != 0 => {
                write!(f, "no link or route to node {node}")
            }
            plain => f.write_str(plain.summary()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable_and_unknown_ones_are_named_as_such() {
        let all = [
            NotSubmitted::Refused,
            NotSubmitted::QueueFull,
            NotSubmitted::ShuttingDown,
            NotSubmitted::NotForTransport,
            NotSubmitted::Undecodable,
            NotSubmitted::Invalid("x"),
            NotSubmitted::NoSuchLink(3),
            NotSubmitted::QpFailed,
            NotSubmitted::NoRoute(0),
            NotSubmitted::Recalled,
        ];
        for (code, why) in all.into_iter().enumerate() {
            assert_eq!(why.code(), code as u8);
            assert_eq!(NotSubmitted::from_code(code as u8).code(), code as u8);
        }
        assert_eq!(NotSubmitted::from_code(200), NotSubmitted::Refused);
    }
}
