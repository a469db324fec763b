//! Iterations that differ in structure every N-th time: takes the merged nest, gives a
//! nest whose main loop reads its iteration number (`loop 500 as i { ... if i % 20 ==
//! 19 { ... } }`) when that is much shorter.
//!
//! Exact loop discovery only folds iterations that are equal. A time-stepping code is
//! not like that: LAMMPS re-neighbours every 20 steps and prints thermodynamics every
//! 50, so its 500 steps have four kinds of step and the exact nest spells out one
//! period of 100 steps (hundreds of statements). This pass:
//!
//! 1. **flattens** the merged nest into its sequence of items (tokens and rank
//!    conditionals; loops whose count is the same on every rank are expanded), each
//!    item remembering the nest position it came from;
//! 2. **segments** the sequence into iterations at the occurrences of an anchor item
//!    (every k-th occurrence of one of the most frequent items; each candidate is
//!    tried); segments with the same items are one *variant*; iterations the prologue
//!    ends with go in; a first or last segment of its own kind goes to the prologue or
//!    epilogue. The best segmentation is then also cut at its other places (every
//!    iteration starting after one element of its body: a step that starts with one of
//!    two alternatives, a forward communication or a re-neighbouring exchange, is one
//!    iteration), and each cut is tried with the stretch of the prologue most like an
//!    iteration taken in as iteration 0 (a first step that does more: set-up output);
//! 3. **aligns** the variants into one body (longest common subsequence, most frequent
//!    variant first), each body element with the set of iterations that run it;
//! 4. writes each run of elements with the same set of iterations as code guarded by a
//!    condition on the iteration number (`i % p == r`, `i == k`, their negations, an
//!    `or` of two, `i < k`, `i >= k`); disjoint neighbours share one `if`/`else`; a set
//!    with no such condition is spread evenly by [`fold_approx`] (the skeletonizer's
//!    choice: `i % p == r` running as often as the application ran it, a comment saying
//!    both counts) and rejects the candidate in [`fold`]; there, a compute statement on
//!    such a set inside another guarded set runs on all of that set with the same total
//!    ([`Flat::dilute`]), and a spread condition heads no `if`/`else if` over iterations
//!    another member is written for ([`steals`]);
//! 5. nests each run again with exact loop discovery (loops that start with a
//!    completion that also follows them start after it).
//!
//! Without spread sets, the result runs the same items in the same order as the input
//! on every rank: each iteration runs exactly its variant. Statistics of a position
//! folded from several places are the merge of those places' statistics, each taken in
//! the share of its visits that land there, so every mean is kept. Candidates are
//! scored by counting statements: among those within half again the shortest, the ones
//! with the fewest spread sets and exceptions (single iterations inside the loop named
//! by `i == k`: a cut of two steps per iteration that names its odd ones is no more
//! exact than single steps spread); among those within a tenth of the shortest, the ones
//! whose iterations' times vary least (a time step takes about the same time each
//! time; other cuts give half or double steps); then the shortest, cut earliest. The
//! winner must save a fifth of the statements; its prologue and epilogue are folded
//! again the same way.
//!
//! [`coarsen`] then writes the minor phases of the top level (set-up, wrap-up) with
//! call sites and sizes set aside, so runs of calls of one kind fold into loops.

use std::collections::{BTreeMap, HashMap};

use super::nest::{Acc, MNode};
use super::tokens::{CollSize, Kind, Tok};
use crate::compress::{self, Algorithm, Node};

/// Flattened nests longer than this are not folded (time and memory stay bounded).
const MAX_ITEMS: usize = 1 << 20;
/// At least this many iterations for a folded loop.
const MIN_ITERATIONS: usize = 6;
/// At most this many kinds of iteration.
const MAX_VARIANTS: usize = 12;
/// Anchors tried: the most frequent items, each every k-th time for k up to this.
const ANCHORS: usize = 8;
const MAX_STRIDE: usize = 8;
/// The most frequent anchors are tried every k-th time up to [`MAX_STRIDE`] (a step
/// may make its most frequent call several times: the steps of LAMMPS's peptide
/// example, with bonds, SHAKE and long-range forces, fold at every sixth), the others
/// up to this.
const SHORT_STRIDE: usize = 2;
const LONG_STRIDE_ANCHORS: usize = 3;
/// Alignment tables larger than this (body × variant) reject the candidate.
const MAX_ALIGN_CELLS: usize = 1 << 22;
/// How deep prologues and epilogues are folded again.
const MAX_DEPTH: u32 = 3;
/// Iterations taken back from the prologue, at most.
const MAX_FRONT: usize = 4;
/// Other cuts of the best loop tried.
const MAX_RECUTS: usize = 24;

/// A set of iterations of a folded loop, as the condition written for it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Cond {
    Is(Atom),
    Not(Atom),
    Either(Atom, Atom),
    /// `i < k`
    Below(u64),
    /// `i >= k`
    From(u64),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Atom {
    /// `i % p == r`
    Every { p: u64, r: u64 },
    /// `i == k`
    At(u64),
}

impl Atom {
    fn contains(self, i: u64) -> bool {
        match self {
            Atom::Every { p, r } => i % p == r,
            Atom::At(k) => i == k,
        }
    }
}

impl Cond {
    /// Whether the condition names a single iteration other than the first and the
    /// last of `n` (an exception inside the loop).
    fn names_inner(&self, n: u64) -> bool {
        let inner = |a: &Atom| matches!(a, Atom::At(k) if *k > 0 && *k + 1 < n);
        match self {
            Cond::Is(a) | Cond::Not(a) => inner(a),
            Cond::Either(a, b) => inner(a) || inner(b),
            Cond::Below(_) | Cond::From(_) => false,
        }
    }

    pub fn contains(&self, i: u64) -> bool {
        match *self {
            Cond::Is(a) => a.contains(i),
            Cond::Not(a) => !a.contains(i),
            Cond::Either(a, b) => a.contains(i) || b.contains(i),
            Cond::Below(k) => i < k,
            Cond::From(k) => i >= k,
        }
    }
}

/// Gives every compute statement inside a loop that reads its iteration number
/// ([`MNode::Steps`]) as many visits, per rank, as the written program makes: the
/// iterations its conditions hold on times the counts of the loops around it. The
/// alignment can put a compute span where the program runs it more often than the
/// application did (LAMMPS traced with 4 ranks on 2 cores: the force computation of its
/// 26 re-neighbouring steps, 421 ms over 59 visits on rank 0, in a block that runs on
/// 470 of 475 iterations), and a statement writes the mean of a visit: run 470 times, it
/// would have tripled the rank's compute. Each rank's total is kept instead, spread over
/// the visits. Returns how many statements changed by more than 1 %.
pub(crate) fn keep_totals(nodes: &mut [MNode]) -> usize {
    let mut changed = 0;
    totals_in(nodes, &BTreeMap::new(), None, &mut changed);
    changed
}

/// Iterations that reach a node of the innermost step loop: the outer loops' times the
/// innermost's set.
fn reached(outer: u64, set: &[bool]) -> u64 {
    outer.saturating_mul(set.iter().filter(|x| **x).count() as u64)
}

