//! What each exported counter counts, for its `# HELP` line: the words an
//! operator reads in Prometheus or Grafana, not the field's name again.

/// The HELP text of counter `name` of `group` (`queue`, `idle`, `driver`,
/// `host`, `link`, `xdp`, `fabric`), if it has one of its own.
pub fn help(group: &str, name: &str) -> Option<&'static str> {
    Some(match (group, name) {
        ("queue", "bursts") => "polling-loop iterations that received a burst or had work",
        ("queue", "rx_frames") => "frames the queue received from its NIC queue",
        ("queue", "tx_frames") => "frames the queue handed to its NIC queue",
        ("queue", "rx_bytes") => "bytes of the frames received, Ethernet header included",
        ("queue", "tx_bytes") => "bytes of the frames sent, Ethernet header included",
        ("queue", "rx_not_oae") => "frames of another EtherType received (passed over)",
        ("queue", "rx_foreign") => "OAE frames from a MAC that is none of the queue's peers",
        ("queue", "rx_announcements") => "discovery announcements received",
        ("queue", "tx_announcements") => "discovery announcements sent",
        ("queue", "neighbours_found") => "neighbours found and bound to a link",
        ("queue", "neighbours_forgotten") => "neighbours let go because their link never came up",
        ("queue", "no_vacant_link") => "strangers' frames dropped because every link was taken",
        ("queue", "tx_ring_full") => "transmit bursts that found the NIC's ring full",
        ("queue", "app_submitted") => "verbs submitted by applications (embedded or host ring)",
        ("queue", "app_refused") => "verbs applications submitted that were refused at once",
        ("queue", "control_requests") => "control-socket requests the polling core answered",
        ("queue", "app_completions_lost") => {
            "completions dropped because the application's completion queue was full"
        }
        ("queue", "verbs_ended") => "verbs that ended on the queue, completed or failed",
        ("queue", "messages_unclaimed") => "messages that filled a receive nobody waited for",
        ("idle", "idle_iterations") => "polling-loop iterations that found nothing to do",
        ("idle", "yields") => "times an idle polling core yielded its CPU",
        ("idle", "sleeps") => "times an idle polling core slept on its socket",
        ("idle", "slept_seconds") => "time idle polling cores spent asleep",
        ("idle", "woken") => "sleeps ended by a frame, a submission or a request",
        ("driver", "alloc_failed") => "transmit buffers wanted when the pool had none",
        ("driver", "buffers_reused") => "received buffers reused for transmission",
        ("driver", "rx_unsupported") => "received descriptors the driver could not read",
        ("driver", "kernel_rx_dropped") => "frames the kernel dropped before the socket",
        ("driver", "kernel_rx_ring_full") => "frames dropped because the receive ring was full",
        ("driver", "kernel_fill_ring_empty") => "times the kernel found the fill ring empty",
        ("driver", "kernel_rx_invalid") => "invalid receive descriptors the kernel saw",
        ("driver", "kernel_tx_invalid") => "invalid transmit descriptors the kernel saw",
        ("driver", "kernel_tx_ring_empty") => "times the kernel found the transmit ring empty",
        ("driver", "tx_kicks") => "system calls that kicked the transmit ring",
        ("driver", "busy_polls") => "busy-poll system calls",
        ("host", "requests") => "requests read from the host ring",
        ("host", "undecodable") => "host-ring records that were not a request (dropped)",
        ("host", "completions") => "completions written to the host ring",
        ("host", "completions_lost") => {
            "completions dropped: the host ring and its waiting list were full"
        }
        ("host", "completions_orphaned") => "completions for a host process that had gone",
        ("host", "requests_orphaned") => "requests of a host process that had gone, not run",
        ("host", "swaps") => "bilateral exchanges through the swap slots",
        ("host", "lost_swaps") => "bilateral exchanges the other side never took",
        ("host", "bad_offers") => "swap-slot offers that broke the ring's rules",
        ("host", "bad_tails") => "ring tails that broke the ring's rules",
        ("link", "rx_frames") => "of the queue's frames, those this link received",
        ("link", "tx_frames") => "of the queue's frames, those this link sent",
        ("link", "stale_epoch") => "frames from another incarnation of either end, dropped",
        ("link", "stale_slot_frames") => {
            "slot frames answering nothing outstanding (late or duplicated)"
        }
        ("link", "duplicate_requests") => "requests received again, answered without running twice",
        ("link", "requests_sent") => "verb requests sent",
        ("link", "echoes_verified") => {
            "echoes that matched what was sent: the transfer is known seen"
        }
        ("link", "echo_mismatches") => "echoes that did not match what was sent",
        ("link", "echo_missing") => "transfers reversed because their echo never came",
        ("link", "lost_by_order") => "frames found lost because a later one arrived (no timer)",
        ("link", "lost_by_patience") => {
            "frames given up on after the patience rounds (unordered links)"
        }
        ("link", "lost_with_route") => "path frames given up with the link their route used",
        ("link", "gaps_seen") => "gaps in the peer's order: frames of the peer that never arrived",
        ("link", "probes_sent") => "TICKs sent because a frame owed an answer had none yet",
        ("link", "late_tocks") => "TOCKs answering a superseded TICK",
        ("link", "reversals") => "tentative transfers reversed, confirmed by the target",
        ("link", "retries") => "verbs tried again after a reversal",
        ("link", "refusals_received") => "verbs the target refused, with no effect",
        ("link", "commits_sent") => "explicit commits sent",
        ("link", "transfers_applied") => "transfers applied tentatively at this end as target",
        ("link", "transfers_committed") => "transfers committed at this end as target",
        ("link", "transfers_reversed") => "transfers reversed at this end as target",
        ("link", "refusals_sent") => "verbs this end refused as target",
        ("link", "overruns") => "requests that arrived with no credit left (a protocol breach)",
        ("link", "protocol_violations") => {
            "frames contradicting what this end knows (never expected)"
        }
        ("link", "ticks_sent") => "liveness TICKs sent",
        ("link", "rtt_samples") => "round-trip samples taken",
        ("link", "unreachable_declared") => "times the peer was declared unreachable",
        ("link", "peer_restarts") => "times the peer came back as a new incarnation",
        ("link", "presumed_commits") => {
            "tentative transfers of a dead initiator incarnation, committed"
        }
        ("link", "completions_ok") => "verbs on the link that completed",
        ("link", "completions_err") => "verbs on the link that failed with no effect",
        ("link", "messages_received") => "messages delivered whole into a posted receive",
        ("link", "auth_sealed") => "frames sealed with the link's key",
        ("link", "auth_verified") => "frames whose tag verified",
        ("link", "auth_unsealed") => "frames sent without a tag (no room, or before keys)",
        ("link", "auth_key_switches") => "times the link started sending under a new key",
        ("link", "handshakes_initiated") => "key-agreement handshakes this end started",
        ("link", "handshakes_answered") => "key-agreement handshakes this end answered",
        ("link", "handshakes_completed") => "key-agreement handshakes completed",
        ("link", "handshake_retransmits") => "handshake messages sent again",
        ("link", "handshake_messages_rejected") => {
            "handshake messages rejected (forged, replayed, malformed)"
        }
        ("link", "handshake_peers_untrusted") => {
            "handshakes refused: the peer's identity is not trusted"
        }
        ("link", "handshakes_crossed") => "handshakes both ends started at once, one kept",
        ("link", "handshakes_abandoned") => "handshakes given up",
        ("link", "frames_before_keys") => "frames that arrived before the link had keys, dropped",
        ("xdp", "steered") => "OAE frames the XDP program redirected to an AF_XDP socket",
        ("xdp", "passed") => "frames of other EtherTypes the XDP program passed to the kernel",
        ("xdp", "dropped_by_fault") => "frames the fault injector dropped",
        ("xdp", "corrupted_by_fault") => "frames the fault injector corrupted (one bit flipped)",
        ("xdp", "no_socket") => "OAE frames dropped: no socket registered for their queue",
        ("fabric", "adverts_sent") => "route advertisements sent",
        ("fabric", "adverts_received") => "route advertisements received",
        ("fabric", "malformed") => "fabric frames dropped as malformed",
        ("fabric", "relayed") => "frames relayed toward another node",
        ("fabric", "delivered") => "relayed frames delivered to this node",
        ("fabric", "dropped_no_route") => "relayed frames dropped: no route to their node",
        ("fabric", "dropped_hops") => "relayed frames dropped: too many hops",
        ("fabric", "dropped_queue_full") => "relayed frames dropped: the relay queue was full",
        ("fabric", "relay_queue_peak") => "the relay queue's deepest point",
        ("fabric", "dropped_link_lost") => "relayed frames dropped with the link they waited for",
        ("fabric", "paths_opened") => "end-to-end paths opened",
        ("fabric", "verbs_rerouted") => "verbs sent on another route after a cut",
        ("fabric", "resolves_sent") => "questions sent to settle transfers in doubt",
        ("fabric", "resolved_as_target") => "transfers in doubt settled as target",
        ("fabric", "resolved_as_initiator") => "transfers in doubt settled as initiator",
        _ => return None,
    })
}
