//! `perfskel validate`: the quick mode runs end to end under real Open MPI (trace,
//! skeletonize, compile, run, the competing job), and its report has the promised
//! structure; accuracy is not asserted (the machine is shared). Bad requests fail
//! clearly before anything runs.

use crate::common::{perfskel, text, MPI_LOCK};

#[test]
fn quick_mode_runs_end_to_end() {
    let _mpi = MPI_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let out = perfskel(
        dir.path(),
        &[
            "validate", "--quick", "-q", "--format", "json", "-o", "work", "--plot", "plot.svg",
        ],
    );
    let stdout = text(&out.stdout);
    let report: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{stdout}\n{}", text(&out.stderr)));
    assert_eq!(report["failures"], serde_json::json!([]), "{stdout}");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(report["mode"], "quick");
    assert_eq!(report["ratio"], 10);
    assert_eq!(
        report["methods"],
        serde_json::json!([
            "skeleton-c",
            "skeleton-c-rel",
            "average-slowdown",
            "small-size"
        ])
    );
    let rows = report["rows"].as_array().unwrap();
    let cells: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r["app"].as_str().unwrap(), r["scenario"].as_str().unwrap()))
        .collect();
    assert_eq!(
        cells,
        [
            ("stencil", "base"),
            ("stencil", "competing"),
            ("cg", "base"),
            ("cg", "competing")
        ]
    );
    for row in rows {
        assert!(row["measured_s"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["small_s"].as_f64().unwrap() > 0.0, "{row}");
        let predictions = row["predictions"].as_array().unwrap();
        assert!(
            predictions[0]["predicted_s"].as_f64().unwrap() > 0.0,
            "{row}"
        );
        assert!(predictions[0]["error_pct"].is_f64(), "{row}");
        // The methods relative to base predict the competing scenario only.
        let baselines_predict = row["scenario"] == "competing";
        for p in &predictions[1..] {
            assert_eq!(p["predicted_s"].is_f64(), baselines_predict, "{row}");
        }
    }
    let summary = report["summary"].as_array().unwrap();
    assert_eq!(summary[0]["n"], 4);
    for method in &summary[1..] {
        assert_eq!(method["n"], 2, "{method}");
    }
    let traces = report["traces"].as_array().unwrap();
    assert_eq!(traces.len(), 2);
    assert!(traces[0]["traced_s"].as_f64().unwrap() > 0.0);
    for file in ["results.txt", "results.json", "results.csv", "validate.svg"] {
        assert!(dir.path().join("work").join(file).is_file(), "{file}");
    }
    let svg = std::fs::read_to_string(dir.path().join("plot.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("skeleton-c"));
    // Each scenario's launcher is a script the user can rerun by hand.
    let launcher = std::fs::read_to_string(dir.path().join("work/launch/competing.sh")).unwrap();
    assert!(launcher.contains("exec mpirun.openmpi"), "{launcher}");
}

#[test]
fn list_names_every_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let out = perfskel(dir.path(), &["validate", "--list"]);
    assert!(out.status.success());
    let stdout = text(&out.stdout);
    for name in [
        "base",
        "mpich",
        "oversubscribed",
        "competing",
        "pinned",
        "spread",
        "slow-net",
        "negative-control",
        "stencil",
        "master_worker",
    ] {
        assert!(stdout.contains(&format!("  {name} ")), "{name}:\n{stdout}");
    }
}

#[test]
fn bad_requests_fail_before_running() {
    let dir = tempfile::tempdir().unwrap();
    let out = perfskel(dir.path(), &["validate", "--scenarios", "slownet"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("unknown scenario `slownet` (did you mean `slow-net`?)"),
        "{}",
        text(&out.stderr)
    );
    let out = perfskel(dir.path(), &["validate", "--backends", "fortran"]);
    assert!(text(&out.stderr).contains("unknown back end `fortran`"));
    // A directory with someone else's files is not used without --force.
    std::fs::create_dir(dir.path().join("mine")).unwrap();
    std::fs::write(dir.path().join("mine/notes.txt"), "keep").unwrap();
    let out = perfskel(dir.path(), &["validate", "--quick", "-o", "mine"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("is not a perfskel validate work directory"),
        "{}",
        text(&out.stderr)
    );
    // An existing plot file is not overwritten without --force.
    std::fs::write(dir.path().join("plot.svg"), "mine").unwrap();
    let out = perfskel(dir.path(), &["validate", "--quick", "--plot", "plot.svg"]);
    assert!(text(&out.stderr).contains("plot.svg exists; pass --force"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("plot.svg")).unwrap(),
        "mine"
    );
}
