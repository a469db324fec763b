//! Logicalization: takes a [`CommMatrix`] (rank × rank point-to-point traffic) and gives a
//! [`Logicalization`]: the dominant logical topologies with per-rank coordinates and the
//! relation (direction/offset) of every message edge, the traffic they do not explain,
//! and every rejected candidate.
//!
//! A skeleton that says "send 40 KiB east" instead of "rank 5 sends to rank 6" can be
//! read, edited and run at another rank count; this pass finds "east".
//!
//! The steps:
//!
//! 1. **Thresholding.** Point-to-point traffic is summed per unordered rank pair. Pairs
//!    carrying less than `threshold` × the heaviest pair's bytes (messages when no byte
//!    was sent) are set aside: they are usually setup or load-balancing exchanges outside
//!    the main pattern. What was set aside is reported (messages, bytes, time, and their
//!    share), since it costs the skeleton accuracy.
//! 2. **Matching** the remaining graph against the pattern library ([`patterns`]) with the
//!    seed's filter-then-verify method ([`matching`]). Ranks without remaining traffic
//!    are left out of the graph and reported as idle.
//! 3. **Splitting mixed patterns** (beyond the seed, which did not do subgraph
//!    isomorphism). When the whole graph matches nothing, it is split and each part is
//!    matched on its own: first by message size (a halo exchange of 40 KiB messages and a
//!    reduction tree of 8-byte messages fall into different classes), then into connected
//!    components, then by peeling off the library pattern in canonical rank numbering that
//!    is fully present and carries the most traffic (a grid plus a tree on the same
//!    message sizes). Whatever no part explains is reported with its explicit peers.
//!
//! Collectives are kept apart: they are not part of any point-to-point topology.

mod graph;
pub mod matching;
pub mod matrix;
pub mod patterns;
mod report;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

pub use matching::{MapMethod, Rejection, Stage};
pub use matrix::{CommMatrix, MatrixError, Traffic};
pub use patterns::{Relation, Topology};

use graph::Graph;

/// The default threshold: pairs below 1 % of the heaviest pair are set aside.
pub const DEFAULT_THRESHOLD: f64 = 0.01;

/// Knobs of the pass.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Options {
    /// Pairs carrying less than this fraction of the heaviest pair are set aside.
    pub threshold: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            threshold: DEFAULT_THRESHOLD,
        }
    }
}

/// The result of the pass: what the skeletonizer needs and what the user is told.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Logicalization {
    pub n_ranks: u32,
    pub threshold: f64,
    /// All point-to-point traffic between distinct ranks.
    pub total: Traffic,
    /// Matched patterns, the one explaining most bytes first.
    pub patterns: Vec<PatternMatch>,
    /// Traffic below the threshold.
    pub set_aside: Share,
    /// Traffic above the threshold that no pattern explains.
    pub unexplained: Share,
    /// The edges behind `unexplained`, for explicit peers in the skeleton.
    pub unexplained_edges: Vec<EdgeTraffic>,
    /// For each rank with unexplained traffic, the ranks it sends to.
    pub explicit_peers: BTreeMap<u32, Vec<u32>>,
    /// Ranks with no point-to-point traffic above the threshold.
    pub idle_ranks: Vec<u32>,
    /// Every matching attempt (the whole graph, then its parts) with rejected candidates.
    pub attempts: Vec<Attempt>,
    pub collectives: BTreeMap<String, Traffic>,
    pub self_traffic: Traffic,
    /// Things the user must know: nothing matched, ranks idle, much traffic unexplained.
    pub warnings: Vec<String>,
}

/// A share of the point-to-point traffic; percentages are of [`Logicalization::total`],
/// rounded to 0.01 %.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Share {
    pub edges: usize,
    pub traffic: Traffic,
    pub messages_pct: f64,
    pub bytes_pct: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_pct: Option<f64>,
}

/// Traffic on one directed edge.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct EdgeTraffic {
    pub src: u32,
    pub dst: u32,
    pub traffic: Traffic,
}

/// Which way the traffic of a matched pattern flows (its directed form).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Flow {
    /// Every edge carries traffic both ways (halo exchanges).
    Both,
    /// Only towards higher coordinates / down the tree (pipelines, broadcasts, shifts).
    Forward,
    /// Only towards lower coordinates / up the tree (reductions, gathers).
    Backward,
    /// Some edges one way, some the other.
    Mixed,
}

