//! `perfskel report TRACE -o report.html`: one self-contained HTML file (inline CSS and
//! SVG, no script, nothing fetched) of a trace and its skeleton: the run in figures, the
//! prediction (from what `perfskel run` printed), the communication matrices of the
//! application and of the skeleton on one colour scale, each rank's time, the
//! mpiP-style call-site table, and the skeleton's text with each statement's call site
//! linked to its row. The skeleton is the file given, or made from the trace as
//! `perfskel skeletonize` makes it.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use perfskel_compiler::back::RunResult;
use perfskel_compiler::check::Options as CheckOptions;
use perfskel_compiler::logicalize::{logicalize, CommMatrix, Options, Traffic};
use perfskel_compiler::trace::stats::StatsReport;

use crate::cmd_trace::share;
use crate::heatmap::{self, escape, human_bytes, nice_step, AxisOrder, Cells};

#[derive(clap::Args)]
pub struct Args {
    /// The trace: a directory `perfskel record` wrote, or an OTF2 archive.
    pub trace: PathBuf,
    /// The skeleton of the trace (default: made from the trace as `perfskel
    /// skeletonize` makes it, nothing written).
    #[arg(long, value_name = "FILE.skel")]
    pub skeleton: Option<PathBuf>,
    /// What `perfskel run` printed (a file with its `perfskel-result` lines): the
    /// prediction. Give it once per run of `perfskel run` (ratios, back ends).
    #[arg(long, value_name = "FILE")]
    pub run: Vec<PathBuf>,
    /// A trace of the skeleton's run (`perfskel record -o DIR -- mpirun -np N
    /// OUT/skeleton`): its iteration is drawn below the application's.
    #[arg(long, value_name = "DIR")]
    pub skeleton_trace: Option<PathBuf>,
    /// The HTML file to write.
    #[arg(short = 'o', long = "output", value_name = "FILE.html")]
    pub output: PathBuf,
    /// Overwrite the output file if it exists.
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: Args) -> Result<ExitCode, String> {
    crate::files::check_new_file(&args.output, args.force)?;
    if overwrites_the_trace(&args.output, &args.trace) {
        return Err(format!(
            "{} is a file of the trace {} reads: write the report elsewhere",
            args.output.display(),
            args.trace.display()
        ));
    }
    let html = render(&args)?;
    crate::files::write_new_file(&args.output, html.as_bytes(), args.force)?;
    println!("wrote {}", args.output.display());
    Ok(ExitCode::SUCCESS)
}

/// Whether `output` is one of the trace's own files (a rank file, the manifest, an
/// OTF2 anchor, definition or event file): never written, not even with `--force`.
fn overwrites_the_trace(output: &Path, trace: &Path) -> bool {
    let Some(name) = output.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return false;
    };
    let trace_file = crate::cmd_record::is_trace_file(&name)
        || [".otf2", ".def", ".evt"].iter().any(|e| name.ends_with(e));
    let dir = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let trace_dir = if trace.is_file() {
        trace.parent().unwrap_or(Path::new("."))
    } else {
        trace
    };
    trace_file
        && std::fs::canonicalize(dir)
            .ok()
            .zip(std::fs::canonicalize(trace_dir).ok())
            .is_some_and(|(a, b)| a == b || a.starts_with(&b))
}

/// The skeleton shown: its text and where it came from.
struct Shown {
    text: String,
    origin: String,
}

/// The runs of one `perfskel run`: every result line, the median one last.
struct Runs {
    file: String,
    median: RunResult,
    all: Vec<RunResult>,
}

