//! The human-readable form of a [`Logicalization`]: takes the report and gives text with
//! fixed float precision and sorted lists, so that it can be snapshot-tested.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::matching::Stage;
use super::{Logicalization, MapMethod, Relation, Share, Traffic};

/// Lists longer than this are cut in the short form.
const SHORT_LIST: usize = 8;

impl Logicalization {
    /// Renders the report; `verbose` prints every coordinate and every rejection.
    pub fn to_text(&self, verbose: bool) -> String {
        let mut out = String::new();
        let limit = if verbose { usize::MAX } else { SHORT_LIST };
        let _ = writeln!(
            out,
            "{} ranks, {} point-to-point edges, {}; threshold {:.2} % of the heaviest pair",
            self.n_ranks,
            self.n_edges,
            traffic_text(&self.total),
            self.threshold * 100.0
        );
        if let Some(d) = &self.declared {
            let matched = match self.patterns.first() {
                Some(p) => format!("the matrix alone matched {}", p.name),
                None => "the matrix alone matched no pattern".to_string(),
            };
            let _ = writeln!(
                out,
                "\ndeclared topology: {}, the application's own (MPI_Cart_create over MPI_COMM_WORLD, in its dimension order); skeletonize names its directions by it ({matched}: a graph alone cannot tell a grid from another topology of the same shape)",
                d.topology
            );
        }
        for pattern in &self.patterns {
            let method = match pattern.map_method {
                MapMethod::Identity => "identity (ranks already in MPI_Cart_create / heap order)",
                MapMethod::Vf2 => "petgraph VF2",
                MapMethod::Guided => "guided breadth-first search",
            };
            let _ = writeln!(out, "\ntopology: {}", pattern.name);
            let _ = writeln!(out, "  part: {}", pattern.part);
            let _ = writeln!(out, "  flow: {}", flow_text(pattern.flow));
            let _ = writeln!(out, "  rank map: {method}");
            let _ = writeln!(out, "  explains: {}", share_text(&pattern.share));
            // Grouped by relation, a tree's children on one line.
            let mut by_relation: BTreeMap<Relation, (usize, Traffic)> = BTreeMap::new();
            for edge in &pattern.edges {
                let key = match &edge.relation {
                    Relation::Down { .. } => Relation::Down { child: 0 },
                    other => other.clone(),
                };
                let entry = by_relation.entry(key).or_insert((0, Traffic::default()));
                entry.0 += 1;
                entry.1.messages = entry.1.messages.saturating_add(edge.traffic.messages);
                entry.1.bytes = entry.1.bytes.saturating_add(edge.traffic.bytes);
            }
            let _ = writeln!(out, "  edges by relation:");
            for (relation, (count, traffic)) in &by_relation {
                let _ = writeln!(
                    out,
                    "    {:<16} {count} edges, {} messages, {} bytes",
                    relation_text(relation),
                    traffic.messages,
                    traffic.bytes
                );
            }
            let _ = writeln!(out, "  coordinates:");
            for (rank, coords) in pattern.coords.iter().take(limit) {
                let list: Vec<String> = coords.iter().map(u32::to_string).collect();
                let _ = writeln!(out, "    rank {rank}: ({})", list.join(", "));
            }
            if pattern.coords.len() > limit {
                let _ = writeln!(
                    out,
                    "    ... {} more (--verbose)",
                    pattern.coords.len() - limit
                );
            }
        }
        let _ = writeln!(
            out,
            "\nset aside below the threshold: {}",
            share_text(&self.set_aside)
        );
        let _ = writeln!(
            out,
            "unexplained above the threshold: {}",
            share_text(&self.unexplained)
        );
        if !self.explicit_peers.is_empty() {
            let _ = writeln!(out, "explicit peers:");
            for (rank, peers) in self.explicit_peers.iter().take(limit) {
                let list: Vec<String> = peers.iter().map(u32::to_string).collect();
                let _ = writeln!(out, "    rank {rank} -> {}", list.join(", "));
            }
            if self.explicit_peers.len() > limit {
                let _ = writeln!(
                    out,
                    "    ... {} more ranks (--verbose)",
                    self.explicit_peers.len() - limit
                );
            }
        }
        if !self.idle_ranks.is_empty() {
            let list: Vec<String> = self
                .idle_ranks
                .iter()
                .take(limit)
                .map(u32::to_string)
                .collect();
            let more = if self.idle_ranks.len() > limit {
                ", ..."
            } else {
                ""
            };
            let _ = writeln!(out, "idle ranks: {}{more}", list.join(", "));
        }
        if !self.collectives.is_empty() {
            let _ = writeln!(out, "collectives (kept apart):");
            for (name, traffic) in &self.collectives {
                let _ = writeln!(
                    out,
                    "    {name}: {} calls, {} bytes",
                    traffic.messages, traffic.bytes
                );
            }
        }
        for attempt in &self.attempts {
            let matched = attempt.matched.as_deref().unwrap_or("nothing");
            let _ = writeln!(
                out,
                "\ncandidates for {} ({} ranks, {} edges): matched {matched}",
                attempt.part, attempt.n_ranks, attempt.n_edges
            );
            for note in &attempt.notes {
                let _ = writeln!(out, "  note: {note}");
            }
            for stage in [
                Stage::Counts,
                Stage::Degrees,
                Stage::Spectrum,
                Stage::Distances,
                Stage::Isomorphism,
            ] {
                let rejected: Vec<_> = attempt
                    .rejected
                    .iter()
                    .filter(|r| r.stage == stage)
                    .collect();
                if rejected.is_empty() {
                    continue;
                }
                let _ = writeln!(out, "  rejected by {}: {}", stage.label(), rejected.len());
                for r in rejected.iter().take(limit) {
                    let _ = writeln!(out, "    {}: {}", r.candidate, r.reason);
                }
                if rejected.len() > limit {
                    let _ = writeln!(out, "    ... {} more (--verbose)", rejected.len() - limit);
                }
            }
        }
        if !self.warnings.is_empty() {
            out.push('\n');
        }
        for warning in &self.warnings {
            let _ = writeln!(out, "warning: {warning}");
        }
        out
    }
}

fn traffic_text(t: &Traffic) -> String {
    match t.time_s {
        Some(time) => format!("{} messages, {} bytes, {time:.6} s", t.messages, t.bytes),
        None => format!("{} messages, {} bytes", t.messages, t.bytes),
    }
}

fn share_text(s: &Share) -> String {
    let time = match s.time_pct {
        Some(pct) => format!(", {pct:.2} % of time"),
        None => String::new(),
    };
    format!(
        "{} edges, {} messages ({:.2} %), {} bytes ({:.2} %){time}",
        s.edges, s.traffic.messages, s.messages_pct, s.traffic.bytes, s.bytes_pct
    )
}

fn flow_text(flow: super::Flow) -> &'static str {
    match flow {
        super::Flow::Both => "both ways on every edge",
        super::Flow::Forward => "forward only (towards higher coordinates / down the tree)",
        super::Flow::Backward => "backward only (towards lower coordinates / up the tree)",
        super::Flow::Mixed => "mixed",
    }
}

fn relation_text(relation: &Relation) -> String {
    match relation {
        Relation::Offset { offset } => {
            let list: Vec<String> = offset.iter().map(|o| format!("{o:+}")).collect();
            format!("offset ({})", list.join(", "))
        }
        Relation::Up => "up (to parent)".to_string(),
        Relation::Down { .. } => "down (to a child)".to_string(),
        Relation::Shift { shift } => format!("shift +{shift}"),
    }
}
