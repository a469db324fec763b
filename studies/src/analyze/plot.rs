//! SVG plots: take an [`Analysis`], give `(file name, SVG text)` pairs — per application
//! the communication share per task count, the breakdown by operation, and the curves of
//! the top-k call sites. Rendering goes to strings; the CLI writes the files.

use plotters::prelude::*;

use super::method::{Analysis, AppAnalysis};

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
        let series: Vec<(String, Vec<f64>)> = app
            .operations
            .iter()
            .map(|op| (op.operation.clone(), op.share_by_tasks.clone()))
            .collect();
        let title = format!(
            "{}: share of communication time by operation",
            app.application
        );
        files.push((
            format!("{stem}-operations.svg"),
            share_curves(app, &title, &series)?,
        ));
        let series: Vec<(String, Vec<f64>)> = app
            .call_sites
            .iter()
            .take(top_k)
            .map(|s| {
                (
                    format!(
                        "{} {} (rho {})",
                        s.site.operation,
                        s.site.location(),
                        s.correlation
                            .rho
                            .map_or("-".to_owned(), |r| format!("{r:.2}"))
                    ),
                    s.share_by_tasks.clone(),
                )
            })
            .collect();
        let title = format!(
            "{}: top {} call sites by rank correlation",
            app.application,
            series.len()
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

/// Labels the linear log2 axis in tasks, only at whole powers of two.
fn task_label(x: &f64) -> String {
    if (x - x.round()).abs() < 1e-9 {
        format!("{:.0}", x.exp2())
    } else {
        String::new()
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
    let y_max = points.iter().map(|p| p.1).fold(0.0, f64::max).max(1.0) * 1.1;
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
            .x_label_formatter(&task_label)
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
        root.present().map_err(err)?;
    }
    Ok(Some(svg))
}

/// One curve per series: mean share (percent of communication time) per task count.
fn share_curves(
    app: &AppAnalysis,
    title: &str,
    series: &[(String, Vec<f64>)],
) -> Result<String, String> {
    let y_max = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(0.0, f64::max)
        .max(0.01)
        // Headroom for the legend in the upper left corner.
        * 130.0;
    let x_range = x_axis(app);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(x_range, 0.0..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("tasks (log scale)")
            .x_label_formatter(&task_label)
            .y_desc("% of communication time")
            .draw()
            .map_err(err)?;
        for (idx, (label, shares)) in series.iter().enumerate() {
            let color = Palette99::pick(idx).to_rgba();
            let curve: Vec<(f64, f64)> = app
                .task_counts
                .iter()
                .zip(shares)
                .map(|(&p, &s)| (x_of(p), 100.0 * s))
                .collect();
            chart
                .draw_series(LineSeries::new(curve.clone(), color.stroke_width(2)))
                .map_err(err)?
                .label(label.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
            chart
                .draw_series(
                    curve
                        .into_iter()
                        .map(|pt| Circle::new(pt, 3, color.filled())),
                )
                .map_err(err)?;
        }
        if !series.is_empty() {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperLeft)
                .draw()
                .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

fn err<E: std::fmt::Display>(error: E) -> String {
    format!("plot: {error}")
}
