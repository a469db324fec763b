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

/// A path to write through instead of replacing: a device, a pipe or a socket (`-o
/// /dev/null`, a FIFO), or a name under `/dev` or `/proc` (`/dev/stdout`, `/dev/fd/3`,
/// links to whatever the shell opened). Replacing one by a rename would put a regular file
/// in its place: run as root, `-o /dev/null --force` would leave every later program
/// reading and writing a file there.
fn is_special(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    if let Ok(meta) = std::fs::metadata(path) {
        let kind = meta.file_type();
        if kind.is_char_device() || kind.is_block_device() || kind.is_fifo() || kind.is_socket() {
            return true;
        }
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::canonicalize(parent)
        .is_ok_and(|dir| dir.starts_with("/dev") || dir.starts_with("/proc"))
}

/// Writes `contents` to `path` through a temporary file beside it and a rename: a reader
/// never sees half a file, and a symbolic link at `path` is replaced, not written through.
/// A device or pipe ([`is_special`]) is written through: it is not a file to replace.
pub fn write_atomic(path: &std::path::Path, contents: &[u8]) -> Result<(), String> {
    if is_special(path) {
        use std::io::Write;
        return std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|mut f| f.write_all(contents))
            .map_err(|e| format!("cannot write {}: {e}", path.display()));
    }
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
/// too, even a dangling one). A device or pipe is no file of the user's: `-o /dev/null`
/// needs no `--force`.
pub fn check_new_file(path: &std::path::Path, force: bool) -> Result<(), String> {
    if std::fs::symlink_metadata(path).is_ok() && !force && !is_special(path) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipe_is_written_through_not_replaced() {
        let dir = tempfile::tempdir().expect("temp dir");
        let fifo = dir.path().join("pipe");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("a path");
        // SAFETY: a NUL-terminated path; mkfifo reads it only.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).expect("read the pipe"))
        };
        check_new_file(&fifo, false).expect("a pipe needs no --force");
        write_atomic(&fifo, b"skeleton\n").expect("written through");
        assert_eq!(reader.join().expect("reader"), b"skeleton\n");
        use std::os::unix::fs::FileTypeExt;
        let kind = std::fs::symlink_metadata(&fifo)
            .expect("still there")
            .file_type();
        assert!(kind.is_fifo(), "the pipe is still a pipe");
        assert_eq!(
            std::fs::read_dir(dir.path()).expect("dir").count(),
            1,
            "no temporary left"
        );
    }

    #[test]
    fn a_file_is_replaced_and_a_link_is_not_written_through() {
        let dir = tempfile::tempdir().expect("temp dir");
        let target = dir.path().join("kept");
        std::fs::write(&target, "mine").expect("write");
        let link = dir.path().join("out");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        assert!(
            check_new_file(&link, false).is_err(),
            "an existing link needs --force"
        );
        write_atomic(&link, b"new").expect("written");
        assert_eq!(std::fs::read_to_string(&target).expect("read"), "mine");
        assert_eq!(std::fs::read_to_string(&link).expect("read"), "new");
        assert!(!std::fs::symlink_metadata(&link).expect("meta").is_symlink());
    }
}
