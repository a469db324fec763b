//! The Rust back end: a checked skeleton → a self-contained cargo project that runs it
//! over rsmpi and the `perfskel-runtime` crate (an embedded Rust DSL for skeletons).
//!
//! Files, relative to the output directory:
//! - `src/main.rs`: the skeleton, one DSL call per statement, each under a comment that
//!   cites its line of the .skel file (`code.rs`);
//! - `Cargo.toml`: its own `[workspace]`, so an enclosing workspace does not capture
//!   it; depends on `mpi` and on `perfskel-runtime = { path = "perfskel-runtime" }`;
//! - `perfskel-runtime/`: the runtime crate's sources, embedded in this compiler, so the
//!   project builds without perfskel's sources;
//! - `Makefile`: `make` runs `cargo build --release` (honouring `MPICC` and
//!   `CARGO_TARGET_DIR`) and copies the binary to `./skeleton`;
//! - `job.slurm`: a Slurm batch template that runs it with `srun`.
//!
//! Output is deterministic: no absolute paths, no timestamps, floats in Rust's
//! shortest round-trip form.

mod code;
mod syntax;

pub use syntax::to_rust_ident;

use perfskel_grammar::ast::Program;

use super::{GeneratedFile, Options};
use crate::check::Verified;

/// The runtime crate's files, as `perfskel-runtime/<path>` in the generated project.
pub const RUNTIME_FILES: [(&str, &str); 11] = [
    (
        "Cargo.toml",
        include_str!("../../../runtime/rust/Cargo.toml"),
    ),
    (
        "src/lib.rs",
        include_str!("../../../runtime/rust/src/lib.rs"),
    ),
    (
        "src/buffers.rs",
        include_str!("../../../runtime/rust/src/buffers.rs"),
    ),
    (
        "src/collective.rs",
        include_str!("../../../runtime/rust/src/collective.rs"),
    ),
    (
        "src/kernel.rs",
        include_str!("../../../runtime/rust/src/kernel.rs"),
    ),
    (
        "src/p2p.rs",
        include_str!("../../../runtime/rust/src/p2p.rs"),
    ),
    (
        "src/poll.rs",
        include_str!("../../../runtime/rust/src/poll.rs"),
    ),
    (
        "src/requests.rs",
        include_str!("../../../runtime/rust/src/requests.rs"),
    ),
    (
        "src/skeleton.rs",
        include_str!("../../../runtime/rust/src/skeleton.rs"),
    ),
    (
        "src/topology.rs",
        include_str!("../../../runtime/rust/src/topology.rs"),
    ),
    (
        "src/units.rs",
        include_str!("../../../runtime/rust/src/units.rs"),
    ),
];

/// The name of the executable every back end builds.
pub const BINARY: &str = "skeleton";

/// Emits the cargo project of a verified skeleton.
pub fn emit(verified: &Verified, options: &Options) -> Vec<GeneratedFile> {
    let (program, info) = (verified.program(), verified.info());
    let mut files = vec![
        GeneratedFile {
            path: "Cargo.toml".into(),
            contents: cargo_toml(program, options),
        },
        GeneratedFile {
            path: "Makefile".into(),
            contents: makefile(options),
        },
        GeneratedFile {
            path: "job.slurm".into(),
            contents: super::job_slurm(program, options, "Rust back end"),
        },
        GeneratedFile {
            path: "src/main.rs".into(),
            contents: rustfmt(code::main_rs(program, info, options)),
        },
    ];
    files.extend(RUNTIME_FILES.iter().map(|(path, contents)| GeneratedFile {
        path: format!("perfskel-runtime/{path}"),
        contents: (*contents).to_string(),
    }));
    files
}

