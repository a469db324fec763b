//! Parse + check throughput on a large generated skeleton (goal: ≥ 50 MB/s).
//!
//! The skeleton is what `skeletonize` produces for an irregular application: thousands
//! of distinct loop nests with halo exchanges, collectives on sub-communicators and
//! rank-conditional blocks, run by 16 ranks, so the deadlock simulation does real work.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use perfskel_compiler::check::{check, Options};

fn large_skeleton(phases: usize) -> String {
    let mut text = String::from(
        "# Generated for the parse + check benchmark.\nskeleton large\nranks 16\ntopology torus(4, 4)\napp_time 3600 s\n\n\
         comm row = cart_sub(world, keep = [1])\ncomm col = cart_sub(world, keep = [0])\n\n",
    );
    for phase in 0..phases {
        let size = 1 + phase % 64;
        text.push_str(&format!(
            "# phase {phase}\n\
             loop 2 {{\n\
             \x20   compute {} us working_set {size} MiB @ \"solver.f90:{phase}\"\n\
             \x20   req rw = irecv west {size} KiB tag {tag} @ \"halo.f90:10\"\n\
             \x20   req re = irecv east {size} KiB tag {tag} @ \"halo.f90:11\"\n\
             \x20   req sw = isend east {size} KiB tag {tag} @ \"halo.f90:12\"\n\
             \x20   req se = isend west {size} KiB tag {tag} @ \"halo.f90:13\"\n\
             \x20   waitall rw, re, sw, se @ \"halo.f90:15\"\n\
             \x20   sendrecv to north {size} KiB from south {size} KiB tag {tag} @ \"halo.f90:20\"\n\
             \x20   if coord(0) % 2 == 0 and rank != {r} {{\n\
             \x20       compute uniform(10 us, 20 us)\n\
             \x20   }} else {{\n\
             \x20       compute 15 us # balance\n\
             \x20   }}\n\
             \x20   allreduce 8 B on row @ \"dot.f90:{phase}\"\n\
             }}\n\
             bcast {size} KiB root {root} on col\n\n",
            100 + phase % 900,
            tag = phase % 1000,
            r = phase % 16,
            root = phase % 4,
        ));
    }
    text
}

fn parse_check(c: &mut Criterion) {
    let text = large_skeleton(4000);
    let mut group = c.benchmark_group("parse_check");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.sample_size(10);
    group.bench_function(format!("parse {} KiB", text.len() / 1024), |b| {
        b.iter(|| perfskel_grammar::parse(&text))
    });
    group.bench_function(format!("parse+check {} KiB", text.len() / 1024), |b| {
        b.iter(|| {
            let (program, diags) = perfskel_grammar::parse(&text);
            assert!(diags.is_empty());
            let checked = check(&program, &text, Options::default());
            assert!(checked.info.is_some(), "{:?}", checked.diags.first());
        })
    });
    group.finish();
}

criterion_group!(benches, parse_check);
criterion_main!(benches);
