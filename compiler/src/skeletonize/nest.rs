//! Per-rank loop nests: takes one rank's tokens and runs [`compress::discover`] on them,
//! gives the nest as [`MNode`]s carrying, for every token position of a loop body, the
//! statistics of the compute spans before it over all iterations (count, mean, spread)
//! and the MPI time spent there. [`MNode`] is also what the SPMD merge produces.

use std::collections::BTreeMap;

use super::spread::Spread;
use super::tokens::{RankTokens, Tok};
use crate::compress::{self, Algorithm, Node};

/// Running statistics of the compute spans at one body position on one rank (count,
/// sum, sum of squares and their distribution), and the MPI time of the calls there.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Acc {
    pub n: u64,
    pub sum_ns: f64,
    pub sum_sq: f64,
    pub mpi_ns: f64,
    pub spread: Spread,
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
    Loop {
        counts: BTreeMap<u32, u64>,
        body: Vec<MNode>,
    },
    /// Rank-conditional code: each branch with the ranks that take it; the last branch
    /// is the `else` and also takes every rank not listed.
    If {
        branches: Vec<(Vec<u32>, Vec<MNode>)>,
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

/// Finds one rank's nest; `tokens.table` gives each id's token.
pub(crate) fn rank_nest(tokens: &RankTokens, algorithm: Algorithm) -> RankNest {
    let nest = compress::discover(&tokens.ids, algorithm);
    let mut nodes = shape(&nest, tokens);
    let mut walk = Walk {
        tokens,
        pos: 0,
        in_loop_ns: 0.0,
        total_ns: 0.0,
    };
    walk.accumulate(&mut nodes, &nest, 0);
    RankNest {
        description_len: compress::description_len(&nest),
        nodes,
        tokens: tokens.ids.len() as u64,
        in_loop_ns: walk.in_loop_ns,
        total_ns: walk.total_ns,
    }
}

fn shape(nest: &[Node], tokens: &RankTokens) -> Vec<MNode> {
    nest.iter()
        .map(|node| match node {
            Node::Token(id) => MNode::Tok {
                tok: tokens.table[*id as usize].clone(),
                acc: [(tokens.rank, Acc::default())].into(),
            },
            Node::Loop { count, body } => MNode::Loop {
                counts: [(tokens.rank, *count)].into(),
                body: shape(body, tokens),
            },
        })
        .collect()
}

struct Walk<'a> {
    tokens: &'a RankTokens,
    pos: usize,
    in_loop_ns: f64,
    total_ns: f64,
}

impl Walk<'_> {
    fn accumulate(&mut self, nodes: &mut [MNode], nest: &[Node], depth: usize) {
        for (mnode, node) in nodes.iter_mut().zip(nest) {
            match (mnode, node) {
                (MNode::Tok { acc, .. }, Node::Token(_)) => {
                    let gap = self.tokens.gap_ns.get(self.pos).copied().unwrap_or(0);
                    let dur = self.tokens.dur_ns.get(self.pos).copied().unwrap_or(0);
                    if let Some(a) = acc.values_mut().next() {
                        a.add(gap, dur);
                    }
                    let t = (gap + dur) as f64;
                    self.total_ns += t;
                    if depth > 0 {
                        self.in_loop_ns += t;
                    }
                    self.pos += 1;
                }
                (
                    MNode::Loop { body, .. },
                    Node::Loop {
                        count,
                        body: nest_body,
                    },
                ) => {
                    for _ in 0..*count {
                        self.accumulate(body, nest_body, depth + 1);
                    }
                }
                _ => {}
            }
        }
    }
}
