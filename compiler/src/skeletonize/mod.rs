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
//! 5. **Folding** ([`fold`]): iterations that differ every N-th time become one loop
//!    reading its iteration number; minor phases are written coarsely.
//! 6. **IR** ([`build`]) with call sites and comments saying where each loop came from.
//!
//! Ranks whose file is missing or unreadable are not merged: they run the program the
//! other ranks give (topology semantics decide what they do), and the summary says so.
//! When no rank reached `MPI_Finalize` (a killed or crashed run: the ranks stopped at
//! different points), every rank is first cut to the longest consistent prefix
//! ([`prefix`]): the skeleton is of the part of the run all ranks reached, and checks
//! clean. When some ranks finished, one that did not lost only the tail of its file: it
//! is not merged, and runs the program of the others.

mod build;
mod comms;
mod dims;
mod eager;
mod exchange;
mod fold;
mod merge;
mod negligible;
mod nest;
mod peers;
mod prefix;
mod serve;
mod source;
mod spread;
mod summary;
mod survey;
mod tokens;
mod topo;
mod vcounts;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use perfskel_grammar::ast::{
    Block, Decl, Ident, Program, Site, Size, SizeUnit, Spanned, Stmt, StmtKind, Trivia,
};

use crate::compress::{self, Algorithm};
use crate::logicalize;
use crate::trace::stats::SiteKey;

pub use eager::unblock_sends;
pub use source::{InMemory, Opened, RankEvents, RankSource, Ranks};
pub use summary::{ComputeCheck, Summary};
pub use topo::declared_topology;
pub use vcounts::{unify_collective_sizes, unify_vector_counts};

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
    /// Keep every call of the minor phases (set-up, wrap-up) instead of writing them
    /// coarsely (`--every-call`).
    pub every_call: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            algorithm: Algorithm::Exact,
            merge_sizes_pct: None,
            threshold: logicalize::DEFAULT_THRESHOLD,
            every_call: false,
        }
    }
}

/// Where the pass is, for a progress bar: `done` of `total` events (every rank surveyed,
/// then the merged ranks read twice for the compression; `total` is 0 while surveying).
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    pub done: u64,
    pub total: u64,
}

/// The result.
pub struct Skeleton {
    pub program: Program,
    pub summary: Summary,
    /// Each merged rank's compute as the pass read it from the trace (the spans between
    /// calls, less the failed polls made in them and the time off the core), in
    /// seconds: what the written skeleton's compute is checked against
    /// ([`ComputeCheck`]).
    pub traced_compute_s: BTreeMap<u32, f64>,
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
    let mut survey = survey::survey(input, &mut summary, &mut site_name, progress);
    // A run cut short (no rank reached MPI_Finalize: the run was killed or crashed):
    // every rank up to the longest consistent cut, surveyed again. When some ranks did
    // finish, the run got through and a rank without its end lost only the tail of its
    // file: it runs the program of the ranks that finished.
    let plan;
    let cut_ranks;
    let cut_input;
    let mut input = input;
    if !summary.incomplete_ranks.is_empty() && survey.complete.is_empty() {
        if let Some(p) = prefix::consistent_cut(input.ranks) {
            plan = p;
            cut_ranks = prefix::Cut {
                inner: input.ranks,
                plan: &plan,
            };
            cut_input = Input {
                name: input.name.clone(),
                ranks: &cut_ranks,
                site_name: input.site_name,
                origin: input.origin.clone(),
            };
            input = &cut_input;
            let stopped = std::mem::take(&mut summary.incomplete_ranks);
            let missing = std::mem::take(&mut summary.missing_ranks);
            let unreadable = std::mem::take(&mut summary.unreadable_ranks);
            summary.raw_events = 0;
            survey = survey::survey(input, &mut summary, &mut site_name, progress);
            summary.missing_ranks = missing;
            summary.unreadable_ranks = unreadable;
            summary.cut_events = plan.cut_events();
            summary.cut_ranks = stopped.clone();
            summary.notes.push(plan.describe(&stopped));
        }
    }
    // Ranks read to their end are merged; with none, whatever there is.
    let merged_ranks = if survey.complete.is_empty() {
        survey.readable.clone()
    } else {
        survey.complete.clone()
    };
    // The merged ranks are read twice more.
    let total = summary.raw_events
        + 2 * merged_ranks
            .iter()
            .map(|r| survey.events_per_rank.get(r).copied().unwrap_or(0))
            .sum::<u64>();