/// `source` as rustfmt lays it out (the 2021 style edition, whose formatting rustfmt
/// keeps stable from one version to the next), so the project passes `cargo fmt
/// --check`: the emitter writes a statement a line, rustfmt breaks the long ones as a
/// Rust programmer's editor would. `RUSTFMT` names another rustfmt, as for `cargo fmt`.
/// Without one, or where it fails, the code is kept as emitted, under a comment that
/// says so.
fn rustfmt(source: String) -> String {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let program = std::env::var_os("RUSTFMT").unwrap_or_else(|| "rustfmt".into());
    let formatted = Command::new(&program)
        .args(["--edition", "2021", "--emit", "stdout", "--quiet"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()
        .and_then(|mut child| {
            // Written from a thread: rustfmt writes as it reads, so a large file written
            // whole before reading would fill both pipes.
            let mut stdin = child.stdin.take()?;
            let text = source.clone();
            let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()).is_ok());
            let out = child.wait_with_output().ok()?;
            let written = writer.join().unwrap_or(false);
            (written && out.status.success())
                .then(|| String::from_utf8(out.stdout).ok())
                .flatten()
        });
    match formatted {
        Some(text) if !text.trim().is_empty() => text,
        _ => format!(
            "// rustfmt was not found or failed where this was generated: the code is laid out as emitted.\n{source}"
        ),
    }
}

fn cargo_toml(program: &Program, options: &Options) -> String {
    format!(
        r#"# Generated by perfskel from {source} (Rust back end, ratio 1:{ratio}).
# `make` builds ./skeleton; see the Makefile for choosing the MPI library.
[package]
name = "{package}"
version = "0.1.0"
edition = "2021"
publish = false

[[bin]]
name = "{BINARY}"
path = "src/main.rs"

[dependencies]
mpi = {{ version = "0.8.2", default-features = false }}
perfskel-runtime = {{ path = "perfskel-runtime" }}

[profile.release]
debug = "line-tables-only"

# A workspace of its own, so that a cargo workspace around the output directory does
# not capture this project.
[workspace]
"#,
        source = options.source_name,
        ratio = options.ratio,
        package = package_name(&program.name.value.name),
    )
}

/// A cargo package name for the skeleton: `<name>-skeleton`, lower case, with any
/// character cargo does not accept replaced by `_`.
fn package_name(skeleton: &str) -> String {
    let clean: String = skeleton
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("{clean}-skeleton")
}

fn makefile(options: &Options) -> String {
    format!(
        "# Generated by perfskel from {source} (Rust back end): `make` builds ./{BINARY}.
#
# MPICC names the MPI compiler wrapper rsmpi builds against: `make` uses mpicc,
# `make MPICC=mpicc.mpich` selects MPICH. rsmpi does not rebuild when MPICC changes, so
# give each MPI library its own cargo target directory (CARGO_TARGET_DIR, read from the
# environment or the make command line).
MPICC ?= mpicc
CARGO ?= cargo
export MPICC
ifdef CARGO_TARGET_DIR
export CARGO_TARGET_DIR
endif
TARGET_DIR = $(if $(CARGO_TARGET_DIR),$(CARGO_TARGET_DIR),target)

# Every skeleton's program is `{BINARY}` in the target directory, and cargo may take
# another project's build there for this one's (same package name, same relative
# paths): when the last build in it was another directory's, this one's source is
# touched so that cargo builds it again (the dependencies stay built).
OWNER = $(TARGET_DIR)/release/.perfskel-built-from

.PHONY: all clean
all:
\t@if [ \"$$(cat $(OWNER) 2>/dev/null)\" != \"$(CURDIR)\" ]; then touch src/main.rs; fi
\t$(CARGO) build --release
\t@echo \"$(CURDIR)\" > $(OWNER)
\tcp -f $(TARGET_DIR)/release/{BINARY} {BINARY}

clean:
\trm -f {BINARY}
\t$(CARGO) clean
",
        source = options.source_name
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_names_are_cargo_names() {
        assert_eq!(package_name("Stencil2D"), "stencil2d-skeleton");
        assert_eq!(package_name("a_b"), "a_b-skeleton");
    }

    #[test]
    fn runtime_manifest_is_self_contained() {
        // The runtime is copied verbatim: it must not inherit from perfskel's workspace.
        let (_, manifest) = RUNTIME_FILES[0];
        assert!(!manifest.contains(".workspace"));
        assert!(manifest.contains("name = \"perfskel-runtime\""));
    }
}
