//! Per-rank loop nests: takes one rank's tokens (streamed into
//! [`compress::Discovery`] by the pass), then the same tokens again through a [`Walk`]
//! of the nest, gives the nest as [`MNode`]s carrying, for every token position of a
//! loop body, the statistics of the compute spans before it over all iterations (count,
//! mean, spread) and the MPI time spent there. [`MNode`] is also what the SPMD merge
//! produces.

use std::collections::{BTreeMap, BTreeSet};

use super::spread::Spread;
#[cfg(test)]
use super::tokens::RankTokens;
use super::tokens::{Kind, Tok};
#[cfg(test)]
use crate::compress::Algorithm;
use crate::compress::{self, Node};

/// Running statistics of the compute spans at one body position on one rank (count,
/// sum, sum of squares and their distribution), the MPI time of the calls there, and
/// the message sizes of the calls (per half of a point-to-point call, or a collective's
/// size): iterations whose sizes differ in data only are one position, so a size is a
/// statistic like a compute span.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Acc {
    pub n: u64,
    pub sum_ns: f64,
    pub sum_sq: f64,
    pub mpi_ns: f64,
    pub spread: Spread,
    pub sizes: [SizeAcc; 2],
    /// The failed polls (tests and probes that found nothing) made in the spans: their
    /// count (see `Compute::polls`), and their time (`Compute::poll_cost`).
    pub polls: f64,
    pub poll_ns: f64,
}

/// Statistics of the sizes of one half of the calls at a body position.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SizeAcc {
    pub n: u64,
    pub sum: u128,
    pub min: u64,
    pub max: u64,
}

impl SizeAcc {
    pub fn add(&mut self, bytes: u64) {
        if self.n == 0 || bytes < self.min {
            self.min = bytes;
        }
        self.max = self.max.max(bytes);
        self.n += 1;
        self.sum += u128::from(bytes);
    }

    pub fn merge(&mut self, other: &SizeAcc) {
        if other.n == 0 {
            return;
        }
        if self.n == 0 || other.min < self.min {
            self.min = other.min;
        }
        self.max = self.max.max(other.max);
        self.n += other.n;
        self.sum += other.sum;
    }

    /// The mean in whole bytes (the exact size when every call had it).
    pub fn mean(&self) -> Option<u64> {
        if self.n == 0 {
            return None;
        }
        if self.min == self.max {
            return Some(self.min);
        }
        let n = u128::from(self.n);
        u64::try_from((self.sum + n / 2) / n).ok()
    }
}

impl Acc {
    pub fn add(&mut self, gap_ns: u64, mpi_ns: u64) {
        let x = gap_ns as f64;
        self.n += 1;
        self.sum_ns += x;
        self.sum_sq += x * x;
        self.mpi_ns += mpi_ns as f64;
        self.spread.add(gap_ns);
    }

    pub fn add_sizes(&mut self, sizes: [Option<u64>; 2]) {
        for (acc, size) in self.sizes.iter_mut().zip(sizes) {
            if let Some(b) = size {
                acc.add(b);
            }
        }
    }

    /// The statistics of a share `f` (0 < f ≤ 1) of the visits with the same means:
    /// `n` becomes `round(n f)` (at least 1) and the sums follow it.
    pub fn scaled(&self, f: f64) -> Acc {
        if f >= 1.0 || self.n == 0 {
            return self.clone();
        }
        let n = ((self.n as f64 * f).round() as u64).max(1);
        let k = n as f64 / self.n as f64;
        let mut sizes = self.sizes;
        for s in &mut sizes {
            if s.n > 0 {
                let m = ((s.n as f64 * f).round() as u64).max(1);
                s.sum = s.sum * u128::from(m) / u128::from(s.n);
                s.n = m;
            }
        }
        Acc {
            n,
            sum_ns: self.sum_ns * k,
            sum_sq: self.sum_sq * k,
            mpi_ns: self.mpi_ns * k,
            spread: self.spread.scaled(f),
            sizes,
            polls: self.polls * k,
            poll_ns: self.poll_ns * k,
        }
    }

    /// The statistics of `g` times as many visits (g ≥ 1) with the same total time:
    /// each span `g` times shorter, `n` becomes `round(n g)`. Message sizes and polls
    /// keep their totals (the compute tokens this is for have neither).
    pub fn diluted(&self, g: f64) -> Acc {
        if g <= 1.0 || self.n == 0 {
            return self.clone();
        }
        self.revisited(((self.n as f64 * g).round() as u64).max(self.n))
    }