    // 1. Topology.
    let report = logicalize::logicalize(
        &survey.matrix,
        &logicalize::Options {
            threshold: options.threshold,
        },
    );
    let dirs = topo::Directions::choose(
        Some(&report),
        survey.grid.as_deref(),
        n_ranks,
        &survey.peers,
    );
    summary.unexplained_bytes_pct = report.unexplained.bytes_pct;
    summary.set_aside_bytes_pct = report.set_aside.bytes_pct;
    summary.matched_pattern = report.patterns.first().map(|p| p.name.clone());
    summary.topology = perfskel_grammar::printer::topology(&dirs.topology);
    summary.declared_topology = survey
        .grid
        .as_deref()
        .and_then(|g| topo::declared_topology(g, n_ranks))
        .is_some_and(|t| t == dirs.topology);

    // 2. Tokens and 3. per-rank nests, one rank at a time.
    let mut comms = comms::Comms::build(survey.comms, n_ranks, &dirs.topology);
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
    let size_classes = survey.events.size_classes();
    let (any_sites, reply_sites) = survey.events.wildcards();
    let exchanges = exchange::decide(
        &survey.stretches,
        &merged_ranks,
        n_ranks,
        &|r, id| comms.world_copy(r, id),
        &|r, peer| {
            u64::try_from(peer).is_ok_and(|p| {
                dirs.peers
                    .get(r as usize)
                    .is_some_and(|v| v.contains(&Some(p)))
            })
        },
    );
    if let Some(v) = exchanges.values().next() {
        // The four kinds: data-addressed, partners by the mean, partners exactly in a
        // loop, each rank's own partners in tables.
        #[derive(PartialEq, Clone, Copy)]
        enum Sort {
            Data,
            Mean,
            Exact,
            Table,
        }
        let sort = |e: &exchange::Exchange| match (e.partners, e.shift, &e.table) {
            (None, _, _) => Sort::Data,
            (Some(_), _, Some(_)) => Sort::Table,
            (Some(_), None, None) => Sort::Mean,
            (Some(_), Some(_), None) => Sort::Exact,
        };
        let events = |which: Sort| -> u64 {
            exchanges
                .values()
                .flatten()
                .filter(|e| sort(e) == which)
                .map(|e| e.last + 1 - e.first)
                .sum()
        };
        let listed = |which: Sort| -> (usize, String) {
            let shown: Vec<String> = v
                .iter()
                .filter(|e| sort(e) == which)
                .map(|e| match (&e.table, e.partners) {
                    (Some(t), _) => {
                        let messages: usize = t.sends.iter().map(Vec::len).sum();
                        format!("{messages} messages")
                    }
                    (None, Some(p)) => format!("{p} x {} B", e.bytes),
                    (None, None) => format!("{} x {} B", e.rounds, e.bytes),
                })
                .collect();
            let n = shown.len();
            let mut text = shown[..n.min(6)].join(", ");
            if n > 6 {
                text.push_str(&format!(", ... ({} more)", n - 6));
            }
            (n, text)
        };
        summary.exchange_events =
            events(Sort::Data) + events(Sort::Mean) + events(Sort::Exact) + events(Sort::Table);
        let (n, text) = listed(Sort::Data);
        if n > 0 {
            summary.notes.push(format!(
                "{n} data-addressed exchange(s) ({} events over all ranks: sends to peers the data chose, any-source receives) are written as rounds of a shift exchange over every other rank with the mean volume per rank, their messages in flight up to a window and completed after the phase (rounds x message size: {text})",
                events(Sort::Data)
            ));
        }
        let (n, text) = listed(Sort::Mean);
        if n > 0 {
            summary.notes.push(format!(
                "{n} partner exchange(s) ({} events over all ranks: receives posted from named peers, sends to named peers, a different number on each rank) are written as messages to the ranks after each rank, the mean number per rank (rounded) carrying the mean volume per rank (messages x size: {text})",
                events(Sort::Mean)
            ));
        }
        let (n, text) = listed(Sort::Exact);
        if n > 0 {
            summary.notes.push(format!(
                "{n} partner exchange(s) ({} events over all ranks: every rank posted receives from and sent to each other rank of its group, all completed) are written as a loop over the same pairs, one exchange after another, with the mean size (messages x size: {text})",
                events(Sort::Exact)
            ));
        }
        let (n, text) = listed(Sort::Table);
        if n > 0 {
            summary.notes.push(format!(
                "{n} partner exchange(s) ({} events over all ranks: receives posted from named peers, sends to named peers, a different number on each rank) are written with each rank's own partners and sizes in per_rank tables, receives posted first as the application did (messages over all ranks: {text})",
                events(Sort::Table)
            ));
        }
    }
    // Task loops, where tags vary (a loop goes on while its receive gets one tag).
    let serve = if keep_tags {
        serve::Serve::default()
    } else {
        std::mem::take(&mut survey.serve).decide(&comms)
    };
    let policy = tokens::Policy {
        dirs: &dirs,
        comms: &comms,
        keep_tags,
        size_map: &size_map,
        cancelled: &survey.cancelled,
        exchanges: &exchanges,
        serve: &serve,
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
    let no_sites = BTreeMap::new();
    // Serve sites by trace-wide site index, and their loop tags.
    let mut serve_tags: BTreeMap<u32, u32> = BTreeMap::new();
    for &rank in &merged_ranks {
        // Sites are interned in the order of the rank's site table, before its tokens.
        let local: BTreeMap<u64, u32> = survey
            .sites
            .get(&rank)
            .unwrap_or(&no_sites)
            .iter()
            .map(|(id, key)| (*id, intern_site(site_name(key).unwrap_or_default())))
            .collect();
        let unknown = intern_site(String::new());
        let site_of = |id: u64| local.get(&id).copied().unwrap_or(unknown);
        let infos: BTreeMap<u64, tokens::SiteInfo> = survey
            .sites
            .get(&rank)
            .unwrap_or(&no_sites)
            .iter()
            .map(|(id, key)| {
                let key = (key.object.clone(), key.offset);
                if let (Some(y), Some(idx)) = (serve.sites.get(&key), local.get(id)) {
                    serve_tags.insert(*idx, *y);
                }
                let info = tokens::SiteInfo {
                    classes: size_classes.get(&key).map(Vec::as_slice),
                    any_receive: any_sites.contains(&key),
                    reply: reply_sites.contains(&key),
                    serve: serve.sites.contains_key(&key),
                };
                (*id, info)
            })
            .collect();
        let info_of = |id: u64| infos.get(&id).copied().unwrap_or_default();
        let events = survey.events_per_rank.get(&rank).copied().unwrap_or(0);
        let compressed = compress_rank(
            input.ranks,
            rank,
            &policy,
            &site_of,
            &info_of,
            options.algorithm,
            &mut |seen| {
                progress(Progress {
                    done: done + seen,
                    total,
                })
            },
        );
        done += 2 * events;
        progress(Progress { done, total });
        let Some((nest, counts)) = compressed else {
            // Read fine in the survey, not now: the file changed or went away.
            if !summary.unreadable_ranks.contains(&rank) {
                summary.unreadable_ranks.push(rank);
            }
            continue;
        };
        summary.tokens += nest.tokens;
        summary.rank_description_len += nest.description_len as u64;
        summary.unmatched_requests += counts.unmatched_requests;
        summary.unknown_waits += counts.unknown_waits;
        summary.dropped_events += counts.dropped_events;
        for (why, n) in &counts.dropped {
            *summary.dropped.entry(why.clone()).or_default() += n;
        }
        p2p_bytes += counts.p2p_bytes;
        explicit_bytes += counts.explicit_bytes;
        app_ns = app_ns.max(counts.app_ns);
        in_loop += nest.in_loop_ns;
        covered += (counts.app_ns as f64).max(nest.total_ns);
        let mut acc = nest::Acc::default();
        acc.add(counts.trailing_gap_ns, 0);
        trailing.insert(rank, acc);
        nests.push((rank, nest));
    }
    let app_ns = app_ns as f64;
    summary.explicit_peer_bytes_pct = if p2p_bytes > 0 {
        (10_000.0 * explicit_bytes as f64 / p2p_bytes as f64).round() / 100.0
    } else {
        0.0
    };
    // Share of each rank's run (MPI_Init end to MPI_Finalize start) inside loops, to
    // 0.001 %: a short loop after a slow first connection (0.3 ms of 0.7 s) is not 0.
    summary.loop_time_pct = if covered > 0.0 {
        (100_000.0 * in_loop / covered).round() / 1000.0
    } else {
        0.0
    };

    // Task loops: on every rank, or (the tags taken away again) on none.
    if !serve_tags.is_empty() {
        let rewritten: Option<Vec<Vec<nest::MNode>>> = nests
            .iter()
            .map(|(r, n)| serve::to_while(&n.nodes, *r, &serve_tags))
            .collect();
        match rewritten {
            Some(all) => {
                let loops = all.iter().map(|n| serve::count_whiles(n)).sum::<usize>();
                for ((_, n), w) in nests.iter_mut().zip(all) {
                    n.nodes = w;
                }
                summary.notes.push(format!(
                    "{} receive site(s) took any tag and went on while it was the task's: {loops} task loop(s) over all ranks are `while recv ... tag T`, each rank taking the tasks that come to it; the sends of those messages keep their tags",
                    serve_tags.len()
                ));
            }
            None => {
                for (_, n) in nests.iter_mut() {
                    n.nodes = serve::strip(&n.nodes);
                }
                summary.notes.push(format!(
                    "{} receive site(s) took any tag and went on while it was the task's, but some rank's calls there are not one loop: written with the traced number of tasks per rank",
                    serve_tags.len()
                ));
            }
        }
    }

    // 4. Merge.
    let merger = merge::Merger { dirs: &dirs };
    let seqs: Vec<(u32, &[nest::MNode])> = nests
        .iter()
        .map(|(r, n)| (*r, n.nodes.as_slice()))
        .collect();
    let merged_nest = merger.merge(&seqs);
    // Branches that differ only in whom they talk to: one body with tables of peers.
    let merged_nest = merger.tabulate_ifs(merged_nest);
    // 4b. Compute before a loop that differs from the compute between its iterations.
    let merged_nest = nest::settle_entries(
        merged_nest,
        fold::MINOR_SHARE * app_ns * nests.len().max(1) as f64,
    );
    // Iterations that differ every N-th time: one loop reading its iteration number.
    let merged_nest = fold::fold_approx(&merged_nest).unwrap_or(merged_nest);
    // Set-up and wrap-up phases, call by call, only when asked.
    let merged_nest = if options.every_call {
        merged_nest
    } else {
        let before = fold::size(&merged_nest);
        let coarse = fold::coarsen(merged_nest, app_ns, nests.len());
        let after = fold::size(&coarse);
        if after < before {
            summary.notes.push(format!(
                "phases outside the main loops that take under {} % of the run are written coarsely ({before} -> {after} statements before compute): collectives between other calls are grouped by kind, and calls of one kind in a row are one statement with the mean size and the first call site (`--every-call` keeps each call, in order)",
                fold::MINOR_SHARE * 100.0
            ));
        }
        coarse
    };
    // Blocks that differ only in a peer that steps by a constant: a loop over peers.
    let mut merged_nest = peers::peer_loops(merged_nest, &dirs);
    // Compute in loops that read their iteration number: each rank's total, over the
    // visits the written program makes.
    let respread = fold::keep_totals(&mut merged_nest);
    if respread > 0 {
        summary.notes.push(format!(
            "{respread} compute statement(s) in loops that read their iteration number run more or less often than the application ran those spans: each keeps every rank's total time, spread evenly over the visits the loop makes"
        ));
    }
    // Each rank's compute, for the check of the written skeleton against it.
    let traced_compute_s = nest_compute(&merged_nest, &trailing);
    // Communicators no kept statement uses are not declared (`check` would warn).
    let mut used = std::collections::BTreeSet::new();
    used_comms(&merged_nest, &mut used);
    let unused = comms.keep_used(&used);
    if unused > 0 {
        summary.notes.push(format!(
            "{unused} communicator(s) the application made but no kept call uses are not declared"
        ));
    }

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
        step_depth: 0,
        windows: 0,
    };
    let mut stmts: Vec<Stmt> = comms
        .decls
        .iter()
        .filter(|d| d.kept)
        .map(|d| {
            let mut s = Stmt::new(StmtKind::CommDecl(Box::new(
                perfskel_grammar::ast::CommDecl {
                    name: Ident::new(d.name.clone()),
                    def: d.def.clone(),
                },
            )));
            s.site = d.site.clone().map(|text| Site {
                text,
                pos: Default::default(),
            });
            s.trivia.trailing = Some(format!("# {}", d.note.unwrap_or(d.op.mpi_name())));
            s
        })
        .collect();
    stmts.extend(builder.block(&merged_nest, &traced));
    // Packing between a receive's post and the send: before the post, so that blocks
    // along dimensions whose packing did or did not clear the floor are alike.
    if !options.every_call {
        let (slid, moved) = negligible::slide_before_posts(stmts);
        stmts = slid;
        if moved > 0 {
            summary.notes.push(format!(
                "{moved} compute statement(s) of at most {} us right after a receive's post moved before the post (the receive is posted that much later; `--every-call` keeps them)",
                negligible::SLIDE_MAX_S * 1e6
            ));
        }
    }
    // Blocks that differ only in the grid dimension they step along: a loop over
    // dimensions.
    let (mut stmts, dimension_loops) = dims::dimension_loops(stmts, &dirs.topology);
    if dimension_loops > 0 {
        summary.notes.push(format!(
            "{dimension_loops} run(s) of blocks alike but for the grid dimension they step along are loops over dimensions (`+d(dim)`, sizes and compute per dimension as `[...][dim]`)"
        ));
    }
    // The compute between the last call and MPI_Finalize.
    if let Some(c) = builder.compute(&trailing, &traced) {
        stmts.push(c);
    }
    // Compute spans too small to matter go with their block's largest; small
    // collectives of one kind in a row are a loop.
    if !options.every_call {
        let (joined_stmts, joined) = negligible::join_small(stmts, app_ns, n_ranks);
        stmts = joined_stmts;
        if joined.computes > 0 {
            summary.notes.push(format!(
                "{} compute statement(s) that take under {} % of the run each (over the whole run, on the rank where they are longest) joined the largest compute of their block, {} with no other compute in theirs left out (counted with the compute too short to write; `--every-call` keeps them)",
                joined.computes,
                negligible::NEGLIGIBLE * 100.0,
                joined.dropped
            ));
        }
        if joined.runs > 0 {
            summary.notes.push(format!(
                "{} run(s) of small blocking collectives of one kind (at most {} B: they cost alike) are loops with the mean size and the first call site ({} calls; `--every-call` keeps them apart)",
                joined.runs,
                negligible::SMALL_BYTES,
                joined.run_stmts
            ));
        }
        builder.dropped_compute_ns += joined.dropped_s * 1e9;
    }
    // The data-addressed exchanges' messages in flight, completed after their phase.
    if builder.windows > 0 {
        stmts = build::complete_windows(stmts);
    }
    summary.statements = count_statements(&stmts);
    summary.loops = builder.loops;
    summary.rank_conditionals = builder.rank_conditionals;
    summary.explicit_peer_statements = builder.explicit_peer_stmts;
    if dimension_loops > 0 {
        // The fold joined blocks: count what is written.
        let (loops, rank_ifs, explicit) = dims::census(&stmts);
        summary.loops = loops;
        summary.rank_conditionals = rank_ifs;
        summary.explicit_peer_statements = explicit;
    }
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
        summary.raw_events,
        summary.statements,
        summary.algorithm,
        (summary.loop_time_pct * 10.0).round() / 10.0
    ));
    header.leading.push(match &summary.matched_pattern {
        _ if summary.declared_topology => format!(
            "# Topology {}: the application's own (MPI_Cart_create), in its dimension order.",
            summary.topology
        ),
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
        memory: memory_header(&survey.memory, &merged_ranks),
        body: Block {
            stmts,
            end_comments: Vec::new(),
        },
    };
    Skeleton {
        program,
        summary,
        traced_compute_s,
    }
}

