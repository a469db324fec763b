//! Detail too small to matter for time: compute statements joined with the largest
//! compute of their block, and small collectives of one kind in a row written as one
//! loop.
//!
//! Between the calls of a set-up or an output step the application computes a few
//! microseconds here and there: each span above the builder's floor is a statement
//! (`compute 7.474 us` before a barrier run once in a 7-second run), and whether a span
//! clears the floor changes with the rank count and the machine's noise, so the
//! skeleton's length does too. A compute statement whose time over the whole run is
//! under [`NEGLIGIBLE`] of the application's time (on the rank where it is longest,
//! however often its block runs) joins the largest compute statement of its block: the
//! block's compute keeps its total on every rank, only where in the block a few
//! microseconds are spent moves. Where the block has no other compute, the statement is
//! left out and its time counted with the compute too short to write.
//!
//! Blocking collectives of one kind in a row (same operation, communicator and root)
//! whose messages are all small ([`SMALL_BYTES`]: latency-bound, they cost alike
//! whatever their size) are one loop with their mean size and the first call site,
//! the others named in its comment: LAMMPS's thermo output reduces temperature,
//! energy and pressure one `MPI_Allreduce` after another.

use perfskel_grammar::ast::{
    Block, Duration, Else, Expr, Loop, P2pOp, Size, SizeSpec, Spanned, Stmt, StmtKind, TimeSpec,
};

use crate::semantics::{depends_on_rank, eval_bool_in, reads_vars, Env};

/// The share of the application's time under which a compute statement, over the run,
/// joins its block's largest.
pub(crate) const NEGLIGIBLE: f64 = 1e-4;

/// Most iterations over which a condition on a loop variable is evaluated to count how
/// often a branch runs (beyond: as often as the loop).
const MAX_COUNTED: i64 = 1_000_000;

/// Collective messages of at most this size cost alike (one latency).
pub(crate) const SMALL_BYTES: u64 = 64;

/// Shortest run of small collectives written as a loop (a loop of two saves nothing).
const MIN_RUN: usize = 3;

/// What [`join_small`] did.
#[derive(Default)]
pub(crate) struct Joined {
    /// Compute statements joined with another or left out.
    pub computes: usize,
    /// Of those, left out (no other compute in their block), and their time per rank
    /// over the run, in seconds.
    pub dropped: usize,
    pub dropped_s: f64,
    /// Runs of small collectives made loops, and the statements they were.
    pub runs: usize,
    pub run_stmts: usize,
}

/// The statements with their negligible compute joined (or left out) and their runs of
/// small collectives as loops.
pub(crate) fn join_small(stmts: Vec<Stmt>, app_ns: f64, n_ranks: u32) -> (Vec<Stmt>, Joined) {
    let env = Env {
        rank: 0,
        n_ranks: u64::from(n_ranks),
        coords: Vec::new(),
    };
    let mut joined = Joined::default();
    let floor = NEGLIGIBLE * app_ns * 1e-9;
    let stmts = block(stmts, 1.0, &mut Vec::new(), floor, &env, &mut joined);
    (stmts, joined)
}

/// Longest compute (one execution, on any rank) that slides before the receive post it
/// follows: a few microseconds of packing, far below what would hold a sender back.
pub(crate) const SLIDE_MAX_S: f64 = 20e-6;

/// A short compute right after the post of a nonblocking receive (LAMMPS packs its
/// send buffer between `MPI_Irecv` and `MPI_Send`: a few microseconds that clear the
/// builder's floor along one dimension of one grid and not another) moves before the
/// post, joining the compute there where the forms add up: the receive is posted that
/// much later, the rank computes as long. Gives the statements and how many moved.
pub(crate) fn slide_before_posts(stmts: Vec<Stmt>) -> (Vec<Stmt>, usize) {
    let mut moved = 0;
    let stmts = slide_block(stmts, &mut moved);
    (stmts, moved)
}

