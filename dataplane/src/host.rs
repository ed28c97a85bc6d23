//! Host programs reach a dataplane that runs on an IPU's cores through a
//! swap-ring region standing in for the PCIe BAR ([`oae_swapring`]).
//!
//! The dataplane creates the region, as a device exposes its BAR, and its
//! polling core serves it between bursts ([`HostPort`]); a program on the
//! host attaches with [`HostQueue`] and uses the same verbs API as an
//! in-process application ([`crate::embed::EmbeddedQueue`]): `submit` a
//! [`Submission`], `poll_completion` for its one [`Completion`].
//!
//! Each verb and each completion is one 64-byte record on the region's
//! verb rings. What does not fit one record is refused on the host with a
//! completion that says so, before anything reaches the dataplane: WRITE
//! data up to [`MAX_WRITE`] bytes, READ and BILATERAL SWAP up to
//! [`MAX_READ`], no multi-word commit.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use oae_proto::{Block, Output, Refusal, RegionRef, ReverseReason, Verb, VerbError};
use oae_swapring::cost::CostModel;
use oae_swapring::layout::{Geometry, Mode, RING_VERB_REQUESTS, RING_VERB_RESPONSES};
use oae_swapring::region::{Region, RegionConfig, Side};
use oae_swapring::verbs::{VERB_PAYLOAD_BYTES, VerbRecord, VerbsDevice, VerbsHost};

use crate::api::{AppError, Completion, NotSubmitted, Submission};

/// Largest WRITE a host record carries.
pub const MAX_WRITE: usize = VERB_PAYLOAD_BYTES - HEAD;
/// Largest READ or BILATERAL SWAP whose result a host record carries.
pub const MAX_READ: usize = VERB_PAYLOAD_BYTES - RESULT_HEAD;

/// Region id, key and offset lead every request.
const HEAD: usize = 10;
/// Latency and the outcome byte lead every completion.
const RESULT_HEAD: usize = 9;

// Request tags: the verb.
const READ: u32 = 1;
const WRITE: u32 = 2;
const CAS: u32 = 3;
const FAA: u32 = 4;
const SWAP: u32 = 5;
const BSWAP: u32 = 7;

// Completion tags: the outcome.
const DONE: u32 = 0;
const NOT_SUBMITTED: u32 = 1;
const FAILED: u32 = 2;

