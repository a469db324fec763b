//! A small undirected simple graph with sorted adjacency lists, and the isomorphism
//! invariants the matcher compares: degree histogram, closed-walk counts (spectral
//! moments), the dense adjacency spectrum, and colour refinement.

use std::collections::BTreeMap;

use nalgebra::{DMatrix, SymmetricEigen};

/// An undirected simple graph over vertices `0..n`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Graph {
    adj: Vec<Vec<u32>>,
    n_edges: usize,
}

impl Graph {
    /// Builds a graph from undirected edges; self loops and repeated edges are dropped,
    /// edges naming vertices `>= n` are ignored (callers pass in-range vertices).
    pub fn from_edges(n: usize, edges: impl IntoIterator<Item = (u32, u32)>) -> Graph {
        let mut adj = vec![Vec::new(); n];
        for (a, b) in edges {
            if a == b || a as usize >= n || b as usize >= n {
                continue;
            }
            adj[a as usize].push(b);
            adj[b as usize].push(a);
        }
        let mut n_edges = 0;
        for list in &mut adj {
            list.sort_unstable();
            list.dedup();
            n_edges += list.len();
        }
        Graph {
            adj,
            n_edges: n_edges / 2,
        }
    }

    pub fn n_vertices(&self) -> usize {
        self.adj.len()
    }

    pub fn n_edges(&self) -> usize {
        self.n_edges
    }

    pub fn neighbors(&self, v: u32) -> &[u32] {
        self.adj.get(v as usize).map_or(&[], Vec::as_slice)
    }

    pub fn degree(&self, v: u32) -> usize {
        self.neighbors(v).len()
    }

    pub fn has_edge(&self, a: u32, b: u32) -> bool {
        self.neighbors(a).binary_search(&b).is_ok()
    }

    /// Each undirected edge once, as `(low, high)`, in increasing order.
    pub fn edges(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.adj.iter().enumerate().flat_map(|(a, list)| {
            let a = a as u32;
            list.iter().filter(move |b| **b > a).map(move |b| (a, *b))
        })
    }

    /// How many vertices have each degree.
    pub fn degree_histogram(&self) -> BTreeMap<usize, usize> {
        let mut hist = BTreeMap::new();
        for list in &self.adj {
            *hist.entry(list.len()).or_insert(0) += 1;
        }
        hist
    }

    /// Connected components as sorted vertex lists, ordered by their smallest vertex.
    pub fn components(&self) -> Vec<Vec<u32>> {
        let n = self.n_vertices();
        let mut seen = vec![false; n];
        let mut components = Vec::new();
        for start in 0..n {
            if seen[start] {
                continue;
            }
            seen[start] = true;
            let mut stack = vec![start as u32];
            let mut component = Vec::new();
            while let Some(v) = stack.pop() {
                component.push(v);
                for &w in self.neighbors(v) {
                    if !seen[w as usize] {
                        seen[w as usize] = true;
                        stack.push(w);
                    }
                }
            }
            component.sort_unstable();
            components.push(component);
        }
        components
    }

    /// How many vertices lie at each distance from `source` (breadth-first layers);
    /// `None` when some vertex is unreachable.
    pub fn distance_profile(&self, source: u32) -> Option<Vec<u32>> {
        let n = self.n_vertices();
        let mut dist = vec![u32::MAX; n];
        let start = dist.get_mut(source as usize)?;
        *start = 0;
        let mut queue = std::collections::VecDeque::from([source]);
        let mut profile = vec![0u32];
        while let Some(v) = queue.pop_front() {
            let d = dist[v as usize];
            profile[d as usize] += 1;
            for &w in self.neighbors(v) {
                if dist[w as usize] == u32::MAX {
                    dist[w as usize] = d + 1;
                    if profile.len() <= (d + 1) as usize {
                        profile.push(0);
                    }
                    queue.push_back(w);
                }
            }
        }
        (profile.iter().map(|c| *c as usize).sum::<usize>() == n).then_some(profile)
    }

    /// Closed-walk counts `tr(A^k)` for `k = 1..=max_k`, i.e. the first spectral moments
    /// `Σ λ^k`, computed without forming `A^k`: `(A^k)_vv` is `|A^j e_v|²` for `k = 2j`
    /// and `⟨A^j e_v, A^(j+1) e_v⟩` for `k = 2j + 1`, and `A^j e_v` is a sparse vector over
    /// the radius-`j` ball around `v`. Returns `None` when the work would exceed `budget`
    /// adjacency visits (dense graphs), so callers fall back to other invariants.
    pub fn walk_moments(&self, max_k: usize, budget: u64) -> Option<Vec<u128>> {
        self.closed_walks(0..self.n_vertices() as u32, max_k, budget)
    }

