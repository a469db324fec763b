//! Tests of the scaling pass: loops cut outer-first, coupled loops cut by a common
//! divisor, warnings with spans, the expected time, message sizes as the last resort, and
//! skeletons too short to scale.

use perfskel_grammar::ast::*;
use perfskel_grammar::{parse, print};

use super::*;
use crate::check::{check, verify, Options};

fn scaled(source: &str, ratio: u64) -> Result<Scaled, Box<Diag>> {
    scaled_for(source, ratio, Target::AppTime)
}

fn scaled_for(source: &str, ratio: u64, target: Target) -> Result<Scaled, Box<Diag>> {
    let (program, diags) = parse(source);
    assert!(diags.is_empty(), "{diags:?}");
    let verified = verify(program, source, Options::default()).unwrap_or_else(|d| panic!("{d:?}"));
    let result = scale(
        &verified,
        &ScaleOptions {
            ratio,
            model: Model::default(),
            target,
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
    // At 1:1 nothing is scaled: compute stays as written and the model's time is the
    // application's plus the messages it models.
    let s = scaled(NEST, 1).expect("scales");
    assert_eq!(computes(&s.program)[0], 10e-3);
    assert!(s.expected_skeleton_s > 10.0, "{}", s.expected_skeleton_s);
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    for k in [10, 100, 1000] {
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
        // At 1:1000 it runs 10 ms: too short to time reliably, and said so.
        let codes: Vec<&str> = s.warnings.iter().map(|d| d.code).collect();
        let short: &[&str] = if k == 1000 {
            &["too-short-to-time"]
        } else {
            &[]
        };
        assert_eq!(codes, short, "{:?}", s.warnings);
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

/// A master/worker run at 2 ranks: the master answers 119 results in its loop and the
/// last after it, the worker's loop takes 120 tasks; 119 and 120 have no common divisor
/// but 1, so every message used to stay and only compute shrank (where a message costs
/// a time slice, ranks sharing a core, the skeleton then ran 10x the application's
/// time x K). Both loops lose the same number of iterations and still meet message for
/// message; loops whose counts are far apart (the 8-rank master's 280 against each
/// worker's 40) are cut by a common divisor as before.
#[test]
fn partner_loops_without_a_common_divisor_lose_the_same_iterations() {
    let source = "skeleton mw\nranks 2\ntopology chain\napp_time 6.7 s\n\
                  send next 16 B\n\
                  if rank == 0 {\n    loop 119 {\n        recv next 8 B\n        send next 16 B\n    }\n} else {\n    loop 120 {\n        recv prev 16 B\n        compute 55 ms\n        send prev 8 B\n    }\n}\n\
                  recv next 8 B\nsend next 16 B\nrecv prev 16 B\n";
    let s = scaled_for(source, 100, Target::Model).expect("scales");
    assert_eq!(counts(&s.program), ["1", "2"]);
    assert!((s.ratio_reached - 100.0).abs() < 1.0, "{}", s.ratio_reached);
    let s = scaled_for(source, 10, Target::Model).expect("scales");
    assert_eq!(counts(&s.program), ["12", "13"]);
    // Unchanged where a common divisor reaches near K.
    let star = "skeleton mw\nranks 4\ntopology star\napp_time 30 s\n\
                if rank == 0 {\n    loop 40 * (nranks - 1) {\n        recv any 1 KiB\n    }\n} else {\n    loop 40 {\n        compute 250 ms\n        send hub 1 KiB\n    }\n}\n";
    assert_eq!(
        counts(
            &scaled_for(star, 100, Target::Model)
                .expect("scales")
                .program
        ),
        ["3", "1"]
    );
}

/// Data-dependent iteration counts (HPCC's RandomAccess): rank 0 runs 4197 iterations
/// of a barrier and an all-to-all, rank 1 runs 4176 and, after the final exchange, 21
/// more, or 4168 and one written out; no common divisor but 1, yet each rank's loops
/// rounded by their own share (the 21 and the written-out one to none) still match.
/// Where rounding breaks the match (4149 + 1 against 4150 at 1:100: 41 + 0 against 42)
/// the loops are cut by a common divisor as before.
#[test]
fn collective_loops_of_rank_branches_are_rounded_each_when_they_still_match() {
    let body = "compute 15 us\n        barrier @ \"b\"\n        alltoall 8 KiB @ \"a\"";
    let skel = |r1: &str, r0: &str, tail: &str| {
        format!(
            "skeleton ra\nranks 2\ntopology chain\napp_time 1 s\ncompute 500 ms\n\
             if rank == 1 {{\n    loop {r1} {{\n        {body}\n    }}\n}} else {{\n    loop {r0} {{\n        {body}\n    }}\n}}\n\
             barrier @ \"f\"\nalltoall 8 KiB @ \"g\"\n{tail}"
        )
    };
    let extra_loop = skel(
        "4176",
        "4197",
        &format!("if rank == 1 {{\n    loop 21 {{\n        {body}\n    }}\n}}\n"),
    );
    let s = scaled(&extra_loop, 100).expect("scales");
    assert_eq!(counts(&s.program), ["42", "42"], "{}", print(&s.program));
    assert!(!s.warnings.iter().any(|d| d.code == "loop-not-cut"));
    let written_out = skel(
        "4168",
        "4169",
        "if rank == 1 {\n    barrier @ \"b\"\n    alltoall 8 KiB @ \"a\"\n}\n",
    );
    let s = scaled(&written_out, 100).expect("scales");
    assert_eq!(counts(&s.program), ["42", "42"], "{}", print(&s.program));
    assert_eq!(print(&s.program).matches("alltoall").count(), 3);
    // At 1:1 nothing is cut or left out.
    let s = scaled(&written_out, 1).expect("scales");
    assert_eq!(counts(&s.program), ["4168", "4169"]);
    assert_eq!(print(&s.program).matches("alltoall").count(), 4);
    // Rounded apart: a common divisor (1), with the warning.
    let apart = skel(
        "4149",
        "4150",
        "if rank == 1 {\n    barrier @ \"b\"\n    alltoall 8 KiB @ \"a\"\n}\n",
    );
    let s = scaled(&apart, 100).expect("scales");
    assert_eq!(counts(&s.program), ["4149", "4150"]);
    assert!(s.warnings.iter().any(|d| d.code == "loop-not-cut"));
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
    // Without compute a loop of barriers cut to 10 runs far too fast (30 us for a target
    // of 1 ms): refused, with the ratio it reaches.
    let source = "skeleton t\nranks 8\ntopology ring\napp_time 1 s\nloop 10000 {\n    barrier\n}\n";
    let e = scaled(source, 1000).expect_err("far from the ratio asked");
    assert_eq!(e.code, "ratio-far-from-asked");
    assert!(e.message.contains("too little compute"), "{}", e.message);
    assert!(
        e.notes
            .iter()
            .any(|n| n.contains("ask for a ratio near 1:")),
        "{:?}",
        e.notes
    );
    // Within 2x of the ratio asked it is a warning: 10000 barriers at 1:100 reach about
    // 1:33000 with the model's 3 us each, so 300 iterations of 1 ms compute make 3 ms.
    let source = "skeleton t\nranks 8\ntopology ring\napp_time 1 s\nloop 10000 {\n    compute 97 us\n    barrier\n}\n";
    let s = scaled(source, 100).expect("scales");
    assert_eq!(counts(&s.program), ["100"]);
}

/// Partner loops that one common divisor does not reach (HPCC's panel broadcast: a
/// loop nested in a branch's loop against a loop of the other branch) would be cut
/// apart and leave messages unmatched: the plan keeps every point-to-point loop of such
/// a block whole, and the scaled program still runs.
#[test]
fn partner_loops_out_of_one_divisors_reach_are_kept_whole() {
    let source = "skeleton t\nranks 2\ntopology ring\napp_time 1 s\nloop 100 {\n    compute 10 ms\n}\nif rank == 0 {\n    loop 2 {\n        loop 9 {\n            send rank(1) 8 B\n            recv rank(1) 8 B\n        }\n    }\n} else {\n    loop 18 {\n        recv rank(0) 8 B\n        send rank(0) 8 B\n    }\n}\n";
    // Cut by the common divisor 2 (loop 2 to 1, loop 18 to 9), the nested loop of 9
    // would be cut again and rank 0 would send 2 messages where rank 1 waits for 9: the
    // nested loop is kept whole (the loop its errors point at), and the pairs match.
    let s = scaled(source, 10).expect("scales");
    assert_eq!(counts(&s.program), ["10", "1", "9", "9"]);
    let (program, _) = parse(source);
    let verified = verify(program, source, Options::default()).unwrap_or_else(|d| panic!("{d:?}"));
    let plain = cut::plan(
        verified.program(),
        verified.info().world(),
        10.0,
        cut::Mode::PLAIN,
        &std::collections::HashSet::new(),
        cut::Tasks::WHOLE,
    );
    let cut = apply(verified.program(), &plain, 1.0, 1.0, 0.1);
    assert!(
        matches!(
            simulate(
                &cut,
                verified.info().world(),
                &Model::default(),
                SIMULATION_BUDGET
            ),
            Err(TimingError::Stuck(_))
        ),
        "the plain plan leaves messages unmatched:\n{}",
        print(&cut)
    );
}

/// Where a cut leaves messages unmatched, only the loops between the ranks' stuck
/// statements are kept whole: a ring exchange elsewhere in the same block is still cut
/// (HPCC's RandomAccess beside its ping-pong phases, whose partners differ by rank: kept
/// whole with the whole block's point-to-point loops, its 2044 iterations ran at 1:100
/// with compute shrunk 200 times, and the skeleton predicted +134 %).
#[test]
fn only_loops_a_cut_leaves_unmatched_are_kept_whole() {
    let source = "skeleton t\nranks 2\ntopology ring\napp_time 1 s\nif rank == 0 {\n    loop 2 {\n        loop 9 {\n            send rank(1) 8 B\n            recv rank(1) 8 B\n        }\n    }\n} else {\n    loop 18 {\n        recv rank(0) 8 B\n        send rank(0) 8 B\n    }\n}\nloop 100 {\n    compute 10 ms\n    sendrecv to rank((rank + 1) % nranks) 8 B from rank((rank - 1) % nranks) 8 B\n}\n";
    let s = scaled(source, 10).expect("scales");
    assert_eq!(counts(&s.program), ["2", "9", "18", "10"]);
    // Every point-to-point loop of the block kept whole, the ring exchange too.
    let (program, _) = parse(source);
    let verified = verify(program, source, Options::default()).unwrap_or_else(|d| panic!("{d:?}"));
    let none = std::collections::HashSet::new();
    let conservative = cut::plan(
        verified.program(),
        verified.info().world(),
        10.0,
        cut::Mode::CONSERVATIVE,
        &none,
        cut::Tasks::WHOLE,
    );
    let whole = apply(verified.program(), &conservative, 1.0, 1.0, 0.1);
    assert_eq!(counts(&whole), ["2", "9", "18", "100"]);
}

/// Against the model's own time message sizes are kept and compute shrinks to half at
/// most: communication outside loops counts by a ratio of its own, and compute is not
/// shrunk for it; where it would take nearly all of the skeleton's time, the skeleton
/// is scaled as a whole and the ratio it would reach is too far from the one asked
/// (an error naming it).
#[test]
fn the_model_target_keeps_message_sizes() {
    let scale_model = |source: &str, ratio| {
        let (program, diags) = parse(source);
        assert!(diags.is_empty(), "{diags:?}");
        let verified =
            verify(program, source, Options::default()).unwrap_or_else(|d| panic!("{d:?}"));
        scale(
            &verified,
            &ScaleOptions {
                ratio,
                model: Model::default(),
                target: Target::Model,
            },
        )
    };
    // 1 MiB broadcast once (about 470 us under the default model) and 100 ms of compute
    // in a loop: at 1:100 (a target of about 1 ms) the broadcast counts once, by a
    // ratio of its own, and compute is not shrunk to make room for it: the rest of the
    // skeleton stands for 1:100, the whole skeleton for less.
    let source = "skeleton t\nranks 8\ntopology ring\napp_time 100 ms\nbcast 1 MiB root 0\nloop 100 {\n    compute 1 ms\n}\n";
    let s = scale_model(source, 100).expect("scales");
    assert_eq!((s.size_factor, s.compute_factor), (1.0, 1.0));
    assert!(
        (s.rest_ratio / 100.0 - 1.0).abs() < 1e-3,
        "{}",
        s.rest_ratio
    );
    assert!(
        s.ratio_reached > 60.0 && s.ratio_reached < 75.0,
        "{}",
        s.ratio_reached
    );
    assert!(s.warnings.iter().all(|d| d.code != "ratio-not-reached"));
    // At 1:200 too: the rest stands for 1:200.
    let s = scale_model(source, 200).expect("scales");
    assert_eq!(s.compute_factor, 1.0);
    assert!(
        (s.rest_ratio / 200.0 - 1.0).abs() < 1e-3,
        "{}",
        s.rest_ratio
    );
    // A broadcast of 4 MiB at 1:1000 would be nearly all of the skeleton's time (the
    // rest too small to multiply by a ratio of its own): the skeleton is scaled as a
    // whole, compute could shrink to half at most, and the ratio it would reach is far
    // from the one asked: refused.
    let big = source.replace("bcast 1 MiB", "bcast 4 MiB");
    let e = scale_model(&big, 1000).expect_err("far from the ratio asked");
    assert_eq!(e.code, "ratio-far-from-asked");
    assert!(
        e.message.contains("message sizes are kept"),
        "{}",
        e.message
    );
}

/// Against the model's own time compute is never stretched: a loop of 140 iterations
/// at 1:100 keeps one, and the skeleton reaches 1:140 (within 2x: a warning).
#[test]
fn the_model_target_never_stretches_compute() {
    let source =
        "skeleton t\nranks 2\ntopology ring\napp_time 1.4 s\nloop 140 {\n    compute 10 ms\n}\n";
    let (program, diags) = parse(source);
    assert!(diags.is_empty(), "{diags:?}");
    let verified = verify(program, source, Options::default()).unwrap_or_else(|d| panic!("{d:?}"));
    let s = scale(
        &verified,
        &ScaleOptions {
            ratio: 100,
            model: Model::default(),
            target: Target::Model,
        },
    )
    .expect("scales");
    assert_eq!(counts(&s.program), ["1"]);
    assert_eq!(s.compute_factor, 1.0);
    assert_eq!(computes(&s.program), [0.010]);
    assert!((s.ratio_reached - 140.0).abs() < 1.0, "{}", s.ratio_reached);
    let warning = s
        .warnings
        .iter()
        .find(|d| d.code == "ratio-not-reached")
        .expect("warns");
    assert!(
        warning.message.contains("not stretched"),
        "{}",
        warning.message
    );
    // The same loop under the app_time target stretches compute to the target.
    let s = scaled(source, 100).expect("scales");
    assert_eq!(computes(&s.program), [0.014]);
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

#[test]
fn the_model_target_keeps_compute_as_written() {
    // The skeleton's content accounts for 1 s of its 2 s app_time.
    let source =
        "skeleton t\nranks 2\ntopology ring\napp_time 2 s\nloop 100 {\n    compute 10 ms\n}\n";
    let (program, _) = parse(source);
    let verified = verify(program, source, Options::default()).expect("checks");
    let at = |target| {
        let options = ScaleOptions {
            ratio: 10,
            model: Model::default(),
            target,
        };
        scale(&verified, &options).expect("scales")
    };
    let app = at(Target::AppTime);
    assert!(
        (app.expected_skeleton_s - 0.2).abs() < 1e-3,
        "{}",
        app.expected_skeleton_s
    );
    assert!((computes(&app.program)[0] - 20e-3).abs() < 1e-6);
    let model = at(Target::Model);
    assert!(
        (model.expected_skeleton_s - 0.1).abs() < 1e-3,
        "{}",
        model.expected_skeleton_s
    );
    assert!((computes(&model.program)[0] - 10e-3).abs() < 1e-6);
    assert!((model.ratio_reached - 10.0).abs() < 0.01);
}

const PATTERN: &str = "skeleton t\nranks 4\ntopology ring\napp_time 1 s\n\
                       loop 500 as i {\n    compute 2 ms\n    if i % 20 == 19 {\n        allreduce 8 B\n    }\n    if i % 50 == 49 {\n        barrier\n    }\n}\n";

#[test]
fn loops_reading_their_variable_keep_whole_periods() {
    // The body reads `i` with period lcm(20, 50) = 100. At 1:2 the 250 iterations are
    // 2.5 periods, rounded half away from zero to 3: 300 iterations (1:1.67, near
    // enough to 1:2). Conditions are unchanged, so the scaled program still runs an
    // allreduce every 20 iterations and a barrier every 50.
    let s = scaled(PATTERN, 2).expect("scales");
    assert_eq!(counts(&s.program), vec!["300"]);
    let text = print(&s.program);
    assert!(text.contains("if i % 20 == 19 {"), "{text}");
    assert!(text.contains("if i % 50 == 49 {"), "{text}");
    let info = check(&s.program, "", Options::default())
        .info
        .expect("checks");
    assert!(info.ranks().iter().all(|r| r.collectives == 15 + 6));
    // A rotating partner has the period of the rank count: 500 / 10 = 50 iterations
    // are 12.5 periods of 4, so 13 periods.
    let rotate = "skeleton t\nranks 4\ntopology ring\napp_time 1 s\n\
                  loop 500 as i {\n    compute 2 ms\n    sendrecv to rank((rank + i) % nranks) 1 KiB from rank((rank - i) % nranks) 1 KiB\n}\n";
    let s = scaled(rotate, 10).expect("scales");
    assert_eq!(counts(&s.program), vec!["52"]);
    // A loop that does not read its variable, or with period 1, is cut as any other.
    let unread = PATTERN
        .replace("if i % 20 == 19", "if nranks == 4")
        .replace("if i % 50 == 49", "if i % 1 == 0");
    let s = scaled(&unread, 10).expect("scales");
    assert_eq!(counts(&s.program), vec!["50"]);
}

/// The compute spans directly in the branches of the `if`s of a program's loops, by the
/// text of each condition (`else` for an else block).
fn branch_computes(program: &Program) -> Vec<(String, f64)> {
    fn walk(block: &Block, out: &mut Vec<(String, f64)>) {
        for stmt in &block.stmts {
            match &stmt.kind {
                StmtKind::Loop(l) => walk(&l.body, out),
                StmtKind::If(i) => {
                    let mut branches =
                        vec![(perfskel_grammar::printer::expr(&i.cond), &i.then_block)];
                    if let Some(Else::Block(b)) = &i.else_branch {
                        branches.push(("else".to_string(), b));
                    }
                    for (cond, b) in branches {
                        for s in &b.stmts {
                            if let StmtKind::Compute(c) = &s.kind {
                                out.push((cond.clone(), c.time.mean_seconds()));
                            }
                        }
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

#[test]
fn rare_iterations_of_a_step_loop_are_weighed() {
    // A time-step loop: a set-up step (`i == 0`), a re-neighbouring every 20 steps and
    // an output every 50, over 501 steps. At 1:100 whole periods of 100 would keep 100
    // steps (1:5): the loop keeps its first 5 steps instead, and each branch's compute
    // stands for how often it ran: the set-up once for 1 (x 1/100), the re-neighbouring
    // once for 26 (x 26/100), the output once for 11 (x 11/100), the ordinary step 4
    // times for 475 (x 475/400: stretched on the app-time target).
    let source = "skeleton t\nranks 2\ntopology ring\napp_time 10 s\n\
                  loop 501 as i {\n    if i % 20 == 0 {\n        compute 10 ms\n        loop 4 {\n            compute 1 ms\n            sendrecv to next 1 KiB from prev 1 KiB\n        }\n    } else {\n        compute 2 ms\n    }\n    compute 16 ms\n    if i == 0 {\n        compute 100 ms\n        barrier\n    }\n    if i % 50 == 0 {\n        compute 1 ms\n        allreduce 8 B\n    }\n}\n";
    let weighed = |s: &Scaled| {
        s.warnings
            .iter()
            .find(|w| w.code == "loop-cut-by-weight")
            .cloned()
            .expect("a warning says the loop was weighed")
    };
    let s = scaled(source, 100).expect("scales");
    // The re-neighbouring's inner loop is cut by its own residual 100 / 26 = 3.85.
    assert_eq!(counts(&s.program), vec!["5", "1"]);
    let warning = weighed(&s);
    assert!(warning.message.contains("keeps its first 5"), "{warning:?}");
    assert!(
        warning
            .secondary
            .iter()
            .any(|l| l.message == "true in 26 of 501 iterations, 1 of the 5 kept"),
        "{warning:?}"
    );
    // Against the model, compute is never stretched: the ordinary step keeps its time,
    // the rare ones shrink by their weight.
    let model = scaled_for(source, 100, Target::Model).expect("scales");
    let c = model.compute_factor;
    let got = branch_computes(&model.program);
    let want = [
        ("i % 20 == 0", 10e-3 * 0.26),
        ("else", 2e-3),
        ("i == 0", 100e-3 / 100.0),
        ("i % 50 == 0", 1e-3 * 0.11),
    ];
    for (cond, t) in want {
        let (_, v) = got
            .iter()
            .find(|(c, _)| c == cond)
            .unwrap_or_else(|| panic!("{cond}: {got:?}"));
        assert!((v / (t * c) - 1.0).abs() < 0.01, "{cond}: {v} vs {t} x {c}");
    }
    // The five steps stand for the 501: the ratio reached is near the one asked.
    assert!(
        (model.ratio_reached / 100.0 - 1.0).abs() < 0.1,
        "{}",
        model.ratio_reached
    );
    // A branch that would not run in the kept steps (`i == 499`) keeps the loop whole.
    let late = source.replace("i == 0", "i == 499");
    let s = scaled(&late, 100).expect("scales");
    assert_eq!(counts(&s.program)[0], "501");
    // One first taken just past them (`i % 25 == 5`: step 5, as LAMMPS's melt at 16
    // ranks) makes the loop keep its first 6 steps, the nearest ratio (1:83.5) at
    // which every branch keeps a run; within twice the share, not beyond.
    let just_past = source.replace("i == 0", "i % 25 == 5");
    let s = scaled_for(&just_past, 100, Target::Model).expect("scales");
    assert_eq!(counts(&s.program), vec!["6", "1"]);
    let warning = weighed(&s);
    assert!(warning.message.contains("keeps its first 6"), "{warning:?}");
    assert!(
        warning
            .notes
            .iter()
            .any(|n| n.contains("stands for 1:83.5")),
        "{warning:?}"
    );
    assert!(
        warning
            .secondary
            .iter()
            .any(|l| l.message == "true in 20 of 501 iterations, 1 of the 6 kept"),
        "{warning:?}"
    );
    // Step 11 is past twice the share: whole periods (of lcm(20, 25, 50) = 100) instead.
    let beyond = source.replace("i == 0", "i % 25 == 11");
    let s = scaled(&beyond, 100).expect("scales");
    assert_eq!(counts(&s.program)[0], "100");
}

#[test]
fn loops_reading_their_variable_without_a_period_are_not_cut() {
    // Branches the first iterations do not reach keep every iteration.
    for cond in ["i == 499", "i > 100"] {
        let source = PATTERN.replace("i % 50 == 49", cond);
        let s = scaled(&source, 10).unwrap_or_else(|e| panic!("{cond}: {e:?}"));
        assert_eq!(counts(&s.program), vec!["500"], "{cond}");
        let warning = s
            .warnings
            .iter()
            .find(|w| w.code == "loop-not-cut")
            .expect("a warning says why");
        assert!(
            warning.notes.iter().any(|n| n.contains("without a period")),
            "{warning:?}"
        );
    }
    // A count that reads an enclosing loop's variable is kept as written, and the outer
    // loop keeps whole periods of it.
    let nest = "skeleton t\nranks 4\ntopology ring\napp_time 1 s\n\
                loop 600 as i {\n    loop i % 3 + 1 {\n        compute 1 ms\n        sendrecv to next 8 B from prev 8 B\n    }\n}\n";
    let s = scaled(nest, 10).expect("scales");
    assert_eq!(counts(&s.program), vec!["60", "i % 3 + 1"]);
}

#[test]
fn periods_of_expressions() {
    let env = crate::semantics::Env {
        rank: 0,
        n_ranks: 8,
        coords: Vec::new(),
    };
    let cond = |text: &str| {
        let source = format!(
            "skeleton t ranks 8 topology ring app_time 1 s\nloop 10 as i {{ if {text} {{}} }}"
        );
        let (program, diags) = parse(&source);
        assert!(diags.is_empty(), "{diags:?}");
        match &program.body.stmts[0].kind {
            StmtKind::Loop(l) => match &l.body.stmts[0].kind {
                StmtKind::If(i) => i.cond.clone(),
                _ => unreachable!(),
            },
            _ => unreachable!(),
        }
    };
    let period = |text: &str| cut::period(&cond(text), "i", &env);
    assert_eq!(period("rank == 0"), Some(1));
    assert_eq!(period("i % 20 == 19"), Some(20));
    assert_eq!(period("i % 20 != 19 and i % 50 == 0"), Some(100));
    assert_eq!(period("not (i % 4 == 1) or i % 6 == 0"), Some(12));
    assert_eq!(period("(rank + 3 * i) % nranks == 0"), Some(8));
    assert_eq!(period("-i % 5 == 0"), Some(5));
    assert_eq!(period("i % 4 % 2 == 0"), Some(4));
    assert_eq!(period("(i % 10) / 3 == 1"), Some(10));
    assert_eq!(period("i == 499"), None);
    assert_eq!(period("i < 10"), None);
    assert_eq!(period("i / 2 % 2 == 0"), None);
    assert_eq!(period("i % (rank + 1) == 0"), None);
    assert_eq!(period("i % 0 == 0"), None);
}

#[test]
fn partner_loops_with_variables_keep_whole_periods() {
    // The master's loop reads its variable with period 8: both partners are cut by one
    // divisor of gcd(400 / 8, 400) = 50 near 10, so the counts stay equal and the
    // master's a multiple of 8. A partner whose count reads a variable is not cut, and
    // neither are the group's loops that communicate; a loop of compute alone is cut by
    // its own share (there is nothing in it to match).
    let source = "skeleton t\nranks 4\ntopology star\napp_time 4 s\n\
                  if rank == 0 {\n    loop 400 as i {\n        if i % 8 == 0 {\n            compute 10 ms\n        }\n        recv any 1 KiB\n        recv any 1 KiB\n        recv any 1 KiB\n    }\n} else {\n    loop 400 {\n        compute 10 ms\n        send hub 1 KiB\n    }\n}\n";
    let s = scaled(source, 10).expect("scales");
    assert_eq!(counts(&s.program), vec!["40", "40"]);
    let frozen = "skeleton t\nranks 4\ntopology star\napp_time 4 s\n\
                  loop 4 as j {\n    if rank == 0 {\n        loop 3 * (j + 1) {\n            recv any 1 KiB\n        }\n    } else {\n        loop 100 {\n            compute 10 ms\n        }\n        loop j + 1 {\n            send hub 1 KiB\n        }\n    }\n}\n";
    let s = scaled(frozen, 10).expect("scales");
    assert_eq!(counts(&s.program), vec!["4", "3 * (j + 1)", "10", "j + 1"]);
}

/// At 1:1 the skeleton is the trace: no loop is cut and no compute is added where the
/// model expects less than `app_time` (here a skeleton whose content accounts for half
/// of it), and the ratio reached is 1.
#[test]
fn at_one_to_one_nothing_is_filled() {
    let source =
        "skeleton t\nranks 2\ntopology ring\napp_time 2 s\nloop 100 {\n    compute 10 ms\n}\n";
    let s = scaled(source, 1).expect("scales");
    assert_eq!(s.compute_factor, 1.0);
    assert_eq!(s.size_factor, 1.0);
    assert_eq!(s.ratio_reached, 1.0);
    assert!(
        (s.expected_skeleton_s - 1.0).abs() < 1e-9,
        "{}",
        s.expected_skeleton_s
    );
    assert_eq!(counts(&s.program), vec!["100".to_string()]);
    assert!(
        print(&s.program).contains("compute 10 ms"),
        "{}",
        print(&s.program)
    );
    // Above 1:1 the target is still app_time / K: compute makes up the rest.
    let s = scaled(source, 2).expect("scales");
    assert!(s.compute_factor > 1.5, "{}", s.compute_factor);
}

/// Polls follow the loop cut, not the compute factor: the model counts no time for
/// them, so each statement keeps its share, 1 / its residual (a loop of 3 cut to 1 at
/// 1:10 leaves a residual of 10/3: 300 polls become 90), whatever factor the compute
/// took to make the model's time hit its target; none are written where none are left.
#[test]
fn polls_follow_the_cut_not_the_compute_factor() {
    let source = "skeleton p\nranks 2\ntopology ring\napp_time 40 ms\n\
                  loop 3 {\n    compute 10 ms polls 300\n    sendrecv to next 1 MiB from prev 1 MiB\n}\n\
                  compute 1 ms polls 2\n";
    let s = scaled_for(source, 10, Target::AppTime).expect("scales");
    assert_eq!(counts(&s.program), ["1"]);
    let text = print(&s.program);
    assert!(text.contains("polls 90\n"), "{text}");
    // The last compute's 2 polls at a residual of 10: none left, and none written.
    assert_eq!(text.matches("polls").count(), 1, "{text}");
}

/// Polls with their cost written (`polls N each D`) are time the model counts: the
/// unscaled skeleton's model time holds them, and at 1:K they follow the compute factor
/// with their span (count x factor / residual), keeping their cost.
#[test]
fn polls_with_a_cost_are_timed_and_follow_the_compute_factor() {
    let body = "loop 100 {\n    compute 1 ms polls 1000 each 1 us\n    sendrecv to next 8 B from prev 8 B\n}\nloop 3 {\n    sendrecv to next 4 MiB from prev 4 MiB\n}\n";
    // An application time below the model's: compute shrinks to 1/10 of it.
    let source = format!("skeleton p\nranks 2\ntopology ring\napp_time 150 ms\n{body}");
    let s = scaled_for(&source, 10, Target::AppTime).expect("scales");
    let unscaled = s.unscaled_model_s.expect("simulated");
    // 100 x (1 ms + 1000 x 1 us) and the messages.
    assert!(unscaled > 0.2 && unscaled < 0.21, "{unscaled}");
    assert!(s.compute_factor < 0.9, "{}", s.compute_factor);
    let text = print(&s.program);
    let polls = (s.compute_factor * 1000.0).round() as u64;
    assert!(
        text.contains(&format!("polls {polls} each 1 us\n")),
        "{text}"
    );
    // The same without the cost: the model sees only the span, the polls keep 1000.
    let bare = source
        .replace(" each 1 us", "")
        .replace("app_time 150 ms", "app_time 200 ms");
    let s = scaled_for(&bare, 10, Target::Model).expect("scales");
    assert!(s.unscaled_model_s.expect("simulated") < 0.11);
    assert!(
        print(&s.program).contains("polls 1000\n"),
        "{}",
        print(&s.program)
    );
}

/// A window lets ranks run apart: two ranks whose compute alternates (1 ms and 3 ms,
/// the other way round on the other rank) wait for each other every round with
/// `sendrecv` (10 rounds of the longer, 30 ms), and not with their messages in flight
/// (each rank's own 20 ms, and the last messages); a window of one round waits a round
/// late, which this alternation never feels.
#[test]
fn windows_let_ranks_run_apart_in_the_timed_simulation() {
    let time = |body: &str| {
        let source = format!(
            "skeleton t\nranks 2\ntopology ring\napp_time 1 s\nloop 10 as i {{\n    compute [1 ms, 3 ms][(i + rank) % 2]\n{body}}}\n{}",
            if body.contains("window") { "waitall s, r\n" } else { "" }
        );
        let (program, diags) = parse(&source);
        assert!(diags.is_empty(), "{diags:?}");
        let verified =
            verify(program, &source, Options::default()).unwrap_or_else(|d| panic!("{d:?}"));
        simulate(
            verified.program(),
            verified.info().world(),
            &Model::default(),
            SIMULATION_BUDGET,
        )
        .expect("simulates")
        .total_s()
    };
    let coupled = time("    sendrecv to next 8 B from prev 8 B\n");
    let windowed =
        time("    req s = isend next 8 B window 10\n    req r = irecv prev 8 B window 10\n");
    let one = time("    req s = isend next 8 B window 1\n    req r = irecv prev 8 B window 1\n");
    assert!((0.030..0.0301).contains(&coupled), "{coupled}");
    assert!((0.020..0.0201).contains(&windowed), "{windowed}");
    assert!(one >= windowed - 1e-6 && one <= coupled + 1e-4, "{one}");
}

/// A farm: the master's first task for each of 3 workers, its dispatch loop of 117
/// more, and a stop for each; the workers' `while recv`.
const FARM: &str = "skeleton farm\nranks 4\ntopology star\napp_time 1.28 s\nif rank == 0 {\n    loop 3 as i {\n        send rank(i + 1) 16 B tag 1\n    }\n    loop 117 {\n        recv any 8 B\n        send source 16 B tag 1\n    }\n    loop 3 {\n        recv any 8 B\n        send source 16 B tag 2\n    }\n} else {\n    while recv hub 16 B tag 1 {\n        compute normal(32 ms, 8 ms)\n        send hub 8 B\n    }\n}\n";

/// The tasks a program's `while`s run over all ranks, and each rank's compute.
fn farm_stats(program: &Program) -> (u64, Vec<f64>) {
    let text = print(program);
    let checked = check(program, &text, Options::default());
    let info = checked.info.expect("checks");
    (
        info.ranks().iter().map(|r| r.tasks).sum(),
        info.ranks().iter().map(|r| r.compute_seconds).collect(),
    )
}

/// Applies `f` to the time of every compute statement.
fn each_compute(block: &Block, f: &mut dyn FnMut(&TimeSpec)) {
    for stmt in &block.stmts {
        if let StmtKind::Compute(c) = &stmt.kind {
            f(&c.time);
        }
        for b in crate::semantics::stmt_blocks(stmt) {
            each_compute(b, f);
        }
    }
}

/// The dispatch loop is cut, the first tasks and the stops are not: 30 of the 120 tasks
/// stay (ten for each worker), each standing for four, so every worker computes 1/K of
/// its share and the spread of a task's time is that of four tasks' sum.
#[test]
fn a_farm_keeps_ten_tasks_a_worker_each_standing_for_the_rest() {
    let (program, _) = parse(FARM);
    let (tasks, compute) = farm_stats(&program);
    assert_eq!(tasks, 120);
    let s = scaled_for(FARM, 100, Target::Model).expect("scales");
    let text = print(&s.program);
    assert_eq!(counts(&s.program), ["3", "27", "3"], "{text}");
    let (kept, scaled_compute) = farm_stats(&s.program);
    assert_eq!(kept, 30);
    let total = |c: &[f64]| c.iter().sum::<f64>();
    let ratio = total(&compute) / total(&scaled_compute) * s.compute_factor;
    assert!((ratio / 100.0 - 1.0).abs() < 0.02, "compute 1:{ratio}");
    // The mean 32 ms × 4 / 100 = 1.28 ms (times the compute factor), the deviation a
    // quarter of the mean in one task, an eighth in the sum of four.
    let mut found = None;
    each_compute(&s.program.body, &mut |t| {
        if let TimeSpec::Normal { mean, stddev } = t {
            found = Some((mean.value.seconds(), stddev.value.seconds()));
        }
    });
    let (mean, stddev) = found.expect("a normal compute");
    assert!(
        (mean / s.compute_factor / 1.28e-3 - 1.0).abs() < 1e-3,
        "{text}"
    );
    assert!((stddev / mean / 0.125 - 1.0).abs() < 1e-2, "{text}");
    assert!(s.warnings.iter().any(|w| w
        .notes
        .iter()
        .any(|n| n.contains("sends the tasks of a `while recv`"))));
}

/// Where ten tasks a worker is every task the application had, none is cut.
#[test]
fn a_farm_with_few_tasks_keeps_them_all() {
    let few = FARM.replace("loop 117", "loop 12");
    let s = scaled_for(&few, 100, Target::Model).expect("scales");
    assert_eq!(counts(&s.program), ["3", "12", "3"]);
    assert_eq!(farm_stats(&s.program).0, 15);
}

/// A feeding loop whose count depends on the rank and whose cut rounds to no iteration
/// keeps none on any rank: not `count / n`, which leaves one on the rank with most.
#[test]
fn a_rank_dependent_feeder_cut_to_nothing_keeps_nothing() {
    let source = "skeleton f\nranks 2\ntopology star\napp_time 1 s\nloop 3 - 3 * rank {\n    send rank(1) 16 B tag 1\n}\nif rank == 0 {\n    send rank(1) 16 B tag 2\n} else {\n    while recv rank(0) 16 B tag 1 {\n        compute 1 ms\n    }\n}\n";
    let (program, diags) = parse(source);
    assert!(diags.is_empty(), "{diags:?}");
    let verified = verify(program, source, Options::default()).unwrap_or_else(|d| panic!("{d:?}"));
    let tasks = Tasks {
        feed: 10.0,
        share: 0.0,
        rounds: 0.0,
    };
    let none = std::collections::HashSet::new();
    let p = cut::plan(
        verified.program(),
        verified.info().world(),
        10.0,
        Mode::ROUNDED,
        &none,
        tasks,
    );
    let StmtKind::Loop(feeder) = &verified.program().body.stmts[0].kind else {
        panic!("the feeder is the first statement");
    };
    let count = &p.loops[&(&**feeder as *const Loop)];
    assert_eq!(count.kind, ExprKind::Int(0), "{count:?}");
}

/// An allreduce outside loops, three iterations of one that a loop of 3 keeps one of at
/// 1:10, then a ring exchange that loops cut: 4 ranks.
const OWN: &str = "skeleton own\nranks 4\ntopology ring\napp_time 1 s\ncompute 20 ms\nallreduce 64 KiB\nloop 3 {\n    compute 20 ms\n    bcast 64 KiB\n}\nloop 200 {\n    compute 2 ms\n    sendrecv to next 1 KiB from prev 1 KiB\n    loop 2 {\n        barrier\n    }\n}\n";

#[test]
fn communication_loops_cut_less_than_k_has_a_ratio_of_its_own() {
    let s = scaled_for(OWN, 10, Target::Model).expect("scales");
    let at = |text: &str| OWN.find(text).expect("in the source") as u32;
    // The allreduce runs as often as in the application; the loop of 3 keeps one
    // iteration, whose bcast stands for 3; the ring's messages and barriers are cut
    // by 10 and are the rest's.
    assert_eq!(
        s.own_ratios
            .iter()
            .map(|(&a, &r)| (a, r))
            .collect::<Vec<_>>(),
        vec![(at("allreduce"), 1.0), (at("bcast"), 3.0)]
    );
    // The rest is multiplied by more than the ratio reached: the model's application
    // time less what those stand for, over the skeleton's less their time.
    assert!(
        s.rest_ratio > s.ratio_reached,
        "{} {}",
        s.rest_ratio,
        s.ratio_reached
    );
    let world = Shape::Grid {
        dims: vec![4],
        periodic: vec![true],
    };
    let own = simulate_own(
        &s.program,
        &world,
        &Model::default(),
        SIMULATION_BUDGET,
        &s.own_ratios,
    )
    .expect("simulates");
    let (own_s, own_app_s) = own.busiest();
    assert!(
        own_s > 0.0 && own_app_s > own_s && own_app_s < 3.0 * own_s,
        "{own:?}"
    );
    // The model's prediction is the same either way.
    let app = s.ratio_reached * s.expected_skeleton_s;
    let split = s.rest_ratio * (s.expected_skeleton_s - own_s) + own_app_s;
    assert!((split / app - 1.0).abs() < 1e-9, "{split} {app}");
    // A loop of 20 at 1:100 keeps one iteration: its sendrecv stands for 20; its loop
    // of 2 keeps one too, whose barrier stands for 40.
    let partly = OWN.replace("loop 200", "loop 20");
    let p = scaled_for(&partly, 100, Target::Model).expect("scales");
    let ratios: Vec<f64> = p.own_ratios.values().copied().collect();
    assert_eq!(ratios, vec![1.0, 3.0, 20.0, 40.0], "{:?}", p.own_ratios);
    // A waitall after a cut loop of windowed posts completes operations the cut loop
    // made: it stands for as many as they do, not for one.
    let windowed = "skeleton win\nranks 4\ntopology ring\napp_time 1 s\nallreduce 8 B\nloop 200 {\n    compute 2 ms\n    req s = isend next 1 KiB window 8\n    req r = irecv prev 1 KiB window 8\n}\nwaitall s, r\n";
    let w = scaled_for(windowed, 10, Target::Model).expect("scales");
    assert_eq!(
        w.own_ratios.keys().copied().collect::<Vec<_>>(),
        vec![windowed.find("allreduce").expect("there") as u32],
        "{:?}",
        w.own_ratios
    );
    // At 1:1 nothing has a ratio of its own.
    let one = scaled_for(OWN, 1, Target::Model).expect("scales");
    assert!(one.own_ratios.is_empty());
    assert_eq!(one.rest_ratio, 1.0);
}

/// A pipeline: rank 0 starts each block, every rank receives it from the one before,
/// works on it and passes it on; the last rank's first iteration waits for the three
/// stages before it.
pub(crate) const PIPELINE: &str = "skeleton pipe\nranks 4\ntopology chain\napp_time 205 ms\nloop 200 {\n    recv prev 64 KiB\n    compute 1 ms\n    send next 64 KiB\n}\n";

#[test]
fn a_pipeline_s_fill_counts_once() {
    let s = scaled_for(PIPELINE, 10, Target::Model).expect("scales");
    let at = PIPELINE.find("loop").expect("in the source") as u32;
    assert_eq!(s.fill_loops.iter().copied().collect::<Vec<_>>(), vec![at]);
    // About three stages of 1 ms, more than the 2 % worth timing.
    assert!(s.fill_s > 0.002 && s.fill_s < 0.005, "{}", s.fill_s);
    // Compute is not shrunk to make room for it: the skeleton less its fill is 1/10
    // of the application less the same fill.
    assert_eq!(s.compute_factor, 1.0);
    assert!(s.expected_skeleton_s > s.target_s, "{s:?}");
    assert_eq!(s.ratio_reached, 10.0);
    let unscaled = s.unscaled_model_s.expect("simulated");
    let predicted = s.rest_ratio * (s.expected_skeleton_s - s.fill_s) + s.fill_s;
    assert!(
        (predicted / unscaled - 1.0).abs() < 2e-3,
        "{predicted} {unscaled}"
    );
    // A ring whose ranks all exchange at once waits for no one: nothing to time apart.
    let ring = "skeleton ring\nranks 4\ntopology ring\napp_time 205 ms\nloop 200 {\n    compute 1 ms\n    sendrecv to next 64 KiB from prev 64 KiB\n}\n";
    let r = scaled_for(ring, 10, Target::Model).expect("scales");
    assert!(r.fill_loops.is_empty(), "{}", r.fill_s);
    assert_eq!(r.fill_s, 0.0);
    // At 1:1 nothing is cut and nothing is timed apart.
    let one = scaled_for(PIPELINE, 1, Target::Model).expect("scales");
    assert!(one.fill_loops.is_empty());
}
