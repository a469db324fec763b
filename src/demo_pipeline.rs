//! The trace half of `perfskel demo`: takes nothing, builds the bundled stencil
//! application with `mpicc` in a scratch directory, records it at 4 ranks under `mpirun`
//! (by running this executable's `record`), skeletonizes the trace and checks the
//! skeleton, printing each step. Gives whether every step succeeded.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::cmd_skeletonize::{self, AlgorithmArg, Format};

const STENCIL_C: &str = include_str!("../examples/apps/stencil.c");
/// Points per rank side and iterations: a second of work at most, a short trace.
const APP_ARGS: [&str; 2] = ["64", "20"];
const N_RANKS: &str = "4";

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
    let out = Command::new("mpicc")
        .args(["-O2", "-g", "-o"])
        .arg(&exe)
        .arg(&source)
        .output()
        .map_err(|e| format!("demo: cannot run mpicc (install MPI with scripts/setup.sh, or pass --skip-record): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "demo: mpicc failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    println!(
        "1. build      mpicc -O2 -g stencil.c ({:.1} s)",
        started.elapsed().as_secs_f64()
    );

    let trace = scratch.join("trace-stencil");
    let me = std::env::current_exe().map_err(|e| format!("demo: {e}"))?;
    let started = Instant::now();
    let out = Command::new(me)
        .arg("record")
        .arg("-o")
        .arg(&trace)
        .args(["--", "mpirun", "--oversubscribe", "-np", N_RANKS])
        .arg(&exe)
        .args(APP_ARGS)
        .output()
        .map_err(|e| format!("demo: cannot run perfskel record: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("demo: perfskel record failed:\n{stderr}"));
    }
    let line = stderr
        .lines()
        .find(|l| l.starts_with("perfskel record:"))
        .unwrap_or("perfskel record: done");
    let line = line.split(" in /").next().unwrap_or(line);
    println!(
        "2. record     {} ({:.1} s)",
        line.trim_start_matches("perfskel record: "),
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
    Ok(ok)
}
