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
}

impl Shape {
    pub fn name(self) -> &'static str {
        match self {
            Shape::Mesh => "mesh",
            Shape::Ring => "ring",
            Shape::Line => "line",
        }
    }

    /// Parses `ring:5`, `mesh:4` or `line:3`: a shape and its node count
    /// (2 to 16).
    pub fn parse(spec: &str) -> Result<(Shape, usize), String> {
        let (name, n) = spec
            .split_once(':')
            .ok_or_else(|| format!("topology '{spec}': write shape:nodes, e.g. ring:5"))?;
        let shape = match name {
            "mesh" => Shape::Mesh,
            "ring" => Shape::Ring,
            "line" => Shape::Line,
            other => {
                return Err(format!(
                    "topology '{spec}': unknown shape '{other}' (ring, mesh or line)"
                ));
            }
        };
        let n: usize = n
            .parse()
            .map_err(|_| format!("topology '{spec}': '{n}' is not a node count"))?;
        if !(2..=16).contains(&n) {
            return Err(format!("topology '{spec}': 2 to 16 nodes, not {n}"));
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
        match self {
            Shape::Mesh => (0..nodes).for_each(|a| (a + 1..nodes).for_each(|b| join(a, b))),
            Shape::Ring if nodes > 2 => (0..nodes).for_each(|a| join(a, (a + 1) % nodes)),
            Shape::Ring | Shape::Line => (1..nodes).for_each(|a| join(a - 1, a)),
        }
        for n in &mut adj {
            n.sort_unstable();
        }
        adj
    }
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
            Shape::parse("star:4")
                .unwrap_err()
                .contains("unknown shape")
        );
        assert!(Shape::parse("ring").unwrap_err().contains("shape:nodes"));
        assert!(Shape::parse("line:1").unwrap_err().contains("2 to 16"));
        assert_eq!(Shape::Ring.name(), "ring");
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
