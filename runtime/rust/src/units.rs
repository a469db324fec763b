//! Quantities as the skeleton DSL writes them: times (`ms(20.0)`), sizes (`kib(4)`),
//! compute time specifications that vary per rank or per call ([`TimeSpec`]), and
//! message sizes the same on every rank or one per rank ([`Sizes`]).

use std::time::Duration;

/// `N ns`
pub fn ns(value: f64) -> Duration {
    Duration::from_secs_f64(value.max(0.0) * 1e-9)
}

/// `N us`
pub fn us(value: f64) -> Duration {
    Duration::from_secs_f64(value.max(0.0) * 1e-6)
}

/// `N ms`
pub fn ms(value: f64) -> Duration {
    Duration::from_secs_f64(value.max(0.0) * 1e-3)
}

/// `N s`
pub fn secs(value: f64) -> Duration {
    Duration::from_secs_f64(value.max(0.0))
}

/// `N B`
pub const fn bytes(n: u64) -> u64 {
    n
}

/// `N KiB`
pub const fn kib(n: u64) -> u64 {
    n << 10
}

/// `N MiB`
pub const fn mib(n: u64) -> u64 {
    n << 20
}

/// `N GiB`
pub const fn gib(n: u64) -> u64 {
    n << 30
}

/// `N KB` (powers of 1000)
pub const fn kb(n: u64) -> u64 {
    n * 1_000
}

/// `N MB`
pub const fn mb(n: u64) -> u64 {
    n * 1_000_000
}

/// `N GB`
pub const fn gb(n: u64) -> u64 {
    n * 1_000_000_000
}

/// `[v0, v1, ...][index]`: the value at `index`, a size or a time that differs between
/// the iterations of a loop. The checker keeps the index in range.
pub fn pick<T: Clone>(values: &[T], index: i64) -> T {
    match usize::try_from(index).ok().and_then(|i| values.get(i)) {
        Some(v) => v.clone(),
        None => panic!(
            "pick index {index} is out of range: the list has {} values",
            values.len()
        ),
    }
}

/// How long a compute span takes.
#[derive(Clone, Debug, PartialEq)]
pub enum TimeSpec {
    /// The same on every rank and call.
    Fixed(Duration),
    /// One value per world rank, in rank order.
    PerRank(Vec<Duration>),
    /// Drawn per rank and call from a normal distribution (negative draws are 0).
    Normal { mean: Duration, stddev: Duration },
    /// Drawn per rank and call from [low, high].
    Uniform { low: Duration, high: Duration },
}

impl From<Duration> for TimeSpec {
    fn from(d: Duration) -> TimeSpec {
        TimeSpec::Fixed(d)
    }
}

/// `per_rank(t0, t1, ...)` for compute spans.
pub fn per_rank_times(times: &[Duration]) -> TimeSpec {
    TimeSpec::PerRank(times.to_vec())
}

/// `normal(mean, stddev)`
pub fn normal(mean: Duration, stddev: Duration) -> TimeSpec {
    TimeSpec::Normal { mean, stddev }
}

/// `uniform(low, high)`
pub fn uniform(low: Duration, high: Duration) -> TimeSpec {
    TimeSpec::Uniform { low, high }
}

impl TimeSpec {
    /// The time of one call on world rank `rank`, drawing from `rng` when it varies.
    pub fn draw(&self, rank: usize, rng: &mut Rng) -> Duration {
        match self {
            TimeSpec::Fixed(d) => *d,
            TimeSpec::PerRank(values) => values
                .get(rank)
                .or(values.last())
                .copied()
                .unwrap_or_default(),
            TimeSpec::Normal { mean, stddev } => {
                let s = mean.as_secs_f64() + stddev.as_secs_f64() * rng.standard_normal();
                Duration::from_secs_f64(s.max(0.0))
            }
            TimeSpec::Uniform { low, high } => {
                let (lo, hi) = (low.as_secs_f64(), high.as_secs_f64());
                Duration::from_secs_f64((lo + (hi - lo) * rng.unit()).max(0.0))
            }
        }
    }
}

/// A message size: the same on every rank, or one per world rank (the `v` collectives).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sizes {
    Fixed(u64),
    PerRank(Vec<u64>),
}

impl From<u64> for Sizes {
    fn from(n: u64) -> Sizes {
        Sizes::Fixed(n)
    }
}

/// `per_rank(s0, s1, ...)` for the `v` collectives.
pub fn per_rank(sizes: &[u64]) -> Sizes {
    Sizes::PerRank(sizes.to_vec())
}

impl Sizes {
    /// The size that world rank `rank` contributes.
    pub fn of(&self, rank: usize) -> u64 {
        match self {
            Sizes::Fixed(n) => *n,
            Sizes::PerRank(values) => values.get(rank).or(values.last()).copied().unwrap_or(0),
        }
    }
}

/// A small deterministic generator (SplitMix64) for `normal` and `uniform` compute
/// spans: seeded by the rank, so a run is reproducible and ranks draw independently,
/// with no dependency that generated projects would have to build.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng {
            state: seed ^ 0x5DEE_CE66_D1CE_4E5B,
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Standard normal (Box–Muller).
    pub fn standard_normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit(); // in (0, 1]
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_match_the_dsl() {
        assert_eq!(kib(4), 4096);
        assert_eq!(mib(2), 2 << 20);
        assert_eq!(gib(1), 1 << 30);
        assert_eq!(kb(1), 1000);
        assert_eq!(mb(3), 3_000_000);
        assert_eq!(gb(1), 1_000_000_000);
        assert_eq!(bytes(8), 8);
        assert_eq!(ms(20.0), Duration::from_millis(20));
        assert_eq!(us(500.0), Duration::from_micros(500));
        assert_eq!(ns(10.0), Duration::from_nanos(10));
        assert_eq!(secs(1.5), Duration::from_millis(1500));
        assert_eq!(ms(-1.0), Duration::ZERO);
    }

    #[test]
    fn draws_follow_their_distribution() {
        let mut rng = Rng::new(3);
        let spec = normal(ms(3.0), us(250.0));
        let draws: Vec<f64> = (0..20_000)
            .map(|_| spec.draw(0, &mut rng).as_secs_f64())
            .collect();
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        let var = draws.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / draws.len() as f64;
        assert!((mean - 3e-3).abs() < 2e-5, "mean {mean}");
        assert!((var.sqrt() - 250e-6).abs() < 1e-5, "stddev {}", var.sqrt());
        let spec = uniform(ms(5.0), ms(15.0));
        let draws: Vec<f64> = (0..20_000)
            .map(|_| spec.draw(0, &mut rng).as_secs_f64())
            .collect();
        assert!(draws.iter().all(|d| (5e-3..=15e-3).contains(d)));
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        assert!((mean - 10e-3).abs() < 1e-4, "mean {mean}");
        let spec = per_rank_times(&[ms(1.0), ms(2.0)]);
        assert_eq!(spec.draw(1, &mut rng), ms(2.0));
        assert_eq!(TimeSpec::from(ms(4.0)).draw(7, &mut rng), ms(4.0));
    }

    #[test]
    fn sizes_per_rank() {
        let sizes = per_rank(&[kib(1), kib(2)]);
        assert_eq!(sizes.of(0), 1024);
        assert_eq!(sizes.of(1), 2048);
        assert_eq!(Sizes::from(8).of(5), 8);
        // Seeds give different, reproducible streams.
        let (mut a, mut b) = (Rng::new(0), Rng::new(1));
        assert_ne!(a.next_u64(), b.next_u64());
        assert_eq!(Rng::new(9).next_u64(), Rng::new(9).next_u64());
    }
}
