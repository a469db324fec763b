//! Diagnostics as data: every front-end and checker error is a [`Diag`] with spans into
//! one source file. [`Diag::to_codespan`] is the one place they become
//! codespan-reporting diagnostics, and [`render_plain`] the one text rendering; where
//! rendered diagnostics go (a terminal, in colour) the CLI decides.

use codespan_reporting::diagnostic::{Diagnostic, Label as CsLabel};

use crate::ast::{Pos, Span};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
}

/// A span with a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label {
    pub span: Span,
    pub message: String,
}

/// One problem found in a skeleton.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diag {
    pub severity: Severity,
    /// A stable kebab-case identifier (`unknown-direction`, `deadlock`, ...), used by
    /// tests and shown in brackets after the severity.
    pub code: &'static str,
    pub message: String,
    /// The offending text. `None` for problems with no source position (IR derived from
    /// a trace, or a file with nothing in it).
    pub primary: Option<Label>,
    /// What the problem conflicts with or comes from.
    pub secondary: Vec<Label>,
    /// Explanations and hints, one sentence each.
    pub notes: Vec<String>,
}

impl Diag {
    pub fn error(code: &'static str, message: impl Into<String>) -> Diag {
        Diag {
            severity: Severity::Error,
            code,
            message: message.into(),
            primary: None,
            secondary: Vec::new(),
            notes: Vec::new(),
        }
    }

    pub fn warning(code: &'static str, message: impl Into<String>) -> Diag {
        Diag {
            severity: Severity::Warning,
            ..Diag::error(code, message)
        }
    }

    /// Points at `pos` (when it has a span) with `label`.
    pub fn at(mut self, pos: Pos, label: impl Into<String>) -> Diag {
        if let Some(span) = pos.span() {
            self.primary = Some(Label {
                span,
                message: label.into(),
            });
        }
        self
    }

    pub fn at_span(self, span: Span, label: impl Into<String>) -> Diag {
        self.at(Pos::Source(span), label)
    }

    /// Adds a secondary label at `pos` when it has a span.
    pub fn with_secondary(mut self, pos: Pos, label: impl Into<String>) -> Diag {
        if let Some(span) = pos.span() {
            self.secondary.push(Label {
                span,
                message: label.into(),
            });
        }
        self
    }

    pub fn with_note(mut self, note: impl Into<String>) -> Diag {
        self.notes.push(note.into());
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// The first position in the file this diagnostic points at, for ordering.
    pub fn sort_key(&self) -> (u32, Severity, &str) {
        let start = self.primary.as_ref().map_or(u32::MAX, |l| l.span.start);
        (start, self.severity, &self.message)
    }

    /// Converts to a codespan-reporting diagnostic for the file `file_id`.
    pub fn to_codespan<F: Copy>(&self, file_id: F) -> Diagnostic<F> {
        let base = match self.severity {
            Severity::Error => Diagnostic::error(),
            Severity::Warning => Diagnostic::warning(),
        };
        let mut labels = Vec::new();
        if let Some(primary) = &self.primary {
            labels.push(
                CsLabel::primary(file_id, primary.span.range()).with_message(&primary.message),
            );
        }
        for secondary in &self.secondary {
            labels.push(
                CsLabel::secondary(file_id, secondary.span.range())
                    .with_message(&secondary.message),
            );
        }
        base.with_code(self.code)
            .with_message(&self.message)
            .with_labels(labels)
            .with_notes(self.notes.clone())
    }
}

/// Sorts diagnostics by position so output is deterministic and reads top to bottom.
pub fn sort(diags: &mut [Diag]) {
    diags.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
}

/// Renders diagnostics of the file `name` (its text `source`) as plain text, without
/// colour: what people read in logs and what tests snapshot.
pub fn render_plain(name: &str, source: &str, diags: &[Diag]) -> String {
    use codespan_reporting::files::SimpleFile;
    use codespan_reporting::term::{self, Config};
    let file = SimpleFile::new(name, source);
    let config = Config::default();
    let mut out = String::new();
    for diag in diags {
        if let Err(e) = term::emit_to_string(&mut out, &config, &file, &diag.to_codespan(())) {
            out.push_str(&format!(
                "{}: {} (could not show the source: {e})\n",
                name, diag.message
            ));
        }
    }
    out
}