fn slide_block(stmts: Vec<Stmt>, moved: &mut usize) -> Vec<Stmt> {
    let mut out: Vec<Stmt> = Vec::with_capacity(stmts.len());
    for mut stmt in stmts {
        match &mut stmt.kind {
            StmtKind::Loop(l) => {
                l.body.stmts = slide_block(std::mem::take(&mut l.body.stmts), moved);
            }
            StmtKind::If(_) => super::dims::each_branch(&mut stmt, &mut |b| {
                *b = slide_block(std::mem::take(b), moved);
            }),
            _ => {}
        }
        let short = matches!(&stmt.kind, StmtKind::Compute(c)
            if c.working_set.is_none() && longest(&c.time) <= SLIDE_MAX_S);
        let after_post = out.last().is_some_and(|s| {
            matches!(&s.kind, StmtKind::P2p(p)
                if p.op == P2pOp::Irecv && p.request.is_some())
        });
        if !(short && after_post) {
            out.push(stmt);
            continue;
        }
        let post = out.len() - 1;
        let joined = match (post.checked_sub(1).map(|k| &out[k].kind), &stmt.kind) {
            (Some(StmtKind::Compute(before)), StmtKind::Compute(this))
                if before.working_set.is_none() =>
            {
                sum(&before.time, &this.time)
            }
            _ => None,
        };
        match joined {
            Some(t) => {
                let (polls, cost) = match &stmt.kind {
                    StmtKind::Compute(this) => (this.polls, this.poll_cost),
                    _ => (None, None),
                };
                if let StmtKind::Compute(before) = &mut out[post - 1].kind {
                    before.time = t;
                    super::dims::add_polls(before, polls, cost);
                }
            }
            // Nothing to join (or forms that do not add): the compute goes before the
            // post as it is, unless another compute is there.
            None if post == 0 || !matches!(out[post - 1].kind, StmtKind::Compute(_)) => {
                out.insert(post, stmt);
            }
            None => {
                out.push(stmt);
                continue;
            }
        }
        *moved += 1;
    }
    out
}

/// The longest time of one execution of `t` on any rank, in seconds.
fn longest(t: &TimeSpec) -> f64 {
    match t {
        TimeSpec::PerRank(v) => v.iter().map(|d| d.value.seconds()).fold(0.0, f64::max),
        TimeSpec::Pick(p) => p.values.iter().map(longest).fold(0.0, f64::max),
        other => other.mean_seconds(),
    }
}

/// `b` added to `a` per execution, where the forms allow it (a distribution's spread
/// kept; a per-rank table with one value or with a distribution's mean).
fn sum(a: &TimeSpec, b: &TimeSpec) -> Option<TimeSpec> {
    let plus = |x: &Spanned<Duration>, s: f64| {
        Spanned::derived(super::build::duration((x.value.seconds() + s) * 1e9))
    };
    let one = |t: &TimeSpec| match t {
        TimeSpec::Fixed(d) => Some(d.value.seconds()),
        TimeSpec::Normal { mean, .. } => Some(mean.value.seconds()),
        _ => None,
    };
    Some(match (a, b) {
        (TimeSpec::Fixed(x), TimeSpec::Fixed(y)) => TimeSpec::Fixed(plus(x, y.value.seconds())),
        (TimeSpec::PerRank(v), TimeSpec::PerRank(w)) if v.len() == w.len() => TimeSpec::PerRank(
            v.iter()
                .zip(w)
                .map(|(x, y)| plus(x, y.value.seconds()))
                .collect(),
        ),
        (TimeSpec::PerRank(v), other) | (other, TimeSpec::PerRank(v)) => {
            let s = one(other)?;
            TimeSpec::PerRank(v.iter().map(|x| plus(x, s)).collect())
        }
        (TimeSpec::Normal { mean, stddev }, other) | (other, TimeSpec::Normal { mean, stddev }) => {
            let s = match other {
                TimeSpec::Fixed(d) => d.value.seconds(),
                // Two distributions: the means add, and the deviations as independent.
                TimeSpec::Normal { mean: m, stddev: d } => {
                    let sd = stddev.value.seconds().hypot(d.value.seconds());
                    return Some(TimeSpec::Normal {
                        mean: plus(mean, m.value.seconds()),
                        stddev: Spanned::derived(super::build::duration(sd * 1e9)),
                    });
                }
                _ => return None,
            };
            TimeSpec::Normal {
                mean: plus(mean, s),
                stddev: *stddev,
            }
        }
        _ => return None,
    })
}

