//! The real [`Runner`]: takes a prepared work directory, gives timings by running
//! `mpicc`, the scenario launchers and the `perfskel` binary itself (`record`,
//! `skeletonize`, `compile`, `run`) as subprocesses, each in its own process group with
//! a time limit, its output kept in `WORKDIR/logs/`.

use std::collections::BTreeSet;
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use perfskel_compiler::back::Backend;
use perfskel_studies::validate::driver::{Runner, SkeletonRuns};
use perfskel_studies::validate::{AppSpec, Input, Mpi, RunError, Scenario, BASE};

/// The line the timing shim prints on rank 0: time between `MPI_Init` and
/// `MPI_Finalize`.
pub const APP_TIME_PREFIX: &str = "perfskel-app-time seconds=";

/// Set by SIGINT or SIGTERM. Every run is in its own process group, so a Ctrl-C on the
/// terminal reaches only the harness: it stops the current run's group itself, starts
/// no other, and exits.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_signal: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Installs the SIGINT and SIGTERM handlers (they only set a flag).
pub fn catch_interrupts() {
    let handler = on_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
}

/// Whether the harness was told to stop.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

pub struct ProcessRunner {
    /// The `perfskel` binary (this program).
    pub exe: PathBuf,
    /// Absolute path of the work directory.
    pub workdir: PathBuf,
    /// Limit of every subprocess; the process group is killed when it is reached.
    pub limit: Duration,
    pub n_ranks: u32,
    pub started: Instant,
    pub quiet: bool,
    /// Numbers the log files in run order.
    pub n_logged: u32,
    /// The model `calibrate` saved, once it has.
    pub model: Option<PathBuf>,
    /// Program directories whose skeleton was built by an earlier run.
    pub built_programs: BTreeSet<PathBuf>,
}

/// The limit of a skeleton's first run, which builds it.
const FIRST_RUN_LIMIT: Duration = Duration::from_secs(900);

impl ProcessRunner {
    /// The log file (`out` or `err`) of the last command started, `label`.
    fn log_path(&self, label: &str, ext: &str) -> PathBuf {
        self.workdir.join("logs").join(format!(
            "{:04}-{}.{ext}",
            self.n_logged,
            label.replace([' ', '/'], "-")
        ))
    }

    /// The timing shim as a shared library, preloaded into the timed runs.
    fn shim_library(&self, mpi: Mpi) -> PathBuf {
        self.workdir
            .join("build")
            .join(mpi.name())
            .join("app_time.so")
    }

    /// `launcher [-x LD_PRELOAD=shim] -np N program args` for `app` in `scenario` at its
    /// rank count: the same program timed (`timed`: the timing shim preloaded) and
    /// traced, and HPCC its `hpccinf.txt` in a run directory of its own, where it runs.
    /// One binary for both: a build with the shim linked in is another program, whose
    /// code and data lie elsewhere, and halo_dims built so ran 2.43 s where the binary
    /// it was traced as ran 2.99 s (`-O2`, the same source; session 31), an error that
    /// was the build's, not the skeleton's.
    fn app_command(
        &self,
        scenario: &Scenario,
        app: &AppSpec,
        args: &[&str],
        timed: bool,
    ) -> Result<(Vec<std::ffi::OsString>, Option<PathBuf>), RunError> {
        let (mpi, ranks) = (scenario.mpi, self.ranks(scenario));
        let binary = self.plain_binary(app, mpi);
        let mut argv: Vec<std::ffi::OsString> = vec![self.launcher(scenario).into()];
        let mut cwd = None;
        let mut rest: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        if timed {
            // The shim in the ranks only, as `record` preloads the tracer.
            let style = match mpi {
                Mpi::OpenMpi => crate::launcher::Style::OpenMpi,
                Mpi::Mpich => crate::launcher::Style::Hydra,
            };
            let shim = self.shim_library(mpi).display().to_string();
            let preload = crate::launcher::env_args(style, &[("LD_PRELOAD", &shim)])
                .map_err(RunError::failed)?;
            argv.extend(preload.into_iter().map(Into::into));
        }
        if let Some(installed) = app.installed {
            if installed.input == Input::HpccInf {
                let n = args.first().copied().unwrap_or("1000");
                let dir = self
                    .workdir
                    .join("runs")
                    .join(format!("{}-{n}-{ranks}", app.name));
                std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
                let template_path = self.workdir.join("src").join(app.source_file);
                let template = std::fs::read_to_string(&template_path)
                    .map_err(|e| io_error(&template_path, e))?;
                let input = dir.join("hpccinf.txt");
                std::fs::write(&input, hpcc_input(&template, n, ranks))
                    .map_err(|e| io_error(&input, e))?;
                cwd = Some(dir);
                rest.clear();
            }
        }
        argv.push("-np".into());
        argv.push(ranks.to_string().into());
        argv.push(binary.into());
        argv.extend(rest.into_iter().map(Into::into));
        Ok((argv, cwd))
    }

