//! The `perfskel` command line: parses arguments, reads and writes files, runs external
//! tools, renders diagnostics. All analysis lives in the `perfskel-grammar` and
//! `perfskel-compiler` libraries, which do no I/O.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd_check;
mod cmd_demo;
mod cmd_fmt;
mod cmd_topo;
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
    /// Find the logical topology (grid, torus, tree, ...) of a communication matrix:
    /// rank coordinates, message directions, rejected candidates, unexplained traffic.
    Topo(cmd_topo::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check(args) => cmd_check::run(args),
        Command::Fmt(args) => cmd_fmt::run(args),
        Command::Demo(args) => cmd_demo::run(args),
        Command::Topo(args) => cmd_topo::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(2)
        }
    }
}
