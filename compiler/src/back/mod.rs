//! Back ends: a checked (and usually scaled) skeleton → the files of a program that runs
//! it. Back ends only read the IR; they take a [`Verified`] program, which only the
//! checker makes, so unchecked IR cannot reach them.
//!
//! Every generated program times itself between a barrier after set-up and one before
//! finalize, and rank 0 prints one [`RunResult`] line (see [`RunResult::line`]) that
//! `perfskel run` and `perfskel validate` read back.
//!
//! [`emit`] dispatches to a back end; names in generated code go through the shared
//! [`namer`] so that skeleton names never collide with a target language's keywords.

pub mod c;
pub mod namer;

pub mod rust;

use std::fmt;

use perfskel_grammar::ast::{Block, Program, Stmt, StmtKind};

use crate::check::Verified;

/// What a back end needs besides the program.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// K of the target ratio 1:K that the program was scaled to.
    pub ratio: u64,
    /// The ratio the scaled program reaches (the model's time of the unscaled skeleton
    /// over that of the scaled one; K when the target was hit, 1 at 1:1), to four
    /// decimals: the program's time times this is the prediction.
    pub ratio_reached: f64,
    /// The communication statements with a ratio of their own (by the byte offset where
    /// each starts in the source; see `scale::Scaled::own_ratios`), to four decimals:
    /// the program times them in a measuring pass without compute.
    pub own_ratios: std::collections::BTreeMap<u32, f64>,
    /// What the rest of the program's time is multiplied by where it measured those
    /// statements (`scale::Scaled::rest_ratio`), to four decimals.
    pub rest_ratio: f64,
    /// The loops whose first iteration the program times apart, a pipeline's fill (by
    /// the byte offset where each starts in the source; see `scale::Scaled::fill_loops`).
    pub fill_loops: std::collections::BTreeSet<u32>,
    /// The loops a measuring pass under SimGrid's SMPI leaves out (by the byte offset
    /// where each starts in the source; see [`unmeasured_loops`]): loops that hold
    /// none of the statements it times, whose communication simulated again would only
    /// make the simulation longer. Real MPI runs every loop in that pass.
    pub measure_skips: std::collections::BTreeSet<u32>,
    /// The `app_time` of the unscaled skeleton, in seconds.
    pub app_time_s: f64,
    /// The skeleton file's name without directories, for comments (`stencil2d.skel`).
    pub source_name: String,
    /// The text of the original skeleton file, to cite its lines in comments.
    pub source: String,
    /// What the Slurm batch script asks for.
    pub job: JobPolicy,
}

/// The Slurm batch script's requests (`job.slurm`, the same for every back end): what a
/// site needs (partition, account, a time limit, a node to itself, srun's MPI plugin)
/// and how many runs to time (their spread is the machine's noise). Every value is
/// checked before it goes into the script: a script runs as the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobPolicy {
    pub partition: Option<String>,
    pub account: Option<String>,
    /// Slurm's time format (`30`, `1:30:00`, `2-00:00:00`); `None`: 20 times the runs'
    /// target time, at least 5 minutes.
    pub time: Option<String>,
    pub exclusive: bool,
    /// `srun --mpi=PLUGIN` (`pmix`, `pmi2`); `None`: the site's default.
    pub mpi: Option<String>,
    /// Runs of the skeleton in the job; `PERFSKEL_RUNS` overrides it at submission.
    pub runs: u32,
}

impl Default for JobPolicy {
    fn default() -> Self {
        JobPolicy {
            partition: None,
            account: None,
            time: None,
            exclusive: false,
            mpi: None,
            runs: 3,
        }
    }
}

