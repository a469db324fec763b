//! All runs (maximal repetitions) of a token sequence → `(start, end, period)` triples, in
//! linear time plus the suffix-array construction.
//!
//! A *run* is a maximal interval `[start, end)` whose smallest period `p` fits at least
//! twice (`end - start >= 2p`); every tandem repeat of the sequence lies inside one. The
//! "runs theorem" of Bannai, I, Inenaga, Nakashima, Takeda and Tsuruta (*The "Runs"
//! Theorem*, SIAM J. Comput. 46(5), 2017) shows that every run contains a *Lyndon root*:
//! a period-long factor that is the longest Lyndon word starting at its position, for one
//! of the two orders of the alphabet (the natural one or its reverse). So there are fewer
//! than `n` runs, and they are all found by, for each order and each position `i`, taking
//! `p = λ[i]` (the length of the longest Lyndon word starting at `i`) and extending the
//! square candidate `[i, i + p)` left and right with longest-common-extension (LCE)
//! queries. This replaces Kolpakov and Kucherov's Lempel–Ziv based algorithm (FOCS 1999)
//! with a simpler one of the same complexity.
//!
//! The Lyndon array is the "next smaller suffix" array: `λ[i] = j - i` for the first
//! `j > i` whose suffix is lexicographically smaller than suffix `i` (Hohlweg and
//! Reutenauer, 2003). We get it from the inverse suffix array with one stack pass; the
//! suffix array comes from `libsais` (Grebnov's SA-IS implementation) on the densely
//! renumbered tokens. LCE queries use Karp–Rabin fingerprints (modulo the Mersenne prime
//! `2^61 - 1`) with galloping search, `O(log ℓ)` each; a fingerprint collision could only
//! report a run that is not one, so the nest builder checks every loop it folds against
//! the tokens before using it.

/// One run: `tokens[start..end]` has smallest period `period` and `end - start >= 2 * period`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Run {
    pub start: u32,
    pub end: u32,
    pub period: u32,
}

/// Computes all runs of `tokens`, sorted by `(start, end, period)`, or `None` when the
/// sequence is too long for 32-bit suffix arrays or the suffix sorter fails (the caller
/// then falls back to the greedy algorithm).
pub(crate) fn runs(tokens: &[u32]) -> Option<Vec<Run>> {
    let n = tokens.len();
    if n < 2 {
        return Some(Vec::new());
    }
    if n >= i32::MAX as usize / 2 {
        return None;
    }
    let (dense, alphabet) = densify(tokens);
    let lce = Fingerprints::new(&dense);
    let mut found = Vec::new();
    for reversed in [false, true] {
        let text: Vec<i32> = if reversed {
            dense.iter().map(|&c| alphabet - 1 - c).collect()
        } else {
            dense.clone()
        };
        let lyndon = lyndon_array(text, alphabet)?;
        // End of the last run found per period: a root inside it only finds it again.
        let mut last_end = vec![0u32; n / 2 + 1];
        for (i, &len) in lyndon.iter().enumerate() {
            let period = len as usize;
            let j = i + period;
            if j >= n || period > n / 2 || j < last_end[period] as usize {
                continue;
            }
            let right = lce.forward(i, j);
            let end = j + right;
            let left = if i > 0 { lce.backward(i - 1, j - 1) } else { 0 };
            let start = i - left;
            if end - start >= 2 * period {
                last_end[period] = end as u32;
                found.push(Run {
                    start: start as u32,
                    end: end as u32,
                    period: period as u32,
                });
            }
        }
    }
    found.sort_unstable();
    found.dedup();
    Some(found)
}

/// Renumbers tokens to `0..alphabet` in order, as the suffix sorter wants.
fn densify(tokens: &[u32]) -> (Vec<i32>, i32) {
    let mut distinct: Vec<u32> = tokens.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    let dense = tokens
        .iter()
        .map(|t| distinct.binary_search(t).map_or(0, |r| r as i32))
        .collect();
    (dense, distinct.len() as i32)
}

/// The Lyndon array of `text` (values in `0..alphabet`): the next smaller suffix of each
/// position, from the inverse suffix array.
fn lyndon_array(mut text: Vec<i32>, alphabet: i32) -> Option<Vec<u32>> {
    let n = text.len();
    let mut construction = libsais::SuffixArrayConstruction::for_text_mut(&mut text)
        .in_owned_buffer32()
        .single_threaded();
    // SAFETY: `densify` maps every token to `0..alphabet`, which is what the suffix sorter
    // requires of the alphabet size it is told.
    unsafe {
        construction =
            construction.with_alphabet_size(libsais::suffix_array::AlphabetSize::new(alphabet));
    }
    let sa = construction.run().ok()?.into_vec();
    let mut rank = vec![0u32; n];
    for (r, &pos) in sa.iter().enumerate() {
        rank[usize::try_from(pos).ok()?] = r as u32;
    }
    // Right to left, keep a stack of positions with increasing ranks: the first one with
    // a smaller rank than `i` is its next smaller suffix.
    let mut lyndon = vec![0u32; n];
    let mut stack: Vec<u32> = Vec::new();
    for i in (0..n).rev() {
        while let Some(&top) = stack.last() {
            if rank[top as usize] > rank[i] {
                stack.pop();
            } else {
                break;
            }
        }
        let next = stack.last().map_or(n, |&top| top as usize);
        lyndon[i] = (next - i) as u32;
        stack.push(i as u32);
    }
    Some(lyndon)
}