    /// The same total time over `n` visits (n ≥ 1): each span `self.n / n` times as long.
    /// Message sizes, MPI time and polls keep their totals (the compute tokens this is
    /// for have none but the polls).
    pub fn revisited(&self, n: u64) -> Acc {
        if n == 0 || self.n == 0 || n == self.n {
            return self.clone();
        }
        let q = self.n as f64 / n as f64;
        Acc {
            n,
            sum_ns: self.sum_ns,
            sum_sq: self.sum_sq * q,
            spread: self.spread.diluted(q, n),
            ..self.clone()
        }
    }

    /// Adds the visits of `other` (another place folded into this position).
    pub fn merge(&mut self, other: &Acc) {
        self.n += other.n;
        self.sum_ns += other.sum_ns;
        self.sum_sq += other.sum_sq;
        self.mpi_ns += other.mpi_ns;
        self.polls += other.polls;
        self.poll_ns += other.poll_ns;
        self.spread.merge(&other.spread);
        for (a, b) in self.sizes.iter_mut().zip(&other.sizes) {
            a.merge(b);
        }
    }

    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum_ns / self.n as f64
        }
    }
}

/// A node of a loop nest over one rank or, after merging, over many.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum MNode {
    /// A token with, per rank that executes it, its compute and MPI time.
    Tok { tok: Tok, acc: BTreeMap<u32, Acc> },
    /// A loop; the count per rank that runs it (the body may be a no-op on others).
    /// `entry` holds, per rank, the visits of the body's first call made on the loop's
    /// first iteration: the compute before them is the compute before the loop, which
    /// may differ from the compute between iterations (a step's force computation
    /// before its two swaps), and the first call's own statistics hold the other
    /// iterations' visits. [`absorb`] puts the entry back into the first call (where
    /// the two do not differ, or a pass does not keep them apart); for every rank the
    /// two together are its visits.
    Loop {
        counts: BTreeMap<u32, u64>,
        body: Vec<MNode>,
        entry: Accs,
    },
    /// Rank-conditional code: each branch with the ranks that take it; the last branch
    /// is the `else` and also takes every rank not listed.
    If {
        branches: Vec<(Vec<u32>, Vec<MNode>)>,
    },
    /// A task loop (`while recv PEER SIZE tag T { ... }`, from [`super::serve`]): the
    /// first node of `body` is the receive (tag T) that heads every iteration, its
    /// compute statistics over every visit, the last one (the receive that ended the
    /// loop) included; `counts` are the tasks each rank took in the trace.
    While {
        counts: BTreeMap<u32, u64>,
        body: Vec<MNode>,
    },
    /// A loop whose body reads its iteration number (from [`super::fold`]): the same
    /// count on every rank.
    Steps { count: u64, body: Vec<MNode> },
    /// Code of a [`MNode::Steps`] body that runs on the iterations `cond` holds for,
    /// and `otherwise` on the others.
    When {
        cond: super::fold::Cond,
        then: Vec<MNode>,
        otherwise: Vec<MNode>,
        /// On how many iterations the application ran `then` and on how many `cond`
        /// holds, when `cond` spreads a set without a pattern evenly.
        recorded: Option<(u64, u64)>,
    },
}

/// One rank's nest and how much of its time the loops cover.
pub(crate) struct RankNest {
    pub nodes: Vec<MNode>,
    pub tokens: u64,
    pub in_loop_ns: f64,
    pub total_ns: f64,
    pub description_len: usize,
}

/// Finds the nest of one rank's tokens held in memory; `tokens.table` gives each id's
/// token. The same two steps as the streaming pass: discovery, then the statistics walk.
#[cfg(test)]
pub(crate) fn rank_nest(tokens: &RankTokens, algorithm: Algorithm) -> RankNest {
    let mut discovery = compress::Discovery::new(algorithm);
    for &id in &tokens.ids {
        discovery.push(id);
    }
    let nest = discovery.finish();
    let mut walk = Walk::new(&nest);
    for (i, &id) in tokens.ids.iter().enumerate() {
        let gap = tokens.gap_ns.get(i).copied().unwrap_or(0);
        let dur = tokens.dur_ns.get(i).copied().unwrap_or(0);
        walk.visit(id, gap, dur, [None, None]);
    }
    match walk.finish(&nest, &tokens.table, tokens.rank) {
        Some(nest) => nest,
        None => unreachable!("a nest expands to the tokens it was found from"),
    }
}

/// One step of a nest laid out flat: the walk's program.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// A token of the nest: its id, whether it is inside a loop, and the index of its
    /// statistics (tokens in the order of the nest's description).
    Token { id: u32, in_loop: bool, acc: usize },
    /// The start of a loop of `count` iterations whose `Leave` is at `leave`, with the
    /// index of its entry statistics (loops in the order of the nest's description).
    Enter {
        count: u64,
        leave: usize,
        entry: usize,
    },
    /// The end of the loop whose `Enter` is at `enter`.
    Leave { enter: usize },
}

