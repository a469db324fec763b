//! `perfskel trace show|stats DIR`: takes a trace directory, gives its events in readable
//! form or mpiP-style statistics (text or JSON). Opens the rank files and the traced
//! objects (for symbolization); the reading and counting are in
//! `perfskel_compiler::trace`. Missing, incomplete and unreadable ranks are reported.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use perfskel_compiler::trace::format::{self, PEER_ANY_SOURCE, PEER_PROC_NULL};
use perfskel_compiler::trace::manifest::{Manifest, RankSummary};
use perfskel_compiler::trace::stats::{
    Shares, SiteKey, SiteRow, StatsBuilder, StatsReport, Totals,
};
use perfskel_compiler::trace::symbolize::{Location, Symbolizer};
use perfskel_compiler::trace::{
    AppSpan, Clock, Completion, Event, RankReader, TraceError, TraceErrorKind,
};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: TraceCommand,
}

#[derive(Subcommand)]
enum TraceCommand {
    /// Print the events of each rank, with call sites resolved to file:line.
    Show(ShowArgs),
    /// Per operation and per call site: count, time, bytes; MPI vs compute time.
    Stats(StatsArgs),
    /// Write the trace in another format: `--otf2 OUT` makes the OTF2 archive
    /// `OUT/traces.otf2` (Vampir, Scalasca, otf2-print read it).
    Export(ExportArgs),
    /// Draw one iteration of the run rank by rank (a Gantt chart, SVG): each rank's MPI
    /// calls coloured by kind over its compute; with `--skeleton-trace`, the skeleton's
    /// iteration below the application's on one time axis.
    Timeline(TimelineArgs),
}

#[derive(clap::Args)]
struct TimelineArgs {
    /// The trace: a directory `perfskel record` wrote, or an OTF2 archive.
    trace: PathBuf,
    /// A trace of the skeleton's run (`perfskel record -o DIR -- mpirun -np N OUT/skeleton`,
    /// OUT being what `perfskel compile` wrote and `perfskel run` built): drawn below.
    #[arg(long, value_name = "DIR")]
    skeleton_trace: Option<PathBuf>,
    /// The SVG file to write.
    #[arg(short = 'o', long = "output", value_name = "FILE.svg")]
    output: PathBuf,
    /// Overwrite the output file if it exists.
    #[arg(long)]
    force: bool,
}

#[derive(clap::Args)]
struct ExportArgs {
    /// Trace directory written by `perfskel record`.
    dir: PathBuf,
    /// Directory of the OTF2 archive to write (created; `OUT/traces.otf2` is its anchor).
    #[arg(long, value_name = "OUT")]
    otf2: PathBuf,
    /// Replace an archive already in OUT (its traces.otf2, traces.def and traces/ only).
    #[arg(long)]
    force: bool,
}

#[derive(clap::Args)]
struct ShowArgs {
    /// Trace directory written by `perfskel record`.
    dir: PathBuf,
    /// Only this rank.
    #[arg(long)]
    rank: Option<u32>,
    /// `json`: JSON Lines, one object a line as the events are read (a `rank`
    /// object, its `event`s, an `end` or `error`), for jq and scripts.
    #[arg(long, value_enum, default_value = "text")]
    format: OutputFormat,
}

