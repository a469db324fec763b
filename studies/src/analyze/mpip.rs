//! mpiP report reader: takes the text of one mpiP 3.x report, gives one [`Experiment`].
//!
//! An mpiP report is a header of `@ Key : value` lines (`@ Command`, one
//! `@ MPI Task Assignment` per rank, ...) followed by sections, each introduced by a
//! heading line `@--- Title ---...` between two rules of dashes, and closed by
//! `@--- End of Report ---`. This reader uses:
//!
//! - `MPI Time (seconds)`: per task `AppTime` (the task's run time) — rows `Task AppTime
//!   MPITime MPI%`, the `*` row being the aggregate;
//! - `Callsites: N`: `ID Lev File/Address Line Parent_Funct MPI_Call`; with a stack
//!   depth above 1 (`MPIP=-k2`) a site spans several rows and the level-0 row, the
//!   immediate caller of MPI, identifies it;
//! - `Callsite Time statistics (all, milliseconds): N`: `Name Site Rank Count Max Mean
//!   Min App% MPI%` per rank, then a `*` row aggregating the ranks. A rank's total time
//!   is `Count × Mean`. Rows under mpiP's print threshold (`MPIP=-t`) are omitted by
//!   mpiP but counted in the `*` row, so the difference becomes a [`TaskStats`] with
//!   `task: None`;
//! - the concise variant `Callsite Time statistics (all callsites, milliseconds): N`
//!   (`MPIP=-c`: `Name Site Tasks Max Mean Min MaxRnk MinRnk`, times per task) when the
//!   detailed one is absent;
//! - `Callsite Message Sent statistics (all, sent bytes)`: the `Sum` column per rank.
//!
//! Other sections (aggregate top-twenty tables, histograms, I/O) are skipped. A report
//! without its `End of Report` line is taken as truncated and rejected.

use std::collections::BTreeMap;

use super::{CallSiteKey, CallSiteProfile, Experiment, InputError, TaskStats};

/// Parses one mpiP report. `name` is used in errors and as the experiment name.
pub fn parse(name: &str, text: &str) -> Result<Experiment, InputError> {
    let report = split(name, text)?;
    let command = report
        .header
        .iter()
        .find(|(_, key, _)| *key == "Command")
        .map(|(_, _, value)| *value)
        .ok_or_else(|| InputError::whole(name, "mpiP report has no `@ Command :` line"))?;
    let application = application_name(command);
    if application.is_empty() {
        return Err(InputError::whole(name, "the `@ Command :` line is empty"));
    }

    let mut assigned_ranks = 0u32;
    for (line, key, value) in &report.header {
        if *key == "MPI Task Assignment" {
            let rank = value.split_whitespace().next().unwrap_or("");
            parse_num::<u32>(name, *line, rank, "rank")?;
            assigned_ranks += 1;
        }
    }

    let mut task_times: BTreeMap<u32, f64> = BTreeMap::new();
    let mut sites: BTreeMap<u32, CallSiteKey> = BTreeMap::new();
    let mut stats: BTreeMap<u32, SiteStats> = BTreeMap::new();
    let mut bytes: BTreeMap<(u32, u32), f64> = BTreeMap::new();
    let mut saw_time_stats = false;
    let mut concise: Option<&Section> = None;
    for section in &report.sections {
        let title = section.title;
        if title == "MPI Time (seconds)" {
            read_mpi_time(name, section, &mut task_times)?;
        } else if let Some(count) = title.strip_prefix("Callsites:") {
            read_callsites(name, section, count, &mut sites)?;
        } else if title.starts_with("Callsite Time statistics (all, milliseconds)") {
            saw_time_stats = true;
            read_time_stats(name, section, &sites, &mut stats)?;
        } else if title.starts_with("Callsite Time statistics (all callsites, milliseconds)") {
            concise = concise.or(Some(section));
        } else if title.starts_with("Callsite Message Sent statistics (all, sent bytes)") {
            read_sent_stats(name, section, &sites, &mut bytes)?;
        }
    }
    if !saw_time_stats {
        match concise {
            Some(section) => read_concise_time_stats(name, section, &sites, &mut stats)?,
            None => {
                return Err(InputError::whole(
                    name,
                    "mpiP report has no `Callsite Time statistics` section \
                     (was it written with MPIP=-d?)",
                ))
            }
        }
    }

    let n_tasks = if assigned_ranks > 0 {
        assigned_ranks
    } else {
        task_times.len() as u32
    };
    if n_tasks == 0 {
        return Err(InputError::whole(
            name,
            "cannot tell the task count: no `@ MPI Task Assignment` lines and no \
             `MPI Time` section",
        ));
    }
    let task_times_s = if task_times.is_empty() {
        Vec::new()
    } else if task_times.keys().copied().eq(0..n_tasks) {
        task_times.into_values().collect()
    } else {
        return Err(InputError::whole(
            name,
            format!(
                "the `MPI Time` section lists {} tasks but the report has {n_tasks}",
                task_times.len()
            ),
        ));
    };

    let call_sites = build_call_sites(&sites, stats, &bytes);
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

/// The application name of an `@ Command` value: the executable's file name, without
/// its arguments (which often change with the task count, e.g. `-P 4 2 2`).
pub fn application_name(command: &str) -> String {
    let executable = command.split_whitespace().next().unwrap_or("");
    executable
        .rsplit('/')
        .next()
        .unwrap_or(executable)
        .to_owned()
}

struct Report<'a> {
    /// `(line, key, value)` of the `@ Key : value` lines.
    header: Vec<(usize, &'a str, &'a str)>,
    sections: Vec<Section<'a>>,
}

