//! One rank's way through the plan: loops, branches and compute, up to the next
//! operation that involves other ranks. Both simulations step ranks with it; what they
//! do at a communication operation is theirs.

use perfskel_grammar::ast::{Block, Loop, Pos, StmtKind};

use super::plan::{Op, Plan, Time, PER_ITERATION};
use crate::semantics::{
    compute_seconds, eval_bool, eval_bool_in, eval_int, eval_int_in, sum_iterations, Env, EvalError,
};

/// The most memoized values of conditions (1 byte each) and of loop counts (16 bytes
/// each), as distinct expressions × ranks, a run keeps; beyond them it evaluates every
/// time.
const MAX_COND_MEMO: usize = 1 << 23;
const MAX_COUNT_MEMO: usize = 1 << 21;

/// The value of each distinct rank-dependent condition and loop count on each rank,
/// computed once: conditions `id * n + rank` → 0 when not evaluated yet, else 1 + the
/// value; counts likewise, `None` until evaluated. Empty when it would be too large.
pub(crate) struct Memo {
    n: usize,
    conds: Vec<u8>,
    counts: Vec<Option<i64>>,
}

impl Memo {
    pub fn new(plan: &Plan, n: usize) -> Memo {
        let len = |distinct: usize, max: usize| match distinct.checked_mul(n) {
            Some(len) if len <= max => len,
            _ => 0,
        };
        Memo {
            n,
            conds: vec![0; len(plan.conds, MAX_COND_MEMO)],
            counts: vec![None; len(plan.counts, MAX_COUNT_MEMO)],
        }
    }
}

/// Where a rank is: its next op, the loops it is in and its environment.
pub(crate) struct Cursor<'p> {
    /// The next op of the plan.
    pub pc: usize,
    /// Iterations left (including the current one) of each loop being run, innermost
    /// last.
    pub loops: Vec<u64>,
    /// The variables of the loops being run that name them: (name, 0-based iteration
    /// number), innermost last.
    pub vars: Vec<(&'p str, i64)>,
    pub env: Env,
}

/// Why [`Cursor::advance`] stopped.
pub(crate) enum Stop<'p> {
    /// At an operation with other ranks (point-to-point, collective, communicator
    /// creation, wait); the cursor is past it.
    Op(&'p Op<'p>),
    /// At compute of this many seconds (only when asked to stop there).
    Compute(f64),
    /// The rank has run its whole program.
    Done,
    /// The work budget ran out in a loop of compute.
    Budget,
}

/// What makes a rank's run meaningless.
pub(crate) enum Fault {
    Eval(EvalError),
    /// A loop count that evaluates negative (the count's position and value).
    NegativeCount(Pos, i64),
}

impl From<EvalError> for Fault {
    fn from(e: EvalError) -> Fault {
        Fault::Eval(e)
    }
}

/// Operations counted against a budget: every operation with other ranks is one, and
/// each iteration of a compute loop that must be summed one by one.
pub(crate) struct Work {
    pub ops: u64,
    pub budget: u64,
}

