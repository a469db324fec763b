//! Rust back end tests: snapshots of the generated `src/main.rs` for every example
//! skeleton; the runtime crate's topology arithmetic against the checker's; and every
//! example (plus `grammar/every_construct.skel`) compiled to a cargo project, built
//! with `make` and run with the real `mpirun` at 4 ranks under OpenMPI and MPICH.
//!
//! One cargo target directory per MPI library (`<target>/rust-skeletons/<mpi>`) and one
//! project directory per MPI that every example is generated into in turn, so rsmpi and
//! the runtime crate build once per MPI and each example only compiles its `main.rs`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use perfskel_compiler::back::{self, GeneratedFile, RunResult};
use perfskel_compiler::check;
use perfskel_compiler::semantics::{self, Env, Shape};
use perfskel_grammar::ast::*;

use crate::common::{files_in, root, text, MPI_LOCK, OWN, PIPE};

#[allow(dead_code)]
#[path = "../runtime/rust/src/topology.rs"]
mod runtime_topology;

/// Parses and checks `source`, then emits the Rust project at ratio 1.
fn emit(source_name: &str, source: &str) -> (Program, Vec<GeneratedFile>) {
    let (program, diags) = perfskel_grammar::parse(source);
    assert!(diags.is_empty(), "{source_name} does not parse: {diags:?}");
    let verified = match check::verify(program, source, check::Options::default()) {
        Ok(v) => v,
        Err(diags) => panic!("{source_name} does not check: {diags:?}"),
    };
    let options = back::Options {
        ratio: 1,
        ratio_reached: 1.0,
        own_ratios: Default::default(),
        rest_ratio: 1.0,
        fill_loops: Default::default(),
        measure_skips: Default::default(),
        app_time_s: verified.program().app_time.value.seconds(),
        source_name: source_name.to_string(),
        source: source.to_string(),
        job: Default::default(),
    };
    let files = back::rust::emit(&verified, &options);
    (verified.program().clone(), files)
}

fn file<'f>(files: &'f [GeneratedFile], path: &str) -> &'f str {
    match files.iter().find(|f| f.path == path) {
        Some(f) => &f.contents,
        None => panic!(
            "no {path} among {:?}",
            files.iter().map(|f| &f.path).collect::<Vec<_>>()
        ),
    }
}

fn examples() -> Vec<(String, String)> {
    files_in("examples/skeletons", "skel")
        .into_iter()
        .map(|path| {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let source = std::fs::read_to_string(&path).expect("example readable");
            (name, source)
        })
        .collect()
}

#[test]
fn snapshots_of_every_example() {
    let examples = examples();
    assert!(examples.len() >= 7, "examples missing: {}", examples.len());
    for (name, source) in examples {
        for ratio in [10, 100, 1000] {
            rust_snapshot(&name, &source, ratio);
        }
    }
}

/// Loop variables in Rust: `for v_step in 0_i64..N` when the body reads the variable
/// (`for _` otherwise), and `v_step` in conditions, peers, roots and inner counts.
#[test]
fn snapshot_with_loop_variables() {
    let source = std::fs::read_to_string(root().join("tests/data/dsl/ok/loop_variables.skel"))
        .expect("loop_variables.skel");
    rust_snapshot("loop_variables.skel", &source, 10);
}

/// A pipeline at 1:10: its loop between `sk.fill_begin()` and `sk.fill_end()`, each
/// iteration ending in `sk.fill_iteration()`.
#[test]
fn snapshot_of_a_pipeline() {
    let source = std::fs::read_to_string(root().join("tests/data/dsl/ok/pipeline.skel"))
        .expect("pipeline.skel");
    rust_snapshot("pipeline.skel", &source, 10);
}

/// A partner exchange written as its graph at 1:1: its long lists are references to
/// arrays (constants Rust keeps in static memory, not arrays built at every
/// evaluation), the sizes in bytes.
#[test]
fn snapshot_of_a_partner_graph() {
    let source = std::fs::read_to_string(root().join("tests/data/dsl/ok/partner_graph.skel"))
        .expect("partner_graph.skel");
    rust_snapshot("partner_graph.skel", &source, 1);
}

