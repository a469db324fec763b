//! SPMD merge: takes every rank's loop nest, gives one nest for all ranks.
//!
//! The merge walks the ranks' node lists side by side. At each step the ranks' next
//! nodes are grouped into candidates: tokens that unify (same operation, size, tag,
//! communicator and call site; peers whose direction sets intersect, `MPI_PROC_NULL`
//! matching any direction that names no neighbour on that rank) and loops (by count, or
//! all together when their bodies merge without rank conditions). A candidate is
//! emitted when it is a no-op on every rank that does not take part in it (all its
//! point-to-point operations go to a missing neighbour there): a border rank's skipped
//! exchange, a leaf's absent children, the root's absent parent. Each rank still
//! performs exactly its own sequence. When no candidate is a no-op for the others, the
//! ranks really differ: the rest of the list becomes an `if` over groups of ranks, each
//! merged on its own. Loops whose counts differ between ranks keep each rank's count.

use std::collections::BTreeMap;

use super::nest::MNode;
use super::tokens::{CollSize, Half, Kind, PeerAbs, Tok};
use super::topo::Directions;

pub(crate) struct Merger<'a> {
    pub dirs: &'a Directions,
}

enum Cand {
    Tok { tok: Tok, members: Vec<usize> },
    Loop { count: u64, members: Vec<usize> },
}

impl Cand {
    fn members(&self) -> &[usize] {
        match self {
            Cand::Tok { members, .. } | Cand::Loop { members, .. } => members,
        }
    }
}

