//! The shape of a fabric: which nodes are joined by links. The simulator
//! builds its networks from it, `oaectl demo --topology` and the tests
//! their namespaces and veth pairs.

use std::format;
use std::string::String;
use std::vec;
use std::vec::Vec;

/// The shape of a fabric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Every node linked to every other.
    Mesh,
    /// Node i linked to i ± 1, the last to the first.
    Ring,
    /// Node i linked to i ± 1.
    Line,
    /// A 2-D grid of w × h nodes (w the largest divisor of the count not
    /// above its square root), each linked to the nodes beside it.
    Grid,
    /// The grid with its edges wrapped round.
    Torus,
    /// A random graph in which every node has 4 links: the same graph for
    /// a node count on every machine, connected.
    Random,
    /// Node 0 linked to every other, and no other link: every leaf is two
    /// hops from every other, through node 0.
    Star,
}

/// Most nodes [`Shape::parse`] takes by default (what namespaces on one
/// machine hold); the simulator takes more.
pub const MAX_PARSED_NODES: usize = 16;

impl Shape {
    pub fn name(self) -> &'static str {
        match self {
            Shape::Mesh => "mesh",
            Shape::Ring => "ring",
            Shape::Line => "line",
            Shape::Grid => "grid",
            Shape::Torus => "torus",
            Shape::Random => "random",
            Shape::Star => "star",
        }
    }

    /// Parses `ring:5`, `mesh:4` or `line:3`: a shape and its node count
    /// (2 to 16).
    pub fn parse(spec: &str) -> Result<(Shape, usize), String> {
        Shape::parse_up_to(spec, MAX_PARSED_NODES)
    }

    /// [`Shape::parse`] with room for up to `most` nodes; `grid`, `torus`,
    /// `random` (at least 5 nodes) and `star` too.
    pub fn parse_up_to(spec: &str, most: usize) -> Result<(Shape, usize), String> {
        let (name, n) = spec
            .split_once(':')
            .ok_or_else(|| format!("topology '{spec}': write shape:nodes, e.g. ring:5"))?;
        let shape = match name {
            "mesh" => Shape::Mesh,
            "ring" => Shape::Ring,
            "line" => Shape::Line,
            "grid" => Shape::Grid,
            "torus" => Shape::Torus,
            "random" => Shape::Random,
            "star" => Shape::Star,
            other => {
                return Err(format!(
                    "topology '{spec}': unknown shape '{other}' (ring, mesh, line, grid, torus, \
                     random or star)"
                ));
            }
        };
        let n: usize = n
            .parse()
            .map_err(|_| format!("topology '{spec}': '{n}' is not a node count"))?;
        let least = if shape == Shape::Random { 5 } else { 2 };
        if !(least..=most).contains(&n) {
            return Err(format!(
                "topology '{spec}': {least} to {most} nodes, not {n}"
            ));
        }
        Ok((shape, n))
    }

    /// Every link once, as (lower node, higher node), in order.
    pub fn edges(self, nodes: usize) -> Vec<(usize, usize)> {
        let adj = self.neighbours(nodes);
        let mut edges = Vec::new();
        for (a, ns) in adj.iter().enumerate() {
            edges.extend(ns.iter().filter(|&&b| b > a).map(|&b| (a, b)));
        }
        edges
    }

    /// Each node's neighbours, ascending: a node's link `k` leads to its
    /// `k`-th neighbour (for a mesh, the numbering of the campaign without
    /// a fabric).
    pub fn neighbours(self, nodes: usize) -> Vec<Vec<usize>> {
        let mut adj = vec![Vec::new(); nodes];
        let mut join = |a: usize, b: usize| {
            if a != b && !adj[a].contains(&b) {
                adj[a].push(b);
                adj[b].push(a);
            }
        };
        let (w, h) = grid_sides(nodes);
        match self {
            Shape::Mesh => (0..nodes).for_each(|a| (a + 1..nodes).for_each(|b| join(a, b))),
            Shape::Ring if nodes > 2 => (0..nodes).for_each(|a| join(a, (a + 1) % nodes)),
            Shape::Ring | Shape::Line => (1..nodes).for_each(|a| join(a - 1, a)),
            Shape::Grid | Shape::Torus => {
                let wrap = self == Shape::Torus;
                for a in 0..nodes {
                    let (r, c) = (a / w, a % w);
                    if c + 1 < w || (wrap && w > 2) {
                        join(a, r * w + (c + 1) % w);
                    }
                    if r + 1 < h || (wrap && h > 2) {
                        join(a, ((r + 1) % h) * w + c);
                    }
                }
            }
            Shape::Random => return random_regular(nodes, 4),
            Shape::Star => (1..nodes).for_each(|leaf| join(0, leaf)),
        }
        for n in &mut adj {
            n.sort_unstable();
        }
        adj
    }
}

/// A grid's sides for `n` nodes: w the largest divisor of n not above its
/// square root, h = n / w.
fn grid_sides(n: usize) -> (usize, usize) {
    let w = (1..=n)
        .take_while(|w| w * w <= n)
        .filter(|w| n.is_multiple_of(*w))
        .last()
        .unwrap_or(1);
    (w, n / w)
}