/// The host side's record of a verb, or why it does not fit one.
pub fn encode_submission(s: &Submission) -> Result<VerbRecord, &'static str> {
    let mut b = [0u8; VERB_PAYLOAD_BYTES];
    let head = |b: &mut [u8; VERB_PAYLOAD_BYTES], t: &RegionRef, offset: u32| {
        b[0..2].copy_from_slice(&t.id.to_le_bytes());
        b[2..6].copy_from_slice(&t.key.to_le_bytes());
        b[6..10].copy_from_slice(&offset.to_le_bytes());
    };
    let (tag, len) = match &s.verb {
        Verb::Read {
            target,
            offset,
            len,
        } => {
            if usize::from(*len) > MAX_READ {
                return Err("a READ over the host ring returns at most 39 bytes");
            }
            head(&mut b, target, *offset);
            b[10..12].copy_from_slice(&len.to_le_bytes());
            (READ, 12)
        }
        Verb::Write {
            target,
            offset,
            data,
        } => {
            if data.len() > MAX_WRITE {
                return Err("a WRITE over the host ring carries at most 38 bytes");
            }
            head(&mut b, target, *offset);
            b[HEAD..HEAD + data.len()].copy_from_slice(data.as_slice());
            (WRITE, HEAD + data.len())
        }
        Verb::CompareAndSwap {
            target,
            offset,
            expected,
            new,
        } => {
            head(&mut b, target, *offset);
            b[10..18].copy_from_slice(&expected.to_le_bytes());
            b[18..26].copy_from_slice(&new.to_le_bytes());
            (CAS, 26)
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
            head(&mut b, target, *offset);
            b[10..18].copy_from_slice(&operand.to_le_bytes());
            let tag = if matches!(s.verb, Verb::FetchAdd { .. }) {
                FAA
            } else {
                SWAP
            };
            (tag, 18)
        }
        Verb::BilateralSwap {
            target,
            offset,
            local_region,
            local_offset,
            len,
        } => {
            if usize::from(*len) > MAX_READ {
                return Err("a BILATERAL SWAP over the host ring trades at most 39 bytes");
            }
            head(&mut b, target, *offset);
            b[10..12].copy_from_slice(&local_region.to_le_bytes());
            b[12..16].copy_from_slice(&local_offset.to_le_bytes());
            b[16..18].copy_from_slice(&len.to_le_bytes());
            (BSWAP, 18)
        }
        Verb::MultiWordCommit { .. } => {
            return Err("a multi-word commit does not fit a host ring record");
        }
    };
    Ok(VerbRecord::new(s.id, tag, &b[..len]).expect("within the record"))
}

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The dataplane side: the verb a host record asks for, or `None` if the
/// record is not one [`encode_submission`] writes.
pub fn decode_submission(r: &VerbRecord) -> Option<Submission> {
    let b = r.data();
    let want = match r.tag {
        READ => 12,
        CAS => 26,
        FAA | SWAP | BSWAP => 18,
        WRITE if b.len() >= HEAD => b.len(),
        _ => return None,
    };
    if b.len() != want {
        return None;
    }
    let target = RegionRef {
        id: le16(b, 0),
        key: le32(b, 2),
    };
    let offset = le32(b, 6);
    let verb = match r.tag {
        READ => Verb::Read {
            target,
            offset,
            len: le16(b, 10),
        },
        WRITE => Verb::Write {
            target,
            offset,
            data: Block::new(&b[HEAD..])?,
        },
        CAS => Verb::CompareAndSwap {
            target,
            offset,
            expected: le64(b, 10),
            new: le64(b, 18),
        },
        FAA => Verb::FetchAdd {
            target,
            offset,
            add: le64(b, 10),
        },
        SWAP => Verb::Swap {
            target,
            offset,
            new: le64(b, 10),
        },
        _ => Verb::BilateralSwap {
            target,
            offset,
            local_region: le16(b, 10),
            local_offset: le32(b, 12),
            len: le16(b, 16),
        },
    };
    Some(Submission { id: r.id, verb })
}

/// The dataplane side's record of a completion.
pub fn encode_completion(c: &Completion) -> VerbRecord {
    let mut b = [0u8; VERB_PAYLOAD_BYTES];
    b[0..8].copy_from_slice(&c.latency_ns.to_le_bytes());
    let (tag, len) = match &c.result {
        Ok(output) => match output {
            Output::Read(block) | Output::BilateralSwap(block) => {
                // The host refused anything longer before submitting it.
                let n = block.len().min(MAX_READ);
                b[8] = if matches!(output, Output::Read(_)) {
                    READ as u8
                } else {
                    BSWAP as u8
                };
                b[RESULT_HEAD..RESULT_HEAD + n].copy_from_slice(&block.as_slice()[..n]);
                (DONE, RESULT_HEAD + n)
            }
            Output::Write => {
                b[8] = WRITE as u8;
                (DONE, RESULT_HEAD)
            }
            Output::CompareAndSwap { old, swapped } => {
                b[8] = CAS as u8;
                b[9..17].copy_from_slice(&old.to_le_bytes());
                b[17] = u8::from(*swapped);
                (DONE, 18)
            }
            Output::FetchAdd { old } | Output::Swap { old } => {
                b[8] = if matches!(output, Output::FetchAdd { .. }) {
                    FAA as u8
                } else {
                    SWAP as u8
                };
                b[9..17].copy_from_slice(&old.to_le_bytes());
                (DONE, 17)
            }
            Output::MultiWordCommit { .. } => {
                // Never submitted over the ring; say so rather than guess.
                b[8] = NotSubmitted::Refused.code();
                (NOT_SUBMITTED, RESULT_HEAD)
            }
        },
        Err(AppError::NotSubmitted(why)) => {
            b[8] = why.code();
            (NOT_SUBMITTED, RESULT_HEAD)
        }
        Err(AppError::Verb(e)) => {
            let (kind, detail) = match e {
                VerbError::Refused(r) => (1, *r as u8),
                VerbError::Unreachable => (2, 0),
                VerbError::PeerRestarted => (3, 0),
                VerbError::Exhausted(ReverseReason::EchoMissing) => (4, 1),
                VerbError::Exhausted(ReverseReason::EchoMismatch) => (4, 2),
                VerbError::LocalLocked => (5, 0),
                VerbError::TooLarge => (6, 0),
            };
            b[8] = kind;
            b[9] = detail;
            (FAILED, RESULT_HEAD + 1)
        }
    };
    VerbRecord::new(c.id, tag, &b[..len]).expect("within the record")
}