/// `snapshots/rust_mpi/<stem>@<ratio>.snap`: source, report, scaled skeleton, main.rs.
fn rust_snapshot(name: &str, source: &str, ratio: u64) {
    let stem = name.trim_end_matches(".skel").to_string();
    let compiled = match perfskel::cmd_compile::compile(
        name,
        source,
        ratio,
        Some(back::Backend::Rust),
        &perfskel_compiler::scale::Model::default(),
        perfskel_compiler::scale::Target::default(),
    ) {
        Ok(c) => c,
        Err(_) => panic!("{name} does not compile at 1:{ratio}"),
    };
    let main_rs = file(&compiled.files, "src/main.rs");
    insta::with_settings!({
        snapshot_path => "../snapshots/rust_mpi",
        prepend_module_to_snapshot => false,
        omit_expression => true,
        description => format!("{name} compiled for 1:{ratio} with the Rust back end"),
    }, {
        insta::assert_snapshot!(
            format!("{stem}@{ratio}"),
            format!(
                "SOURCE {name}\n{source}\nREPORT\n{}\n\nSCALED SKELETON\n{}\nsrc/main.rs\n{main_rs}",
                compiled.report,
                perfskel_grammar::print(&compiled.scaled.program)
            )
        );
    });
}

#[test]
fn project_files_are_self_contained_and_deterministic() {
    let (name, source) = examples()
        .into_iter()
        .find(|(n, _)| n == "stencil2d.skel")
        .expect("stencil2d example");
    let (_, files) = emit(&name, &source);
    let (_, again) = emit(&name, &source);
    assert_eq!(files, again, "emission is deterministic");
    let manifest = file(&files, "Cargo.toml");
    assert!(manifest.contains("\n[workspace]\n"));
    assert!(manifest.contains("perfskel-runtime = { path = \"perfskel-runtime\" }"));
    assert!(manifest.contains("mpi = { version = \"0.8.2\""));
    let makefile = file(&files, "Makefile");
    assert!(makefile.contains("\t$(CARGO) build --release\n"));
    assert!(makefile.contains("export MPICC"));
    assert!(makefile.contains("export CARGO_TARGET_DIR"));
    let job = file(&files, "job.slurm");
    assert!(job.contains("#SBATCH --ntasks=16\n"));
    assert!(job.contains("\n    srun ./skeleton\n"));
    let root_dir = root().to_string_lossy().into_owned();
    for f in &files {
        assert!(
            !f.contents.contains(&root_dir),
            "{} has an absolute path",
            f.path
        );
    }
    // The runtime's sources are embedded completely and verbatim.
    let mut on_disk: Vec<String> = files_in("runtime/rust/src", "rs")
        .iter()
        .map(|p| {
            format!(
                "perfskel-runtime/src/{}",
                p.file_name().unwrap_or_default().to_string_lossy()
            )
        })
        .collect();
    on_disk.push("perfskel-runtime/Cargo.toml".into());
    on_disk.sort();
    let mut embedded: Vec<String> = files
        .iter()
        .filter(|f| f.path.starts_with("perfskel-runtime/"))
        .map(|f| f.path.clone())
        .collect();
    embedded.sort();
    assert_eq!(embedded, on_disk);
    for path in &embedded {
        let disk = std::fs::read_to_string(
            root()
                .join("runtime/rust")
                .join(&path["perfskel-runtime/".len()..]),
        )
        .expect("runtime file");
        assert_eq!(
            file(&files, path),
            disk,
            "{path} differs from the runtime crate"
        );
    }
}

