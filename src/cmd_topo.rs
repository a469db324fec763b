//! `perfskel topo`: reads a communication matrix file (CSV or JSON, formats documented in
//! `perfskel_compiler::logicalize::matrix`) or a trace directory written by
//! `perfskel record` (rank files read here, matrix built by
//! `perfskel_compiler::logicalize::trace`), runs logicalization, prints the report as
//! text or JSON and optionally draws the matrix as an SVG heat map. Missing, incomplete
//! and unreadable ranks of a trace are reported as warnings (and on stderr).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::heatmap::{self, AxisOrder, Cells};
use perfskel_compiler::logicalize::trace::TraceMatrix;
use perfskel_compiler::logicalize::{
    logicalize, CommMatrix, Declared, Logicalization, MatrixError, Options, DEFAULT_THRESHOLD,
};
use perfskel_compiler::skeletonize::RankEvents;
use perfskel_compiler::trace::{Completion, Event};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

#[derive(clap::Args)]
pub struct Args {
    /// The communication matrix: `.csv` (lines `src,dst,messages,bytes[,time_s]`) or
    /// `.json`; any other extension is read as JSON when it starts with `{`. A directory
    /// is read as a trace written by `perfskel record` (sends counted at the sender,
    /// collectives apart).
    pub matrix: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Rank pairs carrying less than this fraction of the heaviest pair, in messages,
    /// bytes and time alike, are set aside (reported, not matched).
    #[arg(long, default_value_t = DEFAULT_THRESHOLD)]
    pub threshold: f64,
    /// Draw the matrix (bytes per rank pair, log scale, with its colour bar; each
    /// cell's values as a tooltip) as an SVG heat map.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Write the matrix's values as CSV (`src,dst,messages,bytes,time_s`, then the
    /// collectives), the form `perfskel topo` reads.
    #[arg(long, value_name = "FILE.csv")]
    pub export: Option<PathBuf>,
    /// Print every coordinate and every rejected candidate.
    #[arg(long)]
    pub verbose: bool,
    /// Overwrite the plot and export files if they exist.
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: Args) -> Result<ExitCode, String> {
    if !(0.0..=1.0).contains(&args.threshold) {
        return Err(format!(
            "--threshold {} is not between 0 and 1",
            args.threshold
        ));
    }
    for path in args.plot.iter().chain(&args.export) {
        crate::files::check_new_file(path, args.force)?;
    }
    let is_otf2_anchor =
        args.matrix.is_file() && crate::otf2_input::anchor_of(&args.matrix).is_some();
    let (matrix, trace_warnings, whole, grid) = if args.matrix.is_dir() || is_otf2_anchor {
        read_trace(&args.matrix)?
    } else {
        let text = std::fs::read_to_string(&args.matrix)
            .map_err(|e| format!("cannot read {}: {e}", args.matrix.display()))?;
        let matrix =
            parse(&args.matrix, &text).map_err(|e| format!("{}: {e}", args.matrix.display()))?;
        (matrix, Vec::new(), true, None)
    };
    let mut report = logicalize(
        &matrix,
        &Options {
            threshold: args.threshold,
        },
    );
    // What the trace lacks comes first: it qualifies everything else.
    report.warnings.splice(0..0, trace_warnings.iter().cloned());
    // The application's own grid names the topology, as in the skeleton.
    report.declared = grid.and_then(|g| {
        let topology = perfskel_compiler::skeletonize::declared_topology(&g, matrix.n_ranks)?;
        Some(Declared {
            topology: perfskel_grammar::printer::topology(&topology),
            dims: g.iter().map(|(d, _)| *d).collect(),
            periodic: g.iter().map(|(_, p)| *p).collect(),
        })
    });
    match args.format {
        Format::Text => print!("{}", report.to_text(args.verbose)),
        Format::Json => {
            let json = serde_json::to_string_pretty(&report)
                .map_err(|e| format!("cannot write JSON: {e}"))?;
            println!("{json}");
        }
    }
    if let Some(path) = &args.plot {
        let order = match &report.declared {
            Some(declared) => declared_order(&declared.topology, report.n_ranks),
            None => logical_order(&report),
        };
        let svg = plot_heat_map(&matrix, &order);
        crate::files::write_new_file(path, svg.as_bytes(), args.force)?;
    }
    if let Some(path) = &args.export {
        crate::files::write_new_file(path, matrix.to_csv().as_bytes(), args.force)?;
    }
    for warning in &trace_warnings {
        eprintln!("warning: {warning}");
    }
    // As `perfskel trace stats`: a rank without events is a failure, a rank cut short is not.
    Ok(if whole {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "error: rank files are missing or unreadable (above): the matrix and the topology are of the other ranks only"
        );
        ExitCode::from(1)
    })
}

/// What [`read_trace`] gives: the matrix, the warnings about missing, incomplete and
/// unreadable ranks, whether every rank file was there and readable, and the grid the
/// application declared over the world (`MPI_Cart_create` in its order).
pub(crate) type TraceRead = (CommMatrix, Vec<String>, bool, Option<Vec<(u64, bool)>>);