/// The host side: the completion a record carries; `None` if it is not
/// one [`encode_completion`] writes.
pub fn decode_completion(r: &VerbRecord) -> Option<Completion> {
    let b = r.data();
    if b.len() < RESULT_HEAD {
        return None;
    }
    let latency_ns = le64(b, 0);
    let result = match r.tag {
        DONE => Ok(match (u32::from(b[8]), b.len()) {
            (READ, _) => Output::Read(Block::new(&b[RESULT_HEAD..])?),
            (BSWAP, _) => Output::BilateralSwap(Block::new(&b[RESULT_HEAD..])?),
            (WRITE, RESULT_HEAD) => Output::Write,
            (CAS, 18) => Output::CompareAndSwap {
                old: le64(b, 9),
                swapped: b[17] != 0,
            },
            (FAA, 17) => Output::FetchAdd { old: le64(b, 9) },
            (SWAP, 17) => Output::Swap { old: le64(b, 9) },
            _ => return None,
        }),
        NOT_SUBMITTED => Err(AppError::NotSubmitted(NotSubmitted::from_code(b[8]))),
        FAILED if b.len() == RESULT_HEAD + 1 => Err(AppError::Verb(match (b[8], b[9]) {
            (1, r) => VerbError::Refused(Refusal::from_u8(r)?),
            (2, _) => VerbError::Unreachable,
            (3, _) => VerbError::PeerRestarted,
            (4, 1) => VerbError::Exhausted(ReverseReason::EchoMissing),
            (4, 2) => VerbError::Exhausted(ReverseReason::EchoMismatch),
            (5, _) => VerbError::LocalLocked,
            (6, _) => VerbError::TooLarge,
            _ => return None,
        })),
        _ => return None,
    };
    Some(Completion {
        id: r.id,
        result,
        latency_ns,
    })
}

/// Where host programs attach, and what the region emulates.
#[derive(Debug, Clone)]
pub struct HostRing {
    pub path: PathBuf,
    /// Records in each ring: requests the host may have in flight.
    pub capacity: u64,
    pub cost: CostModel,
}

/// Counters of a dataplane's host port.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct HostPortCounters {
    pub requests: u64,
    pub undecodable: u64,
    pub completions: u64,
    /// Completions still waiting for room in the response ring.
    pub completions_waiting: u64,
    /// Completions dropped because even the waiting list was full
    /// (the host stopped taking them).
    pub completions_lost: u64,
}

/// The dataplane's end of the host ring, served by its polling core.
pub struct HostPort {
    region: Region,
    /// Read from the header once: the polling core serves the ring every
    /// burst.
    cost: CostModel,
    /// Completions the response ring had no room for yet, oldest first;
    /// sized once, so serving the host never allocates.
    waiting: VecDeque<VerbRecord>,
    counters: HostPortCounters,
}

impl HostPort {
    /// Creates the region at `ring.path`, replacing a file a dead
    /// dataplane left there.
    pub fn create(ring: &HostRing, waiting_capacity: usize) -> Result<HostPort, String> {
        if ring.path.exists() {
            std::fs::remove_file(&ring.path).map_err(|e| {
                format!("{} exists and cannot be replaced: {e}", ring.path.display())
            })?;
        }
        let region = Region::create(
            &ring.path,
            &RegionConfig {
                mode: Mode::Fito,
                geometry: Geometry {
                    ring_capacity: ring.capacity,
                    slots: 0,
                },
                cost: ring.cost,
                ..RegionConfig::default()
            },
        )
        .map_err(|e| format!("host ring: {e}"))?;
        region.attach_as(Side::Ipu);
        Ok(HostPort {
            cost: region.config().cost,
            region,
            waiting: VecDeque::with_capacity(waiting_capacity),
            counters: HostPortCounters::default(),
        })
    }

    pub fn path(&self) -> &Path {
        self.region.path()
    }

