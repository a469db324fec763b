//! Spearman rank correlation: takes paired samples, gives the correlation of their ranks
//! (ties by average rank), a two-sided p-value and Holm's adjustment over many tests.
//!
//! Two p-values, both two-sided:
//!
//! - up to [`EXACT_MAX_N`] experiments, an exact permutation test ([`ExactTest`]): the
//!   share ranks are permuted in all `n!` ways against the task-count ranks. The
//!   t approximation is badly wrong there — with 4 experiments it calls a perfect
//!   monotone trend (rho = 1) certain, while 2 of the 24 orderings reach |rho| = 1 by
//!   chance (p = 0.083);
//! - above, the usual large-sample approximation ([`p_value`]): under independence
//!   `t = rho * sqrt((n - 2) / (1 - rho^2))` follows Student's t with `n - 2` degrees
//!   of freedom, good from about ten experiments on.
//!
//! A study tests every call site at once, so [`holm`] adjusts the p-values for multiple
//! testing: without it a study with hundreds of flat call sites would report some as
//! "significant" by chance.

use std::collections::HashMap;

use statrs::distribution::{ContinuousCDF, StudentsT};

/// Largest number of experiments tested exactly (8! = 40,320 orderings). The null
/// distribution depends on the tie pattern of the shares, of which there are at most
/// 2^(n-1) = 128 (compositions of n), so even the worst study costs a fraction of a
/// second; at 9 it would cost seconds.
pub const EXACT_MAX_N: usize = 8;

/// Reusable buffers for [`average_ranks`], so the per-call-site loop does not allocate.
#[derive(Default)]
pub struct RankScratch {
    sorted: Vec<(u64, u32)>,
}

/// Writes into `ranks` the 1-based ranks of `values`, ties sharing their average rank.
pub fn average_ranks(values: &[f64], scratch: &mut RankScratch, ranks: &mut Vec<f64>) {
    let n = values.len();
    let sorted = &mut scratch.sorted;
    sorted.clear();
    sorted.extend(
        values
            .iter()
            .enumerate()
            .map(|(idx, &v)| (order_key(v), idx as u32)),
    );
    // Integer keys compare faster than floats through `total_cmp`; this sort is the
    // analysis' inner loop (once per call site). An LSD radix sort was no faster.
    sorted.sort_unstable();
    ranks.clear();
    ranks.resize(n, 0.0);
    let mut start = 0;
    while start < n {
        let key = sorted[start].0;
        let mut end = start + 1;
        while end < n && sorted[end].0 == key {
            end += 1;
        }
        // Positions start..end (0-based) share ranks start+1..=end: their mean.
        let rank = (start + 1 + end) as f64 / 2.0;
        for &(_, idx) in &sorted[start..end] {
            ranks[idx as usize] = rank;
        }
        start = end;
    }
}