struct Section<'a> {
    title: &'a str,
    heading_line: usize,
    /// Non-blank lines that are not rules of dashes, with their 1-based numbers.
    body: Vec<(usize, &'a str)>,
}

fn split<'a>(name: &str, text: &'a str) -> Result<Report<'a>, InputError> {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(idx, line)| (idx + 1, line.trim_end()));
    match lines.by_ref().find(|(_, line)| !line.trim().is_empty()) {
        Some((_, "@ mpiP")) => {}
        Some((line, _)) => {
            return Err(InputError::at(
                name,
                line,
                "not an mpiP report: expected `@ mpiP` as the first line",
            ))
        }
        None => return Err(InputError::whole(name, "empty file")),
    }
    let mut header = Vec::new();
    let mut sections: Vec<Section<'a>> = Vec::new();
    let mut ended = false;
    let mut last_line = 1;
    for (number, line) in lines {
        last_line = number;
        if line.trim().is_empty() || line.chars().all(|c| c == '-') {
            continue;
        }
        if ended {
            return Err(InputError::at(
                name,
                number,
                "text after `@--- End of Report ---`",
            ));
        }
        if let Some(rest) = line.strip_prefix("@---") {
            let title = rest.trim().trim_end_matches('-').trim_end();
            if title == "End of Report" {
                ended = true;
            }
            sections.push(Section {
                title,
                heading_line: number,
                body: Vec::new(),
            });
        } else if let Some(section) = sections.last_mut() {
            section.body.push((number, line));
        } else if let Some(rest) = line.strip_prefix('@') {
            let (key, value) = rest
                .split_once(':')
                .ok_or_else(|| InputError::at(name, number, "header line without `Key : value`"))?;
            header.push((number, key.trim(), value.trim()));
        } else {
            return Err(InputError::at(
                name,
                number,
                "unexpected text in the report header (lines start with `@`)",
            ));
        }
    }
    if !ended {
        return Err(InputError::at(
            name,
            last_line,
            "truncated mpiP report: it ends here without the `@--- End of Report ---` line",
        ));
    }
    Ok(Report { header, sections })
}

