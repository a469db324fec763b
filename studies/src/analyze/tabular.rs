//! CSV and JSON profile readers: take the text of a file in one of perfskel's documented
//! profile formats, give the experiments it holds. They let any tool that can count MPI
//! time per call site feed `perfskel analyze`.
//!
//! # CSV
//!
//! A header line, then one row per call site per task (any order; several experiments
//! per file):
//!
//! ```text
//! experiment,application,tasks,task,task_time_s,file,line,function,operation,count,total_s,min_s,max_s,bytes
//! bt-16-r1,bt,16,0,12.5,x_solve.f,71,x_solve,Wait,200,0.84,0.001,0.02,0
//! bt-16-r1,bt,16,0,,y_solve.f,70,y_solve,Wait,200,0.31,0.001,0.01,0
//! ```
//!
//! - `experiment`: names the run; rows with the same name form one experiment, and must
//!   agree on `application` and `tasks` (the task count);
//! - `task`: the rank, or empty for a row aggregated over tasks;
//! - `task_time_s`: the task's total run time in seconds, optional; give it on any row
//!   of the task (a row with an empty `operation` carries only this value);
//! - `file`, `line`, `function`, `operation` identify the call site (`operation` without
//!   `MPI_`); `count`, `total_s` are required, `min_s`, `max_s`, `bytes` may be empty.
//!
//! # JSON
//!
//! The serialization of the profile model in [`super`]:
//!
//! ```json
//! {"experiments": [{"name": "bt-16-r1", "application": "bt", "tasks": 16,
//!   "task_times_s": [12.5, 12.4],
//!   "call_sites": [{"file": "x_solve.f", "line": 71, "function": "x_solve",
//!     "operation": "Wait",
//!     "tasks": [{"task": 0, "count": 200, "total_s": 0.84, "min_s": 0.001,
//!                "max_s": 0.02, "bytes": 0}]}]}]}
//! ```
//!
//! `task_times_s` (one per task, or absent), `task`, `min_s`, `max_s` and `bytes` are
//! optional. Experiment names are prefixed with the file name in reports.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{CallSiteKey, CallSiteProfile, Experiment, InputError, TaskStats};

/// Reads a CSV profile (format above).
pub fn parse_csv(name: &str, text: &str) -> Result<Vec<Experiment>, InputError> {
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let mut runs: BTreeMap<String, CsvRun> = BTreeMap::new();
    let headers = reader
        .headers()
        .map_err(|err| csv_error(name, &err))?
        .clone();
    for record in reader.records() {
        let record = record.map_err(|err| csv_error(name, &err))?;
        let line = record.position().map_or(0, |p| p.line() as usize);
        let row: CsvRow = record
            .deserialize(Some(&headers))
            .map_err(|err| InputError::at(name, line, format!("invalid profile CSV row: {err}")))?;
        let run = runs
            .entry(row.experiment.clone())
            .or_insert_with(|| CsvRun {
                application: row.application.clone(),
                n_tasks: row.tasks,
                first_line: line,
                task_times: BTreeMap::new(),
                sites: BTreeMap::new(),
                rows: BTreeMap::new(),
            });
        if run.application != row.application || run.n_tasks != row.tasks {
            return Err(InputError::at(
                name,
                line,
                format!(
                    "experiment `{}` was `{}` with {} tasks at line {}, here `{}` with {}",
                    row.experiment,
                    run.application,
                    run.n_tasks,
                    run.first_line,
                    row.application,
                    row.tasks
                ),
            ));
        }
        if let (Some(task), Some(time)) = (row.task, row.task_time_s) {
            if let Some(old) = run.task_times.insert(task, time) {
                if old != time {
                    return Err(InputError::at(
                        name,
                        line,
                        format!(
                            "experiment `{}`: task {task} has `task_time_s` {old} on an earlier row and {time} here",
                            row.experiment
                        ),
                    ));
                }
            }
        }
        if row.operation.is_empty() {
            continue;
        }
        let key = CallSiteKey {
            file: row.file,
            line: row.line.unwrap_or(0),
            function: row.function,
            operation: row.operation,
        };
        // The same call site of the same task twice would count it twice.
        if let Some(first) = run.rows.insert((key.clone(), row.task), line) {
            return Err(InputError::at(
                name,
                line,
                format!(
                    "experiment `{}`: {} of task {} at {}:{} is also on line {first}; each call site of a task is one row",
                    row.experiment,
                    key.operation,
                    row.task.map_or_else(|| "(all)".to_string(), |t| t.to_string()),
                    key.file,
                    key.line
                ),
            ));
        }
        run.sites.entry(key).or_default().push(TaskStats {
            task: row.task,
            count: row.count.unwrap_or(0),
            total_s: row.total_s.ok_or_else(|| {
                InputError::at(name, line, "column `total_s` is empty on a call-site row")
            })?,
            min_s: row.min_s.unwrap_or(0.0),
            max_s: row.max_s.unwrap_or(0.0),
            bytes: row.bytes.unwrap_or(0.0),
        });
    }
    if runs.is_empty() {
        return Err(InputError::whole(name, "no rows"));
    }
    runs.into_iter()
        .map(|(experiment, run)| {
            let task_times_s = if run.task_times.is_empty() {
                Vec::new()
            } else if run.task_times.keys().copied().eq(0..run.n_tasks) {
                run.task_times.into_values().collect()
            } else {
                return Err(InputError::at(
                    name,
                    run.first_line,
                    format!(
                        "experiment `{experiment}`: `task_time_s` given for {} of its {} tasks; \
                         give it for every task or none",
                        run.task_times.len(),
                        run.n_tasks
                    ),
                ));
            };
            let built = Experiment {
                name: format!("{name}:{experiment}"),
                application: run.application,
                n_tasks: run.n_tasks,
                task_times_s,
                call_sites: run
                    .sites
                    .into_iter()
                    .map(|(site, tasks)| CallSiteProfile { site, tasks })
                    .collect(),
            };
            built.validate().map_err(|message| {
                InputError::at(
                    name,
                    run.first_line,
                    format!("experiment `{experiment}`: {message}"),
                )
            })?;
            Ok(built)
        })
        .collect()
}