impl Merger<'_> {
    /// Merges the node lists of `seqs` (one per rank, or per group of ranks).
    pub fn merge(&self, seqs: &[(u32, &[MNode])]) -> Vec<MNode> {
        self.merge_inner(seqs, true).unwrap_or_default()
    }

    /// Merges without rank conditions, or `None`.
    fn merge_strict(&self, seqs: &[(u32, &[MNode])]) -> Option<Vec<MNode>> {
        self.merge_inner(seqs, false).filter(|m| !has_if(m))
    }

    fn merge_inner(&self, seqs: &[(u32, &[MNode])], allow_split: bool) -> Option<Vec<MNode>> {
        let mut cursor = vec![0usize; seqs.len()];
        let mut out = Vec::new();
        loop {
            let active: Vec<usize> = (0..seqs.len())
                .filter(|&i| cursor[i] < seqs[i].1.len())
                .collect();
            if active.is_empty() {
                return Some(out);
            }
            let mut cands = self.candidates(seqs, &cursor, &active);
            cands.sort_by_key(|c| std::cmp::Reverse(c.members().len()));
            let mut chosen = None;
            for cand in &cands {
                let mut node = self.build(seqs, &cursor, cand);
                let outsiders = (0..seqs.len()).filter(|i| !cand.members().contains(i));
                let mut ok = true;
                for i in outsiders {
                    if !self.null_on(&mut node, seqs[i].0) {
                        ok = false;
                        break;
                    }
                }
                if ok {
                    chosen = Some((node, cand.members().to_vec()));
                    break;
                }
            }
            match chosen {
                Some((node, members)) => {
                    out.push(node);
                    for i in members {
                        cursor[i] += 1;
                    }
                }
                None => {
                    if let Some((node, advance)) = self.single_iterations(seqs, &cursor, &cands) {
                        out.push(node);
                        for (i, k) in advance {
                            cursor[i] += k;
                        }
                        continue;
                    }
                    if !allow_split {
                        return None;
                    }
                    out.push(self.split(seqs, &cursor, &cands));
                    return Some(out);
                }
            }
        }
    }

    fn candidates(
        &self,
        seqs: &[(u32, &[MNode])],
        cursor: &[usize],
        active: &[usize],
    ) -> Vec<Cand> {
        let mut cands: Vec<Cand> = Vec::new();
        for &i in active {
            match &seqs[i].1[cursor[i]] {
                MNode::Tok { tok, .. } => {
                    let joined = cands.iter_mut().any(|c| match c {
                        Cand::Tok { tok: t, members } => match unify(t, tok) {
                            Some(u) => {
                                *t = u;
                                members.push(i);
                                true
                            }
                            None => false,
                        },
                        Cand::Loop { .. } => false,
                    });
                    if !joined {
                        cands.push(Cand::Tok {
                            tok: tok.clone(),
                            members: vec![i],
                        });
                    }
                }
                MNode::Loop { counts, .. } => {
                    let count = counts.values().next().copied().unwrap_or(0);
                    let joined = cands.iter_mut().any(|c| match c {
                        Cand::Loop { count: k, members } if *k == count => {
                            members.push(i);
                            true
                        }
                        _ => false,
                    });
                    if !joined {
                        cands.push(Cand::Loop {
                            count,
                            members: vec![i],
                        });
                    }
                }
                // Single-rank input has no conditionals; a group keeps its own (folded
                // loops come after the merge).
                MNode::If { .. } | MNode::Steps { .. } | MNode::When { .. } => {
                    cands.push(Cand::Loop {
                        count: u64::MAX,
                        members: vec![i],
                    })
                }
            }
        }
        // Loops of different counts become one loop with per-rank counts when their
        // bodies merge without conditions (a data-dependent count).
        let loops: Vec<usize> = cands
            .iter()
            .filter(|c| matches!(c, Cand::Loop { count, .. } if *count != u64::MAX))
            .flat_map(|c| c.members().to_vec())
            .collect();
        let n_loop_cands = cands
            .iter()
            .filter(|c| matches!(c, Cand::Loop { count, .. } if *count != u64::MAX))
            .count();
        if n_loop_cands > 1 {
            let bodies: Vec<(u32, &[MNode])> = loops
                .iter()
                .filter_map(|&i| match &seqs[i].1[cursor[i]] {
                    MNode::Loop { body, .. } => Some((seqs[i].0, body.as_slice())),
                    _ => None,
                })
                .collect();
            if self.merge_strict(&bodies).is_some() {
                cands.retain(|c| !matches!(c, Cand::Loop { count, .. } if *count != u64::MAX));
                cands.push(Cand::Loop {
                    count: 0,
                    members: loops,
                });
            }
        }
        cands
    }

    fn build(&self, seqs: &[(u32, &[MNode])], cursor: &[usize], cand: &Cand) -> MNode {
        match cand {
            Cand::Tok { tok, members } => {
                let mut acc = BTreeMap::new();
                for &i in members {
                    if let MNode::Tok { acc: a, .. } = &seqs[i].1[cursor[i]] {
                        acc.extend(a.iter().map(|(r, v)| (*r, v.clone())));
                    }
                }
                MNode::Tok {
                    tok: tok.clone(),
                    acc,
                }
            }
            Cand::Loop { members, .. } => {
                if let [only] = members.as_slice() {
                    if let node @ MNode::If { .. } = &seqs[*only].1[cursor[*only]] {
                        return node.clone();
                    }
                }
                let mut counts = BTreeMap::new();
                let mut bodies = Vec::new();
                for &i in members {
                    if let MNode::Loop { counts: c, body } = &seqs[i].1[cursor[i]] {
                        counts.extend(c.iter().map(|(r, v)| (*r, *v)));
                        bodies.push((seqs[i].0, body.as_slice()));
                    }
                }
                MNode::Loop {
                    counts,
                    body: self.merge(&bodies),
                }
            }
        }
    }

    /// A loop on some ranks and, on the others, the same body once (a data-dependent
    /// count of 1, which loop discovery does not write as a loop): one loop with per-rank
    /// counts. Gives the node and how far each rank advances.
    fn single_iterations(
        &self,
        seqs: &[(u32, &[MNode])],
        cursor: &[usize],
        cands: &[Cand],
    ) -> Option<(MNode, Vec<(usize, usize)>)> {
        let looped = cands
            .iter()
            .filter(|c| matches!(c, Cand::Loop { count, .. } if *count != u64::MAX))
            .max_by_key(|c| c.members().len())?;
        let members = looped.members();
        let mut counts = BTreeMap::new();
        let mut bodies: Vec<(u32, &[MNode])> = Vec::new();
        let mut advance = Vec::new();
        for &i in members {
            if let MNode::Loop { counts: c, body } = &seqs[i].1[cursor[i]] {
                counts.extend(c.iter().map(|(r, v)| (*r, *v)));
                bodies.push((seqs[i].0, body.as_slice()));
                advance.push((i, 1));
            }
        }
        let len = bodies.first()?.1.len();
        for i in (0..seqs.len()).filter(|i| !members.contains(i)) {
            let rest = &seqs[i].1[cursor[i].min(seqs[i].1.len())..];
            if rest.len() < len || rest[..len].iter().any(|n| !matches!(n, MNode::Tok { .. })) {
                return None;
            }
            counts.insert(seqs[i].0, 1);
            bodies.push((seqs[i].0, &rest[..len]));
            advance.push((i, len));
        }
        let body = self.merge_strict(&bodies)?;
        Some((MNode::Loop { counts, body }, advance))
    }

    /// Whether `node` does nothing on `rank` (narrowing directions so that it stays so).
    fn null_on(&self, node: &mut MNode, rank: u32) -> bool {
        match node {
            MNode::Tok { tok, .. } => match null_tok(tok, rank, self.dirs) {
                Some(narrowed) => {
                    *tok = narrowed;
                    true
                }
                None => false,
            },
            MNode::Loop { body, .. } => body.iter_mut().all(|n| self.null_on(n, rank)),
            MNode::If { branches } => match branches.last_mut() {
                Some((_, body)) => body.iter_mut().all(|n| self.null_on(n, rank)),
                None => true,
            },
            MNode::Steps { .. } | MNode::When { .. } => false,
        }
    }

    /// The ranks really differ from here on: one branch per group of ranks.
    fn split(&self, seqs: &[(u32, &[MNode])], cursor: &[usize], cands: &[Cand]) -> MNode {
        let mut groups: Vec<Vec<usize>> = cands.iter().map(|c| c.members().to_vec()).collect();
        let finished: Vec<usize> = (0..seqs.len())
            .filter(|&i| cursor[i] >= seqs[i].1.len())
            .collect();
        if !finished.is_empty() {
            groups.push(finished);
        }
        for g in &mut groups {
            g.sort_unstable();
        }
        groups.sort();
        // Groups whose remaining sequences merge without conditions go together (a
        // worker that ran one task less than the others).
        let rest_of = |g: &[usize]| -> Vec<(u32, &[MNode])> {
            g.iter()
                .map(|&i| (seqs[i].0, &seqs[i].1[cursor[i]..]))
                .collect()
        };
        let mut buckets: Vec<(Vec<usize>, Vec<MNode>)> = Vec::new();
        for g in groups {
            let mut placed = false;
            for (members, merged) in buckets.iter_mut() {
                let mut both = members.clone();
                both.extend(&g);
                both.sort_unstable();
                if let Some(attempt) = self.merge_strict(&rest_of(&both)) {
                    *members = both;
                    *merged = attempt;
                    placed = true;
                    break;
                }
            }
            if !placed {
                let merged = self.merge(&rest_of(&g));
                buckets.push((g, merged));
            }
        }
        // The largest group is the `else`: it also takes the ranks the trace lacks.
        if let Some(largest) =
            (0..buckets.len()).max_by_key(|&g| (buckets[g].0.len(), usize::MAX - g))
        {
            let g = buckets.remove(largest);
            buckets.push(g);
        }
        let branches = buckets
            .into_iter()
            .map(|(g, merged)| (g.iter().map(|&i| seqs[i].0).collect(), merged))
            .collect();
        MNode::If { branches }
    }
}

