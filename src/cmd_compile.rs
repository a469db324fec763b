//! `perfskel compile`: a skeleton file and a ratio 1:K → a program directory (C-MPI or
//! Rust-rsmpi) that runs 1/K of the application's time. Reads the file and the model,
//! runs the library's pipeline (check → scale → check → back end), reports what scaling reached, and writes the
//! output directory without ever touching files it did not write (unless `--force`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use perfskel_compiler::back::{Backend, GeneratedFile, JobPolicy};
pub use perfskel_compiler::pipeline::{compile, compile_with, CompileError, Compiled};
use perfskel_compiler::scale::{min_reliable_s, too_short_to_time, Model, Target};

use crate::cmd_calibrate;
use crate::cmd_record::MpiKind;
use crate::files::{emit, fnv1a, plural, read_source, write_atomic};

#[derive(clap::Args)]
pub struct Args {
    /// The skeleton file (`app.skel`).
    file: PathBuf,
    /// Target ratio 1:K: the program runs 1/K of the application's time (`1:1000`).
    #[arg(long, value_parser = parse_ratio)]
    ratio: u64,
    /// The back end: `c` (C-MPI) or `rust` (Rust-rsmpi).
    #[arg(long, value_parser = parse_backend, default_value = "c")]
    backend: Backend,
    /// Output directory; created if needed.
    #[arg(short = 'o', long = "output", required_unless_present = "emit")]
    output: Option<PathBuf>,
    /// Write into an output directory that holds files perfskel did not write (they are
    /// kept, except those with the name of a generated file).
    #[arg(long)]
    force: bool,
    /// Print an intermediate form instead of writing the program: `skel`, the scaled
    /// skeleton.
    #[arg(long, value_parser = ["skel"])]
    emit: Option<String>,
    /// A latency/bandwidth model from `perfskel calibrate`; by default the one saved for
    /// `--mpi`, or built-in defaults.
    #[arg(long)]
    model: Option<PathBuf>,
    /// What the program's time is 1/K of: `model` (the default: the model's time of the
    /// unscaled skeleton; compute stays as traced but for what loop cutting changes, and
    /// the model's errors are on both sides of the ratio) or `app-time` (the skeleton's
    /// app_time; compute is stretched or shrunk to make up what the model does not
    /// explain, which counts waiting time twice when the traced run waited, e.g. on a
    /// loaded machine).
    #[arg(long, value_enum, default_value = "model")]
    target: TargetArg,
    /// Whose saved model to use when `--model` is not given.
    #[arg(long, value_enum, default_value = "openmpi")]
    mpi: MpiKind,
    /// When no model of this machine and `--mpi` is cached, use the built-in defaults
    /// instead of measuring it (about 4 s, once; `PERFSKEL_NO_CALIBRATE=1` does the same).
    #[arg(long)]
    no_calibrate: bool,
    /// job.slurm: the partition to run in (`#SBATCH --partition`).
    #[arg(long, help_heading = "Job script (job.slurm)")]
    partition: Option<String>,
    /// job.slurm: the account to charge (`#SBATCH --account`).
    #[arg(long, help_heading = "Job script (job.slurm)")]
    account: Option<String>,
    /// job.slurm: the time limit, in Slurm's format (`30`, `1:30:00`, `1-00:00:00`);
    /// by default 20 times the runs' target time, at least 5 minutes.
    #[arg(long, help_heading = "Job script (job.slurm)")]
    time: Option<String>,
    /// job.slurm: a node to the job alone (`#SBATCH --exclusive`): no other job's
    /// traffic or compute in the timing.
    #[arg(long, help_heading = "Job script (job.slurm)")]
    exclusive: bool,
    /// job.slurm: srun's MPI plugin (`srun --mpi=pmix`; `pmi2` for MPICH); by default
    /// the site's.
    #[arg(long, value_name = "PLUGIN", help_heading = "Job script (job.slurm)")]
    srun_mpi: Option<String>,
    /// job.slurm: how many runs of the skeleton the job times (`PERFSKEL_RUNS=N sbatch
    /// job.slurm` overrides it).
    #[arg(
        long,
        default_value_t = 3,
        value_name = "N",
        help_heading = "Job script (job.slurm)"
    )]
    job_runs: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TargetArg {
    AppTime,
    Model,
}

