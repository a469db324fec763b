//! `perfskel demo`: the main job. It checks, formats and summarizes the bundled example
//! skeletons, then runs the trace pipeline on a bundled application: builds
//! `examples/apps/stencil.c` with `mpicc`, records it at 2 ranks with `perfskel record --runs 3`
//! under `mpirun`, skeletonizes the trace and checks the result, printing what each step
//! gives. Later stages of the pipeline join it as they land.

use std::fmt::Write;
use std::process::ExitCode;

use perfskel_compiler::check::{check, Info, Options};
use perfskel_grammar::ast::Program;
use perfskel_grammar::printer;

use crate::bundled::SKELETONS;
use crate::files::{emit, tally};

#[derive(clap::Args)]
pub struct Args {
    /// Only this example (file name with or without `.skel`).
    #[arg(long)]
    example: Option<String>,
    /// Skip the record → skeletonize → check run of the bundled application (for
    /// machines without MPI).
    #[arg(long)]
    skip_record: bool,
}

pub fn run(args: Args) -> Result<ExitCode, String> {
    let chosen: Vec<&(&str, &str)> = SKELETONS
        .iter()
        .filter(|(name, _)| {
            args.example
                .as_deref()
                .is_none_or(|want| *name == want || name.trim_end_matches(".skel") == want)
        })
        .collect();
    if chosen.is_empty() {
        let names: Vec<&str> = SKELETONS
            .iter()
            .map(|(n, _)| n.trim_end_matches(".skel"))
            .collect();
        return Err(format!(
            "no bundled example of that name; the examples are {}",
            names.join(", ")
        ));
    }
    println!(
        "perfskel demo: check, format and summarize {} bundled skeletons\n",
        chosen.len()
    );
    let mut rows = Vec::new();
    let mut failed = false;
    for (name, source) in chosen {
        let (program, mut diags) = perfskel_grammar::parse(source);
        let mut info = None;
        if !diags.iter().any(perfskel_grammar::Diag::is_error) {
            let checked = check(&program, source, Options::default());
            diags.extend(checked.diags);
            info = checked.info;
        }
        emit(name, source, &diags);
        let (errors, warnings) = tally(&diags);
        let canonical = errors == 0 && printer::print(&program) == *source;
        failed |= errors > 0 || !canonical;
        rows.push(summary_row(
            name,
            &program,
            info.as_ref(),
            errors,
            warnings,
            canonical,
        ));
    }
    print!("{}", table(&rows));
    println!(
        "\nper rank: mean over ranks of what one run of the skeleton does; compute = share of app_time spent in compute spans"
    );
    if !args.skip_record {
        failed |= !crate::demo_pipeline::run()?;
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

struct Row {
    cells: Vec<String>,
}

fn summary_row(
    name: &str,
    program: &Program,
    info: Option<&Info>,
    errors: usize,
    warnings: usize,
    canonical: bool,
) -> Row {
    let status = match (errors, warnings) {
        (0, 0) => "ok".to_string(),
        (0, w) => format!("{w} warning(s)"),
        (e, _) => format!("{e} error(s)"),
    };
    let mut cells = vec![
        name.trim_end_matches(".skel").to_string(),
        program.ranks.value.to_string(),
        printer::topology(&program.topology.value),
        format!("{:.3} s", program.app_time.value.seconds()),
        count_statements(&program.body).to_string(),
        status,
        if canonical { "yes" } else { "no" }.to_string(),
    ];
    match info {
        Some(info) if !info.ranks().is_empty() => {
            let n = info.ranks().len() as f64;
            let mean = |f: &dyn Fn(&perfskel_compiler::check::RankStats) -> f64| {
                info.ranks().iter().map(f).sum::<f64>() / n
            };
            let compute = mean(&|r| r.compute_seconds);
            let app = program.app_time.value.seconds();
            cells.push(format!("{:.1}", mean(&|r| r.messages_sent as f64)));
            cells.push(human_bytes(mean(&|r| r.bytes_sent as f64)));
            cells.push(format!("{:.1}", mean(&|r| r.collectives as f64)));
            cells.push(format!("{:.3} s", compute));
            cells.push(if app > 0.0 {
                format!("{:.1}%", 100.0 * compute / app)
            } else {
                "-".into()
            });
        }
        _ => cells.extend(std::iter::repeat_n("-".to_string(), 5)),
    }
    Row { cells }
}

fn count_statements(block: &perfskel_grammar::ast::Block) -> usize {
    use perfskel_grammar::ast::{Else, StmtKind};
    block
        .stmts
        .iter()
        .map(|s| {
            1 + match &s.kind {
                StmtKind::Loop(l) => count_statements(&l.body),
                StmtKind::If(i) => {
                    let mut n = count_statements(&i.then_block);
                    let mut next = &i.else_branch;
                    while let Some(e) = next {
                        match e {
                            Else::Block(b) => {
                                n += count_statements(b);
                                next = &None;
                            }
                            Else::If(inner) => {
                                n += count_statements(&inner.then_block);
                                next = &inner.else_branch;
                            }
                        }
                    }
                    n
                }
                _ => 0,
            }
        })
        .sum()
}

fn human_bytes(bytes: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

fn table(rows: &[Row]) -> String {
    let header = [
        "example",
        "ranks",
        "topology",
        "app_time",
        "stmts",
        "check",
        "canonical",
        "msgs/rank",
        "sent/rank",
        "colls/rank",
        "compute/rank",
        "compute",
    ];
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(&row.cells) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = String::new();
    let line = |cells: &[&str], out: &mut String| {
        let parts: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| {
                if i == 0 || i == 2 || i == 5 {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        let _ = writeln!(out, "{}", parts.join("  ").trim_end());
    };
    line(&header, &mut out);
    for row in rows {
        let cells: Vec<&str> = row.cells.iter().map(String::as_str).collect();
        line(&cells, &mut out);
    }
    out
}