    /// The moments of a vertex-transitive graph (every vertex sees the same closed
    /// walks): `n` times the counts at vertex 0, at `1/n` of the cost.
    pub fn walk_moments_transitive(&self, max_k: usize, budget: u64) -> Option<Vec<u128>> {
        let n = self.n_vertices() as u128;
        let at_zero = self.closed_walks(0..1.min(n as u32), max_k, budget)?;
        Some(at_zero.into_iter().map(|m| m.saturating_mul(n)).collect())
    }

    /// `Σ_v (A^k)_vv` over `vertices`, for `k = 1..=max_k`.
    fn closed_walks(
        &self,
        vertices: impl Iterator<Item = u32>,
        max_k: usize,
        budget: u64,
    ) -> Option<Vec<u128>> {
        let n = self.n_vertices();
        let half = max_k.div_ceil(2);
        let mut moments = vec![0u128; max_k + 1];
        // One dense scratch vector per power, with the list of touched entries so that
        // clearing costs only what was written.
        let mut vals: Vec<Vec<u64>> = vec![vec![0; n]; half + 1];
        let mut touched: Vec<Vec<u32>> = vec![Vec::new(); half + 1];
        let mut work: u64 = 0;
        for v in vertices {
            let Some(slot) = vals[0].get_mut(v as usize) else {
                continue;
            };
            *slot = 1;
            touched[0].push(v);
            for j in 1..=half {
                let (lower, upper) = vals.split_at_mut(j);
                let (prev, next) = (&lower[j - 1], &mut upper[0]);
                let (t_lower, t_upper) = touched.split_at_mut(j);
                for &u in &t_lower[j - 1] {
                    let weight = prev[u as usize];
                    let neighbors = self.neighbors(u);
                    work += neighbors.len() as u64;
                    for &w in neighbors {
                        if next[w as usize] == 0 {
                            t_upper[0].push(w);
                        }
                        next[w as usize] = next[w as usize].saturating_add(weight);
                    }
                }
                if work > budget {
                    return None;
                }
            }
            for (k, moment) in moments.iter_mut().enumerate().skip(1) {
                let (a, b) = (k / 2, k - k / 2);
                work += touched[a].len() as u64;
                let mut sum: u128 = 0;
                for &u in &touched[a] {
                    let walks = u128::from(vals[a][u as usize])
                        .saturating_mul(u128::from(vals[b][u as usize]));
                    sum = sum.saturating_add(walks);
                }
                *moment = moment.saturating_add(sum);
            }
            for j in 0..=half {
                for &u in &touched[j] {
                    vals[j][u as usize] = 0;
                }
                touched[j].clear();
            }
        }
        moments.remove(0);
        Some(moments)
    }

    /// The adjacency eigenvalues in increasing order (dense, O(n³): small graphs only).
    pub fn spectrum(&self) -> Vec<f64> {
        let n = self.n_vertices();
        let mut a = DMatrix::<f64>::zeros(n, n);
        for (x, y) in self.edges() {
            a[(x as usize, y as usize)] = 1.0;
            a[(y as usize, x as usize)] = 1.0;
        }
        let mut eigenvalues: Vec<f64> =
            SymmetricEigen::new(a).eigenvalues.iter().copied().collect();
        eigenvalues.sort_by(f64::total_cmp);
        eigenvalues
    }
}

