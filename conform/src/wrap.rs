//! S1 on a live link: one slot's sequence numbers past 0xFFFF, where 0
//! follows as an ordinary number.

use crate::ctx::{Ctx, Outcome, fail};
use crate::frame::COMMIT;
use crate::verbs::Verb;

/// The slot and word the clause uses (no other clause touches them).
const SLOT: u16 = 22;
const WORD: usize = 480;
/// Transfers: past 65,535, through 0, and a few beyond.
const TRANSFERS: u32 = 65_540;

/// 65,540 FETCH_ADDs on one slot, each committed by the next REQUEST's
/// previous-committed bit (I2): every echo must show the count so far,
/// including those on sequence numbers 0xFFFF, 0 and 1 again, and the
/// word must end at the total.
pub fn sequence_wrap(c: &mut Ctx) -> Outcome {
    let faa = Verb::Faa {
        offset: c.offset(WORD),
        add: 1,
    };
    let start = u64::from_le_bytes(c.shadow[WORD..WORD + 8].try_into().unwrap());
    for n in 0..TRANSFERS {
        let seq = c.seq(SLOT).wrapping_add(1);
        c.echo(SLOT, &faa, n > 0)
            .map_err(|e| format!("transfer {n} (sequence {seq}): {e}"))?;
    }
    c.decide(SLOT, COMMIT)?;
    let read = Verb::Read {
        offset: c.offset(WORD),
        len: 8,
    };
    c.echo(SLOT, &read, false)?;
    c.decide(SLOT, COMMIT)?;
    let end = u64::from_le_bytes(c.shadow[WORD..WORD + 8].try_into().unwrap());
    if end != start + u64::from(TRANSFERS) {
        return fail(format!(
            "the word went from {start} to {end} in {TRANSFERS} additions"
        ));
    }
    Ok(())
}
