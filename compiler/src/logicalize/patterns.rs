//! The pattern library: generators that, given a rank count, produce every candidate
//! topology of their family (all grids and tori of every factorization and periodicity,
//! hypercubes, k-ary and binomial trees, star, complete graph), and for each candidate its
//! graph in canonical rank order, per-rank coordinates and the relation of an edge.
//!
//! To add a pattern: add a [`Topology`] variant, teach its methods the numbering, and add a
//! [`Generator`] to [`LIBRARY`]. Direction (pipelines, trees up or down) is not a separate
//! pattern: the matcher classifies the flow of the matched edges (see `super::Flow`).

use serde::Serialize;

use super::graph::Graph;

/// Trees of arity above this are not generated: beyond it a tree is closer to a star,
/// and every arity adds a candidate to the report.
pub const MAX_TREE_ARITY: u32 = 16;

/// A candidate or matched logical topology over `n` ranks, in the canonical numbering the
/// DSL and MPI use (see each variant).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Topology {
    /// A Cartesian grid; `periodic[i]` wraps dimension `i` (a torus when all wrap; `ring`
    /// and `chain` are the one-dimensional cases). Ranks are numbered row-major, the last
    /// dimension fastest, as `MPI_Cart_create` without reordering numbers them.
    Grid { dims: Vec<u32>, periodic: Vec<bool> },
    /// `2^dim` ranks; rank bits, most significant first, are the coordinates.
    Hypercube { dim: u32 },
    /// A complete `arity`-ary tree in heap order: rank `r`'s parent is `(r - 1) / arity`.
    Tree { arity: u32 },
    /// The binomial tree of MPI's broadcast and reduce: rank `r`'s parent is `r` with its
    /// lowest set bit cleared.
    BinomialTree,
    /// Rank 0 talks to every other rank.
    Star,
    /// Every rank talks to every other rank (transposes, all-to-all by hand).
    Complete,
}

/// How one edge `src → dst` reads in the matched topology.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Relation {
    /// Grids and hypercubes: `coords(dst) - coords(src)`, wrapped to the shorter way round
    /// on periodic dimensions (`[0, 1]` is "east" in a 2-D grid).
    Offset { offset: Vec<i64> },
    /// Trees and star: `dst` is the parent of `src`.
    Up,
    /// Trees and star: `dst` is child number `child` (from 0) of `src`.
    Down { child: u32 },
    /// Complete graph: `dst = (src + shift) mod n`.
    Shift { shift: u32 },
}

impl Relation {
    /// `Some(true)` when the edge goes towards higher coordinates (down a tree),
    /// `Some(false)` the other way, `None` when the topology has no direction.
    pub fn is_forward(&self) -> Option<bool> {
        match self {
            Relation::Offset { offset } => offset.iter().find(|o| **o != 0).map(|o| *o > 0),
            Relation::Up => Some(false),
            Relation::Down { .. } => Some(true),
            Relation::Shift { .. } => None,
        }
    }
}

impl Topology {
    /// The DSL spelling: `grid(4, 4)`, `torus(4, 4, 4)`, `grid(4, 4, periodic = [true,
    /// false])`, `ring`, `chain`, `hypercube(4)`, `tree(2)`, `binomial_tree`, `star`,
    /// `complete`.
    pub fn name(&self) -> String {
        match self {
            Topology::Grid { dims, periodic } => {
                let list = dims
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ");
                // A dimension of size 2 has the same graph wrapped or not: it does not
                // decide between grid and torus.
                let wraps = |i: usize| periodic.get(i).copied().unwrap_or(false);
                let all = (0..dims.len()).all(|i| wraps(i) || dims[i] <= 2);
                let none = (0..dims.len()).all(|i| !wraps(i));
                match (dims.len(), all, none) {
                    (1, _, true) => "chain".to_string(),
                    (1, _, false) => "ring".to_string(),
                    (_, _, true) => format!("grid({list})"),
                    (_, true, _) => format!("torus({list})"),
                    _ => {
                        let flags = periodic
                            .iter()
                            .map(bool::to_string)
                            .collect::<Vec<_>>()
                            .join(", ");
                        format!("grid({list}, periodic = [{flags}])")
                    }
                }
            }
            Topology::Hypercube { dim } => format!("hypercube({dim})"),
            Topology::Tree { arity } => format!("tree({arity})"),
            Topology::BinomialTree => "binomial_tree".to_string(),
            Topology::Star => "star".to_string(),
            Topology::Complete => "complete".to_string(),
        }
    }

