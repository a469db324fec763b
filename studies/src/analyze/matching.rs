//! Call-site matching: takes the experiments of one application, gives the distinct
//! call sites in key order and each site's time per experiment (summed over tasks). Keys
//! are compared by value — file, line, function, operation — because every profile
//! numbers its sites its own way.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::{CallSiteKey, Experiment};

/// Matches call sites across runs: the sorted distinct keys, and for each key its time
/// summed over tasks in every run.
///
/// Large studies are split into contiguous chunks of runs matched on separate threads;
/// the chunks' key tables are then merged (a few thousand lookups) and every key gets its
/// rank in key order, so the result does not depend on the number of threads.
pub(super) fn site_time_matrix<'a>(
    runs: &[&'a Experiment],
) -> (Vec<&'a CallSiteKey>, Vec<Vec<f64>>) {
    let n_threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(runs.len() / MIN_RUNS_PER_THREAD)
        .max(1);
    let chunk_len = runs.len().div_ceil(n_threads).max(1);
    let chunks: Vec<ChunkSites<'a>> = if n_threads == 1 {
        vec![match_chunk(runs)]
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = runs
                .chunks(chunk_len)
                .map(|chunk| scope.spawn(move || match_chunk(chunk)))
                .collect();
            handles
                .into_iter()
                .map(|handle| match handle.join() {
                    Ok(chunk) => chunk,
                    // `match_chunk` does not panic; if it ever did, re-raise it here.
                    Err(payload) => std::panic::resume_unwind(payload),
                })
                .collect()
        })
    };

    // Merge the chunks' key tables: global ids in first-seen order.
    let mut index: HashMap<&CallSiteKey, u32, BuildHasherDefault<FxHasher>> = HashMap::default();
    let mut keys: Vec<&CallSiteKey> = Vec::new();
    let global_of_local: Vec<Vec<u32>> = chunks
        .iter()
        .map(|chunk| {
            chunk
                .keys
                .iter()
                .map(|&key| {
                    *index.entry(key).or_insert_with(|| {
                        keys.push(key);
                        (keys.len() - 1) as u32
                    })
                })
                .collect()
        })
        .collect();

    // Renumber by key so every later loop runs in a deterministic order.
    let n_sites = keys.len();
    let mut order: Vec<u32> = (0..n_sites as u32).collect();
    order.sort_by(|&a, &b| keys[a as usize].cmp(keys[b as usize]));
    let sorted_keys: Vec<&CallSiteKey> = order.iter().map(|&old| keys[old as usize]).collect();
    let mut new_of_global = vec![0u32; n_sites];
    for (new, &global) in order.iter().enumerate() {
        new_of_global[global as usize] = new as u32;
    }

    // A blocked transpose fills the per-site vectors a few cache lines at a time;
    // scattering straight into per-site vectors would miss the cache on every write.
    let mut times = vec![vec![0.0; runs.len()]; n_sites];
    let mut first_run = 0;
    for (chunk, globals) in chunks.iter().zip(&global_of_local) {
        let mut local_of_new = vec![u32::MAX; n_sites];
        for (local, &global) in globals.iter().enumerate() {
            local_of_new[new_of_global[global as usize] as usize] = local as u32;
        }
        const BLOCK: usize = 64;
        for block_start in (0..n_sites).step_by(BLOCK) {
            let block_end = (block_start + BLOCK).min(n_sites);
            for (run_offset, row) in chunk.rows.iter().enumerate() {
                let run_idx = first_run + run_offset;
                for (site_times, &local) in times[block_start..block_end]
                    .iter_mut()
                    .zip(&local_of_new[block_start..block_end])
                {
                    site_times[run_idx] = row.get(local as usize).copied().unwrap_or(0.0);
                }
            }
        }
        first_run += chunk.rows.len();
    }
    (sorted_keys, times)
}

/// Runs matched by one thread at least; fewer cost more in threads than they save.
const MIN_RUNS_PER_THREAD: usize = 64;

/// The call sites of a chunk of runs: keys by local id, and per run the time per local id.
struct ChunkSites<'a> {
    keys: Vec<&'a CallSiteKey>,
    rows: Vec<Vec<f64>>,
}

