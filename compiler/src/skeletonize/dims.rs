//! Loops over a grid's dimensions: takes the built statements, gives them with every
//! run of blocks that make the same calls along successive dimensions of a grid written
//! as one loop whose variable names the dimension:
//! `loop 3 as dim { ... send +d(dim) [16 KiB, 21 KiB, 28 KiB][dim] ... }`.
//!
//! Halo codes exchange along one dimension after another (LAMMPS's `CommBrick` swaps x,
//! then y, then z, forward and reverse, at set-up, every step and at every
//! re-neighbouring). The faces of a sub-domain differ in size, so the blocks of the three
//! dimensions differ in their message sizes and packing times, and the compressor, which
//! finds loops of equal tokens, leaves them apart: three copies of every exchange.
//!
//! A run qualifies when at least two blocks of up to [`MAX_BLOCK`] statements in a row
//! are the same statements (operations, communicators, call sites, loops, conditions)
//! but for the dimension of their grid directions, which moves by the same step from
//! one block to the next for every direction, and for their message sizes and compute
//! times: sizes and times that differ become picks `[v0, v1, ...][dim]`, one value per
//! dimension. Comments the blocks share are kept; those that differ are left out and the
//! loop says what it stands for.
//!
//! Blocks may also differ in parts some dimensions run and others do not (LAMMPS
//! exchanges atoms with both neighbours along a dimension of more than two ranks and
//! with one along a dimension of two, whose two neighbours are one rank): the longest
//! block is the body, the others must be it with parts left out, and each part runs
//! under a condition on the variable naming the dimensions that ran it
//! (`if dim == 2 { ... }`, [`uneven_run`]).

use perfskel_grammar::ast::{
    AxisSpelling, BinOp, Block, Compute, Direction, Duration, Else, Expr, ExprKind, Ident, If,
    Loop, MsgSize, Peer, Pick, Size, Spanned, Stmt, StmtKind, TimeSpec, TimeUnit, Topology, Trivia,
};

use std::collections::BTreeMap;

use super::comms::bin;
use super::count_statements;

/// Blocks of at most this many statements are tried (counting the compute before each
/// other statement, see [`with_gaps`]).
const MAX_BLOCK: usize = 32;

/// A run is folded when it saves at least this many statements.
const MIN_SAVING: usize = 2;

/// Most iterations of a loop over dimensions [`mirror_repeats`] looks into.
const MAX_MIRROR_DIMS: i64 = 16;

/// The statements with their runs over dimensions folded, and how many loops that made.
pub(crate) fn dimension_loops(stmts: Vec<Stmt>, topology: &Topology) -> (Vec<Stmt>, usize) {
    let ctx = Ctx {
        two: match topology {
            Topology::Grid { dims, periodic } => dims
                .iter()
                .zip(periodic)
                .map(|(&d, &p)| d == 2 && p)
                .collect(),
            _ => Vec::new(),
        },
    };
    let mut made = 0;
    let mut scope = Vec::new();
    let stmts = fold_block(with_gaps(stmts), &ctx, &mut scope, &mut made);
    (mirror_repeats(without_gaps(stmts), &mut Vec::new()), made)
}

/// In loops over dimensions, calls that only some dimensions make again with every
/// direction turned (`sendrecv to -d(dim) ...; if dim == 2 { sendrecv to +d(dim) ... }`:
/// LAMMPS's exchange swaps a second time, from call sites of its own, only along a
/// dimension of more than two ranks, whose two neighbours differ) are one loop over
/// the sides whose count is per dimension: `loop [1, 1, 2][dim] as side { sendrecv to
/// shift(dim, 2 * side - 1) ... }`, with the first calls' sites, the sizes of dimensions
/// that make both the mean of the two.
fn mirror_repeats(stmts: Vec<Stmt>, scope: &mut Vec<String>) -> Vec<Stmt> {
    stmts
        .into_iter()
        .map(|mut stmt| {
            let StmtKind::Loop(l) = &mut stmt.kind else {
                each_branch(&mut stmt, &mut |b| {
                    *b = mirror_repeats(std::mem::take(b), scope)
                });
                return stmt;
            };
            let var = l.var.as_ref().map(|v| v.name.clone());
            if let Some(v) = &var {
                scope.push(v.clone());
            }
            let mut body = mirror_repeats(std::mem::take(&mut l.body.stmts), scope);
            if let (Some(v), ExprKind::Int(n)) = (&var, &l.count.kind) {
                while let Some(next) = mirror_once(&body, v, *n, scope) {
                    body = next;
                }
            }
            l.body.stmts = body;
            if var.is_some() {
                scope.pop();
            }
            stmt
        })
        .collect()
}

/// The first such repeat of a loop's body over `var` (`n` iterations) folded, if any.
fn mirror_once(body: &[Stmt], var: &str, n: i64, scope: &[String]) -> Option<Vec<Stmt>> {
    if !(2..=MAX_MIRROR_DIMS).contains(&n) {
        return None;
    }
    for (i, stmt) in body.iter().enumerate() {
        let StmtKind::If(cond_if) = &stmt.kind else {
            continue;
        };
        let then = &cond_if.then_block.stmts;
        let len = then.len();
        if cond_if.else_branch.is_some() || len == 0 || len > i {
            continue;
        }
        let cond = &cond_if.cond;
        if !crate::semantics::reads_vars(cond, Some(var)) || crate::semantics::depends_on_rank(cond)
        {
            continue;
        }
        let first = &body[i - len..i];
        if first
            .iter()
            .chain(then)
            .any(|s| !matches!(s.kind, StmtKind::P2p(_) | StmtKind::Wait(_)))
        {
            continue;
        }
        // The second calls come from call sites of their own.
        let (shape0, signs0) = turned_shape(first, true);
        let (shape1, signs1) = turned_shape(then, true);
        if signs0.is_empty() || shape0 != shape1 || signs0.iter().zip(&signs1).any(|(a, b)| a == b)
        {
            continue;
        }
        // The dimensions that make the calls twice.
        // The condition reads the dimension only: any rank evaluates it alike.
        let env = crate::semantics::Env {
            rank: 0,
            n_ranks: 1,
            coords: Vec::new(),
        };
        let Ok(twice) = (0..n)
            .map(|d| crate::semantics::eval_bool_in(cond, &env, &[(var, d)]))
            .collect::<Result<Vec<bool>, _>>()
        else {
            continue;
        };
        if twice.iter().all(|t| !t) {
            continue;
        }
        let Some(joined) = join_mirror(first, then, var, &twice, scope) else {
            continue;
        };
        let mut out = body[..i - len].to_vec();
        out.push(joined);
        out.extend_from_slice(&body[i + 1..]);
        return Some(out);
    }
    None
}

/// The loop over sides of [`mirror_repeats`]: `first` with its directions turned on the
/// second side, sizes per dimension (the mean of both where a dimension makes both).
fn join_mirror(
    first: &[Stmt],
    then: &[Stmt],
    var: &str,
    twice: &[bool],
    scope: &[String],
) -> Option<Stmt> {
    let side = fresh_name("side", scope, first);
    let n = twice.len();
    let mut sizes = Vec::new();
    let mut then = then.to_vec();
    walk(&mut then, &mut |slot| {
        if let Slot::Size(s) = slot {
            sizes.push(s.clone());
        }
    });
    let mut sizes = sizes.into_iter();
    let mut ok = true;
    let dim_var = || Expr::new(ExprKind::Var(Ident::new(var)));
    // A size for dimension d: its option d where it is a pick over `var`.
    let at = |s: &MsgSize, d: usize| -> Option<u64> {
        match s {
            MsgSize::Fixed(v) => v.value.bytes(),
            MsgSize::Pick(p) if matches!(&p.index.kind, ExprKind::Var(x) if x.name == var) => {
                p.values.get(d)?.value.bytes()
            }
            MsgSize::Pick(_) => None,
        }
    };
    let mut body = first.to_vec();
    walk(&mut body, &mut |slot| match slot {
        Slot::Peer(Peer::Dir(dir), _) => turn_with_side(dir, &side),
        Slot::Peer(..) => {}
        Slot::Size(s) => {
            let Some(other) = sizes.next() else {
                ok = false;
                return;
            };
            let per_dim: Option<Vec<u64>> = (0..n)
                .map(|d| {
                    let a = at(s, d)?;
                    Some(if twice[d] {
                        (a + at(&other, d)?).div_ceil(2)
                    } else {
                        a
                    })
                })
                .collect();
            let Some(per_dim) = per_dim else {
                ok = false;
                return;
            };
            let values: Vec<Spanned<Size>> = per_dim
                .iter()
                .map(|b| Spanned::derived(Size::bytes_exact(*b)))
                .collect();
            *s = if per_dim.iter().all(|b| *b == per_dim[0]) {
                MsgSize::Fixed(values[0])
            } else {
                MsgSize::Pick(Box::new(Pick {
                    values,
                    index: dim_var(),
                }))
            };
        }
        Slot::Time(_) => ok = false,
    });
    if !ok {
        return None;
    }
    // The first calls' sites; the others named.
    let mut others = Vec::new();
    each_ref(&then, &mut |s| {
        others.extend(s.site.as_ref().map(|x| x.text.clone()));
    });
    each_stmt(&mut body, &mut |s| s.trivia.leading.clear());
    let counts: Vec<i64> = twice.iter().map(|t| 1 + i64::from(*t)).collect();
    let dims: Vec<String> = (0..n)
        .filter(|d| twice[*d])
        .map(|d| d.to_string())
        .collect();
    let mut stmt = Stmt::new(StmtKind::Loop(Box::new(Loop {
        count: Expr::new(ExprKind::Pick(counts, Box::new(dim_var()))),
        var: Some(Ident::new(side.clone())),
        body: Block {
            stmts: body,
            end_comments: Vec::new(),
        },
    })));
    stmt.trivia.leading.push(format!(
        "# Along dimension(s) {} the application makes these calls a second time with every direction turned, from {}: `{side}` numbers the two.",
        dims.join(", "),
        others.join(", ")
    ));
    Some(stmt)
}

/// What the summary counts, over the statements as finally written (after folds that
/// join loops, rank conditions and statements with explicit peers): loops, `if` chains
/// on the rank, and point-to-point statements whose peer is an explicit rank or table.
pub(crate) fn census(stmts: &[Stmt]) -> (usize, usize, usize) {
    let (mut loops, mut rank_ifs, mut explicit) = (0, 0, 0);
    each_ref(stmts, &mut |s| match &s.kind {
        StmtKind::Loop(_) => loops += 1,
        StmtKind::If(i) if crate::semantics::depends_on_rank(&i.cond) => rank_ifs += 1,
        StmtKind::P2p(p) => {
            let fixed = |peer: &Peer| matches!(peer, Peer::Rank(e) if matches!(e.kind, ExprKind::Int(_) | ExprKind::PerRank(_)));
            if fixed(&p.peer.value) || p.recv.as_deref().is_some_and(|r| fixed(&r.0.value)) {
                explicit += 1;
            }
        }
        _ => {}
    });
    (loops, rank_ifs, explicit)
}

/// What the world's topology says about directions.
struct Ctx {
    /// Per dimension of a world grid: periodic with 2 ranks, where a step forward and a
    /// step back reach the same rank, so a direction's sign means nothing.
    two: Vec<bool>,
}

impl Ctx {
    fn sign_matters(&self, world: bool, dim: i64) -> bool {
        !(world && usize::try_from(dim).is_ok_and(|d| self.two.get(d) == Some(&true)))
    }
}

/// The statements with a compute before every other statement, of zero time where the
/// application computed too little to write one (the builder leaves those out), so that
/// blocks whose compute differs only in where it was negligible have the same shape.
fn with_gaps(stmts: Vec<Stmt>) -> Vec<Stmt> {
    let mut out = Vec::with_capacity(2 * stmts.len());
    let mut pending: Option<Stmt> = None;
    for mut stmt in stmts {
        if matches!(stmt.kind, StmtKind::Compute(_)) {
            out.extend(pending.replace(stmt));
            continue;
        }
        match &mut stmt.kind {
            StmtKind::Loop(l) => {
                l.body.stmts = with_gaps(std::mem::take(&mut l.body.stmts));
            }
            StmtKind::If(_) => each_branch(&mut stmt, &mut |b| {
                *b = with_gaps(std::mem::take(b));
            }),
            _ => {}
        }
        out.push(pending.take().unwrap_or_else(gap));
        out.push(stmt);
    }
    out.extend(pending);
    out
}

/// A compute of no time: a place holder [`without_gaps`] removes.
fn gap() -> Stmt {
    Stmt::new(StmtKind::Compute(Box::new(Compute {
        time: TimeSpec::Fixed(Spanned::derived(Duration::new(0.0, TimeUnit::Ns))),
        working_set: None,
        polls: None,
        poll_cost: None,
    })))
}

fn is_gap(stmt: &Stmt) -> bool {
    matches!(&stmt.kind, StmtKind::Compute(c)
        if c.polls.is_none() && matches!(&c.time, TimeSpec::Fixed(d) if d.value.value == 0.0))
}

