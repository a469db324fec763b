//! Scaling: a checked skeleton and a target ratio 1:K → a skeleton that runs 1/K of the
//! application's time, with the time the model expects, the ratio it reaches and
//! warnings (with spans) for every part that could not be scaled as asked.
//!
//! The unscaled skeleton stands for the application's whole run (`app_time`); the
//! scaled one must run `app_time / K`. The seed's order is kept:
//! 1. **loops** are cut, outer loops first (`cut.rs`), so each remaining iteration does
//!    exactly what an iteration of the application did;
//! 2. **compute** spans are shortened by what loop cutting left over (a loop of 3
//!    iterations cannot be cut by 1000), then all of them by one factor `c` found so that
//!    the timed simulation of every rank (`timing.rs`, with the latency/bandwidth
//!    [`Model`]) gives `app_time / K`: communication does not shrink with the loops
//!    (latency floors, synchronization), so compute makes up the difference; a
//!    pipeline's fill (the last stage's wait before its first iteration, once in the
//!    application as in the skeleton) is left out of that time and counted once;
//! 3. **message sizes** shrink (one factor for all, so sends and receives still match)
//!    only when communication alone would take longer than the target.

mod cut;
pub mod model;
pub mod timing;

use perfskel_grammar::ast::*;
use perfskel_grammar::Diag;

pub use model::{Fit, Model};
pub use timing::{simulate, simulate_own, OwnTime, Timing, TimingError};

use crate::check::{verify, Options as CheckOptions, Verified};
use crate::semantics::{Shape, MAX_SIMULATED_RANKS};
use cut::{plan, ratio_text, suspect_loops, Mode, Plan, Tasks};

/// The shortest skeleton run that can be timed reliably between two barriers.
pub const MIN_SKELETON_S: f64 = 100e-6;

/// Runs shorter than this are mostly the machine's noise (scheduler ticks of 1-4 ms,
/// timer and launcher jitter): `compile` warns when a scaled skeleton is expected to
/// run less, and `perfskel run` when one did.
pub const MIN_RELIABLE_S: f64 = 0.05;

/// The shortest run that times reliably with `ranks` ranks on `cores` cores: ranks that
/// share a core run in turns of the scheduler's time slices (a few milliseconds), so a
/// run must last as many times [`MIN_RELIABLE_S`] as ranks share a core to average over
/// as many turns. At 4 ranks on this project's 2 cores, skeletons of 53 and 55 ms spread
/// 38 % and 35 % over ten runs and missed by +30 % and +19 %; the same farm's 136 ms
/// skeleton spread 22 % and its median hit the application (+0.1 %).
pub fn min_reliable_s(ranks: u64, cores: u64) -> f64 {
    MIN_RELIABLE_S * ranks.div_ceil(cores.max(1)).max(1) as f64
}

/// The `too-short-to-time` warning for a skeleton whose `app_time` (unscaled) is scaled
/// to `ratio_reached`, when it would run less than `min_s` where the trace was taken
/// (about `app_time` over the ratio reached), with the largest ratio that keeps it above.
pub fn too_short_to_time(
    app_time_decl: &Decl<Duration>,
    ratio_reached: f64,
    min_s: f64,
) -> Option<Diag> {
    let app_time = app_time_decl.value.seconds();
    let runs_s = app_time / ratio_reached;
    if runs_s >= min_s {
        return None;
    }
    let largest = (app_time / min_s).floor();
    Some(
        Diag::warning(
            "too-short-to-time",
            format!(
                "the scaled skeleton would run about {} where the trace was taken, too short to time reliably (at least {})",
                seconds_text(runs_s),
                seconds_text(min_s)
            ),
        )
        .at(app_time_decl.pos, "the application's time")
        .with_note(if largest >= 2.0 {
            format!("1:{largest:.0} or a smaller ratio keeps it above that")
        } else {
            "only 1:1 keeps it above that; record a longer run".to_string()
        }),
    )
}

/// Operations the timed simulation may run for one evaluation.
pub const SIMULATION_BUDGET: u64 = 50_000_000;

/// A program whose MPI operations per rank, divided by K, exceed the simulation budget
/// this many times over cannot be cut into it (loops are cut about K-fold): `scale`
/// refuses it at once.
const HOPELESS_FACTOR: u64 = 1000;

/// The fewest MPI operations one rank runs in `stmts`: those outside any `if`, times
/// the counts of their enclosing loops whose count is a literal (saturating).
fn least_operations(stmts: &[Stmt]) -> u64 {
    stmts
        .iter()
        .map(|stmt| match &stmt.kind {
            // A `while recv` receives once at least.
            StmtKind::P2p(_) | StmtKind::Collective(_) | StmtKind::Wait(_) | StmtKind::While(_) => {
                1
            }
            StmtKind::Loop(l) => match l.count.kind {
                ExprKind::Int(n) if n > 0 => {
                    (n as u64).saturating_mul(least_operations(&l.body.stmts))
                }
                _ => 0,
            },
            _ => 0,
        })
        .fold(0u64, u64::saturating_add)
}

/// A scaled skeleton may reach a ratio at most this factor from the one asked; farther,
/// compile refuses and names the ratio it reaches.
const MAX_RATIO_MISS: f64 = 2.0;

/// Compute may shrink to this fraction of its proportional share before message sizes
/// are cut instead.
const COMPUTE_FLOOR: f64 = 0.5;

/// How many plans with one more loop kept whole are checked, at most, when a cut plan's
/// program no longer checks (each a plan, a rewrite and a check of the scaled program).
const KEEP_TRIALS: usize = 64;

#[derive(Clone, Debug)]
pub struct ScaleOptions {
    /// K of the ratio 1:K (at least 1).
    pub ratio: u64,
    pub model: Model,
    /// What the scaled skeleton's time is 1/K of.
    pub target: Target,
}

/// The time a scaled skeleton must run 1/K of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Target {
    /// `app_time / K`: compute is stretched or shrunk so that the model's time of the
    /// scaled skeleton is 1/K of the application's measured time, whatever the model
    /// says of the unscaled skeleton. When the model does not explain `app_time` (time
    /// ranks spent waiting on a loaded machine, an uncalibrated model), the difference
    /// becomes compute, and the skeleton then both waits and computes it: `perfskel
    /// validate` measured compute factors of 3.9–6.1 and predictions 2–5 times too long
    /// this way on a loaded machine. It is what a skeleton's `app_time`
    /// promises, but it inflates compute to cover the model's error.
    AppTime,
    /// The model's time of the unscaled skeleton / K: compute keeps the times the
    /// skeleton gives and only makes up for what loop cutting changes (communication
    /// that does not shrink). The model's errors are on both sides of the ratio, so they
    /// cancel. The default: the skeleton stays the trace, and `run` multiplies by the
    /// ratio reached.
    #[default]
    Model,
}