/// The runtime resolves every direction exactly as the checker does.
#[test]
fn runtime_topology_agrees_with_the_checker() {
    use runtime_topology as rt;
    let topologies: Vec<(Topology, rt::Topology, u64)> = vec![
        (Topology::Ring, rt::Topology::Ring, 5),
        (Topology::Chain, rt::Topology::Chain, 5),
        (
            Topology::Grid {
                dims: vec![3, 4],
                periodic: vec![false, true],
            },
            rt::Topology::grid_periodic(&[3, 4], &[false, true]),
            12,
        ),
        (
            Topology::Grid {
                dims: vec![2, 3, 2],
                periodic: vec![true, true, true],
            },
            rt::Topology::torus(&[2, 3, 2]),
            12,
        ),
        (Topology::Hypercube, rt::Topology::Hypercube, 8),
        (
            Topology::Tree { arity: 3 },
            rt::Topology::Tree { arity: 3 },
            13,
        ),
        (Topology::Star, rt::Topology::Star, 6),
        (Topology::Complete, rt::Topology::Complete, 4),
        (
            Topology::Graph {
                neighbors: vec![(0, vec![1, 2]), (2, vec![0])],
            },
            rt::Topology::graph(&[(0, &[1, 2]), (2, &[0])]),
            3,
        ),
    ];
    let axis = |dim, forward| {
        (
            Direction::Axis(AxisDir {
                dim,
                forward,
                spelling: AxisSpelling::Numbered,
            }),
            rt::Dir::Axis { dim, forward },
        )
    };
    let mut directions = vec![
        (Direction::Next, rt::Dir::Next),
        (Direction::Prev, rt::Dir::Prev),
        (Direction::Parent, rt::Dir::Parent),
        (Direction::Hub, rt::Dir::Hub),
        (Direction::Offset(vec![1, -1]), rt::Dir::Offset(vec![1, -1])),
        (
            Direction::Offset(vec![-1, 2, 1]),
            rt::Dir::Offset(vec![-1, 2, 1]),
        ),
    ];
    for dim in 0..3 {
        directions.push(axis(dim, true));
        directions.push(axis(dim, false));
    }
    for i in 0..5 {
        directions.push((Direction::Child(Expr::int(i)), rt::Dir::Child(i)));
        directions.push((Direction::Leaf(Expr::int(i)), rt::Dir::Leaf(i)));
        directions.push((Direction::Bit(Expr::int(i)), rt::Dir::Bit(i)));
        directions.push((Direction::Neighbor(Expr::int(i)), rt::Dir::Neighbor(i)));
    }
    let mut compared = 0;
    for (topology, rt_topology, n) in &topologies {
        let shape = Shape::of_topology(topology, *n);
        let rt_shape = rt::Shape::of_topology(rt_topology, *n);
        assert_eq!(rt_topology.mismatch(*n), None);
        for rank in 0..*n {
            assert_eq!(shape.coords(rank), rt_shape.coords(rank));
            let env = Env {
                rank,
                n_ranks: *n,
                coords: shape.coords(rank),
            };
            for (dir, rt_dir) in &directions {
                let expected = shape.peer(rank, *n, dir, &env);
                let got = rt_shape.peer(rank, *n, rt_dir);
                match expected {
                    Ok(peer) => assert_eq!(got, Ok(peer), "{topology:?} rank {rank} {dir:?}"),
                    Err(_) => assert!(got.is_err(), "{topology:?} rank {rank} {dir:?}: {got:?}"),
                }
                compared += 1;
            }
        }
    }
    // Sub-grids: the checker's cart_sub shapes are the kept dimensions in order.
    let grid = rt::Shape::of_topology(&rt::Topology::grid_periodic(&[4, 3], &[true, false]), 12);
    assert_eq!(
        grid.sub_grid(&[1]),
        Ok(rt::Shape::Grid {
            dims: vec![3],
            periodic: vec![false]
        })
    );
    assert!(compared > 1000);
    let _ = semantics::depends_on_rank(&Expr::int(0));
}

/// The example turned into a 4-rank program that runs in a second or two: topologies
/// resized, per-rank lists cut to 4 entries, loop counts capped at 3, compute spans a
/// tenth as long. Returns the printed text, which is then parsed and checked anew.
fn four_rank_variant(source: &str) -> String {
    let (mut program, diags) = perfskel_grammar::parse(source);
    assert!(diags.is_empty(), "{diags:?}");
    program.ranks.value = 4;
    program.topology.value = match &program.topology.value {
        Topology::Grid { dims, periodic } => {
            let dims = match dims.len() {
                1 => vec![4],
                2 => vec![2, 2],
                n => [vec![2, 2], vec![1; n - 2]].concat(),
            };
            Topology::Grid {
                dims,
                periodic: periodic.clone(),
            }
        }
        Topology::Graph { neighbors } => Topology::Graph {
            neighbors: neighbors
                .iter()
                .filter(|(r, _)| *r < 4)
                .map(|(r, l)| (*r, l.iter().copied().filter(|&p| p < 4).collect()))
                .collect(),
        },
        other => other.clone(),
    };
    shrink_block(&mut program.body);
    perfskel_grammar::print(&program)
}

