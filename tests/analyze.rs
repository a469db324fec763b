//! `perfskel analyze` end to end: synthetic scaling studies through the CSV and JSON
//! readers, the mpiP fixtures under `tests/data/analyze/mpip/` through the CLI, real
//! perfskel traces of an example application recorded under Open MPI at 1 to 8 ranks,
//! and the bad inputs the analysis must reject with a clear message.

use std::path::PathBuf;

use crate::common::{files_in, root, text};
use perfskel_studies::analyze::{
    self, extrap, mpip, report, tabular, AnalyzeError, Experiment, Options,
};

const SITES: [(&str, u32, &str, &str, f64); 6] = [
    ("solver.c", 120, "solve", "Wait", 0.30),
    ("solver.c", 131, "solve", "Isend", 0.10),
    ("solver.c", 132, "solve", "Irecv", 0.05),
    ("main.c", 40, "main", "Allreduce", 0.25),
    ("main.c", 77, "main", "Barrier", 0.05),
    ("io.c", 12, "checkpoint", "Bcast", 0.10),
];
const TASK_COUNTS: [u32; 5] = [4, 8, 16, 32, 64];

/// xorshift64*: a tiny deterministic generator, so the studies are the same on every run.
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
    /// A multiplicative noise factor in `1 ± spread`.
    fn noise(&mut self, spread: f64) -> f64 {
        1.0 + spread * (2.0 * self.unit() - 1.0)
    }
}

/// A scaling study in the CSV profile format: 5 task counts × `replicates` runs, six
/// call sites with per-run and per-task noise; site `growing` (an index into `SITES`)
/// gets a time that grows with log2 of the task count, the others stay flat per task.
fn synthetic_csv(application: &str, growing: Option<usize>, replicates: u32, seed: u64) -> String {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut csv = String::from(
        "experiment,application,tasks,task,task_time_s,file,line,function,operation,count,total_s,min_s,max_s,bytes\n",
    );
    for &p in &TASK_COUNTS {
        for replicate in 1..=replicates {
            let run = format!("{application}-{p}-r{replicate}");
            // System noise hits a whole run's call site, not only single tasks.
            let run_noise: Vec<f64> = SITES.iter().map(|_| rng.noise(0.25)).collect();
            for task in 0..p {
                let task_time = 400.0 / f64::from(p) * rng.noise(0.05);
                for (idx, (file, line, function, operation, base)) in SITES.iter().enumerate() {
                    let growth = if growing == Some(idx) {
                        1.0 + 0.6 * (f64::from(p) / 4.0).log2()
                    } else {
                        1.0
                    };
                    let total = base * growth * run_noise[idx] * rng.noise(0.3);
                    let time_column = if idx == 0 {
                        format!("{task_time:.6}")
                    } else {
                        String::new()
                    };
                    csv.push_str(&format!(
                        "{run},{application},{p},{task},{time_column},{file},{line},{function},{operation},100,{total:.6},{:.6},{:.6},0\n",
                        total / 400.0,
                        total / 40.0
                    ));
                }
            }
        }
    }
    csv
}

fn experiments(csv: &str) -> Vec<Experiment> {
    match tabular::parse_csv("study.csv", csv) {
        Ok(experiments) => experiments,
        Err(err) => panic!("synthetic CSV does not parse: {err}"),
    }
}

fn run_analysis(experiments: &[Experiment]) -> analyze::Analysis {
    match analyze::analyze(experiments, &Options::default()) {
        Ok(analysis) => analysis,
        Err(err) => panic!("analysis failed: {err}"),
    }
}

#[test]
fn growing_call_site_is_ranked_first_and_significant() {
    for seed in 1..=10 {
        let analysis = run_analysis(&experiments(&synthetic_csv("cg", Some(0), 3, seed)));
        let app = &analysis.applications[0];
        assert_eq!(app.n_experiments, 15);
        let first = &app.call_sites[0];
        assert_eq!(
            (first.site.operation.as_str(), first.site.line),
            ("Wait", 120),
            "seed {seed}"
        );
        assert!(
            first.correlation.grows,
            "seed {seed}: {:?}",
            first.correlation
        );
        assert!(first.share_at_max() > first.share_at_min());
        let others_growing: Vec<_> = app.call_sites[1..]
            .iter()
            .filter(|s| s.correlation.grows)
            .map(|s| s.site.to_string())
            .collect();
        assert!(others_growing.is_empty(), "seed {seed}: {others_growing:?}");
        assert_eq!(app.operations[0].operation, "Wait");
    }
}

