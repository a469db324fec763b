//! `perfskel validate`: takes the applications, scenarios and ratio to validate, gives a
//! report of how well skeletons predict the applications' times. It writes the example
//! applications (embedded here), a timing shim, a competing CPU-bound job and one
//! launcher script per scenario into a work directory, then drives
//! `perfskel_studies::validate::driver` with the real [`runner::ProcessRunner`] and
//! renders the evaluation (table or JSON on stdout; JSON, CSV, text and SVG in the work
//! directory). The method and the scenarios are documented in `docs/validate.md`.

mod runner;
pub(crate) use runner::app_time;

use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use perfskel_compiler::back::Backend;
use perfskel_studies::validate::driver::{drive, Runner};
use perfskel_studies::validate::evaluate::{evaluate, Report};
use perfskel_studies::validate::{
    plot, report, Mode, Mpi, Plan, Request, Scenario, APPS, SCENARIOS,
};

/// The example applications and the pattern programs of `tests/apps/`, embedded so the
/// harness works outside the repository.
const APP_SOURCES: &[(&str, &str)] = &[
    ("stencil.c", include_str!("../examples/apps/stencil.c")),
    ("cg.c", include_str!("../examples/apps/cg.c")),
    ("ring.c", include_str!("../examples/apps/ring.c")),
    ("transpose.c", include_str!("../examples/apps/transpose.c")),
    (
        "tree_reduce.c",
        include_str!("../examples/apps/tree_reduce.c"),
    ),
    ("rowcol.c", include_str!("../examples/apps/rowcol.c")),
    (
        "master_worker.c",
        include_str!("../examples/apps/master_worker.c"),
    ),
    ("halo_dims.c", include_str!("../tests/apps/halo_dims.c")),
    ("bucket_sort.c", include_str!("../tests/apps/bucket_sort.c")),
    ("multigrid.c", include_str!("../tests/apps/multigrid.c")),
    // Inputs of the installed programs (LAMMPS, HPCC).
    ("in.melt", include_str!("../scripts/real-apps/in.melt")),
    (
        "hpccinf.txt",
        include_str!("../scripts/real-apps/hpccinf.txt"),
    ),
];

/// Linked into every application: a PMPI wrapper of `MPI_Init` and `MPI_Finalize` that
/// prints, on rank 0, the time between them (both after a barrier), which is what a
/// skeleton's time × K predicts. The application's own code is unchanged.
pub(crate) const TIMING_SHIM: &str = include_str!("../runtime/c/app_time.c");

/// The competing job: spins on one core for at most the given number of seconds (the
/// harness kills it as soon as the measured run ends).
const BURN: &str = r#"/* perfskel validate: a CPU-bound competing job, bounded in time. */
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    double limit = argc > 1 ? atof(argv[1]) : 60.0;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    volatile double x = 1.0;
    for (;;) {
        for (int i = 0; i < 1000000; i++) x = x * 1.0000001 + 1e-9;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((double)(now.tv_sec - start.tv_sec) + 1e-9 * (double)(now.tv_nsec - start.tv_nsec) > limit)
            return 0;
    }
}
"#;

/// Marks a directory as a validation work directory, which the harness may overwrite.
const MARKER: &str = ".perfskel-validate";

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Format {
    /// Aligned table, summary, negative control and failures.
    Table,
    /// The whole report as JSON.
    Json,
    /// One line per application, scenario and method.
    Csv,
}

#[derive(clap::Args)]
pub struct Args {
    /// Applications to validate, comma-separated (default: all; quick mode: stencil,cg).
    #[arg(long, value_delimiter = ',', value_name = "A,B")]
    pub apps: Option<Vec<String>>,
    /// Scenarios, comma-separated (default: all; quick mode: base,competing); base is
    /// always run.
    #[arg(long, value_delimiter = ',', value_name = "S1,S2")]
    pub scenarios: Option<Vec<String>>,
    /// K of the target ratio 1:K (default 100; quick mode 10).
    #[arg(long, value_name = "K")]
    pub ratio: Option<u64>,
    /// Back ends whose skeletons are run, comma-separated: c, rust.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "c,rust",
        default_value = "c"
    )]
    pub backends: Vec<String>,
    /// Runs of each application per scenario (the median counts, the spread of the runs
    /// is shown beside each error; default 3 in full mode, 1 with --quick). Skeletons
    /// run as `perfskel run` runs them with no flag (3 to 10 runs, more while they
    /// spread; its answer, the median run, is the prediction); once each with --quick.
    #[arg(long, value_name = "N")]
    pub repeat: Option<u32>,
    /// Check that the harness runs end to end: small problems, 2 applications, 2
    /// scenarios, ratio 1:10 (about a minute).
    #[arg(long)]
    pub quick: bool,
    /// List the applications and scenarios and exit.
    #[arg(long)]
    pub list: bool,
    /// Report format on standard output.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Also write the SVG plot (predicted vs measured) to this file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Work directory: sources, builds, traces, skeletons, logs and results.
    #[arg(short = 'o', long = "workdir", default_value = "perfskel-validate")]
    pub workdir: PathBuf,
    /// Limit of each run in seconds (default 300; quick mode 60); a run that reaches it
    /// is killed with its whole process group and reported as timed out.
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<u64>,
    /// Use a non-empty work directory that is not one of ours, overwrite `--plot`.
    #[arg(long)]
    pub force: bool,
    /// No progress lines on stderr.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

