//! The vector format's words: hex, the verbs a vector may submit, how a
//! completion is written, and the counters it may check. The generator
//! writes with these and the replayer reads with them, so the two cannot
//! disagree about the format `vectors/README.md` documents.

use oae_proto::verb::{Block, Output, Refusal, ReverseReason, Verb, VerbError};
use oae_proto::wire::Malformed;
use oae_proto::{LinkStats, RegionRef};

/// The IUT's region 1: every permission, 64 bytes, key 42.
pub const REGION: RegionRef = RegionRef { id: 1, key: 42 };
/// The IUT's region 2: read only, 64 bytes, key 7.
pub const READ_ONLY: RegionRef = RegionRef { id: 2, key: 7 };
/// Bytes in each of the IUT's regions.
pub const REGION_LEN: u32 = 64;

pub fn hex(bytes: &[u8]) -> String {
    oae_common::hex::encode(bytes)
}

pub fn unhex(s: &str) -> Vec<u8> {
    oae_common::hex::decode(s).unwrap_or_else(|e| panic!("{e}: {s}"))
}

/// `cas offset=O expected=E new=N` or `faa offset=O add=A`, on region 1,
/// or `send data=HEX imm=N` (`imm=-`: none).
pub fn verb_text(verb: &Verb) -> String {
    match *verb {
        Verb::Send { imm, data } => format!(
            "send data={} imm={}",
            hex(data.as_slice()),
            imm.map_or("-".into(), |i| i.to_string())
        ),
        Verb::CompareAndSwap {
            offset,
            expected,
            new,
            ..
        } => format!("cas offset={offset} expected={expected} new={new}"),
        Verb::FetchAdd { offset, add, .. } => format!("faa offset={offset} add={add}"),
        ref other => panic!("vectors submit only cas, faa and send, not {other:?}"),
    }
}

pub fn parse_verb(text: &str) -> Verb {
    let mut words = text.split_whitespace();
    let kind = words.next().expect("a verb");
    if kind == "send" {
        let mut value = |name: &str| {
            let w = words.next().unwrap_or_else(|| panic!("{text}: no {name}"));
            let v = w.strip_prefix(name).and_then(|w| w.strip_prefix('='));
            v.unwrap_or_else(|| panic!("{text}: {w}")).to_string()
        };
        let data = Block::new(&unhex(&value("data"))).expect("a message fits");
        let imm = match value("imm").as_str() {
            "-" => None,
            n => Some(n.parse().unwrap_or_else(|_| panic!("{text}: imm {n}"))),
        };
        return Verb::Send { imm, data };
    }
    let field = |words: &mut dyn Iterator<Item = &str>, name: &str| -> u64 {
        let w = words.next().unwrap_or_else(|| panic!("{text}: no {name}"));
        let (k, v) = w.split_once('=').unwrap_or_else(|| panic!("{text}: {w}"));
        assert_eq!(k, name, "{text}");
        v.parse().unwrap_or_else(|_| panic!("{text}: {v}"))
    };
    let offset = field(&mut words, "offset") as u32;
    match kind {
        "cas" => Verb::CompareAndSwap {
            target: REGION,
            offset,
            expected: field(&mut words, "expected"),
            new: field(&mut words, "new"),
        },
        "faa" => Verb::FetchAdd {
            target: REGION,
            offset,
            add: field(&mut words, "add"),
        },
        other => panic!("unknown verb {other} in {text}"),
    }
}

/// `ok old=O swapped=S`, `ok old=O`, `ok` (SEND) or `err REASON`.
pub fn result_text(result: &Result<Output, VerbError>) -> String {
    match result {
        Ok(Output::Send) => "ok".into(),
        Ok(Output::CompareAndSwap { old, swapped }) => format!("ok old={old} swapped={swapped}"),
        Ok(Output::FetchAdd { old }) => format!("ok old={old}"),
        Ok(other) => panic!("vectors submit only cas, faa and send, not {other:?}"),
        Err(e) => format!("err {}", error_name(e)),
    }
}

/// `ID LEN IMM` (`IMM` `-`: none) of a filled receive.
pub fn received_text((id, len, imm): (u64, u16, Option<u32>)) -> String {
    format!("{id} {len} {}", imm.map_or("-".into(), |i| i.to_string()))
}

fn error_name(e: &VerbError) -> String {
    match e {
        VerbError::Refused(r) => format!("refused_{}", refusal_name(*r)),
        VerbError::Unreachable => "unreachable".into(),
        VerbError::PeerRestarted => "peer_restarted".into(),
        VerbError::Exhausted(ReverseReason::EchoMissing) => "echo_missing".into(),
        VerbError::Exhausted(ReverseReason::EchoMismatch) => "echo_mismatch".into(),
        VerbError::Exhausted(ReverseReason::LocalLocked) => "local_locked".into(),
        VerbError::LocalLocked => "local_locked".into(),
        VerbError::TooLarge => "too_large".into(),
    }
}

pub fn refusal_name(r: Refusal) -> &'static str {
    match r {
        Refusal::NoCredit => "no_credit",
        Refusal::UnknownRegion => "unknown_region",
        Refusal::BadKey => "bad_key",
        Refusal::OutOfBounds => "out_of_bounds",
        Refusal::Malformed => "malformed",
        Refusal::Forbidden => "forbidden",
        Refusal::Locked => "locked",
        Refusal::Misaligned => "misaligned",
        Refusal::NoReceive => "no_receive",
        Refusal::ReceiveTooSmall => "receive_too_small",
    }
}

/// A link counter by name: `malformed.REASON` or one of
/// [`LinkStats::named`].
pub fn counter(stats: &LinkStats, name: &str) -> u64 {
    if let Some(reason) = name.strip_prefix("malformed.") {
        let i = Malformed::ALL
            .iter()
            .position(|m| m.name() == reason)
            .unwrap_or_else(|| panic!("no malformed reason {reason}"));
        return stats.malformed[i];
    }
    stats
        .named()
        .into_iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no counter {name}"))
        .1
}