/// The `memory` header line: the median working set over the merged ranks and the
/// median probe rate over those that probed (the tracer probes on rank 0); none unless
/// every merged rank has a memory record and one has a rate (traces before format 3,
/// or `PERFSKEL_TRACE_PROBE=0`).
fn memory_header(
    records: &BTreeMap<u32, crate::trace::Memory>,
    ranks: &[u32],
) -> Option<Decl<perfskel_grammar::ast::Memory>> {
    use crate::stats::median;
    let mut sets = Vec::new();
    let mut rates = Vec::new();
    for rank in ranks {
        let m = records.get(rank)?;
        sets.push(m.working_set as f64);
        if m.probe_rate > 0 {
            rates.push(m.probe_rate as f64);
        }
    }
    // Whole KiB (at least one) and whole MB/s: sizes must be whole numbers of bytes, and
    // a fraction of GB (33.574 GB) is not always one in floating point.
    let kib = (median(&sets)? / 1024.0).round().max(1.0);
    let mb_per_s = (median(&rates)? / 1e6).round().max(1.0);
    let mut decl = Decl::new(perfskel_grammar::ast::Memory {
        working_set: Spanned::derived(Size {
            value: kib,
            unit: SizeUnit::KiB,
        }),
        rate: Spanned::derived(Size {
            value: mb_per_s,
            unit: SizeUnit::MB,
        }),
    });
    decl.trivia.trailing = Some(
        "# measured: working set of the ranks' data, and the memory probe's rate over it where traced"
            .into(),
    );
    Some(decl)
}

