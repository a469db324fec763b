//! Logicalization end to end: synthetic communication matrices of every library pattern,
//! permuted, noisy, mixed and malformed, through `logicalize` and through `perfskel topo`;
//! and traces of the real example applications recorded under OpenMPI, through
//! `perfskel topo TRACE_DIR`.

use std::collections::BTreeMap;

use perfskel_compiler::logicalize::{
    logicalize, patterns, synthetic_matrix, CommMatrix, Logicalization, Options, PatternMatch,
    Topology, Traffic,
};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};

const HALO: Traffic = Traffic {
    messages: 100,
    bytes: 409_600,
    time_s: None,
};

fn grid(dims: &[u32], periodic: &[bool]) -> Topology {
    Topology::Grid {
        dims: dims.to_vec(),
        periodic: periodic.to_vec(),
    }
}

fn permutation(n: u32, seed: u64) -> Vec<u32> {
    let mut perm: Vec<u32> = (0..n).collect();
    perm.shuffle(&mut StdRng::seed_from_u64(seed));
    perm
}

/// Checks that `pattern` explains every edge of `matrix` and that its coordinates embed
/// the observed graph in the matched topology: every edge joins two ranks whose canonical
/// numbers are adjacent in it, and no two ranks share coordinates.
fn assert_embeds(matrix: &CommMatrix, pattern: &PatternMatch) {
    let n = pattern.coords.len() as u32;
    let by_coords: BTreeMap<Vec<u32>, u32> =
        (0..n).map(|r| (pattern.topology.coords(r), r)).collect();
    let canonical: BTreeMap<u32, u32> = pattern
        .coords
        .iter()
        .map(|(rank, c)| {
            (
                *rank,
                *by_coords.get(c).expect("coordinates inside the topology"),
            )
        })
        .collect();
    let mut seen: Vec<u32> = canonical.values().copied().collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), canonical.len(), "two ranks share coordinates");
    let graph = pattern.topology.graph(n);
    for &(src, dst) in matrix.p2p.keys() {
        assert!(
            graph.has_edge(canonical[&src], canonical[&dst]),
            "{src} -> {dst} is not an edge of {}",
            pattern.name
        );
    }
    assert_eq!(pattern.edges.len(), matrix.p2p.len());
}

/// Matches `topology` over `n` ranks (permuted by `seed` when given) and checks the result.
fn check_pattern(topology: &Topology, n: u32, seed: Option<u64>) -> Logicalization {
    let perm = seed.map(|s| permutation(n, s));
    let matrix = synthetic_matrix(topology, n, perm.as_deref(), HALO);
    let report = logicalize(&matrix, &Options::default());
    assert_eq!(
        report.patterns.len(),
        1,
        "{} over {n}: {}",
        topology.name(),
        report.to_text(false)
    );
    let pattern = &report.patterns[0];
    assert_embeds(&matrix, pattern);
    assert_eq!(report.unexplained.edges, 0);
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    if seed.is_none() {
        assert_eq!(
            pattern.name,
            topology.name(),
            "canonical numbering keeps the exact pattern"
        );
        let origin = pattern.coords.get(&0).expect("rank 0 placed");
        assert!(origin.iter().all(|c| *c == 0), "rank 0 at the origin");
    }
    report
}

#[test]
fn every_pattern_in_canonical_order_keeps_its_name_and_coordinates() {
    for n in [4u32, 5, 6, 8, 9, 12, 16, 24, 27, 30, 36, 64] {
        for topology in patterns::candidates(n) {
            check_pattern(&topology, n, None);
        }
    }
}

#[test]
fn every_pattern_permuted_is_found_up_to_isomorphism() {
    for n in [6u32, 8, 12, 16, 18, 32, 48] {
        for (idx, topology) in patterns::candidates(n).iter().enumerate() {
            check_pattern(topology, n, Some(u64::from(n) * 1000 + idx as u64));
        }
    }
}

