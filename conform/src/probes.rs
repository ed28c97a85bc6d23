//! O3 and R16 on an idle link: the IUT's probes while the tester leaves
//! its TICKs unanswered, and what an answer to a TICK that a newer one
//! superseded does to them.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::ctx::{Ctx, Outcome, fail};

/// How late the tester answers while it teaches the IUT its round trip:
/// long enough that the probe waits it leads to are tens of
/// milliseconds, far above a loaded machine's scheduling noise.
const SLOW: Duration = Duration::from_millis(20);
/// Round-trip samples the IUT takes at `SLOW` before the check.
const SAMPLES: u32 = 16;
/// The longest the clause waits for the IUT's TICKs.
const PATIENCE: Duration = Duration::from_secs(20);

/// The tester first answers every TICK `SLOW` late, so that the IUT's
/// RTT estimate, and with it its probe wait, is tens of milliseconds.
/// Then it answers none: the IUT's TICKs t1, t2, t3 come, each probe
/// waiting twice as long as the one before (O3). Then it answers t1,
/// late: a TOCK for a superseded TICK is an answer (R16), so both
/// probes after t1 are still unanswered and the wait before t4 is about
/// the IUT's round. An IUT that took that TOCK for an answer to
/// everything probes after W, a fraction of it. No rate is asserted:
/// the first part counts TICKs, the second compares a wait with the
/// round the IUT itself advertises, with a margin of half of it.
pub fn late_tocks(c: &mut Ctx) -> Outcome {
    c.peer.held_ticks = Some(VecDeque::new());
    let outcome = check(c);
    while c.peer.answer_held() {}
    c.peer.held_ticks = None;
    outcome
}

fn check(c: &mut Ctx) -> Outcome {
    let start = Instant::now();
    let mut answered = 0;
    while answered < SAMPLES || !held(c).is_empty() {
        if start.elapsed() > PATIENCE && answered < SAMPLES {
            return fail(format!(
                "{answered} TICKs from the IUT in {PATIENCE:?} (L1: Alice ticks every round)"
            ));
        }
        if start.elapsed() > PATIENCE {
            return fail(format!(
                "{answered} TICKs in {PATIENCE:?} while the tester answered each {SLOW:?} late: \
                 the IUT's probes never came to wait for its answers (O3; R16: a late TOCK is \
                 an answer, and a round-trip sample)"
            ));
        }
        c.peer.next(Duration::from_millis(2));
        while held(c).front().is_some_and(|(at, _)| at.elapsed() >= SLOW) {
            c.peer.answer_held();
            answered += 1;
        }
    }
    let t = wait_for_held(c, 3, start)?;
    let (before_t2, before_t3) = (t[1] - t[0], t[2] - t[1]);
    c.peer.answer_held();
    // A TICK that says a round more than twice t3's is Alice's notice of
    // a grown round (L1), sent at once, not a probe: the probe is the next.
    let round_in =
        |f: &crate::frame::Received| u64::from_be_bytes(f.payload()[..8].try_into().unwrap());
    let t3_round = round_in(&held(c)[1].1);
    let mut n = 3;
    let t4 = loop {
        wait_for_held(c, n, start)?;
        let (at, tick) = &held(c)[n - 1];
        if round_in(tick) > 2 * t3_round {
            n += 1;
            continue;
        }
        break *at;
    };
    // With two probes unanswered the wait is min(4 W, round), W at least
    // 1.25 srtt: the round itself once srtt is a quarter of it. Half the
    // round t3 advertised is the floor: the tester's own scheduling can
    // only stamp t3 late by far less, and an IUT that took the TOCK as an
    // answer to all (the wait back to W) falls below it.
    let before_t4 = t4 - t[2];
    let floor = Duration::from_nanos(t3_round) / 2;
    if before_t4 < floor {
        return fail(format!(
            "TICKs unanswered came {before_t2:?} then {before_t3:?} apart; after a late TOCK for \
             the first (two probes after it still unanswered) the next came {before_t4:?} later, \
             under half the round of {:?} the IUT advertised: the wait shrank (O3; R16: that TOCK \
             answers only its own TICK)",
            Duration::from_nanos(t3_round)
        ));
    }
    Ok(())
}

fn held(c: &Ctx) -> &VecDeque<(Instant, crate::frame::Received)> {
    c.peer.held_ticks.as_ref().expect("holding")
}

/// When the first `n` TICKs held came, once `n` are held.
fn wait_for_held(c: &mut Ctx, n: usize, start: Instant) -> Result<Vec<Instant>, String> {
    while held(c).len() < n {
        if start.elapsed() > PATIENCE {
            return fail(format!(
                "{} unanswered TICKs in {PATIENCE:?}: the IUT stopped probing (O3)",
                held(c).len()
            ));
        }
        c.peer.next(Duration::from_millis(2));
    }
    Ok(held(c).iter().take(n).map(|(at, _)| *at).collect())
}
