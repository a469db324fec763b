//! `perfskel run OUT -np N`: builds a generated program with the chosen MPI (`make`, with
//! `MPICC` set; for a Rust project also a cargo target directory per MPI) and runs it
//! under `mpirun`, then reads its `perfskel-result` line and prints the prediction. With
//! `--simgrid PLATFORM`, builds the C program with SimGrid's `smpicc` and simulates it
//! under `smpirun` on that platform instead.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use perfskel_compiler::back::RunResult;
use perfskel_compiler::scale::min_reliable_s;

use crate::cmd_calibrate::cache_dir;
use crate::cmd_record::MpiKind;

#[derive(clap::Args)]
pub struct Args {
    /// The directory `perfskel compile` wrote.
    dir: PathBuf,
    /// Number of ranks (the skeleton's `ranks`).
    #[arg(short = 'n', long = "np")]
    np: u64,
    /// Which MPI to build and run with.
    #[arg(long, value_enum, default_value = "openmpi")]
    mpi: MpiKind,
    /// The launcher and its options, split on spaces (default: the MPI's own mpirun);
    /// `-np N ./skeleton` is appended.
    #[arg(long)]
    mpirun: Option<String>,
    /// Runs of the program; the prediction is their median, with their spread. By
    /// default at least 3, and up to 10 while they spread more than 10 % (under
    /// `--simgrid`, 1: the simulation is deterministic; 3 with `--sim-compute benched`).
    #[arg(long)]
    repeat: Option<u32>,
    /// Simulate the program under SimGrid's SMPI on this platform file (C back end):
    /// built with `smpicc`, run with `smpirun`; compute spans become simulated time on
    /// the platform's hosts (1 Gf = the machine the trace was taken on), and the result
    /// is the simulated time. `perfskel platform` writes platform files.
    #[arg(long, value_name = "PLATFORM.xml", conflicts_with_all = ["mpi", "mpirun"])]
    simgrid: Option<PathBuf>,
    /// With `--simgrid`: the hosts to place ranks on, one per line (default: the
    /// platform's `.hosts` file beside it, as `perfskel platform` writes it).
    #[arg(long, requires = "simgrid", value_name = "FILE")]
    hostfile: Option<PathBuf>,
    /// With `--simgrid`: how compute spans take simulated time. `execute` (the
    /// default): `smpi_execute` of each span's traced time, exact and deterministic;
    /// `benched`: the calibrated kernel runs on this machine and SMPI times it as it
    /// times an application's own code, so the simulation host's noise enters the
    /// skeleton as it enters a simulated application (not deterministic: by default 3
    /// runs, their median); `none`: spans take no simulated time, the communication
    /// alone (to set beside the application simulated with SMPI's
    /// `smpi/simulate-computation:no`).
    #[arg(long, value_enum, requires = "simgrid", default_value = "execute")]
    sim_compute: SimCompute,
}

/// How a simulated skeleton's compute spans take simulated time (`run --sim-compute`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SimCompute {
    Execute,
    Benched,
    None,
}

/// The simulated speed of the machine a skeleton's compute spans were measured on:
/// `smpi_execute(s)` is `s` × this many flops, so a platform host of this speed runs
/// spans as traced, one twice as fast in half the time.
pub const SIMGRID_HOST_SPEED: &str = "1Gf";

/// Runs at least this many times by default...
const MIN_RUNS: usize = 3;
/// ...and up to this many while the runs spread more than [`STABLE_SPREAD`].
const MAX_RUNS: usize = 10;
/// (max - min) / median under which the median of the runs is a stable answer.
const STABLE_SPREAD: f64 = 0.10;
/// A skeleton that runs less than this is run [`MAX_RUNS`] times when the count is
/// left to `run`: its launches cost more than its runs, and one run samples the
/// machine for so short a time that a moment of noise (another job, the scheduler
/// placing more ranks on one core for a while) decides it, where the application
/// averages over seconds. On this project's 2-core VM, 12 launches of a 70 ms skeleton
/// at 4 ranks gave 71–78 ms nine times and 83–101 ms three times, in runs of a few in a
/// row: the median of 3 followed whichever state the machine was in.
const SHORT_RUN_S: f64 = 1.0;
/// Cores that other work (not the skeleton's launcher and ranks) must use on average
/// while the skeleton runs for `run` to say that it shared the machine.
const OTHER_WORK_CORES: f64 = 0.25;

