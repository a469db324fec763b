//! Issue 19's corrupted set: a real trace of a few hundred KB (4 ranks of a ring under
//! Open MPI), damaged in the ways files are damaged (flipped bits, zeroed or random
//! ranges, cut short, a header or manifest that lies, a field of 2^63), read by every
//! command that reads traces. Each run must end with success or a clear error — never a
//! panic, a signal or a hang — using at most 200 MB and 10 s (GNU time measures each).
//! Also `compile` of a skeleton that asks for 10^18 iterations.

use std::path::Path;
use std::process::Command;

use rand::{RngExt, SeedableRng};

use crate::tracer::Mpi;

const MAX_RSS_KB: u64 = 200 * 1024;
const MAX_SECONDS: f64 = 10.0;

/// Runs `perfskel args` under GNU time; gives (exit code, stderr, max RSS in KB,
/// elapsed s). Panics on a signal or a panic message.
fn measured(args: &[&str], what: &str) -> (Option<i32>, String, u64, f64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let times = dir.path().join("time");
    let out = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M %e")
        .arg("-o")
        .arg(&times)
        .arg(env!("CARGO_BIN_EXE_perfskel"))
        .args(args)
        .output()
        .expect(
            "GNU time (/usr/bin/time, Debian package `time`, installed by scripts/setup.sh) runs",
        );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let line = std::fs::read_to_string(&times).expect("GNU time's report");
    // GNU time writes "Command exited with non-zero status N" (or "terminated by
    // signal N") before the format's line.
    assert!(
        !line.contains("signal"),
        "{what}: perfskel {args:?} was killed: {line}{stderr}"
    );
    let last = line.lines().last().unwrap_or("");
    let mut fields = last.split_whitespace();
    let rss: u64 = fields.next().and_then(|f| f.parse().ok()).unwrap_or(0);
    let secs: f64 = fields.next().and_then(|f| f.parse().ok()).unwrap_or(0.0);
    assert!(
        !stderr.contains("panicked"),
        "{what}: perfskel {args:?} panicked: {stderr}"
    );
    (out.status.code(), stderr, rss, secs)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        if entry.file_type().expect("type").is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
        }
    }
}

