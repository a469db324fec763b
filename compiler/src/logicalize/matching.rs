//! Matching one communication graph against the pattern library: takes a [`Graph`] over
//! the active ranks and gives the matched [`Topology`] with the rank → canonical-rank map,
//! and every rejected candidate with the stage that rejected it.
//!
//! The method is the seed's (Subhlok and Xu, "Automatic Construction of Coordinated
//! Performance Skeletons", NSF NGS 2008, slide "Logicalization"): matching against a known
//! topology is graph isomorphism, for which no polynomial algorithm is known, so cheap
//! necessary conditions run first and the exact test runs only on the survivors:
//!
//! 1. node and edge counts (and connectivity: every pattern is connected);
//! 2. invariants: the degree histogram, then the adjacency spectrum. For `n ≤`
//!    [`DENSE_SPECTRUM_MAX_N`] the full spectrum (nalgebra `SymmetricEigen`) is compared
//!    with a tolerance; above it a dense O(n³) decomposition is too slow (4096 ranks), so
//!    the first [`N_MOMENTS`] spectral moments `tr(A^k) = Σ λ^k` are compared instead:
//!    they are closed-walk counts, computed exactly from sparse walks;
//!    For tori, hypercubes and complete graphs (the same from every rank) the
//!    breadth-first layer sizes from one rank are compared too: moments only see short
//!    cycles, so `torus(64, 64)` and `torus(128, 32)` agree on them, not on distances;
//! 3. the exact test, which also yields the map. The canonical numbering is tried first
//!    (the identity map, in every dimension order of a grid), right after the degree
//!    test since it is an O(E) proof: when it fits, the ranks are already numbered as
//!    `MPI_Cart_create` numbers them and that map is kept, and later candidates are only
//!    listed. Otherwise,
//!    for `n ≤` [`VF2_MAX_N`] petgraph's VF2 finds a map; for larger graphs VF2 is slow on
//!    big symmetric graphs, so a guided search assigns coordinates in breadth-first order
//!    (each next rank is the one with the most placed neighbours, its image must be a
//!    free neighbour of its placed neighbours' images with the same colour under colour
//!    refinement), backtracking within a step budget. Every map is verified edge by edge.

use petgraph::algo::subgraph_isomorphisms_iter;
use petgraph::graph::UnGraph;
use serde::Serialize;

use super::graph::{refine_colors, Graph};
use super::patterns::{candidates, Topology};

/// Up to this many ranks the full adjacency spectrum is compared.
pub const DENSE_SPECTRUM_MAX_N: usize = 128;
/// Spectral moments compared above [`DENSE_SPECTRUM_MAX_N`].
pub const N_MOMENTS: usize = 8;
/// Up to this many ranks petgraph's VF2 is the exact test.
pub const VF2_MAX_N: usize = 64;
/// Adjacency visits allowed for computing the moments of one graph.
const MOMENT_BUDGET: u64 = 10_000_000;
/// Relative tolerance on eigenvalues.
const SPECTRUM_TOLERANCE: f64 = 1e-6;

/// The stage of the seed's method at which a candidate was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Counts,
    Degrees,
    Spectrum,
    Distances,
    Isomorphism,
}

impl Stage {
    pub fn label(self) -> &'static str {
        match self {
            Stage::Counts => "node/edge counts",
            Stage::Degrees => "degree sequence",
            Stage::Spectrum => "spectrum",
            Stage::Distances => "distance profile",
            Stage::Isomorphism => "isomorphism",
        }
    }
}

/// A candidate that did not become the match, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rejection {
    pub candidate: String,
    pub stage: Stage,
    pub reason: String,
}

/// How the rank → coordinate map was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MapMethod {
    /// Ranks are already in canonical (row-major / heap) order.
    Identity,
    /// petgraph's VF2.
    Vf2,
    /// The guided breadth-first coordinate assignment.
    Guided,
}

