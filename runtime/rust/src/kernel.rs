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
//! run, and on a loaded machine calibration errors are large (a 2 s loop of 20 ms spans
//! took 0.2 s to 24 s at load average 16 on this project's 2-core VM). Re-measuring wall
//! time inside the span (`Clock`: calibrated chunks of about 100 µs until the clock says
//! the span is over) keeps a span's length right whatever phase the core is in (2.4 s to
//! 2.7 s in the same conditions), but does not slow down when other jobs share the core,
//! so it cannot predict a scenario with competing jobs or more ranks than cores.
//! `Cpu` re-measures the thread's CPU time instead (`CLOCK_THREAD_CPUTIME_ID`): a span
//! ends when this rank has computed for that long. But every reading of that clock
//! enters the kernel, which then checks the time slice and preempts the rank as soon as
//! it is over, while the application's loops are preempted only at the scheduler's tick:
//! with both ranks on one core, a tree reduction's skeleton took 65 % longer than the
//! application in `Cpu` mode.
//! `Auto` (the default) reads the wall clock between chunks (`Instant::now`, the vDSO:
//! no entry into the kernel) and counts a chunk that took far longer than its work
//! should have ([`GAP`] more than twice) as interrupted: it adds the work it did, not
//! the time it took. A span then lasts as asked on an idle core in whatever speed phase,
//! and stretches like the application's compute when the core is shared.
//! Spans shorter than [`CLOCK_THRESHOLD`], where a reading of the clock would be a
//! visible part of the span, run as calibrated work in `Auto`.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// The block the kernel sweeps when a compute span gives no working set: small enough
/// to stay in the L1 cache.
pub const DEFAULT_WORKING_SET: u64 = 16 << 10;

/// Spans at least this long re-measure time in [`ComputeMode::Auto`].
pub const CLOCK_THRESHOLD: Duration = Duration::from_micros(100);

/// How much calibrated work runs between two readings of the clock.
const CHUNK: Duration = Duration::from_micros(100);

/// In [`ComputeMode::Auto`], a chunk that takes longer than twice its work and this was
/// interrupted.
pub const GAP: Duration = Duration::from_micros(20);

/// Calibration: trials per working-set size and the length of one trial.
const TRIALS: usize = 15;
const TRIAL: Duration = Duration::from_millis(3);

/// How compute spans are run; chosen with the environment variable `PERFSKEL_COMPUTE`
/// (`work`, `clock`, `cpu` or `auto`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ComputeMode {
    Work,
    Clock,
    Cpu,
    Auto,
}

impl ComputeMode {
    pub fn from_name(name: &str) -> Option<ComputeMode> {
        match name {
            "work" => Some(ComputeMode::Work),
            "clock" => Some(ComputeMode::Clock),
            "cpu" => Some(ComputeMode::Cpu),
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
    /// Spans last their time × this: the memory probe's rate where the trace was taken
    /// over its rate here (1 without a `memory` header line).
    time_factor: f64,
}

/// The memory probe, as the tracer and the C runtime run it (`runtime/c/memprobe.h`,
/// `FORMAT.md`): the rate, in bytes of working set per second of the thread's CPU
/// time, at which `memcpy` (the C library's, as in C) copies one half of `bytes` onto
/// the other,
/// repeated to at least 4 MiB per measurement; the median of the measurements within
/// 40 ms (at least five).
pub fn memory_probe(bytes: u64) -> f64 {
    let Ok(half) = usize::try_from(bytes / 2) else {
        return 0.0;
    };
    if half == 0 {
        return 0.0;
    }
    let a = vec![1u8; half];
    let mut b = vec![0u8; half];
    let reps = (4u64 << 20) / bytes + 1;
    let start = Instant::now();
    let mut rates = Vec::new();
    while rates.len() < 64 && (rates.len() < 5 || start.elapsed() < Duration::from_millis(40)) {
        let t0 = thread_cpu_time();
        for _ in 0..reps {
            // SAFETY: `a` and `b` are distinct allocations of `half` bytes each.
            unsafe { libc::memcpy(b.as_mut_ptr().cast(), a.as_ptr().cast(), half) };
            black_box(&mut b);
        }
        let took = thread_cpu_time().saturating_sub(t0).as_secs_f64();
        if took > 0.0 {
            rates.push(bytes as f64 * reps as f64 / took);
        } else if start.elapsed() > Duration::from_millis(400) {
            break;
        }
    }
    rates.sort_by(f64::total_cmp);
    rates.get(rates.len() / 2).copied().unwrap_or(0.0)
}

/// The probe's size for a working set: within 64 KiB … 256 MiB, as in the tracer.
pub fn probe_bytes(working_set: u64) -> u64 {
    working_set.clamp(64 << 10, 256 << 20)
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
            time_factor: 1.0,
        };
        for size in sizes {
            let rate = kernel.measure(size);
            kernel.rates.push((size, rate));
        }
        kernel
    }

