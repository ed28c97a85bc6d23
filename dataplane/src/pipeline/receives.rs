//! Receives posted through a polling core (`oaectl recv`) and who waits for
//! each: the core names a receive by a number, its index here, until the
//! message it took is reported or it is withdrawn.

use std::sync::mpsc::SyncSender;
use std::time::Duration;

use oae_client::control::{Answer, ControlError, ErrorCode, ReceivedAnswer, to_hex};
use oae_client::stats::PipelineCounters;
use oae_proto::{LinkId, Nanos, PostedReceive, SharedMemory, Store};

use crate::transport::Transport;

/// A control client waiting for the message its receive takes.
struct Waiter {
    reply: SyncSender<Result<Answer, ControlError>>,
    link: LinkId,
    region: u16,
    offset: u32,
    /// Past it, the receive is withdrawn if no message holds it.
    deadline: Nanos,
}

/// Where a receive's message goes.
#[derive(Default)]
pub(super) struct Receives {
    /// By receive id.
    waiting: Vec<Option<Waiter>>,
    /// The earliest deadline of them (`Nanos::MAX`: none).
    next_deadline: Nanos,
}

/// What `oaectl recv` asks: a link, a buffer, and how long to wait.
pub struct RecvRequest {
    pub link: LinkId,
    pub region: u16,
    pub offset: u32,
    pub len: u16,
    pub within: Duration,
}

impl Receives {
    pub fn new() -> Receives {
        Receives {
            waiting: Vec::new(),
            next_deadline: Nanos::MAX,
        }
    }

    /// Posts `ask`'s receive on its link; the answer goes to `reply` when a
    /// message fills it or it is withdrawn. An error is answered at once.
    pub fn post(
        &mut self,
        transport: &mut impl Transport,
        ask: RecvRequest,
        reply: SyncSender<Result<Answer, ControlError>>,
        now: Nanos,
    ) {
        let id = match self.waiting.iter().position(Option::is_none) {
            Some(free) => free,
            None => {
                self.waiting.push(None);
                self.waiting.len() - 1
            }
        };
        let receive = PostedReceive {
            id: id as u64,
            region: ask.region,
            offset: ask.offset,
            len: ask.len,
        };
        if let Err(e) = transport.post_receive(ask.link, receive) {
            let _ = reply.send(Err(e));
            return;
        }
        let deadline = now.saturating_add(ask.within.as_nanos() as Nanos);
        self.next_deadline = self.next_deadline.min(deadline);
        self.waiting[id] = Some(Waiter {
            reply,
            link: ask.link,
            region: ask.region,
            offset: ask.offset,
            deadline,
        });
    }

    /// Receive `id` holds a message: its waiter gets the bytes. One whose
    /// waiter went away is counted, and what to log about it returned,
    /// never dropped unseen.
    pub fn received(
        &mut self,
        (id, len, imm): (u64, u16, Option<u32>),
        memory: &SharedMemory,
        counters: &mut PipelineCounters,
    ) -> Option<String> {
        let w = self.waiting.get_mut(id as usize).and_then(Option::take)?;
        let data = memory.with_block(w.region, w.offset, len, to_hex);
        let answer = ReceivedAnswer {
            link: w.link,
            len,
            imm,
            data,
        };
        if w.reply.send(Ok(Answer::Received(answer))).is_ok() {
            return None;
        }
        counters.messages_unclaimed += 1;
        Some(format!(
            "a message of {len} bytes filled receive {id} on link {}, whose client had gone",
            w.link
        ))
    }

    /// The dataplane stops: every waiter is told so (its receive goes with
    /// the dataplane).
    pub fn shut_down(&mut self) {
        for w in self.waiting.iter_mut().filter_map(Option::take) {
            let _ = w.reply.send(Err(ControlError::new(
                ErrorCode::ShuttingDown,
                "the dataplane is shutting down; no message came",
            )));
        }
    }

    /// Withdraws every receive past its deadline that no message holds,
    /// answering its waiter so; one a message holds waits for it.
    pub fn expire(&mut self, transport: &mut impl Transport, now: Nanos) {
        if now < self.next_deadline {
            return;
        }
        self.next_deadline = Nanos::MAX;
        for (id, slot) in self.waiting.iter_mut().enumerate() {
            let Some(w) = slot else { continue };
            if w.deadline > now || !transport.cancel_receive(w.link, id as u64) {
                let later = if w.deadline > now { w.deadline } else { now };
                self.next_deadline = self.next_deadline.min(later.max(now + 1));
                continue;
            }
            let w = slot.take().expect("matched");
            let _ = w.reply.send(Err(ControlError::new(
                ErrorCode::Timeout,
                format!(
                    "no message arrived on link {}; the receive was withdrawn",
                    w.link
                ),
            )));
        }
    }
}