    /// The number of undirected edges over `n_ranks` ranks, without building the graph.
    pub fn n_edges(&self, n_ranks: u32) -> u64 {
        let n = u64::from(n_ranks);
        match self {
            Topology::Grid { dims, periodic } => dims
                .iter()
                .zip(periodic)
                .map(|(d, p)| {
                    let d = u64::from(*d).max(1);
                    let per_line = if *p && d >= 3 { d } else { d - 1 };
                    n / d * per_line
                })
                .sum(),
            Topology::Hypercube { dim } => u64::from(*dim) * n / 2,
            Topology::Tree { .. } | Topology::BinomialTree | Topology::Star => n.saturating_sub(1),
            Topology::Complete => n * n.saturating_sub(1) / 2,
        }
    }

    /// The graph over `n_ranks` ranks in canonical numbering.
    pub fn graph(&self, n_ranks: u32) -> Graph {
        Graph::from_edges(n_ranks as usize, self.edges(n_ranks))
    }

    /// The undirected edges `(low, high)` over `n_ranks` ranks in canonical numbering,
    /// generated lazily so that a containment test can stop at the first missing edge.
    pub fn edges(&self, n_ranks: u32) -> Box<dyn Iterator<Item = (u32, u32)> + '_> {
        match self {
            Topology::Grid { dims, periodic } => Box::new((0..n_ranks).flat_map(move |r| {
                let coords = grid_coords(dims, r);
                let mut stride = 1u32;
                let mut out = Vec::with_capacity(dims.len());
                for i in (0..dims.len()).rev() {
                    let d = dims[i];
                    if coords[i] + 1 < d {
                        if let Some(peer) = r.checked_add(stride) {
                            out.push((r, peer));
                        }
                    } else if periodic.get(i).copied().unwrap_or(false) && d >= 3 {
                        if let Some(peer) = r.checked_sub((d - 1).saturating_mul(stride)) {
                            out.push((peer, r));
                        }
                    }
                    stride = stride.saturating_mul(d);
                }
                out
            })),
            Topology::Hypercube { dim } => Box::new((0..n_ranks).flat_map(move |r| {
                (0..*dim)
                    .map(move |bit| (r, r ^ 1u32.checked_shl(bit).unwrap_or(0)))
                    .filter(|(r, peer)| peer > r)
            })),
            Topology::Tree { arity } => {
                let arity = (*arity).max(1);
                Box::new((1..n_ranks).map(move |r| ((r - 1) / arity, r)))
            }
            Topology::BinomialTree => Box::new((1..n_ranks).map(|r| (r & (r - 1), r))),
            Topology::Star => Box::new((1..n_ranks).map(|r| (0, r))),
            Topology::Complete => {
                Box::new((0..n_ranks).flat_map(move |a| (a + 1..n_ranks).map(move |b| (a, b))))
            }
        }
    }

    /// The coordinates of canonical rank `r`: grid and hypercube coordinates, otherwise the
    /// rank itself (the position in the tree's heap order).
    pub fn coords(&self, r: u32) -> Vec<u32> {
        match self {
            Topology::Grid { dims, .. } => grid_coords(dims, r),
            Topology::Hypercube { dim } => (0..*dim)
                .rev()
                .map(|bit| r.checked_shr(bit).unwrap_or(0) & 1)
                .collect(),
            _ => vec![r],
        }
    }

    /// The relation of the edge between canonical ranks `src` and `dst`.
    pub fn relation(&self, n_ranks: u32, src: u32, dst: u32) -> Relation {
        let offset = |a: &[u32], b: &[u32], periods: &[u32]| -> Vec<i64> {
            a.iter()
                .zip(b)
                .zip(periods)
                .map(|((x, y), p)| {
                    let (p, mut diff) = (i64::from(*p), i64::from(*y) - i64::from(*x));
                    if p > 0 {
                        diff = diff.rem_euclid(p);
                        if 2 * diff > p {
                            diff -= p;
                        }
                    }
                    diff
                })
                .collect()
        };
        match self {
            Topology::Grid { dims, periodic } => {
                let periods: Vec<u32> = dims
                    .iter()
                    .zip(periodic)
                    .map(|(d, p)| if *p { *d } else { 0 })
                    .collect();
                Relation::Offset {
                    offset: offset(&grid_coords(dims, src), &grid_coords(dims, dst), &periods),
                }
            }
            Topology::Hypercube { .. } => {
                let (a, b) = (self.coords(src), self.coords(dst));
                Relation::Offset {
                    offset: offset(&a, &b, &vec![0; a.len()]),
                }
            }
            Topology::Tree { .. } | Topology::BinomialTree | Topology::Star => {
                if self.parent(dst) == Some(src) {
                    let first = self.first_child(src);
                    Relation::Down {
                        child: match self {
                            Topology::BinomialTree => (dst - src).trailing_zeros(),
                            _ => dst.saturating_sub(first),
                        },
                    }
                } else {
                    Relation::Up
                }
            }
            Topology::Complete => Relation::Shift {
                shift: {
                    let n = u64::from(n_ranks.max(1));
                    ((u64::from(dst) + n - u64::from(src) % n) % n) as u32
                },
            },
        }
    }

    fn parent(&self, r: u32) -> Option<u32> {
        match (self, r) {
            (_, 0) => None,
            (Topology::Tree { arity }, _) => Some((r - 1) / (*arity).max(1)),
            (Topology::BinomialTree, _) => Some(r & (r - 1)),
            (Topology::Star, _) => Some(0),
            _ => None,
        }
    }

    fn first_child(&self, r: u32) -> u32 {
        match self {
            Topology::Tree { arity } => r * arity + 1,
            _ => 1,
        }
    }

    /// Every distinct dimension order of a grid (the same graph, different rank
    /// numberings), the given order first; other topologies have one numbering.
    pub fn orderings(&self) -> Vec<Topology> {
        let Topology::Grid { dims, periodic } = self else {
            return vec![self.clone()];
        };
        let mut pairs: Vec<(u32, bool)> =
            dims.iter().copied().zip(periodic.iter().copied()).collect();
        let mut out = vec![self.clone()];
        pairs.sort_unstable();
        // Lexicographic permutations of the sorted multiset visit each distinct order once.
        loop {
            let candidate = Topology::Grid {
                dims: pairs.iter().map(|p| p.0).collect(),
                periodic: pairs.iter().map(|p| p.1).collect(),
            };
            if candidate != *self {
                out.push(candidate);
            }
            if !next_permutation(&mut pairs) {
                return out;
            }
        }
    }
}

