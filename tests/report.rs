//! `perfskel report`: the HTML report of a real trace (the stencil at 4 ranks under Open
//! MPI), its skeleton and a real run of the skeleton, opened in headless Chromium: the
//! page's DOM has every section, and the screenshot shows the heat maps' colours.

use std::path::Path;
use std::process::Command;

use crate::tracer::{perfskel, MPI_LOCK};

/// The browser: Debian's `chromium` (scripts/setup.sh installs it).
fn chromium() -> String {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if Command::new(name)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return name.to_string();
        }
    }
    panic!("no headless Chromium on PATH: scripts/setup.sh installs Debian's `chromium`");
}

/// Runs headless Chromium on the file with `args` (`--dump-dom`, `--screenshot=...`).
fn browse(page: &Path, args: &[&str]) -> std::process::Output {
    let profile = tempfile::tempdir().expect("profile dir");
    Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium")
}

fn ok(out: &std::process::Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_report_of_a_recorded_stencil_opens_in_a_browser() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/apps/stencil.c");
    let built = Command::new("mpicc.openmpi")
        .args(["-O2", "-g", "-o", &d("stencil")])
        .arg(&src)
        .output()
        .expect("mpicc.openmpi");
    ok(&built, "build the stencil");
    {
        let _guard = MPI_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let recorded = perfskel(&[
            "record",
            "-o",
            &d("trace"),
            "--",
            "mpirun.openmpi",
            "-np",
            "4",
            &d("stencil"),
            "64",
            "300",
        ]);
        ok(&recorded, "record");
    }
    ok(
        &perfskel(&["skeletonize", &d("trace"), "-o", &d("app.skel")]),
        "skeletonize",
    );
    ok(
        &perfskel(&[
            "compile",
            &d("app.skel"),
            "--ratio",
            "1:10",
            "-o",
            &d("out"),
        ]),
        "compile",
    );
    let run = {
        let _guard = MPI_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        ok(
            &perfskel(&["run", &d("out"), "-np", "4", "--repeat", "2"]),
            "run",
        )
    };
    std::fs::write(d("run.txt"), &run).expect("write run.txt");
    // The skeleton `run` built, traced as any MPI program.
    {
        let _guard = MPI_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        ok(
            &perfskel(&[
                "record",
                "-o",
                &d("skeleton-trace"),
                "--",
                "mpirun.openmpi",
                "-np",
                "4",
                &d("out/skeleton"),
            ]),
            "record the skeleton",
        );
    }
    let report = d("report.html");
    let args = [
        "report",
        &d("trace"),
        "--skeleton",
        &d("app.skel"),
        "--run",
        &d("run.txt"),
        "--skeleton-trace",
        &d("skeleton-trace"),
        "-o",
        &report,
    ];
    ok(&perfskel(&args), "report");
    let html = std::fs::read_to_string(&report).expect("report written");

    // One self-contained file: nothing loaded from elsewhere, no script.
    for outside in ["<script", "<link", "src=", "<img", "@import", "url("] {
        assert!(!html.contains(outside), "the report has {outside}");
    }
    assert_eq!(
        html.matches("http").count(),
        html.matches("http://www.w3.org/2000/svg").count(),
        "only the SVG namespace names a URL"
    );
    assert!(
        !html.contains(&*dir.path().to_string_lossy()),
        "no absolute path"
    );
    // Both matrices on one scale, the prediction of the run given, the call sites linked
    // both ways with the skeleton's lines.
    assert_eq!(html.matches("bytes sent, log scale").count(), 2);
    assert!(html.contains("the application (traced)"));
    assert!(html.contains("the skeleton (its simulation by check)"));
    assert!(
        html.contains("<td class=\"n\">1:10</td>"),
        "the run's ratio"
    );
    assert!(html.contains("<td>2 ("), "the two runs and their spread");
    assert!(html.contains("<code>stencil.c:33</code>"));
    for href in html.split("href=\"#").skip(1) {
        let id = &href[..href.find('"').expect("closed")];
        assert!(
            html.contains(&format!("id=\"{id}\"")),
            "link to #{id} has a target"
        );
    }
    assert!(
        html.contains("\">&quot;stencil.c:33&quot;</a>"),
        "the skeleton's site links to its row"
    );
    // Both matrices are the stencil's 8 pairs, 300 x 4 x 2 messages.
    assert_eq!(
        html.matches("<td class=\"n\">2400</td>").count(),
        2,
        "{html}"
    );
    // One iteration of each, found in the loops of rank 0: the stencil's 300 steps, the
    // skeleton's 30 at 1:10, five calls each, every rank drawn.
    assert!(html.contains(
        "iteration 151 of 300 of rank 0&#39;s loop (5 calls a rank, 300 such iterations in all)"
    ));
    // The skeleton's timed pass, after its warm-up: the longest of its loops.
    assert!(html.contains("iteration 16 of 30 of the longest of rank 0&#39;s "));
    let timeline = &html[html.find("id=\"timeline-svg\"").expect("the timeline")..];
    let timeline = &timeline[..timeline.find("</svg>").expect("closed")];
    for rank in 0..4 {
        assert_eq!(
            timeline.matches(&format!(">rank {rank}<")).count(),
            2,
            "rank {rank} in both panels"
        );
    }
    // The application's calls at its lines, the skeleton's (built without -g) at
    // symbols. Each rank swaps four times and reduces once an iteration; the window is
    // rank 0's iteration, and with 4 ranks on 2 cores another rank's first or last swap
    // may fall just outside it, so each rank shows at least two of its four swaps. The
    // skeleton's iteration (1:10) is ten times shorter: there rank 0 shows its own
    // iteration's swaps and reduction, and the other ranks the swaps that overlap rank 0's
    // (its partners', at least), not each a given share of theirs.
    let (app_panel, skel_panel) = timeline
        .split_once("the skeleton (its traced run)")
        .expect("the skeleton's panel");
    let skel_swaps = |rank: usize| {
        skel_panel
            .matches(&format!("rank {rank}: MPI_Sendrecv at "))
            .count()
    };
    assert!(skel_swaps(0) >= 2, "rank 0's swaps in the skeleton");
    assert!(
        skel_swaps(1) + skel_swaps(2) + skel_swaps(3) >= 2,
        "the swaps of rank 0's partners in the skeleton"
    );
    assert!(skel_panel.contains("rank 0: MPI_Allreduce at "));
    for rank in 0..4 {
        let swap = format!("rank {rank}: MPI_Sendrecv at ");
        let at_line = format!("rank {rank}: MPI_Sendrecv at stencil.c:");
        assert!(
            app_panel.matches(&at_line).count() >= 2,
            "rank {rank}'s swaps"
        );
        assert_eq!(
            app_panel.matches(&swap).count(),
            app_panel.matches(&at_line).count(),
            "every swap of the application at its line"
        );
        assert_eq!(
            skel_panel.matches(&at_line).count(),
            0,
            "the skeleton's swaps at its symbols"
        );
        let reduce = format!("rank {rank}: MPI_Allreduce at ");
        assert!(app_panel.contains(&format!("{reduce}stencil.c:60")));
    }

    // The same picture alone, as an SVG file, from the trace and from its OTF2 export.
    let svg = d("timeline.svg");
    let alone = ok(
        &perfskel(&[
            "trace",
            "timeline",
            &d("trace"),
            "--skeleton-trace",
            &d("skeleton-trace"),
            "-o",
            &svg,
        ]),
        "trace timeline",
    );
    assert!(
        alone.contains("iteration 151 of 300 of rank 0's loop"),
        "{alone}"
    );
    assert!(
        alone.contains("the skeleton: iteration 16 of 30 of "),
        "{alone}"
    );
    let drawn = std::fs::read_to_string(&svg).expect("timeline written");
    assert!(drawn.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert_eq!(drawn.matches(">rank 3<").count(), 2);
    let again = perfskel(&["trace", "timeline", &d("trace"), "-o", &svg]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists; pass --force"));
    ok(
        &perfskel(&["trace", "export", &d("trace"), "--otf2", &d("otf2")]),
        "trace export --otf2",
    );
    let from_otf2 = ok(
        &perfskel(&["trace", "timeline", &d("otf2"), "-o", &d("otf2.svg")]),
        "trace timeline of the OTF2 archive",
    );
    assert!(
        from_otf2.contains("iteration 151 of 300 of rank 0's loop"),
        "{from_otf2}"
    );
    // Rank 0's loops choose the window: without its file, an error that says so.
    std::fs::create_dir(d("no-rank-0")).expect("mkdir");
    for rank in 1..4 {
        let name = format!("rank-{rank:05}.pst");
        std::fs::copy(d(&format!("trace/{name}")), d(&format!("no-rank-0/{name}")))
            .expect("copy a rank file");
    }
    let missing = perfskel(&["trace", "timeline", &d("no-rank-0"), "-o", &d("x.svg")]);
    assert!(!missing.status.success());
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("rank 0's file is missing"),
        "{}",
        String::from_utf8_lossy(&missing.stderr)
    );

    // Never over an existing file, and never over the trace, even with --force.
    let again = perfskel(&args);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists; pass --force"));
    let manifest = d("trace/manifest.json");
    let before = std::fs::read(&manifest).expect("manifest");
    let over = perfskel(&["report", &d("trace"), "-o", &manifest, "--force"]);
    assert!(!over.status.success());
    assert!(String::from_utf8_lossy(&over.stderr).contains("is a file of the trace"));
    assert_eq!(std::fs::read(&manifest).expect("manifest"), before);

    // In the browser: the DOM parsed has every section and figure.
    let dom = ok(
        &browse(Path::new(&report), &["--dump-dom"]),
        "chromium --dump-dom",
    );
    for id in [
        "run",
        "prediction",
        "matrix",
        "ranks",
        "timeline",
        "sites",
        "skeleton",
        "line-1",
    ] {
        assert!(dom.contains(&format!("id=\"{id}\"")), "the page has #{id}");
    }
    assert_eq!(
        dom.matches("<svg").count(),
        4,
        "two heat maps, the timeline and the rank chart"
    );
    // The screenshot is a picture of it: the heat maps' darkest colour (the heaviest
    // pairs) and the chart's colours are on it.
    let shot = dir.path().join("report.png");
    ok(
        &browse(
            Path::new(&report),
            &[
                &format!("--screenshot={}", shot.display()),
                "--window-size=1300,2000",
                "--hide-scrollbars",
            ],
        ),
        "chromium --screenshot",
    );
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&shot).expect("screenshot written"),
    ));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut pixels = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut pixels).expect("a frame");
    assert_eq!((info.width, info.height), (1300, 2000));
    let channels = info.color_type.samples();
    let near = |rgb: [u8; 3]| {
        pixels
            .chunks(channels)
            .filter(|p| p.iter().zip(rgb).all(|(&a, b)| a.abs_diff(b) <= 6))
            .count()
    };
    let darkest = near([0x44, 0x01, 0x54]);
    assert!(
        darkest > 10_000,
        "the heat maps' heaviest cells: {darkest} pixels"
    );
    assert!(near([0x3b, 0x52, 0x8b]) > 1_000, "the MPI bars");
    assert!(
        near([0x2f, 0x6d, 0xb5]) > 1_000,
        "the timeline's sends and receives"
    );
    // Compute is drawn on the core in green and off it in grey: how it splits depends on
    // how busy the machine was while the stencil was traced (4 ranks on 2 cores, beside
    // the other tests), so the test asks for both together and some of each.
    let (on_core, off_core) = (near([0xb9, 0xe3, 0xb3]), near([0xc0, 0xc0, 0xc0]));
    assert!(
        on_core > 100 && on_core + off_core > 1_000,
        "the timeline's compute: {on_core} pixels on the core, {off_core} off it"
    );
}