#[derive(clap::Args)]
struct StatsArgs {
    /// Trace directory written by `perfskel record`.
    dir: PathBuf,
    /// Only this rank.
    #[arg(long)]
    rank: Option<u32>,
    #[arg(long, value_enum, default_value = "text")]
    format: OutputFormat,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum OutputFormat {
    Text,
    Json,
}

pub fn run(args: Args) -> Result<ExitCode, String> {
    match args.command {
        TraceCommand::Show(a) => show(a),
        TraceCommand::Stats(a) => stats(a),
        TraceCommand::Export(a) => export(a),
        TraceCommand::Timeline(a) => timeline(a),
    }
}

fn export(a: ExportArgs) -> Result<ExitCode, String> {
    let out = &a.otf2;
    let parts = ["traces.otf2", "traces.def", "traces"];
    if let Ok(meta) = std::fs::symlink_metadata(out) {
        if !meta.is_dir() {
            return Err(format!("{}: exists and is not a directory", out.display()));
        }
        let present: Vec<&str> = parts
            .iter()
            .copied()
            .filter(|p| std::fs::symlink_metadata(out.join(p)).is_ok())
            .collect();
        if !present.is_empty() && !a.force {
            return Err(format!(
                "{}: holds an OTF2 archive already ({}); --force replaces it",
                out.display(),
                present.join(", ")
            ));
        }
        for p in present {
            let path = out.join(p);
            let removed = if p == "traces" {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            removed.map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    let done = crate::otf2_export::export(&a.dir, out)?;
    println!(
        "perfskel trace export: {} ({} ranks, {} events) -> {}",
        a.dir.display(),
        done.ranks,
        done.events,
        out.join("traces.otf2").display()
    );
    Ok(ExitCode::SUCCESS)
}

pub type FileReader = RankReader<File>;

/// Opens rank `rank`'s file; `Ok(None)` when it does not exist.
pub fn open_rank(dir: &Path, rank: u32) -> Result<Option<FileReader>, TraceError> {
    let path = dir.join(format::rank_file_name(rank));
    let io = |what: String| TraceError {
        rank: Some(rank),
        offset: 0,
        kind: TraceErrorKind::Io(what),
    };
    // A FIFO or a device would block or never end: only regular files are read.
    match std::fs::metadata(&path) {
        Ok(m) if !m.is_file() => return Err(io(format!("{}: not a regular file", path.display()))),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(format!("{}: {e}", path.display()))),
    }
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(format!("{}: {e}", path.display()))),
    };
    // RankReader buffers itself: no BufReader.
    RankReader::new(file, Some(rank)).map(Some)
}

/// The manifest of a trace directory, `None` when it has none. Refused: one that is
/// not a regular file, larger than any manifest, not UTF-8 or not a manifest.
pub fn read_manifest(dir: &Path) -> Result<Option<Manifest>, String> {
    let path = dir.join(format::MANIFEST_FILE);
    let meta = match std::fs::metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    if !meta.is_file() {
        return Err(format!("{}: not a regular file", path.display()));
    }
    if meta.len() > format::MAX_MANIFEST_BYTES {
        return Err(format!(
            "{}: {} bytes, larger than any manifest",
            path.display(),
            meta.len()
        ));
    }
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut std::io::Read::take(
            File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?,
            format::MAX_MANIFEST_BYTES,
        ),
        &mut text,
    )
    .map_err(|e| format!("{}: {e}", path.display()))?;
    let manifest = Manifest::from_json(&text).map_err(|e| format!("{}: {e}", dir.display()))?;
    if manifest.n_ranks > format::MAX_RANKS {
        return Err(format!(
            "{}: field n_ranks: {} ranks, more than a trace may have ({})",
            path.display(),
            manifest.n_ranks,
            format::MAX_RANKS
        ));
    }
    Ok(Some(manifest))
}

/// The ranks whose files are in a trace directory, in order.
fn rank_files(dir: &Path) -> Result<Vec<u32>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut ranks: Vec<u32> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            name.strip_prefix("rank-")
                .and_then(|s| s.strip_suffix(".pst"))
                .and_then(|s| s.parse::<u32>().ok())
        })
        .collect();
    ranks.sort_unstable();
    Ok(ranks)
}

/// Number of ranks of a trace: from the manifest, else from the rank files' headers;
/// the manifest, the rank files' names and their headers must agree.
pub fn n_ranks(dir: &Path) -> Result<u32, String> {
    let present = rank_files(dir)?;
    // The first rank file whose header reads: what the ranks themselves say.
    let header = present.iter().find_map(|&rank| match open_rank(dir, rank) {
        Ok(Some(r)) => Some((rank, r.header().n_ranks)),
        _ => None,
    });
    let last = present.last().copied();
    match read_manifest(dir)? {
        Some(m) => {
            if let Some((rank, n)) = header {
                if n != m.n_ranks {
                    return Err(format!(
                        "{}: field n_ranks: the manifest says {} ranks, {} says {n}",
                        dir.join(format::MANIFEST_FILE).display(),
                        m.n_ranks,
                        format::rank_file_name(rank)
                    ));
                }
            }
            if let Some(last) = last.filter(|&r| r >= m.n_ranks) {
                return Err(format!(
                    "{}: field n_ranks: the manifest says {} ranks, but {} is there",
                    dir.join(format::MANIFEST_FILE).display(),
                    m.n_ranks,
                    format::rank_file_name(last)
                ));
            }
            Ok(m.n_ranks)
        }
        None => {
            let n = last
                .map_or(0, |r| r.saturating_add(1))
                .max(header.map_or(0, |(_, n)| n));
            if n > format::MAX_RANKS {
                return Err(format!(
                    "{}: rank files up to rank {}, more than a trace may have ({})",
                    dir.display(),
                    n - 1,
                    format::MAX_RANKS
                ));
            }
            Ok(n)
        }
    }
}

/// Reads every rank file through once, for the manifest.
pub fn summarize_dir(dir: &Path) -> Result<Vec<RankSummary>, String> {
    let n = n_ranks(dir)?;
    let mut out = Vec::new();
    for rank in 0..n {
        let summary = match open_rank(dir, rank) {
            Ok(None) => RankSummary::Missing,
            Err(e) => RankSummary::Unreadable(e.to_string()),
            Ok(Some(mut reader)) => {
                let mut ev = Event::default();
                let mut last_end_ns = 0;
                let mut span = AppSpan::default();
                let result = loop {
                    match reader.next_event(&mut ev) {
                        Ok(true) => {
                            last_end_ns = ev.end_ns;
                            span.see(&ev);
                        }
                        Ok(false) => break Ok(()),
                        Err(e) => break Err(e),
                    }
                };
                match (result, reader.completion()) {
                    (Ok(()), Some(completion)) => RankSummary::Read {
                        header: reader.header().clone(),
                        completion,
                        events: reader.n_events(),
                        last_end_ns,
                        app_ns: span.ns(),
                        file_bytes: std::fs::metadata(dir.join(format::rank_file_name(rank)))
                            .map(|m| m.len())
                            .unwrap_or(0),
                    },
                    (Err(e), _) => RankSummary::Unreadable(e.to_string()),
                    (Ok(()), None) => RankSummary::Unreadable("reader stopped early".into()),
                }
            }
        };
        out.push(summary);
    }
    Ok(out)
}

