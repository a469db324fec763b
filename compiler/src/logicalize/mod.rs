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
//!    below `threshold` × the heaviest pair in messages, in bytes *and* in time (when
//!    measured) are set aside: they are usually setup or load-balancing exchanges outside
//!    the main pattern. Messages count on their own because a tree of small messages is
//!    latency-bound: negligible in bytes, not in time. What was set aside is reported (messages, bytes, time, and their
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
//!
//! The matrix comes from a file ([`matrix`]: CSV or JSON) or from a perfskel trace
//! ([`trace::matrix`]: sends counted at the sender, collectives by operation, missing and
//! incomplete ranks reported).

mod graph;
pub mod matching;
pub mod matrix;
pub mod patterns;
mod report;
mod split;
pub mod trace;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

pub use matching::{MapMethod, Rejection, Stage};
pub use matrix::{CommMatrix, MatrixError, Traffic};
pub use patterns::{Relation, Topology};

/// The default threshold: pairs below 1 % of the heaviest pair (in messages, bytes and
/// time) are set aside.
pub const DEFAULT_THRESHOLD: f64 = 0.01;

/// Knobs of the pass.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Options {
    /// Pairs carrying less than this fraction of the heaviest pair in messages, bytes and
    /// time are set aside.
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
    /// All point-to-point traffic between distinct ranks, and its number of directed edges.
    pub total: Traffic,
    pub n_edges: usize,
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
    /// The grid the application declared over the world (`MPI_Cart_create` in its
    /// order), when a trace says so: set by the caller, not matched (a 2 × 2 grid and a
    /// ring of 4 have the same graph; the application's own grid names it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub declared: Option<Declared>,
}

/// The application's own topology, as the skeleton writes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Declared {
    /// In the skeleton language: `grid(2, 2)`, `grid(4, 2, periodic)`.
    pub topology: String,
    pub dims: Vec<u64>,
    pub periodic: Vec<bool>,
}