/// Gathers the compute statistics of every token of a nest (per body position, over all
/// iterations) while the rank's tokens come by a second time, one at a time: the nest is
/// laid out as a flat program of [`Step`]s, and a stack of remaining iteration counts
/// follows the expansion. Memory: the nest's size and its depth, not the trace's length.
/// The tokens are visited in the order of the expansion, so the sums are the same, to
/// the last bit, as a walk over all tokens in memory gives.
pub(crate) struct Walk {
    steps: Vec<Step>,
    /// Statistics of each `Token` step, in order.
    accs: Vec<Acc>,
    /// Statistics of the first token of each loop on the loop's first iteration.
    entries: Vec<Acc>,
    /// The outermost loop entered since the last token: the next token is its entry.
    entering: Option<usize>,
    at: usize,
    /// Iterations left of each loop entered, innermost last.
    left: Vec<u64>,
    tokens: u64,
    in_loop_ns: f64,
    total_ns: f64,
    /// False once a token differs from the nest's (the rank changed between its reads).
    matches: bool,
}

impl Walk {
    pub fn new(nest: &[Node]) -> Self {
        let mut steps = Vec::new();
        let (mut n_tokens, mut n_loops) = (0, 0);
        lay_out(nest, 0, &mut steps, &mut n_tokens, &mut n_loops);
        Walk {
            steps,
            accs: vec![Acc::default(); n_tokens],
            entries: vec![Acc::default(); n_loops],
            entering: None,
            at: 0,
            left: Vec::new(),
            tokens: 0,
            in_loop_ns: 0.0,
            total_ns: 0.0,
            matches: true,
        }
    }

    /// The next token of the rank, with the compute before it, its MPI time and its
    /// message sizes.
    #[cfg(test)]
    pub fn visit(&mut self, id: u32, gap_ns: u64, dur_ns: u64, sizes: [Option<u64>; 2]) {
        self.visit_polling(id, gap_ns, dur_ns, sizes, (0, 0));
    }

    /// [`Walk::visit`] of a token before which the rank made `polls.0` failed polls,
    /// taking `polls.1` ns.
    pub fn visit_polling(
        &mut self,
        id: u32,
        gap_ns: u64,
        dur_ns: u64,
        sizes: [Option<u64>; 2],
        polls: (u64, u64),
    ) {
        self.tokens += 1;
        if !self.matches {
            return;
        }
        match self.next_token() {
            Some((want, in_loop, acc)) if want == id => {
                let acc = match self.entering.take() {
                    Some(entry) => self.entries.get_mut(entry),
                    None => self.accs.get_mut(acc),
                };
                if let Some(acc) = acc {
                    acc.add(gap_ns, dur_ns);
                    acc.add_sizes(sizes);
                    acc.polls += polls.0 as f64;
                    acc.poll_ns += polls.1 as f64;
                }
                let t = gap_ns.saturating_add(dur_ns) as f64;
                self.total_ns += t;
                if in_loop {
                    self.in_loop_ns += t;
                }
            }
            _ => self.matches = false,
        }
    }

    /// Moves to the next `Token` step of the expansion; `None` past the end.
    fn next_token(&mut self) -> Option<(u32, bool, usize)> {
        loop {
            match *self.steps.get(self.at)? {
                Step::Token { id, in_loop, acc } => {
                    self.at += 1;
                    return Some((id, in_loop, acc));
                }
                Step::Enter {
                    count,
                    leave,
                    entry,
                } => {
                    if count == 0 {
                        self.at = leave + 1;
                    } else {
                        self.left.push(count);
                        self.at += 1;
                        self.entering.get_or_insert(entry);
                    }
                }
                Step::Leave { enter } => {
                    let left = self.left.last_mut()?;
                    *left -= 1;
                    if *left > 0 {
                        self.at = enter + 1;
                    } else {
                        self.left.pop();
                        self.at += 1;
                    }
                }
            }
        }
    }

    /// The rank's nest with its statistics, or `None` when the tokens were not the
    /// nest's expansion.
    pub fn finish(mut self, nest: &[Node], table: &[Tok], rank: u32) -> Option<RankNest> {
        if !self.matches || self.next_token().is_some() {
            return None;
        }
        let mut accs = self.accs.into_iter();
        let mut entries = self.entries.into_iter();
        let nodes = shape(nest, table, rank, &mut accs, &mut entries);
        Some(RankNest {
            description_len: compress::description_len(nest),
            nodes,
            tokens: self.tokens,
            in_loop_ns: self.in_loop_ns,
            total_ns: self.total_ns,
        })
    }
}