/// A successful match of a graph over `n` vertices.
#[derive(Clone, Debug, PartialEq)]
pub struct Found {
    pub topology: Topology,
    /// `map[v]` is the canonical rank of observed vertex `v` in `topology`.
    pub map: Vec<u32>,
    pub method: MapMethod,
}

/// The outcome of matching one graph against the whole library.
#[derive(Clone, Debug, PartialEq)]
pub struct MatchOutcome {
    pub found: Option<Found>,
    pub rejected: Vec<Rejection>,
    /// Facts about the test itself (e.g. a skipped stage), for the report.
    pub notes: Vec<String>,
}

/// Matches `observed` (connected or not) against every candidate of the library.
pub fn match_graph(observed: &Graph) -> MatchOutcome {
    let n = observed.n_vertices();
    let mut outcome = MatchOutcome {
        found: None,
        rejected: Vec::new(),
        notes: Vec::new(),
    };
    let Ok(n_ranks) = u32::try_from(n) else {
        return outcome;
    };
    let n_components = observed.components().len();
    let degrees = observed.degree_histogram();
    let mut observed_signature: Option<Option<Signature>> = None;
    let mut observed_profile: Option<Option<Vec<u32>>> = None;
    let mut survivors: Vec<(Topology, Graph)> = Vec::new();
    let reject = |outcome: &mut MatchOutcome, t: &Topology, stage, reason: String| {
        outcome.rejected.push(Rejection {
            candidate: t.name(),
            stage,
            reason,
        });
    };

    for topology in candidates(n_ranks) {
        let expected_edges = topology.n_edges(n_ranks);
        if expected_edges != observed.n_edges() as u64 {
            let reason = format!("{} edges, observed {}", expected_edges, observed.n_edges());
            reject(&mut outcome, &topology, Stage::Counts, reason);
            continue;
        }
        if n_components != 1 {
            let reason = format!("observed graph has {n_components} components");
            reject(&mut outcome, &topology, Stage::Counts, reason);
            continue;
        }
        let graph = topology.graph(n_ranks);
        let cand_degrees = graph.degree_histogram();
        if cand_degrees != degrees {
            let reason = format!(
                "degrees {}, observed {}",
                histogram(&cand_degrees),
                histogram(&degrees)
            );
            reject(&mut outcome, &topology, Stage::Degrees, reason);
            continue;
        }
        // The canonical numbering is an O(E) proof of isomorphism: check it before the
        // spectrum, and once it has matched only name the later candidates.
        if let Some(found) = &outcome.found {
            let reason = format!(
                "not tried: {} fits the rank numbering",
                found.topology.name()
            );
            reject(&mut outcome, &topology, Stage::Isomorphism, reason);
            continue;
        }
        let canonical = topology
            .orderings()
            .into_iter()
            .find(|o| o.edges(n_ranks).all(|(a, b)| observed.has_edge(a, b)));
        if let Some(ordering) = canonical {
            outcome.found = Some(Found {
                topology: ordering,
                map: (0..n_ranks).collect(),
                method: MapMethod::Identity,
            });
            continue;
        }
        let observed_sig = observed_signature.get_or_insert_with(|| signature(observed));
        match (
            observed_sig.as_ref(),
            candidate_signature(&topology, &graph),
        ) {
            (Some(a), Some(b)) => {
                if let Some(reason) = a.differs(&b) {
                    reject(&mut outcome, &topology, Stage::Spectrum, reason);
                    continue;
                }
            }
            _ => {
                let note = "spectral stage skipped: graph too dense for sparse moments".to_string();
                if !outcome.notes.contains(&note) {
                    outcome.notes.push(note);
                }
            }
        }
        // Closed walks only see cycles up to their length: torus(64, 64) and
        // torus(128, 32) agree on them. A vertex-transitive candidate has the same
        // breadth-first layers from every rank, so the observed layers from one rank must
        // match them; this global invariant costs O(E).
        if is_vertex_transitive(&topology) {
            let observed_layers =
                observed_profile.get_or_insert_with(|| observed.distance_profile(0));
            let layers = graph.distance_profile(0);
            if *observed_layers != layers {
                let count =
                    |p: &Option<Vec<u32>>| p.as_ref().map_or(0, |p| p.len().saturating_sub(1));
                let reason = format!(
                    "eccentricity {}, observed {} from rank 0 (or other layer sizes)",
                    count(&layers),
                    count(observed_layers)
                );
                reject(&mut outcome, &topology, Stage::Distances, reason);
                continue;
            }
        }
        survivors.push((topology, graph));
    }

    // Stage 3 for the survivors: an exact search, in library order, unless the canonical
    // numbering matched (it is preferred, as MPI_Cart_create's order).
    for (topology, graph) in &survivors {
        if let Some(found) = &outcome.found {
            if found.topology != *topology && !topology.orderings().contains(&found.topology) {
                let reason = format!("isomorphic or not, {} was preferred", found.topology.name());
                reject(&mut outcome, topology, Stage::Isomorphism, reason);
            }
            continue;
        }
        let result = if n <= VF2_MAX_N {
            vf2(observed, graph).map_or(Search::NotIsomorphic, Search::Found)
        } else {
            guided_search(observed, graph, 64 * n as u64 + 1_000_000)
        };
        match result {
            Search::Found(map) if verify(observed, graph, &map) => {
                outcome.found = Some(Found {
                    topology: topology.clone(),
                    map,
                    method: if n <= VF2_MAX_N {
                        MapMethod::Vf2
                    } else {
                        MapMethod::Guided
                    },
                });
            }
            Search::Found(_) | Search::NotIsomorphic => {
                reject(
                    &mut outcome,
                    topology,
                    Stage::Isomorphism,
                    "not isomorphic".to_string(),
                );
            }
            Search::Budget => {
                let reason = "undecided: search budget exhausted".to_string();
                reject(&mut outcome, topology, Stage::Isomorphism, reason);
            }
        }
    }
    outcome
}

