//! A queue that finds its neighbours (docs/PROTOCOL.md, "Discovery"): the
//! core's bindings of MACs to the queue's pool of links, and what binding
//! or letting go of a neighbour does to the ports and the transport.

use oae_common::mac::format_mac;
use oae_proto::auth::LinkIdentity;
use oae_proto::discovery::{DiscoveryConfig, Neighbours, Stranger};
use oae_proto::{LinkId, Nanos};

use crate::transport::Transport;
use oae_client::stats::PipelineCounters;

pub struct Discovery {
    neighbours: Neighbours,
    /// The channel every link of the queue derives its keys with.
    channel: u32,
    /// Lines for the log about neighbours found or let go, not yet told.
    notices: Vec<String>,
}

/// The port a frame came in on: its index, MAC and interface.
#[derive(Clone, Copy)]
pub struct PortRef<'a> {
    pub index: u8,
    pub mac: [u8; 6],
    pub name: &'a str,
}

impl Discovery {
    pub fn new(cfg: DiscoveryConfig, links: u16, ports: usize, channel: u32) -> Discovery {
        Discovery {
            neighbours: Neighbours::new(cfg, links, ports),
            channel,
            notices: Vec::new(),
        }
    }

    /// Whether `link` waits for a neighbour to be bound to it.
    pub fn is_vacant(&self, link: LinkId) -> bool {
        self.neighbours.neighbour(link).is_none()
    }

    /// A frame on port `port` (MAC `local`) from `source`, to which no link
    /// is bound: the link it now goes to, set up for its new neighbour,
    /// or `None` if it goes nowhere (an announcement, or no link vacant).
    pub fn stranger<T: Transport>(
        &mut self,
        port: PortRef<'_>,
        source: [u8; 6],
        announcement: bool,
        transport: &mut T,
        counters: &mut PipelineCounters,
        now: Nanos,
    ) -> Option<(LinkId, bool)> {
        match self
            .neighbours
            .stranger(port.index, source, announcement, now)
        {
            Stranger::Found { link, announcement } => {
                counters.neighbours_found += 1;
                self.notices.push(format!(
                    "neighbour {} found on {}: link {link}",
                    format_mac(source),
                    port.name
                ));
                transport.link_identity(
                    link,
                    LinkIdentity {
                        local_mac: port.mac,
                        peer_mac: source,
                        channel: self.channel,
                    },
                );
                Some((link, announcement))
            }
            Stranger::NoVacantLink => {
                counters.no_vacant_link += 1;
                None
            }
        }
    }

    /// Whether port `port` announces the node now.
    pub fn announce_due(&mut self, port: usize, now: Nanos) -> bool {
        self.neighbours.announce_due(port, now)
    }

    pub fn poll_timeout(&self) -> Option<Nanos> {
        self.neighbours.poll_timeout()
    }

    /// Lets go of the neighbours their links never heard in time, each
    /// link renewed for the next: `unbind(port, link)` takes it off its
    /// port.
    pub fn forget<T: Transport>(
        &mut self,
        now: Nanos,
        transport: &mut T,
        counters: &mut PipelineCounters,
        mut unbind: impl FnMut(u8, LinkId),
    ) {
        while let Some((link, n)) = self
            .neighbours
            .forget_one(now, |l| transport.link_renewable(l))
        {
            transport.renew_link(link);
            unbind(n.port, link);
            counters.neighbours_forgotten += 1;
            self.notices.push(format!(
                "neighbour {} let go: its link {link} heard nothing from it within the \
                 forget_after_ms of [queue.discovery]; the link is free for the next",
                format_mac(n.mac)
            ));
        }
    }

    /// Lines for the log not yet told.
    pub fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notices)
    }

    pub fn has_notices(&self) -> bool {
        !self.notices.is_empty()
    }
}
