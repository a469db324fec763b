//! `perfskel record`: takes a launcher command line (`mpirun -np 4 ./app args`, or
//! `srun …`), gives a trace directory. It finds which MPI the job runs on (launcher.rs),
//! builds the PMPI tracer (embedded C source) with that MPI's `mpicc` once and caches it,
//! runs the launcher with the tracer preloaded in every rank, then writes
//! `manifest.json` from the rank files. With `--runs N` it runs the job N times and keeps
//! the trace of the median run.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{SystemTime, UNIX_EPOCH};

use perfskel_compiler::trace::format;
use perfskel_compiler::trace::manifest::{Manifest, RunInfo, Runs};

use crate::cmd_trace;
use crate::files::fnv1a;
use crate::launcher;

const TRACER_SOURCES: &[(&str, &str)] = &[
    ("tracer.c", include_str!("../runtime/tracer/tracer.c")),
    ("core.inc", include_str!("../runtime/tracer/core.inc")),
    ("wrap_c.inc", include_str!("../runtime/tracer/wrap_c.inc")),
    ("wrap_f.inc", include_str!("../runtime/tracer/wrap_f.inc")),
    (
        "wrap_f_nb.inc",
        include_str!("../runtime/tracer/wrap_f_nb.inc"),
    ),
    // Shared with the skeletons' C runtime: the same memory probe on both sides.
    ("memprobe.h", include_str!("../runtime/c/memprobe.h")),
];

#[derive(clap::Args)]
pub struct Args {
    /// Trace directory to write; created if needed. A trace already in it is kept unless
    /// `--force`.
    #[arg(short = 'o', long = "output", default_value = "perfskel-trace")]
    output: PathBuf,
    /// Replace the trace already in the output directory (its rank files and manifest;
    /// other files are kept), once the new run has written one.
    #[arg(long)]
    force: bool,
    /// The MPI the launcher belongs to, when its `--version` does not tell.
    #[arg(long, value_enum)]
    mpi: Option<MpiKind>,
    /// Run the job N times and keep the trace of the run whose application time (end of
    /// MPI_Init to start of MPI_Finalize, slowest rank) is the median, so that a skeleton
    /// stands for a typical run where runs vary; every run's time is printed and kept in
    /// the manifest.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=99))]
    runs: u32,
    /// Name each call site by its N innermost frames, as mpiP's `-k N` does: the return
    /// address of the MPI call and of up to N - 1 of its callers, so a function that
    /// calls MPI_Send for two callers is two sites in `trace stats`, `trace show` and
    /// the skeleton. Depth 1, the default, is the return address alone; above it every
    /// MPI call walks its stack (about a microsecond a call, taken out of the compute
    /// between calls).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=8))]
    stack_depth: u32,
    /// The launcher command line, after `--`: `mpirun -np 4 ./app args`.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

pub use crate::launcher::MpiKind;

pub fn run(args: Args) -> Result<ExitCode, String> {
    let launcher = args
        .command
        .first()
        .ok_or("record: give the launcher command after `--`")?;
    let launch = launcher::understand(&args.command, args.mpi)?;
    let mpi = launch.mpi;
    let tracer = ensure_tracer(mpi)?;

    let out = Output::open(&args.output, args.force)?;
    let dir = out.staging.clone();

    let preload = match std::env::var("LD_PRELOAD") {
        Ok(old) if !old.is_empty() => format!("{}:{old}", tracer.display()),
        _ => tracer.display().to_string(),
    };
    let job = Job {
        launcher,
        command: &args.command,
        launch: &launch,
        preload: &preload,
        stack_depth: args.stack_depth,
    };
    let manifest = if args.runs == 1 {
        job.record(&dir)?
    } else {
        record_runs(&job, &dir, args.runs)?
    };
    let path = dir.join(format::MANIFEST_FILE);
    std::fs::write(&path, manifest.to_json() + "\n")
        .map_err(|e| format!("record: cannot write {}: {e}", path.display()))?;
    let dir = out.install()?;
    let events: u64 = manifest.ranks.iter().map(|r| r.events).sum();
    let bytes: u64 = manifest.ranks.iter().map(|r| r.file_bytes).sum();
    eprintln!(
        "perfskel record: {} ranks, {events} events, {bytes} bytes ({:.1} bytes/event) in {}",
        manifest.n_ranks,
        bytes as f64 / events.max(1) as f64,
        dir.display()
    );
    for r in &manifest.ranks {
        if r.status != perfskel_compiler::trace::RankStatus::Complete {
            eprintln!(
                "perfskel record: warning: rank {} is {:?}",
                r.rank, r.status
            );
        }
    }
    Ok(match manifest.exit_code {
        Some(0) => ExitCode::SUCCESS,
        Some(c) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
        None => ExitCode::from(1),
    })
}

/// Where `--runs` records each run before the median one is moved into the trace
/// directory (removed afterwards).
const RUNS_DIR: &str = ".perfskel-runs";

/// One traced job: the launcher command line and what the ranks get.
struct Job<'a> {
    launcher: &'a str,
    command: &'a [String],
    launch: &'a launcher::Launch,
    preload: &'a str,
    /// `--stack-depth`: the frames that name a call site.
    stack_depth: u32,
}