#[test]
fn large_patterns_permuted() {
    let cases = [
        (grid(&[16, 16, 16], &[true; 3]), 4096),
        (grid(&[64, 64], &[false, false]), 4096),
        (grid(&[32, 16, 8], &[true, false, true]), 4096),
        (grid(&[4096], &[true]), 4096),
        (grid(&[1000], &[false]), 1000),
        (Topology::Hypercube { dim: 12 }, 4096),
        (Topology::Tree { arity: 2 }, 4095),
        (Topology::Tree { arity: 4 }, 3000),
        (Topology::BinomialTree, 4096),
        (Topology::Star, 2048),
        (Topology::Complete, 200),
    ];
    for (topology, n) in cases {
        let report = check_pattern(&topology, n, Some(7));
        let name = &report.patterns[0].name;
        assert_eq!(*name, topology.name(), "{}", report.to_text(false));
    }
}

#[test]
fn torus_of_fours_and_hypercube_are_the_same_graph() {
    let report = check_pattern(&grid(&[4, 4], &[true, true]), 16, Some(3));
    assert!(["torus(4, 4)", "hypercube(4)"].contains(&report.patterns[0].name.as_str()));
}

#[test]
fn many_factorizations_720_and_64() {
    let report = check_pattern(&grid(&[10, 9, 8], &[false; 3]), 720, Some(11));
    assert_eq!(report.patterns[0].name, "grid(10, 9, 8)");
    let counts = report.attempts[0].rejected.len();
    assert!(
        counts > 100,
        "720 has many factorizations, {counts} rejected"
    );
    // A torus of 4s is a hypercube (C4 = K2 × K2); permuted, the shorter name is kept.
    let report = check_pattern(&grid(&[4, 4, 4], &[true; 3]), 64, Some(5));
    assert_eq!(report.patterns[0].name, "hypercube(6)");
    let report = check_pattern(&grid(&[4, 4, 4], &[true; 3]), 64, None);
    assert_eq!(report.patterns[0].name, "torus(4, 4, 4)");
    let report = check_pattern(&grid(&[8, 9, 10], &[true, false, true]), 720, None);
    assert_eq!(
        report.patterns[0].name,
        "grid(8, 9, 10, periodic = [true, false, true])"
    );
}

fn add_noise(matrix: &mut CommMatrix, n_edges: usize, traffic: Traffic, seed: u64) -> usize {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut added = 0;
    while added < n_edges {
        let (a, b) = (
            rng.random_range(0..matrix.n_ranks),
            rng.random_range(0..matrix.n_ranks),
        );
        let (lo, hi) = (a.min(b), a.max(b));
        if a == b || matrix.p2p.contains_key(&(lo, hi)) || matrix.p2p.contains_key(&(hi, lo)) {
            continue;
        }
        matrix.p2p.insert((lo, hi), traffic);
        added += 1;
    }
    added
}

#[test]
fn noise_below_the_threshold_is_set_aside_and_reported() {
    let torus = grid(&[8, 8, 8], &[true; 3]);
    let mut matrix = synthetic_matrix(&torus, 512, Some(&permutation(512, 1)), HALO);
    let light = Traffic {
        messages: 1,
        bytes: 64,
        time_s: None,
    };
    add_noise(&mut matrix, 40, light, 2);
    let report = logicalize(&matrix, &Options::default());
    assert_eq!(report.patterns.len(), 1);
    assert_eq!(report.patterns[0].name, "torus(8, 8, 8)");
    assert_eq!(report.set_aside.edges, 40);
    assert_eq!(report.set_aside.traffic.bytes, 40 * 64);
    assert!(report.set_aside.bytes_pct < 0.01);
    assert!(report
        .to_text(false)
        .contains("set aside below the threshold: 40 edges"));
}

#[test]
fn noise_above_the_threshold_is_unexplained_with_explicit_peers() {
    let torus = grid(&[6, 6], &[true; 2]);
    let mut matrix = synthetic_matrix(&torus, 36, None, HALO);
    add_noise(&mut matrix, 3, HALO, 4);
    let report = logicalize(&matrix, &Options::default());
    // In canonical numbering the torus is peeled off and the three extra edges are left.
    assert_eq!(
        report.patterns.first().map(|p| p.name.as_str()),
        Some("torus(6, 6)")
    );
    assert_eq!(report.unexplained.edges, 3);
    assert_eq!(
        report.explicit_peers.values().map(Vec::len).sum::<usize>(),
        3
    );
    assert!(!report.warnings.is_empty());

    // Permuted, nothing is in canonical numbering: still a clear report.
    let mut matrix = synthetic_matrix(&torus, 36, Some(&permutation(36, 9)), HALO);
    add_noise(&mut matrix, 3, HALO, 4);
    let report = logicalize(&matrix, &Options::default());
    assert!(report.unexplained.edges > 0);
    assert!(!report.explicit_peers.is_empty());
    assert!(!report.warnings.is_empty());
}