/// The walk of [`keep_totals`]: `mult` the counts of the loops around, per rank, and
/// `steps` the enclosing step loops' iterations that reach here (the product of the
/// outer ones' and the innermost's set, by iteration number); `None` outside step loops.
fn totals_in(
    nodes: &mut [MNode],
    mult: &BTreeMap<u32, u64>,
    steps: Option<(u64, &[bool])>,
    changed: &mut usize,
) {
    for node in nodes {
        match node {
            MNode::Tok { tok, acc } => {
                let Some((outer, set)) = steps else { continue };
                if tok.kind != Kind::Compute {
                    continue;
                }
                let iterations = reached(outer, set);
                let mut moved = false;
                for (rank, a) in acc.iter_mut() {
                    let visits = iterations.saturating_mul(mult.get(rank).copied().unwrap_or(1));
                    if visits == 0 || visits == a.n || a.n == 0 {
                        continue;
                    }
                    moved |= (visits as f64 / a.n as f64 - 1.0).abs() > 0.01;
                    *a = a.revisited(visits);
                }
                *changed += usize::from(moved);
            }
            MNode::Loop { counts, body, .. } => {
                let inner: BTreeMap<u32, u64> = counts
                    .iter()
                    .map(|(r, c)| (*r, c.saturating_mul(mult.get(r).copied().unwrap_or(1))))
                    .collect();
                totals_in(body, &inner, steps, changed);
            }
            // A task loop's visits are the tasks each rank took: as recorded.
            MNode::While { .. } => {}
            MNode::If { branches } => {
                for (_, body) in branches {
                    totals_in(body, mult, steps, changed);
                }
            }
            MNode::Steps { count, body } => {
                let outer = steps.map_or(1, |(o, set)| reached(o, set));
                let all = vec![true; usize::try_from(*count).unwrap_or(0)];
                totals_in(body, mult, Some((outer, &all)), changed);
            }
            MNode::When {
                cond,
                then,
                otherwise,
                ..
            } => {
                let Some((outer, set)) = steps else {
                    totals_in(then, mult, None, changed);
                    totals_in(otherwise, mult, None, changed);
                    continue;
                };
                let holds: Vec<bool> = (0..set.len() as u64).map(|i| cond.contains(i)).collect();
                let yes: Vec<bool> = set.iter().zip(&holds).map(|(a, h)| *a && *h).collect();
                let no: Vec<bool> = set.iter().zip(&holds).map(|(a, h)| *a && !*h).collect();
                totals_in(then, mult, Some((outer, &yes)), changed);
                totals_in(otherwise, mult, Some((outer, &no)), changed);
            }
        }
    }
}

/// Folds `nodes` when that saves statements; `None` leaves them as they are.
/// Every iteration runs exactly what the application's iteration of that number did.
#[cfg(test)]
pub(crate) fn fold(nodes: &[MNode]) -> Option<Vec<MNode>> {
    fold_at(nodes, 0, false)
}

/// As [`fold`], and code the application ran on iterations that follow no pattern
/// (LAMMPS re-neighbours when atoms have moved far enough: on 23 of 500 steps, at
/// data-dependent times) runs as often, evenly spread: `i % p == r` with `p` and `r`
/// chosen so that it runs the recorded number of times or as near as the count allows.
/// The [`MNode::When`] says how often it really ran.
pub(crate) fn fold_approx(nodes: &[MNode]) -> Option<Vec<MNode>> {
    fold_at(nodes, 0, true)
}

fn fold_at(nodes: &[MNode], depth: u32, approx: bool) -> Option<Vec<MNode>> {
    if depth >= MAX_DEPTH || expanded_len(nodes) > MAX_ITEMS as u64 {
        return None;
    }
    let mut flat = Flat {
        approx,
        ..Flat::default()
    };
    flat.flatten(nodes);
    let before = size(nodes);
    // (statements, spread of the iterations' times, spread sets, candidate) of each
    // candidate that folds.
    let mut folded: Vec<(usize, f64, usize, usize)> = Vec::new();
    // The main loop (depth 0) is sought with long strides and other cuts; prologues and
    // epilogues folded again with the short ones (set-up and wrap-up phases: time).
    let mut cands = flat.candidates(if depth == 0 { MAX_STRIDE } else { SHORT_STRIDE });
    for (index, cand) in cands.iter().enumerate() {
        let Some(built) = flat.build(cand, None) else {
            continue;
        };
        let n = built.size;
        folded.push((n, built.cv, built.spread, index));
    }
    // The best cuts and the same loops cut at their other places, each also with the
    // step before it taken in: a cut that comes second as it stands may win once its
    // first step is taken in (LAMMPS's step cut at its reverse communication, against
    // the same steps cut at the forward one, where a re-neighbouring step goes with
    // the step before it).
    if depth == 0 {
        let mut rest = folded.clone();
        let mut best_cuts: Vec<usize> = Vec::new();
        while best_cuts.len() < RECUT_BEST {
            let Some((_, next)) = choose(&rest, &cands) else {
                break;
            };
            rest.retain(|f| f.3 != next);
            // Only the same loop cut elsewhere: about as many iterations as the best
            // (a V-cycle's levels are another loop than its cycles).
            let like_best = best_cuts.first().is_none_or(|&b| {
                let (n, m) = (
                    cands[b].bounds.len() as f64,
                    cands[next].bounds.len() as f64,
                );
                m <= n * SAME_LOOP && n <= m * SAME_LOOP
            });
            if like_best {
                best_cuts.push(next);
            }
        }
        for best in best_cuts {
            let best = cands[best].clone();
            let Some(lay) = flat.layout(&best) else {
                continue;
            };
            let mut more: Vec<(Cand, Option<Layout>)> = Vec::new();
            more.extend(flat.absorb_first(&lay).map(|c| (c, None)));
            for cand in flat.recuts(&lay, &best) {
                let lay = flat.layout(&cand);
                let first = lay.as_ref().and_then(|l| flat.absorb_first(l));
                more.push((cand, lay));
                more.extend(first.map(|c| (c, None)));
            }
            for (cand, lay) in more {
                let lay = lay.or_else(|| flat.layout(&cand));
                if let Some(built) = lay.and_then(|l| flat.build_from(l, None)) {
                    folded.push((built.size, built.cv, built.spread, cands.len()));
                }
                cands.push(cand);
            }
        }
    }
    // A fold the checker would warn about (a request posted again while it may be
    // pending, where the iterations' runs split a request from its completion) gives
    // way to the next best, when the nest did not have such requests before.
    let must_be_sound = requests_sound(nodes);
    for _ in 0..MAX_UNSOUND {
        let (n, cand) = choose(&folded, &cands)?;
        if n * 5 > before * 4 {
            return None;
        }
        // The prologue and epilogue of the winner are folded in turn.
        let nodes = flat.build(cands.get(cand)?, Some(depth)).map(|b| b.nodes)?;
        if !must_be_sound || requests_sound(&nodes) {
            return Some(nodes);
        }
        folded.retain(|f| f.3 != cand);
    }
    None
}

/// The best cuts of the main loop that are also tried cut at their other places...
const RECUT_BEST: usize = 2;
/// ... where their iteration counts are within this factor of the best's.
const SAME_LOOP: f64 = 1.25;

/// Folds of one nest tried before giving up when they would leave requests unsound.
const MAX_UNSOUND: usize = 8;

/// Of the candidates that fold, (statements, spread of the iterations' times, spread
/// sets, candidate), the one to take: its statements and index.
fn choose(folded: &[(usize, f64, usize, usize)], cands: &[Cand]) -> Option<(usize, usize)> {
    let mut folded = folded.to_vec();
    // Within half again the shortest ...
    let least = folded.iter().map(|f| f.0).min()?;
    folded.retain(|f| f.0 * 2 <= least * 3);
    // ... the folds that spread the fewest sets of iterations (each is an
    // approximation) or make exceptions of single iterations inside the loop (a cut
    // that avoids spreading by taking two steps per iteration and naming the odd ones
    // is no more exact than the steps spread) ...
    let fewest = folded.iter().map(|f| f.2).min()?;
    folded.retain(|f| f.2 == fewest);
    // ... then, as the iterations of a time-stepping loop take about the same time
    // each, among the shortest of those (within a tenth) the ones whose iterations vary
    // least in time (cutting at another place gives half steps or double steps) ...
    let least = folded.iter().map(|f| f.0).min()?;
    folded.retain(|f| f.0 * 10 <= least * 11);
    let steady = folded.iter().map(|f| f.1).fold(f64::INFINITY, f64::min);
    // ... and the shortest of those about as steady, cut at the earliest place.
    let (n, _, _, cand) = folded
        .into_iter()
        .filter(|f| f.1 <= steady * 1.25 + 0.05)
        .min_by_key(|f| (f.0, cands[f.3].bounds[0], f.3))?;
    Some((n, cand))
}

/// Whether no request of `nodes` is posted while it may still be pending, and none is
/// completed unless it may be pending (as `check`'s request analysis reads them).
fn requests_sound(nodes: &[MNode]) -> bool {
    super::nest::pending_after(nodes, Default::default()).is_some()
}

/// Statements a nest becomes (one per token, loop and branch), for comparisons.
pub(crate) fn size(nodes: &[MNode]) -> usize {
    nodes
        .iter()
        .map(|n| match n {
            MNode::Tok { .. } => 1,
            MNode::Loop { body, .. } | MNode::Steps { body, .. } => 1 + size(body),
            // Its head is the `while` statement.
            MNode::While { body, .. } => size(body),
            MNode::If { branches } => 1 + branches.iter().map(|(_, b)| size(b)).sum::<usize>(),
            MNode::When {
                then, otherwise, ..
            } => 1 + size(then) + size(otherwise),
        })
        .sum()
}

