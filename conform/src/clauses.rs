//! The clauses of docs/PROTOCOL.md the tester checks, in the order it
//! runs them: an id from the specification, what it says, and its check.

use crate::ctx::{Ctx, Outcome, fail};
use crate::target;

/// A clause: its id, what it says, and its check.
pub struct Clause {
    pub id: &'static str,
    pub says: &'static str,
    pub check: fn(&mut Ctx) -> Result<Option<String>, String>,
}

macro_rules! clause {
    ($id:expr, $says:expr, $f:expr) => {
        Clause {
            id: $id,
            says: $says,
            check: $f,
        }
    };
}

fn done(r: Outcome) -> Result<Option<String>, String> {
    r.map(|()| None)
}

pub fn all() -> Vec<Clause> {
    vec![
        clause!(
            "B1 B2 R7 R8 R9",
            "bring-up with the tester as Bob: HELLO 0, HELLO 1 naming it with Alice's role, HELLO 2",
            |c| { done(c.fresh()) }
        ),
        clause!(
            "L1 R14",
            "a TICK is answered by a TOCK reflecting it",
            |c| done(target::tick_tock(c))
        ),
        clause!(
            "L1",
            "the IUT, Alice, ticks in rounds it sends nothing, with its round length",
            |c| { done(target::iut_ticks(c)) }
        ),
        clause!(
            "D1 D4",
            "announcements from the up link's peer never reach the link: no HELLO, TICKs answered",
            |c| { done(crate::announce::ignored_by_an_up_link(c)) }
        ),
        clause!(
            "O3 R16",
            "unanswered probes wait ever longer; a TOCK for a superseded TICK answers only it",
            |c| { done(crate::probes::late_tocks(c)) }
        ),
        clause!(
            "V1 V2 R20 R23",
            "the seven verbs applied tentatively, echoed, committed",
            |c| { done(target::every_verb(c)) }
        ),
        clause!(
            "I2 R20",
            "a REQUEST with previous-committed commits the slot's last transfer",
            |c| { done(target::carried_commit(c)) }
        ),
        clause!(
            "R22 R24",
            "a repeated REQUEST gets the latest answer: the ECHO, then the COMMIT_ACK; applied once",
            |c| { done(target::duplicates(c)) }
        ),
        clause!(
            "S1 R19 R30",
            "sequence 0 on a fresh slot, or two ahead, or behind, is not answered",
            |c| { done(target::sequences(c)) }
        ),
        clause!(
            "S1 (wrap)",
            "65,540 transfers on one slot: sequence 0xFFFF is followed by 0, an ordinary number",
            |c| { done(crate::wrap::sequence_wrap(c)) }
        ),
        clause!(
            "R26 R27 R22",
            "REVERSE restores the memory; again, and a late REQUEST, get the REVERSE_ACK",
            |c| { done(target::reversal(c)) }
        ),
        clause!(
            "R29",
            "REVERSE of a REQUEST never seen: acknowledged, and the late REQUEST never applied",
            |c| { done(target::reverse_unseen(c)) }
        ),
        clause!(
            "R21 R25 R28",
            "frames a correct initiator never sends are not answered and change nothing",
            |c| { done(target::violations(c)) }
        ),
        clause!(
            "V3",
            "every refusal reason, and a refusal changes nothing",
            target::refusals
        ),
        clause!(
            "R41 V4",
            "a SEND to an IUT whose application posted no receive is refused `no receive` at once",
            |c| { done(target::send_without_receive(c)) }
        ),
        clause!(
            "R31",
            "a REQUEST beyond the credits offered is refused `no credit`",
            target::credits
        ),
        clause!(
            "R1",
            "a malformed frame of each reason is dropped; the link stays up",
            |c| { done(target::malformed(c)) }
        ),
        clause!(
            "R3 R4 R5 R6",
            "HELLOs of the wrong class, payload, an older epoch or the wrong role change nothing",
            |c| { done(target::bad_hellos(c)) }
        ),
        clause!(
            "R10 R11 R13 R16 R33",
            "frames of another epoch, level, role or class, a TICK with junk, answers to nothing: \
             not answered",
            |c| { done(target::disagreeing(c)) }
        ),
        clause!(
            "R17 R18",
            "a slot beyond the IUT's, a COMMIT with a payload: not answered",
            |c| { done(target::slot_checks(c)) }
        ),
        clause!(
            "I1 V1 R35 R38",
            "the IUT as initiator: six verbs, each REQUEST exactly the verb in the smallest class, then its COMMIT",
            |c| { initiating(c, crate::initiator::every_verb) }
        ),
        clause!(
            "I1 V1 (BILATERAL SWAP)",
            "the IUT's BILATERAL SWAP carries its local block; the echoed block lands in it",
            |c| { initiating(c, crate::initiator::bilateral_swap) }
        ),
        clause!(
            "I3 R36 R39",
            "an ECHO with a wrong reflection: REVERSE, then the verb again on a new sequence number",
            |c| { initiating(c, crate::initiator::mismatch) }
        ),
        clause!(
            "R37 I4",
            "`bad key` fails the verb with no retry; `locked` is retried",
            |c| { initiating(c, crate::initiator::refused) }
        ),
        clause!(
            "O1 R40",
            "a frame whose `seen` covers an unanswered REQUEST reverses it at once",
            |c| { initiating(c, crate::initiator::loss_by_order) }
        ),
        clause!(
            "B4",
            "a restarted tester: its tentative transfer is committed by presumption",
            |c| { done(target::restart(c)) }
        ),
        frames_well_formed(),
    ]
}

