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

use std::collections::HashMap;

use perfskel_grammar::ast::*;
use perfskel_grammar::Diag;

use crate::semantics::{depends_on_rank, eval_int, Env, Shape};

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

/// Plans the loop cuts for ratio `k`.
pub fn plan(program: &Program, world: &Shape, k: f64) -> Plan {
    let n = program.ranks.value;
    let envs: Vec<Env> = (0..n)
        .map(|rank| Env {
            rank,
            n_ranks: n,
            coords: world.coords(rank),
        })
        .collect();
    let mut planner = Planner {
        envs,
        plan: Plan::default(),
    };
    planner.block(&program.body, k);
    planner.plan
}

struct Planner {
    envs: Vec<Env>,
    plan: Plan,
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
        if !coupled.is_empty() {
            let counts: Vec<u64> = coupled
                .iter()
                .flat_map(|l| {
                    self.envs
                        .iter()
                        .filter_map(|env| eval_int(&l.count, env).ok())
                        .filter_map(|v| u64::try_from(v).ok())
                        .collect::<Vec<u64>>()
                })
                .collect();
            let g = counts.iter().fold(0, |g, &c| gcd(g, c));
            let d = divisor_near(g, k);
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
                self.body(l, body_k, k, d as f64, Some(g));
            }
        }
        self.walk(&block.stmts, k);
    }

    /// Statements of a block or of an `if` branch at residual `k`.
    fn walk(&mut self, stmts: &[Stmt], k: f64) {
        for stmt in stmts {
            match &stmt.kind {
                StmtKind::Loop(l) if self.plan.loops.contains_key(&(&**l as *const Loop)) => {}
                StmtKind::Loop(l) => {
                    let n = self
                        .envs
                        .first()
                        .and_then(|env| eval_int(&l.count, env).ok())
                        .and_then(|v| u64::try_from(v).ok())
                        .unwrap_or(0);
                    let cut = if k <= 1.0 || n == 0 {
                        n
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
                    self.body(l, k / factor, k, factor, None);
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
    /// are left too long: the loop could not be cut by its share `k`.
    fn body(&mut self, l: &Loop, body_k: f64, k: f64, factor: f64, common: Option<u64>) {
        let direct = has_direct_statements(&l.body.stmts);
        if direct && body_k > 1.01 {
            let n = self
                .envs
                .first()
                .and_then(|env| eval_int(&l.count, env).ok())
                .unwrap_or(0);
            let what = if depends_on_rank(&l.count) {
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