#[test]
fn corrupted_traces_give_errors_within_bounds() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A ring of 4 ranks, 3000 messages each: about 60 KB per rank file.
    let recorded = crate::tracer::trace(Mpi::OpenMpi, "ring", &["256", "3000"]);
    let good = recorded.dir.path().join("trace");
    let total: u64 = std::fs::read_dir(&good)
        .expect("trace dir")
        .map(|e| e.expect("entry").metadata().expect("metadata").len())
        .sum();
    assert!(
        (150_000..1_000_000).contains(&total),
        "a trace of a few hundred KB: {total} bytes"
    );
    let mut rng = rand::rngs::StdRng::seed_from_u64(19);
    // Each damage: a name and what it does to one rank file's bytes (or the manifest).
    type Damage = fn(&mut Vec<u8>, &mut rand::rngs::StdRng);
    let damages: Vec<(&str, Damage)> = vec![
        ("flipped bit", |b, rng| {
            let at = rng.random_range(0..b.len());
            b[at] ^= 1 << rng.random_range(0..8);
        }),
        ("ten flipped bits", |b, rng| {
            for _ in 0..10 {
                let at = rng.random_range(0..b.len());
                b[at] ^= 1 << rng.random_range(0..8);
            }
        }),
        ("zeroed range", |b, rng| {
            let at = rng.random_range(0..b.len());
            let end = (at + 4096).min(b.len());
            b[at..end].fill(0);
        }),
        ("random range", |b, rng| {
            let at = rng.random_range(0..b.len());
            let end = (at + 512).min(b.len());
            rng.fill(&mut b[at..end]);
        }),
        ("cut short", |b, rng| {
            let at = rng.random_range(0..b.len());
            b.truncate(at);
        }),
        ("0xff run (varints of 2^63 and more)", |b, rng| {
            let at = rng.random_range(64..b.len());
            let end = (at + 40).min(b.len());
            b[at..end].fill(0xff);
        }),
        ("header claims 2^32 - 1 ranks", |b, _| {
            b[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        }),
        ("header length 65535", |b, _| {
            b[10..12].copy_from_slice(&u16::MAX.to_le_bytes());
        }),
    ];
    let mut runs = 0;
    let mut refused = 0;
    let (mut worst_rss, mut worst_s) = (0u64, 0.0f64);
    for round in 0..3 {
        for (name, damage) in &damages {
            let t = dir
                .path()
                .join(format!("bad-{round}-{}", name.replace(' ', "_")));
            copy_dir(&good, &t);
            let rank = rng.random_range(0..4u32);
            let file = t.join(format!("rank-{rank:05}.pst"));
            let mut bytes = std::fs::read(&file).expect("rank file");
            damage(&mut bytes, &mut rng);
            std::fs::write(&file, &bytes).expect("write");
            let t_text = t.to_str().expect("utf-8 path");
            let skel = t.join("out.skel");
            let skel_text = skel.to_str().expect("utf-8 path");
            for args in [
                vec!["trace", "stats", t_text],
                vec!["trace", "show", t_text],
                vec!["topo", t_text],
                vec!["skeletonize", t_text, "-o", skel_text, "--force"],
            ] {
                let what = format!("{name} (rank {rank}, round {round})");
                let (code, stderr, rss, secs) = measured(&args, &what);
                runs += 1;
                if code != Some(0) {
                    refused += 1;
                    assert!(
                        stderr.contains("error"),
                        "{what}: {args:?} failed without an error message: {stderr}"
                    );
                }
                assert!(
                    rss <= MAX_RSS_KB,
                    "{what}: {args:?} used {rss} KB (at most {MAX_RSS_KB})"
                );
                assert!(
                    secs <= MAX_SECONDS,
                    "{what}: {args:?} took {secs} s (at most {MAX_SECONDS})"
                );
                worst_rss = worst_rss.max(rss);
                worst_s = worst_s.max(secs);
            }
        }
    }
    // Manifests that lie.
    for (name, manifest) in [
        (
            "manifest of 2^32 - 1 ranks",
            "{\"n_ranks\": 4294967295}".to_string(),
        ),
        ("manifest of garbage", "\u{0}\u{1}garbage{{{".to_string()),
    ] {
        let t = dir.path().join(name.replace(' ', "_"));
        copy_dir(&good, &t);
        let path = t.join("manifest.json");
        let mut text = std::fs::read_to_string(&path).expect("manifest");
        if name.contains("2^32") {
            text = text.replacen("\"n_ranks\": 4", &manifest[1..manifest.len() - 1], 1);
        } else {
            text = manifest;
        }
        std::fs::write(&path, text).expect("write");
        let t_text = t.to_str().expect("utf-8 path");
        for args in [vec!["trace", "stats", t_text], vec!["topo", t_text]] {
            let (code, stderr, rss, secs) = measured(&args, name);
            runs += 1;
            assert_ne!(code, Some(0), "{name}: {args:?} accepted it");
            assert!(stderr.contains("manifest"), "{name}: {stderr}");
            assert!(
                rss <= MAX_RSS_KB && secs <= MAX_SECONDS,
                "{name}: {rss} KB, {secs} s"
            );
            worst_rss = worst_rss.max(rss);
            worst_s = worst_s.max(secs);
        }
    }
    eprintln!(
        "{runs} runs on damaged copies of a {total}-byte trace: {refused} refused with an error; at most {worst_rss} KB and {worst_s} s"
    );
}

/// `loop 10^18` passes check with a warning (the simulation stops at its budget);
/// `compile` refuses it within the budget's time and a few MB (it held one record per
/// message simulated: 3.2 GB).
#[test]
fn compile_of_a_huge_loop_is_refused_within_bounds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let skel = dir.path().join("huge.skel");
    std::fs::write(
        &skel,
        "skeleton huge\nranks 2\ntopology ring\napp_time 1 s\nloop 1000000000000000000 {\n    compute 1 us\n    sendrecv to next 8 B from prev 8 B\n}\n",
    )
    .expect("write");
    let out = dir.path().join("out");
    let (code, stderr, rss, _) = measured(
        &[
            "compile",
            skel.to_str().expect("utf-8 path"),
            "--ratio",
            "1:100",
            "--no-calibrate",
            "-o",
            out.to_str().expect("utf-8 path"),
        ],
        "loop 10^18",
    );
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains("too large to simulate"), "{stderr}");
    assert!(rss <= MAX_RSS_KB, "{rss} KB");
}