impl JobPolicy {
    /// Whether every value can go into a batch script as it is.
    pub fn check(&self) -> Result<(), String> {
        let name_ok = |v: &str| {
            !v.is_empty()
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-.,".contains(c))
        };
        for (flag, value) in [
            ("--partition", &self.partition),
            ("--account", &self.account),
            ("--srun-mpi", &self.mpi),
        ] {
            if let Some(v) = value.as_deref().filter(|v| !name_ok(v)) {
                return Err(format!(
                    "{flag} `{v}`: a Slurm name is letters, digits and `_-.,` only"
                ));
            }
        }
        if let Some(t) = self.time.as_deref().filter(|t| !slurm_time_ok(t)) {
            return Err(format!(
                "--time `{t}` is not a Slurm time (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS)"
            ));
        }
        if !(1..=1000).contains(&self.runs) {
            return Err(format!("--job-runs {}: give 1 to 1000", self.runs));
        }
        Ok(())
    }
}

/// Slurm's time formats: `MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS`.
fn slurm_time_ok(t: &str) -> bool {
    let digits = |p: &str| !p.is_empty() && p.len() <= 4 && p.bytes().all(|b| b.is_ascii_digit());
    let (days, rest) = match t.split_once('-') {
        Some((d, rest)) => (Some(d), rest),
        None => (None, t),
    };
    let parts: Vec<&str> = rest.split(':').collect();
    if !parts.iter().all(|p| digits(p)) || days.is_some_and(|d| !digits(d)) {
        return false;
    }
    // With or without days, one to three fields.
    (1..=3).contains(&parts.len())
}

impl Options {
    /// The 1-based line of the original source a byte offset falls on.
    pub fn line_of(&self, offset: u32) -> usize {
        let offset = (offset as usize).min(self.source.len());
        self.source.as_bytes()[..offset]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }
}

/// Emits the files of a verified program for `backend` (usually the scaled skeleton,
/// verified again after scaling).
pub fn emit(
    verified: &Verified,
    backend: Backend,
    options: &Options,
) -> Result<Vec<GeneratedFile>, String> {
    match backend {
        Backend::C => Ok(c::emit(verified, options)),
        Backend::Rust => Ok(rust::emit(verified, options)),
    }
}

/// The Slurm batch script of a generated program, the same for every back end
/// (`back_end` names it in the comment). Its time limit is 20 times the time the
/// skeleton should run (set-up, the warm-up pass and a slower machine fit in it),
/// rounded up to whole minutes, at least 5 minutes and at most 7 days.
pub(crate) fn job_slurm(program: &Program, options: &Options, back_end: &str) -> String {
    let name = &program.name.value.name;
    let job = &options.job;
    let target_s = options.app_time_s / options.ratio.max(1) as f64;
    let time = job.time.clone().unwrap_or_else(|| {
        // 20 times the runs' target: the warm-up pass, start-up and a slow machine.
        let minutes = (target_s * 20.0 * f64::from(job.runs.max(1)) / 60.0)
            .ceil()
            .clamp(5.0, 7.0 * 24.0 * 60.0) as u64;
        format!("{:02}:{:02}:00", minutes / 60, minutes % 60)
    });
    let mut sbatch = vec![
        format!("--job-name={name}-skeleton"),
        format!("--ntasks={}", program.ranks.value),
        format!("--time={time}"),
    ];
    sbatch.extend(job.partition.as_ref().map(|p| format!("--partition={p}")));
    sbatch.extend(job.account.as_ref().map(|a| format!("--account={a}")));
    if job.exclusive {
        sbatch.push("--exclusive".into());
    }
    sbatch.push(format!("--output={name}-skeleton-%j.out"));
    let directives: String = sbatch.iter().map(|d| format!("#SBATCH {d}\n")).collect();
    let srun = match &job.mpi {
        Some(plugin) => format!("srun --mpi={plugin} ./{}", rust::BINARY),
        None => format!("srun ./{}", rust::BINARY),
    };
    format!(
        "#!/bin/bash\n\
         # Slurm batch script for the performance skeleton `{name}` at 1:{ratio}\n\
         # (generated by perfskel from {source}, {back_end}).\n\
         # Build it first with `make` (MPICC=... selects the site's MPI), then submit it\n\
         # with `sbatch job.slurm`; sbatch's own options override the lines below\n\
         # (`sbatch -p debug -A myproject job.slurm`). Each run prints a perfskel-result\n\
         # line on rank 0; the application's predicted time is the skeleton's time x\n\
         # {reached}, and the runs' spread is the machine's noise.\n\
         {directives}\
         set -euo pipefail\n\
         runs=${{PERFSKEL_RUNS:-{runs}}}\n\
         for run in $(seq 1 \"$runs\"); do\n\
         \x20   {srun}\n\
         done\n",
        ratio = options.ratio,
        reached = options.ratio_reached,
        source = options.source_name,
        runs = job.runs,
    )
}

