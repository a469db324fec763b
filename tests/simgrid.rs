//! Issue 20's first part: skeletons simulated under SimGrid's SMPI (`perfskel run
//! --simgrid`) on platforms `perfskel platform` writes. SMPI is deterministic, so the
//! simulated times are compared exactly between runs and against what the platform
//! implies.

use std::path::Path;
use std::process::Command;

use crate::common::{perfskel, text, OWN};
use perfskel_compiler::back::RunResult;

const SKELETON: &str = "skeleton smpi_ring\nranks 4\ntopology ring\napp_time 50 ms\nloop 10 {\n    compute 4 ms\n    sendrecv to next 64 KiB from prev 64 KiB\n    allreduce 8 B\n}\n";

fn platform(dir: &Path, name: &str, args: &[&str]) -> String {
    let file = dir.join(format!("{name}.xml"));
    let file_text = file.to_str().expect("utf-8 path").to_string();
    let mut all = vec!["platform", "-o", &file_text];
    all.extend_from_slice(args);
    let out = perfskel(dir, &all);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        file.with_extension("hosts").is_file(),
        "the host file beside it"
    );
    file_text
}

fn simulate(dir: &Path, platform: &str) -> (RunResult, String) {
    simulate_with(dir, platform, &[])
}

fn simulate_with(dir: &Path, platform: &str, extra: &[&str]) -> (RunResult, String) {
    let mut args = vec!["run", "out", "-np", "4", "--simgrid", platform];
    args.extend_from_slice(extra);
    let out = perfskel(dir, &args);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let result = RunResult::find_in(&stdout).expect("a perfskel-result line");
    (result, stdout)
}

/// Writes the ring skeleton into `dir` and compiles it at 1:1 into `dir/OUT` (`extra`:
/// more options, the back end).
fn compile(dir: &Path, extra: &[&str], out: &str) {
    std::fs::write(dir.join("ring.skel"), SKELETON).expect("write");
    let mut args = vec![
        "compile",
        "ring.skel",
        "--ratio",
        "1:1",
        "--no-calibrate",
        "-o",
        out,
    ];
    args.extend_from_slice(extra);
    let done = perfskel(dir, &args);
    assert!(done.status.success(), "{}", text(&done.stderr));
}

#[test]
fn skeletons_run_under_smpi_on_generated_platforms() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dir = dir.path();
    compile(dir, &[], "out");
    let flat = platform(
        dir,
        "flat",
        &[
            "--shape",
            "cluster:4",
            "--latency",
            "1us",
            "--bandwidth",
            "10GBps",
        ],
    );
    let (first, said) = simulate(dir, &flat);
    // 10 iterations of 4 ms of compute at the traced machine's speed, plus messages of
    // 64 KiB at 10 GB/s (6.6 us) and an allreduce: just over 40 ms, simulated.
    assert!(
        (0.040..0.0415).contains(&first.skeleton_s),
        "{}",
        first.skeleton_s
    );
    assert!(
        said.contains("simulated ranks") && said.contains("the simulation took"),
        "{said}"
    );
    // The last result line carries the simulation's wall time.
    assert!(
        first.simulation_s.is_some_and(|w| w > 0.0 && w < 60.0),
        "{said}"
    );
    // Deterministic: the same time again.
    let (again, _) = simulate(dir, &flat);
    assert_eq!(first.skeleton_s, again.skeleton_s);
    // The communication alone (`--sim-compute none`): the same run less its 10 spans of
    // 4 ms (alike on every rank, so no rank waits for another's compute).
    let (comm, said) = simulate_with(dir, &flat, &["--sim-compute", "none"]);
    assert!(
        (comm.skeleton_s - (first.skeleton_s - 0.040)).abs() < 1e-5,
        "{} without compute, {} with",
        comm.skeleton_s,
        first.skeleton_s
    );
    assert!(said.contains("communication alone"), "{said}");
    // Nodes twice as fast: the compute half as long.
    let fast = platform(
        dir,
        "fast",
        &[
            "--shape",
            "cluster:4",
            "--speed",
            "2Gf",
            "--latency",
            "1us",
            "--bandwidth",
            "10GBps",
        ],
    );
    let (quick, _) = simulate(dir, &fast);
    assert!(
        (quick.skeleton_s - (first.skeleton_s - 0.020)).abs() < 2e-4,
        "{} at 2 Gf, {} at 1 Gf",
        quick.skeleton_s,
        first.skeleton_s
    );
    // A slower network: the messages take longer.
    let slow = platform(
        dir,
        "slow",
        &[
            "--shape",
            "cluster:4",
            "--latency",
            "100us",
            "--bandwidth",
            "100MBps",
        ],
    );
    let (slower, _) = simulate(dir, &slow);
    assert!(
        slower.skeleton_s > first.skeleton_s + 10.0 * 64.0 * 1024.0 / 100e6,
        "{} on the slow network, {} on the fast one",
        slower.skeleton_s,
        first.skeleton_s
    );
    // The other shapes are platforms SMPI runs.
    for (name, shape) in [
        ("torus", "torus:2x2"),
        ("fattree", "fat-tree:2,2"),
        ("dragonfly", "dragonfly:1,1,2,2"),
    ] {
        let p = platform(dir, name, &["--shape", shape]);
        let (r, _) = simulate(dir, &p);
        assert!(
            (0.040..0.05).contains(&r.skeleton_s),
            "{shape}: {}",
            r.skeleton_s
        );
    }
    // An existing platform is not overwritten without --force.
    let refused = perfskel(dir, &["platform", "--shape", "cluster:4", "-o", &flat]);
    assert!(!refused.status.success());
    assert!(text(&refused.stderr).contains("--force"));
}

