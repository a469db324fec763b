//! Parses and checks a skeleton once, for profiling and for timing without criterion:
//! `parse_big [FILE] [parse|check]`. Without a file (or with `-`) it uses the
//! benchmark's generated skeleton. Prints the size and the CPU time of each phase.

#[path = "../benches/large_skeleton.rs"]
mod large_skeleton;

use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| "-".into());
    let text = if path == "-" {
        large_skeleton::large_skeleton(4000)
    } else {
        std::fs::read_to_string(&path).unwrap_or_default()
    };
    let mb = text.len() as f64 / 1e6;
    let start = Instant::now();
    let (program, diags) = perfskel_grammar::parse(&text);
    let parsed = start.elapsed().as_secs_f64();
    println!(
        "{mb:.2} MB, {} parse diagnostics, parse {:.1} ms = {:.1} MB/s",
        diags.len(),
        parsed * 1e3,
        mb / parsed
    );
    if args.next().as_deref() != Some("parse") {
        let checked = perfskel_compiler::check::check(&program, &text, Default::default());
        let total = start.elapsed().as_secs_f64();
        let ops = checked.info.as_ref().map_or(0, |i| i.simulated_ops);
        println!(
            "{} check diagnostics, {ops} simulated operations, parse+check {:.1} ms = {:.1} MB/s",
            checked.diags.len(),
            total * 1e3,
            mb / total
        );
    }
}
