//! Benchmarks logicalization of a 4096-rank 3-D torus, in canonical rank order and under
//! a random permutation of the ranks (goal: under one second each).
//!
//! Run with `cargo bench -p perfskel-compiler --bench logicalize`. Measured on the shared
//! 2-core development machine under load (median): ordered 75 ms, permuted 112 ms,
//! permuted with three heavy extra edges (nothing matches as a whole) 34 ms.

use criterion::{criterion_group, criterion_main, Criterion};
use perfskel_compiler::logicalize::{logicalize, synthetic_matrix, Options, Topology, Traffic};
use rand::seq::SliceRandom;
use rand::SeedableRng;

fn torus_4096(c: &mut Criterion) {
    let torus = Topology::Grid {
        dims: vec![16, 16, 16],
        periodic: vec![true, true, true],
    };
    let traffic = Traffic {
        messages: 100,
        bytes: 409_600,
        time_s: None,
    };
    let ordered = synthetic_matrix(&torus, 4096, None, traffic);
    let mut perm: Vec<u32> = (0..4096).collect();
    perm.shuffle(&mut rand::rngs::StdRng::seed_from_u64(42));
    let permuted = synthetic_matrix(&torus, 4096, Some(&perm), traffic);
    for (label, matrix) in [
        ("torus_4096_ordered", &ordered),
        ("torus_4096_permuted", &permuted),
    ] {
        let result = logicalize(matrix, &Options::default());
        assert_eq!(
            result.patterns.first().map(|p| p.name.as_str()),
            Some("torus(16, 16, 16)")
        );
        c.bench_function(label, |b| {
            b.iter(|| logicalize(matrix, &Options::default()))
        });
    }
    // The worst case: three heavy extra edges make the whole-graph match fail, so the
    // pass tries every split before reporting the traffic it cannot explain.
    let mut noisy = permuted.clone();
    for (a, b) in [(0, 2000), (5, 3000), (77, 4000)] {
        noisy.p2p.insert((perm[a], perm[b]), traffic);
    }
    let result = logicalize(&noisy, &Options::default());
    assert!(result.unexplained.edges > 0);
    c.bench_function("torus_4096_permuted_unmatched", |b| {
        b.iter(|| logicalize(&noisy, &Options::default()))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).warm_up_time(std::time::Duration::from_secs(1)).measurement_time(std::time::Duration::from_secs(5));
    targets = torus_4096
}
criterion_main!(benches);