/// `--sim-compute benched`: the kernel runs on this machine and SMPI times it as it times
/// an application's code, so the spans last about what they say, not exactly, and the
/// simulation is repeated (3 runs, their median).
#[test]
fn benched_compute_is_timed_by_smpi() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dir = dir.path();
    compile(dir, &[], "out");
    let flat = platform(dir, "flat", &["--shape", "cluster:4"]);
    let out = perfskel(
        dir,
        &[
            "run",
            "out",
            "-np",
            "4",
            "--simgrid",
            &flat,
            "--sim-compute",
            "benched",
        ],
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    // Three simulations, then the median's line again with the wall time.
    assert_eq!(stdout.matches("perfskel-result").count(), 4, "{stdout}");
    let median = RunResult::find_in(stdout.lines().rev().nth(1).unwrap_or(""))
        .expect("the median's result line");
    // 40 ms of compute as the calibrated kernel's work, timed by SMPI on this machine.
    // Compute timed, not the 0.1 ms the communication takes alone; not the far longer
    // spans of a kernel calibrated on a clock that did not move. Benched spans carry the
    // host's load and SMPI's own timing both ways: 40 ms of work ran 0.041-0.064 s alone
    // on the machine, 0.05-0.11 s in earlier sessions, and 0.021 s beside the test suite
    // (the kernel calibrated while other tests loaded the cores, so its spans did less
    // work than they stand for), hence the loose bounds.
    assert!((0.010..0.500).contains(&median.skeleton_s), "{stdout}");
    // Without --simgrid the option is refused.
    let refused = perfskel(dir, &["run", "out", "-np", "4", "--sim-compute", "benched"]);
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("--simgrid"),
        "{}",
        text(&refused.stderr)
    );
}

/// A Rust project, a missing host file: clear errors.
#[test]
fn simgrid_runs_say_what_they_need() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dir = dir.path();
    compile(dir, &["--backend", "rust"], "rs");
    let flat = platform(dir, "flat", &["--shape", "cluster:4"]);
    let out = perfskel(dir, &["run", "rs", "-np", "4", "--simgrid", &flat]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--backend c"),
        "{}",
        text(&out.stderr)
    );
    std::fs::remove_file(dir.join("flat.hosts")).expect("remove");
    compile(dir, &[], "out");
    let out = perfskel(dir, &["run", "out", "-np", "4", "--simgrid", &flat]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--hostfile"),
        "{}",
        text(&out.stderr)
    );
}

