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

/// FNV-1a: a stable hash (std's hasher may change between releases) for cache keys and
/// for recognising the files perfskel wrote.
pub fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.iter().chain(&[0xffu8]) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// Writes `contents` to `path` through a temporary file beside it and a rename: a reader
/// never sees half a file, and a symbolic link at `path` is replaced, not written through.
pub fn write_atomic(path: &std::path::Path, contents: &[u8]) -> Result<(), String> {
    let name = path
        .file_name()
        .map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(".{name}.perfskel-{}", std::process::id()));
    std::fs::write(&tmp, contents).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot write {}: {e}", path.display())
    })
}

/// Refuses to replace `path` unless `force`: a file the user named that exists (a link
/// too, even a dangling one).
pub fn check_new_file(path: &std::path::Path, force: bool) -> Result<(), String> {
    if std::fs::symlink_metadata(path).is_ok() && !force {
        return Err(format!(
            "{} exists; pass --force to overwrite it",
            path.display()
        ));
    }
    Ok(())
}

/// Writes a file the user named ([`check_new_file`], then [`write_atomic`]).
pub fn write_new_file(path: &std::path::Path, contents: &[u8], force: bool) -> Result<(), String> {
    check_new_file(path, force)?;
    write_atomic(path, contents)
}