#[test]
fn grid_exchange_plus_reduction_tree_is_split_by_message_size() {
    let n = 64;
    let perm = permutation(n, 21);
    let mut matrix = synthetic_matrix(&grid(&[8, 8], &[false; 2]), n, Some(&perm), HALO);
    let small = Traffic {
        messages: 50,
        bytes: 400,
        time_s: None,
    };
    let tree = synthetic_matrix(&Topology::BinomialTree, n, Some(&permutation(n, 22)), small);
    for (key, traffic) in &tree.p2p {
        let entry = matrix.p2p.entry(*key).or_default();
        entry.messages += traffic.messages;
        entry.bytes += traffic.bytes;
    }
    let report = logicalize(&matrix, &Options { threshold: 0.0 });
    let names: Vec<&str> = report.patterns.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        ["grid(8, 8)", "binomial_tree"],
        "{}",
        report.to_text(false)
    );
    // Edges shared by both patterns carry both traffics; they count as grid traffic.
    assert!(report.unexplained.edges <= 2 * 64);
}

#[test]
fn grid_plus_star_of_equal_sizes_is_peeled_in_rank_order() {
    let n = 16;
    let mut matrix = synthetic_matrix(&grid(&[4, 4], &[true; 2]), n, None, HALO);
    for r in 1..n {
        for key in [(0, r), (r, 0)] {
            matrix.p2p.entry(key).or_insert(HALO);
        }
    }
    let report = logicalize(&matrix, &Options::default());
    assert!(!report.patterns.is_empty(), "{}", report.to_text(true));
    assert!(report
        .patterns
        .iter()
        .any(|p| p.name == "torus(4, 4)" || p.name == "hypercube(4)"));
}

#[test]
fn two_disconnected_rings_are_matched_separately() {
    let mut matrix = CommMatrix::new(16).expect("16 ranks");
    for half in [0u32, 8] {
        for i in 0..8 {
            let (a, b) = (half + i, half + (i + 1) % 8);
            matrix.add_p2p(a, b, HALO).expect("in range");
            matrix.add_p2p(b, a, HALO).expect("in range");
        }
    }
    let report = logicalize(&matrix, &Options::default());
    let names: Vec<&str> = report.patterns.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["ring", "ring"], "{}", report.to_text(false));
    assert_eq!(report.unexplained.edges, 0);
}