/// The working sets of every `compute` of `body`, ascending, each once: both back ends
/// calibrate their compute kernel for each before the timed pass.
pub(crate) fn working_sets(body: &Block) -> Vec<u64> {
    let mut sets = std::collections::BTreeSet::new();
    crate::semantics::visit(body, &mut |stmt| {
        if let StmtKind::Compute(c) = &stmt.kind {
            if let Some(bytes) = c.working_set.and_then(|w| w.value.bytes()) {
                sets.insert(bytes);
            }
        }
    });
    sets.into_iter().collect()
}

/// A program's top-level statements split into its communicator declarations and the
/// rest, each in source order. Communicators are declared at the top level only (the
/// checker makes sure): generated programs make them once, before the passes over the
/// rest (`ps_pass` in `perfskel.h`, `Skeleton::pass` in Rust).
pub(crate) fn comms_and_passes(body: &Block) -> (Vec<&Stmt>, Vec<&Stmt>) {
    body.stmts
        .iter()
        .partition(|s| matches!(s.kind, StmtKind::CommDecl(_)))
}

/// The stretches of a block's statements that a program times in its measuring pass:
/// from a communication statement with a ratio of its own (`own`, by where statements
/// start in the source) to the last one after it with the same ratio, compute between
/// them included (it does nothing in that pass), as (first index, last index, ratio).
pub(crate) fn own_stretches(
    stmts: &[&Stmt],
    own: &std::collections::BTreeMap<u32, f64>,
) -> Vec<(usize, usize, f64)> {
    let own_of = |stmt: &Stmt| stmt.pos.span().and_then(|s| own.get(&s.start)).copied();
    let mut out = Vec::new();
    let mut i = 0;
    while i < stmts.len() {
        let Some(ratio) = own_of(stmts[i]) else {
            i += 1;
            continue;
        };
        let mut end = i;
        for (j, stmt) in stmts.iter().enumerate().skip(i + 1) {
            match own_of(stmt) {
                Some(r) if r == ratio => end = j,
                None if matches!(stmt.kind, StmtKind::Compute(_)) => {}
                _ => break,
            }
        }
        out.push((i, end, ratio));
        i = end + 1;
    }
    out
}

/// The loops a simulated program's measuring pass leaves out (`Options::measure_skips`):
/// the outermost loops of `body` that hold communication but none of the statements
/// with a ratio of their own (`own`, by where statements start in the source), by where
/// each starts. A caller keeps them only where the program without those loops
/// still checks (`pipeline::measure_skips`): nothing they send is received
/// elsewhere, no collective in them is called elsewhere.
pub(crate) fn unmeasured_loops(
    body: &Block,
    own: &std::collections::BTreeMap<u32, f64>,
) -> std::collections::BTreeSet<u32> {
    fn holds_own(block: &Block, own: &std::collections::BTreeMap<u32, f64>) -> bool {
        let mut found = false;
        crate::semantics::visit(block, &mut |stmt| {
            found |= stmt.pos.span().is_some_and(|s| own.contains_key(&s.start));
        });
        found
    }
    fn walk(
        block: &Block,
        own: &std::collections::BTreeMap<u32, f64>,
        out: &mut std::collections::BTreeSet<u32>,
    ) {
        for stmt in &block.stmts {
            if let (StmtKind::Loop(l), Some(span)) = (&stmt.kind, stmt.pos.span()) {
                if !holds_own(&l.body, own) {
                    if !crate::exec::plan::is_comm_free(&l.body) {
                        out.insert(span.start);
                    }
                    continue;
                }
            }
            for inner in crate::semantics::stmt_blocks(stmt) {
                walk(inner, own, out);
            }
        }
    }
    let mut out = std::collections::BTreeSet::new();
    if !own.is_empty() {
        walk(body, own, &mut out);
    }
    out
}

