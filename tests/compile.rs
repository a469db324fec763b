//! `perfskel compile` and `perfskel run` with the C back end:
//! - snapshots of the generated C for every example skeleton at 1:10, 1:100 and 1:1000
//!   (`snapshots/c_mpi/<example>@<ratio>.snap`: source, scaling report, warnings, the
//!   scaled skeleton and the C file);
//! - every example compiled for 4 ranks, built with `mpicc -Wall -Wextra -Werror` and run
//!   by `perfskel run` under OpenMPI and MPICH; the other checked skeletons of the test
//!   data at their own rank counts under OpenMPI;
//! - bad input through the command line: ratios, back ends, skeletons too short to scale,
//!   output directories holding user files.

use std::path::{Path, PathBuf};

use perfskel::cmd_compile::{compile, CompileError};
use perfskel::files::render_plain;
use perfskel_compiler::back::{Backend, RunResult};
use perfskel_compiler::scale::{Model, Target};

use crate::common::{files_in, relative, root, text, MPI_LOCK, OWN, PIPE};

const RATIOS: [u64; 3] = [10, 100, 1000];

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn work_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("compile-tests")
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Runs the perfskel binary with a private cache.
fn perfskel(dir: &Path, args: &[&str]) -> std::process::Output {
    perfskel_with(dir, args, &[])
}

fn perfskel_with(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_perfskel"))
        .args(args)
        .current_dir(dir)
        .env("PERFSKEL_CACHE_DIR", work_dir().join("cache"))
        .env("PERFSKEL_NO_CALIBRATE", "1")
        .envs(env.iter().copied())
        .output()
        .expect("the perfskel binary runs")
}

#[test]
fn generated_c_of_every_example_matches_its_snapshot() {
    let examples = files_in("examples/skeletons", "skel");
    assert!(examples.len() >= 7, "examples are missing: {examples:?}");
    for path in examples {
        for ratio in RATIOS {
            c_snapshot(&path, ratio);
        }
    }
}

/// Loop variables in C: `for (long long v_step = 0; ...)` and the variable in
/// conditions, peers, roots and inner counts. At 1:10 the loop keeps one period of its
/// body's use of `step` (100 of 500 iterations); at 1:2 the 250 iterations of a plain
/// cut are 2.5 periods, rounded to 3 (300 iterations).
#[test]
fn generated_c_with_loop_variables_matches_its_snapshot() {
    let path = root().join("tests/data/dsl/ok/loop_variables.skel");
    for ratio in [2, 10] {
        c_snapshot(&path, ratio);
    }
}

/// A master answering whoever sent first: blocking receives from any rank keep their
/// status, and `source` is the rank it names (`ps_source`).
#[test]
fn generated_c_with_wildcard_replies_matches_its_snapshot() {
    c_snapshot(&root().join("tests/data/dsl/ok/wildcard_replies.skel"), 1);
}

/// `while recv`: a receive of any tag, and a `break` on another tag than the loop's.
/// At 1:10 no loop that sends point to point is cut (12 tasks for 3 workers are fewer
/// than the ten each a cut farm keeps at least): the workers' compute is.
#[test]
fn generated_c_with_a_task_farm_matches_its_snapshot() {
    c_snapshot(&root().join("tests/data/dsl/ok/task_farm.skel"), 10);
}

/// A pipeline at 1:10: its loop between `ps_fill_begin()` and `ps_fill_end()`, each
/// iteration ending in `ps_fill_iteration()`, and compute left whole.
#[test]
fn generated_c_of_a_pipeline_matches_its_snapshot() {
    c_snapshot(&root().join("tests/data/dsl/ok/pipeline.skel"), 10);
}

/// A partner exchange written as its graph at 1:1: lists longer than
/// `back::INLINE_LIST` are static arrays before `main`, one per distinct list (the
/// receives' and the sends' are the same two), not compound literals, which gcc copies
/// onto the stack at every evaluation.
#[test]
fn generated_c_of_a_partner_graph_matches_its_snapshot() {
    c_snapshot(&root().join("tests/data/dsl/ok/partner_graph.skel"), 1);
}

/// Compiles the skeleton at `path` for 1:`ratio` with the C back end and compares with
/// `snapshots/c_mpi/<stem>@<ratio>.snap`: source, report, warnings, scaled skeleton, C.
fn c_snapshot(path: &Path, ratio: u64) {
    let source = read(path);
    let name = relative(path);
    let file_name = format!("{}.skel", stem(path));
    let compiled = match compile(
        &file_name,
        &source,
        ratio,
        Some(Backend::C),
        &Model::default(),
        Target::default(),
    ) {
        Ok(c) => c,
        Err(CompileError::Diags(d)) => {
            panic!("{name} 1:{ratio}:\n{}", render_plain(&name, &source, &d))
        }
        Err(CompileError::Message(m)) => panic!("{name} 1:{ratio}: {m}"),
    };
    let c_file = compiled
        .files
        .iter()
        .find(|f| f.path.ends_with(".c"))
        .expect("a C file");
    assert!(compiled.files.iter().any(|f| f.path == "perfskel.h"));
    assert!(compiled.files.iter().any(|f| f.path == "memprobe.h"));
    assert!(compiled.files.iter().any(|f| f.path == "Makefile"));
    assert!(compiled.files.iter().any(|f| f.path == "job.slurm"));
    let warnings = render_plain(&name, &source, &compiled.diags);
    let snapshot =
        format!(
        "SOURCE ({name})\n{source}\nREPORT\n{}\n\nWARNINGS\n{}\nSCALED SKELETON\n{}\nC ({})\n{}",
        compiled.report,
        if warnings.is_empty() { "none\n" } else { &warnings },
        perfskel_grammar::print(&compiled.scaled.program),
        c_file.path,
        c_file.contents
    );
    insta::with_settings!({
        snapshot_path => "../snapshots/c_mpi",
        prepend_module_to_snapshot => false,
        omit_expression => true,
        description => format!("{name} compiled for 1:{ratio} with the C back end"),
    }, {
        insta::assert_snapshot!(format!("{}@{ratio}", stem(path)), snapshot);
    });
}

