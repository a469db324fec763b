//! Renders a [`Report`] into text: an aligned table (application × scenario: measured
//! time, and per method the predicted time and error), the summary, the negative control
//! and the failures; JSON (the whole report); CSV (one line per row and method).

use std::fmt::Write;

use super::evaluate::{Report, GOAL_MEDIAN_PCT, GOAL_WORST_PCT};
use super::scenario::NEGATIVE_CONTROL_MIN_ERROR_PCT;
use super::Expectation;

/// The human-readable report.
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "perfskel validate: {} mode, ratio 1:{}, {}; times in seconds, error = (predicted - measured) / measured",
        report.mode,
        report.ratio,
        report.ranks_text()
    );
    let app_w = column_width(report.rows.iter().map(|r| r.app.as_str()), "app");
    let scen_w = column_width(report.rows.iter().map(|r| r.scenario.as_str()), "scenario");
    let method_w = 17;
    let _ = write!(
        out,
        "\n{:<app_w$}  {:<scen_w$}  {:>9}  {:>6}",
        "app", "scenario", "measured", "spread"
    );
    for method in &report.methods {
        let _ = write!(out, "  {method:>method_w$}");
    }
    out.push('\n');
    for row in &report.rows {
        let scenario = match row.expectation {
            Expectation::Accurate => row.scenario.clone(),
            Expectation::ErrorMustShow => format!("{}*", row.scenario),
        };
        let _ = write!(
            out,
            "{:<app_w$}  {:<scen_w$}  {:>9}  {:>6}",
            row.app,
            scenario,
            seconds(row.measured_s),
            percent_abs(row.spread_pct)
        );
        for method in &report.methods {
            let p = row.predictions.iter().find(|p| &p.method == method);
            let cell = match (p.and_then(|p| p.predicted_s), p.and_then(|p| p.error_pct)) {
                (None, _) => "-".to_string(),
                (Some(t), None) => seconds(Some(t)),
                (Some(t), Some(e)) => format!("{} {:>7}", seconds(Some(t)), percent(Some(e))),
            };
            let _ = write!(out, "  {cell:>method_w$}");
        }
        out.push('\n');
    }
    if report
        .rows
        .iter()
        .any(|r| r.expectation == Expectation::ErrorMustShow)
    {
        let _ = writeln!(
            out,
            "* negative control: the application ran a different problem size, the skeleton did not"
        );
    }
    let _ = writeln!(
        out,
        "measured: the median of the application's runs; spread: (slowest - fastest) / median of those runs, the machine's own noise (where it ran twice or more)"
    );
    let warned: Vec<String> = report
        .rows
        .iter()
        .flat_map(|row| {
            row.predictions.iter().flat_map(move |p| {
                p.warnings
                    .iter()
                    .map(move |w| format!("  {}/{} ({}): {w}", row.app, row.scenario, p.method))
            })
        })
        .collect();
    if !warned.is_empty() {
        let _ = writeln!(
            out,
            "\nwarnings of `perfskel run` while it ran the skeletons (the prediction is no better than they say)"
        );
        for w in warned {
            let _ = writeln!(out, "{w}");
        }
    }

    let _ = writeln!(
        out,
        "\nsummary over the scenarios expected to be accurate (|error|; the methods relative to base predict nothing there); goal: median <= {GOAL_MEDIAN_PCT}%, worst <= {GOAL_WORST_PCT}%"
    );
    let _ = writeln!(
        out,
        "{:<method_w$}  {:>4}  {:>8}  {:>8}  {:>9}  {:>10}  {:>9}  {:<8}  worst at",
        "method", "n", "median", "worst", "within 5%", "within 10%", "in range", "goal"
    );
    for s in &report.summary {
        let in_range = if s.ranged > 0 {
            format!("{}/{}", s.within_app_range, s.ranged)
        } else {
            "-".into()
        };
        let _ = writeln!(
            out,
            "{:<method_w$}  {:>4}  {:>8}  {:>8}  {:>9}  {:>10}  {:>9}  {:<8}  {}",
            s.method,
            s.n,
            percent_abs(s.median_abs_error_pct),
            percent_abs(s.worst_abs_error_pct),
            s.within_5_pct,
            s.within_10_pct,
            in_range,
            if s.meets_goal { "met" } else { "not met" },
            s.worst_at.as_deref().unwrap_or("-")
        );
    }
    let _ = writeln!(
        out,
        "in range: predictions between the application's fastest and slowest run in their scenario (untraced, and traced where the skeleton was made there)"
    );
    for s in &report.summary {
        if !s.beyond_10_pct_outside_range.is_empty() {
            let _ = writeln!(
                out,
                "{}: beyond {GOAL_WORST_PCT}% and outside the application's range: {}",
                s.method,
                s.beyond_10_pct_outside_range.join(", ")
            );
        }
    }

    if !report.negative_control.is_empty() {
        let _ = writeln!(
            out,
            "\nnegative control (expected to fail: |error| must reach {NEGATIVE_CONTROL_MIN_ERROR_PCT}%)"
        );
        for c in &report.negative_control {
            let verdict = match c.error_shows {
                Some(true) => "error shows (as expected)",
                Some(false) => "error hidden (did not reach the threshold)",
                None => "no prediction",
            };
            let _ = writeln!(
                out,
                "  {:<app_w$}  {:<method_w$}  {:>8}  {verdict}",
                c.app,
                c.method,
                percent(c.error_pct)
            );
        }
    }

    if !report.traces.is_empty() {
        let _ = writeln!(
            out,
            "\ntraces (the time each skeleton stands for, from the median traced run, against the median untraced run where it was traced; fastest to slowest run in brackets)"
        );
        let scenario_w = report
            .traces
            .iter()
            .map(|t| t.scenario.len())
            .max()
            .unwrap_or(0);
        let range = |r: Option<(f64, f64)>| {
            r.map_or_else(String::new, |(lo, hi)| format!("({lo:.3} … {hi:.3})"))
        };
        for t in &report.traces {
            let _ = writeln!(
                out,
                "  {:<app_w$}  {:<scenario_w$}  {:<4}  traced {:>9} {:<19}  untraced {:>9} {:<19}  {:>8}",
                t.app,
                t.scenario,
                t.backend,
                seconds(Some(t.traced_s)),
                range(t.traced_range),
                seconds(t.base_s),
                range(t.untraced_range),
                percent(t.error_pct)
            );
        }
    }

    if !report.failures.is_empty() {
        let _ = writeln!(out, "\nfailures");
        for f in &report.failures {
            let mut place = f.app.clone().unwrap_or_else(|| "validation".into());
            if let Some(s) = &f.scenario {
                let _ = write!(place, " in {s}");
            }
            if let Some(b) = &f.backend {
                let _ = write!(place, " ({b})");
            }
            let what = if f.error.timed_out {
                "timed out"
            } else {
                "failed"
            };
            let first_line = f.error.message.lines().next().unwrap_or("");
            let _ = writeln!(out, "  {place}: {} {what}: {first_line}", f.step.name());
        }
    }
    if !report.conditions.is_empty() {
        out.push('\n');
        for (key, value) in &report.conditions {
            let _ = writeln!(out, "{key}: {value}");
        }
    }
    out
}

