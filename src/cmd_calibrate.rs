//! `perfskel calibrate`: measures the latency/bandwidth model of this machine and MPI with
//! a ping-pong program it builds and runs (latency, bandwidth with the fit's R², the
//! eager limit measured, communicator creation), and saves it where `perfskel compile`
//! finds it (`~/.cache/perfskel/models/<host>-<mpi>.json`) or in `--output`.

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use perfskel_compiler::scale::Model;

use crate::cmd_record::MpiKind;
use crate::cmd_run::{default_launcher, launch, mpicc};

const PINGPONG: &str = include_str!("../runtime/c/calibrate.c");

#[derive(clap::Args)]
pub struct Args {
    /// Which MPI to measure.
    #[arg(long, value_enum, default_value = "openmpi")]
    mpi: MpiKind,
    /// Ranks to run the ping-pong on (ranks 0 and 1 bounce messages; others wait).
    #[arg(short = 'n', long = "np", default_value_t = 2)]
    np: u64,
    /// Write the model to this file instead of the cache (`perfskel compile --model
    /// FILE` uses it); by default it is saved in the cache, one file per host and MPI,
    /// where `compile` looks for it.
    #[arg(short = 'o', long = "output")]
    output: Option<PathBuf>,
    /// The launcher and its options (default: the MPI's own mpirun).
    #[arg(long)]
    mpirun: Option<String>,
}

/// perfskel's cache directory: `$PERFSKEL_CACHE_DIR`, `$XDG_CACHE_HOME/perfskel` or
/// `~/.cache/perfskel`.
pub fn cache_dir() -> PathBuf {
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

/// What a cached model of `mpi` must have been measured on to be used: this host, its
/// processor and core count, the MPI library's version (its launcher's `--version`) and
/// this perfskel. A model measured elsewhere, with another MPI release or by another
/// perfskel is stale.
pub fn machine_key(mpi: MpiKind) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "unknown host".into());
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let launcher = default_launcher(mpi);
    let version = Command::new(&launcher)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .map(|out| {
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            // Open MPI: "mpirun (Open MPI) 4.1.4"; MPICH's Hydra: "Version: 4.0.2".
            text.lines()
                .find(|l| l.trim_start().starts_with("Version:"))
                .map(|l| format!("{launcher} {}", l.split_whitespace().last().unwrap_or("")))
                .or_else(|| {
                    text.lines()
                        .find(|l| !l.trim().is_empty())
                        .map(str::to_string)
                })
                .unwrap_or_default()
        })
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| format!("{launcher} (no version)"));
    format!(
        "{host}; {cpu} x {cores}; {version}; perfskel {}",
        env!("CARGO_PKG_VERSION")
    )
}

/// The 1-minute load average when it is over half the cores (other work would slow
/// the ping-pong down, and its model would stand for a loaded machine), `None` when the
/// machine is quiet enough or the load is unknown.
pub fn busy() -> Option<f64> {
    let load: f64 = std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    (load > 0.5 * cores).then_some(load)
}

/// Where `calibrate` saves the model of `mpi` and `compile` looks for it: one file per
/// host and MPI, so that hosts sharing a home directory (a cluster's login and compute
/// nodes) keep a model each instead of replacing each other's.
pub fn default_model_path(mpi: MpiKind) -> PathBuf {
    let host: String = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let host = if host.is_empty() {
        "unknown-host".to_string()
    } else {
        host
    };
    cache_dir()
        .join("models")
        .join(format!("{host}-{}.json", mpi.name()))
}

