//! The statistical scalability analysis: takes experiments (any mix of applications),
//! gives per application the call sites and operations ranked by the Spearman
//! correlation of their share of communication time with the task count.
//!
//! Following the seed (Vetter and McCracken, PPoPP 2001, section 3), per-task values
//! are first summed over the tasks of an experiment — comparing task `i` of a 16-task
//! run with task `i` of a 64-task run means nothing — and each sum is divided by the
//! experiment's total communication time. A call site an experiment never executed has
//! share 0 there. Replicated runs at a task count are separate experiments (ties in the
//! task-count ranking), so their noise enters the test instead of being averaged away.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;

use serde::Serialize;

use super::matching::site_time_matrix;
use super::spearman::{average_ranks, holm, p_value, pearson, ExactTest, RankScratch, EXACT_MAX_N};
use super::{CallSiteKey, Experiment};

/// Settings of an analysis.
#[derive(Clone, Debug)]
pub struct Options {
    /// Significance level for the Holm-adjusted p-values.
    pub alpha: f64,
    /// Analyze only this application; `None` analyzes each application found.
    pub application: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            alpha: 0.05,
            application: None,
        }
    }
}

/// The analysis of all applications found in the input, ordered by application name.
#[derive(Clone, Debug, Serialize)]
pub struct Analysis {
    /// One analysis per application.
    pub applications: Vec<AppAnalysis>,
}

/// The analysis of one application's experiments.
#[derive(Clone, Debug, Serialize)]
pub struct AppAnalysis {
    /// Application (command) name.
    pub application: String,
    /// Number of experiments: the `n` of every correlation.
    pub n_experiments: usize,
    /// The distinct task counts, ascending.
    pub task_counts: Vec<u32>,
    /// Significance level used for `grows`.
    pub alpha: f64,
    /// How the p-values were computed (depends on the number of experiments).
    pub p_value_method: PValueMethod,
    /// The experiments, ordered by task count then name (the order of every per-experiment
    /// vector below).
    pub experiments: Vec<ExperimentSummary>,
    /// Call sites ranked by correlation, strongest growth first.
    pub call_sites: Vec<SiteResult>,
    /// The coarser view: MPI operations (all their call sites together), ranked alike.
    pub operations: Vec<OperationResult>,
}

/// How p-values are computed; see `spearman`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PValueMethod {
    /// All orderings enumerated (up to `EXACT_MAX_N` experiments).
    ExactPermutation,
    /// Student's t approximation with `n - 2` degrees of freedom.
    StudentsT,
}

/// The coarse view of one experiment: how much of its time is communication.
#[derive(Clone, Debug, Serialize)]
pub struct ExperimentSummary {
    /// Experiment name (input file).
    pub name: String,
    /// Task count.
    pub n_tasks: u32,
    /// Communication time summed over tasks, seconds.
    pub comm_time_s: f64,
    /// Run time summed over tasks, seconds, when the input has it.
    pub app_time_s: Option<f64>,
    /// `comm_time_s / app_time_s`; the computation share is its complement.
    pub comm_share: Option<f64>,
}

/// A rank correlation with its significance.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Correlation {
    /// Spearman's rho of share and task count; `None` when the share is constant (a
    /// site with the same share in every experiment, e.g. never executed).
    pub rho: Option<f64>,
    /// Two-sided p-value (t approximation, see `spearman`).
    pub p_value: f64,
    /// Holm-adjusted p-value over all call sites (or operations) of the application.
    pub p_adjusted: f64,
    /// `rho > 0` and `p_adjusted < alpha`: the share grows with the task count.
    pub grows: bool,
}

/// One call site's result.
#[derive(Clone, Debug, Serialize)]
pub struct SiteResult {
    /// The call site.
    pub site: CallSiteKey,
    /// Correlation of its share with the task count.
    pub correlation: Correlation,
    /// Mean share over the experiments at each task count (aligned with `task_counts`).
    pub share_by_tasks: Vec<f64>,
    /// Time summed over tasks, per experiment (aligned with `experiments`), seconds.
    pub times_s: Vec<f64>,
}

/// One MPI operation's result (all its call sites summed).
#[derive(Clone, Debug, Serialize)]
pub struct OperationResult {
    /// Operation name, e.g. `Wait`.
    pub operation: String,
    /// Correlation of its share with the task count.
    pub correlation: Correlation,
    /// Mean share over the experiments at each task count (aligned with `task_counts`).
    pub share_by_tasks: Vec<f64>,
    /// Time summed over tasks, per experiment (aligned with `experiments`), seconds.
    pub times_s: Vec<f64>,
}