    pub fn counters(&self) -> HostPortCounters {
        HostPortCounters {
            completions_waiting: self.waiting.len() as u64,
            ..self.counters
        }
    }

    /// Takes up to `max` requests: each decoded one goes to `submit`; one
    /// that does not decode, or that `submit` refuses, is answered at once
    /// with the reason, and had no effect.
    pub fn take(
        &mut self,
        max: usize,
        mut submit: impl FnMut(Submission) -> Result<(), NotSubmitted>,
    ) {
        let Self {
            region,
            cost,
            waiting,
            counters,
        } = self;
        let mut device = ipu_end(region, *cost);
        for _ in 0..max {
            let Some(request) = device.poll_request() else {
                break;
            };
            counters.requests += 1;
            match request.ok().as_ref().and_then(decode_submission) {
                Some(s) => {
                    let id = s.id;
                    if let Err(why) = submit(s) {
                        let refusal = Completion {
                            id,
                            result: Err(AppError::NotSubmitted(why)),
                            latency_ns: 0,
                        };
                        queue_completion(waiting, counters, &refusal);
                    }
                }
                None => {
                    counters.undecodable += 1;
                    let refusal = Completion {
                        // The id is the record's first word either way.
                        id: request.map_or_else(|raw| raw[0], |r| r.id),
                        result: Err(AppError::NotSubmitted(NotSubmitted::Undecodable)),
                        latency_ns: 0,
                    };
                    queue_completion(waiting, counters, &refusal);
                }
            }
        }
        device.release();
    }

    /// Queues a completion for the host; [`HostPort::flush`] publishes.
    pub fn complete(&mut self, c: Completion) {
        queue_completion(&mut self.waiting, &mut self.counters, &c);
    }

    /// Publishes waiting completions, as many as the response ring takes,
    /// with one posted write.
    pub fn flush(&mut self) {
        if self.waiting.is_empty() {
            return;
        }
        let Self {
            region,
            cost,
            waiting,
            counters,
        } = self;
        let mut device = ipu_end(region, *cost);
        while let Some(r) = waiting.front() {
            if device.complete(r).is_err() {
                break;
            }
            waiting.pop_front();
            counters.completions += 1;
        }
        device.flush();
    }
}

/// The dataplane's end of the verb rings, for one burst.
fn ipu_end(region: &Region, cost: CostModel) -> VerbsDevice<'_> {
    VerbsDevice::new(
        region.ring(RING_VERB_REQUESTS).consumer(),
        region.ring(RING_VERB_RESPONSES).producer(),
        cost,
        region.side(Side::Ipu),
    )
}

/// Waiting completions never grow past their first capacity: serving the
/// host allocates nothing, and a completion that finds no room is counted.
fn queue_completion(
    waiting: &mut VecDeque<VerbRecord>,
    counters: &mut HostPortCounters,
    c: &Completion,
) {
    if waiting.len() == waiting.capacity() {
        counters.completions_lost += 1;
        return;
    }
    waiting.push_back(encode_completion(c));
}

/// A host program's handle on a dataplane's host ring: the verbs API of
/// [`crate::embed::EmbeddedQueue`], across the (emulated) PCIe boundary.
pub struct HostQueue {
    region: Region,
    /// Completions made on this side: verbs that do not fit a record.
    refused: VecDeque<Completion>,
}

impl HostQueue {
    /// Attaches to the ring a dataplane created at `path`, waiting up to
    /// `attempts` short polls for it to appear; a file that is not a host
    /// ring of this version is refused with what is wrong.
    pub fn attach(path: impl AsRef<Path>, attempts: u32) -> Result<HostQueue, String> {
        let region = Region::open_when_ready(path.as_ref(), attempts).map_err(|e| e.to_string())?;
        if region.geometry().ring_capacity == 0 {
            return Err(format!(
                "{}: a region without rings",
                path.as_ref().display()
            ));
        }
        region.attach_as(Side::Host);
        Ok(HostQueue {
            region,
            refused: VecDeque::new(),
        })
    }

