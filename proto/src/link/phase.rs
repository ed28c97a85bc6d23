//! The link's phase (bringing up, up, or given up on) and the transitions
//! between them, which are the only code that changes it; and the reason a
//! link is down.
//!
//! ```text
//!              go_up (B1, R8, R12)
//! BringingUp ─────────────────────────▶ Up
//!   │   ▲  ▲                            │
//!   │   │  └── peer_restarted (R7, B4) ─┤
//!   │   │                               │ declare_unreachable (L2)
//!   │   └── expect_peer                 ▼
//!   └── give_up_bring_up (B3) ──▶ Unreachable ──go_up──▶ Up
//! ```

use super::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Phase {
    /// Saying HELLO until the peer's HELLO names this incarnation.
    BringingUp,
    /// Common knowledge: both ends know that the other knows them.
    Up,
    /// The peer fell silent, or never answered bring-up: queued verbs
    /// failed, HELLOs go on (backing off) in case it returns.
    Unreachable,
}

impl Link {
    /// Why the link is not coming up, once [`DOWN_REASON_FRAMES`] frames
    /// in a row told the same.
    pub fn down_reason(&self) -> Option<DownReason> {
        match *self.down_reason {
            Some((r, n)) if !self.is_up() && n >= DOWN_REASON_FRAMES => Some(r),
            _ => None,
        }
    }

    /// A frame dropped for `reason`: recorded while the link is not up (a
    /// stray frame while it is up says nothing of why it would not come
    /// up later).
    /// A reason told by an event that is no accident of the wire (a peer
    /// that proved an untrusted identity): reported at once.
    pub fn diagnose(&mut self, reason: DownReason) {
        if !self.is_up() {
            *self.down_reason = Some((reason, crate::DOWN_REASON_FRAMES));
        }
    }

    pub fn note_down_reason(&mut self, reason: DownReason) {
        if self.is_up() {
            return;
        }
        *self.down_reason = match *self.down_reason {
            Some((r, n)) if r == reason => Some((r, n.saturating_add(1))),
            _ => Some((reason, 1)),
        };
    }

    /// What this end knows, as its HELLOs say it: it follows from the phase
    /// and whether a peer incarnation is known.
    pub(super) fn knowledge(&self) -> Knowledge {
        match self.phase {
            Phase::Up => Knowledge::KnowYouKnowMe,
            _ if self.peer_epoch == 0 => Knowledge::Nothing,
            Phase::BringingUp | Phase::Unreachable => Knowledge::KnowYou,
        }
    }

    /// Up → Unreachable: the peer was silent for `unreachable_after_rounds`.
    pub(super) fn declare_unreachable<O: Observer, M: Store>(&mut self, sh: &mut Shared<'_, O, M>) {
        debug_assert_eq!(self.phase, Phase::Up);
        self.phase = Phase::Unreachable;
        self.stats.unreachable_declared += 1;
        self.hello_due = true;
        // The HELLO timer is due again (B3): this first HELLO counts.
        self.unanswered_hellos = 0;
        self.next_hello = 0;
        self.fail_queued(sh);
        sh.events.push_back(Event::Link {
            link: self.index,
            change: LinkChange::Unreachable,
        });
    }

    /// BringingUp or Unreachable → Up: the peer knows that this end knows
    /// it (a HELLO naming this incarnation, or any other frame).
    pub(super) fn go_up<O: Observer, M: Store>(&mut self, sh: &mut Shared<'_, O, M>) {
        debug_assert_ne!(self.phase, Phase::Up);
        self.phase = Phase::Up;
        *self.down_reason = None;
        self.unanswered_hellos = 0;
        self.silent_rounds = 0;
        // Resynchronise: transfers whose echo never came are reversed (the
        // in-doubt rule), undelivered decisions are sent again.
        self.forget_owed();
        for s in 0..self.active_slots() {
            self.give_up_on(s);
        }
        sh.events.push_back(Event::Link {
            link: self.index,
            change: LinkChange::Up,
        });
    }

    /// Up and heard from lately: fit for new traffic. A link that fell
    /// silent for two rounds, or left two probes unanswered with nothing
    /// heard for a minimum round (about four round trips after its last
    /// frame when verbs are in flight and rounds are short; where polling
    /// cores share CPUs, `min_round` says how long a descheduled peer may
    /// be quiet), or
    /// whose peer says hello as if it had lost this end (the way towards
    /// it is broken), is suspected; new verbs then take another path while
    /// one exists.
    pub fn is_usable(&self) -> bool {
        let probes_unanswered =
            self.unanswered_probes >= SUSPECT_AFTER_PROBES && self.quiet_for_a_round;
        self.is_up()
            && !self.peer_lost_us
            && self.silent_rounds < SUSPECT_AFTER_ROUNDS
            && !probes_unanswered
            && !self.deaf_for_a_round
    }

    /// Something else says the peer is reachable (a path's route): a link
    /// that gave up on bring-up takes verbs again and keeps saying hello,
    /// and declares the peer unreachable only after as many unanswered
    /// HELLOs again.
    pub fn expect_peer(&mut self) {
        if self.phase == Phase::Unreachable {
            self.phase = Phase::BringingUp;
            self.unanswered_hellos = 0;
            // Backed off while nothing led to the peer: say HELLO now.
            self.next_hello = 0;
        }
    }

    /// BringingUp → Unreachable: more than `unreachable_after_rounds`
    /// HELLOs went unanswered. Queued verbs fail rather than wait.
    pub(super) fn give_up_bring_up<O: Observer, M: Store>(&mut self, sh: &mut Shared<'_, O, M>) {
        debug_assert_eq!(self.phase, Phase::BringingUp);
        self.fail_queued(sh);
        self.phase = Phase::Unreachable;
        sh.events.push_back(Event::Link {
            link: self.index,
            change: LinkChange::Unreachable,
        });
    }

    /// Any phase → BringingUp: the peer is a new incarnation, which must
    /// come to common knowledge with this end afresh.
    pub(super) fn bring_up_again(&mut self) {
        self.phase = Phase::BringingUp;
    }
}
