//! One iteration of a run, rank by rank, as a Gantt chart: each rank's MPI calls as bars
//! coloured by kind over its compute, on one time axis, the application's iteration
//! above the skeleton's when both traces are given. `perfskel trace timeline` writes it
//! as an SVG file and `perfskel report` puts it in the page.
//!
//! Which iteration: rank 0's calls, each one token per (operation, call site), go through
//! the loop-nest discovery `skeletonize` uses (`compress::discover`). Loops of equal
//! bodies are one kind of iteration (LAMMPS's time step, in several loops of 19 between
//! re-neighbouring steps; a skeleton's loop, in its warm-up and its timed pass). The
//! iteration is the kind run most often, among those that take at least 30 % of the time
//! the longest kind takes (a set-up loop of many quick broadcasts is not it) and that do
//! not run fewer than 8 times per iteration of a loop around them (the 3 dimensions of a
//! step's halo exchange are a part of the step). Of its loops, the one that takes the
//! most time is drawn, at its middle iteration: the steady state, past the first
//! iterations' warm-up, and a skeleton's timed pass rather than its quick warm-up. The window runs from the end of the call before the
//! iteration's first call (the compute before that call is the iteration's) to the end
//! of its last, on rank 0's clock; every rank is drawn over the same wall-clock window
//! (ranks of one host share the clock; each rank file's header says when its `MPI_Init`
//! started), so that one rank's wait for another is seen as it happened. A run with no
//! repeated loop is drawn whole, from the end of `MPI_Init` to the start of
//! `MPI_Finalize`.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use perfskel_compiler::compress::{self, Algorithm, Node};
use perfskel_compiler::logicalize::trace::is_send;
use perfskel_compiler::skeletonize::RankEvents;
use perfskel_compiler::trace::format::{Op, OpClass};
use perfskel_compiler::trace::{Event, TraceError};

use crate::heatmap::{escape, human_bytes, nice_step};

/// At most this many ranks are drawn (the first ones); the caption says how many there are.
pub const MAX_ROWS: u32 = 64;
/// At most this many calls a rank are kept in the window (a longer window is drawn to
/// that call, and the caption says so).
pub const MAX_CALLS: usize = 20_000;

/// One MPI call in the window, times in ns from the window's start.
#[derive(Clone, Debug)]
pub struct Call {
    pub start: u64,
    pub end: u64,
    pub op: Op,
    /// Call-site id of the rank file.
    pub site: u64,
    /// Peer and bytes, as the tooltip shows them.
    pub detail: String,
    /// The compute before the call inside the window and the part of it the rank spent
    /// off its core.
    pub gap: u64,
    pub off_cpu: u64,
}

/// One rank over the window.
#[derive(Clone, Debug, Default)]
pub struct Row {
    pub rank: u32,
    pub calls: Vec<Call>,
    /// Call-site id → name, of the sites this row's calls name.
    pub sites: BTreeMap<u64, String>,
    /// Why the rank is not drawn (missing, unreadable).
    pub missing: Option<String>,
    /// The compute after the last call, up to the window's end, and its part off the core.
    pub tail_off_cpu: u64,
    /// Why the row stops at its last call before the window's end: more than
    /// [`MAX_CALLS`] calls in the window, the rank finished, its trace ends there.
    pub cut: Option<String>,
}

/// One trace's window.
#[derive(Clone, Debug)]
pub struct Timeline {
    /// How the window was chosen, for the caption: `iteration 150 of 300 of rank 0's
    /// main loop (5 calls a rank)`.
    pub found: String,
    pub length_ns: u64,
    pub n_ranks: u32,
    pub rows: Vec<Row>,
}

/// One rank of a trace, opened: its events, when its clock starts (ns since the Unix
/// epoch) and its call sites' names.
trait Opened {
    fn next(&mut self, ev: &mut Event) -> Result<bool, TraceError>;
    /// Wall-clock ns of the rank's time 0 (known once the first event is read).
    fn origin_ns(&self) -> u64;
    fn site_name(&self, id: u64) -> String;
}

