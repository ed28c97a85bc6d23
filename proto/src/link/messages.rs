//! SEND and RECV on a link: the initiator keeps one SEND in flight at a
//! time, so messages arrive in the order sent; the target delivers each
//! into the receive its application posted first, tentatively like any
//! transfer, and reports receives in the order they were posted.
//!
//! Why one at a time is enough for order: a SEND starts only once the one
//! before it is decided at the initiator, and a decided transfer is never
//! reversed at the target (a COMMIT may come late, or with the slot's next
//! frame, but never a REVERSE). So the target takes receives in the order
//! messages were sent, and a reversed attempt gives its receive back before
//! the next attempt can arrive (its retry waits for the REVERSE_ACK).

use super::*;
use crate::LinkId;

/// Most receives a link holds posted at once.
pub const MAX_POSTED_RECEIVES: usize = 256;

/// A buffer the application lends a link for one incoming message:
/// `region[offset..+len]` of its own memory, named by `id` in the
/// [`Event::Received`] that reports it filled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PostedReceive {
    pub id: u64,
    pub region: u16,
    pub offset: u32,
    pub len: u16,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Fill {
    /// Waiting for a message.
    Posted,
    /// Holds a tentative message on slot `slot`.
    Held { slot: u16 },
    /// Holds a committed message, reported once every receive posted
    /// before it is reported.
    Filled,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Receive {
    posted: PostedReceive,
    fill: Fill,
    len: u16,
    imm: Option<u32>,
}

/// A link's messages, both ways.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Messages {
    /// SENDs (stored verbs) waiting for the one ahead of them to be decided.
    waiting: VecDeque<u32>,
    /// A SEND is on a slot or queued for one.
    in_flight: bool,
    /// Receives, in the order posted; the front ones are held or filled.
    receives: VecDeque<Receive>,
}

impl Messages {
    pub fn new(submit_queue: usize) -> Messages {
        Messages {
            waiting: VecDeque::with_capacity(submit_queue),
            in_flight: false,
            receives: VecDeque::with_capacity(MAX_POSTED_RECEIVES),
        }
    }

    /// A SEND is in flight or waiting behind one.
    pub fn pending(&self) -> bool {
        self.in_flight || !self.waiting.is_empty()
    }

    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    pub fn posted(&self) -> usize {
        self.receives.len()
    }
}

/// Why a receive could not be posted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostError {
    UnknownLink(LinkId),
    /// [`MAX_POSTED_RECEIVES`] are posted and not yet filled.
    QueueFull,
    /// The buffer is not inside one of this node's regions, or longer
    /// than any message.
    BadBuffer(&'static str),
}

impl core::fmt::Display for PostError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PostError::UnknownLink(l) => write!(f, "no link {l}"),
            PostError::QueueFull => write!(
                f,
                "{MAX_POSTED_RECEIVES} receives are already posted on the link: \
                 wait for one to be filled"
            ),
            PostError::BadBuffer(why) => write!(f, "bad receive buffer: {why}"),
        }
    }
}

impl std::error::Error for PostError {}

impl Link {
    /// Lends the link a buffer for the next message.
    pub fn post_receive(
        &mut self,
        receive: PostedReceive,
        memory: &impl Store,
    ) -> Result<(), PostError> {
        if usize::from(receive.len) > verb::MAX_BLOCK {
            return Err(PostError::BadBuffer("a message is at most 960 bytes"));
        }
        // An empty receive takes only an empty message, but names a region
        // all the same: whoever reads it back finds one.
        let (_, region) = memory
            .find(receive.region)
            .ok_or(PostError::BadBuffer("no such local region"))?;
        if receive.len > 0 {
            region
                .check(receive.offset, usize::from(receive.len))
                .map_err(|_| PostError::BadBuffer("not inside its local region"))?;
        }
        if self.messages.receives.len() >= MAX_POSTED_RECEIVES {
            return Err(PostError::QueueFull);
        }
        self.messages.receives.push_back(Receive {
            posted: receive,
            fill: Fill::Posted,
            len: 0,
            imm: None,
        });
        Ok(())
    }

    /// SENDs are in flight or waiting here: another SEND to the same peer
    /// must queue behind them, wherever it could go, or it might overtake.
    pub fn messages_pending(&self) -> bool {
        self.messages.pending()
    }

