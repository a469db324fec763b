//! Helpers shared by the integration tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// MPI runs share two cores: one at a time, across test modules.
pub static MPI_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Files with `extension` directly in `dir` (relative to the root), sorted.
pub fn files_in(dir: &str, extension: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == extension))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// `path` relative to the repository root, with `/` separators, for stable names.
pub fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

/// Runs the `perfskel` binary with `args` in `dir`.
pub fn perfskel(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_perfskel"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the perfskel binary runs")
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The perfskel cache directory the tests share (`PERFSKEL_CACHE_DIR`): under the cargo
/// target directory, so that the generated Rust programs of every test, and of the demo,
/// build rsmpi once per MPI into `cargo-target-<mpi>` there, as `perfskel run` does.
pub fn shared_cache_dir() -> PathBuf {
    // CARGO_TARGET_TMPDIR is `<target>/tmp`.
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent()
        .map_or(tmp.clone(), Path::to_path_buf)
        .join("perfskel-cache")
}