/// The machine's busy CPU time (all cores, `/proc/stat`), the CPU time of this process
/// and of its waited-for descendants (the launcher and the ranks), and the wall clock:
/// two samples tell how much of the machine other work used in between. Beside one
/// CPU-bound job, the 2-rank master_worker skeleton at 1:100 ran either 40 or 75 ms
/// (which rank's core the job shared), median 1.49 times the application beside the
/// same job; at 1:10 (0.5 s) 1.08 times, at 1:1 1.02 (session 31): the scheduler's
/// placement averages out only over longer runs.
#[derive(Clone, Copy, Debug)]
struct CpuSample {
    busy_s: f64,
    ours_s: f64,
    at: std::time::Instant,
}

impl CpuSample {
    fn now() -> Option<CpuSample> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let busy_s = busy_seconds(stat.lines().next()?)?;
        Some(CpuSample {
            busy_s,
            ours_s: cpu_seconds(libc::RUSAGE_SELF) + cpu_seconds(libc::RUSAGE_CHILDREN),
            at: std::time::Instant::now(),
        })
    }

    /// The cores other work used on average from `self` to `later`.
    fn other_cores(&self, later: &CpuSample) -> f64 {
        let wall = later.at.duration_since(self.at).as_secs_f64();
        other_cores(later.busy_s - self.busy_s, later.ours_s - self.ours_s, wall)
    }
}

/// The cores other work used: the machine's busy time less ours, over the wall time.
fn other_cores(busy_s: f64, ours_s: f64, wall_s: f64) -> f64 {
    if wall_s <= 0.0 {
        return 0.0;
    }
    ((busy_s - ours_s) / wall_s).max(0.0)
}

/// Busy seconds of the `cpu` line of `/proc/stat`: user, nice, system, irq, softirq
/// and steal (another virtual machine's work on this one's cores) in clock ticks.
fn busy_seconds(line: &str) -> Option<f64> {
    let mut fields = line.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let ticks: Vec<u64> = fields.map_while(|f| f.parse().ok()).collect();
    if ticks.len() < 8 {
        return None;
    }
    let busy = ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6] + ticks[7];
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| busy as f64 / hz as f64)
}

/// User and system CPU seconds of `who` (`RUSAGE_SELF` or `RUSAGE_CHILDREN`).
fn cpu_seconds(who: libc::c_int) -> f64 {
    // SAFETY: getrusage fills the struct it is given; zeroed is a valid rusage.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(who, &mut usage) } != 0 {
        return 0.0;
    }
    let seconds = |t: libc::timeval| t.tv_sec as f64 + 1e-6 * t.tv_usec as f64;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// After this much time spent running, no more runs are started for a stable spread.
pub const RUN_BUDGET_S: f64 = 120.0;

