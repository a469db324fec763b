//! The distribution of the compute spans at one body position: takes span lengths in
//! nanoseconds one at a time, gives quantiles (median, quartiles) in bounded memory.
//!
//! Why quantiles and not only mean and standard deviation: the gaps between MPI calls
//! are mostly steady with rare large outliers (the first iteration touching fresh
//! memory, a page fault, the scheduler taking the core away). One 6 ms outlier among
//! 500 spans of 1.25 ms gives a standard deviation of 16 % of the mean, though the spans
//! really vary by 3 %. Replayed as `normal(mean, sd)`, such a spread becomes independent
//! noise on every iteration of every rank, and wherever ranks synchronize each iteration
//! costs the maximum over ranks: the skeleton then runs about half a standard deviation
//! too long per iteration. Quartiles are not moved by outliers, so the skeleton's spread
//! is taken from the spans within Tukey's far-out fences of the quartiles, while the
//! mean (kept exactly elsewhere) still counts the outliers' time.
//!
//! The histogram is logarithmic: values below 128 ns are exact, larger ones fall in 64
//! buckets per octave (bucket width at most 1/64 of the value, 1.6 %). Only buckets that
//! occur are stored, sorted; when more than [`MAX_BUCKETS`] occur (a very wide or
//! irregular distribution), neighbouring buckets are merged pairwise, halving the
//! resolution, so memory stays bounded whatever the trace's length.

/// The most buckets one histogram keeps before it halves its resolution.
pub const MAX_BUCKETS: usize = 256;

/// A histogram of span lengths in nanoseconds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Spread {
    /// (bucket key, count), sorted by key; key = fine index >> `shift`.
    buckets: Vec<(u32, u64)>,
    /// How many times the resolution was halved.
    shift: u32,
    n: u64,
}

impl Spread {
    pub fn add(&mut self, ns: u64) {
        self.add_key(fine_index(ns) >> self.shift, 1);
        self.n += 1;
        if self.buckets.len() > MAX_BUCKETS {
            self.coarsen();
        }
    }

    /// Adds every span of `other` (another rank's histogram at the same position).
    pub fn merge(&mut self, other: &Spread) {
        while self.shift < other.shift {
            self.coarsen();
        }
        // Coarsening halves keys; `other`'s keys at this resolution are shifted as far.
        let down = self.shift - other.shift;
        for &(key, count) in &other.buckets {
            self.add_key(key >> down, count);
        }
        self.n += other.n;
        while self.buckets.len() > MAX_BUCKETS {
            self.coarsen();
        }
    }

    /// The histogram of a share `f` (0 < f ≤ 1) of the spans, in the same proportions:
    /// each bucket's count times `f`, at least 1 (a position folded from several
    /// places of a nest takes from each the part of its spans that lands there).
    pub fn scaled(&self, f: f64) -> Spread {
        if f >= 1.0 {
            return self.clone();
        }
        let buckets: Vec<(u32, u64)> = self
            .buckets
            .iter()
            .map(|&(key, count)| (key, ((count as f64 * f).round() as u64).max(1)))
            .collect();
        let n = buckets.iter().map(|b| b.1).sum();
        Spread {
            buckets,
            shift: self.shift,
            n,
        }
    }

    /// The histogram of `n` spans in the proportions of these, each `q` times as long
    /// (0 < q ≤ 1): each bucket's middle moved, its count times `n / self.n`.
    pub fn diluted(&self, q: f64, n: u64) -> Spread {
        if self.n == 0 {
            return self.clone();
        }
        let per = n as f64 / self.n as f64;
        let mut out = self.remapped(
            |middle| middle * q,
            |count| ((count as f64 * per).round() as u64).max(1),
        );
        out.n = out.buckets.iter().map(|b| b.1).sum();
        out
    }

    /// The histogram of the spans each made `by_ns` shorter (at least 0): each bucket's
    /// middle moved, at this histogram's resolution.
    pub fn shifted(&self, by_ns: f64) -> Spread {
        let mut out = self.remapped(|middle| (middle - by_ns).max(0.0), |count| count);
        out.n = self.n;
        out
    }

    /// Each bucket's middle moved by `value` and its count by `count`, at this
    /// histogram's resolution (`n` left for the caller).
    fn remapped(&self, value: impl Fn(f64) -> f64, count: impl Fn(u64) -> u64) -> Spread {
        let mut out = Spread {
            shift: self.shift,
            ..Spread::default()
        };
        for &(key, c) in &self.buckets {
            let start = fine_value(key << self.shift) as f64;
            let end = fine_value((key + 1) << self.shift) as f64;
            let moved = value(0.5 * (start + end));
            out.add_key(fine_index(moved.round() as u64) >> self.shift, count(c));
        }
        out
    }

