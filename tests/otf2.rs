//! Issue 21: perfskel traces exported to OTF2 (`perfskel trace export --otf2`), read by
//! the reference tool `otf2-print` (Debian's otf2-tools): every call an Enter/Leave of
//! its MPI routine's region inside its call site's, with OTF2's MPI records.

use crate::common::text;
use crate::tracer::{perfskel, trace, Mpi};

fn count(haystack: &str, first_word: &str) -> usize {
    haystack
        .lines()
        .filter(|l| l.split_whitespace().next() == Some(first_word))
        .count()
}

#[test]
fn an_exported_trace_is_read_by_otf2_print() {
    // calls_nb: nonblocking sends and receives, waits, tests and collectives.
    let t = trace(Mpi::OpenMpi, "test:calls_nb", &[]);
    let dir = t.dir.path();
    let trace_dir = dir.join("trace");
    let out = dir.join("otf2");
    let args = [
        "trace",
        "export",
        trace_dir.to_str().expect("utf-8"),
        "--otf2",
        out.to_str().expect("utf-8"),
    ];
    let done = perfskel(&args);
    assert!(done.status.success(), "{}", text(&done.stderr));
    // The trace's own counts, from `trace stats --format json`.
    let events: usize = t.ranks().iter().map(|r| r.events.len()).sum();
    // Sends to a rank (not MPI_PROC_NULL), sendrecvs' halves included.
    let sends: usize = t
        .ranks()
        .iter()
        .flat_map(|r| &r.events)
        .filter(|e| {
            use perfskel_compiler::trace::Op::*;
            matches!(
                e.op,
                Send | Bsend
                    | Ssend
                    | Rsend
                    | Isend
                    | Ibsend
                    | Issend
                    | Irsend
                    | Sendrecv
                    | SendrecvReplace
            ) && e.peer != Some(perfskel_compiler::trace::format::PEER_PROC_NULL)
        })
        .count();
    let printed = std::process::Command::new("otf2-print")
        .arg(out.join("traces.otf2"))
        .output()
        .expect("otf2-print runs");
    let stdout = text(&printed.stdout);
    let stderr = text(&printed.stderr);
    assert!(printed.status.success(), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    // One Enter for the routine and one for its call site per call, as many Leaves.
    assert_eq!(count(&stdout, "ENTER"), 2 * events, "{stdout}");
    assert_eq!(count(&stdout, "LEAVE"), 2 * events);
    let p2p_sends = count(&stdout, "MPI_SEND") + count(&stdout, "MPI_ISEND");
    assert!(sends > 0);
    assert_eq!(p2p_sends, sends);
    // Every nonblocking send completes, every posted receive is matched.
    assert_eq!(
        count(&stdout, "MPI_ISEND"),
        count(&stdout, "MPI_ISEND_COMPLETE")
    );
    assert_eq!(
        count(&stdout, "MPI_IRECV_REQUEST"),
        count(&stdout, "MPI_IRECV")
    );
    assert!(count(&stdout, "MPI_COLLECTIVE_END") > 0);
    assert!(stdout.contains("\"MPI_COMM_WORLD\""), "{stdout}");
    // An archive already there is kept unless --force.
    let again = perfskel(&args);
    assert!(!again.status.success());
    assert!(
        text(&again.stderr).contains("--force"),
        "{}",
        text(&again.stderr)
    );
    let mut forced = args.to_vec();
    forced.push("--force");
    let replaced = perfskel(&forced);
    assert!(replaced.status.success(), "{}", text(&replaced.stderr));
}

/// The skeleton of a trace's OTF2 export is the skeleton of the trace itself (but for
/// the header line that names its source), for every example application and the
/// test programs of nonblocking calls, derived communicators and vector collectives:
/// what the archive's standard MPI records say (peers through communicator groups,
/// receives completed elsewhere, nonblocking collectives, Cartesian topologies) and
/// perfskel's attributes and location properties carry all a skeleton needs.
#[test]
fn the_otf2_export_gives_the_trace_s_skeleton() {
    let apps: &[(&str, &[&str])] = &[
        ("ring", &["256", "30"]),
        ("stencil", &["16", "3"]),
        ("cg", &["32", "4"]),
        ("transpose", &["8", "3"]),
        ("rowcol", &["16", "3"]),
        ("tree_reduce", &["1000", "3"]),
        ("master_worker", &["2000", "6"]),
        ("test:calls_nb", &[]),
        ("test:halo_dims", &[]),
        ("test:derived_comms", &[]),
        ("test:bucket_sort", &[]),
    ];
    for (app, args) in apps {
        let t = trace(Mpi::OpenMpi, app, args);
        let dir = t.dir.path();
        let trace_dir = dir.join("trace");
        let out = dir.join("otf2");
        let exported = perfskel(&[
            "trace",
            "export",
            trace_dir.to_str().expect("utf-8"),
            "--otf2",
            out.to_str().expect("utf-8"),
        ]);
        assert!(
            exported.status.success(),
            "{app}: {}",
            text(&exported.stderr)
        );
        let skeleton = |input: &std::path::Path, name: &str| {
            let file = dir.join(name);
            let done = perfskel(&[
                "skeletonize",
                input.to_str().expect("utf-8"),
                "-o",
                file.to_str().expect("utf-8"),
            ]);
            assert!(done.status.success(), "{app}: {}", text(&done.stderr));
            let body = std::fs::read_to_string(&file).expect("skeleton written");
            body.lines().skip(1).collect::<Vec<_>>().join("\n")
        };
        let from_trace = skeleton(&trace_dir, "a.skel");
        // The directory, and the anchor file itself.
        let from_otf2 = skeleton(&out, "b.skel");
        let from_anchor = skeleton(&out.join("traces.otf2"), "c.skel");
        assert_eq!(from_trace, from_otf2, "{app}");
        assert_eq!(from_otf2, from_anchor, "{app}");
        assert!(from_trace.lines().count() > 5, "{app}: {from_trace}");
        // The statistics and the topology of both are the same too (but calls_nb's
        // statistics: OTF2 has no record of what an MPI_Probe matched, its peer and
        // size).
        let commands: &[&[&str]] = if *app == "test:calls_nb" {
            &[&["topo"]]
        } else {
            &[&["trace", "stats", "--format", "json"], &["topo"]]
        };
        for command in commands {
            let run = |input: &std::path::Path| {
                let mut args = command.to_vec();
                args.push(input.to_str().expect("utf-8"));
                let out = perfskel(&args);
                assert!(
                    out.status.success(),
                    "{app} {command:?}: {}",
                    text(&out.stderr)
                );
                text(&out.stdout)
            };
            let (a, b) = (run(&trace_dir), run(&out));
            assert!(
                a == b,
                "{app} {command:?}: differ:\n{}",
                first_difference(&a, &b)
            );
        }
    }
}

/// Writes the Score-P-like archive of tests/data/otf2/scorep_like.py (Debian's
/// python3-otf2) into `dir`.
fn scorep_like(dir: &std::path::Path, iterations: u32) {
    scorep_like_with(dir, iterations, &[]);
}

fn scorep_like_with(dir: &std::path::Path, iterations: u32, flags: &[&str]) {
    let script = crate::common::root().join("tests/data/otf2/scorep_like.py");
    let out = std::process::Command::new("/usr/bin/python3")
        .arg(&script)
        .arg(dir)
        .arg(iterations.to_string())
        .args(flags)
        .output()
        .expect("Debian's python3 runs");
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// An archive perfskel did not write (the layout Score-P gives: a microsecond clock far
/// from 0, user regions around the MPI calls, an OpenMP thread, no perfskel attributes)
/// gives the skeleton of its loop: times in the archive's resolution, the call sites
/// named after their regions with file and line, the thread reported and left out.
#[test]
fn a_score_p_like_archive_gives_its_skeleton() {
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = dir.path().join("app");
    scorep_like(&archive, 50);
    let out = perfskel(&["skeletonize", archive.to_str().expect("utf-8"), "-o", "-"]);
    let skeleton = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for line in [
        "ranks 2",
        "app_time 53.25 ms",
        "loop 50 {",
        "send next 4096 B tag 7 @ \"exchange (app.c:42)\"",
        "recv next 4096 B tag 7 @ \"exchange (app.c:42)\"",
        "allreduce 8 B @ \"norm (app.c:60)\"",
        "compute 1 ms",
    ] {
        assert!(skeleton.contains(line), "{line} in\n{skeleton}");
    }
    assert!(
        stderr.contains("1 location(s) that are no MPI rank"),
        "{stderr}"
    );
    // A device is no file of the user's: `-o /dev/null` needs no --force, and stays one.
    let out = perfskel(&[
        "skeletonize",
        archive.to_str().expect("utf-8"),
        "-o",
        "/dev/null",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    use std::os::unix::fs::FileTypeExt;
    let null = std::fs::metadata("/dev/null").expect("/dev/null");
    assert!(null.file_type().is_char_device());
    assert!(stderr.contains("check              0 error(s)"), "{stderr}");
}

/// Score-P with unwinding: no Enter/Leave records, the MPI routines entered through a
/// calling-context tree. A call's site is its caller's line (exchange's send and receive
/// are two sites, as two return addresses are in a perfskel trace); the skeleton is the
/// instrumented archive's otherwise.
#[test]
fn calling_contexts_give_call_sites_by_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (plain, unwound) = (dir.path().join("app"), dir.path().join("unwound"));
    scorep_like(&plain, 50);
    scorep_like_with(&unwound, 50, &["--unwinding"]);
    let skeleton = |archive: &std::path::Path| {
        let out = perfskel(&["skeletonize", archive.to_str().expect("utf-8"), "-o", "-"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let (a, b) = (skeleton(&plain), skeleton(&unwound));
    for line in [
        "send next 4096 B tag 7 @ \"exchange (app.c:45)\"",
        "recv next 4096 B tag 7 @ \"exchange (app.c:47)\"",
        "allreduce 8 B @ \"norm (app.c:62)\"",
        "loop 50 {",
        "compute 1 ms",
    ] {
        assert!(b.contains(line), "{line} in\n{b}");
    }
    // The same program but for the names of its sites.
    let renamed = a
        .replace("skeleton app", "skeleton unwound")
        .replace("archive `app`", "archive `unwound`")
        .replace("norm (app.c:60)", "norm (app.c:62)")
        .replace("exchange (app.c:42) to", "exchange (app.c:47) to");
    let renamed: Vec<String> = renamed
        .lines()
        .map(|l| {
            if l.contains("send next") {
                l.replace("app.c:42", "app.c:45")
            } else {
                l.replace("app.c:42", "app.c:47")
            }
        })
        .collect();
    assert_eq!(renamed.join("\n") + "\n", b);
    // trace stats: the sites by file and line.
    let out = perfskel(&["trace", "stats", unwound.to_str().expect("utf-8")]);
    let stats = text(&out.stdout);
    for site in ["app.c:45", "app.c:47", "app.c:62"] {
        assert!(stats.contains(site), "{site} in\n{stats}");
    }
    assert!(
        stats.contains("outside the application's span (in neither App% nor MPI%): MPI_Init 2 call(s) 400.000 ms, MPI_Finalize 2 call(s) 0.200 ms"),
        "{stats}"
    );
    // mpiP's measures: the mean call, App% and MPI% (the sends' 2 ms of 106.5 ms of the
    // application and of its 6.5 ms in MPI), bytes sent and received apart.
    let out = perfskel(&[
        "trace",
        "stats",
        unwound.to_str().expect("utf-8"),
        "--format",
        "json",
    ]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let site = |line: &str| {
        json["sites"]
            .as_array()
            .and_then(|s| s.iter().find(|x| x["site"] == line))
            .cloned()
            .unwrap_or_else(|| panic!("{line} in {json}"))
    };
    let send = site("app.c:45");
    assert_eq!(send["mean_ns"], 20_000);
    assert_eq!(send["app_pct"], 1.878);
    assert_eq!(send["mpi_pct"], 30.769);
    assert_eq!(
        (send["sent_bytes"].clone(), send["received_bytes"].clone()),
        (409_600.into(), 0.into())
    );
    let recv = site("app.c:47");
    assert_eq!(
        (recv["sent_bytes"].clone(), recv["received_bytes"].clone()),
        (0.into(), 409_600.into())
    );
    let init = site("app.c:11");
    assert_eq!(
        (init["app_pct"].clone(), init["mpi_pct"].clone()),
        (serde_json::Value::Null, serde_json::Value::Null)
    );
    // trace show --format json: each send at its line, on both ranks.
    let out = perfskel(&[
        "trace",
        "show",
        unwound.to_str().expect("utf-8"),
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let sends = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("JSON Lines"))
        .filter(|e| e["op"] == "MPI_Send")
        .inspect(|e| assert_eq!(e["site"], "app.c:45", "{e}"))
        .count();
    assert_eq!(sends, 100);
}

/// Damaged archives: a missing event file, one cut in half, a garbage anchor: clear
/// errors naming the archive and the rank, never a crash or a hang.
#[test]
fn damaged_archives_give_clear_errors() {
    for case in ["missing", "truncated", "anchor"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let archive = dir.path().join("app");
        scorep_like(&archive, 50);
        let evt = archive
            .join("traces")
            .join(if case == "missing" { "1.evt" } else { "0.evt" });
        match case {
            "missing" => std::fs::remove_file(&evt).expect("remove"),
            "truncated" => {
                let bytes = std::fs::read(&evt).expect("read");
                std::fs::write(&evt, &bytes[..bytes.len() / 2]).expect("write");
            }
            _ => std::fs::write(archive.join("traces.otf2"), "garbage\n").expect("write"),
        }
        let skel = dir.path().join("a.skel");
        let out = perfskel(&[
            "skeletonize",
            archive.to_str().expect("utf-8"),
            "-o",
            skel.to_str().expect("utf-8"),
        ]);
        let stderr = text(&out.stderr);
        assert!(!stderr.contains("panicked"), "{case}: {stderr}");
        match case {
            "missing" => assert!(
                stderr.contains("rank 1: cannot read the location's events"),
                "{stderr}"
            ),
            "truncated" => assert!(
                // libotf2's own error, or, where it took the cut for a chunk's end, the
                // location's count of records.
                (stderr.contains("rank 0: cannot read events")
                    || stderr.contains("rank 0: the event file ends after"))
                    && stderr.contains("last whole call"),
                "{stderr}"
            ),
            _ => {
                assert_eq!(out.status.code(), Some(2), "{stderr}");
                assert!(stderr.contains("cannot open the OTF2 archive"), "{stderr}");
            }
        }
    }
}

/// The first line where `a` and `b` differ, both versions.
fn first_difference(a: &str, b: &str) -> String {
    a.lines()
        .zip(b.lines())
        .enumerate()
        .find(|(_, (x, y))| x != y)
        .map(|(i, (x, y))| format!("line {}: {x}\n   vs: {y}", i + 1))
        .unwrap_or_else(|| format!("{} against {} lines", a.lines().count(), b.lines().count()))
}

/// `analyze` over OTF2 archives (directories holding `traces.otf2`) gives the report
/// it gives over the perfskel traces they were exported from.
#[test]
fn analyze_reads_otf2_archives_as_it_reads_traces() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = crate::tracer::build_app(Mpi::OpenMpi, "stencil");
    for np in [2, 3, 4] {
        let pst = dir.path().join("pst").join(format!("np{np}"));
        let otf2 = dir.path().join("otf2").join(format!("np{np}"));
        let recorded = {
            let _guard = crate::tracer::MPI_LOCK
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            perfskel(&[
                "record",
                "-o",
                pst.to_str().expect("utf-8"),
                "--",
                "mpirun.openmpi",
                "-np",
                &np.to_string(),
                exe.to_str().expect("utf-8"),
                "32",
                "10",
            ])
        };
        assert!(recorded.status.success(), "{}", text(&recorded.stderr));
        let exported = perfskel(&[
            "trace",
            "export",
            pst.to_str().expect("utf-8"),
            "--otf2",
            otf2.to_str().expect("utf-8"),
        ]);
        assert!(exported.status.success(), "{}", text(&exported.stderr));
    }
    let report = |sub: &str| {
        let out = perfskel(&["analyze", dir.path().join(sub).to_str().expect("utf-8")]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let (a, b) = (report("pst"), report("otf2"));
    assert!(a.contains("3 experiments at 2, 3, 4 tasks"), "{a}");
    assert!(a == b, "{}", first_difference(&a, &b));
}