/// Row-major coordinates of `r` in a grid with `dims` (the last dimension fastest).
fn grid_coords(dims: &[u32], mut r: u32) -> Vec<u32> {
    let mut coords = vec![0; dims.len()];
    for i in (0..dims.len()).rev() {
        let d = dims[i].max(1);
        coords[i] = r % d;
        r /= d;
    }
    coords
}

fn next_permutation<T: Ord>(items: &mut [T]) -> bool {
    let Some(i) = (1..items.len()).rev().find(|&i| items[i - 1] < items[i]) else {
        return false;
    };
    let Some(j) = (i..items.len()).rev().find(|&j| items[i - 1] < items[j]) else {
        return false;
    };
    items.swap(i - 1, j);
    items[i..].reverse();
    true
}

/// A family of patterns: every member over a given rank count.
pub trait Generator: Sync {
    /// The family's name in reports.
    fn family(&self) -> &'static str;
    /// Every candidate of the family over exactly `n_ranks` ranks, in preference order.
    fn generate(&self, n_ranks: u32) -> Vec<Topology>;
}

/// The pattern library, in preference order: when several candidates fit equally well
/// (isomorphic graphs, none in canonical numbering), the earlier one is reported.
/// Hypercubes come first: `hypercube(d)` is also a torus of 4s and 2s, and the shorter
/// name reads better when the ranks are not in canonical order.
pub static LIBRARY: &[&dyn Generator] = &[
    &HypercubeGenerator,
    &GridGenerator,
    &TreeGenerator,
    &BinomialTreeGenerator,
    &StarGenerator,
    &CompleteGenerator,
];

