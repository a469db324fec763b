//! Loop cutting, the first step of scaling: a program and a ratio K → a [`Plan`] that
//! says, for every loop, its new iteration count, and for every other statement the
//! factor by which it is still too long (its *residual*), which compute then absorbs.
//!
//! Outer loops are cut first: a loop of n iterations at residual k keeps
//! `max(1, round(n / k))` iterations, and its body is left with the residual
//! `k · n' / n` for inner loops to take. Each iteration still does exactly what the
//! application did, so per-iteration behaviour (message sizes, the compute/communication
//! rhythm, synchronization) stays exact.
//!
//! Loops whose count depends on the rank, or that sit in the branches of an `if`, may
//! have partner loops on other ranks: the master's `loop 40 * (nranks - 1) { recv any }`
//! receives what the workers' `loop 40 { send hub }` send. Such loops of one block are
//! cut by one common divisor of all their counts on all ranks, so the numbers of
//! messages still match.
//! Where no divisor comes near K (119 answers against 120 tasks), each loses the same
//! number of iterations instead ([`Mode::shifted`]), kept when the program still checks.
//!
//! A loop whose body reads its own variable (`loop 500 as i { ... if i % 20 == 19 {
//! allreduce 8 B } }`) keeps its pattern: the body's use of `i` has a period P (see
//! [`period`]; 20 here, the lcm over every expression), and the loop keeps a whole
//! number of periods: `min(n, max(P, round(n / k / P) · P))` iterations, rounding half
//! away from zero (500 at 1:2 is 2.5 periods of 100, so 300 iterations). When no period
//! is known (`i == 499`, `i < 10`) P is n and the loop is not cut. Conditions are left
//! as written, so every residue of the period runs as often, relative to the others, as
//! in the application. A loop whose count reads a loop variable is not cut.

use std::collections::HashMap;

use perfskel_grammar::ast::*;
use perfskel_grammar::diagnostic::Severity;
use perfskel_grammar::Diag;

use crate::semantics::{
    block_reads_var, depends_on_rank, eval_bool_in, eval_int, reads_vars, stmt_blocks, stmt_exprs,
    Env, Shape,
};

/// A loop whose whole periods miss its share by more than this factor is cut by weight
/// (see [`Planner::weighted`]); nearer, whole periods keep every branch in proportion
/// and the ratio reached says how far they are.
const MISSED_SHARE: f64 = 1.25;

/// The most iterations a loop cut by weight may have (each evaluates its conditions).
const WEIGHING_BUDGET: u64 = 10_000_000;

/// The decisions of loop cutting. Statements are identified by address within the
/// program the plan was made for.
#[derive(Debug, Default)]
pub struct Plan {
    /// New iteration count of each loop (by the address of its `Loop`).
    pub loops: HashMap<*const Loop, Expr>,
    /// Residual factor of each non-loop statement (by the address of its `Stmt`).
    pub residual: HashMap<*const Stmt, f64>,
    /// Statements left out ([`Mode::rounded`]): an iteration of a rank branch's loop
    /// that the trace shows written out on some ranks, whose share is under a half.
    pub dropped: std::collections::HashSet<*const Stmt>,
    /// Statements in a `while recv` whose kept iterations each stand for this many of
    /// the application's (see [`Tasks`]): their compute's spread is that of so many
    /// tasks' sum.
    pub aggregate: HashMap<*const Stmt, f64>,
    pub warnings: Vec<Diag>,
}

/// How a program's task loops are cut. A `while recv` runs as many iterations as
/// messages with its tag come: the loops that send those messages (its *feeders*) decide
/// how many tasks the skeleton runs. They are cut by `feed`, each kept iteration
/// standing for `n / cut` of the application's; the `while`'s body then runs `share` of
/// the application's tasks, and its compute is scaled by `k · share`, so that what every
/// rank computes is still 1/K of the application's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tasks {
    /// The ratio feeding loops are cut by (1: kept whole).
    pub feed: f64,
    /// The application's tasks that the cut leaves, as a fraction (1: all).
    pub share: f64,
    /// Tasks each rank that takes some will take, about (for the warning's note).
    pub rounds: f64,
}

impl Tasks {
    /// Feeding loops kept whole: every task of the application runs.
    pub const WHOLE: Tasks = Tasks {
        feed: 1.0,
        share: 1.0,
        rounds: 0.0,
    };
}

/// How loops in rank branches are cut. The scaler tries `ROUNDED`, `PLAIN`,
/// `ROUNDED_CONSERVATIVE` and `CONSERVATIVE` in turn and keeps the first whose program
/// passes the checker (its messages and collectives still match).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mode {
    /// Each loop of a rank branch with no point-to-point communication inside (and a
    /// count that does not depend on the rank) by its own share, `round(n / k)`, as if
    /// it stood alone: HPCC's RandomAccess runs 4197 iterations of a barrier and an
    /// all-to-all on one rank and 4176 + 21 on the other, whose only common divisor is
    /// 1, yet rounded alike (the 21, more iterations of the other rank's loop, to none)
    /// they still match. Without it, the loops of a block's rank branches are cut by
    /// one common divisor of their counts.
    pub rounded: bool,
    /// Point-to-point loops in blocks whose rank branches have partners a common
    /// divisor cannot reach are kept whole (see [`Planner::block`]).
    pub conservative: bool,
    /// Where the common divisor of a block's coupled loops is far from the ratio (none
    /// but 1), every coupled loop loses the same number of iterations instead: a master
    /// that receives 119 results in its loop and one after it, against a worker's loop
    /// of 120 tasks (counts whose only common divisor is 1), keeps 1 and 2 at 1:100,
    /// each iteration still one message each way. Right where the ranks' loops meet
    /// iteration for iteration; the scaler tries it first and keeps it only when the
    /// program still checks.
    pub shifted: bool,
}

