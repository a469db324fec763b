//! Parses and checks a skeleton, for profiling and for timing without criterion:
//! `parse_big [FILE] [parse|check] [RUNS]`. Without a file (or with `-`) it uses the
//! benchmark's generated skeleton. Prints the size and, for the fastest and the median
//! of RUNS runs (default 1), the wall-clock time of each phase. Large files are parsed on several
//! threads, so the thread's CPU time would undercount; time it on an idle machine.

#[path = "../benches/large_skeleton.rs"]
mod large_skeleton;

use std::time::Instant;

// The allocator of the `perfskel` binary, so the figure is the binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| "-".into());
    let text = if path == "-" {
        large_skeleton::large_skeleton(4000)
    } else {
        std::fs::read_to_string(&path).unwrap_or_default()
    };
    let check = args.next().as_deref() != Some("parse");
    let runs: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(1).max(1);
    let mb = text.len() as f64 / 1e6;
    let (mut parses, mut totals, mut drops) = (Vec::new(), Vec::new(), Vec::new());
    let mut summary = String::new();
    for _ in 0..runs {
        let start = Instant::now();
        let (program, diags) = perfskel_grammar::parse(&text);
        parses.push(start.elapsed().as_secs_f64());
        summary = format!("{} parse diagnostics", diags.len());
        if check {
            let checked = perfskel_compiler::check::check(&program, &text, Default::default());
            totals.push(start.elapsed().as_secs_f64());
            let ops = checked.info.as_ref().map_or(0, |i| i.simulated_ops());
            summary = format!(
                "{summary}, {} check diagnostics, {ops} simulated operations",
                checked.diags.len()
            );
        }
        let start = Instant::now();
        drop(program);
        drops.push(start.elapsed().as_secs_f64());
    }
    println!("{mb:.2} MB, {summary}; best and median of {runs} run(s):");
    let report = |what: &str, times: &mut Vec<f64>| {
        times.sort_by(f64::total_cmp);
        let (best, median) = (times[0], times[times.len() / 2]);
        println!(
            "{what} {:.1} ms = {:.1} MB/s, median {:.1} ms = {:.1} MB/s",
            best * 1e3,
            mb / best,
            median * 1e3,
            mb / median
        );
    };
    report("parse", &mut parses);
    if check {
        report("parse+check", &mut totals);
    }
    drops.sort_by(f64::total_cmp);
    println!(
        "(freeing the syntax tree afterwards: median {:.1} ms)",
        drops[drops.len() / 2] * 1e3
    );
}