/// Rows of a section without its column header line (recognized by its first word).
fn rows<'s, 'a>(
    section: &'s Section<'a>,
    header_word: &'static str,
) -> impl Iterator<Item = (usize, Vec<&'a str>)> + 's {
    section
        .body
        .iter()
        .map(|(line, text)| (*line, text.split_whitespace().collect::<Vec<_>>()))
        .filter(move |(_, tokens)| tokens.first() != Some(&header_word))
}

fn read_mpi_time(
    name: &str,
    section: &Section,
    task_times: &mut BTreeMap<u32, f64>,
) -> Result<(), InputError> {
    for (line, tokens) in rows(section, "Task") {
        let [task, app_time, _mpi_time, _mpi_pct] = columns::<4>(name, line, &tokens)?;
        if task == "*" {
            continue;
        }
        let task = parse_num::<u32>(name, line, task, "Task")?;
        let app_time = parse_num::<f64>(name, line, app_time, "AppTime")?;
        task_times.insert(task, app_time);
    }
    Ok(())
}

fn read_callsites(
    name: &str,
    section: &Section,
    announced: &str,
    sites: &mut BTreeMap<u32, CallSiteKey>,
) -> Result<(), InputError> {
    let announced = parse_num::<usize>(
        name,
        section.heading_line,
        announced.trim(),
        "number of call sites",
    )?;
    let mut ids = std::collections::BTreeSet::new();
    for (line, tokens) in rows(section, "ID") {
        let (id, level) = match tokens.as_slice() {
            [id, level, ..] => (
                parse_num::<u32>(name, line, id, "ID")?,
                parse_num::<u32>(name, line, level, "Lev")?,
            ),
            _ => return Err(column_error(name, line, 6, tokens.len())),
        };
        ids.insert(id);
        if level != 0 {
            continue;
        }
        let key = match tokens.as_slice() {
            [_, _, file, src_line, function, operation] => CallSiteKey {
                file: (*file).to_owned(),
                // mpiP prints a placeholder when it has no line information.
                line: src_line.parse().unwrap_or(0),
                function: (*function).to_owned(),
                operation: (*operation).to_owned(),
            },
            // Without debug information mpiP prints an address and no line column.
            [_, _, address, function, operation] => CallSiteKey {
                file: (*address).to_owned(),
                line: 0,
                function: (*function).to_owned(),
                operation: (*operation).to_owned(),
            },
            _ => return Err(column_error(name, line, 6, tokens.len())),
        };
        sites.insert(id, key);
    }
    if ids.len() != announced {
        return Err(InputError::at(
            name,
            section.heading_line,
            format!(
                "the Callsites section announces {announced} call sites but lists {}",
                ids.len()
            ),
        ));
    }
    Ok(())
}

#[derive(Default)]
struct SiteStats {
    per_rank: BTreeMap<u32, TaskStats>,
    aggregate: Option<TaskStats>,
}

fn read_time_stats(
    name: &str,
    section: &Section,
    sites: &BTreeMap<u32, CallSiteKey>,
    stats: &mut BTreeMap<u32, SiteStats>,
) -> Result<(), InputError> {
    for (line, tokens) in rows(section, "Name") {
        let [_name, site, rank, count, max, mean, min, _app_pct, _mpi_pct] =
            columns::<9>(name, line, &tokens)?;
        let site = known_site(name, line, site, sites)?;
        let count = parse_num::<u64>(name, line, count, "Count")?;
        let max_ms = parse_num::<f64>(name, line, max, "Max")?;
        let mean_ms = parse_num::<f64>(name, line, mean, "Mean")?;
        let min_ms = parse_num::<f64>(name, line, min, "Min")?;
        let row = TaskStats {
            task: None,
            count,
            total_s: count as f64 * mean_ms / 1000.0,
            min_s: min_ms / 1000.0,
            max_s: max_ms / 1000.0,
            bytes: 0.0,
        };
        let entry = stats.entry(site).or_default();
        if rank == "*" {
            entry.aggregate = Some(row);
        } else {
            let rank = parse_num::<u32>(name, line, rank, "Rank")?;
            entry.per_rank.insert(
                rank,
                TaskStats {
                    task: Some(rank),
                    ..row
                },
            );
        }
    }
    Ok(())
}

fn read_concise_time_stats(
    name: &str,
    section: &Section,
    sites: &BTreeMap<u32, CallSiteKey>,
    stats: &mut BTreeMap<u32, SiteStats>,
) -> Result<(), InputError> {
    for (line, tokens) in rows(section, "Name") {
        let [_name, site, tasks, _max, mean, _min, _max_rank, _min_rank] =
            columns::<8>(name, line, &tokens)?;
        let site = known_site(name, line, site, sites)?;
        let tasks = parse_num::<u32>(name, line, tasks, "Tasks")?;
        let mean_ms = parse_num::<f64>(name, line, mean, "Mean")?;
        // The concise table gives time per task, not per call: no call counts.
        stats.entry(site).or_default().aggregate = Some(TaskStats {
            task: None,
            count: 0,
            total_s: f64::from(tasks) * mean_ms / 1000.0,
            min_s: 0.0,
            max_s: 0.0,
            bytes: 0.0,
        });
    }
    Ok(())
}

fn read_sent_stats(
    name: &str,
    section: &Section,
    sites: &BTreeMap<u32, CallSiteKey>,
    bytes: &mut BTreeMap<(u32, u32), f64>,
) -> Result<(), InputError> {
    for (line, tokens) in rows(section, "Name") {
        let [_name, site, rank, _count, _max, _mean, _min, sum] =
            columns::<8>(name, line, &tokens)?;
        let site = known_site(name, line, site, sites)?;
        if rank == "*" {
            continue;
        }
        let rank = parse_num::<u32>(name, line, rank, "Rank")?;
        bytes.insert((site, rank), parse_num::<f64>(name, line, sum, "Sum")?);
    }
    Ok(())
}

fn build_call_sites(
    sites: &BTreeMap<u32, CallSiteKey>,
    stats: BTreeMap<u32, SiteStats>,
    bytes: &BTreeMap<(u32, u32), f64>,
) -> Vec<CallSiteProfile> {
    let mut profiles = Vec::new();
    for (site_id, site_stats) in stats {
        // `known_site` guaranteed the id is listed.
        let Some(key) = sites.get(&site_id) else {
            continue;
        };
        let mut tasks: Vec<TaskStats> = site_stats
            .per_rank
            .into_values()
            .map(|mut t| {
                if let Some(rank) = t.task {
                    t.bytes = bytes.get(&(site_id, rank)).copied().unwrap_or(0.0);
                }
                t
            })
            .collect();
        if let Some(aggregate) = site_stats.aggregate {
            let shown_count: u64 = tasks.iter().map(|t| t.count).sum();
            let shown_total: f64 = tasks.iter().map(|t| t.total_s).sum();
            // Rows below the print threshold are only in the aggregate: keep the rest.
            let hidden_total = aggregate.total_s - shown_total;
            if tasks.is_empty() || hidden_total > 1e-9 * aggregate.total_s.max(1e-12) {
                tasks.push(TaskStats {
                    task: None,
                    count: aggregate.count.saturating_sub(shown_count),
                    total_s: hidden_total.max(0.0),
                    ..aggregate
                });
            }
        }
        profiles.push(CallSiteProfile {
            site: key.clone(),
            tasks,
        });
    }
    profiles
}

fn known_site(
    name: &str,
    line: usize,
    site: &str,
    sites: &BTreeMap<u32, CallSiteKey>,
) -> Result<u32, InputError> {
    let id = parse_num::<u32>(name, line, site, "Site")?;
    if sites.contains_key(&id) {
        Ok(id)
    } else {
        Err(InputError::at(
            name,
            line,
            format!("call site {id} is not listed in the `Callsites` section"),
        ))
    }
}

fn columns<'a, const N: usize>(
    name: &str,
    line: usize,
    tokens: &[&'a str],
) -> Result<[&'a str; N], InputError> {
    <[&str; N]>::try_from(tokens).map_err(|_| column_error(name, line, N, tokens.len()))
}

fn column_error(name: &str, line: usize, expected: usize, found: usize) -> InputError {
    InputError::at(
        name,
        line,
        format!("expected {expected} columns, found {found} (malformed or truncated row)"),
    )
}

fn parse_num<T: std::str::FromStr>(
    name: &str,
    line: usize,
    token: &str,
    column: &str,
) -> Result<T, InputError> {
    token.parse().map_err(|_| {
        InputError::at(
            name,
            line,
            format!("column `{column}`: `{token}` is not a valid number"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const REPORT: &str = include_str!("../../../tests/data/analyze/mpip/ok/amg-k2-threshold.mpiP");

    #[test]
    fn application_name_drops_path_and_arguments() {
        assert_eq!(application_name("/g/g0/amg/test/amg -P 4 2 2"), "amg");
        assert_eq!(application_name("./lulesh2.0 -s 30"), "lulesh2.0");
        assert_eq!(application_name(""), "");
    }

    proptest! {
        /// Any prefix of a report, and any report with bytes replaced, gives a value or
        /// an error, never a panic; errors carry a line inside the input.
        #[test]
        fn damaged_reports_never_panic(
            cut in 0usize..REPORT.len(),
            edits in prop::collection::vec((0usize..REPORT.len(), prop::char::range(' ', '~')), 0..6)
        ) {
            let mut text: Vec<char> = REPORT.chars().collect();
            for (pos, c) in edits {
                if let Some(slot) = text.get_mut(pos) {
                    *slot = c;
                }
            }
            let damaged: String = text.into_iter().take(cut).collect();
            if let Err(err) = parse("r.mpiP", &damaged) {
                let n_lines = damaged.lines().count().max(1);
                prop_assert!(err.line.is_none_or(|l| (1..=n_lines).contains(&l)), "{err}");
            }
        }
    }
}