/// The number of items the nest flattens to (saturating).
fn expanded_len(nodes: &[MNode]) -> u64 {
    nodes
        .iter()
        .map(|n| match n {
            MNode::Loop { counts, body, .. } => match uniform(counts) {
                Some(c) => c.saturating_mul(expanded_len(body)),
                None => 1,
            },
            _ => 1,
        })
        .fold(0u64, u64::saturating_add)
}

/// The count of a loop when every rank runs it as often.
fn uniform(counts: &BTreeMap<u32, u64>) -> Option<u64> {
    let mut values = counts.values();
    let first = *values.next()?;
    values.all(|c| *c == first).then_some(first)
}

/// What an item is, for equality: a token, or the shape of a node kept whole.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    Tok(Tok),
    Shape(String),
}

/// The flattened nest.
#[derive(Default)]
struct Flat<'a> {
    /// (symbol, origin) of each item.
    items: Vec<(u32, u32)>,
    /// The nest positions items come from, and how many items each gave.
    origins: Vec<&'a MNode>,
    copies: Vec<u64>,
    origin_of: HashMap<*const MNode, u32>,
    symbols: HashMap<Key, u32>,
    /// An origin of each symbol (what the symbol is), and the symbol of each origin.
    example: Vec<u32>,
    sym_of: Vec<u32>,
    /// Whether sets of iterations without a pattern are spread evenly ([`fold_approx`]).
    approx: bool,
}

/// The condition of a run of body elements, and for a spread set how many iterations
/// ran it in the application and how many run it here.
type Guard = (Cond, Option<(u64, u64)>);

/// A run of body elements with the same iterations: its condition (none: every
/// iteration) and its elements.
type Run = (Option<Guard>, Vec<usize>);

/// A candidate's fold: the nest, how much its iterations' times vary (coefficient of
/// variation), and how many sets of iterations it spread evenly or names by single
/// iterations inside the loop.
struct Built {
    /// Empty when only scored.
    nodes: Vec<MNode>,
    /// Statements of the fold.
    size: usize,
    cv: f64,
    spread: usize,
}

/// A segmentation's iterations, variants and aligned body ([`Flat::layout`]).
struct Layout {
    bounds: Vec<usize>,
    /// The variant of each iteration.
    of: Vec<u32>,
    /// A range of the items of each variant.
    reps: Vec<std::ops::Range<usize>>,
    body: Vec<Elem>,
}

/// One way to cut the items into iterations.
#[derive(Clone)]
struct Cand {
    /// Item index where each iteration starts, and where the last one ends.
    bounds: Vec<usize>,
    /// The first iteration stays in the loop even when it is of its own kind (an
    /// application's first step that does a little more, [`Flat::absorb_first`]).
    keep_first: bool,
}

impl<'a> Flat<'a> {
    fn flatten(&mut self, nodes: &'a [MNode]) {
        for node in nodes {
            match node {
                MNode::Loop { counts, body, .. } => match uniform(counts) {
                    Some(c) => (0..c).for_each(|_| self.flatten(body)),
                    None => self.push(node),
                },
                _ => self.push(node),
            }
        }
    }

    fn push(&mut self, node: &'a MNode) {
        // A node met again (a loop's body expanded) is the same origin and symbol.
        if let Some(&origin) = self.origin_of.get(&(node as *const MNode)) {
            self.copies[origin as usize] += 1;
            let sym = self.sym_of[origin as usize];
            self.items.push((sym, origin));
            return;
        }
        let origin = self.origins.len() as u32;
        self.origins.push(node);
        self.copies.push(1);
        self.origin_of.insert(node as *const MNode, origin);
        let key = match node {
            MNode::Tok { tok, .. } => Key::Tok(tok.clone()),
            other => {
                let mut s = String::new();
                shape(other, &mut s);
                Key::Shape(s)
            }
        };
        let next = self.symbols.len() as u32;
        let sym = *self.symbols.entry(key).or_insert(next);
        if sym == next {
            self.example.push(origin);
        }
        self.sym_of.push(sym);
        self.items.push((sym, origin));
    }

    /// Segmentations worth trying, each with at least [`MIN_ITERATIONS`] iterations.
    fn candidates(&self, max_stride: usize) -> Vec<Cand> {
        let mut positions: Vec<Vec<usize>> = vec![Vec::new(); self.symbols.len()];
        for (i, (sym, _)) in self.items.iter().enumerate() {
            positions[*sym as usize].push(i);
        }
        let mut order: Vec<u32> = (0..positions.len() as u32)
            .filter(|s| positions[*s as usize].len() >= MIN_ITERATIONS)
            .collect();
        order.sort_by_key(|s| (std::cmp::Reverse(positions[*s as usize].len()), *s));
        let mut out = Vec::new();
        for (a, &s) in order.iter().take(ANCHORS).enumerate() {
            let at = &positions[s as usize];
            let strides = if a < LONG_STRIDE_ANCHORS {
                max_stride
            } else {
                SHORT_STRIDE
            };
            for k in 1..=strides {
                for phase in 0..k {
                    let mut bounds: Vec<usize> =
                        at.iter().skip(phase).step_by(k).copied().collect();
                    if bounds.len() < MIN_ITERATIONS {
                        continue;
                    }
                    bounds.push(self.items.len());
                    out.push(Cand {
                        bounds,
                        keep_first: false,
                    });
                }
            }
        }
        out
    }