fn lay_out(
    nest: &[Node],
    depth: usize,
    steps: &mut Vec<Step>,
    n_tokens: &mut usize,
    n_loops: &mut usize,
) {
    for node in nest {
        match node {
            Node::Token(id) => {
                steps.push(Step::Token {
                    id: *id,
                    in_loop: depth > 0,
                    acc: *n_tokens,
                });
                *n_tokens += 1;
            }
            Node::Loop { count, body } => {
                let enter = steps.len();
                let entry = *n_loops;
                *n_loops += 1;
                steps.push(Step::Enter {
                    count: *count,
                    leave: 0,
                    entry,
                });
                lay_out(body, depth + 1, steps, n_tokens, n_loops);
                let leave = steps.len();
                steps.push(Step::Leave { enter });
                steps[enter] = Step::Enter {
                    count: *count,
                    leave,
                    entry,
                };
            }
        }
    }
}

/// A token's statistics per rank.
pub(crate) type Accs = BTreeMap<u32, Acc>;

/// A copy of the nest with every token and its statistics as `f` gives them (the
/// shape, counts and conditions as they are).
pub(crate) fn map_toks(nodes: &[MNode], f: &dyn Fn(&Tok, &Accs) -> (Tok, Accs)) -> Vec<MNode> {
    let each = |nodes: &[MNode]| map_toks(nodes, f);
    nodes
        .iter()
        .map(|node| match node {
            MNode::Tok { tok, acc } => {
                let (tok, acc) = f(tok, acc);
                MNode::Tok { tok, acc }
            }
            MNode::Loop {
                counts,
                body,
                entry,
            } => MNode::Loop {
                counts: counts.clone(),
                body: each(body),
                entry: entry.clone(),
            },
            MNode::While { counts, body } => MNode::While {
                counts: counts.clone(),
                body: each(body),
            },
            MNode::If { branches } => MNode::If {
                branches: branches.iter().map(|(r, b)| (r.clone(), each(b))).collect(),
            },
            MNode::Steps { count, body } => MNode::Steps {
                count: *count,
                body: each(body),
            },
            MNode::When {
                cond,
                then,
                otherwise,
                recorded,
            } => MNode::When {
                cond: cond.clone(),
                then: each(then),
                otherwise: each(otherwise),
                recorded: *recorded,
            },
        })
        .collect()
}

/// The time (compute before each call and MPI time) a nest holds, over all its ranks
/// and visits.
pub(crate) fn time(nodes: &[MNode]) -> f64 {
    nodes
        .iter()
        .map(|n| match n {
            MNode::Tok { acc, .. } => acc.values().map(|a| a.sum_ns + a.mpi_ns).sum(),
            MNode::Loop { body, entry, .. } => time_of(entry) + time(body),
            MNode::Steps { body, .. } | MNode::While { body, .. } => time(body),
            MNode::If { branches } => branches.iter().map(|(_, b)| time(b)).sum(),
            MNode::When {
                then, otherwise, ..
            } => time(then) + time(otherwise),
        })
        .sum()
}

/// The time (compute and MPI) of the visits in `acc`, over every rank.
fn time_of(acc: &Accs) -> f64 {
    acc.values().map(|a| a.sum_ns + a.mpi_ns).sum()
}

/// The nest as [`MNode`]s of one rank, each token with its statistics (in the order the
/// walk laid them out).
fn shape(
    nest: &[Node],
    table: &[Tok],
    rank: u32,
    accs: &mut impl Iterator<Item = Acc>,
    entries: &mut impl Iterator<Item = Acc>,
) -> Vec<MNode> {
    nest.iter()
        .map(|node| match node {
            Node::Token(id) => MNode::Tok {
                tok: table[*id as usize].clone(),
                acc: [(rank, accs.next().unwrap_or_default())].into(),
            },
            Node::Loop { count, body } => {
                let entry = entries.next().unwrap_or_default();
                MNode::Loop {
                    counts: [(rank, *count)].into(),
                    entry: if entry.n > 0 {
                        [(rank, entry)].into()
                    } else {
                        Accs::new()
                    },
                    body: shape(body, table, rank, accs, entries),
                }
            }
        })
        .collect()
}

/// Whether `rank` makes a call in `node`.
fn involves(node: &MNode, rank: u32) -> bool {
    match node {
        MNode::Tok { acc, .. } => acc.contains_key(&rank),
        MNode::Loop { counts, body, .. } => {
            counts.get(&rank).is_some_and(|&c| c > 0) && body.iter().any(|n| involves(n, rank))
        }
        MNode::While { counts, body } => {
            counts.contains_key(&rank) && body.iter().any(|n| involves(n, rank))
        }
        MNode::Steps { body, .. } => body.iter().any(|n| involves(n, rank)),
        MNode::If { branches } => branch_of(branches, rank)
            .is_some_and(|i| branches[i].1.iter().any(|n| involves(n, rank))),
        MNode::When {
            then, otherwise, ..
        } => then.iter().chain(otherwise).any(|n| involves(n, rank)),
    }
}

