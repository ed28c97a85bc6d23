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
        Wire {
            nodes: pair_with(cfg),
            now: 0,
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
                    .push_back((self.now + DELAY, 1 - from, buf[..len].to_vec()));
            }
        }
    }

    /// Runs until both nodes are quiescent and nothing is in flight, or
    /// `limit` of simulated time has passed.
    fn run(&mut self, limit: Nanos) {
        let end = self.now + limit;
        loop {
            self.transmit();
            if self.flights.is_empty() && self.nodes.iter().all(|n| n.is_quiescent()) {
                return;
            }
            let next_flight = self.flights.front().map(|f| f.0);
            let next_timer = self.nodes.iter().filter_map(|n| n.poll_timeout()).min();
            let next = next_flight.into_iter().chain(next_timer).min().unwrap();
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