fn histogram(hist: &std::collections::BTreeMap<usize, usize>) -> String {
    let parts: Vec<String> = hist.iter().map(|(d, c)| format!("{c}×{d}")).collect();
    format!("[{}]", parts.join(" "))
}

/// The spectral invariant of one graph: the full spectrum when small, moments otherwise.
enum Signature {
    Spectrum(Vec<f64>),
    Moments(Vec<u128>),
}

/// A candidate's signature; tori, hypercubes and complete graphs look the same from every
/// rank, so their closed walks are counted at one rank and multiplied.
fn candidate_signature(topology: &Topology, graph: &Graph) -> Option<Signature> {
    if is_vertex_transitive(topology) && graph.n_vertices() > DENSE_SPECTRUM_MAX_N {
        graph
            .walk_moments_transitive(N_MOMENTS, MOMENT_BUDGET)
            .map(Signature::Moments)
    } else {
        signature(graph)
    }
}

/// Tori (every dimension periodic or of size 2), hypercubes and complete graphs look the
/// same from every rank.
fn is_vertex_transitive(topology: &Topology) -> bool {
    match topology {
        Topology::Grid { dims, periodic } => dims.iter().zip(periodic).all(|(d, p)| *p || *d <= 2),
        Topology::Hypercube { .. } | Topology::Complete => true,
        _ => false,
    }
}

fn signature(graph: &Graph) -> Option<Signature> {
    if graph.n_vertices() <= DENSE_SPECTRUM_MAX_N {
        Some(Signature::Spectrum(graph.spectrum()))
    } else {
        graph
            .walk_moments(N_MOMENTS, MOMENT_BUDGET)
            .map(Signature::Moments)
    }
}