/// The branch `rank` takes: the one that lists it, or the last (the `else`).
fn branch_of(branches: &[(Vec<u32>, Vec<MNode>)], rank: u32) -> Option<usize> {
    branches
        .iter()
        .position(|(ranks, _)| ranks.contains(&rank))
        .or(branches.len().checked_sub(1))
}

/// The index in `body` of the node where `rank` makes its first call.
fn first_for(body: &[MNode], rank: u32) -> Option<usize> {
    body.iter().position(|n| involves(n, rank))
}

/// Puts the entry statistics of a loop (see [`MNode::Loop`]) into the first call of
/// `body`, rank by rank: the rank's first token, or a nested loop's entry, or the first
/// call of the branch the rank takes. Gives back what has no such place (a rank that
/// makes no call in `body`, code that depends on the iteration): that stays the loop's
/// entry.
pub(crate) fn absorb(entry: Accs, body: &mut [MNode]) -> Accs {
    let mut left = Accs::new();
    let mut at: BTreeMap<usize, Accs> = BTreeMap::new();
    for (r, a) in entry {
        match first_for(body, r) {
            Some(i) => {
                at.entry(i).or_default().insert(r, a);
            }
            None => {
                left.insert(r, a);
            }
        }
    }
    for (i, part) in at {
        match &mut body[i] {
            MNode::Tok { acc, .. } => {
                for (r, a) in part {
                    acc.entry(r).or_default().merge(&a);
                }
            }
            MNode::Loop { entry: inner, .. } => {
                for (r, a) in part {
                    inner.entry(r).or_default().merge(&a);
                }
            }
            MNode::While { body, .. } => left.extend(absorb(part, body)),
            MNode::If { branches } => {
                let mut per_branch: Vec<Accs> = vec![Accs::new(); branches.len()];
                for (r, a) in part {
                    if let Some(b) = branch_of(branches, r).and_then(|i| per_branch.get_mut(i)) {
                        b.insert(r, a);
                    }
                }
                for ((_, body), part) in branches.iter_mut().zip(per_branch) {
                    left.extend(absorb(part, body));
                }
            }
            MNode::Steps { .. } | MNode::When { .. } => left.extend(part),
        }
    }
    left
}

/// Calls `f` with the entry and body of every loop of `nodes`, an outer loop before the
/// loops of its body.
fn each_loop_mut(nodes: &mut [MNode], f: &mut dyn FnMut(&mut Accs, &mut [MNode])) {
    for node in nodes.iter_mut() {
        match node {
            MNode::Loop { body, entry, .. } => {
                f(entry, body);
                each_loop_mut(body, f);
            }
            MNode::Tok { .. } => {}
            MNode::Steps { body, .. } | MNode::While { body, .. } => each_loop_mut(body, f),
            MNode::If { branches } => {
                for (_, b) in branches {
                    each_loop_mut(b, f);
                }
            }
            MNode::When {
                then, otherwise, ..
            } => {
                each_loop_mut(then, f);
                each_loop_mut(otherwise, f);
            }
        }
    }
}

/// Every loop's entry put back into its first call, as far as it goes ([`absorb`]).
pub(crate) fn absorb_all(nodes: &mut [MNode]) {
    each_loop_mut(nodes, &mut |entry, body| {
        let taken = std::mem::take(entry);
        *entry = absorb(taken, body);
    });
}

/// The compute before a loop is written before it when it exceeds the compute between
/// its iterations by more than this share of its own mean...
pub(super) const ENTRY_SHARE: f64 = 0.5;
/// ... and by more than this: a difference a skeleton's statement reproduces.
pub(super) const ENTRY_MIN_NS: f64 = 5_000.0;

/// The site of the first call of `nodes`, if any.
fn first_site(nodes: &[MNode]) -> Option<u32> {
    nodes.iter().find_map(|n| match n {
        MNode::Tok { tok, .. } => Some(tok.site),
        MNode::Loop { body, .. } | MNode::Steps { body, .. } | MNode::While { body, .. } => {
            first_site(body)
        }
        MNode::If { branches } => branches.iter().find_map(|(_, b)| first_site(b)),
        MNode::When {
            then, otherwise, ..
        } => first_site(then).or_else(|| first_site(otherwise)),
    })
}