impl SiteResult {
    /// Mean share at the smallest task count.
    pub fn share_at_min(&self) -> f64 {
        self.share_by_tasks.first().copied().unwrap_or(0.0)
    }
    /// Mean share at the largest task count.
    pub fn share_at_max(&self) -> f64 {
        self.share_by_tasks.last().copied().unwrap_or(0.0)
    }
}

/// Why a set of experiments cannot be analyzed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnalyzeError {
    /// The input held no experiment at all.
    NoExperiments,
    /// Too few experiments for a rank correlation.
    TooFewExperiments {
        /// The application.
        application: String,
        /// How many it has.
        n_experiments: usize,
    },
    /// Every experiment ran with the same task count: nothing to correlate with.
    SingleTaskCount {
        /// The application.
        application: String,
        /// The only task count.
        n_tasks: u32,
    },
    /// An experiment has no communication time, so shares are undefined.
    ZeroCommunication {
        /// The application.
        application: String,
        /// The experiment (input file).
        experiment: String,
    },
    /// `Options::application` names an application not in the input.
    UnknownApplication {
        /// The requested name.
        wanted: String,
        /// The applications present.
        available: Vec<String>,
    },
}

impl fmt::Display for AnalyzeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnalyzeError::NoExperiments => write!(f, "no experiments in the input"),
            AnalyzeError::TooFewExperiments {
                application,
                n_experiments,
            } => write!(
                f,
                "application `{application}`: {n_experiments} experiment(s); a rank \
                 correlation needs at least {MIN_EXPERIMENTS} runs over at least two task counts"
            ),
            AnalyzeError::SingleTaskCount {
                application,
                n_tasks,
            } => write!(
                f,
                "application `{application}`: every experiment ran with {n_tasks} tasks; \
                 the analysis needs runs at two or more task counts"
            ),
            AnalyzeError::ZeroCommunication {
                application,
                experiment,
            } => write!(
                f,
                "application `{application}`: experiment `{experiment}` has zero \
                 communication time, so call-site shares are undefined; remove it or \
                 check that the profiler recorded MPI calls"
            ),
            AnalyzeError::UnknownApplication { wanted, available } => write!(
                f,
                "no experiments of application `{wanted}`; the input has: {}",
                available.join(", ")
            ),
        }
    }
}

impl std::error::Error for AnalyzeError {}

/// Fewest experiments analyzed: with two, any rho is ±1 and the t test has no freedom.
pub const MIN_EXPERIMENTS: usize = 3;

/// Analyzes experiments, each application on its own.
pub fn analyze(experiments: &[Experiment], options: &Options) -> Result<Analysis, AnalyzeError> {
    if experiments.is_empty() {
        return Err(AnalyzeError::NoExperiments);
    }
    let mut by_app: BTreeMap<&str, Vec<&Experiment>> = BTreeMap::new();
    for experiment in experiments {
        by_app
            .entry(experiment.application.as_str())
            .or_default()
            .push(experiment);
    }
    if let Some(wanted) = &options.application {
        if !by_app.contains_key(wanted.as_str()) {
            return Err(AnalyzeError::UnknownApplication {
                wanted: wanted.clone(),
                available: by_app.keys().map(|s| s.to_string()).collect(),
            });
        }
        by_app.retain(|app, _| app == wanted);
    }
    let applications = by_app
        .into_iter()
        .map(|(app, runs)| analyze_application(app, runs, options.alpha))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Analysis { applications })
}

