//! Arbitrary bytes as an OAE frame, and as the payloads inside one.
//!
//! Nothing may panic; whatever parses or decodes must be the canonical
//! encoding of what it decoded to (one byte string, one meaning).

#![no_main]

use libfuzzer_sys::fuzz_target;
use oae_proto::verb::{self, MAX_BLOCK, MAX_MCAS_WORDS, Request};
use oae_proto::wire::{self, Context, Frame, SLICE, TRAILER_LEN};
use oae_proto::{Block, Opcode, Verb};

#[path = "../../tests/tests/wire_props/harness.rs"]
#[allow(dead_code)]
mod harness;

fuzz_target!(|data: &[u8]| {
    check_frame(data);
    // The CRC stops nearly every input at the first check; the same bytes
    // with a correct CRC reach everything behind it.
    if data.len() >= TRAILER_LEN {
        let mut sealed = data.to_vec();
        wire::seal(&mut sealed);
        check_frame(&sealed);
    }
    if let Some(head) = data.first_chunk::<SLICE>()
        && let Ok(c) = Context::decode(head)
    {
        assert_eq!(&c.encode(), head, "context decode is not canonical");
    }
    check_payload(data);
});

fn check_frame(bytes: &[u8]) {
    let Ok(f) = Frame::parse(bytes) else {
        return;
    };
    assert_eq!(f.payload.len(), wire::payload_capacity(f.context.class));
    assert_eq!(f.raw_context, f.context.encode());
    assert_eq!(harness::rebuild(&f), bytes, "frame parse is not canonical");
    check_payload(f.payload);
}

/// `payload` as a request, and as the result of a verb of every kind (both
/// as a whole and after a reflected slice, as in an echo).
fn check_payload(payload: &[u8]) {
    if let Some(req) = verb::decode_request(payload) {
        let (verb, local) = as_verb(&req);
        assert!(verb.request_len() <= payload.len());
        let mut again = vec![0u8; payload.len()];
        verb::encode_request(&verb, local, &mut again);
        assert_eq!(again, payload, "request decode is not canonical");
    }
    for bytes in [payload, payload.get(SLICE..).unwrap_or(&[])] {
        for v in every_kind(bytes) {
            if let Some((out, block)) = verb::decode_output(&v, bytes) {
                assert!(v.result_len() <= bytes.len());
                let mut again = vec![0u8; bytes.len()];
                verb::encode_output(&out, block, &mut again);
                assert_eq!(again, bytes, "output decode is not canonical: {v:?}");
            }
        }
    }
}

/// The verb an initiator would have sent to produce `req` (a BILATERAL
/// SWAP's local block is the data it carries).
fn as_verb<'a>(req: &Request<'a>) -> (Verb, &'a [u8]) {
    match *req {
        Request::Read {
            target,
            offset,
            len,
        } => (
            Verb::Read {
                target,
                offset,
                local_region: 0,
                local_offset: 0,
                len,
            },
            &[],
        ),
        Request::Write {
            target,
            offset,
            data,
        } => (
            Verb::Write {
                target,
                offset,
                data: Block::new(data).expect("decoded blocks fit"),
            },
            &[],
        ),
        Request::Send { imm, data } => (
            Verb::Send {
                imm,
                data: Block::new(data).expect("decoded blocks fit"),
            },
            &[],
        ),
        Request::CompareAndSwap {
            target,
            offset,
            expected,
            new,
        } => (
            Verb::CompareAndSwap {
                target,
                offset,
                expected,
                new,
            },
            &[],
        ),
        Request::FetchAdd {
            target,
            offset,
            add,
        } => (
            Verb::FetchAdd {
                target,
                offset,
                add,
            },
            &[],
        ),
        Request::Swap {
            target,
            offset,
            new,
        } => (
            Verb::Swap {
                target,
                offset,
                new,
            },
            &[],
        ),
        Request::MultiWordCommit {
            target,
            count,
            words,
        } => (
            Verb::MultiWordCommit {
                target,
                count,
                words,
            },
            &[],
        ),
        Request::BilateralSwap {
            target,
            offset,
            data,
        } => (
            Verb::BilateralSwap {
                target,
                offset,
                local_region: 0,
                local_offset: 0,
                len: data.len() as u16,
            },
            data,
        ),
    }
}

/// A verb of every kind whose lengths, counts and expected words come from
/// `bytes` itself, so the fuzzer can make results that match them.
fn every_kind(bytes: &[u8]) -> [Verb; Opcode::COUNT] {
    let at = |i: usize| bytes.get(i).copied().unwrap_or(0);
    let len = u16::from_be_bytes([at(0), at(1)]);
    let len = if usize::from(len) <= MAX_BLOCK {
        len
    } else {
        len % (MAX_BLOCK as u16 + 1)
    };
    let count = (at(1) as usize).clamp(1, MAX_MCAS_WORDS);
    let mut expected = [0u64; MAX_MCAS_WORDS];
    for (k, e) in expected.iter_mut().enumerate() {
        *e = u64::from_be_bytes(core::array::from_fn(|j| at(2 + 8 * k + j)));
    }
    harness::every_kind(len, count, expected)
}