impl Logicalization {
    /// Every explained directed edge `(src, dst)` with the index of its pattern in
    /// [`Logicalization::patterns`] and its relation there: what the skeletonizer looks up
    /// to write "send east" instead of "send to rank 6". Unexplained edges are absent (see
    /// [`Logicalization::explicit_peers`]); a pair shared by two patterns maps to the
    /// first.
    pub fn edge_index(&self) -> BTreeMap<(u32, u32), (usize, &Relation)> {
        let mut index = BTreeMap::new();
        for (idx, pattern) in self.patterns.iter().enumerate() {
            for edge in &pattern.edges {
                index
                    .entry((edge.src, edge.dst))
                    .or_insert((idx, &edge.relation));
            }
        }
        index
    }
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

/// A matrix in which every edge of `topology` over `n_ranks` ranks carries `traffic` both
/// ways, rank `r` of the canonical numbering being `relabel[r]` (for tests, benchmarks and
/// demos; `relabel` must be a permutation of `0..n_ranks`, otherwise edges are skipped).
pub fn synthetic_matrix(
    topology: &Topology,
    n_ranks: u32,
    relabel: Option<&[u32]>,
    traffic: Traffic,
) -> CommMatrix {
    let mut matrix = CommMatrix {
        n_ranks,
        ..CommMatrix::default()
    };
    let name = |r: u32| match relabel {
        Some(map) => map.get(r as usize).copied(),
        None => Some(r),
    };
    for (a, b) in topology.graph(n_ranks).edges() {
        if let (Some(a), Some(b)) = (name(a), name(b)) {
            for key in [(a, b), (b, a)] {
                if key.0 != key.1 && key.0 < n_ranks && key.1 < n_ranks {
                    matrix.p2p.insert(key, traffic);
                }
            }
        }
    }
    matrix
}

/// Runs the pass; never fails: an unusual matrix gives a report saying so.
pub fn logicalize(matrix: &CommMatrix, options: &Options) -> Logicalization {
    let mut total = matrix.p2p_total();
    total.time_s = total.time_s.map(round_ns);
    let threshold = if options.threshold.is_finite() {
        options.threshold.clamp(0.0, 1.0)
    } else {
        DEFAULT_THRESHOLD
    };
    let pairs = pair_traffic(matrix);
    let heaviest = |metric: fn(&Traffic) -> f64| pairs.values().map(metric).fold(0.0, f64::max);
    let metrics: [fn(&Traffic) -> f64; 3] = [
        |t| t.messages as f64,
        |t| t.bytes as f64,
        |t| t.time_s.unwrap_or(0.0),
    ];
    let cuts: Vec<f64> = metrics.iter().map(|m| threshold * heaviest(*m)).collect();
    let kept: BTreeSet<(u32, u32)> = pairs
        .iter()
        .filter(|(_, t)| {
            metrics
                .iter()
                .zip(&cuts)
                .any(|(metric, cut)| metric(t) > 0.0 && metric(t) >= *cut)
        })
        .map(|(p, _)| *p)
        .collect();

    let mut report = Logicalization {
        n_ranks: matrix.n_ranks,
        threshold,
        total,
        n_edges: matrix.p2p.len(),
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
        declared: None,
    };
    let set_aside: Vec<(u32, u32)> = pairs
        .keys()
        .filter(|p| !kept.contains(p))
        .copied()
        .collect();
    report.set_aside = share(&matrix.p2p, &total, &set_aside);

    let mut remaining = kept.clone();
    let unexplained_traffic = split::decompose(matrix, &mut remaining, &mut report);

    let active: BTreeSet<u32> = kept.iter().flat_map(|(a, b)| [*a, *b]).collect();
    report.idle_ranks = (0..matrix.n_ranks)
        .filter(|r| !active.contains(r))
        .collect();
    let unexplained: Vec<(u32, u32)> = remaining.iter().copied().collect();
    report.unexplained = share(&unexplained_traffic, &total, &unexplained);
    for &(a, b) in &unexplained {
        for (src, dst) in [(a, b), (b, a)] {
            if let Some(traffic) = unexplained_traffic.get(&(src, dst)) {
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
        .sort_by_key(|p| std::cmp::Reverse(p.share.traffic.bytes));
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
fn share(p2p: &BTreeMap<(u32, u32), Traffic>, total: &Traffic, pairs: &[(u32, u32)]) -> Share {
    let edges = pairs
        .iter()
        .flat_map(|&(a, b)| [(a, b), (b, a)])
        .filter_map(|key| p2p.get(&key));
    share_of(edges, total)
}

/// The share of `total` carried by `edges`.
fn share_of<'t>(edges: impl Iterator<Item = &'t Traffic>, total: &Traffic) -> Share {
    let mut traffic = Traffic {
        time_s: total.time_s.map(|_| 0.0),
        ..Traffic::default()
    };
    let mut n_edges = 0;
    for t in edges {
        traffic.add(t);
        n_edges += 1;
    }
    traffic.time_s = traffic.time_s.map(round_ns);
    let pct = |part: f64, whole: f64| {
        if whole > 0.0 {
            (part / whole * 1e4).round() / 1e2
        } else {
            0.0
        }
    };
    Share {
        edges: n_edges,
        traffic,
        messages_pct: pct(traffic.messages as f64, total.messages as f64),
        bytes_pct: pct(traffic.bytes as f64, total.bytes as f64),
        time_pct: match (traffic.time_s, total.time_s) {
            (Some(t), Some(all)) => Some(pct(t, all)),
            _ => None,
        },
    }
}

/// Seconds rounded to nanoseconds, so that sums print the same on every machine.
fn round_ns(seconds: f64) -> f64 {
    (seconds * 1e9).round() / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    fn traffic(messages: u64, bytes: u64) -> Traffic {
        Traffic {
            messages,
            bytes,
            time_s: None,
        }
    }

    #[test]
    fn threshold_keeps_pairs_heavy_in_messages_or_bytes() {
        let mut matrix = CommMatrix::new(4).expect("4 ranks");
        for (a, b) in [(0, 1), (1, 2), (2, 3), (3, 0)] {
            matrix
                .add_p2p(a, b, traffic(100, 1_000_000))
                .expect("in range");
            matrix
                .add_p2p(b, a, traffic(100, 1_000_000))
                .expect("in range");
        }
        // Latency-bound: few bytes, many messages; kept.
        matrix.add_p2p(0, 2, traffic(50, 50)).expect("in range");
        // Light in everything: set aside.
        matrix.add_p2p(1, 3, traffic(1, 8)).expect("in range");
        let report = logicalize(&matrix, &Options::default());
        assert_eq!(report.set_aside.edges, 1);
        assert_eq!(report.set_aside.traffic.bytes, 8);
        assert_eq!(
            report.unexplained.edges + report.patterns.iter().map(|p| p.edges.len()).sum::<usize>(),
            9
        );
        let all = logicalize(&matrix, &Options { threshold: 0.0 });
        assert_eq!(all.set_aside.edges, 0);
    }

    #[test]
    fn edge_index_gives_the_relation_of_each_message() {
        let ring = Topology::Grid {
            dims: vec![5],
            periodic: vec![true],
        };
        let report = logicalize(
            &synthetic_matrix(&ring, 5, None, traffic(1, 8)),
            &Options::default(),
        );
        let index = report.edge_index();
        assert_eq!(index.len(), 10);
        assert_eq!(index[&(4, 0)], (0, &Relation::Offset { offset: vec![1] }));
        assert_eq!(index[&(0, 4)], (0, &Relation::Offset { offset: vec![-1] }));
    }

    #[test]
    fn shares_are_rounded_percentages() {
        let matrix = synthetic_matrix(
            &Topology::Grid {
                dims: vec![3],
                periodic: vec![true],
            },
            3,
            None,
            traffic(1, 1),
        );
        let report = logicalize(&matrix, &Options::default());
        assert_eq!(report.patterns[0].share.bytes_pct, 100.0);
        let third = share(&matrix.p2p, &report.total, &[(0, 1)]);
        assert_eq!(third.bytes_pct, 33.33);
    }
}