/// A scaled skeleton and what the scaling found.
#[derive(Clone, Debug)]
pub struct Scaled {
    pub program: Program,
    /// The time the scaled program should run: `app_time / K`, or the model's time of
    /// the unscaled skeleton / K with [`Target::Model`].
    pub target_s: f64,
    /// The skeleton time the model predicts for the scaled program, in seconds.
    pub expected_skeleton_s: f64,
    /// The model's application time over the scaled skeleton's, both less a pipeline's
    /// fill ([`Scaled::fill_s`]): K when the target was hit; less where communication
    /// counts by a ratio of its own (compute is not shrunk to make room for it: the
    /// skeleton runs longer than 1/K, its rest stands for 1:K, [`Scaled::rest_ratio`]);
    /// 1 at 1:1, where nothing is scaled (the skeleton is the trace, whatever the model
    /// expects).
    pub ratio_reached: f64,
    /// The factor applied to all compute spans beyond what loop cutting left.
    pub compute_factor: f64,
    /// The factor applied to message sizes (1 when they were kept).
    pub size_factor: f64,
    /// The model's time for the unscaled skeleton, when it was small enough to simulate.
    pub unscaled_model_s: Option<f64>,
    /// The communication statements that loops cut less than K (by the byte offset
    /// where each starts in the source), each with the ratio it has of its own: one
    /// execution in the scaled skeleton stands for that many of the application's (1
    /// where every enclosing loop is kept whole). The generated programs time them in a
    /// pass without compute and multiply each by its own ratio, and only the rest of
    /// their time by [`Scaled::rest_ratio`]: a message that runs as often in the
    /// skeleton as in the application costs what it costs once, however long a time
    /// slice or a slow network makes it. Empty at 1:1, and where the model gives these
    /// statements nearly all of the skeleton's time (the rest would be too small to
    /// multiply).
    pub own_ratios: std::collections::BTreeMap<u32, f64>,
    /// The ratio the rest of the skeleton's time (all but those statements') is
    /// multiplied by: the model's application time less what those statements stand for,
    /// over the scaled skeleton's less their time, both as the model's measuring pass
    /// gives them; the ratio reached where there are none.
    pub rest_ratio: f64,
    /// Loops whose first iteration the generated programs time apart (by the byte
    /// offset where each starts in the source): pipelines, whose last stages wait for
    /// the first ones to fill before their first iteration. The fill happens once in
    /// the application as in the skeleton, whatever the cut: each rank takes its first
    /// iteration less the mean of the others as the fill, the prediction counts the
    /// largest once and multiplies only the rest of the time (`perfskel.h`
    /// `ps_fill_begin`). Empty where the model gives no fill a share worth timing.
    pub fill_loops: std::collections::BTreeSet<u32>,
    /// The model's fill of those loops in the scaled skeleton (0 without them): the
    /// ratio reached and the rest ratio are the model's times less it.
    pub fill_s: f64,
    pub warnings: Vec<Diag>,
}

