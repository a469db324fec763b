//! What `perfskel skeletonize` reports: takes the counts the pass gathered, gives the
//! [`Summary`] (serde, for `--format json`) and its text form, including why a skeleton
//! came out long.

use std::fmt::Write;

use serde::Serialize;

/// Counts and shares of one skeletonization.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    pub n_ranks: u32,
    pub algorithm: String,
    pub topology: String,
    /// The logicalization's best pattern (`None`: nothing matched; peers are explicit).
    pub matched_pattern: Option<String>,
    /// Whether the topology is the grid the application declared (`MPI_Cart_create`).
    pub declared_topology: bool,
    /// Events in every rank file read.
    pub raw_events: u64,
    /// Tokens of the merged ranks (events minus init, finalize, communicator calls).
    pub tokens: u64,
    /// Sum over ranks of the per-rank nests' description lengths.
    pub rank_description_len: u64,
    /// Statements of the skeleton, nested ones included.
    pub statements: usize,
    /// `raw_events / statements`.
    pub compression_ratio: f64,
    pub loops: usize,
    /// Share of the merged ranks' time (compute and MPI) inside discovered loops.
    pub loop_time_pct: f64,
    pub app_time_s: f64,
    /// Point-to-point bytes no topology pattern explains (written with explicit peers).
    pub unexplained_bytes_pct: f64,
    /// Point-to-point bytes below the logicalization threshold.
    pub set_aside_bytes_pct: f64,
    pub explicit_peer_statements: usize,
    /// Point-to-point bytes the chosen topology's directions do not name (explicit
    /// `rank(N)` or `any` peers): the traffic not explained by the topology.
    pub explicit_peer_bytes_pct: f64,
    pub rank_conditionals: usize,
    /// Tags varied per call (or receives took any tag): all tags written as 0.
    pub tags_dropped: bool,
    /// `--merge-sizes`: recorded size → written size.
    pub merged_sizes: Vec<(u64, u64)>,
    pub unmatched_requests: u64,
    pub unknown_waits: u64,
    /// Events that became no statement for a reason worth reporting.
    pub dropped_events: u64,
    /// Events of data-addressed and partner exchanges, written as shift-exchange rounds.
    pub exchange_events: u64,
    /// Why: reason → events, summed over the merged ranks.
    pub dropped: std::collections::BTreeMap<String, u64>,
    /// Compute spans under 1 us are not written; their time per rank.
    pub dropped_compute_s: f64,
    pub missing_ranks: Vec<u32>,
    pub incomplete_ranks: Vec<u32>,
    /// A run cut short: the ranks that stopped before `MPI_Finalize`; every rank was cut
    /// to the longest consistent prefix, and these are its events left out.
    pub cut_ranks: Vec<u32>,
    pub cut_events: u64,
    pub unreadable_ranks: Vec<u32>,
    /// Why the skeleton is long, what was approximated, what the input lacked.
    pub notes: Vec<String>,
}