impl From<TargetArg> for Target {
    fn from(t: TargetArg) -> Target {
        match t {
            TargetArg::AppTime => Target::AppTime,
            TargetArg::Model => Target::Model,
        }
    }
}

/// Reads `1:K` with K a whole number of at least 1.
pub fn parse_ratio(text: &str) -> Result<u64, String> {
    let Some((one, k)) = text.split_once(':') else {
        return Err(format!(
            "`{text}` is not a ratio: write 1:K, for example 1:100"
        ));
    };
    if one.trim() != "1" {
        return Err(format!("`{text}`: the ratio must be 1:K (the skeleton runs 1/K of the application), for example 1:100"));
    }
    let k = k.trim();
    match k.parse::<u64>() {
        Ok(0) => Err("the ratio 1:0 is meaningless: K must be at least 1".into()),
        Ok(k) => Ok(k),
        Err(_) => match k.parse::<f64>() {
            Ok(v) if v < 1.0 => Err(format!(
                "the ratio 1:{k} is below 1: a skeleton runs at most as long as the application (K ≥ 1)"
            )),
            Ok(_) => Err(format!("the ratio 1:{k} must have a whole number K")),
            Err(_) => Err(format!("`{text}` is not a ratio: K must be a whole number, as in 1:100")),
        },
    }
}

pub fn parse_backend(name: &str) -> Result<Backend, String> {
    Backend::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = Backend::ALL.iter().map(|b| b.name()).collect();
        format!(
            "unknown back end `{name}`; choose one of {}",
            names.join(", ")
        )
    })
}

/// The file listing what perfskel wrote into an output directory.
pub const MANIFEST: &str = ".perfskel-generated";

/// Files and folders that building or running a generated program creates.
pub const BUILD_PRODUCTS: &[&str] = &["skeleton", ".build-flags", "Cargo.lock", "target", MANIFEST];

pub fn run(args: Args) -> Result<ExitCode, String> {
    let name = args.file.display().to_string();
    let source = read_source(&args.file)?;
    let job = JobPolicy {
        partition: args.partition.clone(),
        account: args.account.clone(),
        time: args.time.clone(),
        exclusive: args.exclusive,
        mpi: args.srun_mpi.clone(),
        runs: args.job_runs,
    };
    // Before the model, which may measure this machine first.
    job.check()?;
    let (model, model_from) = load_model(args.model.as_deref(), args.mpi, !args.no_calibrate)?;
    let source_name = args
        .file
        .file_name()
        .map_or_else(|| name.clone(), |f| f.to_string_lossy().into_owned());
    let backend = args.emit.is_none().then_some(args.backend);
    let mut compiled = match compile_with(
        &source_name,
        &source,
        args.ratio,
        backend,
        &model,
        args.target.into(),
        &job,
    ) {
        Ok(c) => c,
        Err(CompileError::Diags(diags)) => {
            emit(&name, &source, &diags);
            return Ok(ExitCode::FAILURE);
        }
        Err(CompileError::Message(m)) => return Err(m),
    };
    weigh_shared_cores(&mut compiled, args.ratio, cores_here());
    emit(&name, &source, &compiled.diags);
    eprintln!("perfskel compile: {} ({model_from})", compiled.report);
    if args.emit.is_some() {
        print!("{}", perfskel_grammar::print(&compiled.scaled.program));
        return Ok(ExitCode::SUCCESS);
    }
    let Some(output) = args.output else {
        return Err("give an output directory with -o".into());
    };
    write_output(&output, &compiled.files, args.force)?;
    eprintln!(
        "perfskel compile: wrote {} into {} ({} back end); `perfskel run {} -np {}` builds and runs it",
        plural(compiled.files.len(), "file"),
        output.display(),
        args.backend,
        output.display(),
        compiled.scaled.program.ranks.value
    );
    Ok(ExitCode::SUCCESS)
}

/// This machine's cores (1 when they cannot be known).
pub fn cores_here() -> u64 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u64)
}