/// Whether `stmt` is a loop the program times for its fill (`Options::fill_loops`).
pub(crate) fn times_fill(stmt: &Stmt, fill_loops: &std::collections::BTreeSet<u32>) -> bool {
    matches!(stmt.kind, StmtKind::Loop(_))
        && stmt
            .pos
            .span()
            .is_some_and(|s| fill_loops.contains(&s.start))
}

/// Most entries of a list written where an expression reads it; the back ends keep
/// longer lists in static memory (C: a static array before `main`; Rust: a promoted
/// constant), which the compilers would otherwise build on the stack at every
/// evaluation.
pub(crate) const INLINE_LIST: usize = 32;

/// The comment on a loop a measuring pass under SMPI leaves out (`Options::measure_skips`).
pub(crate) const SKIP_NOTE: &str =
    "holds nothing the measuring pass times: simulated under SMPI, that pass leaves it out";

/// The comment on a loop whose first iteration the program times apart.
pub(crate) const FILL_NOTE: &str =
    "a pipeline: what its first iteration takes beyond the others' mean is its fill, counted once";

/// The comment of a stretch [`own_stretches`] gives.
pub(crate) fn own_stretch_note(ratio: f64) -> String {
    if ratio == 1.0 {
        "runs as often as in the application: its time in the measuring pass counts once"
            .to_string()
    } else {
        format!(
            "each run stands for {ratio} of the application's: its time in the measuring pass counts x{ratio}"
        )
    }
}

/// The names of the loop variables of `body` (`loop N as NAME`), sorted: back ends give
/// each one variable of the target language, `v_NAME` unless that is taken.
pub(crate) fn loop_var_names(body: &Block) -> std::collections::BTreeSet<&str> {
    fn walk<'b>(block: &'b Block, out: &mut std::collections::BTreeSet<&'b str>) {
        for stmt in &block.stmts {
            if let StmtKind::Loop(l) = &stmt.kind {
                if let Some(v) = &l.var {
                    out.insert(v.name.as_str());
                }
            }
            for b in crate::semantics::stmt_blocks(stmt) {
                walk(b, out);
            }
        }
    }
    let mut out = std::collections::BTreeSet::new();
    walk(body, &mut out);
    out
}

/// The windowed request handles of `body` (`req NAME = isend ... window W`) and their
/// window (the checker makes every post of a handle give the same one).
pub(crate) fn request_windows(body: &Block) -> std::collections::BTreeMap<String, u64> {
    let mut out = std::collections::BTreeMap::new();
    crate::semantics::visit(body, &mut |stmt| {
        if let StmtKind::P2p(p) = &stmt.kind {
            if let (Some(r), Some(w)) = (&p.request, p.window) {
                out.entry(r.name.clone()).or_insert(w.value);
            }
        }
    });
    out
}

/// The back ends perfskel has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Backend {
    /// One C file, the runtime header `perfskel.h` and a Makefile; built with `mpicc`.
    C,
    /// A cargo project over rsmpi and the `perfskel-runtime` crate.
    Rust,
}

impl Backend {
    pub const ALL: [Backend; 2] = [Backend::C, Backend::Rust];

    /// The name used on the command line and in the result line.
    pub fn name(self) -> &'static str {
        match self {
            Backend::C => "c",
            Backend::Rust => "rust",
        }
    }

    pub fn from_name(name: &str) -> Option<Backend> {
        Backend::ALL.into_iter().find(|b| b.name() == name)
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One generated file: a path relative to the output directory (always `/`-separated)
/// and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedFile {
    pub path: String,
    pub contents: String,
}

