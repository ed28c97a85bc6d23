//! Announcements (docs/PROTOCOL.md, "Discovery"): a HELLO naming no
//! receiver, to the multicast MAC every OAE node hears, written here from
//! the text alone. D4: one from the MAC of an up link's peer never reaches
//! the link.

use crate::ctx::{Ctx, Outcome, SILENCE, fail};
use crate::frame::HELLO;

/// Where announcements go (D1).
const ANNOUNCE_MAC: [u8; 6] = [0x03, 0x0a, 0xe0, 0x00, 0x00, 0x01];

/// D1 D4: the tester's announcements, sent while its link is up, change
/// nothing: the IUT says no HELLO (a HELLO naming no receiver would have
/// told it the tester lost it, R9) and answers the next TICK at level 2.
pub fn ignored_by_an_up_link(c: &mut Ctx) -> Outcome {
    // Level 0, Alice's role bit, receiver epoch 0; never sealed (D1).
    let announcement = c.peer.hello_from(c.peer.epoch(), false, 0, false);
    for _ in 0..3 {
        c.peer.send_to(ANNOUNCE_MAC, &announcement);
    }
    let after = c.peer.quiet(SILENCE);
    if let Some(h) = after.iter().find(|f| f.transition() == HELLO) {
        return fail(format!(
            "D4: after the tester's announcements the IUT said HELLO at level {}, as if its \
             link had taken them",
            h.header.level
        ));
    }
    crate::target::tick_tock(c)
}