struct DirRank<'s> {
    reader: crate::cmd_trace::FileReader,
    symbols: &'s crate::cmd_trace::Symbols,
}

impl Opened for DirRank<'_> {
    fn next(&mut self, ev: &mut Event) -> Result<bool, TraceError> {
        self.reader.next_event(ev)
    }
    fn origin_ns(&self) -> u64 {
        self.reader.header().start_unix_ns
    }
    fn site_name(&self, id: u64) -> String {
        crate::cmd_trace::site_label(&self.reader, id, self.symbols)
    }
}

struct Otf2Rank<'t, 's> {
    rank: crate::otf2_input::Otf2Rank<'t>,
    trace: &'t crate::otf2_input::Otf2Trace,
    symbols: &'s crate::cmd_trace::Symbols,
}

impl Opened for Otf2Rank<'_, '_> {
    fn next(&mut self, ev: &mut Event) -> Result<bool, TraceError> {
        self.rank.next_event(ev)
    }
    fn origin_ns(&self) -> u64 {
        self.rank.origin_ns()
    }
    fn site_name(&self, id: u64) -> String {
        match self.rank.site_key(id) {
            None => "?".into(),
            Some(key) => match self.trace.location(key) {
                Some(loc) => loc
                    .short()
                    .unwrap_or_else(|| loc.function.clone().unwrap_or_default()),
                None => self.symbols.label(key),
            },
        }
    }
}

/// The trace at `path` (a perfskel trace directory or an OTF2 archive), for reading
/// its ranks one at a time.
struct Source {
    dir: std::path::PathBuf,
    otf2: Option<crate::otf2_input::Otf2Trace>,
    n_ranks: u32,
    symbols: crate::cmd_trace::Symbols,
}

impl Source {
    fn open(path: &Path) -> Result<Source, String> {
        let (otf2, n_ranks) = crate::cmd_trace::open_trace(path)?;
        Ok(Source {
            dir: path.to_path_buf(),
            otf2,
            n_ranks,
            symbols: crate::cmd_trace::Symbols::default(),
        })
    }

    /// Rank `rank`, `Ok(None)` when its file is missing.
    fn rank(&self, rank: u32) -> Result<Option<Box<dyn Opened + '_>>, String> {
        match &self.otf2 {
            Some(t) => t
                .rank(rank)
                .map(|r| {
                    Some(Box::new(Otf2Rank {
                        rank: r,
                        trace: t,
                        symbols: &self.symbols,
                    }) as Box<dyn Opened>)
                })
                .map_err(|e| format!("{}: rank {rank}: {e}", t.anchor.display())),
            None => crate::cmd_trace::open_rank(&self.dir, rank)
                .map(|r| {
                    r.map(|reader| {
                        Box::new(DirRank {
                            reader,
                            symbols: &self.symbols,
                        }) as Box<dyn Opened>
                    })
                })
                .map_err(|e| e.to_string()),
        }
    }
}

/// The number of calls a nest stands for.
fn expanded(nest: &[Node]) -> u64 {
    nest.iter()
        .map(|n| match n {
            Node::Token(_) => 1,
            Node::Loop { count, body } => count.saturating_mul(expanded(body)),
        })
        .fold(0u64, u64::saturating_add)
}

/// The time calls `first .. first + len` of rank 0 take, the compute before the first
/// included: `ends[i]` is where call `i` ends.
fn span(ends: &[u64], first: u64, len: u64) -> u64 {
    let at = |i: u64| usize::try_from(i).ok().and_then(|i| ends.get(i)).copied();
    let before = match first.checked_sub(1) {
        None => 0,
        Some(i) => at(i).unwrap_or(0),
    };
    at(first + len.max(1) - 1)
        .unwrap_or(before)
        .saturating_sub(before)
}

/// A loop that runs fewer than this many times per iteration of the loop around it is
/// a part of that loop's iteration (the dimensions of a halo exchange), not the
/// iteration.
const RARE: u64 = 8;
/// The iteration's kind of loop takes at least this share of the time the longest kind
/// takes.
const MIN_SHARE: f64 = 0.3;
/// At most this many loops of the nest are weighed.
const MAX_LOOPS: usize = 100_000;

