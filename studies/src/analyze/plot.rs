//! SVG plots: take an [`Analysis`], give `(file name, SVG text)` pairs — per application
//! the communication share per task count, the breakdown by operation, and the curves of
//! the top-k call sites. Rendering goes to strings; the CLI writes the files.

use plotters::coord::types::RangedCoordf64;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::method::{Analysis, AppAnalysis, Correlation};

/// One curve: its legend, its mean share per task count, and whether the growth is
/// significant (solid; dashed when not).
struct Series {
    label: String,
    shares: Vec<f64>,
    grows: bool,
}

/// `ρ 0.98, p 0.004, significant` as a legend says it (the Holm-adjusted p-value).
fn significance(c: &Correlation) -> String {
    let rho = c.rho.map_or("ρ -".to_owned(), |r| format!("ρ {r:.2}"));
    let p = if c.p_adjusted < 0.001 {
        "p < 0.001".to_owned()
    } else {
        format!("p {:.3}", c.p_adjusted)
    };
    if c.grows {
        format!("{rho}, {p}, grows significantly")
    } else {
        format!("{rho}, {p}")
    }
}

/// Width and height of every plot, pixels.
const SIZE: (u32, u32) = (800, 500);

/// Renders the plots of every application; `top_k` call-site curves per application.
pub fn render(analysis: &Analysis, top_k: usize) -> Result<Vec<(String, String)>, String> {
    let mut files = Vec::new();
    for app in &analysis.applications {
        let stem = file_stem(&app.application);
        if let Some(svg) = comm_share(app)? {
            files.push((format!("{stem}-comm-share.svg"), svg));
        }
        let series: Vec<Series> = app
            .operations
            .iter()
            .map(|op| Series {
                label: format!("{} ({})", op.operation, significance(&op.correlation)),
                shares: op.share_by_tasks.clone(),
                grows: op.correlation.grows,
            })
            .collect();
        let title = format!(
            "{}: share of communication time by operation",
            app.application
        );
        files.push((
            format!("{stem}-operations.svg"),
            share_curves(app, &title, &series)?,
        ));
        // The sites whose share grows: a negative correlation is a site that matters
        // less as the run scales, not one that scales badly.
        let series: Vec<Series> = app
            .call_sites
            .iter()
            .filter(|s| s.correlation.rho.is_some_and(|r| r > 0.0))
            .take(top_k)
            .map(|s| Series {
                label: format!(
                    "{} {} ({})",
                    s.site.operation,
                    s.site.location(),
                    significance(&s.correlation)
                ),
                shares: s.share_by_tasks.clone(),
                grows: s.correlation.grows,
            })
            .collect();
        let title = format!(
            "{}: call sites whose share grows with the tasks (ρ > 0, at most {top_k})",
            app.application
        );
        files.push((
            format!("{stem}-top-call-sites.svg"),
            share_curves(app, &title, &series)?,
        ));
    }
    Ok(files)
}

fn file_stem(application: &str) -> String {
    application
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The x axis is log2 of the task count (scaling studies double the tasks); labels
/// appear at the powers of two.
fn x_axis(app: &AppAnalysis) -> std::ops::Range<f64> {
    let lo = app.task_counts.first().map_or(0.0, |&p| x_of(p));
    let hi = app
        .task_counts
        .last()
        .map_or(1.0, |&p| x_of(p))
        .max(lo + 1.0);
    // Margins so the extreme points are not on the frame.
    let margin = 0.05 * (hi - lo);
    lo - margin..hi + margin
}

fn x_of(n_tasks: u32) -> f64 {
    f64::from(n_tasks.max(1)).log2()
}

/// The ticks of the log2 axis: one at each task count measured, and only there.
fn task_ticks(app: &AppAnalysis) -> Vec<f64> {
    app.task_counts.iter().map(|&p| x_of(p)).collect()
}

/// Draws the x axis's ticks and labels at the task counts measured (plotters places its
/// own ticks evenly, which on a log axis fall between task counts).
fn draw_task_ticks<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    chart: &ChartContext<DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    app: &AppAnalysis,
) -> Result<(), String> {
    for (&p, x) in app.task_counts.iter().zip(task_ticks(app)) {
        let (px, py) = chart.backend_coord(&(x, 0.0));
        root.draw(&PathElement::new([(px, py), (px, py + 5)], BLACK))
            .map_err(err)?;
        root.draw(&Text::new(
            p.to_string(),
            (px, py + 8),
            ("sans-serif", 12)
                .into_text_style(root)
                .pos(Pos::new(HPos::Center, VPos::Top)),
        ))
        .map_err(err)?;
    }
    Ok(())
}

/// The top of a percentage axis: 10 % above the largest value, never past 100 %.
fn percent_top(largest: f64) -> f64 {
    (largest * 1.1).clamp(0.01, 100.0)
}

/// Decimals of a percentage axis that runs to `top`, so that its ticks differ.
fn percent_decimals(top: f64) -> usize {
    if top >= 20.0 {
        0
    } else if top >= 2.0 {
        1
    } else if top >= 0.2 {
        2
    } else {
        3
    }
}

