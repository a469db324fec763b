//! `perfskel skeletonize TRACE_DIR -o app.skel`: reads every rank file of a trace written
//! by `perfskel record` and the traced objects (to name call sites), runs
//! `perfskel_compiler::skeletonize` (which reads each rank file as a stream, three
//! times), writes the skeleton (never over an existing file without `--force`), checks
//! it like `perfskel check` and prints the summary as text or JSON. A progress bar shows
//! on a terminal for long traces.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use perfskel_compiler::check::Options as CheckOptions;
use perfskel_compiler::compress::Algorithm;
use perfskel_compiler::skeletonize::{self, Input, Opened, Options, RankEvents, Ranks, Skeleton};
use perfskel_compiler::trace::stats::SiteKey;
use perfskel_compiler::trace::{Completion, Event, TraceError};

use crate::cmd_trace::{self, Symbols};
use crate::files::{emit, tally};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AlgorithmArg {
    /// Shortest description, outer loops first (ranks over 4 M tokens: greedy's nest).
    Exact,
    /// Inner loops first, near-linear.
    Greedy,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

#[derive(clap::Args)]
pub struct Args {
    /// Trace directory written by `perfskel record`.
    pub trace: PathBuf,
    /// The skeleton file to write (`-`: standard output, and the summary goes to
    /// standard error).
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    /// Loop-discovery algorithm.
    #[arg(long, value_enum, default_value_t = AlgorithmArg::Exact)]
    pub algorithm: AlgorithmArg,
    /// Format of the summary on standard output.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Merge message sizes within PCT percent of each other (reported).
    #[arg(long, value_name = "PCT")]
    pub merge_sizes: Option<f64>,
    /// Logicalization threshold (see `perfskel topo --threshold`).
    #[arg(long, default_value_t = perfskel_compiler::logicalize::DEFAULT_THRESHOLD)]
    pub threshold: f64,
    /// Write every call of the set-up and wrap-up phases (those outside the main loops
    /// taking under 5 % of the run); by default runs of calls of one kind there are one
    /// statement each.
    #[arg(long)]
    pub every_call: bool,
    /// Overwrite the output file if it exists.
    #[arg(long)]
    pub force: bool,
}

/// What the command produced, for `perfskel demo`.
pub struct Outcome {
    pub skeleton: Skeleton,
    pub text: String,
    pub check_errors: usize,
    pub check_warnings: usize,
}

pub fn run(args: Args) -> Result<ExitCode, String> {
    let outcome = skeletonize_dir(&args)?;
    // Write errors on standard output (a closed pipe) end the output, not the program.
    // With `-o -` the skeleton is on standard output, and the summary on standard error.
    let mut stdout: Box<dyn Write> = if to_stdout(&args.output) {
        Box::new(std::io::stderr().lock())
    } else {
        Box::new(std::io::stdout().lock())
    };
    match args.format {
        Format::Text => {
            if !to_stdout(&args.output) {
                let _ = writeln!(stdout, "wrote {}", args.output.display());
            }
            let _ = write!(stdout, "{}", outcome.skeleton.summary.to_text());
            let _ = writeln!(
                stdout,
                "check              {} error(s), {} warning(s)",
                outcome.check_errors, outcome.check_warnings
            );
        }
        Format::Json => {
            let mut value = serde_json::to_value(&outcome.skeleton.summary)
                .map_err(|e| format!("cannot write JSON: {e}"))?;
            if let Some(map) = value.as_object_mut() {
                map.insert("check_errors".into(), outcome.check_errors.into());
                map.insert("check_warnings".into(), outcome.check_warnings.into());
            }
            let json = serde_json::to_string_pretty(&value)
                .map_err(|e| format!("cannot write JSON: {e}"))?;
            let _ = writeln!(stdout, "{json}");
        }
    }
    Ok(if outcome.check_errors > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Whether the output is standard output (`-o -`).
fn to_stdout(output: &Path) -> bool {
    output == Path::new("-")
}

/// Reads the trace, writes the skeleton, checks it.
pub fn skeletonize_dir(args: &Args) -> Result<Outcome, String> {
    // A link counts as the file it stands for, even dangling: never written through;
    // a device such as /dev/null needs no --force.
    if !to_stdout(&args.output) {
        crate::files::check_new_file(&args.output, args.force)?;
    }
    // Not even with --force over the trace it reads.
    let own_input = args.output.file_name().is_some_and(|name| {
        crate::cmd_record::is_trace_file(&name.to_string_lossy())
            && args
                .output
                .parent()
                .map(|p| {
                    if p.as_os_str().is_empty() {
                        Path::new(".")
                    } else {
                        p
                    }
                })
                .and_then(|p| std::fs::canonicalize(p).ok())
                .zip(std::fs::canonicalize(&args.trace).ok())
                .is_some_and(|(parent, trace)| parent == trace)
    });
    if own_input {
        return Err(format!(
            "{} is a file of the trace {} reads: write the skeleton elsewhere",
            args.output.display(),
            args.trace.display()
        ));
    }
    if let Some(pct) = args.merge_sizes {
        if !(0.0..=100.0).contains(&pct) {
            return Err(format!(
                "--merge-sizes {pct} is not a percentage between 0 and 100"
            ));
        }
    }
    if !(0.0..=1.0).contains(&args.threshold) {
        return Err(format!(
            "--threshold {} is not between 0 and 1",
            args.threshold
        ));
    }
    let (outcome, diags) = make_skeleton(args)?;
    if to_stdout(&args.output) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(outcome.text.as_bytes());
        let _ = out.flush();
    } else {
        crate::files::write_atomic(&args.output, outcome.text.as_bytes())?;
    }
    emit(&args.output.display().to_string(), &outcome.text, &diags);
    Ok(outcome)
}

/// Reads the trace and makes the skeleton, checked (its text, summary and what `check`
/// found), writing nothing: `skeletonize_dir` writes it, `perfskel report` shows it.
pub fn make_skeleton(args: &Args) -> Result<(Outcome, Vec<perfskel_grammar::Diag>), String> {
    let dir = &args.trace;
    let symbols = Symbols::default();
    let dir_ranks;
    let otf2;
    let input = match cmd_trace::otf2_archive(dir) {
        Some(anchor) => {
            let t = crate::otf2_input::Otf2Trace::open(&anchor)?;
            if t.n_ranks() == 0 {
                return Err(format!("{}: the archive has no MPI rank", anchor.display()));
            }
            t.print_notes("perfskel skeletonize: ");
            let unknown = crate::otf2_input::unknown_mpi_regions(&t);
            if !unknown.is_empty() {
                eprintln!(
                    "perfskel skeletonize: {}: MPI routines perfskel does not know, read as compute: {}",
                    anchor.display(),
                    unknown.join(", ")
                );
            }
            otf2 = t;
            Input {
                name: otf2_skeleton_name(&otf2, &anchor),
                ranks: &otf2,
                site_name: &|key: &SiteKey| {
                    Some(match otf2.site_names.get(key) {
                        Some(name) => name.clone(),
                        None => symbols.site_name(key),
                    })
                },
                origin: format!(
                    "OTF2 archive `{}` ({} ranks)",
                    anchor
                        .parent()
                        .and_then(|p| p.file_name())
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_else(|| ".".into()),
                    otf2.n_ranks()
                ),
            }
        }
        None => {
            let n = cmd_trace::n_ranks(dir)?;
            if n == 0 {
                return Err(format!(
                    "{}: no manifest.json, no rank files and no OTF2 anchor file (traces.otf2): not a trace",
                    dir.display()
                ));
            }
            dir_ranks = DirRanks {
                dir: dir.clone(),
                n_ranks: n,
                reported: RefCell::new(BTreeSet::new()),
            };
            Input {
                name: skeleton_name(dir, n),
                ranks: &dir_ranks,
                site_name: &|key: &SiteKey| Some(symbols.site_name(key)),
                origin: origin(dir, n),
            }
        }
    };
    let options = Options {
        algorithm: match args.algorithm {
            AlgorithmArg::Exact => Algorithm::Exact,
            AlgorithmArg::Greedy => Algorithm::Greedy,
        },
        merge_sizes_pct: args.merge_sizes,
        threshold: args.threshold,
        every_call: args.every_call,
    };
    let bar = indicatif::ProgressBar::hidden();
    let mut shown = false;
    let mut progress = |p: skeletonize::Progress| {
        if !shown && p.total >= 400_000 && std::io::stderr().is_terminal() {
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            bar.set_length(p.total);
            bar.set_message("compressing");
            shown = true;
        }
        bar.set_position(p.done);
    };
    let mut skeleton = skeletonize::skeletonize(&input, &options, &mut progress);
    bar.finish_and_clear();
    let mut text = perfskel_grammar::printer::print(&skeleton.program);
    let mut diags = crate::cmd_check::check_source(&text, CheckOptions::default());
    // What `check` finds in a skeleton is rewritten, in rounds while the errors drop
    // (fixing one kind can bring the next to light: sizes made to agree let the
    // simulation run on to a deadlock of buffered sends):
    // - sends the application got through by MPI's buffering of small messages, which
    //   deadlock under `check`'s standard-mode sends: written as the library ran them;
    // - vector collectives whose ranks meet at different statements: one table per
    //   group of statements that meet;
    // - collectives of one size whose ranks meet at statements of different sizes: one
    //   size per group.
    let [unblocked, unified, sized] = fix_rounds(&mut text, &mut diags);
    if unblocked > 0 {
        // A `wait` more per send, some under the conditions of the branch it was in.
        let (program, _) = perfskel_grammar::parse(&text);
        let before = skeleton.summary.statements;
        skeleton.summary.statements = skeletonize::count_statements(&program.body.stmts);
        // The header says how many statements the skeleton has (diagnostics point
        // into the text: checked again when the count changed its length).
        let header = text.replacen(
            &format!(" -> {before} statements ("),
            &format!(" -> {} statements (", skeleton.summary.statements),
            1,
        );
        if header.len() != text.len() {
            diags = crate::cmd_check::check_source(&header, CheckOptions::default());
        }
        text = header;
        skeleton.summary.notes.push(format!(
            "{unblocked} blocking send(s) completed before their receiver posted the receive (MPI buffered them: the eager protocol; the standard calls that unsafe, and `check` reports the deadlock): each is an `isend` completed at the end of the loop iteration or program it is in"
        ));
    }
    if unified > 0 {
        skeleton.summary.notes.push(format!(
            "{unified} vector collective(s) (alltoallv, gatherv, ...) met the same call of other ranks at another statement (the ranks' streams are merged apart there): the tables of statements that meet are one, each rank's entry the mean of its entries, so the counts agree as MPI requires"
        ));
    }
    if sized > 0 {
        skeleton.summary.notes.push(format!(
            "{sized} collective(s) met the same call of other ranks at a statement of another size (sizes that follow the data, their means taken over different calls where the ranks' streams are merged apart): the statements that meet have one size, the mean of theirs, as MPI requires"
        ));
    }
    let (check_errors, check_warnings) = tally(&diags);
    // The written skeleton's compute, rank by rank, against the trace's.
    if check_errors == 0 {
        if let Some(written) = perfskel_compiler::pipeline::rank_compute_s(&text) {
            // A task farm's `while recv` workers take the tasks that come to them: only
            // their sum is the trace's.
            let mut farm = false;
            perfskel_compiler::semantics::visit(&skeleton.program.body, &mut |s| {
                farm |= matches!(s.kind, perfskel_grammar::ast::StmtKind::While(_));
            });
            let checked = skeletonize::ComputeCheck::new(
                &skeleton.traced_compute_s,
                skeleton.summary.dropped_compute_s,
                &written,
                skeleton.summary.app_time_s,
                !farm,
            );
            skeleton.summary.notes.extend(checked.note());
            skeleton.summary.compute_check = Some(checked);
        }
    }
    Ok((
        Outcome {
            skeleton,
            text,
            check_errors,
            check_warnings,
        },
        diags,
    ))
}

/// Rounds of the rewrites of what `check` finds, in all (each round rewrites what one
/// check found: `check` stops at the first mismatch, and a deadlock names one cycle).
const MAX_FIX_ROUNDS: usize = 32;

/// A rewrite of a skeleton's source for some of `check`'s errors: the new source and
/// how many statements changed, or `None` when none of the errors is its kind.
type Fix = fn(&str, &[perfskel_grammar::Diag]) -> Option<(String, usize)>;

/// The rewrites of what `check` finds in a skeleton, by the kind of error they take.
const FIXES: [Fix; 3] = [
    skeletonize::unblock_sends,
    skeletonize::unify_vector_counts,
    skeletonize::unify_collective_sizes,
];

/// Applies the first of [`FIXES`] that takes one of the errors, round after round
/// while the errors do not grow (a round may only move `check` on to the next error,
/// and fixing one kind can bring another to light); `text` and `diags` take the last
/// rewrite with fewer errors. Gives what each fix changed there.
fn fix_rounds(text: &mut String, diags: &mut Vec<perfskel_grammar::Diag>) -> [usize; 3] {
    let (mut kept, mut made) = ([0; 3], [0; 3]);
    let mut tried: Option<(String, Vec<perfskel_grammar::Diag>)> = None;
    for _ in 0..MAX_FIX_ROUNDS {
        let (current, current_diags) = tried.as_ref().map_or((&*text, &*diags), |(t, d)| (t, d));
        let Some((k, (next, n))) = FIXES
            .iter()
            .enumerate()
            .find_map(|(k, fix)| fix(current, current_diags).map(|r| (k, r)))
        else {
            break;
        };
        let next_diags = crate::cmd_check::check_source(&next, CheckOptions::default());
        if tally(&next_diags).0 > tally(current_diags).0 {
            break;
        }
        made[k] += n;
        if tally(&next_diags).0 < tally(diags).0 {
            kept = made;
            (*text, *diags) = (next, next_diags);
            tried = None;
        } else {
            tried = Some((next, next_diags));
        }
    }
    kept
}

/// Opens a trace directory's rank files one at a time, for the pass's sweeps (each reads
/// a rank record by record: no rank is ever held in memory); a rank file that cannot be
/// read is reported once.
struct DirRanks {
    dir: PathBuf,
    n_ranks: u32,
    reported: RefCell<BTreeSet<u32>>,
}

impl DirRanks {
    fn report(&self, rank: u32, e: &TraceError) {
        if self.reported.borrow_mut().insert(rank) {
            eprintln!("warning: trace: {e}");
        }
    }
}

impl Ranks for DirRanks {
    fn n_ranks(&self) -> u32 {
        self.n_ranks
    }

    fn open(&self, rank: u32) -> Opened<'_> {
        match cmd_trace::open_rank(&self.dir, rank) {
            Ok(Some(reader)) => Opened::Events(Box::new(Reported {
                reader,
                rank,
                ranks: self,
            })),
            Ok(None) => Opened::Missing,
            Err(e) => {
                self.report(rank, &e);
                Opened::Unreadable
            }
        }
    }
}

/// A rank file's reader whose errors are reported (once per rank).
struct Reported<'a> {
    reader: cmd_trace::FileReader,
    rank: u32,
    ranks: &'a DirRanks,
}