/// An unsigned integer whose order is `f64::total_cmp`'s, with -0.0 and 0.0 made equal
/// (they are the same share). Every f64 maps, NaN included, so ranking never panics.
fn order_key(value: f64) -> u64 {
    let value = if value == 0.0 { 0.0 } else { value };
    let bits = value.to_bits();
    // Negative numbers: flip all bits (larger magnitude sorts first); positive numbers:
    // set the sign bit so they sort after every negative one.
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

/// Pearson correlation of two equally long samples; `None` when either is constant.
pub fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    let n = x.len().min(y.len());
    if n < 2 {
        return None;
    }
    let mean_x = x[..n].iter().sum::<f64>() / n as f64;
    let mean_y = y[..n].iter().sum::<f64>() / n as f64;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x[..n].iter().zip(&y[..n]) {
        let (dx, dy) = (a - mean_x, b - mean_y);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    if sxx <= 0.0 || syy <= 0.0 {
        return None;
    }
    Some((sxy / (sxx * syy).sqrt()).clamp(-1.0, 1.0))
}

/// Spearman's rho of `x` and `y`; `None` when either is constant (no ranking exists).
pub fn spearman(x: &[f64], y: &[f64]) -> Option<f64> {
    let (mut scratch, mut rx, mut ry) = (RankScratch::default(), Vec::new(), Vec::new());
    average_ranks(x, &mut scratch, &mut rx);
    average_ranks(y, &mut scratch, &mut ry);
    pearson(&rx, &ry)
}

/// Two-sided p-value of a rank correlation `rho` over `n` pairs (t approximation).
pub fn p_value(rho: f64, n: usize) -> f64 {
    if n < 3 || !rho.is_finite() {
        return 1.0;
    }
    let df = (n - 2) as f64;
    let denominator = 1.0 - rho * rho;
    if denominator <= 0.0 {
        return 0.0;
    }
    let t = rho.abs() * (df / denominator).sqrt();
    match StudentsT::new(0.0, 1.0, df) {
        Ok(dist) => (2.0 * dist.sf(t)).clamp(0.0, 1.0),
        Err(_) => 1.0,
    }
}

/// Exact permutation test of rank correlation for small `n`, with the null distribution
/// cached per tie pattern of the second sample: with the task-count ranks fixed, the
/// distribution depends only on the multiset of share ranks, which is the same for
/// every call site whose shares have no ties.
pub struct ExactTest {
    x_ranks: Vec<f64>,
    /// Sorted `|S - E[S]|` over all orderings, per sorted multiset of y ranks (as bits).
    null: HashMap<Vec<u64>, Vec<f64>>,
}

impl ExactTest {
    /// A test against fixed ranks `x_ranks` (at most [`EXACT_MAX_N`] of them).
    pub fn new(x_ranks: &[f64]) -> Self {
        ExactTest {
            x_ranks: x_ranks.to_vec(),
            null: HashMap::new(),
        }
    }

    /// Two-sided p-value of the rank association of `y_ranks` with the fixed ranks:
    /// the fraction of orderings of `y_ranks` at least as far from independence.
    pub fn p_value(&mut self, y_ranks: &[f64]) -> f64 {
        let n = self.x_ranks.len();
        if n != y_ranks.len() || !(2..=EXACT_MAX_N).contains(&n) {
            return 1.0;
        }
        let mean_y = y_ranks.iter().sum::<f64>() / n as f64;
        let expected: f64 = self.x_ranks.iter().map(|x| x * mean_y).sum();
        let observed: f64 = self.x_ranks.iter().zip(y_ranks).map(|(x, y)| x * y).sum();
        let distance = (observed - expected).abs();
        let mut pattern: Vec<f64> = y_ranks.to_vec();
        pattern.sort_by(f64::total_cmp);
        let key: Vec<u64> = pattern.iter().map(|v| v.to_bits()).collect();
        let x_ranks = &self.x_ranks;
        let null = self
            .null
            .entry(key)
            .or_insert_with(|| null_distances(x_ranks, pattern, expected));
        // Distances are sums of rank products (multiples of 1/4), so a small tolerance
        // separates ties from rounding noise.
        let at_least = null.len() - null.partition_point(|&d| d < distance - 1e-9);
        at_least as f64 / null.len().max(1) as f64
    }
}

/// `|S - E[S]|` for every ordering of `y` (Heap's algorithm), sorted.
fn null_distances(x: &[f64], mut y: Vec<f64>, expected: f64) -> Vec<f64> {
    let n = y.len();
    let statistic = |y: &[f64]| -> f64 { x.iter().zip(y).map(|(a, b)| a * b).sum() };
    let mut distances = Vec::with_capacity((1..=n).product());
    distances.push((statistic(&y) - expected).abs());
    let mut counters = vec![0usize; n];
    let mut idx = 1;
    while idx < n {
        if counters[idx] < idx {
            if idx % 2 == 0 {
                y.swap(0, idx);
            } else {
                y.swap(counters[idx], idx);
            }
            distances.push((statistic(&y) - expected).abs());
            counters[idx] += 1;
            idx = 1;
        } else {
            counters[idx] = 0;
            idx += 1;
        }
    }
    distances.sort_by(f64::total_cmp);
    distances
}

/// Holm's step-down adjustment: the adjusted p-values, in the input's order. Controls
/// the family-wise error rate without assuming the tests are independent.
pub fn holm(p_values: &[f64]) -> Vec<f64> {
    let m = p_values.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p_values[a].total_cmp(&p_values[b]).then(a.cmp(&b)));
    let mut adjusted = vec![1.0; m];
    let mut running_max: f64 = 0.0;
    for (step, &idx) in order.iter().enumerate() {
        let scaled = ((m - step) as f64 * p_values[idx]).min(1.0);
        running_max = running_max.max(scaled);
        adjusted[idx] = running_max;
    }
    adjusted
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ties_get_average_ranks() {
        let (mut scratch, mut ranks) = (RankScratch::default(), Vec::new());
        average_ranks(&[10.0, 20.0, 10.0, 30.0, 20.0], &mut scratch, &mut ranks);
        assert_eq!(ranks, vec![1.5, 3.5, 1.5, 5.0, 3.5]);
    }

    #[test]
    fn known_value() {
        // No ties, rank differences (1, -1, 1, -1, 0): 1 - 6 * 4 / (5 * 24) = 0.8.
        let rho = spearman(&[1.0, 2.0, 3.0, 4.0, 5.0], &[2.0, 1.0, 4.0, 3.0, 5.0]);
        assert!(matches!(rho, Some(r) if (r - 0.8).abs() < 1e-12), "{rho:?}");
    }

    #[test]
    fn p_value_matches_reference() {
        // rho = 0.5, n = 12: t = 1.8257, df = 10, two-sided p = 0.0979 (R: cor.test).
        let p = p_value(0.5, 12);
        assert!((p - 0.0979).abs() < 5e-4, "{p}");
        assert_eq!(p_value(1.0, 10), 0.0);
        assert_eq!(p_value(0.3, 2), 1.0);
    }

    #[test]
    fn holm_is_monotone_and_bounded() {
        let adjusted = holm(&[0.01, 0.04, 0.03, 0.5]);
        assert_eq!(adjusted, vec![0.04, 0.09, 0.09, 0.5]);
    }

    #[test]
    fn exact_test_small_samples() {
        let x = [1.0, 2.0, 3.0, 4.0];
        let mut test = ExactTest::new(&x);
        // Perfect order: 2 of the 24 orderings reach |rho| = 1.
        assert!((test.p_value(&[1.0, 2.0, 3.0, 4.0]) - 2.0 / 24.0).abs() < 1e-12);
        assert!((test.p_value(&[4.0, 3.0, 2.0, 1.0]) - 2.0 / 24.0).abs() < 1e-12);
        // Independence itself: every ordering is at least as extreme.
        assert_eq!(test.p_value(&[2.5, 2.5, 2.5, 2.5]), 1.0);
        // n = 8 perfect order: 2 / 8!.
        let x: Vec<f64> = (1..=8).map(f64::from).collect();
        let mut test = ExactTest::new(&x);
        assert!((test.p_value(&x) - 2.0 / 40_320.0).abs() < 1e-15);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn exact_and_t_agree_roughly_at_n8(
            perm in Just((1..=8).map(f64::from).collect::<Vec<_>>()).prop_shuffle()
        ) {
            let x: Vec<f64> = (1..=8).map(f64::from).collect();
            let mut test = ExactTest::new(&x);
            let exact = test.p_value(&perm);
            if let Some(rho) = pearson(&x, &perm) {
                let approx = p_value(rho, 8);
                prop_assert!((exact - approx).abs() < 0.1, "exact {exact} t {approx}");
            }
        }
    }

    proptest! {
        #[test]
        fn rho_is_bounded_and_symmetric(
            pairs in prop::collection::vec((0u32..50, -1e3f64..1e3), 3..60)
        ) {
            let x: Vec<f64> = pairs.iter().map(|p| f64::from(p.0)).collect();
            let y: Vec<f64> = pairs.iter().map(|p| p.1).collect();
            if let Some(rho) = spearman(&x, &y) {
                prop_assert!((-1.0..=1.0).contains(&rho));
                let swapped = spearman(&y, &x);
                prop_assert!(matches!(swapped, Some(s) if (s - rho).abs() < 1e-9));
                let p = p_value(rho, x.len());
                prop_assert!((0.0..=1.0).contains(&p));
            }
        }

        #[test]
        fn rho_is_invariant_under_monotone_maps(
            values in prop::collection::vec((0u32..20, 0.0f64..1.0), 3..40)
        ) {
            let x: Vec<f64> = values.iter().map(|p| f64::from(p.0)).collect();
            let y: Vec<f64> = values.iter().map(|p| p.1).collect();
            let y_mapped: Vec<f64> = y.iter().map(|v| (v * 7.0).exp() + 3.0).collect();
            let neg: Vec<f64> = y.iter().map(|v| -v).collect();
            match (spearman(&x, &y), spearman(&x, &y_mapped), spearman(&x, &neg)) {
                (Some(a), Some(b), Some(c)) => {
                    prop_assert!((a - b).abs() < 1e-9);
                    prop_assert!((a + c).abs() < 1e-9);
                }
                (None, None, None) => {}
                other => prop_assert!(false, "inconsistent: {other:?}"),
            }
        }

        #[test]
        fn order_key_orders_like_total_cmp(values in prop::collection::vec(
            prop_oneof![any::<f64>(), -1e3f64..1e3, Just(0.0), Just(-0.0)], 0..300)
        ) {
            let mut items: Vec<(u64, u32)> =
                values.iter().enumerate().map(|(i, &v)| (order_key(v), i as u32)).collect();
            items.sort_unstable();
            for pair in items.windows(2) {
                let (a, b) = (values[pair[0].1 as usize], values[pair[1].1 as usize]);
                let a = if a == 0.0 { 0.0 } else { a };
                let b = if b == 0.0 { 0.0 } else { b };
                prop_assert!(a.total_cmp(&b).is_le(), "{a} before {b}");
            }
            prop_assert_eq!(items.len(), values.len());
        }

        #[test]
        fn ranks_sum_to_triangular_number(values in prop::collection::vec(0u8..5, 1..50)) {
            let v: Vec<f64> = values.iter().map(|&x| f64::from(x)).collect();
            let (mut scratch, mut ranks) = (RankScratch::default(), Vec::new());
            average_ranks(&v, &mut scratch, &mut ranks);
            let n = v.len() as f64;
            prop_assert!((ranks.iter().sum::<f64>() - n * (n + 1.0) / 2.0).abs() < 1e-9);
        }
    }
}