/// The statements without the zero computes of [`with_gaps`].
fn without_gaps(stmts: Vec<Stmt>) -> Vec<Stmt> {
    stmts
        .into_iter()
        .filter(|s| !is_gap(s))
        .map(|mut stmt| {
            match &mut stmt.kind {
                StmtKind::Loop(l) => {
                    l.body.stmts = without_gaps(std::mem::take(&mut l.body.stmts));
                }
                StmtKind::If(_) => each_branch(&mut stmt, &mut |b| {
                    *b = without_gaps(std::mem::take(b));
                }),
                _ => {}
            }
            stmt
        })
        .collect()
}

/// Applies `f` to the statement list of every branch of an `if` chain.
pub(super) fn each_branch(stmt: &mut Stmt, f: &mut dyn FnMut(&mut Vec<Stmt>)) {
    let StmtKind::If(i) = &mut stmt.kind else {
        return;
    };
    let mut arm = &mut **i;
    loop {
        f(&mut arm.then_block.stmts);
        match &mut arm.else_branch {
            Some(Else::If(next)) => arm = next,
            Some(Else::Block(b)) => {
                f(&mut b.stmts);
                break;
            }
            None => break,
        }
    }
}

fn fold_block(stmts: Vec<Stmt>, ctx: &Ctx, scope: &mut Vec<String>, made: &mut usize) -> Vec<Stmt> {
    let stmts = rotate_loops(stmts, ctx, scope);
    // Inner blocks first, so that a block's statements are final when runs are sought.
    let stmts: Vec<Stmt> = stmts
        .into_iter()
        .map(|mut stmt| {
            match &mut stmt.kind {
                StmtKind::Loop(l) => {
                    let pushed = l.var.as_ref().map(|v| scope.push(v.name.clone()));
                    let body = std::mem::take(&mut l.body.stmts);
                    l.body.stmts = fold_block(body, ctx, scope, made);
                    if pushed.is_some() {
                        scope.pop();
                    }
                }
                StmtKind::If(_) => each_branch(&mut stmt, &mut |b| {
                    *b = fold_block(std::mem::take(b), ctx, scope, made);
                }),
                _ => {}
            }
            stmt
        })
        .collect();
    // The same with every loop of two at this level written out: a compressor's loop can
    // start one call early (`wait; compute; irecv; send` twice, then a `wait`), which no
    // block boundary of the loops as written matches, and a dimension that swaps twice
    // each way is one `loop 2 { down; up }` where the others' swaps are a loop each.
    let folds = search(&stmts, ctx, scope);
    if !stmts.iter().any(|s| unrolled_len(s) > 1) {
        *made += folds.len();
        return assemble(stmts, folds);
    }
    let (flat, bounds) = unrolled_bounds(&stmts);
    let flat_folds = search(&flat, ctx, scope);
    if flat_folds.is_empty() {
        *made += folds.len();
        return assemble(stmts, folds);
    }
    // Each run of either that covers whole statements as written, the best set of
    // runs that do not overlap (by the statements they save).
    let at: BTreeMap<usize, usize> = bounds
        .iter()
        .enumerate()
        .filter_map(|(k, b)| b.map(|b| (b, k)))
        .collect();
    let mut runs: Vec<(usize, usize, Stmt, usize)> = Vec::new();
    for (a, b, stmt) in folds.into_iter().chain(
        flat_folds
            .into_iter()
            .filter_map(|(a, b, stmt)| Some((*at.get(&a)?, *at.get(&b)?, stmt))),
    ) {
        let saving =
            real_count(&stmts[a..b]).saturating_sub(real_count(std::slice::from_ref(&stmt)));
        if saving > 0 {
            runs.push((a, b, stmt, saving));
        }
    }
    let chosen = best_runs(stmts.len(), &runs);
    *made += chosen.len();
    let mut picked: Vec<(usize, usize, Stmt)> = Vec::new();
    for (k, (a, b, stmt, _)) in runs.into_iter().enumerate() {
        if chosen.contains(&k) {
            picked.push((a, b, stmt));
        }
    }
    picked.sort_by_key(|f| f.0);
    assemble(stmts, picked)
}

/// Of runs `(start, end, _, saving)` over `n` statements, the indices of a set that do
/// not overlap and save the most (weighted interval scheduling; ties: the earlier
/// list's run, so the runs as written win over the unrolled ones).
fn best_runs(n: usize, runs: &[(usize, usize, Stmt, usize)]) -> Vec<usize> {
    // best[i]: the most saved over statements 0..i, and the run ending there (if any).
    let mut best: Vec<(usize, Option<usize>)> = vec![(0, None); n + 1];
    let mut ending: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (k, r) in runs.iter().enumerate() {
        ending.entry(r.1).or_default().push(k);
    }
    for i in 1..=n {
        best[i] = (best[i - 1].0, None);
        for &k in ending.get(&i).map(Vec::as_slice).unwrap_or(&[]) {
            let (a, _, _, saving) = &runs[k];
            let v = best[*a].0 + saving;
            if v > best[i].0 {
                best[i] = (v, Some(k));
            }
        }
    }
    let mut out = Vec::new();
    let mut i = n;
    while i > 0 {
        match best[i].1 {
            Some(k) => {
                out.push(k);
                i = runs[k].0;
            }
            None => i -= 1,
        }
    }
    out
}

/// The statements with the runs `(start, end, loop)` in the place of the statements
/// they stand for.
fn assemble(stmts: Vec<Stmt>, folds: Vec<(usize, usize, Stmt)>) -> Vec<Stmt> {
    let mut out = Vec::with_capacity(stmts.len());
    let mut folds = folds.into_iter().peekable();
    let mut skip_to = 0;
    for (i, stmt) in stmts.into_iter().enumerate() {
        if let Some((_, end, folded)) = folds.next_if(|(start, ..)| *start == i) {
            out.push(folded);
            skip_to = end;
        }
        if i >= skip_to {
            out.push(stmt);
        }
    }
    out
}

/// [`count_statements`] of the statements without their gaps ([`with_gaps`]).
fn real_count(stmts: &[Stmt]) -> usize {
    stmts
        .iter()
        .filter(|s| !is_gap(s))
        .map(|s| {
            1 + crate::semantics::stmt_blocks(s)
                .into_iter()
                .map(|b| real_count(&b.stmts))
                .sum::<usize>()
        })
        .sum()
}

/// The runs over dimensions of one statement list (its blocks already folded): each
/// run's first statement, its end, and the loop that stands for it.
fn search(stmts: &[Stmt], ctx: &Ctx, scope: &[String]) -> Vec<(usize, usize, Stmt)> {
    // Cheap filters: a block holds a grid direction; the expanded form needs a loop of
    // two to unroll.
    let axis: Vec<bool> = stmts.iter().map(has_axis).collect();
    let sigs: Vec<String> = stmts.iter().map(signature).collect();
    let unrollable: Vec<bool> = stmts.iter().map(|s| unrolled_len(s) > 1).collect();
    let mut folds: Vec<(usize, usize, Stmt)> = Vec::new();
    let mut i = 0;
    while i < stmts.len() {
        let mut best: Option<Run> = None;
        for len in 1..=MAX_BLOCK.min(stmts.len() - i) {
            if !axis[i..i + len].iter().any(|&a| a) {
                continue;
            }
            // A loop of two to unroll in this block or in the next ones.
            let expand = unrollable[i..(i + 3 * MAX_BLOCK).min(stmts.len())]
                .iter()
                .any(|&u| u);
            for unroll in [false, true] {
                if unroll && !expand {
                    continue;
                }
                // Blocks of the same length start alike (a cheap test before the shapes).
                if !unroll && sigs.get(i..i + 2) != sigs.get(i + len..i + len + 2) {
                    continue;
                }
                if unroll && unrolled_sigs(&stmts[i..], 3) != unrolled_sigs(&stmts[i + len..], 3) {
                    continue;
                }
                for repeat in [false, true] {
                    if let Some(run) = run_at(stmts, i, len, unroll, repeat, ctx) {
                        if best.as_ref().is_none_or(|b| run.saving > b.saving) {
                            best = Some(run);
                        }
                    }
                }
            }
        }
        // Blocks alike but for parts some dimensions lack, when that saves more.
        let uneven = (axis.get(i + 1) == Some(&true))
            .then(|| uneven_run(stmts, i, ctx, scope))
            .flatten()
            .filter(|u| best.as_ref().is_none_or(|b| u.2 > b.saving));
        if let Some((end, folded, _)) = uneven {
            folds.push((i, end, folded));
            i = end;
            continue;
        }
        match best {
            Some(run) => {
                let (at, len) = run.bounds[0];
                let var = fresh_name("dim", scope, &stmts[at..at + len]);
                let end = run.bounds.last().map_or(i + 1, |&(a, l)| a + l);
                folds.push((i, end, fold_run(stmts, &run, &var, scope)));
                i = end;
            }
            None => i += 1,
        }
    }
    folds
}

/// The statements with loops turned where that lets their bodies fold: a loop whose
/// body starts with what follows it, `loop N { A B } A`, is `A loop N { B A }` (and one
/// whose body ends with what precedes it the other way round). The compressor starts a
/// loop where the trace's first whole period starts, which can part the two halves of
/// one exchange (LAMMPS's reverse communication along z at the end of a step's body,
/// along y and x at the start of the next); turned, they meet. The statement that moves
/// keeps its own statistics: only where the application ran it changes, by one
/// iteration. Kept only when the body then folds into fewer statements.
fn rotate_loops(mut stmts: Vec<Stmt>, ctx: &Ctx, scope: &[String]) -> Vec<Stmt> {
    let size = |body: &[Stmt], var: Option<&str>| {
        let mut scope = scope.to_vec();
        scope.extend(var.map(str::to_string));
        real_count(&fold_block(body.to_vec(), ctx, &mut scope, &mut 0))
    };
    // Signatures first: the shapes are compared only where they agree.
    let mut outer: Vec<String> = stmts.iter().map(signature).collect();
    let mut k = 0;
    while k < stmts.len() {
        let StmtKind::Loop(l) = &stmts[k].kind else {
            k += 1;
            continue;
        };
        if !matches!(l.count.kind, ExprKind::Int(n) if n >= 2) || !has_axis(&stmts[k]) {
            k += 1;
            continue;
        }
        let var = l.var.as_ref().map(|v| v.name.clone());
        let body = &l.body.stmts;
        let reads = |part: &[Stmt]| {
            var.as_deref()
                .is_some_and(|v| part.iter().any(|s| stmt_reads_var(s, v)))
        };
        let inner: Vec<String> = body.iter().map(signature).collect();
        let n = body.len();
        // The statements alternate compute, call ([`with_gaps`]); a turn keeps them so,
        // or a call's compute would go with the call before it, which folds differently
        // (and lost a dimension's compute). So the parts that move are whole pairs, the
        // body ends with a call, and the loop's own compute (just before it) stays with
        // the loop.
        let is_compute = |s: &Stmt| matches!(s.kind, StmtKind::Compute(_));
        if k == 0 || !is_compute(&stmts[k - 1]) || body.last().is_none_or(is_compute) {
            k += 1;
            continue;
        }
        // After the loop: the body's longest prefix that follows it.
        let after = (1..n).rev().find(|&j| {
            is_compute(&body[j])
                && outer.get(k + 1..k + 1 + j) == Some(&inner[..j])
                && stat_free(&stmts[k + 1..k + 1 + j]) == stat_free(&body[..j])
                && !reads(&body[..j])
        });
        // Before the loop and its compute: the body's longest suffix that precedes them.
        let before = (1..n.min(k)).rev().find(|&j| {
            is_compute(&body[n - j])
                && outer[k - 1 - j..k - 1] == inner[n - j..]
                && stat_free(&stmts[k - 1 - j..k - 1]) == stat_free(&body[n - j..])
                && !reads(&body[n - j..])
        });
        if after.is_none() && before.is_none() {
            k += 1;
            continue;
        }
        let current = size(body, var.as_deref());
        let mut turned = None;
        if let Some(j) = after {
            let mut rotated = body[j..].to_vec();
            rotated.extend_from_slice(&body[..j]);
            if size(&rotated, var.as_deref()) < current {
                turned = Some((rotated, true, j));
            }
        }
        if let (None, Some(j)) = (&turned, before) {
            let mut rotated = body[body.len() - j..].to_vec();
            rotated.extend_from_slice(&body[..body.len() - j]);
            if size(&rotated, var.as_deref()) < current {
                turned = Some((rotated, false, j));
            }
        }
        let Some((rotated, forward, j)) = turned else {
            k += 1;
            continue;
        };
        let mut looped = stmts[k].clone();
        if let StmtKind::Loop(l) = &mut looped.kind {
            l.body.stmts = rotated;
        }
        if forward {
            // `c loop { A B } A` -> `A c loop { B A }`: the A after the loop moves before
            // it and its compute `c`.
            let moved: Vec<Stmt> = stmts.drain(k + 1..k + 1 + j).collect();
            stmts[k] = looped;
            stmts.splice(k - 1..k - 1, moved);
        } else {
            // `B c loop { A B }` -> `c loop { B A } B`.
            let moved: Vec<Stmt> = stmts.drain(k - 1 - j..k - 1).collect();
            k -= j;
            stmts[k] = looped;
            stmts.splice(k + 1..k + 1, moved);
        }
        k += j + 1;
        outer = stmts.iter().map(signature).collect();
    }
    stmts
}

