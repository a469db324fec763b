//! Checker: a parsed [`Program`] → diagnostics, and for a program without errors the
//! [`Info`] that back ends need. Back ends and the scaler take a [`Verified`] program,
//! which only [`verify`] makes (the program together with the `Info` of that very
//! program; both have private fields), so unchecked IR cannot reach them and a scaled
//! program reaches a back end only through a check of its own.
//!
//! Two passes:
//! - a static pass over the text (this file and `requests.rs`): header consistency,
//!   names of communicators and request handles, the lifecycle of every handle (never
//!   completed, completed twice, overwritten while pending), directions the topology
//!   lacks, expression types, counts, sizes and per-rank lists;
//! - a simulation of all ranks (`sim.rs`) that matches point-to-point messages and
//!   collectives the way MPI does and reports deadlocks, messages nobody receives,
//!   truncation, collectives not all ranks reach, and roots out of range, each with the
//!   ranks involved and what they block on.

mod requests;
mod sim;
mod statics;

use std::collections::BTreeMap;

use perfskel_grammar::ast::{Pos, Program};
use perfskel_grammar::Diag;

use crate::semantics::Shape;

pub use sim::RankStats;

/// Facts about a checked program; only [`check`] makes one.
#[derive(Debug)]
pub struct Info {
    world: Shape,
    comms: Vec<CommInfo>,
    requests: Vec<String>,
    simulated_ops: u64,
    simulation_complete: bool,
    ranks: Vec<RankStats>,
}

impl Info {
    /// The world communicator's shape.
    pub fn world(&self) -> &Shape {
        &self.world
    }

    /// Declared communicators in declaration order (not including `world`).
    pub fn comms(&self) -> &[CommInfo] {
        &self.comms
    }

    /// Every request handle name, sorted.
    pub fn requests(&self) -> &[String] {
        &self.requests
    }

    /// Point-to-point and collective operations the simulation executed, over all ranks.
    pub fn simulated_ops(&self) -> u64 {
        self.simulated_ops
    }

    /// Whether the simulation covered the whole program (it stops after a budget).
    pub fn simulation_complete(&self) -> bool {
        self.simulation_complete
    }

    /// What each rank did in the simulation, indexed by rank.
    pub fn ranks(&self) -> &[RankStats] {
        &self.ranks
    }
}

/// A program that passed the checker, with its [`Info`] and the warnings found: what
/// the scaler and the back ends take. Only [`verify`] makes one.
#[derive(Debug)]
pub struct Verified {
    program: Program,
    info: Info,
    warnings: Vec<Diag>,
    /// The text the program was checked against (a program derived from it, such as a
    /// scaled one, is checked against it too).
    source: String,
}

impl Verified {
    pub fn program(&self) -> &Program {
        &self.program
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn info(&self) -> &Info {
        &self.info
    }

    /// The checker's warnings (a verified program has no error).
    pub fn warnings(&self) -> &[Diag] {
        &self.warnings
    }
}

/// Checks `program` (its text is `source`, for explanations); the verified program
/// when no diagnostic is an error, else every diagnostic.
pub fn verify(program: Program, source: &str, options: Options) -> Result<Verified, Vec<Diag>> {
    let checked = check(&program, source, options);
    match checked.info {
        Some(info) => Ok(Verified {
            program,
            info,
            warnings: checked.diags,
            source: source.to_string(),
        }),
        None => Err(checked.diags),
    }
}

#[derive(Clone, Debug)]
pub struct CommInfo {
    pub name: String,
    pub shape: Shape,
}

/// The result of checking: every diagnostic, and [`Info`] when none is an error.
#[derive(Debug)]
pub struct Checked {
    pub diags: Vec<Diag>,
    pub info: Option<Info>,
}

/// Options of the checker.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// How many operations (over all ranks) the deadlock simulation may execute before
    /// it stops and reports that it checked only a prefix of the run.
    pub simulation_budget: u64,
    /// Count what each rank sends to each peer (`RankStats::sent_to`): the skeleton's
    /// communication matrix, for `perfskel report`.
    pub pair_traffic: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            simulation_budget: 20_000_000,
            pair_traffic: false,
        }
    }
}

/// Programs with at least this much text, or this many top-level statements, are
/// checked on two threads.
const PARALLEL_BYTES: usize = 256 * 1024;
const PARALLEL_STMTS: usize = 2000;

