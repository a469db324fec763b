//! The compute kernel: a time and a working-set size → real work on this core (never a
//! sleep), calibrated at start-up.
//!
//! The kernel sweeps a buffer of `f64`s (`x = x·a + b`): the first `working_set` bytes of
//! one shared buffer, or a small cache-resident block when the skeleton gives no working
//! set. Calibration measures seconds per element for every working-set size the program
//! declares: the median of many trials of a few milliseconds each, because the cores of
//! a shared VM alternate between fast and slow phases and a single trial can land in
//! either.
//!
//! How a span is run is a [`ComputeMode`]. Fixed work (`Work`) slows down like the
//! application when the core is shared, but inherits any calibration error for the whole
//! run; re-measuring time inside the span (`Clock`) keeps a span's length right whatever
//! phase the core is in, but does not slow down under CPU contention. `Auto` (the
//! default) runs short spans as calibrated work, where reading the clock would cost too
//! much, and re-measures time inside spans of [`CLOCK_THRESHOLD`] and longer.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// The block the kernel sweeps when a compute span gives no working set: small enough
/// to stay in the L1 cache.
pub const DEFAULT_WORKING_SET: u64 = 16 << 10;

/// Spans at least this long re-measure time in [`ComputeMode::Auto`].
pub const CLOCK_THRESHOLD: Duration = Duration::from_millis(2);

/// How much calibrated work runs between two readings of the clock.
const CHUNK: Duration = Duration::from_micros(100);

/// Calibration: trials per working-set size and the length of one trial.
const TRIALS: usize = 15;
const TRIAL: Duration = Duration::from_millis(3);

/// How compute spans are run; chosen with the environment variable `PERFSKEL_COMPUTE`
/// (`work`, `clock` or `auto`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ComputeMode {
    Work,
    Clock,
    Auto,
}

impl ComputeMode {
    pub fn from_name(name: &str) -> Option<ComputeMode> {
        match name {
            "work" => Some(ComputeMode::Work),
            "clock" => Some(ComputeMode::Clock),
            "auto" => Some(ComputeMode::Auto),
            _ => None,
        }
    }
}

/// A calibrated kernel.
#[derive(Debug)]
pub struct Kernel {
    data: Vec<f64>,
    /// (working-set bytes, seconds per element), sorted by size.
    rates: Vec<(u64, f64)>,
    mode: ComputeMode,
}

impl Kernel {
    /// Allocates and touches the largest working set, and calibrates every size in
    /// `working_sets` (plus the default block).
    pub fn calibrate(working_sets: &[u64], mode: ComputeMode) -> Kernel {
        let mut sizes: Vec<u64> = working_sets
            .iter()
            .map(|&w| w.max(8))
            .chain([DEFAULT_WORKING_SET])
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        let largest = sizes.last().copied().unwrap_or(DEFAULT_WORKING_SET);
        let mut kernel = Kernel {
            data: vec![1.0; elements(largest)],
            rates: Vec::new(),
            mode,
        };
        for size in sizes {
            let rate = kernel.measure(size);
            kernel.rates.push((size, rate));
        }
        kernel
    }

    /// Seconds per element for a working set of `bytes`.
    pub fn seconds_per_element(&self, bytes: u64) -> f64 {
        match self.rates.binary_search_by_key(&bytes, |&(size, _)| size) {
            Ok(i) => self.rates[i].1,
            // A size nobody declared: the rate of the next larger calibrated size (or the
            // largest), which is the pessimistic one for memory-bound sweeps.
            Err(i) => self.rates[i.min(self.rates.len() - 1)].1,
        }
    }

