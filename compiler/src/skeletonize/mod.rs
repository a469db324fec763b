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
mod summary;
mod tokens;
mod topo;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use perfskel_grammar::ast::{Block, Decl, Ident, Program, Site, Stmt, StmtKind, Trivia};

use crate::compress::Algorithm;
use crate::logicalize::{self, trace::RankInput};
use crate::trace::stats::SiteKey;
use crate::trace::{Completion, RankTrace};

pub use summary::Summary;

/// What the caller read of one rank.
#[derive(Clone, Copy, Debug)]
pub enum RankSource<'a> {
    Trace(&'a RankTrace),
    Missing,
    Unreadable,
}

/// The trace, as the caller read it.
pub struct Input<'a> {
    /// The skeleton's name (a word).
    pub name: String,
    /// One entry per world rank.
    pub ranks: Vec<RankSource<'a>>,
    /// Call sites as `file.c:42` (sites not in the map get no annotation).
    pub site_names: BTreeMap<SiteKey, String>,
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

/// Where the pass is, for a progress bar: `done` of `total` tokens compressed.
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

/// Runs the pass; never fails: an unusual trace gives a (long) skeleton and a summary
/// saying why.
pub fn skeletonize(
    input: &Input<'_>,
    options: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Skeleton {
    let n_ranks = input.ranks.len() as u32;
    let mut summary = Summary {
        n_ranks,
        algorithm: match options.algorithm {
            Algorithm::Exact => "exact",
            Algorithm::Greedy => "greedy",
        }
        .into(),
        ..Summary::default()
    };
    // Which ranks are merged: those read to their end.
    let mut merged: Vec<(u32, &RankTrace)> = Vec::new();
    let mut all: Vec<&RankTrace> = Vec::new();
    for (rank, src) in (0..n_ranks).zip(&input.ranks) {
        match src {
            RankSource::Trace(t) => {
                all.push(t);
                summary.raw_events += t.events.len() as u64;
                if matches!(t.completion, Completion::Complete { .. }) {
                    merged.push((rank, t));
                } else {
                    summary.incomplete_ranks.push(rank);
                }
            }
            RankSource::Missing => summary.missing_ranks.push(rank),
            RankSource::Unreadable => summary.unreadable_ranks.push(rank),
        }
    }
    if merged.is_empty() {
        // Nothing complete: use what there is rather than nothing.
        merged = (0..n_ranks)
            .zip(&input.ranks)
            .filter_map(|(r, s)| match s {
                RankSource::Trace(t) => Some((r, *t)),
                _ => None,
            })
            .collect();
    }

    // 1. Topology.
    let rank_inputs: Vec<RankInput<'_>> = input
        .ranks
        .iter()
        .map(|s| match s {
            RankSource::Trace(t) => RankInput::Events {
                events: &t.events,
                complete: matches!(t.completion, Completion::Complete { .. }),
            },
            RankSource::Missing => RankInput::Missing,
            RankSource::Unreadable => RankInput::Unreadable,
        })
        .collect();
    let report = logicalize::trace::matrix(&rank_inputs)
        .map(|m| {
            logicalize::logicalize(
                &m.matrix,
                &logicalize::Options {
                    threshold: options.threshold,
                },
            )
        })
        .ok();
    let peers = recorded_peers(&merged);
    let dirs = topo::Directions::choose(report.as_ref(), n_ranks, &peers);
    if let Some(r) = &report {
        summary.unexplained_bytes_pct = r.unexplained.bytes_pct;
        summary.set_aside_bytes_pct = r.set_aside.bytes_pct;
        summary.matched_pattern = r.patterns.first().map(|p| p.name.clone());
    }
    summary.topology = perfskel_grammar::printer::topology(&dirs.topology);

    // 2. Tokens.
    let comms = comms::Comms::build(&merged, n_ranks, &dirs.topology);
    summary.notes.extend(
        comms
            .unexpressed
            .iter()
            .map(|u| format!("communicator not declared ({u}); calls on it are left out")),
    );
    let keep_tags = tokens::tags_are_constant(&all);
    summary.tags_dropped = !keep_tags;
    let size_map = match options.merge_sizes_pct {
        Some(pct) if pct > 0.0 => tokens::merge_sizes(&all, pct),
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
    let mut rank_tokens = Vec::new();
    for (rank, trace) in &merged {
        let local: BTreeMap<u64, u32> = trace
            .sites
            .iter()
            .map(|(id, key)| {
                let name = input.site_names.get(key).cloned().unwrap_or_default();
                (*id, intern_site(name))
            })
            .collect();
        let unknown = intern_site(String::new());
        let site_of = |id: u64| local.get(&id).copied().unwrap_or(unknown);
        rank_tokens.push(tokens::tokenize(*rank, trace, &policy, &site_of));
    }
    let comm_sites: Vec<Option<String>> = comms
        .decls
        .iter()
        .map(|d| {
            merged
                .iter()
                .find(|(r, _)| *r == d.site.0)
                .and_then(|(_, t)| t.sites.get(&d.site.1))
                .and_then(|k| input.site_names.get(k))
                .cloned()
        })
        .collect();

    // 3. Per-rank nests.
    let total: u64 = rank_tokens.iter().map(|t| t.ids.len() as u64).sum();
    let mut done = 0;
    progress(Progress { done, total });
    let mut nests = Vec::new();
    for t in &rank_tokens {
        let nest = nest::rank_nest(t, options.algorithm);
        done += t.ids.len() as u64;
        progress(Progress { done, total });
        summary.tokens += nest.tokens;
        summary.rank_description_len += nest.description_len as u64;
        summary.unmatched_requests += t.unmatched_requests;
        summary.unknown_waits += t.unknown_waits;
        summary.dropped_events += t.dropped_events;
        nests.push((t.rank, nest));
    }
    let app_ns = rank_tokens.iter().map(|t| t.app_ns).max().unwrap_or(0) as f64;
    // Share of each rank's run (MPI_Init end to MPI_Finalize start) inside loops.
    let in_loop: f64 = nests.iter().map(|(_, n)| n.in_loop_ns).sum();
    let covered: f64 = rank_tokens
        .iter()
        .zip(&nests)
        .map(|(t, (_, n))| (t.app_ns as f64).max(n.total_ns))
        .sum();
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
    };
    let mut stmts: Vec<Stmt> = comms
        .decls
        .iter()
        .zip(&comm_sites)
        .map(|(d, site)| {
            let mut s = Stmt::new(StmtKind::CommDecl(perfskel_grammar::ast::CommDecl {
                name: Ident::new(d.name.clone()),
                def: d.def.clone(),
            }));
            s.site = site.clone().map(|text| Site {
                text,
                pos: Default::default(),
            });
            s.trivia.trailing = Some(format!("# {}", d.op.mpi_name()));
            s
        })
        .collect();
    stmts.extend(builder.block(&merged_nest, &traced));
    // The compute between the last call and MPI_Finalize.
    let trailing: BTreeMap<u32, nest::Acc> = rank_tokens
        .iter()
        .map(|t| {
            let mut acc = nest::Acc::default();
            acc.n = 1;
            acc.sum_ns = t.trailing_gap_ns as f64;
            acc.sum_sq = acc.sum_ns * acc.sum_ns;
            (t.rank, acc)
        })
        .collect();
    if let Some(c) = builder.compute(&trailing, &traced) {
        stmts.push(c);
    }

    summary.statements = count_statements(&stmts);
    summary.loops = builder.loops;
    summary.rank_conditionals = builder.rank_conditionals;
    summary.explicit_peer_statements = builder.explicit_peer_stmts;
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

/// At most this many point-to-point peers per rank are scored when choosing the topology.
const PEER_SAMPLE: usize = 20_000;

/// The peers of the first point-to-point calls of every rank (`None`: `MPI_PROC_NULL`).
fn recorded_peers(ranks: &[(u32, &RankTrace)]) -> Vec<(u32, Option<u64>)> {
    use crate::trace::format::PEER_PROC_NULL;
    use crate::trace::OpClass;
    let mut out = Vec::new();
    for (rank, trace) in ranks {
        let p2p = trace
            .events
            .iter()
            .filter(|e| e.op.class() == OpClass::PointToPoint)
            .flat_map(|e| [e.peer, e.src])
            .flatten()
            .filter_map(|p| match p {
                PEER_PROC_NULL => Some(None),
                p => u64::try_from(p).ok().map(Some),
            })
            .take(PEER_SAMPLE);
        out.extend(p2p.map(|p| (*rank, p)));
    }
    out
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
