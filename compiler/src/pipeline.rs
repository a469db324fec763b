//! The pipeline from skeleton text to a program, as library functions: what
//! `perfskel check` and `perfskel compile` run, and what tests call without the CLI.
//!
//! `compile` is parse → check → scale → check again → back end. The second check is
//! the gate: a back end takes only a [`Verified`] program, so the scaled skeleton is
//! emitted only once it checks on its own.

use perfskel_grammar::Diag;

use crate::back::{self, Backend, GeneratedFile};
use crate::check::{check, verify, Options as CheckOptions, Verified};
use crate::scale::{self, seconds_text, Model, ScaleOptions, Scaled, Target};

/// A compiled skeleton: the scaled program, its generated files, the diagnostics
/// (warnings) and a one-line report of what scaling reached.
pub struct Compiled {
    pub scaled: Scaled,
    /// The `app_time` of the skeleton as written (before scaling).
    pub app_time: perfskel_grammar::ast::Decl<perfskel_grammar::ast::Duration>,
    pub files: Vec<GeneratedFile>,
    pub diags: Vec<Diag>,
    pub report: String,
}

/// Why a skeleton did not compile: diagnostics to show with the source, or a message.
pub enum CompileError {
    Diags(Vec<Diag>),
    Message(String),
}

/// Parses, checks, scales and emits one skeleton. `source_name` is the file name used
/// in generated comments; `files` is empty when `backend` is `None` (only scaling).
pub fn compile(
    source_name: &str,
    source: &str,
    ratio: u64,
    backend: Option<Backend>,
    model: &Model,
    target: Target,
) -> Result<Compiled, CompileError> {
    compile_with(
        source_name,
        source,
        ratio,
        backend,
        model,
        target,
        &back::JobPolicy::default(),
    )
}

/// [`compile`], with the Slurm batch script's requests.
pub fn compile_with(
    source_name: &str,
    source: &str,
    ratio: u64,
    backend: Option<Backend>,
    model: &Model,
    target: Target,
    job: &back::JobPolicy,
) -> Result<Compiled, CompileError> {
    job.check().map_err(CompileError::Message)?;
    let (program, mut diags) = perfskel_grammar::parse(source);
    if diags.iter().any(Diag::is_error) {
        return Err(CompileError::Diags(diags));
    }
    let verified = match verify(program, source, CheckOptions::default()) {
        Ok(v) => v,
        Err(found) => {
            diags.extend(found);
            return Err(CompileError::Diags(diags));
        }
    };
    diags.extend(verified.warnings().iter().cloned());
    let options = ScaleOptions {
        ratio,
        model: model.clone(),
        target,
    };
    let scaled = scale::scale(&verified, &options).map_err(|d| {
        diags.push(*d);
        CompileError::Diags(diags.clone())
    })?;
    diags.extend(scaled.warnings.iter().cloned());
    let rechecked: Verified = match verify(scaled.program.clone(), source, CheckOptions::default())
    {
        Ok(v) => v,
        Err(found) => {
            diags.extend(found);
            diags.push(Diag::error(
                "scaling-broke-check",
                "the scaled skeleton does not check: this is a bug in the scaling pass",
            ));
            return Err(CompileError::Diags(diags));
        }
    };
    let report = format!(
        "{source_name} at 1:{ratio}: expected skeleton time {} (target {}), ratio reached 1:{:.1}; compute x{:.4}, message sizes x{:.4}; model {}{}",
        seconds_text(scaled.expected_skeleton_s),
        seconds_text(scaled.target_s),
        scaled.ratio_reached,
        scaled.compute_factor,
        scaled.size_factor,
        model.mpi,
        scaled
            .unscaled_model_s
            .map(|t| format!("; the model gives the unscaled skeleton {}", seconds_text(t)))
            .unwrap_or_default()
    );
    let report = if scaled.own_ratios.is_empty() {
        report
    } else {
        format!(
            "{report}; {} communication statement(s) cut less than 1:{ratio}: the skeleton times them and counts each by its own ratio, the rest of its time x{:.4}",
            scaled.own_ratios.len(),
            scaled.rest_ratio
        )
    };
    let report = if scaled.fill_loops.is_empty() {
        report
    } else {
        format!(
            "{report}; {} loop(s) fill like a pipeline: the model gives {} of waiting before their first iterations, which the application waits once too (the skeleton runs about that much past the target); the skeleton times their first iterations apart and counts the fill once",
            scaled.fill_loops.len(),
            seconds_text(scaled.fill_s)
        )
    };
    let files = match backend {
        None => Vec::new(),
        Some(backend) => {
            let measure_skips = if backend == Backend::C {
                measure_skips(&rechecked, source, &scaled.own_ratios)
            } else {
                Default::default()
            };
            let options = back::Options {
                ratio,
                // Four decimals, as the program prints them.
                ratio_reached: four_decimals(scaled.ratio_reached),
                own_ratios: scaled
                    .own_ratios
                    .iter()
                    .map(|(&at, &r)| (at, four_decimals(r)))
                    .collect(),
                rest_ratio: four_decimals(scaled.rest_ratio),
                fill_loops: scaled.fill_loops.clone(),
                measure_skips,
                app_time_s: verified.program().app_time.value.seconds(),
                source_name: source_name.to_string(),
                source: source.to_string(),
                job: job.clone(),
            };
            back::emit(&rechecked, backend, &options).map_err(CompileError::Message)?
        }
    };
    Ok(Compiled {
        app_time: verified.program().app_time.clone(),
        scaled,
        files,
        diags,
        report,
    })
}

