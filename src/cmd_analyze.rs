//! `perfskel analyze`: reads profile files and directories, runs the statistical
//! scalability analysis of `perfskel_studies::analyze`, prints the report and writes
//! plots and exports. All file access of the analysis is here.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use perfskel_compiler::trace::format;
use perfskel_compiler::trace::stats::StatsBuilder;
use perfskel_studies::analyze::{self, extrap, plot, report, Experiment, InputFormat, Options};

use crate::cmd_trace::{self, Symbols};

/// Report format on standard output.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Format {
    /// Aligned text tables.
    Table,
    /// The whole analysis as JSON.
    Json,
    /// One row per call site.
    Csv,
}

#[derive(clap::Args)]
pub struct Args {
    /// Profiles of the experiments: mpiP reports, perfskel profile CSV or JSON files,
    /// perfskel trace directories (`perfskel record -o DIR`), or directories searched
    /// recursively for them. Replicated runs are welcome.
    #[arg(required = true, value_name = "PATH")]
    pub inputs: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Write SVG plots (communication share, operations, top call sites) into DIR.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Number of call-site curves in the top call-sites plot.
    #[arg(long, default_value_t = 5, value_name = "K")]
    pub plot_top: usize,
    /// Export the call-site data: `--export extrap FILE` writes Extra-P's text format.
    #[arg(long, num_args = 2, value_names = ["KIND", "FILE"])]
    pub export: Option<Vec<String>>,
    /// Analyze only this application (the command name of the runs).
    #[arg(long, value_name = "NAME")]
    pub application: Option<String>,
    /// Significance level for the Holm-adjusted p-values.
    #[arg(long, default_value_t = 0.05)]
    pub alpha: f64,
    /// Call sites shown per application in the table (0: all).
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub top: usize,
    /// Overwrite the export file and plots if they exist.
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: Args) -> Result<ExitCode, String> {
    if !(args.alpha > 0.0 && args.alpha < 1.0) {
        return Err(format!(
            "--alpha must be between 0 and 1, got {}",
            args.alpha
        ));
    }
    let export = match args.export.as_deref() {
        None => None,
        Some([kind, file]) if kind == "extrap" => Some(PathBuf::from(file)),
        Some([kind, _]) => {
            return Err(format!(
                "unknown export format `{kind}`; the supported one is `extrap`"
            ))
        }
        Some(_) => return Err("--export takes a format and a file: --export extrap FILE".into()),
    };
    if let Some(path) = &export {
        crate::files::check_new_file(path, args.force)?;
    }

    let experiments = read_inputs(&args.inputs)?;
    let options = Options {
        alpha: args.alpha,
        application: args.application.clone(),
    };
    let analysis = analyze::analyze(&experiments, &options).map_err(|e| e.to_string())?;

    let text = match args.format {
        Format::Table => report::render_table(&analysis, args.top),
        Format::Json => report::render_json(&analysis),
        Format::Csv => report::render_csv(&analysis),
    };
    print!("{text}");

    if let Some(dir) = &args.plot {
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for (name, svg) in plot::render(&analysis, args.plot_top)? {
            let path = dir.join(name);
            crate::files::write_new_file(&path, svg.as_bytes(), args.force)?;
        }
    }
    if let Some(path) = export {
        let app = match analysis.applications.as_slice() {
            [app] => app,
            apps => {
                let names: Vec<&str> = apps.iter().map(|a| a.application.as_str()).collect();
                return Err(format!(
                    "an Extra-P file holds one application but the input has {}: {}; \
                     choose one with --application",
                    apps.len(),
                    names.join(", ")
                ));
            }
        };
        crate::files::write_new_file(&path, extrap::render(app).as_bytes(), args.force)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Reads every input: files as given, directories recursively (in sorted order, taking
/// the files whose name or first line marks a known format).
fn read_inputs(inputs: &[PathBuf]) -> Result<Vec<Experiment>, String> {
    let mut files = Vec::new();
    let mut trace_dirs = Vec::new();
    for input in inputs {
        if input.is_dir() {
            collect_dir(input, &mut files, &mut trace_dirs)?;
        } else {
            files.push((input.clone(), true));
        }
    }
    let mut experiments = Vec::new();
    let mut errors: Vec<String> = Vec::new();
    for dir in &trace_dirs {
        match read_trace(dir) {
            Ok(experiment) => experiments.push(experiment),
            Err(problems) => errors.extend(problems),
        }
    }
    // The same report given twice (a copy, two links) is one run, not a replicate.
    let mut seen: std::collections::BTreeMap<u64, String> = std::collections::BTreeMap::new();
    for (path, explicit) in files {
        let name = path.display().to_string();
        let meta = fs::metadata(&path).map_err(|e| format!("{name}: {e}"))?;
        if !meta.is_file() {
            if explicit {
                return Err(format!("{name}: not a regular file"));
            }
            continue;
        }
        let bytes = fs::read(&path).map_err(|e| format!("{name}: {e}"))?;
        let hash = crate::files::fnv1a(&[&bytes]);
        let utf16 = bytes.starts_with(&[0xff, 0xfe]) || bytes.starts_with(&[0xfe, 0xff]);
        let Ok(text) = String::from_utf8(bytes) else {
            // Named as a profile, it is one the user expects read: said, not skipped.
            if explicit || InputFormat::detect(&name, "").is_some() {
                return Err(format!(
                    "{name}: not UTF-8 text{}",
                    if utf16 {
                        " (UTF-16: convert it with `iconv -f UTF-16 -t UTF-8`)"
                    } else {
                        ""
                    }
                ));
            }
            continue;
        };
        if !explicit && InputFormat::detect(&name, &text).is_none() {
            continue;
        }
        if let Some(first) = seen.get(&hash) {
            eprintln!(
                "perfskel analyze: warning: {name} is the same file as {first}: read once (a replicate is another run)"
            );
            continue;
        }
        seen.insert(hash, name.clone());
        match analyze::read_profile(&name, &text) {
            Ok(found) => experiments.extend(found),
            Err(err) => errors.push(err.to_string()),
        }
    }
    if !errors.is_empty() {
        return Err(errors.join("\nerror: "));
    }
    if experiments.is_empty() {
        return Err(
            "no profiles found (mpiP reports, .csv or .json profiles, perfskel traces)".into(),
        );
    }
    Ok(experiments)
}

/// Reads a perfskel trace directory into one experiment: the manifest, every rank file
/// streamed through the trace statistics, call sites symbolized from the traced objects.
/// Every problem is returned: unreadable rank files, then what `from_trace` says about
/// missing or incomplete ranks.
fn read_trace(dir: &Path) -> Result<Experiment, Vec<String>> {
    if let Some(anchor) = cmd_trace::otf2_archive(dir) {
        return read_otf2(dir, &anchor);
    }
    let name = dir.display().to_string();
    let manifest = match cmd_trace::read_manifest(dir) {
        Ok(Some(m)) => m,
        Ok(None) => {
            return Err(vec![format!(
                "{}: no such file",
                dir.join(format::MANIFEST_FILE).display()
            )])
        }
        Err(e) => return Err(vec![e]),
    };
    // The manifest checked against the rank files.
    let n_ranks = cmd_trace::n_ranks(dir).map_err(|e| vec![e])?;
    let mut stats = StatsBuilder::new(n_ranks);
    let mut errors = Vec::new();
    for rank in 0..n_ranks {
        match cmd_trace::open_rank(dir, rank) {
            Ok(Some(mut reader)) => {
                if let Err(e) = stats.add_rank(&mut reader) {
                    errors.push(format!("{name}: {e}"));
                }
            }
            Ok(None) => stats.missing_rank(rank),
            Err(e) => errors.push(format!("{name}: {e}")),
        }
    }
    let symbols = Symbols::default();
    match analyze::trace::from_trace(&name, &manifest, &stats, &|key| symbols.locate(key)) {
        Ok(experiment) if errors.is_empty() => Ok(experiment),
        Ok(_) => Err(errors),
        Err(e) => {
            errors.push(e.to_string());
            Err(errors)
        }
    }
}

/// An OTF2 archive as one experiment: its ranks through the trace statistics, named
/// after its directory where no call site names the application.
fn read_otf2(dir: &Path, anchor: &Path) -> Result<Experiment, Vec<String>> {
    let name = dir.display().to_string();
    let t = crate::otf2_input::Otf2Trace::open(anchor).map_err(|e| vec![e])?;
    let n_ranks = t.n_ranks();
    let mut stats = StatsBuilder::new(n_ranks);
    let mut errors = t.add_stats(&mut stats, &(0..n_ranks).collect::<Vec<_>>());
    let application = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "app".into());
    let manifest = perfskel_compiler::trace::Manifest {
        format_version: 0,
        n_ranks,
        mpi: String::new(),
        mpi_library: String::new(),
        launcher_version: String::new(),
        hosts: Vec::new(),
        command: vec![application],
        start_unix_ns: 0,
        end_unix_ns: 0,
        exit_code: Some(0),
        ranks: Vec::new(),
        runs: None,
    };
    let symbols = Symbols::default();
    let locate = |key: &perfskel_compiler::trace::stats::SiteKey| {
        t.location(key).unwrap_or_else(|| symbols.locate(key))
    };
    match analyze::trace::from_trace(&name, &manifest, &stats, &locate) {
        Ok(experiment) if errors.is_empty() => Ok(experiment),
        Ok(_) => Err(errors),
        Err(e) => {
            errors.push(e.to_string());
            Err(errors)
        }
    }
}

/// Collects the files under `dir`; directories holding a `manifest.json` are perfskel
/// trace directories and those holding an OTF2 anchor file `traces.otf2` OTF2 archives:
/// both go to `trace_dirs` instead.
fn collect_dir(
    dir: &Path,
    files: &mut Vec<(PathBuf, bool)>,
    trace_dirs: &mut Vec<PathBuf>,
) -> Result<(), String> {
    if dir.join(format::MANIFEST_FILE).is_file() || dir.join("traces.otf2").is_file() {
        trace_dirs.push(dir.to_path_buf());
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect_dir(&path, files, trace_dirs)?;
        } else {
            files.push((path, false));
        }
    }
    Ok(())
}
