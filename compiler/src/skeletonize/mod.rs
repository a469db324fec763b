//! Trace → skeleton (`perfskel skeletonize`): takes every rank's events (already read,
//! call sites already named), gives one SPMD skeleton [`Program`] and a [`Summary`] of
//! what was compressed and what was lost.
//!
//! The steps, after the seed's skeleton construction (`001_*` slides: logicalization,
//! then loop-nest compression, then one coordinated program):
//!
//! 1. **Logicalization** of the communication matrix gives the topology of the header and
//!    the directions peers are written in ([`topo`]).
//! 2. **Tokens** ([`tokens`]): each MPI call becomes a token (operation, peer as
//!    topology directions or an explicit rank, size, tag, communicator, request slot,
//!    call site); the time between calls is the compute span before a token.
//!    Communicators become top-level declarations ([`comms`]).
//! 3. **Per-rank loop nests** ([`nest`]) from [`crate::compress::discover`], with the
//!    compute spans of each body position summarized over the iterations.
//! 4. **SPMD merge** ([`merge`]): one nest for all ranks; border ranks fold into the
//!    shared body through topology semantics, ranks that really differ get `if` blocks.
//! 5. **IR** ([`build`]) with call sites and comments saying where each loop came from.
//!
//! Ranks whose file is missing, unreadable or cut short are not merged: they run the
//! program the other ranks give (topology semantics decide what they do), and the
//! summary says so.

mod build;
mod comms;
mod merge;
mod nest;
mod spread;
mod summary;
mod tokens;
mod topo;

#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::collections::BTreeMap;

use perfskel_grammar::ast::{Block, Decl, Ident, Program, Site, Stmt, StmtKind, Trivia};

use crate::compress::Algorithm;
use crate::logicalize::{self, trace::RankInput};
use crate::trace::stats::SiteKey;
use crate::trace::Event;
use crate::trace::{Completion, RankTrace};

pub use summary::Summary;

/// What the caller read of one rank.
#[derive(Clone, Copy, Debug)]
pub enum RankSource<'a> {
    Trace(&'a RankTrace),
    Missing,
    Unreadable,
}

/// One rank as [`Ranks::load`] gives it: borrowed from memory or read for the occasion.
pub enum Loaded<'a> {
    Trace(Cow<'a, RankTrace>),
    Missing,
    Unreadable,
}

/// Gives one rank's trace at a time, so that only one rank's events are in memory: the
/// pass reads every rank twice (a survey, then the compression) and keeps per rank only
/// its loop nest.
pub trait Ranks {
    fn n_ranks(&self) -> u32;
    fn load(&self, rank: u32) -> Loaded<'_>;
}

/// Ranks already in memory.
pub struct InMemory<'a>(pub Vec<RankSource<'a>>);

impl Ranks for InMemory<'_> {
    fn n_ranks(&self) -> u32 {
        self.0.len() as u32
    }

    fn load(&self, rank: u32) -> Loaded<'_> {
        match self.0.get(rank as usize) {
            Some(RankSource::Trace(t)) => Loaded::Trace(Cow::Borrowed(*t)),
            Some(RankSource::Unreadable) => Loaded::Unreadable,
            Some(RankSource::Missing) | None => Loaded::Missing,
        }
    }
}

/// The trace, as the caller reads it.
pub struct Input<'a> {
    /// The skeleton's name (a word).
    pub name: String,
    pub ranks: &'a dyn Ranks,
    /// Names a call site as `file.c:42` (`None`: no annotation).
    pub site_name: &'a dyn Fn(&SiteKey) -> Option<String>,
    /// One line saying where the trace came from, for the header comment.
    pub origin: String,
}

/// Knobs of the pass.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub algorithm: Algorithm,
    /// Merge message sizes within this percentage of each other (`--merge-sizes`).
    pub merge_sizes_pct: Option<f64>,
    /// Logicalization threshold (see [`logicalize::Options`]).
    pub threshold: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            algorithm: Algorithm::Exact,
            merge_sizes_pct: None,
            threshold: logicalize::DEFAULT_THRESHOLD,
        }
    }
}

/// Where the pass is, for a progress bar: `done` of `total` events (surveyed, then
/// compressed: `total` is twice the events).
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    pub done: u64,
    pub total: u64,
}

/// The result.
pub struct Skeleton {
    pub program: Program,
    pub summary: Summary,
}

