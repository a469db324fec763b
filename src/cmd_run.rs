//! `perfskel run OUT -np N`: builds a generated program with the chosen MPI (`make`, with
//! `MPICC` set; for a Rust project also a cargo target directory per MPI) and runs it
//! under `mpirun`, then reads its `perfskel-result` line and prints the prediction.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use perfskel_compiler::back::RunResult;

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
}

pub fn run(args: Args) -> Result<ExitCode, String> {
    build(&args.dir, args.mpi)?;
    let launcher: Vec<String> = match &args.mpirun {
        Some(cmd) => cmd.split_whitespace().map(str::to_string).collect(),
        None => vec![default_launcher(args.mpi)],
    };
    let output = launch(&args.dir, args.mpi, &launcher, args.np, "./skeleton", &[])?;
    print!("{}", output.stdout);
    eprint!("{}", output.stderr);
    let Some(result) = RunResult::find_in(&output.stdout) else {
        return Err(format!(
            "the program printed no perfskel-result line ({})",
            output.status
        ));
    };
    println!(
        "skeleton `{}` on {} ranks ({} back end): {:.6} s × {} = predicted application time {:.3} s (the skeleton stands for {:.3} s where it was made)",
        result.skeleton,
        result.ranks,
        result.backend,
        result.skeleton_s,
        result.ratio,
        result.predicted_s,
        result.app_time_s
    );
    Ok(if output.success {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
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
    if !dir.join("Makefile").is_file() {
        return Err(format!(
            "{} has no Makefile: is it a directory `perfskel compile` wrote?",
            dir.display()
        ));
    }
    let mut make = Command::new("make");
    make.arg("-C").arg(dir).env("MPICC", mpicc(mpi));
    if dir.join("Cargo.toml").is_file() {
        make.env(
            "CARGO_TARGET_DIR",
            cache_dir().join(format!("cargo-target-{}", mpi.name())),
        );
    }
    let out = make.output().map_err(|e| format!("cannot run make: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "building {} with {} failed:\n{}{}",
            dir.display(),
            mpicc(mpi),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
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
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
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
