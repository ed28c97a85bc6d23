//! Receives posted through a polling core (`oaectl recv`, or a host
//! program through the host ring) and who waits for each: the core names a
//! receive by a number, its index here, until the message it took is
//! reported or it is withdrawn.

use std::sync::mpsc::SyncSender;
use std::time::Duration;

use oae_client::api::{Destination, Message, NotSubmitted, ReceivePost, Received};
use oae_client::control::{Answer, ControlError, ErrorCode, ReceivedAnswer, to_hex};
use oae_client::stats::PipelineCounters;
use oae_proto::{Block, LinkId, Nanos, PostedReceive, SharedMemory, Store};

use crate::host::{HostOrigin, HostPort};
use crate::transport::Transport;

/// Who waits for a receive's message.
enum Claimant {
    /// A control client (`oaectl recv`); past `deadline` the receive is
    /// withdrawn if no message holds it.
    Control {
        reply: SyncSender<Result<Answer, ControlError>>,
        deadline: Nanos,
    },
    /// A host program, by the id it posted the receive under; it waits
    /// as long as the dataplane runs.
    Host { origin: HostOrigin, id: u64 },
}

struct Waiter {
    claimant: Claimant,
    link: LinkId,
    region: u16,
    offset: u32,
}

/// Where a receive's message goes.
#[derive(Default)]
pub(super) struct Receives {
    /// By receive id.
    waiting: Vec<Option<Waiter>>,
    /// The earliest deadline of them (`Nanos::MAX`: none).
    next_deadline: Nanos,
}

fn posted(id: usize, region: u16, offset: u32, len: u16) -> PostedReceive {
    PostedReceive {
        id: id as u64,
        region,
        offset,
        len,
    }
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
        let id = self.free_id();
        let receive = posted(id, ask.region, ask.offset, ask.len);
        if let Err(e) = transport.post_receive(ask.link, receive) {
            let _ = reply.send(Err(e));
            return;
        }
        let deadline = now.saturating_add(ask.within.as_nanos() as Nanos);
        self.next_deadline = self.next_deadline.min(deadline);
        self.waiting[id] = Some(Waiter {
            claimant: Claimant::Control { reply, deadline },
            link: ask.link,
            region: ask.region,
            offset: ask.offset,
        });
    }

    /// Posts a host program's receive on the link its `from` names; its
    /// message goes back on the host ring. Refused with the reason if it
    /// cannot be posted.
    pub fn post_host(
        &mut self,
        transport: &mut impl Transport,
        origin: HostOrigin,
        post: ReceivePost,
    ) -> Result<(), NotSubmitted> {
        let link = match post.from {
            Destination::FirstLink => 0,
            Destination::Link(link) => link,
            Destination::Node(node) => (0..transport.links())
                .map(|l| l as LinkId)
                .find(|&l| transport.peer_node(l) == Some(node))
                .ok_or(NotSubmitted::NoRoute(node))?,
        };
        let id = self.free_id();
        let receive = posted(id, post.region, post.offset, post.len);
        transport
            .post_receive(link, receive)
            .map_err(|e| match e.code {
                ErrorCode::NotFound => NotSubmitted::NoSuchLink(link),
                ErrorCode::Conflict => NotSubmitted::QueueFull,
                ErrorCode::Unsupported => NotSubmitted::NotForTransport,
                _ => {
                    NotSubmitted::Invalid("the receive's block is not in a region of the dataplane")
                }
            })?;
        self.waiting[id] = Some(Waiter {
            claimant: Claimant::Host {
                origin,
                id: post.id,
            },
            link,
            region: post.region,
            offset: post.offset,
        });
        Ok(())
    }

    /// The id the next waiter takes, posted under it before it is stored.
    fn free_id(&mut self) -> usize {
        match self.waiting.iter().position(Option::is_none) {
            Some(free) => free,
            None => {
                self.waiting.push(None);
                self.waiting.len() - 1
            }
        }
    }

    /// Receive `id` holds a message: its waiter gets the bytes. One whose
    /// waiter went away is counted, and what to log about it returned,
    /// never dropped unseen.
    pub fn received(
        &mut self,
        (id, len, imm): (u64, u16, Option<u32>),
        memory: &SharedMemory,
        host: Option<&mut HostPort>,
        counters: &mut PipelineCounters,
    ) -> Option<String> {
        let w = self.waiting.get_mut(id as usize).and_then(Option::take)?;
        let reply = match w.claimant {
            Claimant::Control { reply, .. } => reply,
            Claimant::Host { origin, id } => {
                let data = memory.with_block(w.region, w.offset, len, Block::new);
                let received = Received {
                    id,
                    result: Ok(Message {
                        imm,
                        data: data.unwrap_or(Block::EMPTY),
                    }),
                };
                // The host port counts one its process is gone for.
                host?.complete_receive(origin, &received);
                return None;
            }
        };
        let data = memory.with_block(w.region, w.offset, len, to_hex);
        let answer = ReceivedAnswer {
            link: w.link,
            len,
            imm,
            data,
        };
        if reply.send(Ok(Answer::Received(answer))).is_ok() {
            return None;
        }
        counters.messages_unclaimed += 1;
        Some(format!(
            "a message of {len} bytes filled receive {id} on link {}, whose client had gone",
            w.link
        ))
    }

    /// Withdraws the receives of host processes that are gone (`holds`
    /// says which still are), so that no later message lands in a receive
    /// nobody will read. One a message already holds stays: its message is
    /// delivered and counted as orphaned by the host port.
    pub fn withdraw_gone(
        &mut self,
        transport: &mut impl Transport,
        holds: impl Fn(HostOrigin) -> bool,
    ) {
        for (id, slot) in self.waiting.iter_mut().enumerate() {
            if let Some(Waiter {
                claimant: Claimant::Host { origin, .. },
                link,
                ..
            }) = slot
                && !holds(*origin)
                && transport.cancel_receive(*link, id as u64)
            {
                *slot = None;
            }
        }
    }

    /// The dataplane stops: every waiter is told so (its receive goes with
    /// the dataplane).
    pub fn shut_down(&mut self, mut host: Option<&mut HostPort>) {
        for w in self.waiting.iter_mut().filter_map(Option::take) {
            match w.claimant {
                Claimant::Control { reply, .. } => {
                    let _ = reply.send(Err(ControlError::new(
                        ErrorCode::ShuttingDown,
                        "the dataplane is shutting down; no message came",
                    )));
                }
                Claimant::Host { origin, id } => {
                    if let Some(host) = host.as_deref_mut() {
                        let received = Received {
                            id,
                            result: Err(NotSubmitted::ShuttingDown),
                        };
                        host.complete_receive(origin, &received);
                    }
                }
            }
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
            let Some(Waiter {
                claimant: Claimant::Control { deadline, .. },
                link,
                ..
            }) = slot
            else {
                continue;
            };
            let (deadline, link) = (*deadline, *link);
            if deadline > now || !transport.cancel_receive(link, id as u64) {
                let later = if deadline > now { deadline } else { now };
                self.next_deadline = self.next_deadline.min(later.max(now + 1));
                continue;
            }
            if let Some(Waiter {
                claimant: Claimant::Control { reply, .. },
                ..
            }) = slot.take()
            {
                let _ = reply.send(Err(ControlError::new(
                    ErrorCode::Timeout,
                    format!("no message arrived on link {link}; the receive was withdrawn"),
                )));
            }
        }
    }
}