impl Summary {
    /// Adds the notes that follow from the counts.
    pub(crate) fn explain(&mut self) {
        let list = |r: &[u32]| r.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
        let mut notes = Vec::new();
        if !self.missing_ranks.is_empty() {
            notes.push(format!(
                "rank file missing for rank(s) {}: they run the program inferred from the other ranks",
                list(&self.missing_ranks)
            ));
        }
        if !self.unreadable_ranks.is_empty() {
            notes.push(format!(
                "rank file unreadable for rank(s) {}: they run the program inferred from the other ranks",
                list(&self.unreadable_ranks)
            ));
        }
        if !self.incomplete_ranks.is_empty() {
            notes.push(format!(
                "rank(s) {} stopped before MPI_Finalize (truncated file): not merged; they run the program inferred from the other ranks",
                list(&self.incomplete_ranks)
            ));
        }
        if self.unmatched_requests > 0 {
            notes.push(format!(
                "{} request(s) never completed in the trace: completed at the end of the skeleton",
                self.unmatched_requests
            ));
        }
        if self.unknown_waits > 0 {
            notes.push(format!(
                "{} completion(s) of requests the trace never posted were left out",
                self.unknown_waits
            ));
        }
        if self.tags_dropped {
            notes.push(
                "tags vary between calls of one call site (or a receive takes any tag): all tags are written as 0".into(),
            );
        }
        if !self.merged_sizes.is_empty() {
            notes.push(format!(
                "--merge-sizes merged {} message size(s): {}",
                self.merged_sizes.len(),
                self.merged_sizes
                    .iter()
                    .map(|(a, b)| format!("{a} B -> {b} B"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let unmodelled = |what: &str| -> u64 {
            self.dropped
                .iter()
                .filter(|(why, _)| why.ends_with(what))
                .map(|(_, n)| n)
                .sum()
        };
        let one_sided = unmodelled("one-sided communication is not modelled");
        let inter = unmodelled("intercommunicators are not modelled");
        if one_sided > 0 || inter > 0 {
            let mut parts = Vec::new();
            if one_sided > 0 {
                parts.push(format!("{one_sided} one-sided call(s)"));
            }
            if inter > 0 {
                parts.push(format!(
                    "{inter} call(s) making or using intercommunicators"
                ));
            }
            notes.push(format!(
                "the application uses MPI features skeletons do not model: {} dropped (their time is not in the skeleton; the rest is modelled without them)",
                parts.join(" and ")
            ));
        }
        if self.dropped_events > 0 {
            notes.push(format!(
                "{} event(s) dropped: {}",
                self.dropped_events,
                self.dropped
                    .iter()
                    .map(|(why, n)| format!("{n} x {why}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
        // Why long: little repetition.
        if self.compression_ratio > 0.0 && self.compression_ratio < 4.0 && self.statements > 20 {
            notes.push(format!(
                "long skeleton: {} raw events became {} statements; the call sequence has little repetition ({} % of the time is inside loops)",
                self.raw_events,
                self.statements,
                (self.loop_time_pct * 10.0).round() / 10.0
            ));
        }
        if self.explicit_peer_statements > 0 {
            notes.push(format!(
                "{} statement(s) name explicit ranks: their peers are not explained by the topology ({} % of the point-to-point bytes) or vary between iterations",
                self.explicit_peer_statements, self.explicit_peer_bytes_pct
            ));
        }
        if self.rank_conditionals > 0 {
            notes.push(format!(
                "{} rank-conditional block(s): these ranks run different call sequences",
                self.rank_conditionals
            ));
        }
        notes.append(&mut self.notes);
        self.notes = notes;
    }

    /// The text form printed by the CLI.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "ranks              {}", self.n_ranks);
        let _ = writeln!(
            out,
            "topology           {}{}",
            self.topology,
            match &self.matched_pattern {
                Some(p) if *p != self.topology => format!(" (matched {p})"),
                Some(_) => String::new(),
                None => " (no pattern matched)".into(),
            }
        );
        let _ = writeln!(out, "raw events         {}", self.raw_events);
        let _ = writeln!(out, "dropped events     {}", self.dropped_events);
        let _ = writeln!(out, "statements         {}", self.statements);
        let _ = writeln!(
            out,
            "compression        {:.2}x ({} algorithm)",
            self.compression_ratio, self.algorithm
        );
        let _ = writeln!(out, "loops              {}", self.loops);
        let _ = writeln!(out, "time in loops      {:.1} %", self.loop_time_pct);
        let _ = writeln!(out, "app_time           {:.6} s", self.app_time_s);
        let _ = writeln!(
            out,
            "unexplained p2p    {:.2} % of bytes not named by {} directions (matrix: {:.2} % unexplained, {:.2} % below the threshold)",
            self.explicit_peer_bytes_pct, self.topology, self.unexplained_bytes_pct, self.set_aside_bytes_pct
        );
        for note in &self.notes {
            let _ = writeln!(out, "note: {note}");
        }
        out
    }
}
