//! Tests of the scaling pass: loops cut outer-first, coupled loops cut by a common
//! divisor, warnings with spans, the expected time, message sizes as the last resort, and
//! skeletons too short to scale.

use perfskel_grammar::ast::*;
use perfskel_grammar::{parse, print};

use super::*;
use crate::check::{check, Options};

fn scaled(source: &str, ratio: u64) -> Result<Scaled, Diag> {
    let (program, diags) = parse(source);
    assert!(diags.is_empty(), "{diags:?}");
    let checked = check(&program, source, Options::default());
    let info = checked
        .info
        .unwrap_or_else(|| panic!("{:?}", checked.diags));
    let result = scale(
        &program,
        &info,
        &ScaleOptions {
            ratio,
            model: Model::default(),
        },
    );
    if let Ok(s) = &result {
        // The scaled program is itself a clean skeleton.
        let again = check(&s.program, source, Options::default());
        assert!(
            again.info.is_some(),
            "{:?}\n{}",
            again.diags,
            print(&s.program)
        );
    }
    result
}

/// The loop counts of a program in pre-order, as text.
fn counts(program: &Program) -> Vec<String> {
    fn walk(block: &Block, out: &mut Vec<String>) {
        for stmt in &block.stmts {
            match &stmt.kind {
                StmtKind::Loop(l) => {
                    out.push(perfskel_grammar::printer::expr(&l.count));
                    walk(&l.body, out);
                }
                StmtKind::If(i) => {
                    walk(&i.then_block, out);
                    if let Some(Else::Block(b)) = &i.else_branch {
                        walk(b, out);
                    }
                }
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(&program.body, &mut out);
    out
}

fn computes(program: &Program) -> Vec<f64> {
    fn walk(block: &Block, out: &mut Vec<f64>) {
        for stmt in &block.stmts {
            match &stmt.kind {
                StmtKind::Compute(c) => out.push(c.time.mean_seconds()),
                StmtKind::Loop(l) => walk(&l.body, out),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(&program.body, &mut out);
    out
}

const NEST: &str = "skeleton t\nranks 4\ntopology ring\napp_time 10 s\n\
                    loop 10 {\n    loop 100 {\n        compute 10 ms\n        sendrecv to next 1 KiB from prev 1 KiB\n    }\n}\n";

#[test]
fn outer_loops_are_cut_first() {
    let at = |k| counts(&scaled(NEST, k).expect("scales").program);
    assert_eq!(at(1), ["10", "100"]);
    assert_eq!(at(10), ["1", "100"]);
    assert_eq!(at(100), ["1", "10"]);
    assert_eq!(at(1000), ["1", "1"]);
}

#[test]
fn expected_time_hits_the_target_and_compute_absorbs_communication() {
    for k in [1, 10, 100, 1000] {
        let s = scaled(NEST, k).expect("scales");
        let target = 10.0 / k as f64;
        assert!(
            (s.expected_skeleton_s - target).abs() / target < 0.01,
            "1:{k}: expected {} for target {target}",
            s.expected_skeleton_s
        );
        assert!((s.ratio_reached - k as f64).abs() / (k as f64) < 0.01);
        // Each iteration's communication stays, so its compute span is a little shorter
        // than the 10 ms it stands for (the model's unscaled run is 10 s + messages).
        let c = computes(&s.program)[0];
        assert!(c < 10e-3 && c > 9.5e-3, "1:{k}: compute {c}");
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    }
}

#[test]
fn a_short_loop_warns_with_its_span_and_scales_compute_instead() {
    let source = "skeleton t\nranks 2\ntopology ring\napp_time 3 s\nloop 3 {\n    compute 1 s\n    barrier\n}\n";
    let s = scaled(source, 1000).expect("scales");
    let warning = s
        .warnings
        .iter()
        .find(|d| d.code == "loop-not-cut")
        .expect("a loop-not-cut warning");
    assert_eq!(
        warning.message,
        "loop of 3 iterations cannot be cut by 1000; compute inside scaled instead"
    );
    let span = warning.primary.as_ref().expect("a span").span;
    assert_eq!(&source[span.range()], "3");
    assert_eq!(counts(&s.program), ["1"]);
    // The one iteration left stands for 3: its compute is 1 s / 333.
    let c = computes(&s.program)[0];
    assert!((c - 1.0 / 333.3).abs() < 1e-4, "{c}");
}

#[test]
fn partner_loops_are_cut_by_a_common_divisor() {
    let source = "skeleton mw\nranks 4\ntopology star\napp_time 30 s\n\
                  if rank == 0 {\n    loop 40 * (nranks - 1) {\n        recv any 1 KiB\n    }\n} else {\n    loop 40 {\n        compute 250 ms\n        send hub 1 KiB\n    }\n}\n";
    assert_eq!(
        counts(&scaled(source, 10).expect("scales").program),
        ["12", "4"]
    );
    // 1:100 cannot be reached by a divisor of 40: 40 is the nearest, with a warning.
    let s = scaled(source, 100).expect("scales");
    assert_eq!(counts(&s.program), ["3", "1"]);
    assert!(s.warnings.iter().any(|d| d.code == "loop-not-cut"));
    assert!((s.ratio_reached - 100.0).abs() < 1.0, "{}", s.ratio_reached);
}

#[test]
fn rank_dependent_counts_stay_expressions() {
    let source = "skeleton t\nranks 4\ntopology ring\napp_time 40 s\n\
                  loop 10 * (rank + 1) {\n    compute 400 ms\n}\nbarrier\n";
    let s = scaled(source, 10).expect("scales");
    assert_eq!(counts(&s.program), ["10 * (rank + 1) / 10"]);
}

#[test]
fn communication_bound_skeletons_shrink_messages() {
    let source = "skeleton t\nranks 4\ntopology complete\napp_time 1 s\nloop 2 {\n    alltoall 64 MiB\n    compute 1 ms\n}\n";
    let s = scaled(source, 1000).expect("scales");
    assert!(s.size_factor < 1.0, "{}", s.size_factor);
    assert!(s.warnings.iter().any(|d| d.code == "messages-scaled"));
    assert!(
        (s.expected_skeleton_s - 1e-3).abs() < 1e-4,
        "{}",
        s.expected_skeleton_s
    );
}

#[test]
fn latency_floors_and_missing_compute_are_reported() {
    // 60 barriers outside any loop take about 180 us under the default model: a target
    // of 100 us cannot be reached.
    let barriers = "barrier\n".repeat(60);
    let source = format!("skeleton t\nranks 8\ntopology ring\napp_time 10 ms\n{barriers}");
    let s = scaled(&source, 100).expect("scales");
    assert!(
        s.warnings.iter().any(|d| d.code == "ratio-not-reached"),
        "{:?}",
        s.warnings
    );
    assert!(s
        .warnings
        .iter()
        .any(|d| d.code == "communication-not-scaled"));
    assert!(s.ratio_reached < 100.0, "{}", s.ratio_reached);
    // Without compute a loop of barriers cut to one runs too fast, and says so.
    let source = "skeleton t\nranks 8\ntopology ring\napp_time 1 s\nloop 10000 {\n    barrier\n}\n";
    let s = scaled(source, 1000).expect("scales");
    assert_eq!(counts(&s.program), ["10"]);
    let warning = s
        .warnings
        .iter()
        .find(|d| d.code == "ratio-not-reached")
        .expect("warns");
    assert!(
        warning.message.contains("too little compute"),
        "{}",
        warning.message
    );
}

#[test]
fn too_short_skeletons_are_errors() {
    let source = "skeleton t\nranks 2\ntopology ring\napp_time 50 ms\nloop 10 { compute 5 ms }\n";
    let e = scaled(source, 1000).expect_err("too short");
    assert_eq!(e.code, "too-short-to-scale");
    assert!(e.message.contains("50.0 us"), "{}", e.message);
    assert!(e.notes[0].contains("1:500"), "{:?}", e.notes);
    assert!(scaled(source, 100).is_ok());
}

#[test]
fn scaled_durations_read_well() {
    assert_eq!(
        duration_of(0.0196, TimeUnit::S),
        Duration::new(19.6, TimeUnit::Ms)
    );
    assert_eq!(
        duration_of(1.23456e-4, TimeUnit::S),
        Duration::new(123.5, TimeUnit::Us)
    );
    assert_eq!(
        duration_of(2.5, TimeUnit::Ms),
        Duration::new(2.5, TimeUnit::S)
    );
    assert_eq!(
        duration_of(3e-9, TimeUnit::Ms),
        Duration::new(3.0, TimeUnit::Ns)
    );
    assert_eq!(
        duration_of(0.0, TimeUnit::Ms),
        Duration::new(0.0, TimeUnit::Ms)
    );
}
