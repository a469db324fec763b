//! Benchmark of `analyze`: 1,000 experiments × 10,000 call sites (the goal is
//! under one second), with call sites listed in the same order in every experiment (as
//! profilers print them) and in a shuffled order (the hashing fallback).

use criterion::{criterion_group, criterion_main, Criterion};
use perfskel_studies::analyze::{
    analyze, CallSiteKey, CallSiteProfile, Experiment, Options, TaskStats,
};

const N_EXPERIMENTS: usize = 1_000;
const N_SITES: usize = 10_000;

/// Deterministic pseudo-random numbers (xorshift64*), so every run benchmarks the same data.
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn study(shuffled: bool) -> Vec<Experiment> {
    let mut rng = Rng(0x1234_5678);
    let task_counts = [2u32, 4, 8, 16, 32, 64, 128, 256, 512, 1024];
    (0..N_EXPERIMENTS)
        .map(|idx| {
            let n_tasks = task_counts[idx % task_counts.len()];
            let mut call_sites: Vec<CallSiteProfile> = (0..N_SITES)
                .map(|site| {
                    let growth = if site % 1000 == 0 {
                        f64::from(n_tasks).log2()
                    } else {
                        1.0
                    };
                    CallSiteProfile {
                        site: CallSiteKey {
                            file: format!("src/module{}.c", site / 100),
                            line: (site % 100) as u32 * 10 + 1,
                            function: format!("kernel{}", site / 20),
                            operation: ["Wait", "Isend", "Irecv", "Allreduce"][site % 4].into(),
                        },
                        tasks: vec![TaskStats {
                            task: None,
                            count: 100,
                            total_s: growth * (0.5 + rng.unit()),
                            min_s: 0.0,
                            max_s: 0.0,
                            bytes: 0.0,
                        }],
                    }
                })
                .collect();
            if shuffled {
                // A fixed rotation per experiment defeats the same-position guess.
                call_sites.rotate_left((idx * 7919) % N_SITES);
            }
            Experiment {
                name: format!("run{idx}"),
                application: "bench".into(),
                n_tasks,
                task_times_s: Vec::new(),
                call_sites,
            }
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("analyze_1000x10000");
    group.sample_size(10);
    for shuffled in [false, true] {
        let experiments = study(shuffled);
        let name = if shuffled {
            "shuffled_order"
        } else {
            "same_order"
        };
        group.bench_function(name, |b| {
            b.iter(|| analyze(&experiments, &Options::default()).map(|a| a.applications.len()))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
