//! Fabrics of tens to hundreds of nodes: how many rounds their views take
//! to agree from a cold start against the diameter, what routes and paths
//! cost each node, and how many advert bytes a link carries per round once
//! nothing changes. The faults at that size (cuts, partitions, restarts,
//! scrambles, with verbs between random pairs and every invariant checked)
//! are the campaign's [`SCALE_SCENARIOS`].

use oae_proto::Nanos;

use crate::topology::{self, Shape};
use crate::{Faults, Scenario, Sim, SimConfig};

/// The large fabrics of the campaign: each shape at 64 and 256 nodes, with
/// a cut, a partition, a restart and a scramble.
pub const SCALE_SCENARIOS: [Scenario; 4] = [
    scale_scenario("ring-64", Shape::Ring, 64),
    scale_scenario("torus-64", Shape::Torus, 64),
    scale_scenario("torus-256", Shape::Torus, 256),
    scale_scenario("random-256", Shape::Random, 256),
];

const fn scale_scenario(name: &'static str, shape: Shape, nodes: usize) -> Scenario {
    Scenario {
        name,
        faults: Faults {
            loss_ppm: 2_000,
            restarts: 1,
            cuts: 1,
            partitions: 1,
            scrambles: 1,
            ..Faults::NONE
        },
        fabric: Some((shape, nodes)),
    }
}

/// The fabrics [`converge`] is measured on by default.
pub const SHAPES: [(Shape, usize); 6] = [
    (Shape::Ring, 64),
    (Shape::Torus, 64),
    (Shape::Grid, 64),
    (Shape::Torus, 256),
    (Shape::Grid, 256),
    (Shape::Random, 256),
];

/// One cold start of a fabric, measured.
#[derive(Clone, Debug)]
pub struct Convergence {
    pub shape: Shape,
    pub nodes: usize,
    pub diameter: usize,
    /// Simulated time from every node starting at once to every view
    /// agreeing, exactly the nodes running.
    pub converged_at: Nanos,
    /// A link round trip (twice the one-way delay) and a link's round
    /// (what it counts silence in) once converged.
    pub rtt: Nanos,
    pub round: Nanos,
    /// Per node, once converged: routes held and paths opened (one to
    /// each neighbour: others open when a verb needs them).
    pub routes: f64,
    pub paths: f64,
    /// Heap per node (the caller's allocator tells; 0 if it cannot): the
    /// node as made (its links and region), and what bring-up and
    /// convergence added, measured in the steady state after (routes,
    /// vectors heard, paths, and the few frames then in flight).
    pub heap_made: usize,
    pub heap_grown: usize,
    /// ADVERT pages and bytes each node sent per round of its links, over
    /// `STEADY_ROUNDS` rounds after convergence with nothing changing.
    pub adverts_per_round: f64,
    pub advert_bytes_per_round: f64,
    pub frames_to_converge: u64,
}

/// Rounds the steady state is watched for.
pub const STEADY_ROUNDS: u64 = 40;

impl Convergence {
    /// Rounds of the links to converge.
    pub fn rounds(&self) -> f64 {
        self.converged_at as f64 / self.round as f64
    }

    /// Link round trips to converge.
    pub fn round_trips(&self) -> f64 {
        self.converged_at as f64 / self.rtt as f64
    }
}

/// Starts every node of `shape` at once, with no verbs and no faults, runs
/// until every view agrees (checking every invariant on the way), then for
/// [`STEADY_ROUNDS`] more rounds. `heap` reads the bytes the process has
/// allocated.
pub fn converge(
    cfg: &SimConfig,
    (shape, nodes): (Shape, usize),
    seed: u64,
    heap: impl Fn() -> usize,
) -> Result<Convergence, String> {
    let scenario = Scenario {
        name: "cold-start",
        faults: Faults::NONE,
        fabric: Some((shape, nodes)),
    };
    let cfg = SimConfig { verbs: 0, ..*cfg };
    let before = heap();
    let mut sim = Sim::new(cfg, &scenario, seed);
    let made = heap();
    let fail = |sim: &Sim, v: crate::Violation| {
        format!(
            "{} {nodes}: invariant {} broken at t={}ns: {}",
            shape.name(),
            v.invariant,
            sim.now,
            v.detail
        )
    };
    while sim.converged_at.is_none() {
        if sim.now > cfg.settle_time {
            return Err(format!(
                "{} {nodes}: views still differ after {} ns",
                shape.name(),
                cfg.settle_time
            ));
        }
        sim.step().map_err(|v| fail(&sim, v))?;
        sim.advance();
    }
    let converged_at = sim.converged_at.expect("looped until");
    let frames_to_converge = sim.report.frames;
    let round = sim.nodes[0]
        .link_status(0)
        .map_or(1, |s| s.round_len.max(1));
    let counted = (sim.report.adverts, sim.report.advert_bytes);
    let until = sim.now + STEADY_ROUNDS * round;
    while sim.now < until {
        sim.step().map_err(|v| fail(&sim, v))?;
        sim.advance();
    }
    // Measured once the steady state holds: few frames are in flight.
    let grown = heap().saturating_sub(made);
    let per_node_round = (nodes as u64 * STEADY_ROUNDS) as f64;
    let per_node = |f: &dyn Fn(&oae_proto::Node<crate::Tap>) -> usize| {
        sim.nodes.iter().map(f).sum::<usize>() as f64 / nodes as f64
    };
    Ok(Convergence {
        shape,
        nodes,
        diameter: topology::diameter(&shape.neighbours(nodes)),
        converged_at,
        rtt: 2 * cfg.delay,
        round,
        routes: per_node(&|n| n.routes().len()),
        paths: per_node(&|n| n.paths().count()),
        heap_made: made.saturating_sub(before) / nodes,
        heap_grown: grown / nodes,
        adverts_per_round: (sim.report.adverts - counted.0) as f64 / per_node_round,
        advert_bytes_per_round: (sim.report.advert_bytes - counted.1) as f64 / per_node_round,
        frames_to_converge,
    })
}