#[test]
fn bad_input_gives_a_report_not_a_crash() {
    let empty = CommMatrix::new(0).expect("empty");
    let report = logicalize(&empty, &Options::default());
    assert!(report.patterns.is_empty());
    assert!(report.warnings[0].contains("no point-to-point traffic"));

    let mut one = CommMatrix::new(1).expect("one rank");
    one.add_p2p(0, 0, HALO).expect("self message");
    let report = logicalize(&one, &Options::default());
    assert!(report.patterns.is_empty());
    assert_eq!(report.self_traffic.messages, 100);

    // Ranks 12..16 never communicate: the grid is found over the others.
    let mut idle = synthetic_matrix(&grid(&[3, 4], &[false; 2]), 12, None, HALO);
    idle.n_ranks = 16;
    let report = logicalize(&idle, &Options::default());
    assert_eq!(report.patterns[0].name, "grid(3, 4)");
    assert_eq!(report.idle_ranks, [12, 13, 14, 15]);
    assert!(report.warnings.iter().any(|w| w.contains("4 of 16 ranks")));

    // The Petersen graph is in no library.
    let mut petersen = CommMatrix::new(10).expect("10 ranks");
    let edges = [
        (0, 1),
        (1, 2),
        (2, 3),
        (3, 4),
        (4, 0),
        (0, 5),
        (1, 6),
        (2, 7),
        (3, 8),
        (4, 9),
    ];
    let inner = [(5, 7), (7, 9), (9, 6), (6, 8), (8, 5)];
    for (a, b) in edges.iter().chain(&inner) {
        petersen.add_p2p(*a, *b, HALO).expect("in range");
        petersen.add_p2p(*b, *a, HALO).expect("in range");
    }
    let report = logicalize(&petersen, &Options::default());
    assert!(report.patterns.is_empty());
    assert_eq!(report.unexplained.edges, 30);
    assert_eq!(report.explicit_peers.len(), 10);
    assert!(report.warnings[0].contains("no pattern of the library"));
    let text = report.to_text(false);
    assert!(text.contains("rejected by"), "{text}");

    // Extreme counts saturate instead of overflowing.
    let huge = Traffic {
        messages: u64::MAX,
        bytes: u64::MAX,
        time_s: Some(f64::MAX),
    };
    let mut matrix = synthetic_matrix(&Topology::Star, 40, None, huge);
    matrix.add_p2p(3, 7, huge).expect("in range");
    let report = logicalize(&matrix, &Options::default());
    let _ = report.to_text(true);
    let _ = serde_json::to_string(&report).expect("json");

    // A declared rank count far above the active ranks: the ring is found, the rest idle.
    let mut sparse = synthetic_matrix(&grid(&[6], &[true]), 6, None, HALO);
    sparse.n_ranks = 1 << 20;
    let report = logicalize(&sparse, &Options::default());
    assert_eq!(report.patterns[0].name, "ring");
    assert_eq!(report.idle_ranks.len(), (1 << 20) - 6);

    // Zero-byte messages are weighed by count; NaN thresholds fall back to the default.
    let zero = Traffic {
        messages: 10,
        bytes: 0,
        time_s: None,
    };
    let matrix = synthetic_matrix(&grid(&[5], &[true]), 5, None, zero);
    let report = logicalize(
        &matrix,
        &Options {
            threshold: f64::NAN,
        },
    );
    assert_eq!(report.patterns[0].name, "ring");
}

#[test]
fn directed_forms_are_reported_as_flow() {
    use perfskel_compiler::logicalize::Flow;
    let mut pipeline = CommMatrix::new(8).expect("8 ranks");
    for r in 0..7 {
        pipeline.add_p2p(r, r + 1, HALO).expect("in range");
    }
    let report = logicalize(&pipeline, &Options::default());
    assert_eq!(report.patterns[0].name, "chain");
    assert_eq!(report.patterns[0].flow, Flow::Forward);

    let mut shift = CommMatrix::new(6).expect("6 ranks");
    for r in 0..6 {
        shift.add_p2p(r, (r + 1) % 6, HALO).expect("in range");
    }
    let report = logicalize(&shift, &Options::default());
    assert_eq!(report.patterns[0].name, "ring");
    assert_eq!(report.patterns[0].flow, Flow::Forward);
    assert!(
        report.patterns[0]
            .edges
            .iter()
            .all(|e| e.relation
                == perfskel_compiler::logicalize::Relation::Offset { offset: vec![1] })
    );

    let mut reduce = CommMatrix::new(15).expect("15 ranks");
    for r in 1..15 {
        reduce.add_p2p(r, (r - 1) / 2, HALO).expect("in range");
    }
    let report = logicalize(&reduce, &Options::default());
    assert_eq!(report.patterns[0].name, "tree(2)");
    assert_eq!(report.patterns[0].flow, Flow::Backward);
}

