//! `perfskel skeletonize` tests: every example application is recorded at 4 ranks under
//! the real `mpirun` (OpenMPI; stencil and cg also under MPICH), skeletonized with the
//! CLI, and the skeleton is checked three ways: `perfskel check` accepts it, its loops
//! have the iteration counts given on the application's command line, and the checker's
//! simulation of it sends, per rank, exactly the messages and collectives the trace
//! recorded. Irregular input (a truncated rank, a missing rank, requests never completed,
//! a trace without repetition) still gives a valid skeleton with a summary saying why.
//! One skeleton of a synthetic trace is a snapshot.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use perfskel_compiler::check::{check, Options as CheckOptions};
use perfskel_compiler::compress::Algorithm;
use perfskel_compiler::skeletonize::{self, InMemory, Input, Options, RankSource};
use perfskel_compiler::trace::format::{self, PEER_PROC_NULL};
use perfskel_compiler::trace::{Completion, Event, Header, Op, OpClass, RankReader, RankTrace};
use perfskel_grammar::ast::{Else, ExprKind, Stmt, StmtKind};

use crate::tracer::{build_app, perfskel, Mpi, MPI_LOCK};

const N_RANKS: u32 = 4;

/// Records `app args` at 4 ranks under `mpi` into a temporary directory.
fn record(mpi: Mpi, app: &str, args: &[&str]) -> (tempfile::TempDir, PathBuf) {
    record_np(mpi, app, args, N_RANKS)
}

/// Records `app args` at `n_ranks` ranks under `mpi` into a temporary directory.
fn record_np(mpi: Mpi, app: &str, args: &[&str], n_ranks: u32) -> (tempfile::TempDir, PathBuf) {
    let exe = build_app(mpi, app);
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = record_exe(mpi, &exe, app, args, dir.path(), n_ranks);
    (dir, trace)
}