/// Under SMPI the measuring pass leaves out the loops that hold nothing it times: the
/// two-rank skeleton's cut loop of sendrecvs, marked by `compile`, runs in the timed pass
/// only, and the simulation gives the same times as with every loop in that pass
/// (`PERFSKEL_SMPI_MEASURE=all`): deterministic, so exactly the same.
#[test]
fn the_measuring_pass_under_smpi_leaves_out_loops_it_does_not_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dir = dir.path();
    std::fs::write(dir.join("own.skel"), OWN).expect("write");
    let done = perfskel(
        dir,
        &["compile", "own.skel", "--ratio", "1:10", "-o", "out"],
    );
    assert!(done.status.success(), "{}", text(&done.stderr));
    let c = std::fs::read_to_string(dir.join("out/own.c")).expect("generated C");
    // The loop of 200 sendrecvs (20 at 1:10), not the bcast's loop the pass times.
    assert_eq!(c.matches("&& !ps_measure_skips()").count(), 1, "{c}");
    assert!(c.contains("< 20 && !ps_measure_skips();"), "{c}");
    let flat = platform(dir, "flat", &["--shape", "cluster:2"]);
    let run = |measure: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_perfskel"))
            .args(["run", "out", "-np", "2", "--simgrid", &flat])
            .current_dir(dir)
            .env("PERFSKEL_NO_CALIBRATE", "1")
            .env("PERFSKEL_SMPI_MEASURE", measure)
            .output()
            .expect("the perfskel binary runs");
        let stdout = text(&out.stdout);
        (out.status.success(), stdout, text(&out.stderr))
    };
    let (ok, stdout, stderr) = run("");
    assert!(ok, "{stdout}\n{stderr}");
    let left_out = RunResult::find_in(&stdout).expect("a result line");
    let (ok, stdout, stderr) = run("all");
    assert!(ok, "{stdout}\n{stderr}");
    let every = RunResult::find_in(&stdout).expect("a result line");
    assert!(left_out.own_s > 0.0, "{left_out:?}");
    assert_eq!(
        (
            left_out.skeleton_s,
            left_out.own_s,
            left_out.own_app_s,
            left_out.predicted_s
        ),
        (
            every.skeleton_s,
            every.own_s,
            every.own_app_s,
            every.predicted_s
        )
    );
    // Where the loop left out comes before a timed statement, the pass shows it did: rank
    // 0's eager sends end before rank 1 has received them, and with the loop in the pass
    // rank 0 waits in the timed allreduce for rank 1 to catch up.
    let skewed = "skeleton skew\nranks 2\ntopology chain\napp_time 1 s\nloop 1000 {\n    compute 1 ms\n    if rank == 0 {\n        send next 1 KiB\n    } else {\n        recv prev 1 KiB\n    }\n}\nallreduce 8 B\n";
    std::fs::write(dir.join("own.skel"), skewed).expect("write");
    let done = perfskel(
        dir,
        &[
            "compile", "own.skel", "--ratio", "1:10", "-o", "out", "--force",
        ],
    );
    assert!(done.status.success(), "{}", text(&done.stderr));
    let c = std::fs::read_to_string(dir.join("out/skew.c")).expect("generated C");
    assert_eq!(c.matches("&& !ps_measure_skips()").count(), 1, "{c}");
    let (ok, stdout, stderr) = run("");
    assert!(ok, "{stdout}\n{stderr}");
    let left_out = RunResult::find_in(&stdout).expect("a result line");
    let (ok, stdout, stderr) = run("all");
    assert!(ok, "{stdout}\n{stderr}");
    let every = RunResult::find_in(&stdout).expect("a result line");
    assert_eq!(left_out.skeleton_s, every.skeleton_s);
    assert!(
        left_out.own_s > 0.0 && left_out.own_s < every.own_s,
        "{left_out:?}\n{every:?}"
    );
    let (ok, stdout, stderr) = run("some");
    assert!(!ok, "{stdout}");
    assert!(
        stderr.contains("PERFSKEL_SMPI_MEASURE must be `timed` or `all`")
            || stdout.contains("PERFSKEL_SMPI_MEASURE must be `timed` or `all`"),
        "{stdout}\n{stderr}"
    );
}