/// Where the skeleton's ranks outnumber `cores` (this machine's, where it is usually
/// traced and run), a run must last longer to time reliably ([`min_reliable_s`]): the
/// scaler's `too-short-to-time` warning, which assumes a core for each rank, is made
/// again with that bound.
pub fn weigh_shared_cores(compiled: &mut Compiled, ratio: u64, cores: u64) {
    let ranks = compiled.scaled.program.ranks.value;
    if ratio <= 1 || ranks <= cores {
        return;
    }
    let min_s = min_reliable_s(ranks, cores);
    compiled.diags.retain(|d| d.code != "too-short-to-time");
    if let Some(diag) = too_short_to_time(&compiled.app_time, compiled.scaled.ratio_reached, min_s)
    {
        compiled.diags.push(diag.with_note(format!(
            "its {ranks} ranks share this machine's {cores} cores, each running in turns: a run must last {} times as long as with a core for each",
            ranks.div_ceil(cores)
        )));
    }
}

/// The model to scale with and where it came from: `path` as given, or the cached model
/// of `mpi` when it was measured on this machine with this MPI and perfskel (see
/// [`cmd_calibrate::machine_key`]; a stale one is never used), or, when none is and
/// `calibrate` (and `PERFSKEL_NO_CALIBRATE` is not set), one measured now and cached
/// (`perfskel calibrate`, once per machine and MPI), else the built-in defaults. The default target divides the model's time of the
/// scaled skeleton by its time of the whole one, so the model's errors mostly cancel;
/// where communication that loops do not cut decides the ratio reached, a measured model
/// decides it better.
pub fn load_model(
    path: Option<&Path>,
    mpi: MpiKind,
    calibrate: bool,
) -> Result<(Model, String), String> {
    let (path, explicit) = match path {
        Some(p) => (p.to_path_buf(), true),
        None => (cmd_calibrate::default_model_path(mpi), false),
    };
    if explicit || path.is_file() {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read the model {}: {e}", path.display()))?;
        let model = Model::from_json(&text)
            .map_err(|e| format!("{} is not a perfskel model: {e}", path.display()))?;
        if explicit {
            return Ok((model, path.display().to_string()));
        }
        let here = cmd_calibrate::machine_key(mpi);
        if model.measured_on.as_deref() == Some(here.as_str()) {
            return Ok((model, path.display().to_string()));
        }
        eprintln!(
            "perfskel compile: the cached model {} was measured on {}, not on {here}: not used",
            path.display(),
            model
                .measured_on
                .as_deref()
                .unwrap_or("an unrecorded machine"),
        );
    }
    if !calibrate || std::env::var_os("PERFSKEL_NO_CALIBRATE").is_some() {
        return Ok((
            Model::default(),
            format!(
                "built-in defaults (`perfskel calibrate --mpi {}` measures this machine)",
                mpi.name()
            ),
        ));
    }
    eprintln!(
        "perfskel compile: measuring this machine with {} once (a ping-pong on 2 ranks, as `perfskel calibrate` does; --no-calibrate skips it)",
        mpi.name()
    );
    let launcher = vec![crate::cmd_run::default_launcher(mpi)];
    // On a busy machine the model is used for this compile but not kept: it would stand
    // for the load, not the machine.
    let busy = cmd_calibrate::busy();
    let kept = cmd_calibrate::measure(mpi, 2, &launcher).and_then(|model| match busy {
        Some(load) => Ok((
            model,
            format!(
                "measured now on a busy machine (load average {load:.2}), not cached: `perfskel calibrate --mpi {}` on the idle machine keeps one",
                mpi.name()
            ),
        )),
        None => cmd_calibrate::save(&model, &path)
            .map(|()| (model, format!("{} (measured now)", path.display()))),
    });
    Ok(kept.unwrap_or_else(|e| defaults_after(&e)))
}

/// The built-in defaults, after measuring failed with `error`.
fn defaults_after(error: &str) -> (Model, String) {
    let first = error.lines().next().unwrap_or("");
    (
        Model::default(),
        format!("built-in defaults (measuring this machine failed: {first})"),
    )
}