pub fn run(args: Args) -> Result<ExitCode, String> {
    if let Some(platform) = &args.simgrid {
        return run_simgrid(&args, platform);
    }
    build(&args.dir, args.mpi)?;
    let launcher: Vec<String> = match &args.mpirun {
        Some(cmd) => cmd.split_whitespace().map(str::to_string).collect(),
        None => vec![default_launcher(args.mpi)],
    };
    if args.repeat == Some(0) {
        return Err("--repeat must be at least 1".into());
    }
    let (min_runs, max_runs) = match args.repeat {
        Some(n) => (n as usize, n as usize),
        None => (MIN_RUNS, MAX_RUNS),
    };
    let before = CpuSample::now();
    let (results, success) = run_repeated(
        &args.dir,
        args.mpi,
        &launcher,
        args.np,
        (min_runs, max_runs),
        true,
    )?;
    let other_cores = before.and_then(|b| CpuSample::now().map(|a| b.other_cores(&a)));
    let result = median_result(&results);
    if results.len() > 1 {
        // The median run's line, last, for tools that read the last result line.
        println!("{}", result.line());
    }
    let runs = if results.len() > 1 {
        let (lo, hi, spread) = range(&results);
        format!(
            "median of {} runs ({lo:.6} … {hi:.6} s, spread {:.1} %)",
            results.len(),
            100.0 * spread
        )
    } else {
        "1 run".to_string()
    };
    println!(
        "skeleton `{}` on {} ranks ({} back end): {:.6} s ({runs}){} = predicted application time {:.3} s (the skeleton stands for {:.3} s where it was made)",
        result.skeleton,
        result.ranks,
        result.backend,
        result.skeleton_s,
        prediction_text(&result),
        result.predicted_s,
        result.app_time_s
    );
    let cores = crate::cmd_compile::cores_here();
    let min_s = min_reliable_s(args.np, cores);
    if result.skeleton_s < min_s {
        warn(&format!(
            "the skeleton ran {:.1} ms, too short to time reliably (at least {:.0} ms{}): compile it at a smaller ratio",
            1e3 * result.skeleton_s,
            1e3 * min_s,
            if args.np > cores {
                format!(" where {} ranks share {cores} cores", args.np)
            } else {
                String::new()
            }
        ));
    }
    if let Some(other) = other_cores.filter(|&o| o >= OTHER_WORK_CORES) {
        if result.skeleton_s < SHORT_RUN_S {
            let largest = (result.app_time_s / SHORT_RUN_S).floor();
            warn(&format!(
                "other work used {other:.1} of this machine's {cores} cores while the skeleton ran: beside other jobs, a run of {:.0} ms samples wherever the scheduler happened to put its ranks, not the average an application's run sees; compile it to run at least {:.0} s ({})",
                1e3 * result.skeleton_s,
                SHORT_RUN_S,
                if largest >= 2.0 {
                    format!("1:{largest:.0} or a smaller ratio")
                } else {
                    "1:1".to_string()
                }
            ));
        }
    }
    let (_, _, spread) = range(&results);
    if spread > STABLE_SPREAD {
        warn(&format!(
            "the runs spread {:.1} % (more than {:.0} %): this machine is noisy now (other jobs, more ranks than cores); the prediction is no better than that",
            100.0 * spread,
            100.0 * STABLE_SPREAD
        ));
    }
    if let Some(note) = mostly_own(&result) {
        warn(&note);
    }
    if let Some(note) = compute_made_no_difference(&result) {
        warn(&note);
    }
    Ok(if success {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `run --simgrid`: builds `skeleton-smpi` and simulates it under `smpirun`.
fn run_simgrid(args: &Args, platform: &Path) -> Result<ExitCode, String> {
    let dir = &args.dir;
    if dir.join("Cargo.toml").is_file() {
        return Err(format!(
            "{}: --simgrid simulates the C back end's programs; compile the skeleton with `--backend c`",
            dir.display()
        ));
    }
    for tool in ["smpicc", "smpirun"] {
        if !on_path(tool) {
            return Err(format!(
                "SimGrid's `{tool}` is not installed (Debian: apt-get install libsimgrid-dev simgrid)"
            ));
        }
    }
    if !platform.is_file() {
        return Err(format!("{}: no such platform file", platform.display()));
    }
    let hostfile = match &args.hostfile {
        Some(h) => h.clone(),
        None => platform.with_extension("hosts"),
    };
    if !hostfile.is_file() {
        return Err(format!(
            "{}: no host file (give --hostfile FILE, one host of the platform per line; `perfskel platform` writes one beside the platform)",
            hostfile.display()
        ));
    }
    let hosts =
        std::fs::read_to_string(&hostfile).map_err(|e| format!("{}: {e}", hostfile.display()))?;
    if hosts.lines().all(|l| l.trim().is_empty()) {
        return Err(format!(
            "{}: the host file lists no host",
            hostfile.display()
        ));
    }
    let mut make = Command::new("make");
    make.arg("skeleton-smpi");
    make_in(dir, make, "smpicc")?;
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let benched = args.sim_compute == SimCompute::Benched;
    let runs = args
        .repeat
        .unwrap_or(if benched { MIN_RUNS as u32 } else { 1 })
        .max(1);
    let mut results = Vec::new();
    let mut walls = Vec::new();
    let mut success = true;
    for _ in 0..runs {
        let started = std::time::Instant::now();
        let mut smpirun = Command::new("smpirun");
        smpirun
            .arg("-np")
            .arg(args.np.to_string())
            .arg("-platform")
            .arg(absolute(platform))
            .arg("-hostfile")
            .arg(absolute(&hostfile))
            .arg(format!("--cfg=smpi/host-speed:{SIMGRID_HOST_SPEED}"));
        if benched {
            // SMPI times the code between MPI calls, the kernel's spans with it.
            smpirun.env("PERFSKEL_SMPI_COMPUTE", "benched");
        } else {
            // Only the spans are compute (or, with `none`, nothing is): the program's
            // own bookkeeping between MPI calls takes no simulated time.
            let spans = if args.sim_compute == SimCompute::None {
                "none"
            } else {
                "execute"
            };
            smpirun
                .env("PERFSKEL_SMPI_COMPUTE", spans)
                .arg("--cfg=smpi/simulate-computation:no");
        }
        let output = smpirun
            .arg("--log=root.thres:warning")
            .arg("./skeleton-smpi")
            .current_dir(dir)
            .output()
            .map_err(|e| format!("cannot run smpirun: {e}"))?;
        walls.push(started.elapsed().as_secs_f64());
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        print!("{stdout}");
        eprint!("{stderr}");
        let Some(result) = RunResult::find_in(&stdout) else {
            return Err(format!(
                "the simulated program printed no perfskel-result line ({})",
                output.status
            ));
        };
        success &= output.status.success();
        results.push(result);
    }
    let wall = perfskel_compiler::stats::median(&walls).unwrap_or(0.0);
    let result = RunResult {
        simulation_s: Some(wall),
        ..median_result(&results)
    };
    // The median run's line again, with the simulation's wall time, last.
    println!("{}", result.line());
    println!(
        "skeleton `{}` on {} simulated ranks ({}): {:.6} s simulated{} = predicted application time {:.3} s on that platform{} (the skeleton stands for {:.3} s where it was made); the simulation took {:.3} s",
        result.skeleton,
        result.ranks,
        platform.display(),
        result.skeleton_s,
        prediction_text(&result),
        result.predicted_s,
        if args.sim_compute == SimCompute::None {
            ", its communication alone (compute took no simulated time)"
        } else {
            ""
        },
        result.app_time_s,
        wall
    );
    Ok(if success {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Launches the program in `dir` at least `min` and at most `max` times, the runs past
/// `min` only while they spread more than [`STABLE_SPREAD`] or the median run is
/// shorter than [`SHORT_RUN_S`], and within [`RUN_BUDGET_S`]; `echo` passes each run's
/// output through. Gives each run's result line and whether every run exited 0.
pub fn run_repeated(
    dir: &Path,
    mpi: MpiKind,
    launcher: &[String],
    np: u64,
    (min, max): (usize, usize),
    echo: bool,
) -> Result<(Vec<RunResult>, bool), String> {
    let started = std::time::Instant::now();
    let mut results: Vec<RunResult> = Vec::new();
    let mut success = true;
    let short = |results: &[RunResult]| {
        let times: Vec<f64> = results.iter().map(|r| r.skeleton_s).collect();
        perfskel_compiler::stats::median(&times).is_some_and(|m| m < SHORT_RUN_S)
    };
    while results.len() < min
        || (results.len() < max
            && (range(&results).2 > STABLE_SPREAD || short(&results))
            && started.elapsed().as_secs_f64() < RUN_BUDGET_S)
    {
        let output = launch(dir, mpi, launcher, np, "./skeleton", &[])?;
        if echo {
            print!("{}", output.stdout);
            eprint!("{}", output.stderr);
        }
        let Some(result) = RunResult::find_in(&output.stdout) else {
            return Err(format!(
                "the program printed no perfskel-result line ({}){}",
                output.status,
                if echo {
                    String::new()
                } else {
                    format!(": {}", output.stderr.lines().last().unwrap_or(""))
                }
            ));
        };
        success &= output.success;
        results.push(result);
    }
    Ok((results, success))
}

/// The fastest and slowest runs' skeleton times and their spread, (max - min) / median;
/// a spread of 0 for fewer than two runs.
fn range(results: &[RunResult]) -> (f64, f64, f64) {
    let times: Vec<f64> = results.iter().map(|r| r.skeleton_s).collect();
    let lo = times.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = times.iter().copied().fold(0.0, f64::max);
    let median = perfskel_compiler::stats::median(&times).unwrap_or(0.0);
    let spread = if times.len() > 1 && median > 0.0 {
        (hi - lo) / median
    } else {
        0.0
    };
    (lo, hi, spread)
}

/// The run whose prediction is the median (the lower middle run for an even count, so
/// the line is one a program printed).
pub fn median_result(results: &[RunResult]) -> RunResult {
    let mut sorted: Vec<&RunResult> = results.iter().collect();
    sorted.sort_by(|a, b| a.predicted_s.total_cmp(&b.predicted_s));
    sorted[(sorted.len() - 1) / 2].clone()
}

/// A warning on standard error, with the prefix `perfskel validate` finds `run`'s
/// warnings by.
fn warn(message: &str) {
    eprintln!(
        "{} {message}",
        perfskel_studies::validate::driver::RUN_WARNING
    );
}

/// Past this share of the skeleton's time in communication that loops cut less than K,
/// `run` says that the prediction rests on the measuring pass.
pub const MOSTLY_OWN: f64 = 0.5;

/// The warning for a run most of whose time went to communication that loops cut less
/// than K (both ranks of a job on one spinning core: every message a time slice): the
/// prediction then counts that part as a pass without compute timed it, and where the
/// cost of a message depends on what runs beside it (the scheduler, the compute
/// between messages), that pass speaks for the application less well.
fn mostly_own(result: &RunResult) -> Option<String> {
    (result.skeleton_s > 0.0 && result.own_s > MOSTLY_OWN * result.skeleton_s).then(|| {
        format!(
            "{:.0} % of the skeleton's time was communication that loops cut less than 1:{} ({:.6} s, measured in a pass without compute): the prediction counts it by its own ratios, and is only as good as that pass's timing of it (where ranks share a core, what a message costs depends on the scheduler)",
            100.0 * result.own_s / result.skeleton_s,
            result.ratio,
            result.own_s
        )
    })
}

/// The share of the timed pass's time from which a warm-up pass (no compute) as long
/// says that compute did not decide the run's length.
pub const NO_COMPUTE_SHARE: f64 = 0.9;

/// The warning for a run whose pass without compute took as long as its timed pass
/// (above 1:1): the skeleton's time was not its compute's. Either it is all
/// communication, or its ranks share a core and spin while they wait (both bound to
/// one core with busy polling: LAMMPS's skeleton 0.216 s both ways, HPCC's 2.87 and
/// 2.88 s), and then a message costs its partner's time slice, which a skeleton at
/// 1:K cannot stand for.
fn compute_made_no_difference(result: &RunResult) -> Option<String> {
    (result.ratio > 1
        && result.skeleton_s > 0.0
        && result.warmup_s >= NO_COMPUTE_SHARE * result.skeleton_s)
        .then(|| {
            format!(
                "the pass without compute took {:.6} s, as long as the timed pass ({:.6} s): the skeleton's time is not its compute's; either it is all communication, or its ranks share a core and spin while they wait, where each message costs a time slice of its partner's and a skeleton at 1:{} cannot stand for the application (give each rank a core, let waiting ranks yield, or run at 1:1)",
                result.warmup_s, result.skeleton_s, result.ratio
            )
        })
}

/// How a run's time became its prediction, after the time: ` × K`, or where the
/// measuring pass timed communication that loops cut less than K, what of the time
/// that was and how each part is multiplied.
fn prediction_text(result: &RunResult) -> String {
    // What counts apart from the rest: what it is, what it takes off the skeleton's
    // time, and what it adds back.
    let mut parts = Vec::new();
    if result.own_s > 0.0 {
        parts.push((
            format!(
                "{:.6} s communication that loops cut less than 1:{} (standing for {:.6} s of the application's)",
                result.own_s, result.ratio, result.own_app_s
            ),
            result.own_s,
            result.own_app_s,
        ));
    }
    if result.fill_s > 0.0 {
        parts.push((
            format!(
                "{:.6} s a pipeline's fill before its first iterations (counted once)",
                result.fill_s
            ),
            result.fill_s,
            result.fill_s,
        ));
    }
    if parts.is_empty() {
        return format!(" × {}", result.reached);
    }
    let what: Vec<&str> = parts.iter().map(|p| p.0.as_str()).collect();
    let less: String = parts.iter().map(|p| format!(" − {:.6}", p.1)).collect();
    let plus: String = parts.iter().map(|p| format!(" + {:.6}", p.2)).collect();
    format!(
        ", of which {}: ({:.6}{less}) × {}{plus}",
        what.join(", "),
        result.skeleton_s,
        result.rest
    )
}

/// The compiler wrapper of `mpi`: `mpicc.openmpi`/`mpicc.mpich` when installed, else
/// `mpicc`.
pub fn mpicc(mpi: MpiKind) -> String {
    let suffixed = format!("mpicc.{}", mpi.name());
    if on_path(&suffixed) {
        suffixed
    } else {
        "mpicc".into()
    }
}

/// The launcher of `mpi`: `mpirun.openmpi`/`mpirun.mpich` when installed, else `mpirun`.
pub fn default_launcher(mpi: MpiKind) -> String {
    let suffixed = format!("mpirun.{}", mpi.name());
    if on_path(&suffixed) {
        suffixed
    } else {
        "mpirun".into()
    }
}

fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(name).is_file()))
}

/// Builds the program in `dir` with `make`; a Rust project gets its own cargo target
/// directory per MPI, since rsmpi does not rebuild when the MPI changes.
pub fn build(dir: &Path, mpi: MpiKind) -> Result<(), String> {
    let mut make = Command::new("make");
    make.env("MPICC", mpicc(mpi));
    if dir.join("Cargo.toml").is_file() {
        make.env(
            "CARGO_TARGET_DIR",
            cache_dir().join(format!("cargo-target-{}", mpi.name())),
        );
    }
    make_in(dir, make, &mpicc(mpi))
}

/// A build quieter than this shows nothing (a C skeleton builds in well under a
/// second); past it, its output is shown as it comes.
const QUIET_BUILD: std::time::Duration = std::time::Duration::from_secs(2);

/// Runs `make` (its target and environment already set) in `dir`, a directory `perfskel
/// compile` wrote; `compiler` names what builds it, for the error. A build that takes
/// longer than [`QUIET_BUILD`] (the first Rust build compiles rsmpi for minutes) is
/// shown as it goes: on a terminal a spinner with the time so far and the build's last
/// line, elsewhere (logs, CI) its lines on standard error as they come. A failed build
/// prints all of its output.
fn make_in(dir: &Path, mut make: Command, compiler: &str) -> Result<(), String> {
    use std::io::{BufRead, IsTerminal};
    use std::sync::mpsc;
    if !dir.join("Makefile").is_file() {
        return Err(format!(
            "{} has no Makefile: is it a directory `perfskel compile` wrote?",
            dir.display()
        ));
    }
    let mut child = make
        .arg("--no-print-directory")
        .arg("-C")
        .arg(dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run make: {e}"))?;
    let (tx, rx) = mpsc::channel::<String>();
    let readers: Vec<_> = [
        child
            .stdout
            .take()
            .map(|o| Box::new(o) as Box<dyn std::io::Read + Send>),
        child
            .stderr
            .take()
            .map(|e| Box::new(e) as Box<dyn std::io::Read + Send>),
    ]
    .into_iter()
    .flatten()
    .map(|pipe| {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(pipe).split(b'\n') {
                let Ok(line) = line else { break };
                if tx
                    .send(String::from_utf8_lossy(&line).into_owned())
                    .is_err()
                {
                    break;
                }
            }
        })
    })
    .collect();
    drop(tx);
    let started = std::time::Instant::now();
    let terminal = std::io::stderr().is_terminal();
    let bar = indicatif::ProgressBar::hidden();
    let mut shown = false;
    let mut log = String::new();
    let what = format!("building {} with {compiler}", dir.display());
    let mut show = |line: Option<&str>, log: &str| {
        if !shown && started.elapsed() >= QUIET_BUILD {
            shown = true;
            if terminal {
                bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
                bar.set_style(
                    indicatif::ProgressStyle::with_template(
                        "{spinner} {prefix} ({elapsed}): {wide_msg}",
                    )
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
                );
                bar.set_prefix(what.clone());
                bar.set_message(log.lines().last().unwrap_or("").trim().to_string());
                bar.enable_steady_tick(std::time::Duration::from_millis(120));
            } else {
                eprintln!(
                    "perfskel run: {what}, {:.0} s so far:",
                    QUIET_BUILD.as_secs_f64()
                );
                eprint!("{log}");
            }
        }
        if let (true, Some(line)) = (shown, line) {
            if terminal {
                bar.set_message(line.trim().to_string());
            } else {
                eprintln!("{line}");
            }
        }
    };
    loop {
        match rx.recv_timeout(std::time::Duration::from_millis(200)) {
            Ok(line) => {
                log.push_str(&line);
                log.push('\n');
                show(Some(&line), &log[..log.len() - line.len() - 1]);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => show(None, &log),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    for reader in readers {
        let _ = reader.join();
    }
    let status = child
        .wait()
        .map_err(|e| format!("cannot wait for make: {e}"))?;
    bar.finish_and_clear();
    if !status.success() {
        return Err(format!(
            "building {} with {compiler} failed ({status}):\n{log}",
            dir.display()
        ));
    }
    Ok(())
}

/// What a launched program printed.
pub struct Launched {
    pub stdout: String,
    pub stderr: String,
    pub status: String,
    pub success: bool,
}

/// Runs `launcher -np N program args` in `dir`. Open MPI gets what it needs on this kind
/// of machine: permission to run as root, and `--oversubscribe` for more ranks than
/// cores.
pub fn launch(
    dir: &Path,
    mpi: MpiKind,
    launcher: &[String],
    np: u64,
    program: &str,
    args: &[&str],
) -> Result<Launched, String> {
    let Some((exe, opts)) = launcher.split_first() else {
        return Err("the launcher command is empty".into());
    };
    let mut cmd = Command::new(exe);
    cmd.args(opts).current_dir(dir);
    if mpi == MpiKind::Openmpi {
        cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        let cores = crate::cmd_compile::cores_here();
        let is_mpirun = Path::new(exe).file_name().is_some_and(|f| {
            f.to_string_lossy().starts_with("mpirun") || f.to_string_lossy().starts_with("mpiexec")
        });
        if np > cores && is_mpirun && !opts.iter().any(|o| o == "--oversubscribe") {
            cmd.arg("--oversubscribe");
        }
    }
    cmd.arg("-np").arg(np.to_string()).arg(program).args(args);
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run `{exe}`: {e}"))?;
    Ok(Launched {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        status: out.status.to_string(),
        success: out.status.success(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_time_is_all_but_idle_and_iowait() {
        // SAFETY: sysconf only reads a configuration value.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        let busy = busy_seconds("cpu  100 20 30 5000 70 4 6 10 0 0").expect("a cpu line");
        assert!((busy - 170.0 / hz).abs() < 1e-9, "{busy}");
        assert_eq!(busy_seconds("cpu0 1 2 3 4 5 6 7 8"), None);
        assert_eq!(busy_seconds("cpu 1 2 3"), None);
    }

    #[test]
    fn other_work_is_the_machine_s_busy_time_less_ours() {
        // 2 s of wall clock, the machine busy 4 CPU-seconds, the ranks 2.6 of them.
        assert!((other_cores(4.0, 2.6, 2.0) - 0.7).abs() < 1e-9);
        // Ours can exceed the machine's count by rounding: never below none.
        assert_eq!(other_cores(1.0, 1.2, 1.0), 0.0);
        assert_eq!(other_cores(1.0, 0.0, 0.0), 0.0);
    }

    /// A 2-rank run's result line at 1:`ratio` that measured nothing of its own.
    fn result(ratio: u64, skeleton_s: f64, warmup_s: f64) -> RunResult {
        RunResult {
            skeleton: "s".into(),
            backend: "c".into(),
            ranks: 2,
            ratio,
            skeleton_s,
            predicted_s: skeleton_s * ratio as f64,
            app_time_s: 3.0,
            warmup_s,
            reached: ratio as f64,
            own_s: 0.0,
            own_app_s: 0.0,
            rest: ratio as f64,
            fill_s: 0.0,
            simulation_s: None,
        }
    }

    #[test]
    fn the_prediction_shows_each_part_counted_once() {
        assert_eq!(prediction_text(&result(100, 0.05, 0.0)), " × 100");
        let piped = RunResult {
            fill_s: 0.003,
            ..result(100, 0.05, 0.0)
        };
        assert_eq!(
            prediction_text(&piped),
            ", of which 0.003000 s a pipeline's fill before its first iterations (counted once): (0.050000 − 0.003000) × 100 + 0.003000"
        );
        let both = RunResult {
            own_s: 0.001,
            own_app_s: 0.002,
            rest: 101.0,
            ..piped
        };
        assert_eq!(
            prediction_text(&both),
            ", of which 0.001000 s communication that loops cut less than 1:100 (standing for 0.002000 s of the application's), 0.003000 s a pipeline's fill before its first iterations (counted once): (0.050000 − 0.001000 − 0.003000) × 101 + 0.002000 + 0.003000"
        );
    }

    #[test]
    fn a_run_mostly_in_communication_the_ratio_does_not_shrink_says_so() {
        let line = |skeleton_s: f64, own_s: f64| RunResult {
            own_s,
            own_app_s: own_s,
            predicted_s: 100.0 * (skeleton_s - own_s) + own_s,
            ..result(100, skeleton_s, 0.01)
        };
        assert_eq!(mostly_own(&line(0.032, 0.004)), None);
        let note = mostly_own(&line(2.88, 2.45)).expect("85 % of the time");
        assert!(note.starts_with("85 % of the skeleton's time"), "{note}");
        assert!(note.contains("less than 1:100 (2.450000 s"), "{note}");
        // Old result lines measured nothing.
        assert_eq!(mostly_own(&line(0.5, 0.0)), None);
    }

    #[test]
    fn a_warm_up_as_long_as_the_timed_pass_says_compute_did_not_count() {
        let line = result;
        // Each rank on its core: the warm-up is a sliver of the run.
        assert_eq!(compute_made_no_difference(&line(100, 0.0257, 0.0005)), None);
        // Both ranks spinning on one core: the warm-up as long as the timed pass.
        let note = compute_made_no_difference(&line(100, 0.216, 0.216)).expect("pinned");
        assert!(note.contains("share a core and spin"), "{note}");
        // At 1:1 there is no warm-up unless asked for, and nothing to say.
        assert_eq!(compute_made_no_difference(&line(1, 0.2, 0.2)), None);
    }

    /// The machine's counters move with real work: a thread that spins 0.3 s shows in
    /// the busy time and in this process's own CPU time, not as other work.
    #[test]
    fn a_sample_counts_this_process_as_ours() {
        let Some(before) = CpuSample::now() else {
            return; // no /proc/stat: nothing to sample
        };
        // Spins until this process has had 0.3 s of CPU (not of wall time: on a loaded
        // machine the wall clock runs ahead of it), at most 30 s.
        let start = std::time::Instant::now();
        let cpu_start = cpu_seconds(libc::RUSAGE_SELF);
        let mut x = 1.0f64;
        while cpu_seconds(libc::RUSAGE_SELF) - cpu_start < 0.3 && start.elapsed().as_secs() < 30 {
            x = std::hint::black_box(x * 1.000_000_1 + 1e-9);
        }
        let after = CpuSample::now().expect("sampled before");
        assert!(after.ours_s - before.ours_s >= 0.2, "{before:?} {after:?}");
        assert!(after.busy_s - before.busy_s >= 0.2, "{before:?} {after:?}");
    }
}
