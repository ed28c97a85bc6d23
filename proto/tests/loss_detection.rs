//! How many round trips pass between a lost frame and the reversal of its
//! transfer. Two nodes over a wire with a fixed one-way delay (so frames
//! arrive in order, as on a cable or a veth pair); one chosen frame is
//! dropped, and the time from its sending to the REVERSE for its slot is
//! counted in round trips. On an ordered link that is about one round trip
//! when later frames follow the lost one and about two on an idle link; a
//! detection that fell back to patience would take `echo_patience_rounds`
//! rounds of `rtt_multiplier` round trips (twelve by default) and fail here.

mod common;

use std::collections::VecDeque;

use common::{R, pair_with};
use oae_proto::wire::{Frame, MAX_FRAME, Transition};
use oae_proto::*;
/// One-way delay: a round trip is twice this.
const DELAY: Nanos = 10_000;
const RTT: Nanos = 2 * DELAY;

fn faa(offset: u32) -> Verb {
    Verb::FetchAdd {
        target: R,
        offset,
        add: 1,
    }
}

/// Which frame to drop: the first one from `from` that `pick` accepts.
struct Drop {
    from: usize,
    pick: fn(&Frame<'_>) -> bool,
}

struct Wire {
    nodes: [Node; 2],
    now: Nanos,
    /// One-way delay.
    delay: Nanos,
    /// In flight, in sending order: (arrival time, receiver, bytes).
    flights: VecDeque<(Nanos, usize, Vec<u8>)>,
    drop: Option<Drop>,
    /// When the chosen frame was dropped, and its slot.
    dropped: Option<(Nanos, u16)>,
    /// When node 0 first sent a REVERSE for the dropped frame's slot.
    reversed_at: Option<Nanos>,
    /// Node 0's completions and when they came.
    completed: Vec<(Nanos, VerbId, Result<Output, VerbError>)>,
}

impl Wire {
    fn new(cfg: LinkConfig) -> Wire {
        Wire::with_delay(cfg, DELAY)
    }

    fn with_delay(cfg: LinkConfig, delay: Nanos) -> Wire {
        Wire {
            nodes: pair_with(cfg),
            now: 0,
            delay,
            flights: VecDeque::new(),
            drop: None,
            dropped: None,
            reversed_at: None,
            completed: Vec::new(),
        }
    }

    fn transmit(&mut self) {
        let mut buf = [0u8; MAX_FRAME];
        for from in 0..2 {
            while let Some(len) = self.nodes[from].poll_transmit(0, self.now, &mut buf) {
                let frame = Frame::parse(&buf[..len]).expect("the core sends valid frames");
                let c = frame.context;
                if from == 0
                    && c.transition == Transition::Reverse
                    && self.dropped.is_some_and(|(_, slot)| slot == c.slot())
                {
                    self.reversed_at.get_or_insert(self.now);
                }
                if let Some(d) = &self.drop
                    && d.from == from
                    && (d.pick)(&frame)
                {
                    self.dropped = Some((self.now, c.slot()));
                    self.drop = None;
                    continue;
                }
                self.flights
                    .push_back((self.now + self.delay, 1 - from, buf[..len].to_vec()));
            }
        }
    }

    /// Runs until both nodes are quiescent and nothing is in flight, or
    /// `limit` of simulated time has passed.
    fn run(&mut self, limit: Nanos) {
        self.run_until(limit, true);
    }

    /// Runs for `limit` of simulated time, or, if `until_quiet`, until
    /// both nodes are quiescent and nothing is in flight.
    fn run_until(&mut self, limit: Nanos, until_quiet: bool) {
        let end = self.now + limit;
        loop {
            self.transmit();
            let quiet = self.flights.is_empty() && self.nodes.iter().all(|n| n.is_quiescent());
            if until_quiet && quiet {
                return;
            }
            let next_flight = self.flights.front().map(|f| f.0);
            let next_timer = self.nodes.iter().filter_map(|n| n.poll_timeout()).min();
            let next = next_flight.into_iter().chain(next_timer).min().unwrap();
            if !until_quiet && next > end {
                return;
            }
            assert!(next <= end, "not settled within {limit} ns");
            self.now = next.max(self.now);
            while self.flights.front().is_some_and(|f| f.0 <= self.now) {
                let (_, to, bytes) = self.flights.pop_front().unwrap();
                self.nodes[to].handle_frame(0, &bytes, self.now);
            }
            for n in &mut self.nodes {
                if n.poll_timeout().is_some_and(|t| t <= self.now) {
                    n.handle_timeout(self.now);
                }
            }
            while let Some(e) = self.nodes[0].poll_event() {
                if let Event::Completed { id, result, .. } = e {
                    self.completed.push((self.now, id, result));
                }
            }
        }
    }