    /// Takes back receive `id` if it is posted and holds no message (a
    /// message arriving in it is the application's to take); true if it
    /// was withdrawn.
    pub fn cancel_receive(&mut self, id: u64) -> bool {
        let at = self
            .messages
            .receives
            .iter()
            .position(|r| r.posted.id == id && r.fill == Fill::Posted);
        at.and_then(|at| self.messages.receives.remove(at))
            .is_some()
    }

    /// Queues stored SEND `v` behind the SENDs before it.
    pub(super) fn queue_message(&mut self, v: u32) {
        self.messages.waiting.push_back(v);
        self.release_message();
    }

    /// Stored verb `v` is decided: if it is a SEND, the next may go.
    pub(super) fn message_decided(&mut self, v: u32) {
        if matches!(self.verbs[v as usize].verb, Verb::Send { .. }) {
            self.messages.in_flight = false;
            self.release_message();
        }
    }

    fn release_message(&mut self) {
        if self.messages.in_flight {
            return;
        }
        if let Some(v) = self.messages.waiting.pop_front() {
            self.messages.in_flight = true;
            self.ready.push_back(v);
        }
    }

    pub(super) fn messages_in_flight_moved(&mut self) {
        self.messages.in_flight = false;
    }

    /// Moves the SENDs waiting here to `to`, in order, unless one is in
    /// flight here (it may still be in doubt: those behind it wait for its
    /// outcome, so they never overtake it). Returns how many moved.
    pub(super) fn hand_over_messages<O: Observer, M: Store>(
        &mut self,
        to: &mut Link,
        sh: &mut Shared<'_, O, M>,
    ) -> usize {
        let mut moved = 0;
        while !self.messages.in_flight
            && let Some(&v) = self.messages.waiting.front()
        {
            let p = &self.verbs[v as usize];
            if p.verb.class(to.cfg.max_class).is_none() || !to.submit(p.id, &p.verb, sh) {
                break;
            }
            self.messages.waiting.pop_front();
            self.free_verbs.push(v);
            moved += 1;
        }
        moved
    }

    /// SENDs never sent fail with `why`: they had no effect.
    pub(super) fn fail_waiting_messages<O: Observer, M: Store>(
        &mut self,
        why: VerbError,
        sh: &mut Shared<'_, O, M>,
    ) {
        while let Some(v) = self.messages.waiting.pop_front() {
            self.free_verbs.push(v);
            self.complete(self.verbs[v as usize].id, Err(why), sh);
        }
    }

    /// Delivers a SEND arriving on slot `s` into the first posted receive,
    /// tentatively (into the slot's undo record).
    pub(super) fn take_receive<O: Observer, M: Store>(
        &mut self,
        s: u16,
        imm: Option<u32>,
        message: &[u8],
        sh: &mut Shared<'_, O, M>,
    ) -> Result<(), Refusal> {
        let receive = self
            .messages
            .receives
            .iter_mut()
            .find(|r| r.fill == Fill::Posted)
            .ok_or(Refusal::NoReceive)?;
        let p = receive.posted;
        let undo = &mut self.receivers[usize::from(s)].undo;
        sh.memory.deliver(
            (p.region, p.offset, p.len),
            message,
            LockOwner::target(self.index, s),
            undo,
        )?;
        receive.fill = Fill::Held { slot: s };
        receive.len = message.len() as u16;
        receive.imm = imm;
        self.receivers[usize::from(s)].message = true;
        Ok(())
    }

    /// The tentative transfer on slot `s` committed (`true`) or was
    /// reversed: a message it held is filled, or its receive is posted
    /// again for the next.
    pub(super) fn settle_message(&mut self, s: u16, committed: bool, events: &mut VecDeque<Event>) {
        let r = &mut self.receivers[usize::from(s)];
        if !std::mem::take(&mut r.message) {
            return;
        }
        let held = self
            .messages
            .receives
            .iter_mut()
            .find(|r| r.fill == Fill::Held { slot: s })
            .expect("a slot holding a message holds its receive");
        // R42, R43: committed, the receive is filled; reversed, it is posted again
        held.fill = if committed {
            Fill::Filled
        } else {
            Fill::Posted
        };
        while self
            .messages
            .receives
            .front()
            .is_some_and(|r| r.fill == Fill::Filled)
        {
            let r = self.messages.receives.pop_front().expect("checked");
            self.stats.messages_received += 1;
            events.push_back(Event::Received {
                link: self.index,
                id: r.posted.id,
                len: r.len,
                imm: r.imm,
            });
        }
    }
}
