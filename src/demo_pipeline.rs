//! The pipeline half of `perfskel demo`: takes nothing, builds the bundled stencil
//! application with `mpicc` in a scratch directory, records it at 2 ranks under `mpirun`
//! (by running this executable's `record`), skeletonizes the trace, checks the skeleton,
//! compiles it for 1:10 and 1:100 with both back ends, runs the untraced application
//! (built with the application timer) and each program under Open MPI in turn, and
//! prints each program's predicted application time next to the application's median
//! untraced time and its spread. Gives whether every step succeeded.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use perfskel_compiler::back::{Backend, RunResult};

use crate::cmd_compile::{self, CompileError};
use crate::cmd_record::MpiKind;
use crate::cmd_run;
use crate::cmd_skeletonize::{self, AlgorithmArg, Format};

const STENCIL_C: &str = include_str!("../examples/apps/stencil.c");
/// Points per rank side and iterations: about five seconds on an idle 2-core machine,
/// long enough that its 1:100 skeleton runs about 50 ms (shorter, the machine's
/// scheduler ticks and timer jitter decide its error: `compile` warns below 50 ms).
const APP_ARGS: [&str; 2] = ["512", "16000"];
/// Runs recorded; the median one is the trace and the measured time (one run's time
/// varies by several percent on a small machine).
const RECORD_RUNS: &str = "3";
/// Two ranks, one per core of a small machine, so the times mean something.
const N_RANKS: &str = "2";
/// The ratios the demo compiles the skeleton for.
const RATIOS: [u64; 2] = [10, 100];