#[test]
fn flat_study_reports_no_significant_call_site() {
    let mut seeds_with_false_positive = 0;
    for seed in 1..=20 {
        let analysis = run_analysis(&experiments(&synthetic_csv("cg", None, 3, seed)));
        let app = &analysis.applications[0];
        if app.call_sites.iter().any(|s| s.correlation.grows) {
            seeds_with_false_positive += 1;
        }
        if seed == 1 {
            assert!(app.call_sites.iter().all(|s| !s.correlation.grows));
        }
    }
    // Holm keeps the family-wise error rate at 5% two-sided, so about 1 in 40 flat
    // studies shows a growing site by chance; 20 studies may show one or two.
    assert!(
        seeds_with_false_positive <= 2,
        "{seeds_with_false_positive}"
    );
}

#[test]
fn four_unreplicated_runs_rank_but_cannot_be_significant() {
    // A study like one run each at 1, 2, 4 and 8 ranks (here 4 to 32): the trend
    // is found, but the exact test knows 4 points cannot rule out chance (p >= 1/12).
    let csv: String = synthetic_csv("cg", Some(0), 1, 9)
        .lines()
        .filter(|l| !l.starts_with("cg-64-"))
        .map(|l| format!("{l}\n"))
        .collect();
    let analysis = run_analysis(&experiments(&csv));
    let app = &analysis.applications[0];
    assert_eq!(app.n_experiments, 4);
    assert_eq!(app.p_value_method, analyze::PValueMethod::ExactPermutation);
    assert_eq!(app.call_sites[0].site.operation, "Wait");
    assert!(app.call_sites[0].correlation.p_value >= 2.0 / 24.0 - 1e-12);
    assert!(app.call_sites.iter().all(|s| !s.correlation.grows));
    let table = report::render_table(&analysis, 0);
    assert!(
        table.contains("note: 4 experiments give little power"),
        "{table}"
    );
}

#[test]
fn json_input_gives_the_same_analysis_as_csv() {
    let from_csv = experiments(&synthetic_csv("cg", Some(3), 2, 5));
    let json = format!(
        "{{\"experiments\": {}}}",
        serde_json::to_string(&from_csv).unwrap_or_default()
    );
    let from_json = match tabular::parse_json("study.json", &json) {
        Ok(e) => e,
        Err(err) => panic!("{err}"),
    };
    let a = report::render_csv(&run_analysis(&from_csv));
    let b = report::render_csv(&run_analysis(&from_json));
    assert_eq!(a, b);
    assert!(
        a.lines()
            .nth(1)
            .unwrap_or("")
            .contains(",Allreduce,main.c,40,"),
        "{a}"
    );
}

#[test]
fn mpip_report_with_stack_depth_and_threshold() {
    let path = data_dir().join("mpip/ok/amg-k2-threshold.mpiP");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let experiment = match mpip::parse("amg-k2-threshold.mpiP", &text) {
        Ok(e) => e,
        Err(err) => panic!("{err}"),
    };
    assert_eq!(experiment.application, "amg");
    assert_eq!(experiment.n_tasks, 2);
    assert_eq!(experiment.task_times_s, vec![9.51, 9.51]);
    let sites: Vec<String> = experiment
        .call_sites
        .iter()
        .map(|s| s.site.to_string())
        .collect();
    assert_eq!(
        sites,
        [
            "Allreduce at mpistubs.c:1172 in hypre_MPI_Allreduce",
            "Testall at exchange_data.c:413 in hypre_DataExchangeList",
            "Barrier at 0x4a81c2:0 in hypre_Finalize",
        ]
    );
    let allreduce = &experiment.call_sites[0];
    assert_eq!(allreduce.tasks.len(), 2);
    assert_eq!(allreduce.tasks[0].bytes, 1344.0);
    assert!((allreduce.tasks[1].total_s - 168.0 * 1.18e-3).abs() < 1e-12);
    // Both Barrier rows were under the print threshold: only the `*` row tells.
    let barrier = &experiment.call_sites[2];
    assert_eq!(barrier.tasks.len(), 1);
    assert_eq!(barrier.tasks[0].task, None);
    assert_eq!(barrier.tasks[0].count, 2);
    assert!((barrier.tasks[0].total_s - 2.0 * 0.915e-3).abs() < 1e-12);
}

