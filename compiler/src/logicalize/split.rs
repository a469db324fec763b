//! Splitting traffic into patterns: takes the rank pairs above the threshold, matches them
//! as a whole and, when that fails, by parts (message-size classes, connected components,
//! patterns peeled off in rank order), and gives the matched patterns (into the report)
//! and the directed traffic no pattern explains.
//!
//! Two patterns often share a rank pair (a tree edge that is also a grid edge). Such a
//! pair carries more messages than the pattern's typical edge; after a pattern is
//! matched, each of its edges keeps the pattern's median traffic and any excess stays
//! behind as residual traffic for the next pattern, so a grid exchange plus a reduction
//! tree gives both patterns rather than a grid and a tree with holes.

use std::collections::{BTreeMap, BTreeSet};

use super::graph::Graph;
use super::matching::{self, MapMethod};
use super::patterns::{self, Topology};
use super::{share_of, Attempt, Flow, LogicalEdge, Logicalization, PatternMatch, Traffic};

type Pair = (u32, u32);

/// At most this many patterns are split off one matrix.
const MAX_PATTERNS: usize = 8;
/// Components with fewer ranks are not matched on their own: a two-edge piece matches a
/// chain but says nothing about the application.
const MIN_COMPONENT_RANKS: usize = 4;

/// Explains `remaining` (pairs `(low, high)`) by patterns recorded into `report`; on
/// return `remaining` holds the unexplained pairs, and the result their directed traffic.
pub(super) fn decompose(
    matrix: &super::CommMatrix,
    remaining: &mut BTreeSet<Pair>,
    report: &mut Logicalization,
) -> BTreeMap<Pair, Traffic> {
    let mut splitter = Splitter {
        effective: matrix.p2p.clone(),
        tried: BTreeSet::new(),
        report,
    };
    splitter.run(remaining);
    splitter.effective
}

struct Splitter<'r> {
    /// Directed traffic not yet explained by a recorded pattern.
    effective: BTreeMap<Pair, Traffic>,
    /// Pair sets already given to the matcher, so retries are not reported twice.
    tried: BTreeSet<Vec<Pair>>,
    report: &'r mut Logicalization,
}

