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

use perfskel_grammar::ast::{Block, Stmt, StmtKind};

use crate::check::Verified;

/// What a back end needs besides the program.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// K of the target ratio 1:K that the program was scaled to.
    pub ratio: u64,
    /// The `app_time` of the unscaled skeleton, in seconds.
    pub app_time_s: f64,
    /// The skeleton file's name without directories, for comments (`stencil2d.skel`).
    pub source_name: String,
    /// The text of the original skeleton file, to cite its lines in comments.
    pub source: String,
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

/// A program's top-level statements split into its communicator declarations and the
/// rest, each in source order. Communicators are declared at the top level only (the
/// checker makes sure): generated programs make them once, before the passes over the
/// rest (`ps_pass` in `perfskel.h`, `Skeleton::pass` in Rust).
pub(crate) fn comms_and_passes(body: &Block) -> (Vec<&Stmt>, Vec<&Stmt>) {
    body.stmts
        .iter()
        .partition(|s| matches!(s.kind, StmtKind::CommDecl(_)))
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
/// perfskel-result skeleton=stencil2d backend=c ranks=4 ratio=100 skeleton_s=0.120000 predicted_s=12.000000 app_time_s=11.800000
/// ```
///
/// `ratio` is K of the target ratio 1:K; `predicted_s` is `skeleton_s × K`; `app_time_s`
/// is the `app_time` of the unscaled skeleton. Times have six decimals.
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
}

/// The word every result line starts with.
pub const RESULT_PREFIX: &str = "perfskel-result";

impl RunResult {
    /// The line a generated program prints (without the newline).
    pub fn line(&self) -> String {
        format!(
            "{RESULT_PREFIX} skeleton={} backend={} ranks={} ratio={} skeleton_s={:.6} predicted_s={:.6} app_time_s={:.6} warmup_s={:.6}",
            self.skeleton,
            self.backend,
            self.ranks,
            self.ratio,
            self.skeleton_s,
            self.predicted_s,
            self.app_time_s,
            self.warmup_s
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
                _ => {}
            }
        }
        Some(RunResult {
            skeleton: skeleton?,
            backend: backend?,
            ranks: ranks?,
            ratio: ratio?,
            skeleton_s: skeleton_s?,
            predicted_s: predicted_s?,
            app_time_s: app_time_s?,
            warmup_s,
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
            predicted_s: 12.0,
            app_time_s: 11.8,
            warmup_s: 0.004,
        };
        let line = result.line();
        assert_eq!(
            line,
            "perfskel-result skeleton=stencil2d backend=c ranks=4 ratio=100 skeleton_s=0.120000 predicted_s=12.000000 app_time_s=11.800000 warmup_s=0.004000"
        );
        // Lines of skeletons generated before the warm-up pass.
        let old = "perfskel-result skeleton=s backend=c ranks=2 ratio=1 skeleton_s=1.0 predicted_s=1.0 app_time_s=1.0";
        assert_eq!(RunResult::parse(old).map(|r| r.warmup_s), Some(0.0));
        let output = format!("warming up\n{line}\nbye\n");
        assert_eq!(RunResult::find_in(&output), Some(result));
        assert_eq!(RunResult::parse("perfskel-result skeleton=x"), None);
        assert_eq!(RunResult::parse("hello"), None);
    }
}