/// A copy of the statements without their sizes, times and comments: what must be equal
/// for one to stand where the other was.
fn stat_free(stmts: &[Stmt]) -> Vec<Stmt> {
    let mut out = stmts.to_vec();
    walk(&mut out, &mut |slot| match slot {
        Slot::Size(s) => *s = MsgSize::Fixed(Spanned::derived(Size::bytes_exact(0))),
        Slot::Time(t) => *t = TimeSpec::Fixed(Spanned::derived(Duration::new(0.0, TimeUnit::Ns))),
        Slot::Peer(..) => {}
    });
    each_stmt(&mut out, &mut |s| s.trivia = Trivia::default());
    out
}

/// Whether a statement reads the loop variable `var` anywhere.
fn stmt_reads_var(stmt: &Stmt, var: &str) -> bool {
    crate::semantics::stmt_exprs(stmt)
        .into_iter()
        .any(|e| crate::semantics::reads_vars(e, Some(var)))
        || crate::semantics::stmt_blocks(stmt)
            .into_iter()
            .any(|b| b.stmts.iter().any(|s| stmt_reads_var(s, var)))
}

/// A run of blocks that differ in the dimension they step along.
struct Run {
    /// Each block's first statement and length.
    bounds: Vec<(usize, usize)>,
    /// Whether the blocks are compared with their loops of two unrolled (a dimension of
    /// two ranks loops over its two swaps where a longer one writes them apart).
    unroll: bool,
    /// The dimension step from one block to the next.
    stride: i64,
    /// Per dimension: how many blocks in a row make its calls (more than one where the
    /// application exchanges along a dimension more than once, LAMMPS's several swaps
    /// along a dimension thinner than the interaction range).
    repeats: Vec<usize>,
    /// Per dimension: the leaves of its blocks, their mean where it repeats.
    leaves: Vec<Vec<Leaf>>,
    /// Per dimension that repeats: what its first block computes before its first call
    /// beyond the mean of the later blocks', written before the repeats ([`entry_excess`]).
    entries: Vec<Option<TimeSpec>>,
    /// Per grid direction of the body: its sign.
    signs: Vec<bool>,
    saving: usize,
}

/// The run of blocks starting with `len` statements at `at`, if one qualifies; with
/// `repeat`, a dimension may make its calls in several blocks in a row.
fn run_at(
    stmts: &[Stmt],
    at: usize,
    len: usize,
    unroll: bool,
    repeat: bool,
    ctx: &Ctx,
) -> Option<Run> {
    let form = |b: &[Stmt]| if unroll { unrolled(b) } else { b.to_vec() };
    let first = form(stmts.get(at..at + len)?);
    let (shape0, leaves0) = parts(first.clone())?;
    let axes0 = axes(&leaves0);
    if axes0.is_empty() {
        return None;
    }
    let mut bounds = vec![(at, len)];
    let mut all = vec![leaves0];
    let mut repeats = vec![1];
    let mut stride = 0;
    let mut pos = at + len;
    loop {
        // The next block: as many statements as make the first block's length.
        let l = if unroll {
            let mut count = Unrolled::default();
            let fits = (1..=MAX_BLOCK).find_map(|l| {
                count.add(stmts.get(pos + l - 1)?);
                (count.n >= first.len()).then_some((l, count.n))
            });
            match fits {
                Some((l, n)) if n == first.len() => l,
                _ => break,
            }
        } else {
            len
        };
        let Some(block) = stmts.get(pos..pos + l) else {
            break;
        };
        let Some((shape, leaves)) = parts(form(block)) else {
            break;
        };
        if shape != shape0 {
            break;
        }
        let dims = axes(&leaves);
        let last = all.last().map(|l| axes(l)).unwrap_or_default();
        if repeat && dims.iter().zip(&last).all(|(d, p)| d.0 == p.0) {
            // The same dimension again.
            if let Some(r) = repeats.last_mut() {
                *r += 1;
            }
        } else {
            let t = repeats.len() as i64;
            if t == 1 {
                stride = dims[0].0 - axes0[0].0;
                if stride == 0 {
                    break;
                }
            }
            if !dims
                .iter()
                .zip(&axes0)
                .all(|(d, d0)| d.0 == d0.0 + stride * t)
            {
                break;
            }
            repeats.push(1);
        }
        bounds.push((pos, l));
        all.push(leaves);
        pos += l;
    }
    if repeats.len() < 2 {
        return None;
    }
    // Each direction's sign: the same on every block where it matters.
    let mut signs = Vec::with_capacity(axes0.len());
    for (j, &(_, sign0, world)) in axes0.iter().enumerate() {
        let mut chosen = None;
        for leaves in &all {
            let (dim, sign, _) = axes(leaves)[j];
            if ctx.sign_matters(world, dim) {
                match chosen {
                    None => chosen = Some(sign),
                    Some(c) if c != sign => return None,
                    Some(_) => {}
                }
            }
        }
        signs.push(chosen.unwrap_or(sign0));
    }
    let before: usize = bounds
        .iter()
        .map(|&(a, l)| count_statements(&without_gaps(stmts[a..a + l].to_vec())))
        .sum();
    let repeated = repeats.iter().any(|&r| r > 1);
    let lead = matches!(first.first().map(|s| &s.kind), Some(StmtKind::Compute(_)));
    let after = count_statements(&without_gaps(first)) + 1 + usize::from(repeated);
    let saving = before.checked_sub(after)?;
    if saving < MIN_SAVING {
        return None;
    }
    // Per dimension, the mean of its blocks' leaves; where it repeats and its first
    // block computes more before its first call (LAMMPS's forces before the first of a
    // dimension's reverse swaps), the excess apart.
    let mut leaves = Vec::with_capacity(repeats.len());
    let mut entries = Vec::with_capacity(repeats.len());
    let mut blocks = all.into_iter();
    for &r in &repeats {
        let mut group: Vec<Vec<Leaf>> = blocks.by_ref().take(r).collect();
        let entry = if lead { entry_excess(&mut group) } else { None };
        leaves.push(mean_leaves(&group)?);
        entries.push(entry);
    }
    Some(Run {
        bounds,
        unroll,
        stride,
        repeats,
        leaves,
        entries,
        signs,
        saving,
    })
}

/// Where the first of `group`'s blocks (one dimension's blocks in a row, each starting
/// with the compute before its first call, leaf 0) computes before its first call more
/// than the others do, by the rule loops keep for their entries
/// ([`super::nest::ENTRY_SHARE`], [`super::nest::ENTRY_MIN_NS`]): the excess, with the
/// first block's compute set to the others' mean. The blocks' mean then computes that
/// mean on every block, the first too, and the excess before them keeps the time.
fn entry_excess(group: &mut [Vec<Leaf>]) -> Option<TimeSpec> {
    let (head, rest) = group.split_first_mut()?;
    let Some(Leaf::Time(entry)) = head.first() else {
        return None;
    };
    let later = match mean_leaves(rest)?.into_iter().next()? {
        Leaf::Time(t) => t,
        _ => return None,
    };
    let (e, l) = (entry.mean_seconds() * 1e9, later.mean_seconds() * 1e9);
    let d = e - l;
    if !(d > super::nest::ENTRY_SHARE * e && d > super::nest::ENTRY_MIN_NS) {
        return None;
    }
    let excess = time_minus(entry, &later)?;
    head[0] = Leaf::Time(later);
    Some(excess)
}

/// `a` less the mean `b`, rank by rank where either is per rank, never below zero; a
/// distribution moves by the difference of the means and keeps its width.
fn time_minus(a: &TimeSpec, b: &TimeSpec) -> Option<TimeSpec> {
    let d = |s: f64| Spanned::derived(super::build::duration(s.max(0.0) * 1e9));
    let per_rank = |t: &TimeSpec| match t {
        TimeSpec::PerRank(v) => Some(v.iter().map(|x| x.value.seconds()).collect::<Vec<_>>()),
        _ => None,
    };
    Some(match (per_rank(a), per_rank(b)) {
        (Some(x), Some(y)) if x.len() == y.len() => {
            TimeSpec::PerRank(x.iter().zip(&y).map(|(x, y)| d(x - y)).collect())
        }
        (Some(_), Some(_)) => return None,
        (Some(x), None) => {
            let y = b.mean_seconds();
            TimeSpec::PerRank(x.iter().map(|x| d(x - y)).collect())
        }
        (None, Some(y)) => {
            let x = a.mean_seconds();
            TimeSpec::PerRank(y.iter().map(|y| d(x - y)).collect())
        }
        (None, None) => {
            let y = b.mean_seconds();
            match a {
                TimeSpec::Fixed(x) => TimeSpec::Fixed(d(x.value.seconds() - y)),
                TimeSpec::Normal { mean, stddev } => TimeSpec::Normal {
                    mean: d(mean.value.seconds() - y),
                    stddev: *stddev,
                },
                TimeSpec::Uniform { low, high } => TimeSpec::Uniform {
                    low: d(low.value.seconds() - y),
                    high: d(high.value.seconds() - y),
                },
                TimeSpec::PerRank(_) | TimeSpec::Pick(_) => return None,
            }
        }
    })
}

/// The leaves of blocks along one dimension, slot by slot: directions as the first
/// block's, sizes and times their mean (every block weighs alike); `None` where a mean
/// cannot be written.
fn mean_leaves(group: &[Vec<Leaf>]) -> Option<Vec<Leaf>> {
    let first = group.first()?;
    let mut out = first.clone();
    for (j, slot) in out.iter_mut().enumerate() {
        let column: Vec<&Leaf> = group.iter().filter_map(|b| b.get(j)).collect();
        if column.len() != group.len() || column.iter().all(|l| *l == column[0]) {
            continue;
        }
        // Sizes of one form: the exact mean, option by option (whole bytes, rounded
        // up), so that the loop's total is the blocks' where it divides.
        let sizes: Option<Vec<&MsgSize>> = column
            .iter()
            .map(|l| match l {
                Leaf::Size(s) => Some(s),
                _ => None,
            })
            .collect();
        if let Some(sizes) = &sizes {
            let (a, len) = (sizes[0], sizes[0].values().len());
            if sizes
                .iter()
                .all(|s| s.values().len() == len && s.index() == a.index())
            {
                let mut mean = a.clone();
                for (i, v) in mean.values_mut().iter_mut().enumerate() {
                    let sum = sizes
                        .iter()
                        .map(|s| s.values()[i].value.bytes())
                        .sum::<Option<u64>>()?;
                    *v = Spanned::derived(Size::bytes_exact(sum.div_ceil(sizes.len() as u64)));
                }
                *slot = Leaf::Size(mean);
                continue;
            }
        }
        // Otherwise the running mean: k + 1 blocks' mean with the next, k + 1 parts to 1.
        for (k, next) in column.iter().enumerate().skip(1) {
            let w = k as f64 / (k + 1) as f64;
            *slot = match (&*slot, next) {
                (Leaf::Size(a), Leaf::Size(b)) => Leaf::Size(blend_sizes(a, b, w)?),
                (Leaf::Time(a), Leaf::Time(b)) => Leaf::Time(blend_times(a, b, w)?),
                (Leaf::Axis(..), Leaf::Axis(..)) => continue,
                _ => return None,
            };
        }
    }
    Some(out)
}

/// Most blocks of an uneven run ([`uneven_run`]).
const MAX_UNEVEN_BLOCKS: usize = 8;