    fn host(&self) -> VerbsHost<'_> {
        VerbsHost::new(
            self.region.ring(RING_VERB_REQUESTS).producer(),
            self.region.ring(RING_VERB_RESPONSES).consumer(),
            self.region.config().cost,
            self.region.side(Side::Host),
        )
    }

    /// Submits a verb; gives it back if the request ring is full. A verb
    /// that does not fit a record completes at once with the reason.
    // As `EmbeddedQueue::submit`: the verb comes back by value for a retry;
    // boxing it would allocate once per submission.
    #[allow(clippy::result_large_err)]
    pub fn submit(&mut self, submission: Submission) -> Result<(), Submission> {
        let record = match encode_submission(&submission) {
            Ok(r) => r,
            Err(why) => {
                self.refused.push_back(Completion {
                    id: submission.id,
                    result: Err(AppError::NotSubmitted(NotSubmitted::Invalid(why))),
                    latency_ns: 0,
                });
                return Ok(());
            }
        };
        let mut host = self.host();
        if host.submit(&record).is_err() {
            return Err(submission);
        }
        host.flush();
        Ok(())
    }

    /// The next completion, if one is there. A record that does not decode
    /// (a dataplane of another version) completes its id with the reason.
    pub fn poll_completion(&mut self) -> Option<Completion> {
        if let Some(c) = self.refused.pop_front() {
            return Some(c);
        }
        let mut host = self.host();
        let r = host.poll_completion()?;
        host.release();
        Some(match r.as_ref().ok().and_then(decode_completion) {
            Some(c) => c,
            None => Completion {
                id: r.map_or(u64::MAX, |r| r.id),
                result: Err(AppError::NotSubmitted(NotSubmitted::Refused)),
                latency_ns: 0,
            },
        })
    }

    /// The dataplane's liveness counter: it moves while its polling core
    /// serves the ring.
    pub fn dataplane_interactions(&self) -> u64 {
        self.region.side(Side::Ipu).interactions()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: RegionRef = RegionRef { id: 1, key: 0xae1 };

    fn verbs() -> Vec<Verb> {
        vec![
            Verb::Read {
                target: T,
                offset: 8,
                len: 39,
            },
            Verb::Write {
                target: T,
                offset: 16,
                data: Block::new(&[7; MAX_WRITE]).unwrap(),
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
            Verb::BilateralSwap {
                target: T,
                offset: 48,
                local_region: 2,
                local_offset: 64,
                len: 16,
            },
        ]
    }

    #[test]
    fn every_verb_that_fits_round_trips() {
        for (i, verb) in verbs().into_iter().enumerate() {
            let s = Submission { id: i as u64, verb };
            let back = decode_submission(&encode_submission(&s).unwrap()).unwrap();
            assert_eq!((back.id, back.verb), (s.id, s.verb));
        }
    }

    #[test]
    fn what_does_not_fit_is_refused_with_the_limit() {
        let too_long = Submission {
            id: 1,
            verb: Verb::Write {
                target: T,
                offset: 0,
                data: Block::new(&[0; MAX_WRITE + 1]).unwrap(),
            },
        };
        assert!(
            encode_submission(&too_long)
                .unwrap_err()
                .contains("38 bytes")
        );
        let mcas = Submission {
            id: 2,
            verb: Verb::multi_word_commit(T, &[oae_proto::McasWord::default()]).unwrap(),
        };
        assert!(encode_submission(&mcas).unwrap_err().contains("multi-word"));
        let garbage = VerbRecord::new(3, 99, &[1, 2, 3]).unwrap();
        assert!(decode_submission(&garbage).is_none());
        let short = VerbRecord::new(3, CAS, &[0; 20]).unwrap();
        assert!(decode_submission(&short).is_none());
    }

    #[test]
    fn every_completion_round_trips() {
        let results = [
            Ok(Output::Read(Block::new(&[3; MAX_READ]).unwrap())),
            Ok(Output::Write),
            Ok(Output::CompareAndSwap {
                old: 42,
                swapped: true,
            }),
            Ok(Output::FetchAdd { old: 7 }),
            Ok(Output::Swap { old: 8 }),
            Ok(Output::BilateralSwap(Block::new(&[9; 16]).unwrap())),
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
            let back = decode_completion(&encode_completion(&c)).unwrap();
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
            decode_completion(&encode_completion(&c)).unwrap().result
        else {
            panic!("a refusal decodes as a refusal");
        };
        assert_eq!(back.code(), NotSubmitted::Invalid("").code());
    }
}