impl Job<'_> {
    /// Runs the job once with the tracer writing into `dir`; gives the manifest of its
    /// rank files (with the launcher's exit code).
    fn record(&self, dir: &Path) -> Result<Manifest, String> {
        let dir_text = dir.display().to_string();
        let depth = self.stack_depth.to_string();
        // The launcher itself is not preloaded: each launcher's own option passes the
        // variables to the ranks only, on every node.
        let env_args = launcher::env_args(
            self.launch.style,
            &[
                ("LD_PRELOAD", self.preload),
                ("PERFSKEL_TRACE_DIR", &dir_text),
                ("PERFSKEL_STACK_DEPTH", &depth),
            ],
        )?;
        let start_unix_ns = unix_ns();
        let status = Command::new(self.launcher)
            .args(&env_args)
            .args(&self.command[1..])
            .status()
            .map_err(|e| format!("record: cannot run `{}`: {e}", self.launcher))?;
        let end_unix_ns = unix_ns();
        let summaries = cmd_trace::summarize_dir(dir)?;
        if summaries.is_empty() {
            use std::os::unix::process::ExitStatusExt;
            let how = match (status.code(), status.signal()) {
                (Some(0), _) => "exited with code 0".to_string(),
                (Some(c), _) => format!("failed with exit code {c}"),
                (None, Some(sig)) => format!("was killed by signal {sig}"),
                (None, None) => "ended without an exit code".to_string(),
            };
            return Err(format!(
                "record: `{}` {how}, and no rank wrote a trace file{} (is `{}` an MPI launcher, and the program an MPI program that ran?)",
                self.launcher,
                if status.success() { "" } else { "; no trace was replaced" },
                self.launcher
            ));
        }
        Ok(Manifest::build(
            RunInfo {
                mpi: self.launch.mpi.name().into(),
                launcher_version: self.launch.version.clone(),
                command: self.command.to_vec(),
                start_unix_ns,
                end_unix_ns,
                exit_code: status.code(),
            },
            &summaries,
        ))
    }
}