fn timeline(a: TimelineArgs) -> Result<ExitCode, String> {
    crate::files::check_new_file(&a.output, a.force)?;
    let app = crate::timeline::read(&a.trace)?;
    let skeleton = a
        .skeleton_trace
        .as_deref()
        .map(crate::timeline::read)
        .transpose()?;
    let mut panels = vec![("the application (traced)", &app)];
    if let Some(s) = &skeleton {
        panels.push(("the skeleton (its traced run)", s));
    }
    let svg = crate::timeline::svg(&panels, "timeline");
    crate::files::write_new_file(&a.output, svg.as_bytes(), a.force)?;
    println!(
        "wrote {}: {}, {}",
        a.output.display(),
        app.found,
        crate::timeline::human_ns(app.length_ns)
    );
    if let Some(s) = &skeleton {
        println!(
            "  the skeleton: {}, {}",
            s.found,
            crate::timeline::human_ns(s.length_ns)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Symbolizes call sites, loading each object once.
#[derive(Default)]
pub(crate) struct Symbols {
    objects: RefCell<BTreeMap<String, Option<Symbolizer>>>,
}

impl Symbols {
    pub(crate) fn locate(&self, key: &SiteKey) -> Location {
        // A Python line (mpi4py's calls): the object is the .py file, the offset its line.
        if let Some(line) =
            perfskel_compiler::trace::symbolize::python_line(&key.object, key.offset)
        {
            return Location {
                function: None,
                file: Some(key.object.clone()),
                line: Some(line),
                symbol: None,
            };
        }
        let mut objects = self.objects.borrow_mut();
        let sym = objects.entry(key.object.clone()).or_insert_with(|| {
            let bytes = std::fs::read(&key.object).ok()?;
            Symbolizer::new(&bytes).ok()
        });
        match sym {
            Some(s) => s.locate_return_address(key.offset),
            None => Location::default(),
        }
    }

    /// The name of call site `key` in a skeleton and `trace stats`
    /// ([`Location::site_name`]), its callers after it where the trace has them
    /// (`app.c:45 < app.c:90`).
    pub(crate) fn site_name(&self, key: &SiteKey) -> String {
        perfskel_compiler::trace::stats::stack_name(key, &|k| self.locate(k))
    }

    /// `trace show`'s name of call site `key` ([`located_label`]), its callers after it
    /// where the trace has them, each as its site name.
    pub(crate) fn label(&self, key: &SiteKey) -> String {
        located_label(&self.locate(key), key)
            + &perfskel_compiler::trace::stats::callers_name(key, &|k| self.locate(k))
    }
}

fn fmt_peer(p: i64) -> String {
    match p {
        PEER_PROC_NULL => "PROC_NULL".into(),
        PEER_ANY_SOURCE => "ANY_SOURCE".into(),
        p => p.to_string(),
    }
}

fn fmt_ns(ns: u64) -> String {
    if ns >= 1_000_000_000 {
        format!("{:.3} s", ns as f64 / 1e9)
    } else if ns >= 1_000_000 {
        format!("{:.3} ms", ns as f64 / 1e6)
    } else if ns >= 1_000 {
        format!("{:.3} us", ns as f64 / 1e3)
    } else {
        format!("{ns} ns")
    }
}

fn ranks_of(dir: &Path, only: Option<u32>) -> Result<Vec<u32>, String> {
    let n = n_ranks(dir)?;
    if n == 0 {
        return Err(format!("{}: no rank files and no manifest", dir.display()));
    }
    match only {
        Some(r) if r >= n => Err(format!("the trace has {n} ranks; there is no rank {r}")),
        Some(r) => Ok(vec![r]),
        None => Ok((0..n).collect()),
    }
}

/// Where `trace show` writes: the text listing or JSON Lines, a record at a time (memory
/// stays bounded whatever the trace's size).
struct Listing<W: Write> {
    out: W,
    json: bool,
}

/// One event of `trace show --format json`, its fields in the listing's order; a field
/// the call does not have is left out.
#[derive(serde::Serialize)]
struct JsonEvent<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    rank: u32,
    index: u64,
    op: &'static str,
    start_ns: u64,
    duration_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    peer: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tag: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    src: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rtag: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rbytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    root: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    comm: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    newcomm: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    req: Option<u64>,
    /// The requests a wait or test completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    done: Option<&'a Vec<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    flag: Option<u64>,
    /// A run of failed polls: the calls it stands for (its duration is their sum).
    #[serde(skip_serializing_if = "Option::is_none")]
    polls: Option<u64>,
    /// A receive posted with `MPI_ANY_SOURCE` (`peer` is the source it matched).
    #[serde(skip_serializing_if = "Option::is_none")]
    any_source: Option<bool>,
    /// Of the gap before the call, the time the rank was off its core.
    #[serde(skip_serializing_if = "Option::is_none")]
    off_cpu_ns: Option<u64>,
    site: &'a str,
}

/// A peer as JSON: a world rank, or "PROC_NULL" / "ANY_SOURCE".
fn json_peer(p: i64) -> serde_json::Value {
    match p {
        PEER_PROC_NULL | PEER_ANY_SOURCE => fmt_peer(p).into(),
        p => p.into(),
    }
}

impl<W: Write> Listing<W> {
    fn put(&mut self, s: &str) -> Result<(), String> {
        self.out.write_all(s.as_bytes()).map_err(|e| e.to_string())
    }

    /// One JSON object, a line.
    fn put_json(&mut self, v: &impl serde::Serialize) -> Result<(), String> {
        let mut line = serde_json::to_string(v).map_err(|e| e.to_string())?;
        line.push('\n');
        self.put(&line)
    }

    /// A JSON record of `kind` for `rank`, with `fields` beside them.
    fn put_record(
        &mut self,
        kind: &str,
        rank: u32,
        fields: serde_json::Value,
    ) -> Result<(), String> {
        let mut v = serde_json::json!({"type": kind, "rank": rank});
        if let (Some(m), serde_json::Value::Object(f)) = (v.as_object_mut(), fields) {
            m.extend(f);
        }
        self.put_json(&v)
    }

    /// A rank's first line: `text` for the listing, `fields` (beside `rank`) for JSON.
    fn rank(&mut self, rank: u32, text: &str, fields: serde_json::Value) -> Result<(), String> {
        if self.json {
            self.put_record("rank", rank, fields)
        } else {
            self.put(&format!("{text}\n"))
        }
    }

    fn event(&mut self, rank: u32, index: u64, ev: &Event, site: &str) -> Result<(), String> {
        if !self.json {
            return self.put(&event_line(index, ev, site));
        }
        let completion = matches!(ev.op().class(), format::OpClass::Completion);
        let record = JsonEvent {
            kind: "event",
            rank,
            index,
            op: ev.op().mpi_name(),
            start_ns: ev.start_ns,
            duration_ns: ev.duration_ns(),
            peer: ev.peer.map(json_peer),
            tag: ev.tag,
            bytes: ev.bytes,
            src: ev.src.map(json_peer),
            rtag: ev.rtag,
            rbytes: ev.rbytes,
            root: ev.root,
            comm: ev.comm,
            newcomm: ev.newcomm,
            req: ev.req,
            done: (!ev.reqs.is_empty() || completion).then_some(&ev.reqs),
            flag: ev.flag,
            polls: (ev.polls > 1).then_some(ev.polls),
            any_source: ev.any_source.then_some(true),
            off_cpu_ns: (ev.off_cpu_ns > 0).then_some(ev.off_cpu_ns),
            site,
        };
        self.put_json(&record)
    }

    /// A rank's last line: `text` for the listing, `fields` (beside `rank`) for JSON.
    fn end(&mut self, rank: u32, text: &str, fields: serde_json::Value) -> Result<(), String> {
        if self.json {
            self.put_record("end", rank, fields)
        } else {
            self.put(&format!("  end: {text}\n"))
        }
    }

    /// A rank that cannot be read, or whose events stop at an error: `label` in the
    /// listing (`MISSING`, `UNREADABLE`, `ERROR`).
    fn error(&mut self, rank: u32, label: &str, message: &str) -> Result<(), String> {
        if self.json {
            self.put_record(
                "error",
                rank,
                serde_json::json!({"kind": label.to_lowercase(), "message": message}),
            )
        } else if label == "ERROR" {
            self.put(&format!("  ERROR: {message}\n"))
        } else {
            self.put(&format!("rank {rank}: {label}: {message}\n"))
        }
    }

    fn flush(&mut self) -> Result<(), String> {
        self.out.flush().map_err(|e| e.to_string())
    }
}

fn show(args: ShowArgs) -> Result<ExitCode, String> {
    let stdout = std::io::stdout();
    let mut out = Listing {
        out: BufWriter::new(stdout.lock()),
        json: matches!(args.format, OutputFormat::Json),
    };
    if let Some(anchor) = otf2_archive(&args.dir) {
        return show_otf2(&anchor, args.rank, &mut out);
    }
    let ranks = ranks_of(&args.dir, args.rank)?;
    let symbols = Symbols::default();
    let mut failed = false;
    for rank in ranks {
        let mut reader = match open_rank(&args.dir, rank) {
            Ok(Some(r)) => r,
            Ok(None) => {
                failed = true;
                let file = format::rank_file_name(rank);
                out.error(rank, "MISSING", &format!("{file} not found"))?;
                continue;
            }
            Err(e) => {
                failed = true;
                out.error(rank, "UNREADABLE", &e.to_string())?;
                out.flush()?;
                eprintln!("error: {e}");
                continue;
            }
        };
        let h = reader.header().clone();
        out.rank(
            rank,
            &format!(
                "rank {} of {} on {} (pid {}), {}",
                h.rank, h.n_ranks, h.host, h.pid, h.mpi_library
            ),
            serde_json::json!({
                "n_ranks": h.n_ranks, "host": h.host, "pid": h.pid, "mpi": h.mpi_library,
            }),
        )?;
        let mut ev = Event::default();
        let mut site_cache: BTreeMap<u64, String> = BTreeMap::new();
        let mut index = 0u64;
        loop {
            match reader.next_event(&mut ev) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    // In the listing, where the events stop, and on standard error.
                    failed = true;
                    out.error(rank, "ERROR", &e.to_string())?;
                    out.flush()?;
                    eprintln!("error: {e}");
                    break;
                }
            }
            let site = site_cache
                .entry(ev.site)
                .or_insert_with(|| site_label(&reader, ev.site, &symbols))
                .clone();
            out.event(rank, index, &ev, &site)?;
            index += 1;
        }
        match reader.completion() {
            Some(Completion::Complete { end_ns, n_events }) => out.end(
                rank,
                &format!("complete, {n_events} events, {}", fmt_ns(end_ns)),
                serde_json::json!({"complete": true, "n_events": n_events, "end_ns": end_ns}),
            )?,
            Some(Completion::Incomplete {
                valid_bytes,
                trailing_bytes,
            }) => out.end(
                rank,
                &format!(
                    "INCOMPLETE: no end record; read {} events up to byte {valid_bytes}, ignored {trailing_bytes} trailing bytes",
                    reader.n_events()
                ),
                serde_json::json!({
                    "complete": false, "n_events": reader.n_events(),
                    "valid_bytes": valid_bytes, "trailing_bytes": trailing_bytes,
                }),
            )?,
            None => {}
        }
    }
    out.flush()?;
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// One event of `trace show`: its index, start, routine, duration and fields.
fn event_line(index: u64, ev: &Event, site: &str) -> String {
    let mut line = format!(
        "  #{index:<6} {:>12}  {:<22} {:>11}",
        fmt_ns(ev.start_ns),
        ev.op().mpi_name(),
        fmt_ns(ev.duration_ns())
    );
    // A receive posted with MPI_ANY_SOURCE shows the source it matched, marked.
    let sendrecv = matches!(ev.op(), format::Op::Sendrecv | format::Op::SendrecvReplace);
    let wild = |line: &mut String, is: bool| {
        if is && ev.any_source {
            line.push_str(" (posted ANY_SOURCE)");
        }
    };
    if let Some(p) = ev.peer {
        let _ = write!(line, " peer={}", fmt_peer(p));
        wild(&mut line, !sendrecv);
    }
    if let Some(t) = ev.tag {
        let _ = write!(line, " tag={t}");
    }
    if let Some(b) = ev.bytes {
        let _ = write!(line, " bytes={b}");
    }
    if let Some(p) = ev.src {
        let _ = write!(line, " src={}", fmt_peer(p));
        wild(&mut line, sendrecv);
    }
    if let Some(t) = ev.rtag {
        let _ = write!(line, " rtag={t}");
    }
    if let Some(b) = ev.rbytes {
        let _ = write!(line, " rbytes={b}");
    }
    if let Some(r) = ev.root {
        let _ = write!(line, " root={r}");
    }
    if let Some(c) = ev.comm {
        let _ = write!(line, " comm={c}");
    }
    if let Some(c) = ev.newcomm {
        let _ = write!(line, " newcomm={c}");
    }
    if let Some(r) = ev.req {
        let _ = write!(line, " req={r}");
    }
    if !ev.reqs.is_empty() || matches!(ev.op().class(), format::OpClass::Completion) {
        let ids: Vec<String> = ev.reqs.iter().map(u64::to_string).collect();
        let _ = write!(line, " done=[{}]", ids.join(","));
    }
    if let Some(f) = ev.flag {
        let _ = write!(line, " flag={f}");
    }
    if ev.polls > 1 {
        // A run of failed polls is one record: its duration is the calls' sum.
        let _ = write!(
            line,
            " polls={} (a run of failed calls, time summed)",
            ev.polls
        );
    }
    let _ = writeln!(line, "  @ {site}");
    line
}

pub(crate) fn site_label<R: std::io::Read>(
    reader: &RankReader<R>,
    id: u64,
    symbols: &Symbols,
) -> String {
    let Some(site) = reader.site(id) else {
        return "?".into();
    };
    if reader.object(site.object).is_none() {
        return format!("0x{:x}", site.addr);
    }
    match perfskel_compiler::trace::collect::site_key(reader, id) {
        Some(key) => symbols.label(&key),
        None => "?".into(),
    }
}

/// `trace show`'s name of call site `key` found at `loc`: `file.c:42 (function)`, else
/// [`Location::site_name`].
pub(crate) fn located_label(loc: &Location, key: &SiteKey) -> String {
    match (loc.short(), &loc.function) {
        (Some(s), Some(f)) => format!("{s} ({f})"),
        _ => loc.site_name(&key.object, key.offset),
    }
}

/// `trace show` of an OTF2 archive: each rank's calls as perfskel reads them.
fn show_otf2<W: Write>(
    anchor: &Path,
    only: Option<u32>,
    out: &mut Listing<W>,
) -> Result<ExitCode, String> {
    let t = crate::otf2_input::Otf2Trace::open(anchor)?;
    t.print_notes("note: ");
    let ranks = t.ranks(only)?;
    let symbols = Symbols::default();
    let mut failed = false;
    for rank in ranks {
        out.rank(
            rank,
            &format!(
                "rank {rank} of {} (OTF2 archive {})",
                t.n_ranks(),
                anchor.display()
            ),
            serde_json::json!({"n_ranks": t.n_ranks(), "otf2": anchor.display().to_string()}),
        )?;
        let mut events = match t.rank(rank) {
            Ok(events) => events,
            Err(e) => {
                failed = true;
                out.error(rank, "UNREADABLE", &e)?;
                eprintln!("error: {}: rank {rank}: {e}", anchor.display());
                continue;
            }
        };
        let mut ev = Event::default();
        let mut index = 0u64;
        let mut labels: BTreeMap<u64, String> = BTreeMap::new();
        while let Ok(true) =
            perfskel_compiler::skeletonize::RankEvents::next_event(&mut events, &mut ev)
        {
            let site = labels
                .entry(ev.site)
                .or_insert_with(|| match events.site_key(ev.site) {
                    None => "?".into(),
                    Some(key) => match t.location(key) {
                        Some(loc) => loc
                            .short()
                            .unwrap_or_else(|| loc.function.clone().unwrap_or_default()),
                        None => symbols.label(key),
                    },
                })
                .clone();
            out.event(rank, index, &ev, &site)?;
            index += 1;
        }
        match perfskel_compiler::skeletonize::RankEvents::completion(&events) {
            Completion::Complete { end_ns, n_events } => out.end(
                rank,
                &format!("complete, {n_events} events, {}", fmt_ns(end_ns)),
                serde_json::json!({"complete": true, "n_events": n_events, "end_ns": end_ns}),
            )?,
            Completion::Incomplete { .. } => {
                failed = true;
                out.end(
                    rank,
                    &format!("INCOMPLETE: the event file ends early; read {index} calls"),
                    serde_json::json!({"complete": false, "n_events": index}),
                )?;
            }
        }
    }
    out.flush()?;
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The OTF2 archive `dir` stands for, when it is one (its anchor file, or a directory
/// with one and no perfskel trace).
pub fn otf2_archive(dir: &Path) -> Option<PathBuf> {
    let perfskel_trace =
        dir.join(format::MANIFEST_FILE).exists() || dir.join(format::rank_file_name(0)).exists();
    crate::otf2_input::anchor_of(dir).filter(|_| !perfskel_trace)
}

/// A trace to read rank by rank: its OTF2 archive, if it is one (else a perfskel trace
/// directory), and its number of ranks, at least one.
pub(crate) fn open_trace(
    path: &Path,
) -> Result<(Option<crate::otf2_input::Otf2Trace>, u32), String> {
    let otf2 = otf2_archive(path)
        .map(|anchor| crate::otf2_input::Otf2Trace::open(&anchor))
        .transpose()?;
    let n = match &otf2 {
        Some(t) => t.n_ranks(),
        None => n_ranks(path)?,
    };
    if n == 0 {
        return Err(format!(
            "{}: no manifest.json and no rank files: not a trace directory",
            path.display()
        ));
    }
    Ok((otf2, n))
}

/// The statistics of a trace (a perfskel trace directory or an OTF2 archive), of one
/// rank or all, with the errors of ranks that could not be read.
pub fn read_stats(dir: &Path, rank: Option<u32>) -> Result<(StatsReport, Vec<String>), String> {
    let mut errors = Vec::new();
    let symbols = Symbols::default();
    let mut otf2 = None;
    let mut builder;
    if let Some(anchor) = otf2_archive(dir) {
        let t = crate::otf2_input::Otf2Trace::open(&anchor)?;
        t.print_notes("note: ");
        let ranks = t.ranks(rank)?;
        builder = StatsBuilder::new(u32::try_from(ranks.len()).unwrap_or(u32::MAX));
        errors = t.add_stats(&mut builder, &ranks);
        otf2 = Some(t);
    } else {
        let ranks = ranks_of(dir, rank)?;
        builder = StatsBuilder::new(u32::try_from(ranks.len()).unwrap_or(u32::MAX));
        for rank in ranks {
            match open_rank(dir, rank) {
                Ok(Some(mut reader)) => {
                    if let Err(e) = builder.add_rank(&mut reader) {
                        errors.push(e.to_string());
                    }
                }
                Ok(None) => builder.missing_rank(rank),
                Err(e) => errors.push(e.to_string()),
            }
        }
    }
    // A call site that is an OTF2 region is named after it.
    let report = builder.report(&|k| {
        otf2.as_ref()
            .and_then(|t: &crate::otf2_input::Otf2Trace| t.location(k))
            .unwrap_or_else(|| symbols.locate(k))
    });
    Ok((report, errors))
}

fn stats(args: StatsArgs) -> Result<ExitCode, String> {
    let (report, errors) = read_stats(&args.dir, args.rank)?;
    match args.format {
        OutputFormat::Json => {
            let mut doc = serde_json::to_value(&report).map_err(|e| e.to_string())?;
            if let Some(map) = doc.as_object_mut() {
                map.insert("errors".into(), serde_json::Value::from(errors.clone()));
            }
            println!(
                "{}",
                serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
            );
        }
        OutputFormat::Text => print!("{}", render_text(&report, &errors)),
    }
    for r in &report.missing_ranks {
        eprintln!(
            "warning: rank {r}: file {} is missing",
            format::rank_file_name(*r)
        );
    }
    for r in &report.incomplete_ranks {
        eprintln!("warning: rank {r}: trace is incomplete (the rank did not reach MPI_Finalize); read up to its last flushed event");
    }
    for e in &errors {
        eprintln!("error: {e}");
    }
    Ok(if errors.is_empty() && report.missing_ranks.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

/// A share as a table shows it: `12.3`, or `-` outside the application's span.
pub(crate) fn share(p: Option<f64>) -> String {
    p.map_or_else(|| "-".into(), |p| format!("{p:.1}"))
}

const OP_HEADER: &str =
    "  operation                      count     total ms     mean us      min us      max us    App%    MPI%         sent B";

/// One line of a per-operation table: count, total, mean, min, max time, shares and
/// bytes sent.
fn op_row(s: &mut String, o: &perfskel_compiler::trace::stats::OpRow) {
    let _ = writeln!(s, "  {:<26} {}", o.op, figures(&o.totals, &o.shares));
}

/// The figures every row of the operation and call-site tables ends with: count, total,
/// mean, min, max time, shares and bytes sent.
fn figures(t: &Totals, shares: &Shares) -> String {
    format!(
        "{:>9} {:>12.3} {:>11.3} {:>11.3} {:>11.3} {:>7} {:>7} {:>14}",
        t.count,
        ms(t.total_ns),
        us(shares.mean_ns),
        us(t.min_ns),
        us(t.max_ns),
        share(shares.app_pct),
        share(shares.mpi_pct),
        t.sent_bytes
    )
}

/// The operations outside the application's span, in one line:
/// `MPI_Init 2 calls 400.000 ms, MPI_Finalize 2 calls 0.200 ms`.
fn outside_line(ops: &[perfskel_compiler::trace::stats::OpRow]) -> Option<String> {
    let parts: Vec<String> = ops
        .iter()
        .filter(|o| is_outside(o.op))
        .map(|o| {
            format!(
                "{} {} call(s) {:.3} ms",
                o.op,
                o.totals.count,
                ms(o.totals.total_ns)
            )
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

fn is_outside(name: &str) -> bool {
    format::Op::ALL
        .iter()
        .any(|op| op.mpi_name() == name && perfskel_compiler::trace::stats::outside_app(*op))
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// Ranks up to which the text report lists every rank's call sites (mpiP does for all).
const MAX_RANK_SITE_TABLE: usize = 64;

/// A call-site table: each row's first number is `ranks` (how many ranks called it) or
/// `rank` (whose row it is).
fn site_table(s: &mut String, first: &str, rows: &[(u32, &SiteRow)]) {
    // Names of sites without debug information (`Class::method+0x1a4`) can be long.
    let width = rows
        .iter()
        .map(|(_, site)| site.site.chars().count())
        .max()
        .unwrap_or(0)
        .max(28);
    let _ = writeln!(
        s,
        "  {:<width$} {:<22} {:>5} {:>9} {:>12} {:>11} {:>11} {:>11} {:>7} {:>7} {:>14}",
        "site",
        "operation",
        first,
        "count",
        "total ms",
        "mean us",
        "min us",
        "max us",
        "App%",
        "MPI%",
        "sent B"
    );
    for (n, site) in rows {
        let _ = writeln!(
            s,
            "  {:<width$} {:<22} {n:>5} {}",
            site.site,
            site.op,
            figures(&site.totals, &site.shares)
        );
    }
}

fn render_text(r: &StatsReport, errors: &[String]) -> String {
    let mut s = String::new();
    let list = |v: &[u32]| {
        if v.is_empty() {
            "none".to_owned()
        } else {
            v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
        }
    };
    let _ = writeln!(s, "ranks: {}   events: {}", r.n_ranks, r.events);
    let _ = writeln!(
        s,
        "missing ranks: {}   incomplete ranks: {}",
        list(&r.missing_ranks),
        list(&r.incomplete_ranks)
    );
    for e in errors {
        let _ = writeln!(s, "unreadable: {e}");
    }
    let _ = write!(
        s,
        "time summed over ranks: app {:.3} ms = MPI {:.3} ms ({:.1}%) + compute {:.3} ms ({:.1}%)",
        ms(r.app_ns),
        ms(r.mpi_ns),
        pct(r.mpi_ns, r.app_ns),
        ms(r.compute_ns),
        pct(r.compute_ns, r.app_ns)
    );
    // Between MPI calls, the time the ranks waited for a core (format version 6).
    let measured = r
        .ranks
        .iter()
        .any(|k| matches!(k.clock, Some(Clock::OffCpu)));
    if measured {
        let _ = write!(
            s,
            " + off the core {:.3} ms ({:.1}%)",
            ms(r.off_cpu_ns),
            pct(r.off_cpu_ns, r.app_ns)
        );
    }
    let _ = writeln!(s);
    let unmeasured: Vec<String> = r
        .ranks
        .iter()
        .filter_map(|k| match k.clock {
            Some(Clock::Wall { errno }) => Some(format!(
                "rank {}: {}",
                k.rank,
                match i32::try_from(errno) {
                    Ok(0) => "PERFSKEL_TRACE_OFFCPU=0".to_string(),
                    Ok(e) => std::io::Error::from_raw_os_error(e).to_string(),
                    Err(_) => format!("error {errno}"),
                }
            )),
            _ => None,
        })
        .collect();
    if let Some(first) = unmeasured.first() {
        let _ = writeln!(
            s,
            "time off the core not measured on {} rank(s) ({first}): their compute holds any wait for a core",
            unmeasured.len()
        );
    }
    let _ = writeln!(
        s,
        "\nper operation, all ranks (App%: of the application's time, MPI%: of its time in MPI, both summed over ranks; bytes: sent):"
    );
    let _ = writeln!(s, "{OP_HEADER}");
    for o in r.ops.iter().filter(|o| !is_outside(o.op)) {
        op_row(&mut s, o);
    }
    if let Some(line) = outside_line(&r.ops) {
        let _ = writeln!(
            s,
            "outside the application's span (in neither App% nor MPI%): {line}"
        );
    }
    let _ = writeln!(s, "\nper call site, all ranks (most time first):");
    let sites: Vec<(u32, &SiteRow)> = r
        .sites
        .iter()
        .filter(|x| !is_outside(x.op))
        .map(|x| (x.n_ranks, x))
        .collect();
    site_table(&mut s, "ranks", &sites);
    let _ = writeln!(s, "\nper rank:");
    let _ = writeln!(
        s,
        "  {:>5} {:<10} {:>9} {:>12} {:>12} {:>12} {:>12} {:>7} {:>12} {:>11}",
        "rank",
        "status",
        "events",
        "app ms",
        "MPI ms",
        "compute ms",
        "off-core ms",
        "MPI %",
        "working set",
        "memory GB/s"
    );
    for rank in &r.ranks {
        // Working set and the probe's rate over it (trace format 3); `-` before.
        let (ws, rate) = match rank.memory {
            Some(m) => (
                format!("{:.1} MiB", m.working_set as f64 / f64::from(1u32 << 20)),
                if m.probe_rate > 0 {
                    format!("{:.1}", m.probe_rate as f64 / 1e9)
                } else {
                    "-".into()
                },
            ),
            None => ("-".into(), "-".into()),
        };
        let off = match rank.clock {
            Some(Clock::OffCpu) => format!("{:.3}", ms(rank.off_cpu_ns)),
            _ => "-".into(),
        };
        let _ = writeln!(
            s,
            "  {:>5} {:<10} {:>9} {:>12.3} {:>12.3} {:>12.3} {off:>12} {:>7.1} {ws:>12} {rate:>11}",
            rank.rank,
            if rank.complete {
                "complete"
            } else {
                "INCOMPLETE"
            },
            rank.events,
            ms(rank.app_ns),
            ms(rank.mpi_ns),
            ms(rank.compute_ns),
            pct(rank.mpi_ns, rank.app_ns)
        );
    }
    if r.ranks.len() <= MAX_RANK_SITE_TABLE {
        let _ = writeln!(
            s,
            "\nper call site and rank (App%, MPI%: of that rank's time; most time first in each rank):"
        );
        let rows: Vec<(u32, &SiteRow)> = r
            .ranks
            .iter()
            .flat_map(|k| {
                k.sites
                    .iter()
                    .filter(|x| !is_outside(x.op))
                    .map(move |x| (k.rank, x))
            })
            .collect();
        site_table(&mut s, "rank", &rows);
    } else {
        let _ = writeln!(
            s,
            "\nper call site and rank: left out for {} ranks (`--rank R` gives one rank's, `--format json` every rank's)",
            r.ranks.len()
        );
    }
    if r.ranks.len() == 1 {
        if let Some(rank) = r.ranks.first() {
            let _ = writeln!(s, "\nrank {} per operation:", rank.rank);
            let _ = writeln!(s, "{OP_HEADER}");
            for o in rank.ops.iter().filter(|o| !is_outside(o.op)) {
                op_row(&mut s, o);
            }
        }
    }
    s
}
