//! A real application end to end: LAMMPS (Debian's `lmp`, which `scripts/setup.sh`
//! installs) runs a tiny Lennard-Jones melt (`scripts/real-apps/in.melt` at 5x5x5 fcc
//! cells, 100 steps, re-neighbouring every 20) at 2 ranks under Open MPI, and the whole
//! path runs through the command line as a user runs it: record → skeletonize → check →
//! compile at 1:1 → run. The summary is printed, not pinned: how short LAMMPS's skeleton
//! is follows the skeletonizer's progress (see `scripts/real-apps.sh` for the tables at
//! 4 to 16 ranks).

use std::path::Path;
use std::process::{Command, Output};

use perfskel_compiler::back::RunResult;

use crate::common::{root, shared_cache_dir, text, MPI_LOCK};

const N_RANKS: u32 = 2;

/// Runs the perfskel binary in `dir` with Open MPI allowed as root and oversubscribed.
fn perfskel(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_perfskel"))
        .args(args)
        .current_dir(dir)
        .env("PERFSKEL_CACHE_DIR", shared_cache_dir())
        .env("PERFSKEL_NO_CALIBRATE", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .output()
        .expect("the perfskel binary runs")
}

fn assert_ok(step: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{step} failed ({}):\n{}\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
}

#[test]
fn a_tiny_lammps_melt_goes_from_trace_to_a_running_skeleton() {
    let lmp = Command::new("lmp").arg("-h").output();
    assert!(
        lmp.is_ok_and(|o| o.status.success()),
        "`lmp` (Debian package lammps) is missing: scripts/setup.sh installs it"
    );
    let input = root().join("scripts/real-apps/in.melt");
    let input = input.to_str().expect("utf-8 path");
    let dir = tempfile::tempdir().expect("tempdir");
    let dir = dir.path();
    let np = N_RANKS.to_string();

    let recorded = {
        let _guard = MPI_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        perfskel(
            dir,
            &[
                "record",
                "-o",
                "trace",
                "--",
                "mpirun.openmpi",
                "-np",
                &np,
                "lmp",
                "-in",
                input,
                "-var",
                "cells",
                "5",
                "-var",
                "steps",
                "100",
                "-log",
                "none",
                "-screen",
                "none",
            ],
        )
    };
    assert_ok("record", &recorded);

    let skeletonized = perfskel(
        dir,
        &[
            "skeletonize",
            "trace",
            "-o",
            "melt.skel",
            "--format",
            "json",
        ],
    );
    assert_ok("skeletonize", &skeletonized);
    let summary: serde_json::Value = serde_json::from_slice(&skeletonized.stdout)
        .unwrap_or_else(|e| panic!("summary JSON: {e}: {}", text(&skeletonized.stdout)));
    println!("LAMMPS melt at {N_RANKS} ranks: {summary:#}");
    assert!(dir.join("melt.skel").is_file(), "no skeleton written");
    assert_eq!(summary["n_ranks"], N_RANKS);
    assert!(
        summary["raw_events"].as_u64().unwrap_or(0) > 0,
        "{summary:#}"
    );
    assert!(
        summary["statements"].as_u64().unwrap_or(0) > 0,
        "{summary:#}"
    );
    assert_eq!(summary["check_errors"], 0, "{summary:#}");

    // The skeleton checks clean (no errors, no warnings), nothing is dropped and every
    // statement that communicates names its call site (LAMMPS is stripped: sites are
    // function + offset).
    assert_eq!(summary["check_warnings"], 0, "{summary:#}");
    assert_eq!(summary["dropped_events"], 0, "{summary:#}");
    assert_ok("check", &perfskel(dir, &["check", "melt.skel"]));
    let skel = std::fs::read_to_string(dir.join("melt.skel")).expect("skeleton");
    for line in skel.lines().map(str::trim) {
        let word = line.split_whitespace().next().unwrap_or("");
        let communicates = [
            "send",
            "recv",
            "sendrecv",
            "req",
            "wait",
            "waitall",
            "bcast",
            "allreduce",
            "reduce",
            "barrier",
            "gather",
            "allgather",
            "scatter",
            "alltoall",
        ]
        .contains(&word);
        assert!(
            !communicates || line.contains(" @ \""),
            "no call site: {line}"
        );
    }

    // The time steps are one loop that reads its iteration number: re-neighbouring
    // every 20th step is a periodic condition on it, not a copy of the cycle. (The loop
    // may start anywhere in a step and leave a few steps to its prologue and epilogue;
    // in so small a run, where a step's force computation is short, it may also take a
    // re-neighbouring step with the step before it, so its period is then 19.)
    let step_loop = skel
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("loop ") && l.ends_with(" as i {"))
        .unwrap_or_else(|| panic!("no time-step loop in\n{skel}"));
    let steps: u64 = step_loop
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    // A clean-clone CI run under load folded the steps into a loop of 190 iterations,
    // two a step (the check and the run below hold it to the trace's calls): one loop
    // iteration per step or per half step.
    assert!(
        (90..=100).contains(&steps) || (180..=200).contains(&steps),
        "{step_loop}"
    );
    assert!(skel.contains("if i % "), "{skel}");

    let compiled = perfskel(
        dir,
        &["compile", "melt.skel", "--ratio", "1:1", "-o", "out"],
    );
    assert_ok("compile", &compiled);
    let ran = {
        let _guard = MPI_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        perfskel(dir, &["run", "out", "-np", &np, "--repeat", "1"])
    };
    assert_ok("run", &ran);
    let stdout = text(&ran.stdout);
    println!("{stdout}");
    let result = RunResult::find_in(&stdout)
        .unwrap_or_else(|| panic!("no perfskel-result line in\n{stdout}"));
    assert_eq!(result.ranks, u64::from(N_RANKS));
    assert_eq!(result.ratio, 1);
    assert!(result.skeleton_s > 0.0, "{result:?}");
}