#[test]
fn build_files_match_their_snapshot() {
    let path = root().join("examples/skeletons/stencil2d.skel");
    let Ok(compiled) = compile(
        "stencil2d.skel",
        &read(&path),
        100,
        Some(Backend::C),
        &Model::default(),
        Target::AppTime,
    ) else {
        panic!("stencil2d compiles");
    };
    let mut out = String::new();
    for file in compiled
        .files
        .iter()
        .filter(|f| f.path == "Makefile" || f.path == "job.slurm")
    {
        out.push_str(&format!("==> {} <==\n{}\n", file.path, file.contents));
    }
    insta::with_settings!({
        snapshot_path => "../snapshots/c_mpi",
        prepend_module_to_snapshot => false,
        omit_expression => true,
        description => "Makefile and job.slurm of examples/skeletons/stencil2d.skel at 1:100",
    }, {
        insta::assert_snapshot!("stencil2d@100-build-files", out);
    });
}

/// The example rewritten for 4 ranks: rank counts and grid shapes in the header.
fn at_four_ranks(source: &str) -> String {
    let mut out = String::new();
    for line in source.lines() {
        let line = if line.starts_with("ranks ") {
            "ranks 4".to_string()
        } else if line.starts_with("topology ") {
            line.replace("(4, 4)", "(2, 2)")
        } else {
            line.to_string()
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// A ratio that makes the skeleton run about 30 ms.
fn short_ratio(source: &str) -> u64 {
    let (program, _) = perfskel_grammar::parse(source);
    ((program.app_time.value.seconds() / 0.03).floor() as u64).max(1)
}

/// Compiles `source` for 1:`ratio` (against `target`: `model`, the default, or
/// `app-time` for the DSL corpus, whose `app_time` is a placeholder and not what its
/// statements take) into a fresh directory, then builds and runs it with `perfskel run`
/// under `mpi` at `np` ranks; checks the result line.
fn compile_and_run(name: &str, source: &str, (ratio, target): (u64, &str), mpi: &str, np: u64) {
    let dir = work_dir().join(format!("{name}-{mpi}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("work dir");
    std::fs::write(dir.join(format!("{name}.skel")), source).expect("write skeleton");
    let ratio_arg = format!("1:{ratio}");
    let out = perfskel(
        &dir,
        &[
            "compile",
            &format!("{name}.skel"),
            "--ratio",
            &ratio_arg,
            "--backend",
            "c",
            "--target",
            target,
            "-o",
            "out",
        ],
    );
    assert!(
        out.status.success(),
        "compile {name}: {}",
        text(&out.stderr)
    );
    let report = text(&out.stderr);
    let np_arg = np.to_string();
    // Compute spans as written (the default; `PERFSKEL_MEMORY=on` would scale them by a
    // `memory` line's probe: see `the_memory_line_scales_compute_by_the_probes_rates`).
    let out = {
        let _guard = MPI_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        perfskel_with(
            &dir,
            &["run", "out", "-np", &np_arg, "--mpi", mpi, "--repeat", "1"],
            &[("PERFSKEL_MEMORY", "off")],
        )
    };
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "run {name} under {mpi}: {stdout}\n{}",
        text(&out.stderr)
    );
    let result = RunResult::find_in(&stdout)
        .unwrap_or_else(|| panic!("{name} under {mpi} printed no result line: {stdout}"));
    let (program, _) = perfskel_grammar::parse(source);
    assert_eq!(result.skeleton, program.name.value.name);
    assert_eq!(result.backend, "c");
    assert_eq!(result.ranks, np);
    assert_eq!(result.ratio, ratio);
    let app_time = program.app_time.value.seconds();
    assert!((result.app_time_s - app_time).abs() < 1e-6, "{result:?}");
    // The prediction is the time times the ratio reached, which compile reported.
    let reached: f64 = report
        .split("ratio reached 1:")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .and_then(|r| r.parse().ok())
        .expect("the report gives the ratio reached");
    assert!(
        (result.reached - reached).abs() <= 0.051 * reached,
        "{result:?}: compile reported 1:{reached}"
    );
    // Where the measuring pass timed communication that loops cut less than K, that
    // counts by its own ratios, a pipeline's fill once, and the rest by the rest ratio.
    let split = result.rest * (result.skeleton_s - result.own_s - result.fill_s)
        + result.own_app_s
        + result.fill_s;
    assert!(
        (result.predicted_s - split).abs() <= 1e-4 * result.rest,
        "{result:?}"
    );
    assert!(result.own_s <= result.skeleton_s, "{result:?}");
    // Above 1:1 the program ran once untimed first (`ps_pass`).
    assert_eq!(result.warmup_s > 0.0, ratio > 1, "{result:?}");
    // Compute spans run for their whole time, so the skeleton cannot be much faster
    // than the model expects; it can be slower on a loaded machine.
    let expected = report
        .split("expected skeleton time ")
        .nth(1)
        .and_then(|rest| rest.split(" (").next())
        .expect("the report gives the expected time");
    let expected_s = parse_seconds(expected);
    assert!(
        result.skeleton_s >= 0.6 * expected_s,
        "{name} under {mpi}: ran {} s, the model expects {expected}",
        result.skeleton_s
    );
    assert!(stdout.contains("predicted application time"), "{stdout}");
}

/// Reads "120.030 ms", "1.200 s" or "500.0 us".
fn parse_seconds(text: &str) -> f64 {
    let (value, unit) = text.split_once(' ').expect("value and unit");
    let value: f64 = value.parse().expect("a number");
    match unit {
        "s" => value,
        "ms" => value * 1e-3,
        "us" => value * 1e-6,
        other => panic!("unit {other}"),
    }
}

#[test]
fn every_example_runs_at_four_ranks_under_openmpi_and_mpich() {
    for path in files_in("examples/skeletons", "skel") {
        let source = at_four_ranks(&read(&path));
        let ratio = short_ratio(&source);
        for mpi in ["openmpi", "mpich"] {
            compile_and_run(&stem(&path), &source, (ratio, "model"), mpi, 4);
        }
    }
}

#[test]
fn other_topologies_and_every_construct_run_under_openmpi() {
    let mut files = files_in("tests/data/dsl/ok", "skel");
    files.push(root().join("grammar/every_construct.skel"));
    for path in files {
        let source = read(&path);
        let (program, _) = perfskel_grammar::parse(&source);
        // Without compute nothing stretches to a placeholder app_time: such a file runs
        // at 1:1 (at 1:33 it would reach 1:100000 or more, which compile refuses).
        let ratio = if source.contains("compute") {
            short_ratio(&source)
        } else {
            1
        };
        compile_and_run(
            &stem(&path),
            &source,
            (ratio, "app-time"),
            "openmpi",
            program.ranks.value,
        );
    }
}

/// The loop-variable skeleton under MPICH too (`other_topologies_and_every_construct_run_
/// under_openmpi` runs it under OpenMPI): every rank takes the same iterations' branches,
/// and the rotating partner and roots agree across ranks, or the run would hang.
#[test]
fn loop_variables_run_under_mpich() {
    let source = read(&root().join("tests/data/dsl/ok/loop_variables.skel"));
    compile_and_run(
        "loop_variables",
        &source,
        (short_ratio(&source), "app-time"),
        "mpich",
        4,
    );
}

/// Windows of requests under MPICH too: a rank runs rounds ahead of its partners with
/// sends and receives in flight, completes the oldest past the window and the rest
/// after the phase (a request lost or completed twice would fail the run).
#[test]
fn request_windows_run_under_mpich() {
    let source = read(&root().join("tests/data/dsl/ok/request_windows.skel"));
    compile_and_run(
        "request_windows",
        &source,
        (short_ratio(&source), "app-time"),
        "mpich",
        4,
    );
}

/// Answers to whoever sent first under MPICH too (`other_topologies_and_every_construct_
/// run_under_openmpi` runs it under OpenMPI): each answer goes to the rank the last
/// receive from any rank got its message from, or a worker would wait forever.
#[test]
fn wildcard_replies_run_under_mpich() {
    let source = read(&root().join("tests/data/dsl/ok/wildcard_replies.skel"));
    compile_and_run(
        "wildcard_replies",
        &source,
        (short_ratio(&source), "app-time"),
        "mpich",
        4,
    );
}

/// A task farm under MPICH too: each worker takes tasks while they come and stops at
/// the message with another tag, or the run would hang.
#[test]
fn task_farm_runs_under_mpich() {
    let source = read(&root().join("tests/data/dsl/ok/task_farm.skel"));
    compile_and_run(
        "task_farm",
        &source,
        (short_ratio(&source), "app-time"),
        "mpich",
        4,
    );
}

const SHORT: &str =
    "skeleton short\nranks 2\ntopology ring\napp_time 1 ms\nloop 10 {\n    compute 100 us\n}\n";
const TINY: &str = "skeleton tiny\nranks 2\ntopology ring\napp_time 1 s\nloop 10 {\n    compute 100 ms\n    sendrecv to next 1 KiB from prev 1 KiB\n}\n";

fn scratch(name: &str) -> PathBuf {
    let dir = work_dir().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    std::fs::write(dir.join("short.skel"), SHORT).expect("write");
    std::fs::write(dir.join("tiny.skel"), TINY).expect("write");
    dir
}

fn fails_with(dir: &Path, args: &[&str], message: &str) {
    let out = perfskel(dir, args);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded: {stderr}");
    assert!(
        stderr.contains(message),
        "{args:?}: expected `{message}` in:\n{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn bad_ratios_and_back_ends_are_refused() {
    let dir = scratch("bad-args");
    let compile =
        |ratio: &str| ["compile", "tiny.skel", "--ratio", ratio, "-o", "out"].map(String::from);
    for (ratio, message) in [
        ("1:0", "K must be at least 1"),
        ("1:0.5", "below 1"),
        ("0", "not a ratio"),
        ("1:ten", "whole number"),
        ("3:100", "must be 1:K"),
        ("1:2.5", "whole number"),
    ] {
        let args = compile(ratio);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        fails_with(&dir, &args, message);
    }
    fails_with(
        &dir,
        &[
            "compile",
            "tiny.skel",
            "--ratio",
            "1:10",
            "--backend",
            "fortran",
            "-o",
            "out",
        ],
        "unknown back end `fortran`",
    );
    fails_with(
        &dir,
        &["compile", "short.skel", "--ratio", "1:1000", "-o", "out"],
        "error[too-short-to-scale]: at 1:1000 the skeleton would run 1.0 us",
    );
    fails_with(
        &dir,
        &["compile", "missing.skel", "--ratio", "1:10", "-o", "out"],
        "cannot read missing.skel",
    );
    std::fs::write(
        dir.join("broken.skel"),
        "skeleton b\nranks 2\ntopology ring\napp_time 1 s\nsend next 1 KiB\n",
    )
    .expect("write");
    fails_with(
        &dir,
        &["compile", "broken.skel", "--ratio", "1:10", "-o", "out"],
        "error[",
    );
    assert!(
        !dir.join("out").exists(),
        "nothing is written for bad input"
    );
    fails_with(&dir, &["run", "nowhere", "-np", "2"], "has no Makefile");
}

#[test]
fn output_directories_with_user_files_are_refused_without_force() {
    let dir = scratch("user-files");
    let out_dir = dir.join("out");
    std::fs::create_dir_all(&out_dir).expect("mkdir");
    std::fs::write(out_dir.join("notes.txt"), "mine").expect("write");
    fails_with(
        &dir,
        &["compile", "tiny.skel", "--ratio", "1:10", "-o", "out"],
        "holds files perfskel did not write (notes.txt)",
    );
    assert!(!out_dir.join("tiny.c").exists());
    let ok = perfskel(
        &dir,
        &[
            "compile",
            "tiny.skel",
            "--ratio",
            "1:10",
            "-o",
            "out",
            "--force",
        ],
    );
    assert!(ok.status.success(), "{}", text(&ok.stderr));
    assert_eq!(read(&out_dir.join("notes.txt")), "mine");
    assert!(out_dir.join("tiny.c").is_file());
    // Writing again over what perfskel wrote needs no --force, even after a build.
    std::fs::remove_file(out_dir.join("notes.txt")).expect("rm");
    std::fs::write(out_dir.join("skeleton"), "a build product").expect("write");
    let again = perfskel(
        &dir,
        &["compile", "tiny.skel", "--ratio", "1:100", "-o", "out"],
    );
    assert!(again.status.success(), "{}", text(&again.stderr));
    // Another skeleton into the same directory replaces the files of the first one.
    std::fs::write(
        dir.join("other.skel"),
        TINY.replace("skeleton tiny", "skeleton other"),
    )
    .expect("write");
    let other = perfskel(
        &dir,
        &["compile", "other.skel", "--ratio", "1:10", "-o", "out"],
    );
    assert!(other.status.success(), "{}", text(&other.stderr));
    assert!(out_dir.join("other.c").is_file());
    assert!(
        !out_dir.join("tiny.c").exists(),
        "the stale generated file is removed"
    );
    assert!(
        out_dir.join("skeleton").is_file(),
        "build products are left alone"
    );
}

/// A generated file edited by hand is recognised by its content (the manifest keeps each
/// file's hash): compiling over it again is refused without `--force`, another skeleton
/// compiled there leaves it in place, and no file is written through a symbolic link.
#[test]
fn hand_edited_output_is_never_overwritten_without_force() {
    let dir = scratch("hand-edits");
    let out_dir = dir.join("out");
    let compile = |file: &str, force: bool| {
        let mut args = vec!["compile", file, "--ratio", "1:10", "-o", "out"];
        if force {
            args.push("--force");
        }
        perfskel(&dir, &args)
    };
    let first = compile("tiny.skel", false);
    assert!(first.status.success(), "{}", text(&first.stderr));
    let edited = read(&out_dir.join("tiny.c")).replace("int main", "/* tuned */ int main");
    std::fs::write(out_dir.join("tiny.c"), &edited).expect("edit");
    fails_with(
        &dir,
        &["compile", "tiny.skel", "--ratio", "1:10", "-o", "out"],
        "tiny.c changed since perfskel wrote it",
    );
    assert_eq!(
        read(&out_dir.join("tiny.c")),
        edited,
        "refused: the edit stays"
    );
    // Another skeleton into the same directory: the edited file is not removed.
    std::fs::write(
        dir.join("other.skel"),
        TINY.replace("skeleton tiny", "skeleton other"),
    )
    .expect("write");
    fails_with(
        &dir,
        &["compile", "other.skel", "--ratio", "1:10", "-o", "out"],
        "changed since perfskel wrote",
    );
    let other = compile("other.skel", true);
    assert!(other.status.success(), "{}", text(&other.stderr));
    assert_eq!(
        read(&out_dir.join("tiny.c")),
        edited,
        "an edited file is never removed"
    );
    assert!(out_dir.join("other.c").is_file());
    // With --force an edited file of the skeleton compiled is overwritten.
    let forced = compile("tiny.skel", true);
    assert!(forced.status.success(), "{}", text(&forced.stderr));
    assert!(!read(&out_dir.join("tiny.c")).contains("tuned"));

    // A link in the output directory is replaced, not written through.
    let outside = dir.join("outside.txt");
    std::fs::write(&outside, "not perfskel's").expect("write");
    std::fs::remove_file(out_dir.join("Makefile")).expect("rm");
    std::os::unix::fs::symlink(&outside, out_dir.join("Makefile")).expect("symlink");
    let through = compile("tiny.skel", true);
    assert!(through.status.success(), "{}", text(&through.stderr));
    assert_eq!(read(&outside), "not perfskel's");
    assert!(!std::fs::symlink_metadata(out_dir.join("Makefile"))
        .expect("Makefile")
        .file_type()
        .is_symlink());
    // The output directory itself may not be a link.
    std::os::unix::fs::symlink(&out_dir, dir.join("linked")).expect("symlink");
    fails_with(
        &dir,
        &[
            "compile",
            "tiny.skel",
            "--ratio",
            "1:10",
            "-o",
            "linked",
            "--force",
        ],
        "is a symbolic link",
    );
}

#[test]
fn emit_skel_prints_a_scaled_skeleton_that_checks() {
    let dir = scratch("emit-skel");
    let out = perfskel(
        &dir,
        &["compile", "tiny.skel", "--ratio", "1:10", "--emit", "skel"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let scaled = text(&out.stdout);
    assert!(scaled.contains("loop 1 {"), "{scaled}");
    assert!(scaled.contains("app_time 100 ms"), "{scaled}");
    let diags =
        perfskel::cmd_check::check_source(&scaled, perfskel_compiler::check::Options::default());
    assert!(diags.is_empty(), "{diags:?}");
    assert!(text(&out.stderr).contains("ratio reached 1:10.0"));
    assert!(!dir.join("out").exists());
}

/// 200 ms of compute, traced where a 1 MiB probe ran at 1 GB/s: any machine sweeps 1 MiB
/// far faster, so with `PERFSKEL_MEMORY=on` the spans shrink by that ratio; by default
/// and with `off` they run as written.
const MEMORY: &str = "skeleton probed\nranks 2\ntopology ring\napp_time 200 ms\nmemory 1024 KiB at 1 GB/s\nloop 10 {\n    compute 20 ms\n}\n";

#[test]
fn the_memory_line_scales_compute_by_the_probes_rates() {
    let dir = scratch("memory");
    std::fs::write(dir.join("memory.skel"), MEMORY).expect("write");
    let out = perfskel(
        &dir,
        &["compile", "memory.skel", "--ratio", "1:1", "-o", "out"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let c = std::fs::read_to_string(dir.join("out/probed.c")).expect("generated C");
    assert!(
        c.contains("ps_memory(1048576, 1000000000.0); /* memory 1024 KiB at 1 GB/s */"),
        "{c}"
    );
    let run = |memory: &str| {
        let out = {
            let _guard = MPI_LOCK.lock().unwrap_or_else(|e| e.into_inner());
            perfskel_with(
                &dir,
                &["run", "out", "-np", "2", "--repeat", "1"],
                &[("PERFSKEL_MEMORY", memory)],
            )
        };
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
        let result = RunResult::find_in(&stdout).expect("result line");
        (result.skeleton_s, text(&out.stderr))
    };
    // Off by default.
    let (as_written, quiet) = run("");
    assert!(as_written >= 0.19, "{as_written} s for 200 ms of compute");
    assert!(!quiet.contains("memory probe"), "{quiet}");
    let (as_written, quiet) = run("off");
    assert!(as_written >= 0.19, "{as_written} s for 200 ms of compute");
    assert!(!quiet.contains("memory probe"), "{quiet}");
    let (scaled, said) = run("on");
    assert!(
        scaled < 0.5 * as_written,
        "{scaled} s with the memory line, {as_written} s without"
    );
    assert!(
        said.contains("memory probe over 1.0 MiB") && said.contains("1.00 GB/s where traced"),
        "{said}"
    );
}

/// `run` repeats the program (3 runs by default, more while they spread over 10 %, and
/// 10 for a skeleton whose median run is under a second) and predicts from the median
/// run, with the spread; a skeleton too short to time reliably is a warning; `--repeat
/// N` runs it N times.
#[test]
fn run_repeats_and_predicts_from_the_median_run() {
    let dir = scratch("repeat");
    // 4 ms: under the 50 ms `run` warns below even on a loaded machine (a 20 ms one ran
    // over 50 ms beside a build).
    let source = "skeleton short\nranks 2\ntopology ring\napp_time 4 ms\nloop 4 {\n    compute 1 ms\n    sendrecv to next 1 KiB from prev 1 KiB\n}\n";
    std::fs::write(dir.join("short.skel"), source).expect("write");
    let compiled = perfskel(
        &dir,
        &["compile", "short.skel", "--ratio", "1:1", "-o", "out"],
    );
    assert!(compiled.status.success(), "{}", text(&compiled.stderr));
    let ran = {
        let _guard = MPI_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        perfskel(&dir, &["run", "out", "-np", "2"])
    };
    let (stdout, stderr) = (text(&ran.stdout), text(&ran.stderr));
    assert!(ran.status.success(), "{stdout}\n{stderr}");
    let lines: Vec<RunResult> = stdout.lines().filter_map(RunResult::parse).collect();
    // Each run's line, then the median run's.
    let runs = lines.len() - 1;
    // A 4 ms skeleton: ten runs.
    assert_eq!(runs, 10, "{stdout}");
    let mut times: Vec<f64> = lines[..runs].iter().map(|r| r.skeleton_s).collect();
    times.sort_by(f64::total_cmp);
    let last = RunResult::find_in(&stdout).expect("a result line");
    assert_eq!(last.skeleton_s, times[(runs - 1) / 2], "{stdout}");
    assert!(
        stdout.contains(&format!("median of {runs} runs")) && stdout.contains("spread"),
        "{stdout}"
    );
    assert!(stderr.contains("too short to time reliably"), "{stderr}");
    let once = {
        let _guard = MPI_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        perfskel(&dir, &["run", "out", "-np", "2", "--repeat", "1"])
    };
    let stdout = text(&once.stdout);
    assert_eq!(
        stdout.lines().filter_map(RunResult::parse).count(),
        1,
        "{stdout}"
    );
    assert!(stdout.contains("(1 run)"), "{stdout}");
    fails_with(
        &dir,
        &["run", "out", "-np", "2", "--repeat", "0"],
        "--repeat must be at least 1",
    );
}

/// A short skeleton run beside other work (two threads of this test spinning on this
/// machine's cores) is a warning that names a ratio that runs a second.
#[test]
fn run_says_when_other_work_shared_the_machine() {
    let dir = scratch("other-work");
    let source = "skeleton beside\nranks 2\ntopology ring\napp_time 2 s\nloop 100 {\n    compute 20 ms\n    sendrecv to next 1 KiB from prev 1 KiB\n}\n";
    std::fs::write(dir.join("beside.skel"), source).expect("write");
    let compiled = perfskel(
        &dir,
        &["compile", "beside.skel", "--ratio", "1:10", "-o", "out"],
    );
    assert!(compiled.status.success(), "{}", text(&compiled.stderr));
    let ran = {
        let _guard = MPI_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let spinners: Vec<_> = (0..2)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 1.0f64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        x = std::hint::black_box(x * 1.000_000_1 + 1e-9);
                    }
                })
            })
            .collect();
        let ran = perfskel(&dir, &["run", "out", "-np", "2", "--repeat", "3"]);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for s in spinners {
            s.join().expect("a spinner");
        }
        ran
    };
    let (stdout, stderr) = (text(&ran.stdout), text(&ran.stderr));
    assert!(ran.status.success(), "{stdout}\n{stderr}");
    assert!(stderr.contains("other work used"), "{stderr}");
    assert!(stderr.contains("1:2 or a smaller ratio"), "{stderr}");
}

/// Two ranks, 100 ms of compute and communication on a communicator of its own.
const WARM: &str = "skeleton warm\nranks 2\ntopology ring\napp_time 1 s\ncomm pair = dup(world)\nloop 10 {\n    compute 10 ms\n    allreduce 1 MiB on pair\n    compute normal(1 ms, 100 us)\n}\n";

/// The warm-up pass: above 1:1 the program runs once without compute and untimed, then
/// the timed pass; `PERFSKEL_WARMUP` overrides; the timed pass is the same either way.
#[test]
fn the_warm_up_pass_runs_the_program_once_without_compute() {
    let dir = scratch("warm-up");
    std::fs::write(dir.join("warm.skel"), WARM).expect("write");
    for (ratio, out) in [("1:1", "one"), ("1:2", "two")] {
        let compiled = perfskel(&dir, &["compile", "warm.skel", "--ratio", ratio, "-o", out]);
        assert!(compiled.status.success(), "{}", text(&compiled.stderr));
    }
    let c = std::fs::read_to_string(dir.join("two/warm.c")).expect("generated C");
    // The communicator is made once, before the passes.
    let made = c.find("MPI_Comm_dup(world, &pair);").expect("the dup");
    let passes = c.find("while (ps_pass(2ULL, 0)) {").expect("the passes");
    assert!(made < passes, "{c}");
    let run = |out: &str, warmup: &str| {
        let _guard = MPI_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        perfskel_with(
            &dir,
            &["run", out, "-np", "2", "--repeat", "1"],
            &[("PERFSKEL_WARMUP", warmup)],
        )
    };
    let result = |out: &str, warmup: &str| {
        let output = run(out, warmup);
        let stdout = text(&output.stdout);
        assert!(
            output.status.success(),
            "{stdout}\n{}",
            text(&output.stderr)
        );
        RunResult::find_in(&stdout).expect("a result line")
    };
    let one = result("one", "");
    assert_eq!(one.warmup_s, 0.0, "{one:?}");
    assert!(one.skeleton_s >= 0.09, "{one:?}: 100 ms of compute");
    let two = result("two", "");
    // The warm-up pass has no compute: only the messages of 5 allreduces.
    assert!(
        two.warmup_s > 0.0 && two.warmup_s < 0.5 * two.skeleton_s,
        "{two:?}"
    );
    assert!(two.skeleton_s >= 0.045, "{two:?}: 50 ms of compute");
    assert_eq!(result("two", "off").warmup_s, 0.0);
    assert!(result("one", "on").warmup_s > 0.0);
    let bad = run("two", "yes");
    assert!(!bad.status.success());
    assert!(
        text(&bad.stderr).contains("PERFSKEL_WARMUP must be `on` or `off`"),
        "{}",
        text(&bad.stderr)
    );
}

/// Communication that loops cut less than K is timed in a measuring pass without
/// compute and multiplied by its own ratio, the rest by the rest ratio, under both
/// MPIs; `PERFSKEL_WARMUP=off` leaves the pass out, and the prediction is the time x
/// the ratio reached.
#[test]
fn communication_loops_cut_less_than_k_is_measured_and_counted_by_its_own_ratio() {
    let dir = scratch("own-ratio");
    std::fs::write(dir.join("own.skel"), OWN).expect("write");
    let compiled = perfskel(
        &dir,
        &["compile", "own.skel", "--ratio", "1:10", "-o", "out"],
    );
    assert!(compiled.status.success(), "{}", text(&compiled.stderr));
    let c = std::fs::read_to_string(dir.join("out/own.c")).expect("generated C");
    assert!(c.contains("while (ps_pass(10ULL, 1)) {"), "{c}");
    assert_eq!(c.matches("ps_own_begin();").count(), 2, "{c}");
    assert!(
        c.contains("ps_own_end(1.0);") && c.contains("ps_own_end(3.0);"),
        "{c}"
    );
    for mpi in ["openmpi", "mpich"] {
        let run = |warmup: &str| {
            let output = {
                let _guard = MPI_LOCK.lock().unwrap_or_else(|e| e.into_inner());
                perfskel_with(
                    &dir,
                    &["run", "out", "-np", "2", "--mpi", mpi, "--repeat", "1"],
                    &[("PERFSKEL_WARMUP", warmup)],
                )
            };
            let stdout = text(&output.stdout);
            assert!(
                output.status.success(),
                "{mpi}: {stdout}\n{}",
                text(&output.stderr)
            );
            (RunResult::find_in(&stdout).expect("a result line"), stdout)
        };
        let (r, stdout) = run("");
        assert!(r.own_s > 0.0 && r.own_s < r.skeleton_s, "{mpi}: {r:?}");
        // The bcast's time counts three times, the allreduce's once.
        assert!(
            r.own_app_s > r.own_s && r.own_app_s < 3.0 * r.own_s + 1e-6,
            "{mpi}: {r:?}"
        );
        assert!(r.rest > r.reached, "{mpi}: {r:?}");
        let split = r.rest * (r.skeleton_s - r.own_s) + r.own_app_s;
        assert!(
            (r.predicted_s - split).abs() < 1e-4 * r.rest,
            "{mpi}: {r:?}"
        );
        assert!(
            stdout.contains("communication that loops cut less than 1:10"),
            "{mpi}: {stdout}"
        );
        let (off, _) = run("off");
        assert_eq!(
            (off.own_s, off.own_app_s, off.rest),
            (0.0, 0.0, off.reached)
        );
        assert!(
            (off.predicted_s - off.skeleton_s * off.reached).abs() < 1e-4 * off.reached,
            "{mpi}: {off:?}"
        );
    }
}

/// A pipeline's loop is timed for its fill: its first iteration's excess over the
/// others' counts once, the rest of the time by the ratio, under both MPIs.
#[test]
fn a_pipeline_s_fill_is_measured_and_counted_once() {
    let dir = scratch("pipeline-fill");
    std::fs::write(dir.join("pipe.skel"), PIPE).expect("write");
    let compiled = perfskel(
        &dir,
        &["compile", "pipe.skel", "--ratio", "1:10", "-o", "out"],
    );
    let stderr = text(&compiled.stderr);
    assert!(compiled.status.success(), "{stderr}");
    assert!(
        stderr.contains("1 loop(s) fill like a pipeline"),
        "{stderr}"
    );
    assert!(stderr.contains("compute x1.0000"), "{stderr}");
    let c = std::fs::read_to_string(dir.join("out/pipe.c")).expect("generated C");
    for call in ["ps_fill_begin();", "ps_fill_iteration();", "ps_fill_end();"] {
        assert_eq!(c.matches(call).count(), 1, "{call}: {c}");
    }
    for mpi in ["openmpi", "mpich"] {
        let output = {
            let _guard = MPI_LOCK.lock().unwrap_or_else(|e| e.into_inner());
            perfskel(
                &dir,
                &["run", "out", "-np", "2", "--mpi", mpi, "--repeat", "1"],
            )
        };
        let stdout = text(&output.stdout);
        assert!(
            output.status.success(),
            "{mpi}: {stdout}\n{}",
            text(&output.stderr)
        );
        let r = RunResult::find_in(&stdout).expect("a result line");
        // Rank 1 waited for rank 0's first block: about a stage of 1 ms, where each rank
        // had a core (20 stages and the fill, 21 ms; a run slowed past 1.5 times that
        // shared a core with other work, and the fill may vanish in the others' wait).
        assert!(
            r.fill_s >= 0.0 && r.fill_s < 0.5 * r.skeleton_s,
            "{mpi}: {r:?}"
        );
        assert!(r.fill_s > 0.0 || r.skeleton_s > 0.032, "{mpi}: {r:?}");
        let split = r.rest * (r.skeleton_s - r.fill_s) + r.fill_s;
        assert!(
            (r.predicted_s - split).abs() < 1e-4 * r.rest,
            "{mpi}: {r:?}"
        );
        assert!(stdout.contains("a pipeline's fill"), "{mpi}: {stdout}");
    }
}

#[test]
fn a_skeleton_refuses_the_wrong_rank_count() {
    let dir = scratch("wrong-np");
    let out = perfskel(
        &dir,
        &["compile", "tiny.skel", "--ratio", "1:10", "-o", "out"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let run = {
        let _guard = MPI_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        perfskel(&dir, &["run", "out", "-np", "3"])
    };
    assert!(!run.status.success());
    let all = format!("{}{}", text(&run.stdout), text(&run.stderr));
    assert!(
        all.contains("this skeleton runs on 2 ranks, not 3"),
        "{all}"
    );
}

#[test]
fn rank_counts_beyond_the_simulations_are_refused_not_attempted() {
    // A declared rank count far beyond memory: `check` skips its simulation with a
    // warning, and `compile` refuses with an error at the rank count instead of
    // allocating state for every rank.
    let dir = scratch("huge-ranks");
    let source = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/dsl/fuzz/graph-huge-rank-count.skel"),
    )
    .expect("fuzz input");
    std::fs::write(dir.join("huge.skel"), source).expect("write");
    for ratio in ["1:1", "1:10"] {
        fails_with(
            &dir,
            &["compile", "huge.skel", "--ratio", ratio, "-o", "out"],
            "error[cannot-simulate]: scaling simulates every rank's time: 99999999999 ranks are more than it handles (65536)",
        );
    }
}

/// With no model of this machine cached, `compile` measures one (the ping-pong of
/// `perfskel calibrate`, under Open MPI) and caches it keyed by host, processor, MPI
/// version and perfskel (on a busy machine it is used but not kept); the next compile
/// uses a cached one; a cached model measured elsewhere is never used (it is measured
/// again); `--no-calibrate` keeps the built-in defaults.
#[test]
fn the_model_is_measured_on_first_use_and_never_used_stale() {
    let dir = scratch("first-use");
    let cache = dir.join("cache");
    let cache_text = cache.to_str().expect("utf-8").to_string();
    let perfskel_here = |args: &[&str]| {
        let _guard = MPI_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_perfskel"))
            .args(args)
            .current_dir(&dir)
            .env("PERFSKEL_CACHE_DIR", &cache_text)
            .env_remove("PERFSKEL_NO_CALIBRATE")
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .output()
            .expect("the perfskel binary runs");
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        text(&out.stderr)
    };
    let compile = |extra: &[&str]| {
        let mut args = vec!["compile", "tiny.skel", "--ratio", "1:10", "--emit", "skel"];
        args.extend_from_slice(extra);
        perfskel_here(&args)
    };
    // One file per host and MPI (hosts sharing a home directory keep one each).
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname");
    let model_file = cache
        .join("models")
        .join(format!("{}-openmpi.json", host.trim()));
    // First use: measured now, and cached unless the machine is busy (tests run in
    // parallel), where the model is used once and said to be.
    let first = compile(&[]);
    assert!(
        first.contains("measuring this machine with openmpi once"),
        "{first}"
    );
    if first.contains("on a busy machine") {
        assert!(first.contains("not cached"), "{first}");
        assert!(!model_file.exists());
    } else {
        assert!(first.contains("(measured now)"), "{first}");
        assert!(model_file.exists());
    }
    // `perfskel calibrate` always keeps what it measured, with the key and the fit.
    perfskel_here(&["calibrate"]);
    let saved = std::fs::read_to_string(&model_file).expect("the model is cached");
    let json: serde_json::Value = serde_json::from_str(&saved).expect("json");
    assert_eq!(json["fit"]["eager_measured"], true, "{saved}");
    assert!(
        json["fit"]["r_squared"]
            .as_f64()
            .is_some_and(|r| r > 0.5 && r <= 1.0),
        "{saved}"
    );
    let eager = json["eager_limit_bytes"].as_u64().expect("eager limit");
    assert!(eager <= 1 << 20, "{saved}");
    let key = json["measured_on"].as_str().expect("a key").to_string();
    assert!(key.contains("perfskel "), "{key}");
    assert!(
        json["latency_s"]
            .as_f64()
            .is_some_and(|l| l > 0.0 && l < 1e-3),
        "{saved}"
    );
    let second = compile(&[]);
    assert!(!second.contains("measuring"), "{second}");
    assert!(second.contains("-openmpi.json)"), "{second}");
    // A model of another machine is not used, and is measured again.
    std::fs::write(&model_file, saved.replace(&key, "another host; x 64")).expect("write");
    let stale = compile(&[]);
    assert!(
        stale.contains("was measured on another host; x 64") && stale.contains("not used"),
        "{stale}"
    );
    assert!(stale.contains("measuring this machine"), "{stale}");
    std::fs::remove_file(&model_file).expect("remove");
    let plain = compile(&["--no-calibrate"]);
    assert!(plain.contains("built-in defaults"), "{plain}");
    assert!(!model_file.exists());
}

/// A 4-rank skeleton of 8 s at 1:100 runs about 80 ms: enough with a core for each rank
/// (no warning), too short where its ranks share 2 cores (at least 100 ms, 1:80 named).
#[test]
fn ranks_sharing_cores_need_a_longer_run_to_time() {
    let source = "skeleton shared\nranks 4\ntopology ring\napp_time 8 s\nloop 1000 {\n    compute 8 ms\n    sendrecv to next 8 B from prev 8 B\n}\n";
    let compiled = || match compile(
        "shared.skel",
        source,
        100,
        None,
        &Model::default(),
        Target::default(),
    ) {
        Ok(c) => c,
        Err(CompileError::Diags(d)) => panic!("{}", render_plain("shared.skel", source, &d)),
        Err(CompileError::Message(m)) => panic!("{m}"),
    };
    let short = |c: &perfskel::cmd_compile::Compiled| {
        let warnings: Vec<_> = c
            .diags
            .iter()
            .filter(|d| d.code == "too-short-to-time")
            .cloned()
            .collect();
        render_plain("shared.skel", source, &warnings)
    };
    let mut own_cores = compiled();
    perfskel::cmd_compile::weigh_shared_cores(&mut own_cores, 100, 4);
    assert!(
        !short(&own_cores).contains("too-short-to-time"),
        "{}",
        short(&own_cores)
    );
    let mut shared = compiled();
    perfskel::cmd_compile::weigh_shared_cores(&mut shared, 100, 2);
    let text = short(&shared);
    assert!(text.contains("at least 100.000 ms"), "{text}");
    assert!(text.contains("1:80 or a smaller ratio"), "{text}");
    assert!(
        text.contains("4 ranks share this machine's 2 cores"),
        "{text}"
    );
}

/// The job script's requests come from `compile`'s flags, the same for both back ends;
/// a value that is no Slurm name or time is refused before anything is written.
#[test]
fn the_job_script_asks_for_what_the_user_gives() {
    let dir = tempfile::tempdir().expect("tempdir");
    let skel = root().join("examples/skeletons/stencil2d.skel");
    let skel = skel.to_str().expect("utf-8");
    let mut scripts = Vec::new();
    for backend in ["c", "rust"] {
        let out = dir.path().join(backend);
        let run = perfskel(
            dir.path(),
            &[
                "compile",
                skel,
                "--ratio",
                "1:1000",
                "--backend",
                backend,
                "-o",
                out.to_str().expect("utf-8"),
                "--partition",
                "debug",
                "--account",
                "proj-1",
                "--time",
                "1-00:30:00",
                "--exclusive",
                "--srun-mpi",
                "pmix",
                "--job-runs",
                "5",
            ],
        );
        assert!(run.status.success(), "{}", text(&run.stderr));
        let job = std::fs::read_to_string(out.join("job.slurm")).expect("job.slurm");
        for line in [
            "#SBATCH --ntasks=16\n",
            "#SBATCH --time=1-00:30:00\n",
            "#SBATCH --partition=debug\n",
            "#SBATCH --account=proj-1\n",
            "#SBATCH --exclusive\n",
            "runs=${PERFSKEL_RUNS:-5}\n",
            "    srun --mpi=pmix ./skeleton\n",
        ] {
            assert!(job.contains(line), "{line:?} in\n{job}");
        }
        scripts.push(
            job.replace("C-MPI back end", "")
                .replace("Rust back end", ""),
        );
    }
    assert_eq!(scripts[0], scripts[1], "one policy for both back ends");
    // By default: no partition or account, the site's plugin, three runs.
    let out = dir.path().join("default");
    let run = perfskel(
        dir.path(),
        &[
            "compile",
            skel,
            "--ratio",
            "1:1000",
            "-o",
            out.to_str().expect("utf-8"),
        ],
    );
    assert!(run.status.success(), "{}", text(&run.stderr));
    let job = std::fs::read_to_string(out.join("job.slurm")).expect("job.slurm");
    assert!(
        !job.contains("--partition") && !job.contains("--exclusive"),
        "{job}"
    );
    assert!(
        job.contains("runs=${PERFSKEL_RUNS:-3}\n") && job.contains("    srun ./skeleton\n"),
        "{job}"
    );
    for (flag, value, says) in [
        ("--partition", "a;rm -rf ~", "a Slurm name is letters"),
        ("--account", "", "a Slurm name is letters"),
        ("--time", "1:2:3:4", "is not a Slurm time"),
        ("--time", "soon", "is not a Slurm time"),
        ("--job-runs", "0", "give 1 to 1000"),
    ] {
        let out = dir.path().join("refused");
        let run = perfskel(
            dir.path(),
            &[
                "compile",
                skel,
                "--ratio",
                "1:1000",
                "-o",
                out.to_str().expect("utf-8"),
                flag,
                value,
            ],
        );
        assert_eq!(
            run.status.code(),
            Some(2),
            "{flag} {value}: {}",
            text(&run.stderr)
        );
        assert!(
            text(&run.stderr).contains(says),
            "{flag} {value}: {}",
            text(&run.stderr)
        );
        assert!(!out.exists(), "nothing written for {flag} {value}");
    }
}

/// The job script runs under Slurm as written: on the local single-node Slurm that
/// scripts/setup.sh starts, `sbatch --wait` of a 2-rank skeleton built with `make`
/// (Open MPI, srun's PMIx plugin) gives one perfskel-result line per run.
#[test]
fn the_job_script_runs_under_slurm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let skel = dir.path().join("pair.skel");
    std::fs::write(
        &skel,
        "skeleton pair\nranks 2\ntopology ring\napp_time 2 s\nloop 100 {\n    compute 10 ms\n    sendrecv to next 4 KiB from prev 4 KiB\n    allreduce 8 B\n}\n",
    )
    .expect("write");
    let out = dir.path().join("out");
    let run = perfskel(
        dir.path(),
        &[
            "compile",
            skel.to_str().expect("utf-8"),
            "--ratio",
            "1:10",
            "-o",
            out.to_str().expect("utf-8"),
            "--srun-mpi",
            "pmix",
            "--job-runs",
            "2",
            "--time",
            "5",
        ],
    );
    assert!(run.status.success(), "{}", text(&run.stderr));
    let make = std::process::Command::new("make")
        .current_dir(&out)
        .output()
        .expect("make");
    assert!(make.status.success(), "{}", text(&make.stderr));
    let _guard = MPI_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let sbatch = std::process::Command::new("sbatch")
        .args(["--wait", "--quiet", "job.slurm"])
        .current_dir(&out)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("sbatch (scripts/setup.sh installs Slurm and starts a local node)");
    let logs: Vec<PathBuf> = std::fs::read_dir(&out)
        .expect("out")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.to_string_lossy().contains("pair-skeleton-")
                && p.extension().is_some_and(|x| x == "out")
        })
        .collect();
    let log = logs
        .first()
        .map(|p| std::fs::read_to_string(p).unwrap_or_default())
        .unwrap_or_default();
    assert!(sbatch.status.success(), "{}\n{log}", text(&sbatch.stderr));
    let results: Vec<RunResult> = log.lines().filter_map(RunResult::parse).collect();
    assert_eq!(results.len(), 2, "{log}");
    assert!(results.iter().all(|r| r.ranks == 2), "{log}");
}

/// `run` shows a long build as it goes (the first rsmpi build takes minutes) and keeps a
/// quick one quiet; a failed build prints all of its output once.
#[test]
fn run_shows_a_long_build_as_it_goes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let slow = dir.path().join("slow");
    let quick = dir.path().join("quick");
    for (out, pause) in [(&slow, "@sleep 3\n\t"), (&quick, "")] {
        std::fs::create_dir_all(out).expect("dir");
        std::fs::write(
            out.join("Makefile"),
            format!("all:\n\t@echo step one\n\t{pause}@echo step two >&2\n\t@false\n"),
        )
        .expect("makefile");
    }
    let out = perfskel(dir.path(), &["run", "slow", "-np", "1"]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    // Shown as it came (before the error), then in the error: twice each.
    assert!(
        stderr.contains("perfskel run: building slow with mpicc"),
        "{stderr}"
    );
    let error = stderr.find("error: building slow with").expect("the error");
    let streamed = &stderr[..error];
    assert!(
        streamed.contains("step one") && streamed.contains("step two"),
        "{stderr}"
    );
    assert!(stderr[error..].contains("step one\nstep two\n"), "{stderr}");
    let out = perfskel(dir.path(), &["run", "quick", "-np", "1"]);
    let stderr = text(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.matches("step one").count(), 1, "{stderr}");
    assert!(!stderr.contains("perfskel run: building"), "{stderr}");
}