/// A run of blocks along successive dimensions where some dimensions run parts the
/// others do not (LAMMPS exchanges atoms with both neighbours along a dimension of more
/// than two ranks, with one along a dimension of two, whose neighbours are one rank):
/// the longest block is the body, every other block must be it with some parts left
/// out, and each part runs under a condition on the loop's variable naming the
/// dimensions that ran it (`if dim == 2 { ... }`). A block is a call along some
/// dimension (each call with the compute before it) and what follows it along the same
/// dimension (and completions), up to the next call like the first. Returns the end of
/// the run, the loop, and the statements it saves.
fn uneven_run(
    stmts: &[Stmt],
    at: usize,
    ctx: &Ctx,
    scope: &[String],
) -> Option<(usize, Stmt, usize)> {
    let is_compute = |s: &Stmt| matches!(s.kind, StmtKind::Compute(_));
    // A unit: a call with the compute before it (with_gaps gives every call one).
    let unit_at = |p: usize| match (stmts.get(p), stmts.get(p + 1)) {
        (Some(first), Some(second)) => is_compute(first) && !is_compute(second),
        _ => false,
    };
    // The one dimension a call's grid directions step along.
    let dim_of = |stmt: &Stmt| -> Option<Option<i64>> {
        let (_, leaves) = parts(vec![stmt.clone()])?;
        let dims: Vec<i64> = axes(&leaves).iter().map(|a| a.0).collect();
        match dims.first() {
            None => Some(None),
            Some(&d) => dims.iter().all(|x| *x == d).then_some(Some(d)),
        }
    };
    if !unit_at(at) {
        return None;
    }
    let anchor = signature(&stmts[at + 1]);
    let mut blocks: Vec<Vec<usize>> = Vec::new();
    let mut dims: Vec<i64> = Vec::new();
    let mut p = at;
    while blocks.len() < MAX_UNEVEN_BLOCKS {
        if !unit_at(p) || signature(&stmts[p + 1]) != anchor {
            break;
        }
        let Some(Some(d)) = dim_of(&stmts[p + 1]) else {
            break;
        };
        let mut units = vec![p];
        let mut q = p + 2;
        while unit_at(q) && 2 * (units.len() + 1) <= MAX_BLOCK {
            let call = &stmts[q + 1];
            if signature(call) == anchor {
                break;
            }
            let along = match dim_of(call) {
                Some(Some(x)) => x == d,
                Some(None) => matches!(call.kind, StmtKind::Wait(_)),
                None => false,
            };
            if !along {
                break;
            }
            units.push(q);
            q += 2;
        }
        blocks.push(units);
        dims.push(d);
        p = q;
    }
    let n = blocks.len();
    if n < 2 || blocks.iter().all(|b| b.len() == blocks[0].len()) {
        return None;
    }
    let end = p;
    // The longest block is the body; every block matches a subsequence of it.
    let tmpl = (0..n).max_by_key(|k| (blocks[*k].len(), std::cmp::Reverse(*k)))?;
    let body = &blocks[tmpl];
    let shape = |u: usize| parts(stmts[u..u + 2].to_vec()).map(|(s, _)| s);
    let tshapes: Vec<Vec<Stmt>> = body.iter().map(|&u| shape(u)).collect::<Option<_>>()?;
    let tlen = tshapes.len();
    // of[k][t]: the unit of block k at the body's position t, if it has one.
    let mut of: Vec<Vec<Option<usize>>> = vec![vec![None; tlen]; n];
    for (k, units) in blocks.iter().enumerate() {
        let mut t = 0;
        for &u in units {
            let sh = shape(u)?;
            while t < tlen && tshapes[t] != sh {
                t += 1;
            }
            if t == tlen {
                return None;
            }
            of[k][t] = Some(u);
            t += 1;
        }
    }
    let var = fresh_name("dim", scope, &stmts[at..end]);
    let column = |t: usize| -> Vec<bool> { (0..n).map(|k| of[k][t].is_some()).collect() };
    // Parts: runs of body positions that the same blocks lack, each with its condition
    // and the dimensions that ran it.
    let mut groups: Vec<(usize, usize, Expr, String)> = Vec::new();
    let mut t = 0;
    while t < tlen {
        let col = column(t);
        if col.iter().all(|x| *x) {
            t += 1;
            continue;
        }
        let mut g = t + 1;
        while g < tlen && column(g) == col {
            g += 1;
        }
        let cond = members_cond(&var, &col)?;
        // A request a part posts is completed in it, and the reverse.
        let (mut posted, mut waited) = (Vec::new(), Vec::new());
        for &u in &body[t..g] {
            each_ref(&stmts[u..u + 2], &mut |s| match &s.kind {
                StmtKind::P2p(p) => posted.extend(p.request.as_ref().map(|r| r.name.clone())),
                StmtKind::Wait(w) => waited.extend(w.handles.iter().map(|h| h.name.clone())),
                _ => {}
            });
        }
        posted.sort();
        waited.sort();
        if posted != waited {
            return None;
        }
        let ran: Vec<String> = (0..n)
            .filter(|k| col[*k])
            .map(|k| dims[k].to_string())
            .collect();
        groups.push((t, g, cond, ran.join(", ")));
        t = g;
    }
    // Every block written as the body, the parts it lacks taken from the body with
    // their directions moved to its dimension, each part under its condition.
    let unit_of = |k: usize, t: usize| -> Vec<Stmt> {
        match of[k][t] {
            Some(u) => stmts[u..u + 2].to_vec(),
            None => {
                let mut copy = stmts[body[t]..body[t] + 2].to_vec();
                let shift = dims[k] - dims[tmpl];
                walk(&mut copy, &mut |slot| {
                    if let Slot::Peer(Peer::Dir(Direction::Axis(a)), _) = slot {
                        a.dim = u32::try_from(i64::from(a.dim) + shift).unwrap_or(a.dim);
                        a.spelling = AxisSpelling::Numbered;
                    }
                });
                copy
            }
        }
    };
    let mut padded: Vec<Stmt> = Vec::new();
    let mut len0 = 0;
    for k in 0..n {
        let start = padded.len();
        let mut t = 0;
        for (g0, g1, cond, ran) in &groups {
            (t..*g0).for_each(|tt| padded.extend(unit_of(k, tt)));
            let inner: Vec<Stmt> = (*g0..*g1).flat_map(|tt| unit_of(k, tt)).collect();
            let mut stmt = Stmt::new(StmtKind::If(Box::new(If {
                cond: cond.clone(),
                then_block: Block {
                    stmts: inner,
                    end_comments: Vec::new(),
                },
                else_branch: None,
            })));
            stmt.trivia.leading.push(format!(
                "# Only along dimension(s) {ran} in the application."
            ));
            padded.push(gap());
            padded.push(stmt);
            t = *g1;
        }
        (t..tlen).for_each(|tt| padded.extend(unit_of(k, tt)));
        if k == 0 {
            len0 = padded.len();
        } else if padded.len() - start != len0 {
            return None;
        }
    }
    let run = run_at(&padded, 0, len0, false, false, ctx)?;
    if run.bounds.len() != n {
        return None;
    }
    let folded = fold_run(&padded, &run, &var, scope);
    let before = count_statements(&without_gaps(stmts[at..end].to_vec()));
    let after = count_statements(&without_gaps(vec![folded.clone()]));
    let saving = before.checked_sub(after)?;
    (saving >= MIN_SAVING).then_some((end, folded, saving))
}

/// `var == k`, `var != k`, `var < k` or `var >= k` for exactly the members of `set`
/// (indices of blocks).
fn members_cond(var: &str, set: &[bool]) -> Option<Expr> {
    let members: Vec<i64> = (0..set.len() as i64).filter(|k| set[*k as usize]).collect();
    let others: Vec<i64> = (0..set.len() as i64)
        .filter(|k| !set[*k as usize])
        .collect();
    let v = || Expr::new(ExprKind::Var(Ident::new(var)));
    let n = set.len() as i64;
    match (members.as_slice(), others.as_slice()) {
        ([m], _) => Some(bin(BinOp::Eq, v(), Expr::int(*m))),
        (_, [o]) => Some(bin(BinOp::Ne, v(), Expr::int(*o))),
        ([0, ..], _) if members.iter().zip(0..).all(|(m, i)| *m == i) => {
            Some(bin(BinOp::Lt, v(), Expr::int(members.len() as i64)))
        }
        (_, [0, ..]) if others.iter().zip(0..).all(|(o, i)| *o == i) => {
            Some(bin(BinOp::Ge, v(), Expr::int(n - members.len() as i64)))
        }
        _ => None,
    }
}

/// What a statement's shape starts with: its kind, operation and call site.
fn signature(stmt: &Stmt) -> String {
    let site = stmt.site.as_ref().map_or("", |s| s.text.as_str());
    match &stmt.kind {
        StmtKind::Compute(_) => "compute".into(),
        StmtKind::P2p(p) => format!("{} {site}", p.op.keyword()),
        StmtKind::Collective(c) => format!("{} {site}", c.op.keyword()),
        StmtKind::Wait(w) => format!("wait {:?} {site}", w.op),
        StmtKind::Loop(l) => format!("loop {:?}", l.count.kind),
        StmtKind::If(_) => "if".into(),
        StmtKind::While(_) => format!("while {site}"),
        StmtKind::CommDecl(_) => "comm".into(),
    }
}

/// Whether a statement talks along a grid direction.
fn has_axis(stmt: &Stmt) -> bool {
    let axis = |peer: &Peer| matches!(peer, Peer::Dir(Direction::Axis(_)));
    match &stmt.kind {
        StmtKind::P2p(p) => {
            axis(&p.peer.value) || p.recv.as_deref().is_some_and(|r| axis(&r.0.value))
        }
        StmtKind::Loop(_) | StmtKind::If(_) => crate::semantics::stmt_blocks(stmt)
            .into_iter()
            .any(|b| b.stmts.iter().any(has_axis)),
        _ => false,
    }
}

/// How many statements `stmt` is with its loop of two unrolled ([`unrolled`]).
fn unrolled_len(stmt: &Stmt) -> usize {
    match &stmt.kind {
        StmtKind::Loop(l) if l.var.is_none() && matches!(l.count.kind, ExprKind::Int(2)) => {
            2 * l.body.stmts.len()
        }
        _ => 1,
    }
}

/// The block with every loop of two iterations (without a variable) written out twice;
/// a compute just before such a loop joins the compute its body starts with, so that
/// every call keeps exactly one compute before it.
/// [`unrolled`], with where each statement as written starts in it (`None` where its
/// first statement joined the one before), and the end.
fn unrolled_bounds(block: &[Stmt]) -> (Vec<Stmt>, Vec<Option<usize>>) {
    let mut out: Vec<Stmt> = Vec::new();
    let mut bounds = Vec::with_capacity(block.len() + 1);
    for stmt in block {
        let before = out.len();
        let next = unrolled(std::slice::from_ref(stmt));
        let mut next = next.into_iter();
        if let Some(head) = next.next() {
            push_joined(&mut out, head);
        }
        out.extend(next);
        // Its first statement stands apart unless it joined the last one before.
        bounds.push((out.len() > before).then_some(before));
    }
    bounds.push(Some(out.len()));
    (out, bounds)
}

fn unrolled(block: &[Stmt]) -> Vec<Stmt> {
    let mut out: Vec<Stmt> = Vec::new();
    for stmt in block {
        match &stmt.kind {
            StmtKind::Loop(l) if unrolled_len(stmt) > 1 => {
                for copy in [&l.body.stmts, &l.body.stmts] {
                    let mut copy = copy.iter().cloned();
                    if let Some(head) = copy.next() {
                        push_joined(&mut out, head);
                    }
                    out.extend(copy);
                }
            }
            _ => out.push(stmt.clone()),
        }
    }
    out
}

/// The length of [`unrolled`]'s output, statement by statement, without building it
/// (a compute after a compute counts as joined).
#[derive(Default)]
struct Unrolled {
    n: usize,
    last_compute: bool,
}

impl Unrolled {
    fn add(&mut self, stmt: &Stmt) {
        match &stmt.kind {
            StmtKind::Loop(l) if unrolled_len(stmt) > 1 => {
                for _ in 0..2 {
                    for (k, s) in l.body.stmts.iter().enumerate() {
                        self.push(s, k == 0);
                    }
                }
            }
            _ => self.push(stmt, false),
        }
    }

    fn push(&mut self, stmt: &Stmt, joins: bool) {
        let compute = matches!(stmt.kind, StmtKind::Compute(_));
        if !(joins && compute && self.last_compute) {
            self.n += 1;
        }
        self.last_compute = compute;
    }
}

/// The signatures of the first `n` statements of `stmts` unrolled, without building them.
fn unrolled_sigs(stmts: &[Stmt], n: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(n);
    let push = |s: &Stmt, joins: bool, out: &mut Vec<String>| {
        let sig = signature(s);
        if !(joins && sig == "compute" && out.last().is_some_and(|l| l == "compute")) {
            out.push(sig);
        }
    };
    for stmt in stmts {
        if out.len() >= n {
            break;
        }
        match &stmt.kind {
            StmtKind::Loop(l) if unrolled_len(stmt) > 1 => {
                for s in l.body.stmts.iter().take(n) {
                    push(s, std::ptr::eq(s, &l.body.stmts[0]), &mut out);
                }
            }
            _ => push(stmt, false, &mut out),
        }
    }
    out.truncate(n);
    out
}

/// Pushes `stmt`, joined with the compute before it when both are computes.
fn push_joined(out: &mut Vec<Stmt>, stmt: Stmt) {
    let Some(last) = out.last_mut() else {
        out.push(stmt);
        return;
    };
    let StmtKind::Compute(c) = &stmt.kind else {
        out.push(stmt);
        return;
    };
    if !matches!(last.kind, StmtKind::Compute(_)) {
        out.push(stmt);
        return;
    }
    if is_gap(last) {
        *last = stmt;
        return;
    }
    if is_gap(&stmt) {
        return;
    }
    if let StmtKind::Compute(prev) = &mut last.kind {
        if let Some(sum) = add_times(&prev.time, &c.time) {
            prev.time = sum;
            add_polls(prev, c.polls, c.poll_cost);
            return;
        }
    }
    out.push(stmt);
}

