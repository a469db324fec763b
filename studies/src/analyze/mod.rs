//! Statistical scalability analysis (`perfskel analyze`): takes profiles of many runs of
//! an application at different task counts and gives the communication call sites whose
//! share of communication time grows with the task count.
//!
//! # The profile model
//!
//! Every reader produces the same per-experiment model, so a new input format is one
//! function `fn(name: &str, text: &str) -> Result<Vec<Experiment>, InputError>`:
//!
//! - an [`Experiment`] is one run: its name (the file it came from), the application
//!   (command name, used to group runs), the task count, and optionally each task's
//!   total run time in seconds;
//! - it holds one [`CallSiteProfile`] per communication call site, identified by a
//!   [`CallSiteKey`] — source file, line, calling function and MPI operation — so the
//!   same site matches across experiments whatever ids a tool gave it;
//! - a call site holds one [`TaskStats`] per task that executed it: call count, total,
//!   minimum and maximum time of one call (seconds), bytes sent. `task: None` marks a
//!   row aggregated over tasks the input did not break down (mpiP rows hidden by its
//!   print threshold, or a tool that only knows totals).
//!
//! Readers: [`mpip::parse`] (mpiP 3.x text reports), [`tabular::parse_csv`] and
//! [`tabular::parse_json`] (documented formats for other tools). [`read_profile`]
//! chooses one by file name and content. perfskel trace directories are not one text:
//! [`trace::from_trace`] takes the manifest and the per-rank statistics the trace front
//! end streamed from the rank files, and gives one experiment.
//!
//! # The method
//!
//! [`method::analyze`] implements the statistical scalability analysis of Vetter and
//! McCracken ("Statistical scalability analysis of communication operations in
//! distributed applications", PPoPP 2001; notes in `seeds/000_0b0cd863add17823.txt`):
//! per experiment, each call site's time is summed over all tasks and divided by the
//! experiment's total communication time; the Spearman rank correlation of that ratio
//! with the task count, over all experiments of the application, names the sites whose
//! share grows with scale. Ratios rather than raw times make fixed-size and scaled-size
//! studies comparable, and rank correlation tolerates the noise of real machines, which
//! is why replicated runs at each task count are welcome. See [`spearman`] for the
//! significance test.

pub mod extrap;
mod matching;
pub mod method;
pub mod mpip;
pub mod plot;
pub mod report;
pub mod spearman;
pub mod tabular;
pub mod trace;

use std::fmt;

use serde::{Deserialize, Serialize};

pub use method::{analyze, Analysis, AnalyzeError, AppAnalysis, Options, PValueMethod};

/// One run of an application: what every input reader produces.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Experiment {
    /// Where the experiment came from (a file name), used in messages and reports.
    pub name: String,
    /// The application's command name; experiments are grouped by it.
    pub application: String,
    /// Number of MPI tasks of the run.
    #[serde(rename = "tasks")]
    pub n_tasks: u32,
    /// Each task's total run time in seconds, indexed by rank; empty when unknown.
    #[serde(default)]
    pub task_times_s: Vec<f64>,
    /// The communication call sites the run executed.
    pub call_sites: Vec<CallSiteProfile>,
}

/// What identifies a call site across experiments.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CallSiteKey {
    /// Source file of the call (as the tool printed it).
    pub file: String,
    /// Source line of the call; 0 when unknown.
    pub line: u32,
    /// Function containing the call.
    pub function: String,
    /// MPI operation without the `MPI_` prefix, e.g. `Wait`, `Allreduce`.
    pub operation: String,
}

/// One call site's statistics in one experiment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallSiteProfile {
    /// The call site.
    #[serde(flatten)]
    pub site: CallSiteKey,
    /// Per-task statistics.
    pub tasks: Vec<TaskStats>,
}

/// One task's statistics at one call site.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskStats {
    /// Rank of the task; `None` for a row aggregated over several tasks.
    #[serde(default)]
    pub task: Option<u32>,
    /// Number of calls.
    pub count: u64,
    /// Total time in the call, seconds.
    pub total_s: f64,
    /// Shortest single call, seconds.
    #[serde(default)]
    pub min_s: f64,
    /// Longest single call, seconds.
    #[serde(default)]
    pub max_s: f64,
    /// Bytes sent by the calls.
    #[serde(default)]
    pub bytes: f64,
}

impl Experiment {
    /// Total communication time: all call sites, all tasks, seconds.
    pub fn comm_time_s(&self) -> f64 {
        self.call_sites.iter().map(CallSiteProfile::total_s).sum()
    }

    /// Aggregate application time (sum of the task run times), when known.
    pub fn app_time_s(&self) -> Option<f64> {
        (!self.task_times_s.is_empty()).then(|| self.task_times_s.iter().sum())
    }