/// Reads a JSON profile (format above).
pub fn parse_json(name: &str, text: &str) -> Result<Vec<Experiment>, InputError> {
    let file: JsonFile = serde_json::from_str(text).map_err(|err| InputError {
        file: name.to_owned(),
        line: (err.line() > 0).then_some(err.line()),
        message: format!("invalid profile JSON: {err}"),
    })?;
    if file.experiments.is_empty() {
        return Err(InputError::whole(name, "`experiments` is empty"));
    }
    file.experiments
        .into_iter()
        .map(|mut experiment| {
            experiment.validate().map_err(|message| {
                InputError::whole(name, format!("experiment `{}`: {message}", experiment.name))
            })?;
            experiment.name = format!("{name}:{}", experiment.name);
            Ok(experiment)
        })
        .collect()
}

#[derive(Deserialize)]
struct JsonFile {
    experiments: Vec<Experiment>,
}

#[derive(Deserialize)]
struct CsvRow {
    experiment: String,
    application: String,
    tasks: u32,
    task: Option<u32>,
    task_time_s: Option<f64>,
    #[serde(default)]
    file: String,
    line: Option<u32>,
    #[serde(default)]
    function: String,
    #[serde(default)]
    operation: String,
    count: Option<u64>,
    total_s: Option<f64>,
    min_s: Option<f64>,
    max_s: Option<f64>,
    bytes: Option<f64>,
}

struct CsvRun {
    application: String,
    n_tasks: u32,
    first_line: usize,
    task_times: BTreeMap<u32, f64>,
    sites: BTreeMap<CallSiteKey, Vec<TaskStats>>,
    /// The line of each (call site, task) row, to refuse one given twice.
    rows: BTreeMap<(CallSiteKey, Option<u32>), usize>,
}

fn csv_error(name: &str, err: &csv::Error) -> InputError {
    InputError {
        file: name.to_owned(),
        line: err.position().map(|p| p.line() as usize),
        message: format!("invalid profile CSV: {err}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HEADER: &str = "experiment,application,tasks,task,task_time_s,file,line,function,operation,count,total_s,min_s,max_s,bytes\n";

    #[test]
    fn task_time_only_rows_and_aggregate_rows() {
        let csv = format!(
            "{HEADER}r1,app,2,0,10.0,,,,,,,,,\nr1,app,2,1,11.0,,,,,,,,,\n\
             r1,app,2,,,a.c,3,main,Barrier,4,0.5,0.1,0.2,0\n"
        );
        let runs = parse_csv("p.csv", &csv).unwrap_or_default();
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].name, "p.csv:r1");
        assert_eq!(runs[0].task_times_s, vec![10.0, 11.0]);
        assert_eq!(runs[0].call_sites[0].tasks[0].task, None);
        assert_eq!(runs[0].comm_time_s(), 0.5);
    }

    #[test]
    fn inconsistent_task_count_names_both_lines() {
        let csv = format!(
            "{HEADER}r1,app,2,0,,a.c,3,main,Barrier,4,0.5,,,\nr1,app,4,1,,a.c,3,main,Barrier,4,0.5,,,\n"
        );
        let err = parse_csv("p.csv", &csv).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("p.csv:3: experiment `r1` was `app` with 2 tasks at line 2, here `app` with 4")
        );
    }

    proptest! {
        /// Arbitrary text never panics either reader.
        #[test]
        fn arbitrary_text_never_panics(body in "[ -~\n]{0,400}") {
            let _ = parse_csv("p.csv", &format!("{HEADER}{body}"));
            let _ = parse_csv("p.csv", &body);
            let _ = parse_json("p.json", &body);
            let _ = parse_json("p.json", &format!("{{\"experiments\": [{body}]}}"));
        }
    }
}
