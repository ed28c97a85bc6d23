//! The numbers a C program compares against: return codes, completion
//! statuses (the dataplane's stable [`Outcome`] codes) and opcodes.

use std::ffi::{CStr, CString, c_int};
use std::sync::OnceLock;

use oae_client::outcome::Outcome;
use oae_client::proto::Opcode;

/// Most bytes a WRITE carries through the host ring (9 fewer once
/// `oae_queue_to_node` or `oae_queue_to_link` names where verbs go).
pub const OAE_MAX_DATA: usize = 374;
/// Most bytes a READ or BILATERAL SWAP moves: they land in the dataplane's
/// registered memory, not in the completion.
pub const OAE_MAX_BLOCK: usize = 960;
/// Most bytes a WRITE or READ on a local block moves (`oae_post_write_local`,
/// `oae_post_read`): 64 frames, split into verbs of a frame each and
/// completed once.
pub const OAE_MAX_TRANSFER: usize = 61440;
const _: () = assert!(OAE_MAX_TRANSFER == oae_client::api::MAX_TRANSFER as usize);

/// Most bytes a SEND carries through the host ring to a named node or link
/// (9 more to the ring queue's first link), and a receive holds.
pub const OAE_MAX_MESSAGE: usize = 370;
const _: () = assert!(OAE_MAX_MESSAGE <= oae_client::host::codec::MAX_RECEIVE);

// Returned by the functions (negative).
/// A NULL pointer or an argument out of range; see `oae_last_error`.
pub const OAE_ERR_INVALID: c_int = -1;
/// The host ring is full: poll completions, then post again.
pub const OAE_ERR_AGAIN: c_int = -2;
/// The host ring could not be attached; `oae_last_error` says why.
pub const OAE_ERR_ATTACH: c_int = -3;
/// The dataplane's control socket refused or did not answer.
pub const OAE_ERR_CONTROL: c_int = -4;
/// `oae_region_register`: the dataplane already has a region of that id.
pub const OAE_ERR_EXISTS: c_int = -5;

/// `oae_post_send`'s flag: the message carries `imm`.
pub const OAE_SEND_WITH_IMM: u32 = 1;
/// A RECV completion's `wc_flags`: the message came with `imm_data`.
pub const OAE_WC_WITH_IMM: u32 = 1;

// A completion's `opcode`.
pub const OAE_OP_READ: u32 = 0;
pub const OAE_OP_WRITE: u32 = 1;
pub const OAE_OP_CAS: u32 = 2;
pub const OAE_OP_FAA: u32 = 3;
pub const OAE_OP_SWAP: u32 = 4;
pub const OAE_OP_MCAS: u32 = 5;
pub const OAE_OP_BSWAP: u32 = 6;
pub const OAE_OP_SEND: u32 = 7;
/// A receive's completion: a message filled it (or it was refused).
pub const OAE_OP_RECV: u32 = 8;
/// A completion for an id this queue did not post (never expected).
pub const OAE_OP_UNKNOWN: u32 = 255;

/// A verb kind's `OAE_OP_*` number (the header needs literals, so the
/// numbers are spelt out above; a new kind fails to compile here).
pub(crate) const fn op_number(kind: Opcode) -> u32 {
    match kind {
        Opcode::Read => OAE_OP_READ,
        Opcode::Write => OAE_OP_WRITE,
        Opcode::CompareAndSwap => OAE_OP_CAS,
        Opcode::FetchAdd => OAE_OP_FAA,
        Opcode::Swap => OAE_OP_SWAP,
        Opcode::MultiWordCommit => OAE_OP_MCAS,
        Opcode::BilateralSwap => OAE_OP_BSWAP,
        Opcode::Send => OAE_OP_SEND,
    }
}

// A completion's `status`: the verb took effect (SUCCESS), or had none.
pub const OAE_WC_SUCCESS: u32 = 0;
pub const OAE_WC_REFUSED_NO_CREDIT: u32 = 1;
pub const OAE_WC_REFUSED_UNKNOWN_REGION: u32 = 2;
pub const OAE_WC_REFUSED_BAD_KEY: u32 = 3;
pub const OAE_WC_REFUSED_OUT_OF_BOUNDS: u32 = 4;
pub const OAE_WC_REFUSED_MALFORMED: u32 = 5;
pub const OAE_WC_REFUSED_FORBIDDEN: u32 = 6;
pub const OAE_WC_REFUSED_LOCKED: u32 = 7;
pub const OAE_WC_REFUSED_MISALIGNED: u32 = 8;
pub const OAE_WC_REFUSED_NO_RECEIVE: u32 = 9;
pub const OAE_WC_REFUSED_RECEIVE_TOO_SMALL: u32 = 10;
pub const OAE_WC_UNREACHABLE: u32 = 16;
pub const OAE_WC_PEER_RESTARTED: u32 = 17;
pub const OAE_WC_ECHO_MISSING: u32 = 18;
pub const OAE_WC_ECHO_MISMATCH: u32 = 19;
pub const OAE_WC_LOCAL_LOCKED: u32 = 20;
pub const OAE_WC_TOO_LARGE: u32 = 21;
pub const OAE_WC_NOT_SUBMITTED: u32 = 32;
pub const OAE_WC_QUEUE_FULL: u32 = 33;
pub const OAE_WC_SHUTTING_DOWN: u32 = 34;
pub const OAE_WC_NOT_FOR_TRANSPORT: u32 = 35;
pub const OAE_WC_UNDECODABLE: u32 = 36;
pub const OAE_WC_INVALID: u32 = 37;
pub const OAE_WC_NO_SUCH_LINK: u32 = 38;
pub const OAE_WC_QP_FAILED: u32 = 39;
pub const OAE_WC_NO_ROUTE: u32 = 40;
pub const OAE_WC_RECALLED: u32 = 41;

