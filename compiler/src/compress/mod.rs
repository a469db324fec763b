//! Loop-nest discovery: a sequence of tokens (one per MPI event, interned to `u32` by the
//! caller) → a loop nest whose expansion is exactly that sequence.
//!
//! This is the compression step of the seed's skeleton construction (see
//! `../shared/seeds/001_*`): hundreds of thousands of MPI calls become a nest of loops a
//! person can read. The module knows nothing about MPI; `skeletonize` turns events into
//! tokens and nests into skeleton IR.
//!
//! Two algorithms share one interface ([`discover`]):
//! - [`Algorithm::Exact`]: the nest with the shortest description, outer loops first;
//! - [`Algorithm::Greedy`]: inner loops first, streaming, near-linear; it may miss up to
//!   two iterations of a loop (they stay as straight-line tokens around it).
//!
//! Whatever the algorithm, [`expand`] of the result is the input: compression is
//! lossless. Loops only ever fold equal iterations, so outer iterations whose inner loop
//! counts differ (data-dependent structure) stay separate loops.
//!
//! Files: `runs.rs` (all maximal repetitions: suffix array, Lyndon roots, fingerprint
//! LCE), `exact.rs` (the shortest nest over the runs' candidate loops, bounded work),
//! `greedy.rs` ([`GreedyCompressor`], streaming), `synthetic.rs` (traces shaped like the
//! seed's NAS table, for tests and benchmarks), `proptests.rs`.

mod exact;
mod greedy;
#[cfg(test)]
mod proptests;
mod runs;
pub mod synthetic;

pub use exact::MAX_TOKENS as EXACT_MAX_TOKENS;
pub use greedy::{GreedyCompressor, Stats as GreedyStats, WINDOW as GREEDY_WINDOW};

/// One element of a loop nest.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Node {
    /// One event of the input, by its interned token id.
    Token(u32),
    /// `count` repetitions of `body` (`count >= 2`, `body` not empty).
    Loop { count: u64, body: Vec<Node> },
}

/// Which loop-discovery algorithm to run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Algorithm {
    /// Shortest description, outer loops first.
    #[default]
    Exact,
    /// Inner loops first, streaming, near-linear.
    Greedy,
}

/// Finds a loop nest whose expansion is `tokens`.
///
/// Exact keeps the greedy nest instead when that one is shorter (only on adversarial
/// input, where exact's work bounds cut its search short) or when the sequence is longer
/// than [`EXACT_MAX_TOKENS`].
pub fn discover(tokens: &[u32], algorithm: Algorithm) -> Vec<Node> {
    let mut discovery = Discovery::new(algorithm);
    for &token in tokens {
        discovery.push(token);
    }
    discovery.finish()
}

/// [`discover`] fed one token at a time, for sequences too long to hold: the greedy
/// compressor sees every token as it comes (its memory does not grow with the length of
/// regular input); for [`Algorithm::Exact`] the 4-byte token ids are also kept, up to
/// [`EXACT_MAX_TOKENS`] (16 MiB), since the exact search needs the whole sequence. Past
/// that they are dropped and the greedy nest is the result, as [`discover`] decides for
/// such sequences anyway: both give the same nest for the same tokens.
pub struct Discovery {
    greedy: GreedyCompressor,
    /// The tokens so far, while the exact search may still run on them.
    kept: Option<Vec<u32>>,
}

impl Discovery {
    pub fn new(algorithm: Algorithm) -> Self {
        Discovery {
            greedy: GreedyCompressor::new(),
            kept: (algorithm == Algorithm::Exact).then(Vec::new),
        }
    }

    /// Appends one token.
    pub fn push(&mut self, token: u32) {
        self.greedy.push(token);
        if let Some(kept) = &mut self.kept {
            if kept.len() < EXACT_MAX_TOKENS {
                kept.push(token);
            } else {
                self.kept = None;
            }
        }
    }