fn has_if(nodes: &[MNode]) -> bool {
    nodes.iter().any(|n| match n {
        MNode::If { .. } => true,
        MNode::Loop { body, .. } | MNode::Steps { body, .. } => has_if(body),
        MNode::When {
            then, otherwise, ..
        } => has_if(then) || has_if(otherwise),
        MNode::Tok { .. } => false,
    })
}

/// The token both `a` and `b` are, if any.
pub(crate) fn unify(a: &Tok, b: &Tok) -> Option<Tok> {
    if a.comm != b.comm || a.site != b.site {
        return None;
    }
    let kind = match (&a.kind, &b.kind) {
        (
            Kind::P2p {
                op,
                halves,
                tag,
                req,
            },
            Kind::P2p {
                op: op2,
                halves: halves2,
                tag: tag2,
                req: req2,
            },
        ) if op == op2 && tag == tag2 && req == req2 && halves.len() == halves2.len() => {
            let halves = halves
                .iter()
                .zip(halves2)
                .map(|(x, y)| unify_half(x, y))
                .collect::<Option<Vec<_>>>()?;
            Kind::P2p {
                op: *op,
                halves,
                tag: *tag,
                req: *req,
            }
        }
        (
            Kind::Coll {
                op,
                nonblocking,
                size,
                root,
                req,
            },
            Kind::Coll {
                op: op2,
                nonblocking: nb2,
                size: size2,
                root: root2,
                req: req2,
            },
        ) if op == op2 && nonblocking == nb2 && root == root2 && req == req2 => {
            let size = match (size, size2) {
                (CollSize::PerRank(x), CollSize::PerRank(y)) => {
                    let mut m = x.clone();
                    m.extend(y.iter().map(|(r, v)| (*r, *v)));
                    CollSize::PerRank(m)
                }
                (x, y) if x == y => x.clone(),
                _ => return None,
            };
            Kind::Coll {
                op: *op,
                nonblocking: *nonblocking,
                size,
                root: *root,
                req: *req,
            }
        }
        (x, y) if x == y => x.clone(),
        _ => return None,
    };
    Some(Tok {
        kind,
        comm: a.comm,
        site: a.site,
    })
}

