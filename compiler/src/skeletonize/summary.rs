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
    /// Compute spans too short to write (a mean under 5 us) are not written; their
    /// time per rank.
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
    /// The skeleton's compute against the trace's, once `perfskel skeletonize` has
    /// checked the written text.
    pub compute_check: Option<ComputeCheck>,
}

/// The skeleton's compute, as `check`'s simulation runs it (random spans at their
/// mean), against the trace's less the spans too short to write: over all merged ranks
/// and on the rank where they differ most. They should agree; a task farm's workers may
/// take other shares of the tasks than they did, so there only the sum is compared.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ComputeCheck {
    /// The merged ranks compared.
    pub ranks: u32,
    /// Whether each rank's compute is compared, not only the sum: false where the
    /// program's ranks take their shares of the work as it runs (a task farm's `while
    /// recv`), so that a worker may compute more or less than it did in the trace.
    pub by_rank: bool,
    /// The trace's compute summed over the merged ranks.
    pub traced_s: f64,
    /// Of it, in spans too short to write (the summary's `dropped_compute_s` a rank).
    pub unwritten_s: f64,
    /// The written skeleton's compute summed over the same ranks.
    pub skeleton_s: f64,
    /// (skeleton − (trace − unwritten)) / (trace − unwritten) over all merged ranks, in
    /// percent.
    pub error_pct: f64,
    /// The merged rank whose compute differs most (ranks of less than 1 ms both ways
    /// left out), what it should compute (its trace's less the mean unwritten), what it
    /// does, and their difference in percent.
    pub worst_rank: Option<u32>,
    pub worst_expected_s: f64,
    pub worst_skeleton_s: f64,
    pub worst_error_pct: f64,
    /// The application's time (slowest rank): differences under
    /// [`COMPUTE_CHECK_NEGLIGIBLE`] of it per rank over all ranks, or under
    /// [`COMPUTE_CHECK_RANK_FLOOR`] of it on one, do not matter to the prediction.
    pub app_time_s: f64,
}

/// Beyond this (percent, over all ranks) the skeleton's compute is not the trace's.
pub const COMPUTE_CHECK_TOTAL_PCT: f64 = 5.0;
/// Beyond this (percent, on one rank) likewise.
pub const COMPUTE_CHECK_RANK_PCT: f64 = 10.0;
/// Differences over all ranks under this share of the application's time per rank
/// are left alone (in a program that mostly communicates, what a span's rounding moves).
pub const COMPUTE_CHECK_NEGLIGIBLE: f64 = 0.02;
/// A rank's difference under this share of the application's time is left alone: the
/// skeletonizer's approximations (a data-addressed exchange's rounds the same on every
/// rank, a spread set) move compute between ranks, by little against the run.
pub const COMPUTE_CHECK_RANK_FLOOR: f64 = 0.1;

impl ComputeCheck {
    /// Compares `traced` (per merged rank) less `unwritten_s` a rank (spans too short to
    /// write) with `written` (per rank of the program).
    pub fn new(
        traced: &std::collections::BTreeMap<u32, f64>,
        unwritten_s: f64,
        written: &[f64],
        app_time_s: f64,
        by_rank: bool,
    ) -> ComputeCheck {
        let mut out = ComputeCheck {
            app_time_s,
            by_rank,
            ..ComputeCheck::default()
        };
        for (&rank, &t) in traced {
            let Some(&w) = written.get(rank as usize) else {
                continue;
            };
            out.ranks += 1;
            out.traced_s += t;
            out.skeleton_s += w;
            let expected = (t - unwritten_s).max(0.0);
            if expected.max(w) < 1e-3 {
                continue;
            }
            let e = 100.0 * (w - expected) / expected.max(1e-3);
            if out.worst_rank.is_none() || e.abs() > out.worst_error_pct.abs() {
                out.worst_rank = Some(rank);
                out.worst_expected_s = expected;
                out.worst_skeleton_s = w;
                out.worst_error_pct = e;
            }
        }
        out.unwritten_s = (unwritten_s * f64::from(out.ranks)).min(out.traced_s);
        let expected = out.traced_s - out.unwritten_s;
        if expected.max(out.skeleton_s) >= 1e-3 {
            out.error_pct = 100.0 * (out.skeleton_s - expected) / expected.max(1e-3);
        }
        out
    }

    /// The note when the two differ beyond [`COMPUTE_CHECK_TOTAL_PCT`] or
    /// [`COMPUTE_CHECK_RANK_PCT`].
    pub fn note(&self) -> Option<String> {
        let floor = COMPUTE_CHECK_NEGLIGIBLE * self.app_time_s;
        let ranks = f64::from(self.ranks);
        let expected = self.traced_s - self.unwritten_s;
        let total = self.error_pct.abs() > COMPUTE_CHECK_TOTAL_PCT
            && (self.skeleton_s - expected).abs() > floor * ranks;
        let rank = self.by_rank
            && self.worst_error_pct.abs() > COMPUTE_CHECK_RANK_PCT
            && (self.worst_skeleton_s - self.worst_expected_s).abs()
                > COMPUTE_CHECK_RANK_FLOOR * self.app_time_s;
        if !total && !rank {
            return None;
        }
        let unwritten = if self.unwritten_s > 0.0 {
            format!(
                " less {:.3} s in spans too short to write",
                self.unwritten_s
            )
        } else {
            String::new()
        };
        let worst = self
            .worst_rank
            .filter(|_| self.by_rank)
            .map(|r| {
                format!(
                    ", on rank {r} {:.3} s against {:.3} s ({:+.1} %)",
                    self.worst_skeleton_s, self.worst_expected_s, self.worst_error_pct
                )
            })
            .unwrap_or_default();
        Some(format!(
            "the skeleton computes {:.3} s summed over the ranks where the trace has {:.3} s{unwritten} ({:+.1} %){worst}: each rank should compute what it did in the trace, so the prediction will be off by as much; this is a fault of skeletonize: please report it with the trace",
            self.skeleton_s, self.traced_s, self.error_pct
        ))
    }
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
        if let Some(c) = &self.compute_check {
            let ranks = f64::from(c.ranks.max(1));
            let _ = writeln!(
                out,
                "compute            {:.6} s a rank as written, {:.6} s in the trace less {:.6} s in spans too short to write ({:+.2} %{})",
                c.skeleton_s / ranks,
                c.traced_s / ranks,
                c.unwritten_s / ranks,
                c.error_pct,
                match c.worst_rank {
                    Some(r) if c.by_rank => format!("; rank {r} {:+.1} %", c.worst_error_pct),
                    _ if !c.by_rank => "; a task farm's workers compared as one".to_string(),
                    _ => String::new(),
                }
            );
        }
        for note in &self.notes {
            let _ = writeln!(out, "note: {note}");
        }
        out
    }
}