/// A connected simple graph on `n` nodes in which every node has `degree`
/// links (one fewer for one node if `n × degree` is odd), drawn by the
/// pairing model from a seed fixed by `n`: the same graph on every run.
fn random_regular(n: usize, degree: usize) -> Vec<Vec<usize>> {
    let mut rng = crate::rng::Rng::new(0x7261_6e64_0000_0000 ^ n as u64);
    loop {
        let mut stubs: Vec<usize> = (0..n)
            .flat_map(|a| core::iter::repeat_n(a, degree))
            .collect();
        if !stubs.len().is_multiple_of(2) {
            stubs.pop();
        }
        // Fisher–Yates, then pair neighbours in the shuffled order.
        for i in (1..stubs.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            stubs.swap(i, j);
        }
        let mut adj = vec![Vec::new(); n];
        let simple = stubs.chunks_exact(2).all(|p| {
            let (a, b) = (p[0], p[1]);
            let fresh = a != b && !adj[a].contains(&b);
            if fresh {
                adj[a].push(b);
                adj[b].push(a);
            }
            fresh
        });
        let none_down = vec![vec![false; n]; n];
        if simple && connected(&adj, &none_down) {
            for ns in &mut adj {
                ns.sort_unstable();
            }
            return adj;
        }
    }
}

/// The most hops between any two nodes (breadth first from each).
pub fn diameter(adj: &[Vec<usize>]) -> usize {
    let mut most = 0;
    for start in 0..adj.len() {
        let mut hops = vec![usize::MAX; adj.len()];
        hops[start] = 0;
        let mut queue = std::collections::VecDeque::from([start]);
        while let Some(a) = queue.pop_front() {
            for &b in &adj[a] {
                if hops[b] == usize::MAX {
                    hops[b] = hops[a] + 1;
                    queue.push_back(b);
                }
            }
        }
        most = most.max(
            hops.into_iter()
                .filter(|&h| h != usize::MAX)
                .max()
                .unwrap_or(0),
        );
    }
    most
}

/// The MAC of node `i`'s end of the link to node `j`: a locally
/// administered address that names both ends, so a capture reads as the
/// topology (`02:0a:f0:00:<i+1>:<j+1>`).
pub fn link_mac(i: usize, j: usize) -> [u8; 6] {
    [2, 0x0a, 0xf0, 0, i as u8 + 1, j as u8 + 1]
}

/// Whether every node reaches every other over the links not marked down.
pub fn connected(adj: &[Vec<usize>], down: &[Vec<bool>]) -> bool {
    let mut seen = vec![false; adj.len()];
    let mut stack = vec![0];
    seen[0] = true;
    while let Some(a) = stack.pop() {
        for &b in &adj[a] {
            if !seen[b] && !down[a][b] {
                seen[b] = true;
                stack.push(b);
            }
        }
    }
    seen.iter().all(|&s| s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse_with_clear_errors() {
        assert_eq!(Shape::parse("ring:5"), Ok((Shape::Ring, 5)));
        assert_eq!(Shape::parse("mesh:4").map(|(s, n)| s.edges(n).len()), Ok(6));
        assert!(
            Shape::parse("hypercube:4")
                .unwrap_err()
                .contains("unknown shape")
        );
        assert!(Shape::parse("ring").unwrap_err().contains("shape:nodes"));
        assert!(Shape::parse("line:1").unwrap_err().contains("2 to 16"));
        assert!(Shape::parse("torus:64").unwrap_err().contains("2 to 16"));
        assert_eq!(Shape::parse_up_to("torus:64", 256), Ok((Shape::Torus, 64)));
        assert_eq!(Shape::Ring.name(), "ring");
        assert_eq!(Shape::parse("star:9"), Ok((Shape::Star, 9)));
    }

    #[test]
    fn shapes_link_the_right_neighbours() {
        assert_eq!(
            Shape::Ring.neighbours(4),
            vec![vec![1, 3], vec![0, 2], vec![1, 3], vec![0, 2]]
        );
        assert_eq!(
            Shape::Line.neighbours(3),
            vec![vec![1], vec![0, 2], vec![1]]
        );
        assert_eq!(
            Shape::Mesh.neighbours(3),
            vec![vec![1, 2], vec![0, 2], vec![0, 1]]
        );
        // 3 × 4: corners have 2 links, the middle 4.
        let grid = Shape::Grid.neighbours(12);
        assert_eq!(
            (grid[0].clone(), grid[4].clone()),
            (vec![1, 3], vec![1, 3, 5, 7])
        );
        assert_eq!(diameter(&grid), 5);
        let torus = Shape::Torus.neighbours(256);
        assert!(torus.iter().all(|n| n.len() == 4));
        assert_eq!(diameter(&torus), 16);
        let random = Shape::Random.neighbours(256);
        assert!(random.iter().all(|n| n.len() == 4));
        assert_eq!(
            random,
            Shape::Random.neighbours(256),
            "the same graph each time"
        );
        assert_eq!(diameter(&Shape::Ring.neighbours(64)), 32);
        let star = Shape::Star.neighbours(9);
        assert_eq!(star[0], (1..9).collect::<Vec<_>>());
        assert!(star[1..].iter().all(|n| n == &vec![0]));
        assert_eq!(diameter(&star), 2);
        let adj = Shape::Ring.neighbours(4);
        let mut down = vec![vec![false; 4]; 4];
        down[0][1] = true;
        down[1][0] = true;
        assert!(connected(&adj, &down));
        down[2][3] = true;
        down[3][2] = true;
        assert!(!connected(&adj, &down));
    }
}