fn analyze_application(
    application: &str,
    mut runs: Vec<&Experiment>,
    alpha: f64,
) -> Result<AppAnalysis, AnalyzeError> {
    runs.sort_by(|a, b| a.n_tasks.cmp(&b.n_tasks).then_with(|| a.name.cmp(&b.name)));
    let n_runs = runs.len();
    if n_runs < MIN_EXPERIMENTS {
        return Err(AnalyzeError::TooFewExperiments {
            application: application.to_owned(),
            n_experiments: n_runs,
        });
    }
    let groups = task_groups(&runs);
    if groups.len() < 2 {
        return Err(AnalyzeError::SingleTaskCount {
            application: application.to_owned(),
            n_tasks: runs[0].n_tasks,
        });
    }

    let (keys, site_times) = site_time_matrix(&runs);
    let mut comm = vec![0.0; n_runs];
    for times in &site_times {
        for (total, t) in comm.iter_mut().zip(times) {
            *total += t;
        }
    }
    if let Some(idx) = comm.iter().position(|&t| t <= 0.0 || !t.is_finite()) {
        return Err(AnalyzeError::ZeroCommunication {
            application: application.to_owned(),
            experiment: runs[idx].name.clone(),
        });
    }

    let task_counts: Vec<f64> = runs.iter().map(|r| f64::from(r.n_tasks)).collect();
    let mut scratch = Scratch::default();
    let mut x_ranks = Vec::new();
    average_ranks(&task_counts, &mut scratch.order, &mut x_ranks);
    let p_value_method = if n_runs <= EXACT_MAX_N {
        PValueMethod::ExactPermutation
    } else {
        PValueMethod::StudentsT
    };

    // The operation view sums the call sites of each operation.
    let mut op_times: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for (key, times) in keys.iter().zip(&site_times) {
        let acc = op_times
            .entry(key.operation.as_str())
            .or_insert_with(|| vec![0.0; n_runs]);
        for (a, t) in acc.iter_mut().zip(times) {
            *a += t;
        }
    }

    let site_stats = correlate_all(&site_times, &comm, &x_ranks, &groups);
    let site_adjusted = holm(&site_stats.iter().map(|s| s.1).collect::<Vec<_>>());
    let mut call_sites: Vec<SiteResult> = keys
        .into_iter()
        .zip(site_times)
        .zip(site_stats)
        .zip(site_adjusted)
        .map(|(((key, times_s), (rho, p, shares)), p_adj)| SiteResult {
            site: key.clone(),
            correlation: correlation(rho, p, p_adj, alpha),
            share_by_tasks: shares,
            times_s,
        })
        .collect();
    call_sites.sort_by(|a, b| {
        by_growth(&a.correlation, &b.correlation).then_with(|| a.site.cmp(&b.site))
    });

    let op_series: Vec<&Vec<f64>> = op_times.values().collect();
    let op_stats = correlate_all(&op_series, &comm, &x_ranks, &groups);
    let op_adjusted = holm(&op_stats.iter().map(|s| s.1).collect::<Vec<_>>());
    let mut operations: Vec<OperationResult> = op_times
        .into_iter()
        .zip(op_stats)
        .zip(op_adjusted)
        .map(
            |(((op, times_s), (rho, p, shares)), p_adj)| OperationResult {
                operation: op.to_owned(),
                correlation: correlation(rho, p, p_adj, alpha),
                share_by_tasks: shares,
                times_s,
            },
        )
        .collect();
    operations.sort_by(|a, b| {
        by_growth(&a.correlation, &b.correlation).then_with(|| a.operation.cmp(&b.operation))
    });

    let experiments = runs
        .iter()
        .zip(&comm)
        .map(|(run, &comm_time_s)| {
            let app_time_s = run.app_time_s();
            ExperimentSummary {
                name: run.name.clone(),
                n_tasks: run.n_tasks,
                comm_time_s,
                app_time_s,
                comm_share: app_time_s.filter(|&t| t > 0.0).map(|t| comm_time_s / t),
            }
        })
        .collect();

    Ok(AppAnalysis {
        application: application.to_owned(),
        n_experiments: n_runs,
        task_counts: groups.iter().map(|g| g.0).collect(),
        alpha,
        p_value_method,
        experiments,
        call_sites,
        operations,
    })
}

/// Strongest growth first: higher rho, then smaller p; undefined rho last.
fn by_growth(a: &Correlation, b: &Correlation) -> std::cmp::Ordering {
    let rho_a = a.rho.unwrap_or(f64::NEG_INFINITY);
    let rho_b = b.rho.unwrap_or(f64::NEG_INFINITY);
    rho_b
        .total_cmp(&rho_a)
        .then_with(|| a.p_value.total_cmp(&b.p_value))
}

fn correlation(rho: Option<f64>, p_value: f64, p_adjusted: f64, alpha: f64) -> Correlation {
    Correlation {
        rho,
        p_value,
        p_adjusted,
        grows: matches!(rho, Some(r) if r > 0.0) && p_adjusted < alpha,
    }
}

/// Reusable buffers for the per-site loop.
#[derive(Default)]
struct Scratch {
    order: RankScratch,
    shares: Vec<f64>,
    ranks: Vec<f64>,
}

/// Sites handled by one thread at least; below this, threads cost more than they save.
const MIN_SITES_PER_THREAD: usize = 256;

