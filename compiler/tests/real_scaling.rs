//! Scaling on the skeletons of real applications (`tests/data/real/`: LAMMPS's melt and
//! peptide, HPCC, and the bucket sort, multigrid and ghost-exchange programs of
//! `tests/apps/`, as `perfskel skeletonize` made them from traces on this project's
//! machine; `hpcc_4_windows.skel` is session 26's, with request windows and polls that
//! carry their cost), through the library's `pipeline::compile` on the default target, under the
//! built-in model and a measured one, at 1:1 to 1:1000. What the default path promises:
//! - at 1:1 nothing is scaled: the ratio reached is 1, compute and sizes are kept;
//! - above, compute is never stretched and message sizes never scaled; the ratio the
//!   prediction multiplies the cut part by (the rest ratio where some communication
//!   counts by its own, else the ratio reached) is within 2x of the one asked, or
//!   compile refuses with `ratio-far-from-asked` naming the ratio it reaches, or
//!   `too-short-to-scale`; no other outcome; a skeleton that as a whole runs more than
//!   twice as long as asked warns (`ratio-not-reached`);
//! - the search is deterministic: the same input gives the same program, byte for byte.

use std::path::{Path, PathBuf};

use perfskel_compiler::back::Backend;
use perfskel_compiler::pipeline::{compile, CompileError};
use perfskel_compiler::scale::{Model, Target};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from(".."), Path::to_path_buf)
}

fn real_skeletons() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("tests/data/real"))
        .expect("tests/data/real")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "skel"))
        .collect();
    files.sort();
    files
}

/// A model as `perfskel calibrate` measured this machine (Open MPI, shared memory).
fn measured() -> Model {
    Model {
        mpi: "openmpi".into(),
        latency_s: 1.6e-7,
        bandwidth_bytes_per_s: 1.0e10,
        comm_create_s: 1.0e-5,
        ..Model::default()
    }
}

#[test]
fn real_skeletons_scale_faithfully_or_say_which_ratio_they_reach() {
    let files = real_skeletons();
    assert!(files.len() >= 7, "{files:?}");
    let (mut reached_far, mut runs_longer) = (0, 0);
    for path in &files {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let name = name.unwrap_or_default();
        let source = std::fs::read_to_string(path).expect("read");
        for (model_name, model) in [("built-in", Model::default()), ("measured", measured())] {
            for k in [1u64, 10, 100, 1000] {
                let at = format!("{name} at 1:{k} ({model_name} model)");
                let once = compile(&name, &source, k, Some(Backend::C), &model, Target::Model);
                match once {
                    Ok(compiled) => {
                        let s = &compiled.scaled;
                        if k == 1 {
                            assert_eq!(s.ratio_reached, 1.0, "{at}");
                            assert_eq!(s.compute_factor, 1.0, "{at}");
                        }
                        assert!(
                            s.compute_factor <= 1.0,
                            "{at}: compute x{}",
                            s.compute_factor
                        );
                        assert_eq!(s.size_factor, 1.0, "{at}");
                        // The ratio the prediction multiplies the cut part by: the
                        // rest ratio where some communication counts by its own.
                        let effective = if s.own_ratios.is_empty() {
                            s.ratio_reached
                        } else {
                            s.rest_ratio
                        };
                        let miss = effective / k as f64;
                        assert!((0.5..=2.0).contains(&miss), "{at}: reaches 1:{effective}");
                        // A skeleton that runs more than twice as long as asked says so.
                        if s.ratio_reached * 2.0 < k as f64 {
                            runs_longer += 1;
                            assert!(
                                compiled.diags.iter().any(|d| d.code == "ratio-not-reached"),
                                "{at}: runs 1:{} without a warning",
                                s.ratio_reached
                            );
                        }
                        assert!(
                            s.expected_skeleton_s.is_finite() && s.expected_skeleton_s > 0.0,
                            "{at}: expects {}",
                            s.expected_skeleton_s
                        );
                        // Deterministic: the same program again.
                        let again =
                            compile(&name, &source, k, Some(Backend::C), &model, Target::Model);
                        let Ok(again) = again else {
                            panic!("{at}: the second compile failed");
                        };
                        assert_eq!(compiled.files.len(), again.files.len(), "{at}");
                        for (a, b) in compiled.files.iter().zip(&again.files) {
                            assert!(
                                a.path == b.path && a.contents == b.contents,
                                "{at}: {}",
                                a.path
                            );
                        }
                    }
                    Err(CompileError::Diags(diags)) => {
                        let errors: Vec<_> = diags.iter().filter(|d| d.is_error()).collect();
                        assert!(!errors.is_empty(), "{at}");
                        for e in &errors {
                            assert!(
                                ["ratio-far-from-asked", "too-short-to-scale"].contains(&e.code),
                                "{at}: {} {}",
                                e.code,
                                e.message
                            );
                            if e.code == "ratio-far-from-asked" {
                                reached_far += 1;
                                assert!(
                                    e.notes
                                        .iter()
                                        .any(|n| n.contains("ask for a ratio near 1:")),
                                    "{at}: {e:?}"
                                );
                            }
                        }
                        assert!(k > 1, "{at}: 1:1 must compile");
                    }
                    Err(CompileError::Message(m)) => panic!("{at}: {m}"),
                }
            }
        }
    }
    // HPCC's panel loops do not cut by 1000, nor the bucket sort's exchange: their
    // communication counts by its own ratios, and the skeletons that run far longer
    // than asked say so (or, where it would be nearly all of their time, are refused).
    assert!(reached_far + runs_longer > 0, "{reached_far} {runs_longer}");
}
