//! Loops over peers: takes the merged nest, gives it with every run of blocks that make
//! the same calls to peers that step by a constant (rank 0 measuring the latency to
//! rank 1, then 2, then 3, ... as HPCC does; a root sending to each rank in turn) written
//! as one loop whose variable names the peer: `loop 15 as i { send rank(i + 1) ... }`.
//!
//! The compressor finds loops of equal tokens, and such blocks differ in their peer, so
//! each stays on its own: 15 copies at 16 ranks, 63 at 64, a skeleton that grows with
//! the rank count. A run qualifies when at least [`MIN_RUN`] blocks of up to
//! [`MAX_BLOCK`] nodes in a row are the same calls (operation, sizes, communicator, call
//! site, loops with the same counts) on the same ranks, and each peer of the block is the
//! same rank on all of them and moves by the same step from one block to the next. The
//! statistics of each position are those of all blocks together.

use super::nest::MNode;
use super::tokens::{Kind, PeerAbs, Tok};
use super::topo::Directions;

/// Blocks of at most this many nodes are tried.
const MAX_BLOCK: usize = 8;

/// Runs of fewer blocks stay as they are.
const MIN_RUN: usize = 3;

/// The nest with its runs over peers folded; loops the fold made (`Steps`) are left
/// alone, so that no two loop variables nest.
pub(crate) fn peer_loops(nodes: Vec<MNode>, dirs: &Directions) -> Vec<MNode> {
    let nodes: Vec<MNode> = nodes
        .into_iter()
        .map(|node| match node {
            MNode::Loop {
                counts,
                body,
                entry,
            } => MNode::Loop {
                counts,
                body: peer_loops(body, dirs),
                entry,
            },
            MNode::If { branches } => MNode::If {
                branches: branches
                    .into_iter()
                    .map(|(ranks, body)| (ranks, peer_loops(body, dirs)))
                    .collect(),
            },
            other => other,
        })
        .collect();
    let mut out = Vec::with_capacity(nodes.len());
    let mut i = 0;
    while i < nodes.len() {
        let best = (1..=MAX_BLOCK)
            .filter_map(|len| run_at(&nodes, i, len, dirs).map(|(m, node)| (m * len, len, node)))
            .max_by_key(|(covered, len, _)| (*covered, std::cmp::Reverse(*len)));
        match best {
            Some((covered, _, node)) => {
                out.push(node);
                i += covered;
            }
            None => {
                out.push(nodes[i].clone());
                i += 1;
            }
        }
    }
    out
}

/// The run of blocks of `len` nodes starting at `at`: how many, and the loop that
/// stands for them.
fn run_at(nodes: &[MNode], at: usize, len: usize, dirs: &Directions) -> Option<(usize, MNode)> {
    let block = |t: usize| nodes.get(at + t * len..at + (t + 1) * len);
    let first = block(0)?;
    let mut peers0 = Vec::new();
    if !collect_peers(first, dirs, &mut peers0) || peers0.is_empty() {
        return None;
    }
    let mut peers1 = Vec::new();
    let second = block(1)?;
    if !same_calls(first, second) || !collect_peers(second, dirs, &mut peers1) {
        return None;
    }
    let strides: Vec<Option<i64>> = peers0
        .iter()
        .zip(&peers1)
        .map(|(a, b)| Some(b.as_ref()? - a.as_ref()?))
        .collect();
    // Every peer either moves by its stride or stays; at least one moves.
    if !strides.iter().any(|s| s.is_some_and(|s| s != 0)) {
        return None;
    }
    let affine = |t: usize, peers: &[Option<i64>]| {
        peers
            .iter()
            .zip(&peers0)
            .zip(&strides)
            .all(|((p, p0), s)| match (p, p0, s) {
                (Some(p), Some(p0), Some(s)) => *p == p0 + s * t as i64,
                (None, None, None) => true,
                _ => false,
            })
    };
    if !affine(1, &peers1) {
        return None;
    }
    let mut m = 2;
    while let Some(next) = block(m) {
        let mut peers = Vec::new();
        if !same_calls(first, next) || !collect_peers(next, dirs, &mut peers) || !affine(m, &peers)
        {
            break;
        }
        m += 1;
    }
    if m < MIN_RUN {
        return None;
    }
    let mut body = first.to_vec();
    for t in 1..m {
        add_stats(&mut body, block(t)?);
    }
    let mut k = 0;
    set_steps(&mut body, &peers0, &strides, &mut k);
    Some((
        m,
        MNode::Steps {
            count: m as u64,
            body,
        },
    ))
}

/// Whether `a` and `b` make the same calls in the same loops on the same ranks, peers
/// aside.
fn same_calls(a: &[MNode], b: &[MNode]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| match (x, y) {
            (MNode::Tok { tok: t, acc: p }, MNode::Tok { tok: u, acc: q }) => {
                p.keys().eq(q.keys()) && without_peers(t) == without_peers(u)
            }
            (
                MNode::Loop {
                    counts: c, body: p, ..
                },
                MNode::Loop {
                    counts: d, body: q, ..
                },
            ) => c == d && same_calls(p, q),
            _ => false,
        })
}

fn without_peers(tok: &Tok) -> Tok {
    let mut t = tok.clone();
    if let Kind::P2p { halves, .. } = &mut t.kind {
        for h in halves {
            // `source` is no rank: a call to it is another call.
            if h.peer != PeerAbs::Source {
                h.peer = PeerAbs::Any;
            }
            h.shift = None;
            h.xor = None;
        }
    }
    t
}