    fn syms(&self, range: std::ops::Range<usize>) -> impl Iterator<Item = u32> + '_ {
        self.items[range].iter().map(|(s, _)| *s)
    }

    /// How one segmentation cuts the items: its iterations (bounds after the
    /// prologue and epilogue are set apart), the variant of each, a representative
    /// range of each variant, and the aligned body.
    fn layout(&self, cand: &Cand) -> Option<Layout> {
        let mut bounds = cand.bounds.clone();
        // Variants of the segments.
        let variants_of = |bounds: &[usize]| -> (Vec<u32>, Vec<std::ops::Range<usize>>) {
            let mut index: HashMap<Vec<u32>, u32> = HashMap::new();
            let mut reps = Vec::new();
            let mut of = Vec::new();
            for w in bounds.windows(2) {
                let next = reps.len() as u32;
                let v = *index.entry(self.syms(w[0]..w[1]).collect()).or_insert(next);
                if v == next {
                    reps.push(w[0]..w[1]);
                }
                of.push(v);
            }
            (of, reps)
        };
        // The last segment runs to the end of the items: cut it after the longest
        // variant it starts with; what follows is the epilogue.
        let n = bounds.len() - 1;
        if n < 2 {
            return None;
        }
        {
            let (_, reps) = variants_of(&bounds[..n]);
            let last = bounds[n - 1]..bounds[n];
            let mut best = 0;
            for r in &reps {
                let len = r.len();
                if len <= last.len()
                    && len > best
                    && self
                        .syms(r.clone())
                        .eq(self.syms(last.start..last.start + len))
                {
                    best = len;
                }
            }
            if best > 0 {
                bounds[n] = last.start + best;
            } else {
                bounds.pop();
            }
        }
        // Iterations the prologue ends with (the longest variant each time) go into
        // the loop too: a cut that starts iterations after the application's first
        // step finds that step before its first bound.
        if bounds.len() >= 2 {
            let (_, reps) = variants_of(&bounds);
            for _ in 0..MAX_FRONT {
                let start = bounds[0];
                let best = reps
                    .iter()
                    .filter(|r| {
                        r.len() <= start
                            && self
                                .syms(start - r.len()..start)
                                .eq(self.syms((*r).clone()))
                    })
                    .map(|r| r.len())
                    .max();
                match best {
                    Some(len) if len > 0 => bounds.insert(0, start - len),
                    _ => break,
                }
            }
        }
        // A first or last iteration of its own kind goes out of the loop.
        loop {
            let (of, _) = variants_of(&bounds);
            let count = |v: u32| of.iter().filter(|x| **x == v).count();
            if of.len() > MIN_ITERATIONS && count(of[0]) == 1 && !cand.keep_first {
                bounds.remove(0);
            } else if of.len() > MIN_ITERATIONS && count(of[of.len() - 1]) == 1 {
                bounds.pop();
            } else {
                break;
            }
        }
        let (of, reps) = variants_of(&bounds);
        let n = of.len();
        if n < MIN_ITERATIONS || reps.len() > MAX_VARIANTS || reps.len() * 3 > n + 2 {
            return None;
        }
        // Variants by frequency (then first appearance).
        let mut freq = vec![0usize; reps.len()];
        for v in &of {
            freq[*v as usize] += 1;
        }
        let mut order: Vec<usize> = (0..reps.len()).collect();
        order.sort_by_key(|v| (std::cmp::Reverse(freq[*v]), *v));
        let iters_of = |v: usize| -> Vec<bool> { of.iter().map(|x| *x as usize == v).collect() };
        // Progressive alignment: elements (symbol, iterations, (variant, position)s).
        let mut body: Vec<Elem> = Vec::new();
        for &v in &order {
            let syms: Vec<u32> = self.syms(reps[v].clone()).collect();
            let iters = iters_of(v);
            if body.is_empty() {
                body = syms
                    .iter()
                    .enumerate()
                    .map(|(p, s)| Elem {
                        sym: *s,
                        iters: iters.clone(),
                        members: vec![(v, p)],
                    })
                    .collect();
                continue;
            }
            body = align(body, &syms, v, &iters)?;
        }
        Some(Layout {
            bounds,
            of,
            reps,
            body,
        })
    }

    /// The same loop cut at other places: for each place between two elements of the
    /// body, every iteration starts at its first item after that place (the items
    /// before it end the previous iteration). A time step that starts with one of
    /// several alternatives (LAMMPS: a forward communication, or an exchange and
    /// borders on re-neighbouring steps) then is one iteration, and the steps the
    /// first cut left before and after the loop (its first and last) go in.
    fn recuts(&self, lay: &Layout, cand: &Cand) -> Vec<Cand> {
        let mut slot: Vec<Vec<usize>> = lay.reps.iter().map(|r| vec![0; r.len()]).collect();
        for (e, elem) in lay.body.iter().enumerate() {
            for &(v, p) in &elem.members {
                slot[v][p] = e;
            }
        }
        let mut out: Vec<Cand> = Vec::new();
        let m = lay.body.len();
        for r in 1..m {
            // Only where the set of iterations changes (inside a run every cut gives
            // the same kinds of iteration, shifted).
            if lay.body[r].iters == lay.body[r - 1].iters {
                continue;
            }
            let mut bounds: Vec<usize> = lay
                .bounds
                .windows(2)
                .zip(&lay.of)
                .map(|(w, v)| w[0] + slot[*v as usize].iter().filter(|e| **e < r).count())
                .collect();
            bounds.dedup();
            if bounds.len() < MIN_ITERATIONS {
                continue;
            }
            bounds.push(self.items.len());
            if out.iter().all(|c| c.bounds != bounds) && bounds != cand.bounds {
                out.push(Cand {
                    bounds,
                    keep_first: false,
                });
            }
            if out.len() >= MAX_RECUTS {
                break;
            }
        }
        out
    }

    /// The loop of `cand` with the stretch of the prologue just before it that is most
    /// like an iteration taken in as its first iteration, when most of that stretch is
    /// what the body does: an application's first step often does what every step does
    /// and a little more (set-up output, a first neighbour list), which then runs under
    /// `i == 0` instead of spelling out the whole step before the loop. The stretch is
    /// the suffix of the prologue whose longest common subsequence with the body, less
    /// what it leaves over, is largest.
    fn absorb_first(&self, lay: &Layout) -> Option<Cand> {
        let start = *lay.bounds.first()?;
        let body: Vec<u32> = lay.body.iter().map(|e| e.sym).collect();
        let longest = lay.reps.iter().map(|r| r.len()).max()?;
        let l_max = start.min(2 * longest);
        let m = body.len();
        if l_max == 0 || (l_max + 1).saturating_mul(m + 1) > MAX_ALIGN_CELLS {
            return None;
        }
        // dp[l][k]: the longest common subsequence of the prologue's last `l` items
        // and the body's last `k` elements.
        let w = m + 1;
        let mut dp = vec![0u32; (l_max + 1) * w];
        for l in 1..=l_max {
            let sym = self.items[start - l].0;
            for k in 1..=m {
                dp[l * w + k] = if body[m - k] == sym {
                    dp[(l - 1) * w + k - 1] + 1
                } else {
                    dp[(l - 1) * w + k].max(dp[l * w + k - 1])
                };
            }
        }
        let (gain, l) = (1..=l_max)
            .map(|l| (2 * i64::from(dp[l * w + m]) - l as i64, l))
            .max_by_key(|(g, l)| (*g, std::cmp::Reverse(*l)))?;
        if gain <= 0 {
            return None;
        }
        let mut bounds = lay.bounds.clone();
        bounds.insert(0, start - l);
        if let Some(last) = bounds.last_mut() {
            *last = self.items.len();
        }
        Some(Cand {
            bounds,
            keep_first: true,
        })
    }

    /// The folded nest for one segmentation, or `None` when it does not fold.
    /// With `depth`, the prologue and epilogue are folded again at the next depth.
    fn build(&self, cand: &Cand, depth: Option<u32>) -> Option<Built> {
        self.build_from(self.layout(cand)?, depth)
    }

    /// [`Flat::build`] of a segmentation already laid out.
    fn build_from(&self, lay: Layout, depth: Option<u32>) -> Option<Built> {
        let Layout {
            bounds,
            of,
            reps,
            mut body,
        } = lay;
        let n = of.len();
        let diluted = if self.approx {
            self.dilute(&mut body)
        } else {
            BTreeMap::new()
        };
        // Scoring (no depth) counts statements without building the nest.
        let score = depth.is_none();
        // Contributions of each item to its element (for the nest's statistics).
        let mut contrib: Vec<BTreeMap<u32, u64>> = vec![BTreeMap::new(); body.len()];
        if !score {
            let mut slot: Vec<Vec<usize>> = reps.iter().map(|r| vec![0; r.len()]).collect();
            for (e, elem) in body.iter().enumerate() {
                for &(v, p) in &elem.members {
                    slot[v][p] = e;
                }
            }
            for (j, w) in bounds.windows(2).enumerate() {
                let v = of[j] as usize;
                for (p, (_, origin)) in self.items[w[0]..w[1]].iter().enumerate() {
                    *contrib[slot[v][p]].entry(*origin).or_default() += 1;
                }
            }
        }
        // Runs of elements with the same iterations, with their conditions.
        let mut runs: Vec<Run> = Vec::new();
        let mut spread: Vec<(Vec<bool>, Cond)> = Vec::new();
        let mut exceptions = 0;
        let mut e = 0;
        while e < body.len() {
            let mut end = e + 1;
            while end < body.len() && body[end].iters == body[e].iters {
                end += 1;
            }
            let cond = if body[e].iters.iter().all(|x| *x) {
                None
            } else {
                let set = &body[e].iters;
                match condition(set) {
                    Some(c) => {
                        exceptions += usize::from(c.names_inner(set.len() as u64));
                        Some((c, None))
                    }
                    None if self.approx => {
                        let k = set.iter().filter(|x| **x).count() as u64;
                        let c = evenly(set, &mut spread)?;
                        let written = (0..set.len() as u64).filter(|i| c.contains(*i)).count();
                        Some((c, Some((k, written as u64))))
                    }
                    None => return None,
                }
            };
            runs.push((cond, (e..end).collect()));
            e = end;
        }
        // The sets each run's condition writes (a spread set's differs from the set).
        let written: Vec<Vec<bool>> = runs
            .iter()
            .map(|(cond, _)| match cond {
                Some((c, _)) => (0..n as u64).map(|i| c.contains(i)).collect(),
                None => vec![true; n],
            })
            .collect();
        let elem_node = |e: usize| {
            let node = self.element(body[e].sym, &contrib[e]);
            match diluted.get(&e) {
                Some(&g) => diluted_node(&node, g),
                None => node,
            }
        };
        let nest_of = |elems: &[usize]| -> Vec<MNode> {
            let syms: Vec<u32> = elems.iter().map(|e| body[*e].sym).collect();
            let nodes: Vec<MNode> = elems.iter().map(|e| elem_node(*e)).collect();
            renest(&syms, nodes)
        };
        let size_of = |elems: &[usize]| -> usize {
            let syms: Vec<u32> = elems.iter().map(|e| body[*e].sym).collect();
            self.nest_size(&syms)
        };
        let mut steps: Vec<MNode> = Vec::new();
        let mut steps_size = 1;
        let mut r = 0;
        while r < runs.len() {
            if runs[r].0.is_none() {
                if score {
                    steps_size += size_of(&runs[r].1);
                } else {
                    steps.extend(nest_of(&runs[r].1));
                }
                r += 1;
                continue;
            }
            // A run whose iterations are exactly those of its guarded neighbours on one
            // side, which are disjoint, holds them: `if C { if A {..} else {..B}; C.. }`
            // (A posts a request that C completes: the checker then sees both under C).
            if let Some((first, last, parent)) = holder(&runs, &body, &written, r) {
                let inner: Vec<usize> = (first..last).filter(|k| *k != parent).collect();
                if score {
                    steps_size += 1
                        + size_of(&runs[parent].1)
                        + inner
                            .iter()
                            .map(|k| 1 + size_of(&runs[*k].1))
                            .sum::<usize>();
                } else if let Some((cond, recorded)) = &runs[parent].0 {
                    // Within the parent's iterations the others cover all: the last is
                    // the `else`.
                    let mut chain = nest_of(&runs[inner[inner.len() - 1]].1);
                    for &k in inner[..inner.len() - 1].iter().rev() {
                        if let Some((c, rec)) = &runs[k].0 {
                            chain = vec![MNode::When {
                                cond: c.clone(),
                                then: nest_of(&runs[k].1),
                                otherwise: chain,
                                recorded: *rec,
                            }];
                        }
                    }
                    let own = nest_of(&runs[parent].1);
                    let then = if parent == first {
                        own.into_iter().chain(chain).collect()
                    } else {
                        chain.into_iter().chain(own).collect()
                    };
                    steps.push(MNode::When {
                        cond: cond.clone(),
                        then,
                        otherwise: Vec::new(),
                        recorded: *recorded,
                    });
                }
                r = last;
                continue;
            }
            // Neighbour runs on disjoint iterations are one `if`/`else if` chain (at most
            // one of them runs in an iteration, and the checker sees that a request
            // posted in one branch is not posted again in another); when together they
            // cover every iteration, the last is the `else`.
            let mut union = body[runs[r].1[0]].iters.clone();
            let mut end = r + 1;
            while let Some((Some(_), elems)) = runs.get(end) {
                let set = &body[elems[0]].iters;
                if set.iter().zip(&union).any(|(a, b)| *a && *b) {
                    break;
                }
                union.iter_mut().zip(set).for_each(|(u, s)| *u |= *s);
                end += 1;
            }
            let mut complete = union.iter().all(|x| *x);
            // A spread condition before the `else` that would take another's
            // iterations ends the chain before it (or, first, stands alone).
            loop {
                let group: Vec<usize> = (r..end).collect();
                let before_else = if complete && end - r >= 2 {
                    end - 1
                } else {
                    end
                };
                let Some(k) = (r..before_else).find(|&k| steals(&runs, &written, k, &group)) else {
                    break;
                };
                end = k.max(r + 1);
                complete = (0..n).all(|i| (r..end).any(|k| body[runs[k].1[0]].iters[i]));
            }
            if score {
                steps_size += runs[r..end]
                    .iter()
                    .map(|(_, elems)| 1 + size_of(elems))
                    .sum::<usize>();
            } else {
                let (guarded, mut otherwise) = if complete && end - r >= 2 {
                    (r..end - 1, nest_of(&runs[end - 1].1))
                } else {
                    (r..end, Vec::new())
                };
                for k in guarded.rev() {
                    let Some((cond, recorded)) = &runs[k].0 else {
                        continue;
                    };
                    otherwise = vec![MNode::When {
                        cond: cond.clone(),
                        then: nest_of(&runs[k].1),
                        otherwise,
                        recorded: *recorded,
                    }];
                }
                steps.extend(otherwise);
            }
            r = end;
        }
        // Prologue, loop, epilogue.
        let start = bounds[0];
        let end = bounds[bounds.len() - 1];
        let mut out = Vec::new();
        let size = if score {
            let syms = |r: std::ops::Range<usize>| self.syms(r).collect::<Vec<u32>>();
            self.nest_size(&syms(0..start))
                + steps_size
                + self.nest_size(&syms(end..self.items.len()))
        } else {
            out = self.part(0..start, depth);
            out.push(MNode::Steps {
                count: n as u64,
                body: steps,
            });
            out.extend(self.part(end..self.items.len(), depth));
            size(&out)
        };
        // How much the iterations' times vary (coefficient of variation).
        let times: Vec<f64> = bounds
            .windows(2)
            .map(|w| {
                self.items[w[0]..w[1]]
                    .iter()
                    .map(|(_, o)| self.item_ns(*o))
                    .sum()
            })
            .collect();
        let mean = times.iter().sum::<f64>() / times.len() as f64;
        let var = times.iter().map(|t| (t - mean) * (t - mean)).sum::<f64>() / times.len() as f64;
        let cv = if mean > 0.0 { var.sqrt() / mean } else { 0.0 };
        Some(Built {
            nodes: out,
            size,
            cv,
            spread: spread.len() + exceptions,
        })
    }

    /// The statements exact loop discovery makes of `syms` (items of this nest).
    fn nest_size(&self, syms: &[u32]) -> usize {
        let of = |s: u32| match self.example.get(s as usize) {
            Some(&o) => size(std::slice::from_ref(self.origins[o as usize])),
            None => 1,
        };
        discovered_size(syms, &of)
    }

    /// The mean time (compute before it and MPI) of one visit of an origin, over ranks.
    fn item_ns(&self, origin: u32) -> f64 {
        match self.origins[origin as usize] {
            MNode::Tok { acc, .. } => {
                let n: u64 = acc.values().map(|a| a.n).sum();
                let t: f64 = acc.values().map(|a| a.sum_ns + a.mpi_ns).sum();
                if n > 0 {
                    t / n as f64
                } else {
                    0.0
                }
            }
            _ => 0.0,
        }
    }

    /// Items outside the folded loop, nested again (and folded if that pays).
    fn part(&self, range: std::ops::Range<usize>, depth: Option<u32>) -> Vec<MNode> {
        let syms: Vec<u32> = self.syms(range.clone()).collect();
        let nodes: Vec<MNode> = self.items[range]
            .iter()
            .map(|(sym, origin)| self.element(*sym, &[(*origin, 1)].into()))
            .collect();
        let nested = renest(&syms, nodes);
        match depth {
            Some(d) => fold_at(&nested, d + 1, self.approx).unwrap_or(nested),
            None => nested,
        }
    }

    /// Compute the application did on a set of iterations with no pattern inside the
    /// iterations of another guarded element (the compute before a loop of steps, kept
    /// apart after most re-neighbouring steps but not after those that print, so on 20
    /// of LAMMPS's 26 re-neighbouring steps): spread evenly over all iterations it would
    /// run on others' steps and take a neighbour's place in an `if`/`else`; instead it
    /// runs on every iteration of the smallest such set, its time spread over them (the
    /// same total). Returns, per element so moved, how many times as many iterations it
    /// runs on.
    fn dilute(&self, body: &mut [Elem]) -> BTreeMap<usize, f64> {
        let count = |set: &[bool]| set.iter().filter(|x| **x).count();
        let is_compute = |sym: u32| {
            let origin = self.example.get(sym as usize).copied();
            matches!(
                origin.and_then(|o| self.origins.get(o as usize)),
                Some(MNode::Tok { tok, .. }) if tok.kind == Kind::Compute
            )
        };
        let mut out = BTreeMap::new();
        let mut moved: Vec<(usize, Vec<bool>)> = Vec::new();
        for (e, elem) in body.iter().enumerate() {
            let k = count(&elem.iters);
            if k == 0 || k == elem.iters.len() || !is_compute(elem.sym) {
                continue;
            }
            if condition(&elem.iters).is_some() {
                continue;
            }
            let host = body
                .iter()
                .filter(|o| {
                    let m = count(&o.iters);
                    m > k
                        && m < o.iters.len()
                        && !is_compute(o.sym)
                        && elem.iters.iter().zip(&o.iters).all(|(a, b)| !*a || *b)
                })
                .min_by_key(|o| count(&o.iters));
            if let Some(host) = host {
                out.insert(e, count(&host.iters) as f64 / k as f64);
                moved.push((e, host.iters.clone()));
            }
        }
        for (e, iters) in moved {
            body[e].iters = iters;
        }
        out
    }

    /// The node of one element: its symbol's node with the statistics of the items it
    /// stands for, each origin's in the share of its copies.
    fn element(&self, sym: u32, contrib: &BTreeMap<u32, u64>) -> MNode {
        let mut node: Option<MNode> = None;
        for (&origin, &copies) in contrib {
            let f = copies as f64 / self.copies[origin as usize].max(1) as f64;
            let part = scaled(self.origins[origin as usize], f);
            match &mut node {
                None => node = Some(part),
                Some(n) => add(n, &part),
            }
        }
        node.unwrap_or_else(|| scaled(self.origins[self.example[sym as usize] as usize], 0.0))
    }
}