const MERSENNE: u64 = (1 << 61) - 1;
const BASE: u64 = 0x0123_4567_89ab_cdef % MERSENNE;

fn mul_mod(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    let folded = (product as u64 & MERSENNE) + (product >> 61) as u64;
    if folded >= MERSENNE {
        folded - MERSENNE
    } else {
        folded
    }
}

/// Prefix fingerprints for O(log ℓ) longest-common-extension queries.
struct Fingerprints<'a> {
    text: &'a [i32],
    prefix: Vec<u64>,
    power: Vec<u64>,
}

impl<'a> Fingerprints<'a> {
    fn new(text: &'a [i32]) -> Self {
        let mut prefix = Vec::with_capacity(text.len() + 1);
        let mut power = Vec::with_capacity(text.len() + 1);
        prefix.push(0);
        power.push(1);
        for &c in text {
            let last = *prefix.last().unwrap_or(&0);
            prefix.push((mul_mod(last, BASE) + c as u64 + 1) % MERSENNE);
            power.push(mul_mod(*power.last().unwrap_or(&1), BASE));
        }
        Fingerprints {
            text,
            prefix,
            power,
        }
    }

    /// The fingerprint of `text[from..from + len]`.
    fn of(&self, from: usize, len: usize) -> u64 {
        let high = self.prefix[from + len];
        let low = mul_mod(self.prefix[from], self.power[len]);
        (high + MERSENNE - low) % MERSENNE
    }

    /// The length of the longest common prefix of the suffixes at `a` and `b`.
    fn forward(&self, a: usize, b: usize) -> usize {
        let limit = self.text.len() - a.max(b);
        self.extend(limit, |len| {
            if len <= 8 {
                self.text[a..a + len] == self.text[b..b + len]
            } else {
                self.of(a, len) == self.of(b, len)
            }
        })
    }

    /// The length of the longest common suffix of the prefixes ending at `a` and `b`
    /// (inclusive).
    fn backward(&self, a: usize, b: usize) -> usize {
        let limit = a.min(b) + 1;
        self.extend(limit, |len| {
            if len <= 8 {
                self.text[a + 1 - len..=a] == self.text[b + 1 - len..=b]
            } else {
                self.of(a + 1 - len, len) == self.of(b + 1 - len, len)
            }
        })
    }

    /// The largest `len <= limit` with `equal(len)`, for a monotone `equal`: galloping,
    /// then binary search.
    fn extend(&self, limit: usize, equal: impl Fn(usize) -> bool) -> usize {
        let mut good = 0;
        let mut step = 1;
        while good < limit {
            let probe = (good + step).min(limit);
            if equal(probe) {
                good = probe;
                step *= 2;
            } else {
                let mut bad = probe;
                while bad - good > 1 {
                    let mid = good + (bad - good) / 2;
                    if equal(mid) {
                        good = mid;
                    } else {
                        bad = mid;
                    }
                }
                return good;
            }
        }
        good
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// All runs by brute force: for every period, the maximal periodic stretches.
    fn naive_runs(tokens: &[u32]) -> Vec<Run> {
        let n = tokens.len();
        let mut found = Vec::new();
        for period in 1..=n / 2 {
            let mut start = 0;
            while start + period < n {
                let mut end = start + period;
                while end < n && tokens[end] == tokens[end - period] {
                    end += 1;
                }
                if end - start >= 2 * period {
                    let smallest = (1..=period)
                        .find(|&q| (start + q..end).all(|k| tokens[k] == tokens[k - q]))
                        .unwrap_or(period);
                    if smallest == period {
                        found.push(Run {
                            start: start as u32,
                            end: end as u32,
                            period: period as u32,
                        });
                    }
                }
                start = if end - start > period {
                    end - period
                } else {
                    start + 1
                };
            }
        }
        found.sort_unstable();
        found.dedup();
        found
    }

    #[test]
    fn runs_of_a_small_example() {
        // a a b a a b a a b c: "aa" three times and (aab)^3 with one extra a.
        let tokens = [0, 0, 1, 0, 0, 1, 0, 0, 1, 2];
        assert_eq!(runs(&tokens), Some(naive_runs(&tokens)));
        let found = runs(&tokens).unwrap_or_default();
        assert!(found.contains(&Run {
            start: 0,
            end: 9,
            period: 3
        }));
    }

    proptest! {
        #[test]
        fn runs_match_brute_force(tokens in prop::collection::vec(0u32..3, 0..60)) {
            prop_assert_eq!(runs(&tokens), Some(naive_runs(&tokens)));
        }

        #[test]
        fn lce_matches_direct_comparison(
            tokens in prop::collection::vec(0i32..2, 1..80),
            a in 0usize..80,
            b in 0usize..80,
        ) {
            let n = tokens.len();
            let (a, b) = (a % n, b % n);
            let lce = Fingerprints::new(&tokens);
            let direct = (0..n - a.max(b)).take_while(|&k| tokens[a + k] == tokens[b + k]).count();
            prop_assert_eq!(lce.forward(a, b), direct);
            let back = (0..=a.min(b)).take_while(|&k| tokens[a - k] == tokens[b - k]).count();
            prop_assert_eq!(lce.backward(a, b), back);
        }
    }
}