impl Mode {
    pub const ROUNDED_SHIFTED: Mode = Mode {
        rounded: true,
        conservative: false,
        shifted: true,
    };
    pub const ROUNDED: Mode = Mode {
        rounded: true,
        conservative: false,
        shifted: false,
    };
    pub const PLAIN: Mode = Mode {
        rounded: false,
        conservative: false,
        shifted: false,
    };
    pub const ROUNDED_CONSERVATIVE: Mode = Mode {
        rounded: true,
        conservative: true,
        shifted: false,
    };
    pub const CONSERVATIVE: Mode = Mode {
        rounded: false,
        conservative: true,
        shifted: false,
    };
}

/// Plans the loop cuts for ratio `k` in `mode`, keeping the loops of `keep` whole (with
/// any loop cut together with one of them by a common divisor).
pub fn plan(
    program: &Program,
    world: &Shape,
    k: f64,
    mode: Mode,
    keep: &std::collections::HashSet<*const Loop>,
    tasks: Tasks,
) -> Plan {
    let n = program.ranks.value;
    let envs = Env::all(n, world);
    // A `while recv` runs as many iterations as messages with its tag come: the loops
    // that send those messages are cut by the ratio of `tasks` (see [`Tasks`]), and
    // every other loop that communicates point to point is kept whole: the messages
    // that end a `while` must all stay, and partners of loops in its body decide as
    // they run.
    let mut frozen = keep.clone();
    let whiles = has_while(&program.body.stmts);
    let mut feeders = std::collections::HashSet::new();
    if whiles {
        let mut all = Vec::new();
        p2p_loops(&program.body.stmts, &mut all);
        if tasks.feed > 1.0 {
            feeding_loops(
                &program.body.stmts,
                &while_tags(&program.body.stmts),
                &mut feeders,
            );
            feeders.retain(|l| !keep.contains(l));
        }
        frozen.extend(
            all.into_iter()
                .map(|l| l as *const Loop)
                .filter(|l| !feeders.contains(l)),
        );
    }
    let mut planner = Planner {
        envs,
        plan: Plan::default(),
        frozen,
        weighed_ifs: std::collections::HashSet::new(),
        mode,
        rank_branch: false,
        loop_sites: std::collections::BTreeMap::new(),
        whiles,
        feeders,
        tasks,
    };
    planner.block(&program.body, k);
    planner.plan
}

struct Planner {
    envs: Vec<Env>,
    plan: Plan,
    /// Loops kept whole: point-to-point loops whose partners a common divisor cannot
    /// reach (see [`Planner::block`]).
    frozen: std::collections::HashSet<*const Loop>,
    /// `if`s whose conditions read only the variable of a loop cut by weight (see
    /// [`Planner::weighted`]): their branches are planned with their own residuals.
    weighed_ifs: std::collections::HashSet<*const If>,
    mode: Mode,
    /// Walking the branches of an `if` whose condition depends on the rank, in
    /// [`Mode::rounded`]: a loop whose share is under half an iteration keeps none (one
    /// rank's 21 extra iterations at 1:100 are none, as the other rank's 4197 are 42
    /// and its 4176 are 42 too).
    rank_branch: bool,
    /// In [`Mode::rounded`], the call sites of the collectives in the bodies of the
    /// loops of the current block's rank branches, and in how many of those loops each is.
    loop_sites: std::collections::BTreeMap<String, usize>,
    /// The program has a `while recv`: its point-to-point loops are kept whole, but for
    /// its feeders.
    whiles: bool,
    /// The loops that send the tasks of a `while recv` (see [`Tasks`]), cut by
    /// `tasks.feed`.
    feeders: std::collections::HashSet<*const Loop>,
    tasks: Tasks,
}

/// Whether some statement of a block, at any depth, is one `f` accepts.
fn any_stmt(stmts: &[Stmt], f: &dyn Fn(&Stmt) -> bool) -> bool {
    stmts
        .iter()
        .any(|s| f(s) || stmt_blocks(s).into_iter().any(|b| any_stmt(&b.stmts, f)))
}

/// Applies `f` to every statement of a block, at any depth, outer first.
fn each_stmt<'p>(stmts: &'p [Stmt], f: &mut dyn FnMut(&'p Stmt)) {
    for s in stmts {
        f(s);
        for b in stmt_blocks(s) {
            each_stmt(&b.stmts, f);
        }
    }
}

/// Whether a block sends or receives point to point anywhere inside.
fn has_p2p(stmts: &[Stmt]) -> bool {
    any_stmt(stmts, &|s| {
        matches!(s.kind, StmtKind::P2p(_) | StmtKind::While(_))
    })
}

/// Whether a block holds a `while recv` anywhere inside.
pub(super) fn has_while(stmts: &[Stmt]) -> bool {
    any_stmt(stmts, &|s| matches!(s.kind, StmtKind::While(_)))
}

/// Every loop with point-to-point communication inside, at any depth.
fn p2p_loops<'p>(stmts: &'p [Stmt], out: &mut Vec<&'p Loop>) {
    each_stmt(stmts, &mut |s| {
        if let StmtKind::Loop(l) = &s.kind {
            if has_p2p(&l.body.stmts) {
                out.push(l);
            }
        }
    });
}

/// The tags of every `while recv` head.
fn while_tags(stmts: &[Stmt]) -> std::collections::BTreeSet<u32> {
    let mut tags = std::collections::BTreeSet::new();
    each_stmt(stmts, &mut |s| {
        if let StmtKind::While(w) = &s.kind {
            tags.extend(w.recv.tag.map(|t| t.value));
        }
    });
    tags
}

/// Whether a block sends, anywhere inside, a message with one of `tags`.
fn sends_tag(stmts: &[Stmt], tags: &std::collections::BTreeSet<u32>) -> bool {
    any_stmt(stmts, &|s| {
        matches!(&s.kind, StmtKind::P2p(p)
            if !p.op.receives() && p.tag.is_some_and(|t| tags.contains(&t.value)))
    })
}