/// For the guarded run at `r`: a window `first..last` of guarded runs starting at
/// `r` in which one run (the first or the last: `parent`) runs on exactly the
/// iterations the others run on, and the others are disjoint and at least two; none
/// of the others but the last (the `else`) has a spread condition that would take
/// another's iterations ([`steals`]).
fn holder(
    runs: &[Run],
    body: &[Elem],
    written: &[Vec<bool>],
    r: usize,
) -> Option<(usize, usize, usize)> {
    let set = |k: usize| &body[runs[k].1[0]].iters;
    let guarded = |k: usize| runs.get(k).is_some_and(|run| run.0.is_some());
    let max = (r + 9).min(runs.len());
    for last in (r + 3..=max).rev() {
        if !(r..last).all(guarded) {
            continue;
        }
        for parent in [r, last - 1] {
            let others: Vec<usize> = (r..last).filter(|k| *k != parent).collect();
            let mut union = vec![false; set(parent).len()];
            let mut disjoint = true;
            for &k in &others {
                for (u, x) in union.iter_mut().zip(set(k)) {
                    disjoint &= !(*u && *x);
                    *u |= *x;
                }
            }
            let (_, before_else) = others.split_last()?;
            let sound = before_else
                .iter()
                .all(|&k| !steals(runs, written, k, &others));
            if disjoint && sound && union == *set(parent) {
                return Some((r, last, parent));
            }
        }
    }
    None
}

