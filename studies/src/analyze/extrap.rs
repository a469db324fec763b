//! Extra-P export: takes one application's analysis, gives Extra-P's text input format so
//! users can fit performance models (`time(p) = c + a * p^i * log2(p)^j`) of the same
//! call-site data in Extra-P.
//!
//! The format is line based: `PARAMETER p`, one `POINTS` line with every task count,
//! then per `METRIC` a `REGION` per call site followed by one `DATA` line per point in
//! `POINTS` order, each `DATA` line holding the repetitions at that point. Extra-P's
//! grammar has no exponent notation, so numbers are written in fixed notation; region
//! names are single tokens (`Operation@file:line(function)`) since `->` would start a
//! call path and whitespace would end the name.

use std::fmt::Write as _;

use super::method::AppAnalysis;

/// Renders one application as an Extra-P text file with two metrics: `time` (seconds
/// summed over tasks, per call site and for all communication as region `MPI`) and
/// `share` (the call site's fraction of communication time, the analyzed quantity).
pub fn render(app: &AppAnalysis) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# perfskel analyze: application {}, {} experiments; p = number of MPI tasks",
        sanitize(&app.application),
        app.n_experiments
    );
    out.push_str("PARAMETER p\n");
    let points: Vec<String> = app.task_counts.iter().map(|p| format!("({p})")).collect();
    let _ = writeln!(out, "POINTS {}", points.join(" "));

    let comm: Vec<f64> = app.experiments.iter().map(|e| e.comm_time_s).collect();
    out.push_str("METRIC time\n");
    out.push_str("REGION MPI\n");
    data_lines(&mut out, app, &comm);
    for site in &app.call_sites {
        let _ = writeln!(out, "REGION {}", region_name(site));
        data_lines(&mut out, app, &site.times_s);
    }
    out.push_str("METRIC share\n");
    for site in &app.call_sites {
        let _ = writeln!(out, "REGION {}", region_name(site));
        let shares: Vec<f64> = site
            .times_s
            .iter()
            .zip(&comm)
            .map(|(t, c)| if *c > 0.0 { t / c } else { 0.0 })
            .collect();
        data_lines(&mut out, app, &shares);
    }
    out
}

fn region_name(site: &super::method::SiteResult) -> String {
    sanitize(&format!(
        "{}@{}:{}({})",
        site.site.operation, site.site.file, site.site.line, site.site.function
    ))
}

/// One `DATA` line per task count, with the values of its experiments (the experiments
/// are ordered by task count, so each point's repetitions are contiguous).
fn data_lines(out: &mut String, app: &AppAnalysis, values: &[f64]) {
    for &p in &app.task_counts {
        out.push_str("DATA");
        for (experiment, value) in app.experiments.iter().zip(values) {
            if experiment.n_tasks == p {
                let _ = write!(out, " {value:.9}");
            }
        }
        out.push('\n');
    }
}

fn sanitize(name: &str) -> String {
    name.replace("->", "-_")
        .chars()
        .map(|c| if c.is_whitespace() { '_' } else { c })
        .collect()
}
