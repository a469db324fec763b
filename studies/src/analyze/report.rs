//! Report rendering: takes an [`Analysis`], gives the terminal table, JSON or CSV text.
//! Floats are printed at fixed precision and rows come in the analysis' ranked order, so
//! the same input always renders the same bytes.

use std::fmt::Write as _;

use super::method::{Analysis, AppAnalysis, Correlation, PValueMethod};

/// Text table for the terminal. `top` limits the call-site rows per application
/// (0 shows all).
pub fn render_table(analysis: &Analysis, top: usize) -> String {
    let mut out = String::new();
    for (idx, app) in analysis.applications.iter().enumerate() {
        if idx > 0 {
            out.push('\n');
        }
        render_app(&mut out, app, top);
    }
    out
}

fn render_app(out: &mut String, app: &AppAnalysis, top: usize) {
    let counts: Vec<String> = app.task_counts.iter().map(u32::to_string).collect();
    let _ = writeln!(
        out,
        "application `{}`: {} experiments at {} tasks",
        app.application,
        app.n_experiments,
        counts.join(", ")
    );
    let p_method = match app.p_value_method {
        PValueMethod::ExactPermutation => "an exact permutation test".to_owned(),
        PValueMethod::StudentsT => format!(
            "Student's t with {} degrees of freedom",
            app.n_experiments.saturating_sub(2)
        ),
    };
    let _ = writeln!(
        out,
        "method: Spearman rank correlation of each call site's share of communication time\n\
         \x20       with the task count (ties by average rank); p two-sided from {p_method},\n\
         \x20       Holm-adjusted over the call sites; grows = rho > 0 and adjusted p < {}",
        app.alpha
    );
    if app.n_experiments < 10 {
        let _ = writeln!(
            out,
            "note: {} experiments give little power; replicated runs at each task count help",
            app.n_experiments
        );
    }
    let (lo, hi) = (
        app.task_counts.first().copied().unwrap_or(0),
        app.task_counts.last().copied().unwrap_or(0),
    );

    // One row per task count (replicates averaged) keeps the table short for studies of
    // hundreds of runs; `--format json` lists every experiment.
    let _ = writeln!(
        out,
        "\ncommunication vs computation (mean over the runs at each task count)"
    );
    let mut rows = vec![row(&[
        "tasks", "runs", "comm (s)", "app (s)", "comm %", "comp %",
    ])];
    for &n_tasks in &app.task_counts {
        let runs: Vec<_> = app
            .experiments
            .iter()
            .filter(|e| e.n_tasks == n_tasks)
            .collect();
        let n = runs.len().max(1) as f64;
        let comm = runs.iter().map(|e| e.comm_time_s).sum::<f64>() / n;
        let known = runs.iter().all(|e| e.comm_share.is_some());
        let app_time = runs.iter().filter_map(|e| e.app_time_s).sum::<f64>() / n;
        let share = runs.iter().filter_map(|e| e.comm_share).sum::<f64>() / n;
        rows.push(vec![
            n_tasks.to_string(),
            runs.len().to_string(),
            format!("{comm:.3}"),
            if known {
                format!("{app_time:.3}")
            } else {
                "-".into()
            },
            if known {
                format!("{:.1}", 100.0 * share)
            } else {
                "-".into()
            },
            if known {
                format!("{:.1}", 100.0 * (1.0 - share))
            } else {
                "-".into()
            },
        ]);
    }
    table(out, &rows, &[true; 6]);

    let _ = writeln!(out, "\noperations, ranked");
    let share_lo = format!("share@{lo}");
    let share_hi = format!("share@{hi}");
    let mut rows = vec![row(&[
        "rank",
        "rho",
        "p",
        "p_adj",
        "grows",
        "operation",
        &share_lo,
        &share_hi,
    ])];
    for (rank, op) in app.operations.iter().enumerate() {
        let mut cells = vec![(rank + 1).to_string()];
        cells.extend(correlation_cells(&op.correlation));
        cells.push(op.operation.clone());
        cells.push(percent(op.share_by_tasks.first()));
        cells.push(percent(op.share_by_tasks.last()));
        rows.push(cells);
    }
    table(
        out,
        &rows,
        &[true, true, true, true, false, false, true, true],
    );

    let shown = if top == 0 {
        app.call_sites.len()
    } else {
        top.min(app.call_sites.len())
    };
    let n_growing = app
        .call_sites
        .iter()
        .filter(|s| s.correlation.grows)
        .count();
    let _ = writeln!(
        out,
        "\ncall sites, ranked ({} of {}; {} grow significantly)",
        shown,
        app.call_sites.len(),
        n_growing
    );
    let mut rows = vec![row(&[
        "rank",
        "rho",
        "p",
        "p_adj",
        "grows",
        "operation",
        "location",
        "function",
        &share_lo,
        &share_hi,
    ])];
    for (rank, site) in app.call_sites.iter().take(shown).enumerate() {
        let mut cells = vec![(rank + 1).to_string()];
        cells.extend(correlation_cells(&site.correlation));
        cells.push(site.site.operation.clone());
        cells.push(site.site.location());
        cells.push(site.site.function.clone());
        cells.push(percent(site.share_by_tasks.first()));
        cells.push(percent(site.share_by_tasks.last()));
        rows.push(cells);
    }
    let right = [
        true, true, true, true, false, false, false, false, true, true,
    ];
    table(out, &rows, &right);
}

