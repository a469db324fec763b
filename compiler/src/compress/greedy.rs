//! Greedy, streaming loop discovery: tokens pushed one at a time → a loop nest, inner
//! loops first, in amortized constant time per token and memory bounded by the window
//! and the distinct loop bodies (not by the trace length).
//!
//! The compressor keeps the current top level of the nest as a sequence of *elements*
//! (a token, or a loop whose body is an interned list of elements). After every append it
//! tries, in this order, the rules that fold the tail of that sequence:
//!
//! 1. **merge**: two adjacent loops with the same body become one (counts add up);
//! 2. **continue**: the last `p` elements equal the body of the loop just before them
//!    (`p` its body length): the loop gets one more iteration;
//! 3. **square**: the last `2p` elements are two equal halves: they become a loop of two
//!    iterations. Candidate periods come from the previous occurrences of the element
//!    just appended, nearest first, so the shortest (innermost) repeat wins.
//!
//! A fold replaces the tail by one element, which is appended in turn, so folds cascade
//! outwards: `a b b a b b` becomes `a (b×2)`, then `a (b×2) a (b×2)`, then
//! `((a (b×2))×2)`. Windows are compared by polynomial fingerprints of the elements and
//! then element by element, so a fold is always exact. Because a loop is recognised only
//! once two of its iterations have been seen, and an inner loop may first swallow the
//! start of an outer iteration, a loop can lose up to two iterations to straight-line
//! elements around it (the seed's bound).
//!
//! A window that ends with a loop is folded only once the next element shows that loop
//! complete (it neither continues it nor could, as a growing inner loop, still reach the
//! count the body has): otherwise an outer iteration whose inner loop runs longer than
//! in the earlier iterations would be taken for one more equal iteration, and the extra
//! inner iterations left as straight-line tokens. Such data-dependent iterations stay
//! separate loops. Elements older than [`WINDOW`] × 2 are frozen:
//! they no longer take part in folds, which keeps the per-token work and the live state
//! bounded.

use super::Node;
use rustc_hash::FxHashMap;
use smallvec::{smallvec, SmallVec};

/// The longest loop body, in top-level elements, that the greedy compressor looks for.
pub const WINDOW: usize = 4096;
/// How many earlier occurrences of an element are tried as square candidates.
const CHAIN: usize = 8;
/// How many recent loops are tried for a continuation.
const RECENT_LOOPS: usize = 16;
/// Occurrence table size (direct-mapped by element fingerprint).
const SLOTS: usize = 1 << 12;
/// Multiplier of the element fingerprints' polynomial hash.
const BASE: u64 = 0x9e37_79b9_7f4a_7c15;

/// One top-level element of the nest being built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Elem {
    Token(u32),
    Loop { count: u64, body: u32 },
}

/// Fingerprints of a body's prefixes.
type PrefixHashes = Box<[u64]>;

/// Counters describing a greedy run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Tokens pushed.
    pub tokens: u64,
    /// Distinct loop bodies interned.
    pub bodies: usize,
    /// Elements frozen (outside the window) so far.
    pub frozen: usize,
    /// Largest number of live elements in the window.
    pub peak_window: usize,
}

/// The streaming greedy compressor: [`push`](Self::push) tokens, then
/// [`finish`](Self::finish).
pub struct GreedyCompressor {
    /// Interned loop bodies and the fingerprints of their prefixes (`[i]` covers the
    /// first `i` elements).
    bodies: Vec<(Box<[Elem]>, PrefixHashes)>,
    body_ids: FxHashMap<Box<[Elem]>, u32>,
    /// Elements that left the window.
    frozen: Vec<Elem>,
    /// The live window, with per-element fingerprints and prefix fingerprints
    /// (`prefix[i]` covers `live[..i]`).
    live: Vec<Elem>,
    prefix: Vec<u64>,
    /// For each live element, the absolute position of the previous element with the same
    /// occurrence slot (`u64::MAX` when none).
    previous: Vec<u64>,
    /// Live positions holding loops, ascending.
    loops: Vec<usize>,
    /// Last absolute position per occurrence slot.
    last_seen: Vec<u64>,
    /// Absolute position of `live[0]`.
    base: u64,
    power: Vec<u64>,
    stats: Stats,
}