    /// The application as it is: what is traced and timed. The shim cannot be linked
    /// into it: its `MPI_Init` and `MPI_Finalize` would hide the tracer's (the
    /// executable's definitions come before preloaded libraries).
    pub fn plain_binary(&self, app: &AppSpec, mpi: Mpi) -> PathBuf {
        if let Some(i) = app.installed {
            return PathBuf::from(i.program);
        }
        // Same file name as the application, so the skeleton is named after it.
        self.workdir
            .join("build")
            .join(format!("{}-plain", mpi.name()))
            .join(app.name)
    }

    /// The name of a skeleton: the application's, and the scenario's it was traced in
    /// unless that is base.
    fn skeleton_name(app: &AppSpec, traced_in: &Scenario) -> String {
        if traced_in.name == BASE {
            app.name.to_string()
        } else {
            format!("{}-{}", app.name, traced_in.name)
        }
    }

    fn trace_dir(&self, app: &AppSpec, traced_in: &Scenario) -> PathBuf {
        self.workdir
            .join("trace")
            .join(Self::skeleton_name(app, traced_in))
    }

    fn skel_file(&self, app: &AppSpec, traced_in: &Scenario) -> PathBuf {
        self.workdir
            .join("skel")
            .join(format!("{}.skel", Self::skeleton_name(app, traced_in)))
    }

    fn program_dir(
        &self,
        app: &AppSpec,
        traced_in: &Scenario,
        backend: Backend,
        mpi: Mpi,
    ) -> PathBuf {
        self.workdir.join("out").join(format!(
            "{}-{backend}-{}",
            Self::skeleton_name(app, traced_in),
            mpi.name()
        ))
    }

    /// The ranks of the runs in `scenario`.
    fn ranks(&self, scenario: &Scenario) -> u32 {
        scenario.traced_ranks.unwrap_or(self.n_ranks)
    }

    /// Where the skeleton that runs in `scenario` was traced: the scenario itself when it
    /// is traced at its own rank count, else base.
    fn traced_in(scenario: &Scenario) -> &Scenario {
        if scenario.traced_ranks.is_some() {
            scenario
        } else {
            perfskel_studies::validate::scenario::find(BASE).unwrap_or(scenario)
        }
    }

    fn launcher(&self, scenario: &Scenario) -> PathBuf {
        self.workdir
            .join("launch")
            .join(format!("{}.sh", scenario.name))
    }

    /// Runs `command` to completion within the limit, with competing jobs alongside
    /// when `competing > 0`; gives its standard output.
    fn run(&mut self, label: &str, command: Command, competing: u32) -> Result<String, RunError> {
        self.run_within(label, command, competing, self.limit)
    }