/// Adds the polls of another compute (`polls`, each taking `cost`) to `into`'s: their
/// count, and the mean cost of those whose cost is known.
pub(super) fn add_polls(
    into: &mut Compute,
    polls: Option<Spanned<u64>>,
    cost: Option<Spanned<Duration>>,
) {
    let Some(n) = polls else {
        return;
    };
    let Some(m) = into.polls else {
        into.polls = Some(n);
        into.poll_cost = cost;
        return;
    };
    into.poll_cost = match (into.poll_cost, cost) {
        (Some(a), Some(b)) => {
            let total = m.value as f64 * a.value.seconds() + n.value as f64 * b.value.seconds();
            let count = (m.value + n.value).max(1) as f64;
            Some(Spanned::derived(super::build::duration(
                total / count * 1e9,
            )))
        }
        (a, None) => a,
        (None, b) => b,
    };
    into.polls = Some(Spanned::derived(m.value.saturating_add(n.value)));
}

/// The time of one compute after another, where the forms allow it.
fn add_times(a: &TimeSpec, b: &TimeSpec) -> Option<TimeSpec> {
    let plus = |x: &Spanned<Duration>, ns: f64| {
        Spanned::derived(super::build::duration(x.value.seconds() * 1e9 + ns))
    };
    let ns = |t: &TimeSpec| match t {
        TimeSpec::Fixed(d) => Some(d.value.seconds() * 1e9),
        _ => None,
    };
    Some(match (a, b) {
        (TimeSpec::Fixed(x), _) if ns(b).is_some() => TimeSpec::Fixed(plus(x, ns(b)?)),
        (TimeSpec::PerRank(v), _) | (_, TimeSpec::PerRank(v)) if ns(a).or(ns(b)).is_some() => {
            TimeSpec::PerRank(
                v.iter()
                    .map(|x| plus(x, ns(a).or(ns(b)).unwrap_or(0.0)))
                    .collect(),
            )
        }
        (TimeSpec::PerRank(v), TimeSpec::PerRank(w)) if v.len() == w.len() => TimeSpec::PerRank(
            v.iter()
                .zip(w)
                .map(|(x, y)| plus(x, y.value.seconds() * 1e9))
                .collect(),
        ),
        (TimeSpec::Normal { mean, stddev }, _) | (_, TimeSpec::Normal { mean, stddev })
            if ns(a).or(ns(b)).is_some() =>
        {
            TimeSpec::Normal {
                mean: plus(mean, ns(a).or(ns(b)).unwrap_or(0.0)),
                stddev: *stddev,
            }
        }
        _ => return None,
    })
}

/// What a block's statements hold that may differ per dimension.
#[derive(Clone, Debug, PartialEq)]
enum Leaf {
    /// A grid direction: its dimension, its sign, and whether on the world.
    Axis(i64, bool, bool),
    Size(MsgSize),
    Time(TimeSpec),
}

fn axes(leaves: &[Leaf]) -> Vec<(i64, bool, bool)> {
    leaves
        .iter()
        .filter_map(|l| match l {
            Leaf::Axis(d, s, w) => Some((*d, *s, *w)),
            _ => None,
        })
        .collect()
}