fn shrink_time(time: &mut TimeSpec) {
    let tenth = |d: &mut Spanned<Duration>| d.value.value /= 10.0;
    match time {
        TimeSpec::Fixed(d) => tenth(d),
        TimeSpec::PerRank(list) => {
            list.truncate(4);
            list.iter_mut().for_each(tenth);
        }
        TimeSpec::Normal { mean, stddev } => {
            tenth(mean);
            tenth(stddev);
        }
        TimeSpec::Uniform { low, high } => {
            tenth(low);
            tenth(high);
        }
        TimeSpec::Pick(p) => p.values.iter_mut().for_each(shrink_time),
    }
}

fn shrink_block(block: &mut Block) {
    for stmt in &mut block.stmts {
        match &mut stmt.kind {
            StmtKind::Loop(l) => {
                cap_literals(&mut l.count);
                shrink_block(&mut l.body);
            }
            StmtKind::If(i) => shrink_if(i),
            StmtKind::Compute(c) => shrink_time(&mut c.time),
            StmtKind::Collective(c) => {
                if let Some(SizeSpec::PerRank(list)) = &mut c.size {
                    list.truncate(4);
                }
            }
            _ => {}
        }
    }
}

fn shrink_if(i: &mut If) {
    shrink_block(&mut i.then_block);
    match &mut i.else_branch {
        Some(Else::Block(b)) => shrink_block(b),
        Some(Else::If(next)) => shrink_if(next),
        None => {}
    }
}

/// Integer literals above 3 in a loop count become 3 (`40 * (nranks - 1)` becomes
/// `3 * (nranks - 1)`, which still matches the workers' `loop 3`).
fn cap_literals(e: &mut Expr) {
    match &mut e.kind {
        ExprKind::Int(v) if *v > 3 => *v = 3,
        ExprKind::Unary(_, x) => cap_literals(x),
        ExprKind::Binary(_, l, r) => {
            cap_literals(l);
            cap_literals(r);
        }
        _ => {}
    }
}

/// Every collective, blocking and nonblocking, on the world and on sub-communicators,
/// with fixed and per-rank sizes (reductions of whole doubles and of odd byte counts),
/// and point-to-point with `any`, `waitany` and `test`: the runtime's less travelled
/// paths, at 4 ranks.
const COLLECTIVES: &str = "skeleton collectives
ranks 4
topology torus(2, 2)
app_time 1 s

comm pair = split(world, color = rank / 2)
comm row = cart_sub(world, keep = [1])
comm copy = dup(row)
loop 2 {
    barrier
    bcast 3 B root 1
    reduce 16 B root 1 on pair
    allreduce 5 B on row
    gather 24 B root 3
    gatherv per_rank(8 B, 16 B, 0 B, 3 B) root 1
    scatter 7 B root 0 on copy
    scatterv per_rank(1 B, 2 B, 3 B, 4 B) root 2
    allgather 16 B on pair
    allgatherv per_rank(8 B, 8 B, 16 B, 1 B)
    alltoall 9 B
    alltoallv per_rank(1 B, 8 B, 0 B, 5 B)
    reduce_scatter 8 B
    scan 12 B on row
    req NEXT = ibarrier
    req b = ibcast 100 B root 3
    req c = ireduce 8 B root 1 on pair
    req d = iallreduce 7 B
    req e = igather 16 B root 0 on row
    req f = igatherv per_rank(8 B, 1 B, 2 B, 3 B) root 2
    req g = iscatter 24 B root 1
    req h = iscatterv per_rank(4 B, 4 B, 8 B, 0 B) root 0
    req i = iallgather 3 B
    req j = iallgatherv per_rank(1 B, 2 B, 3 B, 4 B)
    req k = ialltoall 16 B on copy
    req l = ialltoallv per_rank(2 B, 0 B, 8 B, 1 B)
    req m = ireduce_scatter 16 B
    req None = iscan 8 B
    waitall NEXT, b, c, d, e, f, g, h, i, j, k, l, m, None
    if rank == 0 {
        recv any 1 KiB tag 4
        recv any 1 KiB tag 4
        recv any 1 KiB tag 4
    } else {
        send rank(0) 1 KiB tag 4
    }
    req x = irecv offset(1, 1) 2 KiB tag 5
    req y = isend offset(-1, -1) 2 KiB tag 5
    test x
    waitany x, y
    waitany x, y
    sendrecv to east 64 KiB from west 64 KiB tag 6 on copy
    compute normal(1 ms, 100 us)
    compute per_rank(1 ms, 2 ms, 1 ms, 2 ms) working_set 3 MiB
}
";