const ERRORS: [(c_int, &str); 5] = [
    (OAE_ERR_INVALID, "invalid argument"),
    (
        OAE_ERR_AGAIN,
        "the host ring is full: poll completions, then post again",
    ),
    (OAE_ERR_ATTACH, "cannot attach to the host ring"),
    (
        OAE_ERR_CONTROL,
        "the dataplane's control socket refused the request",
    ),
    (
        OAE_ERR_EXISTS,
        "the dataplane already has a region of that id",
    ),
];

/// Every code's text, NUL-terminated, made once.
fn texts() -> &'static [(c_int, CString)] {
    static TEXTS: OnceLock<Vec<(c_int, CString)>> = OnceLock::new();
    TEXTS.get_or_init(|| {
        let errors = ERRORS.iter().map(|&(c, t)| (c, t));
        let statuses = Outcome::ALL
            .iter()
            .map(|o| (c_int::from(o.code()), o.describe()));
        errors
            .chain(statuses)
            .map(|(c, t)| (c, CString::new(t).unwrap_or_default()))
            .collect()
    })
}

pub(crate) fn describe(code: c_int) -> &'static CStr {
    texts()
        .iter()
        .find(|(c, _)| *c == code)
        .map_or(c"unknown code", |(_, t)| t.as_c_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use oae_client::host::MAX_WRITE;
    use oae_client::proto::verb::MAX_BLOCK;

    /// The header's numbers are the dataplane's: a status added there
    /// without its constant here fails this.
    #[test]
    fn statuses_are_the_dataplanes_outcome_codes() {
        let named = [
            (OAE_WC_SUCCESS, Outcome::Ok),
            (OAE_WC_REFUSED_NO_CREDIT, Outcome::RefusedNoCredit),
            (OAE_WC_REFUSED_UNKNOWN_REGION, Outcome::RefusedUnknownRegion),
            (OAE_WC_REFUSED_BAD_KEY, Outcome::RefusedBadKey),
            (OAE_WC_REFUSED_OUT_OF_BOUNDS, Outcome::RefusedOutOfBounds),
            (OAE_WC_REFUSED_MALFORMED, Outcome::RefusedMalformed),
            (OAE_WC_REFUSED_FORBIDDEN, Outcome::RefusedForbidden),
            (OAE_WC_REFUSED_LOCKED, Outcome::RefusedLocked),
            (OAE_WC_REFUSED_MISALIGNED, Outcome::RefusedMisaligned),
            (OAE_WC_REFUSED_NO_RECEIVE, Outcome::RefusedNoReceive),
            (
                OAE_WC_REFUSED_RECEIVE_TOO_SMALL,
                Outcome::RefusedReceiveTooSmall,
            ),
            (OAE_WC_UNREACHABLE, Outcome::Unreachable),
            (OAE_WC_PEER_RESTARTED, Outcome::PeerRestarted),
            (OAE_WC_ECHO_MISSING, Outcome::EchoMissing),
            (OAE_WC_ECHO_MISMATCH, Outcome::EchoMismatch),
            (OAE_WC_LOCAL_LOCKED, Outcome::LocalLocked),
            (OAE_WC_TOO_LARGE, Outcome::TooLarge),
            (OAE_WC_NOT_SUBMITTED, Outcome::NotSubmitted),
            (OAE_WC_QUEUE_FULL, Outcome::QueueFull),
            (OAE_WC_SHUTTING_DOWN, Outcome::ShuttingDown),
            (OAE_WC_NOT_FOR_TRANSPORT, Outcome::NotForTransport),
            (OAE_WC_UNDECODABLE, Outcome::Undecodable),
            (OAE_WC_INVALID, Outcome::Invalid),
            (OAE_WC_NO_SUCH_LINK, Outcome::NoSuchLink),
            (OAE_WC_QP_FAILED, Outcome::QpFailed),
            (OAE_WC_NO_ROUTE, Outcome::NoRoute),
            (OAE_WC_RECALLED, Outcome::Recalled),
        ];
        assert_eq!(named.len(), Outcome::ALL.len());
        for (code, outcome) in named {
            assert_eq!(code, u32::from(outcome.code()), "{outcome:?}");
        }
        assert_eq!(OAE_MAX_DATA, MAX_WRITE);
        assert_eq!(OAE_MAX_BLOCK, MAX_BLOCK);
    }

    /// `OAE_OP_*` count the kinds from 0 in the core's order, one number
    /// each, below `OAE_OP_UNKNOWN`.
    #[test]
    fn opcodes_are_the_cores_kinds() {
        for kind in Opcode::ALL {
            assert_eq!(op_number(kind) as usize, kind.index(), "{kind}");
        }
        assert!(OAE_OP_UNKNOWN as usize >= Opcode::COUNT);
        assert_eq!(OAE_OP_RECV as usize, Opcode::COUNT);
    }

    #[test]
    fn every_code_has_its_own_text() {
        assert_eq!(describe(OAE_ERR_AGAIN).to_str().unwrap(), ERRORS[1].1);
        assert!(
            describe(OAE_WC_REFUSED_BAD_KEY as c_int)
                .to_str()
                .unwrap()
                .contains("key")
        );
        assert_eq!(describe(9999).to_str().unwrap(), "unknown code");
        let t = texts();
        for (i, a) in t.iter().enumerate() {
            assert!(t[i + 1..].iter().all(|b| b.0 != a.0 && b.1 != a.1), "{a:?}");
        }
    }
}