/// What the survey pass learns from every rank before tokens are made.
struct Survey {
    matrix: logicalize::CommMatrix,
    peers: Vec<topo::RecordedPeer>,
    comms: comms::CommSurvey,
    events: tokens::EventSurvey,
    complete: Vec<u32>,
    readable: Vec<u32>,
    events_per_rank: BTreeMap<u32, u64>,
}

/// Runs the pass; never fails: an unusual trace gives a (long) skeleton and a summary
/// saying why.
pub fn skeletonize(
    input: &Input<'_>,
    options: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Skeleton {
    let n_ranks = input.ranks.n_ranks();
    let mut summary = Summary {
        n_ranks,
        algorithm: match options.algorithm {
            Algorithm::Exact => "exact",
            Algorithm::Greedy => "greedy",
        }
        .into(),
        ..Summary::default()
    };
    let mut names: BTreeMap<SiteKey, Option<String>> = BTreeMap::new();
    let mut site_name = |key: &SiteKey| -> Option<String> {
        names
            .entry(key.clone())
            .or_insert_with(|| (input.site_name)(key))
            .clone()
    };

    // Survey: matrix, peers, communicators, tags, sizes; one rank at a time.
    let mut survey = Survey {
        matrix: logicalize::CommMatrix::new(n_ranks)
            .unwrap_or_else(|_| logicalize::CommMatrix::default()),
        peers: Vec::new(),
        comms: comms::CommSurvey::default(),
        events: tokens::EventSurvey::default(),
        complete: Vec::new(),
        readable: Vec::new(),
        events_per_rank: BTreeMap::new(),
    };
    for rank in 0..n_ranks {
        let trace = match input.ranks.load(rank) {
            Loaded::Trace(t) => t,
            Loaded::Missing => {
                summary.missing_ranks.push(rank);
                continue;
            }
            Loaded::Unreadable => {
                summary.unreadable_ranks.push(rank);
                continue;
            }
        };
        let complete = matches!(trace.completion, Completion::Complete { .. });
        summary.raw_events += trace.events.len() as u64;
        survey
            .events_per_rank
            .insert(rank, trace.events.len() as u64);
        survey.readable.push(rank);
        if complete {
            survey.complete.push(rank);
        } else {
            summary.incomplete_ranks.push(rank);
        }
        add_to_matrix(&mut survey.matrix, rank, n_ranks, &trace.events, complete);
        let per_rank = (PEER_SAMPLE / n_ranks.max(1) as usize).max(64);
        survey.peers.extend(recorded_peers(rank, &trace, per_rank));
        let sites = &trace.sites;
        survey.comms.add_rank(rank, &trace, &mut |id| {
            sites.get(&id).and_then(&mut site_name)
        });
        survey.events.add_rank(&trace);
        progress(Progress {
            done: summary.raw_events,
            total: 0,
        });
    }
    let total = 2 * summary.raw_events;
    // Ranks read to their end are merged; with none, whatever there is.
    let merged_ranks = if survey.complete.is_empty() {
        survey.readable.clone()
    } else {
        survey.complete.clone()
    };

    // 1. Topology.
    let report = logicalize::logicalize(
        &survey.matrix,
        &logicalize::Options {
            threshold: options.threshold,
        },
    );
    let dirs = topo::Directions::choose(Some(&report), n_ranks, &survey.peers);
    summary.unexplained_bytes_pct = report.unexplained.bytes_pct;
    summary.set_aside_bytes_pct = report.set_aside.bytes_pct;
    summary.matched_pattern = report.patterns.first().map(|p| p.name.clone());
    summary.topology = perfskel_grammar::printer::topology(&dirs.topology);

    // 2. Tokens and 3. per-rank nests, one rank at a time.
    let comms = comms::Comms::build(survey.comms, n_ranks, &dirs.topology);
    summary.notes.extend(
        comms
            .unexpressed
            .iter()
            .map(|u| format!("communicator not declared ({u}); calls on it are left out")),
    );
    let keep_tags = survey.events.tags_are_constant();
    summary.tags_dropped = !keep_tags;
    let size_map = match options.merge_sizes_pct {
        Some(pct) if pct > 0.0 => survey.events.merge_sizes(pct),
        _ => BTreeMap::new(),
    };
    summary.merged_sizes = size_map.iter().map(|(a, b)| (*a, *b)).collect();
    let policy = tokens::Policy {
        dirs: &dirs,
        comms: &comms,
        keep_tags,
        size_map: &size_map,
    };
    let mut site_names: Vec<String> = Vec::new();
    let mut site_index: BTreeMap<String, u32> = BTreeMap::new();
    let mut intern_site = |name: String| -> u32 {
        let next = site_names.len() as u32;
        *site_index.entry(name.clone()).or_insert_with(|| {
            site_names.push(name);
            next
        })
    };
    let mut done = summary.raw_events;
    let mut nests = Vec::new();
    let mut trailing: BTreeMap<u32, nest::Acc> = BTreeMap::new();
    let mut app_ns = 0u64;
    let mut in_loop = 0.0;
    let mut covered = 0.0;
    let (mut p2p_bytes, mut explicit_bytes) = (0u64, 0u64);
    for &rank in &merged_ranks {
        let Loaded::Trace(trace) = input.ranks.load(rank) else {
            continue;
        };
        let local: BTreeMap<u64, u32> = trace
            .sites
            .iter()
            .map(|(id, key)| (*id, intern_site(site_name(key).unwrap_or_default())))
            .collect();
        let unknown = intern_site(String::new());
        let site_of = |id: u64| local.get(&id).copied().unwrap_or(unknown);
        let tokens = tokens::tokenize(rank, &trace, &policy, &site_of);
        drop(trace);
        let nest = nest::rank_nest(&tokens, options.algorithm);
        done += survey.events_per_rank.get(&rank).copied().unwrap_or(0);
        progress(Progress { done, total });
        summary.tokens += nest.tokens;
        summary.rank_description_len += nest.description_len as u64;
        summary.unmatched_requests += tokens.unmatched_requests;
        summary.unknown_waits += tokens.unknown_waits;
        summary.dropped_events += tokens.dropped_events;
        p2p_bytes += tokens.p2p_bytes;
        explicit_bytes += tokens.explicit_bytes;
        app_ns = app_ns.max(tokens.app_ns);
        in_loop += nest.in_loop_ns;
        covered += (tokens.app_ns as f64).max(nest.total_ns);
        let mut acc = nest::Acc::default();
        acc.add(tokens.trailing_gap_ns, 0);
        trailing.insert(rank, acc);
        nests.push((rank, nest));
    }
    let app_ns = app_ns as f64;
    summary.explicit_peer_bytes_pct = if p2p_bytes > 0 {
        (10_000.0 * explicit_bytes as f64 / p2p_bytes as f64).round() / 100.0
    } else {
        0.0
    };
    // Share of each rank's run (MPI_Init end to MPI_Finalize start) inside loops.
    summary.loop_time_pct = if covered > 0.0 {
        (1000.0 * in_loop / covered).round() / 10.0
    } else {
        0.0
    };

    // 4. Merge.
    let merger = merge::Merger { dirs: &dirs };
    let seqs: Vec<(u32, &[nest::MNode])> = nests
        .iter()
        .map(|(r, n)| (*r, n.nodes.as_slice()))
        .collect();
    let merged_nest = merger.merge(&seqs);

    // 5. IR.
    let traced: Vec<u32> = nests.iter().map(|(r, _)| *r).collect();
    let mut builder = build::Builder {
        dirs: &dirs,
        comms: &comms,
        sites: &site_names,
        n_ranks,
        traced: traced.clone(),
        app_ns,
        dropped_compute_ns: 0.0,
        rank_conditionals: 0,
        explicit_peer_stmts: 0,
        loops: 0,
        omitted_noops: 0,
        vanished: Default::default(),
    };
    let mut stmts: Vec<Stmt> = comms
        .decls
        .iter()
        .map(|d| {
            let mut s = Stmt::new(StmtKind::CommDecl(perfskel_grammar::ast::CommDecl {
                name: Ident::new(d.name.clone()),
                def: d.def.clone(),
            }));
            s.site = d.site.clone().map(|text| Site {
                text,
                pos: Default::default(),
            });
            s.trivia.trailing = Some(format!("# {}", d.op.mpi_name()));
            s
        })
        .collect();
    stmts.extend(builder.block(&merged_nest, &traced));
    // The compute between the last call and MPI_Finalize.
    if let Some(c) = builder.compute(&trailing, &traced) {
        stmts.push(c);
    }
    summary.statements = count_statements(&stmts);
    summary.loops = builder.loops;
    summary.rank_conditionals = builder.rank_conditionals;
    summary.explicit_peer_statements = builder.explicit_peer_stmts;
    if builder.omitted_noops > 0 {
        summary.notes.push(format!(
            "{} operation(s) towards MPI_PROC_NULL on every rank (no-ops everywhere) are left out",
            builder.omitted_noops
        ));
    }
    summary.dropped_compute_s = builder.dropped_compute_ns * 1e-9;
    summary.app_time_s = app_ns * 1e-9;
    summary.compression_ratio = if summary.statements > 0 {
        (100.0 * summary.raw_events as f64 / summary.statements as f64).round() / 100.0
    } else {
        0.0
    };
    summary.explain();

    let mut header = Trivia::default();
    header.leading.push(format!(
        "# Generated by perfskel skeletonize from {}.",
        input.origin
    ));
    header.leading.push(format!(
        "# {} raw events -> {} statements ({} algorithm); {} % of the run inside loops.",
        summary.raw_events, summary.statements, summary.algorithm, summary.loop_time_pct
    ));
    header.leading.push(match &summary.matched_pattern {
        Some(p) if *p == summary.topology => {
            format!("# Topology {p}: matched by the communication matrix.")
        }
        Some(p) => format!(
            "# Topology {}: its directions name the most recorded peers (the matrix alone matched {p}).",
            summary.topology
        ),
        None => format!(
            "# Topology {}: no pattern matched the communication matrix.",
            summary.topology
        ),
    });
    let mut name = Decl::new(Ident::new(input.name.clone()));
    name.trivia = header;
    let mut app_time = Decl::new(build::duration(app_ns));
    app_time.trivia.trailing =
        Some("# measured: end of MPI_Init to start of MPI_Finalize, slowest rank".into());
    let program = Program {
        name,
        ranks: Decl::new(u64::from(n_ranks)),
        topology: Decl::new(dirs.topology.clone()),
        app_time,
        body: Block {
            stmts,
            end_comments: Vec::new(),
        },
    };
    Skeleton { program, summary }
}

/// At most this many point-to-point peers, over all ranks, are scored when choosing the
/// topology (and at least 64 per rank).
const PEER_SAMPLE: usize = 200_000;

/// Adds one rank's sends and collectives to the trace's matrix.
fn add_to_matrix(
    matrix: &mut logicalize::CommMatrix,
    rank: u32,
    n_ranks: u32,
    events: &[Event],
    complete: bool,
) {
    let inputs: Vec<RankInput<'_>> = (0..n_ranks)
        .map(|r| {
            if r == rank {
                RankInput::Events { events, complete }
            } else {
                RankInput::Events {
                    events: &[],
                    complete: true,
                }
            }
        })
        .collect();
    let Ok(part) = logicalize::trace::matrix(&inputs) else {
        return;
    };
    for ((src, dst), traffic) in part.matrix.p2p {
        let _ = matrix.add_p2p(src, dst, traffic);
    }
    for (name, traffic) in &part.matrix.collectives {
        matrix.add_collective(name, *traffic);
    }
    matrix.self_traffic.add(&part.matrix.self_traffic);
}

/// The peers of the first point-to-point calls of a rank (`None`: `MPI_PROC_NULL`), each
/// with its call site (object and offset) and half (0: send or receive, 1: the receive
/// of a sendrecv).
fn recorded_peers(rank: u32, trace: &RankTrace, limit: usize) -> Vec<topo::RecordedPeer> {
    use crate::trace::format::PEER_PROC_NULL;
    use crate::trace::OpClass;
    let site = |id: u64| {
        trace
            .sites
            .get(&id)
            .map(|k| (k.object.clone(), k.offset))
            .unwrap_or_default()
    };
    trace
        .events
        .iter()
        .filter(|e| e.op.class() == OpClass::PointToPoint)
        .flat_map(|e| [(e, 0u8, e.peer), (e, 1, e.src)])
        .filter_map(|(e, half, p)| {
            let peer = match p? {
                PEER_PROC_NULL => None,
                p => Some(u64::try_from(p).ok()?),
            };
            Some(topo::RecordedPeer {
                rank,
                site: (site(e.site), half),
                peer,
            })
        })
        .take(limit)
        .collect()
}

/// Statements of a block, counting nested ones.
pub fn count_statements(stmts: &[Stmt]) -> usize {
    use perfskel_grammar::ast::Else;
    stmts
        .iter()
        .map(|s| {
            1 + match &s.kind {
                StmtKind::Loop(l) => count_statements(&l.body.stmts),
                StmtKind::If(i) => {
                    let mut n = count_statements(&i.then_block.stmts);
                    let mut next = &i.else_branch;
                    while let Some(e) = next {
                        match e {
                            Else::Block(b) => {
                                n += count_statements(&b.stmts);
                                next = &None;
                            }
                            Else::If(inner) => {
                                n += count_statements(&inner.then_block.stmts);
                                next = &inner.else_branch;
                            }
                        }
                    }
                    n
                }
                _ => 0,
            }
        })
        .sum()
}