impl RankEvents for Reported<'_> {
    fn next_event(&mut self, ev: &mut Event) -> Result<bool, TraceError> {
        self.reader
            .next_event(ev)
            .inspect_err(|e| self.ranks.report(self.rank, e))
    }
    fn sites(&self) -> BTreeMap<u64, SiteKey> {
        RankEvents::sites(&self.reader)
    }
    fn comms(&self) -> BTreeMap<u64, Vec<i64>> {
        RankEvents::comms(&self.reader)
    }
    fn grids(&self) -> BTreeMap<u64, Vec<(u64, bool)>> {
        RankEvents::grids(&self.reader)
    }
    fn completion(&self) -> Completion {
        RankEvents::completion(&self.reader)
    }
    fn memory(&self) -> Option<perfskel_compiler::trace::Memory> {
        RankEvents::memory(&self.reader)
    }
    fn poll_ps(&self) -> Option<u64> {
        RankEvents::poll_ps(&self.reader)
    }
}

/// The traced executable's file name (the object of the first call site of the first
/// readable rank; for an mpi4py program the Python script, the first `.py` file among
/// the sites of its first events, without its extension), as a word; else the trace
/// directory's name.
fn skeleton_name(dir: &Path, n_ranks: u32) -> String {
    let from_object = (0..n_ranks).find_map(|rank| {
        let mut reader = cmd_trace::open_rank(dir, rank).ok().flatten()?;
        let mut ev = Event::default();
        let mut first: Option<String> = None;
        for _ in 0..64 {
            if !matches!(reader.next_event(&mut ev), Ok(true)) {
                break;
            }
            let Some(site) = usize::try_from(ev.site)
                .ok()
                .and_then(|s| s.checked_sub(1))
                .and_then(|s| reader.sites().get(s).cloned())
            else {
                continue;
            };
            let Some(path) = reader.object(site.object).map(|o| o.path.clone()) else {
                continue;
            };
            let path = Path::new(&path);
            if path.extension().is_some_and(|e| e == "py") {
                return path.file_stem().map(|n| n.to_string_lossy().into_owned());
            }
            if first.is_none() {
                first = path.file_name().map(|n| n.to_string_lossy().into_owned());
            }
        }
        first
    });
    word_name(from_object.unwrap_or_else(|| {
        dir.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "app".into())
    }))
}