    /// The `q`-quantile (0 ≤ q ≤ 1) in nanoseconds, interpolated linearly inside its
    /// bucket; 0 for an empty histogram.
    pub fn quantile(&self, q: f64) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        // The rank of the quantile among the n values, counted from 0.
        let target = q.clamp(0.0, 1.0) * (self.n - 1) as f64;
        let mut below = 0u64;
        for &(key, count) in &self.buckets {
            if (below + count) as f64 > target {
                let low = fine_value(key << self.shift) as f64;
                let high = fine_value((key + 1) << self.shift) as f64;
                // Values are spread evenly inside the bucket: the i-th of `count` sits
                // at (i + 0.5) / count of its width.
                let inside = (target - below as f64 + 0.5) / count as f64;
                return low + (high - low) * inside.clamp(0.0, 1.0);
            }
            below += count;
        }
        self.buckets
            .last()
            .map(|&(key, _)| fine_value((key + 1) << self.shift) as f64)
            .unwrap_or(0.0)
    }

    pub fn median(&self) -> f64 {
        self.quantile(0.5)
    }

    /// The standard deviation of the spans without the outliers: those beyond Tukey's
    /// far-out fences, three interquartile ranges below the first or above the third
    /// quartile. Unlike the interquartile range scaled to a normal distribution, this is
    /// the plain standard deviation for any distribution without outliers (uniform
    /// jitter included); values are taken at their bucket's middle.
    pub fn robust_sd(&self) -> f64 {
        if self.n < 4 {
            return 0.0;
        }
        let (q1, q3) = (self.quantile(0.25), self.quantile(0.75));
        let iqr = (q3 - q1).max(0.0);
        let (low, high) = (q1 - 3.0 * iqr, q3 + 3.0 * iqr);
        let (mut n, mut sum, mut sum_sq) = (0.0, 0.0, 0.0);
        for &(key, count) in &self.buckets {
            let start = fine_value(key << self.shift) as f64;
            let end = fine_value((key + 1) << self.shift) as f64;
            let middle = 0.5 * (start + end);
            if (low..=high).contains(&middle) {
                let c = count as f64;
                n += c;
                sum += c * middle;
                sum_sq += c * middle * middle;
            }
        }
        if n < 2.0 {
            return 0.0;
        }
        ((sum_sq - sum * sum / n) / (n - 1.0)).max(0.0).sqrt()
    }

    fn add_key(&mut self, key: u32, count: u64) {
        match self.buckets.binary_search_by_key(&key, |b| b.0) {
            Ok(i) => self.buckets[i].1 += count,
            Err(i) => self.buckets.insert(i, (key, count)),
        }
    }

    fn coarsen(&mut self) {
        self.shift += 1;
        let mut merged: Vec<(u32, u64)> = Vec::with_capacity(self.buckets.len() / 2 + 1);
        for &(key, count) in &self.buckets {
            let key = key >> 1;
            match merged.last_mut() {
                Some(last) if last.0 == key => last.1 += count,
                _ => merged.push((key, count)),
            }
        }
        self.buckets = merged;
    }
}

/// Values below this are their own bucket.
const EXACT: u64 = 128;
/// Buckets per octave above [`EXACT`] (a power of two).
const PER_OCTAVE: u64 = 64;
const OCTAVE_BITS: u32 = PER_OCTAVE.trailing_zeros();
/// The octave of [`EXACT`].
const FIRST_OCTAVE: u32 = EXACT.trailing_zeros();

/// The fine bucket of `ns`.
fn fine_index(ns: u64) -> u32 {
    if ns < EXACT {
        return ns as u32;
    }
    let octave = 63 - ns.leading_zeros();
    let sub = (ns >> (octave - OCTAVE_BITS)) - PER_OCTAVE;
    (EXACT + (octave - FIRST_OCTAVE) as u64 * PER_OCTAVE + sub) as u32
}