/// [`correlate`] over many series, on several threads for large studies. Each thread
/// works on a contiguous chunk and the chunks are concatenated in order, so the result
/// does not depend on the number of threads.
fn correlate_all<S: AsRef<[f64]> + Sync>(
    series: &[S],
    comm: &[f64],
    x_ranks: &[f64],
    groups: &[(u32, Range<usize>)],
) -> Vec<(Option<f64>, f64, Vec<f64>)> {
    let run_chunk = |chunk: &[S]| {
        let mut scratch = Scratch::default();
        let mut exact = (comm.len() <= EXACT_MAX_N).then(|| ExactTest::new(x_ranks));
        chunk
            .iter()
            .map(|times| {
                correlate(
                    times.as_ref(),
                    comm,
                    x_ranks,
                    groups,
                    &mut scratch,
                    exact.as_mut(),
                )
            })
            .collect::<Vec<_>>()
    };
    let n_threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(series.len() / MIN_SITES_PER_THREAD)
        .max(1);
    if n_threads == 1 {
        return run_chunk(series);
    }
    let chunk_len = series.len().div_ceil(n_threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = series
            .chunks(chunk_len)
            .map(|chunk| scope.spawn(move || run_chunk(chunk)))
            .collect();
        handles
            .into_iter()
            .flat_map(|handle| match handle.join() {
                Ok(results) => results,
                // `correlate` does not panic; if it ever did, re-raise it here.
                Err(payload) => std::panic::resume_unwind(payload),
            })
            .collect()
    })
}

/// Shares of one site (or operation) per experiment, their correlation with the task
/// count, and the mean share per task count.
fn correlate(
    times: &[f64],
    comm: &[f64],
    x_ranks: &[f64],
    groups: &[(u32, Range<usize>)],
    scratch: &mut Scratch,
    exact: Option<&mut ExactTest>,
) -> (Option<f64>, f64, Vec<f64>) {
    scratch.shares.clear();
    scratch
        .shares
        .extend(times.iter().zip(comm).map(|(t, c)| t / c));
    average_ranks(&scratch.shares, &mut scratch.order, &mut scratch.ranks);
    let rho = pearson(x_ranks, &scratch.ranks);
    let p = match (rho, exact) {
        (None, _) => 1.0,
        (Some(_), Some(test)) => test.p_value(&scratch.ranks),
        (Some(r), None) => p_value(r, times.len()),
    };
    let by_tasks = groups
        .iter()
        .map(|(_, range)| {
            let slice = &scratch.shares[range.clone()];
            slice.iter().sum::<f64>() / slice.len().max(1) as f64
        })
        .collect();
    (rho, p, by_tasks)
}

/// Contiguous ranges of runs (sorted by task count) sharing a task count.
fn task_groups(runs: &[&Experiment]) -> Vec<(u32, Range<usize>)> {
    let mut groups: Vec<(u32, Range<usize>)> = Vec::new();
    for (idx, run) in runs.iter().enumerate() {
        match groups.last_mut() {
            Some((n, range)) if *n == run.n_tasks => range.end = idx + 1,
            _ => groups.push((run.n_tasks, idx..idx + 1)),
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::test_experiment as experiment;
    use proptest::prelude::*;

    proptest! {
        // Studies of up to 8 runs enumerate all orderings: fewer cases keep this quick.
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Any study gives a result or an error, and every result is within bounds.
        #[test]
        fn results_are_bounded(
            runs in prop::collection::vec(
                (1u32..6, prop::collection::vec(0.0f64..10.0, 0..5)),
                0..14,
            )
        ) {
            let experiments: Vec<Experiment> = runs
                .iter()
                .enumerate()
                .map(|(idx, (tasks, times))| experiment(idx, 1 << tasks, times))
                .collect();
            if let Ok(analysis) = analyze(&experiments, &Options::default()) {
                for app in &analysis.applications {
                    for site in &app.call_sites {
                        let c = site.correlation;
                        prop_assert!(c.rho.is_none_or(|r| (-1.0..=1.0).contains(&r)));
                        prop_assert!((0.0..=1.0).contains(&c.p_value));
                        prop_assert!(c.p_adjusted >= c.p_value && c.p_adjusted <= 1.0);
                        prop_assert!(site.share_by_tasks.iter().all(|s| (0.0..=1.0 + 1e-12).contains(s)));
                    }
                    let total: f64 = app.call_sites.iter().map(|s| s.share_at_max()).sum();
                    prop_assert!((total - 1.0).abs() < 1e-9, "shares sum to {total}");
                }
            }
        }
    }
}