fn render(args: &Args) -> Result<String, String> {
    let name = args
        .trace
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| ".".into());
    let (stats, errors) = crate::cmd_trace::read_stats(&args.trace, None)?;
    let (matrix, warnings, _, grid) = crate::cmd_topo::read_trace(&args.trace)?;
    let shown = skeleton(args)?;
    let skeleton_timeline = args
        .skeleton_trace
        .as_deref()
        .map(crate::timeline::read)
        .transpose()?;
    let runs = args
        .run
        .iter()
        .map(|p| read_runs(p))
        .collect::<Result<Vec<_>, _>>()?;
    // One check gives both what `check` says of the skeleton and its matrix.
    let (program, mut diags) = perfskel_grammar::parse(&shown.text);
    let sim = if diags.iter().any(perfskel_grammar::Diag::is_error) {
        None
    } else {
        let checked = perfskel_compiler::check::check(
            &program,
            &shown.text,
            CheckOptions {
                pair_traffic: true,
                ..CheckOptions::default()
            },
        );
        diags.extend(checked.diags);
        checked.info
    };
    perfskel_grammar::diagnostic::sort(&mut diags);
    let diags: Vec<String> = diags
        .iter()
        .map(|d| format!("{}: {}", d.code, d.message))
        .collect();
    let skeleton_matrix = sim.as_ref().map(|info| {
        let mut m =
            CommMatrix::new(matrix.n_ranks.max(info.ranks().len() as u32)).unwrap_or_default();
        for (src, r) in info.ranks().iter().enumerate() {
            for (&dst, &(messages, bytes)) in &r.sent_to {
                let _ = m.add_p2p(
                    src as u32,
                    dst,
                    Traffic {
                        messages,
                        bytes,
                        time_s: None,
                    },
                );
            }
        }
        (m, info.simulation_complete())
    });

    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>perfskel report: {}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n<h1>perfskel report: <code>{}</code></h1>\n",
        escape(&name),
        escape(&name)
    );
    summary(&mut h, &stats, &errors, &warnings);
    prediction(&mut h, &runs, &stats);
    matrices(&mut h, &matrix, grid.as_deref(), skeleton_matrix.as_ref());
    iteration(&mut h, &args.trace, skeleton_timeline.as_ref());
    rank_times(&mut h, &stats);
    let lines = site_lines(&shown.text);
    let anchors = call_sites(&mut h, &stats, &lines);
    skeleton_text(&mut h, &shown, &diags, &anchors);
    h.push_str("<footer>Written by perfskel ");
    h.push_str(env!("CARGO_PKG_VERSION"));
    h.push_str(". Times are of the traced run; App% is of the application's time (end of MPI_Init to start of MPI_Finalize, summed over ranks), MPI% of its time in MPI.</footer>\n</body>\n</html>\n");
    Ok(h)
}