/// The loops outside any `while` body that send tasks of a `while` (a message with its
/// tag) and do not read their own variable: a master's dispatch loop, `loop 117 { recv
/// any; send source 16 B tag 1 }`. A loop that reads its variable (`loop 3 as i { send
/// rank(i + 1) 16 B tag 1 }`, a first task for each worker) gives each iteration to
/// another rank, and is kept whole.
fn feeding_loops(
    stmts: &[Stmt],
    tags: &std::collections::BTreeSet<u32>,
    out: &mut std::collections::HashSet<*const Loop>,
) {
    for s in stmts {
        match &s.kind {
            StmtKind::While(_) => {}
            StmtKind::Loop(l) => {
                let reads_own = l
                    .var
                    .as_ref()
                    .is_some_and(|v| block_reads_var(&l.body, &v.name));
                // The outermost only: loops inside one are kept whole, so that a
                // task is not cut twice.
                if !reads_own && sends_tag(&l.body.stmts, tags) {
                    out.insert(&**l as *const Loop);
                } else {
                    feeding_loops(&l.body.stmts, tags, out);
                }
            }
            _ => {
                for b in stmt_blocks(s) {
                    feeding_loops(&b.stmts, tags, out);
                }
            }
        }
    }
}

/// The loops of a block that must be cut together: those under `if`s of the block
/// (unless `rounded` and they have no point-to-point communication inside: see
/// [`Mode::rounded`]) and those whose count depends on the rank (not looking inside
/// loops). `skip`: `if`s planned by weight, whose branches every
/// rank takes at once.
fn coupled_loops<'p>(
    stmts: &'p [Stmt],
    under_if: bool,
    rounded: bool,
    skip: &std::collections::HashSet<*const If>,
    out: &mut Vec<&'p Loop>,
) {
    for stmt in stmts {
        match &stmt.kind {
            StmtKind::Loop(l)
                if (under_if && (!rounded || has_p2p(&l.body.stmts)))
                    || depends_on_rank(&l.count) =>
            {
                out.push(l)
            }
            StmtKind::If(i) if skip.contains(&(&**i as *const If)) => {}
            StmtKind::If(i) => {
                let mut current = i;
                loop {
                    coupled_loops(&current.then_block.stmts, true, rounded, skip, out);
                    match &current.else_branch {
                        None => break,
                        Some(Else::Block(b)) => {
                            coupled_loops(&b.stmts, true, rounded, skip, out);
                            break;
                        }
                        Some(Else::If(next)) => current = next,
                    }
                }
            }
            _ => {}
        }
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn lcm(a: u64, b: u64) -> Option<u64> {
    if a == 0 || b == 0 {
        return Some(a.max(b));
    }
    (a / gcd(a, b)).checked_mul(b)
}

/// The period of `e` as a function of the loop variable `var`: a `p` with
/// `e(var + p) = e(var)` for every value (1 when `e` does not read `var`), or `None`
/// when none is known. `X % m` with a positive constant `m` and `X` affine in `var`
/// (`i`, `rank + 2 * i`, `-i`) has period m; any other operator has the lcm of its
/// operands' periods (a function of periodic values is periodic), so `i % 20 == 19 and
/// i % 50 != 0` has period 100; `i` alone, as in `i == 499` or `i < 10`, has none.
/// `env` evaluates the constant `m` (`nranks` included).
pub(super) fn period(e: &Expr, var: &str, env: &Env) -> Option<u64> {
    if !reads_vars(e, Some(var)) {
        return Some(1);
    }
    match &e.kind {
        ExprKind::Binary(BinOp::Rem, x, m) if affine(x, var) => {
            if reads_vars(m, None) || depends_on_rank(m) {
                return None;
            }
            eval_int(m, env)
                .ok()
                .and_then(|m| u64::try_from(m).ok())
                .filter(|&m| m > 0)
        }
        ExprKind::Binary(_, l, r) => lcm(period(l, var, env)?, period(r, var, env)?),
        // A function of a periodic index is periodic.
        ExprKind::Unary(_, x) | ExprKind::Pick(_, x) => period(x, var, env),
        _ => None,
    }
}

/// Whether `e` is `a · var + b` with integers a and b that do not depend on `var`.
fn affine(e: &Expr, var: &str) -> bool {
    if !reads_vars(e, Some(var)) {
        return true;
    }
    match &e.kind {
        ExprKind::Var(v) => v.name == var,
        ExprKind::Unary(UnaryOp::Neg, x) => affine(x, var),
        ExprKind::Binary(BinOp::Add | BinOp::Sub, l, r) => affine(l, var) && affine(r, var),
        ExprKind::Binary(BinOp::Mul, l, r) => {
            (affine(l, var) && !reads_vars(r, Some(var)))
                || (!reads_vars(l, Some(var)) && affine(r, var))
        }
        _ => false,
    }
}

/// The period of every use of `var` in `block` (see [`period`]): the lcm over its
/// expressions at any depth, `Some(1)` when it reads none.
fn block_period(block: &Block, var: &str, env: &Env) -> Option<u64> {
    let mut p = 1;
    for stmt in &block.stmts {
        for e in stmt_exprs(stmt) {
            p = lcm(p, period(e, var, env)?)?;
        }
        for b in stmt_blocks(stmt) {
            p = lcm(p, block_period(b, var, env)?)?;
        }
    }
    Some(p)
}

/// The period of a loop's use of its own variable: `Some(1)` without a variable or when
/// the body does not read it, `None` when no period is known.
fn loop_period(l: &Loop, env: Option<&Env>) -> Option<u64> {
    match (&l.var, env) {
        (None, _) => Some(1),
        (Some(v), Some(env)) => block_period(&l.body, &v.name, env),
        (Some(_), None) => None,
    }
}

/// The divisor of `g` closest to `k` on a log scale (the smaller one on a tie).
fn divisor_near(g: u64, k: f64) -> u64 {
    if g == 0 || k <= 1.0 {
        return 1;
    }
    let mut best = 1;
    let distance = |d: u64| (d as f64 / k).ln().abs();
    let mut i = 1;
    while i * i <= g {
        if g.is_multiple_of(i) {
            for d in [i, g / i] {
                if distance(d) < distance(best) - 1e-12
                    || (distance(d) - distance(best)).abs() <= 1e-12 && d < best
                {
                    best = d;
                }
            }
        }
        i += 1;
    }
    best
}

impl Planner {
    /// A block at residual `k`: cuts its coupled loops by a common divisor, then walks it.
    fn block(&mut self, block: &Block, k: f64) {
        // Only the loops directly in a rank branch may round to none.
        let outer = std::mem::replace(&mut self.rank_branch, false);
        let mut sites = std::collections::BTreeMap::new();
        if self.mode.rounded {
            rank_branch_loop_sites(&block.stmts, &mut sites);
        }
        let outer_sites = std::mem::replace(&mut self.loop_sites, sites);
        self.block_inner(block, k);
        self.rank_branch = outer;
        self.loop_sites = outer_sites;
    }

    /// Whether `stmts`, a rank branch, is an iteration of a rank branch's loop of the
    /// same block written out (collectives of the loop's call sites, compute): HPCC's
    /// RandomAccess ends `if rank == 1 { loop 4168 { compute; barrier; alltoall } } else
    /// { loop 4169 { .. } }`, a barrier and an all-to-all of another site, and `if rank
    /// == 1 { barrier; alltoall }` of the loop's sites: rank 1's last iteration came
    /// after the final exchange. Cut by its share it rounds to none, as rank 1's 4168
    /// iterations round to 42 like rank 0's 4169.
    fn written_out_iteration(&self, stmts: &[Stmt]) -> bool {
        self.collectives_of_loops(stmts, 1, false)
    }

    /// Whether `stmts` are compute and collectives (and loops of them, if `nested`), at
    /// least one collective, each of a call site in at least `loops` of the block's
    /// rank-branch loops.
    fn collectives_of_loops(&self, stmts: &[Stmt], loops: usize, nested: bool) -> bool {
        fn walk(
            stmts: &[Stmt],
            sites: &std::collections::BTreeMap<String, usize>,
            (loops, nested): (usize, bool),
            any: &mut bool,
        ) -> bool {
            stmts.iter().all(|s| match &s.kind {
                StmtKind::Compute(_) => true,
                StmtKind::Collective(_) => {
                    *any = true;
                    s.site
                        .as_ref()
                        .is_some_and(|site| sites.get(&site.text).is_some_and(|n| *n >= loops))
                }
                StmtKind::Loop(l) if nested => walk(&l.body.stmts, sites, (loops, nested), any),
                _ => false,
            })
        }
        let mut any = false;
        walk(stmts, &self.loop_sites, (loops, nested), &mut any) && any
    }

    fn block_inner(&mut self, block: &Block, k: f64) {
        let mut coupled = Vec::new();
        coupled_loops(
            &block.stmts,
            false,
            self.mode.rounded,
            &self.weighed_ifs,
            &mut coupled,
        );
        // A while's feeders are cut by their own share (in `walk`): their partner is
        // the `while`, which takes as many tasks as come.
        coupled.retain(|l| !self.feeders.contains(&(*l as *const Loop)));
        // Point-to-point loops in rank branches talk to partner loops elsewhere in the
        // block: in other branches (the group's common divisor keeps them matched), but
        // also at the block's top level or nested inside a group loop (HPCC's panel
        // broadcasts: `if rank == 0 { loop 3 as i { loop 9 { send rank(i + 1) .. } } }`
        // against `loop 9 { recv rank(..) }` on the others), which one divisor does not
        // reach. There every point-to-point loop of the block is kept whole, and the
        // ratio falls to compute.
        let mut frozen = false;
        if self.mode.conservative && !coupled.is_empty() && has_p2p(&block.stmts) {
            let nested = coupled.iter().any(|l| {
                let mut inner = Vec::new();
                p2p_loops(&l.body.stmts, &mut inner);
                !inner.is_empty()
            });
            let loose = block.stmts.iter().any(|s| match &s.kind {
                StmtKind::Loop(l) => {
                    !coupled.iter().any(|c| std::ptr::eq(*c, &**l)) && has_p2p(&l.body.stmts)
                }
                _ => false,
            });
            if nested || loose {
                frozen = true;
                let mut all = Vec::new();
                p2p_loops(&block.stmts, &mut all);
                self.frozen
                    .extend(all.into_iter().map(|l| l as *const Loop));
            }
        }
        if !coupled.is_empty() {
            // Each loop keeps a whole number of the periods of its variable's use: the
            // divisor divides count / period. A count that reads a loop variable, or a
            // body without a known period, leaves the whole group uncut.
            let mut counts: Vec<u64> = Vec::new();
            for l in &coupled {
                if reads_vars(&l.count, None) {
                    frozen = true;
                    continue;
                }
                let period = loop_period(l, self.envs.first());
                for v in self
                    .envs
                    .iter()
                    .filter_map(|env| eval_int(&l.count, env).ok())
                    .filter_map(|v| u64::try_from(v).ok())
                {
                    match period {
                        Some(p) if v.is_multiple_of(p) => counts.push(v / p),
                        _ => frozen = true,
                    }
                }
            }
            // A loop kept whole (its cut left messages or collectives unmatched) keeps
            // the loops cut with it whole too.
            if coupled
                .iter()
                .any(|l| self.frozen.contains(&(*l as *const Loop)))
            {
                frozen = true;
            }
            let g = counts.iter().fold(0, |g, &c| gcd(g, c));
            let d = if frozen { 1 } else { divisor_near(g, k) };
            let shift = (self.mode.shifted && !frozen && (d as f64) < 0.5 * k)
                .then(|| self.shift(&coupled, k))
                .flatten();
            for l in &coupled {
                match shift {
                    Some(m) => {
                        // The body stands for n / (n - m) of the application's iterations
                        // (the longest of the loop's counts over the ranks).
                        let n = self.max_count(l);
                        let kept = n.saturating_sub(m).max(1);
                        let count = self.count_with(l, BinOp::Sub, m);
                        self.plan.loops.insert(*l as *const Loop, count);
                        let body_k = k * kept as f64 / n.max(1) as f64;
                        self.body(l, body_k, k, n as f64 / kept as f64, None, None);
                    }
                    None => {
                        let count = if d == 1 {
                            l.count.clone()
                        } else {
                            self.count_with(l, BinOp::Div, d)
                        };
                        self.plan.loops.insert(*l as *const Loop, count);
                        self.body(l, k / d as f64, k, d as f64, Some(g), None);
                    }
                }
            }
        }
        self.walk(&block.stmts, k);
    }

    /// [`Mode::shifted`]: how many iterations every loop of `coupled` loses at ratio `k`,
    /// so that the shortest keeps its share (at least one); `None` when there is nothing
    /// to gain or the loops cannot lose the same number (a count that reads a loop
    /// variable, a body that reads its own variable, counts an order of magnitude
    /// apart: the ranks' loops then do not meet iteration for iteration).
    fn shift(&self, coupled: &[&Loop], k: f64) -> Option<u64> {
        let mut lo = u64::MAX;
        let mut hi = 0;
        for l in coupled {
            if reads_vars(&l.count, None) || loop_period(l, self.envs.first()) != Some(1) {
                return None;
            }
            for env in &self.envs {
                let v = u64::try_from(eval_int(&l.count, env).ok()?).ok()?;
                lo = lo.min(v);
                hi = hi.max(v);
            }
        }
        if lo == 0 || hi > 2 * lo {
            return None;
        }
        let keep = ((lo as f64 / k).round() as u64).max(1);
        let m = lo - keep.min(lo);
        (m > 0).then_some(m)
    }

    /// `l`'s count less `by` iterations (`BinOp::Sub`) or divided by `by` (`BinOp::Div`):
    /// an expression where the count depends on the rank, else its value.
    fn count_with(&self, l: &Loop, op: BinOp, by: u64) -> Expr {
        if depends_on_rank(&l.count) {
            return Expr::new(ExprKind::Binary(
                op,
                Box::new(l.count.clone()),
                Box::new(Expr::int(by as i64)),
            ));
        }
        let v = self
            .envs
            .first()
            .and_then(|env| eval_int(&l.count, env).ok())
            .unwrap_or(0);
        Expr::int(match op {
            BinOp::Sub => v - by as i64,
            _ => v / by as i64,
        })
    }

    /// The largest count of `l` over the ranks.
    fn max_count(&self, l: &Loop) -> u64 {
        self.envs
            .iter()
            .filter_map(|env| eval_int(&l.count, env).ok())
            .filter_map(|v| u64::try_from(v).ok())
            .max()
            .unwrap_or(0)
    }

    /// Statements of a block or of an `if` branch at residual `k`.
    fn walk(&mut self, stmts: &[Stmt], k: f64) {
        for stmt in stmts {
            match &stmt.kind {
                StmtKind::Loop(l) if self.plan.loops.contains_key(&(&**l as *const Loop)) => {}
                StmtKind::Loop(l) if self.feeders.contains(&(&**l as *const Loop)) => {
                    let n = self.max_count(l);
                    let cut = (n as f64 / self.tasks.feed).round() as u64;
                    let count = if cut == n {
                        l.count.clone()
                    } else if cut > 0 && depends_on_rank(&l.count) {
                        let d = (n as f64 / cut as f64).round() as u64;
                        self.count_with(l, BinOp::Div, d)
                    } else {
                        Expr {
                            kind: ExprKind::Int(cut as i64),
                            pos: l.count.pos,
                        }
                    };
                    self.plan.loops.insert(&**l as *const Loop, count);
                    if cut > 0 {
                        // Each kept iteration stands for n / cut of the application's.
                        let factor = n as f64 / cut as f64;
                        self.body(l, k / factor, k, factor, None, None);
                    }
                }
                StmtKind::Loop(l) if self.frozen.contains(&(&**l as *const Loop)) => {
                    // Partners a common divisor cannot reach: kept whole.
                    self.plan.loops.insert(&**l as *const Loop, l.count.clone());
                    self.body(l, k, k, 1.0, None, None);
                }
                StmtKind::Loop(l) if reads_vars(&l.count, None) => {
                    // Its count changes with an enclosing loop's iterations: kept.
                    self.plan.loops.insert(&**l as *const Loop, l.count.clone());
                    self.body(l, k, k, 1.0, None, None);
                }
                StmtKind::Loop(l) => {
                    let n = self
                        .envs
                        .first()
                        .and_then(|env| eval_int(&l.count, env).ok())
                        .and_then(|v| u64::try_from(v).ok())
                        .unwrap_or(0);
                    // A whole number of periods of the body's use of the loop variable
                    // (all n iterations when it has no known period).
                    let raw = loop_period(l, self.envs.first());
                    let period = raw.map_or(n, |p| p.min(n));
                    let cut = if k <= 1.0 || n == 0 {
                        n
                    } else if self.rank_branch
                        && period <= 1
                        && (n as f64 / k).round() == 0.0
                        && self.collectives_of_loops(&l.body.stmts, 2, true)
                    {
                        // More iterations of another rank branch's loop (its sites): one
                        // rank's 21 after the 4176 that round to 42 like the other's 4197.
                        0
                    } else if period > 1 {
                        let periods = (n as f64 / k / period as f64).round() as u64;
                        (periods.max(1) * period).min(n)
                    } else {
                        ((n as f64 / k).round() as u64).max(1)
                    };
                    let factor = if cut == 0 { 1.0 } else { n as f64 / cut as f64 };
                    // Whole periods far from the share: the rare iterations are weighed.
                    if period > 1
                        && k > 1.0
                        && (factor / k).ln().abs() > MISSED_SHARE.ln()
                        && self.weighted(l, n, k)
                    {
                        continue;
                    }
                    if cut == 0 {
                        // None of its iterations run: nothing inside to scale.
                        self.plan.loops.insert(&**l as *const Loop, Expr::int(0));
                        self.block(&l.body, k);
                        continue;
                    }
                    let count = if cut == n {
                        l.count.clone()
                    } else {
                        Expr {
                            kind: ExprKind::Int(cut as i64),
                            pos: l.count.pos,
                        }
                    };
                    self.plan.loops.insert(&**l as *const Loop, count);
                    let kept = (period > 1).then_some(raw);
                    self.body(l, k / factor, k, factor, None, kept);
                }
                StmtKind::While(w) => {
                    // Not cut (its iterations are the messages it gets): it runs `share`
                    // of the application's tasks, each standing for 1 / share of them.
                    let share = self.tasks.share;
                    let body_k = k * share;
                    self.plan.residual.insert(stmt as *const Stmt, body_k);
                    self.block(&w.body, body_k);
                    if share < 1.0 {
                        let aggregate = &mut self.plan.aggregate;
                        each_stmt(&w.body.stmts, &mut |s| {
                            aggregate.insert(s as *const Stmt, 1.0 / share);
                        });
                    }
                }
                StmtKind::If(i) if self.weighed_ifs.contains(&(&**i as *const If)) => {}
                StmtKind::If(i) => {
                    let outer = self.rank_branch;
                    let mut current = i;
                    loop {
                        self.rank_branch =
                            outer || (self.mode.rounded && depends_on_rank(&current.cond));
                        self.branch(&current.then_block.stmts, k);
                        match &current.else_branch {
                            None => break,
                            Some(Else::Block(b)) => {
                                self.branch(&b.stmts, k);
                                break;
                            }
                            Some(Else::If(next)) => current = next,
                        }
                    }
                    self.rank_branch = outer;
                }
                _ => {
                    self.plan.residual.insert(stmt as *const Stmt, k);
                }
            }
        }
    }

    /// The statements of an `if` branch: walked, or in a rank branch left out when they
    /// are a written-out iteration whose share rounds to none.
    fn branch(&mut self, stmts: &[Stmt], k: f64) {
        if self.rank_branch && (1.0 / k).round() == 0.0 && self.written_out_iteration(stmts) {
            self.plan
                .dropped
                .extend(stmts.iter().map(|s| s as *const Stmt));
            return;
        }
        self.walk(stmts, k);
    }

    /// Cuts `l` (`n` iterations at share `k`) to its first `m = round(n / k)` iterations
    /// with its conditions as written, and weighs the branches they choose: a branch that
    /// ran in `c` of the application's iterations and runs in `c'` of the kept ones is
    /// left the residual `k · c' / c`, so its compute stands for `c / k` runs and its
    /// loops are cut by that. Periodic bodies whose whole periods are far from the share
    /// (LAMMPS's 501 steps re-neighbouring at `i % 20 == 0`, writing thermo at `i % 50 ==
    /// 0`, setting up at `i == 0`, at 1:100) are cut this way. Only when the body reads the
    /// variable in conditions alone (see [`weighable`]) and every branch that ran still
    /// runs in the kept iterations, `m` grown up to `2m` to reach one first taken later;
    /// `false`, with nothing planned, otherwise.
    fn weighted(&mut self, l: &Loop, n: u64, k: f64) -> bool {
        let Some(var) = l.var.as_ref().map(|v| v.name.as_str()) else {
            return false;
        };
        let share = ((n as f64 / k).round() as u64).max(1);
        if share >= n || n > WEIGHING_BUDGET || !weighable(&l.body.stmts, var) {
            return false;
        }
        let Some(env) = self.envs.first() else {
            return false;
        };
        let mask = vec![true; n as usize];
        let weighed = |m: u64| {
            let (mut branches, mut ifs, mut need) = (Vec::new(), Vec::new(), 0);
            weigh(
                &l.body.stmts,
                var,
                env,
                &mask,
                m as usize,
                &mut branches,
                &mut ifs,
                &mut need,
            )
            .map(|()| (branches, ifs, need as u64))
        };
        let Some((mut branches, mut ifs, need)) = weighed(share) else {
            return false;
        };
        // A branch first taken after the share's iterations (LAMMPS at 16 ranks: an
        // iteration that differs at `i % 25 == 5`, past the 5 steps of 1:100) makes the
        // kept iterations reach it, up to twice the share: the nearest ratio at which
        // every branch keeps a run (1:83.5); later than that, no weighing.
        let mut m = share;
        if need > share {
            if need > 2 * share || need >= n {
                return false;
            }
            m = need;
            let Some((b, i, _)) = weighed(m) else {
                return false;
            };
            (branches, ifs) = (b, i);
        }
        self.weighed_ifs.extend(ifs);
        self.plan.loops.insert(
            l as *const Loop,
            Expr {
                kind: ExprKind::Int(m as i64),
                pos: l.count.pos,
            },
        );
        self.block(&l.body, k * m as f64 / n as f64);
        let mut diag = Diag::warning(
            "loop-cut-by-weight",
            format!(
                "loop of {n} iterations keeps its first {m}: the iterations its body tells apart by `{var}` cannot all keep their share of 1:{}",
                ratio_text(k)
            ),
        )
        .at(l.count.pos, format!("cut to {m}"));
        if m > share {
            diag = diag.with_note(format!(
                "{share} iterations would stand for 1:{}; it keeps {m}, the first that reach every branch the application took, and stands for 1:{}",
                ratio_text(k),
                ratio_text(n as f64 / m as f64)
            ));
        }
        for b in &branches {
            let r = if b.ran == 0 {
                k
            } else {
                k * b.kept as f64 / b.ran as f64
            };
            self.block(b.block, r);
            if let Some(c) = b.cond {
                diag = diag.with_secondary(
                    c.pos,
                    format!(
                        "true in {} of {n} iterations, {} of the {m} kept",
                        b.ran, b.kept
                    ),
                );
            }
        }
        self.plan.warnings.push(diag.with_note(format!(
            "a branch that ran c times in the application and runs c' times in the kept iterations stands for c / {} runs: its compute spans are scaled by c / ({} c') and its loops cut by that; its communication is not shortened, and the ratio reached says what the skeleton stands for",
            ratio_text(k),
            ratio_text(k)
        )));
        true
    }

    /// Plans a loop's body at residual `body_k`, and warns when statements directly in it
    /// are left too long: the loop could not be cut by its share `k`. `period`: when the
    /// body's use of the loop variable limited the cut, its period (`None`: none known).
    fn body(
        &mut self,
        l: &Loop,
        body_k: f64,
        k: f64,
        factor: f64,
        common: Option<u64>,
        period: Option<Option<u64>>,
    ) {
        let direct = has_direct_statements(&l.body.stmts);
        if direct && body_k > 1.01 {
            let n = self
                .envs
                .first()
                .and_then(|env| eval_int(&l.count, env).ok())
                .unwrap_or(0);
            let what = if reads_vars(&l.count, None) {
                "loop whose count depends on a loop variable".to_string()
            } else if depends_on_rank(&l.count) {
                "loop whose count depends on the rank".to_string()
            } else {
                format!("loop of {n} iteration{}", if n == 1 { "" } else { "s" })
            };
            let mut diag = Diag::warning(
                "loop-not-cut",
                format!(
                    "{what} cannot be cut by {}; compute inside scaled instead",
                    ratio_text(k)
                ),
            )
            .at(l.count.pos, format!("cut by {} only", ratio_text(factor)))
            .with_note(format!(
                "each remaining iteration stands for {} of the application's iterations: its compute spans are {} times shorter, its communication is not shortened",
                ratio_text(body_k),
                ratio_text(body_k)
            ));
            if self.feeders.contains(&(l as *const Loop)) {
                diag = diag.with_note(format!(
                    "it sends the tasks of a `while recv`: the skeleton keeps {:.1} % of the application's tasks, about {:.0} for each rank that takes some (at least {:.0} where the application had as many), so that the ranks share them as the application's did; each task's compute stands for {} of the application's",
                    100.0 * self.tasks.share,
                    self.tasks.rounds,
                    super::MIN_TASK_ROUNDS,
                    ratio_text(1.0 / self.tasks.share)
                ));
            } else if self.whiles && has_p2p(&l.body.stmts) {
                diag = diag.with_note(if self.tasks.feed > 1.0 {
                    "the program has a `while recv`, which runs as many iterations as messages with its tag come: the loops that send its tasks are cut, and the others that communicate point to point keep all their iterations, so that the messages that end it stay"
                } else {
                    "the program has a `while recv`, which runs as many iterations as messages with its tag come: its tasks are too few to cut (a farm keeps ten for each rank that takes some, at least), so the loops that communicate point to point keep all their iterations"
                });
            } else if let Some(g) = common {
                diag = diag.with_note(format!(
                    "loops whose counts differ by rank or by branch are cut by a common divisor of their counts (here of {g}) so that sends and receives still match"
                ));
            }
            if let (Some(period), Some(v)) = (period, &l.var) {
                diag = diag.with_note(match period {
                    None => format!("the body reads `{v}` without a period (as in `{v} == 10` or `{v} < 10`), so every iteration is kept"),
                    Some(p) if p as i64 >= n => format!("the body reads `{v}` with period {p}, no shorter than the loop, so every iteration is kept"),
                    Some(p) => format!("the body reads `{v}` with period {p} (`{v} % m` repeats every m iterations; the period is the lcm over its uses), so the loop keeps a whole number of periods"),
                });
            }
            self.plan.warnings.push(diag);
        }
        self.block(&l.body, body_k);
    }
}

/// The loops a plan cut that may have left the errors of `diags` (a receive left without
/// its send, a collective some ranks skip), the likeliest first: the loops to try keeping
/// whole. A deadlock names where each rank waits. The loop that sent one message too few
/// encloses those places, or lies between the first and the last of them (a loop that
/// holds only the last is where a rank ran on to after its part matched, taken next), or
/// comes before them all (messages of the wrong count then matched later receives until
/// one rank waited alone): the cut loops that start before the last place, nearest first.
pub fn suspect_loops(program: &Program, plan: &Plan, diags: &[Diag]) -> Vec<*const Loop> {
    let errors: Vec<Vec<Span>> = diags
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| {
            d.primary
                .iter()
                .chain(d.secondary.iter())
                .map(|l| l.span)
                .collect::<Vec<_>>()
        })
        .filter(|spans| !spans.is_empty())
        .collect();
    fn walk(stmts: &[Stmt], plan: &Plan, out: &mut Vec<(*const Loop, Span)>) {
        for s in stmts {
            if let (StmtKind::Loop(l), Some(span)) = (&s.kind, s.pos.span()) {
                let p = &**l as *const Loop;
                if plan.loops.get(&p).is_some_and(|c| *c != l.count) {
                    out.push((p, span));
                }
            }
            for b in stmt_blocks(s) {
                walk(&b.stmts, plan, out);
            }
        }
    }
    let mut cut = Vec::new();
    walk(&program.body.stmts, plan, &mut cut);
    // Rank of each loop for each error: 0 encloses every place, 1 between the first and
    // the last, 2 holds the last, 3 before the last (nearest first); the best over errors.
    let mut ranked: Vec<(u8, std::cmp::Reverse<u32>, *const Loop)> = Vec::new();
    for (l, span) in cut {
        let contains = |x: &Span| span.start <= x.start && x.end <= span.end;
        let best = errors
            .iter()
            .filter_map(|spans| {
                let first = spans.iter().map(|x| x.start).min()?;
                let last = spans.iter().max_by_key(|x| x.start)?;
                if spans.iter().all(contains) {
                    Some(0)
                } else if contains(last) {
                    Some(2)
                } else if span.start < last.start && first < span.end {
                    Some(1)
                } else if span.start < last.start {
                    Some(3)
                } else {
                    None
                }
            })
            .min();
        if let Some(rank) = best {
            ranked.push((rank, std::cmp::Reverse(span.start), l));
        }
    }
    ranked.sort_by_key(|(rank, start, _)| (*rank, *start));
    ranked.into_iter().map(|(_, _, l)| l).collect()
}

/// The call sites of the collectives in the bodies (at any depth) of the loops with no
/// point-to-point communication directly in the branches of the rank-dependent `if`s of
/// `stmts`, each with the number of those loops it is in.
fn rank_branch_loop_sites(stmts: &[Stmt], out: &mut std::collections::BTreeMap<String, usize>) {
    fn sites(stmts: &[Stmt], out: &mut std::collections::BTreeSet<String>) {
        for s in stmts {
            if let (StmtKind::Collective(_), Some(site)) = (&s.kind, &s.site) {
                out.insert(site.text.clone());
            }
            for b in stmt_blocks(s) {
                sites(&b.stmts, out);
            }
        }
    }
    for s in stmts {
        if let StmtKind::If(i) = &s.kind {
            for (cond, block) in chain(i) {
                if cond.is_some_and(|c| !depends_on_rank(c)) {
                    continue;
                }
                for b in &block.stmts {
                    match &b.kind {
                        // The loops Mode::rounded cuts each by its share.
                        StmtKind::Loop(l) if !has_p2p(&l.body.stmts) => {
                            let mut of_loop = std::collections::BTreeSet::new();
                            sites(&l.body.stmts, &mut of_loop);
                            for site in of_loop {
                                *out.entry(site).or_insert(0) += 1;
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
    }
}

/// Whether `e` reads a loop variable other than `var`.
fn reads_other_vars(e: &Expr, var: &str) -> bool {
    match &e.kind {
        ExprKind::Var(v) => v.name != var,
        ExprKind::Unary(_, x) | ExprKind::Pick(_, x) => reads_other_vars(x, var),
        ExprKind::Binary(_, l, r) => reads_other_vars(l, var) || reads_other_vars(r, var),
        _ => false,
    }
}

/// The conditions of an `if` chain and its branches (the `else` block last, with no
/// condition).
fn chain(i: &If) -> Vec<(Option<&Expr>, &Block)> {
    let mut out = vec![(Some(&i.cond), &i.then_block)];
    let mut current = i;
    loop {
        match &current.else_branch {
            None => return out,
            Some(Else::Block(b)) => {
                out.push((None, b));
                return out;
            }
            Some(Else::If(next)) => {
                out.push((Some(&next.cond), &next.then_block));
                current = next;
            }
        }
    }
}

/// The branches of `i` when one of its conditions reads `var`: an `if` that is weighed.
fn weighed_chain<'p>(i: &'p If, var: &str) -> Option<Vec<(Option<&'p Expr>, &'p Block)>> {
    let branches = chain(i);
    branches
        .iter()
        .any(|(c, _)| c.is_some_and(|c| reads_vars(c, Some(var))))
        .then_some(branches)
}

/// Whether a loop body reads its variable `var` only in conditions of `if`s that every
/// rank evaluates alike (no rank, no other loop variable in them), at its top level or in
/// the branches of such `if`s: then which branch runs depends on the iteration alone.
fn weighable(stmts: &[Stmt], var: &str) -> bool {
    stmts.iter().all(|stmt| match &stmt.kind {
        StmtKind::If(i) if let Some(branches) = weighed_chain(i, var) => {
            branches.iter().all(|(c, b)| {
                c.is_none_or(|c| !depends_on_rank(c) && !reads_other_vars(c, var))
                    && weighable(&b.stmts, var)
            })
        }
        _ => {
            !stmt_exprs(stmt).iter().any(|e| reads_vars(e, Some(var)))
                && !stmt_blocks(stmt).iter().any(|b| block_reads_var(b, var))
        }
    })
}

/// A branch of an `if` that reads a weighed loop's variable.
struct Weighed<'p> {
    block: &'p Block,
    /// Its condition (`None`: an `else`).
    cond: Option<&'p Expr>,
    /// Iterations it runs in of the application's, and of the kept ones.
    ran: u64,
    kept: u64,
}

/// The branches of the `if`s of `stmts` that read `var` (recursively), with how often
/// each runs in the iterations of `mask` and in its first `m`; the `if`s into `ifs`;
/// `need` raised to the number of first iterations that reach every branch that runs.
/// `None` when a condition cannot be evaluated.
#[allow(clippy::too_many_arguments)]
fn weigh<'p>(
    stmts: &'p [Stmt],
    var: &str,
    env: &Env,
    mask: &[bool],
    m: usize,
    out: &mut Vec<Weighed<'p>>,
    ifs: &mut Vec<*const If>,
    need: &mut usize,
) -> Option<()> {
    for stmt in stmts {
        let StmtKind::If(i) = &stmt.kind else {
            continue;
        };
        let Some(branches) = weighed_chain(i, var) else {
            continue;
        };
        ifs.push(&**i as *const If);
        let mut remaining = mask.to_vec();
        for (cond, block) in branches {
            let mut taken = vec![false; mask.len()];
            for (index, left) in remaining.iter_mut().enumerate() {
                if !*left {
                    continue;
                }
                let holds = match cond {
                    None => true,
                    Some(c) => eval_bool_in(c, env, &[(var, index as i64)]).ok()?,
                };
                if holds {
                    taken[index] = true;
                    *left = false;
                }
            }
            let ran = taken.iter().filter(|&&t| t).count() as u64;
            let kept = taken[..m].iter().filter(|&&t| t).count() as u64;
            if let Some(first) = taken.iter().position(|&t| t) {
                *need = (*need).max(first + 1);
            }
            out.push(Weighed {
                block,
                cond,
                ran,
                kept,
            });
            weigh(&block.stmts, var, env, &taken, m, out, ifs, need)?;
        }
    }
    Some(())
}

/// Whether statements other than loops run directly in a block (through `if`s).
fn has_direct_statements(stmts: &[Stmt]) -> bool {
    stmts.iter().any(|s| match &s.kind {
        StmtKind::Loop(_) => false,
        StmtKind::If(i) => {
            let mut current = i;
            loop {
                if has_direct_statements(&current.then_block.stmts) {
                    return true;
                }
                match &current.else_branch {
                    None => return false,
                    Some(Else::Block(b)) => return has_direct_statements(&b.stmts),
                    Some(Else::If(next)) => current = next,
                }
            }
        }
        _ => true,
    })
}

/// "1000" or "2.5": a factor for messages.
pub fn ratio_text(k: f64) -> String {
    if (k - k.round()).abs() < 1e-9 {
        format!("{}", k.round() as u64)
    } else if k >= 100.0 {
        format!("{k:.0}")
    } else {
        format!("{k:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn divisors_near_the_ratio() {
        assert_eq!(divisor_near(40, 10.0), 10);
        assert_eq!(divisor_near(40, 100.0), 40);
        assert_eq!(divisor_near(280, 100.0), 140);
        assert_eq!(divisor_near(7, 1000.0), 7);
        assert_eq!(divisor_near(12, 1.0), 1);
        assert_eq!(divisor_near(0, 10.0), 1);
    }
}
