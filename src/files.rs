//! Reading skeleton files and rendering diagnostics for people (codespan-reporting).

use std::io::IsTerminal;
use std::path::Path;

use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::termcolor::{ColorChoice, StandardStream};
use codespan_reporting::term::{self, Config};
use perfskel_grammar::{Diag, Severity};

/// Reads a skeleton file. Files that are not UTF-8 are refused with the offset of the
/// first bad byte; `-` reads standard input.
pub fn read_source(path: &Path) -> Result<String, String> {
    let bytes = if path == Path::new("-") {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf)
            .map_err(|e| format!("cannot read standard input: {e}"))?;
        buf
    } else {
        std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?
    };
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "{}: not UTF-8 text (invalid byte at offset {})",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

pub use perfskel_grammar::diagnostic::render_plain;

/// Prints diagnostics to standard error, in colour on a terminal.
pub fn emit(name: &str, source: &str, diags: &[Diag]) {
    if diags.is_empty() {
        return;
    }
    if !std::io::stderr().is_terminal() {
        eprint!("{}", render_plain(name, source, diags));
        return;
    }
    let file = SimpleFile::new(name, source);
    let config = Config::default();
    let mut stream = StandardStream::stderr(ColorChoice::Auto);
    for diag in diags {
        if term::emit_to_write_style(&mut stream, &config, &file, &diag.to_codespan(())).is_err() {
            eprintln!("{name}: {}", diag.message);
        }
    }
}

/// Counts errors and warnings.
pub fn tally(diags: &[Diag]) -> (usize, usize) {
    let errors = diags
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    (errors, diags.len() - errors)
}

pub fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// The program `name` on `PATH`, if any.
pub fn find_in_path(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}