/// Records `exe args` at `n_ranks` ranks under `mpi` into `dir/trace-APP`.
fn record_exe(mpi: Mpi, exe: &Path, app: &str, args: &[&str], dir: &Path, n_ranks: u32) -> PathBuf {
    let trace = dir.join(format!("trace-{app}"));
    let launcher = match mpi {
        Mpi::OpenMpi => "mpirun.openmpi",
        Mpi::Mpich => "mpirun.mpich",
    };
    let np = n_ranks.to_string();
    let mut cmd = vec!["record", "-o", trace.to_str().expect("utf-8"), "--"];
    cmd.extend([launcher, "-np", &np, exe.to_str().expect("utf-8")]);
    cmd.extend(args);
    let out = {
        let _guard = MPI_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        perfskel(&cmd)
    };
    assert!(
        out.status.success(),
        "record {app}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    trace
}

/// Runs `perfskel skeletonize --format json`; gives the skeleton text and the summary.
fn skeletonize_cli(trace: &Path, extra: &[&str]) -> (String, serde_json::Value) {
    let out_file = trace.with_extension("skel");
    let mut args = vec![
        "skeletonize",
        trace.to_str().expect("utf-8"),
        "-o",
        out_file.to_str().expect("utf-8"),
        "--format",
        "json",
        "--force",
    ];
    args.extend(extra);
    let out = perfskel(&args);
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "summary JSON: {e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let text = std::fs::read_to_string(&out_file).expect("skeleton written");
    assert!(out.status.success(), "{text}\n{summary:#}");
    // Each rank computes what it did in the trace (the summary's own check, as `check`
    // simulates the written text): no note says otherwise.
    assert!(
        summary["compute_check"].is_object(),
        "no compute check:\n{summary:#}"
    );
    assert!(
        !summary["notes"]
            .as_array()
            .is_some_and(|n| n.iter().any(|n| n
                .as_str()
                .is_some_and(|n| n.contains("the skeleton computes")))),
        "{text}\n{summary:#}"
    );
    let checked = perfskel(&["check", out_file.to_str().expect("utf-8")]);
    assert!(
        checked.status.success(),
        "perfskel check rejects the skeleton:\n{text}\n{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    (text, summary)
}

/// Visits every statement of a block, nested ones included, in program order (a loop
/// or `if` before its bodies).
fn visit(stmts: &[Stmt], f: &mut impl FnMut(&Stmt)) {
    for s in stmts {
        f(s);
        match &s.kind {
            StmtKind::Loop(l) => visit(&l.body.stmts, f),
            StmtKind::If(i) => {
                visit(&i.then_block.stmts, f);
                let mut next = &i.else_branch;
                while let Some(e) = next {
                    match e {
                        Else::Block(b) => {
                            visit(&b.stmts, f);
                            next = &None;
                        }
                        Else::If(inner) => {
                            visit(&inner.then_block.stmts, f);
                            next = &inner.else_branch;
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

/// Every loop count of the program, outermost first, with its body's statements.
fn loops(stmts: &[Stmt], out: &mut Vec<(i64, usize)>) {
    visit(stmts, &mut |s| {
        if let StmtKind::Loop(l) = &s.kind {
            if let ExprKind::Int(c) = l.count.kind {
                out.push((c, l.body.stmts.len()));
            }
        }
    });
}

fn has_if(stmts: &[Stmt]) -> bool {
    stmts.iter().any(|s| match &s.kind {
        StmtKind::If(_) => true,
        StmtKind::Loop(l) => has_if(&l.body.stmts),
        _ => false,
    })
}

/// Per rank: messages sent to a real peer and collective calls, in the trace.
fn trace_counts(trace: &Path) -> Vec<(u64, u64)> {
    trace_counts_np(trace, N_RANKS)
}

fn trace_counts_np(trace: &Path, n_ranks: u32) -> Vec<(u64, u64)> {
    (0..n_ranks)
        .map(|rank| {
            let file =
                std::fs::File::open(trace.join(format::rank_file_name(rank))).expect("rank file");
            let reader = RankReader::new(file, Some(rank)).expect("header");
            let rt = RankTrace::read(reader).expect("rank reads");
            let sends = rt
                .events
                .iter()
                .filter(|e| {
                    matches!(
                        e.op,
                        Op::Send | Op::Isend | Op::Ssend | Op::Bsend | Op::Rsend | Op::Sendrecv
                    ) && e.peer.is_some_and(|p| p != PEER_PROC_NULL)
                })
                .count() as u64;
            let colls = rt
                .events
                .iter()
                .filter(|e| e.op.class() == OpClass::Collective)
                .count() as u64;
            (sends, colls)
        })
        .collect()
}

/// Records, skeletonizes and checks one application; `iters` is the loop count its
/// command line asked for.
fn check_app(mpi: Mpi, app: &str, args: &[&str], iters: i64) -> String {
    check_app_with(mpi, app, args, iters, &[])
}

/// As [`check_app`], with `perfskel skeletonize` options; gives the skeleton's text.
fn check_app_with(mpi: Mpi, app: &str, args: &[&str], iters: i64, options: &[&str]) -> String {
    let (_dir, trace) = record(mpi, app, args);
    let (text, summary) = skeletonize_cli(&trace, options);
    let (program, diags) = perfskel_grammar::parse(&text);
    assert!(diags.is_empty(), "{text}");
    let mut found = Vec::new();
    loops(&program.body.stmts, &mut found);
    assert!(
        found.iter().any(|(c, _)| *c == iters),
        "{app}: no loop of {iters} iterations in\n{text}"
    );
    // Same messages and collectives per rank as the application (comm creation counts as
    // a collective in the checker; the trace's comm calls are not collectives there).
    let checked = check(&program, &text, CheckOptions::default());
    let info = checked.info.expect("checked");
    let expected = trace_counts(&trace);
    let n_comms = program
        .body
        .stmts
        .iter()
        .filter(|s| matches!(s.kind, StmtKind::CommDecl(_)))
        .count() as u64;
    for (rank, (sends, colls)) in expected.iter().enumerate() {
        let r = &info.ranks()[rank];
        assert_eq!(r.messages_sent, *sends, "{app} rank {rank} sends\n{text}");
        assert_eq!(
            r.collectives - n_comms.min(r.collectives),
            *colls,
            "{app} rank {rank} collectives\n{text}"
        );
    }
    assert_eq!(summary["n_ranks"], N_RANKS);
    assert!(summary["statements"].as_u64().unwrap_or(0) > 0);
    if app != "master_worker" {
        assert!(
            !has_if(&program.body.stmts),
            "{app}: rank conditionals\n{text}"
        );
        assert!(
            summary["loop_time_pct"].as_f64().unwrap_or(0.0) > 0.0,
            "{summary:#}"
        );
    }
    text
}

#[test]
fn stencil_openmpi() {
    check_app(Mpi::OpenMpi, "stencil", &["16", "3"], 3);
}
#[test]
fn stencil_mpich() {
    check_app(Mpi::Mpich, "stencil", &["16", "3"], 3);
}
#[test]
fn stencil_fortran_openmpi() {
    check_app(Mpi::OpenMpi, "stencil_f", &["16", "3"], 3);
}
#[test]
fn cg_openmpi() {
    check_app(Mpi::OpenMpi, "cg", &["32", "4"], 4);
}
#[test]
fn cg_mpich() {
    check_app(Mpi::Mpich, "cg", &["32", "4"], 4);
}
#[test]
fn cg_fortran_openmpi() {
    check_app(Mpi::OpenMpi, "cg_f", &["32", "4"], 4);
}
#[test]
fn ring_openmpi() {
    check_app(Mpi::OpenMpi, "ring", &["32", "5"], 5);
}
#[test]
fn ring_fortran_openmpi() {
    check_app(Mpi::OpenMpi, "ring_f", &["32", "5"], 5);
}
#[test]
fn transpose_openmpi() {
    let text = check_app(Mpi::OpenMpi, "transpose", &["4", "3"], 3);
    // Blocks of 4 x 4 doubles: 128 B per pair of ranks. The tracer records what a rank
    // sends to all 4 ranks together (512 B); the skeleton must not send that to each.
    assert!(text.contains("alltoall 128 B"), "{text}");
}
#[test]
fn tree_reduce_openmpi() {
    check_app_with(
        Mpi::OpenMpi,
        "tree_reduce",
        &["1000", "3"],
        3,
        &["--algorithm", "greedy", "--merge-sizes", "5"],
    );
}
#[test]
fn rowcol_openmpi() {
    check_app(Mpi::OpenMpi, "rowcol", &["16", "3"], 3);
}
/// Communicators derived from derived ones, as solvers make them (`tests/apps/
/// derived_comms.c`): a split of the first 4 of 5 ranks (rank 4 gets MPI_COMM_NULL),
/// its duplicate, a grid over that, the grid's rows and columns, and a communicator made
/// from a group of the even ranks. Nothing may be dropped, every communicator is
/// declared from its real parent, the skeleton checks clean, and every rank sends and
/// takes part in exactly the recorded calls.
fn derived_communicators(mpi: Mpi) {
    let n_ranks = 5;
    let (_dir, trace) = record_np(mpi, "test:derived_comms", &["64", "6"], n_ranks);
    let (text, summary) = skeletonize_cli(&trace, &[]);
    assert_eq!(summary["dropped_events"], 0, "{summary:#}\n{text}");
    for decl in [
        "comm split1 = split(world, color = -(rank / 4))",
        "comm dup2 = dup(split1)",
        "comm cart3 = dup(dup2)",
        "comm group4 = split(world, color = -(rank % 2))",
        "= split(cart3, color = ",
    ] {
        assert!(text.contains(decl), "no `{decl}` in\n{text}");
    }
    let (program, diags) = perfskel_grammar::parse(&text);
    assert!(diags.is_empty(), "{text}");
    let checked = check(&program, &text, CheckOptions::default());
    assert!(checked.diags.is_empty(), "{:?}\n{text}", checked.diags);
    let info = checked.info.expect("checked");
    let n_comms = program
        .body
        .stmts
        .iter()
        .filter(|s| matches!(s.kind, StmtKind::CommDecl(_)))
        .count() as u64;
    for (rank, (sends, colls)) in trace_counts_np(&trace, n_ranks).iter().enumerate() {
        let r = &info.ranks()[rank];
        assert_eq!(r.messages_sent, *sends, "rank {rank} sends\n{text}");
        // The checker counts each communicator a rank takes part in making as a
        // collective; the trace does not.
        assert!(
            r.collectives >= *colls && r.collectives <= colls + n_comms,
            "rank {rank}: {} collectives, {colls} recorded\n{text}",
            r.collectives
        );
    }
}
#[test]
fn derived_communicators_openmpi() {
    derived_communicators(Mpi::OpenMpi);
}
#[test]
fn derived_communicators_mpich() {
    derived_communicators(Mpi::Mpich);
}

/// Workers share 6 tasks: the simulation must send exactly the recorded results. The
/// master takes results from any worker and answers the one that sent each (`recv any`,
/// `send source`), so the skeleton's master serves workers in the order they finish
/// where it runs, not in the order they finished in the trace; it runs under both MPIs.
fn master_worker(mpi: Mpi) {
    let (dir, trace) = record(mpi, "master_worker", &["2000", "6"]);
    let (text, summary) = skeletonize_cli(&trace, &[]);
    // Six results from three workers: each worker sent one at least, so the sources
    // vary, and each was answered at once.
    assert!(text.contains("recv any 8 B"), "{text}");
    assert!(text.contains("send source 16 B"), "{text}");
    assert!(!text.contains("recv leaf("), "{text}");
    // The workers take tasks while they come (the loop ends at the stop, tag 2), not
    // the number each took in the traced run: one `while recv` for all of them, and
    // the master's tasks and stops keep their tags.
    assert_eq!(
        text.matches("while recv hub 16 B tag 1").count(),
        1,
        "{text}"
    );
    assert!(text.contains("send source 16 B tag 2"), "{text}");
    // Sends of tasks, answers with tasks, answers with stops; the workers' loop.
    assert!(summary["statements"].as_u64().unwrap_or(99) <= 12, "{text}");
    compile_and_run_1to1(mpi, &dir, &trace);
    let (program, _) = perfskel_grammar::parse(&text);
    let info = check(&program, &text, CheckOptions::default())
        .info
        .expect("checked");
    let worker_results: u64 = info.ranks()[1..].iter().map(|r| r.messages_sent).sum();
    assert_eq!(worker_results, 6, "{text}");
    assert_eq!(info.ranks()[0].messages_sent, 6 + 3, "{text}");
    // The master's calls are not the workers': it has its own branch, and the summary
    // says so.
    assert!(has_if(&program.body.stmts), "{text}");
    let notes = summary["notes"].to_string();
    assert!(notes.contains("rank-conditional"), "{notes}");
}
#[test]
fn master_worker_openmpi() {
    master_worker(Mpi::OpenMpi);
}
#[test]
fn master_worker_mpich() {
    master_worker(Mpi::Mpich);
}

/// A farm of 400 tasks at 1:10: the master's dispatch loop keeps 40 tasks of the 400
/// (ten for each of three workers, the first task each and the stops kept), the
/// workers' `while` takes them as they come, and the scaled program runs.
#[test]
fn a_farm_cut_to_its_share_runs_openmpi() {
    let mpi = Mpi::OpenMpi;
    let (dir, trace) = record(mpi, "master_worker", &["2000", "400"]);
    let (text, _) = skeletonize_cli(&trace, &[]);
    assert!(text.contains("loop 397 {"), "{text}");
    let skel = trace.with_extension("skel");
    let scaled = perfskel(&[
        "compile",
        skel.to_str().expect("utf-8"),
        "--ratio",
        "1:10",
        "--emit",
        "skel",
    ]);
    let scaled_text = String::from_utf8_lossy(&scaled.stdout).to_string();
    let warnings = String::from_utf8_lossy(&scaled.stderr).to_string();
    assert!(scaled.status.success(), "{warnings}");
    assert!(scaled_text.contains("loop 37 {"), "{scaled_text}");
    assert!(scaled_text.contains("loop 3 as i {"), "{scaled_text}");
    let (program, _) = perfskel_grammar::parse(&scaled_text);
    let info = check(&program, &scaled_text, CheckOptions::default())
        .info
        .expect("checked");
    let tasks: u64 = info.ranks().iter().map(|r| r.tasks).sum();
    assert_eq!(tasks, 40, "{scaled_text}");
    compile_and_run_at(mpi, &dir, &trace, N_RANKS, "1:10");
}

/// Matched probes (MPI-3, how mpi4py's `comm.recv` receives): the master's
/// `MPI_Mprobe(MPI_ANY_SOURCE)` + `MPI_Mrecv` is a receive from any worker answered with
/// `send source`, the workers' `MPI_Improbe` polls + `MPI_Imrecv` are polls and a posted
/// receive from the master; no receive is lost (the tracer once let them through
/// untraced, and every skeleton of such a program had sends no one received).
fn matched_probes(mpi: Mpi) {
    let (dir, trace) = record(mpi, "test:matched_probe", &["9"]);
    let (text, summary) = skeletonize_cli(&trace, &[]);
    assert_eq!(summary["dropped_events"], 0, "{summary:#}");
    assert!(text.contains("recv any 8 B"), "{text}");
    assert!(text.contains("send source 8 B"), "{text}");
    assert!(text.contains("irecv hub 8 B"), "{text}");
    let (program, _) = perfskel_grammar::parse(&text);
    let info = check(&program, &text, CheckOptions::default())
        .info
        .expect("checked");
    // Nine tasks and three stops from the master, nine results from the workers (a
    // clean check: every one received).
    assert_eq!(info.ranks()[0].messages_sent, 9 + 3, "{text}");
    let results: u64 = info.ranks()[1..].iter().map(|r| r.messages_sent).sum();
    assert_eq!(results, 9, "{text}");
    compile_and_run_1to1(mpi, &dir, &trace);
}
/// An mpi4py task farm (Debian's python3-mpi4py, built on its Open MPI): pickled
/// `comm.recv` is `MPI_Mprobe` + `MPI_Mrecv`, so every receive is recorded; every MPI
/// call returns into mpi4py's extension module, so the tracer names each by its Python
/// line instead (`task_farm.py:47`), and the skeleton is the C farm's: the master's
/// `recv any` / `send source`, the workers' `while recv`.
#[test]
fn mpi4py_task_farm_openmpi() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apps/task_farm.py");
    let trace = record_exe(
        Mpi::OpenMpi,
        Path::new("/usr/bin/python3"),
        "task_farm_py",
        &[script.to_str().expect("utf-8"), "12", "20000"],
        dir.path(),
        N_RANKS,
    );
    let (text, summary) = skeletonize_cli(&trace, &[]);
    assert_eq!(summary["dropped_events"], 0, "{summary:#}");
    assert!(text.contains("skeleton task_farm\n"), "{text}");
    // The script's lines: the master's receive (35) and answers (38, 42), the
    // worker's receive (47).
    assert!(
        text.contains("recv any 15 B @ \"task_farm.py:35\""),
        "{text}"
    );
    assert!(
        text.contains("send source 15 B tag 1 @ \"task_farm.py:38\""),
        "{text}"
    );
    assert!(
        text.contains("send source 4 B tag 2 @ \"task_farm.py:42\""),
        "{text}"
    );
    assert!(
        text.contains("while recv hub 15 B tag 1 @ \"task_farm.py:47\""),
        "{text}"
    );
    let (program, _) = perfskel_grammar::parse(&text);
    let info = check(&program, &text, CheckOptions::default())
        .info
        .expect("checked");
    // Twelve tasks and three stops from the master, twelve results.
    assert_eq!(info.ranks()[0].messages_sent, 12 + 3, "{text}");
    let results: u64 = info.ranks()[1..].iter().map(|r| r.messages_sent).sum();
    assert_eq!(results, 12, "{text}");
    compile_and_run_1to1(Mpi::OpenMpi, &dir, &trace);
}

/// The same farm through the Fortran bindings (`use mpi`; Open MPI's Fortran layer calls
/// `PMPI_*` directly, so only the tracer's Fortran wrappers see it): the workers'
/// `MPI_MPROBE` + `MPI_MRECV` of any tag, going on while it is 1, are a task loop.
fn matched_probes_fortran(mpi: Mpi) {
    let (dir, trace) = record(mpi, "test:matched_probe_f", &["9"]);
    let (text, summary) = skeletonize_cli(&trace, &[]);
    assert_eq!(summary["dropped_events"], 0, "{summary:#}");
    assert!(text.contains("recv any 8 B"), "{text}");
    assert!(text.contains("send source 8 B tag 2"), "{text}");
    assert_eq!(
        text.matches("while recv hub 8 B tag 1").count(),
        1,
        "{text}"
    );
    compile_and_run_1to1(mpi, &dir, &trace);
}
#[test]
fn matched_probes_fortran_openmpi() {
    matched_probes_fortran(Mpi::OpenMpi);
}
#[test]
fn matched_probes_fortran_mpich() {
    matched_probes_fortran(Mpi::Mpich);
}

#[test]
fn matched_probes_openmpi() {
    matched_probes(Mpi::OpenMpi);
}
#[test]
fn matched_probes_mpich() {
    matched_probes(Mpi::Mpich);
}

/// A stripped executable calling MPI from a stripped shared library (how distributions
/// build LAMMPS): without debug information every MPI statement still has a call site,
/// named by function and offset where the dynamic symbol table has the function, by
/// object file name and offset where not; two calls in one function are two sites, and
/// `trace stats` names sites the same way.
#[test]
fn stripped_objects_still_name_call_sites() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apps/stripped_halo.c");
    let lib = dir.path().join("libhalo.so");
    let exe = dir.path().join("halo");
    let rpath = format!("-Wl,-rpath,{}", dir.path().display());
    let link_dir = format!("-L{}", dir.path().display());
    let builds: [Vec<&std::ffi::OsStr>; 2] = [
        vec![
            "-O2".as_ref(),
            "-s".as_ref(),
            "-shared".as_ref(),
            "-fPIC".as_ref(),
            "-DHALO_LIB".as_ref(),
            "-o".as_ref(),
            lib.as_os_str(),
            src.as_os_str(),
        ],
        vec![
            "-O2".as_ref(),
            "-s".as_ref(),
            "-o".as_ref(),
            exe.as_os_str(),
            src.as_os_str(),
            link_dir.as_ref(),
            rpath.as_ref(),
            "-lhalo".as_ref(),
        ],
    ];
    for args in builds {
        let out = std::process::Command::new("mpicc.openmpi")
            .args(&args)
            .output()
            .expect("run mpicc");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let trace = record_exe(
        Mpi::OpenMpi,
        &exe,
        "halo",
        &["16", "3"],
        dir.path(),
        N_RANKS,
    );
    let (text, _) = skeletonize_cli(&trace, &[]);
    let (program, diags) = perfskel_grammar::parse(&text);
    assert!(diags.is_empty(), "{text}");
    let mut sites = Vec::new();
    mpi_sites(&program.body.stmts, &mut sites);
    assert!(sites.len() >= 4, "{text}");
    for site in &sites {
        let site = site
            .as_deref()
            .unwrap_or_else(|| panic!("a statement without a site:\n{text}"));
        assert!(!site.contains('/'), "{site}: a path in\n{text}");
    }
    let named: BTreeSet<&str> = sites.iter().flatten().map(String::as_str).collect();
    let in_reverse_comm = named
        .iter()
        .filter(|s| s.starts_with("halo::Comm::reverse_comm+0x"))
        .count();
    assert_eq!(in_reverse_comm, 2, "{text}");
    assert!(
        named.iter().any(|s| s.starts_with("libhalo.so+0x")),
        "{text}"
    );
    assert!(named.iter().any(|s| s.starts_with("halo+0x")), "{text}");

    let out = perfskel(&["trace", "stats", trace.to_str().expect("utf-8")]);
    let stats = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stats}");
    for site in &named {
        assert!(stats.contains(site), "{site} not in\n{stats}");
    }
}

/// The call site of every MPI statement (not loops, branches or compute), in order.
fn mpi_sites(stmts: &[Stmt], out: &mut Vec<Option<String>>) {
    visit(stmts, &mut |s| match &s.kind {
        StmtKind::Loop(_) | StmtKind::If(_) | StmtKind::Compute(_) => {}
        _ => out.push(s.site.as_ref().map(|site| site.text.clone())),
    });
}

/// A rank file cut in half and a missing rank: the skeleton is still valid, built from
/// the other ranks, and the summary names both.
#[test]
fn truncated_and_missing_ranks() {
    let (_dir, trace) = record(Mpi::OpenMpi, "stencil", &["16", "4"]);
    let rank1 = trace.join("rank-00001.pst");
    let bytes = std::fs::read(&rank1).expect("rank 1");
    std::fs::write(&rank1, &bytes[..bytes.len() / 2]).expect("truncate");
    std::fs::remove_file(trace.join("rank-00003.pst")).expect("remove rank 3");
    let (text, summary) = skeletonize_cli(&trace, &[]);
    assert_eq!(summary["incomplete_ranks"], serde_json::json!([1]));
    assert_eq!(summary["missing_ranks"], serde_json::json!([3]));
    let notes = summary["notes"].to_string();
    assert!(notes.contains("stopped before MPI_Finalize"), "{notes}");
    assert!(notes.contains("missing for rank(s) 3"), "{notes}");
    assert!(text.contains("loop 4"), "{text}");
}

#[test]
fn refuses_to_overwrite_without_force() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("x.skel");
    std::fs::write(&out, "keep me").expect("write");
    let result = perfskel(&[
        "skeletonize",
        dir.path().to_str().expect("utf-8"),
        "-o",
        out.to_str().expect("utf-8"),
    ]);
    assert!(!result.status.success());
    assert!(String::from_utf8_lossy(&result.stderr).contains("--force"));
    assert_eq!(std::fs::read_to_string(&out).expect("read"), "keep me");
}

/// The skeleton is never written through a link (a dangling one counts as a file that
/// exists), and not even `--force` writes it over the trace it reads.
#[test]
fn never_writes_through_links_or_over_its_input() {
    let (dir, trace) = record(Mpi::OpenMpi, "ring", &["64", "5"]);
    let trace_text = trace.to_str().expect("utf-8");
    let skeletonize = |out: &Path, force: bool| {
        let mut args = vec![
            "skeletonize",
            trace_text,
            "-o",
            out.to_str().expect("utf-8"),
        ];
        if force {
            args.push("--force");
        }
        perfskel(&args)
    };
    let target = dir.path().join("elsewhere.txt");
    let dangling = dir.path().join("dangling.skel");
    std::os::unix::fs::symlink(&target, &dangling).expect("symlink");
    let refused = skeletonize(&dangling, false);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--force"));
    assert!(
        !target.exists(),
        "nothing written through the dangling link"
    );

    std::fs::write(&target, "the user's file").expect("write");
    let forced = skeletonize(&dangling, true);
    assert!(
        forced.status.success(),
        "{}",
        String::from_utf8_lossy(&forced.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&target).expect("read"),
        "the user's file"
    );
    let meta = std::fs::symlink_metadata(&dangling).expect("output");
    assert!(meta.is_file(), "the link is replaced by the skeleton");

    let input = trace.join("rank-00000.pst");
    let before = std::fs::read(&input).expect("rank file");
    let own = skeletonize(&input, true);
    assert!(!own.status.success());
    assert!(
        String::from_utf8_lossy(&own.stderr).contains("a file of the trace"),
        "{}",
        String::from_utf8_lossy(&own.stderr)
    );
    assert_eq!(std::fs::read(&input).expect("rank file"), before);

    // `-o -`: the skeleton on standard output, the summary on standard error.
    let piped = perfskel(&["skeletonize", trace_text, "-o", "-"]);
    assert!(
        piped.status.success(),
        "{}",
        String::from_utf8_lossy(&piped.stderr)
    );
    let text = String::from_utf8_lossy(&piped.stdout);
    assert!(
        text.starts_with("# Generated by perfskel skeletonize") && text.contains("\nranks 4\n"),
        "{text}"
    );
    assert!(String::from_utf8_lossy(&piped.stderr).contains("check "));
    assert!(!Path::new("-").exists());
}

// ---- synthetic traces: deterministic times ----

struct Synth {
    events: Vec<Event>,
    now: u64,
}

impl Synth {
    fn new() -> Synth {
        let mut s = Synth {
            events: Vec::new(),
            now: 0,
        };
        s.call(0, Op::Init, |_| {});
        s
    }
    /// `gap_ns` of compute, then the call (1 us long).
    fn call(&mut self, gap_ns: u64, op: Op, fill: impl FnOnce(&mut Event)) {
        self.now += gap_ns;
        let mut ev = Event {
            op,
            start_ns: self.now,
            end_ns: self.now + 1_000,
            site: 1 + op.code() as u64,
            comm: Some(0),
            ..Event::default()
        };
        fill(&mut ev);
        self.now = ev.end_ns;
        self.events.push(ev);
    }
    fn finish(mut self, rank: u32, n_ranks: u32) -> RankTrace {
        self.call(0, Op::Finalize, |_| {});
        let sites = Op::ALL
            .iter()
            .map(|op| {
                (
                    1 + op.code() as u64,
                    perfskel_compiler::trace::stats::SiteKey::at("/app", op.code() as u64),
                )
            })
            .collect();
        RankTrace {
            header: Header {
                version: 1,
                rank,
                n_ranks,
                pid: 1,
                start_unix_ns: 0,
                host: "h".into(),
                mpi_library: "synthetic".into(),
            },
            completion: Completion::Complete {
                end_ns: self.now,
                n_events: self.events.len() as u64,
            },
            memory: None,
            clock: None,
            poll_ps: None,
            events: self.events,
            sites,
            comms: [(0, (0..i64::from(n_ranks)).collect())].into(),
            grids: BTreeMap::new(),
        }
    }
}

fn site_names() -> BTreeMap<perfskel_compiler::trace::stats::SiteKey, String> {
    Op::ALL
        .iter()
        .map(|op| {
            (
                perfskel_compiler::trace::stats::SiteKey::at("/app", op.code() as u64),
                format!("app.c:{}", op.code()),
            )
        })
        .collect()
}

fn run_synthetic(ranks: &[RankTrace], algorithm: Algorithm) -> (String, skeletonize::Summary) {
    let names = site_names();
    let site_name = |k: &perfskel_compiler::trace::stats::SiteKey| names.get(k).cloned();
    let in_memory = InMemory(ranks.iter().map(RankSource::Trace).collect());
    let input = Input {
        name: "synthetic".into(),
        ranks: &in_memory,
        site_name: &site_name,
        origin: "a synthetic trace".into(),
    };
    let options = Options {
        algorithm,
        ..Options::default()
    };
    let sk = skeletonize::skeletonize(&input, &options, &mut |_| {});
    let text = perfskel_grammar::printer::print(&sk.program);
    let checked = check(&sk.program, &text, CheckOptions::default());
    assert!(
        checked.diags.is_empty(),
        "{text}\n{:?}",
        checked.diags.iter().map(|d| &d.message).collect::<Vec<_>>()
    );
    (text, sk.summary)
}

/// A 1-D halo exchange on a chain of 4 ranks (MPI_PROC_NULL at both ends), 6 iterations
/// of 2 ms compute (rank 3 computes 3 ms: load imbalance) and an allreduce.
fn chain_exchange(iters: u32) -> Vec<RankTrace> {
    (0..N_RANKS)
        .map(|rank| {
            let mut s = Synth::new();
            let left = if rank == 0 {
                PEER_PROC_NULL
            } else {
                i64::from(rank) - 1
            };
            let right = if rank == N_RANKS - 1 {
                PEER_PROC_NULL
            } else {
                i64::from(rank) + 1
            };
            let bytes = |p: i64| if p == PEER_PROC_NULL { 0 } else { 4096 };
            for _ in 0..iters {
                let work = if rank == 3 { 3_000_000 } else { 2_000_000 };
                s.call(work, Op::Sendrecv, |e| {
                    e.peer = Some(right);
                    e.bytes = Some(bytes(right));
                    e.src = Some(left);
                    e.rbytes = Some(bytes(left));
                    e.tag = Some(0);
                    e.rtag = Some(0);
                });
                s.call(500, Op::Sendrecv, |e| {
                    e.peer = Some(left);
                    e.bytes = Some(bytes(left));
                    e.src = Some(right);
                    e.rbytes = Some(bytes(right));
                    e.tag = Some(1);
                    e.rtag = Some(1);
                });
                s.call(20_000, Op::Allreduce, |e| {
                    e.bytes = Some(8);
                    e.rbytes = Some(8);
                });
            }
            s.finish(rank, N_RANKS)
        })
        .collect()
}

#[test]
fn synthetic_chain_snapshot() {
    let (text, summary) = run_synthetic(&chain_exchange(6), Algorithm::Exact);
    assert_eq!(summary.loops, 1);
    assert_eq!(summary.rank_conditionals, 0);
    insta::with_settings!({snapshot_path => "../snapshots/skeletonize", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("chain_exchange", text);
    });
    // The greedy algorithm gives a skeleton of the same structure.
    let (greedy, _) = run_synthetic(&chain_exchange(6), Algorithm::Greedy);
    assert!(greedy.contains("loop 6"), "{greedy}");
}

/// No repetition at all (every message twice the size of the one before, so no two are
/// of one size class): a valid, long skeleton and a summary that says why it is long.
#[test]
fn no_repetition_gives_a_long_valid_skeleton() {
    let ranks: Vec<RankTrace> = (0..2)
        .map(|rank| {
            let mut s = Synth::new();
            // Fewer distinct sizes than a site whose sizes follow its data has.
            for i in 0..15u32 {
                let op = if rank == 0 { Op::Send } else { Op::Recv };
                s.call(10_000, op, |e| {
                    e.peer = Some(1 - i64::from(rank));
                    e.bytes = Some(8 << i);
                    e.tag = Some(0);
                });
            }
            s.finish(rank, 2)
        })
        .collect();
    let (text, summary) = run_synthetic(&ranks, Algorithm::Exact);
    assert_eq!(summary.loops, 0, "{text}");
    assert!(summary.statements >= 15);
    assert!(
        summary
            .notes
            .iter()
            .any(|n| n.contains("little repetition")),
        "{:?}",
        summary.notes
    );
}

/// Requests posted and never completed are completed at the end and counted.
#[test]
fn unmatched_requests_are_completed_and_reported() {
    let ranks: Vec<RankTrace> = (0..2)
        .map(|rank| {
            let mut s = Synth::new();
            let op = if rank == 0 { Op::Isend } else { Op::Irecv };
            s.call(10_000, op, |e| {
                e.peer = Some(1 - i64::from(rank));
                e.bytes = Some(64);
                e.tag = Some(0);
                e.req = Some(1);
            });
            s.finish(rank, 2)
        })
        .collect();
    let (text, summary) = run_synthetic(&ranks, Algorithm::Exact);
    assert_eq!(summary.unmatched_requests, 2);
    assert!(text.contains("wait r0"), "{text}");
    assert!(
        summary.notes.iter().any(|n| n.contains("never completed")),
        "{:?}",
        summary.notes
    );
}

/// One-sided calls and intercommunicators in a synthetic trace: the requests of dropped
/// `MPI_Rput`/`MPI_Rget` leave their completions without a word (no unknown waits; a
/// waitall keeps its other requests), a duplicate of an intercommunicator is one too,
/// and every dropped call is counted with its reason.
#[test]
fn one_sided_requests_and_derived_intercommunicators_are_dropped_quietly() {
    let ranks: Vec<RankTrace> = (0..2)
        .map(|rank| {
            let other = 1 - i64::from(rank);
            let mut s = Synth::new();
            s.call(1_000, Op::Rput, |e| {
                e.peer = Some(other);
                e.bytes = Some(64);
                e.req = Some(1);
            });
            let op = if rank == 0 { Op::Isend } else { Op::Irecv };
            s.call(1_000, op, |e| {
                e.peer = Some(other);
                e.bytes = Some(64);
                e.tag = Some(0);
                e.req = Some(2);
            });
            s.call(1_000, Op::Waitall, |e| {
                e.comm = None;
                e.reqs = vec![1, 2];
            });
            s.call(1_000, Op::Rget, |e| {
                e.peer = Some(other);
                e.bytes = Some(64);
                e.req = Some(3);
            });
            s.call(1_000, Op::Wait, |e| {
                e.comm = None;
                e.reqs = vec![3];
            });
            s.call(1_000, Op::IntercommCreate, |e| e.newcomm = Some(5));
            s.call(1_000, Op::CommDup, |e| {
                e.comm = Some(5);
                e.newcomm = Some(6);
            });
            let op = if rank == 0 { Op::Send } else { Op::Recv };
            s.call(1_000, op, |e| {
                e.comm = Some(6);
                e.peer = Some(other);
                e.bytes = Some(64);
                e.tag = Some(0);
            });
            s.call(1_000, Op::Allreduce, |e| {
                e.bytes = Some(8);
                e.rbytes = Some(8);
            });
            s.finish(rank, 2)
        })
        .collect();
    let (text, summary) = run_synthetic(&ranks, Algorithm::Exact);
    assert_eq!(summary.unknown_waits, 0, "{text}");
    assert_eq!(summary.unmatched_requests, 0, "{text}");
    let inter = "intercommunicators are not modelled";
    let want: BTreeMap<String, u64> = [
        (
            "MPI_Rput: one-sided communication is not modelled".to_string(),
            2,
        ),
        (
            "MPI_Rget: one-sided communication is not modelled".to_string(),
            2,
        ),
        (format!("MPI_Intercomm_create: {inter}"), 2),
        (format!("MPI_Comm_dup on an intercommunicator: {inter}"), 2),
        (format!("MPI_Send on an intercommunicator: {inter}"), 1),
        (format!("MPI_Recv on an intercommunicator: {inter}"), 1),
    ]
    .into_iter()
    .collect();
    assert_eq!(summary.dropped, want, "{text}");
    assert!(text.contains("isend") && text.contains("irecv"), "{text}");
    assert!(text.contains("wait r0"), "{text}");
    assert!(text.contains("allreduce"), "{text}");
}

/// An expression used as a loop count stays a literal: recorded counts are kept.
#[test]
fn loop_counts_are_recorded_literals() {
    let (text, _) = run_synthetic(&chain_exchange(9), Algorithm::Exact);
    let (program, _) = perfskel_grammar::parse(&text);
    let mut found = Vec::new();
    loops(&program.body.stmts, &mut found);
    assert_eq!(found.first().map(|l| l.0), Some(9), "{text}");
}

/// Sizes that differ in data only (within 25 % of each other at one call site) are one
/// loop by default, written as their mean where sent and their largest where received
/// (the bytes on the wire stay the application's); `--merge-sizes` still rounds them
/// up to the largest of a group, and its merges are reported.
#[test]
fn near_equal_sizes_merge_into_one_loop() {
    let sizes = [1000u64, 1004, 1008, 1002, 1006, 1001];
    let ranks: Vec<RankTrace> = (0..2)
        .map(|rank| {
            let mut s = Synth::new();
            for b in sizes {
                let op = if rank == 0 { Op::Send } else { Op::Recv };
                s.call(50_000, op, |e| {
                    e.peer = Some(1 - i64::from(rank));
                    e.bytes = Some(b);
                    e.tag = Some(0);
                });
            }
            s.finish(rank, 2)
        })
        .collect();
    let (plain, plain_summary) = run_synthetic(&ranks, Algorithm::Exact);
    assert_eq!(plain_summary.loops, 1, "{plain}");
    assert!(plain.contains("loop 6"), "{plain}");
    // 6021 B sent in all: a mean of 1003.5, written as 1004 B; receives take the largest.
    assert!(plain.contains("send next 1004 B"), "{plain}");
    assert!(plain.contains("recv prev 1008 B"), "{plain}");
    let names = site_names();
    let site_name = |k: &perfskel_compiler::trace::stats::SiteKey| names.get(k).cloned();
    let in_memory = InMemory(ranks.iter().map(RankSource::Trace).collect());
    let input = Input {
        name: "synthetic".into(),
        ranks: &in_memory,
        site_name: &site_name,
        origin: "a synthetic trace".into(),
    };
    let options = Options {
        merge_sizes_pct: Some(5.0),
        ..Options::default()
    };
    let sk = skeletonize::skeletonize(&input, &options, &mut |_| {});
    let text = perfskel_grammar::printer::print(&sk.program);
    assert!(text.contains("loop 6"), "{text}");
    assert!(text.contains("1008 B"), "{text}");
    assert_eq!(sk.summary.merged_sizes.len(), 5);
    assert!(
        sk.summary.notes.iter().any(|n| n.contains("--merge-sizes")),
        "{:?}",
        sk.summary.notes
    );
    assert!(
        check(&sk.program, &text, CheckOptions::default())
            .diags
            .is_empty(),
        "{text}"
    );
}

/// `perfskel demo` builds, records, skeletonizes, checks, compiles for 1:10 and 1:100
/// with both back ends and runs the untraced application and the four programs: the
/// skeleton has the app's 16000 iterations, and every program prints a prediction. (The accuracy of the predictions is
/// measured by `scripts/fidelity.sh` and `perfskel validate`, not here.)
#[test]
fn demo_runs_the_pipeline() {
    let out = {
        let _guard = MPI_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        std::process::Command::new(env!("CARGO_BIN_EXE_perfskel"))
            .args(["demo", "--example", "stencil2d"])
            .env("PERFSKEL_CACHE_DIR", crate::common::shared_cache_dir())
            .output()
            .expect("the perfskel binary runs")
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for step in [
        "1. build",
        "2. record     2 ranks",
        "3. skeletonize",
        "4. check      0 error(s), 0 warning(s)",
        "5. compile",
        "6. run",
    ] {
        assert!(stdout.contains(step), "{step}:\n{stdout}");
    }
    assert!(stdout.contains("    loop 16000 {"), "{stdout}");
    // The untraced application ran beside the programs (the timer linked in), and its
    // spread is shown with the errors.
    let app = stdout
        .lines()
        .find(|l| l.contains("the application, untraced: "))
        .unwrap_or_else(|| panic!("no untraced application line:\n{stdout}"));
    assert!(app.contains("median ") && app.contains("spread "), "{app}");
    assert!(
        stdout.contains("the traced run the skeleton stands for: "),
        "{stdout}"
    );
    for row in [
        "c          1:10",
        "c         1:100",
        "rust       1:10",
        "rust      1:100",
    ] {
        let line = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(row.trim_start()) && l.contains(" s "))
            .unwrap_or_else(|| panic!("no result row `{row}`:\n{stdout}"));
        assert!(!line.contains("failed"), "{line}");
    }
}

/// Nonblocking collectives and completion by `MPI_Waitany`/`MPI_Testall` become request
/// handles the checker accepts; a test that found nothing complete leaves no statement.
#[test]
fn nonblocking_collectives_and_completions() {
    let ranks: Vec<RankTrace> = (0..2)
        .map(|rank| {
            let mut s = Synth::new();
            for i in 0..4u64 {
                let base = 10 * i;
                s.call(30_000, Op::Iallreduce, |e| {
                    e.bytes = Some(8);
                    e.rbytes = Some(8);
                    e.req = Some(base + 1);
                });
                s.call(1_000, Op::Irecv, |e| {
                    e.peer = Some(1 - i64::from(rank));
                    e.bytes = Some(64);
                    e.tag = Some(0);
                    e.req = Some(base + 2);
                });
                s.call(1_000, Op::Isend, |e| {
                    e.peer = Some(1 - i64::from(rank));
                    e.bytes = Some(64);
                    e.tag = Some(0);
                    e.req = Some(base + 3);
                });
                s.call(1_000, Op::Testall, |e| {
                    e.flag = Some(0);
                });
                s.call(1_000, Op::Waitany, |e| e.reqs = vec![base + 1]);
                s.call(1_000, Op::Waitall, |e| e.reqs = vec![base + 3, base + 2]);
            }
            s.finish(rank, 2)
        })
        .collect();
    let (text, summary) = run_synthetic(&ranks, Algorithm::Exact);
    assert!(text.contains("loop 4"), "{text}");
    assert!(text.contains("req r0 = iallreduce 8 B"), "{text}");
    assert!(text.contains("wait r0"), "{text}");
    assert!(text.contains("waitall r1, r2"), "{text}");
    assert!(!text.contains("test"), "{text}");
    assert_eq!(summary.rank_conditionals, 0, "{text}");
}

/// A run of failed polls (format 7: one event for 4000 calls, 3 ms of calls after 2 ms
/// of gaps) leaves no statement of its own: the compute before the next statement (1 ms
/// of gap before the run + the run's 2 ms of gaps, then 1 ms before the barrier) makes
/// its 4000 polls again, and their 3 ms are not in its time (a poll's cost is the
/// MPI's, made where the skeleton runs), but the time above what the trace measured a
/// failed test to cost is, up to a memory access's wait a call.
#[test]
fn failed_polls_are_made_again_after_the_compute() {
    let ranks = |call_ns: u64, poll_ps: Option<u64>| -> Vec<RankTrace> {
        (0..2)
            .map(|rank| {
                let mut s = Synth::new();
                for _ in 0..3 {
                    s.call(1_000_000, Op::Testany, |e| {
                        e.flag = Some(0);
                        e.polls = 4000;
                        e.start_ns += 2_000_000;
                        e.end_ns = e.start_ns + 4000 * call_ns;
                    });
                    s.call(1_000_000, Op::Barrier, |_| {});
                }
                let mut rt = s.finish(rank, 2);
                rt.poll_ps = poll_ps;
                rt
            })
            .collect()
    };
    let (text, _) = run_synthetic(&ranks(750, None), Algorithm::Exact);
    assert!(!text.contains("test"), "{text}");
    assert!(
        text.contains("compute 4 ms polls 4000 each 750 ns"),
        "{text}"
    );
    // Where the trace measured what a failed test costs (format 10's poll record, here
    // 50 ns), the polls keep that cost and the rest of their 150 ns is compute: the
    // traced call was also the work before it landing (4000 × 100 ns = 0.4 ms).
    let (text, _) = run_synthetic(&ranks(150, Some(50_000)), Algorithm::Exact);
    assert!(
        text.contains("compute 4.4 ms polls 4000 each 50 ns"),
        "{text}"
    );
    // 750 ns a call is no wait for memory (a yield, a socket): kept as traced.
    let (text, _) = run_synthetic(&ranks(750, Some(50_000)), Algorithm::Exact);
    assert!(
        text.contains("compute 4 ms polls 4000 each 750 ns"),
        "{text}"
    );
}

/// A single rank exchanging with `MPI_PROC_NULL` only: those calls do nothing anywhere,
/// so they and their requests are left out, and the summary says so.
#[test]
fn single_rank_proc_null_exchanges_are_left_out() {
    let mut s = Synth::new();
    for i in 0..3u64 {
        for (k, op) in [Op::Irecv, Op::Isend].into_iter().enumerate() {
            s.call(1_000, op, |e| {
                e.peer = Some(PEER_PROC_NULL);
                e.bytes = Some(0);
                e.tag = Some(0);
                e.req = Some(10 * i + k as u64 + 1);
            });
        }
        s.call(1_000, Op::Waitall, |e| {
            e.reqs = vec![10 * i + 1, 10 * i + 2]
        });
        s.call(40_000, Op::Allreduce, |e| {
            e.bytes = Some(8);
            e.rbytes = Some(8);
        });
    }
    let (text, summary) = run_synthetic(&[s.finish(0, 1)], Algorithm::Exact);
    assert!(text.contains("loop 3"), "{text}");
    assert!(!text.contains("irecv") && !text.contains("wait"), "{text}");
    assert!(
        summary
            .notes
            .iter()
            .any(|n| n.contains("no-ops everywhere")),
        "{:?}",
        summary.notes
    );
}

// ---- the streaming pass ----

/// A 4-rank chain with nested loops, jittered compute spans (so that the statistics'
/// floating-point sums depend on the order they are taken in), a section without
/// repetition (every message another size) and rank 2 cut off in the middle of the run.
fn irregular_chain() -> Vec<RankTrace> {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut jitter = move |base: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        base + seed % (base / 3 + 1)
    };
    (0..N_RANKS)
        .map(|rank| {
            let mut s = Synth::new();
            let peer = |d: i64| {
                let p = i64::from(rank) + d;
                if (0..i64::from(N_RANKS)).contains(&p) {
                    p
                } else {
                    PEER_PROC_NULL
                }
            };
            let bytes = |p: i64| if p == PEER_PROC_NULL { 0 } else { 2048 };
            let mut req = 0u64;
            for outer in 0..40u64 {
                for _ in 0..7 {
                    for (op, d) in [(Op::Irecv, -1), (Op::Isend, 1)] {
                        req += 1;
                        s.call(jitter(3_000), op, |e| {
                            e.peer = Some(peer(d));
                            e.bytes = Some(bytes(peer(d)));
                            e.tag = Some(0);
                            e.req = Some(req);
                        });
                    }
                    s.call(jitter(500), Op::Waitall, |e| e.reqs = vec![req - 1, req]);
                }
                s.call(jitter(1_000_000), Op::Allreduce, |e| {
                    e.bytes = Some(8);
                    e.rbytes = Some(8);
                });
                if rank == 2 && outer == 25 {
                    // Killed: no MPI_Finalize, no end record.
                    let mut t = s.finish(rank, N_RANKS);
                    t.events.truncate(t.events.len() - 1);
                    t.completion = Completion::Incomplete {
                        valid_bytes: 0,
                        trailing_bytes: 0,
                    };
                    return t;
                }
            }
            for i in 0..25u64 {
                s.call(jitter(20_000), Op::Bcast, |e| {
                    e.bytes = Some(8 * (i + 1));
                    e.root = Some(0);
                });
            }
            s.finish(rank, N_RANKS)
        })
        .collect()
}

/// The pass reads every rank as a stream (a survey, then loop discovery, then the
/// statistics of the loop bodies): on nested loops with jittered times, a truncated
/// rank and a section without repetition, both algorithms give the skeletons and
/// summaries the pass gave when it held every rank's events in memory (the snapshot was
/// written by that version and is unchanged).
#[test]
fn streaming_gives_the_in_memory_skeletons() {
    let ranks = irregular_chain();
    let mut shown = String::new();
    for algorithm in [Algorithm::Exact, Algorithm::Greedy] {
        let (text, summary) = run_synthetic(&ranks, algorithm);
        assert_eq!(summary.incomplete_ranks, vec![2]);
        assert!(text.contains("loop 40"), "{text}");
        shown.push_str(&format!("== {algorithm:?}\n{text}\n{summary:#?}\n"));
    }
    insta::with_settings!({snapshot_path => "../snapshots/skeletonize", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("streaming_irregular_chain", shown);
    });
}

/// Encodes a rank as a trace file (format version 2, as `runtime/tracer/FORMAT.md`
/// describes it): one object, the call sites the events use, the world communicator's
/// members, the events, and the end record when the rank completed.
fn encode_rank(trace: &RankTrace) -> Vec<u8> {
    use crate::common::{checksum_record, rank_header, varint, zigzag};
    use format::field;
    let mut b = rank_header(&Header {
        version: format::VERSION,
        ..trace.header.clone()
    });
    b.push(format::R_OBJECT);
    varint(&mut b, 1);
    varint(&mut b, 0);
    varint(&mut b, 4);
    b.extend_from_slice(b"/app");
    // Site ids are dense from 1; the synthetic ones are 1 + operation code.
    let last_site = trace.sites.keys().max().copied().unwrap_or(0);
    for id in 1..=last_site {
        b.push(format::R_SITE);
        varint(&mut b, id);
        varint(&mut b, 1);
        varint(&mut b, trace.sites.get(&id).map_or(0, |k| k.offset));
    }
    for (id, members) in &trace.comms {
        b.push(format::R_COMM);
        varint(&mut b, *id);
        varint(&mut b, members.len() as u64);
        for m in members {
            zigzag(&mut b, *m);
        }
        // Format 5: the communicator's Cartesian grid.
        let grid = trace.grids.get(id).map(Vec::as_slice).unwrap_or_default();
        varint(&mut b, grid.len() as u64);
        for (d, periodic) in grid {
            varint(&mut b, d << 1 | u64::from(*periodic));
        }
    }
    let mut prev_end = 0;
    for ev in &trace.events {
        let mut fields: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut put = |bit: u64, write: &dyn Fn(&mut Vec<u8>)| {
            let mut v = Vec::new();
            write(&mut v);
            fields.push((bit, v));
        };
        if let Some(p) = ev.peer {
            put(field::PEER, &|v| zigzag(v, p));
        }
        if let Some(t) = ev.tag {
            put(field::TAG, &|v| zigzag(v, t));
        }
        if let Some(x) = ev.bytes {
            put(field::BYTES, &|v| varint(v, x));
        }
        if let Some(c) = ev.comm {
            put(field::COMM, &|v| varint(v, c));
        }
        if let Some(r) = ev.req {
            put(field::REQ, &|v| varint(v, r));
        }
        if !ev.reqs.is_empty() {
            put(field::REQS, &|v| {
                varint(v, ev.reqs.len() as u64);
                for r in &ev.reqs {
                    varint(v, *r);
                }
            });
        }
        if let Some(r) = ev.root {
            put(field::ROOT, &|v| zigzag(v, r));
        }
        if let Some(s) = ev.src {
            put(field::SRC, &|v| zigzag(v, s));
        }
        if let Some(t) = ev.rtag {
            put(field::RTAG, &|v| zigzag(v, t));
        }
        if let Some(x) = ev.rbytes {
            put(field::RBYTES, &|v| varint(v, x));
        }
        if let Some(c) = ev.newcomm {
            put(field::NEWCOMM, &|v| varint(v, c));
        }
        if let Some(f) = ev.flag {
            put(field::FLAG, &|v| varint(v, f));
        }
        b.push(ev.op.code());
        varint(&mut b, fields.iter().fold(0, |m, (bit, _)| m | bit));
        varint(&mut b, ev.start_ns - prev_end);
        varint(&mut b, ev.duration_ns());
        varint(&mut b, ev.site);
        for (_, v) in fields {
            b.extend_from_slice(&v);
        }
        prev_end = ev.end_ns;
    }
    if let Completion::Complete { end_ns, n_events } = trace.completion {
        b.push(format::R_END);
        varint(&mut b, end_ns);
        varint(&mut b, n_events);
        checksum_record(&mut b, 0);
    }
    b
}

/// Rank files in memory, each read record by record by the trace reader, as `perfskel
/// skeletonize` reads a trace directory.
struct RankFiles(Vec<Vec<u8>>);

impl skeletonize::Ranks for RankFiles {
    fn n_ranks(&self) -> u32 {
        self.0.len() as u32
    }
    fn open(&self, rank: u32) -> skeletonize::Opened<'_> {
        let Some(bytes) = self.0.get(rank as usize) else {
            return skeletonize::Opened::Missing;
        };
        match RankReader::new(&bytes[..], Some(rank)) {
            Ok(reader) => skeletonize::Opened::Events(Box::new(reader)),
            Err(_) => skeletonize::Opened::Unreadable,
        }
    }
}

/// The streaming reader path on rank files (rank 2 cut off in the middle of a record, a
/// section without repetition) gives the same skeleton and summary as the same events
/// collected in memory first.
#[test]
fn rank_files_stream_like_collected_ranks() {
    let mut files: Vec<Vec<u8>> = irregular_chain().iter().map(encode_rank).collect();
    // Cut rank 2 in the middle of a record: the reader keeps the whole records before.
    let cut = files[2].len() - 5;
    files[2].truncate(cut);
    let collected: Vec<RankTrace> = files
        .iter()
        .enumerate()
        .map(|(r, bytes)| {
            RankTrace::read(RankReader::new(&bytes[..], Some(r as u32)).expect("header"))
                .expect("reads")
        })
        .collect();
    assert!(matches!(
        collected[2].completion,
        Completion::Incomplete {
            trailing_bytes: 1..,
            ..
        }
    ));
    let names = site_names();
    let site_name = |k: &perfskel_compiler::trace::stats::SiteKey| names.get(k).cloned();
    for algorithm in [Algorithm::Exact, Algorithm::Greedy] {
        let options = Options {
            algorithm,
            ..Options::default()
        };
        let run = |ranks: &dyn skeletonize::Ranks| {
            let input = Input {
                name: "synthetic".into(),
                ranks,
                site_name: &site_name,
                origin: "a synthetic trace".into(),
            };
            let mut last = skeletonize::Progress { done: 0, total: 0 };
            let sk = skeletonize::skeletonize(&input, &options, &mut |p| last = p);
            // Three reads of every merged rank: survey, discovery, statistics.
            assert_eq!(last.done, last.total);
            (perfskel_grammar::printer::print(&sk.program), sk.summary)
        };
        let in_memory = InMemory(collected.iter().map(RankSource::Trace).collect());
        let from_memory = run(&in_memory);
        let from_files = run(&RankFiles(files.clone()));
        assert_eq!(from_files.0, from_memory.0);
        assert_eq!(from_files.1, from_memory.1);
        assert_eq!(from_files.1.incomplete_ranks, vec![2]);
        assert!(from_files.0.contains("loop 40"), "{}", from_files.0);
    }
}

/// One-sided communication and intercommunicators (`tests/apps/one_sided.c`, 4 ranks, 3
/// iterations) are not modelled: each call is dropped and counted with its reason, calls
/// on the intercommunicator (and on what is merged from it) with the intercommunicator's,
/// a note says so, and the rest (the allreduces, the world barrier) makes a skeleton
/// that checks clean.
fn one_sided_and_intercomm(mpi: Mpi) {
    let (_dir, trace) = record(mpi, "test:one_sided", &["64", "3"]);
    let (text, summary) = skeletonize_cli(&trace, &[]);
    let one = "one-sided communication is not modelled";
    let inter = "intercommunicators are not modelled";
    let want: BTreeMap<String, u64> = [
        (format!("MPI_Win_create: {one}"), 4),
        (format!("MPI_Win_fence: {one}"), 36),
        (format!("MPI_Put: {one}"), 12),
        (format!("MPI_Get: {one}"), 12),
        (format!("MPI_Win_free: {one}"), 4),
        (format!("MPI_Intercomm_create: {inter}"), 4),
        (format!("MPI_Send on an intercommunicator: {inter}"), 6),
        (format!("MPI_Recv on an intercommunicator: {inter}"), 6),
        (
            format!("MPI_Intercomm_merge on an intercommunicator: {inter}"),
            4,
        ),
        (format!("MPI_Comm_free on an intercommunicator: {inter}"), 4),
        (
            format!("MPI_Barrier on a communicator merged from an intercommunicator: {inter}"),
            4,
        ),
        (
            format!("MPI_Comm_free on a communicator merged from an intercommunicator: {inter}"),
            4,
        ),
    ]
    .into_iter()
    .collect();
    let got: BTreeMap<String, u64> =
        serde_json::from_value(summary["dropped"].clone()).expect("dropped is a map");
    assert_eq!(got, want, "{summary:#}\n{text}");
    assert_eq!(summary["dropped_events"], 100, "{summary:#}");
    let notes = summary["notes"].to_string();
    assert!(
        notes.contains("68 one-sided call(s) and 32 call(s) making or using intercommunicators"),
        "{notes}"
    );
    // What is left: 3 allreduces and the world barrier on every rank.
    let (program, diags) = perfskel_grammar::parse(&text);
    assert!(diags.is_empty(), "{text}");
    let checked = check(&program, &text, CheckOptions::default());
    assert!(checked.diags.is_empty(), "{:?}\n{text}", checked.diags);
    let info = checked.info.expect("checked");
    for (rank, r) in info.ranks().iter().enumerate() {
        assert_eq!(r.messages_sent, 0, "rank {rank}\n{text}");
        assert_eq!(r.collectives, 4, "rank {rank}\n{text}");
    }
}
/// A grid the application declares (`tests/apps/cancel_grid.c`, or its Fortran twin
/// `cancel_grid_f.f90`: `MPI_Cart_create` of a
/// 2 × 2 grid periodic in dimension 0 only) is the skeleton's topology, dimension order
/// and periods as declared; a receive cancelled every iteration is left out with its
/// completion and counted, and the rest checks clean.
fn declared_grid_and_cancelled_receives(mpi: Mpi, app: &str) {
    let iters = 5u64;
    let (_dir, trace) = record(mpi, app, &["64", &iters.to_string()]);
    let (text, summary) = skeletonize_cli(&trace, &[]);
    assert!(
        text.contains("topology grid(2, 2, periodic = [true, false])"),
        "{text}"
    );
    assert!(
        text.contains("the application's own (MPI_Cart_create)"),
        "{text}"
    );
    assert_eq!(summary["declared_topology"], true, "{summary:#}");
    let got: BTreeMap<String, u64> =
        serde_json::from_value(summary["dropped"].clone()).expect("dropped is a map");
    let want: BTreeMap<String, u64> = [(
        "MPI_Irecv cancelled by MPI_Cancel (left out with its completion)".to_string(),
        N_RANKS as u64 * iters,
    )]
    .into();
    assert_eq!(got, want, "{summary:#}\n{text}");
    assert!(!text.contains("irecv"), "{text}");
    assert!(text.contains(&format!("loop {iters}")), "{text}");
    let (program, diags) = perfskel_grammar::parse(&text);
    assert!(diags.is_empty(), "{text}");
    let checked = check(&program, &text, CheckOptions::default());
    assert!(checked.diags.is_empty(), "{:?}\n{text}", checked.diags);
}
#[test]
fn declared_grid_and_cancelled_receives_openmpi() {
    declared_grid_and_cancelled_receives(Mpi::OpenMpi, "test:cancel_grid");
}
#[test]
fn declared_grid_and_cancelled_receives_mpich() {
    declared_grid_and_cancelled_receives(Mpi::Mpich, "test:cancel_grid");
}
/// The same through the Fortran `use mpi` bindings (Open MPI's call `PMPI_*` directly).
#[test]
fn declared_grid_and_cancelled_receives_fortran_openmpi() {
    declared_grid_and_cancelled_receives(Mpi::OpenMpi, "test:cancel_grid_f");
}
#[test]
fn declared_grid_and_cancelled_receives_fortran_mpich() {
    declared_grid_and_cancelled_receives(Mpi::Mpich, "test:cancel_grid_f");
}

/// Updates sent wherever the data says (`tests/apps/random_updates.c`: random
/// destinations, a pool of any-source receives, DONE messages to every rank and the
/// pool cancelled, twice): each round is one data-addressed exchange, written as rounds
/// of a shift exchange over every other rank with the mean volume, the same program on
/// every rank, each round's messages kept in flight (`req ds0 = isend ... window W`,
/// completed by a `waitall` after the phase); nothing is dropped (the cancels belong to
/// the exchange), it checks clean, the checker's simulation sends the messages the trace
/// sent on average, and the C skeleton runs at 1:1.
fn data_addressed_exchange(mpi: Mpi) {
    let (dir, trace) = record(mpi, "test:random_updates", &["20000", "2"]);
    let (text, summary) = skeletonize_cli(&trace, &[]);
    assert_eq!(summary["dropped_events"], 0, "{summary:#}");
    assert_eq!(summary["rank_conditionals"], 0, "{summary:#}\n{text}");
    assert!(summary["statements"].as_u64() <= Some(20), "{text}");
    let raw = summary["raw_events"].as_u64().expect("raw events");
    let exchanged = summary["exchange_events"]
        .as_u64()
        .expect("exchange events");
    assert!(exchanged * 100 >= raw * 95, "{exchanged} of {raw}\n{text}");
    // The two exchanges, or one loop over the rounds of both when the fold joins them
    // (`loop 58 as i { if i % 33 == 0 { barrier } loop nranks - 1 as other { ... } }`
    // for exchanges of 33 and 25 rounds, each after a barrier): the count of messages
    // below holds either way.
    let exchanges = text.matches("loop nranks - 1 as other {").count();
    assert!((1..=2).contains(&exchanges), "{text}");
    // Sends and receives in flight, as many windows as exchanges, each completed.
    assert_eq!(text.matches(" window ").count(), 2 * exchanges, "{text}");
    assert!(
        text.contains("req ds0 = isend rank((rank + 1 + other) % nranks)"),
        "{text}"
    );
    assert!(
        text.contains("req dr0 = irecv rank((rank - 1 - other) % nranks)"),
        "{text}"
    );
    assert_eq!(text.matches("waitall ds").count(), exchanges, "{text}");
    let sent = traced_sends(&trace);
    let written = checked_sends(&text);
    // Rounds are the mean per rank over nranks - 1 peers, rounded: within half a round
    // ((nranks - 1) / 2 messages) per rank in each of the two exchanges.
    let slack = u64::from(N_RANKS) * u64::from(N_RANKS - 1);
    assert!(
        written.abs_diff(sent) <= slack,
        "{written} vs {sent}\n{text}"
    );
    compile_and_run_1to1(mpi, &dir, &trace);
}

/// The messages all ranks sent in a trace of `N_RANKS` ranks (`MPI_Send`, `MPI_Isend`).
fn traced_sends(trace: &Path) -> u64 {
    traced_sends_np(trace, N_RANKS)
}

fn traced_sends_np(trace: &Path, n_ranks: u32) -> u64 {
    let mut sent = 0u64;
    for rank in 0..n_ranks {
        let path = trace.join(format::rank_file_name(rank));
        let file = std::fs::File::open(&path).expect("rank file");
        let events = RankTrace::read(RankReader::new(file, Some(rank)).expect("header"))
            .expect("events")
            .events;
        sent += events
            .iter()
            .filter(|e| matches!(e.op, Op::Isend | Op::Send))
            .count() as u64;
    }
    sent
}

/// Checks a skeleton (it must check clean) and gives the messages its ranks send in the
/// checker's simulation.
fn checked_sends(text: &str) -> u64 {
    let (program, diags) = perfskel_grammar::parse(text);
    assert!(diags.is_empty(), "{text}");
    let checked = check(&program, text, CheckOptions::default());
    assert!(checked.diags.is_empty(), "{:?}\n{text}", checked.diags);
    let info = checked.info.expect("checked");
    info.ranks().iter().map(|r| r.messages_sent).sum()
}

/// Compiles the skeleton next to `trace` at 1:1 and runs it under `mpi`.
fn compile_and_run_1to1(mpi: Mpi, dir: &tempfile::TempDir, trace: &Path) {
    compile_and_run_1to1_np(mpi, dir, trace, N_RANKS)
}

fn compile_and_run_1to1_np(mpi: Mpi, dir: &tempfile::TempDir, trace: &Path, n_ranks: u32) {
    compile_and_run_at(mpi, dir, trace, n_ranks, "1:1")
}

/// The skeleton `skeletonize_cli` wrote beside `trace`, compiled at `ratio` and run once.
fn compile_and_run_at(mpi: Mpi, dir: &tempfile::TempDir, trace: &Path, n_ranks: u32, ratio: &str) {
    let skel = trace.with_extension("skel");
    let out = dir.path().join("out");
    let compiled = perfskel(&[
        "compile",
        skel.to_str().expect("utf-8"),
        "--ratio",
        ratio,
        "--force",
        "-o",
        out.to_str().expect("utf-8"),
    ]);
    assert!(
        compiled.status.success(),
        "{}",
        String::from_utf8_lossy(&compiled.stderr)
    );
    let ran = {
        let _guard = MPI_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        perfskel(&[
            "run",
            out.to_str().expect("utf-8"),
            "-np",
            &n_ranks.to_string(),
            "--mpi",
            mpi.name(),
            "--repeat",
            "1",
        ])
    };
    assert!(
        ran.status.success(),
        "{}{}",
        String::from_utf8_lossy(&ran.stdout),
        String::from_utf8_lossy(&ran.stderr)
    );
    assert!(
        String::from_utf8_lossy(&ran.stdout).contains("perfskel-result"),
        "{}",
        String::from_utf8_lossy(&ran.stdout)
    );
}

/// Recursive doubling over the rows of a 2-D process grid and the transpose partner
/// (`tests/apps/grid_doubling.c`, a CG solver's communication, all on the world with
/// partners computed from the rank): the partners no direction names on every rank are
/// `rank ^ k`, the same statements at 4 and 8 ranks, no explicit rank and no table;
/// the only rank condition is the transpose exchange the diagonal ranks skip. The
/// checker's simulation sends exactly the trace's messages, and the C skeleton runs.
fn recursive_doubling(mpi: Mpi, n_ranks: u32, xor: &str) {
    let (dir, trace) = record_np(mpi, "test:grid_doubling", &["4000", "30"], n_ranks);
    let (text, summary) = skeletonize_cli(&trace, &[]);
    assert_eq!(summary["dropped_events"], 0, "{summary:#}");
    assert_eq!(
        summary["explicit_peer_statements"], 0,
        "{summary:#}\n{text}"
    );
    assert_eq!(summary["rank_conditionals"], 1, "{summary:#}\n{text}");
    assert!(summary["statements"].as_u64() <= Some(20), "{text}");
    assert!(!text.contains("rank(per_rank"), "{text}");
    assert!(text.contains(&format!("rank(rank ^ {xor})")), "{text}");
    assert_eq!(
        checked_sends(&text),
        traced_sends_np(&trace, n_ranks),
        "{text}"
    );
    compile_and_run_1to1_np(mpi, &dir, &trace, n_ranks);
}
#[test]
fn recursive_doubling_openmpi() {
    // 4 x 2 ranks: rank ^ 2 in the rows, the transpose partner of rank 2 is 4 (^ 6).
    recursive_doubling(Mpi::OpenMpi, 8, "6");
}
#[test]
fn recursive_doubling_mpich() {
    // 2 x 2 ranks: the transpose partner of rank 1 is 2 (^ 3).
    recursive_doubling(Mpi::Mpich, 4, "3");
}

/// A 3-D ghost exchange along x, then y, then z, two swaps per dimension, with faces of
/// three sizes (`tests/apps/halo_dims.c`, the structure of LAMMPS's CommBrick): the
/// three dimensions are one loop over `dim` with `+d(...)` directions and the faces'
/// sizes as a pick, the same program on every rank and nothing dropped; at 12 ranks
/// (3 x 2 x 2) the longer dimension writes its two swaps apart and the two-rank ones
/// loop over theirs, and the fold still meets them, as one loop over the two sides
/// (`shift(dim, 1 - 2 * side)`). It checks clean, the checker's
/// simulation sends the trace's messages, and the C skeleton runs at 1:1.
fn dimension_loops(mpi: Mpi, n_ranks: u32) {
    let (dir, trace) = record_np(mpi, "test:halo_dims", &["24", "16", "12", "20"], n_ranks);
    let (text, summary) = skeletonize_cli(&trace, &[]);
    assert_eq!(summary["dropped_events"], 0, "{summary:#}");
    assert_eq!(summary["rank_conditionals"], 0, "{summary:#}\n{text}");
    assert_eq!(
        summary["explicit_peer_statements"], 0,
        "{summary:#}\n{text}"
    );
    assert!(text.contains(" as dim {"), "{text}");
    // A dimension's two swaps are one loop over the sides where a dimension has more
    // than two ranks; with two ranks everywhere, `loop 2` with `+d(dim)`.
    assert!(
        text.contains("+d(dim)") || text.contains("shift(dim, 1 - 2 * side)"),
        "{text}"
    );
    // The faces: 16 x 12, 24 x 12 and 24 x 16 doubles.
    assert!(
        text.contains("[1536 B, 2304 B, 3072 B][dim]")
            || text.contains("[1.5 KiB, 2.25 KiB, 3 KiB][dim]"),
        "{text}"
    );
    // The same statements at every rank count.
    assert!(summary["statements"].as_u64() <= Some(12), "{text}");
    assert_eq!(
        checked_sends(&text),
        traced_sends_np(&trace, n_ranks),
        "{text}"
    );
    compile_and_run_1to1_np(mpi, &dir, &trace, n_ranks);
}
#[test]
fn dimension_loops_openmpi() {
    // 2 x 2 x 2: every dimension loops over its two swaps.
    dimension_loops(Mpi::OpenMpi, 8);
}
#[test]
fn dimension_loops_openmpi_mixed() {
    // 3 x 2 x 2.
    dimension_loops(Mpi::OpenMpi, 12);
}
#[test]
fn dimension_loops_mpich() {
    // 2 x 2 x 1.
    dimension_loops(Mpi::Mpich, 4);
}

/// A rank's events of its first scatter in a trace of `tests/apps/sparse_scatter.c`:
/// from its first receive on the duplicate communicator to its waitall.
fn first_scatter(trace: &Path, rank: u32) -> Vec<Event> {
    let path = trace.join(format::rank_file_name(rank));
    let file = std::fs::File::open(&path).expect("rank file");
    RankTrace::read(RankReader::new(file, Some(rank)).expect("header"))
        .expect("events")
        .events
        .into_iter()
        .skip_while(|e| e.op != Op::Irecv || e.comm.unwrap_or(0) == 0)
        .take_while(|e| e.op != Op::Waitall)
        .collect()
}

/// The ghost exchange of an irregular sparse product (`tests/apps/sparse_scatter.c`:
/// receives posted from each partner of a pseudo-random coupling graph, sends to each,
/// a waitall, on a duplicate of the world; ranks have 2 or 3 partners at 4 ranks, not
/// grid neighbours), next to a regular ring halo: each scatter is one partner exchange
/// written with every rank's own partners and sizes (`per_rank` tables, slot by slot:
/// the receives posted first, then the sends, then the waits), on the duplicate; the
/// ring halo keeps its directions; the same program on every rank, nothing dropped; it
/// checks clean, the checker's simulation sends exactly the trace's messages, and the C
/// skeleton runs at 1:1.
fn partner_exchange(mpi: Mpi) {
    let (dir, trace) = record(mpi, "test:sparse_scatter", &["20000", "40"]);
    let (text, summary) = skeletonize_cli(&trace, &[]);
    assert_eq!(summary["dropped_events"], 0, "{summary:#}");
    assert_eq!(summary["rank_conditionals"], 0, "{summary:#}\n{text}");
    assert!(summary["statements"].as_u64() <= Some(48), "{text}");
    // Named after the scatter's MPI_Send.
    let source = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apps/sparse_scatter.c"),
    )
    .expect("source");
    let line = source
        .lines()
        .position(|l| l.contains("MPI_Send("))
        .expect("the scatter's send")
        + 1;
    let site = format!("sparse_scatter.c:{line}");
    assert!(
        text.contains(&format!("# Partner exchange from {site}:")),
        "{text}"
    );
    // Each rank's first scatter in the trace: the peers and sizes of its sends, the
    // peers of its receives, in call order.
    let mut sends: Vec<Vec<(i64, u64)>> = Vec::new();
    let mut recvs: Vec<Vec<i64>> = Vec::new();
    for rank in 0..N_RANKS {
        let scatter = first_scatter(&trace, rank);
        sends.push(
            scatter
                .iter()
                .filter(|e| e.op == Op::Send)
                .map(|e| (e.peer.unwrap_or(-9), e.bytes.unwrap_or(0)))
                .collect(),
        );
        recvs.push(
            scatter
                .iter()
                .filter(|e| e.op == Op::Irecv)
                .map(|e| e.peer.unwrap_or(-9))
                .collect(),
        );
    }
    let slots = sends.iter().map(Vec::len).max().unwrap_or(0);
    assert!((2..=3).contains(&slots), "{sends:?}");
    let table = |peers: &dyn Fn(usize) -> Option<i64>| {
        (0..N_RANKS as usize)
            .map(|r| peers(r).unwrap_or(-1).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    for j in 0..slots {
        let to = table(&|r| sends[r].get(j).map(|s| s.0));
        let from = table(&|r| recvs[r].get(j).copied());
        assert!(
            text.contains(&format!("req x{j} = irecv rank(per_rank({from}))")),
            "slot {j}: {from}\n{text}"
        );
        // Sizes: each rank's own, the last where it has no such message.
        let sizes: Vec<String> = sends
            .iter()
            .map(|v| format!("{} B", v.get(j).or(v.last()).map_or(1, |s| s.1)))
            .collect();
        let size = if sizes.iter().all(|s| *s == sizes[0]) {
            sizes[0].clone()
        } else {
            format!("[{}][rank]", sizes.join(", "))
        };
        assert!(
            text.contains(&format!(
                "send rank(per_rank({to})) {size} on dup1 @ \"{site}\""
            )),
            "slot {j}: {to} {size}\n{text}"
        );
    }
    for dir in ["prev", "next"] {
        assert!(text.contains(&format!("irecv {dir} 8 B tag 1")), "{text}");
        assert!(text.contains(&format!("isend {dir} 8 B tag 1")), "{text}");
    }
    // 10 partners over 4 ranks in 40 scatters; the ring's 2 messages per rank in 4 of
    // them: the skeleton sends exactly as many.
    let sent = traced_sends(&trace);
    assert_eq!(sent, 40 * 10 + 4 * 8);
    assert_eq!(checked_sends(&text), sent, "{text}");
    compile_and_run_1to1(mpi, &dir, &trace);
}
#[test]
fn partner_exchange_openmpi() {
    partner_exchange(Mpi::OpenMpi);
}
#[test]
fn partner_exchange_mpich() {
    partner_exchange(Mpi::Mpich);
}

/// The same scatter with each partner's ghosts sent as 4 messages (`sparse_scatter ROWS
/// ITERS 4`, one message per field): 8 to 12 messages a rank on each side, more than a
/// table writes slot by slot, so the exchange is written as the graph itself: a loop
/// over each rank's partners reading its peers and sizes from lists at its own offset
/// (ranks differ in their number of partners, so each has its offset and its count).
/// Nothing is written by the mean: the checker's simulation sends exactly the trace's
/// messages, each rank's receives are completed by one `waitall`, and the C skeleton
/// runs at 1:1.
fn partner_exchange_as_graph(mpi: Mpi) {
    let (dir, trace) = record(mpi, "test:sparse_scatter", &["20000", "40", "4"]);
    let (text, summary) = skeletonize_cli(&trace, &[]);
    assert_eq!(summary["dropped_events"], 0, "{summary:#}");
    assert_eq!(summary["rank_conditionals"], 0, "{summary:#}\n{text}");
    assert!(summary["statements"].as_u64() <= Some(48), "{text}");
    assert!(text.contains("written as the graph itself"), "{text}");
    assert!(!text.contains("req x0 ="), "{text}");
    // Each rank's messages in its first scatter: the loops run the most any rank has.
    let mut sends = Vec::new();
    for rank in 0..N_RANKS {
        let scatter = first_scatter(&trace, rank);
        sends.push(scatter.iter().filter(|e| e.op == Op::Send).count());
    }
    let most = sends.iter().copied().max().unwrap_or(0);
    assert!(most > 8, "{sends:?}");
    assert!(
        text.contains(&format!("loop {most} as partner {{")),
        "{text}"
    );
    assert!(text.contains("waitall x @"), "{text}");
    // 10 partners x 4 blocks over 4 ranks in 40 scatters, and the ring's 8 messages in
    // 4 of them.
    let sent = traced_sends(&trace);
    assert_eq!(sent, 40 * 40 + 4 * 8);
    assert_eq!(checked_sends(&text), sent, "{text}");
    compile_and_run_1to1(mpi, &dir, &trace);
}
#[test]
fn partner_exchange_as_graph_openmpi() {
    partner_exchange_as_graph(Mpi::OpenMpi);
}
#[test]
fn partner_exchange_as_graph_mpich() {
    partner_exchange_as_graph(Mpi::Mpich);
}

/// Ranks that take different code paths through the same collectives
/// (`tests/apps/rendezvous.c`: a second `MPI_Alltoallv` exchange through the first
/// routine again on some ranks, through another routine on the others, as LAMMPS's
/// SHAKE set-up does): the merge writes the ranks' streams apart, so a rank's
/// `alltoallv` meets another rank's from another statement. Their `per_rank` tables
/// are made one, so the counts agree (before, such a skeleton checked clean and
/// failed under `mpirun` with a truncation); it checks clean, the checker's simulation
/// makes every rank's collectives, and the C skeleton runs at 1:1.
fn vector_collectives_on_different_paths(mpi: Mpi) {
    let rounds = 40u64;
    let (dir, trace) = record(mpi, "test:rendezvous", &[&rounds.to_string()]);
    let (text, summary) = skeletonize_cli(&trace, &[]);
    assert_eq!(summary["dropped_events"], 0, "{summary:#}");
    let notes = summary["notes"].to_string();
    assert!(
        notes.contains("vector collective(s)"),
        "{summary:#}\n{text}"
    );
    let (program, diags) = perfskel_grammar::parse(&text);
    assert!(diags.is_empty(), "{text}");
    let checked = check(&program, &text, CheckOptions::default());
    assert!(checked.diags.is_empty(), "{:?}\n{text}", checked.diags);
    let info = checked.info.expect("checked");
    // Per round: two alltoall, two alltoallv and an allreduce on every rank.
    for r in info.ranks() {
        assert_eq!(r.collectives, 5 * rounds, "{text}");
    }
    compile_and_run_1to1(mpi, &dir, &trace);
}
#[test]
fn vector_collectives_on_different_paths_openmpi() {
    vector_collectives_on_different_paths(Mpi::OpenMpi);
}
#[test]
fn vector_collectives_on_different_paths_mpich() {
    vector_collectives_on_different_paths(Mpi::Mpich);
}

#[test]
fn data_addressed_exchange_openmpi() {
    data_addressed_exchange(Mpi::OpenMpi);
}
#[test]
fn data_addressed_exchange_mpich() {
    data_addressed_exchange(Mpi::Mpich);
}

#[test]
fn one_sided_and_intercomm_openmpi() {
    one_sided_and_intercomm(Mpi::OpenMpi);
}
#[test]
fn one_sided_and_intercomm_mpich() {
    one_sided_and_intercomm(Mpi::Mpich);
}

/// Messages unpacked as they arrive (`MPI_Waitany` over the receives of a ring
/// exchange, completing them in a different order every iteration, as LAMMPS's FFT
/// remaps do) make one loop: the completions are written in slot order, at the calls'
/// positions, and the skeleton checks clean.
#[test]
fn waitany_completions_in_data_order_make_one_loop() {
    let iters = 30u64;
    let ranks: Vec<RankTrace> = (0..N_RANKS)
        .map(|rank| {
            let mut s = Synth::new();
            let n = i64::from(N_RANKS);
            let prev = (i64::from(rank) + n - 1) % n;
            let next = (i64::from(rank) + 1) % n;
            let mut req = 0u64;
            let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(rank);
            for _ in 0..iters {
                let first = req + 1;
                for (op, peer) in [
                    (Op::Irecv, prev),
                    (Op::Irecv, next),
                    (Op::Isend, next),
                    (Op::Isend, prev),
                ] {
                    req += 1;
                    s.call(2_000, op, |e| {
                        e.peer = Some(peer);
                        e.bytes = Some(1024);
                        e.tag = Some(0);
                        e.req = Some(req);
                    });
                }
                // The receives complete in the order the messages happened to arrive.
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let order = if seed.is_multiple_of(2) {
                    [first, first + 1]
                } else {
                    [first + 1, first]
                };
                for r in order {
                    s.call(3_000, Op::Waitany, |e| e.reqs = vec![r]);
                }
                s.call(500, Op::Waitall, |e| e.reqs = vec![first + 2, first + 3]);
                s.call(100_000, Op::Allreduce, |e| {
                    e.bytes = Some(8);
                    e.rbytes = Some(8);
                });
            }
            s.finish(rank, N_RANKS)
        })
        .collect();
    let (text, summary) = run_synthetic(&ranks, Algorithm::Exact);
    assert!(text.contains(&format!("loop {iters}")), "{text}");
    assert!(
        summary.statements <= 12,
        "{} statements\n{text}",
        summary.statements
    );
    assert!(!text.contains("if "), "{text}");
}

/// A time step that computes forces, then swaps halos twice (a LAMMPS-like step: the
/// compute before the swap loop is long, between its four swaps short), and ends with an
/// allreduce; `entry_ns` is the force computation.
fn step_with_swaps(steps: u32, entry_ns: u64) -> Vec<RankTrace> {
    (0..2)
        .map(|rank| {
            let mut s = Synth::new();
            let other = 1 - i64::from(rank);
            for _ in 0..steps {
                for swap in 0..4 {
                    let gap = if swap == 0 { entry_ns } else { 10_000 };
                    s.call(gap, Op::Sendrecv, |e| {
                        e.peer = Some(other);
                        e.bytes = Some(4096);
                        e.src = Some(other);
                        e.rbytes = Some(4096);
                        e.tag = Some(0);
                        e.rtag = Some(0);
                    });
                }
                s.call(20_000, Op::Allreduce, |e| {
                    e.bytes = Some(8);
                    e.rbytes = Some(8);
                });
            }
            s.finish(rank, 2)
        })
        .collect()
}

/// The compute before a loop's first iteration is written before the loop where it
/// differs from the compute between iterations (the force computation stays one
/// statement before the swaps, not a quarter of it before each swap), and the time is kept;
/// where the two are alike the loop has one compute.
#[test]
fn compute_before_a_loop_stays_before_it() {
    let (text, summary) = run_synthetic(&step_with_swaps(20, 1_000_000), Algorithm::Exact);
    assert_eq!(summary.loops, 2, "{text}");
    let body: Vec<&str> = text
        .lines()
        .map(str::trim)
        .skip_while(|l| !l.starts_with("loop 20"))
        .filter(|l| !l.starts_with('#'))
        .collect();
    assert_eq!(
        body.get(1..7),
        Some(
            &[
                // The loop computes its 10 us on entering too: 1 ms in all.
                "compute 990 us",
                "loop 4 {",
                "compute 10 us",
                "sendrecv to next 4096 B from next 4096 B tag 0 @ \"app.c:20\"",
                "}",
                "compute 20 us",
            ][..]
        ),
        "{text}"
    );
    // Alike: one mean compute in the loop ((12 + 3 x 10) us over 4 swaps), none before.
    let (text, _) = run_synthetic(&step_with_swaps(20, 12_000), Algorithm::Exact);
    assert!(
        text.contains("loop 20 {\n    # 4 iterations from app.c:20:")
            && text.contains("loop 4 {\n        compute 10.5 us\n"),
        "{text}"
    );
}