impl Splitter<'_> {
    fn run(&mut self, remaining: &mut BTreeSet<Pair>) {
        if remaining.is_empty() {
            return;
        }
        // A whole-graph match keeps all traffic: uneven edges are the pattern's own.
        if self
            .try_part("all traffic above the threshold", remaining, false)
            .is_some()
        {
            remaining.clear();
            return;
        }
        // Message-size classes, largest traffic first; after each match the classes are
        // recomputed, since residual traffic may have moved pairs between them.
        while self.report.patterns.len() < MAX_PATTERNS {
            // A single class is tried too: after a match it is the traffic left over (the
            // whole graph, already tried, is skipped by `try_part`).
            let mut classes = size_classes(&self.effective, remaining);
            if classes.is_empty() {
                break;
            }
            classes.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
            let mut progressed = false;
            for (label, class, _) in classes {
                if let Some(residual) = self.try_part(&label, &class, true) {
                    remaining.retain(|p| !class.contains(p) || residual.contains(p));
                    progressed = true;
                    break;
                }
            }
            if !progressed {
                break;
            }
        }
        let components = pair_components(remaining);
        if components.len() > 1 {
            for (idx, component) in components.into_iter().enumerate() {
                let label = format!("connected component {}", idx + 1);
                if let Some(residual) = self.try_part(&label, &component, true) {
                    remaining.retain(|p| !component.contains(p) || residual.contains(p));
                }
            }
        }
        if !remaining.is_empty() && self.report.patterns.len() < MAX_PATTERNS {
            self.peel(remaining);
        }
    }

    /// Matches one part; on success records the pattern and returns the pairs that keep
    /// residual traffic (none unless `split_excess`).
    fn try_part(
        &mut self,
        label: &str,
        part: &BTreeSet<Pair>,
        split_excess: bool,
    ) -> Option<BTreeSet<Pair>> {
        if part.is_empty() || !self.tried.insert(part.iter().copied().collect()) {
            return None;
        }
        let (ranks, graph) = local_graph(part);
        let outcome = matching::match_graph(&graph);
        self.report.attempts.push(Attempt {
            part: label.to_string(),
            n_ranks: ranks.len(),
            n_edges: graph.n_edges(),
            matched: outcome.found.as_ref().map(|f| f.topology.name()),
            rejected: outcome.rejected,
            notes: outcome.notes,
        });
        let found = outcome.found?;
        let canonical: BTreeMap<u32, u32> = ranks
            .iter()
            .zip(&found.map)
            .map(|(r, c)| (*r, *c))
            .collect();
        Some(self.record(
            label,
            &found.topology,
            found.method,
            &canonical,
            part,
            split_excess,
        ))
    }

    /// Records a matched pattern over `pairs`, rank `r` being canonical rank
    /// `canonical[r]`; with `split_excess`, edges above the pattern's median traffic keep
    /// the median and the rest stays unexplained. Returns the pairs left with residual.
    fn record(
        &mut self,
        label: &str,
        topology: &Topology,
        method: MapMethod,
        canonical: &BTreeMap<u32, u32>,
        pairs: &BTreeSet<Pair>,
        split_excess: bool,
    ) -> BTreeSet<Pair> {
        let n = canonical.len() as u32;
        let directed: Vec<Pair> = pairs
            .iter()
            .flat_map(|&(a, b)| [(a, b), (b, a)])
            .filter(|key| self.effective.contains_key(key))
            .collect();
        let median = |f: fn(&Traffic) -> u64| {
            let mut values: Vec<u64> = directed
                .iter()
                .filter_map(|k| self.effective.get(k))
                .map(f)
                .collect();
            values.sort_unstable();
            values.get(values.len() / 2).copied().unwrap_or(0)
        };
        let (typical_messages, typical_bytes) = (median(|t| t.messages), median(|t| t.bytes));
        let mut edges = Vec::new();
        let mut residual = BTreeSet::new();
        for (src, dst) in directed {
            let (Some(traffic), Some(cs), Some(cd)) = (
                self.effective.get(&(src, dst)).copied(),
                canonical.get(&src),
                canonical.get(&dst),
            ) else {
                continue;
            };
            let mut own = traffic;
            let excessive = traffic.messages > typical_messages && traffic.bytes > typical_bytes;
            if split_excess && excessive && typical_messages > 0 {
                // The excess is another pattern's traffic on the same pair.
                own.messages = typical_messages;
                own.bytes = typical_bytes;
                own.time_s = traffic
                    .time_s
                    .map(|t| t * typical_bytes as f64 / traffic.bytes.max(1) as f64);
                let excess = Traffic {
                    messages: traffic.messages - typical_messages,
                    bytes: traffic.bytes - typical_bytes,
                    time_s: traffic.time_s.zip(own.time_s).map(|(t, o)| t - o),
                };
                self.effective.insert((src, dst), excess);
                residual.insert((src.min(dst), src.max(dst)));
            } else {
                self.effective.remove(&(src, dst));
            }
            edges.push(LogicalEdge {
                src,
                dst,
                relation: topology.relation(n, *cs, *cd),
                traffic: own,
            });
        }
        let total = self.report.total;
        self.report.patterns.push(PatternMatch {
            topology: topology.clone(),
            name: topology.name(),
            flow: flow(&edges, pairs.len()),
            map_method: method,
            part: label.to_string(),
            coords: canonical
                .iter()
                .map(|(r, c)| (*r, topology.coords(*c)))
                .collect(),
            share: share_of(edges.iter().map(|e| &e.traffic), &total),
            edges,
        });
        residual
    }

    /// Peels library patterns in canonical numbering off `remaining`: the candidate over
    /// all ranks whose every edge is present and that carries the most traffic is
    /// recorded, and the rest is matched again as a whole. Stops when nothing fits.
    fn peel(&mut self, remaining: &mut BTreeSet<Pair>) {
        const MAX_ORDERINGS: usize = 24;
        // Canonical numbering over ranks 0..=the highest rank still to explain (trailing
        // idle ranks do not prevent a match).
        let n = remaining
            .iter()
            .map(|&(_, high)| high.saturating_add(1))
            .max()
            .unwrap_or(0);
        while self.report.patterns.len() < MAX_PATTERNS {
            let mut best: Option<(u64, Topology, BTreeSet<Pair>)> = None;
            let orderings = patterns::candidates(n)
                .into_iter()
                .flat_map(|t| t.orderings().into_iter().take(MAX_ORDERINGS));
            for topology in orderings {
                if topology.n_edges(n) as usize > remaining.len() {
                    continue;
                }
                if !topology.edges(n).all(|p| remaining.contains(&p)) {
                    continue;
                }
                let covered: BTreeSet<Pair> = topology.edges(n).collect();
                let weight: u64 = covered
                    .iter()
                    .flat_map(|&(a, b)| [(a, b), (b, a)])
                    .filter_map(|k| self.effective.get(&k))
                    .map(|t| t.bytes.max(t.messages))
                    .fold(0u64, u64::saturating_add);
                if best.as_ref().is_none_or(|(w, _, _)| weight > *w) {
                    best = Some((weight, topology, covered));
                }
            }
            let Some((_, topology, covered)) = best else {
                return;
            };
            let identity: BTreeMap<u32, u32> = (0..n).map(|r| (r, r)).collect();
            let label = "largest pattern in rank order";
            let residual = self.record(
                label,
                &topology,
                MapMethod::Identity,
                &identity,
                &covered,
                true,
            );
            remaining.retain(|p| !covered.contains(p) || residual.contains(p));
            if remaining.is_empty() {
                return;
            }
            if self
                .try_part("traffic left after the largest pattern", remaining, false)
                .is_some()
            {
                remaining.clear();
                return;
            }
        }
    }
}