/// One matched pattern.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PatternMatch {
    pub topology: Topology,
    /// The DSL spelling, e.g. `torus(4, 4, 4)`.
    pub name: String,
    pub flow: Flow,
    /// How the rank → coordinate map was found.
    pub map_method: MapMethod,
    /// Which part of the traffic was matched (`all traffic`, a message-size class, ...).
    pub part: String,
    /// Coordinates of each rank in the pattern (ranks outside it are absent).
    pub coords: BTreeMap<u32, Vec<u32>>,
    /// Every directed edge of the pattern with its relation and traffic.
    pub edges: Vec<LogicalEdge>,
    pub share: Share,
}

/// A message edge expressed in the topology.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LogicalEdge {
    pub src: u32,
    pub dst: u32,
    pub relation: Relation,
    pub traffic: Traffic,
}

/// One graph given to the matcher.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Attempt {
    pub part: String,
    pub n_ranks: usize,
    pub n_edges: usize,
    /// The matched topology's name, if any.
    pub matched: Option<String>,
    pub rejected: Vec<Rejection>,
    pub notes: Vec<String>,
}

/// Runs the pass; never fails: an unusual matrix gives a report saying so.
pub fn logicalize(matrix: &CommMatrix, options: &Options) -> Logicalization {
    let total = matrix.p2p_total();
    let threshold = if options.threshold.is_finite() {
        options.threshold.clamp(0.0, 1.0)
    } else {
        DEFAULT_THRESHOLD
    };
    let pairs = pair_traffic(matrix);
    let use_bytes = pairs.values().any(|t| t.bytes > 0);
    let weight = |t: &Traffic| if use_bytes { t.bytes } else { t.messages };
    let heaviest = pairs.values().map(weight).max().unwrap_or(0);
    let cut = threshold * heaviest as f64;
    let kept: BTreeSet<(u32, u32)> = pairs
        .iter()
        .filter(|(_, t)| weight(t) as f64 >= cut && weight(t) > 0)
        .map(|(p, _)| *p)
        .collect();

    let mut report = Logicalization {
        n_ranks: matrix.n_ranks,
        threshold,
        total,
        patterns: Vec::new(),
        set_aside: Share::default(),
        unexplained: Share::default(),
        unexplained_edges: Vec::new(),
        explicit_peers: BTreeMap::new(),
        idle_ranks: Vec::new(),
        attempts: Vec::new(),
        collectives: matrix.collectives.clone(),
        self_traffic: matrix.self_traffic,
        warnings: Vec::new(),
    };
    let set_aside: Vec<(u32, u32)> = pairs
        .keys()
        .filter(|p| !kept.contains(p))
        .copied()
        .collect();
    report.set_aside = share(matrix, &total, &set_aside);

    let mut remaining = kept.clone();
    decompose(matrix, &mut remaining, &mut report);

    let active: BTreeSet<u32> = kept.iter().flat_map(|(a, b)| [*a, *b]).collect();
    report.idle_ranks = (0..matrix.n_ranks)
        .filter(|r| !active.contains(r))
        .collect();
    let unexplained: Vec<(u32, u32)> = remaining.iter().copied().collect();
    report.unexplained = share(matrix, &total, &unexplained);
    for &(a, b) in &unexplained {
        for (src, dst) in [(a, b), (b, a)] {
            if let Some(traffic) = matrix.p2p.get(&(src, dst)) {
                report.unexplained_edges.push(EdgeTraffic {
                    src,
                    dst,
                    traffic: *traffic,
                });
                report.explicit_peers.entry(src).or_default().push(dst);
            }
        }
    }
    report
        .patterns
        .sort_by(|a, b| b.share.traffic.bytes.cmp(&a.share.traffic.bytes));
    warn(&mut report);
    report
}

fn warn(report: &mut Logicalization) {
    if report.n_ranks == 0 || report.total.messages == 0 {
        report
            .warnings
            .push("no point-to-point traffic: there is no topology to find".to_string());
        return;
    }
    if report.patterns.is_empty() {
        report.warnings.push(
            "no pattern of the library matches the communication graph; \
             the skeleton will use explicit peers"
                .to_string(),
        );
    } else if !report.unexplained_edges.is_empty() {
        report.warnings.push(format!(
            "{} edges ({:.2} % of bytes) are not explained by the matched topology; \
             the skeleton will use explicit peers for them",
            report.unexplained.edges, report.unexplained.bytes_pct
        ));
    }
    if !report.idle_ranks.is_empty() && report.n_ranks > 1 {
        report.warnings.push(format!(
            "{} of {} ranks have no point-to-point traffic above the threshold",
            report.idle_ranks.len(),
            report.n_ranks
        ));
    }
}

/// Traffic per unordered pair `(low, high)`, both directions summed.
fn pair_traffic(matrix: &CommMatrix) -> BTreeMap<(u32, u32), Traffic> {
    let mut pairs: BTreeMap<(u32, u32), Traffic> = BTreeMap::new();
    for (&(src, dst), traffic) in &matrix.p2p {
        let key = (src.min(dst), src.max(dst));
        match pairs.get_mut(&key) {
            Some(t) => t.add(traffic),
            None => {
                pairs.insert(key, *traffic);
            }
        }
    }
    pairs
}