    fn run_within(
        &mut self,
        label: &str,
        mut command: Command,
        competing: u32,
        limit: Duration,
    ) -> Result<String, RunError> {
        if interrupted() {
            return Err(RunError::failed(format!(
                "{label}: not started (interrupted)"
            )));
        }
        self.n_logged += 1;
        let out_path = self.log_path(label, "out");
        let err_path = self.log_path(label, "err");
        let out = File::create(&out_path).map_err(|e| io_error(&out_path, e))?;
        let err = File::create(&err_path).map_err(|e| io_error(&err_path, e))?;
        if command.get_current_dir().is_none() {
            command.current_dir(&self.workdir);
        }
        command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .process_group(0);
        let mut jobs = Vec::new();
        for _ in 0..competing {
            match self.start_competing_job(limit) {
                Ok(job) => jobs.push(job),
                Err(e) => {
                    jobs.into_iter().for_each(stop_group);
                    return Err(e);
                }
            }
        }
        let outcome = command
            .spawn()
            .map_err(|e| RunError::failed(format!("cannot start {label}: {e}")))
            .and_then(|child| wait_limited(child, limit));
        for job in jobs {
            stop_group(job);
        }
        let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
        let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
        let relative = |p: &Path| {
            p.strip_prefix(&self.workdir)
                .unwrap_or(p)
                .display()
                .to_string()
        };
        match outcome {
            Ok(true) => Ok(stdout),
            Ok(false) => Err(RunError::failed(format!(
                "{label} failed (log: {}): {}",
                relative(&err_path),
                tail(&stderr, &stdout)
            ))),
            Err(mut e) => {
                if e.timed_out {
                    e.message = format!(
                        "{label}: killed after {} s (log: {})",
                        limit.as_secs(),
                        relative(&err_path)
                    );
                }
                Err(e)
            }
        }
    }

    /// A CPU-bound process in its own group, bounded in time by itself too (the limit
    /// plus a margin) so that it never outlives the harness for long.
    fn start_competing_job(&self, limit: Duration) -> Result<Child, RunError> {
        let burn = self.workdir.join("build").join("burn");
        Command::new(&burn)
            .arg((limit.as_secs() + 10).to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| {
                RunError::failed(format!(
                    "cannot start the competing job {}: {e}",
                    burn.display()
                ))
            })
    }

    fn perfskel(&self) -> Command {
        Command::new(&self.exe)
    }
}

impl Runner for ProcessRunner {
    fn calibrate(&mut self, base: &Scenario) -> Result<(), RunError> {
        let model = self.workdir.join("model.json");
        let mut command = self.perfskel();
        command
            .args(["calibrate", "--mpi", base.mpi.name(), "-np"])
            .arg(self.n_ranks.to_string())
            .arg("-o")
            .arg(&model)
            .arg("--mpirun")
            .arg(self.launcher(base));
        self.run("calibrate", command, 0)?;
        self.model = Some(model);
        Ok(())
    }

    fn build(&mut self, app: &AppSpec, mpi: Mpi) -> Result<(), RunError> {
        let src = self.workdir.join("src");
        if let Some(installed) = app.installed {
            if crate::files::find_in_path(installed.program).is_none() {
                return Err(RunError::failed(format!(
                    "`{}` is not installed: Debian's package {} has it (scripts/setup.sh installs it)",
                    installed.program, installed.package
                )));
            }
        }
        let mut shim = Command::new(mpi.mpicc());
        shim.args(["-O2", "-shared", "-fPIC", "-o"])
            .arg(self.shim_library(mpi))
            .arg(src.join("timing.c"));
        self.run(&format!("build app_time.so {}", mpi.name()), shim, 0)?;
        if app.installed.is_some() {
            return Ok(());
        }
        let mut program = Command::new(mpi.mpicc());
        program
            .args(["-O2", "-o"])
            .arg(self.plain_binary(app, mpi))
            .arg(src.join(app.source_file));
        self.run(&format!("build {} {}", app.name, mpi.name()), program, 0)
            .map(drop)
    }