#[test]
fn output_is_deterministic() {
    let matrix = synthetic_matrix(
        &grid(&[6, 5], &[true, false]),
        30,
        Some(&permutation(30, 3)),
        HALO,
    );
    let a = serde_json::to_string(&logicalize(&matrix, &Options::default())).expect("json");
    let b = serde_json::to_string(&logicalize(&matrix, &Options::default())).expect("json");
    assert_eq!(a, b);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn any_library_pattern_under_any_permutation(n in 4u32..40, pick in 0usize..1000, seed in 0u64..1_000_000) {
        let candidates = patterns::candidates(n);
        let topology = &candidates[pick % candidates.len()];
        check_pattern(topology, n, Some(seed));
    }

    #[test]
    fn light_noise_never_changes_the_match(n in 8u32..40, pick in 0usize..1000, seed in 0u64..1_000_000, noise in 1usize..12) {
        let candidates = patterns::candidates(n);
        let topology = &candidates[pick % candidates.len()];
        let mut matrix = synthetic_matrix(topology, n, Some(&permutation(n, seed)), HALO);
        let light = Traffic { messages: 1, bytes: 100, time_s: None };
        let max_noise = (n as usize * (n as usize - 1) / 2).saturating_sub(matrix.p2p.len() / 2);
        let added = add_noise(&mut matrix, noise.min(max_noise), light, seed);
        let report = logicalize(&matrix, &Options::default());
        prop_assert_eq!(report.patterns.len(), 1);
        prop_assert_eq!(report.set_aside.edges, added);
        prop_assert_eq!(report.unexplained.edges, 0);
    }

    #[test]
    fn arbitrary_matrices_never_crash(edges in proptest::collection::vec((0u32..20, 0u32..20, 0u64..5, 0u64..100_000), 0..80)) {
        let mut matrix = CommMatrix::new(0).expect("empty");
        for (a, b, messages, bytes) in edges {
            matrix.add_p2p(a, b, Traffic { messages, bytes, time_s: None }).expect("in range");
        }
        let report = logicalize(&matrix, &Options::default());
        let _ = report.to_text(true);
    }
}