pub fn run(args: Args) -> Result<ExitCode, String> {
    if args.list {
        print!("{}", listing());
        return Ok(ExitCode::SUCCESS);
    }
    let mode = if args.quick { Mode::Quick } else { Mode::Full };
    let backends = args
        .backends
        .iter()
        .map(|b| {
            Backend::from_name(b).ok_or_else(|| format!("unknown back end `{b}`; known: c, rust"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let plan = Plan::new(
        mode,
        &Request {
            apps: args.apps.clone(),
            scenarios: args.scenarios.clone(),
            ratio: args.ratio,
            backends: Some(backends),
            repeats: args.repeat,
        },
    )?;
    if let Some(plot) = &args.plot {
        crate::files::check_new_file(plot, args.force)?;
    }
    check_tools(&plan)?;
    let workdir = prepare_workdir(&args.workdir, &plan, args.force)?;
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the perfskel binary: {e}"))?;
    let limit = Duration::from_secs(args.timeout.unwrap_or(match mode {
        Mode::Full => 300,
        Mode::Quick => 60,
    }));
    let started = Instant::now();
    let load_start = load_average();
    let mut runner = runner::ProcessRunner {
        exe,
        workdir: workdir.clone(),
        limit,
        n_ranks: plan.n_ranks,
        started,
        quiet: args.quiet,
        n_logged: 0,
        model: None,
        built_programs: Default::default(),
    };
    if plan.scenarios.iter().any(|s| s.competing_jobs > 0) {
        runner.progress("build the competing job");
        build_burn(&workdir)?;
    }
    runner::catch_interrupts();
    let observations = drive(&plan, &mut runner);
    if runner::interrupted() {
        eprintln!(
            "perfskel validate: interrupted; the runs so far are logged in {}",
            workdir.join("logs").display()
        );
        return Ok(ExitCode::from(130));
    }
    let mut report = evaluate(&plan, &observations);
    report.conditions = vec![
        ("machine".into(), machine()),
        ("load average at start".into(), load_start),
        ("load average at end".into(), load_average()),
        (
            "wall time".into(),
            format!("{:.0} s", started.elapsed().as_secs_f64()),
        ),
    ];
    write_results(&workdir, &report)?;
    if let Some(path) = &args.plot {
        let svg = plot::render(&report)?;
        crate::files::write_new_file(path, svg.as_bytes(), args.force)?;
    }
    match args.format {
        Format::Table => print!("{}", report::table(&report)),
        Format::Json => println!("{}", report::json(&report)),
        Format::Csv => print!("{}", report::csv(&report)?),
    }
    if !args.quiet {
        eprintln!(
            "perfskel validate: results in {} (results.txt, results.json, results.csv, validate.svg; logs/)",
            args.workdir.display()
        );
    }
    Ok(exit_code(&report))
}

/// Success when every step ran and every skeleton's negative control showed its error;
/// the accuracy itself does not decide (timings on a shared machine are noisy).
fn exit_code(report: &Report) -> ExitCode {
    let control_hidden = report
        .negative_control
        .iter()
        .any(|c| c.method.starts_with("skeleton-") && c.error_shows == Some(false));
    if report.failures.is_empty() && !control_hidden {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn listing() -> String {
    let mut out = String::from("applications (examples/apps/ and tests/apps/, embedded):\n");
    for app in APPS {
        let _ = writeln!(
            out,
            "  {:<14} {}\n  {:<14} full: {} (small {}, different {}); quick: {}",
            app.name,
            app.summary,
            "",
            app.full.traced.join(" "),
            app.full.small.join(" "),
            app.full.different.join(" "),
            app.quick.traced.join(" ")
        );
    }
    out.push_str("\nscenarios (see docs/validate.md):\n");
    for s in SCENARIOS {
        let _ = writeln!(out, "  {:<22} {}", s.name, s.summary);
    }
    out
}

/// Stops early with a clear message when a tool a chosen scenario needs is missing.
fn check_tools(plan: &Plan) -> Result<(), String> {
    let mut tools: Vec<&str> = Vec::new();
    for mpi in plan.mpis() {
        tools.push(mpi.mpicc());
        tools.push(mpi.mpirun());
    }
    if plan.scenarios.iter().any(|s| s.cpu_list.is_some()) {
        tools.push("taskset");
    }
    if plan.scenarios.iter().any(|s| s.competing_jobs > 0) {
        tools.push("cc");
    }
    tools.push("make");
    let missing: Vec<&str> = tools
        .into_iter()
        .filter(|t| crate::files::find_in_path(t).is_none())
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "validate: not on PATH: {} (scripts/setup.sh installs Open MPI, MPICH, make and util-linux)",
            missing.join(", ")
        ))
    }
}

/// Creates the work directory (or reuses one of ours) and writes the sources and
/// launcher scripts; gives its absolute path.
fn prepare_workdir(dir: &Path, plan: &Plan, force: bool) -> Result<PathBuf, String> {
    let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    if dir.exists() {
        let ours = dir.join(MARKER).is_file();
        let empty = fs::read_dir(dir).map_err(|e| io(dir, e))?.next().is_none();
        if !ours && !empty && !force {
            return Err(format!(
                "{} exists and is not a perfskel validate work directory; choose another with -o or pass --force",
                dir.display()
            ));
        }
    }
    for sub in ["src", "launch", "build", "trace", "skel", "out", "logs"] {
        let path = dir.join(sub);
        fs::create_dir_all(&path).map_err(|e| io(&path, e))?;
    }
    for mpi in plan.mpis() {
        for sub in [mpi.name().to_string(), format!("{}-plain", mpi.name())] {
            let path = dir.join("build").join(sub);
            fs::create_dir_all(&path).map_err(|e| io(&path, e))?;
        }
    }
    // Logs of an earlier validation would mix with this one's.
    let logs = dir.join("logs");
    for entry in fs::read_dir(&logs).map_err(|e| io(&logs, e))?.flatten() {
        fs::remove_file(entry.path()).map_err(|e| io(&entry.path(), e))?;
    }
    let write = |path: PathBuf, text: &str| fs::write(&path, text).map_err(|e| io(&path, e));
    write(dir.join(MARKER), "perfskel validate work directory\n")?;
    for (name, text) in APP_SOURCES {
        write(dir.join("src").join(name), text)?;
    }
    write(dir.join("src").join("timing.c"), TIMING_SHIM)?;
    write(dir.join("src").join("burn.c"), BURN)?;
    for scenario in &plan.scenarios {
        write_launcher(dir, scenario)?;
    }
    fs::canonicalize(dir).map_err(|e| io(dir, e))
}

fn write_launcher(dir: &Path, scenario: &Scenario) -> Result<(), String> {
    let path = dir.join("launch").join(format!("{}.sh", scenario.name));
    fs::write(&path, scenario.launcher_script())
        .and_then(|()| fs::set_permissions(&path, fs::Permissions::from_mode(0o755)))
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn build_burn(workdir: &Path) -> Result<(), String> {
    let out = std::process::Command::new("cc")
        .args(["-O1", "-o"])
        .arg(workdir.join("build").join("burn"))
        .arg(workdir.join("src").join("burn.c"))
        .output()
        .map_err(|e| format!("cannot run cc: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "building the competing job failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn write_results(workdir: &Path, report: &Report) -> Result<(), String> {
    let write = |name: &str, text: String| {
        let path = workdir.join(name);
        fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
    };
    write("results.txt", report::table(report))?;
    write("results.json", report::json(report) + "\n")?;
    write("results.csv", report::csv(report)?)?;
    write("validate.svg", plot::render(report)?)
}

fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|t| t.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".into())
}

fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!(
        "{cores} cores; {} and {}",
        Mpi::OpenMpi.mpirun(),
        Mpi::Mpich.mpirun()
    )
}