/// The smallest value of fine bucket `index` (monotone; one past the last bucket gives
/// the end of the last).
fn fine_value(index: u32) -> u64 {
    let index = index as u64;
    if index < EXACT {
        return index;
    }
    let octave = FIRST_OCTAVE as u64 + (index - EXACT) / PER_OCTAVE;
    let sub = (index - EXACT) % PER_OCTAVE;
    // Octaves past 63 only arise as the end of the last bucket; saturate.
    (PER_OCTAVE + sub)
        .checked_shl((octave - OCTAVE_BITS as u64) as u32)
        .filter(|_| octave < 64)
        .unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_shifted_histogram_moves_every_span() {
        let mut s = Spread::default();
        for ns in [10_000u64, 10_100, 10_200, 50_000] {
            s.add(ns);
        }
        let t = s.shifted(9_000.0);
        assert_eq!(t.n, 4);
        // The median moves by the shift, within a bucket's width (1.6 %).
        assert!((t.median() - (s.median() - 9_000.0)).abs() < 0.02 * s.median());
        // Spans shorter than the shift are 0, never negative.
        assert!(s.shifted(1e9).quantile(1.0) < 1.0);
    }

    #[test]
    fn a_diluted_histogram_has_more_spans_as_much_shorter() {
        let mut s = Spread::default();
        for ns in [10_000u64, 10_100, 10_200, 50_000] {
            s.add(ns);
        }
        // Twice as many spans, each half as long (a compute on 20 of 26 steps run on
        // all 26 with the same total is `diluted(20 / 26, ...)`).
        let d = s.diluted(0.5, 8);
        assert_eq!(d.n, 8);
        assert!((d.median() - 0.5 * s.median()).abs() < 0.02 * s.median());
        assert!((d.quantile(1.0) - 25_000.0).abs() < 0.02 * 25_000.0);
        assert_eq!(Spread::default().diluted(0.5, 8), Spread::default());
    }

    use super::*;

    #[test]
    fn buckets_are_contiguous_and_narrow() {
        let mut previous = fine_value(0);
        for index in 1..fine_index(u64::MAX) {
            let value = fine_value(index);
            assert!(
                value > previous,
                "bucket {index} does not start after bucket {}",
                index - 1
            );
            // A bucket is at most 1/64 of its start wide.
            assert!(
                (value - previous) * 64 <= previous.max(64),
                "bucket {index} too wide"
            );
            previous = value;
        }
        for ns in [
            0,
            1,
            127,
            128,
            129,
            255,
            256,
            1_000,
            1_234_567,
            u64::MAX / 3,
            u64::MAX,
        ] {
            let index = fine_index(ns);
            assert!(fine_value(index) <= ns, "{ns} below its bucket");
            if index < fine_index(u64::MAX) {
                assert!(fine_value(index + 1) > ns, "{ns} above its bucket");
            }
        }
    }

    #[test]
    fn quantiles_of_a_steady_run_with_outliers() {
        // 500 spans of 1.20–1.30 ms and two outliers of 6 ms, as in a stencil's trace.
        let mut spread = Spread::default();
        for i in 0..500u64 {
            spread.add(1_200_000 + (i * 7919 % 100) * 1_000);
        }
        spread.add(6_000_000);
        spread.add(5_400_000);
        let median = spread.median();
        assert!((median - 1_250_000.0).abs() < 25_000.0, "median {median}");
        // Uniform over 1.2–1.3 ms: sd 100 µs / √12 ≈ 28.9 µs once the outliers are out
        // (with them it is 240 µs).
        let sd = spread.robust_sd();
        assert!((sd - 28_900.0).abs() < 5_000.0, "robust sd {sd}");
    }

    #[test]
    fn memory_stays_bounded_and_merging_keeps_counts() {
        let mut wide = Spread::default();
        let mut x = 1u64;
        for _ in 0..100_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            wide.add(x >> 20);
        }
        assert!(wide.buckets.len() <= MAX_BUCKETS);
        assert_eq!(wide.n, 100_000);
        let mut narrow = Spread::default();
        for i in 0..1_000 {
            narrow.add(1_000 + i % 10);
        }
        let mut merged = narrow.clone();
        merged.merge(&wide);
        assert_eq!(merged.n, 101_000);
        assert!(merged.buckets.len() <= MAX_BUCKETS);
        assert_eq!(merged.buckets.iter().map(|b| b.1).sum::<u64>(), 101_000);
        // Quantiles stay ordered.
        let qs: Vec<f64> = [0.0, 0.25, 0.5, 0.75, 1.0]
            .iter()
            .map(|&q| merged.quantile(q))
            .collect();
        assert!(qs.windows(2).all(|w| w[0] <= w[1]), "{qs:?}");
    }

    #[test]
    fn small_and_empty_histograms() {
        let empty = Spread::default();
        assert_eq!(empty.median(), 0.0);
        assert_eq!(empty.robust_sd(), 0.0);
        let mut one = Spread::default();
        one.add(42);
        assert!((one.median() - 42.5).abs() < 1.0);
        assert_eq!(one.robust_sd(), 0.0);
    }
}