/// The peers of every point-to-point half of `nodes`, in order: the rank each names,
/// the same on every rank that makes the call (`None` for any source and for `source`);
/// false when a peer differs between those ranks or is no rank.
fn collect_peers(nodes: &[MNode], dirs: &Directions, out: &mut Vec<Option<i64>>) -> bool {
    for node in nodes {
        match node {
            MNode::Tok { tok, acc } => {
                if let Kind::P2p { halves, .. } = &tok.kind {
                    for h in halves {
                        if matches!(h.peer, PeerAbs::Any | PeerAbs::Source) {
                            out.push(None);
                            continue;
                        }
                        let mut seen = None;
                        for &r in acc.keys() {
                            let Some(p) = peer_of(&h.peer, r, dirs) else {
                                return false;
                            };
                            if seen.is_some_and(|s| s != p) {
                                return false;
                            }
                            seen = Some(p);
                        }
                        match seen {
                            Some(p) => out.push(Some(i64::from(p))),
                            None => return false,
                        }
                    }
                }
            }
            MNode::Loop { body, .. } => {
                if !collect_peers(body, dirs, out) {
                    return false;
                }
            }
            _ => return false,
        }
    }
    true
}

/// The rank `peer` names from `rank` (of the call's communicator), if any: the SPMD
/// merge's tables and the loops over peers read concrete peers through it.
pub(crate) fn peer_of(peer: &PeerAbs, rank: u32, dirs: &Directions) -> Option<u32> {
    let n = dirs.peers.len() as u64;
    let p = match peer {
        PeerAbs::Dirs { mask, null: false } if *mask != 0 => {
            let bit = mask.trailing_zeros() as usize;
            dirs.peers.get(rank as usize)?.get(bit).copied().flatten()?
        }
        PeerAbs::Rank(p) => return Some(*p),
        PeerAbs::Shift(k) => (u64::from(rank) + u64::from(*k)) % n.max(1),
        PeerAbs::Xor(k) => u64::from(rank ^ *k),
        PeerAbs::Table(t) => return t.get(&rank).copied(),
        _ => return None,
    };
    u32::try_from(p).ok()
}

/// Adds the statistics of `other` (a block of the same calls) to `into`.
fn add_stats(into: &mut [MNode], other: &[MNode]) {
    for (a, b) in into.iter_mut().zip(other) {
        match (a, b) {
            (MNode::Tok { acc, .. }, MNode::Tok { acc: more, .. }) => {
                for (r, x) in more {
                    acc.entry(*r).or_default().merge(x);
                }
            }
            (MNode::Loop { body, .. }, MNode::Loop { body: more, .. }) => add_stats(body, more),
            _ => {}
        }
    }
}

/// Writes the moving peers of `nodes` as steps of the loop's variable, in the order
/// [`collect_peers`] read them (`k` counts the halves seen).
fn set_steps(nodes: &mut [MNode], base: &[Option<i64>], strides: &[Option<i64>], k: &mut usize) {
    for node in nodes {
        match node {
            MNode::Tok { tok, .. } => {
                if let Kind::P2p { halves, .. } = &mut tok.kind {
                    for h in halves {
                        if let (Some(Some(b)), Some(Some(s))) = (base.get(*k), strides.get(*k)) {
                            if *s != 0 {
                                h.peer = PeerAbs::Step {
                                    base: *b,
                                    stride: *s,
                                };
                                h.shift = None;
                                h.xor = None;
                            }
                        }
                        *k += 1;
                    }
                }
            }
            MNode::Loop { body, .. } => set_steps(body, base, strides, k),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use perfskel_grammar::ast::{P2pOp, Topology};

    use super::*;
    use crate::skeletonize::comms::CommRef;
    use crate::skeletonize::nest::Acc;
    use crate::skeletonize::tokens::Half;

    fn send(peer: u32, site: u32) -> MNode {
        let mut acc = Acc::default();
        acc.add(1000, 10);
        MNode::Tok {
            tok: Tok {
                kind: Kind::P2p {
                    op: P2pOp::Send,
                    halves: vec![Half {
                        peer: PeerAbs::Rank(peer),
                        bytes: Some(8),
                        shift: None,
                        xor: None,
                    }],
                    tag: None,
                    req: None,
                },
                comm: CommRef::World,
                site,
            },
            acc: BTreeMap::from([(0, acc)]),
        }
    }

    /// Rank 0 pings ranks 1 to 7 in turn (a send, a loop of two sends, a send per
    /// peer): one loop of 7 over a block of three nodes, peers `i + 1`, the statistics
    /// of the seven blocks together; a block repeated only twice stays.
    #[test]
    fn blocks_that_step_through_the_peers_are_one_loop() {
        let dirs = Directions::new(Topology::Complete, 8);
        let mut nodes = Vec::new();
        for p in 1..8 {
            nodes.push(send(p, 1));
            nodes.push(MNode::Loop {
                counts: BTreeMap::from([(0, 9)]),
                body: vec![send(p, 2), send(p, 3)],
                entry: BTreeMap::new(),
            });
            nodes.push(send(p, 4));
        }
        nodes.push(send(5, 6));
        nodes.push(send(6, 6));
        let out = peer_loops(nodes, &dirs);
        assert_eq!(out.len(), 3, "{out:#?}");
        let MNode::Steps { count: 7, body } = &out[0] else {
            panic!("{out:#?}");
        };
        let MNode::Tok { tok, acc } = &body[0] else {
            panic!("{body:#?}");
        };
        let Kind::P2p { halves, .. } = &tok.kind else {
            panic!("{tok:?}");
        };
        assert_eq!(halves[0].peer, PeerAbs::Step { base: 1, stride: 1 });
        assert_eq!(acc[&0].n, 7);
        assert!(matches!(&out[1], MNode::Tok { .. }));
    }
}