#[test]
fn concise_mpip_report_gives_per_site_totals() {
    let text =
        std::fs::read_to_string(data_dir().join("mpip/ok/amg-concise.mpiP")).unwrap_or_default();
    let experiment = match mpip::parse("amg-concise.mpiP", &text) {
        Ok(e) => e,
        Err(err) => panic!("{err}"),
    };
    assert_eq!(
        (experiment.application.as_str(), experiment.n_tasks),
        ("amg", 2)
    );
    let totals: Vec<(String, f64)> = experiment
        .call_sites
        .iter()
        .map(|s| (s.site.operation.clone(), s.total_s()))
        .collect();
    // Concise rows give the mean time per task: total = Tasks x Mean.
    assert_eq!(
        totals,
        [("Allreduce".into(), 0.210), ("Testall".into(), 0.044)]
    );
}

#[test]
fn result_does_not_depend_on_input_order() {
    let runs = experiments(&synthetic_csv("cg", Some(2), 2, 11));
    let expected = report::render_csv(&run_analysis(&runs));
    let mut rng = Rng(42);
    for _ in 0..5 {
        let mut shuffled = runs.clone();
        for idx in (1..shuffled.len()).rev() {
            shuffled.swap(idx, (rng.unit() * (idx + 1) as f64) as usize % (idx + 1));
        }
        for run in &mut shuffled {
            let n = run.call_sites.len();
            run.call_sites
                .rotate_left((rng.unit() * n as f64) as usize % n.max(1));
        }
        assert_eq!(report::render_csv(&run_analysis(&shuffled)), expected);
    }
}

#[test]
fn malformed_mpip_reports_name_file_and_line() {
    let files = files_in("tests/data/analyze/mpip/err", "mpiP");
    let names: Vec<String> = files
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    let dir = data_dir().join("mpip/err");
    assert!(names.len() >= 6);
    let mut messages = String::new();
    for name in names {
        let text = std::fs::read_to_string(dir.join(&name)).unwrap_or_default();
        match mpip::parse(&format!("err/{name}"), &text) {
            Ok(_) => panic!("{name} parsed"),
            Err(err) => messages.push_str(&format!("{err}\n")),
        }
    }
    insta::with_settings!({
        snapshot_path => "../snapshots/analyze",
        prepend_module_to_snapshot => false,
        description => "mpip::parse over each report in tests/data/analyze/mpip/err/",
    }, {
        insta::assert_snapshot!("mpip_errors", messages);
    });
}

