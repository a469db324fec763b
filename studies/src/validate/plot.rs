//! The SVG plot of a [`Report`]: predicted against measured time, one colour per method,
//! on log–log axes with the diagonal (a perfect prediction) and the ±10 % band; each
//! row's number beside its skeleton point and, below the chart, the key of numbers to
//! application and scenario. Renders
//! into a string; the CLI writes the file.

use plotters::prelude::*;

use super::evaluate::Report;
use super::Expectation;

/// Width and height of the plot, pixels.
const SIZE: (u32, u32) = (800, 600);

/// A method's points: (row number, measured, predicted).
type Points = Vec<(usize, f64, f64)>;

/// Columns of the key below the chart.
const KEY_COLUMNS: usize = 3;
/// Height of a key line, pixels.
const KEY_LINE: u32 = 16;

/// Renders the plot; the negative control is left out (its error is meant to be large).
/// Each row of the table is a number: the first method's point carries it, and the key
/// below the chart says which application and scenario it is.
pub fn render(report: &Report) -> Result<String, String> {
    let rows: Vec<&super::evaluate::Row> = report
        .rows
        .iter()
        .filter(|r| r.expectation == Expectation::Accurate)
        .collect();
    // (row number, measured, predicted) of each method.
    let series: Vec<(String, Points)> = report
        .methods
        .iter()
        .map(|method| {
            let points = rows
                .iter()
                .enumerate()
                .filter_map(|(i, r)| {
                    let measured = r.measured_s?;
                    let predicted = r
                        .predictions
                        .iter()
                        .find(|p| &p.method == method)?
                        .predicted_s?;
                    (measured > 0.0 && predicted > 0.0).then_some((i + 1, measured, predicted))
                })
                .collect();
            (method.clone(), points)
        })
        .collect();
    let (lo, hi) = series
        .iter()
        .flat_map(|(_, pts)| pts.iter().flat_map(|&(_, x, y)| [x, y]))
        .fold((f64::INFINITY, 0.0_f64), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    // Margins of 20 % on the log scale; a default range when nothing was measured.
    let (lo, hi) = if lo.is_finite() && hi > 0.0 {
        (lo / 1.25, hi * 1.25)
    } else {
        (0.1, 100.0)
    };
    let mut svg = String::new();
    {
        let per_column = rows.len().div_ceil(KEY_COLUMNS).max(1);
        let key_h = KEY_LINE * per_column as u32 + 20;
        let root = SVGBackend::with_string(&mut svg, (SIZE.0, SIZE.1 + key_h)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (plot, key) = root.split_vertically(SIZE.1);
        let mut chart = ChartBuilder::on(&plot)
            .caption(
                format!(
                    "perfskel validate: predicted vs measured time (1:{}, {})",
                    report.ratio,
                    report.ranks_text()
                ),
                ("sans-serif", 20),
            )
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((lo..hi).log_scale(), (lo..hi).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("measured application time, s (log scale)")
            .y_desc("predicted time, s (log scale)")
            .x_label_formatter(&|v| seconds_label(*v))
            .y_label_formatter(&|v| seconds_label(*v))
            .draw()
            .map_err(err)?;
        let diagonal = |factor: f64| vec![(lo, lo * factor), (hi, hi * factor)];
        chart
            .draw_series(LineSeries::new(diagonal(1.0), BLACK.stroke_width(1)))
            .map_err(err)?
            .label("perfect prediction")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
        let band = BLACK.mix(0.3);
        for factor in [0.9, 1.1] {
            let series = chart
                .draw_series(LineSeries::new(diagonal(factor), band.stroke_width(1)))
                .map_err(err)?;
            if factor > 1.0 {
                series
                    .label("±10 %")
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], band));
            }
        }
        for (idx, (method, points)) in series.iter().enumerate() {
            let color = Palette99::pick(idx).to_rgba();
            chart
                .draw_series(
                    points
                        .iter()
                        .map(|&(_, x, y)| Circle::new((x, y), 4, color.filled())),
                )
                .map_err(err)?
                .label(method.clone())
                .legend(move |(x, y)| Circle::new((x + 10, y), 4, color.filled()));
            if idx == 0 {
                chart
                    .draw_series(points.iter().map(|&(n, x, y)| {
                        EmptyElement::at((x, y))
                            + Text::new(n.to_string(), (6, -14), ("sans-serif", 11).into_font())
                    }))
                    .map_err(err)?;
            }
        }
        let column_w = (SIZE.0 as usize - 40) / KEY_COLUMNS;
        for (i, r) in rows.iter().enumerate() {
            let (col, line) = (i / per_column, i % per_column);
            let x = 20 + (col * column_w) as i32;
            let y = 8 + (line as u32 * KEY_LINE) as i32;
            key.draw(&Text::new(
                format!("{} {} · {}", i + 1, r.app, r.scenario),
                (x, y),
                ("sans-serif", 12).into_font(),
            ))
            .map_err(err)?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// A tick's seconds with the digits that tell ticks apart: `20`, `2.5`, `0.25`.
fn seconds_label(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn err<E: std::fmt::Display>(error: E) -> String {
    format!("plot: {error}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plot_has_a_point_per_accurate_row_and_method() {
        let report = super::super::report::tests::sample();
        let svg = render(&report).unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("predicted vs measured time (1:100, 2 ranks)"));
        for method in &report.methods {
            assert!(svg.contains(method.as_str()), "{method}");
        }
        // 4 accurate rows with a skeleton prediction, 2 non-base rows per method
        // relative to base, plus the legend's four markers.
        assert_eq!(svg.matches("<circle").count(), 4 + 2 + 2 + 2 + 4);
        // The key names each numbered point's application and scenario.
        for r in report
            .rows
            .iter()
            .filter(|r| r.expectation == Expectation::Accurate)
        {
            assert!(
                svg.contains(&format!("{} · {}", r.app, r.scenario)),
                "{}",
                r.app
            );
        }
        assert!(svg.contains("\n1 "), "the first row's number in the key");
    }
}
