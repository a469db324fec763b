//! Exact loop discovery: a token sequence → the loop nest with the shortest description
//! among those built from its runs, outer loops first.
//!
//! The seed found all repeats with Crochemore's O(N² ) partitioning and needed ~30 hours
//! for NPB LU's 323,048 calls. Here the candidates come from the *runs* of the sequence
//! (maximal repetitions, fewer than `n` of them, all found in linear time after suffix
//! sorting; see [`super::runs`]). Every loop of any nest lies inside a run of its period,
//! so a loop is a run, a start rotation inside it and a count. For each run we take up to
//! [`ROTATIONS`] start positions (its first ones: a loop body may start a few tokens into
//! the run when the code before the loop ends like its body does) with the largest count
//! that fits. The body of each candidate is solved recursively (a body is at most half
//! its run, so the recursion is at most log₂ n deep) and memoized by content, so the
//! equal bodies of different rotations and nesting levels are solved once. A dynamic
//! program over positions then picks the cheapest cover of the sequence by tokens and
//! candidate loops, where a loop costs one header plus its body's cost (the
//! [`super::description_len`] measure). Ties go to the path found first, i.e. to the
//! loop that starts earliest: of the rotations of an equally cheap loop it keeps the one
//! that begins where the repetition begins.
//!
//! Bounded work: the recursion is charged for every token it analyses; once the budget
//! ([`BUDGET_PER_TOKEN`] × n) is spent, further bodies count as straight-line tokens.
//! Candidates are capped at [`CANDIDATES_PER_TOKEN`] × n. On adversarial input (e.g.
//! Fibonacci words, random sequences over two letters) the nest can then be longer than
//! optimal, never wrong: every loop is checked against the tokens before it is emitted,
//! and the caller keeps the greedy nest when it is shorter.

use super::runs::{runs, Run};
use super::{description_len, Node};
use rustc_hash::FxHashMap;
use std::rc::Rc;

/// Start rotations tried per run.
pub const ROTATIONS: usize = 8;
/// Tokens of recursive body analysis allowed per input token.
pub const BUDGET_PER_TOKEN: usize = 32;
/// Candidate loops allowed per input token.
pub const CANDIDATES_PER_TOKEN: usize = 4;

/// A solved (sub)sequence: its nest and the nest's description length.
struct Solved {
    nest: Vec<Node>,
    cost: usize,
}

/// One candidate loop: `count` iterations of `tokens[start..start + period]`.
#[derive(Clone, Copy)]
struct Candidate {
    start: u32,
    period: u32,
    count: u32,
}

impl Candidate {
    fn end(&self) -> usize {
        self.start as usize + self.period as usize * self.count as usize
    }
}

/// The longest sequence exact discovery takes on (its working memory is about 150 bytes
/// per token); longer ones get the greedy nest.
pub const MAX_TOKENS: usize = 1 << 22;

/// The exact nest of `tokens`, or `None` when the sequence is longer than [`MAX_TOKENS`].
pub fn discover(tokens: &[u32]) -> Option<Vec<Node>> {
    if tokens.len() > MAX_TOKENS {
        return None;
    }
    let mut solver = Solver {
        memo: FxHashMap::default(),
        budget: BUDGET_PER_TOKEN
            .saturating_mul(tokens.len())
            .saturating_add(1 << 16),
    };
    let solved = solver.solve(tokens)?;
    debug_assert_eq!(description_len(&solved.nest), solved.cost);
    Some(solved.nest)
}

struct Solver {
    memo: FxHashMap<Box<[u32]>, Rc<Solved>>,
    budget: usize,
}