/// Every candidate of the library over `n_ranks` ranks, in preference order.
pub fn candidates(n_ranks: u32) -> Vec<Topology> {
    LIBRARY.iter().flat_map(|g| g.generate(n_ranks)).collect()
}

/// Grids and tori: one candidate per multiset of (size, periodic) dimensions, with sizes
/// from every unordered factorization of the rank count into factors ≥ 2, in
/// non-increasing order as `MPI_Dims_create` gives them. Other dimension orders are the
/// same graph and are tried when the rank → coordinate map is chosen. All-2 grids are
/// left to the hypercube generator; size-2 dimensions are never periodic (same graph).
pub struct GridGenerator;

impl Generator for GridGenerator {
    fn family(&self) -> &'static str {
        "grid"
    }

    fn generate(&self, n_ranks: u32) -> Vec<Topology> {
        let mut factorizations = Vec::new();
        if n_ranks >= 2 {
            factorize(n_ranks, n_ranks, &mut Vec::new(), &mut factorizations);
        }
        // Fewer dimensions first: a ring is preferred to an isomorphic 2-D torus.
        factorizations.sort_by_key(|f: &Vec<u32>| f.len());
        let mut out = Vec::new();
        for dims in factorizations {
            if dims.len() >= 2 && dims.iter().all(|d| *d == 2) {
                continue;
            }
            for periodic in periodicities(&dims) {
                out.push(Topology::Grid {
                    dims: dims.clone(),
                    periodic,
                });
            }
        }
        out
    }
}

/// Non-increasing factorizations of `n` with factors ≤ `max_factor`.
fn factorize(n: u32, max_factor: u32, prefix: &mut Vec<u32>, out: &mut Vec<Vec<u32>>) {
    if n == 1 {
        if !prefix.is_empty() {
            out.push(prefix.clone());
        }
        return;
    }
    for f in (2..=max_factor.min(n)).rev() {
        if n.is_multiple_of(f) {
            prefix.push(f);
            factorize(n / f, f, prefix, out);
            prefix.pop();
        }
    }
}

/// Periodicity vectors for non-increasing `dims`, one per multiset: within a run of equal
/// sizes the periodic dimensions come first, so `torus(4, 4)`, `grid(4, 4, periodic =
/// [true, false])` and `grid(4, 4)` are generated once each. Fully periodic first.
fn periodicities(dims: &[u32]) -> Vec<Vec<bool>> {
    let mut out: Vec<Vec<bool>> = vec![Vec::new()];
    let mut i = 0;
    while i < dims.len() {
        let run = dims[i..].iter().take_while(|d| **d == dims[i]).count();
        let choices: Vec<usize> = if dims[i] >= 3 {
            (0..=run).rev().collect()
        } else {
            vec![0]
        };
        let mut next = Vec::new();
        for prefix in &out {
            for &n_periodic in &choices {
                let mut v = prefix.clone();
                v.extend((0..run).map(|k| k < n_periodic));
                next.push(v);
            }
        }
        out = next;
        i += run;
    }
    out
}

/// Hypercubes of dimension ≥ 3 (dimension 1 is a chain of 2, dimension 2 a ring of 4).
pub struct HypercubeGenerator;

impl Generator for HypercubeGenerator {
    fn family(&self) -> &'static str {
        "hypercube"
    }

    fn generate(&self, n_ranks: u32) -> Vec<Topology> {
        if n_ranks >= 8 && n_ranks.is_power_of_two() {
            vec![Topology::Hypercube {
                dim: n_ranks.trailing_zeros(),
            }]
        } else {
            Vec::new()
        }
    }
}

/// Complete k-ary trees for `2 ≤ k ≤ min(n - 2, MAX_TREE_ARITY)` (`k = n - 1` is the star).
pub struct TreeGenerator;

impl Generator for TreeGenerator {
    fn family(&self) -> &'static str {
        "tree"
    }

    fn generate(&self, n_ranks: u32) -> Vec<Topology> {
        let top = n_ranks.saturating_sub(2).min(MAX_TREE_ARITY);
        (2..=top).map(|arity| Topology::Tree { arity }).collect()
    }
}