impl Signature {
    fn differs(&self, candidate: &Signature) -> Option<String> {
        match (self, candidate) {
            (Signature::Spectrum(a), Signature::Spectrum(b)) => {
                let far = a.iter().zip(b).position(|(x, y)| {
                    (x - y).abs() > SPECTRUM_TOLERANCE * x.abs().max(y.abs()).max(1.0)
                });
                far.map(|i| {
                    format!(
                        "eigenvalue {} is {:.6}, observed {:.6}",
                        i + 1,
                        b.get(i).copied().unwrap_or(f64::NAN),
                        a.get(i).copied().unwrap_or(f64::NAN)
                    )
                })
            }
            (Signature::Moments(a), Signature::Moments(b)) => {
                a.iter().zip(b).position(|(x, y)| x != y).map(|i| {
                    format!(
                        "closed {}-walks (tr A^{}) {}, observed {}",
                        i + 1,
                        i + 1,
                        b.get(i).copied().unwrap_or(0),
                        a.get(i).copied().unwrap_or(0)
                    )
                })
            }
            _ => None,
        }
    }
}

/// True when `map` is a bijection sending every observed edge onto a candidate edge (with
/// equal edge counts, that makes it an isomorphism).
pub fn verify(observed: &Graph, candidate: &Graph, map: &[u32]) -> bool {
    let n = observed.n_vertices();
    if map.len() != n || candidate.n_vertices() != n || observed.n_edges() != candidate.n_edges() {
        return false;
    }
    let mut seen = vec![false; n];
    for &m in map {
        match seen.get_mut(m as usize) {
            Some(slot) if !*slot => *slot = true,
            _ => return false,
        }
    }
    observed
        .edges()
        .all(|(a, b)| candidate.has_edge(map[a as usize], map[b as usize]))
}

enum Search {
    Found(Vec<u32>),
    NotIsomorphic,
    Budget,
}

/// petgraph's VF2 on the two graphs, vertices labelled with their refined colours.
fn vf2(observed: &Graph, candidate: &Graph) -> Option<Vec<u32>> {
    let (colors_o, colors_c) = refine_colors(observed, candidate);
    let to_petgraph = |g: &Graph, colors: &[u32]| {
        let mut pg = UnGraph::<u32, ()>::with_capacity(g.n_vertices(), g.n_edges());
        for c in colors {
            pg.add_node(*c);
        }
        for (a, b) in g.edges() {
            pg.add_edge(a.into(), b.into(), ());
        }
        pg
    };
    let (g0, g1) = (
        to_petgraph(observed, &colors_o),
        to_petgraph(candidate, &colors_c),
    );
    let (g0, g1) = (&g0, &g1);
    let mut node_match = |a: &u32, b: &u32| a == b;
    let mut edge_match = |_: &(), _: &()| true;
    let mut maps = subgraph_isomorphisms_iter(&g0, &g1, &mut node_match, &mut edge_match)?;
    maps.next()
        .map(|m| m.into_iter().map(|v| v as u32).collect())
}