/// Whether run `k`'s condition spreads a set without a pattern and writes iterations
/// another of `group` is written for (a spread set and its complement are written as
/// each other's negation and do not): in an `if`/`else if` chain it would take them from it
/// (LAMMPS's forward communication lost on the steps where a compute set apart on 20
/// of the 26 re-neighbouring steps was spread to, `i % 25 == 5`).
fn steals(runs: &[Run], written: &[Vec<bool>], k: usize, group: &[usize]) -> bool {
    if !matches!(runs[k].0, Some((_, Some(_)))) {
        return false;
    }
    group
        .iter()
        .filter(|&&o| o != k)
        .any(|&o| written[k].iter().zip(&written[o]).any(|(a, b)| *a && *b))
}

/// An element of an aligned body.
struct Elem {
    sym: u32,
    /// Whether each iteration runs it.
    iters: Vec<bool>,
    /// (variant, position in the variant) it stands for.
    members: Vec<(usize, usize)>,
}

/// Aligns variant `v` (its symbols `syms`, run on `iters`) with the body: the longest
/// common subsequence is shared, the rest inserted.
fn align(body: Vec<Elem>, syms: &[u32], v: usize, iters: &[bool]) -> Option<Vec<Elem>> {
    let (b, m) = (body.len(), syms.len());
    if (b + 1).saturating_mul(m + 1) > MAX_ALIGN_CELLS {
        return None;
    }
    let w = m + 1;
    let mut dp = vec![0u32; (b + 1) * w];
    for i in (0..b).rev() {
        for j in (0..m).rev() {
            dp[i * w + j] = if body[i].sym == syms[j] {
                dp[(i + 1) * w + j + 1] + 1
            } else {
                dp[(i + 1) * w + j].max(dp[i * w + j + 1])
            };
        }
    }
    let mut out = Vec::with_capacity(b + m);
    let mut body = body.into_iter().map(Some).collect::<Vec<_>>();
    let (mut i, mut j) = (0, 0);
    let take = |body: &mut Vec<Option<Elem>>, i: usize| body[i].take();
    while i < b || j < m {
        if i < b
            && j < m
            && body[i].as_ref().is_some_and(|e| e.sym == syms[j])
            && dp[i * w + j] == dp[(i + 1) * w + j + 1] + 1
        {
            let mut e = take(&mut body, i)?;
            for (x, y) in e.iters.iter_mut().zip(iters) {
                *x |= *y;
            }
            e.members.push((v, j));
            out.push(e);
            i += 1;
            j += 1;
        } else if j < m && (i == b || dp[i * w + j + 1] >= dp[(i + 1) * w + j]) {
            // The variant's own items first, then the body's: runs stay whole.
            out.push(Elem {
                sym: syms[j],
                iters: iters.to_vec(),
                members: vec![(v, j)],
            });
            j += 1;
        } else {
            out.push(take(&mut body, i)?);
            i += 1;
        }
    }
    Some(out)
}

/// The condition of a set of iterations (`true` at the iterations in it), if it has
/// one of the forms written.
fn condition(set: &[bool]) -> Option<Cond> {
    let n = set.len() as u64;
    let members: Vec<u64> = (0..n).filter(|i| set[*i as usize]).collect();
    let others: Vec<u64> = (0..n).filter(|i| !set[*i as usize]).collect();
    let matches = |c: &Cond| (0..n).all(|i| c.contains(i) == set[i as usize]);
    if let Some(a) = atom(&members, n) {
        return Some(Cond::Is(a));
    }
    if let Some(a) = atom(&others, n) {
        return Some(Cond::Not(a));
    }
    if let (Some(first), Some(last)) = (members.first(), members.last()) {
        if *first == 0 && matches(&Cond::Below(last + 1)) {
            return Some(Cond::Below(last + 1));
        }
        if *last == n - 1 && matches(&Cond::From(*first)) {
            return Some(Cond::From(*first));
        }
    }
    // Two atoms: the one through the first member, with the period of one of its gaps.
    let first = *members.first()?;
    let mut tried = Vec::new();
    for &m in members.iter().skip(1).take(64) {
        let p = m - first;
        if tried.contains(&p) {
            continue;
        }
        tried.push(p);
        let a = Atom::Every { p, r: first % p };
        if !(0..n).filter(|i| a.contains(*i)).all(|i| set[i as usize]) {
            continue;
        }
        let rest: Vec<u64> = members
            .iter()
            .copied()
            .filter(|i| !a.contains(*i))
            .collect();
        if let Some(b) = atom(&rest, n) {
            return Some(Cond::Either(a, b));
        }
    }
    let rest: Vec<u64> = members.iter().copied().skip(1).collect();
    if let Some(b) = atom(&rest, n) {
        return Some(Cond::Either(Atom::At(first), b));
    }
    None
}

/// The evenly spread condition standing for a set of iterations with no pattern: the
/// same condition for the same set, its negation for the complement (so code guarded
/// by a set and its complement stays an `if`/`else`, and a request posted under a set
/// is completed under it).
fn evenly(set: &[bool], seen: &mut Vec<(Vec<bool>, Cond)>) -> Option<Cond> {
    if let Some((_, c)) = seen.iter().find(|(s, _)| s == set) {
        return Some(c.clone());
    }
    let complement: Vec<bool> = set.iter().map(|x| !x).collect();
    if let Some((_, Cond::Is(a))) = seen.iter().find(|(s, _)| *s == complement) {
        return Some(Cond::Not(*a));
    }
    let n = set.len() as u64;
    let k = set.iter().filter(|x| **x).count() as u64;
    // The rarer side is spread; the other is its negation.
    let (rare, negate) = if 2 * k <= n {
        (k, false)
    } else {
        (n - k, true)
    };
    if rare < 2 {
        return None;
    }
    let p = ((n as f64 / rare as f64).round() as u64).max(2);
    let count = |r: u64| (n - r).div_ceil(p);
    let members: Vec<u64> = (0..n).filter(|i| set[*i as usize] != negate).collect();
    let overlap = |r: u64| members.iter().filter(|i| *i % p == r).count();
    let r = (0..p.min(n))
        .min_by_key(|r| (count(*r).abs_diff(rare), std::cmp::Reverse(overlap(*r)), *r))?;
    let a = Atom::Every { p, r };
    let c = if negate { Cond::Not(a) } else { Cond::Is(a) };
    seen.push((set.to_vec(), c.clone()));
    Some(c)
}