/// The whole report as pretty JSON.
pub fn json(report: &Report) -> String {
    serde_json::to_string_pretty(report).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// One line per row and method: `app,scenario,expectation,measured_s,app_runs,
/// spread_pct,small_s,method,predicted_s,error_pct` (empty fields where there is no
/// value).
pub fn csv(report: &Report) -> Result<String, String> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    writer
        .write_record([
            "app",
            "scenario",
            "expectation",
            "measured_s",
            "app_runs",
            "spread_pct",
            "small_s",
            "method",
            "predicted_s",
            "error_pct",
        ])
        .map_err(|e| e.to_string())?;
    for row in &report.rows {
        let expectation = match row.expectation {
            Expectation::Accurate => "accurate",
            Expectation::ErrorMustShow => "error-must-show",
        };
        for p in &row.predictions {
            writer
                .write_record([
                    row.app.as_str(),
                    row.scenario.as_str(),
                    expectation,
                    &fixed(row.measured_s),
                    &row.app_runs.to_string(),
                    &row.spread_pct
                        .map(|e| format!("{e:.2}"))
                        .unwrap_or_default(),
                    &fixed(row.small_s),
                    p.method.as_str(),
                    &fixed(p.predicted_s),
                    &p.error_pct.map(|e| format!("{e:.2}")).unwrap_or_default(),
                ])
                .map_err(|e| e.to_string())?;
        }
    }
    let bytes = writer.into_inner().map_err(|e| e.to_string())?;
    String::from_utf8(bytes).map_err(|e| e.to_string())
}

fn column_width<'a>(values: impl Iterator<Item = &'a str>, header: &str) -> usize {
    // One more for the negative control's star.
    values
        .map(|v| v.len() + 1)
        .max()
        .unwrap_or(0)
        .max(header.len())
}

fn seconds(value: Option<f64>) -> String {
    value.map_or("-".into(), |v| format!("{v:.3}"))
}

fn fixed(value: Option<f64>) -> String {
    value.map(|v| format!("{v:.6}")).unwrap_or_default()
}