/// Writes `files` into `dir`. Refuses a directory with files perfskel did not write,
/// or with files it wrote that were changed since (hand edits: the manifest keeps each
/// file's hash), unless `force`; removes files an earlier compile wrote that are no
/// longer generated, unless they were changed. Never writes through a symbolic link: each
/// file is written beside and renamed into place, and `dir` itself may not be a link.
pub fn write_output(dir: &Path, files: &[GeneratedFile], force: bool) -> Result<(), String> {
    if std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(format!(
            "{} is a symbolic link: give the directory itself (perfskel does not write through links)",
            dir.display()
        ));
    }
    // Each line `path` (before hashes were kept) or `path<TAB>hash`.
    let previous: BTreeMap<String, Option<String>> = std::fs::read_to_string(dir.join(MANIFEST))
        .map(|text| {
            text.lines()
                .filter(|l| !l.is_empty())
                .map(|l| match l.split_once('\t') {
                    Some((path, hash)) => (path.to_string(), Some(hash.to_string())),
                    None => (l.to_string(), None),
                })
                .collect()
        })
        .unwrap_or_default();
    // A plain relative path an earlier compile recorded, whose file is as it wrote it.
    let plain = |p: &str| !p.split('/').any(|part| part == ".." || part.is_empty());
    let edited = |p: &str, hash: &Option<String>| -> bool {
        let Some(hash) = hash else { return false };
        match std::fs::read(dir.join(p)) {
            Ok(bytes) => content_hash(&bytes) != *hash,
            Err(_) => false,
        }
    };
    if dir.exists() {
        let entries = std::fs::read_dir(dir)
            .map_err(|e| format!("cannot read the output directory {}: {e}", dir.display()))?;
        let mut foreign: Vec<String> = entries
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| {
                !BUILD_PRODUCTS.contains(&name.as_str())
                    && !previous
                        .keys()
                        .any(|p| p == name || p.starts_with(&format!("{name}/")))
            })
            .collect();
        foreign.sort();
        if !foreign.is_empty() && !force {
            let shown: Vec<&str> = foreign.iter().take(5).map(String::as_str).collect();
            return Err(format!(
                "{} holds files perfskel did not write ({}{}); choose an empty directory, or pass --force to write into it (other files are kept)",
                dir.display(),
                shown.join(", "),
                if foreign.len() > 5 { ", ..." } else { "" }
            ));
        }
        let changed: Vec<&str> = previous
            .iter()
            .filter(|(p, hash)| plain(p) && edited(p, hash))
            .map(|(p, _)| p.as_str())
            .collect();
        if !changed.is_empty() && !force {
            return Err(format!(
                "{}: {} changed since perfskel wrote {} (edited by hand?); compile into another directory, or pass --force to overwrite {}",
                dir.display(),
                changed.join(", "),
                if changed.len() == 1 { "it" } else { "them" },
                if changed.len() == 1 { "it" } else { "them" }
            ));
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let new: BTreeSet<String> = files.iter().map(|f| f.path.clone()).collect();
    for (stale, hash) in &previous {
        // An edited file is never removed, even with --force: only overwritten.
        if !new.contains(stale) && plain(stale) && !edited(stale, hash) {
            let path = dir.join(stale);
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
                let _ = std::fs::remove_file(path);
            }
        }
    }
    let mut manifest = Vec::new();
    for file in files {
        let path = dir.join(&file.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        write_atomic(&path, file.contents.as_bytes())?;
        manifest.push(format!(
            "{}\t{}",
            file.path,
            content_hash(file.contents.as_bytes())
        ));
    }
    manifest.sort();
    write_atomic(&dir.join(MANIFEST), (manifest.join("\n") + "\n").as_bytes())
}

/// The hash the manifest keeps of a generated file.
fn content_hash(bytes: &[u8]) -> String {
    format!("{:016x}", fnv1a(&[bytes]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios() {
        assert_eq!(parse_ratio("1:100"), Ok(100));
        assert_eq!(parse_ratio("1:1"), Ok(1));
        assert!(parse_ratio("1:0").unwrap_err().contains("at least 1"));
        assert!(parse_ratio("1:0.5").unwrap_err().contains("below 1"));
        assert!(parse_ratio("2:100").unwrap_err().contains("1:K"));
        assert!(parse_ratio("100").unwrap_err().contains("not a ratio"));
        assert!(parse_ratio("1:abc").unwrap_err().contains("whole number"));
        assert!(parse_backend("fortran")
            .unwrap_err()
            .contains("unknown back end"));
    }
}