/// One loop of the nest, where it is met with the enclosing loops at their middle
/// iteration.
struct Instance<'n> {
    /// Its first call.
    offset: u64,
    count: u64,
    body: &'n [Node],
    /// How often the loop around it iterates in the run (0: none around it).
    parent_runs: u64,
    /// How often it iterates in the run.
    runs: u64,
}

/// Every loop of `nest` (which starts at call `base` and runs `times` times, 0 for the
/// whole run), in expansion order.
fn instances<'n>(nest: &'n [Node], base: u64, times: u64, out: &mut Vec<Instance<'n>>) {
    let mut at = base;
    for node in nest {
        let len = expanded(std::slice::from_ref(node));
        if let Node::Loop { count, body } = node {
            if out.len() >= MAX_LOOPS {
                return;
            }
            let runs = times.max(1).saturating_mul(*count);
            out.push(Instance {
                offset: at,
                count: *count,
                body,
                parent_runs: times,
                runs,
            });
            let middle = at.saturating_add((count / 2).saturating_mul(expanded(body)));
            instances(body, middle, runs, out);
        }
        at = at.saturating_add(len);
    }
}

/// Where the iteration drawn is in rank 0's calls (`ends[i]` is where its call `i`
/// ends): (first call, calls, description).
/// `total` is the run's time (end of `MPI_Init` to start of `MPI_Finalize`).
fn iteration(nest: &[Node], ends: &[u64], total: u64) -> Option<(u64, u64, String)> {
    let mut all = Vec::new();
    instances(nest, 0, 0, &mut all);
    // Loops of equal bodies are one kind of iteration, run as often as all of them, and
    // take the time of all of them (each loop's time where it is met, times how often
    // it is met).
    let mut kinds: Vec<(u64, f64)> = Vec::new();
    let mut kind_of: std::collections::HashMap<&[Node], usize> = Default::default();
    let mut kind_ids = Vec::with_capacity(all.len());
    for inst in &all {
        let k = *kind_of.entry(inst.body).or_insert_with(|| {
            kinds.push((0, 0.0));
            kinds.len() - 1
        });
        let once = span(
            ends,
            inst.offset,
            inst.count.saturating_mul(expanded(inst.body)),
        );
        kinds[k].0 = kinds[k].0.saturating_add(inst.runs);
        kinds[k].1 += once as f64 * (inst.runs / inst.count.max(1)) as f64;
        kind_ids.push(k);
    }
    let nested = |k: usize| {
        all.iter().zip(&kind_ids).any(|(inst, &kk)| {
            kk == k && inst.parent_runs != 0 && inst.parent_runs.saturating_mul(RARE) >= kinds[k].0
        })
    };
    // The kind run most often that is not a part of the iteration of a loop around it
    // and takes a good share of the time the longest such kind takes (a set-up loop of
    // many quick calls is not the iteration).
    let candidates: Vec<usize> = (0..kinds.len()).filter(|&k| !nested(k)).collect();
    let longest = candidates
        .iter()
        .map(|&k| kinds[k].1)
        .fold(0.0f64, f64::max)
        .min(total as f64);
    let best = candidates
        .into_iter()
        .filter(|&k| kinds[k].1 >= MIN_SHARE * longest)
        .max_by_key(|&k| (kinds[k].0, std::cmp::Reverse(k)))?;
    // Of its loops, the one that takes the most time; its middle iteration.
    let inst = all
        .iter()
        .zip(&kind_ids)
        .filter(|(_, &k)| k == best)
        .map(|(i, _)| i)
        .max_by_key(|i| {
            (
                span(ends, i.offset, i.count.saturating_mul(expanded(i.body))),
                std::cmp::Reverse(i.offset),
            )
        })?;
    let len = expanded(inst.body);
    let m = inst.count / 2;
    let loops = kind_ids.iter().filter(|&&k| k == best).count();
    let which = if loops == 1 {
        "rank 0's loop".to_string()
    } else {
        format!("the longest of rank 0's {loops} loops of it")
    };
    Some((
        inst.offset.saturating_add(m.saturating_mul(len)),
        len,
        format!(
            "iteration {} of {} of {which} ({len} call{} a rank, {} such iterations in all)",
            m + 1,
            inst.count,
            if len == 1 { "" } else { "s" },
            kinds[best].0
        ),
    ))
}