/// `--runs N`: records each run into its own directory under [`RUNS_DIR`], keeps the
/// median run (by application time) as the trace in `dir`, and removes the others. A
/// run that fails ends the series, and its trace is the one kept, to be looked at.
fn record_runs(job: &Job, dir: &Path, n: u32) -> Result<Manifest, String> {
    let runs_dir = dir.join(RUNS_DIR);
    let run_dir = |k: usize| runs_dir.join(format!("run-{k}"));
    remove_runs(&runs_dir)?;
    let mut runs: Vec<Manifest> = Vec::new();
    let mut failed = false;
    for k in 1..=n as usize {
        std::fs::create_dir_all(run_dir(k))
            .map_err(|e| format!("record: cannot create {}: {e}", run_dir(k).display()))?;
        let manifest = job.record(&run_dir(k))?;
        eprintln!(
            "perfskel record: run {k} of {n}: application time {:.3} s{}",
            manifest.app_ns() as f64 * 1e-9,
            match manifest.exit_code {
                Some(0) => String::new(),
                Some(c) => format!(", exit code {c}"),
                None => ", killed by a signal".into(),
            }
        );
        failed = manifest.exit_code != Some(0);
        runs.push(manifest);
        if failed {
            eprintln!("perfskel record: run {k} failed: its trace is kept, no further runs");
            break;
        }
    }
    let times: Vec<u64> = runs.iter().map(Manifest::app_ns).collect();
    let kept = if failed {
        runs.len() - 1
    } else {
        let mut order: Vec<usize> = (0..runs.len()).collect();
        order.sort_by_key(|&i| (times[i], i));
        order[(order.len() - 1) / 2]
    };
    let mut manifest = runs.swap_remove(kept);
    move_entries(&run_dir(kept + 1), dir)?;
    remove_runs(&runs_dir)?;
    if times.len() > 1 {
        let (lo, hi) = (
            times.iter().min().copied().unwrap_or(0),
            times.iter().max().copied().unwrap_or(0),
        );
        eprintln!(
            "perfskel record: kept run {} of {}, the median ({:.3} s; the runs took {:.3} to {:.3} s, {:.1} % apart)",
            kept + 1,
            times.len(),
            times[kept] as f64 * 1e-9,
            lo as f64 * 1e-9,
            hi as f64 * 1e-9,
            100.0 * (hi - lo) as f64 / lo.max(1) as f64
        );
    }
    manifest.runs = Some(Runs {
        app_ns: times,
        kept: kept + 1,
    });
    Ok(manifest)
}

/// Moves every entry of directory `from` into `to` (renames, on one file system).
fn move_entries(from: &Path, to: &Path) -> Result<(), String> {
    let entries = std::fs::read_dir(from)
        .map_err(|e| format!("record: cannot read {}: {e}", from.display()))?;
    for entry in entries.flatten() {
        let target = to.join(entry.file_name());
        std::fs::rename(entry.path(), &target).map_err(|e| {
            format!(
                "record: cannot move {} to {}: {e}",
                entry.path().display(),
                target.display()
            )
        })?;
    }
    Ok(())
}

/// Removes the directory of an earlier `--runs` series (perfskel's own files only).
fn remove_runs(runs_dir: &Path) -> Result<(), String> {
    match std::fs::remove_dir_all(runs_dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("record: cannot remove {}: {e}", runs_dir.display())),
    }
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Whether `name` is a file of a trace directory that `record` writes.
pub(crate) fn is_trace_file(name: &str) -> bool {
    (name.starts_with("rank-") && name.ends_with(".pst")) || name == format::MANIFEST_FILE
}

/// The output directory of a recording: the run writes into a staging directory inside
/// it, and only a run that wrote a trace replaces the trace already there.
struct Output {
    /// The output directory, absolute.
    dir: PathBuf,
    /// Where the ranks write (`DIR/.perfskel-record-PID`), removed on drop.
    staging: PathBuf,
    /// `dir` did not exist before: removed on drop if the run wrote nothing.
    created: bool,
    installed: bool,
}

impl Output {
    /// Checks `path` (not a link, a directory if it exists, holding no trace unless
    /// `force`) and makes the staging directory in it.
    fn open(path: &Path, force: bool) -> Result<Output, String> {
        let shown = path.display();
        let created = match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(format!(
                    "record: {shown} is a symbolic link: give the directory itself (perfskel does not write through links)"
                ))
            }
            Ok(m) if !m.is_dir() => {
                return Err(format!("record: {shown} exists and is not a directory"))
            }
            Ok(_) => {
                let entries = std::fs::read_dir(path)
                    .map_err(|e| format!("record: cannot read {shown}: {e}"))?;
                let mut ours: Vec<String> = entries
                    .filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|name| is_trace_file(name))
                    .collect();
                ours.sort();
                if !ours.is_empty() && !force {
                    let shown_files: Vec<&str> = ours.iter().take(3).map(String::as_str).collect();
                    return Err(format!(
                        "record: {shown} already holds a trace ({}{}); pass --force to replace it (the old trace stays until the new run has written one), or choose another directory",
                        shown_files.join(", "),
                        if ours.len() > 3 { ", ..." } else { "" }
                    ));
                }
                false
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(path)
                    .map_err(|e| format!("record: cannot create {shown}: {e}"))?;
                true
            }
            Err(e) => return Err(format!("record: {shown}: {e}")),
        };
        let dir = std::fs::canonicalize(path).map_err(|e| format!("record: {shown}: {e}"))?;
        let staging = dir.join(format!(".perfskel-record-{}", std::process::id()));
        // A staging directory of this process id is a crashed run's: ours to remove.
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir(&staging)
            .map_err(|e| format!("record: cannot create {}: {e}", staging.display()))?;
        Ok(Output {
            dir,
            staging,
            created,
            installed: false,
        })
    }

    /// Replaces the trace in the output directory with the staged one; gives the
    /// directory.
    fn install(mut self) -> Result<PathBuf, String> {
        // An earlier version's `--runs` directory, left by a run that was killed.
        remove_runs(&self.dir.join(RUNS_DIR))?;
        let old = std::fs::read_dir(&self.dir)
            .map_err(|e| format!("record: cannot read {}: {e}", self.dir.display()))?;
        for entry in old.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if is_trace_file(&name) {
                std::fs::remove_file(entry.path())
                    .map_err(|e| format!("record: cannot remove the old {name}: {e}"))?;
            }
        }
        move_entries(&self.staging, &self.dir)?;
        self.installed = true;
        Ok(self.dir.clone())
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.staging);
        if self.created && !self.installed {
            // Only if still empty: nothing but what this run made is removed.
            let _ = std::fs::remove_dir(&self.dir);
        }
    }
}