    fn record(
        &mut self,
        app: &AppSpec,
        args: &[&str],
        traced_in: &Scenario,
        runs: u32,
    ) -> Result<Vec<f64>, RunError> {
        let (argv, cwd) = self.app_command(traced_in, app, args, false)?;
        let mut command = self.perfskel();
        command
            .args(["record", "--force", "--mpi", traced_in.mpi.name(), "--runs"])
            .arg(runs.to_string())
            .arg("-o")
            .arg(self.trace_dir(app, traced_in))
            .arg("--")
            .args(argv);
        if let Some(dir) = cwd {
            command.current_dir(dir);
        }
        let label = format!("record {}", Self::skeleton_name(app, traced_in));
        self.run(&label, command, traced_in.competing_jobs)?;
        // Each run's time, from the manifest `record` wrote (a trace it cannot read
        // fails at skeletonize, which says why).
        let manifest = std::fs::read_to_string(
            self.trace_dir(app, traced_in)
                .join(perfskel_compiler::trace::format::MANIFEST_FILE),
        )
        .ok()
        .and_then(|text| perfskel_compiler::trace::Manifest::from_json(&text).ok());
        Ok(manifest.map_or_else(Vec::new, |m| {
            let single = m.app_ns();
            let ns = m.runs.map_or_else(|| vec![single], |r| r.app_ns);
            ns.into_iter()
                .filter(|&ns| ns > 0)
                .map(|ns| ns as f64 / 1e9)
                .collect()
        }))
    }

    fn skeletonize(&mut self, app: &AppSpec, traced_in: &Scenario) -> Result<(), RunError> {
        let skel = self.skel_file(app, traced_in);
        // The work directory is the harness's own: a skeleton of an earlier validation
        // is replaced.
        if skel.exists() {
            std::fs::remove_file(&skel).map_err(|e| io_error(&skel, e))?;
        }
        let mut command = self.perfskel();
        command
            .arg("skeletonize")
            .arg(self.trace_dir(app, traced_in))
            .arg("-o")
            .arg(&skel);
        let label = format!("skeletonize {}", Self::skeleton_name(app, traced_in));
        self.run(&label, command, 0).map(drop)
    }

    fn compile(
        &mut self,
        app: &AppSpec,
        traced_in: &Scenario,
        backend: Backend,
        mpi: Mpi,
        ratio: u64,
    ) -> Result<(), RunError> {
        let mut command = self.perfskel();
        command
            .arg("compile")
            .arg(self.skel_file(app, traced_in))
            .args([
                "--ratio",
                &format!("1:{ratio}"),
                "--backend",
                backend.name(),
                "-o",
            ])
            .arg(self.program_dir(app, traced_in, backend, mpi))
            .arg("--force")
            // Skeletons of traces: compute stays as traced, the model only makes up for
            // what loop cutting changes (scripts/fidelity.sh measured this closer to the
            // application than `app-time` on every example; see the README).
            .args(["--target", "model"]);
        if let Some(model) = &self.model {
            command.arg("--model").arg(model);
        }
        let label = format!(
            "compile {} {backend} {}",
            Self::skeleton_name(app, traced_in),
            mpi.name()
        );
        self.run(&label, command, 0).map(drop)
    }

    fn run_app(
        &mut self,
        app: &AppSpec,
        args: &[&str],
        scenario: &Scenario,
    ) -> Result<f64, RunError> {
        let (argv, cwd) = self.app_command(scenario, app, args, true)?;
        let mut command = Command::new(&argv[0]);
        command.args(&argv[1..]);
        if let Some(dir) = cwd {
            command.current_dir(dir);
        }
        let label = format!("app {} {} {}", app.name, scenario.name, args.join("-"));
        let stdout = self.run(&label, command, scenario.competing_jobs)?;
        app_time(&stdout).ok_or_else(|| {
            RunError::failed(format!(
                "{label}: no `{APP_TIME_PREFIX}` line in the output (did the timing shim link?)"
            ))
        })
    }