/// One block run `execs` times (at most, on any rank), inside the loops `loops` (their
/// variables and counts, outermost first).
fn block(
    mut stmts: Vec<Stmt>,
    execs: f64,
    loops: &mut Vec<(String, i64)>,
    floor: f64,
    env: &Env,
    joined: &mut Joined,
) -> Vec<Stmt> {
    // Inner blocks first.
    for stmt in &mut stmts {
        match &mut stmt.kind {
            StmtKind::Loop(l) => {
                let count = match l.count.kind {
                    perfskel_grammar::ast::ExprKind::Int(n) => Some(n),
                    _ => None,
                };
                let body = std::mem::take(&mut l.body.stmts);
                // A count that is not a number (per rank, per dimension): the block is
                // left as it is.
                let Some(count) = count else {
                    l.body.stmts = body;
                    continue;
                };
                let pushed = l.var.as_ref().map(|v| loops.push((v.name.clone(), count)));
                l.body.stmts = block(body, execs * count as f64, loops, floor, env, joined);
                if pushed.is_some() {
                    loops.pop();
                }
            }
            StmtKind::If(i) => {
                // How often each branch runs: conditions on the innermost loop's variable
                // are counted over its iterations; others may hold on every run.
                let mut taken = vec![false; counted_len(loops)];
                let mut share = |cond: Option<&perfskel_grammar::ast::Expr>| -> f64 {
                    let Some((var, count)) = loops.last().filter(|(_, n)| *n <= MAX_COUNTED) else {
                        return 1.0;
                    };
                    let Some(cond) = cond else {
                        // `else`: the iterations no condition before took.
                        return taken.iter().filter(|t| !**t).count() as f64 / *count as f64;
                    };
                    if !reads_vars(cond, Some(var))
                        || cond_reads_other(cond, var)
                        || depends_on_rank(cond)
                    {
                        return 1.0;
                    }
                    let mut hits = 0;
                    for (k, t) in taken.iter_mut().enumerate() {
                        let vars = [(var.as_str(), k as i64)];
                        if !*t && eval_bool_in(cond, env, &vars).unwrap_or(true) {
                            *t = true;
                            hits += 1;
                        }
                    }
                    hits as f64 / *count as f64
                };
                let s = share(Some(&i.cond));
                let body = std::mem::take(&mut i.then_block.stmts);
                i.then_block.stmts = block(body, execs * s, &mut loops.clone(), floor, env, joined);
                let mut next = &mut i.else_branch;
                while let Some(e) = next {
                    match e {
                        Else::Block(b) => {
                            let s = share(None);
                            let body = std::mem::take(&mut b.stmts);
                            b.stmts =
                                block(body, execs * s, &mut loops.clone(), floor, env, joined);
                            break;
                        }
                        Else::If(inner) => {
                            let s = share(Some(&inner.cond));
                            let body = std::mem::take(&mut inner.then_block.stmts);
                            inner.then_block.stmts =
                                block(body, execs * s, &mut loops.clone(), floor, env, joined);
                            next = &mut inner.else_branch;
                        }
                    }
                }
            }
            _ => {}
        }
    }
    // This block's compute: the largest over the run takes the negligible others.
    let totals: Vec<Option<f64>> = stmts
        .iter()
        .map(|s| match &s.kind {
            StmtKind::Compute(c) if c.working_set.is_none() => Some(longest(&c.time) * execs),
            _ => None,
        })
        .collect();
    let Some(target) = (0..stmts.len())
        .filter(|&k| totals[k].is_some())
        .max_by(|&a, &b| {
            totals[a]
                .unwrap_or(0.0)
                .total_cmp(&totals[b].unwrap_or(0.0))
        })
    else {
        return small_collectives(stmts, joined);
    };
    let small: Vec<usize> = (0..stmts.len())
        .filter(|&k| k != target && totals[k].is_some_and(|t| t < floor))
        .collect();
    let mut gone = vec![false; stmts.len()];
    for k in small {
        let (StmtKind::Compute(from), StmtKind::Compute(into)) =
            (&stmts[k].kind, &stmts[target].kind)
        else {
            continue;
        };
        if let Some(t) = sum(&into.time, &from.time) {
            let (polls, cost) = (from.polls, from.poll_cost);
            if let StmtKind::Compute(into) = &mut stmts[target].kind {
                into.time = t;
                super::dims::add_polls(into, polls, cost);
            }
            gone[k] = true;
            joined.computes += 1;
        }
    }
    // The only compute of a block that does other things, negligible: left out.
    let computes = totals.iter().filter(|t| t.is_some()).count();
    if computes == 1 && stmts.len() > 1 && totals[target].is_some_and(|t| t < floor) {
        // (One that polls carries the polls' cost: kept.)
        if let StmtKind::Compute(c) = &stmts[target].kind {
            if c.polls.is_none() {
                gone[target] = true;
                joined.computes += 1;
                joined.dropped += 1;
                joined.dropped_s += c.time.mean_seconds() * execs;
            }
        }
    }
    let stmts = stmts
        .into_iter()
        .zip(gone)
        .filter(|(_, g)| !g)
        .map(|(s, _)| s)
        .collect();
    small_collectives(stmts, joined)
}

