//! Loop-discovery figures for `scripts/bench-compress.sh`: the NAS-shaped synthetic
//! traces with both algorithms (raw length, compressed length, best-of-N time), or a long
//! regular token stream pushed through the streaming greedy compressor (the script reads
//! this process's peak memory from `/usr/bin/time -v`).
//!
//! Usage: `compress_table table [REPEATS]` or `compress_table stream TOKENS`.

use perfskel_compiler::compress::{
    description_len, discover, expand, synthetic, Algorithm, GreedyCompressor,
};
use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("table") => {
            let repeats = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(5);
            table(repeats)
        }
        Some("stream") => match args.get(1).and_then(|s| s.parse().ok()) {
            Some(tokens) => stream(tokens),
            None => usage(),
        },
        _ => usage(),
    }
}

fn usage() -> ExitCode {
    eprintln!("usage: compress_table table [REPEATS] | compress_table stream TOKENS");
    ExitCode::FAILURE
}

/// CPU time of this thread so far, in seconds (Linux `schedstat`; `None` elsewhere).
fn thread_cpu_s() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: f64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns / 1e9)
}

/// Best-of-`repeats` wall time and mean CPU time of `f`, in seconds, and its last result.
/// Runs at least `repeats` times and at least half a second in all, since the thread's
/// CPU clock advances in scheduler ticks.
fn best_of<T>(repeats: usize, mut f: impl FnMut() -> T) -> (f64, Option<f64>, T) {
    let mut best = f64::INFINITY;
    let mut result = f();
    let cpu_start = thread_cpu_s();
    let all = Instant::now();
    let mut runs = 0;
    while runs < repeats || all.elapsed().as_secs_f64() < 0.5 {
        let start = Instant::now();
        result = f();
        best = best.min(start.elapsed().as_secs_f64());
        runs += 1;
    }
    let cpu = cpu_start
        .zip(thread_cpu_s())
        .map(|(a, b)| (b - a) / runs as f64)
        .filter(|&s| s > 0.0);
    (best, cpu, result)
}

fn ms(seconds: Option<f64>) -> String {
    seconds.map_or("n/a".to_string(), |s| format!("{:.2} ms", s * 1e3))
}

fn rate(tokens: usize, seconds: Option<f64>) -> String {
    seconds.map_or("n/a".to_string(), |s| {
        format!("{:.1}", tokens as f64 / s / 1e6)
    })
}

fn table(repeats: usize) -> ExitCode {
    println!(
        "| trace | raw | seed | exact | exact CPU | exact wall | exact M tok/s (CPU) | greedy | greedy CPU | greedy wall | greedy M tok/s (CPU) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut ok = true;
    for row in synthetic::NAS {
        let Some(trace) = synthetic::nas(row.name) else {
            continue;
        };
        let raw = trace.tokens.len();
        let mut cells = Vec::new();
        for algorithm in [Algorithm::Exact, Algorithm::Greedy] {
            let (wall, cpu, nest) = best_of(repeats, || discover(&trace.tokens, algorithm));
            ok &= expand(&nest) == trace.tokens && description_len(&nest) == row.compressed;
            cells.push(format!(
                "{} | {} | {} | {}",
                description_len(&nest),
                ms(cpu),
                ms(Some(wall)),
                rate(raw, cpu)
            ));
        }
        println!(
            "| {} (synthetic) | {} | {} | {} | {} |",
            row.name, raw, row.compressed, cells[0], cells[1]
        );
    }
    println!();
    println!("Adversarial input (exact's work bounds; both must stay exact):");
    println!();
    println!(
        "| input | raw | exact | exact CPU | exact M tok/s (CPU) | greedy | greedy CPU | greedy M tok/s (CPU) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (name, tokens) in adversarial() {
        let mut cells = Vec::new();
        for algorithm in [Algorithm::Exact, Algorithm::Greedy] {
            let (_, cpu, nest) = best_of(1, || discover(&tokens, algorithm));
            ok &= expand(&nest) == tokens;
            cells.push(format!(
                "{} | {} | {}",
                description_len(&nest),
                ms(cpu),
                rate(tokens.len(), cpu)
            ));
        }
        println!(
            "| {name} | {} | {} | {} |",
            tokens.len(),
            cells[0],
            cells[1]
        );
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        eprintln!("compress_table: a nest did not expand to its trace or missed the seed length");
        ExitCode::FAILURE
    }
}

/// Inputs that defeat loop discovery, deterministic: random tokens over two letters (a
/// xorshift generator), a Fibonacci word (runs of every period everywhere), one token
/// repeated, and a sequence without any repeat.
fn adversarial() -> Vec<(&'static str, Vec<u32>)> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let random: Vec<u32> = (0..300_000)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 32) as u32 & 1
        })
        .collect();
    let (mut a, mut b) = (vec![0u32], vec![0u32, 1]);
    while b.len() < 300_000 {
        let next = [b.clone(), a].concat();
        a = b;
        b = next;
    }
    b.truncate(300_000);
    vec![
        ("random, 2 letters", random),
        ("Fibonacci word", b),
        ("one token repeated", vec![7; 1_000_000]),
        ("no repeat", (0..1_000_000).collect()),
    ]
}

/// Pushes `tokens` tokens of a regular application (each iteration: 40 distinct calls,
/// then an inner loop of 3 iterations of 3 calls) through the greedy compressor, without
/// ever holding the trace.
fn stream(tokens: u64) -> ExitCode {
    let start = Instant::now();
    let mut compressor = GreedyCompressor::new();
    let mut pushed = 0u64;
    'outer: loop {
        for token in 0..40u32 {
            if pushed == tokens {
                break 'outer;
            }
            compressor.push(token);
            pushed += 1;
        }
        for _ in 0..3 {
            for token in 40..43u32 {
                if pushed == tokens {
                    break 'outer;
                }
                compressor.push(token);
                pushed += 1;
            }
        }
    }
    let stats = compressor.stats();
    let nest = compressor.finish();
    let seconds = start.elapsed().as_secs_f64();
    let cpu = thread_cpu_s();
    println!(
        "greedy stream: {} tokens → description {} in {:.2} s wall, {} CPU ({} M tokens/s CPU); {} bodies, peak window {} elements",
        pushed,
        description_len(&nest),
        seconds,
        ms(cpu),
        rate(pushed as usize, cpu),
        stats.bodies,
        stats.peak_window
    );
    ExitCode::SUCCESS
}