/// `i % p == r` or `i == k` for exactly the `members` among 0..n.
fn atom(members: &[u64], n: u64) -> Option<Atom> {
    match members {
        [] => None,
        [k] => Some(Atom::At(*k)),
        [a, b, ..] => {
            let p = b - a;
            let a = Atom::Every { p, r: a % p };
            let count = (0..n).filter(|i| a.contains(*i)).count();
            (count == members.len() && members.iter().all(|i| a.contains(*i))).then_some(a)
        }
    }
}

/// Exact loop discovery over a run of elements (`syms[i]` is what `nodes[i]` is), each
/// position's statistics the merge of the elements it stands for.
fn renest(syms: &[u32], nodes: Vec<MNode>) -> Vec<MNode> {
    if syms.is_empty() {
        return Vec::new();
    }
    let waits: std::collections::BTreeSet<u32> = syms
        .iter()
        .zip(&nodes)
        .filter(|(_, n)| {
            matches!(
                n,
                MNode::Tok {
                    tok: Tok {
                        kind: Kind::Wait { .. },
                        ..
                    },
                    ..
                }
            )
        })
        .map(|(s, _)| *s)
        .collect();
    let nest = rotate(compress::discover(syms, Algorithm::Exact), &waits);
    let mut nodes = nodes.into_iter();
    let mut out = Vec::new();
    place(&nest, &mut nodes, &mut out);
    out
}

/// Loops that start with a completion which also follows them start after it:
/// `(wait A)^n wait` is the same run as `wait (A wait)^n`, and reads as the
/// application wrote it (a request completed at the end of the exchange that posted it).
fn rotate(nest: Vec<Node>, waits: &std::collections::BTreeSet<u32>) -> Vec<Node> {
    // From the back, so that a chain of such loops rotates one after the other.
    let mut rev: Vec<Node> = Vec::with_capacity(nest.len() + 1);
    for node in nest.into_iter().rev() {
        match node {
            Node::Loop { count, body } => {
                let mut body = rotate(body, waits);
                let first = match body.first() {
                    Some(Node::Token(t)) if waits.contains(t) => Some(*t),
                    _ => None,
                };
                match (first, rev.last()) {
                    (Some(t), Some(Node::Token(next))) if *next == t => {
                        body.remove(0);
                        body.push(Node::Token(t));
                        rev.pop();
                        rev.push(Node::Loop { count, body });
                        rev.push(Node::Token(t));
                    }
                    _ => rev.push(Node::Loop { count, body }),
                }
            }
            token => rev.push(token),
        }
    }
    rev.reverse();
    rev
}

/// Builds `nest` as [`MNode`]s, taking the elements in order: a loop's body is built
/// from its first iteration and the later iterations are added into it.
fn place(nest: &[Node], nodes: &mut std::vec::IntoIter<MNode>, out: &mut Vec<MNode>) {
    for node in nest {
        match node {
            Node::Token(_) => {
                if let Some(n) = nodes.next() {
                    out.push(n);
                }
            }
            Node::Loop { count, body } => {
                let mut first = Vec::new();
                place(body, nodes, &mut first);
                for _ in 1..*count {
                    let mut again = Vec::new();
                    place(body, nodes, &mut again);
                    for (a, b) in first.iter_mut().zip(&again) {
                        add(a, b);
                    }
                }
                let ranks = ranks_of(&first);
                out.push(MNode::Loop {
                    counts: ranks.into_iter().map(|r| (r, *count)).collect(),
                    body: first,
                    entry: BTreeMap::new(),
                });
            }
        }
    }
}

/// The ranks whose statistics a nest holds.
fn ranks_of(nodes: &[MNode]) -> std::collections::BTreeSet<u32> {
    let mut out = std::collections::BTreeSet::new();
    for n in nodes {
        match n {
            MNode::Tok { acc, .. } => out.extend(acc.keys().copied()),
            MNode::Loop { counts, .. } | MNode::While { counts, .. } => {
                out.extend(counts.keys().copied())
            }
            MNode::If { branches } => {
                for (ranks, body) in branches {
                    out.extend(ranks.iter().copied());
                    out.extend(ranks_of(body));
                }
            }
            MNode::Steps { body, .. } => out.extend(ranks_of(body)),
            MNode::When {
                then, otherwise, ..
            } => {
                out.extend(ranks_of(then));
                out.extend(ranks_of(otherwise));
            }
        }
    }
    out
}

/// A copy of `node` holding the share `f` of its statistics.
fn scaled(node: &MNode, f: f64) -> MNode {
    let f = f.clamp(0.0, 1.0);
    let share = |tok: &Tok, acc: &BTreeMap<u32, Acc>| {
        let acc = acc
            .iter()
            .map(|(r, a)| (*r, if f > 0.0 { a.scaled(f) } else { Acc::default() }))
            .collect();
        (tok.clone(), acc)
    };
    super::nest::map_toks(std::slice::from_ref(node), &share)
        .pop()
        .unwrap_or_else(|| node.clone())
}

/// `node` run `g` times as often (g ≥ 1) for the same total: each visit's time
/// divided by `g` ([`Flat::dilute`]).
fn diluted_node(node: &MNode, g: f64) -> MNode {
    let share = |tok: &Tok, acc: &BTreeMap<u32, Acc>| {
        let acc = acc.iter().map(|(r, a)| (*r, a.diluted(g))).collect();
        (tok.clone(), acc)
    };
    super::nest::map_toks(std::slice::from_ref(node), &share)
        .pop()
        .unwrap_or_else(|| node.clone())
}

/// Adds the statistics of `b` into `a` (nodes of the same shape).
fn add(a: &mut MNode, b: &MNode) {
    let all = |x: &mut [MNode], y: &[MNode]| x.iter_mut().zip(y).for_each(|(p, q)| add(p, q));
    match (a, b) {
        (MNode::Tok { acc: x, tok: t }, MNode::Tok { acc: y, tok: u }) => {
            for (r, acc) in y {
                x.entry(*r).or_default().merge(acc);
            }
            widen(t, u);
        }
        (MNode::Loop { body: x, .. }, MNode::Loop { body: y, .. })
        | (MNode::While { body: x, .. }, MNode::While { body: y, .. })
        | (MNode::Steps { body: x, .. }, MNode::Steps { body: y, .. }) => all(x, y),
        (MNode::If { branches: x }, MNode::If { branches: y }) => {
            for ((_, p), (_, q)) in x.iter_mut().zip(y) {
                all(p, q);
            }
        }
        (
            MNode::When {
                then: t1,
                otherwise: o1,
                ..
            },
            MNode::When {
                then: t2,
                otherwise: o2,
                ..
            },
        ) => {
            all(t1, t2);
            all(o1, o2);
        }
        _ => {}
    }
}

/// Sizes of `t` raised to those of `u` where `u`'s are larger (tokens folded into one
/// position by a coarse view: a receive must hold what any of them received).
fn widen(t: &mut Tok, u: &Tok) {
    match (&mut t.kind, &u.kind) {
        (Kind::P2p { halves: a, .. }, Kind::P2p { halves: b, .. }) => {
            for (x, y) in a.iter_mut().zip(b) {
                x.bytes = match (x.bytes, y.bytes) {
                    (Some(p), Some(q)) => Some(p.max(q)),
                    (p, q) => p.or(q),
                };
            }
        }
        (
            Kind::Coll {
                size: CollSize::One(a),
                ..
            },
            Kind::Coll {
                size: CollSize::One(b),
                ..
            },
        ) => {
            *a = (*a).max(*b);
        }
        _ => {}
    }
}

/// The token with what a coarse view ignores taken out: call site and sizes.
fn coarse_tok(tok: &Tok, keep_sizes: bool) -> Tok {
    let mut t = tok.clone();
    t.site = 0;
    if keep_sizes {
        return t;
    }
    match &mut t.kind {
        // A receive takes the largest size of the calls it stands for; a send keeps its
        // size class, or the mean of sends of several classes (from several call sites)
        // could exceed what the receive of one of them was written with.
        Kind::P2p { op, halves, .. } => {
            for (i, h) in halves.iter_mut().enumerate() {
                if super::tokens::receives(*op, i) {
                    h.bytes = h.bytes.map(|_| 0);
                }
            }
        }
        Kind::Coll {
            size: CollSize::One(b),
            ..
        } => *b = 0,
        _ => {}
    }
    t
}