/// What must be equal along a run of small collectives: operation, root, communicator.
type RunKey<'a> = (
    perfskel_grammar::ast::CollOp,
    Option<&'a Expr>,
    Option<&'a str>,
);

/// The small bytes of a blocking collective that can join a run, and its run key.
fn small_collective(stmt: &Stmt) -> Option<(u64, RunKey<'_>)> {
    let StmtKind::Collective(c) = &stmt.kind else {
        return None;
    };
    if c.nonblocking || c.request.is_some() || c.op.is_vector() {
        return None;
    }
    let bytes = match &c.size {
        Some(SizeSpec::Fixed(s)) => s.value.bytes()?,
        None => 0,
        Some(SizeSpec::PerRank(_)) => return None,
    };
    (bytes <= SMALL_BYTES).then_some((
        bytes,
        (
            c.op,
            c.root.as_ref(),
            c.comm.as_ref().map(|n| n.name.as_str()),
        ),
    ))
}

/// Runs of at least [`MIN_RUN`] small blocking collectives of one kind in a row, as
/// loops.
fn small_collectives(stmts: Vec<Stmt>, joined: &mut Joined) -> Vec<Stmt> {
    let keys: Vec<_> = stmts.iter().map(small_collective).collect();
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut k = 0;
    while k < stmts.len() {
        let Some((_, key)) = &keys[k] else {
            k += 1;
            continue;
        };
        let mut end = k + 1;
        while end < stmts.len() && keys[end].as_ref().is_some_and(|(_, other)| other == key) {
            end += 1;
        }
        if end - k >= MIN_RUN {
            runs.push((k, end));
        }
        k = end;
    }
    if runs.is_empty() {
        return stmts;
    }
    let loops: Vec<Stmt> = runs
        .iter()
        .map(|&(a, b)| {
            let run = &stmts[a..b];
            let sizes: Vec<u64> = keys[a..b].iter().filter_map(|k| k.as_ref().map(|(s, _)| *s)).collect();
            let total: u64 = sizes.iter().sum();
            let mean = total.div_ceil(sizes.len() as u64);
            let mut body = run[0].clone();
            body.trivia = Default::default();
            if let StmtKind::Collective(c) = &mut body.kind {
                if c.size.is_some() || mean > 0 {
                    c.size = Some(SizeSpec::Fixed(Spanned::derived(Size::bytes_exact(mean))));
                }
            }
            let op = match &run[0].kind {
                StmtKind::Collective(c) => c.op.keyword(),
                _ => "",
            };
            let (lo, hi) = (sizes.iter().min().copied().unwrap_or(0), sizes.iter().max().copied().unwrap_or(0));
            let mut sites: Vec<&str> = Vec::new();
            for s in run {
                if let Some(site) = &s.site {
                    if !sites.contains(&site.text.as_str()) {
                        sites.push(&site.text);
                    }
                }
            }
            let mut looped = Stmt::new(StmtKind::Loop(Box::new(Loop {
                count: Expr::int(run.len() as i64),
                var: None,
                body: Block {
                    stmts: vec![body],
                    end_comments: Vec::new(),
                },
            })));
            looped.trivia.leading = run[0].trivia.leading.clone();
            let range = if lo == hi {
                format!("{lo} B")
            } else {
                format!("{lo}-{hi} B")
            };
            looped.trivia.leading.push(format!(
                "# {} `{op}` calls in a row of {range} (small: they cost alike), from {}: one loop with their mean size.",
                run.len(),
                sites.join(", ")
            ));
            looped
        })
        .collect();
    joined.runs += runs.len();
    joined.run_stmts += runs.iter().map(|(a, b)| b - a).sum::<usize>();
    let mut out = Vec::with_capacity(stmts.len());
    let mut loops = loops.into_iter();
    let mut next = runs.iter().peekable();
    for (k, stmt) in stmts.into_iter().enumerate() {
        match next.peek() {
            Some(&&(a, _)) if k == a => {
                out.extend(loops.next());
            }
            Some(&&(a, b)) if k > a && k < b => {}
            _ => out.push(stmt),
        }
        if next.peek().is_some_and(|&&(_, b)| k + 1 == b) {
            next.next();
        }
    }
    out
}