fn percent(value: Option<f64>) -> String {
    // Adding 0.0 turns -0.0 into 0.0, so a tiny negative error does not print as "-0.0%".
    value.map_or("-".into(), |v| {
        format!("{:+.1}%", (v * 10.0).round() / 10.0 + 0.0)
    })
}

fn percent_abs(value: Option<f64>) -> String {
    value.map_or("-".into(), |v| format!("{v:.1}%"))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::driver::{Observation, Observations, SkeletonObservation};
    use super::super::evaluate::evaluate;
    use super::super::{Failure, Mode, Plan, Request, RunError, Step};
    use super::*;
    use perfskel_compiler::back::Backend;

    fn sample_input() -> (Plan, Observations) {
        let request = Request {
            apps: Some(vec!["cg".into(), "stencil".into()]),
            scenarios: Some(vec!["competing".into(), "negative-control".into()]),
            ..Request::default()
        };
        let plan = Plan::new(Mode::Full, &request).unwrap();
        let cell = |app, scenario, t: &[f64], small: f64, skel: f64| Observation {
            app,
            scenario,
            app_runs: t.to_vec(),
            small_runs: vec![small],
            traced_runs: Vec::new(),
            skeletons: vec![SkeletonObservation {
                backend: Backend::C,
                skeleton_runs: vec![skel],
                skeleton_s: Some(skel),
                app_time_s: Some(10.0),
                reached: None,
                predicted_s: None,
                warnings: Vec::new(),
            }],
        };
        let mut observations = Observations {
            cells: vec![
                cell("cg", "base", &[10.5, 9.8, 10.0], 0.5, 0.101),
                cell("cg", "competing", &[20.0], 0.9, 0.18),
                cell("cg", "negative-control", &[20.0, 19.0, 21.0], 0.5, 0.1),
                cell("stencil", "base", &[8.0, 8.4, 7.9], 0.4, 0.079),
                cell("stencil", "competing", &[12.0, 11.0, 13.5], 0.6, 0.126),
                cell("stencil", "negative-control", &[16.0], 0.4, 0.08),
            ],
            failures: vec![Failure {
                app: Some("stencil".into()),
                scenario: Some("competing".into()),
                step: Step::RunSmall,
                backend: None,
                error: RunError {
                    timed_out: true,
                    message: "killed after 60 s\nmore".into(),
                },
            }],
        };
        // stencil's trace: the median of three traced runs, each slower than the untraced.
        observations.cells[3].traced_runs = vec![9.6, 10.0, 10.2];
        // `run` warned of the short competing run.
        observations.cells[1].skeletons[0]
            .warnings
            .push("other work used 1.0 of this machine's 2 cores while the skeleton ran".into());
        (plan, observations)
    }

    /// A report of two applications in base, competing and the negative control.
    pub(crate) fn sample() -> Report {
        let (plan, observations) = sample_input();
        evaluate(&plan, &observations)
    }

    #[test]
    fn table_shows_rows_summary_control_and_failures() {
        let (plan, observations) = sample_input();
        let mut text = String::from(
            "SOURCE (observations at ratio 1:100: application, small problem, skeleton)\n",
        );
        for c in &observations.cells {
            let _ = writeln!(
                text,
                "{} {}: app {:?} s, small {:?} s, skeleton {:?} s",
                c.app, c.scenario, c.app_runs, c.small_runs, c.skeletons[0].skeleton_runs
            );
        }
        text.push_str("\nTABLE\n");
        text.push_str(&table(&evaluate(&plan, &observations)));
        insta::with_settings!({snapshot_path => "../../../snapshots/validate", prepend_module_to_snapshot => false}, {
            insta::assert_snapshot!("table", text);
        });
    }

    #[test]
    fn csv_has_one_line_per_row_and_method() {
        let text = csv(&sample()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1 + 6 * 4);
        assert_eq!(
            lines[0],
            "app,scenario,expectation,measured_s,app_runs,spread_pct,small_s,method,predicted_s,error_pct"
        );
        assert_eq!(
            lines[5],
            "cg,competing,accurate,20.000000,1,,0.900000,skeleton-c,18.000000,-10.00"
        );
        assert_eq!(
            lines[3],
            "cg,base,accurate,10.000000,3,7.00,0.500000,average-slowdown,,"
        );
    }

    #[test]
    fn json_round_trips_through_serde_json() {
        let text = json(&sample());
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["ratio"], 100);
        assert_eq!(value["rows"].as_array().map(Vec::len), Some(6));
        assert_eq!(value["rows"][2]["expectation"], "error-must-show");
        assert_eq!(value["failures"][0]["step"], "run-small");
        assert_eq!(value["failures"][0]["timed_out"], true);
        assert_eq!(value["summary"][0]["method"], "skeleton-c");
    }
}