    /// Runs a compute span of `time` over `working_set` bytes (the default block when
    /// `None`).
    pub fn run(&mut self, time: Duration, working_set: Option<u64>) {
        let size = working_set.unwrap_or(DEFAULT_WORKING_SET).max(8);
        let n = elements(size).min(self.data.len());
        let per_element = self.seconds_per_element(size);
        let use_clock = match self.mode {
            ComputeMode::Work => false,
            ComputeMode::Clock => true,
            ComputeMode::Auto => time >= CLOCK_THRESHOLD,
        };
        if !use_clock {
            self.sweep(n, (time.as_secs_f64() / per_element).round() as u64);
            return;
        }
        let start = Instant::now();
        let chunk = ((CHUNK.as_secs_f64() / per_element) as u64).max(1);
        loop {
            let elapsed = start.elapsed();
            if elapsed >= time {
                break;
            }
            let remaining = ((time - elapsed).as_secs_f64() / per_element).ceil() as u64;
            self.sweep(n, remaining.clamp(1, chunk));
        }
    }

    /// Median seconds per element over [`TRIALS`] trials of about [`TRIAL`] each.
    fn measure(&mut self, bytes: u64) -> f64 {
        let n = elements(bytes).min(self.data.len());
        // Warm up (first touch, caches) and estimate the trial length.
        let warm = (n as u64).max(1 << 16);
        let start = Instant::now();
        self.sweep(n, warm);
        let estimate = start.elapsed().as_secs_f64().max(1e-9) / warm as f64;
        let per_trial = ((TRIAL.as_secs_f64() / estimate) as u64).max(1);
        let mut samples: Vec<f64> = (0..TRIALS)
            .map(|_| {
                let start = Instant::now();
                self.sweep(n, per_trial);
                start.elapsed().as_secs_f64() / per_trial as f64
            })
            .collect();
        median(&mut samples)
    }

    /// Updates `count` elements, sweeping the first `n` of the buffer cyclically.
    fn sweep(&mut self, n: usize, count: u64) {
        let n = n.max(1);
        let mut left = count;
        while left > 0 {
            let len = (left.min(n as u64)) as usize;
            for x in &mut self.data[..len] {
                *x = *x * 0.999_999_9 + 1e-7;
            }
            black_box(&mut self.data[..len]);
            left -= len as u64;
        }
    }
}

fn elements(bytes: u64) -> usize {
    usize::try_from(bytes / 8).unwrap_or(usize::MAX).max(1)
}

/// The median of `samples` (the mean of the middle two for an even count).
pub fn median(samples: &mut [f64]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort_by(f64::total_cmp);
    let mid = samples.len() / 2;
    if samples.len() % 2 == 1 {
        samples[mid]
    } else {
        0.5 * (samples[mid - 1] + samples[mid])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&mut []), 0.0);
        assert_eq!(ComputeMode::from_name("clock"), Some(ComputeMode::Clock));
        assert_eq!(ComputeMode::from_name("sleep"), None);
    }

    #[test]
    fn calibration_covers_every_working_set() {
        let kernel = Kernel::calibrate(&[1 << 20, 4 << 10], ComputeMode::Auto);
        let sizes: Vec<u64> = kernel.rates.iter().map(|r| r.0).collect();
        assert_eq!(sizes, vec![4 << 10, DEFAULT_WORKING_SET, 1 << 20]);
        assert!(kernel.rates.iter().all(|r| r.1 > 0.0 && r.1 < 1e-6));
        assert_eq!(kernel.data.len(), (1 << 20) / 8);
        // An undeclared size takes the next larger calibrated rate.
        assert_eq!(
            kernel.seconds_per_element(100 << 10),
            kernel.seconds_per_element(1 << 20)
        );
    }

    #[test]
    fn clock_mode_spans_last_at_least_their_time() {
        // Only the lower bound is a property of the kernel; how much longer a span takes
        // depends on the machine's load.
        let mut kernel = Kernel::calibrate(&[], ComputeMode::Clock);
        let start = Instant::now();
        kernel.run(Duration::from_millis(5), None);
        assert!(start.elapsed() >= Duration::from_millis(5));
    }
}