    fn run_skeleton(
        &mut self,
        app: &AppSpec,
        backend: Backend,
        scenario: &Scenario,
        repeat: Option<u32>,
    ) -> Result<SkeletonRuns, RunError> {
        let traced_in = Self::traced_in(scenario);
        let dir = self.program_dir(app, traced_in, backend, scenario.mpi);
        let mut command = self.perfskel();
        command
            .arg("run")
            .arg(&dir)
            .arg("-np")
            .arg(self.ranks(scenario).to_string())
            .args(["--mpi", scenario.mpi.name(), "--mpirun"])
            .arg(self.launcher(scenario));
        // Without `--repeat`, `run` decides how many runs, as it does for a user.
        if let Some(n) = repeat {
            command.args(["--repeat", &n.to_string()]);
        }
        let label = format!("skeleton {} {backend} {}", app.name, scenario.name);
        // The first run of a program builds it (`make`; for Rust, cargo and rsmpi), which
        // may take minutes: it gets a longer limit. The build is not in the timed region.
        // `run` starts no run past its budget, so the last one ends within a run's limit
        // of it.
        let per_run = if self.built_programs.contains(&dir) {
            self.limit
        } else {
            self.limit.max(FIRST_RUN_LIMIT)
        };
        let limit = match repeat {
            Some(n) => per_run.saturating_mul(n),
            None => per_run + Duration::from_secs_f64(crate::cmd_run::RUN_BUDGET_S),
        };
        let stdout = self.run_within(&label, command, scenario.competing_jobs, limit)?;
        self.built_programs.insert(dir);
        let stderr = std::fs::read_to_string(self.log_path(&label, "err")).unwrap_or_default();
        SkeletonRuns::find_in(&stdout)
            .map(|runs| runs.with_warnings_of(&stderr))
            .ok_or_else(|| {
                RunError::failed(format!("{label}: no perfskel-result line in the output"))
            })
    }

    fn progress(&mut self, message: &str) {
        if !self.quiet {
            eprintln!(
                "[{:>7.1} s] {message}",
                self.started.elapsed().as_secs_f64()
            );
        }
    }
}

/// The time the shim printed, if any.
pub fn app_time(stdout: &str) -> Option<f64> {
    stdout
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix(APP_TIME_PREFIX))
        .and_then(|v| v.trim().parse().ok())
        .filter(|t: &f64| t.is_finite() && *t >= 0.0)
}

/// Waits for `child` until `limit`; `Ok(success)` when it ended, a timed-out error
/// after killing its process group otherwise.
fn wait_limited(mut child: Child, limit: Duration) -> Result<bool, RunError> {
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status.success()),
            Ok(None) if interrupted() => {
                stop_group(child);
                return Err(RunError::failed("interrupted"));
            }
            Ok(None) if Instant::now() >= deadline => {
                stop_group(child);
                return Err(RunError {
                    timed_out: true,
                    message: String::new(),
                });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(RunError::failed(format!("waiting for a run: {e}"))),
        }
    }
}

