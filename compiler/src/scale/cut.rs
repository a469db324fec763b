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
use perfskel_grammar::Diag;

use crate::semantics::{
    depends_on_rank, eval_int, reads_vars, stmt_blocks, stmt_exprs, Env, Shape,
};

/// The decisions of loop cutting. Statements are identified by address within the
/// program the plan was made for.
#[derive(Debug, Default)]
pub struct Plan {
    /// New iteration count of each loop (by the address of its `Loop`).
    pub loops: HashMap<*const Loop, Expr>,
    /// Residual factor of each non-loop statement (by the address of its `Stmt`).
    pub residual: HashMap<*const Stmt, f64>,
    pub warnings: Vec<Diag>,
}

/// Plans the loop cuts for ratio `k`. `conservative`: point-to-point loops in blocks
/// whose rank branches have partners a common divisor cannot reach are kept whole (see
/// [`Planner::block`]); the scaler asks for it when the plain plan does not run.
pub fn plan(program: &Program, world: &Shape, k: f64, conservative: bool) -> Plan {
    let n = program.ranks.value;
    let envs = Env::all(n, world);
    let mut planner = Planner {
        envs,
        plan: Plan::default(),
        frozen: std::collections::HashSet::new(),
        conservative,
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
    conservative: bool,
}

/// Whether a block sends or receives point to point anywhere inside.
fn has_p2p(stmts: &[Stmt]) -> bool {
    stmts.iter().any(|s| {
        matches!(s.kind, StmtKind::P2p(_)) || stmt_blocks(s).into_iter().any(|b| has_p2p(&b.stmts))
    })
}

/// Every loop with point-to-point communication inside, at any depth.
fn p2p_loops<'p>(stmts: &'p [Stmt], out: &mut Vec<&'p Loop>) {
    for s in stmts {
        if let StmtKind::Loop(l) = &s.kind {
            if has_p2p(&l.body.stmts) {
                out.push(l);
            }
        }
        for b in stmt_blocks(s) {
            p2p_loops(&b.stmts, out);
        }
    }
}

/// The loops of a block that must be cut together: those under `if`s of the block and
/// those whose count depends on the rank (not looking inside loops).
fn coupled_loops<'p>(stmts: &'p [Stmt], under_if: bool, out: &mut Vec<&'p Loop>) {
    for stmt in stmts {
        match &stmt.kind {
            StmtKind::Loop(l) if under_if || depends_on_rank(&l.count) => out.push(l),
            StmtKind::If(i) => {
                let mut current = i;
                loop {
                    coupled_loops(&current.then_block.stmts, true, out);
                    match &current.else_branch {
                        None => break,
                        Some(Else::Block(b)) => {
                            coupled_loops(&b.stmts, true, out);
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
        let mut coupled = Vec::new();
        coupled_loops(&block.stmts, false, &mut coupled);
        // Point-to-point loops in rank branches talk to partner loops elsewhere in the
        // block: in other branches (the group's common divisor keeps them matched), but
        // also at the block's top level or nested inside a group loop (HPCC's panel
        // broadcasts: `if rank == 0 { loop 3 as i { loop 9 { send rank(i + 1) .. } } }`
        // against `loop 9 { recv rank(..) }` on the others), which one divisor does not
        // reach. There every point-to-point loop of the block is kept whole, and the
        // ratio falls to compute.
        let mut frozen = false;
        if self.conservative && !coupled.is_empty() && has_p2p(&block.stmts) {
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
            let g = counts.iter().fold(0, |g, &c| gcd(g, c));
            let d = if frozen { 1 } else { divisor_near(g, k) };
            for l in &coupled {
                let count = if d == 1 {
                    l.count.clone()
                } else if depends_on_rank(&l.count) {
                    Expr::new(ExprKind::Binary(
                        BinOp::Div,
                        Box::new(l.count.clone()),
                        Box::new(Expr::int(d as i64)),
                    ))
                } else {
                    let v = self
                        .envs
                        .first()
                        .and_then(|env| eval_int(&l.count, env).ok());
                    Expr::int(v.unwrap_or(0) / d as i64)
                };
                self.plan.loops.insert(*l as *const Loop, count);
                let body_k = k / d as f64;
                self.body(l, body_k, k, d as f64, Some(g), None);
            }
        }
        self.walk(&block.stmts, k);
    }

    /// Statements of a block or of an `if` branch at residual `k`.
    fn walk(&mut self, stmts: &[Stmt], k: f64) {
        for stmt in stmts {
            match &stmt.kind {
                StmtKind::Loop(l) if self.plan.loops.contains_key(&(&**l as *const Loop)) => {}
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
                    } else if period > 1 {
                        let periods = (n as f64 / k / period as f64).round() as u64;
                        (periods.max(1) * period).min(n)
                    } else {
                        ((n as f64 / k).round() as u64).max(1)
                    };
                    let factor = if cut == 0 { 1.0 } else { n as f64 / cut as f64 };
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
                StmtKind::If(i) => {
                    let mut current = i;
                    loop {
                        self.walk(&current.then_block.stmts, k);
                        match &current.else_branch {
                            None => break,
                            Some(Else::Block(b)) => {
                                self.walk(&b.stmts, k);
                                break;
                            }
                            Some(Else::If(next)) => current = next,
                        }
                    }
                }
                _ => {
                    self.plan.residual.insert(stmt as *const Stmt, k);
                }
            }
        }
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
            if let Some(g) = common {
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
