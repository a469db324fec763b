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
//! elements around it (the seed's bound). Elements older than [`WINDOW`] × 2 are frozen:
//! they no longer take part in folds, which keeps the per-token work and the live state
//! bounded.

use super::Node;
use rustc_hash::FxHashMap;

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
    /// Interned loop bodies and their fingerprints.
    bodies: Vec<(Box<[Elem]>, u64)>,
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
        let mut elem = Elem::Token(token);
        loop {
            self.append(elem);
            match self.fold_tail() {
                Some(folded) => elem = folded,
                None => break,
            }
        }
        if self.live.len() >= 2 * WINDOW {
            self.freeze(WINDOW);
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
    pub fn finish(self) -> Vec<Node> {
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
    /// returns the element that replaces them (not yet appended).
    fn fold_tail(&mut self) -> Option<Elem> {
        let t = self.live.len() - 1;
        let last = self.live[t];
        // 1. merge two adjacent loops with the same body.
        if let (Elem::Loop { count, body }, Some(&Elem::Loop { count: c0, body: b0 })) =
            (last, t.checked_sub(1).and_then(|i| self.live.get(i)))
        {
            if body == b0 {
                self.truncate(t - 1);
                return Some(Elem::Loop {
                    count: c0.saturating_add(count),
                    body,
                });
            }
        }
        // 2. continue a recent loop with one more iteration.
        for &q in self.loops.iter().rev().take(RECENT_LOOPS) {
            if q == t {
                continue;
            }
            let span = t - q;
            if span > WINDOW {
                break;
            }
            let Elem::Loop { count, body } = self.live[q] else {
                continue;
            };
            let (body_elems, body_hash) = &self.bodies[body as usize];
            if body_elems.len() == span
                && self.window(q + 1, t + 1) == *body_hash
                && self.live[q + 1..=t] == body_elems[..]
            {
                self.truncate(q);
                return Some(Elem::Loop {
                    count: count.saturating_add(1),
                    body,
                });
            }
        }
        // 3. a square ending here, shortest period first.
        let position = self.base + t as u64;
        let mut earlier = self.previous[t];
        for _ in 0..CHAIN {
            if earlier == u64::MAX || earlier < self.base || earlier >= position {
                break;
            }
            let period = (position - earlier) as usize;
            if period > WINDOW || 2 * period > t + 1 {
                break;
            }
            let start = t + 1 - 2 * period;
            let middle = t + 1 - period;
            if self.live[earlier as usize - self.base as usize] == last
                && self.window(start, middle) == self.window(middle, t + 1)
                && self.live[start..middle] == self.live[middle..=t]
            {
                let folded = self.make_loop(start, middle);
                self.truncate(start);
                return Some(folded);
            }
            earlier = self.previous[earlier as usize - self.base as usize];
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
                let hash = self.window(from, to);
                self.body_ids.insert(body.clone(), id);
                self.bodies.push((body, hash));
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

/// Greedy discovery of a whole sequence.
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
    use crate::compress::{description_len, expand};

    #[test]
    fn nested_loops_are_found_inner_first() {
        // 3 × (a, 4 × b, c), then d.
        let mut tokens = Vec::new();
        for _ in 0..3 {
            tokens.push(0);
            tokens.extend([1; 4]);
            tokens.push(2);
        }
        tokens.push(3);
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
        assert!(stats.peak_window < 16, "{stats:?}");
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
        assert!(compressor.stats().peak_window < 2 * WINDOW);
        assert!(compressor.stats().frozen >= WINDOW);
        assert_eq!(expand(&compressor.finish()), tokens);
    }
}