#[derive(Clone, Copy, Debug)]
enum Mpi {
    OpenMpi,
    Mpich,
}

impl Mpi {
    fn name(self) -> &'static str {
        match self {
            Mpi::OpenMpi => "openmpi",
            Mpi::Mpich => "mpich",
        }
    }
}

/// The cargo target directories live where `perfskel run` puts them
/// (`<cache>/cargo-target-<mpi>`) in the tests' shared cache, so the demo test reuses
/// the rsmpi these tests build.
fn target_dir() -> PathBuf {
    crate::common::shared_cache_dir()
}

/// Writes `files` into `dir`, replacing the previous example's.
fn write_project(dir: &Path, files: &[GeneratedFile]) {
    for f in files {
        let path = dir.join(&f.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create project dirs");
        }
        // Unchanged files keep their modification time, so cargo does not rebuild the
        // runtime crate for every example.
        if std::fs::read_to_string(&path).ok().as_deref() != Some(f.contents.as_str()) {
            std::fs::write(&path, &f.contents).expect("write generated file");
        }
    }
}

const OWN_NAME: &str = "own.skel";
const PIPE_NAME: &str = "pipe.skel";

/// Builds and runs every example's 4-rank variant, `COLLECTIVES` and the runtime's
/// hand-written `halo` example under `mpi`.
fn run_examples(mpi: Mpi) {
    let cargo_target = target_dir().join(format!("cargo-target-{}", mpi.name()));
    let project = target_dir().join("projects").join(mpi.name());
    let mut programs: Vec<(String, String)> = examples()
        .into_iter()
        .map(|(name, source)| (name, four_rank_variant(&source)))
        .collect();
    let every = std::fs::read_to_string(root().join("grammar/every_construct.skel"))
        .expect("every_construct.skel");
    programs.push(("every_construct.skel".into(), four_rank_variant(&every)));
    programs.push(("collectives.skel".into(), COLLECTIVES.into()));
    // Loop variables in every place an expression goes, shortened to run in a moment.
    let loop_variables =
        std::fs::read_to_string(root().join("tests/data/dsl/ok/loop_variables.skel"))
            .expect("loop_variables.skel")
            .replace("loop 500 as step", "loop 120 as step")
            .replace("compute 3 ms", "compute 300 us");
    programs.push(("loop_variables.skel".into(), loop_variables));
    // Answers to the rank the last receive from any rank got its message from.
    let wildcard_replies =
        std::fs::read_to_string(root().join("tests/data/dsl/ok/wildcard_replies.skel"))
            .expect("wildcard_replies.skel");
    programs.push(("wildcard_replies.skel".into(), wildcard_replies));
    // Workers taking tasks while they come (`while recv`).
    let task_farm = std::fs::read_to_string(root().join("tests/data/dsl/ok/task_farm.skel"))
        .expect("task_farm.skel");
    programs.push(("task_farm.skel".into(), task_farm));
    // The same at 2 ranks on a chain: the worker receives from a grid direction.
    let task_pair = std::fs::read_to_string(root().join("tests/data/dsl/ok/task_pair.skel"))
        .expect("task_pair.skel");
    programs.push(("task_pair.skel".into(), task_pair));
    // A partner exchange written as its graph: long lists of peers and sizes.
    let partner_graph =
        std::fs::read_to_string(root().join("tests/data/dsl/ok/partner_graph.skel"))
            .expect("partner_graph.skel");
    programs.push(("partner_graph.skel".into(), partner_graph));
    // Communication that loops cut less than K, at 1:10 (below): the measuring pass.
    programs.push((OWN_NAME.into(), OWN.into()));
    // A pipeline at 1:10: its loop timed for its fill.
    programs.push((PIPE_NAME.into(), PIPE.into()));
    // The hand-written example of the runtime crate, built as the project's main.rs.
    programs.push(("halo".into(), String::new()));
    let halo = std::fs::read_to_string(root().join("runtime/rust/examples/halo.rs"))
        .expect("halo example");
    // The workspace's lock file pins the project's dependencies to the versions the
    // workspace builds (cargo drops the entries the project does not use).
    std::fs::create_dir_all(&project).expect("project dir");
    if !project.join("Cargo.lock").exists() {
        std::fs::copy(root().join("Cargo.lock"), project.join("Cargo.lock")).expect("copy lock");
    }
    let mut failures = BTreeMap::new();
    for (name, source) in programs {
        let (expected_name, app_time_s, n_ranks) = if name == "halo" {
            let main_rs = GeneratedFile {
                path: "src/main.rs".into(),
                contents: halo.clone(),
            };
            write_project(&project, &[main_rs]);
            ("halo".to_string(), 0.5, 4)
        } else if name == OWN_NAME || name == PIPE_NAME {
            let compiled = perfskel_compiler::pipeline::compile(
                &name,
                &source,
                10,
                Some(back::Backend::Rust),
                &perfskel_compiler::scale::Model::default(),
                perfskel_compiler::scale::Target::Model,
            )
            .unwrap_or_else(|_| panic!("{name} compiles at 1:10"));
            write_project(&project, &compiled.files);
            let app_time_s = compiled.app_time.value.seconds();
            (name.trim_end_matches(".skel").to_string(), app_time_s, 2)
        } else {
            let (program, files) = emit(&name, &source);
            write_project(&project, &files);
            (
                program.name.value.name.clone(),
                program.app_time.value.seconds(),
                program.ranks.value,
            )
        };
        let _ = std::fs::remove_file(project.join("skeleton"));
        let build = Command::new("make")
            .current_dir(&project)
            .env("MPICC", format!("mpicc.{}", mpi.name()))
            .env("CARGO_TARGET_DIR", &cargo_target)
            .output()
            .expect("make runs");
        if !build.status.success() {
            failures.insert(name, format!("make failed:\n{}", text(&build.stderr)));
            continue;
        }
        let warnings: Vec<&str> = std::str::from_utf8(&build.stderr)
            .unwrap_or("")
            .lines()
            .filter(|l| l.starts_with("warning"))
            .collect();
        if !warnings.is_empty() {
            failures.insert(name, format!("warnings:\n{}", text(&build.stderr)));
            continue;
        }
        // Generated code fits its ecosystem: rustfmt leaves it as it is, and clippy has
        // nothing to say (under one MPI: the code is the same under both).
        if name != "halo" {
            let fmt = Command::new("rustfmt")
                .args(["--check", "--edition", "2021"])
                .arg(project.join("src/main.rs"))
                .output()
                .expect("rustfmt runs");
            if !fmt.status.success() {
                failures.insert(name, format!("rustfmt --check:\n{}", text(&fmt.stdout)));
                continue;
            }
            if let Mpi::OpenMpi = mpi {
                let clippy = Command::new("cargo")
                    .args(["clippy", "--release", "--quiet", "--", "-D", "warnings"])
                    .current_dir(&project)
                    .env("MPICC", format!("mpicc.{}", mpi.name()))
                    .env("CARGO_TARGET_DIR", &cargo_target)
                    .output()
                    .expect("cargo clippy runs");
                if !clippy.status.success() || !clippy.stderr.is_empty() {
                    failures.insert(name, format!("cargo clippy:\n{}", text(&clippy.stderr)));
                    continue;
                }
            }
        }
        let mut run = Command::new(format!("mpirun.{}", mpi.name()));
        if let Mpi::OpenMpi = mpi {
            run.arg("--oversubscribe")
                .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        }
        // At 1:1 there is no warm-up pass unless asked for: ask under Open MPI.
        let warmup = matches!(mpi, Mpi::OpenMpi);
        if warmup {
            run.env("PERFSKEL_WARMUP", "on");
        }
        let np = n_ranks.to_string();
        run.args(["-np", &np, "./skeleton"]).current_dir(&project);
        let output = {
            let _guard = MPI_LOCK.lock().unwrap_or_else(|e| e.into_inner());
            run.output().expect("mpirun runs")
        };
        let stdout = text(&output.stdout);
        if name == "cg.skel" {
            // A job with another rank count than the skeleton's is refused clearly.
            let mut wrong = Command::new(format!("mpirun.{}", mpi.name()));
            if let Mpi::OpenMpi = mpi {
                wrong
                    .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                    .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
            }
            wrong.args(["-np", "2", "./skeleton"]).current_dir(&project);
            let refused = {
                let _guard = MPI_LOCK.lock().unwrap_or_else(|e| e.into_inner());
                wrong.output().expect("mpirun runs")
            };
            let stderr = text(&refused.stderr);
            if refused.status.success()
                || !stderr.contains("skeleton `cg` is written for 4 ranks, the job has 2")
            {
                failures.insert(format!("{name} at 2 ranks"), stderr);
            }
        }
        let result = RunResult::find_in(&stdout);
        let ratio = if name == OWN_NAME || name == PIPE_NAME {
            10
        } else {
            1
        };
        match result {
            // At 1:10, the pipeline's fill (rank 1's wait for rank 0's first block)
            // counts once, the rest of the time by the ratio; it shows where each rank
            // had a core (about 21 ms; a run slowed past 1.5 times that shared one).
            Some(r)
                if name == PIPE_NAME
                    && output.status.success()
                    && r.ratio == ratio
                    && (r.fill_s > 0.0 || r.skeleton_s > 0.032)
                    && r.fill_s < 0.5 * r.skeleton_s
                    && (r.predicted_s - (r.rest * (r.skeleton_s - r.fill_s) + r.fill_s)).abs()
                        < 1e-4 * r.rest => {}
            // At 1:10, a measuring pass timed the allreduce (once) and the bcast (x3),
            // and the rest of the time is multiplied by the rest ratio.
            Some(r)
                if ratio > 1
                    && output.status.success()
                    && r.ratio == ratio
                    && r.own_s > 0.0
                    && r.own_s < r.skeleton_s
                    && r.own_app_s > r.own_s
                    && r.own_app_s < 3.0 * r.own_s + 1e-6
                    && r.rest > r.reached
                    && (r.predicted_s - (r.rest * (r.skeleton_s - r.own_s) + r.own_app_s))
                        .abs()
                        < 1e-4 * r.rest => {}
            Some(r)
                if ratio == 1
                    && output.status.success()
                    && r.skeleton == expected_name
                    && r.backend == "rust"
                    && r.ranks == n_ranks
                    && r.ratio == 1
                    && r.skeleton_s > 0.0
                    && (r.predicted_s - r.skeleton_s).abs() < 1e-5
                    && (r.app_time_s - app_time_s).abs() < 1e-5
                    && (r.warmup_s > 0.0) == warmup
                    && stdout.matches("perfskel-result").count() == 1 => {}
            _ => {
                failures.insert(
                    name,
                    format!(
                        "run: {}\nstdout:\n{stdout}\nstderr:\n{}",
                        output.status,
                        text(&output.stderr)
                    ),
                );
            }
        }
    }
    assert!(failures.is_empty(), "under {}: {failures:#?}", mpi.name());
}