fn cache_root() -> PathBuf {
    if let Some(d) = std::env::var_os("PERFSKEL_CACHE_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(d).join("perfskel");
    }
    if let Some(d) = std::env::var_os("HOME") {
        return PathBuf::from(d).join(".cache").join("perfskel");
    }
    std::env::temp_dir().join("perfskel-cache")
}

/// Builds the tracer for `mpi` unless the cache has it; gives the shared library's path.
/// The cache key covers the tracer source and the compiler wrapper's full command line,
/// so a changed MPI installation or tracer rebuilds.
pub fn ensure_tracer(mpi: MpiKind) -> Result<PathBuf, String> {
    let mpicc = match std::env::var("PERFSKEL_MPICC") {
        Ok(cc) if !cc.is_empty() => PathBuf::from(cc),
        _ => {
            let suffixed = format!("mpicc.{}", mpi.name());
            crate::files::find_in_path(&suffixed)
                .or_else(|| crate::files::find_in_path("mpicc"))
                .ok_or_else(|| format!("record: neither {suffixed} nor mpicc is on PATH"))?
        }
    };
    let show_flag = match mpi {
        MpiKind::Openmpi => "--showme",
        MpiKind::Mpich => "-show",
    };
    let show = Command::new(&mpicc)
        .arg(show_flag)
        .output()
        .map_err(|e| format!("record: cannot run {} {show_flag}: {e}", mpicc.display()))?;
    let mut parts: Vec<&[u8]> = vec![mpi.name().as_bytes(), &show.stdout];
    for (name, text) in TRACER_SOURCES {
        parts.push(name.as_bytes());
        parts.push(text.as_bytes());
    }
    let key = fnv1a(&parts);
    let dir = cache_root().join(format!("tracer-{}-{key:016x}", mpi.name()));
    let lib = dir.join("libperfskel-tracer.so");
    if lib.is_file() {
        return Ok(lib);
    }
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("record: cannot create {}: {e}", dir.display()))?;
    for (name, text) in TRACER_SOURCES {
        std::fs::write(dir.join(name), text)
            .map_err(|e| format!("record: cannot write tracer source: {e}"))?;
    }
    let tmp = dir.join(format!("libperfskel-tracer.so.{}", std::process::id()));
    let out = Command::new(&mpicc)
        .args([
            "-O2", "-g", "-fPIC", "-shared", "-Wall", "-Wextra", "-Werror", "-o",
        ])
        .arg(&tmp)
        .arg(dir.join("tracer.c"))
        .args(["-ldl", "-lz"])
        .output()
        .map_err(|e| format!("record: cannot run {}: {e}", mpicc.display()))?;
    if !out.status.success() {
        return Err(format!(
            "record: building the tracer with {} failed:\n{}",
            mpicc.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    // Rename is atomic, so concurrent `record` runs never load a half-written library.
    std::fs::rename(&tmp, &lib).map_err(|e| format!("record: {}: {e}", lib.display()))?;
    Ok(lib)
}