fn match_chunk<'a>(runs: &[&'a Experiment]) -> ChunkSites<'a> {
    let mut index: HashMap<&CallSiteKey, u32, BuildHasherDefault<FxHasher>> = HashMap::default();
    let mut keys: Vec<&CallSiteKey> = Vec::new();
    // Each run's time per site (summed over tasks), indexed by local id; computed in one
    // pass over the profiles since they are scattered on the heap and every extra pass
    // costs cache misses.
    let mut rows: Vec<Vec<f64>> = Vec::with_capacity(runs.len());
    // Profilers list the sites of one application in a stable order, so before hashing
    // try the site at the same position in the previous run, then the site that followed
    // the previous site there (which survives insertions and rotations).
    let mut previous_ids: Vec<u32> = Vec::new();
    let mut ids: Vec<u32> = Vec::new();
    let mut successor: Vec<u32> = Vec::new();
    for run in runs {
        ids.clear();
        let mut row = vec![0.0; keys.len()];
        let mut last_id: Option<u32> = None;
        for (pos, profile) in run.call_sites.iter().enumerate() {
            let matches = |id: u32| keys[id as usize] == &profile.site;
            let guess = previous_ids
                .get(pos)
                .copied()
                .filter(|&id| matches(id))
                .or_else(|| {
                    last_id
                        .and_then(|last| successor.get(last as usize).copied())
                        .filter(|&id| id != u32::MAX && matches(id))
                });
            let id = match guess {
                Some(id) => id,
                None => *index.entry(&profile.site).or_insert_with(|| {
                    keys.push(&profile.site);
                    successor.push(u32::MAX);
                    (keys.len() - 1) as u32
                }),
            };
            if let Some(last) = last_id {
                successor[last as usize] = id;
            }
            last_id = Some(id);
            ids.push(id);
            if row.len() <= id as usize {
                row.resize(id as usize + 1, 0.0);
            }
            row[id as usize] += profile.total_s();
        }
        std::mem::swap(&mut previous_ids, &mut ids);
        rows.push(row);
    }
    ChunkSites { keys, rows }
}

/// The Fx hash (rustc's): a multiply-rotate over machine words. Keys are call-site
/// strings from local profile files, so hash flooding is no concern, and SipHash made
/// interning 10 million keys the slowest step of the analysis.
#[derive(Default)]
struct FxHasher(u64);

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in chunks.by_ref() {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, value: u8) {
        self.add(u64::from(value));
    }

    fn write_u32(&mut self, value: u32) {
        self.add(u64::from(value));
    }

    fn write_usize(&mut self, value: usize) {
        self.add(value as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::analyze::test_experiment;

    fn experiment(idx: usize, times: &[f64]) -> Experiment {
        test_experiment(idx, 2 + (idx % 5) as u32, times)
    }

    /// Matching on several threads (200 runs give several chunks) equals a naive
    /// per-key sum, whatever the order and subset of sites in each run.
    #[test]
    fn chunked_matching_equals_naive_sums() {
        let runs: Vec<Experiment> = (0..200)
            .map(|idx| {
                let times: Vec<f64> = (0..40).map(|s| ((idx * 7 + s * 3) % 11) as f64).collect();
                let mut run = experiment(idx, &times);
                run.call_sites.rotate_left(idx % 40);
                run.call_sites
                    .retain(|p| !(p.site.line as usize + idx).is_multiple_of(9));
                run
            })
            .collect();
        let refs: Vec<&Experiment> = runs.iter().collect();
        let (keys, times) = site_time_matrix(&refs);
        let mut naive: BTreeMap<&CallSiteKey, Vec<f64>> = BTreeMap::new();
        for (run_idx, run) in runs.iter().enumerate() {
            for profile in &run.call_sites {
                naive
                    .entry(&profile.site)
                    .or_insert_with(|| vec![0.0; runs.len()])[run_idx] += profile.total_s();
            }
        }
        let naive_keys: Vec<&CallSiteKey> = naive.keys().copied().collect();
        assert_eq!(keys, naive_keys);
        assert_eq!(times, naive.into_values().collect::<Vec<_>>());
    }
}