/// What a generated program prints when it ends (rank 0 only), one line:
///
/// ```text
/// perfskel-result skeleton=stencil2d backend=c ranks=4 ratio=100 skeleton_s=0.120000 predicted_s=11.851600 app_time_s=11.800000 warmup_s=0.004000 reached=98.7633
/// ```
///
/// `ratio` is K of the target ratio 1:K; `reached` the ratio the scaled program reaches
/// (four decimals; lines of older programs lack it, which reached K); `predicted_s` is
/// `rest × (skeleton_s − own_s − fill_s) + own_app_s + fill_s`, where `own_s` is the
/// time the measuring pass found in the communication that loops cut less than K (of
/// the rank that spent the most there), `own_app_s` what it stands for in the
/// application, and `fill_s` the largest rank's pipeline fill (its loops' first
/// iterations' excess over the others', which the application pays once too); where no
/// measuring pass ran, `own_s` is 0 and `rest` = `reached` (lines of older programs
/// lack the four: `skeleton_s × reached`); `app_time_s` is the `app_time` of the
/// unscaled skeleton.
/// Times have six decimals. Under a simulator, `perfskel run --simgrid` prints the
/// median run's line once more with `simulation_s=W` at the end: the wall time the
/// simulation took (the other times are simulated).
#[derive(Clone, Debug, PartialEq)]
pub struct RunResult {
    pub skeleton: String,
    pub backend: String,
    pub ranks: u64,
    pub ratio: u64,
    pub skeleton_s: f64,
    pub predicted_s: f64,
    pub app_time_s: f64,
    /// How long the untimed warm-up pass took (0 without one; lines of older skeletons
    /// do not have it).
    pub warmup_s: f64,
    /// The ratio reached, by which the skeleton's time is multiplied where no measuring
    /// pass ran.
    pub reached: f64,
    /// Seconds the measuring pass found in communication with ratios of its own (0
    /// without one).
    pub own_s: f64,
    /// What those stand for in the application: each stretch's time times its ratio.
    pub own_app_s: f64,
    /// The ratio the rest of the time is multiplied by (`reached` without a measuring
    /// pass).
    pub rest: f64,
    /// The largest rank's pipeline fill in the timed pass, counted once (0 without
    /// loops timed for it).
    pub fill_s: f64,
    /// The wall time a simulated run took (`None`: a real run).
    pub simulation_s: Option<f64>,
}

/// The word every result line starts with.
pub const RESULT_PREFIX: &str = "perfskel-result";

impl RunResult {
    /// The line a generated program prints (without the newline).
    pub fn line(&self) -> String {
        let simulation = self
            .simulation_s
            .map(|w| format!(" simulation_s={w:.3}"))
            .unwrap_or_default();
        format!(
            "{RESULT_PREFIX} skeleton={} backend={} ranks={} ratio={} skeleton_s={:.6} predicted_s={:.6} app_time_s={:.6} warmup_s={:.6} reached={:.4} own_s={:.6} own_app_s={:.6} rest={:.4} fill_s={:.6}{simulation}",
            self.skeleton,
            self.backend,
            self.ranks,
            self.ratio,
            self.skeleton_s,
            self.predicted_s,
            self.app_time_s,
            self.warmup_s,
            self.reached,
            self.own_s,
            self.own_app_s,
            self.rest,
            self.fill_s
        )
    }

    /// Finds the last result line in a program's output.
    pub fn find_in(output: &str) -> Option<RunResult> {
        output.lines().rev().find_map(RunResult::parse)
    }