/// The clauses of the fabric's frames, for an IUT that runs the fabric.
pub fn fabric() -> Vec<Clause> {
    vec![
        clause!("B1 B2 R7 R8 R9", "bring-up with the tester as Bob", |c| {
            done(c.fresh())
        }),
        clause!(
            "A1",
            "ADVERTs in the smallest class, one page, ascending, the IUT at 0 hops, the view digest, poisoned reverse",
            |c| { done(crate::fabric::adverts(c)) }
        ),
        clause!(
            "A2",
            "the IUT's path to the tester travels in FORWARD frames holding whole OAE frames",
            |c| { done(crate::fabric::forwards(c)) }
        ),
        frames_well_formed(),
    ]
}

/// The clauses of an authenticated link (`--auth-key`): every frame of
/// theirs, and of bring-up before them, is sealed and checked.
pub fn authenticated() -> Vec<Clause> {
    vec![
        clause!(
            "B1 B2 R7 R8 R9",
            "bring-up with the tester as Bob, every HELLO sealed",
            |c| { done(c.fresh()) }
        ),
        clause!(
            "AUTH",
            "a bad tag, an unknown key, no trailer, an old epoch, a replay: dropped; the link lives",
            |c| { done(crate::auth::forged_frames(c)) }
        ),
        clause!(
            "V1 V2 R20 R23",
            "the seven verbs over the authenticated link",
            |c| { done(target::every_verb(c)) }
        ),
        frames_well_formed(),
    ]
}

/// The clauses of a link with `ordered = false` (`--unordered`).
pub fn unordered() -> Vec<Clause> {
    vec![
        clause!("B1 B2 R7 R8 R9", "bring-up with the tester as Bob", |c| {
            done(c.fresh())
        }),
        clause!(
            "L1",
            "the IUT, Alice, ticks in rounds it sends nothing, with its round length",
            |c| { done(target::iut_ticks(c)) }
        ),
        clause!(
            "I3 (patience)",
            "a `seen` past an unanswered REQUEST proves nothing: reversed after patience, retried",
            |c| { initiating(c, crate::initiator::loss_by_patience) }
        ),
        clause!(
            "V1 V2 R20 R23",
            "the seven verbs over the unordered link",
            |c| { done(target::every_verb(c)) }
        ),
        frames_well_formed(),
    ]
}

fn frames_well_formed() -> Clause {
    clause!(
        "F1",
        "every frame the IUT sent was well-formed, level 2 with its role, numbered in order",
        |c| {
            match c.peer.frame_faults.first() {
                None => Ok(None),
                Some(first) => fail(format!(
                    "{} faults, the first: {first}",
                    c.peer.frame_faults.len()
                )),
            }
        }
    )
}

fn initiating(c: &mut Ctx, check: fn(&mut Ctx) -> Outcome) -> Result<Option<String>, String> {
    if c.submit.is_none() {
        return Ok(Some("not checked: give --submit".into()));
    }
    check(c).map(|()| None)
}