    /// Checks what every reader must guarantee; readers call it so that a problem is
    /// reported against the input it came from.
    pub fn validate(&self) -> Result<(), String> {
        if self.n_tasks == 0 {
            return Err("task count is 0".into());
        }
        if self.application.is_empty() {
            return Err("application name is empty".into());
        }
        if !self.task_times_s.is_empty() && self.task_times_s.len() != self.n_tasks as usize {
            return Err(format!(
                "{} task times given for {} tasks",
                self.task_times_s.len(),
                self.n_tasks
            ));
        }
        if let Some(bad) = self.task_times_s.iter().find(|t| !is_time(**t)) {
            return Err(format!("task time {bad} is not a non-negative number"));
        }
        for site in &self.call_sites {
            for task in &site.tasks {
                if let Some(rank) = task.task {
                    if rank >= self.n_tasks {
                        return Err(format!(
                            "call site {} names task {rank} but the run has {} tasks",
                            site.site, self.n_tasks
                        ));
                    }
                }
                for value in [task.total_s, task.min_s, task.max_s, task.bytes] {
                    if !is_time(value) {
                        return Err(format!(
                            "call site {}: value {value} is not a non-negative number",
                            site.site
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

fn is_time(value: f64) -> bool {
    value.is_finite() && value >= 0.0
}

impl CallSiteProfile {
    /// Time at this site summed over tasks, seconds.
    pub fn total_s(&self) -> f64 {
        self.tasks.iter().map(|t| t.total_s).sum()
    }
}

impl fmt::Display for CallSiteKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at {}:{} in {}",
            self.operation, self.file, self.line, self.function
        )
    }
}

impl CallSiteKey {
    /// `file:line`, the location column of reports.
    pub fn location(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// A problem in one input file. `line` is 1-based; `None` when the problem is not tied to
/// a line (an empty file, a missing section).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputError {
    /// The input's name as given to the reader.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// What is wrong, as a sentence fragment.
    pub message: String,
}

impl InputError {
    /// An error at a line of `file`.
    pub fn at(file: &str, line: usize, message: impl Into<String>) -> Self {
        InputError {
            file: file.to_owned(),
            line: Some(line),
            message: message.into(),
        }
    }

    /// An error about `file` as a whole.
    pub fn whole(file: &str, message: impl Into<String>) -> Self {
        InputError {
            file: file.to_owned(),
            line: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: {}", self.file, line, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for InputError {}

/// The input formats `read_profile` recognizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputFormat {
    /// mpiP text report.
    MpiP,
    /// perfskel profile CSV (see [`tabular`]).
    Csv,
    /// perfskel profile JSON (see [`tabular`]).
    Json,
}

impl InputFormat {
    /// Chooses a format from the file name and the first bytes of the content; `None`
    /// when the input is none of the known formats.
    pub fn detect(name: &str, text: &str) -> Option<InputFormat> {
        let lower = name.to_ascii_lowercase();
        if text.trim_start().starts_with("@ mpiP") || lower.ends_with(".mpip") {
            Some(InputFormat::MpiP)
        } else if lower.ends_with(".csv") {
            Some(InputFormat::Csv)
        } else if lower.ends_with(".json") {
            Some(InputFormat::Json)
        } else {
            None
        }
    }
}

/// Reads the experiments in one input, choosing the reader with [`InputFormat::detect`].
pub fn read_profile(name: &str, text: &str) -> Result<Vec<Experiment>, InputError> {
    match InputFormat::detect(name, text) {
        Some(InputFormat::MpiP) => mpip::parse(name, text).map(|e| vec![e]),
        Some(InputFormat::Csv) => tabular::parse_csv(name, text),
        Some(InputFormat::Json) => tabular::parse_json(name, text),
        None => Err(InputError::whole(
            name,
            "unknown profile format: expected an mpiP report (starting with `@ mpiP`), \
             a `.csv` or a `.json` profile",
        )),
    }
}

/// A synthetic experiment for unit tests: one call site per entry of `times`, with that
/// total time on one task.
#[cfg(test)]
pub(crate) fn test_experiment(idx: usize, n_tasks: u32, times: &[f64]) -> Experiment {
    Experiment {
        name: format!("run{idx}"),
        application: "app".into(),
        n_tasks,
        task_times_s: Vec::new(),
        call_sites: times
            .iter()
            .enumerate()
            .map(|(site, &total_s)| CallSiteProfile {
                site: CallSiteKey {
                    file: "a.c".into(),
                    line: site as u32,
                    function: "f".into(),
                    operation: ["Wait", "Send"][site % 2].into(),
                },
                tasks: vec![TaskStats {
                    task: None,
                    count: 1,
                    total_s,
                    min_s: 0.0,
                    max_s: 0.0,
                    bytes: 0.0,
                }],
            })
            .collect(),
    }
}