#[test]
fn cli_prints_json_and_draws_svg() {
    let dir = std::env::temp_dir().join(format!("perfskel-topo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let csv = dir.join("grid.csv");
    let mut text = String::from("# 2x3 grid\nsrc,dst,messages,bytes\n");
    for (key, t) in &synthetic_matrix(&grid(&[2, 3], &[false; 2]), 6, None, HALO).p2p {
        text.push_str(&format!("{},{},{},{}\n", key.0, key.1, t.messages, t.bytes));
    }
    text.push_str("collective,barrier,3,0\n");
    std::fs::write(&csv, text).expect("write csv");
    let svg = dir.join("grid.svg");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_perfskel"))
        .args(["topo", "--format", "json", "--plot"])
        .arg(&svg)
        .arg(&csv)
        .output()
        .expect("run perfskel");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json output");
    assert_eq!(json["patterns"][0]["name"], "grid(2, 3)");
    assert_eq!(json["collectives"]["barrier"]["messages"], 3);
    let drawing = std::fs::read_to_string(&svg).expect("svg written");
    assert!(drawing.contains("<svg") && drawing.contains("<rect"));
    // Ranks named on the axes in grid order, the colour bar, a tooltip per cell.
    assert!(
        drawing.contains("sender, rank in grid(2, 3) order"),
        "{drawing}"
    );
    assert!(drawing.contains("bytes sent, log scale"));
    assert!(drawing.contains("<title>rank 0 → rank "));
    // The values exported read back as the same matrix.
    let export = dir.join("grid-export.csv");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_perfskel"))
        .args(["topo", "--export"])
        .arg(&export)
        .arg(&csv)
        .output()
        .expect("run perfskel");
    assert!(output.status.success());
    let exported = std::fs::read_to_string(&export).expect("export written");
    let original = std::fs::read_to_string(&csv).expect("csv");
    assert_eq!(
        perfskel_compiler::logicalize::CommMatrix::from_csv(&exported).expect("reads back"),
        perfskel_compiler::logicalize::CommMatrix::from_csv(&original).expect("reads")
    );
    // An existing file is not overwritten without --force (here: the input itself).
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_perfskel"))
        .args(["topo", "--plot"])
        .arg(&csv)
        .arg(&csv)
        .output()
        .expect("run perfskel");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("exists; pass --force"));
    assert!(std::fs::read_to_string(&csv)
        .expect("csv")
        .starts_with("# 2x3 grid"));

    let json_input = dir.join("tree.json");
    let edges: Vec<String> = (1..7)
        .map(|r| {
            format!(
                r#"{{"src": {r}, "dst": {}, "messages": 4, "bytes": 32}}"#,
                (r - 1) / 2
            )
        })
        .collect();
    std::fs::write(
        &json_input,
        format!(r#"{{"ranks": 7, "p2p": [{}]}}"#, edges.join(", ")),
    )
    .expect("write json");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_perfskel"))
        .arg("topo")
        .arg(&json_input)
        .output()
        .expect("run perfskel");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("topology: tree(2)") && text.contains("backward only"),
        "{text}"
    );

    std::fs::write(&csv, "0,1,oops,3\n").expect("write csv");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_perfskel"))
        .arg("topo")
        .arg(&csv)
        .output()
        .expect("run perfskel");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("line 1"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The text and JSON reports as reviewers see them (`snapshots/topo/`).
#[test]
fn report_snapshots() {
    let timed = |messages, bytes, time_s| Traffic {
        messages,
        bytes,
        time_s: Some(time_s),
    };
    let mut matrix = synthetic_matrix(
        &grid(&[4, 3], &[false; 2]),
        12,
        None,
        timed(100, 409_600, 0.25),
    );
    for (key, _) in synthetic_matrix(&Topology::BinomialTree, 12, None, HALO).p2p {
        if key.0 > key.1 {
            let entry = matrix.p2p.entry(key).or_insert(timed(0, 0, 0.0));
            entry.messages += 50;
            entry.bytes += 400;
            entry.time_s = entry.time_s.map(|t| t + 0.001);
        }
    }
    matrix
        .add_p2p(2, 9, timed(1, 16, 0.000_01))
        .expect("in range");
    matrix.add_collective("allreduce", timed(50, 400, 0.002));
    let report = logicalize(&matrix, &Options::default());
    insta::with_settings!({snapshot_path => "../snapshots/topo", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("grid_plus_reduction_tree", report.to_text(true));
    });

    let ring = synthetic_matrix(&grid(&[4], &[true]), 4, Some(&[0, 2, 1, 3]), HALO);
    let json = serde_json::to_string_pretty(&logicalize(&ring, &Options::default())).expect("json");
    insta::with_settings!({snapshot_path => "../snapshots/topo", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("permuted_ring_json", json);
    });
}

/// Compiles `examples/apps/{app}.c` with OpenMPI's wrapper (once per test run).
fn build_openmpi_app(app: &str) -> std::path::PathBuf {
    let out_dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("topo-apps");
    std::fs::create_dir_all(&out_dir).expect("create build dir");
    let exe = out_dir.join(app);
    let src = crate::common::root().join(format!("examples/apps/{app}.c"));
    let out = std::process::Command::new("mpicc.openmpi")
        .args(["-O2", "-g", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("run mpicc.openmpi");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

fn perfskel_mpi(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_perfskel"))
        .args(args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("run perfskel")
}

/// Records `app args` at `n` ranks into `dir/name`, then gives `perfskel topo --format
/// json` of the trace (exit code, report).
fn record_and_topo(
    dir: &std::path::Path,
    name: &str,
    n: u32,
    app: &str,
    args: &[&str],
) -> (std::path::PathBuf, serde_json::Value) {
    let exe = build_openmpi_app(app);
    let trace = dir.join(name);
    let np = n.to_string();
    let mut cmd = vec![
        "record",
        "-o",
        trace.to_str().expect("utf-8 path"),
        "--",
        "mpirun.openmpi",
        "--oversubscribe",
        "-np",
        &np,
        exe.to_str().expect("utf-8 path"),
    ];
    cmd.extend(args);
    let out = {
        let _guard = crate::common::MPI_LOCK
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        perfskel_mpi(&cmd)
    };
    assert!(
        out.status.success(),
        "record {app}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, report) = topo_json(&trace);
    assert_eq!(code, Some(0), "{app}: {report:#}");
    (trace, report)
}

fn topo_json(trace: &std::path::Path) -> (Option<i32>, serde_json::Value) {
    let out = perfskel_mpi(&[
        "topo",
        trace.to_str().expect("utf-8 path"),
        "--format",
        "json",
    ]);
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("topo JSON: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), report)
}

fn pattern_names(report: &serde_json::Value) -> Vec<String> {
    report["patterns"]
        .as_array()
        .expect("patterns")
        .iter()
        .map(|p| p["name"].as_str().expect("name").to_string())
        .collect()
}

/// The only pattern explains all point-to-point traffic with the ranks in canonical order.
fn assert_single_identity(report: &serde_json::Value, names: &[&str]) {
    let found = pattern_names(report);
    assert_eq!(found.len(), 1, "{report:#}");
    assert!(names.contains(&found[0].as_str()), "{found:?}: {report:#}");
    let pattern = &report["patterns"][0];
    assert_eq!(pattern["share"]["bytes_pct"], 100.0, "{report:#}");
    assert_eq!(report["unexplained"]["edges"], 0);
}

/// Traces of the example applications: each app's pattern is found from its sends, its
/// collectives are kept apart, and a trace missing a rank says so.
#[test]
fn recorded_apps_give_their_topology() {
    let started = std::time::Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");

    // Cartesian 3 x 2 grid, non-periodic (MPI_PROC_NULL at the borders), halo by sendrecv.
    let (_, r) = record_and_topo(dir.path(), "stencil6", 6, "stencil", &["16", "3"]);
    assert_single_identity(&r, &["grid(3, 2)", "grid(2, 3)"]);
    assert_eq!(r["patterns"][0]["map_method"], "identity");
    assert_eq!(r["patterns"][0]["flow"], "both");
    // 4 sendrecv per iteration, 3 iterations; 14 directed edges of a 3 x 2 grid.
    assert_eq!(r["total"]["messages"], 42);
    assert_eq!(r["n_edges"], 14);
    assert_eq!(r["collectives"]["allreduce"]["messages"], 18);
    // The application's own grid, in its dimension order (MPI_Dims_create's 3 x 2).
    assert_eq!(r["declared"]["topology"], "grid(3, 2)", "{r:#}");
    assert_eq!(r["declared"]["periodic"], serde_json::json!([false, false]));

    // 2 x 2 grid: a 4-cycle, the same graph as ring(4) and hypercube(2); the library
    // names it by its fewest dimensions.
    let (st4, r) = record_and_topo(dir.path(), "stencil4", 4, "stencil", &["16", "3"]);
    assert_single_identity(&r, &["ring", "grid(2, 2)", "hypercube(2)"]);
    assert_eq!(r["n_edges"], 8);
    // The trace says which: the application declared a 2 x 2 grid, and the text leads
    // with it.
    assert_eq!(r["declared"]["topology"], "grid(2, 2)", "{r:#}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_perfskel"))
        .arg("topo")
        .arg(&st4)
        .output()
        .expect("perfskel topo");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("\ndeclared topology: grid(2, 2), the application's own (MPI_Cart_create"),
        "{text}"
    );

    // ring.c is a pipeline (and declares no grid): rank r sends to r + 1, the last rank only receives.
    let (_, r) = record_and_topo(dir.path(), "ring", 4, "ring", &["256", "4"]);
    assert_single_identity(&r, &["chain"]);
    assert!(r.get("declared").is_none(), "{r:#}");
    assert_eq!(r["patterns"][0]["flow"], "forward");
    assert_eq!(r["total"]["bytes"], 3 * 4 * 256 * 8);
    assert_eq!(r["collectives"]["reduce"]["messages"], 4);

    // Binary reduction tree in heap order (6 ranks: not also a chain, as 4 would be).
    let (_, r) = record_and_topo(dir.path(), "tree", 6, "tree_reduce", &["1000", "3"]);
    assert_single_identity(&r, &["tree(2)"]);
    assert_eq!(r["patterns"][0]["flow"], "backward");
    assert_eq!(r["total"]["messages"], 5 * 3);
    assert_eq!(r["collectives"]["bcast"]["messages"], 6 * 3);

    // transpose.c exchanges only by MPI_Alltoall: no point-to-point topology, the
    // all-to-all kept apart as a collective.
    let (_, r) = record_and_topo(dir.path(), "transpose", 4, "transpose", &["8", "3"]);
    assert!(pattern_names(&r).is_empty(), "{r:#}");
    assert_eq!(r["total"]["messages"], 0);
    let alltoall = &r["collectives"]["alltoall"];
    assert_eq!(alltoall["messages"], 4 * 3);
    assert_eq!(alltoall["bytes"], 4 * 3 * (8 * 8 * 8 * 4));

    // A rank file removed: reported, exit code 1; its sends are absent.
    std::fs::remove_file(st4.join("rank-00003.pst")).expect("remove rank 3");
    let (code, r) = topo_json(&st4);
    assert_eq!(code, Some(1));
    let warnings = r["warnings"].to_string();
    assert!(warnings.contains("missing for rank(s) 3"), "{warnings}");
    assert_eq!(r["n_ranks"], 4);
    assert_eq!(r["n_edges"], 6);

    eprintln!("recorded_apps_give_their_topology: {:?}", started.elapsed());
}