/// Scales a verified skeleton to 1:`options.ratio`. The scaled program is not verified:
/// it reaches a back end only through a check of its own.
/// Errors are diagnostics: a skeleton too short for the ratio, or too large to simulate.
pub fn scale(verified: &Verified, options: &ScaleOptions) -> Result<Scaled, Box<Diag>> {
    let program = verified.program();
    let world = verified.info().world();
    let k = options.ratio.max(1) as f64;
    let app_time = program.app_time.value.seconds();
    let model = &options.model;
    // A skeleton that cannot shrink into the simulation's budget is refused before any
    // simulation runs (`loop 10^18 { ... }`): time follows what the program holds, not
    // the number written in it.
    let least = least_operations(&program.body.stmts);
    if least / options.ratio.max(1) > SIMULATION_BUDGET.saturating_mul(HOPELESS_FACTOR) {
        return Err(Box::new(
            Diag::error(
                "cannot-simulate",
                format!(
                    "the scaled skeleton is too large to simulate: the program runs at least {least} MPI operations per rank (loops of constant count outside any `if`), more than {} at 1:{} (the simulation's limit is {SIMULATION_BUDGET})",
                    SIMULATION_BUDGET.saturating_mul(HOPELESS_FACTOR),
                    options.ratio.max(1)
                ),
            )
            .at(program.ranks.pos, "ranks"),
        ));
    }
    let unscaled_model_s = simulate(program, world, model, SIMULATION_BUDGET / 10)
        .ok()
        .map(|t| t.total_s());
    // The time the unscaled skeleton stands for.
    let reference = match (options.target, unscaled_model_s) {
        (Target::Model, Some(t)) if t > 0.0 => t,
        _ => app_time,
    };
    let target = reference / k;
    // At 1:1 nothing is cut: the skeleton runs as written, however short it is.
    if k > 1.0 && target < MIN_SKELETON_S {
        let largest = (reference / MIN_SKELETON_S).floor();
        // Against the model, a skeleton whose statements take far less than its
        // app_time (a hand-written one with a placeholder) says so.
        let mismatch = (reference < 0.5 * app_time).then(|| {
            format!(
                "the model gives the unscaled skeleton {}, far less than its app_time {}; `--target app-time` scales against app_time",
                seconds_text(reference),
                seconds_text(app_time)
            )
        });
        let error = Diag::error(
            "too-short-to-scale",
            format!(
                "at 1:{} the skeleton would run {}, too short to time: a run must last at least {}",
                options.ratio,
                seconds_text(target),
                seconds_text(MIN_SKELETON_S)
            ),
        )
        .at(program.app_time.pos, "the application's time")
        .with_note(if largest >= 1.0 {
            format!("the largest ratio for this skeleton is 1:{largest:.0}")
        } else {
            "the unscaled skeleton itself is shorter than that; record a longer run".to_string()
        });
        return Err(Box::new(match mismatch {
            Some(note) => error.with_note(note),
            None => error,
        }));
    }
    // The cut plan and the timed simulation keep state for every rank.
    if program.ranks.value > MAX_SIMULATED_RANKS {
        return Err(too_large(
            program,
            TimingError::TooManyRanks(program.ranks.value),
        ));
    }
    // The share of a `while`'s tasks the skeleton keeps (all, in a program without one).
    let tasks = task_cut(verified, world, model, k);
    let mut plan = choose_plan(program, verified.source(), world, model, k, tasks);
    // Against the model's own time, compute is never stretched: where whole iterations
    // cut more than 1/K (one of 140 at 1:100), the skeleton reaches a higher ratio
    // (1:140) and `run` multiplies by it.
    if options.target == Target::Model {
        for r in plan.residual.values_mut() {
            *r = r.max(1.0);
        }
    }
    let mut warnings = plan.warnings.clone();
    let time = |c: f64, s: f64| -> Result<f64, TimingError> {
        let p = apply(program, &plan, c, s, app_time / k);
        simulate(&p, world, model, SIMULATION_BUDGET).map(|t| t.total_s())
    };
    // Pipelines: the loops whose first iteration waits for the others to fill, a time
    // that does not shrink with the cut (see `fill_candidates`); kept where the model
    // gives their fill a share worth timing.
    let candidates = if k > 1.0 {
        fill_candidates(program, &plan)
    } else {
        Default::default()
    };
    let variants = (!candidates.is_empty()).then(|| {
        (
            with_counts(&plan, &candidates, |n| n.saturating_mul(2)),
            with_counts(&plan, &candidates, |_| 0),
        )
    });
    // A loop of n iterations that takes `f + n·t` after `p` outside it: `p + f + 2n·t`
    // with 2n and `p` with none, so its fill is twice the time less both.
    let fill = |c: f64, s: f64, once: f64| -> Result<f64, TimingError> {
        let Some((twice, none)) = &variants else {
            return Ok(0.0);
        };
        let at = |plan: &Plan| -> Result<f64, TimingError> {
            let p = apply(program, plan, c, s, app_time / k);
            Ok(simulate(&p, world, model, SIMULATION_BUDGET)?.total_s())
        };
        let f = 2.0 * once - at(twice)? - at(none)?;
        Ok(f.clamp(0.0, MAX_OWN_SHARE * once))
    };
    // The scaled skeleton's time with compute as traced, where something is split off.
    let mut whole = None;
    let mut whole_s = || -> Result<f64, Box<Diag>> {
        if let Some(t) = whole {
            return Ok(t);
        }
        let t = time(1.0, 1.0).map_err(|e| too_large(program, e))?;
        whole = Some(t);
        Ok(t)
    };
    // Where the variants do not run (partner loops that only match as cut), none.
    let has_fill = variants.is_some() && {
        let once = whole_s()?;
        fill(1.0, 1.0, once).is_ok_and(|f| f >= MIN_FILL_SHARE * once)
    };
    // Communication that loops cut less than K, with its own ratios (see `own_split`).
    let own = if k > 1.0 {
        own_ratios(program, &plan, k)
    } else {
        Default::default()
    };
    let own_at = |s: f64| -> Option<(f64, f64)> {
        if own.is_empty() {
            return None;
        }
        let p = apply(program, &plan, 1.0, s, app_time / k);
        simulate_own(&p, world, model, SIMULATION_BUDGET, &own)
            .ok()
            .map(|found| found.busiest())
    };
    let own_whole = own_at(1.0);
    // The measuring pass at sizes ×`s` (it runs no compute: the same at any factor).
    let own_found = |s: f64| if s == 1.0 { own_whole } else { own_at(s) };
    let split_own = match own_whole {
        Some((own_s, _)) if own_s > 0.0 => own_s < MAX_OWN_SHARE * whole_s()?,
        _ => false,
    };
    // What must be 1/K of the application's time: the skeleton's, less a pipeline's
    // fill, which happens once in both; and with the time of communication that counts
    // by its own ratio (in the model's measuring pass: no compute, so the same whatever
    // the compute factor) replaced by what it stands for over K, so that compute is not
    // shrunk to make room for either. Not where that communication would take nearly
    // all of the skeleton's time: the rest would be too small to multiply, and the
    // skeleton is scaled as a whole.
    let time_split = |c: f64, s: f64| -> Result<f64, TimingError> {
        let once = time(c, s)?;
        let mut split = once;
        if has_fill {
            split -= fill(c, s, once).unwrap_or(0.0) * (1.0 - 1.0 / k);
        }
        if split_own {
            if let Some((own_s, own_app_s)) = own_found(s) {
                split -= own_s - own_app_s / k;
            }
        }
        Ok(split)
    };
    // At 1:1 the skeleton is the trace: nothing is cut and no compute is added to make
    // up for what the model does not explain (the model's error is not the
    // application's time).
    let (c, s) = if k > 1.0 {
        solve_factors(&time_split, target, options.target == Target::Model)
            .map_err(|e| too_large(program, e))?
    } else {
        (1.0, 1.0)
    };
    if s < 1.0 {
        warnings.push(
            Diag::warning(
                "messages-scaled",
                format!(
                    "communication alone takes more than the target {}: message sizes scaled by {}",
                    seconds_text(target),
                    factor_text(s)
                ),
            )
            .at(program.app_time.pos, "target is this time / K")
            .with_note(
                "loops could not be cut enough, so messages are smaller than the application's; the prediction of bandwidth-bound phases is less exact",
            ),
        );
    }

    let scaled = apply(program, &plan, c, s, app_time / k);
    let expected = simulate(&scaled, world, model, SIMULATION_BUDGET)
        .map_err(|e| too_large(program, e))?
        .total_s();
    let fill_s = if has_fill {
        fill(c, s, expected).unwrap_or(0.0)
    } else {
        0.0
    };
    let ratio_reached = if k <= 1.0 {
        1.0
    } else if expected - fill_s > 0.0 {
        (reference - fill_s) / (expected - fill_s)
    } else {
        f64::INFINITY
    };
    // Durations are written to four significant digits: within 0.1 % the target was hit.
    let ratio_reached = if (ratio_reached / k - 1.0).abs() < 1e-3 {
        k
    } else {
        ratio_reached
    };
    let found = own_found(s);
    let (own_ratios, rest_ratio) = own_split(own, found, ratio_reached, expected - fill_s);
    // What the prediction multiplies the skeleton's cut part by: the rest ratio where
    // some communication counts by its own (the skeleton itself then runs longer than
    // 1/K of the application), else the ratio reached.
    let effective = if own_ratios.is_empty() {
        ratio_reached
    } else if (rest_ratio / k - 1.0).abs() < 1e-3 {
        k
    } else {
        rest_ratio
    };
    // Its cut part stands for 1:K, but the skeleton as a whole runs more than twice as
    // long as asked: the communication that counts by its own ratio is most of it.
    if !own_ratios.is_empty() && ratio_reached * MAX_RATIO_MISS < k {
        warnings.push(
            Diag::warning(
                "ratio-not-reached",
                format!(
                    "the scaled skeleton runs 1:{} of the application's time, not 1:{}: communication that loops do not cut takes half of it or more (it counts once in the prediction, by its own ratios; the rest stands for 1:{})",
                    ratio_text(ratio_reached),
                    options.ratio,
                    ratio_text(effective)
                ),
            )
            .at(program.app_time.pos, "the application's time")
            .with_note(format!(
                "the model expects {} for the scaled skeleton; 1/{} of the application is {}",
                seconds_text(expected),
                options.ratio,
                seconds_text(target)
            )),
        );
    }
    if (effective / k).ln().abs() > 1.05f64.ln() {
        let ratio_reached = effective;
        let why = if ratio_reached < k && options.target == Target::Model {
            "communication that loops do not cut takes more than the target, and compute shrinks no further than half (message sizes are kept)"
        } else if ratio_reached < k {
            "its communication cannot be made faster (latency floor)"
        } else if options.target == Target::Model {
            "loops keep whole iterations, and compute is not stretched to make up for them"
        } else {
            "it has too little compute to stretch to the target"
        };
        // Far from the ratio asked, the prediction would rest on the model's
        // extrapolation rather than on the skeleton: refused, with the ratio reached.
        let far = (ratio_reached / k).ln().abs() > MAX_RATIO_MISS.ln();
        let message = format!(
            "the scaled skeleton reaches 1:{} instead of 1:{}: {why}",
            ratio_text(ratio_reached),
            options.ratio
        );
        let diag = if far {
            Diag::error("ratio-far-from-asked", message)
        } else {
            Diag::warning("ratio-not-reached", message)
        }
        .at(program.app_time.pos, "the application's time")
        .with_note(format!(
            "the model expects {} for the scaled skeleton; the target is {}",
            seconds_text(expected),
            seconds_text(target)
        ));
        if far {
            return Err(Box::new(diag.with_note(format!(
                "ask for a ratio near 1:{} (within {MAX_RATIO_MISS}x of what it reaches)",
                ratio_text(ratio_reached)
            ))));
        }
        warnings.push(diag);
    }
    // Where the trace was taken the scaled skeleton runs about app_time over the ratio
    // it reaches (the model's own time is only a ratio's two sides); ranks sharing
    // cores are `compile`'s to weigh (it knows the machine, see `min_reliable_s`).
    if k > 1.0 {
        warnings.extend(too_short_to_time(
            &program.app_time,
            ratio_reached,
            MIN_RELIABLE_S,
        ));
    }
    warnings.extend(unscaled_communication(program, &plan, model, target));
    let mut program = scaled;
    program.name.trivia.leading.extend([
        format!(
            "# Scaled by perfskel to 1:{} of {} {}: the model expects {}.",
            options.ratio,
            match options.target {
                Target::AppTime => "app_time",
                Target::Model => "the model's time of the unscaled skeleton,",
            },
            seconds_text(reference),
            seconds_text(expected)
        ),
        format!(
            "# Compute factor {} after loop cuts; message sizes x{}; model: {}.",
            factor_text(c),
            factor_text(s),
            model.mpi
        ),
    ]);
    Ok(Scaled {
        program,
        target_s: target,
        expected_skeleton_s: expected,
        ratio_reached,
        compute_factor: c,
        size_factor: s,
        unscaled_model_s,
        own_ratios,
        rest_ratio,
        fill_loops: if has_fill {
            candidates.keys().copied().collect()
        } else {
            Default::default()
        },
        fill_s,
        warnings,
    })
}