fn token_of(tokens: &mut BTreeMap<(u8, u64), u32>, ev: &Event) -> u32 {
    let next = tokens.len() as u32;
    *tokens.entry((ev.op.code(), ev.site)).or_insert(next)
}

/// The peer and bytes of a call, for its tooltip.
fn detail(ev: &Event) -> String {
    let mut out = String::new();
    if let Some(p) = ev.peer {
        match p {
            perfskel_compiler::trace::format::PEER_PROC_NULL => out.push_str(" · PROC_NULL"),
            perfskel_compiler::trace::format::PEER_ANY_SOURCE => out.push_str(" · any source"),
            p if is_send(ev.op) => {
                let _ = write!(out, " · to {p}");
            }
            p => {
                let _ = write!(out, " · from {p}");
            }
        }
    }
    if let Some(root) = ev.root {
        let _ = write!(out, " · root {root}");
    }
    let bytes = ev.bytes.unwrap_or(0).max(ev.rbytes.unwrap_or(0));
    if bytes > 0 {
        let _ = write!(out, " · {}", human_bytes(bytes));
    }
    if ev.polls > 1 {
        let _ = write!(out, " · {} failed polls", ev.polls);
    }
    out
}

/// The window of one iteration of the trace at `path`, every rank over it.
pub fn read(path: &Path) -> Result<Timeline, String> {
    let source = Source::open(path)?;
    let at = |e: String| format!("{}: {e}", path.display());
    // Rank 0's calls as tokens, for the loop nest.
    let mut first = source
        .rank(0)
        .map_err(at)?
        .ok_or_else(|| at("rank 0's file is missing: its loops choose the window".into()))?;
    let mut tokens = BTreeMap::new();
    let mut seq = Vec::new();
    let mut ends = Vec::new();
    let mut ev = Event::default();
    let (mut init_end, mut finalize_start) = (None, None);
    while first.next(&mut ev).map_err(|e| at(e.to_string()))? {
        match ev.op {
            Op::Init | Op::InitThread => init_end = Some(ev.end_ns),
            Op::Finalize => finalize_start = Some(ev.start_ns),
            _ => {}
        }
        seq.push(token_of(&mut tokens, &ev));
        ends.push(ev.end_ns);
    }
    let origin0 = first.origin_ns();
    drop(first);
    let nest = compress::discover(&seq, Algorithm::Exact);
    let app_ns = finalize_start
        .or(ends.last().copied())
        .unwrap_or(0)
        .saturating_sub(init_end.unwrap_or(0));
    let window = iteration(&nest, &ends, app_ns);
    let whole_run = window.is_none();

    // The window's ends on rank 0's clock: the end of the call before the iteration's
    // first (the compute before it is the iteration's) and the end of its last.
    let (from, to, found) = match window {
        Some((start, len, found)) => {
            let end_of = |i: u64| usize::try_from(i).ok().and_then(|i| ends.get(i)).copied();
            let from = start.checked_sub(1).map_or(Some(0), end_of);
            match (from, end_of(start + len - 1)) {
                (Some(f), Some(t)) if t > f => (f, t, found),
                _ => return Err(at("rank 0's iteration has no time".into())),
            }
        }
        None => {
            let from = init_end.unwrap_or(0);
            let to = finalize_start.unwrap_or(u64::MAX).max(from + 1);
            (
                from,
                to,
                "the whole run: rank 0 repeats no loop".to_string(),
            )
        }
    };
    let (abs_from, abs_to) = (origin0.saturating_add(from), origin0.saturating_add(to));
    let mut length_ns = abs_to - abs_from;

    let mut rows = Vec::new();
    for rank in 0..source.n_ranks.min(MAX_ROWS) {
        let mut row = Row {
            rank,
            ..Row::default()
        };
        match source.rank(rank) {
            Ok(None) => row.missing = Some("its file is missing".into()),
            Err(e) => row.missing = Some(e),
            Ok(Some(mut r)) => {
                if let Err(e) = window_row(&mut *r, abs_from, abs_to, &mut row) {
                    row.calls.clear();
                    row.missing = Some(e.to_string());
                }
            }
        }
        rows.push(row);
    }
    // A whole run drawn: its length is where its ranks' calls end.
    if whole_run {
        length_ns = rows
            .iter()
            .flat_map(|r| r.calls.last().map(|c| c.end))
            .max()
            .unwrap_or(1)
            .max(1);
    }
    Ok(Timeline {
        found,
        length_ns,
        n_ranks: source.n_ranks,
        rows,
    })
}