/// JSON: the whole analysis, per-experiment vectors included.
pub fn render_json(analysis: &Analysis) -> String {
    // Serializing plain structs of numbers and strings cannot fail.
    let mut text = serde_json::to_string_pretty(analysis).unwrap_or_default();
    text.push('\n');
    text
}

/// CSV: one row per call site and application, in ranked order.
pub fn render_csv(analysis: &Analysis) -> String {
    let mut out = String::from(
        "application,rank,operation,file,line,function,rho,p_value,p_adjusted,grows,\
         n_experiments,min_tasks,max_tasks,share_at_min_tasks,share_at_max_tasks\n",
    );
    for app in &analysis.applications {
        let lo = app.task_counts.first().copied().unwrap_or(0);
        let hi = app.task_counts.last().copied().unwrap_or(0);
        for (rank, site) in app.call_sites.iter().enumerate() {
            let c = &site.correlation;
            let fields = [
                app.application.clone(),
                (rank + 1).to_string(),
                site.site.operation.clone(),
                site.site.file.clone(),
                site.site.line.to_string(),
                site.site.function.clone(),
                c.rho.map_or(String::new(), |r| format!("{r:.6}")),
                format!("{:.6e}", c.p_value),
                format!("{:.6e}", c.p_adjusted),
                c.grows.to_string(),
                app.n_experiments.to_string(),
                lo.to_string(),
                hi.to_string(),
                format!("{:.6}", site.share_at_min()),
                format!("{:.6}", site.share_at_max()),
            ];
            let escaped: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
            out.push_str(&escaped.join(","));
            out.push('\n');
        }
    }
    out
}

fn csv_field(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_owned()
    }
}

fn correlation_cells(c: &Correlation) -> [String; 4] {
    [
        c.rho.map_or("-".into(), |r| format!("{r:.3}")),
        format!("{:.2e}", c.p_value),
        format!("{:.2e}", c.p_adjusted),
        if c.grows { "yes" } else { "no" }.into(),
    ]
}

fn percent(share: Option<&f64>) -> String {
    share.map_or("-".into(), |s| format!("{:.1}%", 100.0 * s))
}

fn row(cells: &[&str]) -> Vec<String> {
    cells.iter().map(|c| c.to_string()).collect()
}

/// Writes `rows` as aligned columns; `right[col]` right-aligns a (numeric) column.
fn table(out: &mut String, rows: &[Vec<String>], right: &[bool]) {
    let n_cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n_cols)
        .map(|col| {
            rows.iter()
                .filter_map(|r| r.get(col))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for cells in rows {
        let mut line = String::from(" ");
        for (col, cell) in cells.iter().enumerate() {
            let width = widths[col];
            if right.get(col).copied().unwrap_or(false) {
                let _ = write!(line, " {cell:>width$}");
            } else {
                let _ = write!(line, " {cell:<width$}");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
}