/// Communication share of run time per experiment (points) and its mean per task count
/// (line); `None` when no experiment has run times.
fn comm_share(app: &AppAnalysis) -> Result<Option<String>, String> {
    let points: Vec<(f64, f64)> = app
        .experiments
        .iter()
        .filter_map(|e| e.comm_share.map(|s| (x_of(e.n_tasks), 100.0 * s)))
        .collect();
    if points.is_empty() {
        return Ok(None);
    }
    let means: Vec<(f64, f64)> = app
        .task_counts
        .iter()
        .filter_map(|&p| {
            let at_p: Vec<f64> = points
                .iter()
                .filter(|(x, _)| *x == x_of(p))
                .map(|(_, y)| *y)
                .collect();
            (!at_p.is_empty()).then(|| (x_of(p), at_p.iter().sum::<f64>() / at_p.len() as f64))
        })
        .collect();
    let y_max = percent_top(points.iter().map(|p| p.1).fold(0.0, f64::max));
    let x_range = x_axis(app);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("{}: communication share of run time", app.application),
                ("sans-serif", 20),
            )
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(x_range, 0.0..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("tasks (log scale)")
            .disable_x_mesh()
            .x_labels(0)
            .y_label_formatter(&|y| format!("{y:.decimals$}", decimals = percent_decimals(y_max)))
            .y_desc("communication % (rest: computation)")
            .draw()
            .map_err(err)?;
        chart
            .draw_series(
                points
                    .iter()
                    .map(|&(x, y)| Circle::new((x, y), 3, BLUE.filled())),
            )
            .map_err(err)?;
        chart
            .draw_series(LineSeries::new(means, &BLUE))
            .map_err(err)?;
        draw_task_ticks(&root, &chart, app)?;
        root.present().map_err(err)?;
    }
    Ok(Some(svg))
}

/// One curve per series: mean share (percent of communication time) per task count;
/// the legend below the chart, solid curves for a significant growth, dashed others.
fn share_curves(app: &AppAnalysis, title: &str, series: &[Series]) -> Result<String, String> {
    let y_max = percent_top(
        100.0
            * series
                .iter()
                .flat_map(|s| s.shares.iter().copied())
                .fold(0.0, f64::max),
    );
    let x_range = x_axis(app);
    const LEGEND_LINE: u32 = 20;
    let legend_h = LEGEND_LINE * (series.len() as u32 + 2) + 20;
    let mut svg = String::new();
    {
        let root =
            SVGBackend::with_string(&mut svg, (SIZE.0, SIZE.1 + legend_h)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (plot, legend) = root.split_vertically(SIZE.1);
        let mut chart = ChartBuilder::on(&plot)
            .caption(title, ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(x_range, 0.0..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("tasks (log scale)")
            .disable_x_mesh()
            .x_labels(0)
            .y_label_formatter(&|y| format!("{y:.decimals$}", decimals = percent_decimals(y_max)))
            .y_desc("% of communication time")
            .draw()
            .map_err(err)?;
        for (idx, s) in series.iter().enumerate() {
            let color = Palette99::pick(idx).to_rgba();
            let curve: Vec<(f64, f64)> = app
                .task_counts
                .iter()
                .zip(&s.shares)
                .map(|(&p, &share)| (x_of(p), 100.0 * share))
                .collect();
            if s.grows {
                chart
                    .draw_series(LineSeries::new(curve.clone(), color.stroke_width(2)))
                    .map_err(err)?;
            } else {
                chart
                    .draw_series(DashedLineSeries::new(
                        curve.clone(),
                        6,
                        4,
                        color.stroke_width(2),
                    ))
                    .map_err(err)?;
            }
            chart
                .draw_series(
                    curve
                        .into_iter()
                        .map(|pt| Circle::new(pt, 3, color.filled())),
                )
                .map_err(err)?;
            let y = (LEGEND_LINE * idx as u32 + 10) as i32;
            let line = [(60, y + 7), (90, y + 7)];
            if s.grows {
                legend
                    .draw(&PathElement::new(line, color.stroke_width(2)))
                    .map_err(err)?;
            } else {
                legend
                    .draw(&DashedPathElement::new(line, 6, 4, color.stroke_width(2)))
                    .map_err(err)?;
            }
            legend
                .draw(&Text::new(s.label.clone(), (100, y), ("sans-serif", 14)))
                .map_err(err)?;
        }
        draw_task_ticks(&plot, &chart, app)?;
        let notes: &[&str] = if series.is_empty() {
            &["no curve: nothing to draw"]
        } else {
            &[
                "solid: the share grows significantly with the task count (Spearman, Holm-adjusted p < α);",
                "dashed: it does not (it falls, or the growth is not significant)",
            ]
        };
        for (i, note) in notes.iter().enumerate() {
            let y = (LEGEND_LINE * (series.len() + i) as u32 + 10) as i32;
            legend
                .draw(&Text::new(
                    *note,
                    (60, y),
                    ("sans-serif", 13).into_font().color(&RGBColor(90, 90, 90)),
                ))
                .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

fn err<E: std::fmt::Display>(error: E) -> String {
    format!("plot: {error}")
}