/// Share of the run below which a stretch outside folded loops is written coarsely.
/// Coarse writing keeps every call, their order and the stretch's time, and moves
/// compute only between calls of the stretch: the error it can add to a prediction is
/// a fraction of the stretch's share, well under the 5 % a skeleton is held to.
pub(crate) const MINOR_SHARE: f64 = 0.05;
/// Stretches shorter than this many statements stay as they are.
const MIN_MINOR_STATEMENTS: usize = 12;

/// Writes the minor stretches of the top level coarsely: set-up and wrap-up phases
/// outside the main loops, in pieces that take under [`MINOR_SHARE`] of the run each
/// (LAMMPS reads its input, creates atoms and prints statistics in some 200 distinct
/// calls; no single call or loop of a piece is a main phase) become loops
/// over their calls with call sites and message sizes set aside: calls of the same
/// operation, peers, communicator and request (and, for a send, size class) in a row
/// are one statement, written with the mean size (a receive with the largest) and the
/// first call site. Blocking collectives between two other calls are grouped by kind
/// first (all ranks run the stretch, so all meet them in the same new order); other
/// calls keep their order, so every rank still matches every other; the time is kept.
/// `app_ns` is the run's time per rank.
pub(crate) fn coarsen(nodes: Vec<MNode>, app_ns: f64, n_ranks: usize) -> Vec<MNode> {
    // Where ranks take different branches, a message sent in a stretch may be received
    // in a branch (or the reverse), which a coarse view does not rewrite: sizes stay.
    let keep_sizes = super::merge::has_if(&nodes);
    let limit = MINOR_SHARE * app_ns;
    let time = |n: &MNode| super::nest::time(std::slice::from_ref(n)) / n_ranks.max(1) as f64;
    let mut out = Vec::new();
    let mut run: Vec<MNode> = Vec::new();
    let piece = |taken: Vec<MNode>, out: &mut Vec<MNode>| {
        if size(&taken) >= MIN_MINOR_STATEMENTS {
            let coarse = coarse_view(&taken, keep_sizes);
            if size(&coarse) < size(&taken) {
                out.extend(coarse);
                return;
            }
        }
        out.extend(taken);
    };
    // A stretch of minor nodes that takes more than the share in all (a set-up of many
    // small phases, LAMMPS's at 5-9 % of a short run) is written in consecutive pieces
    // of under the share each: each piece keeps its calls, order and time, so the bound
    // holds piece by piece, and whether a set-up comes out a little over or under the
    // share in one run no longer decides whether it is written call by call.
    let flush = |run: &mut Vec<MNode>, out: &mut Vec<MNode>| {
        // Few pieces, of about equal time: a piece ends once it reaches its part of
        // the whole, or before a node that would take it to the share.
        let all: f64 = run.iter().map(time).sum();
        let target = all / ((all / limit).floor() + 1.0);
        let mut taken: Vec<MNode> = Vec::new();
        let mut total = 0.0;
        for node in std::mem::take(run) {
            let t = time(&node);
            if total + t >= limit && !taken.is_empty() {
                piece(std::mem::take(&mut taken), out);
                total = 0.0;
            }
            total += t;
            taken.push(node);
            if total >= target {
                piece(std::mem::take(&mut taken), out);
                total = 0.0;
            }
        }
        piece(taken, out);
    };
    for node in nodes {
        let major =
            matches!(node, MNode::Steps { .. } | MNode::While { .. }) || time(&node) >= limit;
        if major {
            flush(&mut run, &mut out);
            out.push(node);
        } else {
            run.push(node);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// The nest of `nodes` discovered over their coarse tokens.
fn coarse_view(nodes: &[MNode], keep_sizes: bool) -> Vec<MNode> {
    if expanded_len(nodes) > MAX_ITEMS as u64 {
        return nodes.to_vec();
    }
    let mut flat = Flat::default();
    flat.flatten(nodes);
    let mut coarse: HashMap<Key, u32> = HashMap::new();
    let of_sym: Vec<u32> = flat
        .example
        .iter()
        .map(|&origin| {
            let key = match flat.origins[origin as usize] {
                MNode::Tok { tok, .. } => Key::Tok(coarse_tok(tok, keep_sizes)),
                other => {
                    let mut s = String::new();
                    shape(other, &mut s);
                    Key::Shape(s)
                }
            };
            let next = coarse.len() as u32;
            *coarse.entry(key).or_insert(next)
        })
        .collect();
    let mut items: Vec<(u32, MNode)> = flat
        .items
        .iter()
        .map(|(sym, origin)| {
            (
                of_sym[*sym as usize],
                flat.element(*sym, &[(*origin, 1)].into()),
            )
        })
        .collect();
    // Blocking collectives between other calls are grouped by kind (the kind met first
    // first), each with the compute before it, where that writes fewer statements (a
    // run that repeats a pattern of several kinds is shorter as its loop). Every rank
    // runs the stretch (it is one sequence of tokens), so every rank meets the
    // collectives in the same new order and they still match; sends, receives,
    // requests and rank conditionals stay where they are and bound the groups.
    let run_size = |run: &[(u32, MNode)]| {
        let syms: Vec<u32> = run.iter().map(|(s, _)| *s).collect();
        discovered_size(&syms, &|_| 1)
    };
    let mut start = 0;
    while start < items.len() {
        let mut end = start;
        while end < items.len() && blocking_collective(&items[end].1) {
            end += 1;
        }
        if end - start > 2 {
            let before = run_size(&items[start..end]);
            let mut grouped = items[start..end].to_vec();
            grouped.sort_by_key(|(sym, _)| *sym);
            if run_size(&grouped) < before {
                items.splice(start..end, grouped);
            }
        }
        start = end + 1;
    }
    let (syms, elems): (Vec<u32>, Vec<MNode>) = items.into_iter().unzip();
    renest(&syms, elems)
}

/// Statements exact loop discovery makes of `syms`, each symbol `of` statements.
fn discovered_size(syms: &[u32], of: &dyn Fn(u32) -> usize) -> usize {
    fn count(nest: &[Node], of: &dyn Fn(u32) -> usize) -> usize {
        nest.iter()
            .map(|n| match n {
                Node::Token(s) => of(*s),
                Node::Loop { body, .. } => 1 + count(body, of),
            })
            .sum()
    }
    if syms.is_empty() {
        return 0;
    }
    count(&compress::discover(syms, Algorithm::Exact), of)
}

/// Whether a node is a blocking collective call (one that can move past another
/// collective in a stretch every rank runs).
fn blocking_collective(node: &MNode) -> bool {
    matches!(
        node,
        MNode::Tok {
            tok: Tok {
                kind: Kind::Coll {
                    nonblocking: false,
                    req: None,
                    ..
                },
                ..
            },
            ..
        }
    )
}

/// The shape of a node without its statistics, for equality of items.
fn shape(node: &MNode, out: &mut String) {
    use std::fmt::Write;
    match node {
        MNode::Tok { tok, acc } => {
            let _ = write!(out, "T{tok:?}{:?}", acc.keys().collect::<Vec<_>>());
        }
        MNode::Loop { counts, body, .. } => {
            let _ = write!(out, "L{counts:?}[");
            body.iter().for_each(|n| shape(n, out));
            out.push(']');
        }
        MNode::If { branches } => {
            out.push_str("I[");
            for (ranks, body) in branches {
                let _ = write!(out, "{ranks:?}(");
                body.iter().for_each(|n| shape(n, out));
                out.push(')');
            }
            out.push(']');
        }
        MNode::While { counts, body } => {
            let _ = write!(out, "H{counts:?}[");
            body.iter().for_each(|n| shape(n, out));
            out.push(']');
        }
        MNode::Steps { count, body } => {
            let _ = write!(out, "S{count}[");
            body.iter().for_each(|n| shape(n, out));
            out.push(']');
        }
        MNode::When {
            cond,
            then,
            otherwise,
            ..
        } => {
            let _ = write!(out, "W{cond:?}[");
            then.iter().for_each(|n| shape(n, out));
            out.push('|');
            otherwise.iter().for_each(|n| shape(n, out));
            out.push(']');
        }
    }
}