/// A leaf slot in a statement, for reading and for rewriting.
enum Slot<'a> {
    /// A peer, and whether the operation is on the world.
    Peer(&'a mut Peer, bool),
    Size(&'a mut MsgSize),
    Time(&'a mut TimeSpec),
}

/// Visits the slots of `stmts` in program order (the same order on blocks of the same
/// shape).
fn walk(stmts: &mut [Stmt], f: &mut dyn FnMut(Slot)) {
    for stmt in stmts {
        match &mut stmt.kind {
            StmtKind::Compute(c) => f(Slot::Time(&mut c.time)),
            StmtKind::P2p(p) => {
                let world = p.comm.is_none();
                f(Slot::Peer(&mut p.peer.value, world));
                f(Slot::Size(&mut p.size));
                if let Some((peer, size)) = p.recv.as_deref_mut() {
                    f(Slot::Peer(&mut peer.value, world));
                    f(Slot::Size(size));
                }
            }
            StmtKind::Loop(l) => walk(&mut l.body.stmts, f),
            StmtKind::If(_) => each_branch(stmt, &mut |b| walk(b, f)),
            _ => {}
        }
    }
}

/// Applies `f` to every statement of `stmts`, nested ones included.
pub(super) fn each_stmt(stmts: &mut [Stmt], f: &mut dyn FnMut(&mut Stmt)) {
    for stmt in stmts {
        f(stmt);
        match &mut stmt.kind {
            StmtKind::Loop(l) => each_stmt(&mut l.body.stmts, f),
            StmtKind::If(_) => each_branch(stmt, &mut |b| each_stmt(b, f)),
            _ => {}
        }
    }
}

/// Applies `f` to every statement of `stmts`, nested ones included, reading only.
fn each_ref<'p>(stmts: &'p [Stmt], f: &mut impl FnMut(&'p Stmt)) {
    for stmt in stmts {
        f(stmt);
        for block in crate::semantics::stmt_blocks(stmt) {
            crate::semantics::visit(block, f);
        }
    }
}

/// A block's shape (a copy with its leaves set to neutral values and no comments) and
/// its leaves; `None` when it holds something a fold cannot write (a pick already, a
/// direction along a computed dimension).
fn parts(mut shape: Vec<Stmt>) -> Option<(Vec<Stmt>, Vec<Leaf>)> {
    let mut leaves = Vec::new();
    let mut ok = true;
    walk(&mut shape, &mut |slot| match slot {
        Slot::Peer(Peer::Dir(Direction::Axis(a)), world) => {
            leaves.push(Leaf::Axis(i64::from(a.dim), a.forward, world));
            a.dim = 0;
            a.forward = true;
            a.spelling = AxisSpelling::Numbered;
        }
        Slot::Peer(Peer::Dir(Direction::AxisOf { .. }), _) => ok = false,
        Slot::Peer(..) => {}
        Slot::Size(s) => {
            if matches!(s, MsgSize::Pick(_)) {
                ok = false;
            }
            leaves.push(Leaf::Size(s.clone()));
            *s = MsgSize::Fixed(Spanned::derived(Size::bytes_exact(0)));
        }
        Slot::Time(t) => {
            if matches!(t, TimeSpec::Pick(_)) {
                ok = false;
            }
            leaves.push(Leaf::Time(t.clone()));
            *t = TimeSpec::Fixed(Spanned::derived(Duration::new(0.0, TimeUnit::Ns)));
        }
    });
    each_stmt(&mut shape, &mut |s| s.trivia = Trivia::default());
    ok.then_some((shape, leaves))
}

/// The loop that stands for the run at `at`.
fn fold_run(stmts: &[Stmt], run: &Run, var: &str, scope: &[String]) -> Stmt {
    let blocks: Vec<Vec<Stmt>> = run
        .bounds
        .iter()
        .map(|&(a, l)| {
            let b = &stmts[a..a + l];
            if run.unroll {
                unrolled(b)
            } else {
                b.to_vec()
            }
        })
        .collect();
    let leaves = &run.leaves;
    let index = || Expr::new(ExprKind::Var(Ident::new(var)));
    let mut body = blocks[0].clone();
    let mut j = 0;
    let mut axis = 0;
    walk(&mut body, &mut |slot| {
        let column: Vec<&Leaf> = leaves.iter().filter_map(|l| l.get(j)).collect();
        match slot {
            Slot::Peer(Peer::Dir(dir @ Direction::Axis(_)), _) => {
                let Some(Leaf::Axis(d0, ..)) = column.first() else {
                    return;
                };
                *dir = Direction::AxisOf {
                    dim: affine(*d0, run.stride, index()),
                    forward: run.signs.get(axis).copied().unwrap_or(true),
                };
                axis += 1;
                j += 1;
            }
            Slot::Peer(..) => {}
            Slot::Size(s) => {
                let values: Vec<Spanned<Size>> = column
                    .iter()
                    .filter_map(|l| match l {
                        Leaf::Size(MsgSize::Fixed(v)) => Some(*v),
                        _ => None,
                    })
                    .collect();
                // One value for all dimensions: that value (a repeated dimension's mean,
                // not necessarily the first block's).
                if values.iter().any(|v| v.value != values[0].value) {
                    *s = MsgSize::Pick(Box::new(Pick {
                        values,
                        index: index(),
                    }));
                } else if let (Some(v), true) = (values.first(), values.len() == column.len()) {
                    *s = MsgSize::Fixed(*v);
                }
                j += 1;
            }
            Slot::Time(t) => {
                let values: Vec<TimeSpec> = column
                    .iter()
                    .filter_map(|l| match l {
                        Leaf::Time(t) => Some(t.clone()),
                        _ => None,
                    })
                    .collect();
                if values.iter().any(|v| *v != values[0]) {
                    *t = TimeSpec::Pick(Box::new(Pick {
                        values,
                        index: index(),
                    }));
                } else if let Some(v) = values.into_iter().next() {
                    *t = v;
                }
                j += 1;
            }
        }
    });
    // Comments the blocks share stay; the others go (the loop's comment says why).
    let mut others: Vec<Vec<Trivia>> = blocks[1..]
        .iter()
        .map(|b| {
            let mut list = Vec::new();
            each_ref(b, &mut |s| list.push(s.trivia.clone()));
            list
        })
        .collect();
    let mut k = 0;
    each_stmt(&mut body, &mut |s| {
        let shared =
            |get: &dyn Fn(&Trivia) -> bool| others.iter().all(|o| o.get(k).is_some_and(get));
        let leading = s.trivia.leading.clone();
        if !shared(&|t: &Trivia| t.leading == leading) {
            s.trivia.leading.clear();
        }
        let trailing = s.trivia.trailing.clone();
        if !shared(&|t: &Trivia| t.trailing == trailing) {
            s.trivia.trailing = None;
        }
        k += 1;
    });
    others.clear();
    let dims: Vec<String> = leaves
        .iter()
        .filter_map(|l| axes(l).first().map(|a| a.0.to_string()))
        .collect();
    // A longer dimension's two swaps written apart, the second the first with every
    // sign turned: one loop over the two sides.
    let mut taken = scope.to_vec();
    taken.push(var.to_string());
    let mut body = side_loop(body, &taken);
    // Dimensions that make their calls more than once: a loop inside, its count per
    // dimension where they differ.
    let mut repeated = String::new();
    if run.repeats.iter().any(|&r| r > 1) {
        let counts: Vec<i64> = run.repeats.iter().map(|&r| r as i64).collect();
        let count = if counts.iter().all(|&c| c == counts[0]) {
            Expr::int(counts[0])
        } else {
            Expr::new(ExprKind::Pick(counts, Box::new(index())))
        };
        let times: Vec<String> = dims
            .iter()
            .zip(&run.repeats)
            .filter(|(_, &r)| r > 1)
            .map(|(d, r)| format!("{r} times along dimension {d}"))
            .collect();
        let ahead = run.entries.iter().any(Option::is_some);
        repeated = format!(
            " Some dimensions make them several times in a row ({}): sizes and compute are the mean of those times{}.",
            times.join(", "),
            if ahead {
                ", but for what the first time computes beyond that mean, before them"
            } else {
                ""
            }
        );
        let repeats = Stmt::new(StmtKind::Loop(Box::new(Loop {
            count,
            var: None,
            body: Block {
                stmts: body,
                end_comments: Vec::new(),
            },
        })));
        body = Vec::with_capacity(2);
        if ahead {
            let zero = || TimeSpec::Fixed(Spanned::derived(Duration::new(0.0, TimeUnit::Ns)));
            let values: Vec<TimeSpec> = run
                .entries
                .iter()
                .map(|e| e.clone().unwrap_or_else(zero))
                .collect();
            let time = if values.iter().all(|v| *v == values[0]) {
                values[0].clone()
            } else {
                TimeSpec::Pick(Box::new(Pick {
                    values,
                    index: index(),
                }))
            };
            let working_set = match blocks[0].first().map(|s| &s.kind) {
                Some(StmtKind::Compute(c)) => c.working_set,
                _ => None,
            };
            body.push(Stmt::new(StmtKind::Compute(Box::new(Compute {
                time,
                working_set,
                polls: None,
                poll_cost: None,
            }))));
        }
        body.push(repeats);
    }
    let mut stmt = Stmt::new(StmtKind::Loop(Box::new(Loop {
        count: Expr::int(run.repeats.len() as i64),
        var: Some(Ident::new(var)),
        body: Block {
            stmts: body,
            end_comments: Vec::new(),
        },
    })));
    stmt.trivia.leading.push(format!(
        "# The same calls along grid dimensions {} in turn: `{var}` numbers them; sizes and compute that differ are per dimension.{repeated}",
        dims.join(", ")
    ));
    stmt
}

/// The body of a loop over dimensions with its first run of two blocks alike but for
/// the signs of their directions, all turned in the second (a dimension longer than two
/// ranks sends to its +1 neighbour and receives from its -1 one, then the reverse),
/// written as `loop 2 as side { ... shift(dim, 1 - 2 * side) ... }`. Sizes and times
/// that differ between the two sides are their mean, as the compressor's loop of two
/// over a 2-rank dimension's swaps keeps them, so every side's total is kept.
fn side_loop(body: Vec<Stmt>, taken: &[String]) -> Vec<Stmt> {
    let side = fresh_name("side", taken, &body);
    let n = body.len();
    for i in 0..n {
        for len in (1..=(n - i) / 2).rev() {
            let (b0, b1) = (&body[i..i + len], &body[i + len..i + 2 * len]);
            if signature(&b0[0]) != signature(&b1[0]) {
                continue;
            }
            let (shape0, signs0) = turned_shape(b0, false);
            if signs0.is_empty() {
                continue;
            }
            let (shape1, signs1) = turned_shape(b1, false);
            if shape0 != shape1 || signs0.iter().zip(&signs1).any(|(a, b)| a == b) {
                continue;
            }
            let size = real_count(b0);
            if size < MIN_SAVING + 1 {
                continue;
            }
            let Some(joined) = join_sides(b0, b1, &side) else {
                continue;
            };
            let mut looped = Stmt::new(StmtKind::Loop(Box::new(Loop {
                count: Expr::int(2),
                var: Some(Ident::new(side.clone())),
                body: Block {
                    stmts: joined,
                    end_comments: Vec::new(),
                },
            })));
            looped.trivia.leading.push(format!(
                "# The two swaps of a dimension, the second with every direction turned: `{side}` numbers them."
            ));
            let mut out = body[..i].to_vec();
            out.push(looped);
            out.extend_from_slice(&body[i + 2 * len..]);
            return out;
        }
    }
    body
}

/// A block's shape with every direction along a computed dimension made forward (and,
/// with `no_sites`, without call sites), and the signs it had.
fn turned_shape(b: &[Stmt], no_sites: bool) -> (Vec<Stmt>, Vec<bool>) {
    let mut out = Vec::new();
    let mut b = b.to_vec();
    walk(&mut b, &mut |slot| {
        if let Slot::Peer(Peer::Dir(Direction::AxisOf { forward, .. }), _) = slot {
            out.push(*forward);
            *forward = true;
        }
    });
    if no_sites {
        each_stmt(&mut b, &mut |s| s.site = None);
    }
    (stat_free(&b), out)
}

/// A direction along a computed dimension as the side loop's shift: forward first,
/// `shift(dim, 1 - 2 * side)`; backward first, `shift(dim, 2 * side - 1)`.
fn turn_with_side(dir: &mut Direction, side: &str) {
    if let Direction::AxisOf { dim, forward } = dir.clone() {
        let twice = bin(
            BinOp::Mul,
            Expr::int(2),
            Expr::new(ExprKind::Var(Ident::new(side))),
        );
        let disp = if forward {
            bin(BinOp::Sub, Expr::int(1), twice)
        } else {
            bin(BinOp::Sub, twice, Expr::int(1))
        };
        *dir = Direction::Shift { dim, disp };
    }
}

/// Block `a` with its directions as `shift(dim, ±(1 - 2 * side))` and its sizes and
/// times the mean of `a`'s and `b`'s; `None` where a mean cannot be written.
fn join_sides(a: &[Stmt], b: &[Stmt], side: &str) -> Option<Vec<Stmt>> {
    let mut leaves = Vec::new();
    let mut b = b.to_vec();
    walk(&mut b, &mut |slot| match slot {
        Slot::Size(s) => leaves.push(Leaf::Size(s.clone())),
        Slot::Time(t) => leaves.push(Leaf::Time(t.clone())),
        Slot::Peer(..) => {}
    });
    let mut out = a.to_vec();
    let mut leaves = leaves.into_iter();
    let mut ok = true;
    walk(&mut out, &mut |slot| match slot {
        Slot::Peer(Peer::Dir(dir), _) => turn_with_side(dir, side),
        Slot::Peer(..) => {}
        Slot::Size(s) => match (leaves.next(), &*s) {
            (Some(Leaf::Size(o)), _) if o == *s => {}
            (Some(Leaf::Size(o)), _) => match mean_sizes(s, &o) {
                Some(m) => *s = m,
                None => ok = false,
            },
            _ => ok = false,
        },
        Slot::Time(t) => match leaves.next() {
            Some(Leaf::Time(o)) if o == *t => {}
            Some(Leaf::Time(o)) => match mean_times(t, &o) {
                Some(m) => *t = m,
                None => ok = false,
            },
            _ => ok = false,
        },
    });
    ok.then_some(out)
}

/// The mean of two message sizes, option by option for picks of one length.
fn mean_sizes(a: &MsgSize, b: &MsgSize) -> Option<MsgSize> {
    blend_sizes(a, b, 0.5)
}

/// `w` parts of `a` and `1 - w` parts of `b`, option by option for picks of one length
/// (a pick and one size: each option with that size); whole bytes, rounded up.
fn blend_sizes(a: &MsgSize, b: &MsgSize, w: f64) -> Option<MsgSize> {
    let (va, vb) = (a.values(), b.values());
    // Written as the pick when one side is one, with `w` following its side.
    let (a, b, va, vb, w) = if va.len() == 1 && vb.len() != 1 {
        (b, a, vb, va, 1.0 - w)
    } else {
        (a, b, va, vb, w)
    };
    if vb.len() != 1 && (va.len() != vb.len() || a.index() != b.index()) {
        return None;
    }
    let mut out = a.clone();
    for (i, x) in out.values_mut().iter_mut().enumerate() {
        let y = vb.get(i).or(vb.first())?;
        let m = (w * x.value.bytes()? as f64 + (1.0 - w) * y.value.bytes()? as f64).ceil();
        *x = Spanned::derived(Size::bytes_exact(m as u64));
    }
    Some(out)
}

/// The mean of two compute times, where the forms allow it (fixed, per rank, normal,
/// and picks of one length).
fn mean_times(a: &TimeSpec, b: &TimeSpec) -> Option<TimeSpec> {
    blend_times(a, b, 0.5)
}

/// `w` parts of `a` and `1 - w` parts of `b`, where the forms allow it: fixed, per
/// rank (rank by rank, or each rank's value with one value), normal (the wider
/// deviation), and picks option by option (a pick and one value: each option with it).
fn blend_times(a: &TimeSpec, b: &TimeSpec, w: f64) -> Option<TimeSpec> {
    let mix =
        |x: f64, y: f64| Spanned::derived(super::build::duration((w * x + (1.0 - w) * y) * 1e9));
    // One value standing for a whole spec: fixed, or a distribution's mean.
    let one = |t: &TimeSpec| match t {
        TimeSpec::Fixed(d) => Some(d.value.seconds()),
        TimeSpec::Normal { mean, .. } => Some(mean.value.seconds()),
        _ => None,
    };
    let secs = |t: &TimeSpec| match t {
        TimeSpec::Fixed(d) => Some(d.value.seconds()),
        _ => None,
    };
    Some(match (a, b) {
        (TimeSpec::Fixed(x), _) if secs(b).is_some() => {
            TimeSpec::Fixed(mix(x.value.seconds(), secs(b)?))
        }
        (TimeSpec::PerRank(v), TimeSpec::PerRank(u)) if v.len() == u.len() => TimeSpec::PerRank(
            v.iter()
                .zip(u)
                .map(|(x, y)| mix(x.value.seconds(), y.value.seconds()))
                .collect(),
        ),
        // A per-rank table and one value (a distribution's mean): each rank's value with it.
        (TimeSpec::PerRank(v), other) if one(other).is_some() => {
            let y = one(other)?;
            TimeSpec::PerRank(v.iter().map(|x| mix(x.value.seconds(), y)).collect())
        }
        (other, TimeSpec::PerRank(u)) if one(other).is_some() => {
            let x = one(other)?;
            TimeSpec::PerRank(u.iter().map(|y| mix(x, y.value.seconds())).collect())
        }
        (
            TimeSpec::Normal {
                mean: m1,
                stddev: s1,
            },
            TimeSpec::Normal {
                mean: m2,
                stddev: s2,
            },
        ) => TimeSpec::Normal {
            mean: mix(m1.value.seconds(), m2.value.seconds()),
            stddev: if s1.value.seconds() >= s2.value.seconds() {
                *s1
            } else {
                *s2
            },
        },
        (TimeSpec::Normal { mean, stddev }, other) if secs(other).is_some() => TimeSpec::Normal {
            mean: mix(mean.value.seconds(), secs(other)?),
            stddev: *stddev,
        },
        (other, TimeSpec::Normal { mean, stddev }) if secs(other).is_some() => TimeSpec::Normal {
            mean: mix(secs(other)?, mean.value.seconds()),
            stddev: *stddev,
        },
        // Picks option by option; a pick and one value: each option with that value.
        (TimeSpec::Pick(p), other) | (other, TimeSpec::Pick(p)) => {
            let pick_first = matches!(a, TimeSpec::Pick(_));
            let partner = |i: usize| match other {
                TimeSpec::Pick(q) if q.values.len() == p.values.len() && q.index == p.index => {
                    q.values.get(i)
                }
                TimeSpec::Pick(_) => None,
                one => Some(one),
            };
            TimeSpec::Pick(Box::new(Pick {
                values: p
                    .values
                    .iter()
                    .enumerate()
                    .map(|(i, x)| {
                        let y = partner(i)?;
                        if x == y {
                            Some(x.clone())
                        } else if pick_first {
                            blend_times(x, y, w)
                        } else {
                            blend_times(y, x, w)
                        }
                    })
                    .collect::<Option<Vec<_>>>()?,
                index: p.index.clone(),
            }))
        }
        _ => return None,
    })
}

/// `d0 + stride * var`, written plainly.
fn affine(d0: i64, stride: i64, var: Expr) -> Expr {
    let scaled = match stride {
        1 => var,
        -1 => return bin(BinOp::Sub, Expr::int(d0), var),
        s => bin(BinOp::Mul, Expr::int(s), var),
    };
    if d0 == 0 {
        scaled
    } else {
        bin(BinOp::Add, scaled, Expr::int(d0))
    }
}

/// `base`, or `base2`, ... when a name in `taken` (the enclosing loops') or a loop
/// inside `block` has it.
fn fresh_name(base: &str, taken: &[String], block: &[Stmt]) -> String {
    let mut inner = Vec::new();
    each_ref(block, &mut |s| {
        if let StmtKind::Loop(l) = &s.kind {
            inner.extend(l.var.as_ref().map(|v| v.name.as_str()));
        }
    });
    let taken = |name: &str| taken.iter().any(|v| v == name) || inner.contains(&name);
    let mut name = base.to_string();
    let mut n = 2;
    while taken(&name) {
        name = format!("{base}{n}");
        n += 1;
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "skeleton t\nranks 8\ntopology torus(2, 2, 2)\napp_time 1 s\n";

    /// The body of `HEADER` + `body` after the fold, printed, without the header.
    fn folded(body: &str) -> (String, usize) {
        folded_on(HEADER, body)
    }

    /// [`folded`] under another header.
    fn folded_on(header: &str, body: &str) -> (String, usize) {
        let (mut program, diags) = perfskel_grammar::parse(&format!("{header}{body}"));
        assert!(diags.is_empty(), "{diags:?}");
        let topology = program.topology.value.clone();
        let (stmts, made) = dimension_loops(std::mem::take(&mut program.body.stmts), &topology);
        program.body.stmts = stmts;
        let text = perfskel_grammar::print(&program);
        (text.trim_start_matches(header).to_string(), made)
    }

    #[test]
    fn the_mean_of_two_sides_takes_every_form_of_compute() {
        let t = |src: &str| {
            let (program, diags) = perfskel_grammar::parse(&format!("{HEADER}compute {src}\n"));
            assert!(diags.is_empty(), "{diags:?}");
            match &program.body.stmts[0].kind {
                StmtKind::Compute(c) => c.time.clone(),
                other => panic!("{other:?}"),
            }
        };
        let shown = |spec: TimeSpec| {
            let mut stmt = Stmt::new(StmtKind::Compute(Box::new(Compute {
                time: spec,
                working_set: None,
                polls: None,
                poll_cost: None,
            })));
            stmt.trivia = Trivia::default();
            let (mut program, _) = perfskel_grammar::parse(HEADER);
            program.body.stmts = vec![stmt];
            perfskel_grammar::print(&program)
                .trim_start_matches(HEADER)
                .trim()
                .to_string()
        };
        let per_rank = "per_rank(10 us, 20 us, 10 us, 20 us, 10 us, 20 us, 10 us, 20 us)";
        let cases = [
            (
                per_rank,
                "normal(30 us, 1 us)",
                "compute per_rank(20 us, 25 us, 20 us, 25 us, 20 us, 25 us, 20 us, 25 us)",
            ),
            (
                "normal(10 us, 1 us)",
                "normal(30 us, 2 us)",
                "compute normal(20 us, 2 us)",
            ),
            ("[10 us, 0 ns][0]", "4 us", "compute [7 us, 2 us][0]"),
        ];
        for (a, b, want) in cases {
            let m = mean_times(&t(a), &t(b)).unwrap_or_else(|| panic!("{a} and {b}"));
            assert_eq!(shown(m), want, "{a} and {b}");
            let m = mean_times(&t(b), &t(a)).unwrap_or_else(|| panic!("{b} and {a}"));
            assert_eq!(shown(m), want, "{b} and {a}");
        }
    }

    #[test]
    fn sides_join_where_one_computes_per_dimension_and_the_other_does_not() {
        // On a 4 x 4 x 4 torus each dimension writes its two swaps apart; only the first
        // swap of the first dimension computes before it.
        let header = "skeleton t\nranks 64\ntopology torus(4, 4, 4)\napp_time 1 s\n";
        let dim = |plus: &str, minus: &str, size: &str, compute: &str| {
            format!(
                "{compute}req r0 = irecv {minus} 4 KiB @ \"r\"\nsend {plus} {size} @ \"s\"\nwait r0 @ \"w\"\n\
                 req r0 = irecv {plus} 4 KiB @ \"r\"\nsend {minus} {size} @ \"s\"\nwait r0 @ \"w\"\n"
            )
        };
        let body = format!(
            "{}{}{}",
            dim("east", "west", "1 KiB", "compute 30 us\n"),
            dim("north", "south", "2 KiB", ""),
            dim("up", "down", "3 KiB", ""),
        );
        let (text, made) = folded_on(header, &body);
        assert_eq!(made, 1, "{text}");
        assert!(text.contains("loop 2 as side {"), "{text}");
        assert!(text.contains("compute [15 us, 0 ns, 0 ns][dim]"), "{text}");
        let stats = |src: &str| super::properties::stats(&format!("{header}{src}"));
        assert_eq!(stats(&text), stats(&body));
    }

    #[test]
    fn parts_only_a_longer_dimension_runs_go_under_a_condition_on_the_dimension() {
        // A LAMMPS-like atom exchange on a 2 x 2 x 4 torus: along the two dimensions of
        // two ranks one sendrecv and one exchange; along the third both neighbours, from
        // call sites of their own.
        let header = "skeleton t\nranks 16\ntopology torus(2, 2, 4)\napp_time 1 s\n";
        let one = |dir: &str, back: &str, size: &str| {
            format!(
                "compute 50 us\nsendrecv to {back} 4 B from {dir} 4 B @ \"c\"\n\
                 req r0 = irecv {dir} 2 KiB @ \"r\"\nsend {back} {size} @ \"s\"\nwait r0 @ \"w\"\n"
            )
        };
        let body = format!(
            "{}{}compute 60 us\nsendrecv to down 4 B from up 4 B @ \"c\"\n\
             sendrecv to up 4 B from down 4 B @ \"c2\"\n\
             req r0 = irecv up 2 KiB @ \"r\"\nsend down 900 B @ \"s\"\nwait r0 @ \"w\"\n\
             req r0 = irecv down 2 KiB @ \"r2\"\nsend up 800 B @ \"s2\"\nwait r0 @ \"w2\"\n\
             allreduce 8 B\n",
            one("east", "west", "1 KiB"),
            one("north", "south", "700 B"),
        );
        let (text, made) = folded_on(header, &body);
        assert_eq!(made, 1, "{text}");
        // The parts along dimension 2 are the calls before them with every direction
        // turned: one loop over the sides, twice along dimension 2, sizes there the mean.
        assert!(
            text.contains(
                "\nloop 3 as dim {\n    compute [50 us, 50 us, 60 us][dim]\n    \
                 # Along dimension(s) 2 the application makes these calls a second time with every direction turned, from c2: `side` numbers the two.\n    \
                 loop [1, 1, 2][dim] as side {\n        \
                 sendrecv to shift(dim, 2 * side - 1) 4 B from shift(dim, 1 - 2 * side) 4 B @ \"c\"\n    }\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "    loop [1, 1, 2][dim] as side {\n        \
                 req r0 = irecv shift(dim, 1 - 2 * side) 2048 B @ \"r\"\n        \
                 send shift(dim, 2 * side - 1) [1024 B, 700 B, 850 B][dim] @ \"s\"\n        \
                 wait r0 @ \"w\"\n    }\n"
            ),
            "{text}"
        );
        assert!(text.ends_with("}\nallreduce 8 B\n"), "{text}");
        // Every rank makes the calls it made before, with the same sizes.
        let stats = |src: &str| super::properties::stats(&format!("{header}{src}"));
        assert_eq!(stats(&text), stats(&body));
        // A second sendrecv along dimension 2 the same way round is not a turned
        // repeat: it stays under a condition on the dimension.
        let body = body.replace(
            "sendrecv to up 4 B from down 4 B @ \"c2\"",
            "sendrecv to down 4 B from up 4 B @ \"c2\"",
        );
        let (text, made) = folded_on(header, &body);
        assert_eq!(made, 1, "{text}");
        assert!(
            text.contains(
                "    # Only along dimension(s) 2 in the application.\n    \
                 if dim == 2 {\n        sendrecv to -d(dim) 4 B from +d(dim) 4 B @ \"c2\"\n    }\n"
            ),
            "{text}"
        );
        assert_eq!(stats(&text), stats(&body));
    }

    #[test]
    fn a_dimension_that_swaps_twice_repeats_its_swaps_by_a_count_per_dimension() {
        let header = "skeleton t\nranks 16\ntopology torus(2, 2, 4)\napp_time 1 s\n";
        let swap = |to: &str, from: &str, size: &str| {
            format!(
                "req r0 = irecv {from} 4 KiB @ \"a\"\nsend {to} {size} @ \"b\"\nwait r0 @ \"c\"\n"
            )
        };
        // x and y once each way, z twice each way (its sub-domains are thinner), then
        // the reverse communication z, y, x.
        let mut body = String::new();
        for (to, from, size) in [
            ("east", "west", "1 KiB"),
            ("west", "east", "1 KiB"),
            ("north", "south", "2 KiB"),
            ("south", "north", "2 KiB"),
            ("up", "down", "3 KiB"),
            ("down", "up", "3 KiB"),
            ("up", "down", "5 KiB"),
            ("down", "up", "5 KiB"),
        ] {
            body.push_str(&swap(to, from, size));
        }
        body.push_str("allreduce 8 B\n");
        let (text, made) = folded_on(header, &body);
        assert_eq!(made, 1, "{text}");
        assert!(
            text.contains(
                "loop 3 as dim {\n    loop [1, 1, 2][dim] {\n        \
                 # The two swaps of a dimension, the second with every direction turned: `side` numbers them.\n        \
                 loop 2 as side {\n            \
                 req r0 = irecv shift(dim, 2 * side - 1) 4 KiB @ \"a\"\n            \
                 send shift(dim, 1 - 2 * side) [1 KiB, 2 KiB, 4096 B][dim] @ \"b\"\n            \
                 wait r0 @ \"c\"\n        }\n    }\n}\nallreduce 8 B\n"
            ),
            "{text}"
        );
        assert!(text.contains("(2 times along dimension 2)"), "{text}");
        // Blocks along one dimension only are the compressor's loop, not one over
        // dimensions.
        let same = swap("up", "down", "3 KiB") + &swap("up", "down", "5 KiB");
        let (text, made) = folded_on(header, &same);
        assert_eq!(made, 0, "{text}");
    }

    #[test]
    fn what_a_dimension_computes_before_its_first_repeat_stays_before_its_repeats() {
        let header = "skeleton t\nranks 4\ntopology torus(1, 2, 2)\napp_time 1 s\n";
        let swap = |dim: u32, compute: &str, size: &str| {
            format!(
                "compute {compute}\nreq r0 = irecv +d{dim} 4 KiB @ \"a\"\nsend +d{dim} {size} @ \"b\"\nwait r0 @ \"c\"\n"
            )
        };
        // LAMMPS's reverse communication on a 1 x 2 x 2 grid: the forces, then two swaps
        // along dimension 2 and two along dimension 1, packing a little before each.
        let body = [
            swap(2, "per_rank(4 ms, 5 ms, 4 ms, 5 ms)", "3 KiB"),
            swap(2, "10 us", "3 KiB"),
            swap(1, "8 us", "2 KiB"),
            swap(1, "8 us", "2 KiB"),
        ]
        .concat();
        let (text, made) = folded_on(header, &body);
        assert_eq!(made, 1, "{text}");
        assert!(
            text.contains(
                "loop 2 as dim {\n    \
                 compute [per_rank(3.99 ms, 4.99 ms, 3.99 ms, 4.99 ms), 0 ns][dim]\n    \
                 loop 2 {\n        \
                 compute [10 us, 8 us][dim]\n        \
                 req r0 = irecv +d(2 - dim) 4 KiB @ \"a\"\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("but for what the first time computes beyond that mean, before them"),
            "{text}"
        );
        // Where the first swap computes about as much as the second, one mean.
        let body = [
            swap(2, "12 us", "3 KiB"),
            swap(2, "10 us", "3 KiB"),
            swap(1, "8 us", "2 KiB"),
            swap(1, "8 us", "2 KiB"),
        ]
        .concat();
        let (text, _) = folded_on(header, &body);
        assert!(
            text.contains("loop 2 as dim {\n    loop 2 {\n        compute [11 us, 8 us][dim]\n"),
            "{text}"
        );
        assert!(!text.contains("beyond that mean"), "{text}");
        // Where only the first swap computes, the loop computes nothing between swaps
        // (not the first block's compute: every dimension's mean is the same zero).
        let quiet = |dim: u32| swap(dim, "1 us", "2 KiB").replace("compute 1 us\n", "");
        let body = [
            swap(2, "4 ms", "3 KiB"),
            quiet(2).replace("2 KiB", "3 KiB"),
            quiet(1),
            quiet(1),
        ]
        .concat();
        let (text, _) = folded_on(header, &body);
        assert!(
            text.contains(
                "loop 2 as dim {\n    compute [4 ms, 0 ns][dim]\n    loop 2 {\n        req r0"
            ),
            "{text}"
        );
    }

    #[test]
    fn two_rank_dimensions_looped_and_a_longer_one_swapping_twice_fold_with_what_stays_as_written()
    {
        // The compressor's loops: each 2-rank dimension's two swaps, and the 4-rank
        // dimension's two pairs of swaps (down, up) twice; then a run over dimensions
        // that folds as written (no loop of two in it).
        let header = "skeleton t\nranks 16\ntopology torus(2, 2, 4)\napp_time 1 s\n";
        let swap = |to: &str, from: &str, size: &str, site: &str| {
            format!(
                "req r0 = irecv {from} 4 KiB @ \"{site}a\"\nsend {to} {size} @ \"{site}b\"\nwait r0 @ \"{site}c\"\n"
            )
        };
        let body = format!(
            "loop 2 {{\n{}}}\nloop 2 {{\n{}}}\nloop 2 {{\n{}{}}}\nbarrier\n{}{}{}",
            swap("east", "west", "1 KiB", "f"),
            swap("north", "south", "2 KiB", "f"),
            swap("down", "up", "3 KiB", "f"),
            swap("up", "down", "3 KiB", "f"),
            swap("east", "west", "1 KiB", "r"),
            swap("north", "south", "2 KiB", "r"),
            swap("up", "down", "3 KiB", "r"),
        );
        let (text, made) = folded_on(header, &body);
        assert_eq!(made, 2, "{text}");
        assert!(
            text.contains("loop 3 as dim {\n    loop [1, 1, 2][dim] {\n"),
            "{text}"
        );
        assert!(
            text.contains("barrier\n# The same calls along grid dimensions 0, 1, 2"),
            "{text}"
        );
    }

    #[test]
    fn blocks_along_successive_dimensions_are_one_loop_with_picks() {
        let (text, made) = folded(
            "compute 2 ms\n\
             req r0 = irecv east 4 KiB @ \"a\"\nsend east 3 KiB @ \"b\"\nwait r0 @ \"c\"\n\
             compute 10 us\n\
             req r0 = irecv north 4 KiB @ \"a\"\nsend north 5 KiB @ \"b\"\nwait r0 @ \"c\"\n\
             compute 7 us\n\
             req r0 = irecv up 4 KiB @ \"a\"\nsend up 6 KiB @ \"b\"\nwait r0 @ \"c\"\n\
             allreduce 8 B\n",
        );
        assert_eq!(made, 1);
        assert!(
            text.contains(
                "loop 3 as dim {\n    compute [2 ms, 10 us, 7 us][dim]\n    \
                 req r0 = irecv +d(dim) 4 KiB @ \"a\"\n    \
                 send +d(dim) [3 KiB, 5 KiB, 6 KiB][dim] @ \"b\"\n    \
                 wait r0 @ \"c\"\n}\nallreduce 8 B\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn dimensions_in_reverse_order_count_down_and_missing_compute_is_zero() {
        let (text, made) = folded(
            "loop 2 {\n compute 3 ms\n sendrecv to up 1 KiB from down 1 KiB @ \"s\"\n compute 5 us\n}\n\
             loop 2 {\n sendrecv to north 1 KiB from south 1 KiB @ \"s\"\n compute 6 us\n}\n\
             loop 2 {\n sendrecv to east 1 KiB from west 1 KiB @ \"s\"\n compute 7 us\n}\n",
        );
        assert_eq!(made, 1);
        assert!(
            text.contains(
                "loop 3 as dim {\n    loop 2 {\n        compute [3 ms, 0 ns, 0 ns][dim]\n        \
                 sendrecv to +d(2 - dim) 1 KiB from -d(2 - dim) 1 KiB @ \"s\"\n        \
                 compute [5 us, 6 us, 7 us][dim]\n    }\n}\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn blocks_with_other_call_sites_or_counts_stay_apart() {
        let sites = "sendrecv to east 1 KiB from west 1 KiB @ \"x\"\nallreduce 8 B\n\
                     sendrecv to north 1 KiB from south 1 KiB @ \"y\"\nallreduce 8 B\n";
        assert_eq!(folded(sites).1, 0);
        let counts = "loop 2 { send east 1 KiB\n recv west 1 KiB }\n\
                      loop 3 { send north 1 KiB\n recv south 1 KiB }\n";
        assert_eq!(folded(counts).1, 0);
        // One statement per block saves nothing worth a loop.
        let single = "send east 1 KiB\nsend north 1 KiB\n";
        assert_eq!(folded(single).1, 0);
    }

    #[test]
    fn the_variable_does_not_shadow_an_enclosing_one() {
        let (text, made) = folded(
            "loop 4 as dim {\n\
             compute 1 ms\nsend east 1 KiB\nrecv west 1 KiB\n\
             compute 1 ms\nsend north 2 KiB\nrecv south 2 KiB\n}\n",
        );
        assert_eq!(made, 1);
        assert!(text.contains("loop 2 as dim2 {"), "{text}");
        assert!(
            text.contains("send +d(dim2) [1 KiB, 2 KiB][dim2]"),
            "{text}"
        );
    }
}

#[cfg(test)]
mod mixed_tests {
    use super::*;

    #[test]
    fn swaps_of_two_rank_dimensions_unroll_to_meet_a_longer_one() {
        let src = "skeleton t\nranks 16\ntopology torus(2, 2, 4)\napp_time 1 s\n\
            compute 30 us\n\
            loop 2 {\n compute 15 us\n sendrecv to east 4 B from east 4 B @ \"a\"\n\
              req r0 = irecv east 64 KiB @ \"b\"\n send east 16 KiB @ \"c\"\n wait r0 @ \"d\"\n}\n\
            compute 31 us\n\
            loop 2 {\n compute 20 us\n sendrecv to north 4 B from north 4 B @ \"a\"\n\
              req r0 = irecv north 64 KiB @ \"b\"\n send north 21 KiB @ \"c\"\n wait r0 @ \"d\"\n}\n\
            compute 40 us\n\
            sendrecv to down 4 B from up 4 B @ \"a\"\n\
            req r0 = irecv up 64 KiB @ \"b\"\nsend down 56 KiB @ \"c\"\nwait r0 @ \"d\"\n\
            compute 35 us\n\
            sendrecv to up 4 B from down 4 B @ \"a\"\n\
            req r0 = irecv down 64 KiB @ \"b\"\nsend up 56 KiB @ \"c\"\nwait r0 @ \"d\"\n";
        let (mut program, diags) = perfskel_grammar::parse(src);
        assert!(diags.is_empty(), "{diags:?}");
        let topology = program.topology.value.clone();
        let (stmts, made) = dimension_loops(std::mem::take(&mut program.body.stmts), &topology);
        program.body.stmts = stmts;
        let text = perfskel_grammar::print(&program);
        assert_eq!(made, 1, "{text}");
        // z's two swaps, the second with its signs turned, are one loop over the sides;
        // the times are each dimension's mean over its two swaps (x: 30 + 15 and 15).
        assert!(text.contains("loop 2 as side {"), "{text}");
        assert!(
            text.contains("compute [30 us, 35.5 us, 37.5 us][dim]"),
            "{text}"
        );
        assert!(
            text.contains(
                "sendrecv to shift(dim, 2 * side - 1) 4 B from shift(dim, 1 - 2 * side) 4 B @ \"a\""
            ),
            "{text}"
        );
        assert!(
            text.contains("send shift(dim, 2 * side - 1) [16 KiB, 21 KiB, 56 KiB][dim] @ \"c\""),
            "{text}"
        );
    }

    #[test]
    fn a_loop_turns_so_that_the_halves_of_an_exchange_meet() {
        let src = "skeleton t\nranks 8\ntopology torus(2, 2, 2)\napp_time 1 s\n\
            loop 5 {\n\
              compute 1 ms\n sendrecv to north 2 KiB from south 2 KiB @ \"s\"\n\
              compute 2 ms\n sendrecv to east 1 KiB from west 1 KiB @ \"s\"\n\
              allreduce 8 B @ \"r\"\n\
              compute 3 ms\n sendrecv to up 3 KiB from down 3 KiB @ \"s\"\n\
            }\n\
            compute 1 ms\nsendrecv to north 2 KiB from south 2 KiB @ \"s\"\n\
            compute 2 ms\nsendrecv to east 1 KiB from west 1 KiB @ \"s\"\n";
        let (mut program, diags) = perfskel_grammar::parse(src);
        assert!(diags.is_empty(), "{diags:?}");
        let topology = program.topology.value.clone();
        let (stmts, made) = dimension_loops(std::mem::take(&mut program.body.stmts), &topology);
        program.body.stmts = stmts;
        let text = perfskel_grammar::print(&program);
        assert_eq!(made, 1, "{text}");
        // The y and x exchanges after the loop moved before it; inside, z, y, x meet.
        let body = text.split("app_time 1 s\n").nth(1).unwrap_or_default();
        assert!(
            body.starts_with(
                "compute 1 ms\nsendrecv to north 2 KiB from south 2 KiB @ \"s\"\n\
                 compute 2 ms\nsendrecv to east 1 KiB from west 1 KiB @ \"s\"\nloop 5 {\n    \
                 allreduce 8 B @ \"r\"\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "loop 3 as dim {\n        compute [3 ms, 1 ms, 2 ms][dim]\n        \
                 sendrecv to +d(2 - dim) [3 KiB, 2 KiB, 1 KiB][dim] from -d(2 - dim) [3 KiB, 2 KiB, 1 KiB][dim] @ \"s\"\n"
            ),
            "{text}"
        );
    }
}

/// Property: folding never changes what a program does. Random halo-exchange programs
/// on 3-D tori (dimensions of 2 and of 4 ranks), with exchanges along the dimensions in
/// either order, sizes and compute per dimension or alike, computes left out, swaps in
/// loops of two or written apart, collectives between them and loops around them: the
/// folded program checks clean and every rank sends the same messages and bytes, makes
/// the same collectives and computes as long as before.
#[cfg(test)]
mod properties {
    use super::*;
    use crate::check::{check, Options};
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    struct Exchange {
        descending: bool,
        /// Per dimension: compute before it (us, 0 = none), face size (B).
        faces: Vec<(u32, u32)>,
        /// The two swaps in a loop of two (only where a dimension has 2 ranks).
        looped: bool,
        blocking: bool,
        /// One swap where a dimension has 2 ranks (its neighbours are one rank), the
        /// second swap elsewhere from call sites of its own (LAMMPS's atom exchange).
        single: bool,
    }

    fn exchange() -> impl Strategy<Value = Exchange> {
        (
            any::<bool>(),
            prop::collection::vec((prop::sample::select(vec![0u32, 5, 10]), 1u32..4), 3),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(descending, faces, looped, blocking, single)| Exchange {
                descending,
                faces: faces.into_iter().map(|(c, f)| (c, f * 1024)).collect(),
                looped,
                blocking,
                // A lone blocking swap is a block of one statement, which no loop
                // shortens.
                single: single && !blocking,
            })
    }

    const NAMES: [(&str, &str); 3] = [("east", "west"), ("north", "south"), ("up", "down")];

    fn text(dims: &[u64], exchanges: &[Exchange], outer: u32, tail: bool) -> String {
        let n: u64 = dims.iter().product();
        let mut t = format!(
            "skeleton p\nranks {n}\ntopology torus({}, {}, {})\napp_time 1 s\n",
            dims[0], dims[1], dims[2]
        );
        let swap = |t: &mut String,
                    to: &str,
                    from: &str,
                    c: u32,
                    f: u32,
                    blocking: bool,
                    x: &str| {
            if c > 0 {
                t.push_str(&format!("compute {c} us\n"));
            }
            if blocking {
                t.push_str(&format!(
                    "sendrecv to {to} {f} B from {from} {f} B @ \"s{x}\"\n"
                ));
            } else {
                t.push_str(&format!(
                    "req r0 = irecv {from} {f} B @ \"r{x}\"\nsend {to} {f} B @ \"s{x}\"\nwait r0 @ \"w{x}\"\n"
                ));
            }
        };
        let body = |t: &mut String| {
            for (k, e) in exchanges.iter().enumerate() {
                let order: Vec<usize> = if e.descending {
                    vec![2, 1, 0]
                } else {
                    vec![0, 1, 2]
                };
                for d in order {
                    let (plus, minus) = NAMES[d];
                    let (c, f) = e.faces[d];
                    if e.single && dims[d] == 2 {
                        swap(t, plus, plus, c, f, e.blocking, "");
                    } else if e.looped && dims[d] == 2 {
                        t.push_str("loop 2 {\n");
                        swap(t, plus, plus, c, f, e.blocking, "");
                        t.push_str("}\n");
                    } else {
                        swap(t, plus, minus, c, f, e.blocking, "");
                        let x = if e.single { "2" } else { "" };
                        swap(t, minus, plus, c, f, e.blocking, x);
                    }
                }
                if k % 2 == 1 {
                    t.push_str("allreduce 8 B @ \"a\"\n");
                }
            }
        };
        t.push_str(&format!("loop {outer} {{\n"));
        body(&mut t);
        t.push_str("}\n");
        if tail {
            body(&mut t);
        }
        t
    }

    pub(super) fn stats(src: &str) -> Vec<(u64, u64, u64, i64)> {
        let (program, diags) = perfskel_grammar::parse(src);
        assert!(diags.is_empty(), "{diags:?}\n{src}");
        let checked = check(&program, src, Options::default());
        assert!(checked.diags.is_empty(), "{:?}\n{src}", checked.diags);
        let info = checked.info.expect("checked");
        info.ranks()
            .iter()
            .map(|r| {
                (
                    r.messages_sent,
                    r.bytes_sent,
                    r.collectives,
                    (r.compute_seconds * 1e9).round() as i64,
                )
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn folding_keeps_every_rank_s_messages_and_compute(
            dims in prop::sample::select(vec![vec![2u64, 2, 2], vec![2, 2, 4], vec![4, 2, 2]]),
            exchanges in prop::collection::vec(exchange(), 1..4),
            outer in 1u32..4,
            tail in any::<bool>(),
        ) {
            let src = text(&dims, &exchanges, outer, tail);
            let before = stats(&src);
            let (mut program, _) = perfskel_grammar::parse(&src);
            let topology = program.topology.value.clone();
            let (stmts, made) = dimension_loops(std::mem::take(&mut program.body.stmts), &topology);
            program.body.stmts = stmts;
            let folded = perfskel_grammar::print(&program);
            // The same messages and collectives on every rank; bytes as many, or up to
            // one more a message where a mean of sizes rounded up; compute within a
            // nanosecond a message where a mean was printed to four figures.
            let after = stats(&folded);
            let strip = |s: &[(u64, u64, u64, i64)]| -> Vec<(u64, u64)> {
                s.iter().map(|&(m, _, c, _)| (m, c)).collect()
            };
            prop_assert_eq!(strip(&before), strip(&after), "{}\n{}", src, folded);
            for (b, a) in before.iter().zip(&after) {
                let slack = b.0.max(1);
                prop_assert!(a.1 >= b.1 && a.1 - b.1 < slack, "{:?} {:?}\n{}\n{}", b, a, src, folded);
                prop_assert!((a.3 - b.3).unsigned_abs() <= slack, "{:?} {:?}\n{}\n{}", b, a, src, folded);
            }
            // Every exchange is one loop over the dimensions (the tail's may join the
            // loop's by a turn instead).
            prop_assert!(made >= 1, "{}\n{}", src, folded);
        }
    }
}