/// Reads `r` up to the window's end: its calls in the window, clipped to it.
fn window_row(r: &mut dyn Opened, from: u64, to: u64, row: &mut Row) -> Result<(), TraceError> {
    let mut ev = Event::default();
    let mut prev_end: Option<u64> = None;
    let mut origin = None;
    let mut last_op = None;
    let mut reached = false;
    while r.next(&mut ev)? {
        last_op = Some(ev.op);
        let o = *origin.get_or_insert_with(|| r.origin_ns());
        let (start, end) = (o.saturating_add(ev.start_ns), o.saturating_add(ev.end_ns));
        let gap_start = prev_end.unwrap_or(start);
        prev_end = Some(end);
        if end <= from {
            continue;
        }
        if start >= to {
            // The compute up to the window's end, and its share off the core.
            let gap = start.saturating_sub(gap_start).max(1);
            let inside = to.saturating_sub(gap_start.max(from));
            row.tail_off_cpu = ev.off_cpu_ns.min(gap).saturating_mul(inside) / gap;
            reached = true;
            break;
        }
        if row.calls.len() >= MAX_CALLS {
            row.cut = Some(format!("more than {MAX_CALLS} calls: cut here"));
            reached = true;
            break;
        }
        let gap = start.saturating_sub(gap_start);
        let inside = start.saturating_sub(gap_start.max(from));
        let off = ev
            .off_cpu_ns
            .min(gap)
            .saturating_mul(inside)
            .checked_div(gap)
            .unwrap_or(0);
        row.calls.push(Call {
            start: start.max(from) - from,
            end: end.min(to) - from,
            op: ev.op,
            site: ev.site,
            detail: detail(&ev),
            gap: inside,
            off_cpu: off,
        });
    }
    if !reached {
        row.cut = Some(match last_op {
            Some(Op::Finalize) | Some(Op::Abort) => "finished".into(),
            _ => "its trace ends here (the run was cut short)".into(),
        });
    }
    for c in &row.calls {
        row.sites
            .entry(c.site)
            .or_insert_with(|| r.site_name(c.site));
    }
    Ok(())
}

/// A duration as the axis labels it.
fn fmt_time(ns: f64, step: f64) -> String {
    let (div, unit) = if step >= 1e8 {
        (1e9, "s")
    } else if step >= 1e5 {
        (1e6, "ms")
    } else if step >= 1e2 {
        (1e3, "µs")
    } else {
        (1.0, "ns")
    };
    if ns == 0.0 {
        return format!("0 {unit}");
    }
    let v = ns / div;
    let s = step / div;
    let decimals = if s >= 1.0 || s <= 0.0 {
        0
    } else {
        (-s.log10().floor()) as usize
    };
    format!("{v:.decimals$} {unit}")
}

/// A duration in a caption or tooltip.
pub fn human_ns(ns: u64) -> String {
    let v = ns as f64;
    if ns >= 1_000_000_000 {
        format!("{:.3} s", v / 1e9)
    } else if ns >= 1_000_000 {
        format!("{:.3} ms", v / 1e6)
    } else if ns >= 1_000 {
        format!("{:.1} µs", v / 1e3)
    } else {
        format!("{ns} ns")
    }
}

