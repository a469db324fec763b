//! Merged nest → skeleton IR: takes the SPMD nest, the directions and communicators,
//! gives the statements of the program body with their call sites and comments saying
//! where each loop came from (iterations, call sites, time covered).
//!
//! Compute spans are summarized per statement: the mean over every execution, fixed when
//! the ranks agree; `per_rank(...)` when some ranks compute more (load imbalance: a rank
//! whose median span differs by 2 % from the others' or whose mean differs by 10 %, or
//! ranks for which the following operation is a no-op); `normal(mean, sd)` when the
//! spread of the steady spans is meaningful (at least 5 % of the mean) but narrow (at most
//! a third of the mean: a wider normal would be clamped at zero by the back ends, which
//! raises the mean, so a wide spread keeps a fixed mean and says so in a comment). The
//! spread leaves out spans beyond three interquartile ranges of the quartiles (see
//! [`super::spread`]): rare outliers count in
//! the mean but do not become noise on every iteration.

use std::collections::{BTreeMap, BTreeSet};

use perfskel_grammar::ast::{
    BinOp, Block, Collective, Compute, Duration, Else, Expr, ExprKind, Ident, If, Loop, MsgSize,
    P2p, P2pOp, Peer, Pick, Site, Size, SizeSpec, Spanned, Stmt, StmtKind, TimeSpec, TimeUnit,
    Wait, WaitOp, While,
};

use super::comms::{bin, CommRef, Comms};
use super::exchange::PartnerTable;
use super::fold::{Atom, Cond};
use super::nest::SizeAcc;
use super::nest::{Acc, MNode};
use super::spread::Spread;
use super::tokens::{CollSize, Half, Kind, PeerAbs, Tok};
use super::topo::Directions;

/// Compute spans whose mean over all executions is below this are not written (loop
/// overhead and timer noise; their time is reported).
pub(crate) const MIN_COMPUTE_NS: f64 = 5_000.0;

/// When the ranks' median spans differ by more than this fraction of the pooled median,
/// every rank gets its own compute time (`per_rank`).
const IMBALANCE: f64 = 0.02;

/// Whether some ranks' typical spans really differ. A rank whose spans are longer makes
/// every rank wait for it wherever they synchronize, so a gap of [`IMBALANCE`] between
/// the highest and the lowest median is kept per rank, but only when it is more than
/// sampling noise: every rank has at least 4 spans there, and the gap exceeds three
/// standard errors of the two medians (a median's standard error is about
/// 1.2533 sd / √n). Single spans and short loops fall back to the 10 % rule on means.
fn medians_differ(acc: &BTreeMap<u32, Acc>, center: f64) -> bool {
    if acc.len() < 2 || acc.values().any(|a| a.n < 4) {
        return false;
    }
    let stat = |a: &Acc| {
        let se = 1.2533 * a.spread.robust_sd() / (a.n as f64).sqrt();
        (a.spread.median(), se)
    };
    let mut stats = acc.values().map(stat);
    let Some(first) = stats.next() else {
        return false;
    };
    let (low, high) = stats.fold((first, first), |(lo, hi), m| {
        (
            if m.0 < lo.0 { m } else { lo },
            if m.0 > hi.0 { m } else { hi },
        )
    });
    let gap = high.0 - low.0;
    // Against each rank's own spread: ranks that draw spans of spread sd from one
    // distribution wait for each other about 0.56 sd an iteration (two ranks), which
    // fixed per-rank values would lose, while a gap g between fixed values costs g / 2;
    // a gap under the ranks' own spread is better written as one spread (`normal`).
    let within = acc.values().map(|a| a.spread.robust_sd()).sum::<f64>() / acc.len() as f64;
    gap > (IMBALANCE * center).max(MIN_COMPUTE_NS)
        && gap > 3.0 * low.1.hypot(high.1)
        && gap > within
}

pub(crate) struct Builder<'a> {
    pub dirs: &'a Directions,
    pub comms: &'a Comms,
    pub sites: &'a [String],
    pub n_ranks: u32,
    /// Ranks whose events were merged (the others run the program as inferred).
    pub traced: Vec<u32>,
    pub app_ns: f64,
    // What the summary reports.
    pub dropped_compute_ns: f64,
    pub rank_conditionals: usize,
    pub explicit_peer_stmts: usize,
    pub loops: usize,
    pub omitted_noops: usize,
    /// Request slots whose operation was left out as a no-op everywhere.
    pub vanished: std::collections::BTreeSet<u32>,
    /// How many loops reading their iteration number enclose the block being built.
    pub step_depth: usize,
    /// Data-addressed exchanges written so far (their windowed handles are numbered).
    pub windows: usize,
}

/// The most messages of a data-addressed exchange a rank keeps in flight each way
/// (`window W`). The application's receives never block: it takes messages from any
/// source as they come and polls in between (HPCC's RandomAccess), so its ranks run
/// apart, and with ranks sharing cores one runs many rounds while another waits for a
/// core. Written as blocking `sendrecv`s, every round waited for its partner: HPCC at 4
/// ranks on 2 cores ran 28.1 s against the application's 22.3-23.5 s; with rounds kept
/// in flight, 30.1 s (1), 27.8 s (3), 28.5 s (16), 22.3 s (64), 23.2 s (256), 23.9 s
/// (8192). Enough for a scheduler's time slices of rounds, short of unbounded.
pub(crate) const EXCHANGE_WINDOW: u64 = 1024;

/// The most bytes a window keeps in flight each way (the Rust runtime's receives each
/// have a buffer): larger messages get a shorter window.
pub(crate) const EXCHANGE_WINDOW_BYTES: u64 = 64 << 20;

/// The window of a data-addressed exchange whose messages have `bytes`.
fn exchange_window(bytes: u64) -> u64 {
    (EXCHANGE_WINDOW_BYTES / bytes.max(1)).clamp(1, EXCHANGE_WINDOW)
}

