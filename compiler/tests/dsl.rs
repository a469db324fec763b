//! The skeleton DSL, data-driven: parser, checker and formatter over the inputs in
//! `tests/data/dsl/`, through the library (`pipeline::check_source`), without the CLI
//! or MPI.
//!
//! - `tests/data/dsl/ok/*.skel`, `examples/skeletons/*.skel` and
//!   `grammar/every_construct.skel` must check without any diagnostic;
//! - `tests/data/dsl/err/*.skel` must give at least one error; the rendered diagnostics
//!   are snapshots in `snapshots/diagnostics/`;
//! - `tests/data/dsl/fuzz/*.skel` are inputs fuzzing once crashed on: they must give
//!   diagnostics or success, and format idempotently.

use std::path::{Path, PathBuf};

use perfskel_compiler::check::Options;
use perfskel_compiler::pipeline::check_source;
use perfskel_grammar::diagnostic::render_plain;

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from(".."), Path::to_path_buf)
}

/// Files with `extension` directly in `dir` (relative to the root), sorted.
fn files_in(dir: &str, extension: &str) -> Vec<PathBuf> {
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

/// A path relative to the root, with `/`.
fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

fn read(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn clean_inputs() -> Vec<std::path::PathBuf> {
    let mut files = files_in("tests/data/dsl/ok", "skel");
    files.extend(files_in("examples/skeletons", "skel"));
    files.push(root().join("grammar/every_construct.skel"));
    files
}

#[test]
fn ok_inputs_check_without_diagnostics() {
    let files = clean_inputs();
    assert!(files.len() >= 12, "test inputs are missing: {files:?}");
    for path in files {
        let source = read(&path);
        let diags = check_source(&source, Options::default());
        let name = relative(&path);
        assert!(
            diags.is_empty(),
            "{name}:\n{}",
            render_plain(&name, &source, &diags)
        );
    }
}

#[test]
fn shipped_skeletons_are_in_canonical_form() {
    let mut files = files_in("examples/skeletons", "skel");
    files.push(root().join("grammar/every_construct.skel"));
    for path in files {
        let source = read(&path);
        let (program, _) = perfskel_grammar::parse(&source);
        let printed = perfskel_grammar::print(&program);
        assert_eq!(printed, source, "{} is not canonical", relative(&path));
    }
}

#[test]
fn err_inputs_give_errors_and_match_their_snapshots() {
    let files = files_in("tests/data/dsl/err", "skel");
    assert!(files.len() >= 15, "test inputs are missing: {files:?}");
    for path in files {
        let source = read(&path);
        let name = relative(&path);
        let diags = check_source(&source, Options::default());
        assert!(
            diags.iter().any(perfskel_grammar::Diag::is_error),
            "{name} gave no error"
        );
        let rendered = render_plain(&name, &source, &diags);
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        insta::with_settings!({
            snapshot_path => "../../snapshots/diagnostics",
            prepend_module_to_snapshot => false,
            omit_expression => true,
            description => name.clone(),
        }, {
            insta::assert_snapshot!(stem, format!("SOURCE\n{source}\nDIAGNOSTICS\n{rendered}"));
        });
    }
}

#[test]
fn fmt_output_matches_snapshots_and_is_idempotent() {
    for path in files_in("tests/data/dsl/ok", "skel") {
        let source = read(&path);
        let (program, diags) = perfskel_grammar::parse(&source);
        assert!(diags.is_empty(), "{}", relative(&path));
        let once = perfskel_grammar::print(&program);
        let (again, diags) = perfskel_grammar::parse(&once);
        assert!(
            diags.is_empty(),
            "formatted {} does not parse",
            relative(&path)
        );
        assert_eq!(
            program,
            again,
            "formatting changed the meaning of {}",
            relative(&path)
        );
        assert_eq!(
            perfskel_grammar::print(&again),
            once,
            "fmt of {} is not idempotent",
            relative(&path)
        );
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        insta::with_settings!({
            snapshot_path => "../../snapshots/fmt",
            prepend_module_to_snapshot => false,
            omit_expression => true,
            description => relative(&path),
        }, {
            insta::assert_snapshot!(stem, format!("SOURCE\n{source}\nFORMATTED\n{once}"));
        });
    }
}

#[test]
fn fuzz_regressions_neither_crash_nor_change_on_reformatting() {
    for path in files_in("tests/data/dsl/fuzz", "skel") {
        let bytes = std::fs::read(&path).unwrap_or_default();
        let Ok(source) = String::from_utf8(bytes) else {
            continue;
        };
        let _ = check_source(
            &source,
            Options {
                simulation_budget: 200_000,
                ..Default::default()
            },
        );
        let (program, diags) = perfskel_grammar::parse(&source);
        if diags.iter().any(perfskel_grammar::Diag::is_error) {
            continue;
        }
        let once = perfskel_grammar::print(&program);
        let (again, _) = perfskel_grammar::parse(&once);
        assert_eq!(perfskel_grammar::print(&again), once, "{}", relative(&path));
    }
}