/// Ends a child's whole process group: SIGTERM first (launchers forward it to their
/// ranks and clean up), SIGKILL after two seconds; then reaps the child.
fn stop_group(mut child: Child) {
    let Ok(pgid) = i32::try_from(child.id()) else {
        let _ = child.kill();
        let _ = child.wait();
        return;
    };
    // SAFETY: kill(2) with a negative pid signals the process group we created with
    // `process_group(0)` for this child (its id is the group id); it has no memory effects.
    unsafe {
        libc::kill(-pgid, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: as above; stragglers of the group (ranks that ignored SIGTERM) are killed.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
    let _ = child.wait();
}

/// The last lines of a failed run's output, for the report.
fn tail(stderr: &str, stdout: &str) -> String {
    let text = if stderr.trim().is_empty() {
        stdout
    } else {
        stderr
    };
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = lines.len().saturating_sub(3);
    let joined = lines[start..].join(" | ");
    if joined.is_empty() {
        "no output".into()
    } else {
        joined
    }
}

/// HPCC's input: `template` with its `Ns` line set to `n` and its `Ps`/`Qs` lines to a
/// P x Q grid of `ranks` (P the largest divisor not above the square root), as
/// scripts/real-apps.sh writes it.
pub fn hpcc_input(template: &str, n: &str, ranks: u32) -> String {
    let p = (1..=ranks)
        .take_while(|d| d * d <= ranks)
        .filter(|d| ranks.is_multiple_of(*d))
        .max()
        .unwrap_or(1);
    let q = ranks / p.max(1);
    let mut out = String::new();
    for line in template.lines() {
        let label = line
            .split_once(char::is_whitespace)
            .map(|(_, l)| l.trim_start());
        let value = match label {
            Some("Ns") => Some(n.to_string()),
            Some("Ps") => Some(p.to_string()),
            Some("Qs") => Some(q.to_string()),
            _ => None,
        };
        match (value, label) {
            (Some(v), Some(l)) => out.push_str(&format!("{v:<13}{l}\n")),
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

fn io_error(path: &Path, error: std::io::Error) -> RunError {
    RunError::failed(format!("{}: {error}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hpcc_input_sets_the_size_and_a_grid_of_the_ranks() {
        let template = "HPLinpack benchmark input file\n1            # of problems sizes (N)\n1000         Ns\n1            # of process grids (P x Q)\n1            Ps\n1            Qs\n16.0         threshold\n";
        let text = hpcc_input(template, "2500", 4);
        assert!(text.contains("2500         Ns\n"), "{text}");
        assert!(
            text.contains("2            Ps\n2            Qs\n"),
            "{text}"
        );
        assert!(text.contains("16.0         threshold\n"), "{text}");
        let six = hpcc_input(template, "500", 6);
        assert!(six.contains("2            Ps\n3            Qs\n"), "{six}");
        let prime = hpcc_input(template, "500", 7);
        assert!(
            prime.contains("1            Ps\n7            Qs\n"),
            "{prime}"
        );
    }

    #[test]
    fn app_time_reads_the_last_shim_line() {
        assert_eq!(
            app_time("x\nperfskel-app-time seconds=1.500000\n"),
            Some(1.5)
        );
        assert_eq!(app_time("perfskel-app-time seconds=nan"), None);
        assert_eq!(app_time("cg: residual 1e-3\n"), None);
    }

    #[test]
    fn a_hung_group_is_killed_at_the_limit() {
        // A shell whose child sleeps: both are in the group and both must go.
        let child = Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30; wait"])
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = i32::try_from(child.id()).unwrap();
        // The /proc scan sees the group while it runs (else the check below says nothing).
        assert!(group_runs(pgid), "process group {pgid} not found running");
        let started = Instant::now();
        let outcome = wait_limited(child, Duration::from_millis(300));
        assert!(matches!(
            outcome,
            Err(RunError {
                timed_out: true,
                ..
            })
        ));
        assert!(started.elapsed() < Duration::from_secs(10));
        // The background sleep is gone too: no member of the group is left running (a
        // killed member its new parent has not reaped yet is a zombie, which still
        // counts for `kill(-pgid, 0)`; where PID 1 reaps late, it may stay one a while).
        let gone = (0..100).any(|_| {
            let alive = group_runs(pgid);
            std::thread::sleep(Duration::from_millis(20));
            !alive
        });
        assert!(gone, "process group {pgid} survived");
    }

    /// Whether a process of group `pgid` exists that is not a zombie (from /proc).
    fn group_runs(pgid: i32) -> bool {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            // SAFETY: signal 0 only checks whether the group still exists.
            return unsafe { libc::kill(-pgid, 0) } == 0;
        };
        entries.flatten().any(|e| {
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
                return false;
            };
            // `pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses.
            let Some((_, rest)) = stat.rsplit_once(") ") else {
                return false;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            fields.len() > 2 && fields[2] == pgid.to_string() && fields[0] != "Z"
        })
    }
}