impl Builder<'_> {
    pub fn block(&mut self, nodes: &[MNode], universe: &[u32]) -> Vec<Stmt> {
        let mut out = Vec::new();
        for node in nodes {
            match node {
                MNode::Tok {
                    tok:
                        tok @ Tok {
                            kind:
                                Kind::Exchange {
                                    table: Some(table), ..
                                },
                            ..
                        },
                    acc,
                } => out.extend(self.exact_exchange(tok, table, acc, universe)),
                MNode::Tok {
                    tok:
                        tok @ Tok {
                            kind:
                                Kind::Exchange {
                                    bytes,
                                    partners,
                                    shift,
                                    table: None,
                                },
                            ..
                        },
                    acc,
                } => out.push(self.exchange(tok, *bytes, *partners, *shift, acc, universe)),
                MNode::Tok { tok, acc } => {
                    if let Some(c) = self.compute(acc, universe) {
                        out.push(c);
                    }
                    if let Some(s) = self.op(tok, acc) {
                        out.push(s);
                    }
                }
                MNode::Loop {
                    counts,
                    body,
                    entry,
                } => {
                    debug_assert!(entry.is_empty(), "settle_entries leaves no entry");
                    out.push(self.looped(counts, body, universe));
                }
                MNode::While { counts, body } => out.extend(self.task_loop(counts, body, universe)),
                MNode::Steps { count, body } => {
                    self.loops += 1;
                    let counts: BTreeMap<u32, u64> =
                        universe.iter().map(|r| (*r, *count)).collect();
                    let provenance = self.provenance(&counts, body);
                    self.step_depth += 1;
                    let var = self.step_var();
                    let stmts = self.block(body, universe);
                    self.step_depth -= 1;
                    let mut stmt = Stmt::new(StmtKind::Loop(Box::new(Loop {
                        count: Expr::int(*count as i64),
                        var: Some(Ident::new(var.clone())),
                        body: Block {
                            stmts,
                            end_comments: Vec::new(),
                        },
                    })));
                    stmt.trivia.leading.push(provenance);
                    stmt.trivia.leading.push(if steps_peers(body) {
                        format!("# One iteration per peer: `{var}` numbers them from 0.")
                    } else {
                        format!("# Iterations differ every few times: `{var}` numbers them from 0.")
                    });
                    out.push(stmt);
                }
                MNode::When { .. } => {
                    // A `When` whose `otherwise` is one `When` is an `else if`.
                    let mut built: Vec<(Option<Expr>, Vec<Stmt>)> = Vec::new();
                    let mut notes = Vec::new();
                    let mut at = Some(node);
                    while let Some(MNode::When {
                        cond,
                        then,
                        otherwise,
                        recorded,
                    }) = at
                    {
                        built.push((
                            Some(step_condition(cond, &self.step_var())),
                            self.block(then, universe),
                        ));
                        if let Some((k, written)) = recorded {
                            notes.push(format!(
                                "# The application ran this on {k} iterations with no pattern (data-dependent); here on {written}, evenly spread."
                            ));
                        }
                        at = match otherwise.as_slice() {
                            [next @ MNode::When { .. }] => Some(next),
                            [] => None,
                            rest => {
                                built.push((None, self.block(rest, universe)));
                                None
                            }
                        };
                    }
                    let mut stmt = if_chain(built);
                    stmt.trivia.leading.extend(notes);
                    out.push(stmt);
                }
                MNode::If { branches } => {
                    self.rank_conditionals += 1;
                    let mut built: Vec<(Option<Expr>, Vec<Stmt>)> = Vec::new();
                    let n = branches.len();
                    for (i, (ranks, body)) in branches.iter().enumerate() {
                        let stmts = self.block(body, ranks);
                        let cond = (i + 1 < n).then(|| rank_condition(ranks));
                        built.push((cond, stmts));
                    }
                    // `if A {} else {B}` reads better as `if not A {B}`.
                    if let [(Some(cond), first), (None, _)] = built.as_slice() {
                        if first.is_empty() {
                            let cond = Expr::new(ExprKind::Unary(
                                perfskel_grammar::ast::UnaryOp::Not,
                                Box::new(cond.clone()),
                            ));
                            let rest = built.pop().map(|b| b.1).unwrap_or_default();
                            built = vec![(Some(cond), rest)];
                        }
                    }
                    let mut stmt = if_chain(built);
                    stmt.trivia.leading.push(format!(
                        "# Ranks differ here: {}.",
                        branches
                            .iter()
                            .enumerate()
                            .map(|(i, (ranks, _))| {
                                let list = list_ranks(ranks);
                                if i + 1 == n {
                                    format!("else {list} (and untraced ranks)")
                                } else {
                                    list
                                }
                            })
                            .collect::<Vec<_>>()
                            .join("; ")
                    ));
                    out.push(stmt);
                }
            }
        }
        out
    }

    /// One round of an exchange: a loop over every other rank (data-addressed) or over
    /// as many ranks after this one as it had partners, with the round's compute spread
    /// over its messages.
    fn exchange(
        &mut self,
        tok: &Tok,
        bytes: u64,
        partners: Option<u64>,
        shift: Option<(u64, u64)>,
        acc: &BTreeMap<u32, Acc>,
        universe: &[u32],
    ) -> Stmt {
        self.loops += 1;
        let others = match partners {
            Some(p) => p.max(1) as f64,
            None => f64::from(self.n_ranks.saturating_sub(1).max(1)),
        };
        let mut body = Vec::new();
        if let Some(mut c) = self.compute(acc, universe) {
            if let StmtKind::Compute(c) = &mut c.kind {
                divide_time(&mut c.time, others);
                divide_polls(&mut c.polls, others);
            }
            body.push(c);
        }
        let var = || Expr::new(ExprKind::Var(Ident::new(EXCHANGE_VAR)));
        let rank = || Expr::new(ExprKind::Rank);
        let nranks = || Expr::new(ExprKind::NRanks);
        // rank((rank + 1 + j) % nranks) and rank((rank - 1 - j) % nranks); in groups of
        // g ranks, s apart: rank(rank / g * g + (rank + s * (1 + j)) % g), ...
        let (to, from) = match shift {
            Some((s, g)) if g != u64::from(self.n_ranks) || s != 1 => {
                let g = i64::try_from(g).unwrap_or(i64::MAX);
                let s = i64::try_from(s).unwrap_or(1);
                let step = || {
                    let one_more = bin(BinOp::Add, Expr::int(1), var());
                    if s == 1 {
                        one_more
                    } else {
                        bin(BinOp::Mul, Expr::int(s), one_more)
                    }
                };
                let base = || {
                    bin(
                        BinOp::Mul,
                        bin(BinOp::Div, rank(), Expr::int(g)),
                        Expr::int(g),
                    )
                };
                let within = |op| bin(BinOp::Rem, bin(op, rank(), step()), Expr::int(g));
                if g == i64::from(self.n_ranks) {
                    (within(BinOp::Add), within(BinOp::Sub))
                } else {
                    (
                        bin(BinOp::Add, base(), within(BinOp::Add)),
                        bin(BinOp::Add, base(), within(BinOp::Sub)),
                    )
                }
            }
            _ => (
                bin(
                    BinOp::Rem,
                    bin(BinOp::Add, bin(BinOp::Add, rank(), Expr::int(1)), var()),
                    nranks(),
                ),
                bin(
                    BinOp::Rem,
                    bin(BinOp::Sub, bin(BinOp::Sub, rank(), Expr::int(1)), var()),
                    nranks(),
                ),
            ),
        };
        let b = size(bytes.max(1));
        if partners.is_none() {
            // Data-addressed: each round's messages stay in flight (see
            // `EXCHANGE_WINDOW`); `complete_windows` completes them after the phase.
            let window = exchange_window(bytes);
            let n = self.windows;
            self.windows += 1;
            let post = |op, name: String, peer| {
                let mut stmt = Stmt::new(StmtKind::P2p(Box::new(P2p {
                    op,
                    request: Some(Ident::new(name)),
                    peer: Spanned::derived(Peer::Rank(peer)),
                    size: MsgSize::Fixed(Spanned::derived(b)),
                    recv: None,
                    tag: None,
                    comm: self.comm_ident(tok.comm),
                    window: Some(Spanned::derived(window)),
                })));
                stmt.site = self.site_of(tok.site);
                stmt
            };
            body.push(post(P2pOp::Isend, format!("ds{n}"), to));
            body.push(post(P2pOp::Irecv, format!("dr{n}"), from));
        } else {
            let mut send = Stmt::new(StmtKind::P2p(Box::new(P2p {
                op: P2pOp::Sendrecv,
                request: None,
                peer: Spanned::derived(Peer::Rank(to)),
                size: MsgSize::Fixed(Spanned::derived(b)),
                recv: Some(Box::new((
                    Spanned::derived(Peer::Rank(from)),
                    MsgSize::Fixed(Spanned::derived(b)),
                ))),
                tag: None,
                comm: self.comm_ident(tok.comm),
                window: None,
            })));
            send.site = self.site_of(tok.site);
            if bytes == 0 {
                send.trivia.trailing =
                    Some("# 0 B in the application: a call that only synchronizes".into());
            }
            body.push(send);
        }
        let mut stmt = Stmt::new(StmtKind::Loop(Box::new(Loop {
            count: match partners {
                Some(p) => Expr::int(i64::try_from(p).unwrap_or(i64::MAX)),
                None => bin(BinOp::Sub, nranks(), Expr::int(1)),
            },
            var: Some(Ident::new(EXCHANGE_VAR)),
            body: Block {
                stmts: body,
                end_comments: Vec::new(),
            },
        })));
        let from = self
            .site(tok.site)
            .map(|s| format!(" from {s}"))
            .unwrap_or_default();
        stmt.trivia.leading.push(match (partners, shift) {
            (Some(p), Some((s, g))) => {
                let whom = if g == u64::from(self.n_ranks) {
                    "every other rank".to_string()
                } else {
                    format!("the other ranks of its group of {g}")
                };
                let apart = if s == 1 {
                    String::new()
                } else {
                    format!(" {s} apart")
                };
                format!(
                    "# Partner exchange{from}: every rank posted receives from and sent to {whom}{apart} ({p}), completing them all; here the same pairs, one after another."
                )
            }
            (None, _) => format!(
                "# Data-addressed exchange{from}: the application sent to peers its data chose and received from any source as messages came; one round here is a message to every other rank, up to {} rounds in flight.",
                exchange_window(bytes)
            ),
            (Some(_), None) => format!(
                "# Partner exchange{from}: the application posted receives from named peers and sent to named peers, a different number on each rank; here every rank sends the mean number of messages, to the ranks after it."
            ),
        });
        stmt
    }

    /// A partner exchange with each rank's own partners and sizes, as the application
    /// made it: every receive posted, then the sends in the application's order with
    /// the exchange's compute spread over them, then the receives completed. A small
    /// table is written slot by slot ([`PartnerTable::by_slot`], see
    /// [`slot_posts`]); a larger one as the graph itself ([`graph_posts`]).
    fn exact_exchange(
        &mut self,
        tok: &Tok,
        table: &PartnerTable,
        acc: &BTreeMap<u32, Acc>,
        universe: &[u32],
    ) -> Vec<Stmt> {
        let comm = self.comm_ident(tok.comm);
        let site = self.site_of(tok.site);
        let with_site = |mut stmt: Stmt| {
            stmt.site = site.clone();
            stmt
        };
        let recv_counts = counts(&table.recvs);
        let send_counts = counts(&table.sends);
        // The exchange's compute (per rank, the mean over the ranks) before each send.
        let total_sends: usize = send_counts.iter().sum();
        let mean_sends = (total_sends as f64 / send_counts.len().max(1) as f64).max(1.0);
        let compute = self.compute(acc, universe).map(|mut c| {
            if let StmtKind::Compute(c) = &mut c.kind {
                divide_time(&mut c.time, mean_sends);
                divide_polls(&mut c.polls, mean_sends);
            }
            c
        });
        let post = |op, request: Option<Ident>, (peer, size): (Expr, MsgSize), window| {
            with_site(Stmt::new(StmtKind::P2p(Box::new(P2p {
                op,
                request,
                peer: Spanned::derived(Peer::Rank(peer)),
                size,
                recv: None,
                tag: None,
                comm: comm.clone(),
                window,
            }))))
        };
        let by_slot = table.by_slot();
        let mut out = if by_slot {
            slot_posts(table, compute.as_ref(), &post, &with_site)
        } else {
            let posts = graph_posts(table, compute.as_ref(), &post, &with_site);
            self.loops += posts
                .iter()
                .filter(|s| matches!(s.kind, StmtKind::Loop(_)))
                .count();
            posts
        };
        if send_counts.iter().all(|c| *c == 0) {
            out.extend(compute);
        }
        let from = self
            .site(tok.site)
            .map(|s| format!(" from {s}"))
            .unwrap_or_default();
        let range = |counts: &[usize]| {
            let lo = counts.iter().min().copied().unwrap_or(0);
            let hi = counts.iter().max().copied().unwrap_or(0);
            if lo == hi {
                format!("{lo}")
            } else {
                format!("{lo} to {hi}")
            }
        };
        let how = if by_slot {
            ": `per_rank` lists the j-th partner of every rank (-1: none)"
        } else {
            ", written as the graph itself (a rank's partners and the sizes of its messages are the list entries from its own offset on, one per iteration of the partner loop)"
        };
        if let Some(first) = out.first_mut() {
            first.trivia.leading.push(format!(
                "# Partner exchange{from}: each rank posted receives from its own partners ({} per rank) and sent to its own ({} per rank), completing them all; here the same partners and sizes{how}.",
                range(&recv_counts),
                range(&send_counts)
            ));
        }
        out
    }

    fn looped(&mut self, counts: &BTreeMap<u32, u64>, body: &[MNode], universe: &[u32]) -> Stmt {
        self.loops += 1;
        let mut by_count: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
        for (r, c) in counts {
            by_count.entry(*c).or_default().push(*r);
        }
        let stmts = self.block(body, universe);
        let provenance = self.provenance(counts, body);
        if by_count.len() <= 1 {
            let count = by_count.keys().next().copied().unwrap_or(0);
            let mut stmt = Stmt::new(StmtKind::Loop(Box::new(Loop {
                count: Expr::int(count as i64),
                var: None,
                body: Block {
                    stmts,
                    end_comments: Vec::new(),
                },
            })));
            stmt.trivia.leading.push(provenance);
            return stmt;
        }
        // A data-dependent count: each rank keeps its recorded count.
        let mut groups: Vec<(u64, Vec<u32>)> = by_count.into_iter().collect();
        groups.sort_by_key(|(_, ranks)| ranks.len());
        let n = groups.len();
        let built = groups
            .iter()
            .enumerate()
            .map(|(i, (count, ranks))| {
                let stmt = Stmt::new(StmtKind::Loop(Box::new(Loop {
                    count: Expr::int(*count as i64),
                    var: None,
                    body: Block {
                        stmts: stmts.clone(),
                        end_comments: Vec::new(),
                    },
                })));
                ((i + 1 < n).then(|| rank_condition(ranks)), vec![stmt])
            })
            .collect();
        let mut stmt = if_chain(built);
        stmt.trivia.leading.push(provenance);
        stmt.trivia.leading.push(format!(
            "# The iteration count differs between ranks (data-dependent): {}.",
            groups
                .iter()
                .map(|(c, r)| format!("{c} on {}", list_ranks(r)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        stmt
    }

    /// A task loop ([`MNode::While`]): `while recv PEER SIZE tag T { body; compute }`,
    /// the compute before the receive written before the loop and at the end of its
    /// body (the receive runs once more than the body: the message that ends the loop).
    fn task_loop(
        &mut self,
        counts: &BTreeMap<u32, u64>,
        body: &[MNode],
        universe: &[u32],
    ) -> Vec<Stmt> {
        let Some((MNode::Tok { tok, acc }, rest)) = body.split_first() else {
            return self.block(body, universe);
        };
        let gap = self.compute(acc, universe);
        let head = match self.op(tok, acc) {
            Some(Stmt {
                kind: StmtKind::P2p(p2p),
                site,
                ..
            }) if p2p.op == P2pOp::Recv && p2p.tag.is_some() => (*p2p, site),
            // Not a receive with a tag: nothing to go on with (not made by `serve`).
            _ => return self.block(body, universe),
        };
        self.loops += 1;
        let mut stmts = self.block(rest, universe);
        stmts.extend(gap.clone());
        let mut stmt = Stmt::new(StmtKind::While(Box::new(While {
            recv: head.0,
            body: Block {
                stmts,
                end_comments: Vec::new(),
            },
        })));
        stmt.site = head.1;
        let mut by_count: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
        for (r, c) in counts {
            by_count.entry(*c).or_default().push(*r);
        }
        let taken = by_count
            .iter()
            .rev()
            .enumerate()
            .map(|(i, (c, r))| {
                let what = if i == 0 { " task(s)" } else { "" };
                format!("{c}{what} on {}", list_ranks(r))
            })
            .collect::<Vec<_>>()
            .join(", ");
        stmt.trivia
            .leading
            .push(self.provenance_of("Task loop", counts, body));
        stmt.trivia.leading.push(format!(
            "# The application received any tag here and went on while it was the task's; it took {taken}. Here each rank takes the tasks that come to it."
        ));
        let mut out: Vec<Stmt> = gap.into_iter().collect();
        out.push(stmt);
        out
    }

    fn provenance(&self, counts: &BTreeMap<u32, u64>, body: &[MNode]) -> String {
        let count = counts.values().max().copied().unwrap_or(0);
        self.provenance_of(&format!("{count} iterations"), counts, body)
    }

    /// `# WHAT from SITE to SITE: T per rank, S % of the run.`
    fn provenance_of(&self, what: &str, counts: &BTreeMap<u32, u64>, body: &[MNode]) -> String {
        let mut sites = Vec::new();
        collect_sites(body, &mut sites);
        let first = sites.first().and_then(|s| self.site(*s));
        let last = sites.last().and_then(|s| self.site(*s));
        let from = match (first, last) {
            (Some(a), Some(b)) if a == b => format!(" from {a}"),
            (Some(a), Some(b)) => format!(" from {a} to {b}"),
            _ => String::new(),
        };
        let n_ranks = counts.len().max(1) as f64;
        let total: f64 = super::nest::time(body) / n_ranks;
        let share = if self.app_ns > 0.0 {
            format!(", {:.1} % of the run", 100.0 * total / self.app_ns)
        } else {
            String::new()
        };
        format!("# {what}{from}: {} per rank{share}.", fmt_time(total))
    }

    /// The variable of the innermost loop reading its iteration number.
    fn step_var(&self) -> String {
        let d = self.step_depth.max(1) - 1;
        match STEP_VARS.get(d) {
            Some(v) => (*v).to_string(),
            None => format!("i{d}"),
        }
    }

    fn site(&self, idx: u32) -> Option<String> {
        self.sites
            .get(idx as usize)
            .filter(|s| !s.is_empty())
            .cloned()
    }

    pub fn compute(&mut self, acc: &BTreeMap<u32, Acc>, universe: &[u32]) -> Option<Stmt> {
        let total_n: u64 = acc.values().map(|a| a.n).sum();
        if total_n == 0 {
            return None;
        }
        let mean = acc.values().map(|a| a.sum_ns).sum::<f64>() / total_n as f64;
        let per_rank: BTreeMap<u32, f64> = acc.iter().map(|(r, a)| (*r, a.mean())).collect();
        // The failed polls, their mean per span over every rank's visits.
        let polls = acc.values().map(|a| a.polls).sum::<f64>() / total_n as f64;
        if mean < MIN_COMPUTE_NS && polls < 0.5 {
            self.dropped_compute_ns +=
                acc.values().map(|a| a.sum_ns).sum::<f64>() / self.traced.len().max(1) as f64;
            return None;
        }
        // Ranks of this block for which the statement is a no-op compute nothing here.
        let idle = universe.iter().filter(|r| !acc.contains_key(r)).count();
        // The steady spans of all ranks together: medians and quartiles are not moved by
        // the rare outliers (first touch of memory, the scheduler), which the means keep.
        let mut pooled = Spread::default();
        for a in acc.values() {
            pooled.merge(&a.spread);
        }
        let center = pooled.median();
        let imbalanced = per_rank
            .values()
            .any(|m| (m - mean).abs() > (0.1 * mean).max(MIN_COMPUTE_NS))
            || medians_differ(acc, center);
        let (time, note) = if imbalanced || (idle > 0 && mean >= MIN_COMPUTE_NS) {
            let values = (0..self.n_ranks)
                .map(|r| match per_rank.get(&r) {
                    Some(m) => *m,
                    None if universe.contains(&r) => 0.0,
                    None => mean,
                })
                .map(|ns| Spanned::derived(duration(ns)))
                .collect();
            (TimeSpec::PerRank(values), None)
        } else {
            // The spread of the steady spans (outliers left out), and the
            // standard deviation with the outliers, for the comment.
            let sd = pooled.robust_sd();
            let n = total_n as f64;
            let sd_all = if n > 1.0 {
                let sum_sq: f64 = acc.values().map(|a| a.sum_sq).sum();
                ((sum_sq - n * mean * mean) / (n - 1.0)).max(0.0).sqrt()
            } else {
                0.0
            };
            // Outliers need enough spans to stand out from.
            let outliers =
                (total_n >= 8 && sd_all >= 0.05 * mean && sd_all > 2.0 * sd.max(MIN_COMPUTE_NS))
                    .then(|| {
                        format!(
                            "# sd {} with outliers, {} without: their time is in the mean",
                            fmt_time(sd_all),
                            fmt_time(sd)
                        )
                    });
            if sd >= 0.05 * mean && sd >= MIN_COMPUTE_NS && sd <= mean / 3.0 {
                (
                    TimeSpec::Normal {
                        mean: Spanned::derived(duration(mean)),
                        stddev: Spanned::derived(duration(sd)),
                    },
                    outliers,
                )
            } else if sd > mean / 3.0 && sd >= MIN_COMPUTE_NS {
                (
                    TimeSpec::Fixed(Spanned::derived(duration(mean))),
                    Some(format!("# spread sd {} is wide: fixed mean", fmt_time(sd))),
                )
            } else {
                (TimeSpec::Fixed(Spanned::derived(duration(mean))), outliers)
            }
        };
        // What one poll took, over every poll of every rank here.
        let (all_polls, poll_ns) = acc
            .values()
            .fold((0.0, 0.0), |(n, t), a| (n + a.polls, t + a.poll_ns));
        let poll_cost = (polls >= 0.5 && all_polls > 0.0 && poll_ns > 0.0)
            .then(|| Spanned::derived(duration(poll_ns / all_polls)));
        let mut stmt = Stmt::new(StmtKind::Compute(Box::new(Compute {
            time,
            working_set: None,
            polls: (polls >= 0.5).then(|| Spanned::derived(polls.round() as u64)),
            poll_cost,
        })));
        stmt.trivia.trailing = note;
        Some(stmt)
    }

    fn op(&mut self, tok: &Tok, acc: &BTreeMap<u32, Acc>) -> Option<Stmt> {
        // The sizes the calls really had, over every rank and iteration (the token has
        // only their class); a size that varied is written as its mean where it is
        // sent and its largest where it is received, so that the bytes on the wire are
        // the application's and no receive is too small for what it matches.
        let stats: Vec<SizeAcc> = (0..2)
            .map(|i| {
                let mut s = SizeAcc::default();
                acc.values().for_each(|a| s.merge(&a.sizes[i]));
                s
            })
            .collect();
        let mut zero_bytes = false;
        let mut varied = Vec::new();
        for s in &stats {
            if s.n > 0 && s.min != s.max {
                varied.push(*s);
            }
        }
        let comm = match tok.comm {
            CommRef::World => None,
            CommRef::Named(i) => Some(self.decl_ident(i)?),
        };
        let kind = match &tok.kind {
            Kind::P2p {
                op,
                halves,
                tag,
                req,
            } => {
                // An operation towards no neighbour on every rank of the world does
                // nothing anywhere (a single rank's exchange with MPI_PROC_NULL): it is
                // left out, and so is its request in the completion that follows.
                if self.noop_everywhere(halves) {
                    if let Some(slot) = req {
                        self.vanished.insert(*slot);
                    }
                    self.omitted_noops += 1;
                    return None;
                }
                if let Some(slot) = req {
                    self.vanished.remove(slot);
                }
                // A half towards MPI_PROC_NULL where the topology has no missing
                // neighbour to name cannot be written: a sendrecv keeps its other half.
                // A half that went to MPI_PROC_NULL on every traced rank has no recorded
                // size; ranks the trace lacks may really send there: take the size of the
                // other half (a halo exchange is symmetric).
                let written = |i: usize, h: &Half| -> Option<u64> {
                    let s = stats.get(i)?;
                    match (s.n, super::tokens::receives(*op, i)) {
                        (0, _) => h.bytes,
                        // The class's largest size over the whole trace: at least what
                        // any statement of the class sends.
                        (_, true) => Some(h.bytes.map_or(s.max, |b| b.max(s.max))),
                        (_, false) => s.mean(),
                    }
                };
                let known = halves
                    .iter()
                    .enumerate()
                    .filter_map(|(i, h)| written(i, h))
                    .max()
                    .unwrap_or(0);
                let mut parts = Vec::new();
                let mut op = *op;
                let world_numbered = self.comms.world_numbered(tok.comm);
                for (i, h) in halves.iter().enumerate() {
                    let rule = match &h.peer {
                        PeerAbs::Table(t) if world_numbered => table_rule(t, self.n_ranks),
                        _ => None,
                    };
                    match rule.map(Peer::Rank).or_else(|| self.peer(h)) {
                        Some(p) => {
                            // A message of no bytes only synchronizes; `check` asks
                            // whether that was meant, so the skeleton sends one byte.
                            let b = written(i, h).unwrap_or(known);
                            if b == 0 {
                                zero_bytes = true;
                            }
                            parts.push((p, size(b.max(1))));
                        }
                        None if op == P2pOp::Sendrecv => {
                            op = if i == 0 { P2pOp::Recv } else { P2pOp::Send };
                        }
                        None => return None,
                    }
                }
                let op = &op;
                if parts
                    .iter()
                    .any(|(p, _)| matches!(p, Peer::Rank(e) if matches!(e.kind, ExprKind::Int(_) | ExprKind::PerRank(_))))
                {
                    self.explicit_peer_stmts += 1;
                }
                let parts_len = parts.len();
                let mut it = parts.into_iter();
                let (peer, sz) = it.next()?;
                StmtKind::P2p(Box::new(P2p {
                    op: *op,
                    request: req.map(handle),
                    peer: Spanned::derived(peer),
                    size: MsgSize::Fixed(Spanned::derived(sz)),
                    recv: if *op == P2pOp::Sendrecv && parts_len == 2 {
                        it.next().map(|(p, s)| {
                            Box::new((Spanned::derived(p), MsgSize::Fixed(Spanned::derived(s))))
                        })
                    } else {
                        None
                    },
                    tag: tag.map(Spanned::derived),
                    comm,
                    window: None,
                }))
            }
            Kind::Coll {
                op,
                nonblocking,
                size: sz,
                root,
                req,
            } => {
                if let Some(slot) = req {
                    self.vanished.remove(slot);
                }
                StmtKind::Collective(Box::new(Collective {
                    op: *op,
                    nonblocking: *nonblocking,
                    request: req.map(handle),
                    size: match sz {
                        CollSize::None => None,
                        CollSize::One(b) => {
                            // As for messages: a collective of no bytes synchronizes.
                            let b = stats[0].mean().unwrap_or(*b);
                            if b == 0 {
                                zero_bytes = true;
                            }
                            Some(SizeSpec::Fixed(Spanned::derived(size(b.max(1)))))
                        }
                        CollSize::PerRank(m) => {
                            let m: BTreeMap<u32, u64> = m
                                .iter()
                                .map(|(r, b)| {
                                    let own = acc.get(r).and_then(|a| a.sizes[0].mean());
                                    (*r, own.unwrap_or(*b))
                                })
                                .collect();
                            let fill = m.values().copied().max().unwrap_or(0);
                            Some(SizeSpec::PerRank(
                                (0..self.n_ranks)
                                    .map(|r| {
                                        Spanned::derived(size(m.get(&r).copied().unwrap_or(fill)))
                                    })
                                    .collect(),
                            ))
                        }
                    },
                    root: root
                        .filter(|r| *r != 0 && op.has_root())
                        .map(|r| Expr::int(i64::from(r))),
                    comm,
                }))
            }
            // Written by `exchange`.
            Kind::Exchange { .. } | Kind::Compute => return None,
            Kind::Wait { op, slots } => {
                let slots: Vec<u32> = slots
                    .iter()
                    .copied()
                    .filter(|s| !self.vanished.remove(s))
                    .collect();
                if slots.is_empty() {
                    return None;
                }
                StmtKind::Wait(Wait {
                    op: if slots.len() == 1 { WaitOp::Wait } else { *op },
                    handles: slots.iter().map(|s| handle(*s)).collect(),
                })
            }
        };
        let mut stmt = Stmt::new(kind);
        stmt.site = self.site_of(tok.site);
        if tok.site == u32::MAX {
            stmt.trivia.trailing = Some("# requests the trace never completed".into());
        } else if zero_bytes {
            stmt.trivia.trailing =
                Some("# 0 B in the application: a call that only synchronizes".into());
        } else if !varied.is_empty() {
            let ranges: Vec<String> = varied
                .iter()
                .map(|s| format!("{}-{} B", s.min, s.max))
                .collect();
            stmt.trivia.trailing = Some(format!(
                "# sizes vary with the data: {} over {} calls ({})",
                ranges.join(" and "),
                varied.iter().map(|s| s.n).max().unwrap_or(0),
                match tok.kind {
                    Kind::P2p { .. } => "mean sent, the class's largest received",
                    _ => "mean written",
                }
            ));
        }
        Some(stmt)
    }

    fn noop_everywhere(&self, halves: &[Half]) -> bool {
        halves.iter().all(|h| match h.peer {
            PeerAbs::Dirs { mask, null: true } => {
                let bit = mask.trailing_zeros() as usize;
                mask == 0
                    || self
                        .dirs
                        .peers
                        .iter()
                        .all(|row| row.get(bit).copied().flatten().is_none())
            }
            _ => false,
        })
    }

    /// The name of declared communicator `i`.
    fn decl_ident(&self, i: u32) -> Option<Ident> {
        Some(Ident::new(self.comms.decls.get(i as usize)?.name.clone()))
    }

    /// The `on COMM` of a statement on `comm` (none for the world).
    fn comm_ident(&self, comm: CommRef) -> Option<Ident> {
        match comm {
            CommRef::World => None,
            CommRef::Named(i) => self.decl_ident(i),
        }
    }

    /// The `@ "..."` of a statement from call site `idx`.
    fn site_of(&self, idx: u32) -> Option<Site> {
        self.site(idx).map(|text| Site {
            text,
            pos: Default::default(),
        })
    }

    fn peer(&self, h: &Half) -> Option<Peer> {
        match &h.peer {
            PeerAbs::Any => Some(Peer::Any),
            PeerAbs::Source => Some(Peer::Source),
            PeerAbs::Rank(r) => Some(Peer::Rank(Expr::int(i64::from(*r)))),
            PeerAbs::Shift(k) => Some(Peer::Rank(shift_expr(*k, self.n_ranks))),
            PeerAbs::Xor(k) => Some(Peer::Rank(bin(
                BinOp::Xor,
                Expr::new(ExprKind::Rank),
                Expr::int(i64::from(*k)),
            ))),
            PeerAbs::Step { base, stride } => {
                let var = Expr::new(ExprKind::Var(Ident::new(self.step_var())));
                let scaled = if *stride == 1 {
                    var
                } else {
                    bin(BinOp::Mul, Expr::int(*stride), var)
                };
                Some(Peer::Rank(match base {
                    0 => scaled,
                    b if *b < 0 => bin(BinOp::Sub, scaled, Expr::int(-b)),
                    b => bin(BinOp::Add, scaled, Expr::int(*b)),
                }))
            }
            // Ranks the table lacks (untraced) talk to themselves: they run what the
            // traced ranks of their branch run.
            PeerAbs::Table(t) => Some(Peer::Rank(Expr::new(ExprKind::PerRank(
                (0..self.n_ranks)
                    .map(|r| i64::from(t.get(&r).copied().unwrap_or(r)))
                    .collect(),
            )))),
            PeerAbs::Dirs { mask, .. } => {
                let bit = mask.trailing_zeros() as usize;
                self.dirs.dirs.get(bit).cloned().map(Peer::Dir)
            }
        }
    }
}

/// The rule a table of peers (rank → peer, world-numbered; ranks it lacks make no
/// call) follows, when it follows one of those a person would write: a shift,
/// `(rank + k) % nranks`; flipped bits, `rank ^ k`; a shift within consecutive groups
/// of g ranks, `rank / g * g + (rank + k) % g` (the rows of a process grid, an FFT's
/// pencils); the transpose of a square c × c grid, `rank % c * c + rank / c`. A table
/// of one entry follows no rule (any would do).
pub(crate) fn table_rule(t: &BTreeMap<u32, u32>, n_ranks: u32) -> Option<Expr> {
    let (&r0, &p0) = t.iter().next()?;
    if t.len() < 2 || n_ranks < 2 {
        return None;
    }
    let n = n_ranks;
    let all = |f: &dyn Fn(u32) -> u32| t.iter().all(|(r, p)| f(*r) == *p);
    let rank = || Expr::new(ExprKind::Rank);
    let int = |v: u32| Expr::int(i64::from(v));
    let k = (p0 + n - r0 % n) % n;
    if all(&|r| (r + k) % n) {
        return Some(shift_expr(k, n));
    }
    let x = p0 ^ r0;
    if all(&|r| r ^ x) {
        return Some(bin(BinOp::Xor, rank(), int(x)));
    }
    for g in (2..n).filter(|g| n.is_multiple_of(*g)) {
        let k = (p0 % g + g - r0 % g) % g;
        if k != 0 && all(&|r| r / g * g + (r + k) % g) {
            return Some(bin(
                BinOp::Add,
                bin(BinOp::Mul, bin(BinOp::Div, rank(), int(g)), int(g)),
                bin(BinOp::Rem, bin(BinOp::Add, rank(), int(k)), int(g)),
            ));
        }
    }
    let c = (1..=n).find(|c| c * c >= n).filter(|c| c * c == n)?;
    all(&|r| r % c * c + r / c).then(|| {
        bin(
            BinOp::Add,
            bin(BinOp::Mul, bin(BinOp::Rem, rank(), int(c)), int(c)),
            bin(BinOp::Div, rank(), int(c)),
        )
    })
}

/// `(rank + k) % nranks` as written at any rank count: a shift past half the ranks
/// backwards, half the ranks as `nranks / 2` (a transpose partner).
fn shift_expr(k: u32, n_ranks: u32) -> Expr {
    let rank = Expr::new(ExprKind::Rank);
    let nranks = || Expr::new(ExprKind::NRanks);
    let moved = if n_ranks.is_multiple_of(2) && 2 * k == n_ranks {
        bin(BinOp::Add, rank, bin(BinOp::Div, nranks(), Expr::int(2)))
    } else if 2 * k > n_ranks {
        bin(BinOp::Sub, rank, Expr::int(i64::from(n_ranks - k)))
    } else {
        bin(BinOp::Add, rank, Expr::int(i64::from(k)))
    };
    bin(BinOp::Rem, moved, nranks())
}

/// The variable of a data-addressed exchange round's loop over the other ranks.
const EXCHANGE_VAR: &str = "other";

/// The variable of a partner exchange's loop over each rank's partners.
const PARTNER_VAR: &str = "partner";

/// How an exact partner exchange writes one point-to-point post: operation, request,
/// peer and size, window.
type Post<'a> = &'a dyn Fn(P2pOp, Option<Ident>, (Expr, MsgSize), Option<Spanned<u64>>) -> Stmt;

/// How many messages each rank has on one side of a partner table.
fn counts(side: &[Vec<(u32, u64)>]) -> Vec<usize> {
    side.iter().map(Vec::len).collect()
}

/// The most messages any rank has on a side.
fn most(counts: &[usize]) -> usize {
    counts.iter().copied().max().unwrap_or(0)
}

/// A message size of `sizes` bytes, the entry at `index` (one size where all agree).
fn picked_size(sizes: &[u64], index: Expr) -> MsgSize {
    if sizes.iter().all(|b| Some(b) == sizes.first()) {
        MsgSize::Fixed(Spanned::derived(size(sizes.first().copied().unwrap_or(1))))
    } else {
        MsgSize::Pick(Box::new(Pick {
            values: sizes.iter().map(|b| Spanned::derived(size(*b))).collect(),
            index,
        }))
    }
}

/// A partner table slot by slot: slot j is the j-th receive (or send) of every rank,
/// its peer and size one entry per rank; a slot that only some ranks have is guarded by
/// their count of messages. The receives are posted first under handles `x0`, `x1`,
/// ..., then the sends made, each after its share of the compute, then the receives
/// completed.
fn slot_posts(
    table: &PartnerTable,
    compute: Option<&Stmt>,
    post: Post,
    with_site: &dyn Fn(Stmt) -> Stmt,
) -> Vec<Stmt> {
    // Slot j of one side: each rank's peer (-1 where it has none) and message size.
    let slot = |side: &[Vec<(u32, u64)>], j: usize| -> (Expr, MsgSize) {
        let peers: Vec<i64> = side
            .iter()
            .map(|v| v.get(j).map_or(-1, |(p, _)| i64::from(*p)))
            .collect();
        let sizes: Vec<u64> = side
            .iter()
            .map(|v| v.get(j).or(v.last()).map_or(1, |(_, b)| (*b).max(1)))
            .collect();
        (
            Expr::new(ExprKind::PerRank(peers)),
            picked_size(&sizes, Expr::new(ExprKind::Rank)),
        )
    };
    // Statements for slot j of a side whose counts are `counts`: guarded unless
    // every rank has the slot.
    let guarded = |counts: &[usize], j: usize, stmts: Vec<Stmt>| -> Vec<Stmt> {
        if counts.iter().all(|c| *c > j) {
            stmts
        } else {
            let counts = counts.iter().map(|c| *c as i64).collect();
            vec![if_chain(vec![(
                Some(bin(
                    BinOp::Gt,
                    Expr::new(ExprKind::PerRank(counts)),
                    Expr::int(j as i64),
                )),
                stmts,
            )])]
        }
    };
    let handle = |j: usize| Ident::new(format!("x{j}"));
    let recv_counts = counts(&table.recvs);
    let send_counts = counts(&table.sends);
    let mut out = Vec::new();
    for j in 0..most(&recv_counts) {
        let stmt = post(P2pOp::Irecv, Some(handle(j)), slot(&table.recvs, j), None);
        out.extend(guarded(&recv_counts, j, vec![stmt]));
    }
    for j in 0..most(&send_counts) {
        let mut stmts: Vec<Stmt> = compute.into_iter().cloned().collect();
        stmts.push(post(P2pOp::Send, None, slot(&table.sends, j), None));
        out.extend(guarded(&send_counts, j, stmts));
    }
    let everywhere = recv_counts.iter().copied().min().unwrap_or(0);
    if everywhere > 0 {
        out.push(with_site(Stmt::new(StmtKind::Wait(Wait {
            op: if everywhere == 1 {
                WaitOp::Wait
            } else {
                WaitOp::Waitall
            },
            handles: (0..everywhere).map(handle).collect(),
        }))));
    }
    for j in everywhere..most(&recv_counts) {
        let stmt = with_site(Stmt::new(StmtKind::Wait(Wait {
            op: WaitOp::Wait,
            handles: vec![handle(j)],
        })));
        out.extend(guarded(&recv_counts, j, vec![stmt]));
    }
    out
}

/// A partner table as the graph itself, of a size that grows with the messages and not
/// with ranks × the most partners of a rank: for each side, one list of every rank's
/// peers in turn and one of their sizes, and a loop over a rank's partners that reads
/// the rank's entries, from its offset in the lists (`per_rank(0, 3, 7, ...) +
/// partner`; `rank * M + partner` where every rank has M), as many as it has (the loop
/// runs the most any rank has, guarded by the rank's own count). The receives are all
/// posted under one handle `x` whose window holds them all, then the sends made, each
/// after its share of the compute, then `waitall x`.
fn graph_posts(
    table: &PartnerTable,
    compute: Option<&Stmt>,
    post: Post,
    with_site: &dyn Fn(Stmt) -> Stmt,
) -> Vec<Stmt> {
    let var = || Expr::new(ExprKind::Var(Ident::new(PARTNER_VAR)));
    let handle = || Ident::new("x");
    // The loop over one side's partners, `body` making the statements of one message.
    let side_loop = |side: &[Vec<(u32, u64)>], body: &dyn Fn((Expr, MsgSize)) -> Vec<Stmt>| {
        let counts = counts(side);
        let m = most(&counts);
        if m == 0 {
            return None;
        }
        let uniform = counts.iter().all(|c| *c == m);
        let index = if uniform {
            bin(
                BinOp::Add,
                bin(BinOp::Mul, Expr::new(ExprKind::Rank), Expr::int(m as i64)),
                var(),
            )
        } else {
            let offsets = counts
                .iter()
                .scan(0i64, |at, c| {
                    let first = *at;
                    *at += *c as i64;
                    Some(first)
                })
                .collect();
            bin(BinOp::Add, Expr::new(ExprKind::PerRank(offsets)), var())
        };
        let peers: Vec<i64> = side.iter().flatten().map(|(p, _)| i64::from(*p)).collect();
        let sizes: Vec<u64> = side.iter().flatten().map(|(_, b)| (*b).max(1)).collect();
        let size = picked_size(&sizes, index.clone());
        let peer = Expr::new(ExprKind::Pick(peers, Box::new(index)));
        let mut stmts = body((peer, size));
        if !uniform {
            let counts = counts.iter().map(|c| *c as i64).collect();
            stmts = vec![if_chain(vec![(
                Some(bin(BinOp::Lt, var(), Expr::new(ExprKind::PerRank(counts)))),
                stmts,
            )])];
        }
        Some(Stmt::new(StmtKind::Loop(Box::new(Loop {
            count: Expr::int(m as i64),
            var: Some(Ident::new(PARTNER_VAR)),
            body: Block {
                stmts,
                end_comments: Vec::new(),
            },
        }))))
    };
    let window = Spanned::derived(most(&counts(&table.recvs)) as u64);
    let mut out = Vec::new();
    out.extend(side_loop(&table.recvs, &|msg| {
        vec![post(P2pOp::Irecv, Some(handle()), msg, Some(window))]
    }));
    let posted = !out.is_empty();
    out.extend(side_loop(&table.sends, &|msg| {
        let mut stmts: Vec<Stmt> = compute.into_iter().cloned().collect();
        stmts.push(post(P2pOp::Send, None, msg, None));
        stmts
    }));
    if posted {
        out.push(with_site(Stmt::new(StmtKind::Wait(Wait {
            op: WaitOp::Waitall,
            handles: vec![handle()],
        }))));
    }
    out
}

/// Divides every time of `spec` by `d`.
/// The polls of a compute shared among `d` statements (none where fewer than one is left).
fn divide_polls(polls: &mut Option<Spanned<u64>>, d: f64) {
    *polls = polls.and_then(|n| {
        let each = (n.value as f64 / d).round() as u64;
        (each > 0).then(|| Spanned::derived(each))
    });
}

fn divide_time(spec: &mut TimeSpec, d: f64) {
    let div = |x: &mut Spanned<Duration>| {
        x.value = duration(x.value.seconds() * 1e9 / d);
    };
    match spec {
        TimeSpec::Fixed(x) => div(x),
        TimeSpec::PerRank(v) => v.iter_mut().for_each(div),
        TimeSpec::Normal { mean, stddev } => {
            div(mean);
            div(stddev);
        }
        TimeSpec::Uniform { low, high } => {
            div(low);
            div(high);
        }
        TimeSpec::Pick(p) => p.values.iter_mut().for_each(|t| divide_time(t, d)),
    }
}

fn handle(slot: u32) -> Ident {
    Ident::new(format!("r{slot}"))
}

fn size(bytes: u64) -> Size {
    Size::bytes_exact(bytes)
}

/// A duration from nanoseconds, in the largest unit that keeps it at least 1, rounded to
/// three decimals.
pub(crate) fn duration(ns: f64) -> Duration {
    let (value, unit) = if ns >= 1e9 {
        (ns / 1e9, TimeUnit::S)
    } else if ns >= 1e6 {
        (ns / 1e6, TimeUnit::Ms)
    } else if ns >= 1e3 {
        (ns / 1e3, TimeUnit::Us)
    } else {
        (ns, TimeUnit::Ns)
    };
    let value = if unit == TimeUnit::Ns {
        value.round()
    } else {
        (value * 1000.0).round() / 1000.0
    };
    Duration::new(value, unit)
}

pub(crate) fn fmt_time(ns: f64) -> String {
    let d = duration(ns);
    format!("{} {}", d.value, d.unit.as_str())
}

fn collect_sites(nodes: &[MNode], out: &mut Vec<u32>) {
    for n in nodes {
        match n {
            MNode::Tok { tok, .. } => {
                if tok.site != u32::MAX {
                    out.push(tok.site);
                }
            }
            MNode::Loop { body, .. } | MNode::Steps { body, .. } | MNode::While { body, .. } => {
                collect_sites(body, out)
            }
            MNode::If { branches } => branches.iter().for_each(|(_, b)| collect_sites(b, out)),
            MNode::When {
                then, otherwise, ..
            } => {
                collect_sites(then, out);
                collect_sites(otherwise, out);
            }
        }
    }
}

fn if_chain(branches: Vec<(Option<Expr>, Vec<Stmt>)>) -> Stmt {
    let mut iter = branches.into_iter().rev();
    let mut tail: Option<Else> = None;
    let mut last_if: Option<If> = None;
    for (cond, stmts) in iter.by_ref() {
        let block = Block {
            stmts,
            end_comments: Vec::new(),
        };
        match cond {
            None => tail = (!block.stmts.is_empty()).then_some(Else::Block(block)),
            Some(cond) => {
                let else_branch = match last_if.take() {
                    Some(i) => Some(Else::If(Box::new(i))),
                    None => tail.take(),
                };
                last_if = Some(If {
                    cond,
                    then_block: block,
                    else_branch,
                });
            }
        }
    }
    let i = last_if.unwrap_or(If {
        cond: Expr::new(ExprKind::Bool(true)),
        then_block: match tail {
            Some(Else::Block(b)) => b,
            _ => Block::default(),
        },
        else_branch: None,
    });
    Stmt::new(StmtKind::If(Box::new(i)))
}

/// `rank == 3`, `rank >= 1 and rank <= 5`, joined with `or`.
pub(crate) fn rank_condition(ranks: &[u32]) -> Expr {
    let rank = || Expr::new(ExprKind::Rank);
    let mut terms = Vec::new();
    for (lo, hi) in ranges(ranks) {
        let int = |v: u32| Expr::int(i64::from(v));
        terms.push(if lo == hi {
            bin(BinOp::Eq, rank(), int(lo))
        } else {
            bin(
                BinOp::And,
                bin(BinOp::Ge, rank(), int(lo)),
                bin(BinOp::Le, rank(), int(hi)),
            )
        });
    }
    terms
        .into_iter()
        .reduce(|a, b| bin(BinOp::Or, a, b))
        .unwrap_or(Expr::new(ExprKind::Bool(false)))
}

fn ranges(ranks: &[u32]) -> Vec<(u32, u32)> {
    let mut sorted = ranks.to_vec();
    sorted.sort_unstable();
    let mut out: Vec<(u32, u32)> = Vec::new();
    for r in sorted {
        match out.last_mut() {
            Some((_, hi)) if *hi + 1 == r => *hi = r,
            _ => out.push((r, r)),
        }
    }
    out
}

pub(crate) fn list_ranks(ranks: &[u32]) -> String {
    let parts: Vec<String> = ranks_text(ranks);
    format!(
        "rank{} {}",
        if ranks.len() == 1 { "" } else { "s" },
        parts.join(", ")
    )
}

fn ranks_text(ranks: &[u32]) -> Vec<String> {
    ranges(ranks)
        .into_iter()
        .map(|(lo, hi)| {
            if lo == hi {
                lo.to_string()
            } else {
                format!("{lo}-{hi}")
            }
        })
        .collect()
}

/// The variables of loops that read their iteration number, outermost first (one
/// inside another takes the next).
const STEP_VARS: [&str; 4] = ["i", "j", "k", "l"];

/// Whether a loop body names its peers by the loop's variable.
fn steps_peers(body: &[MNode]) -> bool {
    body.iter().any(|n| match n {
        MNode::Tok { tok, .. } => matches!(&tok.kind, Kind::P2p { halves, .. }
            if halves.iter().any(|h| matches!(h.peer, PeerAbs::Step { .. }))),
        MNode::Loop { body, .. } => steps_peers(body),
        _ => false,
    })
}

/// `i % 20 == 19`, `i == 0`, `i % 50 != 49 `, ... for a folded loop's iterations.
fn step_condition(cond: &Cond, name: &str) -> Expr {
    let var = || Expr::new(ExprKind::Var(Ident::new(name)));
    let atom = |a: &Atom, eq: bool| {
        let op = if eq { BinOp::Eq } else { BinOp::Ne };
        match *a {
            Atom::Every { p, r } => bin(
                op,
                bin(BinOp::Rem, var(), Expr::int(p as i64)),
                Expr::int(r as i64),
            ),
            Atom::At(k) => bin(op, var(), Expr::int(k as i64)),
        }
    };
    match cond {
        Cond::Is(a) => atom(a, true),
        Cond::Not(a) => atom(a, false),
        Cond::Either(a, b) => bin(BinOp::Or, atom(a, true), atom(b, true)),
        Cond::Below(k) => bin(BinOp::Lt, var(), Expr::int(*k as i64)),
        Cond::From(k) => bin(BinOp::Ge, var(), Expr::int(*k as i64)),
    }
}

/// Completes the windowed requests of data-addressed exchanges after their phase: after
/// the outermost loop that holds them and no other communication (the application's
/// exchange took messages until every rank was done), or after the exchange itself;
/// inside the branch of an `if` that holds them, never after the `if`. Windowed handles
/// that a statement of the program already completes (a partner exchange written as
/// its graph waits for its own receives) are left as they are.
pub(crate) fn complete_windows(stmts: Vec<Stmt>) -> Vec<Stmt> {
    let mut waited = BTreeSet::new();
    let mut one = |s: &Stmt| {
        if let StmtKind::Wait(w) = &s.kind {
            waited.extend(w.handles.iter().map(|h| h.name.clone()));
        }
    };
    for stmt in &stmts {
        one(stmt);
        for b in crate::semantics::stmt_blocks(stmt) {
            crate::semantics::visit(b, &mut one);
        }
    }
    complete_windows_in(stmts, &waited)
}

/// [`complete_windows`] in one block, the handles in `waited` left alone (the
/// program's own waits complete them).
fn complete_windows_in(stmts: Vec<Stmt>, waited: &BTreeSet<String>) -> Vec<Stmt> {
    let mut out = Vec::with_capacity(stmts.len());
    for mut stmt in stmts {
        if let StmtKind::Loop(l) = &mut stmt.kind {
            one_window_set(&mut l.body.stmts);
        }
        let mut handles = Vec::new();
        let only_windows = windowed_posts(&stmt, &mut handles);
        handles.retain(|h| !waited.contains(h));
        // Never after an `if`: ranks that take no branch posting them would wait for
        // requests they never posted.
        let here = match stmt.kind {
            StmtKind::Loop(_) => only_windows,
            StmtKind::If(_) => false,
            _ => true,
        };
        if !handles.is_empty() && here {
            out.push(stmt);
            let mut wait = Stmt::new(StmtKind::Wait(Wait {
                op: if handles.len() == 1 {
                    WaitOp::Wait
                } else {
                    WaitOp::Waitall
                },
                handles: handles.into_iter().map(Ident::new).collect(),
            }));
            wait.trivia.trailing = Some("# the exchange's messages still in flight".into());
            out.push(wait);
            continue;
        }
        match &mut stmt.kind {
            StmtKind::Loop(l) => {
                l.body.stmts = complete_windows_in(std::mem::take(&mut l.body.stmts), waited);
            }
            StmtKind::If(i) => complete_windows_if(i, waited),
            _ => {}
        }
        out.push(stmt);
    }
    out
}

/// Every `if` in `stmts` whose branches each post the same windows (as many, of the same
/// operations and windows, in the same order: HPCC's RandomAccess at 8 ranks, one rank's
/// exchange from another call site) and which every rank enters (it has an `else`)
/// posts them under the first branch's handle names: the ranks of every branch then
/// post the handles that the wait after the phase names (under their own names, the
/// ranks of one branch would wait for handles only the other posts).
fn one_window_set(stmts: &mut [Stmt]) {
    for stmt in stmts.iter_mut() {
        match &mut stmt.kind {
            StmtKind::Loop(l) => one_window_set(&mut l.body.stmts),
            StmtKind::While(w) => one_window_set(&mut w.body.stmts),
            StmtKind::If(i) => {
                let mut blocks: Vec<&mut Block> = Vec::new();
                let mut current = &mut **i;
                let complete = loop {
                    blocks.push(&mut current.then_block);
                    match &mut current.else_branch {
                        None => break false,
                        Some(Else::Block(b)) => {
                            blocks.push(b);
                            break true;
                        }
                        Some(Else::If(next)) => current = next,
                    }
                };
                for b in blocks.iter_mut() {
                    one_window_set(&mut b.stmts);
                }
                let posts: Vec<Vec<(String, P2pOp, u64)>> = blocks
                    .iter()
                    .map(|b| {
                        let mut out = Vec::new();
                        crate::semantics::visit(b, &mut |s: &Stmt| {
                            if let StmtKind::P2p(p) = &s.kind {
                                if let (Some(r), Some(w)) = (&p.request, p.window) {
                                    if !out.iter().any(|(n, _, _)| *n == r.name) {
                                        out.push((r.name.clone(), p.op, w.value));
                                    }
                                }
                            }
                        });
                        out
                    })
                    .collect();
                let first = &posts[0];
                let same = |other: &Vec<(String, P2pOp, u64)>| {
                    other.len() == first.len()
                        && other
                            .iter()
                            .zip(first)
                            .all(|(a, b)| a.1 == b.1 && a.2 == b.2)
                };
                if !complete || first.is_empty() || !posts.iter().all(same) {
                    continue;
                }
                for (b, own) in blocks.iter_mut().zip(&posts).skip(1) {
                    let names: BTreeMap<String, String> = own
                        .iter()
                        .zip(first)
                        .map(|(o, f)| (o.0.clone(), f.0.clone()))
                        .collect();
                    rename_requests(&mut b.stmts, &names);
                }
            }
            _ => {}
        }
    }
}

/// Renames the request handles of `stmts` (posts and waits) by `names`.
fn rename_requests(stmts: &mut [Stmt], names: &BTreeMap<String, String>) {
    let rename = |id: &mut Ident| {
        if let Some(n) = names.get(&id.name) {
            id.name = n.clone();
        }
    };
    for stmt in stmts.iter_mut() {
        match &mut stmt.kind {
            StmtKind::P2p(p) => p.request.iter_mut().for_each(rename),
            StmtKind::Collective(c) => c.request.iter_mut().for_each(rename),
            StmtKind::Wait(w) => w.handles.iter_mut().for_each(rename),
            StmtKind::Loop(l) => rename_requests(&mut l.body.stmts, names),
            StmtKind::While(w) => rename_requests(&mut w.body.stmts, names),
            StmtKind::If(i) => {
                let mut current = &mut **i;
                loop {
                    rename_requests(&mut current.then_block.stmts, names);
                    match &mut current.else_branch {
                        None => break,
                        Some(Else::Block(b)) => {
                            rename_requests(&mut b.stmts, names);
                            break;
                        }
                        Some(Else::If(next)) => current = next,
                    }
                }
            }
            StmtKind::Compute(_) | StmtKind::CommDecl(_) => {}
        }
    }
}

fn complete_windows_if(i: &mut If, waited: &BTreeSet<String>) {
    i.then_block.stmts = complete_windows_in(std::mem::take(&mut i.then_block.stmts), waited);
    match &mut i.else_branch {
        Some(Else::Block(b)) => b.stmts = complete_windows_in(std::mem::take(&mut b.stmts), waited),
        Some(Else::If(next)) => complete_windows_if(next, waited),
        None => {}
    }
}

/// The windowed handles `stmt` posts (in order, once each), and whether it holds no
/// other communication.
fn windowed_posts(stmt: &Stmt, handles: &mut Vec<String>) -> bool {
    let mut only = true;
    let mut one = |s: &Stmt| match &s.kind {
        StmtKind::P2p(p) => match (&p.request, p.window) {
            (Some(r), Some(_)) => {
                if !handles.contains(&r.name) {
                    handles.push(r.name.clone());
                }
            }
            _ => only = false,
        },
        StmtKind::Collective(_) | StmtKind::Wait(_) | StmtKind::CommDecl(_) => only = false,
        _ => {}
    };
    one(stmt);
    for b in crate::semantics::stmt_blocks(stmt) {
        crate::semantics::visit(b, &mut one);
    }
    only
}