/// The share of `total` carried by `pairs` (both directions).
fn share(matrix: &CommMatrix, total: &Traffic, pairs: &[(u32, u32)]) -> Share {
    let mut traffic = Traffic {
        time_s: total.time_s.map(|_| 0.0),
        ..Traffic::default()
    };
    let mut edges = 0;
    for &(a, b) in pairs {
        for key in [(a, b), (b, a)] {
            if let Some(t) = matrix.p2p.get(&key) {
                traffic.add(t);
                edges += 1;
            }
        }
    }
    let pct = |part: f64, whole: f64| {
        if whole > 0.0 {
            (part / whole * 1e4).round() / 1e2
        } else {
            0.0
        }
    };
    Share {
        edges,
        traffic,
        messages_pct: pct(traffic.messages as f64, total.messages as f64),
        bytes_pct: pct(traffic.bytes as f64, total.bytes as f64),
        time_pct: match (traffic.time_s, total.time_s) {
            (Some(t), Some(all)) => Some(pct(t, all)),
            _ => None,
        },
    }
}

/// Matches `remaining` as a whole, then its parts; explained pairs are removed from it.
fn decompose(
    matrix: &CommMatrix,
    remaining: &mut BTreeSet<(u32, u32)>,
    report: &mut Logicalization,
) {
    if remaining.is_empty() {
        return;
    }
    if try_part(matrix, "all traffic above the threshold", remaining, report) {
        return;
    }
    let pairs = pair_traffic(matrix);
    let classes = size_classes(&pairs, remaining);
    if classes.len() > 1 {
        for (label, class) in classes {
            let mut part = class.clone();
            if try_part(matrix, &label, &mut part, report) {
                remaining.retain(|p| !class.contains(p));
            }
        }
    }
    let components = pair_components(remaining);
    if components.len() > 1 {
        for (idx, component) in components.into_iter().enumerate() {
            let mut part = component.clone();
            let label = format!("connected component {}", idx + 1);
            if try_part(matrix, &label, &mut part, report) {
                remaining.retain(|p| !component.contains(p));
            }
        }
    }
    if !remaining.is_empty() {
        peel(matrix, remaining, report);
    }
}

/// Splits pairs by mean message size: sizes are sorted and cut where two neighbours differ
/// by more than a factor of 8, so the x and y faces of one stencil stay together.
fn size_classes(
    pairs: &BTreeMap<(u32, u32), Traffic>,
    remaining: &BTreeSet<(u32, u32)>,
) -> Vec<(String, BTreeSet<(u32, u32)>)> {
    let mut sized: Vec<(f64, (u32, u32))> = remaining
        .iter()
        .filter_map(|p| {
            pairs
                .get(p)
                .map(|t| (t.bytes as f64 / t.messages.max(1) as f64, *p))
        })
        .collect();
    sized.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut classes: Vec<(f64, f64, BTreeSet<(u32, u32)>)> = Vec::new();
    for (size, pair) in sized {
        match classes.last_mut() {
            Some((_, hi, set)) if size <= 8.0 * hi.max(1.0) => {
                *hi = size;
                set.insert(pair);
            }
            _ => classes.push((size, size, BTreeSet::from([pair]))),
        }
    }
    classes
        .into_iter()
        .map(|(lo, hi, set)| (format!("messages of {lo:.0}–{hi:.0} bytes"), set))
        .collect()
}

/// Connected components of a pair set, ordered by their smallest rank.
fn pair_components(pairs: &BTreeSet<(u32, u32)>) -> Vec<BTreeSet<(u32, u32)>> {
    let (ranks, graph) = local_graph(pairs);
    graph
        .components()
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|component| {
            let members: BTreeSet<u32> = component.iter().map(|v| ranks[*v as usize]).collect();
            pairs
                .iter()
                .filter(|(a, _)| members.contains(a))
                .copied()
                .collect()
        })
        .collect()
}

/// The graph of a pair set over its own ranks (vertex `i` is rank `ranks[i]`).
fn local_graph(pairs: &BTreeSet<(u32, u32)>) -> (Vec<u32>, Graph) {
    let ranks: Vec<u32> = pairs
        .iter()
        .flat_map(|(a, b)| [*a, *b])
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let index = |r: u32| ranks.binary_search(&r).map_or(u32::MAX, |i| i as u32);
    let graph = Graph::from_edges(
        ranks.len(),
        pairs.iter().map(|(a, b)| (index(*a), index(*b))),
    );
    (ranks, graph)
}