pub fn run(args: Args) -> Result<ExitCode, String> {
    if args.np < 2 {
        return Err("calibrate needs at least 2 ranks (-np 2)".into());
    }
    let launcher: Vec<String> = match &args.mpirun {
        Some(cmd) => cmd.split_whitespace().map(str::to_string).collect(),
        None => vec![default_launcher(args.mpi)],
    };
    if let Some(load) = busy() {
        eprintln!(
            "perfskel calibrate: warning: the machine is busy (load average {load:.2}): the model will stand for a loaded machine; measure when it is idle"
        );
    }
    let model = measure(args.mpi, args.np, &launcher)?;
    let (text, warnings) = describe(&model);
    println!("{}: {text}", args.mpi.name());
    for w in &warnings {
        eprintln!("perfskel calibrate: warning: {w}");
    }
    match &args.output {
        Some(path) => {
            save(&model, path)?;
            println!(
                "written to {}: `perfskel compile --model {}` uses it (the cache for this host is unchanged)",
                path.display(),
                path.display()
            );
        }
        None => {
            let path = default_model_path(args.mpi);
            save(&model, &path)?;
            println!(
                "saved for `perfskel compile --mpi {}` on this host: {}",
                args.mpi.name(),
                path.display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Builds the ping-pong program with `mpi`'s compiler, runs it on `np` ranks with
/// `launcher` and fits the model, marked with [`machine_key`].
pub fn measure(mpi: MpiKind, np: u64, launcher: &[String]) -> Result<Model, String> {
    // A folder of this process's own: two compiles may measure at once.
    let dir = cache_dir().join(format!("calibrate-{}-{}", mpi.name(), std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let model = measure_in(&dir, mpi, np, launcher);
    let _ = std::fs::remove_dir_all(&dir);
    model
}

fn measure_in(
    dir: &std::path::Path,
    mpi: MpiKind,
    np: u64,
    launcher: &[String],
) -> Result<Model, String> {
    std::fs::write(dir.join("calibrate.c"), PINGPONG)
        .map_err(|e| format!("cannot write the ping-pong program: {e}"))?;
    let cc = mpicc(mpi);
    let out = Command::new(&cc)
        .args([
            "-O2",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-o",
            "calibrate",
            "calibrate.c",
        ])
        .current_dir(dir)
        .output()
        .map_err(|e| format!("cannot run {cc}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "building the ping-pong program with {cc} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let run = launch(dir, mpi, launcher, np, "./calibrate", &[])?;
    if !run.success {
        return Err(format!(
            "the ping-pong program failed ({}):\n{}",
            run.status, run.stderr
        ));
    }
    let mut model = fit(mpi.name(), &run.stdout)?;
    model.measured_on = Some(machine_key(mpi));
    Ok(model)
}

/// Writes `model` to `path` (its folder created).
pub fn save(model: &Model, path: &std::path::Path) -> Result<(), String> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    // Written aside and renamed, so a compile reading it never sees half a model.
    crate::files::write_atomic(path, (model.to_json() + "\n").as_bytes())
}

/// The model from the ping-pong output: latency is the half round trip of an empty
/// message; bandwidth the least-squares slope over messages of 64 KiB and more (with
/// its R²); the eager limit the largest size whose send, and every smaller one's,
/// returned in under half the receiver's delay (the built-in value where the program
/// printed no such line).
pub fn fit(mpi: &str, output: &str) -> Result<Model, String> {
    let mut points: Vec<(f64, f64)> = Vec::new();
    let mut split = None;
    let mut rounds = None;
    let mut eager: Vec<(u64, f64, f64)> = Vec::new();
    for line in output.lines() {
        let fields: Vec<(&str, &str)> = line
            .split_whitespace()
            .filter_map(|w| w.split_once('='))
            .collect();
        let get = |key: &str| {
            fields
                .iter()
                .find(|(k, _)| *k == key)
                .and_then(|(_, v)| v.parse::<f64>().ok())
                .filter(|v| v.is_finite() && *v >= 0.0)
        };
        if line.starts_with("pingpong") {
            if let (Some(b), Some(s)) = (get("bytes"), get("seconds")) {
                points.push((b, s));
                if b == 0.0 {
                    rounds = get("fastest").zip(get("slowest"));
                }
            }
        } else if line.starts_with("comm_split") {
            split = get("seconds");
        } else if line.starts_with("eager") {
            if let (Some(b), Some(s), Some(d)) = (get("bytes"), get("send_seconds"), get("delay")) {
                eager.push((b as u64, s, d));
            }
        }
    }
    let latency = points
        .iter()
        .find(|(b, _)| *b == 0.0)
        .map(|p| p.1)
        .ok_or("the ping-pong program printed no timing of empty messages")?;
    let large: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|(b, _)| *b >= 65536.0)
        .collect();
    if large.len() < 2 {
        return Err("the ping-pong program printed too few large-message timings".into());
    }
    let n = large.len() as f64;
    let (mb, ms) = (
        large.iter().map(|p| p.0).sum::<f64>() / n,
        large.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let cov: f64 = large.iter().map(|p| (p.0 - mb) * (p.1 - ms)).sum();
    let var: f64 = large.iter().map(|p| (p.0 - mb).powi(2)).sum();
    let slope = cov / var;
    if slope.is_nan() || slope <= 0.0 {
        return Err(
            "large messages were not slower than small ones: the timing is unusable".into(),
        );
    }
    let intercept = ms - slope * mb;
    let residual: f64 = large
        .iter()
        .map(|p| (p.1 - (intercept + slope * p.0)).powi(2))
        .sum();
    let total: f64 = large.iter().map(|p| (p.1 - ms).powi(2)).sum();
    let r_squared = if total > 0.0 {
        1.0 - residual / total
    } else {
        1.0
    };
    let defaults = Model::default();
    eager.sort_by_key(|e| e.0);
    let eager_limit = (!eager.is_empty()).then(|| {
        eager
            .iter()
            .take_while(|(_, sent, delay)| *sent < 0.5 * delay)
            .last()
            .map_or(0, |e| e.0)
    });
    let (latency_fastest_s, latency_slowest_s) = rounds.unwrap_or((latency, latency));
    Ok(Model {
        mpi: mpi.to_string(),
        latency_s: latency.max(1e-8),
        bandwidth_bytes_per_s: 1.0 / slope,
        eager_limit_bytes: eager_limit.unwrap_or(defaults.eager_limit_bytes),
        comm_create_s: split.unwrap_or(defaults.comm_create_s),
        measured_on: None,
        fit: Some(perfskel_compiler::scale::Fit {
            r_squared,
            sizes: large.len() as u32,
            latency_fastest_s,
            latency_slowest_s,
            eager_measured: eager_limit.is_some(),
        }),
    })
}

/// What a measured model says of itself: each figure with how far to trust it, and
/// warnings where the measurement was noisy.
pub fn describe(model: &Model) -> (String, Vec<String>) {
    let mut warnings = Vec::new();
    let fit = model.fit.as_ref();
    let rounds = fit.map_or(String::new(), |f| {
        format!(
            " (rounds {:.2}–{:.2} µs)",
            f.latency_fastest_s * 1e6,
            f.latency_slowest_s * 1e6
        )
    });
    let line = fit.map_or(String::new(), |f| {
        format!(
            " (fit over {} sizes ≥ 64 KiB, R² {:.4})",
            f.sizes, f.r_squared
        )
    });
    let eager = match fit {
        Some(f) if f.eager_measured => format!(
            "eager limit {} B (measured: a larger send waited for its receive)",
            model.eager_limit_bytes
        ),
        _ => format!(
            "eager limit {} B (built in, not measured)",
            model.eager_limit_bytes
        ),
    };
    if let Some(f) = fit {
        if f.r_squared < 0.99 {
            warnings.push(format!(
                "the bandwidth line fits the large messages poorly (R² {:.3}): other work disturbed the measurement; measure again on the idle machine",
                f.r_squared
            ));
        }
        if f.latency_slowest_s > 2.0 * f.latency_fastest_s.max(1e-9) {
            warnings.push(format!(
                "the empty message's rounds spread from {:.2} to {:.2} µs: the latency is noisy; measure again on the idle machine",
                f.latency_fastest_s * 1e6,
                f.latency_slowest_s * 1e6
            ));
        }
    }
    (
        format!(
            "latency {:.2} µs{rounds}, bandwidth {:.2} GB/s{line}, {eager}, communicator creation {:.1} µs",
            model.latency_s * 1e6,
            model.bandwidth_bytes_per_s / 1e9,
            model.comm_create_s * 1e6
        ),
        warnings,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_latency_and_bandwidth() {
        let mut text = String::from("pingpong bytes=0 seconds=1.0e-6\n");
        for b in [65536.0f64, 262144.0, 1048576.0, 4194304.0] {
            text.push_str(&format!(
                "pingpong bytes={b} seconds={:e}\n",
                1e-6 + b / 2e9
            ));
        }
        text.push_str("comm_split seconds=3e-5\n");
        let m = fit("openmpi", &text).expect("fits");
        assert!((m.latency_s - 1e-6).abs() < 1e-12);
        assert!((m.bandwidth_bytes_per_s - 2e9).abs() / 2e9 < 1e-6);
        assert!((m.comm_create_s - 3e-5).abs() < 1e-12);
        let f = m.fit.clone().expect("a fit");
        assert!((f.r_squared - 1.0).abs() < 1e-9 && f.sizes == 4);
        // No eager lines (an older program): the built-in limit, said so.
        assert!(!f.eager_measured);
        assert_eq!(m.eager_limit_bytes, Model::default().eager_limit_bytes);
        assert!(describe(&m).0.contains("built in, not measured"));
        assert!(describe(&m).1.is_empty());
        assert!(fit("openmpi", "garbage").is_err());
    }

    #[test]
    fn the_eager_limit_is_the_largest_send_that_did_not_wait() {
        let mut text = String::from(
            "pingpong bytes=0 seconds=5e-7 fastest=4e-7 slowest=2e-6\npingpong bytes=65536 seconds=3e-5\npingpong bytes=262144 seconds=1.3e-4\npingpong bytes=1048576 seconds=4.5e-4\n",
        );
        // 4 KiB buffered; 8 KiB waited the 2 ms; a 16 KiB send that happened not to
        // wait does not raise the limit past the one that did.
        for (b, s) in [(256, 2e-6), (4096, 3e-6), (8192, 2.01e-3), (16384, 4e-6)] {
            text.push_str(&format!("eager bytes={b} send_seconds={s:e} delay=2e-3\n"));
        }
        let m = fit("mpich", &text).expect("fits");
        assert_eq!(m.eager_limit_bytes, 4096);
        let f = m.fit.clone().expect("a fit");
        assert!(f.eager_measured && f.r_squared < 1.0 && f.r_squared > 0.99);
        let (line, warnings) = describe(&m);
        assert!(line.contains("eager limit 4096 B (measured"), "{line}");
        assert!(line.contains("rounds 0.40–2.00 µs"), "{line}");
        assert_eq!(
            warnings.len(),
            1,
            "the latency's rounds spread: {warnings:?}"
        );
        // Every size waited: nothing is eager.
        let all_wait = text.replace("send_seconds=2e-6", "send_seconds=2.1e-3");
        assert_eq!(fit("mpich", &all_wait).expect("fits").eager_limit_bytes, 0);
    }
}