/// Decides, for every loop of the merged nest, whether its entry stays apart: where the
/// compute before the loop's first call on entering exceeds the compute before it
/// between iterations ([`ENTRY_SHARE`], [`ENTRY_MIN_NS`]), the excess becomes a
/// [`Kind::Compute`] token before the loop (the skeleton computes that, then runs the
/// loop with the mean of the rest, [`split_entry`]); elsewhere the entry goes back into
/// the first call ([`absorb`]), one mean for all iterations. An entry whose loop starts with a deeper
/// construct goes into it first (an outer loop's entry into an inner loop's). No loop
/// keeps an entry: the passes after this one see calls and loops only.
///
/// The decision is one per loop of the code, not per instance: the loops that start
/// at one call site are judged on their visits together (a time step's swap loop,
/// met in a run of steps and again after each neighbour-list rebuild, is split in all
/// its instances or in none, so that the iterations that hold it still fold into one
/// loop), and only when they hold at least `major_ns` (time over all ranks): the order
/// of compute in a minor loop does not move a prediction, and its calls stay one run
/// for the coarse view of set-up phases ([`super::fold::coarsen`]).
pub(crate) fn settle_entries(mut nodes: Vec<MNode>, major_ns: f64) -> Vec<MNode> {
    sink_entries(&mut nodes);
    let mut by_site = BTreeMap::new();
    gather_entries(&nodes, &mut by_site);
    let apart: BTreeSet<u32> = by_site
        .into_iter()
        .filter(|(_, g)| g.apart(major_ns))
        .map(|(site, _)| site)
        .collect();
    split_entries(nodes, &apart)
}

/// What the loops starting at one call site hold together (see [`settle_entries`]).
#[derive(Default)]
struct EntryGroup {
    entry_n: u64,
    entry_ns: f64,
    rest_n: u64,
    rest_ns: f64,
    time_ns: f64,
}

impl EntryGroup {
    fn apart(&self, major_ns: f64) -> bool {
        if self.entry_n == 0 || self.rest_n == 0 || self.time_ns < major_ns {
            return false;
        }
        let first = self.entry_ns / self.entry_n as f64;
        let rest = self.rest_ns / self.rest_n as f64;
        let d = first - rest;
        d > ENTRY_SHARE * first && d > ENTRY_MIN_NS
    }
}

/// Splits the visits `entry` of a loop's first call made on entering the loop: the
/// loop runs its first call's compute on entering too (the mean of `call`, the other
/// visits), so the statement before the loop takes what the entry computed beyond
/// that; `call` takes the entry's visits with that mean, their MPI time and sizes.
/// The time of the two together stays the entry's and the call's.
fn split_entry(entry: Acc, call: &mut Acc) -> Acc {
    let y = if call.n > 0 {
        call.sum_ns / call.n as f64
    } else {
        0.0
    };
    let n = entry.n as f64;
    let before = Acc {
        n: entry.n,
        sum_ns: (entry.sum_ns - n * y).max(0.0),
        sum_sq: (entry.sum_sq - 2.0 * y * entry.sum_ns + n * y * y).max(0.0),
        mpi_ns: 0.0,
        spread: entry.spread.shifted(y),
        sizes: Default::default(),
        polls: entry.polls,
        poll_ns: entry.poll_ns,
    };
    let more = if call.n > 0 {
        call.spread.scaled(n / call.n as f64)
    } else {
        let mut zeros = Spread::default();
        (0..entry.n).for_each(|_| zeros.add(0));
        zeros
    };
    call.spread.merge(&more);
    call.n += entry.n;
    call.sum_ns += n * y;
    call.sum_sq += n * y * y;
    call.mpi_ns += entry.mpi_ns;
    for (to, from) in call.sizes.iter_mut().zip(&entry.sizes) {
        to.merge(from);
    }
    before
}

/// The part of `entry` of the ranks whose first call in `body` is not a call of `body`
/// itself but deeper (in a nested loop, a branch, a task loop).
fn deeper(entry: &mut Accs, body: &[MNode]) -> Accs {
    let (deep, direct): (Accs, Accs) = std::mem::take(entry).into_iter().partition(|(r, _)| {
        !matches!(
            first_for(body, *r).map(|i| &body[i]),
            Some(MNode::Tok { .. })
        )
    });
    *entry = direct;
    deep
}

/// Puts the entry of every rank whose first call in a loop is deeper than the loop's
/// own calls into that construct (outer loops first, so that an entry travels down to
/// the loop whose call it is).
fn sink_entries(nodes: &mut [MNode]) {
    each_loop_mut(nodes, &mut |entry, body| {
        let deep = deeper(entry, body);
        for (r, a) in absorb(deep, body) {
            entry.entry(r).or_default().merge(&a);
        }
    });
}

/// The site of the call where `rank` enters a loop of `body`, if that is a call of
/// `body` itself.
fn entry_site(body: &[MNode], rank: u32) -> Option<u32> {
    match first_for(body, rank).map(|i| &body[i]) {
        Some(MNode::Tok { tok, .. }) => Some(tok.site),
        _ => None,
    }
}

