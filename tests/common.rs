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
        .env("PERFSKEL_NO_CALIBRATE", "1")
        .output()
        .expect("the perfskel binary runs")
}

/// A two-rank skeleton with communication that loops cut less than 1:10: an allreduce
/// outside any loop and three iterations of a bcast (a loop of 3 keeps one at 1:10),
/// then a ring exchange that loops cut (the C and Rust back ends' measuring pass).
pub const OWN: &str = "skeleton own\nranks 2\ntopology ring\napp_time 1 s\ncompute 20 ms\nallreduce 64 KiB\nloop 3 {\n    compute 20 ms\n    bcast 64 KiB\n}\nloop 200 {\n    compute 2 ms\n    sendrecv to next 1 KiB from prev 1 KiB\n}\n";

/// A pipeline of two stages: rank 1's first iteration waits for rank 0's first block
/// (its fill); at 1:10 the loop keeps 20 iterations and is timed for its fill.
pub const PIPE: &str = "skeleton pipe\nranks 2\ntopology chain\napp_time 205 ms\nloop 200 {\n    recv prev 64 KiB\n    compute 1 ms\n    send next 64 KiB\n}\n";

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

/// Appends `v` as a LEB128 varint, as the trace format writes integers.
pub fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a checksum record (format 8) ending the block that starts at `from`: the
/// CRC-32 of `out[from..]` with the record's tag.
pub fn checksum_record(out: &mut Vec<u8>, from: usize) {
    out.push(perfskel_compiler::trace::format::R_CHECKSUM);
    let crc = crc32fast::hash(&out[from..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// Appends `v` zigzag-encoded, as the trace format writes signed integers.
pub fn zigzag(out: &mut Vec<u8>, v: i64) {
    varint(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// A rank file's header as `runtime/tracer/FORMAT.md` lays it out, its length filled in.
pub fn rank_header(h: &perfskel_compiler::trace::Header) -> Vec<u8> {
    use perfskel_compiler::trace::format;
    let mut b = Vec::new();
    b.extend_from_slice(format::MAGIC);
    b.extend_from_slice(&h.version.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&h.rank.to_le_bytes());
    b.extend_from_slice(&h.n_ranks.to_le_bytes());
    b.extend_from_slice(&h.pid.to_le_bytes());
    b.extend_from_slice(&h.start_unix_ns.to_le_bytes());
    for s in [&h.host, &h.mpi_library] {
        b.extend_from_slice(&(s.len() as u16).to_le_bytes());
        b.extend_from_slice(s.as_bytes());
    }
    let len = (b.len() as u16).to_le_bytes();
    b[10..12].copy_from_slice(&len);
    b
}
