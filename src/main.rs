//! The `perfskel` command line: parses arguments, reads and writes files, runs external
//! tools, renders diagnostics. All analysis lives in the `perfskel-grammar` and
//! `perfskel-compiler` libraries, which do no I/O.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd_check;
mod cmd_demo;
mod cmd_fmt;
mod cmd_record;
mod cmd_trace;
mod files;

/// Performance skeletons of MPI applications.
///
/// A performance skeleton is a short program that communicates and computes like an MPI
/// application but runs a fixed fraction of its time, so timing it on another machine,
/// MPI library or network predicts the application's time there.
#[derive(Parser)]
#[command(name = "perfskel", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Parse and check skeleton files: syntax, request handles, topology directions,
    /// sizes, roots, collectives and point-to-point matching (deadlocks).
    Check(cmd_check::Args),
    /// Rewrite skeleton files in canonical form (idempotent); `--check` only reports.
    Fmt(cmd_fmt::Args),
    /// Run the main job on the bundled example skeletons.
    Demo(cmd_demo::Args),
    /// Trace an MPI run: `perfskel record [-o DIR] -- mpirun -np 4 ./app args`.
    Record(cmd_record::Args),
    /// Read a trace directory: `show` its events or print `stats`.
    Trace(cmd_trace::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check(args) => cmd_check::run(args),
        Command::Fmt(args) => cmd_fmt::run(args),
        Command::Demo(args) => cmd_demo::run(args),
        Command::Record(args) => cmd_record::run(args),
        Command::Trace(args) => cmd_trace::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(2)
        }
    }
}
