//! An OAE link's status and counters as the control protocol reports them.

use oae_proto::auth::{AuthError, AuthStats};
use oae_proto::wire::Malformed;
use oae_proto::{FabricStats, LinkId, Node, Observer, Store};

use oae_client::stats::{Counters, LinkCounters, named_counters};
use oae_client::status::{LinkState, OaeLinkStatus, ProtocolStatus};

/// An OAE link's state, as `status` reports it.
pub fn link_state<O: Observer, M: Store>(node: &Node<O, M>, link: LinkId) -> Option<LinkState> {
    let s = node.link_status(link)?;
    Some(LinkState {
        up: s.up,
        locked_words: node.memory().locked_words(),
        protocol: ProtocolStatus::Oae(OaeLinkStatus {
            unreachable: s.unreachable,
            knowledge: format!("{:?}", s.knowledge),
            role: format!("{:?}", s.role),
            epoch: s.epoch,
            peer_epoch: s.peer_epoch,
            peer_id: s.peer_id,
            srtt_ns: s.srtt,
            round_ns: s.round_len,
            active_slots: s.active_slots,
            peer_credits: s.peer_credits,
            credits_in_use: s.credits_in_use,
            tentative: s.tentative,
            receive_credits: s.receive_credits,
            queued_verbs: s.queued_verbs,
            posted_receives: s.posted_receives,
            in_doubt: node.in_doubt(),
            down_reason: s.down_reason.map(|r| (r, s.down_reason_frames).into()),
            peer_identity: node
                .key_agreement(link)
                .and_then(|a| a.peer())
                .map(|p| p.identity.to_string()),
        }),
    })
}

/// Every counter of the link, malformed frames by reason.
pub fn stats_report<O: Observer, M: Store>(
    node: &Node<O, M>,
    link: LinkId,
    auth: Option<&AuthStats>,
) -> LinkCounters {
    let Some(s) = node.link_stats(link) else {
        return LinkCounters::default();
    };
    let mut counters = LinkCounters {
        malformed: named_counters(Malformed::ALL.iter().map(|m| m.name()).zip(s.malformed)),
        counters: named_counters(s.named()),
        ..LinkCounters::default()
    };
    if let Some(a) = auth {
        counters.auth_dropped =
            named_counters(AuthError::ALL.iter().map(|e| e.name()).zip(a.dropped));
        counters.counters.extend(named_counters([
            ("auth_sealed", a.sealed),
            ("auth_verified", a.verified),
            ("auth_dropped_total", a.dropped.iter().sum()),
            ("auth_key_switches", a.key_switches),
            ("auth_unsealed", a.unsealed),
        ]));
    }
    if let Some(h) = node.key_agreement(link).map(|a| a.stats()) {
        counters.counters.extend(named_counters([
            ("handshakes_initiated", h.initiated),
            ("handshakes_answered", h.answered),
            ("handshakes_completed", h.completed),
            ("handshake_retransmits", h.retransmitted),
            ("handshake_messages_rejected", h.rejected),
            ("handshake_peers_untrusted", h.untrusted),
            ("handshakes_crossed", h.crossed),
            ("handshakes_abandoned", h.abandoned),
            ("frames_before_keys", h.before_keys),
        ]));
    }
    counters
}

/// Every counter of a node's fabric.
pub fn fabric_counters(s: &FabricStats) -> Counters {
    named_counters([
        ("adverts_sent", s.adverts_sent),
        ("adverts_received", s.adverts_received),
        ("malformed", s.malformed),
        ("relayed", s.relayed),
        ("delivered", s.delivered),
        ("dropped_no_route", s.dropped_no_route),
        ("dropped_hops", s.dropped_hops),
        ("dropped_queue_full", s.dropped_queue_full),
        ("relay_queue_peak", s.relay_queue_peak),
        ("dropped_link_lost", s.dropped_link_lost),
        ("paths_opened", s.paths_opened),
        ("verbs_rerouted", s.verbs_rerouted),
        ("resolves_sent", s.resolves_sent),
        ("resolved_as_target", s.resolved_as_target),
        ("resolved_as_initiator", s.resolved_as_initiator),
    ])
}
