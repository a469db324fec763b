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
