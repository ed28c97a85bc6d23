//! Which nodes a simulated network joins with links.

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