impl Solver {
    fn solve(&mut self, tokens: &[u32]) -> Option<Solved> {
        let n = tokens.len();
        self.budget = self.budget.saturating_sub(n);
        let runs = runs(tokens)?;
        let mut candidates = candidates(&runs, n);
        // Solve the bodies of the widest candidates first, so that the budget goes to the
        // outer loops when it runs short.
        candidates
            .sort_unstable_by_key(|c| std::cmp::Reverse(c.period as usize * c.count as usize));
        let mut bodies: Vec<Option<Rc<Solved>>> = Vec::with_capacity(candidates.len());
        for c in &candidates {
            let body = &tokens[c.start as usize..(c.start + c.period) as usize];
            bodies.push(self.body(body)?);
        }
        // A loop must not cut through a run of its own first or last inner loop: that
        // would force iterations whose inner counts differ into one loop (data-dependent
        // structure). Such a candidate leaves its first or last iteration out.
        for (c, body) in candidates.iter_mut().zip(&bodies) {
            if let Some(body) = body {
                trim_data_dependent(c, &body.nest, tokens);
            }
        }
        // Cheapest cover of tokens[..i] for every i.
        let mut by_end: Vec<u32> = (0..candidates.len() as u32)
            .filter(|&k| candidates[k as usize].count >= 2)
            .collect();
        by_end.sort_by_key(|&k| candidates[k as usize].end());
        let mut next = by_end.iter().peekable();
        let mut best = vec![0usize; n + 1];
        let mut choice: Vec<u32> = vec![u32::MAX; n + 1];
        for i in 1..=n {
            best[i] = best[i - 1] + 1;
            choice[i] = u32::MAX;
            while let Some(&&k) = next.peek() {
                let c = &candidates[k as usize];
                if c.end() != i {
                    break;
                }
                next.next();
                let body_cost = bodies[k as usize]
                    .as_ref()
                    .map_or(c.period as usize, |b| b.cost);
                let cost = best[c.start as usize] + 1 + body_cost;
                if cost < best[i] {
                    best[i] = cost;
                    choice[i] = k;
                }
            }
        }
        // Walk back, checking every chosen loop against the tokens.
        let mut nest = Vec::new();
        let mut i = n;
        while i > 0 {
            let k = choice[i];
            let chosen = (k != u32::MAX).then(|| (candidates[k as usize], &bodies[k as usize]));
            match chosen {
                Some((c, body)) if is_periodic(&tokens[c.start as usize..i], c.period as usize) => {
                    let body_nest = match body {
                        Some(solved) => solved.nest.clone(),
                        None => tokens[c.start as usize..(c.start + c.period) as usize]
                            .iter()
                            .map(|&t| Node::Token(t))
                            .collect(),
                    };
                    nest.push(Node::Loop {
                        count: u64::from(c.count),
                        body: body_nest,
                    });
                    i = c.start as usize;
                }
                // Not a loop, or (after a fingerprint collision) a false one: the token.
                _ => {
                    nest.push(Node::Token(tokens[i - 1]));
                    i -= 1;
                }
            }
        }
        nest.reverse();
        let cost = description_len(&nest);
        Some(Solved { nest, cost })
    }

    /// The solved body, from the memo or recursively; `None` inside when the budget is
    /// spent (the body then counts as straight-line tokens).
    fn body(&mut self, body: &[u32]) -> Option<Option<Rc<Solved>>> {
        // Looking a body up costs its length too.
        if self.budget < body.len() {
            return Some(None);
        }
        self.budget -= body.len();
        if let Some(solved) = self.memo.get(body) {
            return Some(Some(Rc::clone(solved)));
        }
        let solved = Rc::new(self.solve(body)?);
        self.memo.insert(body.into(), Rc::clone(&solved));
        Some(Some(solved))
    }
}

/// The candidate loops of a sequence of length `n` with the given runs.
fn candidates(runs: &[Run], n: usize) -> Vec<Candidate> {
    let rotations = |r: &Run| {
        let (len, period) = ((r.end - r.start) as usize, r.period as usize);
        period.min(len - 2 * period + 1).min(ROTATIONS)
    };
    let wanted: usize = runs.iter().map(rotations).sum();
    let cap = CANDIDATES_PER_TOKEN * n + 64;
    // Too many candidates (only on highly repetitive non-nested input): one per run.
    let per_run_cap = if wanted > cap { 1 } else { ROTATIONS };
    let mut out = Vec::with_capacity(wanted.min(cap));
    for run in runs {
        for offset in 0..rotations(run).min(per_run_cap) {
            let start = run.start + offset as u32;
            let count = (run.end - start) / run.period;
            if count >= 2 {
                out.push(Candidate {
                    start,
                    period: run.period,
                    count,
                });
            }
        }
    }
    out
}