    /// Makes every span last its time × `factor` (see [`memory_probe`]).
    pub fn set_time_factor(&mut self, factor: f64) {
        if factor.is_finite() && factor > 0.0 {
            self.time_factor = factor;
        }
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
        let time = time.mul_f64(self.time_factor);
        let size = working_set.unwrap_or(DEFAULT_WORKING_SET).max(8);
        let n = elements(size).min(self.data.len());
        let per_element = self.seconds_per_element(size);
        let clock: fn() -> Duration = match self.mode {
            ComputeMode::Work => {
                self.sweep(n, (time.as_secs_f64() / per_element).round() as u64);
                return;
            }
            ComputeMode::Auto if time < CLOCK_THRESHOLD => {
                self.sweep(n, (time.as_secs_f64() / per_element).round() as u64);
                return;
            }
            ComputeMode::Auto => {
                self.run_auto(time, size, n, per_element);
                return;
            }
            ComputeMode::Clock => wall_time,
            ComputeMode::Cpu => thread_cpu_time,
        };
        let start = clock();
        let chunk = ((CHUNK.as_secs_f64() / per_element) as u64).max(1);
        loop {
            let elapsed = clock().saturating_sub(start);
            if elapsed >= time {
                break;
            }
            let remaining = ((time - elapsed).as_secs_f64() / per_element).ceil() as u64;
            self.sweep(n, remaining.clamp(1, chunk));
        }
    }

    /// [`ComputeMode::Auto`]: chunks timed on the wall clock; an interrupted chunk counts
    /// as the work it did. Clean chunks refine the rate of `size` for later spans.
    fn run_auto(&mut self, time: Duration, size: u64, n: usize, per_element: f64) {
        let target = time.as_secs_f64();
        let gap = GAP.as_secs_f64();
        let mut per_element = per_element;
        let mut done = 0.0;
        let mut now = Instant::now();
        while target - done > 0.5 * per_element {
            let span = (target - done).min(CHUNK.as_secs_f64());
            let count = ((span / per_element).round() as u64).max(1);
            self.sweep(n, count);
            let after = Instant::now();
            let took = after.duration_since(now).as_secs_f64();
            let work = count as f64 * per_element;
            if took > 2.0 * work + gap {
                done += work;
            } else {
                done += took;
                if took > 2e-6 {
                    per_element = 0.9 * per_element + 0.1 * (took / count as f64);
                }
            }
            now = after;
        }
        if let Ok(i) = self.rates.binary_search_by_key(&size, |&(s, _)| s) {
            self.rates[i].1 = per_element;
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

/// Wall time since an arbitrary origin fixed for the process.
fn wall_time() -> Duration {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed()
}

/// CPU time the calling thread has used.
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; CLOCK_THREAD_CPUTIME_ID exists on every
    // Linux and POSIX system MPI runs on.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        // Never on Linux; fall back to wall time rather than spinning forever.
        return wall_time();
    }
    Duration::new(
        ts.tv_sec.max(0) as u64,
        ts.tv_nsec.clamp(0, 999_999_999) as u32,
    )
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

    #[test]
    fn the_time_factor_stretches_spans_and_the_probe_measures() {
        // A factor of 2 (memory twice as slow as where traced): a 5 ms span lasts at
        // least 10 ms. Factors that are not positive and finite are ignored.
        let mut kernel = Kernel::calibrate(&[], ComputeMode::Clock);
        kernel.set_time_factor(f64::NAN);
        kernel.set_time_factor(2.0);
        let start = Instant::now();
        kernel.run(Duration::from_millis(5), None);
        assert!(start.elapsed() >= Duration::from_millis(10));
        assert_eq!(probe_bytes(1), 64 << 10);
        assert_eq!(probe_bytes(1 << 40), 256 << 20);
        assert_eq!(probe_bytes(3 << 20), 3 << 20);
        assert!(memory_probe(1 << 20) > 1e8);
        assert_eq!(memory_probe(1), 0.0);
    }

    #[test]
    fn auto_mode_spans_last_at_least_their_time() {
        // Every chunk adds at most the wall time it took (an interrupted one adds its
        // work, less than half of that), so the span cannot end early; it ends within
        // half an element of its length in counted time.
        let mut kernel = Kernel::calibrate(&[], ComputeMode::Auto);
        let start = Instant::now();
        kernel.run(Duration::from_millis(5), None);
        assert!(start.elapsed() >= Duration::from_micros(4_999));
        assert_eq!(ComputeMode::from_name("auto"), Some(ComputeMode::Auto));
    }

    #[test]
    fn cpu_mode_spans_use_at_least_their_cpu_time() {
        // A span in CPU-time mode ends when this thread has computed for its length, so
        // the thread's CPU time grows by at least that much (and wall time too).
        let mut kernel = Kernel::calibrate(&[], ComputeMode::Cpu);
        let (wall, cpu) = (Instant::now(), thread_cpu_time());
        kernel.run(Duration::from_millis(5), None);
        assert!(thread_cpu_time() - cpu >= Duration::from_millis(5));
        assert!(wall.elapsed() >= Duration::from_millis(5));
        assert_eq!(ComputeMode::from_name("cpu"), Some(ComputeMode::Cpu));
    }
}
