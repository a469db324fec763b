//! perfskel trace directories as analysis input: takes a trace's manifest, the per-rank
//! statistics of the trace front end ([`StatsBuilder`], fed rank by rank by the caller,
//! who opens the files) and a call-site symbolizer, gives one [`Experiment`].
//!
//! - application: the file name of the object holding the `MPI_Init` call site (the
//!   traced executable: `ring` for `mpirun -np 4 ./ring 64`), else of the traced command
//!   `manifest.command[0]`;
//! - tasks: `manifest.n_ranks`; each task's run time: end of `MPI_Init` to start of
//!   `MPI_Finalize`, as `perfskel trace stats` counts it;
//! - one call site per (source file name, line, function, operation), each rank's count,
//!   total/min/max time of one call and bytes sent (receives count 0, as in mpiP);
//!   `MPI_Init`, `MPI_Init_thread` and `MPI_Finalize` are not communication and are left
//!   out. Sites that do not symbolize to a line keep `object+0xoffset` as their file and
//!   line 0. Times are converted from ns to seconds.
//!
//! Every rank must have been read completely: missing, unreadable and incomplete ranks
//! (no end record: the rank did not reach `MPI_Finalize`) make the whole trace an
//! error naming them, never an experiment with fewer tasks.

use std::collections::BTreeMap;

use super::{mpip, CallSiteKey, CallSiteProfile, Experiment, InputError, TaskStats};
use perfskel_compiler::trace::format::{self, Op};
use perfskel_compiler::trace::manifest::Manifest;
use perfskel_compiler::trace::stats::{SiteKey, StatsBuilder, Totals};
use perfskel_compiler::trace::symbolize::Location;

/// Builds the experiment of the trace `name` (its directory, for messages).
///
/// `stats` must have been created with `manifest.n_ranks` and fed every rank that could
/// be read; ranks absent from it (recorded with [`StatsBuilder::missing_rank`] or not)
/// are reported. `locate` symbolizes an object-relative call site.
pub fn from_trace(
    name: &str,
    manifest: &Manifest,
    stats: &StatsBuilder,
    locate: &dyn Fn(&SiteKey) -> Location,
) -> Result<Experiment, InputError> {
    let n_tasks = manifest.n_ranks;
    if n_tasks == 0 {
        return Err(InputError::whole(name, "the trace has 0 ranks"));
    }
    if stats.n_ranks() != n_tasks {
        return Err(InputError::whole(
            name,
            format!(
                "statistics for {} ranks given for a trace of {n_tasks} ranks",
                stats.n_ranks()
            ),
        ));
    }
    let (mut missing, mut unread, mut incomplete) = (Vec::new(), Vec::new(), Vec::new());
    for rank in 0..n_tasks {
        match stats.rank(rank) {
            Some(st) if !st.complete => incomplete.push(rank),
            Some(_) => {}
            None if stats.missing_ranks().contains(&rank) => missing.push(rank),
            None => unread.push(rank),
        }
    }
    if !(missing.is_empty() && unread.is_empty() && incomplete.is_empty()) {
        let mut problems = Vec::new();
        let files = |ranks: &[u32]| {
            ranks
                .iter()
                .map(|r| format::rank_file_name(*r))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !missing.is_empty() {
            problems.push(format!(
                "missing {} (no {})",
                ranks(&missing),
                files(&missing)
            ));
        }
        if !unread.is_empty() {
            problems.push(format!("unreadable {}", ranks(&unread)));
        }
        if !incomplete.is_empty() {
            problems.push(format!(
                "incomplete {} (no end record: the rank did not reach MPI_Finalize)",
                ranks(&incomplete)
            ));
        }
        return Err(InputError::whole(
            name,
            format!(
                "trace of {n_tasks} ranks is not whole: {}; analyze needs every rank of a run",
                problems.join("; ")
            ),
        ));
    }

    let mut task_times_s = Vec::with_capacity(n_tasks as usize);
    let mut init_object = None;
    // Several return addresses can map to one source line (two calls on a line, inlined
    // copies): their statistics merge per task.
    let mut sites: BTreeMap<CallSiteKey, BTreeMap<u32, Totals>> = BTreeMap::new();
    let mut located: BTreeMap<SiteKey, Location> = BTreeMap::new();
    for rank in 0..n_tasks {
        let Some(st) = stats.rank(rank) else {
            continue;
        };
        task_times_s.push(seconds(st.app_ns));
        for ((op, key), totals) in &st.sites {
            match op {
                Op::Init | Op::InitThread => {
                    if init_object.is_none() && !key.object.is_empty() {
                        init_object = Some(key.object.clone());
                    }
                    continue;
                }
                Op::Finalize => continue,
                _ => {}
            }
            let location = located
                .entry(key.clone())
                .or_insert_with(|| locate(key))
                .clone();
            let site = call_site_key(*op, key, location);
            sites
                .entry(site)
                .or_default()
                .entry(rank)
                .or_default()
                .merge(totals);
        }
    }

    let application = init_object
        .as_deref()
        .map(mpip::application_name)
        .filter(|a| !a.is_empty())
        .or_else(|| {
            manifest
                .command
                .first()
                .map(|c| mpip::application_name(c))
                .filter(|a| !a.is_empty())
        })
        .ok_or_else(|| {
            InputError::whole(
                name,
                "cannot name the application: no MPI_Init call site and no command in the manifest",
            )
        })?;

    let call_sites = sites
        .into_iter()
        .map(|(site, per_rank)| CallSiteProfile {
            site,
            tasks: per_rank
                .into_iter()
                .map(|(rank, t)| TaskStats {
                    task: Some(rank),
                    count: t.count,
                    total_s: seconds(t.total_ns),
                    min_s: seconds(t.min_ns),
                    max_s: seconds(t.max_ns),
                    bytes: t.sent_bytes as f64,
                })
                .collect(),
        })
        .collect();
    let experiment = Experiment {
        name: name.to_owned(),
        application,
        n_tasks,
        task_times_s,
        call_sites,
    };
    experiment
        .validate()
        .map_err(|message| InputError::whole(name, message))?;
    Ok(experiment)
}

fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// `rank 2` or `ranks 2, 3`.
fn ranks(ranks: &[u32]) -> String {
    let names: Vec<String> = ranks.iter().map(u32::to_string).collect();
    let s = if ranks.len() == 1 { "" } else { "s" };
    format!("rank{s} {}", names.join(", "))
}

/// The analysis key of a symbolized site: the source file's name (last component), line
/// and function; `object+0xoffset` and line 0 when there is no line.
fn call_site_key(op: Op, key: &SiteKey, location: Location) -> CallSiteKey {
    let operation = op
        .mpi_name()
        .strip_prefix("MPI_")
        .unwrap_or(op.mpi_name())
        .to_owned();
    let function = location.function.clone().unwrap_or_else(|| "?".into());
    match (&location.file, location.line) {
        (Some(file), Some(line)) => CallSiteKey {
            file: file.rsplit('/').next().unwrap_or(file).to_owned(),
            line,
            function,
            operation,
        },
        _ => {
            let object = key.object.rsplit('/').next().unwrap_or(&key.object);
            CallSiteKey {
                file: format!("{object}+0x{:x}", key.offset),
                line: 0,
                function,
                operation,
            }
        }
    }
}