#[test]
fn cli_table_over_mpip_reports() {
    let output = perfskel(&["analyze", "tests/data/analyze/mpip/jacobi"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    insta::with_settings!({
        snapshot_path => "../snapshots/analyze",
        prepend_module_to_snapshot => false,
        description => "perfskel analyze tests/data/analyze/mpip/jacobi",
    }, {
        insta::assert_snapshot!("jacobi_table", stdout);
    });
}

#[test]
fn cli_csv_json_plots_and_extrap_export() {
    let out_dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let plots = out_dir.path().join("plots");
    let extrap_file = out_dir.path().join("jacobi.extrap.txt");
    let output = perfskel(&[
        "analyze",
        "tests/data/analyze/mpip/jacobi",
        "--format",
        "csv",
        "--plot",
        &plots.display().to_string(),
        "--export",
        "extrap",
        &extrap_file.display().to_string(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let csv = String::from_utf8_lossy(&output.stdout);
    assert!(csv.starts_with("application,rank,operation,file,line,function,rho,"));
    assert!(csv
        .lines()
        .nth(1)
        .unwrap_or("")
        .starts_with("jacobi,1,Waitall,halo.c,52,exchange_halo,"));
    for name in [
        "jacobi-comm-share.svg",
        "jacobi-operations.svg",
        "jacobi-top-call-sites.svg",
    ] {
        let svg = std::fs::read_to_string(plots.join(name)).unwrap_or_default();
        assert!(svg.starts_with("<svg"), "{name}");
        assert!(
            name.contains("comm-share") || svg.contains("Waitall"),
            "{name}"
        );
        // The x axis is labelled at the task counts measured, and nowhere else.
        for tasks in ["2", "4", "8", "16"] {
            assert!(
                svg.contains(&format!(">\n{tasks}\n</text>")),
                "{name}: {tasks}"
            );
        }
        assert!(
            !svg.contains(">\n32\n</text>") && !svg.contains(">\n3\n</text>"),
            "{name}"
        );
        // Percentages stop at 100.
        assert!(
            !svg.contains(">\n110\n</text>") && !svg.contains(">\n120\n</text>"),
            "{name}"
        );
    }
    let top = std::fs::read_to_string(plots.join("jacobi-top-call-sites.svg")).unwrap_or_default();
    // Only sites whose share grows, their significance said.
    assert!(
        top.contains("Waitall halo.c:52 (ρ 0.98, p 0.004, grows significantly)"),
        "{top}"
    );
    assert!(
        !top.contains("ρ -"),
        "a falling site among the top ones: {top}"
    );
    let ops = std::fs::read_to_string(plots.join("jacobi-operations.svg")).unwrap_or_default();
    assert!(ops.contains("Allreduce (ρ -0.98, p 0.004)"), "{ops}");
    assert!(ops.contains("dashed: it does not"), "{ops}");
    let extrap_text = std::fs::read_to_string(&extrap_file).unwrap_or_default();
    insta::with_settings!({
        snapshot_path => "../snapshots/analyze",
        prepend_module_to_snapshot => false,
        description => "perfskel analyze tests/data/analyze/mpip/jacobi --export extrap FILE",
    }, {
        insta::assert_snapshot!("jacobi_extrap", extrap_text);
    });
    // The export file and the plots are the user's now: kept unless --force.
    let again = |force: bool| {
        let mut args = vec![
            "analyze".to_string(),
            "tests/data/analyze/mpip/jacobi".into(),
            "--plot".into(),
            plots.display().to_string(),
            "--export".into(),
            "extrap".into(),
            extrap_file.display().to_string(),
        ];
        if force {
            args.push("--force".into());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        perfskel(&args)
    };
    std::fs::write(&extrap_file, "edited").unwrap_or_else(|e| panic!("{e}"));
    let refused = again(false);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("exists; pass --force"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(
        std::fs::read_to_string(&extrap_file).unwrap_or_default(),
        "edited"
    );
    let forced = again(true);
    assert!(forced.status.success(), "{}", stderr(&forced));
    assert_eq!(
        std::fs::read_to_string(&extrap_file).unwrap_or_default(),
        extrap_text
    );

    let output = perfskel(&[
        "analyze",
        "tests/data/analyze/mpip/jacobi",
        "--format",
        "json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let json: serde_json::Value =
        serde_json::from_slice(&output.stdout).unwrap_or(serde_json::Value::Null);
    let first = &json["applications"][0]["call_sites"][0];
    assert_eq!(first["site"]["operation"], "Waitall");
    assert_eq!(first["correlation"]["grows"], true);
    assert_eq!(json["applications"][0]["n_experiments"], 8);
}

#[test]
fn extrap_export_has_one_data_line_per_point() {
    let analysis = run_analysis(&experiments(&synthetic_csv("cg", Some(0), 3, 2)));
    let text = extrap::render(&analysis.applications[0]);
    assert!(text.contains("PARAMETER p\nPOINTS (4) (8) (16) (32) (64)\nMETRIC time\nREGION MPI\n"));
    let regions = text.matches("REGION ").count();
    let data = text.matches("\nDATA ").count();
    assert_eq!(data, regions * TASK_COUNTS.len());
    assert!(text.contains("REGION Wait@solver.c:120(solve)\n"));
    // Extra-P's number grammar has no exponent notation.
    assert!(!text
        .lines()
        .any(|l| l.starts_with("DATA") && l.contains(['e', 'E'])));
}

#[test]
fn one_experiment_is_rejected() {
    let output = perfskel(&["analyze", "tests/data/analyze/mpip/jacobi/jacobi.2.1.mpiP"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains(
        "application `jacobi`: 1 experiment(s); a rank correlation needs at least 3 runs"
    ));
}

#[test]
fn single_task_count_is_rejected() {
    let csv: String = synthetic_csv("cg", Some(0), 3, 1)
        .lines()
        .filter(|l| l.starts_with("experiment,") || l.starts_with("cg-16-"))
        .map(|l| format!("{l}\n"))
        .collect();
    let result = analyze::analyze(&experiments(&csv), &Options::default());
    assert_eq!(
        result.err(),
        Some(AnalyzeError::SingleTaskCount {
            application: "cg".into(),
            n_tasks: 16
        })
    );
}

#[test]
fn zero_communication_time_is_rejected() {
    let mut runs = experiments(&synthetic_csv("cg", None, 2, 1));
    for site in &mut runs[3].call_sites {
        for task in &mut site.tasks {
            task.total_s = 0.0;
        }
    }
    let name = runs[3].name.clone();
    let err = analyze::analyze(&runs, &Options::default()).err();
    assert_eq!(
        err,
        Some(AnalyzeError::ZeroCommunication {
            application: "cg".into(),
            experiment: name.clone()
        })
    );
    assert!(err
        .map(|e| e.to_string())
        .unwrap_or_default()
        .contains(&format!("experiment `{name}` has zero communication time")));
}

#[test]
fn truncated_report_fails_the_cli_with_file_and_line() {
    let output = perfskel(&[
        "analyze",
        "tests/data/analyze/mpip/jacobi",
        "tests/data/analyze/mpip/err/truncated-end.mpiP",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output)
        .contains("tests/data/analyze/mpip/err/truncated-end.mpiP:73: truncated mpiP report"));
}

#[test]
fn mixed_applications_are_analyzed_separately() {
    let mut runs = experiments(&synthetic_csv("cg", Some(1), 2, 3));
    runs.extend(experiments(&synthetic_csv("bt", Some(4), 2, 4)));
    let analysis = run_analysis(&runs);
    let names: Vec<&str> = analysis
        .applications
        .iter()
        .map(|a| a.application.as_str())
        .collect();
    assert_eq!(names, ["bt", "cg"]);
    assert_eq!(
        analysis.applications[0].call_sites[0].site.operation,
        "Barrier"
    );
    assert_eq!(
        analysis.applications[1].call_sites[0].site.operation,
        "Isend"
    );

    let only_cg = analyze::analyze(
        &runs,
        &Options {
            application: Some("cg".into()),
            ..Options::default()
        },
    );
    assert!(matches!(only_cg, Ok(a) if a.applications.len() == 1));
    let unknown = analyze::analyze(
        &runs,
        &Options {
            application: Some("sp".into()),
            ..Options::default()
        },
    );
    assert_eq!(
        unknown.err().map(|e| e.to_string()).unwrap_or_default(),
        "no experiments of application `sp`; the input has: bt, cg"
    );

    // An application with too few runs among good ones is named in the error.
    let mut with_stray = runs.clone();
    let mut stray = runs[0].clone();
    stray.application = "lu".into();
    with_stray.push(stray);
    assert_eq!(
        analyze::analyze(&with_stray, &Options::default()).err(),
        Some(AnalyzeError::TooFewExperiments {
            application: "lu".into(),
            n_experiments: 1
        })
    );
}

#[test]
fn extrap_export_of_mixed_applications_asks_for_one() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut csv = synthetic_csv("cg", Some(1), 2, 3);
    csv.push_str(
        synthetic_csv("bt", None, 2, 4)
            .split_once('\n')
            .map_or("", |(_, rows)| rows),
    );
    let input = dir.path().join("mixed.csv");
    std::fs::write(&input, csv).unwrap_or_else(|e| panic!("{e}"));
    let export = dir.path().join("out.txt");
    let output = perfskel(&[
        "analyze",
        &input.display().to_string(),
        "--export",
        "extrap",
        &export.display().to_string(),
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("the input has 2: bt, cg; choose one with --application"));
}

#[test]
fn trace_directory_with_a_missing_rank_is_rejected_naming_it() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let trace = dir.path().join("run-4");
    std::fs::create_dir(&trace).unwrap_or_else(|e| panic!("{e}"));
    let manifest = perfskel_compiler::trace::Manifest::build(
        perfskel_compiler::trace::manifest::RunInfo {
            command: vec!["mpirun".into(), "./cg".into()],
            ..Default::default()
        },
        &[
            perfskel_compiler::trace::manifest::RankSummary::Missing,
            perfskel_compiler::trace::manifest::RankSummary::Missing,
        ],
    );
    std::fs::write(trace.join("manifest.json"), manifest.to_json())
        .unwrap_or_else(|e| panic!("{e}"));
    let output = perfskel(&["analyze", &dir.path().display().to_string()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains(
            "trace of 2 ranks is not whole: missing ranks 0, 1 (no rank-00000.pst, \
             rank-00001.pst); analyze needs every rank of a run"
        ),
        "{}",
        stderr(&output)
    );
}

/// The Done-when of issue 7: real traces of `examples/apps/cg.c` recorded under Open MPI
/// at 1, 2, 4 and 8 ranks, analyzed together.
#[test]
fn cli_over_recorded_traces_of_an_example_at_four_task_counts() {
    use crate::tracer::{build_app, Mpi, MPI_LOCK};
    let exe = build_app(Mpi::OpenMpi, "cg");
    let exe_text = exe.display().to_string();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut trace_dirs = Vec::new();
    for n in [1u32, 2, 4, 8] {
        let out_dir = dir.path().join(format!("cg-{n}"));
        let out_text = out_dir.display().to_string();
        let np = n.to_string();
        let output = {
            let _guard = MPI_LOCK.lock().unwrap_or_else(|e| e.into_inner());
            crate::tracer::perfskel(&[
                "record",
                "-o",
                &out_text,
                "--",
                "mpirun.openmpi",
                "--oversubscribe",
                "-np",
                &np,
                &exe_text,
                "32",
                "20",
            ])
        };
        assert!(
            output.status.success(),
            "perfskel record at {n} ranks: {}",
            stderr(&output)
        );
        trace_dirs.push(out_text);
    }

    let mut args = vec!["analyze", "--format", "json", "--top", "0"];
    args.extend(trace_dirs.iter().map(String::as_str));
    let output = crate::tracer::perfskel(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    let doc: serde_json::Value =
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}"));
    let apps = doc["applications"].as_array().expect("applications");
    assert_eq!(apps.len(), 1, "{doc:#}");
    let app = &apps[0];
    assert_eq!(app["application"], "cg");
    assert_eq!(app["n_experiments"], 4);
    assert_eq!(app["task_counts"], serde_json::json!([1, 2, 4, 8]));
    let experiments = app["experiments"].as_array().expect("experiments");
    let mut tasks: Vec<u64> = experiments
        .iter()
        .map(|e| e["n_tasks"].as_u64().expect("n_tasks"))
        .collect();
    tasks.sort_unstable();
    assert_eq!(tasks, [1, 2, 4, 8]);
    for e in experiments {
        let comm = e["comm_time_s"].as_f64().expect("comm time");
        let app_time = e["app_time_s"].as_f64().expect("run times from the trace");
        assert!(comm > 0.0 && comm <= app_time, "{e}");
    }

    // Every MPI call of cg.c is one call site, named by its line in the source.
    let source = std::fs::read_to_string(root().join("examples/apps/cg.c"))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut expected: Vec<(String, u64, String)> = Vec::new();
    for (i, line) in source.lines().enumerate() {
        for op in ["Allreduce", "Irecv", "Isend", "Waitall"] {
            if line.trim_start().starts_with(&format!("MPI_{op}(")) {
                expected.push(("cg.c".into(), i as u64 + 1, op.into()));
            }
        }
    }
    expected.sort();
    assert_eq!(expected.len(), 8, "cg.c changed: {expected:?}");
    let mut found: Vec<(String, u64, String)> = app["call_sites"]
        .as_array()
        .expect("call sites")
        .iter()
        .map(|s| {
            let site = &s["site"];
            assert_eq!(site["function"], "main", "{s}");
            (
                site["file"].as_str().expect("file").to_owned(),
                site["line"].as_u64().expect("line"),
                site["operation"].as_str().expect("operation").to_owned(),
            )
        })
        .collect();
    found.sort();
    assert_eq!(found, expected);

    // The table names the sites by file:line too.
    let mut args = vec!["analyze"];
    args.extend(trace_dirs.iter().map(String::as_str));
    let output = crate::tracer::perfskel(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    let table = text(&output.stdout);
    let waitall = expected.iter().find(|s| s.2 == "Waitall").expect("Waitall");
    assert!(table.contains(&format!("cg.c:{}", waitall.1)), "{table}");

    // A rank that lost its end record (killed before MPI_Finalize) fails the analysis.
    let rank_file = dir.path().join("cg-2/rank-00001.pst");
    let bytes = std::fs::read(&rank_file).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&rank_file, &bytes[..bytes.len() - 1]).unwrap_or_else(|e| panic!("{e}"));
    let output = crate::tracer::perfskel(&args);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains(
            "cg-2: trace of 2 ranks is not whole: incomplete rank 1 (no end record: \
             the rank did not reach MPI_Finalize)"
        ),
        "{}",
        stderr(&output)
    );
}

fn data_dir() -> PathBuf {
    root().join("tests/data/analyze")
}

fn perfskel(args: &[&str]) -> std::process::Output {
    crate::common::perfskel(&root(), args)
}

fn stderr(output: &std::process::Output) -> String {
    text(&output.stderr)
}

/// Inputs that would silently change the analysis are said: the same report twice (a
/// copy is not a replicate: read once, with a warning), a report the name says is an
/// mpiP report but that is not UTF-8 (UTF-16 from a Windows editor: an error naming the
/// file, not one experiment fewer), and a CSV row given twice (an error at its line, not
/// a call site counted twice).
#[test]
fn duplicated_and_unreadable_inputs_are_said() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let src = std::path::Path::new("tests/data/analyze/mpip/jacobi");
    let copy = dir.path().join("copy");
    std::fs::create_dir(&copy).unwrap_or_else(|e| panic!("{e}"));
    let mut names: Vec<_> = std::fs::read_dir(src)
        .unwrap_or_else(|e| panic!("{e}"))
        .flatten()
        .map(|e| e.file_name())
        .collect();
    names.sort();
    for name in &names {
        std::fs::copy(src.join(name), copy.join(name)).unwrap_or_else(|e| panic!("{e}"));
    }
    let first = names[0].to_string_lossy().into_owned();
    std::fs::copy(src.join(&first), copy.join(format!("again-{first}")))
        .unwrap_or_else(|e| panic!("{e}"));
    let copy_text = copy.display().to_string();
    let out = perfskel(&["analyze", &copy_text, "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("is the same file as"),
        "{}",
        stderr(&out)
    );
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    assert_eq!(json["applications"][0]["n_experiments"], names.len());

    // UTF-16 with a byte-order mark, as a Windows editor saves it.
    let text = std::fs::read_to_string(src.join(&first)).unwrap_or_default();
    let mut utf16 = vec![0xff, 0xfe];
    utf16.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
    std::fs::write(copy.join(format!("again-{first}")), utf16).unwrap_or_else(|e| panic!("{e}"));
    let out = perfskel(&["analyze", &copy_text]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("not UTF-8 text (UTF-16"),
        "{}",
        stderr(&out)
    );

    let csv = dir.path().join("twice.csv");
    let mut text = synthetic_csv("cg", None, 1, 3);
    let row = text.lines().nth(1).unwrap_or_default().to_string();
    text.push_str(&row);
    text.push('\n');
    std::fs::write(&csv, &text).unwrap_or_else(|e| panic!("{e}"));
    let out = perfskel(&["analyze", &csv.display().to_string()]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("each call site of a task is one row"),
        "{}",
        stderr(&out)
    );
}