impl Default for GreedyCompressor {
    fn default() -> Self {
        Self::new()
    }
}

impl GreedyCompressor {
    pub fn new() -> Self {
        let mut power = Vec::with_capacity(WINDOW + 1);
        let mut p = 1u64;
        for _ in 0..=WINDOW {
            power.push(p);
            p = p.wrapping_mul(BASE);
        }
        GreedyCompressor {
            bodies: Vec::new(),
            body_ids: FxHashMap::default(),
            frozen: Vec::new(),
            live: Vec::new(),
            prefix: vec![0],
            previous: Vec::new(),
            loops: Vec::new(),
            last_seen: vec![u64::MAX; SLOTS],
            base: 0,
            power,
            stats: Stats::default(),
        }
    }

    /// Appends one token to the sequence.
    pub fn push(&mut self, token: u32) {
        self.stats.tokens += 1;
        self.add(Elem::Token(token));
        if self.live.len() >= 2 * WINDOW {
            self.freeze(WINDOW);
        }
    }

    /// Appends an element and folds the tail as far as it goes.
    fn add(&mut self, elem: Elem) {
        // Elements still to append, the next one last.
        let mut todo: SmallVec<[Elem; 8]> = smallvec![elem];
        while let Some(elem) = todo.pop() {
            self.append(elem);
            if let Some((folded, then)) = self.fold_tail() {
                todo.extend(then.into_iter().rev());
                todo.push(folded);
            }
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> Stats {
        Stats {
            bodies: self.bodies.len(),
            ..self.stats
        }
    }

    /// The loop nest of everything pushed.
    pub fn finish(mut self) -> Vec<Node> {
        // The folds deferred behind the last loop can happen now that nothing follows
        // (when what follows it is the start of another iteration of it).
        while let Some(&q) = self.loops.last() {
            let Elem::Loop { body, .. } = self.live[q] else {
                break;
            };
            let then = self.live[q + 1..].to_vec();
            let body = &self.bodies[body as usize].0;
            if then.len() >= body.len() || body[..then.len()] != then[..] {
                break;
            }
            match self.fold_ending_at(q) {
                Some(folded) => {
                    self.add(folded);
                    for elem in then {
                        self.add(elem);
                    }
                }
                None => break,
            }
        }
        let mut cache: FxHashMap<u32, Vec<Node>> = FxHashMap::default();
        self.frozen
            .iter()
            .chain(&self.live)
            .map(|&elem| self.node(elem, &mut cache))
            .collect()
    }

    fn node(&self, elem: Elem, cache: &mut FxHashMap<u32, Vec<Node>>) -> Node {
        match elem {
            Elem::Token(token) => Node::Token(token),
            Elem::Loop { count, body } => {
                let body_nodes = match cache.get(&body) {
                    Some(nodes) => nodes.clone(),
                    None => {
                        let nodes: Vec<Node> = self.bodies[body as usize]
                            .0
                            .iter()
                            .map(|&e| self.node(e, cache))
                            .collect();
                        cache.insert(body, nodes.clone());
                        nodes
                    }
                };
                Node::Loop {
                    count,
                    body: body_nodes,
                }
            }
        }
    }

    fn fingerprint(&self, elem: Elem) -> u64 {
        match elem {
            Elem::Token(token) => mix(u64::from(token)),
            Elem::Loop { count, body } => {
                mix(count ^ mix(u64::from(body) ^ 0x5555_0000_0000_0000) ^ (1 << 63))
            }
        }
    }

    fn append(&mut self, elem: Elem) {
        let hash = self.fingerprint(elem);
        let position = self.base + self.live.len() as u64;
        let slot = (hash as usize) & (SLOTS - 1);
        self.previous.push(self.last_seen[slot]);
        self.last_seen[slot] = position;
        let last = *self.prefix.last().unwrap_or(&0);
        self.prefix.push(last.wrapping_mul(BASE).wrapping_add(hash));
        if matches!(elem, Elem::Loop { .. }) {
            self.loops.push(self.live.len());
        }
        self.live.push(elem);
        self.stats.peak_window = self.stats.peak_window.max(self.live.len());
    }

    /// Removes live elements from `len` on.
    fn truncate(&mut self, len: usize) {
        // Undo the occurrence table, latest first, so that re-appended elements find
        // their true previous occurrences.
        for i in (len..self.live.len()).rev() {
            let slot = (self.fingerprint(self.live[i]) as usize) & (SLOTS - 1);
            if self.last_seen[slot] == self.base + i as u64 {
                self.last_seen[slot] = self.previous[i];
            }
        }
        self.live.truncate(len);
        self.prefix.truncate(len + 1);
        self.previous.truncate(len);
        while self.loops.last().is_some_and(|&q| q >= len) {
            self.loops.pop();
        }
    }

    /// The fingerprint of `live[from..to]`.
    fn window(&self, from: usize, to: usize) -> u64 {
        self.prefix[to].wrapping_sub(self.prefix[from].wrapping_mul(self.power[to - from]))
    }

    /// Tries the folding rules on the tail; on success removes the folded elements and
    /// returns the element that replaces them and the one to append after it (both not
    /// yet appended).
    ///
    /// A window that ends with a loop is not folded until the next element shows that
    /// the loop is complete: otherwise an outer iteration whose inner loop runs longer
    /// than in the previous iterations would be taken as one more equal iteration.
    fn fold_tail(&mut self) -> Option<(Elem, Vec<Elem>)> {
        let t = self.live.len() - 1;
        let last = self.live[t];
        // 1. merge two adjacent loops with the same body.
        if let (
            Elem::Loop { count, body },
            Some(&Elem::Loop {
                count: c0,
                body: b0,
            }),
        ) = (last, t.checked_sub(1).and_then(|i| self.live.get(i)))
        {
            if body == b0 {
                self.truncate(t - 1);
                let merged = Elem::Loop {
                    count: c0.saturating_add(count),
                    body,
                };
                return Some((merged, Vec::new()));
            }
        }
        // The windows deferred behind the most recent loop come first: they end earlier.
        if let Some(q) = self.settled_loop(t) {
            let then = self.live[q + 1..=t].to_vec();
            if let Some(folded) = self.fold_ending_at(q) {
                return Some((folded, then));
            }
        }
        if !matches!(last, Elem::Loop { .. }) {
            if let Some(folded) = self.fold_ending_at(t) {
                return Some((folded, Vec::new()));
            }
        }
        None
    }

    /// The position of the most recent loop if the element at `t` has just shown it
    /// complete: the elements after it were a prefix of its body up to `t - 1`, and the
    /// one at `t` breaks that.
    fn settled_loop(&self, t: usize) -> Option<usize> {
        let q = *self.loops.iter().rev().find(|&&q| q < t)?;
        let Elem::Loop { body, .. } = self.live[q] else {
            return None;
        };
        let (body, prefix) = &self.bodies[body as usize];
        let m = t - q;
        let continues = |live: Elem, wanted: Elem| match (live, wanted) {
            // A loop still counting may yet reach the count the body has.
            (Elem::Loop { count, body }, Elem::Loop { count: c, body: b }) => {
                body == b && count <= c
            }
            _ => live == wanted,
        };
        (m <= body.len()
            && self.window(q + 1, t) == prefix[m - 1]
            && !continues(self.live[t], body[m - 1]))
        .then_some(q)
    }

    /// Rules 2 and 3 for windows ending at live position `end`; a fold removes everything
    /// from its start on.
    fn fold_ending_at(&mut self, end: usize) -> Option<Elem> {
        let last = self.live[end];
        // 2. continue a recent loop with one more iteration.
        for &q in self.loops.iter().rev().take(RECENT_LOOPS + 1) {
            if q >= end {
                continue;
            }
            let span = end - q;
            if span > WINDOW {
                break;
            }
            let Elem::Loop { count, body } = self.live[q] else {
                continue;
            };
            let (body_elems, prefix) = &self.bodies[body as usize];
            if body_elems.len() == span
                && self.window(q + 1, end + 1) == prefix[span]
                && self.live[q + 1..=end] == body_elems[..]
            {
                self.truncate(q);
                return Some(Elem::Loop {
                    count: count.saturating_add(1),
                    body,
                });
            }
        }
        // 3. a square ending here, shortest period first.
        let position = self.base + end as u64;
        let mut earlier = self.previous[end];
        for _ in 0..CHAIN {
            if earlier == u64::MAX || earlier < self.base || earlier >= position {
                break;
            }
            let period = (position - earlier) as usize;
            if period > WINDOW || 2 * period > end + 1 {
                break;
            }
            let start = end + 1 - 2 * period;
            let middle = end + 1 - period;
            if self.live[(earlier - self.base) as usize] == last
                && self.window(start, middle) == self.window(middle, end + 1)
                && self.live[start..middle] == self.live[middle..=end]
            {
                let folded = self.make_loop(start, middle);
                self.truncate(start);
                return Some(folded);
            }
            earlier = self.previous[(earlier - self.base) as usize];
        }
        None
    }

    /// A two-iteration loop over `live[from..to]` (a loop of a single loop multiplies the
    /// counts instead).
    fn make_loop(&mut self, from: usize, to: usize) -> Elem {
        if let [Elem::Loop { count, body }] = self.live[from..to] {
            return Elem::Loop {
                count: count.saturating_mul(2),
                body,
            };
        }
        let body: Box<[Elem]> = self.live[from..to].into();
        let id = match self.body_ids.get(&body) {
            Some(&id) => id,
            None => {
                let id = self.bodies.len() as u32;
                let prefix = (from..=to).map(|i| self.window(from, i)).collect();
                self.body_ids.insert(body.clone(), id);
                self.bodies.push((body, prefix));
                id
            }
        };
        Elem::Loop { count: 2, body: id }
    }

    /// Moves the oldest `count` live elements out of the window.
    fn freeze(&mut self, count: usize) {
        self.frozen.extend(self.live.drain(..count));
        self.prefix.drain(..count);
        self.previous.drain(..count);
        self.loops.retain(|&q| q >= count);
        for q in &mut self.loops {
            *q -= count;
        }
        self.base += count as u64;
        self.stats.frozen += count;
    }
}

/// SplitMix64's finalizer: a well-mixed 64-bit fingerprint of a value.
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Greedy discovery of a whole sequence (the unit tests'; [`super::Discovery`] is the
/// streaming entry point).
#[cfg(test)]
pub fn discover(tokens: &[u32]) -> Vec<Node> {
    let mut compressor = GreedyCompressor::new();
    for &token in tokens {
        compressor.push(token);
    }
    compressor.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compress::{description_len, expand, nested_example};

    #[test]
    fn nested_loops_are_found_inner_first() {
        let tokens = nested_example();
        let nest = discover(&tokens);
        assert_eq!(expand(&nest), tokens);
        assert_eq!(description_len(&nest), 6, "{nest:?}");
    }

    #[test]
    fn a_long_loop_keeps_the_window_small() {
        let mut compressor = GreedyCompressor::new();
        for i in 0..100_000u32 {
            for token in [7, 8, 9, 8] {
                compressor.push(token);
            }
            compressor.push(i % 2);
        }
        let stats = compressor.stats();
        // Two 10-element iterations are live before they fold.
        assert!(stats.peak_window <= 20, "{stats:?}");
        assert_eq!(stats.frozen, 0);
        let nest = compressor.finish();
        assert!(description_len(&nest) <= 12, "{nest:?}");
    }

    #[test]
    fn sequences_without_repeats_freeze_old_elements() {
        let tokens: Vec<u32> = (0..3 * WINDOW as u32).collect();
        let mut compressor = GreedyCompressor::new();
        for &t in &tokens {
            compressor.push(t);
        }
        assert!(compressor.stats().peak_window <= 2 * WINDOW);
        assert!(compressor.stats().frozen >= WINDOW);
        assert_eq!(expand(&compressor.finish()), tokens);
    }
}