/// The guided breadth-first search described in the module documentation.
fn guided_search(observed: &Graph, candidate: &Graph, budget: u64) -> Search {
    let n = observed.n_vertices();
    if n == 0 || candidate.n_vertices() != n {
        return Search::NotIsomorphic;
    }
    let (colors_o, colors_c) = refine_colors(observed, candidate);
    let mut hist_o = colors_o.clone();
    let mut hist_c = colors_c.clone();
    hist_o.sort_unstable();
    hist_c.sort_unstable();
    if hist_o != hist_c {
        return Search::NotIsomorphic;
    }
    let order = search_order(observed, &colors_o, &hist_o);
    let mut position = vec![usize::MAX; n];
    for (i, v) in order.iter().enumerate() {
        position[*v as usize] = i;
    }
    const FREE: u32 = u32::MAX;
    let mut map = vec![FREE; n];
    let mut used = vec![false; n];
    // For each candidate vertex, how many of its neighbours are images already.
    let mut placed_neighbors = vec![0u32; n];
    let mut assigned: Vec<Option<u32>> = vec![None; n];
    let mut frames: Vec<(Vec<u32>, usize)> = Vec::with_capacity(n);
    let mut steps: u64 = 0;

    let options = |pos: usize, map: &[u32], used: &[bool], placed: &[u32]| -> Vec<u32> {
        let u = order[pos];
        let color = colors_o[u as usize];
        let earlier: Vec<u32> = observed
            .neighbors(u)
            .iter()
            .copied()
            .filter(|w| position[*w as usize] < pos)
            .collect();
        let pool: Vec<u32> = match earlier.first() {
            None => (0..n as u32)
                .filter(|w| colors_c[*w as usize] == color)
                .collect(),
            Some(anchor) => candidate.neighbors(map[*anchor as usize]).to_vec(),
        };
        pool.into_iter()
            .filter(|w| {
                let w_idx = *w as usize;
                !used[w_idx]
                    && colors_c[w_idx] == color
                    && placed[w_idx] as usize == earlier.len()
                    // The pool is the anchor's neighbourhood: skip the anchor itself.
                    && earlier
                        .iter()
                        .skip(1)
                        .all(|q| candidate.has_edge(map[*q as usize], *w))
            })
            .collect()
    };

    frames.push((options(0, &map, &used, &placed_neighbors), 0));
    while let Some(pos) = frames.len().checked_sub(1) {
        if let Some(prev) = assigned[pos].take() {
            map[order[pos] as usize] = FREE;
            used[prev as usize] = false;
            for &x in candidate.neighbors(prev) {
                placed_neighbors[x as usize] -= 1;
            }
        }
        let next = {
            let (list, idx) = &mut frames[pos];
            let next = list.get(*idx).copied();
            *idx += 1;
            next
        };
        let Some(w) = next else {
            frames.pop();
            continue;
        };
        steps += 1;
        if steps > budget {
            return Search::Budget;
        }
        map[order[pos] as usize] = w;
        used[w as usize] = true;
        for &x in candidate.neighbors(w) {
            placed_neighbors[x as usize] += 1;
        }
        assigned[pos] = Some(w);
        if pos + 1 == n {
            return Search::Found(map);
        }
        let list = options(pos + 1, &map, &used, &placed_neighbors);
        frames.push((list, 0));
    }
    Search::NotIsomorphic
}