/// The share of the scaled skeleton's time (in the model) a pipeline's fill must take
/// at least to be timed apart: below it the first iteration's noise would be most of
/// what is measured.
const MIN_FILL_SHARE: f64 = 0.02;

/// The loops whose first iteration may wait for a pipeline to fill, by where each
/// starts in the source: the outermost loops `plan` cuts (from a literal count, to two
/// iterations or more) that hold communication and do not read their variable (their
/// iterations alike, so the first one's excess over the others is the fill), outside
/// any `while`.
fn fill_candidates(program: &Program, plan: &Plan) -> std::collections::BTreeMap<u32, *const Loop> {
    fn communicates(block: &Block) -> bool {
        let mut found = false;
        crate::semantics::visit(block, &mut |stmt| {
            found |= !matches!(
                stmt.kind,
                StmtKind::Compute(_) | StmtKind::Loop(_) | StmtKind::If(_)
            );
        });
        found
    }
    fn walk(stmts: &[Stmt], plan: &Plan, out: &mut std::collections::BTreeMap<u32, *const Loop>) {
        for stmt in stmts {
            if runs_none(stmt, plan) {
                continue;
            }
            match &stmt.kind {
                StmtKind::Loop(l) => {
                    let ptr = &**l as *const Loop;
                    let ExprKind::Int(n) = l.count.kind else {
                        walk(&l.body.stmts, plan, out);
                        continue;
                    };
                    let cut = match plan.loops.get(&ptr).map(|e| &e.kind) {
                        Some(ExprKind::Int(cut)) => *cut,
                        _ => n,
                    };
                    if cut >= n {
                        walk(&l.body.stmts, plan, out);
                        continue;
                    }
                    let reads = l
                        .var
                        .as_ref()
                        .is_some_and(|v| crate::semantics::block_reads_var(&l.body, &v.name));
                    if let (Some(span), true) =
                        (stmt.pos.span(), cut >= 2 && !reads && communicates(&l.body))
                    {
                        out.insert(span.start, ptr);
                    }
                }
                StmtKind::If(_) => {
                    for block in crate::semantics::stmt_blocks(stmt) {
                        walk(&block.stmts, plan, out);
                    }
                }
                _ => {}
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk(&program.body.stmts, plan, &mut out);
    out
}

/// `plan` with `loops` running `count(n)` of the n iterations it keeps (0: left out).
fn with_counts(
    plan: &Plan,
    loops: &std::collections::BTreeMap<u32, *const Loop>,
    count_of: impl Fn(i64) -> i64,
) -> Plan {
    let mut twice = Plan {
        loops: plan.loops.clone(),
        residual: plan.residual.clone(),
        dropped: plan.dropped.clone(),
        aggregate: plan.aggregate.clone(),
        warnings: Vec::new(),
    };
    for l in loops.values() {
        if let Some(count) = twice.loops.get_mut(l) {
            if let ExprKind::Int(n) = count.kind {
                count.kind = ExprKind::Int(count_of(n));
            }
        }
    }
    twice
}

/// The share of the scaled skeleton's time (in the model) that statements with a ratio
/// of their own may take at most: past it, the rest is too small a part of the run to
/// multiply by a ratio of its own (its noise would be multiplied with it).
const MAX_OWN_SHARE: f64 = 0.9;

/// The statements with ratios of their own (`own`, from [`own_ratios`]) and the rest
/// ratio: the model's application time (`ratio_reached` × `expected_s`, the scaled
/// skeleton's less its pipelines' fill, which counts once beside the rest) less what
/// those statements stand for, over `expected_s` less their time, both as the model's
/// measuring pass gives them for the rank that spends the most there (`found`, from
/// [`simulate_own`]: `None` where it failed). No statements and the ratio reached where
/// there are none, where the simulation failed, or where they take nearly all of the
/// time.
fn own_split(
    own: std::collections::BTreeMap<u32, f64>,
    found: Option<(f64, f64)>,
    ratio_reached: f64,
    expected_s: f64,
) -> (std::collections::BTreeMap<u32, f64>, f64) {
    let none = (std::collections::BTreeMap::new(), ratio_reached);
    let app_s = ratio_reached * expected_s;
    let Some((own_s, own_app_s)) = found else {
        return none;
    };
    if own.is_empty() || expected_s.is_nan() || expected_s <= 0.0 {
        return none;
    }
    let rest_s = expected_s - own_s;
    if rest_s < (1.0 - MAX_OWN_SHARE) * expected_s || app_s - own_app_s < rest_s {
        return none;
    }
    (own, (app_s - own_app_s) / rest_s)
}

/// The communication statements (point to point, collectives, waits) that the plan
/// keeps and cuts less than `k`, by where each starts in the source, with `k` over the
/// ratio left to them (the application's executions each of theirs stands for). A
/// wait stands for no fewer than the operations it completes: where some post of one
/// of its handles is cut further (a waitall after a cut loop of windowed posts), it
/// takes the smallest ratio left to those posts. Statements without a source position
/// are left to the rest.
fn own_ratios(program: &Program, plan: &Plan, k: f64) -> std::collections::BTreeMap<u32, f64> {
    type Left = std::collections::BTreeMap<String, f64>;
    let left_of = |stmt: &Stmt| {
        plan.residual
            .get(&(stmt as *const Stmt))
            .copied()
            .unwrap_or(1.0)
    };
    // The smallest ratio left to any post of each request handle.
    fn posts(stmts: &[Stmt], plan: &Plan, left_of: &dyn Fn(&Stmt) -> f64, out: &mut Left) {
        for stmt in stmts {
            if runs_none(stmt, plan) {
                continue;
            }
            let handle = match &stmt.kind {
                StmtKind::P2p(p) => p.request.as_ref(),
                StmtKind::Collective(c) => c.request.as_ref(),
                _ => None,
            };
            if let Some(h) = handle {
                let left = left_of(stmt);
                out.entry(h.name.clone())
                    .and_modify(|l| *l = l.min(left))
                    .or_insert(left);
            }
            for block in crate::semantics::stmt_blocks(stmt) {
                posts(&block.stmts, plan, left_of, out);
            }
        }
    }
    fn walk(
        stmts: &[Stmt],
        plan: &Plan,
        k: f64,
        left_of: &dyn Fn(&Stmt) -> f64,
        posted: &Left,
        out: &mut std::collections::BTreeMap<u32, f64>,
    ) {
        for stmt in stmts {
            if runs_none(stmt, plan) {
                continue;
            }
            let left = match &stmt.kind {
                StmtKind::P2p(_) | StmtKind::Collective(_) => left_of(stmt),
                StmtKind::Wait(w) => w
                    .handles
                    .iter()
                    .filter_map(|h| posted.get(&h.name))
                    .fold(left_of(stmt), |a, &b| a.min(b)),
                _ => {
                    for block in crate::semantics::stmt_blocks(stmt) {
                        walk(&block.stmts, plan, k, left_of, posted, out);
                    }
                    continue;
                }
            };
            if let (Some(span), true) = (stmt.pos.span(), left > 1.001) {
                out.insert(span.start, k / left);
            }
        }
    }
    let mut posted = Left::new();
    posts(&program.body.stmts, plan, &left_of, &mut posted);
    let mut out = std::collections::BTreeMap::new();
    walk(&program.body.stmts, plan, k, &left_of, &posted, &mut out);
    out
}

/// The cut plan at ratio `k` with task loops cut by `tasks`: coupled loops that no common
/// divisor near K cuts shortened alike, where that checks; then loops of rank branches
/// rounded each by their own share, then cut by common divisors; where the cut program
/// no longer checks (a message or collective left unmatched), loops kept whole one at a
/// time, those the errors point at first (see `suspect_loops`); then every
/// point-to-point loop of a block with rank branches kept whole (where partners sit
/// outside the branches, or nested in their loops): the first plan whose program
/// checks. Where none does, the plain plan, or the conservative one where the plain
/// plan's timed run gets stuck.
fn choose_plan(
    program: &Program,
    source: &str,
    world: &Shape,
    model: &Model,
    k: f64,
    tasks: Tasks,
) -> Plan {
    let app_time = program.app_time.value.seconds();
    let none = std::collections::HashSet::new();
    let check = |p: &Plan| {
        let candidate = apply(program, p, 1.0, 1.0, app_time / k);
        verify(candidate, source, CheckOptions::default()).err()
    };
    let mut tried: Vec<Plan> = Vec::new();
    let mut chosen = None;
    if k > 1.0 {
        // Coupled loops that no common divisor near K cuts, each shortened by the
        // same number of iterations, where that still checks (see `Mode::shifted`).
        // (A shift can give the rounded plan's counts, with other warnings: that
        // plan is the rounded one's.)
        let shifted = plan(program, world, k, Mode::ROUNDED_SHIFTED, &none, tasks);
        if !same_counts(
            &shifted,
            &plan(program, world, k, Mode::ROUNDED, &none, tasks),
        ) && check(&shifted).is_none()
        {
            chosen = Some(shifted);
        }
    }
    if k > 1.0 && chosen.is_none() {
        for mode in [
            Mode::ROUNDED,
            Mode::PLAIN,
            Mode::ROUNDED_CONSERVATIVE,
            Mode::CONSERVATIVE,
        ] {
            let p = plan(program, world, k, mode, &none, tasks);
            if tried.iter().any(|t| same_counts(t, &p)) {
                continue;
            }
            let Some(errors) = check(&p) else {
                chosen = Some(p);
                break;
            };
            tried.push(p);
            if mode.conservative {
                continue;
            }
            chosen = keep_loops_whole(
                program,
                &|keep| plan(program, world, k, mode, keep, tasks),
                &check,
                errors,
                &mut tried,
            );
            if chosen.is_some() {
                break;
            }
        }
    }
    chosen.unwrap_or_else(|| {
        let plain = plan(program, world, k, Mode::PLAIN, &none, tasks);
        let stuck = k > 1.0
            && matches!(
                simulate(
                    &apply(program, &plain, 1.0, 1.0, app_time / k),
                    world,
                    model,
                    SIMULATION_BUDGET
                ),
                Err(TimingError::Stuck(_))
            );
        if stuck {
            plan(program, world, k, Mode::CONSERVATIVE, &none, tasks)
        } else {
            plain
        }
    })
}

/// Tasks each rank that takes some from a `while recv` keeps at least, where the
/// application's allow: a skeleton's farm ends when its last task does, and with few
/// tasks a rank whose last one came late (or that shared a core) decides the time;
/// with ten, the tail is a tenth of a task's share of the run at most.
const MIN_TASK_ROUNDS: f64 = 10.0;

/// The `while recv` iterations a plan's program runs over all ranks (`None` where it
/// does not check).
fn tasks_run(program: &Program, source: &str, plan: &Plan, k: f64) -> Option<u64> {
    let app_time = program.app_time.value.seconds();
    let candidate = apply(program, plan, 1.0, 1.0, app_time / k);
    verify(candidate, source, CheckOptions::default())
        .ok()
        .map(|v| v.info().ranks().iter().map(|r| r.tasks).sum())
}

/// How to cut a program's task loops at ratio `k` (see [`Tasks`]): the application's N
/// tasks over the W ranks that took some, the skeleton keeps N / K of them, but at least
/// [`MIN_TASK_ROUNDS`] for each of those ranks (all N where that is more). The feeding
/// loops' ratio that gives as many: cut by K first, the tasks that do not shrink with
/// them (a first task for each worker) are what is left over N / K; the rest shrink
/// with the ratio.
fn task_cut(verified: &Verified, world: &Shape, model: &Model, k: f64) -> Tasks {
    let program = verified.program();
    let source = verified.source();
    let counts: Vec<u64> = verified.info().ranks().iter().map(|r| r.tasks).collect();
    let n: u64 = counts.iter().sum();
    let w = counts.iter().filter(|&&c| c > 0).count() as f64;
    if k <= 1.0 || n == 0 || !cut::has_while(&program.body.stmts) {
        return Tasks::WHOLE;
    }
    let n = n as f64;
    let wanted = (n / k).max((MIN_TASK_ROUNDS * w).min(n));
    if wanted >= n * 0.999 {
        return Tasks::WHOLE;
    }
    let probe = Tasks {
        feed: k,
        share: 1.0,
        rounds: 0.0,
    };
    let Some(at_k) = tasks_run(
        program,
        source,
        &choose_plan(program, source, world, model, k, probe),
        k,
    ) else {
        return Tasks::WHOLE;
    };
    // Tasks that stay whatever the cut: at_k = fixed + (n - fixed) / k.
    let fixed = ((at_k as f64 - n / k) / (1.0 - 1.0 / k)).clamp(0.0, n);
    let feed = if wanted <= fixed {
        k
    } else {
        ((n - fixed) / (wanted - fixed)).max(1.0)
    };
    if feed <= 1.0 {
        return Tasks::WHOLE;
    }
    let tasks = Tasks {
        feed,
        share: 1.0,
        rounds: 0.0,
    };
    let kept = tasks_run(
        program,
        source,
        &choose_plan(program, source, world, model, k, tasks),
        k,
    );
    match kept {
        Some(kept) if kept > 0 && (kept as f64) < n => Tasks {
            feed,
            share: kept as f64 / n,
            rounds: kept as f64 / w,
        },
        _ => Tasks::WHOLE,
    }
}

/// From the plan last in `tried`, whose program failed the checker with `errors`, keeps
/// loops whole one at a time (`plan_keeping` makes the plan that keeps a set of them
/// whole), the likeliest first (see [`suspect_loops`]): a loop stays kept when keeping
/// it changes the errors (the messages now match past it, and the plan joins `tried`),
/// and is dropped again when it does not. The first plan whose program checks, within
/// [`KEEP_TRIALS`] plans.
fn keep_loops_whole(
    program: &Program,
    plan_keeping: &dyn Fn(&std::collections::HashSet<*const Loop>) -> Plan,
    check: &dyn Fn(&Plan) -> Option<Vec<Diag>>,
    mut errors: Vec<Diag>,
    tried: &mut Vec<Plan>,
) -> Option<Plan> {
    let labels = |errors: &[Diag]| -> Vec<_> {
        errors
            .iter()
            .map(|d| (d.code, d.primary.as_ref().map(|l| l.span)))
            .collect()
    };
    let mut keep = std::collections::HashSet::new();
    let mut rejected = std::collections::HashSet::new();
    let mut trials = 0;
    'keep: loop {
        let current = tried.last()?;
        for l in suspect_loops(program, current, &errors) {
            if keep.contains(&l) || rejected.contains(&l) {
                continue;
            }
            if trials == KEEP_TRIALS {
                return None;
            }
            trials += 1;
            let mut trial = keep.clone();
            trial.insert(l);
            let p = plan_keeping(&trial);
            match check(&p) {
                None => return Some(p),
                Some(e) if labels(&e) != labels(&errors) => {
                    keep = trial;
                    errors = e;
                    rejected.clear();
                    tried.push(p);
                    continue 'keep;
                }
                Some(_) => {
                    rejected.insert(l);
                }
            }
        }
        return None;
    }
}

/// The compute factor `c` and message size factor `s` that make the simulated time hit
/// `target`: compute first; messages only when compute would fall below its floor.
/// `faithful` (against the model's own time): compute is never stretched and message
/// sizes are kept, so where communication that loops do not cut takes more than the
/// target compute stays at its floor and the skeleton reaches a lower ratio (an error
/// far from the one asked) instead of sending messages the application never sent.
fn solve_factors(
    time: &impl Fn(f64, f64) -> Result<f64, TimingError>,
    target: f64,
    faithful: bool,
) -> Result<(f64, f64), TimingError> {
    let (t0, t1) = (time(0.0, 1.0)?, time(1.0, 1.0)?);
    let c = solve(|c| time(c, 1.0), 0.0, t0, 1.0, t1, target)?;
    if c >= COMPUTE_FLOOR || t1 <= t0 {
        return Ok((if faithful { c.min(1.0) } else { c }, 1.0));
    }
    if faithful {
        return Ok((COMPUTE_FLOOR, 1.0));
    }
    // Communication takes too much of the target: shrink messages, keeping compute at
    // the floor of its share.
    let s_min = 1e-9;
    if time(COMPUTE_FLOOR, s_min)? <= target {
        let s = bisect(|s| time(COMPUTE_FLOOR, s), s_min, 1.0, target)?;
        return Ok((COMPUTE_FLOOR, s));
    }
    let c = if time(0.0, s_min)? <= target {
        bisect(|c| time(c, s_min), 0.0, COMPUTE_FLOOR, target)?
    } else {
        0.0
    };
    Ok((c, s_min))
}

fn too_large(program: &Program, e: TimingError) -> Box<Diag> {
    let message = match e {
        TimingError::Budget(n) => {
            format!("the scaled skeleton is too large to simulate (more than {n} operations)")
        }
        TimingError::Stuck(why) => format!("the timed simulation failed: {why}"),
        TimingError::TooManyRanks(n) => format!(
            "scaling simulates every rank's time: {n} ranks are more than it handles ({})",
            MAX_SIMULATED_RANKS
        ),
    };
    Box::new(Diag::error("cannot-simulate", message).at(program.ranks.pos, "ranks"))
}

/// The compute factor that makes `time(c)` equal `target`, by the secant method from two
/// evaluations (`time` is piecewise linear and non-decreasing in `c`). Never negative.
fn solve(
    mut time: impl FnMut(f64) -> Result<f64, TimingError>,
    mut c0: f64,
    mut t0: f64,
    mut c1: f64,
    mut t1: f64,
    target: f64,
) -> Result<f64, TimingError> {
    for _ in 0..8 {
        if (t1 - target).abs() <= 1e-6 * target || (t1 - t0).abs() < 1e-15 {
            break;
        }
        let next = (c1 + (target - t1) * (c1 - c0) / (t1 - t0)).max(0.0);
        if (next - c1).abs() < 1e-9 {
            break;
        }
        let t = time(next)?;
        (c0, t0, c1, t1) = (c1, t1, next, t);
    }
    Ok(if (t1 - t0).abs() < 1e-15 && c1 == 1.0 {
        1.0
    } else {
        c1.max(0.0)
    })
}

/// The `x` in `[lo, hi]` with `time(x)` closest to `target` from below, by bisection
/// (`time` non-decreasing).
fn bisect(
    mut time: impl FnMut(f64) -> Result<f64, TimingError>,
    mut lo: f64,
    mut hi: f64,
    target: f64,
) -> Result<f64, TimingError> {
    for _ in 0..40 {
        let mid = 0.5 * (lo + hi);
        if time(mid)? <= target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

/// The program with loops cut, compute spans multiplied by `c / residual` and message
/// sizes by `s`; its `app_time` becomes `app_time`, 1/K of the application's: what the
/// scaled skeleton stands for.
fn apply(program: &Program, plan: &Plan, c: f64, s: f64, app_time: f64) -> Program {
    let mut out = program.clone();
    out.app_time.value = duration_of(app_time, program.app_time.value.unit);
    out.body = rewrite_block(&program.body, plan, c, s);
    out
}

fn rewrite_block(block: &Block, plan: &Plan, c: f64, s: f64) -> Block {
    Block {
        stmts: block
            .stmts
            .iter()
            .filter(|stmt| !runs_none(stmt, plan))
            .map(|stmt| rewrite(stmt, plan, c, s))
            .collect(),
        end_comments: block.end_comments.clone(),
    }
}

fn rewrite(stmt: &Stmt, plan: &Plan, c: f64, s: f64) -> Stmt {
    let residual = plan
        .residual
        .get(&(stmt as *const Stmt))
        .copied()
        .unwrap_or(1.0);
    let kind = match &stmt.kind {
        StmtKind::Loop(l) => StmtKind::Loop(Box::new(Loop {
            var: l.var.clone(),
            count: plan
                .loops
                .get(&(&**l as *const Loop))
                .cloned()
                .unwrap_or_else(|| l.count.clone()),
            body: rewrite_block(&l.body, plan, c, s),
        })),
        StmtKind::If(i) => StmtKind::If(Box::new(rewrite_if(i, plan, c, s))),
        StmtKind::While(w) => {
            let mut recv = w.recv.clone();
            if s < 1.0 {
                for v in recv.size.values_mut() {
                    *v = scale_size(*v, s);
                }
            }
            StmtKind::While(Box::new(While {
                recv,
                body: rewrite_block(&w.body, plan, c, s),
            }))
        }
        StmtKind::Compute(compute) => {
            let f = c / residual;
            let d = |d: &Spanned<Duration>| Spanned {
                value: duration_of(d.value.seconds() * f, d.value.unit),
                pos: d.pos,
            };
            // Polls whose cost is written (`polls N each D`) are time the model counts,
            // and follow the compute factor with the span; those without one the model
            // never saw, so a factor that makes its time hit the target would shrink them
            // blindly (HPCC at 4 ranks on 2 cores: polls are 80 % of its traced time,
            // and with them x0.58 the 1:100 skeleton ran 20-30 % short): they keep each
            // statement's share, 1 / its residual.
            let share = if compute.poll_cost.is_some() {
                f
            } else {
                1.0 / residual
            };
            let polls = compute.polls.and_then(|n| {
                let value = (n.value as f64 * share).round() as u64;
                (value > 0).then_some(Spanned { value, pos: n.pos })
            });
            // A kept task that stands for m of the application's: its time is their
            // sum's, whose spread is √m times one task's, not m times.
            let time = match plan.aggregate.get(&(stmt as *const Stmt)) {
                Some(&m) if m > 1.0 => narrow(&compute.time, 1.0 / m.sqrt()),
                _ => compute.time.clone(),
            };
            StmtKind::Compute(Box::new(Compute {
                time: scale_time(&time, &d),
                working_set: compute.working_set,
                poll_cost: compute.poll_cost.filter(|_| polls.is_some()),
                polls,
            }))
        }
        StmtKind::P2p(p) if s < 1.0 => {
            let mut p = p.clone();
            for v in p.size.values_mut() {
                *v = scale_size(*v, s);
            }
            if let Some((_, size)) = p.recv.as_deref_mut() {
                for v in size.values_mut() {
                    *v = scale_size(*v, s);
                }
            }
            StmtKind::P2p(p)
        }
        StmtKind::Collective(col) if s < 1.0 => {
            let mut col = col.clone();
            col.size = col.size.map(|spec| match spec {
                SizeSpec::Fixed(size) => SizeSpec::Fixed(scale_size(size, s)),
                SizeSpec::PerRank(v) => {
                    SizeSpec::PerRank(v.into_iter().map(|size| scale_size(size, s)).collect())
                }
            });
            StmtKind::Collective(col)
        }
        other => other.clone(),
    };
    Stmt {
        kind,
        site: stmt.site.clone(),
        pos: stmt.pos,
        trivia: stmt.trivia.clone(),
    }
}

fn rewrite_if(i: &If, plan: &Plan, c: f64, s: f64) -> If {
    If {
        cond: i.cond.clone(),
        then_block: rewrite_block(&i.then_block, plan, c, s),
        else_branch: i.else_branch.as_ref().map(|e| match e {
            Else::Block(b) => Else::Block(rewrite_block(b, plan, c, s)),
            Else::If(next) => Else::If(Box::new(rewrite_if(next, plan, c, s))),
        }),
    }
}

/// A duration of `seconds`, rounded to four significant digits, in the unit that reads
/// best (`19.6 ms`, not `0.0196 s`).
fn duration_of(seconds: f64, fallback: TimeUnit) -> Duration {
    if seconds.is_nan() || seconds <= 0.0 || !seconds.is_finite() {
        return Duration::new(0.0, fallback);
    }
    // Four significant digits first, so that 0.99999 ms reads `1 ms`, not `1000 us`.
    let p = 10f64.powi(3 - seconds.log10().floor() as i32);
    let seconds = (seconds * p).round() / p;
    let unit = if seconds >= 1.0 {
        TimeUnit::S
    } else if seconds >= 1e-3 {
        TimeUnit::Ms
    } else if seconds >= 1e-6 {
        TimeUnit::Us
    } else {
        TimeUnit::Ns
    };
    let value = seconds / unit.seconds();
    let digits = 3 - value.log10().floor() as i32;
    let rounded = if unit == TimeUnit::Ns {
        value.round().max(1.0)
    } else {
        let p = 10f64.powi(digits.max(0));
        (value * p).round() / p
    };
    Duration::new(rounded, unit)
}

/// Whether the plan keeps none of a loop's iterations (a loop of a rank branch whose
/// share is under half an iteration, see [`Mode::rounded`]), or drops the statement (an
/// iteration written out in a rank branch): it goes.
fn runs_none(stmt: &Stmt, plan: &Plan) -> bool {
    if plan.dropped.contains(&(stmt as *const Stmt)) {
        return true;
    }
    match &stmt.kind {
        StmtKind::Loop(l) => plan
            .loops
            .get(&(&**l as *const Loop))
            .is_some_and(|c| matches!(c.kind, ExprKind::Int(0))),
        _ => false,
    }
}

/// Whether two plans give every loop the same count.
fn same_counts(a: &Plan, b: &Plan) -> bool {
    a.loops.len() == b.loops.len()
        && a.dropped == b.dropped
        && a.loops
            .iter()
            .all(|(l, count)| b.loops.get(l).is_some_and(|c| c == count))
}

/// A distribution of compute times with its spread around the mean multiplied by `by`
/// (the normal's deviation, the uniform's half width), the mean kept.
fn narrow(time: &TimeSpec, by: f64) -> TimeSpec {
    let at = |d: &Spanned<Duration>, seconds: f64| Spanned {
        value: duration_of(seconds, d.value.unit),
        pos: d.pos,
    };
    match time {
        TimeSpec::Normal { mean, stddev } => TimeSpec::Normal {
            mean: *mean,
            stddev: at(stddev, stddev.value.seconds() * by),
        },
        TimeSpec::Uniform { low, high } => {
            let (l, h) = (low.value.seconds(), high.value.seconds());
            let (mid, half) = ((l + h) / 2.0, (h - l) / 2.0 * by);
            TimeSpec::Uniform {
                low: at(low, mid - half),
                high: at(high, mid + half),
            }
        }
        TimeSpec::Pick(p) => TimeSpec::Pick(Box::new(Pick {
            values: p.values.iter().map(|t| narrow(t, by)).collect(),
            index: p.index.clone(),
        })),
        TimeSpec::Fixed(_) | TimeSpec::PerRank(_) => time.clone(),
    }
}

/// A compute time with every duration in it mapped by `d`.
fn scale_time(time: &TimeSpec, d: &dyn Fn(&Spanned<Duration>) -> Spanned<Duration>) -> TimeSpec {
    match time {
        TimeSpec::Fixed(t) => TimeSpec::Fixed(d(t)),
        TimeSpec::PerRank(v) => TimeSpec::PerRank(v.iter().map(d).collect()),
        TimeSpec::Normal { mean, stddev } => TimeSpec::Normal {
            mean: d(mean),
            stddev: d(stddev),
        },
        TimeSpec::Uniform { low, high } => TimeSpec::Uniform {
            low: d(low),
            high: d(high),
        },
        TimeSpec::Pick(p) => TimeSpec::Pick(Box::new(Pick {
            values: p.values.iter().map(|t| scale_time(t, d)).collect(),
            index: p.index.clone(),
        })),
    }
}

/// A size multiplied by `s`, rounded down to whole bytes (at least 1 B when it was not
/// empty), so that a receive at least as large as its send stays so.
fn scale_size(size: Spanned<Size>, s: f64) -> Spanned<Size> {
    let bytes = size.value.bytes().unwrap_or(0);
    let scaled = if bytes == 0 {
        0
    } else {
        ((bytes as f64 * s).floor() as u64).max(1)
    };
    let value = if scaled % (1 << 20) == 0 && scaled > 0 {
        Size::new((scaled >> 20) as f64, SizeUnit::MiB)
    } else if scaled % 1024 == 0 && scaled > 0 {
        Size::new((scaled >> 10) as f64, SizeUnit::KiB)
    } else {
        Size::bytes_exact(scaled)
    };
    Spanned {
        value,
        pos: size.pos,
    }
}

/// Warnings for communication outside every loop that was left much too long: it runs
/// once in the scaled skeleton as in the application, and costs a noticeable part of
/// the target.
fn unscaled_communication(program: &Program, plan: &Plan, model: &Model, target: f64) -> Vec<Diag> {
    // Sub-communicators are costed as the world: an upper bound, for a warning.
    let n = program.ranks.value;
    let mut out = Vec::new();
    for stmt in &program.body.stmts {
        let residual = plan
            .residual
            .get(&(stmt as *const Stmt))
            .copied()
            .unwrap_or(1.0);
        if residual <= 1.5 {
            continue;
        }
        let cost = match &stmt.kind {
            StmtKind::P2p(p) => model.p2p(p.size.mean_bytes().round() as u64),
            StmtKind::Collective(c) => {
                let bytes = match &c.size {
                    Some(SizeSpec::Fixed(s)) => s.value.bytes().unwrap_or(0),
                    Some(SizeSpec::PerRank(v)) => {
                        v.iter().filter_map(|s| s.value.bytes()).max().unwrap_or(0)
                    }
                    None => 0,
                };
                model.collective(c.op, bytes, n)
            }
            _ => continue,
        };
        if cost > 0.01 * target {
            out.push(
                Diag::warning(
                    "communication-not-scaled",
                    format!(
                        "this communication runs once, outside any loop, and cannot be cut by {}",
                        ratio_text(residual)
                    ),
                )
                .at(
                    stmt.pos,
                    format!(
                        "about {} of the target {}",
                        seconds_text(cost),
                        seconds_text(target)
                    ),
                )
                .with_note("compute elsewhere is shortened to make up for it"),
            );
        }
    }
    out
}

/// "12.000 s", "1.500 ms", "120.0 us": a time for messages.
pub fn seconds_text(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.1} us", s * 1e6)
    }
}

fn factor_text(f: f64) -> String {
    format!("{f:.4}")
}

#[cfg(test)]
mod tests;