/// The kinds of bar, their colour and their legend.
const COMPUTE: &str = "#b9e3b3";
const OFF_CORE: &str = "#c0c0c0";
fn colour(op: Op) -> &'static str {
    match op.class() {
        OpClass::PointToPoint => "#2f6db5",
        OpClass::Completion => "#e8922e",
        OpClass::Collective => "#b8283a",
        OpClass::OneSided => "#3c9a4c",
        OpClass::Lifecycle | OpClass::Communicator => "#5a5a5a",
    }
}
const LEGEND: [(&str, &str); 7] = [
    (COMPUTE, "compute"),
    (
        OFF_CORE,
        "off the core (waiting for a core, in the compute before a call)",
    ),
    ("#2f6db5", "send, receive"),
    ("#e8922e", "wait, test"),
    ("#b8283a", "collective"),
    ("#5a5a5a", "init, communicators"),
    ("#3c9a4c", "one-sided"),
];

const WIDTH: f64 = 1200.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 24.0;

/// The panels (application, skeleton, ...) one above the other on one time axis. `id` makes
/// the SVG's ids unique in a page with several pictures.
pub fn svg(panels: &[(&str, &Timeline)], id: &str) -> String {
    let longest = panels
        .iter()
        .map(|(_, t)| t.length_ns)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let plot_w = WIDTH - LEFT - RIGHT;
    let x = |ns: u64| LEFT + ns as f64 / longest * plot_w;
    let rows_total: usize = panels.iter().map(|(_, t)| t.rows.len()).sum();
    let row_h = (520.0 / rows_total.max(1) as f64).clamp(7.0, 26.0);
    let bar_h = (row_h * 0.72).max(5.0);
    let label_every = (10.0 / row_h).ceil().max(1.0) as usize;
    let mut body = String::new();
    let mut y = 16.0;
    let step = nice_step(longest / 8.0);
    for (title, t) in panels {
        let _ = write!(
            body,
            "<text x=\"{LEFT}\" y=\"{:.1}\" font-size=\"14\" font-weight=\"bold\">{}</text>\n<text x=\"{LEFT}\" y=\"{:.1}\" font-size=\"12\" fill=\"#444\">{}, {}{}</text>\n",
            y + 14.0,
            escape(title),
            y + 31.0,
            escape(&t.found),
            human_ns(t.length_ns),
            if t.n_ranks > t.rows.len() as u32 {
                format!("; the first {} of its {} ranks", t.rows.len(), t.n_ranks)
            } else {
                String::new()
            }
        );
        y += 42.0;
        let top = y;
        for (i, row) in t.rows.iter().enumerate() {
            let mid = y + row_h / 2.0;
            if i % label_every == 0 {
                let _ = writeln!(
                    body,
                    "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\" dominant-baseline=\"middle\">rank {}</text>",
                    LEFT - 6.0,
                    mid,
                    row.rank
                );
            }
            let top_bar = mid - bar_h / 2.0;
            if let Some(why) = &row.missing {
                let _ = writeln!(
                    body,
                    "<text x=\"{:.1}\" y=\"{mid:.1}\" font-size=\"11\" fill=\"#8a4b00\" dominant-baseline=\"middle\">not drawn: {}</text>",
                    LEFT + 4.0,
                    escape(why)
                );
                y += row_h;
                continue;
            }
            // The rank's time in the window is compute but for its calls.
            let row_end = if row.cut.is_some() {
                row.calls.last().map_or(0, |c| c.end)
            } else {
                t.length_ns
            };
            let _ = writeln!(
                body,
                "<rect x=\"{LEFT:.1}\" y=\"{top_bar:.1}\" width=\"{:.2}\" height=\"{bar_h:.1}\" fill=\"{COMPUTE}\"/>",
                x(row_end) - LEFT
            );
            for c in &row.calls {
                if c.off_cpu > 0 {
                    // Where in the gap the rank was off its core is not recorded: drawn
                    // at the gap's end.
                    let _ = writeln!(
                        body,
                        "<rect x=\"{:.2}\" y=\"{top_bar:.1}\" width=\"{:.2}\" height=\"{bar_h:.1}\" fill=\"{OFF_CORE}\"><title>rank {}: {} off the core of {} before the call</title></rect>",
                        x(c.start.saturating_sub(c.off_cpu)),
                        x(c.start) - x(c.start.saturating_sub(c.off_cpu)),
                        row.rank,
                        human_ns(c.off_cpu),
                        human_ns(c.gap)
                    );
                }
                let (x0, x1) = (x(c.start), x(c.end));
                // Calls under a pixel are drawn a pixel wide, so that they are seen.
                let w = (x1 - x0).max(1.0);
                let site = row.sites.get(&c.site).map_or("?", String::as_str);
                let _ = writeln!(
                    body,
                    "<rect x=\"{x0:.2}\" y=\"{top_bar:.1}\" width=\"{w:.2}\" height=\"{bar_h:.1}\" fill=\"{}\"><title>rank {}: {} at {} · {}{} (compute before it {})</title></rect>",
                    colour(c.op),
                    row.rank,
                    c.op.mpi_name(),
                    escape(site),
                    human_ns(c.end - c.start),
                    escape(&c.detail),
                    human_ns(c.gap)
                );
            }
            if row.tail_off_cpu > 0 && row.cut.is_none() {
                let _ = writeln!(
                    body,
                    "<rect x=\"{:.2}\" y=\"{top_bar:.1}\" width=\"{:.2}\" height=\"{bar_h:.1}\" fill=\"{OFF_CORE}\"/>",
                    x(t.length_ns.saturating_sub(row.tail_off_cpu)),
                    x(t.length_ns) - x(t.length_ns.saturating_sub(row.tail_off_cpu))
                );
            }
            if let Some(why) = &row.cut {
                let _ = writeln!(
                    body,
                    "<text x=\"{:.1}\" y=\"{mid:.1}\" font-size=\"11\" fill=\"#8a4b00\" dominant-baseline=\"middle\">… {}</text>",
                    x(row_end) + 4.0,
                    escape(why)
                );
            }
            y += row_h;
        }
        // The time axis under each panel.
        let _ = writeln!(
            body,
            "<line x1=\"{LEFT}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#333\"/>",
            y + 2.0,
            WIDTH - RIGHT,
            y + 2.0
        );
        let mut tick = 0.0;
        while tick <= longest * (1.0 + 1e-9) {
            let tx = LEFT + tick / longest * plot_w;
            let _ = writeln!(
                body,
                "<line x1=\"{tx:.1}\" y1=\"{top:.1}\" x2=\"{tx:.1}\" y2=\"{:.1}\" stroke=\"#000\" stroke-opacity=\"0.08\"/><text x=\"{tx:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">{}</text>",
                y + 6.0,
                y + 18.0,
                fmt_time(tick, step)
            );
            tick += step;
        }
        y += 34.0;
    }
    let _ = writeln!(
        body,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\">time from the iteration's start (one scale for all panels; calls shorter than a pixel are drawn a pixel wide)</text>",
        LEFT + plot_w / 2.0,
        y
    );
    // The legend: the kinds drawn, in one or two lines.
    let drawn = |fill: &str| {
        panels.iter().any(|(_, t)| {
            t.rows.iter().any(|r| {
                r.calls.iter().any(|c| {
                    colour(c.op) == fill || (fill == OFF_CORE && c.off_cpu > 0) || fill == COMPUTE
                }) || (fill == OFF_CORE && r.tail_off_cpu > 0)
            })
        })
    };
    let mut lx = LEFT;
    y += 26.0;
    for (fill, what) in LEGEND.iter().filter(|(fill, _)| drawn(fill)) {
        let w = 17.0 + 6.2 * what.chars().count() as f64 + 20.0;
        if lx + w > WIDTH - RIGHT {
            lx = LEFT;
            y += 18.0;
        }
        let _ = writeln!(
            body,
            "<rect x=\"{lx:.1}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{fill}\" stroke=\"#999\" stroke-width=\"0.5\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\">{}</text>",
            y - 10.0,
            lx + 17.0,
            y,
            escape(what)
        );
        lx += w;
    }
    let height = y + 14.0;
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"{id}\" width=\"{WIDTH}\" height=\"{height:.0}\" viewBox=\"0 0 {WIDTH} {height:.0}\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n{body}</svg>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Calls of one time unit each.
    fn uniform(n: u64) -> Vec<u64> {
        (1..=n).collect()
    }

    fn loop_of(count: u64, body: Vec<Node>) -> Node {
        Node::Loop { count, body }
    }

    #[test]
    fn the_middle_iteration_of_the_main_loop_is_drawn() {
        // init; loop 300 { a b c }; finalize
        let nest = vec![
            Node::Token(0),
            loop_of(300, vec![Node::Token(1), Node::Token(2), Node::Token(3)]),
            Node::Token(4),
        ];
        let (start, len, found) = iteration(&nest, &uniform(902), 902).expect("a loop");
        assert_eq!((start, len), (1 + 150 * 3, 3));
        assert_eq!(
            found,
            "iteration 151 of 300 of rank 0's loop (3 calls a rank, 300 such iterations in all)"
        );
    }

    #[test]
    fn a_step_repeated_between_rarer_steps_is_the_iteration_but_a_halo_loop_is_not() {
        // loop 5 { loop 19 { step: loop 3 { x y }; r }; extra step }
        let step = vec![
            loop_of(3, vec![Node::Token(1), Node::Token(2)]),
            Node::Token(3),
        ];
        let nest = vec![
            Node::Token(0),
            loop_of(5, vec![loop_of(19, step), Node::Token(5), Node::Token(6)]),
        ];
        let (start, len, found) = iteration(&nest, &uniform(700), 700).expect("a loop");
        // Outer iteration 2 (0-based) starts at 1 + 2 * (19 * 7 + 2); its step 9.
        assert_eq!(len, 7);
        assert_eq!(start, 1 + 2 * 135 + 9 * 7);
        assert!(
            found.starts_with("iteration 10 of 19 of rank 0's loop (7 calls"),
            "{found}"
        );
        assert!(found.ends_with("95 such iterations in all)"), "{found}");
    }

    #[test]
    fn a_timed_pass_is_drawn_rather_than_its_warm_up() {
        // A warm-up loop of 20 quick iterations, then the timed loop of 20: one kind of
        // loop, and the second takes the time.
        let body = || vec![Node::Token(1), Node::Token(2)];
        let nest = vec![loop_of(20, body()), Node::Token(3), loop_of(20, body())];
        let mut ends = Vec::new();
        let mut t = 0;
        for i in 0..81u64 {
            t += if i > 40 { 1000 } else { 1 };
            ends.push(t);
        }
        let (start, len, found) = iteration(&nest, &ends, t).expect("a loop");
        assert_eq!((start, len), (41 + 10 * 2, 2));
        assert!(
            found.contains("of the longest of rank 0's 2 loops of it"),
            "{found}"
        );
    }

    #[test]
    fn a_set_up_loop_of_many_quick_calls_is_not_the_iteration() {
        // loop 1000 { bcast } of 1 unit each, then loop 100 { step } of 3 calls and
        // 100 units each.
        let nest = vec![
            loop_of(1000, vec![Node::Token(1)]),
            loop_of(100, vec![Node::Token(2), Node::Token(3), Node::Token(4)]),
        ];
        let mut ends: Vec<u64> = (1..=1000).collect();
        for i in 0..300u64 {
            ends.push(1000 + (i + 1) * 100);
        }
        let (start, len, _) = iteration(&nest, &ends, 31_000).expect("a loop");
        assert_eq!((start, len), (1000 + 50 * 3, 3));
    }

    #[test]
    fn no_loop_no_iteration() {
        assert_eq!(
            iteration(&[Node::Token(0), Node::Token(1)], &uniform(2), 2),
            None
        );
    }

    #[test]
    fn time_labels_tell_ticks_apart() {
        assert_eq!(fmt_time(2_500_000.0, 500_000.0), "2.5 ms");
        assert_eq!(fmt_time(20_000.0, 10_000.0), "20 µs");
        assert_eq!(human_ns(1_234_567), "1.235 ms");
    }
}