/// Search order: start at the lowest vertex of the rarest colour, then repeatedly take the
/// vertex with the most already-ordered neighbours (ties: the lowest vertex), so that each
/// new vertex is pinned by as many placed neighbours as possible.
fn search_order(g: &Graph, colors: &[u32], sorted_colors: &[u32]) -> Vec<u32> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let n = g.n_vertices();
    let class_size = |c: u32| {
        let lo = sorted_colors.partition_point(|x| *x < c);
        let hi = sorted_colors.partition_point(|x| *x <= c);
        hi - lo
    };
    let start = (0..n as u32)
        .min_by_key(|v| (class_size(colors[*v as usize]), *v))
        .unwrap_or(0);
    let mut ordered = vec![false; n];
    let mut count = vec![0u32; n];
    let mut order = Vec::with_capacity(n);
    let mut heap = BinaryHeap::new();
    heap.push((0u32, Reverse(start)));
    let mut next_unreached = 0u32;
    while order.len() < n {
        let v = match heap.pop() {
            Some((c, Reverse(v))) => {
                if ordered[v as usize] || c != count[v as usize] {
                    continue;
                }
                v
            }
            None => {
                // A disconnected graph: continue from the lowest vertex not yet ordered.
                while ordered
                    .get(next_unreached as usize)
                    .copied()
                    .unwrap_or(false)
                {
                    next_unreached += 1;
                }
                next_unreached
            }
        };
        ordered[v as usize] = true;
        order.push(v);
        for &w in g.neighbors(v) {
            if !ordered[w as usize] {
                count[w as usize] += 1;
                heap.push((count[w as usize], Reverse(w)));
            }
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn permuted(g: &Graph, seed: u64) -> (Graph, Vec<u32>) {
        let n = g.n_vertices();
        let mut perm: Vec<u32> = (0..n as u32).collect();
        let mut state = seed;
        for i in (1..n).rev() {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let j = (state >> 33) as usize % (i + 1);
            perm.swap(i, j);
        }
        let edges: Vec<(u32, u32)> = g
            .edges()
            .map(|(a, b)| (perm[a as usize], perm[b as usize]))
            .collect();
        (Graph::from_edges(n, edges), perm)
    }

    #[test]
    fn guided_search_finds_tori_and_trees_under_permutation() {
        for topology in [
            Topology::Grid {
                dims: vec![8, 6, 4],
                periodic: vec![true, true, true],
            },
            Topology::Grid {
                dims: vec![10, 7],
                periodic: vec![false, false],
            },
            Topology::Grid {
                dims: vec![12, 10],
                periodic: vec![true, false],
            },
            Topology::Tree { arity: 3 },
            Topology::BinomialTree,
            Topology::Hypercube { dim: 7 },
        ] {
            let n = match &topology {
                Topology::Grid { dims, .. } => dims.iter().product(),
                Topology::Hypercube { dim } => 1 << dim,
                _ => 200,
            };
            let canonical = topology.graph(n);
            let (observed, _) = permuted(&canonical, 7);
            match guided_search(&observed, &canonical, 10_000_000) {
                Search::Found(map) => {
                    assert!(verify(&observed, &canonical, &map), "{}", topology.name())
                }
                _ => panic!("no map for {}", topology.name()),
            }
        }
    }

    #[test]
    fn vf2_and_guided_agree_on_non_isomorphic_pairs() {
        let ring = Topology::Grid {
            dims: vec![12],
            periodic: vec![true],
        }
        .graph(12);
        let torus = Topology::Grid {
            dims: vec![4, 3],
            periodic: vec![true, true],
        }
        .graph(12);
        assert!(vf2(&ring, &torus).is_none());
        assert!(matches!(
            guided_search(&ring, &torus, 1_000_000),
            Search::NotIsomorphic
        ));
    }

    #[test]
    fn guided_search_stops_at_its_budget() {
        let torus = Topology::Grid {
            dims: vec![8, 8, 4],
            periodic: vec![true, true, true],
        }
        .graph(256);
        let (observed, _) = permuted(&torus, 3);
        assert!(matches!(
            guided_search(&observed, &torus, 10),
            Search::Budget
        ));
    }

    #[test]
    fn rejections_name_their_stage() {
        // A 6 × 6 torus: the ring fails on edges, the 9 × 4 torus on the spectrum or
        // degrees, and the 6 × 6 torus matches in canonical numbering.
        let torus = Topology::Grid {
            dims: vec![6, 6],
            periodic: vec![true, true],
        }
        .graph(36);
        let outcome = match_graph(&torus);
        assert_eq!(
            outcome.found.map(|f| f.topology.name()),
            Some("torus(6, 6)".to_string())
        );
        let stage_of = |name: &str| {
            outcome
                .rejected
                .iter()
                .find(|r| r.candidate == name)
                .map(|r| r.stage)
        };
        assert_eq!(stage_of("ring"), Some(Stage::Counts));
        assert_eq!(stage_of("torus(12, 3)"), Some(Stage::Spectrum));
    }

    #[test]
    fn identity_preferred_among_isomorphic_candidates() {
        // torus(4, 4) and hypercube(4) are the same graph; canonical numbering decides.
        let cube = Topology::Hypercube { dim: 4 }.graph(16);
        let outcome = match_graph(&cube);
        let found = outcome.found.expect("a match");
        assert_eq!(found.topology, Topology::Hypercube { dim: 4 });
        assert_eq!(found.method, MapMethod::Identity);
        let torus = Topology::Grid {
            dims: vec![4, 4],
            periodic: vec![true, true],
        }
        .graph(16);
        let found = match_graph(&torus).found.expect("a match");
        assert_eq!(found.topology.name(), "torus(4, 4)");
    }
}