/// Drops the first (last) iteration of a candidate when the inner loops its body starts
/// (ends) with would continue into the tokens before (after) it.
fn trim_data_dependent(c: &mut Candidate, body: &[Node], tokens: &[u32]) {
    let continues_before = |start: usize| {
        edge_periods(body, |nest| nest.first()).any(|q| {
            start >= q
                && start + q <= tokens.len()
                && tokens[start - q..start] == tokens[start..start + q]
        })
    };
    let continues_after = |end: usize| {
        edge_periods(body, |nest| nest.last()).any(|q| {
            end >= q && end + q <= tokens.len() && tokens[end - q..end] == tokens[end..end + q]
        })
    };
    if c.count >= 2 && continues_before(c.start as usize) {
        c.start += c.period;
        c.count -= 1;
    }
    if c.count >= 2 && continues_after(c.end()) {
        c.count -= 1;
    }
}

/// The one-iteration lengths of the loops nested at one edge of a nest: `(a × 3)` for the
/// first edge of `[(((a × 3) b) × 2) c]` gives 4 (for `(a × 3) b`), then 1.
fn edge_periods<'a>(
    nest: &'a [Node],
    edge: impl Fn(&'a [Node]) -> Option<&'a Node> + 'a,
) -> impl Iterator<Item = usize> + 'a {
    let mut current = nest;
    std::iter::from_fn(move || match edge(current) {
        Some(Node::Loop { body, .. }) => {
            current = body;
            Some(expanded_len(body))
        }
        _ => None,
    })
}

fn expanded_len(nest: &[Node]) -> usize {
    nest.iter()
        .map(|node| match node {
            Node::Token(_) => 1,
            Node::Loop { count, body } => (*count as usize).saturating_mul(expanded_len(body)),
        })
        .fold(0, usize::saturating_add)
}

/// Whether `tokens` repeats with period `period`.
fn is_periodic(tokens: &[u32], period: usize) -> bool {
    period > 0
        && tokens.len().is_multiple_of(period)
        && (period..tokens.len()).all(|k| tokens[k] == tokens[k - period])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compress::{expand, nested_example};

    #[test]
    fn finds_the_outer_loop_of_a_nest() {
        let tokens = nested_example();
        let nest = discover(&tokens).unwrap_or_default();
        assert_eq!(expand(&nest), tokens);
        assert_eq!(description_len(&nest), 6, "{nest:?}");
    }

    #[test]
    fn a_loop_after_a_prefix_that_ends_like_its_body() {
        // y z, then 50 × (x, 3 × w, y, z): the run starts at the first y.
        let mut tokens = vec![5, 6];
        for _ in 0..50 {
            tokens.extend([4, 1, 1, 1, 5, 6]);
        }
        let nest = discover(&tokens).unwrap_or_default();
        assert_eq!(expand(&nest), tokens);
        assert_eq!(description_len(&nest), 2 + 1 + 5, "{nest:?}");
    }

    #[test]
    fn adversarial_inputs_stay_exact() {
        // A Fibonacci word: runs everywhere, of every period.
        let (mut a, mut b) = (vec![0u32], vec![0u32, 1]);
        while b.len() < 50_000 {
            let next = [b.clone(), a].concat();
            a = b;
            b = next;
        }
        let nest = discover(&b).unwrap_or_default();
        assert_eq!(expand(&nest), b);
        let all_equal = vec![3u32; 100_000];
        let nest = discover(&all_equal).unwrap_or_default();
        assert_eq!(
            nest,
            vec![Node::Loop {
                count: 100_000,
                body: vec![Node::Token(3)]
            }]
        );
    }
}