    /// Reads one result line; `None` if it is not one.
    pub fn parse(line: &str) -> Option<RunResult> {
        let mut words = line.split_whitespace();
        if words.next()? != RESULT_PREFIX {
            return None;
        }
        let (mut skeleton, mut backend, mut ranks, mut ratio) = (None, None, None, None);
        let (mut skeleton_s, mut predicted_s, mut app_time_s) = (None, None, None);
        let mut warmup_s = 0.0;
        let mut reached = None;
        let (mut own_s, mut own_app_s, mut rest, mut fill_s) = (0.0, 0.0, None, 0.0);
        let mut simulation_s = None;
        for word in words {
            let (key, value) = word.split_once('=')?;
            match key {
                "skeleton" => skeleton = Some(value.to_string()),
                "backend" => backend = Some(value.to_string()),
                "ranks" => ranks = value.parse().ok(),
                "ratio" => ratio = value.parse().ok(),
                "skeleton_s" => skeleton_s = value.parse().ok(),
                "predicted_s" => predicted_s = value.parse().ok(),
                "app_time_s" => app_time_s = value.parse().ok(),
                "warmup_s" => warmup_s = value.parse().ok()?,
                "reached" => reached = Some(value.parse::<f64>().ok()?),
                "own_s" => own_s = value.parse().ok()?,
                "own_app_s" => own_app_s = value.parse().ok()?,
                "fill_s" => fill_s = value.parse().ok()?,
                "rest" => rest = Some(value.parse::<f64>().ok()?),
                "simulation_s" => simulation_s = Some(value.parse::<f64>().ok()?),
                _ => {}
            }
        }
        let reached = reached.unwrap_or(ratio? as f64);
        Some(RunResult {
            skeleton: skeleton?,
            backend: backend?,
            ranks: ranks?,
            ratio: ratio?,
            skeleton_s: skeleton_s?,
            predicted_s: predicted_s?,
            app_time_s: app_time_s?,
            warmup_s,
            reached,
            own_s,
            own_app_s,
            rest: rest.unwrap_or(reached),
            fill_s,
            simulation_s,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_line_round_trips() {
        let result = RunResult {
            skeleton: "stencil2d".into(),
            backend: "c".into(),
            ranks: 4,
            ratio: 100,
            skeleton_s: 0.12,
            predicted_s: 11.8516,
            app_time_s: 11.8,
            warmup_s: 0.004,
            reached: 98.7633,
            own_s: 0.01,
            own_app_s: 0.02,
            rest: 107.6,
            fill_s: 0.003,
            simulation_s: None,
        };
        let line = result.line();
        assert_eq!(
            line,
            "perfskel-result skeleton=stencil2d backend=c ranks=4 ratio=100 skeleton_s=0.120000 predicted_s=11.851600 app_time_s=11.800000 warmup_s=0.004000 reached=98.7633 own_s=0.010000 own_app_s=0.020000 rest=107.6000 fill_s=0.003000"
        );
        // Lines of skeletons generated before the warm-up pass, before `reached`, and
        // before the measuring pass.
        let old = "perfskel-result skeleton=s backend=c ranks=2 ratio=3 skeleton_s=1.0 predicted_s=3.0 app_time_s=1.0";
        let parsed = RunResult::parse(old).expect("an old line");
        assert_eq!(
            (
                parsed.warmup_s,
                parsed.reached,
                parsed.own_s,
                parsed.rest,
                parsed.fill_s
            ),
            (0.0, 3.0, 0.0, 3.0, 0.0)
        );
        let no_own = "perfskel-result skeleton=s backend=c ranks=2 ratio=3 skeleton_s=1.0 predicted_s=3.0 app_time_s=1.0 warmup_s=0.1 reached=2.5";
        assert_eq!(RunResult::parse(no_own).map(|r| r.rest), Some(2.5));
        let output = format!("warming up\n{line}\nbye\n");
        assert_eq!(RunResult::find_in(&output), Some(result.clone()));
        // A simulated run's line, with the simulation's wall time.
        let simulated = RunResult {
            simulation_s: Some(2.5),
            ..result.clone()
        };
        assert!(simulated
            .line()
            .ends_with(" rest=107.6000 fill_s=0.003000 simulation_s=2.500"));
        assert_eq!(RunResult::find_in(&simulated.line()), Some(simulated));
        assert_eq!(RunResult::parse("perfskel-result skeleton=x"), None);
        assert_eq!(RunResult::parse("hello"), None);
    }
}