/// Colour refinement (1-dimensional Weisfeiler–Leman) run jointly on two graphs: a vertex's
/// colour is refined by the multiset of its neighbours' colours until nothing splits.
/// Isomorphisms map vertices only to vertices of the same colour, which the search uses to
/// prune; on trees the colours separate all non-equivalent vertices, on tori they stay one.
/// Rounds are capped (any partial refinement is still invariant under isomorphism), so a
/// 4096-rank chain does not cost 2048 rounds.
pub fn refine_colors(a: &Graph, b: &Graph) -> (Vec<u32>, Vec<u32>) {
    const MAX_ROUNDS: usize = 32;
    let mut colors_a: Vec<u32> = (0..a.n_vertices() as u32)
        .map(|v| a.degree(v) as u32)
        .collect();
    let mut colors_b: Vec<u32> = (0..b.n_vertices() as u32)
        .map(|v| b.degree(v) as u32)
        .collect();
    let mut n_classes = count_classes(&colors_a, &colors_b);
    for _ in 0..MAX_ROUNDS {
        let mut palette: BTreeMap<(u32, Vec<u32>), u32> = BTreeMap::new();
        let signature = |g: &Graph, colors: &[u32], v: u32| {
            let mut around: Vec<u32> = g.neighbors(v).iter().map(|w| colors[*w as usize]).collect();
            around.sort_unstable();
            (colors[v as usize], around)
        };
        let sigs_a: Vec<_> = (0..a.n_vertices() as u32)
            .map(|v| signature(a, &colors_a, v))
            .collect();
        let sigs_b: Vec<_> = (0..b.n_vertices() as u32)
            .map(|v| signature(b, &colors_b, v))
            .collect();
        for sig in sigs_a.iter().chain(sigs_b.iter()) {
            let next = palette.len() as u32;
            palette.entry(sig.clone()).or_insert(next);
        }
        // Colours are assigned in signature order, so both graphs share one palette.
        let new_a: Vec<u32> = sigs_a
            .iter()
            .map(|s| palette.get(s).copied().unwrap_or(0))
            .collect();
        let new_b: Vec<u32> = sigs_b
            .iter()
            .map(|s| palette.get(s).copied().unwrap_or(0))
            .collect();
        let classes = palette.len();
        colors_a = new_a;
        colors_b = new_b;
        if classes <= n_classes {
            return (colors_a, colors_b);
        }
        n_classes = classes;
    }
    (colors_a, colors_b)
}

fn count_classes(a: &[u32], b: &[u32]) -> usize {
    let mut all: Vec<u32> = a.iter().chain(b.iter()).copied().collect();
    all.sort_unstable();
    all.dedup();
    all.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cycle(n: u32) -> Graph {
        Graph::from_edges(n as usize, (0..n).map(|i| (i, (i + 1) % n)))
    }

    #[test]
    fn moments_match_the_spectrum() {
        let g = cycle(7);
        let moments = g.walk_moments(6, u64::MAX).expect("within budget");
        let spectrum = g.spectrum();
        for (k, m) in moments.iter().enumerate() {
            let from_eigen: f64 = spectrum.iter().map(|l| l.powi(k as i32 + 1)).sum();
            assert!(
                (from_eigen - *m as f64).abs() < 1e-6,
                "k={} {} {}",
                k + 1,
                from_eigen,
                m
            );
        }
        assert_eq!(moments[1], 14);
        assert_eq!(g.walk_moments_transitive(6, u64::MAX), Some(moments));
    }

    #[test]
    fn distance_profiles_tell_tori_apart() {
        let torus = |a: u32, b: u32| {
            Graph::from_edges(
                (a * b) as usize,
                (0..a * b).flat_map(|r| {
                    let (i, j) = (r / b, r % b);
                    [(r, i * b + (j + 1) % b), (r, ((i + 1) % a) * b + j)]
                }),
            )
        };
        // Both 4-regular with 200 edges and no short cycles that tell them apart.
        let (square, long) = (torus(10, 10), torus(20, 5));
        assert_eq!(square.distance_profile(0).map(|p| p.len()), Some(11));
        assert_ne!(square.distance_profile(0), long.distance_profile(0));
        let two = Graph::from_edges(4, [(0, 1), (2, 3)]);
        assert_eq!(two.distance_profile(0), None);
    }

    #[test]
    fn budget_stops_dense_graphs() {
        let n = 64u32;
        let complete =
            Graph::from_edges(n as usize, (0..n).flat_map(|a| (0..a).map(move |b| (a, b))));
        assert!(complete.walk_moments(8, 10_000).is_none());
    }

    #[test]
    fn colours_split_a_path_by_distance_to_the_ends() {
        let path = Graph::from_edges(5, (0..4).map(|i| (i, i + 1)));
        let (a, b) = refine_colors(&path, &path);
        assert_eq!(a, b);
        assert_eq!(a[0], a[4]);
        assert_eq!(a[1], a[3]);
        assert_ne!(a[0], a[2]);
        assert_ne!(a[1], a[2]);
    }
}
