//! Parses and checks a skeleton, for profiling and for timing without criterion:
//! `parse_big [FILE] [parse|check] [RUNS]`. Without a file (or with `-`) it uses the
//! benchmark's generated skeleton. Prints the size and, for the fastest of RUNS runs
//! (default 1), the thread's CPU time of each phase (so a loaded machine does not
//! inflate it).

#[path = "../benches/large_skeleton.rs"]
mod large_skeleton;

use std::time::Instant;

// The allocator of the `perfskel` binary, so the figure is the binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Nanoseconds this thread has run on a CPU (`CLOCK_THREAD_CPUTIME_ID`, exact to the
/// nanosecond; `/proc/thread-self/schedstat` is only updated at the scheduler's tick), or
/// wall-clock nanoseconds since `start` where that clock fails.
fn cpu_ns(start: Instant) -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write into.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0 {
        ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
    } else {
        start.elapsed().as_secs_f64() * 1e9
    }
}

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
    let origin = Instant::now();
    let (mut best_parse, mut best_total) = (f64::INFINITY, f64::INFINITY);
    let mut summary = String::new();
    for _ in 0..runs {
        let start = cpu_ns(origin);
        let (program, diags) = perfskel_grammar::parse(&text);
        let parsed = (cpu_ns(origin) - start) / 1e9;
        best_parse = best_parse.min(parsed);
        summary = format!("{} parse diagnostics", diags.len());
        if check {
            let checked = perfskel_compiler::check::check(&program, &text, Default::default());
            let total = (cpu_ns(origin) - start) / 1e9;
            best_total = best_total.min(total);
            let ops = checked.info.as_ref().map_or(0, |i| i.simulated_ops);
            summary = format!(
                "{summary}, {} check diagnostics, {ops} simulated operations",
                checked.diags.len()
            );
        }
    }
    println!("{mb:.2} MB, {summary}, best of {runs} run(s):");
    println!(
        "parse {:.1} ms = {:.1} MB/s",
        best_parse * 1e3,
        mb / best_parse
    );
    if check {
        println!(
            "parse+check {:.1} ms = {:.1} MB/s",
            best_total * 1e3,
            mb / best_total
        );
    }
}