pub fn run() -> Result<bool, String> {
    let scratch = std::env::temp_dir().join(format!("perfskel-demo-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)
        .map_err(|e| format!("demo: cannot create {}: {e}", scratch.display()))?;
    let result = steps(&scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

fn steps(scratch: &Path) -> Result<bool, String> {
    println!(
        "\n== pipeline: record -> skeletonize -> check on examples/apps/stencil.c ({N_RANKS} ranks, N={}, {} iterations)",
        APP_ARGS[0], APP_ARGS[1]
    );
    let source = scratch.join("stencil.c");
    std::fs::write(&source, STENCIL_C).map_err(|e| format!("demo: {e}"))?;
    let exe = scratch.join("stencil");
    let started = Instant::now();
    mpicc(&exe, &[&source])?;
    // The same program with the application timer linked in, run untraced beside the
    // skeletons: what they predict.
    let shim = scratch.join("app_time.c");
    std::fs::write(&shim, crate::cmd_validate::TIMING_SHIM).map_err(|e| format!("demo: {e}"))?;
    let timed = scratch.join("stencil-timed");
    mpicc(&timed, &[&source, &shim])?;
    println!(
        "1. build      mpicc -O2 -g stencil.c, and again with perfskel's application timer linked in ({:.1} s)",
        started.elapsed().as_secs_f64()
    );

    let trace = scratch.join("trace-stencil");
    let me = std::env::current_exe().map_err(|e| format!("demo: {e}"))?;
    let started = Instant::now();
    // Open MPI needs --oversubscribe for 4 ranks on fewer cores, and refuses to run as
    // root (containers) unless told; MPICH's launcher takes neither.
    let version = Command::new("mpirun")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let openmpi = crate::launcher::detect_mpi(&version) == Some(MpiKind::Openmpi);
    let mut launcher = vec!["mpirun"];
    if openmpi {
        launcher.push("--oversubscribe");
    }
    launcher.extend(["-np", N_RANKS]);
    let mut record = Command::new(me);
    if openmpi {
        record
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    }
    let out = record
        .arg("record")
        .args(["--runs", RECORD_RUNS])
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .args(&launcher)
        .arg(&exe)
        .args(APP_ARGS)
        .output()
        .map_err(|e| format!("demo: cannot run perfskel record: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("demo: perfskel record failed:\n{stderr}"));
    }
    // The trace's summary line, and which of the runs was kept.
    let summary = stderr
        .lines()
        .find(|l| l.starts_with("perfskel record: ") && l.contains(" ranks, "))
        .unwrap_or("perfskel record: done");
    let summary = summary.split(" in /").next().unwrap_or(summary);
    let kept = stderr
        .lines()
        .find(|l| l.starts_with("perfskel record: kept run"))
        .map(|l| format!("; {}", l.trim_start_matches("perfskel record: ")))
        .unwrap_or_default();
    println!(
        "2. record     {}{kept} ({:.1} s)",
        summary.trim_start_matches("perfskel record: "),
        started.elapsed().as_secs_f64()
    );

    let output: PathBuf = scratch.join("stencil.skel");
    let started = Instant::now();
    let outcome = cmd_skeletonize::skeletonize_dir(&cmd_skeletonize::Args {
        trace,
        output,
        algorithm: AlgorithmArg::Exact,
        format: Format::Text,
        merge_sizes: None,
        threshold: perfskel_compiler::logicalize::DEFAULT_THRESHOLD,
        every_call: false,
        force: true,
    })?;
    let s = &outcome.skeleton.summary;
    println!(
        "3. skeletonize {} raw events -> {} statements ({:.1}x), {} loop(s), {:.1} % of the time in loops, topology {} ({:.2} s)",
        s.raw_events,
        s.statements,
        s.compression_ratio,
        s.loops,
        s.loop_time_pct,
        s.topology,
        started.elapsed().as_secs_f64()
    );
    for note in &s.notes {
        println!("   note: {note}");
    }
    let ok = outcome.check_errors == 0;
    println!(
        "4. check      {} error(s), {} warning(s)",
        outcome.check_errors, outcome.check_warnings
    );
    println!("\nthe skeleton:\n");
    for line in outcome.text.lines() {
        println!("    {line}");
    }
    if !ok {
        return Ok(false);
    }
    let app = TimedApp {
        exe: timed,
        launcher: launcher.iter().map(|a| a.to_string()).collect(),
        openmpi,
    };
    compile_and_run(scratch, &outcome.text, &app)
}

/// `mpicc -O2 -g -o exe sources...`.
fn mpicc(exe: &Path, sources: &[&Path]) -> Result<(), String> {
    let out = Command::new("mpicc")
        .args(["-O2", "-g", "-o"])
        .arg(exe)
        .args(sources)
        .output()
        .map_err(|e| format!("demo: cannot run mpicc (install MPI with scripts/setup.sh, or pass --skip-record): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "demo: mpicc failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// The application built with the timer, and how the demo launched it for the trace.
struct TimedApp {
    exe: PathBuf,
    launcher: Vec<String>,
    openmpi: bool,
}

impl TimedApp {
    /// One untraced run: its time between MPI_Init and MPI_Finalize (slowest rank).
    fn run(&self) -> Result<f64, String> {
        let (exe, opts) = self.launcher.split_first().ok_or("demo: empty launcher")?;
        let mut command = Command::new(exe);
        if self.openmpi {
            command
                .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        }
        let out = command
            .args(opts)
            .arg(&self.exe)
            .args(APP_ARGS)
            .output()
            .map_err(|e| format!("demo: cannot run the application: {e}"))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        match crate::cmd_validate::app_time(&stdout) {
            Some(t) if out.status.success() => Ok(t),
            _ => Err(format!(
                "demo: the untraced application did not give its time ({}):\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )),
        }
    }
}

/// Steps 5 and 6: compile the skeleton for every ratio and back end, then run the
/// untraced application and each program in turn, [`DEMO_RUNS`] rounds, and compare
/// each program's prediction (its median run) with the application's median time, its
/// spread beside it.
fn compile_and_run(scratch: &Path, skeleton: &str, app: &TimedApp) -> Result<bool, String> {
    let (model, model_from) = cmd_compile::load_model(None, MpiKind::Openmpi, true)?;
    println!(
        "\n5. compile    1:{} and 1:{} with the C and Rust back ends (model: {model_from})",
        RATIOS[0], RATIOS[1]
    );
    let mut programs = Vec::new();
    for backend in Backend::ALL {
        for ratio in RATIOS {
            let dir = compile_one(scratch, skeleton, &model, backend, ratio);
            programs.push(Program {
                backend,
                ratio,
                dir,
                runs: Vec::new(),
            });
        }
    }
    println!(
        "6. run        {N_RANKS} ranks under Open MPI, {DEMO_RUNS} rounds of the untraced application then each program (the Rust programs build rsmpi the first time)\n"
    );
    let launcher = [cmd_run::default_launcher(MpiKind::Openmpi)];
    let np: u64 = N_RANKS.parse().map_err(|_| "bad rank count".to_string())?;
    let mut app_runs = Vec::new();
    let mut app_error = None;
    for _ in 0..DEMO_RUNS {
        if app_error.is_none() {
            match app.run() {
                Ok(t) => app_runs.push(t),
                Err(e) => app_error = Some(e),
            }
        }
        for program in &mut programs {
            let Ok(dir) = &program.dir else { continue };
            match cmd_run::run_repeated(dir, MpiKind::Openmpi, &launcher, np, (1, 1), false) {
                Ok((runs, _)) => program.runs.extend(runs),
                Err(e) => program.dir = Err(e),
            }
        }
    }
    let measured = perfskel_compiler::stats::median(&app_runs);
    match (measured, &app_error) {
        (Some(m), _) => {
            let lo = app_runs.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = app_runs.iter().copied().fold(0.0, f64::max);
            let times: Vec<String> = app_runs.iter().map(|t| format!("{t:.3}")).collect();
            println!(
                "   the application, untraced: {} s (median {m:.3} s, spread {:.1} %: the machine's own noise)",
                times.join(", "),
                100.0 * (hi - lo) / m
            );
            if let Some(e) = &app_error {
                println!("   (a later run failed: {e})");
            }
        }
        (None, Some(e)) => println!("   {e}\n   errors below are against the traced run"),
        (None, None) => {}
    }
    let first = programs.iter().flat_map(|p| &p.runs).next();
    if let Some(traced) = first.map(|r| r.app_time_s) {
        println!("   the traced run the skeleton stands for: {traced:.3} s\n");
    }
    println!(
        "   {:<8} {:>6} {:>12} {:>14} {:>14} {:>8}",
        "back end", "ratio", "skeleton", "predicted", "measured", "error"
    );
    let mut ok = true;
    for Program {
        backend,
        ratio,
        dir,
        runs,
    } in &programs
    {
        if let Err(message) = dir {
            ok = false;
            println!(
                "   {:<8} {:>6} failed: {message}",
                backend.name(),
                format!("1:{ratio}")
            );
            continue;
        }
        if runs.is_empty() {
            continue;
        }
        let result = cmd_run::median_result(runs);
        let against = measured.unwrap_or(result.app_time_s);
        let error = 100.0 * (result.predicted_s - against) / against;
        println!(
            "   {:<8} {:>6} {:>10.3} s {:>12.3} s {:>12.3} s {:>+7.1}%",
            backend.name(),
            format!("1:{ratio}"),
            result.skeleton_s,
            result.predicted_s,
            against,
            error
        );
    }
    println!(
        "\n   measured: the untraced application's median time (end of MPI_Init to start of MPI_Finalize, slowest rank), run beside the skeletons; predicted: the median of {DEMO_RUNS} skeleton runs x the ratio reached (K where the target was hit)."
    );
    Ok(ok)
}

/// One of the demo's programs: its directory, or why it failed (to compile, to build or
/// to run), and its runs.
struct Program {
    backend: Backend,
    ratio: u64,
    dir: Result<PathBuf, String>,
    runs: Vec<RunResult>,
}

/// Compiles the skeleton at 1:`ratio` for `backend` into the scratch directory and
/// builds it; gives the program's directory.
fn compile_one(
    scratch: &Path,
    skeleton: &str,
    model: &perfskel_compiler::scale::Model,
    backend: Backend,
    ratio: u64,
) -> Result<PathBuf, String> {
    let compiled = match cmd_compile::compile(
        "stencil.skel",
        skeleton,
        ratio,
        Some(backend),
        model,
        // A skeleton of a trace: compute stays as traced (see `perfskel compile --help`).
        perfskel_compiler::scale::Target::Model,
    ) {
        Ok(compiled) => compiled,
        Err(CompileError::Message(message)) => return Err(message),
        Err(CompileError::Diags(diags)) => {
            let messages: Vec<String> = diags.iter().map(|d| d.message.clone()).collect();
            return Err(messages.join("; "));
        }
    };
    let dir = scratch.join(format!("stencil-{}-{ratio}", backend.name()));
    cmd_compile::write_output(&dir, &compiled.files, true)?;
    cmd_run::build(&dir, MpiKind::Openmpi)?;
    Ok(dir)
}

/// Runs of each skeleton program; the demo shows the median one.
const DEMO_RUNS: usize = 3;