#[test]
fn examples_build_and_run_under_openmpi() {
    run_examples(Mpi::OpenMpi);
}

#[test]
fn examples_build_and_run_under_mpich() {
    run_examples(Mpi::Mpich);
}

/// Two Rust skeletons of one name (one application at 1:10 and at 1:100) build into the
/// same cargo target directory: `run` of each runs its own program, in any order (cargo
/// took the other project's build for this one's: same package, same relative paths).
#[test]
fn two_projects_of_one_name_each_run_their_own_program() {
    let dir = tempfile::tempdir().expect("tempdir");
    let skel = dir.path().join("same.skel");
    std::fs::write(
        &skel,
        "skeleton same\nranks 2\ntopology ring\napp_time 2 s\nloop 100 {\n    compute 1 ms\n    sendrecv to next 8 B from prev 8 B\n}\n",
    )
    .expect("write skeleton");
    let perfskel = |args: &[&str]| {
        let _guard = MPI_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let out = Command::new(env!("CARGO_BIN_EXE_perfskel"))
            .args(args)
            .current_dir(dir.path())
            .env("PERFSKEL_CACHE_DIR", target_dir())
            .env("PERFSKEL_NO_CALIBRATE", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .output()
            .expect("the perfskel binary runs");
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    };
    for k in ["10", "100"] {
        perfskel(&[
            "compile",
            "same.skel",
            "--ratio",
            &format!("1:{k}"),
            "--backend",
            "rust",
            "-o",
            &format!("out-{k}"),
        ]);
    }
    for k in ["10", "100", "10"] {
        let out = perfskel(&["run", &format!("out-{k}"), "-np", "2", "--repeat", "1"]);
        assert!(
            out.contains(&format!(" ratio={k} ")),
            "out-{k} ran another program:\n{out}"
        );
    }
}