/// Matches one part; on success records the pattern and empties `part`.
fn try_part(
    matrix: &CommMatrix,
    label: &str,
    part: &mut BTreeSet<(u32, u32)>,
    report: &mut Logicalization,
) -> bool {
    let (ranks, graph) = local_graph(part);
    let outcome = matching::match_graph(&graph);
    report.attempts.push(Attempt {
        part: label.to_string(),
        n_ranks: ranks.len(),
        n_edges: graph.n_edges(),
        matched: outcome.found.as_ref().map(|f| f.topology.name()),
        rejected: outcome.rejected,
        notes: outcome.notes,
    });
    let Some(found) = outcome.found else {
        return false;
    };
    let canonical: BTreeMap<u32, u32> = ranks
        .iter()
        .zip(&found.map)
        .map(|(r, c)| (*r, *c))
        .collect();
    record(
        matrix,
        label,
        &found.topology,
        found.method,
        &canonical,
        part,
        report,
    );
    part.clear();
    true
}

/// Adds a matched pattern over `pairs` with rank → canonical-rank map `canonical`.
fn record(
    matrix: &CommMatrix,
    label: &str,
    topology: &Topology,
    method: MapMethod,
    canonical: &BTreeMap<u32, u32>,
    pairs: &BTreeSet<(u32, u32)>,
    report: &mut Logicalization,
) {
    let n = canonical.len() as u32;
    let coords = canonical
        .iter()
        .map(|(r, c)| (*r, topology.coords(*c)))
        .collect();
    let mut edges = Vec::new();
    for &(a, b) in pairs {
        for (src, dst) in [(a, b), (b, a)] {
            let (Some(traffic), Some(cs), Some(cd)) = (
                matrix.p2p.get(&(src, dst)),
                canonical.get(&src),
                canonical.get(&dst),
            ) else {
                continue;
            };
            edges.push(LogicalEdge {
                src,
                dst,
                relation: topology.relation(n, *cs, *cd),
                traffic: *traffic,
            });
        }
    }
    let pair_list: Vec<(u32, u32)> = pairs.iter().copied().collect();
    report.patterns.push(PatternMatch {
        topology: topology.clone(),
        name: topology.name(),
        flow: flow(&edges, pairs.len()),
        map_method: method,
        part: label.to_string(),
        coords,
        edges,
        share: share(matrix, &report.total, &pair_list),
    });
}

fn flow(edges: &[LogicalEdge], n_pairs: usize) -> Flow {
    if edges.len() == 2 * n_pairs {
        return Flow::Both;
    }
    let directions: BTreeSet<Option<bool>> =
        edges.iter().map(|e| e.relation.is_forward()).collect();
    match directions.into_iter().collect::<Vec<_>>().as_slice() {
        [Some(true)] => Flow::Forward,
        [Some(false)] => Flow::Backward,
        _ => Flow::Mixed,
    }
}

/// Peels library patterns in canonical numbering off `remaining`: the candidate over all
/// ranks whose every edge is present and that carries the most bytes is recorded, and the
/// rest is matched again as a whole. Stops when nothing fits.
fn peel(matrix: &CommMatrix, remaining: &mut BTreeSet<(u32, u32)>, report: &mut Logicalization) {
    const MAX_PEELS: usize = 3;
    const MAX_ORDERINGS: usize = 24;
    let pairs = pair_traffic(matrix);
    let n = matrix.n_ranks;
    for _ in 0..MAX_PEELS {
        let mut best: Option<(u64, Topology, BTreeSet<(u32, u32)>)> = None;
        for topology in patterns::candidates(n)
            .iter()
            .flat_map(|t| t.orderings().into_iter().take(MAX_ORDERINGS))
        {
            if topology.n_edges(n) as usize > remaining.len() {
                continue;
            }
            let covered: BTreeSet<(u32, u32)> = topology.graph(n).edges().collect();
            if !covered.is_subset(remaining) {
                continue;
            }
            let bytes: u64 = covered
                .iter()
                .filter_map(|p| pairs.get(p))
                .map(|t| t.bytes.max(t.messages))
                .sum();
            if best.as_ref().map_or(true, |(b, _, _)| bytes > *b) {
                best = Some((bytes, topology, covered));
            }
        }
        let Some((_, topology, covered)) = best else {
            return;
        };
        let identity: BTreeMap<u32, u32> = (0..n).map(|r| (r, r)).collect();
        record(
            matrix,
            "largest pattern in rank order",
            &topology,
            MapMethod::Identity,
            &identity,
            &covered,
            report,
        );
        remaining.retain(|p| !covered.contains(p));
        if remaining.is_empty() || try_part(matrix, "traffic left after it", remaining, report) {
            return;
        }
    }
}
