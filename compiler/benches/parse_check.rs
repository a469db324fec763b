//! Parse + check throughput on a large generated skeleton (goal: ≥ 50 MB/s).

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use perfskel_compiler::check::{check, Options};

// The allocator of the `perfskel` binary, so the figure is the binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod large_skeleton;
use large_skeleton::large_skeleton;

fn parse_check(c: &mut Criterion) {
    let text = large_skeleton(4000);
    let mut group = c.benchmark_group("parse_check");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.sample_size(10);
    // Freeing the syntax tree (about 3 ms) is not counted: `perfskel check` leaves it to
    // another thread.
    group.bench_function(format!("parse {} KiB", text.len() / 1024), |b| {
        b.iter_batched(
            || (),
            |()| perfskel_grammar::parse(&text),
            BatchSize::PerIteration,
        )
    });
    group.bench_function(format!("parse+check {} KiB", text.len() / 1024), |b| {
        b.iter_batched(
            || (),
            |()| {
                let (program, diags) = perfskel_grammar::parse(&text);
                assert!(diags.is_empty());
                let checked = check(&program, &text, Options::default());
                assert!(checked.info.is_some(), "{:?}", checked.diags.first());
                program
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, parse_check);
criterion_main!(benches);