/// Tokens and the loop nest of one rank, reading it twice: the tokens go into the
/// streaming loop discovery, then, once the nest is known, the same tokens again through
/// the [`nest::Walk`] that sums the compute spans of each body position. Neither read
/// keeps events or tokens (but exact discovery keeps token ids up to
/// [`compress::EXACT_MAX_TOKENS`]). `None` when the rank cannot be read again, or reads
/// differently the second time. `progress` gets the events read so far in both reads.
fn compress_rank<'a>(
    ranks: &dyn Ranks,
    rank: u32,
    policy: &'a tokens::Policy<'a>,
    site_of: &'a dyn Fn(u64) -> u32,
    info_of: &'a dyn Fn(u64) -> tokens::SiteInfo<'a>,
    algorithm: Algorithm,
    progress: &mut dyn FnMut(u64),
) -> Option<(nest::RankNest, tokens::RankCounts)> {
    let mut seen = 0u64;
    let mut tick = |seen: &mut u64| {
        *seen += 1;
        if seen.is_multiple_of(survey::PROGRESS_EVERY) {
            progress(*seen);
        }
    };
    // 1. Discovery.
    let mut discovery = compress::Discovery::new(algorithm);
    let mut tokenizer = tokens::Tokenizer::new(rank, policy, site_of, info_of);
    source::read_rank(ranks, rank, &mut |ev| {
        tick(&mut seen);
        tokenizer.push(ev, &mut |token| discovery.push(token.id));
    })
    .ok()?;
    let (table, counts) = tokenizer.finish(&mut |token| discovery.push(token.id));
    let nest = discovery.finish();
    // 2. Statistics of the compute spans per body position.
    let mut walk = nest::Walk::new(&nest);
    let mut tokenizer = tokens::Tokenizer::new(rank, policy, site_of, info_of);
    let mut visit = |t: tokens::Token| {
        walk.visit_polling(t.id, t.gap_ns, t.dur_ns, t.sizes, (t.polls, t.poll_ns))
    };
    source::read_rank(ranks, rank, &mut |ev| {
        tick(&mut seen);
        tokenizer.push(ev, &mut visit);
    })
    .ok()?;
    tokenizer.finish(&mut visit);
    Some((walk.finish(&nest, &table, rank)?, counts))
}