    /// The nest of everything pushed. Exact keeps the greedy nest when that one is
    /// shorter (only on adversarial input, where exact's work bounds cut its search
    /// short).
    pub fn finish(self) -> Vec<Node> {
        let greedy = self.greedy.finish();
        match self.kept.as_deref().and_then(exact::discover) {
            Some(exact) if description_len(&exact) <= description_len(&greedy) => exact,
            _ => greedy,
        }
    }
}

/// The token sequence a nest stands for.
pub fn expand(nest: &[Node]) -> Vec<u32> {
    let mut out = Vec::new();
    expand_into(nest, &mut out);
    out
}

fn expand_into(nest: &[Node], out: &mut Vec<u32>) {
    for node in nest {
        match node {
            Node::Token(token) => out.push(*token),
            Node::Loop { count, body } => {
                for _ in 0..*count {
                    expand_into(body, out);
                }
            }
        }
    }
}

/// The size of a nest's description: one per token and one per loop header.
pub fn description_len(nest: &[Node]) -> usize {
    nest.iter()
        .map(|node| match node {
            Node::Token(_) => 1,
            Node::Loop { body, .. } => 1 + description_len(body),
        })
        .sum()
}

/// A slow but simple discovery used as the reference in tests: fold the shortest tandem
/// repeats first (inner loops first), over and over, until nothing repeats. Quadratic in
/// the worst case; for short sequences only.
pub fn reference(tokens: &[u32]) -> Vec<Node> {
    let mut nodes: Vec<Node> = tokens.iter().map(|&t| Node::Token(t)).collect();
    loop {
        let mut changed = false;
        let mut period = 1;
        while period <= nodes.len() / 2 {
            if let Some(folded) = fold_period(&nodes, period) {
                nodes = folded;
                changed = true;
                period = 1;
            } else {
                period += 1;
            }
        }
        if !changed {
            return nodes;
        }
    }
}

/// Folds every run of two or more consecutive copies of a `period`-long block, or
/// returns `None` when there is none.
fn fold_period(nodes: &[Node], period: usize) -> Option<Vec<Node>> {
    let mut out = Vec::with_capacity(nodes.len());
    let mut i = 0;
    let mut folded = false;
    while i < nodes.len() {
        let mut count = 1;
        while i + (count + 1) * period <= nodes.len()
            && nodes[i..i + period] == nodes[i + count * period..i + (count + 1) * period]
        {
            count += 1;
        }
        if count >= 2 {
            let body = nodes[i..i + period].to_vec();
            out.push(match body.as_slice() {
                // A loop of a loop's body is one loop with the product of the counts.
                [Node::Loop { count: inner, body }] => Node::Loop {
                    count: inner.saturating_mul(count as u64),
                    body: body.clone(),
                },
                _ => Node::Loop {
                    count: count as u64,
                    body,
                },
            });
            i += count * period;
            folded = true;
        } else {
            out.push(nodes[i].clone());
            i += 1;
        }
    }
    folded.then_some(out)
}

/// 3 × (a, 4 × b, c), then d: the small nest the unit tests of every algorithm start
/// from (its shortest description has 6 elements).
#[cfg(test)]
pub(crate) fn nested_example() -> Vec<u32> {
    let mut tokens = Vec::new();
    for _ in 0..3 {
        tokens.push(0);
        tokens.extend([1; 4]);
        tokens.push(2);
    }
    tokens.push(3);
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_folds_nested_loops_and_expands_back() {
        let tokens = nested_example();
        let nest = reference(&tokens);
        assert_eq!(
            nest,
            vec![
                Node::Loop {
                    count: 3,
                    body: vec![
                        Node::Token(0),
                        Node::Loop {
                            count: 4,
                            body: vec![Node::Token(1)]
                        },
                        Node::Token(2),
                    ],
                },
                Node::Token(3),
            ]
        );
        assert_eq!(expand(&nest), tokens);
        assert_eq!(description_len(&nest), 6);
    }
}