const STYLE: &str = "body { font-family: sans-serif; margin: 2em auto; max-width: 1300px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.8em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { padding: 0.2em 0.6em; border-bottom: 1px solid #e4e4e4; }
th { background: #f0f0f0; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
tr:target { background: #fff3b0; }
.figures { display: flex; flex-wrap: wrap; gap: 1em; }
.figures > figure { flex: 1 1 420px; max-width: 660px; margin: 0; }
.figures > figure > svg { width: 100%; height: auto; }
figure.wide { margin: 0; } figure.wide > svg { width: 100%; height: auto; }
.note { color: #555; font-size: 0.9em; }
.warn { color: #8a4b00; }
pre.skel { background: #f8f8f8; border: 1px solid #ddd; padding: 0.6em; line-height: 1.35; overflow-x: auto; }
pre.skel .ln { color: #999; user-select: none; display: inline-block; width: 3.5em; }
pre.skel .c { color: #6a737d; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: 0.2em 1em; }
dl.facts dt { font-weight: bold; }
footer { margin-top: 2em; font-size: 0.8em; color: #777; }
";

fn skeleton(args: &Args) -> Result<Shown, String> {
    if let Some(path) = &args.skeleton {
        let text = crate::files::read_source(path)?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        return Ok(Shown {
            text,
            origin: format!("the file `{name}`"),
        });
    }
    let made = crate::cmd_skeletonize::Args {
        trace: args.trace.clone(),
        output: PathBuf::from("-"),
        algorithm: crate::cmd_skeletonize::AlgorithmArg::Exact,
        format: crate::cmd_skeletonize::Format::Text,
        merge_sizes: None,
        threshold: perfskel_compiler::logicalize::DEFAULT_THRESHOLD,
        every_call: false,
        force: false,
    };
    let (outcome, _) = crate::cmd_skeletonize::make_skeleton(&made)?;
    Ok(Shown {
        text: outcome.text,
        origin: "made from the trace as `perfskel skeletonize` makes it (no --skeleton given)"
            .into(),
    })
}

fn read_runs(path: &Path) -> Result<Runs, String> {
    let text = crate::files::read_source(path)?;
    let mut all: Vec<RunResult> = text.lines().filter_map(RunResult::parse).collect();
    let Some(median) = all.last().cloned() else {
        return Err(format!(
            "{}: no perfskel-result line: give what `perfskel run` printed",
            path.display()
        ));
    };
    // `perfskel run` repeats the median run's line last after two or more runs.
    if all.len() > 1 {
        all.pop();
    }
    Ok(Runs {
        file: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        median,
        all,
    })
}

fn seconds(ns: u64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.1} %", 100.0 * part as f64 / whole as f64)
    }
}

/// The application's time: the slowest rank's, as `skeletonize` takes it.
fn app_ns(stats: &StatsReport) -> u64 {
    stats.ranks.iter().map(|r| r.app_ns).max().unwrap_or(0)
}

fn summary(h: &mut String, stats: &StatsReport, errors: &[String], warnings: &[String]) {
    h.push_str("<h2 id=\"run\">The run</h2>\n<dl class=\"facts\">\n");
    let fact = |h: &mut String, k: &str, v: String| {
        let _ = writeln!(h, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(&v));
    };
    fact(h, "ranks", stats.n_ranks.to_string());
    fact(h, "events", stats.events.to_string());
    fact(
        h,
        "application time",
        format!(
            "{} (slowest rank, end of MPI_Init to start of MPI_Finalize)",
            seconds(app_ns(stats))
        ),
    );
    fact(
        h,
        "time in MPI",
        format!(
            "{} of the ranks' time ({} summed)",
            pct(stats.mpi_ns, stats.app_ns),
            seconds(stats.mpi_ns)
        ),
    );
    fact(
        h,
        "computing",
        format!(
            "{}, off the core {}",
            pct(stats.compute_ns, stats.app_ns),
            pct(stats.off_cpu_ns, stats.app_ns)
        ),
    );
    if !stats.missing_ranks.is_empty() || !stats.incomplete_ranks.is_empty() {
        fact(
            h,
            "ranks missing / incomplete",
            format!("{:?} / {:?}", stats.missing_ranks, stats.incomplete_ranks),
        );
    }
    h.push_str("</dl>\n");
    for line in errors.iter().chain(warnings) {
        let _ = writeln!(h, "<p class=\"warn\">{}</p>", escape(line));
    }
}

fn prediction(h: &mut String, runs: &[Runs], stats: &StatsReport) {
    h.push_str("<h2 id=\"prediction\">Prediction</h2>\n");
    if runs.is_empty() {
        h.push_str("<p class=\"note\">No run given: <code>perfskel compile app.skel --ratio 1:100 -o out</code>, <code>perfskel run out -np N | tee run.txt</code>, then <code>--run run.txt</code> here.</p>\n");
        return;
    }
    h.push_str("<table>\n<tr><th>from</th><th>back end</th><th>ratio</th><th>ranks</th><th>runs</th><th>skeleton</th><th>predicted</th><th>traced run</th><th>error</th></tr>\n");
    let traced = app_ns(stats) as f64 / 1e9;
    for r in runs {
        let m = &r.median;
        let times: Vec<f64> = r.all.iter().map(|x| x.skeleton_s).collect();
        let lo = times.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = times.iter().copied().fold(0.0, f64::max);
        let spread = if times.len() > 1 && m.skeleton_s > 0.0 {
            format!(
                "{} ({:.3}–{:.3} s, spread {:.1} %)",
                times.len(),
                lo,
                hi,
                100.0 * (hi - lo) / m.skeleton_s
            )
        } else {
            times.len().to_string()
        };
        let error = if traced > 0.0 {
            format!("{:+.1} %", 100.0 * (m.predicted_s / traced - 1.0))
        } else {
            "-".into()
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td class=\"n\">1:{}</td><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{:.6} s</td><td class=\"n\">{:.3} s</td><td class=\"n\">{:.3} s</td><td class=\"n\">{}</td></tr>",
            escape(&r.file),
            escape(&m.backend),
            m.ratio,
            m.ranks,
            escape(&spread),
            m.skeleton_s,
            m.predicted_s,
            traced,
            error
        );
    }
    h.push_str("</table>\n<p class=\"note\">predicted: the median run's skeleton time × the ratio reached; error: against this trace's application time. Where the skeleton ran on another machine, MPI or rank placement, the error is the difference that makes, not the skeleton's.</p>\n");
}

fn matrices(
    h: &mut String,
    app: &CommMatrix,
    grid: Option<&[(u64, bool)]>,
    skeleton: Option<&(CommMatrix, bool)>,
) {
    h.push_str("<h2 id=\"matrix\">Communication matrix</h2>\n");
    // The application's own grid orders the ranks as it numbers them (MPI_Cart_create
    // over the world, row-major); else the topology the matrix matches.
    let declared = grid.and_then(|g| {
        perfskel_compiler::skeletonize::declared_topology(g, app.n_ranks)
            .map(|t| perfskel_grammar::printer::topology(&t))
    });
    let order: AxisOrder = match declared {
        Some(topology) => crate::cmd_topo::declared_order(&topology, app.n_ranks),
        None => crate::cmd_topo::logical_order(&logicalize(app, &Options::default())),
    };
    let app_cells = Cells::new(app, &order);
    let sk_cells = skeleton.map(|(m, _)| Cells::new(m, &order));
    let max = app_cells
        .max_bytes()
        .max(sk_cells.as_ref().map_or(1, Cells::max_bytes));
    h.push_str("<div class=\"figures\">\n");
    let figure = |h: &mut String, svg: String| {
        h.push_str("<figure>\n");
        h.push_str(&svg);
        h.push_str("</figure>\n");
    };
    figure(h, heatmap::svg(&app_cells, "the application (traced)", max));
    match (&sk_cells, skeleton) {
        (Some(cells), Some((_, complete))) => {
            let title = if *complete {
                "the skeleton (its simulation by check)".to_string()
            } else {
                "the skeleton (the part check simulated)".to_string()
            };
            figure(h, heatmap::svg(cells, &title, max));
        }
        _ => h.push_str(
            "<p class=\"warn\">The skeleton does not check, so it has no matrix here.</p>\n",
        ),
    }
    h.push_str("</div>\n");
    let a = app.p2p_total();
    let mut rows = vec![(
        "the application".to_string(),
        a.messages,
        a.bytes,
        app.p2p.len(),
    )];
    if let Some((m, _)) = skeleton {
        let s = m.p2p_total();
        rows.push(("the skeleton".into(), s.messages, s.bytes, m.p2p.len()));
    }
    h.push_str("<table>\n<tr><th>point to point</th><th>messages</th><th>bytes</th><th>rank pairs</th></tr>\n");
    for (who, messages, bytes, pairs) in rows {
        let _ = writeln!(
            h,
            "<tr><td>{who}</td><td class=\"n\">{messages}</td><td class=\"n\">{} ({bytes} B)</td><td class=\"n\">{pairs}</td></tr>",
            human_bytes(bytes)
        );
    }
    h.push_str("</table>\n");
    let _ = writeln!(
        h,
        "<p class=\"note\">Both matrices share one log colour scale; the axes: {}. Hover over a cell for its values.</p>",
        escape(&order.label)
    );
    if !app.collectives.is_empty() {
        h.push_str(
            "<table>\n<tr><th>collective (application)</th><th>calls</th><th>bytes</th></tr>\n",
        );
        for (name, t) in &app.collectives {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                escape(name),
                t.messages,
                human_bytes(t.bytes)
            );
        }
        h.push_str("</table>\n");
    }
}

/// One iteration of the application, and of the skeleton where its trace is given, as a
/// Gantt chart.
fn iteration(h: &mut String, trace: &Path, skeleton: Option<&crate::timeline::Timeline>) {
    h.push_str("<h2 id=\"timeline\">One iteration</h2>\n");
    let app = match crate::timeline::read(trace) {
        Ok(t) => t,
        Err(e) => {
            let _ = writeln!(
                h,
                "<p class=\"warn\">No timeline of the application: {}</p>",
                escape(&e)
            );
            return;
        }
    };
    let mut panels = vec![("the application (traced)", &app)];
    if let Some(s) = skeleton {
        panels.push(("the skeleton (its traced run)", s));
    }
    h.push_str("<figure class=\"wide\">\n");
    h.push_str(&crate::timeline::svg(&panels, "timeline-svg"));
    h.push_str("</figure>\n");
    h.push_str("<p class=\"note\">Each rank's MPI calls over one wall-clock window, the middle iteration of the loop where rank 0 spends its time; hover over a call for its site, time and peer.");
    if skeleton.is_none() {
        h.push_str(" For the skeleton's iteration below it, trace a run of the skeleton (<code>perfskel record -o DIR -- mpirun -np N OUT/skeleton</code>) and give it as <code>--skeleton-trace DIR</code>.");
    }
    h.push_str("</p>\n");
}

/// Ranks drawn in the per-rank chart at most.
const MAX_BARS: usize = 256;

fn rank_times(h: &mut String, stats: &StatsReport) {
    h.push_str("<h2 id=\"ranks\">Time per rank</h2>\n");
    let ranks: Vec<_> = stats.ranks.iter().take(MAX_BARS).collect();
    let longest = ranks.iter().map(|r| r.app_ns).max().unwrap_or(0).max(1) as f64;
    let row = if ranks.len() <= 32 { 18.0 } else { 6.0 };
    let (left, top, plot_w) = (60.0, 36.0, 600.0);
    let height = top + row * ranks.len() as f64 + 50.0;
    let width = left + plot_w + 40.0;
    let _ = writeln!(
        h,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="12">"#
    );
    let parts = [
        ("MPI", "#3b528b"),
        ("compute", "#5ec962"),
        ("off the core", "#c0c0c0"),
    ];
    for (i, (label, colour)) in parts.iter().enumerate() {
        let x = left + 150.0 * i as f64;
        let _ = writeln!(
            h,
            r#"<rect x="{x}" y="8" width="12" height="12" fill="{colour}"/><text x="{:.0}" y="18">{label}</text>"#,
            x + 16.0
        );
    }
    for (i, r) in ranks.iter().enumerate() {
        let y = top + row * i as f64;
        let mut x = left;
        for (ns, (label, colour)) in [r.mpi_ns, r.compute_ns, r.off_cpu_ns].iter().zip(parts) {
            let w = plot_w * *ns as f64 / longest;
            let _ = writeln!(
                h,
                r#"<rect x="{x:.2}" y="{y:.2}" width="{w:.2}" height="{:.2}" fill="{colour}"><title>rank {}: {label} {:.3} ms</title></rect>"#,
                row * 0.8,
                r.rank,
                *ns as f64 / 1e6
            );
            x += w;
        }
        if ranks.len() <= 32 || i % 16 == 0 {
            let _ = writeln!(
                h,
                r#"<text x="{:.0}" y="{:.2}" text-anchor="end">{}</text>"#,
                left - 6.0,
                y + row * 0.7,
                r.rank
            );
        }
    }
    let axis_y = top + row * ranks.len() as f64 + 4.0;
    let step = nice_step(longest / 1e6 / 4.0);
    let ticks = ((longest / 1e6) / step + 1e-9).floor() as u32;
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    for k in 0..=ticks {
        let ms = step * f64::from(k);
        let x = left + plot_w * ms * 1e6 / longest;
        let _ = writeln!(
            h,
            r##"<line x1="{x:.1}" y1="{axis_y:.1}" x2="{x:.1}" y2="{:.1}" stroke="#333"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{:.decimals$}</text>"##,
            axis_y + 5.0,
            axis_y + 18.0,
            ms
        );
    }
    let _ = writeln!(
        h,
        r#"<text x="{:.0}" y="{:.1}" text-anchor="middle">ms of the rank's application time</text><text transform="translate(14 {:.1}) rotate(-90)" text-anchor="middle">rank</text></svg>"#,
        left + plot_w / 2.0,
        axis_y + 36.0,
        top + row * ranks.len() as f64 / 2.0
    );
    if stats.ranks.len() > MAX_BARS {
        let _ = writeln!(
            h,
            "<p class=\"note\">The first {MAX_BARS} of {} ranks.</p>",
            stats.ranks.len()
        );
    }
}

/// The skeleton's lines (1-based) of each call site named by `@ "SITE"`.
fn site_lines(text: &str) -> BTreeMap<String, Vec<usize>> {
    let mut out: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let (code, _) = split_comment(line);
        if let Some(site) = quoted_site(code) {
            out.entry(site.to_string()).or_default().push(i + 1);
        }
    }
    out
}

/// A line's code and its comment (from a `#` outside a string on).
fn split_comment(line: &str) -> (&str, Option<&str>) {
    let mut quoted = false;
    for (at, c) in line.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '#' if !quoted => return (&line[..at], Some(&line[at..])),
            _ => {}
        }
    }
    (line, None)
}

/// The site of a statement's `@ "SITE"`, if it has one.
fn quoted_site(code: &str) -> Option<&str> {
    let at = code.rfind("@ \"")?;
    let rest = &code[at + 3..];
    let end = rest.find('"')?;
    Some(&rest[..end])
}

/// The call-site table; gives the anchor of each site's first row.
fn call_sites(
    h: &mut String,
    stats: &StatsReport,
    lines: &BTreeMap<String, Vec<usize>>,
) -> BTreeMap<String, String> {
    h.push_str("<h2 id=\"sites\">Call sites</h2>\n<p class=\"note\">As mpiP reports them, most time first, all ranks: App% of the application's time, MPI% of its time in MPI; bytes sent. MPI_Init and MPI_Finalize lie outside the application's span (no share).</p>\n");
    h.push_str("<table>\n<tr><th>site</th><th>operation</th><th>ranks</th><th>calls</th><th>total ms</th><th>mean µs</th><th>App%</th><th>MPI%</th><th>sent</th><th>skeleton lines</th></tr>\n");
    let mut anchors = BTreeMap::new();
    // MPI_Init and MPI_Finalize (no share) after the application's own sites.
    let (inside, outside): (Vec<_>, Vec<_>) =
        stats.sites.iter().partition(|s| s.shares.app_pct.is_some());
    for (i, s) in inside.into_iter().chain(outside).enumerate() {
        let id = format!("site-{i}");
        let first = !anchors.contains_key(&s.site);
        if first {
            anchors.insert(s.site.clone(), id.clone());
        }
        let in_skeleton = lines
            .get(&s.site)
            .map(|ls| {
                ls.iter()
                    .map(|l| format!("<a href=\"#line-{l}\">{l}</a>"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_else(|| "–".into());
        let _ = writeln!(
            h,
            "<tr{}><td><code>{}</code></td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{:.3}</td><td class=\"n\">{:.3}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{in_skeleton}</td></tr>",
            if first { format!(" id=\"{id}\"") } else { String::new() },
            escape(&s.site),
            escape(s.op),
            s.n_ranks,
            s.totals.count,
            s.totals.total_ns as f64 / 1e6,
            s.shares.mean_ns as f64 / 1e3,
            share(s.shares.app_pct),
            share(s.shares.mpi_pct),
            human_bytes(s.totals.sent_bytes)
        );
    }
    h.push_str("</table>\n");
    anchors
}

fn skeleton_text(
    h: &mut String,
    shown: &Shown,
    diags: &[String],
    anchors: &BTreeMap<String, String>,
) {
    let _ = writeln!(
        h,
        "<h2 id=\"skeleton\">The skeleton</h2>\n<p class=\"note\">{}; each statement's call site links to its row above. Comments (grey) are the skeleton's provenance: what each part stands for in the trace.</p>",
        escape(&shown.origin)
    );
    for d in diags {
        let _ = writeln!(h, "<p class=\"warn\">check: {}</p>", escape(d));
    }
    h.push_str("<pre class=\"skel\">");
    for (i, line) in shown.text.lines().enumerate() {
        let n = i + 1;
        let _ = write!(h, "<span id=\"line-{n}\"><span class=\"ln\">{n}</span>");
        let (code, comment) = split_comment(line);
        match quoted_site(code).and_then(|site| anchors.get(site).map(|a| (site, a))) {
            Some((site, anchor)) => {
                let quoted = format!("\"{site}\"");
                let at = code.rfind(&quoted).unwrap_or(0);
                let _ = write!(
                    h,
                    "{}<a href=\"#{anchor}\">{}</a>{}",
                    escape(&code[..at]),
                    escape(&quoted),
                    escape(&code[at + quoted.len()..])
                );
            }
            None => h.push_str(&escape(code)),
        }
        if let Some(c) = comment {
            let _ = write!(h, "<span class=\"c\">{}</span>", escape(c));
        }
        h.push_str("</span>\n");
    }
    h.push_str("</pre>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_name_their_call_sites() {
        let text = "skeleton s\n# a comment @ \"x.c:1\"\nloop 2 {\n  send to next 8 B @ \"app.c:33\"\n  recv from prev 8 B @ \"app.c:35\" # after\n}\nallreduce 8 B @ \"app.c:33\"\n";
        let lines = site_lines(text);
        assert_eq!(lines["app.c:33"], vec![4, 7]);
        assert_eq!(lines["app.c:35"], vec![5]);
        assert!(!lines.contains_key("x.c:1"));
        assert_eq!(nice_step(56.7), 100.0);
        assert_eq!(nice_step(0.3), 0.5);
        assert_eq!(nice_step(2.0), 2.0);
        assert_eq!(nice_step(0.0), 1.0);
        assert_eq!(split_comment("a \"#b\" # c"), ("a \"#b\" ", Some("# c")));
    }
}
