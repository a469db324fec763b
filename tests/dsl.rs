//! The `check`/`fmt`/`demo` commands run as a user runs them. The data-driven tests of
//! the DSL itself (inputs that must check clean, errors and their rendered diagnostics,
//! the formatter, fuzz regressions) are in `compiler/tests/dsl.rs`, without the CLI.

use crate::common::{perfskel, root, text};

#[test]
fn check_exit_codes_follow_the_diagnostics() {
    let dir = root();
    let clean = perfskel(
        &dir,
        &[
            "check",
            "examples/skeletons/stencil2d.skel",
            "examples/skeletons/cg.skel",
        ],
    );
    assert!(clean.status.success(), "{}", text(&clean.stderr));
    assert!(text(&clean.stderr).contains("checked 2 files: 0 errors, 0 warnings"));

    let broken = perfskel(
        &dir,
        &["check", "tests/data/dsl/err/deadlock_send_send.skel"],
    );
    assert_eq!(broken.status.code(), Some(1));
    let stderr = text(&broken.stderr);
    assert!(stderr.contains("error[deadlock]"), "{stderr}");
    assert!(
        stderr.contains("tests/data/dsl/err/deadlock_send_send.skel:8:5"),
        "{stderr}"
    );

    let missing = perfskel(&dir, &["check", "no/such/file.skel"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(text(&missing.stderr).contains("cannot read no/such/file.skel"));
}

#[test]
fn check_refuses_bytes_that_are_not_utf8_with_their_offset() {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(tmp.path().join("bin.skel"), b"skeleton x\nranks \xff\xfe 4").expect("write");
    let out = perfskel(tmp.path(), &["check", "bin.skel"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("bin.skel: not UTF-8 text (invalid byte at offset 17)"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn only_a_clean_file_passes_unless_warnings_are_allowed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let source = "skeleton w\nranks 2\ntopology chain\napp_time 1 s\nallreduce 0 B\n";
    std::fs::write(tmp.path().join("w.skel"), source).expect("write");
    let strict = perfskel(tmp.path(), &["check", "w.skel"]);
    assert_eq!(strict.status.code(), Some(1));
    assert!(text(&strict.stderr).contains("warning[zero-size]"));
    let allowed = perfskel(tmp.path(), &["check", "--allow-warnings", "w.skel"]);
    assert!(allowed.status.success());
}

#[test]
fn fmt_rewrites_keeps_comments_and_check_shows_a_diff() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let messy = "skeleton m  # name\nranks 2 topology chain app_time 1 s\n\n\n# before the loop\nloop 2 { sendrecv to next 1 B from prev 1 B   # swap\n}\n";
    let path = tmp.path().join("m.skel");
    std::fs::write(&path, messy).expect("write");

    let checked = perfskel(tmp.path(), &["fmt", "--check", "m.skel"]);
    assert_eq!(checked.status.code(), Some(1));
    let diff = text(&checked.stdout);
    assert!(
        diff.contains("--- m.skel (original)") && diff.contains("+++ m.skel (formatted)"),
        "{diff}"
    );
    assert_eq!(
        std::fs::read_to_string(&path).expect("read"),
        messy,
        "--check must not write"
    );

    let formatted = perfskel(tmp.path(), &["fmt", "m.skel"]);
    assert!(formatted.status.success(), "{}", text(&formatted.stderr));
    assert_eq!(
        std::fs::read_to_string(&path).expect("read"),
        "skeleton m # name\nranks 2\ntopology chain\napp_time 1 s\n\n# before the loop\nloop 2 {\n    sendrecv to next 1 B from prev 1 B # swap\n}\n"
    );
    let again = perfskel(tmp.path(), &["fmt", "--check", "m.skel"]);
    assert!(
        again.status.success(),
        "formatting is not idempotent: {}",
        text(&again.stdout)
    );
}

#[test]
fn fmt_leaves_files_with_syntax_errors_untouched() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let broken = "skeleton b\nranks 2\ntopology chain\napp_time 1 s\nsend next\n# keep me\n";
    let path = tmp.path().join("b.skel");
    std::fs::write(&path, broken).expect("write");
    let out = perfskel(tmp.path(), &["fmt", "b.skel"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("b.skel was not formatted because it has syntax errors"));
    assert_eq!(std::fs::read_to_string(&path).expect("read"), broken);
}

#[test]
fn demo_checks_formats_and_summarizes_every_bundled_skeleton() {
    // The recorded pipeline half of the demo is `skeletonize::demo_runs_the_pipeline`.
    let out = perfskel(&root(), &["demo", "--skip-record"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    for name in [
        "stencil2d",
        "ring_pipeline",
        "cg",
        "master_worker",
        "transpose",
        "tree_reduce",
        "rowcol",
    ] {
        let row = stdout
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no row for {name}:\n{stdout}"));
        assert!(row.contains(" ok "), "{row}");
    }
    // stencil2d: 500 iterations; the 4 corner ranks send 2 messages, the 8 edge ranks 3
    // and the 4 interior ranks 4: a mean of 3 per iteration.
    let stencil = stdout
        .lines()
        .find(|l| l.starts_with("stencil2d"))
        .unwrap_or_default();
    assert!(stencil.contains("1500.0"), "{stencil}");
}

#[test]
fn every_subcommand_has_help() {
    for sub in [
        "check",
        "fmt",
        "demo",
        "record",
        "trace",
        "topo",
        "analyze",
        "skeletonize",
        "compile",
        "run",
        "calibrate",
        "report",
        "platform",
        "validate",
    ] {
        let out = perfskel(&root(), &[sub, "--help"]);
        assert!(out.status.success());
        assert!(text(&out.stdout).contains("Usage: perfskel"), "{sub}");
    }
}

/// Output into a pipe whose reader has gone (`perfskel trace stats T | head -1`) ends the
/// process the way it ends other tools (SIGPIPE), never with a panic.
#[test]
fn a_closed_output_pipe_is_not_a_panic() {
    use std::io::Write;
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let source = std::fs::read_to_string(root().join("examples/skeletons/cg.skel"))
        .expect("example skeleton");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_perfskel"))
        .args(["fmt", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the perfskel binary runs");
    // The reader goes before anything is written.
    drop(child.stdout.take());
    let mut stdin = child.stdin.take().expect("stdin");
    // The process may be gone before all of it is read: a broken pipe here is fine.
    let _ = stdin.write_all(source.as_bytes());
    drop(stdin);
    let out = child.wait_with_output().expect("perfskel ends");
    let stderr = text(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{:?}: {stderr}",
        out.status
    );
}