/// Splits pairs by mean message size: sizes are sorted and cut where two neighbours
/// differ by more than a factor of 8, so the x and y faces of one stencil stay together.
/// Gives (label, pairs, bytes) per class.
fn size_classes(
    effective: &BTreeMap<Pair, Traffic>,
    remaining: &BTreeSet<Pair>,
) -> Vec<(String, BTreeSet<Pair>, u64)> {
    let mut sized: Vec<(f64, Pair, u64)> = remaining
        .iter()
        .map(|&(a, b)| {
            let mut t = Traffic::default();
            for key in [(a, b), (b, a)] {
                if let Some(e) = effective.get(&key) {
                    t.messages = t.messages.saturating_add(e.messages);
                    t.bytes = t.bytes.saturating_add(e.bytes);
                }
            }
            (t.bytes as f64 / t.messages.max(1) as f64, (a, b), t.bytes)
        })
        .collect();
    sized.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut classes: Vec<(f64, f64, BTreeSet<Pair>, u64)> = Vec::new();
    for (size, pair, bytes) in sized {
        match classes.last_mut() {
            Some((_, hi, set, total)) if size <= 8.0 * hi.max(1.0) => {
                *hi = size;
                set.insert(pair);
                *total = total.saturating_add(bytes);
            }
            _ => classes.push((size, size, BTreeSet::from([pair]), bytes)),
        }
    }
    classes
        .into_iter()
        .map(|(lo, hi, set, bytes)| (format!("messages of {lo:.0} to {hi:.0} bytes"), set, bytes))
        .collect()
}

/// Connected components of a pair set with at least [`MIN_COMPONENT_RANKS`] ranks,
/// ordered by their smallest rank.
fn pair_components(pairs: &BTreeSet<Pair>) -> Vec<BTreeSet<Pair>> {
    let (ranks, graph) = local_graph(pairs);
    graph
        .components()
        .into_iter()
        .filter(|c| c.len() >= MIN_COMPONENT_RANKS)
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
fn local_graph(pairs: &BTreeSet<Pair>) -> (Vec<u32>, Graph) {
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
    fn size_classes_cut_at_a_factor_of_eight() {
        let mut effective = BTreeMap::new();
        effective.insert((0, 1), traffic(10, 40_960));
        effective.insert((1, 2), traffic(10, 20_480));
        effective.insert((2, 3), traffic(10, 80));
        effective.insert((3, 2), traffic(10, 80));
        let remaining: BTreeSet<Pair> = [(0, 1), (1, 2), (2, 3)].into_iter().collect();
        let classes = size_classes(&effective, &remaining);
        let sets: Vec<Vec<Pair>> = classes
            .iter()
            .map(|c| c.1.iter().copied().collect())
            .collect();
        assert_eq!(sets, [vec![(2, 3)], vec![(0, 1), (1, 2)]]);
        assert_eq!(classes[0].0, "messages of 8 to 8 bytes");
        assert_eq!(classes[1].2, 61_440);
    }

    #[test]
    fn small_components_are_not_matched_alone() {
        let pairs: BTreeSet<Pair> = [(0, 1), (1, 2), (2, 3), (10, 11), (11, 12)]
            .into_iter()
            .collect();
        let components = pair_components(&pairs);
        assert_eq!(components.len(), 1);
        assert!(components[0].contains(&(0, 1)));
    }
}