/// The loops a measuring pass under SMPI may leave out (`back::Options::measure_skips`):
/// those [`back::unmeasured_loops`] finds, where the scaled program with each of them
/// taken out still checks, so that no message or collective of the loops left out
/// is matched by one that runs; else none. Simulated, the pass then makes only the
/// communication it times, not the program's whole again (a transpose's 64-rank
/// all-to-alls twice more, for a reduce of 12 us).
pub fn measure_skips(
    scaled: &Verified,
    source: &str,
    own: &std::collections::BTreeMap<u32, f64>,
) -> std::collections::BTreeSet<u32> {
    let skips = back::unmeasured_loops(&scaled.program().body, own);
    if skips.is_empty() {
        return skips;
    }
    // The program without them (a loop runs at least once: they are taken out).
    fn take_out(block: &mut perfskel_grammar::ast::Block, skips: &std::collections::BTreeSet<u32>) {
        use perfskel_grammar::ast::{Else, StmtKind};
        block.stmts.retain(|stmt| {
            !(matches!(stmt.kind, StmtKind::Loop(_))
                && stmt.pos.span().is_some_and(|s| skips.contains(&s.start)))
        });
        for stmt in &mut block.stmts {
            match &mut stmt.kind {
                StmtKind::Loop(l) => take_out(&mut l.body, skips),
                StmtKind::While(w) => take_out(&mut w.body, skips),
                StmtKind::If(i) => {
                    let mut arm = Some(&mut **i);
                    while let Some(a) = arm {
                        take_out(&mut a.then_block, skips);
                        arm = match &mut a.else_branch {
                            Some(Else::If(next)) => Some(&mut **next),
                            Some(Else::Block(b)) => {
                                take_out(b, skips);
                                None
                            }
                            None => None,
                        };
                    }
                }
                _ => {}
            }
        }
    }
    let mut without = scaled.program().clone();
    take_out(&mut without.body, &skips);
    match verify(without, source, CheckOptions::default()) {
        Ok(_) => skips,
        Err(_) => Default::default(),
    }
}

/// A ratio as the generated programs print it.
fn four_decimals(ratio: f64) -> f64 {
    (ratio * 1e4).round() / 1e4
}

/// Parses and checks one file's text; the checker runs only on a program that parsed.
pub fn check_source(source: &str, options: CheckOptions) -> Vec<Diag> {
    let (program, mut diags) = perfskel_grammar::parse(source);
    if diags.iter().any(Diag::is_error) {
        return diags;
    }
    diags.extend(check(&program, source, options).diags);
    perfskel_grammar::diagnostic::sort(&mut diags);
    // Freeing a large syntax tree takes about a millisecond per megabyte: do it on
    // another thread while this one reports and goes on to the next file.
    if source.len() >= 1 << 20 {
        std::thread::spawn(move || drop(program));
    }
    diags
}