/// The communicators the tokens of a nest use.
fn used_comms(nodes: &[nest::MNode], out: &mut std::collections::BTreeSet<comms::CommRef>) {
    for node in nodes {
        match node {
            nest::MNode::Tok { tok, .. } => {
                out.insert(tok.comm);
            }
            nest::MNode::Loop { body, .. }
            | nest::MNode::Steps { body, .. }
            | nest::MNode::While { body, .. } => used_comms(body, out),
            nest::MNode::If { branches } => {
                for (_, body) in branches {
                    used_comms(body, out);
                }
            }
            nest::MNode::When {
                then, otherwise, ..
            } => {
                used_comms(then, out);
                used_comms(otherwise, out);
            }
        }
    }
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

/// Each rank's compute in a merged nest and the compute after its last call, in seconds
/// (the failed polls in its spans left out: the skeleton makes them again).
fn nest_compute(nodes: &[nest::MNode], trailing: &BTreeMap<u32, nest::Acc>) -> BTreeMap<u32, f64> {
    fn add(acc: &nest::Accs, out: &mut BTreeMap<u32, f64>) {
        for (r, a) in acc {
            *out.entry(*r).or_default() += a.sum_ns;
        }
    }
    fn walk(nodes: &[nest::MNode], out: &mut BTreeMap<u32, f64>) {
        for node in nodes {
            match node {
                nest::MNode::Tok { acc, .. } => add(acc, out),
                nest::MNode::Loop { body, entry, .. } => {
                    add(entry, out);
                    walk(body, out);
                }
                nest::MNode::Steps { body, .. } | nest::MNode::While { body, .. } => {
                    walk(body, out)
                }
                nest::MNode::If { branches } => {
                    for (_, body) in branches {
                        walk(body, out);
                    }
                }
                nest::MNode::When {
                    then, otherwise, ..
                } => {
                    walk(then, out);
                    walk(otherwise, out);
                }
            }
        }
    }
    let mut ns = BTreeMap::new();
    walk(nodes, &mut ns);
    add(trailing, &mut ns);
    ns.into_iter().map(|(r, t)| (r, t * 1e-9)).collect()
}