/// Checks `program`. `source` is its text, used only to name lines in explanations
/// (pass `""` for IR that has no text).
pub fn check(program: &Program, source: &str, options: Options) -> Checked {
    let lines = Lines::new(source);
    let mut diags = Vec::new();
    // The simulation needs a consistent program: its reports count only when the static
    // passes found no error, so they are about behaviour, not about typos. On a large
    // program the request pass runs on a thread of its own beside the others, and the
    // simulation starts before it is known whether the request pass found an error.
    let large = source.len() >= PARALLEL_BYTES || program.body.stmts.len() >= PARALLEL_STMTS;
    let parallel = large && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
    let (statics, request_diags, simulated) = std::thread::scope(|scope| {
        let requests = parallel.then(|| {
            scope.spawn(|| {
                let mut diags = Vec::new();
                requests::check(program, &mut diags);
                diags
            })
        });
        let statics = statics::check(program, &mut diags);
        let mut request_diags = Vec::new();
        if requests.is_none() {
            requests::check(program, &mut request_diags);
        }
        let simulate = !diags.iter().chain(&request_diags).any(Diag::is_error);
        let simulated = simulate.then(|| {
            let mut sim_diags = Vec::new();
            let outcome = sim::simulate(program, &statics, &lines, options, &mut sim_diags);
            (outcome, sim_diags)
        });
        if let Some(handle) = requests {
            request_diags = handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        }
        (statics, request_diags, simulated)
    });
    let simulated = simulated.filter(|_| !request_diags.iter().any(Diag::is_error));
    diags.extend(request_diags);
    let mut info = None;
    if let Some((outcome, sim_diags)) = simulated {
        diags.extend(sim_diags);
        if !diags.iter().any(Diag::is_error) {
            let mut requests: Vec<String> = statics.request_names.iter().cloned().collect();
            requests.sort();
            info = Some(Info {
                world: statics.world.clone(),
                comms: statics
                    .comms
                    .iter()
                    .filter(|(name, _)| name.as_str() != "world")
                    .map(|(name, c)| (c.order, (name, c)))
                    .collect::<BTreeMap<_, _>>()
                    .into_values()
                    .map(|(name, c)| CommInfo {
                        name: name.clone(),
                        shape: (*c.shape).clone(),
                    })
                    .collect(),
                requests,
                simulated_ops: outcome.ops,
                simulation_complete: outcome.complete,
                ranks: outcome.ranks,
            });
        }
    }
    perfskel_grammar::diagnostic::sort(&mut diags);
    Checked { diags, info }
}

/// Line numbers of byte offsets, for explanations that mention other statements. The
/// line starts are found on the first use: most checks explain nothing.
pub(crate) struct Lines<'s> {
    source: &'s str,
    starts: std::cell::OnceCell<Vec<u32>>,
}

impl<'s> Lines<'s> {
    pub fn new(source: &'s str) -> Lines<'s> {
        Lines {
            source,
            starts: std::cell::OnceCell::new(),
        }
    }

    fn starts(&self) -> &[u32] {
        self.starts.get_or_init(|| {
            let mut starts = vec![0];
            starts.extend(
                self.source
                    .bytes()
                    .enumerate()
                    .filter(|&(_, b)| b == b'\n')
                    .map(|(i, _)| u32::try_from(i + 1).unwrap_or(u32::MAX)),
            );
            starts
        })
    }

    /// "line 12", or "a derived statement" when there is no position.
    pub fn describe(&self, pos: Pos) -> String {
        let starts = self.starts();
        match pos.span() {
            Some(span) if starts.len() > 1 || span.start > 0 => {
                let line = starts.partition_point(|&s| s <= span.start);
                format!("line {line}")
            }
            Some(_) => "line 1".into(),
            None => "a derived statement".into(),
        }
    }
}

/// "0-3, 5, 7-9": a compact list of ranks for messages.
pub(crate) fn rank_list(ranks: &[u64]) -> String {
    let mut sorted = ranks.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    const SHOWN: usize = 8;
    if parts.len() > SHOWN {
        let more = parts.len() - SHOWN;
        parts.truncate(SHOWN);
        format!("{}, ... ({more} more groups)", parts.join(", "))
    } else {
        parts.join(", ")
    }
}

/// "rank 3" or "ranks 0-3".
pub(crate) fn ranks_phrase(ranks: &[u64]) -> String {
    if ranks.len() == 1 {
        format!("rank {}", ranks[0])
    } else {
        format!("ranks {}", rank_list(ranks))
    }
}

/// "rank 3 blocks" or "ranks 0-3 block": the subject with its verb agreeing.
pub(crate) fn ranks_verb(ranks: &[u64], verb: &str) -> String {
    if ranks.len() == 1 {
        let ending = if verb.ends_with('h') || verb.ends_with('s') {
            "es"
        } else {
            "s"
        };
        format!("rank {} {verb}{ending}", ranks[0])
    } else {
        format!("ranks {} {verb}", rank_list(ranks))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_lists_are_compact() {
        assert_eq!(rank_list(&[5, 0, 1, 2, 3, 7, 8, 9]), "0-3, 5, 7-9");
        assert_eq!(ranks_phrase(&[4]), "rank 4");
        assert_eq!(ranks_verb(&[4], "finish"), "rank 4 finishes");
        assert_eq!(ranks_verb(&[1, 2], "block"), "ranks 1-2 block");
        assert_eq!(
            rank_list(&(0..40).step_by(2).collect::<Vec<_>>()),
            "0, 2, 4, 6, 8, 10, 12, 14, ... (12 more groups)"
        );
    }

    #[test]
    fn line_numbers_of_spans() {
        let lines = Lines::new("a\nbb\nccc\n");
        let at = |start| Pos::Source(perfskel_grammar::ast::Span::new(start, start + 1));
        assert_eq!(lines.describe(at(0)), "line 1");
        assert_eq!(lines.describe(at(2)), "line 2");
        assert_eq!(lines.describe(at(6)), "line 3");
        assert_eq!(lines.describe(Pos::Derived), "a derived statement");
    }
}
