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
//! performs exactly its own sequence. Tokens that differ in their peers only, where no
//! direction or shift relates them, join as one call with a table of each rank's peer
//! (`rank(per_rank(...))`: a random ring, the partners of a decomposition). When no
//! candidate is a no-op for the others, the
//! ranks really differ: the rest of the list becomes an `if` over groups of ranks, each
//! merged on its own. Loops whose counts differ between ranks keep each rank's count.

use std::collections::BTreeMap;

use super::nest::MNode;
use super::peers::peer_of;
use super::tokens::{CollSize, Half, Kind, PeerAbs, Tok};
use super::topo::Directions;

pub(crate) struct Merger<'a> {
    pub dirs: &'a Directions,
}

enum Cand {
    Tok {
        tok: Tok,
        members: Vec<usize>,
    },
    Loop {
        count: u64,
        members: Vec<usize>,
    },
    /// Task loops whose heads unify, however many tasks each rank took.
    While {
        head: Tok,
        members: Vec<usize>,
    },
}

impl Cand {
    fn members(&self) -> &[usize] {
        match self {
            Cand::Tok { members, .. }
            | Cand::Loop { members, .. }
            | Cand::While { members, .. } => members,
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
                    // The ranks differ for a while and then agree again: only the stretch
                    // between is rank-conditional.
                    if let Some(target) = self.resync(seqs, &cursor) {
                        let segs: Vec<(u32, &[MNode])> = (0..seqs.len())
                            .map(|i| (seqs[i].0, &seqs[i].1[cursor[i]..target[i]]))
                            .collect();
                        let start = vec![0; seqs.len()];
                        let active: Vec<usize> =
                            (0..segs.len()).filter(|&i| !segs[i].1.is_empty()).collect();
                        let seg_cands = self.candidates(&segs, &start, &active);
                        out.push(self.split(&segs, &start, &seg_cands));
                        cursor = target;
                        continue;
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
                        Cand::Loop { .. } | Cand::While { .. } => false,
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
                MNode::While { body, .. } => {
                    let Some(MNode::Tok { tok, .. }) = body.first() else {
                        cands.push(Cand::Loop {
                            count: u64::MAX,
                            members: vec![i],
                        });
                        continue;
                    };
                    let joined = cands.iter_mut().any(|c| match c {
                        Cand::While { head, members } => match unify(head, tok) {
                            Some(u) => {
                                *head = u;
                                members.push(i);
                                true
                            }
                            None => false,
                        },
                        _ => false,
                    });
                    if !joined {
                        cands.push(Cand::While {
                            head: tok.clone(),
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

    /// `a` (the call of `ranks`) and `b` (of `ranks_b`) as one call whose peers are a
    /// table of each rank's, when they differ in peers only and every rank has one.
    fn tabulate(&self, a: &Tok, ranks: &[u32], b: &Tok, ranks_b: &[u32]) -> Option<Tok> {
        unify_p2p(a, b, |x, y| {
            if let Some(h) = unify_half(x, y) {
                return Some(h);
            }
            let bytes = match (x.bytes, y.bytes) {
                (Some(p), Some(q)) if p != q => return None,
                (p, q) => p.or(q),
            };
            let mut table = BTreeMap::new();
            for &r in ranks {
                table.insert(r, peer_of(&x.peer, r, self.dirs)?);
            }
            for &r in ranks_b {
                table.insert(r, peer_of(&y.peer, r, self.dirs)?);
            }
            Some(Half {
                peer: PeerAbs::Table(table),
                bytes,
                shift: None,
                xor: None,
            })
        })
    }

    /// The merged nest with every `if` whose branches make the same calls, in the same
    /// loops, to different peers written once with tables of peers: where the ranks
    /// part only in whom they talk to (a random ring, the partners of a data
    /// decomposition), one statement stands for all. Where some ranks make none of the
    /// calls (a grid's diagonal, its own transpose partner), the others' branches join
    /// the same way and the `if` keeps two branches.
    pub fn tabulate_ifs(&self, nodes: Vec<MNode>) -> Vec<MNode> {
        nodes
            .into_iter()
            .flat_map(|node| match node {
                MNode::If { branches } => {
                    let branches: Vec<(Vec<u32>, Vec<MNode>)> = branches
                        .into_iter()
                        .map(|(ranks, body)| (ranks, self.tabulate_ifs(body)))
                        .collect();
                    if let Some(body) = self.join_all(branches.iter().map(|(_, b)| b)) {
                        return body;
                    }
                    // Ranks that skip a call others make to partners of their own (the
                    // diagonal of a grid, which is its own transpose partner): the
                    // others' branches as one, with tables, beside the empty one.
                    let (busy, idle): (Vec<_>, Vec<_>) =
                        branches.iter().partition(|(_, body)| !body.is_empty());
                    if busy.len() >= 2 && !idle.is_empty() {
                        if let Some(body) = self.join_all(busy.iter().map(|(_, b)| b)) {
                            let ranks = |set: &[&(Vec<u32>, Vec<MNode>)]| -> Vec<u32> {
                                let mut v: Vec<u32> =
                                    set.iter().flat_map(|(r, _)| r.iter().copied()).collect();
                                v.sort_unstable();
                                v
                            };
                            return vec![MNode::If {
                                branches: vec![(ranks(&busy), body), (ranks(&idle), Vec::new())],
                            }];
                        }
                    }
                    vec![MNode::If { branches }]
                }
                MNode::Loop {
                    counts,
                    body,
                    entry,
                } => vec![MNode::Loop {
                    counts,
                    body: self.tabulate_ifs(body),
                    entry,
                }],
                MNode::While { counts, body } => vec![MNode::While {
                    counts,
                    body: self.tabulate_ifs(body),
                }],
                other => vec![other],
            })
            .collect()
    }

    /// The bodies (of different ranks) as one, when they all make the same calls in the
    /// same loops and differ at most in peers.
    fn join_all<'b>(&self, mut bodies: impl Iterator<Item = &'b Vec<MNode>>) -> Option<Vec<MNode>> {
        let first = bodies.next()?.clone();
        bodies.try_fold(first, |acc, body| self.same_calls(&acc, body))
    }

    /// `a` and `b` (nodes of different ranks) as one list, when they make the same calls
    /// in the same loops and differ at most in peers.
    fn same_calls(&self, a: &[MNode], b: &[MNode]) -> Option<Vec<MNode>> {
        if a.len() != b.len() {
            return None;
        }
        a.iter()
            .zip(b)
            .map(|(x, y)| match (x, y) {
                (MNode::Tok { tok: t, acc: p }, MNode::Tok { tok: u, acc: q }) => {
                    let ranks_a: Vec<u32> = p.keys().copied().collect();
                    let ranks_b: Vec<u32> = q.keys().copied().collect();
                    let tok = unify(t, u).or_else(|| self.tabulate(t, &ranks_a, u, &ranks_b))?;
                    let mut acc = p.clone();
                    acc.extend(q.iter().map(|(r, a)| (*r, a.clone())));
                    Some(MNode::Tok { tok, acc })
                }
                (
                    MNode::Loop {
                        counts: c,
                        body: p,
                        entry: e,
                    },
                    MNode::Loop {
                        counts: d,
                        body: q,
                        entry: f,
                    },
                ) => {
                    let body = self.same_calls(p, q)?;
                    let mut counts = c.clone();
                    counts.extend(d.iter().map(|(r, n)| (*r, *n)));
                    let mut entry = e.clone();
                    entry.extend(f.iter().map(|(r, a)| (*r, a.clone())));
                    Some(MNode::Loop {
                        counts,
                        body,
                        entry,
                    })
                }
                (MNode::While { counts: c, body: p }, MNode::While { counts: d, body: q }) => {
                    let body = self.same_calls(p, q)?;
                    let mut counts = c.clone();
                    counts.extend(d.iter().map(|(r, n)| (*r, *n)));
                    Some(MNode::While { counts, body })
                }
                _ => None,
            })
            .collect()
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
                let mut entry = BTreeMap::new();
                let mut bodies = Vec::new();
                for &i in members {
                    if let MNode::Loop {
                        counts: c,
                        body,
                        entry: e,
                    } = &seqs[i].1[cursor[i]]
                    {
                        counts.extend(c.iter().map(|(r, v)| (*r, *v)));
                        entry.extend(e.iter().map(|(r, a)| (*r, a.clone())));
                        bodies.push((seqs[i].0, body.as_slice()));
                    }
                }
                MNode::Loop {
                    counts,
                    body: self.merge(&bodies),
                    entry,
                }
            }
            Cand::While { head, members } => {
                // The bodies of the ranks that took tasks; the others only received
                // the message that ended the loop (their head's statistics).
                let mut counts = BTreeMap::new();
                let mut bodies = Vec::new();
                let mut idle = BTreeMap::new();
                for &i in members {
                    if let MNode::While { counts: c, body } = &seqs[i].1[cursor[i]] {
                        counts.extend(c.iter().map(|(r, v)| (*r, *v)));
                        if c.values().any(|n| *n > 0) {
                            bodies.push((seqs[i].0, body.as_slice()));
                        } else if let Some(MNode::Tok { acc, .. }) = body.first() {
                            idle.extend(acc.iter().map(|(r, a)| (*r, a.clone())));
                        }
                    }
                }
                let mut body = if bodies.is_empty() {
                    vec![MNode::Tok {
                        tok: head.clone(),
                        acc: BTreeMap::new(),
                    }]
                } else {
                    self.merge(&bodies)
                };
                if let Some(MNode::Tok { tok, acc }) = body.first_mut() {
                    *tok = unify(tok, head).unwrap_or_else(|| tok.clone());
                    acc.extend(idle);
                }
                MNode::While { counts, body }
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
        let mut entry = BTreeMap::new();
        let mut bodies: Vec<(u32, &[MNode])> = Vec::new();
        let mut advance = Vec::new();
        for &i in members {
            if let MNode::Loop {
                counts: c,
                body,
                entry: e,
            } = &seqs[i].1[cursor[i]]
            {
                counts.extend(c.iter().map(|(r, v)| (*r, *v)));
                entry.extend(e.iter().map(|(r, a)| (*r, a.clone())));
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
        Some((
            MNode::Loop {
                counts,
                body,
                entry,
            },
            advance,
        ))
    }

    /// Where, after `cursor`, every rank's list reaches a node that merges with the
    /// others' (the same call, or a loop that merges): the positions, with the fewest
    /// nodes skipped in all, looking at most [`RESYNC_WINDOW`] nodes ahead. `None` when
    /// a rank has ended or nothing within reach agrees.
    fn resync(&self, seqs: &[(u32, &[MNode])], cursor: &[usize]) -> Option<Vec<usize>> {
        if (0..seqs.len()).any(|i| cursor[i] >= seqs[i].1.len()) {
            return None;
        }
        // Per rank after the first: sync key -> positions within the window, in order.
        let windows: Vec<BTreeMap<SyncKey, Vec<usize>>> = (1..seqs.len())
            .map(|i| {
                let end = (cursor[i] + RESYNC_WINDOW).min(seqs[i].1.len());
                let mut m: BTreeMap<SyncKey, Vec<usize>> = BTreeMap::new();
                for p in cursor[i]..end {
                    if let Some(k) = sync_key(&seqs[i].1[p]) {
                        m.entry(k).or_default().push(p);
                    }
                }
                m
            })
            .collect();
        let all: Vec<usize> = (0..seqs.len()).collect();
        let end0 = (cursor[0] + RESYNC_WINDOW).min(seqs[0].1.len());
        let mut best: Option<(usize, Vec<usize>)> = None;
        for p0 in cursor[0]..end0 {
            let skip0 = p0 - cursor[0];
            if best.as_ref().is_some_and(|(c, _)| skip0 >= *c) {
                break;
            }
            let Some(key) = sync_key(&seqs[0].1[p0]) else {
                continue;
            };
            let mut target = vec![p0];
            let mut cost = skip0;
            for (i, w) in (1..).zip(&windows) {
                let Some(&p) = w.get(&key).and_then(|ps| ps.first()) else {
                    cost = usize::MAX;
                    break;
                };
                cost += p - cursor[i];
                target.push(p);
            }
            if cost == 0 || cost == usize::MAX || best.as_ref().is_some_and(|(c, _)| cost >= *c) {
                continue;
            }
            // Requests stay within the stretch (each branch completes what it posts), and
            // then the same test the walk applies: one candidate every rank takes.
            if !(0..seqs.len()).all(|i| closed(&seqs[i].1[cursor[i]..target[i]])) {
                continue;
            }
            let cands = self.candidates(seqs, &target, &all);
            if cands.iter().any(|c| c.members().len() == seqs.len()) {
                best = Some((cost, target));
            }
        }
        best.map(|(_, t)| t)
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
            // A `while recv` from no neighbour would still run (its receive returns at
            // once): not left to the peer.
            MNode::Steps { .. } | MNode::When { .. } | MNode::While { .. } => false,
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

/// How far ahead [`Merger::resync`] looks for a point where the ranks agree again.
const RESYNC_WINDOW: usize = 4096;

/// What must be equal for two nodes to merge: a token's communicator, call site and
/// operation; a loop's first call.
type SyncKey = (bool, super::comms::CommRef, u32, u8);

fn sync_key(node: &MNode) -> Option<SyncKey> {
    match node {
        MNode::Tok { tok, .. } => Some((false, tok.comm, tok.site, kind_code(&tok.kind))),
        MNode::Loop { body, .. } => {
            let (_, comm, site, kind) = body.first().and_then(sync_key)?;
            Some((true, comm, site, kind))
        }
        MNode::If { .. } | MNode::Steps { .. } | MNode::When { .. } | MNode::While { .. } => None,
    }
}

/// Whether `nodes` complete every request they post and no other.
fn closed(nodes: &[MNode]) -> bool {
    super::nest::pending_after(nodes, Default::default()).is_some_and(|p| p.is_empty())
}

fn kind_code(kind: &Kind) -> u8 {
    match kind {
        Kind::P2p { op, .. } => *op as u8,
        Kind::Coll { op, .. } => 64 + *op as u8,
        Kind::Wait { op, .. } => 128 + *op as u8,
        Kind::Exchange { .. } => 192,
        Kind::Compute => 255,
    }
}

pub(crate) fn has_if(nodes: &[MNode]) -> bool {
    nodes.iter().any(|n| match n {
        MNode::If { .. } => true,
        MNode::Loop { body, .. } | MNode::Steps { body, .. } | MNode::While { body, .. } => {
            has_if(body)
        }
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
        (Kind::P2p { .. }, Kind::P2p { .. }) => return unify_p2p(a, b, unify_half),
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

/// The half both `a` and `b` are: a direction both name, the same explicit rank, or,
/// failing those, the same shift (`rank + k`: a ring over all ranks that no direction
/// of the topology follows everywhere, HPCC's natural ring on a 2 × 4 torus), or the
/// same bits flipped (`rank ^ k`: a recursive-doubling step).
/// Point-to-point calls `a` and `b` as one, their halves joined by `half`: the same
/// communicator, call site, operation, tag, request and number of halves.
fn unify_p2p(a: &Tok, b: &Tok, mut half: impl FnMut(&Half, &Half) -> Option<Half>) -> Option<Tok> {
    let (
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
    ) = (&a.kind, &b.kind)
    else {
        return None;
    };
    if a.comm != b.comm
        || a.site != b.site
        || op != op2
        || tag != tag2
        || req != req2
        || halves.len() != halves2.len()
    {
        return None;
    }
    let halves = halves
        .iter()
        .zip(halves2)
        .map(|(x, y)| half(x, y))
        .collect::<Option<Vec<_>>>()?;
    Some(Tok {
        kind: Kind::P2p {
            op: *op,
            halves,
            tag: *tag,
            req: *req,
        },
        comm: a.comm,
        site: a.site,
    })
}

fn unify_half(a: &Half, b: &Half) -> Option<Half> {
    let shift = if a.shift == b.shift { a.shift } else { None };
    let xor = if a.xor == b.xor { a.xor } else { None };
    let peer = match (&a.peer, &b.peer) {
        (PeerAbs::Dirs { mask: m1, null: n1 }, PeerAbs::Dirs { mask: m2, null: n2 }) => {
            let mask = m1 & m2;
            let null = *n1 && *n2;
            (mask != 0 || (null && *m1 == 0 && *m2 == 0)).then_some(PeerAbs::Dirs { mask, null })
        }
        (x, y) if x == y => Some(x.clone()),
        _ => None,
    };
    let peer = match (peer, shift, xor) {
        (Some(p), _, _) => p,
        (None, Some(k), _) => PeerAbs::Shift(k),
        (None, None, Some(k)) => PeerAbs::Xor(k),
        (None, None, None) => return None,
    };
    let bytes = match (a.bytes, b.bytes) {
        (Some(x), Some(y)) if x != y => return None,
        (x, y) => x.or(y),
    };
    Some(Half {
        peer,
        bytes,
        shift,
        xor,
    })
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
                shift: None,
                xor: None,
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