/// `raw` as a word the DSL takes for a skeleton's name.
fn word_name(raw: String) -> String {
    let mut name: String = raw
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        name.insert(0, '_');
    }
    // An application called `loop` or `memory` still gets a name the DSL accepts.
    if perfskel_grammar::KEYWORDS.contains(&name.as_str()) {
        name.push_str("_app");
    }
    name
}

/// The skeleton's name for an OTF2 archive: the file name of the object of the first
/// call site among rank 0's first calls (as for a perfskel trace), else the archive's
/// directory name.
fn otf2_skeleton_name(t: &crate::otf2_input::Otf2Trace, anchor: &Path) -> String {
    let from_site = t.rank(0).ok().and_then(|mut r| {
        let mut ev = Event::default();
        for _ in 0..64 {
            if !matches!(r.next_event(&mut ev), Ok(true)) {
                break;
            }
        }
        let sites = r.sites();
        sites
            .values()
            .find(|k| k.object.starts_with('/'))
            .and_then(|k| {
                Path::new(&k.object)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
            })
    });
    let dir = anchor.parent().unwrap_or(Path::new("."));
    word_name(from_site.unwrap_or_else(|| {
        dir.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "app".into())
    }))
}

/// `trace `t-stencil` (4 ranks, openmpi)`: no absolute paths in generated text.
fn origin(dir: &Path, n: u32) -> String {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| ".".into());
    let mpi = cmd_trace::read_manifest(dir)
        .ok()
        .flatten()
        .map(|m| format!(", {}", m.mpi))
        .unwrap_or_default();
    format!("trace `{name}` ({n} ranks{mpi})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skeleton_names_are_words_and_not_keywords() {
        let base = tempfile::tempdir().expect("temp dir");
        for (dir, expected) in [
            ("memory", "memory_app"),
            ("t-stencil", "t_stencil"),
            ("2d", "_2d"),
        ] {
            let path = base.path().join(dir);
            std::fs::create_dir_all(&path).expect("trace dir");
            assert_eq!(skeleton_name(&path, 0), expected);
        }
    }
}