    /// Brings the link up and measures its RTT with a few verbs.
    fn warm_up(&mut self) {
        for k in 0..8 {
            self.nodes[0].submit(0, VerbId(1000 + k), &faa(8)).unwrap();
            self.run(100 * RTT);
        }
        self.completed.clear();
        assert_eq!(self.nodes[0].link_status(0).unwrap().srtt, RTT);
    }

    /// Round trips from the drop to the REVERSE of the dropped transfer.
    fn round_trips_to_reversal(&self) -> f64 {
        let (dropped, _) = self.dropped.expect("a frame was dropped");
        let reversed = self.reversed_at.expect("the transfer was reversed");
        (reversed - dropped) as f64 / RTT as f64
    }

    fn completions(&mut self) -> Vec<Result<Output, VerbError>> {
        self.completed.drain(..).map(|(_, _, r)| r).collect()
    }
}

fn is_request(f: &Frame<'_>) -> bool {
    f.context.transition == Transition::Request
}

fn is_echo(f: &Frame<'_>) -> bool {
    f.context.transition == Transition::Echo
}

/// One verb alone on an idle link: nothing follows the lost frame, so the
/// link's own tick, sent about one RTT later, is the later frame.
fn one_verb_alone(cfg: LinkConfig, drop: Drop) -> (Wire, f64) {
    let mut w = Wire::new(cfg);
    w.warm_up();
    w.drop = Some(drop);
    w.nodes[0].submit(0, VerbId(1), &faa(0)).unwrap();
    w.run(1000 * RTT);
    assert_eq!(w.completions(), vec![Ok(Output::FetchAdd { old: 0 })]);
    let word = &w.nodes[1].memory().bytes(1).unwrap()[..8];
    assert_eq!(word, &1u64.to_le_bytes(), "applied exactly once");
    let rtts = w.round_trips_to_reversal();
    (w, rtts)
}

#[test]
fn a_lost_request_on_an_idle_link_is_found_within_about_two_round_trips() {
    let (w, rtts) = one_verb_alone(
        LinkConfig::default(),
        Drop {
            from: 0,
            pick: is_request,
        },
    );
    let st = w.nodes[0].link_stats(0).unwrap();
    println!("lost REQUEST, idle link: reversal {rtts:.2} RTT after the drop");
    assert!(rtts <= 2.5, "reversal {rtts:.2} RTT after the drop");
    assert_eq!((st.lost_by_order, st.lost_by_patience), (1, 0));
    assert_eq!(st.probes_sent, 1);
}

#[test]
fn a_lost_echo_on_an_idle_link_is_found_within_about_two_round_trips() {
    let (w, rtts) = one_verb_alone(
        LinkConfig::default(),
        Drop {
            from: 1,
            pick: is_echo,
        },
    );
    let st = w.nodes[0].link_stats(0).unwrap();
    println!("lost ECHO, idle link: reversal {rtts:.2} RTT after the drop");
    // The echo leaves half a round trip after the request.
    assert!(rtts <= 2.0, "reversal {rtts:.2} RTT after the drop");
    assert_eq!((st.lost_by_order, st.lost_by_patience), (1, 0));
    assert_eq!(w.nodes[1].link_stats(0).unwrap().transfers_reversed, 1);
}

/// Verbs in flight on several slots: the answer to the request sent after
/// the lost one proves the loss, one round trip after it, with no probe.
#[test]
fn a_lost_request_among_others_is_found_by_the_next_answer() {
    let mut w = Wire::new(LinkConfig::default());
    w.warm_up();
    w.drop = Some(Drop {
        from: 0,
        pick: is_request,
    });
    for k in 0..8 {
        w.nodes[0]
            .submit(0, VerbId(k), &faa(16 + 8 * k as u32))
            .unwrap();
    }
    w.run(1000 * RTT);
    let done = w.completions();
    assert_eq!(done.len(), 8);
    assert!(done.iter().all(|r| *r == Ok(Output::FetchAdd { old: 0 })));
    let rtts = w.round_trips_to_reversal();
    let st = w.nodes[0].link_stats(0).unwrap();
    println!("lost REQUEST among 8: reversal {rtts:.2} RTT after the drop");
    assert!(rtts <= 1.1, "reversal {rtts:.2} RTT after the drop");
    assert_eq!(
        (st.lost_by_order, st.lost_by_patience, st.probes_sent),
        (1, 0, 0)
    );
}

/// The same loss on a link configured as unordered is found by patience:
/// `echo_patience_rounds` rounds of `rtt_multiplier` round trips. This is
/// the wait the ordered tests above would see if detection fell back.
#[test]
fn on_an_unordered_link_the_same_loss_waits_for_patience() {
    let cfg = LinkConfig {
        ordered: false,
        ..LinkConfig::default()
    };
    let (w, rtts) = one_verb_alone(
        cfg,
        Drop {
            from: 0,
            pick: is_request,
        },
    );
    let st = w.nodes[0].link_stats(0).unwrap();
    println!("lost REQUEST, unordered link: reversal {rtts:.2} RTT after the drop");
    let patience = (cfg.echo_patience_rounds * cfg.rtt_multiplier) as f64;
    assert!(
        rtts >= patience - 1.0,
        "reversal {rtts:.2} RTT after the drop"
    );
    assert_eq!((st.lost_by_order, st.lost_by_patience), (0, 1));
}

/// Two verbs on one word at once: the second finds the word locked by the
/// first (tentative until its commit arrives). On an ordered link it goes
/// again right after the first one's commit, so it completes within a few
/// round trips, where waiting a round (`rtt_multiplier` round trips) would
/// take longer.
#[test]
fn a_verb_refused_locked_goes_again_right_after_the_commit() {
    let mut w = Wire::new(LinkConfig::default());
    w.warm_up();
    let start = w.now;
    w.nodes[0].submit(0, VerbId(1), &faa(0)).unwrap();
    w.nodes[0].submit(0, VerbId(2), &faa(0)).unwrap();
    w.run(1000 * RTT);
    let st = w.nodes[0].link_stats(0).unwrap();
    assert_eq!(st.refusals_received, 1, "{st:?}");
    let (done_at, id, result) = w.completed.last().cloned().unwrap();
    assert_eq!((id, result), (VerbId(2), Ok(Output::FetchAdd { old: 1 })));
    let rtts = (done_at - start) as f64 / RTT as f64;
    println!("verb refused Locked completed {rtts:.2} RTT after its submission");
    let round = f64::from(LinkConfig::default().rtt_multiplier);
    assert!(rtts <= 2.5 && rtts < 1.0 + round, "{rtts:.2} RTT");
}

/// A peer much slower than the link's first estimate (`initial_rtt` 100 µs
/// against a 2 ms round trip), on an idle link: Alice's TICK is probed
/// before its TOCK can come, and the TOCK then answers a superseded TICK.
/// It is an answer (R16): the estimate learns the round trip and probes
/// become rare. Taken for stale, as once, it taught nothing, and the link
/// probed every few hundred microseconds for as long as it was idle. And
/// Alice's round, grown twentyfold, is told to Bob at once (L1): else Bob,
/// still counting the old short rounds, took her for dead again and again.
#[test]
fn an_idle_link_to_a_slow_peer_learns_its_round_trip_instead_of_probing() {
    let one_way = 1_000_000;
    let mut w = Wire::with_delay(LinkConfig::default(), one_way);
    w.run_until(200_000_000, false);
    let st = w.nodes[0].link_stats(0).unwrap();
    let srtt = w.nodes[0].link_status(0).unwrap().srtt;
    println!(
        "idle 200 ms, 2 ms round trip: {} TICKs, {} probes, {} late TOCKs, {} stale, srtt {srtt} ns",
        st.ticks_sent, st.probes_sent, st.late_tocks, st.stale_slot_frames
    );
    assert!(w.nodes[0].link_status(0).unwrap().up);
    // Bob heard of Alice's longer round in time (L1): neither end ever
    // took the other's silence for death.
    for n in &w.nodes {
        let st = n.link_stats(0).unwrap();
        assert_eq!(st.unreachable_declared, 0, "{st:?}");
    }
    assert_eq!(st.stale_slot_frames, 0, "{st:?}");
    assert!(st.late_tocks >= 1, "{st:?}");
    assert!(srtt >= one_way, "srtt {srtt} for a 2 ms round trip");
    // Rounds of 4 srtt, about 8 ms: some 25 TICKs in 200 ms, and a probe
    // now and then. The storm sent hundreds.
    assert!(st.probes_sent <= 40, "{st:?}");
}