impl<'p> Cursor<'p> {
    pub fn new(env: Env) -> Cursor<'p> {
        Cursor {
            pc: 0,
            loops: Vec::new(),
            vars: Vec::new(),
            env,
        }
    }

    /// Runs loops, branches and compute until the next operation with other ranks.
    /// Compute adds to `compute`, or, with `stop_at_compute`, stops the run with its
    /// time.
    #[inline(always)]
    pub fn advance(
        &mut self,
        plan: &'p Plan<'p>,
        memo: &mut Memo,
        compute: &mut f64,
        work: &mut Work,
        stop_at_compute: bool,
    ) -> Result<Stop<'p>, Fault> {
        let ops: &'p [Op<'p>] = &plan.ops;
        let n = memo.n;
        let rank = self.env.rank as usize;
        // The program counter lives in a local while the rank runs and is stored when
        // the run stops (on an error the rank runs no more).
        let mut pc = self.pc;
        loop {
            let Some(op) = ops.get(pc) else {
                self.pc = pc;
                return Ok(Stop::Done);
            };
            pc += 1;
            match op {
                Op::Compute(time, polls) => {
                    let s = match time {
                        Time::Pick(spec) => compute_seconds(spec, &self.env, &self.vars)?,
                        time => time.seconds(self.env.rank),
                    } + polls;
                    if stop_at_compute {
                        self.pc = pc;
                        return Ok(Stop::Compute(s));
                    }
                    *compute += s;
                }
                Op::Jump(to) => pc = *to,
                Op::EndLoop { start, var } => match self.loops.last_mut() {
                    Some(left) if *left > 1 => {
                        *left -= 1;
                        pc = start + 1;
                        if *var {
                            if let Some((_, i)) = self.vars.last_mut() {
                                *i += 1;
                            }
                        }
                    }
                    _ => {
                        self.loops.pop();
                        if *var {
                            self.vars.pop();
                        }
                    }
                },
                Op::Loop {
                    l,
                    end,
                    comm_free,
                    constant,
                    count,
                } => {
                    let count = match constant {
                        Some(v) => *v,
                        None if *count == PER_ITERATION => {
                            eval_int_in(&l.count, &self.env, &self.vars)?
                        }
                        None => match memo.counts.get(count * n + rank) {
                            Some(Some(v)) => *v,
                            _ => {
                                let v = eval_int(&l.count, &self.env)?;
                                if let Some(slot) = memo.counts.get_mut(count * n + rank) {
                                    *slot = Some(v);
                                }
                                v
                            }
                        },
                    };
                    if count < 0 {
                        return Err(Fault::NegativeCount(l.count.pos, count));
                    }
                    if count > 0 && *comm_free {
                        // Only computation inside: accounted for without running it
                        // (iteration by iteration when inner counts read its variable;
                        // each such iteration counts as an operation).
                        let mut vars = self.vars.clone();
                        let left = work.budget.saturating_add(1).saturating_sub(work.ops);
                        let mut spent = left;
                        let s = loop_compute(l, count, &self.env, &mut vars, &mut spent)?;
                        pc = end + 1;
                        if spent < left {
                            work.ops += left - spent;
                        }
                        if stop_at_compute {
                            self.pc = pc;
                            return Ok(Stop::Compute(s));
                        }
                        *compute += s;
                        if work.ops > work.budget {
                            self.pc = pc;
                            return Ok(Stop::Budget);
                        }
                    } else if count > 0 {
                        self.loops.push(count as u64);
                        if let Some(v) = &l.var {
                            self.vars.push((v.name.as_str(), 0));
                        }
                    } else {
                        pc = end + 1;
                    }
                }
                Op::If { arms, otherwise } => {
                    // Conditions that depend only on the rank: each distinct one is
                    // evaluated once per rank; those reading loop variables every time.
                    let mut to = *otherwise;
                    for &(id, cond, start) in &plan.arms[arms.0 as usize..arms.1 as usize] {
                        let holds = if id == PER_ITERATION {
                            eval_bool_in(cond, &self.env, &self.vars)?
                        } else {
                            match memo.conds.get(id * n + rank) {
                                Some(&known) if known > 0 => known == 2,
                                _ => {
                                    let v = eval_bool(cond, &self.env)?;
                                    if let Some(slot) = memo.conds.get_mut(id * n + rank) {
                                        *slot = 1 + u8::from(v);
                                    }
                                    v
                                }
                            }
                        };
                        if holds {
                            to = start;
                            break;
                        }
                    }
                    pc = to;
                }
                Op::P2p(_)
                | Op::Collective(_)
                | Op::CommDecl { .. }
                | Op::Wait { .. }
                | Op::WhileTag { .. } => {
                    self.pc = pc;
                    return Ok(Stop::Op(op));
                }
            }
        }
    }
}

/// The compute time of one execution of a block that holds only computation, with the
/// loop variables `vars` in scope. A loop whose inner counts read its own variable is
/// summed iteration by iteration, each costing one unit of `work`; with no work left
/// the sum stops short (the caller then finds the budget spent).
pub(crate) fn compute_only<'p>(
    block: &'p Block,
    env: &Env,
    vars: &mut Vec<(&'p str, i64)>,
    work: &mut u64,
) -> Result<f64, EvalError> {
    let mut total = 0.0;
    for stmt in &block.stmts {
        match &stmt.kind {
            StmtKind::Compute(c) => {
                total += compute_seconds(&c.time, env, vars)? + crate::semantics::poll_seconds(c);
            }
            StmtKind::Loop(l) => {
                let count = eval_int_in(&l.count, env, vars)?.max(0);
                total += loop_compute(l, count, env, vars, work)?;
            }
            _ => {}
        }
    }
    Ok(total)
}

/// The compute time of `count` iterations of a loop that holds only computation (see
/// [`compute_only`]).
pub(crate) fn loop_compute<'p>(
    l: &'p Loop,
    count: i64,
    env: &Env,
    vars: &mut Vec<(&'p str, i64)>,
    work: &mut u64,
) -> Result<f64, EvalError> {
    sum_iterations(l, count, work, |bound, work| {
        vars.extend(bound);
        let once = compute_only(&l.body, env, vars, work);
        if bound.is_some() {
            vars.pop();
        }
        once
    })
}