/// Reads every rank of a trace directory and builds its matrix.
pub(crate) fn read_trace(dir: &Path) -> Result<TraceRead, String> {
    // An OTF2 archive, or a perfskel trace directory.
    let (otf2, n) = crate::cmd_trace::open_trace(dir)?;
    // Streamed a rank at a time, one event in memory: each rank's traffic gathers in a
    // matrix of its own (its partners only) and joins the whole one when the rank file
    // has read through, so an unreadable rank adds nothing, as one that is missing.
    let at = |e: MatrixError| format!("{}: {e}", dir.display());
    let mut built = TraceMatrix {
        matrix: CommMatrix::new(n).map_err(at)?,
        ..TraceMatrix::default()
    };
    let mut errors = Vec::new();
    let mut ev = Event::default();
    let mut grid = None;
    for rank in 0..n {
        let opened: Result<Option<Box<dyn RankEvents + '_>>, String> = match &otf2 {
            Some(t) => t
                .rank(rank)
                .map(|r| Some(Box::new(r) as Box<dyn RankEvents>))
                .map_err(|e| format!("{}: rank {rank}: {e}", t.anchor.display())),
            None => crate::cmd_trace::open_rank(dir, rank)
                .map(|r| r.map(|r| Box::new(r) as Box<dyn RankEvents>))
                .map_err(|e| e.to_string()),
        };
        let mut reader = match opened {
            Ok(Some(r)) => r,
            Ok(None) => {
                built.missing_ranks.push(rank);
                continue;
            }
            Err(e) => {
                errors.push(format!("trace: {e}"));
                built.unreadable_ranks.push(rank);
                continue;
            }
        };
        let mut own = TraceMatrix {
            matrix: CommMatrix::new(n).map_err(at)?,
            ..TraceMatrix::default()
        };
        let read = loop {
            match reader.next_event(&mut ev) {
                Ok(true) => own.add_event(rank, &ev).map_err(at)?,
                Ok(false) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        if let Err(e) = read {
            errors.push(format!("trace: {e}"));
            built.unreadable_ranks.push(rank);
            continue;
        }
        if !matches!(reader.completion(), Completion::Complete { .. }) {
            built.incomplete_ranks.push(rank);
        }
        if grid.is_none() {
            // The first grid over the whole world, as `skeletonize` takes it.
            let world: Vec<i64> = (0..i64::from(n)).collect();
            let members = reader.comms();
            grid = reader
                .grids()
                .into_iter()
                .find(|(id, _)| members.get(id) == Some(&world))
                .map(|(_, g)| g);
        }
        for (&(src, dst), traffic) in &own.matrix.p2p {
            built.matrix.add_p2p(src, dst, *traffic).map_err(at)?;
        }
        for (name, traffic) in &own.matrix.collectives {
            built.matrix.add_collective(name, *traffic);
        }
        built.proc_null_sends += own.proc_null_sends;
        built.bad_peer_sends += own.bad_peer_sends;
    }
    let mut warnings = built.warnings();
    warnings.extend(errors);
    let whole = built.missing_ranks.is_empty() && built.unreadable_ranks.is_empty();
    Ok((built.matrix, warnings, whole, grid))
}

fn parse(path: &Path, text: &str) -> Result<CommMatrix, String> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let json = ext == "json" || (ext != "csv" && text.trim_start().starts_with('{'));
    let result = if json {
        CommMatrix::from_json(text)
    } else {
        CommMatrix::from_csv(text)
    };
    result.map_err(|e| e.to_string())
}

/// Axis order of the heat map of an application that declared its grid: its own
/// numbering (`MPI_Cart_create` over the world numbers ranks row-major).
pub(crate) fn declared_order(topology: &str, n_ranks: u32) -> AxisOrder {
    AxisOrder {
        label: format!("rank ({topology}, the application's own)"),
        ..AxisOrder::identity(n_ranks)
    }
}

/// Axis order of the heat map: ranks of the dominant pattern sorted by coordinates (its
/// canonical numbering), then the others, so that a permuted stencil shows as bands.
pub(crate) fn logical_order(report: &Logicalization) -> AxisOrder {
    let n = report.n_ranks;
    let Some(pattern) = report.patterns.first() else {
        return AxisOrder::identity(n);
    };
    let mut by_coords: Vec<(&Vec<u32>, u32)> =
        pattern.coords.iter().map(|(r, c)| (c, *r)).collect();
    by_coords.sort();
    let mut order: Vec<u32> = by_coords.into_iter().map(|(_, r)| r).collect();
    order.extend((0..n).filter(|r| !pattern.coords.contains_key(r)));
    let mut position = vec![0; n as usize];
    for (idx, rank) in order.iter().enumerate() {
        if let Some(slot) = position.get_mut(*rank as usize) {
            *slot = idx as u32;
        }
    }
    AxisOrder {
        label: format!("rank in {} order", pattern.name),
        position,
    }
}

/// Draws bytes per (sender, receiver) on a log colour scale with its colour bar; only
/// non-empty cells are drawn, so a sparse 4096-rank matrix stays a small file.
fn plot_heat_map(matrix: &CommMatrix, order: &AxisOrder) -> String {
    let cells = Cells::new(matrix, order);
    heatmap::svg(
        &cells,
        &format!("point-to-point bytes sent, {} ranks", cells.n),
        cells.max_bytes(),
    )
}