/// Iterations of the innermost loop a condition is counted over (0 when none is).
fn counted_len(loops: &[(String, i64)]) -> usize {
    loops
        .last()
        .filter(|(_, n)| *n <= MAX_COUNTED)
        .map_or(0, |(_, n)| usize::try_from(*n).unwrap_or(0))
}

/// Whether `cond` reads a loop variable other than `var`.
fn cond_reads_other(cond: &perfskel_grammar::ast::Expr, var: &str) -> bool {
    let mut other = false;
    fn walk(e: &perfskel_grammar::ast::Expr, var: &str, other: &mut bool) {
        use perfskel_grammar::ast::ExprKind;
        match &e.kind {
            ExprKind::Var(v) if v.name != var => *other = true,
            ExprKind::Unary(_, x) | ExprKind::Pick(_, x) => walk(x, var, other),
            ExprKind::Binary(_, l, r) => {
                walk(l, var, other);
                walk(r, var, other);
            }
            _ => {}
        }
    }
    walk(cond, var, &mut other);
    other
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The body after `pass` (the program's `app_time` is 1 s), printed, and what the
    /// pass said it did.
    fn after<T>(body: &str, pass: impl FnOnce(Vec<Stmt>) -> (Vec<Stmt>, T)) -> (String, T) {
        let src = format!("skeleton t\nranks 4\ntopology ring\napp_time 1 s\n{body}");
        let (mut program, diags) = perfskel_grammar::parse(&src);
        assert!(diags.is_empty(), "{diags:#?}");
        let (stmts, did) = pass(std::mem::take(&mut program.body.stmts));
        program.body.stmts = stmts;
        let text = perfskel_grammar::print(&program);
        let body = text
            .split_once("app_time 1 s\n")
            .map_or(text.clone(), |(_, b)| b.to_string());
        (body, did)
    }

    fn joined(body: &str) -> (String, Joined) {
        after(body, |stmts| join_small(stmts, 1e9, 4))
    }

    fn slid(body: &str) -> (String, usize) {
        after(body, slide_before_posts)
    }

    #[test]
    fn packing_after_a_receive_post_moves_before_it_and_joins_the_compute_there() {
        // Packing of 8 us between the post and the send joins the 15 us before the post,
        // inside a loop; every rank computes as long.
        let (text, moved) = slid(
            "loop 10 {\n    compute per_rank(15 us, 16 us, 15 us, 17 us)\n    req r0 = irecv next 1 KiB\n    compute 8 us\n    send prev 1 KiB\n    wait r0\n}\n",
        );
        assert_eq!(moved, 1, "{text}");
        assert_eq!(
            text,
            "loop 10 {\n    compute per_rank(23 us, 24 us, 23 us, 25 us)\n    req r0 = irecv next 1 KiB\n    send prev 1 KiB\n    wait r0\n}\n"
        );
        // With no compute before the post, the packing goes before it as it is.
        let (text, moved) =
            slid("req r0 = irecv next 1 KiB\ncompute 8 us\nsend prev 1 KiB\nwait r0\n");
        assert_eq!(moved, 1);
        assert_eq!(
            text,
            "compute 8 us\nreq r0 = irecv next 1 KiB\nsend prev 1 KiB\nwait r0\n"
        );
        // Compute long enough to hold a sender back stays where it is, as does compute
        // after a blocking receive or a send's post.
        for body in [
            "req r0 = irecv next 1 KiB\ncompute 80 us\nsend prev 1 KiB\nwait r0\n",
            "recv next 1 KiB\ncompute 8 us\nsend prev 1 KiB\n",
            "req r0 = isend next 1 KiB\ncompute 8 us\nrecv prev 1 KiB\nwait r0\n",
        ] {
            let (text, moved) = slid(body);
            assert_eq!((text.as_str(), moved), (body, 0));
        }
    }

    #[test]
    fn negligible_compute_joins_the_largest_of_its_block_and_keeps_each_rank_s_total() {
        // 20 us and 30 us once in a 1 s run: under 0.01 %; 2 ms is not.
        let (text, j) = joined(
            "compute per_rank(20 us, 20 us, 20 us, 40 us)\nbarrier\ncompute 2 ms\nbarrier\ncompute 30 us\nbarrier\n",
        );
        assert_eq!(j.computes, 2, "{text}");
        assert_eq!(
            text,
            "barrier\ncompute per_rank(2.05 ms, 2.05 ms, 2.05 ms, 2.07 ms)\nbarrier\nbarrier\n"
        );
        // The same spans 1000 times each are not negligible.
        let (text, j) = joined(
            "loop 1000 {\n    compute 20 us\n    barrier\n    compute 2 ms\n    barrier\n}\n",
        );
        assert_eq!(j.computes, 0, "{text}");
        // A branch taken on 2 of 100 iterations counts 2 runs; one taken on every
        // iteration (here `i >= 0`) counts 100: 50 us x 100 is 0.5 % of the run.
        let body = |cond: &str| {
            format!("loop 100 as i {{\n    compute 10 ms\n    if {cond} {{\n        compute 50 us\n        barrier\n        compute 1 ms\n        barrier\n    }}\n}}\n")
        };
        assert_eq!(joined(&body("i % 50 == 0")).1.computes, 1);
        assert_eq!(joined(&body("i >= 0")).1.computes, 0);
    }

    #[test]
    fn a_negligible_compute_alone_in_its_block_is_left_out_and_counted() {
        let (text, j) = joined(
            "loop 500 as i {\n    compute 10 ms\n    allreduce 8 B\n    if i == 0 {\n        compute 13 us\n        barrier\n    }\n}\n",
        );
        assert_eq!((j.computes, j.dropped), (1, 1), "{text}");
        assert!((j.dropped_s - 13e-6).abs() < 1e-12, "{}", j.dropped_s);
        assert!(
            text.contains("    if i == 0 {\n        barrier\n    }\n"),
            "{text}"
        );
        // A block that is only a compute keeps it.
        let (text, j) = joined("if rank == 0 {\n    compute 13 us\n}\nbarrier\n");
        assert_eq!(j.computes, 0, "{text}");
    }

    #[test]
    fn small_collectives_of_one_kind_in_a_row_are_one_loop_with_their_mean_size() {
        let (text, j) = joined(
            "allreduce 16 B @ \"a\"\nallreduce 8 B @ \"b\"\nallreduce 8 B @ \"c\"\nallreduce 24 B @ \"d\"\nallreduce 8 B @ \"e\"\nbarrier\n",
        );
        assert_eq!((j.runs, j.run_stmts), (1, 5), "{text}");
        assert_eq!(
            text,
            "# 5 `allreduce` calls in a row of 8-24 B (small: they cost alike), from a, b, c, d, e: one loop with their mean size.\nloop 5 {\n    allreduce 13 B @ \"a\"\n}\nbarrier\n"
        );
        // Two in a row, large messages, other roots or communicators stay apart.
        for body in [
            "allreduce 8 B\nallreduce 8 B\nbarrier\n",
            "allreduce 8 B\nallreduce 1 KiB\nallreduce 8 B\n",
            "reduce 8 B root 0\nreduce 8 B root 1\nreduce 8 B root 0\n",
            "comm d = dup(world)\nallreduce 8 B\nallreduce 8 B on d\nallreduce 8 B\n",
        ] {
            let (text, j) = joined(body);
            assert_eq!(j.runs, 0, "{text}");
        }
    }
}