/// Each rank's compute in seconds as `check`'s simulation runs the program (random
/// spans at their mean), the failed polls after the spans left out (what they cost is
/// the MPI's where the skeleton runs), indexed by rank; `None` when the source has errors
/// or the simulation stopped before the end (its budget).
pub fn rank_compute_s(source: &str) -> Option<Vec<f64>> {
    fn without_polls(block: &mut perfskel_grammar::ast::Block) {
        for stmt in &mut block.stmts {
            if let perfskel_grammar::ast::StmtKind::Compute(c) = &mut stmt.kind {
                c.polls = None;
                c.poll_cost = None;
            }
            for inner in crate::semantics::stmt_blocks_mut(stmt) {
                without_polls(inner);
            }
        }
    }
    let (mut program, diags) = perfskel_grammar::parse(source);
    if diags.iter().any(Diag::is_error) {
        return None;
    }
    without_polls(&mut program.body);
    let checked = check(&program, source, CheckOptions::default());
    let info = checked.info?;
    if !info.simulation_complete() {
        return None;
    }
    Some(info.ranks().iter().map(|r| r.compute_seconds).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verified(source: &str) -> Verified {
        let (program, diags) = perfskel_grammar::parse(source);
        assert!(!diags.iter().any(Diag::is_error), "{diags:?}");
        verify(program, source, CheckOptions::default())
            .unwrap_or_else(|d| panic!("does not check: {d:?}"))
    }

    /// Where each line that starts with `line` starts in `source`, past its indent.
    fn at(source: &str, line: &str) -> u32 {
        let mut offset = 0;
        for l in source.split_inclusive('\n') {
            let trimmed = l.trim_start();
            if trimmed.starts_with(line) {
                return (offset + l.len() - trimmed.len()) as u32;
            }
            offset += l.len();
        }
        panic!("no line {line}");
    }

    /// A loop of communication with nothing the measuring pass times is left out of it;
    /// one that holds such a statement is not, nor a loop of compute alone.
    #[test]
    fn loops_without_timed_statements_are_left_out_of_the_measuring_pass() {
        let source = "skeleton t\nranks 2\ntopology ring\napp_time 1 s\nloop 4 {\n    compute 1 ms\n    alltoall 1 KiB\n}\nloop 3 {\n    loop 2 {\n        compute 1 ms\n        bcast 8 B\n    }\n    barrier\n}\nloop 5 {\n    compute 1 ms\n}\nreduce 8 B\n";
        let v = verified(source);
        let own = std::collections::BTreeMap::from([
            (at(source, "barrier"), 3.0),
            (at(source, "reduce"), 1.0),
        ]);
        let skips = measure_skips(&v, source, &own);
        // The all-to-all's loop and the bcast's (inside the barrier's loop, which stays).
        assert_eq!(
            skips.into_iter().collect::<Vec<_>>(),
            vec![at(source, "loop 4"), at(source, "loop 2")]
        );
        // Nothing timed: no measuring pass, nothing to leave out.
        assert!(measure_skips(&v, source, &Default::default()).is_empty());
    }

    /// A loop whose messages are received by a statement the pass times stays: the
    /// program without it would not check (the receive would wait forever).
    #[test]
    fn a_loop_whose_messages_are_matched_elsewhere_stays_in_the_measuring_pass() {
        let source = "skeleton t\nranks 2\ntopology chain\napp_time 1 s\nif rank == 0 {\n    loop 3 {\n        send next 1 KiB\n    }\n} else {\n    recv prev 1 KiB\n    recv prev 1 KiB\n    recv prev 1 KiB\n}\n";
        let v = verified(source);
        let own = std::collections::BTreeMap::from([(at(source, "recv"), 1.0)]);
        assert_eq!(
            back::unmeasured_loops(&v.program().body, &own)
                .into_iter()
                .collect::<Vec<_>>(),
            vec![at(source, "loop 3")],
            "a candidate"
        );
        assert!(measure_skips(&v, source, &own).is_empty());
    }
}