/// The entries of the loops, by the site of the call that each rank enters with.
fn gather_entries(nodes: &[MNode], by_site: &mut BTreeMap<u32, EntryGroup>) {
    for node in nodes {
        match node {
            MNode::Loop { body, entry, .. } => {
                // The loop's time counts once per site it is entered at.
                let mut sites = BTreeSet::new();
                for (r, e) in entry {
                    let Some(MNode::Tok { tok, acc }) = first_for(body, *r).map(|i| &body[i])
                    else {
                        continue;
                    };
                    let g = by_site.entry(tok.site).or_default();
                    g.entry_n += e.n;
                    g.entry_ns += e.sum_ns;
                    g.time_ns += e.sum_ns + e.mpi_ns;
                    if let Some(a) = acc.get(r) {
                        g.rest_n += a.n;
                        g.rest_ns += a.sum_ns;
                    }
                    if sites.insert(tok.site) {
                        g.time_ns += time(body);
                    }
                }
                gather_entries(body, by_site);
            }
            MNode::Tok { .. } => {}
            MNode::Steps { body, .. } | MNode::While { body, .. } => gather_entries(body, by_site),
            MNode::If { branches } => {
                for (_, b) in branches {
                    gather_entries(b, by_site);
                }
            }
            MNode::When {
                then, otherwise, ..
            } => {
                gather_entries(then, by_site);
                gather_entries(otherwise, by_site);
            }
        }
    }
}

/// Writes the entries of the ranks that enter a loop at a call whose site is in
/// `apart` as compute before the loop, and puts every other entry back
/// ([`settle_entries`]).
fn split_entries(nodes: Vec<MNode>, apart: &BTreeSet<u32>) -> Vec<MNode> {
    let mut out = Vec::with_capacity(nodes.len());
    for node in nodes {
        match node {
            MNode::Loop {
                counts,
                mut body,
                entry,
            } => {
                let (kept, back): (Accs, Accs) = entry
                    .into_iter()
                    .partition(|(r, _)| entry_site(&body, *r).is_some_and(|s| apart.contains(&s)));
                let mut left = absorb(back, &mut body);
                for (r, e) in kept {
                    let Some(MNode::Tok { acc, .. }) = first_for(&body, r).map(|i| &mut body[i])
                    else {
                        // entry_site found the rank's first call in the body.
                        left.insert(r, e);
                        continue;
                    };
                    let call = acc.entry(r).or_default();
                    // Where this loop's entry computes no more than its iterations (one
                    // of the loops at the site, one rank), it goes back: the split
                    // writes only compute the entry has beyond the iterations'.
                    if call.n > 0 && e.sum_ns * call.n as f64 <= call.sum_ns * e.n as f64 {
                        call.merge(&e);
                        continue;
                    }
                    let before = split_entry(e, call);
                    left.entry(r).or_default().merge(&before);
                }
                if !left.is_empty() {
                    out.push(MNode::Tok {
                        tok: Tok {
                            kind: Kind::Compute,
                            comm: super::comms::CommRef::World,
                            site: first_site(&body).unwrap_or(0),
                        },
                        acc: left,
                    });
                }
                out.push(MNode::Loop {
                    counts,
                    body: split_entries(body, apart),
                    entry: Accs::new(),
                });
            }
            MNode::Tok { .. } => out.push(node),
            MNode::Steps { count, body } => out.push(MNode::Steps {
                count,
                body: split_entries(body, apart),
            }),
            MNode::While { counts, body } => out.push(MNode::While {
                counts,
                body: split_entries(body, apart),
            }),
            MNode::If { branches } => out.push(MNode::If {
                branches: branches
                    .into_iter()
                    .map(|(r, b)| (r, split_entries(b, apart)))
                    .collect(),
            }),
            MNode::When {
                cond,
                then,
                otherwise,
                recorded,
            } => out.push(MNode::When {
                cond,
                then: split_entries(then, apart),
                otherwise: split_entries(otherwise, apart),
                recorded,
            }),
        }
    }
    out
}

/// The requests pending after `nodes`, starting from `pending`; `None` when one is posted
/// while it may still be pending or completed when it is not. Every branch is read as
/// possible (their pending requests joined, as `check`'s request analysis does) and
/// every loop as running its body twice.
pub(crate) fn pending_after(nodes: &[MNode], mut pending: BTreeSet<u32>) -> Option<BTreeSet<u32>> {
    for n in nodes {
        pending = match n {
            MNode::Tok { tok, .. } => {
                match &tok.kind {
                    Kind::P2p { req: Some(r), .. } | Kind::Coll { req: Some(r), .. }
                        if !pending.insert(*r) =>
                    {
                        return None;
                    }
                    Kind::Wait { slots, .. } => {
                        for r in slots {
                            if !pending.remove(r) {
                                return None;
                            }
                        }
                    }
                    _ => {}
                }
                pending
            }
            MNode::Loop { body, .. } | MNode::Steps { body, .. } | MNode::While { body, .. } => {
                let once = pending_after(body, pending)?;
                pending_after(body, once)?
            }
            MNode::When {
                then, otherwise, ..
            } => {
                let mut a = pending_after(then, pending.clone())?;
                a.extend(pending_after(otherwise, pending)?);
                a
            }
            MNode::If { branches } => {
                let mut out = BTreeSet::new();
                for (_, body) in branches {
                    out.extend(pending_after(body, pending.clone())?);
                }
                out
            }
        };
    }
    Some(pending)
}