/// The binomial tree, for 4 ranks or more (below it is a chain).
pub struct BinomialTreeGenerator;

impl Generator for BinomialTreeGenerator {
    fn family(&self) -> &'static str {
        "binomial_tree"
    }

    fn generate(&self, n_ranks: u32) -> Vec<Topology> {
        if n_ranks >= 4 {
            vec![Topology::BinomialTree]
        } else {
            Vec::new()
        }
    }
}

/// The star, for 4 ranks or more (below it is a chain).
pub struct StarGenerator;

impl Generator for StarGenerator {
    fn family(&self) -> &'static str {
        "star"
    }

    fn generate(&self, n_ranks: u32) -> Vec<Topology> {
        if n_ranks >= 4 {
            vec![Topology::Star]
        } else {
            Vec::new()
        }
    }
}

/// The complete graph, for 4 ranks or more (below it is a chain or a ring).
pub struct CompleteGenerator;

impl Generator for CompleteGenerator {
    fn family(&self) -> &'static str {
        "complete"
    }

    fn generate(&self, n_ranks: u32) -> Vec<Topology> {
        if n_ranks >= 4 {
            vec![Topology::Complete]
        } else {
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn analytic_edge_counts_match_the_graphs() {
        for n in [2u32, 3, 4, 6, 8, 12, 16, 24, 30, 64] {
            for t in candidates(n) {
                assert_eq!(
                    t.n_edges(n),
                    t.graph(n).n_edges() as u64,
                    "{} over {n}",
                    t.name()
                );
                assert_eq!(t.graph(n).components().len(), 1, "{} over {n}", t.name());
            }
        }
    }

    #[test]
    fn names_follow_the_dsl() {
        let grid = |dims: &[u32], periodic: &[bool]| Topology::Grid {
            dims: dims.to_vec(),
            periodic: periodic.to_vec(),
        };
        assert_eq!(grid(&[4, 4], &[false, false]).name(), "grid(4, 4)");
        assert_eq!(grid(&[4, 4, 4], &[true; 3]).name(), "torus(4, 4, 4)");
        assert_eq!(
            grid(&[4, 4], &[true, false]).name(),
            "grid(4, 4, periodic = [true, false])"
        );
        assert_eq!(grid(&[8], &[true]).name(), "ring");
        assert_eq!(grid(&[8], &[false]).name(), "chain");
        assert_eq!(Topology::Tree { arity: 2 }.name(), "tree(2)");
    }

    #[test]
    fn factorizations_and_periodicities_are_complete_and_distinct() {
        let grids = GridGenerator.generate(16);
        let names: Vec<String> = grids.iter().map(Topology::name).collect();
        // 16, 8·2, 4·4, 4·2·2 (2·2·2·2 is the hypercube).
        for expected in [
            "ring",
            "chain",
            "torus(8, 2)",
            "grid(8, 2)",
            "torus(4, 4)",
            "grid(4, 4)",
        ] {
            assert!(
                names.contains(&expected.to_string()),
                "{expected} missing from {names:?}"
            );
        }
        let mut sorted = grids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), grids.len());
        assert!(GridGenerator.generate(720).len() > 100);
        assert!(GridGenerator.generate(1).is_empty());
    }

    #[test]
    fn relations() {
        let torus = Topology::Grid {
            dims: vec![4, 4],
            periodic: vec![true, true],
        };
        assert_eq!(
            torus.relation(16, 0, 3),
            Relation::Offset {
                offset: vec![0, -1]
            }
        );
        assert_eq!(
            torus.relation(16, 0, 4),
            Relation::Offset { offset: vec![1, 0] }
        );
        let tree = Topology::Tree { arity: 2 };
        assert_eq!(tree.relation(7, 2, 6), Relation::Down { child: 1 });
        assert_eq!(tree.relation(7, 6, 2), Relation::Up);
        assert_eq!(
            Topology::BinomialTree.relation(8, 0, 4),
            Relation::Down { child: 2 }
        );
        assert_eq!(
            Topology::Complete.relation(8, 6, 1),
            Relation::Shift { shift: 3 }
        );
        let orders = Topology::Grid {
            dims: vec![4, 2],
            periodic: vec![true, false],
        }
        .orderings();
        assert_eq!(orders.len(), 2);
    }
}
