//! The `perfskel` command line as a library: argument parsing, files, external tools and
//! rendering of diagnostics. All analysis lives in the `perfskel-grammar` and
//! `perfskel-compiler` libraries, which do no I/O; `src/main.rs` only calls [`main`].

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub mod bundled;
pub mod cmd_analyze;
pub mod cmd_calibrate;
pub mod cmd_check;
pub mod cmd_compile;
pub mod cmd_demo;
pub mod cmd_fmt;
pub mod cmd_platform;
pub mod cmd_record;
pub mod cmd_report;
pub mod cmd_run;
pub mod cmd_skeletonize;
pub mod cmd_topo;
pub mod cmd_trace;
pub mod cmd_validate;
pub mod demo_pipeline;
pub mod files;
pub mod heatmap;
pub mod launcher;
pub mod otf2_export;
pub mod otf2_input;
pub mod timeline;

/// Performance skeletons of MPI applications.
///
/// A performance skeleton is a short program that communicates and computes like an MPI
/// application but runs a fixed fraction of its time, so timing it on another machine,
/// MPI library or network predicts the application's time there.
#[derive(Parser)]
#[command(name = "perfskel", version, about, long_about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Parse and check skeleton files: syntax, request handles, topology directions,
    /// sizes, roots, collectives and point-to-point matching (deadlocks).
    Check(cmd_check::Args),
    /// Rewrite skeleton files in canonical form (idempotent); `--check` only reports.
    Fmt(cmd_fmt::Args),
    /// Run the main job on the bundled example skeletons.
    Demo(cmd_demo::Args),
    /// Trace an MPI run: `perfskel record [-o DIR] -- mpirun -np 4 ./app args`.
    Record(cmd_record::Args),
    /// Read a trace directory: `show` its events, or `stats` per operation and call site.
    Trace(cmd_trace::Args),
    /// Statistical scalability analysis: rank the communication call sites whose share of
    /// communication time grows with the task count over profiles of many runs.
    Analyze(cmd_analyze::Args),
    /// Find the logical topology of a communication matrix or trace: the matched pattern,
    /// rank coordinates, rejected candidates and unexplained traffic; `--plot` draws it.
    Topo(cmd_topo::Args),
    /// Turn a trace into a skeleton: per-rank loop nests merged into one SPMD program
    /// over the logical topology; prints a summary (`--format json`).
    Skeletonize(cmd_skeletonize::Args),
    /// Scale a skeleton to a ratio 1:K and generate a C-MPI or Rust-rsmpi program:
    /// `perfskel compile app.skel --ratio 1:100 --backend c -o out/`.
    Compile(cmd_compile::Args),
    /// Build a generated program with an MPI and run it: `perfskel run out/ -np 16`;
    /// prints the skeleton time and the predicted application time.
    Run(cmd_run::Args),
    /// Measure this machine's MPI latency and bandwidth with a ping-pong program and save
    /// the model `compile` scales with.
    Calibrate(cmd_calibrate::Args),
    /// Write a SimGrid platform file and its host file for `perfskel run --simgrid`: a
    /// cluster, a torus, a fat tree or a dragonfly.
    Platform(cmd_platform::Args),
    /// Write one self-contained HTML report of a trace and its skeleton: the run,
    /// the prediction, both communication matrices, each rank's time, the call sites
    /// and the skeleton linked to them: `perfskel report TRACE -o report.html`.
    Report(cmd_report::Args),
    /// Validate skeletons: trace each example application, build its skeleton at 1:K, and
    /// compare the skeleton's prediction with the application's time in scenarios (other
    /// MPI, placement, competing job, slower network), beside two baselines.
    Validate(cmd_validate::Args),
}

/// `perfskel run OUT -np 4` spells the rank count as mpirun does; clap only knows
/// one-letter short options, so `-np` becomes `--np` (never after `--`, where a launcher
/// command line starts).
pub fn mpirun_style_args(args: impl Iterator<Item = String>) -> Vec<String> {
    let mut after_dashes = false;
    args.map(|arg| {
        after_dashes |= arg == "--";
        if !after_dashes && arg == "-np" {
            "--np".to_string()
        } else {
            arg
        }
    })
    .collect()
}

/// Parses the command line and runs the subcommand.
pub fn main() -> ExitCode {
    // Output piped into a reader that stops early (`perfskel trace stats T | head`) ends
    // the process quietly, as for other command-line tools, instead of a panic in
    // `println!` (Rust ignores SIGPIPE, so the write fails with EPIPE).
    // SAFETY: restoring a signal's default disposition at startup, before any thread.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse_from(mpirun_style_args(std::env::args()));
    let result = match cli.command {
        Command::Check(args) => cmd_check::run(args),
        Command::Fmt(args) => cmd_fmt::run(args),
        Command::Demo(args) => cmd_demo::run(args),
        Command::Record(args) => cmd_record::run(args),
        Command::Trace(args) => cmd_trace::run(args),
        Command::Analyze(args) => cmd_analyze::run(args),
        Command::Topo(args) => cmd_topo::run(args),
        Command::Skeletonize(args) => cmd_skeletonize::run(args),
        Command::Compile(args) => cmd_compile::run(args),
        Command::Run(args) => cmd_run::run(args),
        Command::Calibrate(args) => cmd_calibrate::run(args),
        Command::Platform(args) => cmd_platform::run(args),
        Command::Report(args) => cmd_report::run(args),
        Command::Validate(args) => cmd_validate::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(2)
        }
    }
}