#[cfg(test)]
mod walk_tests {
    use super::*;
    use proptest::prelude::*;

    /// The statistics as a recursive walk over the nest with every token in memory
    /// (how the pass computed them before it streamed).
    fn recursive(
        nest: &[Node],
        gaps: &[(u64, u64)],
        pos: &mut usize,
        depth: usize,
        out: &mut Vec<Acc>,
        leaf: &mut usize,
        ns: &mut (f64, f64),
    ) {
        for node in nest {
            match node {
                Node::Token(_) => {
                    let (gap, dur) = gaps[*pos];
                    out[*leaf].add(gap, dur);
                    let t = (gap + dur) as f64;
                    ns.1 += t;
                    if depth > 0 {
                        ns.0 += t;
                    }
                    *pos += 1;
                    *leaf += 1;
                }
                Node::Loop { count, body } => {
                    let first = *leaf;
                    for _ in 0..*count {
                        *leaf = first;
                        recursive(body, gaps, pos, depth + 1, out, leaf, ns);
                    }
                }
            }
        }
    }

    fn accs_of(nodes: &[MNode], out: &mut Vec<Acc>) {
        for node in nodes {
            match node {
                MNode::Tok { acc, .. } => out.extend(acc.values().cloned()),
                MNode::Loop { body, .. } | MNode::While { body, .. } => accs_of(body, out),
                MNode::If { .. } | MNode::Steps { .. } | MNode::When { .. } => {}
            }
        }
    }

    proptest! {
        #[test]
        fn the_walk_sums_like_the_recursive_walk(
            blocks in prop::collection::vec((prop::collection::vec(0u32..4, 1..5), 1u64..6), 1..8),
            seed in any::<u64>(),
        ) {
            let ids: Vec<u32> = blocks
                .iter()
                .flat_map(|(body, n)| (0..*n).flat_map(move |_| body.clone()))
                .collect();
            let mut x = seed | 1;
            let gaps: Vec<(u64, u64)> = ids
                .iter()
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % 1_000_003, x % 977)
                })
                .collect();
            let table: Vec<Tok> = (0..4)
                .map(|site| Tok {
                    kind: super::super::tokens::Kind::Wait {
                        op: perfskel_grammar::ast::WaitOp::Wait,
                        slots: vec![0],
                    },
                    comm: super::super::comms::CommRef::World,
                    site,
                })
                .collect();
            for algorithm in [Algorithm::Exact, Algorithm::Greedy] {
                let nest = compress::discover(&ids, algorithm);
                let mut walk = Walk::new(&nest);
                for (id, (gap, dur)) in ids.iter().zip(&gaps) {
                    walk.visit(*id, *gap, *dur, [None, None]);
                }
                let mut got = walk.finish(&nest, &table, 0).expect("the nest's own tokens");
                // The loops' entries are the first calls' visits on entering: put back,
                // every position holds all its visits.
                absorb_all(&mut got.nodes);
                let mut want = vec![Acc::default(); compress::description_len(&nest)];
                let (mut pos, mut leaf, mut ns) = (0, 0, (0.0, 0.0));
                recursive(&nest, &gaps, &mut pos, 0, &mut want, &mut leaf, &mut ns);
                let mut accs = Vec::new();
                accs_of(&got.nodes, &mut accs);
                want.truncate(accs.len());
                prop_assert_eq!(accs, want);
                prop_assert_eq!((got.in_loop_ns, got.total_ns), ns);
                prop_assert_eq!(got.tokens, ids.len() as u64);
            }
        }
    }

    #[test]
    fn other_tokens_than_the_nests_are_refused() {
        let nest = compress::discover(&[1, 2, 1, 2, 3], Algorithm::Exact);
        let table: Vec<Tok> = Vec::new();
        let mut walk = Walk::new(&nest);
        for id in [1, 2, 1, 3, 3] {
            walk.visit(id, 0, 0, [None, None]);
        }
        assert!(walk.finish(&nest, &table, 0).is_none());
        // One token short.
        let mut walk = Walk::new(&nest);
        for id in [1, 2, 1, 2] {
            walk.visit(id, 0, 0, [None, None]);
        }
        assert!(walk.finish(&nest, &table, 0).is_none());
    }
}