fn unify_half(a: &Half, b: &Half) -> Option<Half> {
    let peer = match (&a.peer, &b.peer) {
        (PeerAbs::Dirs { mask: m1, null: n1 }, PeerAbs::Dirs { mask: m2, null: n2 }) => {
            let mask = m1 & m2;
            let null = *n1 && *n2;
            if mask == 0 && !(null && *m1 == 0 && *m2 == 0) {
                return None;
            }
            PeerAbs::Dirs { mask, null }
        }
        (x, y) if x == y => x.clone(),
        _ => return None,
    };
    let bytes = match (a.bytes, b.bytes) {
        (Some(x), Some(y)) if x != y => return None,
        (x, y) => x.or(y),
    };
    Some(Half { peer, bytes })
}

/// `tok` as a no-op on `rank`: every point-to-point half goes to no neighbour there.
fn null_tok(tok: &Tok, rank: u32, dirs: &Directions) -> Option<Tok> {
    let Kind::P2p {
        op,
        halves,
        tag,
        req,
    } = &tok.kind
    else {
        return None;
    };
    // A nonblocking call binds its request on every rank that runs the statement, so
    // it cannot be a no-op for ranks whose sequence does not complete that request.
    if tok.comm != super::comms::CommRef::World || req.is_some() {
        return None;
    }
    let none = dirs.mask(rank, None);
    let halves = halves
        .iter()
        .map(|h| match h.peer {
            PeerAbs::Dirs { mask, null } if mask & none != 0 => Some(Half {
                peer: PeerAbs::Dirs {
                    mask: mask & none,
                    null,
                },
                bytes: h.bytes,
            }),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Tok {
        kind: Kind::P2p {
            op: *op,
            halves,
            tag: *tag,
            req: *req,
        },
        comm: tok.comm,
        site: tok.site,
    })
}
