//! Benchmarks loop discovery on the synthetic traces shaped like the seed's NAS table
//! (BT, SP, LU, CG, MG) with both algorithms, on a regular 1 M-token stream (greedy),
//! and on adversarial input (random tokens over two letters, exact).
//!
//! Run with `cargo bench -p perfskel-compiler --bench compress`; throughput is reported in
//! tokens (elements) per second. Goals: greedy ≥ 10 M tokens/s, exact ≥ 1 M tokens/s.
//! `scripts/bench-compress.sh` prints the same figures as a table, with CPU time.
//! Measured on the shared 2-core development machine at load average 12–15 (median wall
//! clock, so 2–4× the CPU time): LU exact 320 ms, LU greedy 100 ms, the other NAS shapes
//! 1–33 ms; 100 k random tokens over two letters, exact 138 ms.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use perfskel_compiler::compress::{description_len, discover, expand, synthetic, Algorithm};
use rand::{RngExt, SeedableRng};

fn nas(c: &mut Criterion) {
    let mut group = c.benchmark_group("nas");
    group.sample_size(10);
    for row in synthetic::NAS {
        let Some(trace) = synthetic::nas(row.name) else {
            continue;
        };
        group.throughput(Throughput::Elements(trace.tokens.len() as u64));
        for (label, algorithm) in [("exact", Algorithm::Exact), ("greedy", Algorithm::Greedy)] {
            assert_eq!(
                description_len(&discover(&trace.tokens, algorithm)),
                row.compressed
            );
            group.bench_function(format!("{}_{label}", row.name), |b| {
                b.iter(|| discover(&trace.tokens, algorithm))
            });
        }
    }
    group.finish();
}

fn streams(c: &mut Criterion) {
    let mut group = c.benchmark_group("streams");
    group.sample_size(10);
    let regular = expand(&synthetic::regular(20_000, 40, 3));
    group.throughput(Throughput::Elements(regular.len() as u64));
    group.bench_function("regular_greedy", |b| {
        b.iter(|| discover(&regular, Algorithm::Greedy))
    });
    group.bench_function("regular_exact", |b| {
        b.iter(|| discover(&regular, Algorithm::Exact))
    });
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let random: Vec<u32> = (0..100_000).map(|_| rng.random_range(0..2)).collect();
    group.throughput(Throughput::Elements(random.len() as u64));
    group.bench_function("random2_exact", |b| {
        b.iter(|| discover(&random, Algorithm::Exact))
    });
    group.bench_function("random2_greedy", |b| {
        b.iter(|| discover(&random, Algorithm::Greedy))
    });
    group.finish();
}

criterion_group!(benches, nas, streams);
criterion_main!(benches);
