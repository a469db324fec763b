//! Task farms: a worker that receives from one call site whatever the tag and goes on
//! while the tag is the task tag (`MPI_Recv(..., MPI_ANY_TAG, ...)`, then `if
//! (status.MPI_TAG == STOP) break;`) becomes `while recv PEER SIZE tag T { ... }`, so
//! that where the skeleton runs each worker takes as many tasks as come to it, not the
//! number it happened to take in the traced run.
//!
//! The survey finds the *serve sites*: blocking receive sites whose matched tags are, on
//! every rank, runs of one tag T (the same on every rank) each ended by another tag. The
//! tags of everything received there must then be written, and so must the tags of the
//! sends those messages came from, while every other tag stays 0 (the policy when tags
//! vary): per pair of ranks, communicator and tag, MPI delivers messages in the order
//! they were sent (a receive that matched a message of tag t matches every message of
//! tag t from that sender), so the k-th send on such a channel is the k-th receive of it,
//! and the receiver's sequence of receive sites per channel (kept as runs) says which
//! sends fed a serve site ([`Serve::feeds`]). The tokenizer gives those sends and the
//! serve sites' receives their real tags.
//!
//! Then, per rank, [`to_while`] rewrites the nest: a loop whose body receives at a serve
//! site with tag T, followed by the receive there with another tag, becomes a
//! [`MNode::While`] (one iteration written without a loop, and no iteration at all, too).
//! Where some rank's nest cannot be rewritten so, [`strip`] takes the tags away again on
//! every rank: a worker that receives a fixed number of tasks must not be sent a number
//! the master decides as it runs.

use std::collections::{BTreeMap, BTreeSet};

use perfskel_grammar::ast::P2pOp;

use super::comms::{CommRef, Comms};
use super::nest::{Acc, MNode};
use super::tokens::{Kind, Tok};
use crate::logicalize::trace::is_send;
use crate::trace::stats::SiteKey;
use crate::trace::{Event, Op};

/// A call site (object, offset).
type Site = (String, u64);

/// Distinct tags kept per receive site and rank; a site with more serves no loop.
const MAX_TAGS: usize = 8;

/// Runs of receive sites kept per channel; a channel with more says only which sites
/// received on it (none of them is a serve site then).
const MAX_RUNS: usize = 64;

/// Receives of another tag than the loop's (each ends a loop) a rank may make at a
/// serve site: a worker stops once per farm; a receive whose tag changes every few
/// calls (one function receiving each dimension's halo with its own tag) serves no
/// loop.
const MAX_ENDS: u64 = 16;

/// The matched tags of one receive site on one rank.
#[derive(Clone, Debug, Default)]
struct SiteTags {
    /// Only blocking `MPI_Recv` calls were made there (a serve site is one).
    blocking: bool,
    /// Per tag, the receives and the runs of them (receives of it in a row).
    counts: BTreeMap<i64, (u64, u64)>,
    last: Option<i64>,
    too_many: bool,
}

/// The receive sites that took the messages of one channel, in order.
#[derive(Clone, Debug)]
struct Runs<S> {
    runs: Vec<(S, u64)>,
    total: u64,
    /// More runs than [`MAX_RUNS`]: `sites` lists the sites.
    overflow: bool,
    sites: BTreeSet<S>,
}

impl<S: Ord + Clone> Default for Runs<S> {
    fn default() -> Self {
        Runs {
            runs: Vec::new(),
            total: 0,
            overflow: false,
            sites: BTreeSet::new(),
        }
    }
}

impl<S: Ord + Clone + PartialEq> Runs<S> {
    fn add(&mut self, site: S) {
        self.total += 1;
        if self.overflow {
            self.sites.insert(site);
            return;
        }
        let full = self.runs.len() >= MAX_RUNS;
        match self.runs.last_mut() {
            Some((s, n)) if *s == site => *n += 1,
            _ if full => {
                self.overflow = true;
                self.sites.extend(self.runs.drain(..).map(|(s, _)| s));
                self.sites.insert(site);
            }
            _ => self.runs.push((site, 1)),
        }
    }

    fn sites(&self) -> BTreeSet<S> {
        let mut all = self.sites.clone();
        all.extend(self.runs.iter().map(|(s, _)| s.clone()));
        all
    }
}

/// Sends of one channel as the sender made them.
#[derive(Clone, Copy, Debug, Default)]
struct Sends {
    n: u64,
    /// Some were the send half of a sendrecv (one tag clause for both halves: such a
    /// send cannot carry its own tag).
    sendrecv: bool,
}

/// A channel from one rank's side: (the other world rank, rank-local communicator id,
/// tag).
type LocalKey = (i64, u64, i64);

/// One rank's share of the survey, by rank-local site and communicator ids.
#[derive(Debug, Default)]
pub(crate) struct RankServe {
    sites: BTreeMap<u64, SiteTags>,
    recvs: BTreeMap<LocalKey, Runs<u64>>,
    sends: BTreeMap<LocalKey, Sends>,
}

impl RankServe {
    pub fn add(&mut self, ev: &Event) {
        let comm = ev.comm.unwrap_or(0);
        let (received, tag) = match ev.op {
            Op::Recv | Op::Irecv => (ev.peer, ev.tag),
            Op::Sendrecv | Op::SendrecvReplace => (ev.src, ev.rtag),
            _ => (None, None),
        };
        if let (Some(src), Some(tag)) = (received, tag) {
            if src >= 0 {
                self.recvs.entry((src, comm, tag)).or_default().add(ev.site);
                let site = self.sites.entry(ev.site).or_insert_with(|| SiteTags {
                    blocking: true,
                    ..SiteTags::default()
                });
                site.blocking &= ev.op == Op::Recv;
                let new_run = site.last != Some(tag);
                site.last = Some(tag);
                if !site.too_many {
                    let c = site.counts.entry(tag).or_default();
                    c.0 += 1;
                    c.1 += u64::from(new_run);
                    site.too_many = site.counts.len() > MAX_TAGS;
                }
            }
        }
        let sent = if is_send(ev.op) || matches!(ev.op, Op::Sendrecv | Op::SendrecvReplace) {
            ev.peer.zip(ev.tag)
        } else {
            None
        };
        if let Some((dst, tag)) = sent.filter(|(d, _)| *d >= 0) {
            let s = self.sends.entry((dst, comm, tag)).or_default();
            s.n += 1;
            s.sendrecv |= !is_send(ev.op);
        }
    }
}

/// What a site's tags say on one rank: the loop tag, if it has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    /// Not a serve site on this rank.
    No,
    /// Only ending tags (the rank took no task).
    Ends,
    /// Runs of tag T, each ended by another: T, its receives and runs.
    Loop(i64, u64, u64),
}

fn verdict(t: &SiteTags) -> Verdict {
    if !t.blocking || t.too_many {
        return Verdict::No;
    }
    // The loop tag: the most frequent one other than the last (the last ends a loop).
    let y = t
        .counts
        .iter()
        .filter(|(tag, _)| Some(**tag) != t.last)
        .max_by_key(|(tag, (n, _))| (*n, std::cmp::Reverse(**tag)));
    let total: u64 = t.counts.values().map(|(n, _)| n).sum();
    match y {
        Some((&y, &(n, runs))) if y >= 0 && total - n <= MAX_ENDS => Verdict::Loop(y, n, runs),
        Some(_) => Verdict::No,
        None if total <= MAX_ENDS => Verdict::Ends,
        None => Verdict::No,
    }
}

/// What the ranks say of one site: the loop tag they agree on (`None`: some rank says
/// no, or two tags; `Some(None)`: only ends so far), and their tasks and runs of them.
#[derive(Clone, Copy, Debug)]
struct SiteVerdict {
    y: Option<Option<i64>>,
    tasks: u64,
    runs: u64,
}

impl Default for SiteVerdict {
    fn default() -> Self {
        SiteVerdict {
            y: Some(None),
            tasks: 0,
            runs: 0,
        }
    }
}

/// The trace-wide survey of serve sites and of the channels that feed them.
#[derive(Debug, Default)]
pub(crate) struct ServeSurvey {
    /// Per site, what its ranks say.
    sites: BTreeMap<Site, SiteVerdict>,
    /// Per site, the ranks that received there.
    takers: BTreeMap<Site, u32>,
    /// Per receiving rank, its channels' runs of sites.
    recvs: BTreeMap<u32, BTreeMap<LocalKey, Runs<Site>>>,
    /// Per sending rank, its channels' sends.
    sends: BTreeMap<u32, BTreeMap<LocalKey, Sends>>,
}

impl ServeSurvey {
    /// Adds one rank read to its end; `sites` names its call sites.
    pub fn add_rank(&mut self, rank: u32, part: RankServe, sites: &BTreeMap<u64, SiteKey>) {
        let key_of = |site: &u64| -> Site {
            sites
                .get(site)
                .map(|k| (k.object.clone(), k.offset))
                .unwrap_or_default()
        };
        // Sites that may still serve a loop after this rank: only their channels are kept
        // (a halo's receives, with one tag, say no at once).
        let mut maybe: BTreeSet<u64> = BTreeSet::new();
        for (site, tags) in &part.sites {
            *self.takers.entry(key_of(site)).or_default() += 1;
            let v = verdict(tags);
            if v != Verdict::No {
                maybe.insert(*site);
            }
            let entry = self.sites.entry(key_of(site)).or_default();
            entry.y = match (entry.y, v) {
                (None, _) | (_, Verdict::No) => None,
                (Some(y), Verdict::Ends) => Some(y),
                (Some(None), Verdict::Loop(y, ..)) => Some(Some(y)),
                (Some(Some(a)), Verdict::Loop(b, ..)) => (a == b).then_some(Some(a)),
            };
            if let Verdict::Loop(_, n, runs) = v {
                entry.tasks += n;
                entry.runs += runs;
            }
        }
        let recvs = part
            .recvs
            .into_iter()
            .filter(|(_, runs)| runs.sites().iter().any(|s| maybe.contains(s)))
            .map(|(key, runs)| {
                let mut out = Runs::<Site> {
                    runs: runs.runs.iter().map(|(s, n)| (key_of(s), *n)).collect(),
                    total: runs.total,
                    overflow: runs.overflow,
                    sites: runs.sites.iter().map(key_of).collect(),
                };
                // Two local ids of one place are one site.
                out.runs.dedup_by(|b, a| {
                    if a.0 == b.0 {
                        a.1 += b.1;
                        true
                    } else {
                        false
                    }
                });
                (key, out)
            })
            .collect();
        self.recvs.insert(rank, recvs);
        self.sends.insert(rank, part.sends);
    }

    /// Decides which sites serve loops, once the communicators are known: those whose
    /// every rank agrees on a loop tag, all of whose channels were sent by plain sends
    /// as many as were received, with their runs known. A site only one rank received
    /// at serves none: a lone worker takes every task, however they come, so the
    /// traced count is the count anywhere, and a loop with a count can be cut to the
    /// ratio (a `while` is not: its tasks are the messages that come). Nor does one
    /// whose runs of tasks are one receive long on average: a tag that changes at
    /// every call or two follows the program, not the tasks that come.
    pub fn decide(self, comms: &Comms) -> Serve {
        let mut serve: BTreeMap<Site, u32> = self
            .sites
            .iter()
            .filter(|(site, _)| self.takers.get(*site).copied().unwrap_or(0) >= 2)
            .filter_map(|(site, v)| match v.y {
                Some(Some(y)) if v.tasks >= 2 * v.runs => {
                    Some((site.clone(), u32::try_from(y).ok()?))
                }
                _ => None,
            })
            .collect();
        if serve.is_empty() {
            return Serve::default();
        }
        let mut sends: BTreeMap<Channel, Sends> = BTreeMap::new();
        for (&rank, keys) in &self.sends {
            for (&(dst, comm, tag), s) in keys {
                let (Ok(dst), Some(comm)) = (u32::try_from(dst), comms.lookup(rank, comm)) else {
                    continue;
                };
                let e = sends.entry((rank, dst, comm, tag)).or_default();
                e.n += s.n;
                e.sendrecv |= s.sendrecv;
            }
        }
        let mut channels: BTreeMap<Channel, Runs<Site>> = BTreeMap::new();
        let mut bad: BTreeSet<Site> = BTreeSet::new();
        for (&rank, keys) in &self.recvs {
            for (&(src, comm, tag), runs) in keys {
                let serves = runs.sites().into_iter().any(|s| serve.contains_key(&s));
                if !serves {
                    continue;
                }
                let (Ok(src), Some(comm)) = (u32::try_from(src), comms.lookup(rank, comm)) else {
                    bad.extend(runs.sites());
                    continue;
                };
                let key = (src, rank, comm, tag);
                let sent = sends.get(&key).copied().unwrap_or_default();
                if runs.overflow || sent.sendrecv || sent.n != runs.total {
                    bad.extend(runs.sites());
                    continue;
                }
                channels.insert(key, runs.clone());
            }
        }
        serve.retain(|site, _| !bad.contains(site));
        let channels = channels
            .into_iter()
            .filter_map(|(key, runs)| {
                let mut at = 0;
                let mut fed = Vec::new();
                for (site, n) in &runs.runs {
                    if serve.contains_key(site) {
                        fed.push((at, at + n));
                    }
                    at += n;
                }
                (!fed.is_empty()).then_some((key, fed))
            })
            .collect();
        Serve {
            sites: serve,
            channels,
        }
    }
}

/// A channel: (sender, receiver) world ranks, communicator, tag.
type Channel = (u32, u32, CommRef, i64);

/// The serve sites and the sends that feed them.
#[derive(Debug, Default)]
pub(crate) struct Serve {
    /// Serve site → its loop tag.
    pub sites: BTreeMap<Site, u32>,
    /// Per channel, the ranges of its messages (0-based, end excluded) received at a
    /// serve site.
    channels: BTreeMap<Channel, Vec<(u64, u64)>>,
}

impl Serve {
    pub fn is_empty(&self) -> bool {
        self.sites.is_empty()
    }

    /// Whether any message of `src`'s on this channel fed a serve site (the sender
    /// counts its sends on those only).
    pub fn watches(&self, src: u32, dst: i64, comm: CommRef, tag: i64) -> bool {
        u32::try_from(dst).is_ok_and(|d| self.channels.contains_key(&(src, d, comm, tag)))
    }

    /// Whether the `k`-th (0-based) message `src` sent on the channel was received at a
    /// serve site.
    pub fn feeds(&self, src: u32, dst: i64, comm: CommRef, tag: i64, k: u64) -> bool {
        let Ok(d) = u32::try_from(dst) else {
            return false;
        };
        self.channels
            .get(&(src, d, comm, tag))
            .is_some_and(|ranges| ranges.iter().any(|(a, b)| (*a..*b).contains(&k)))
    }
}

/// The receive of a serve site in a token: its tag, if the token is one (`sites`: serve
/// site index → loop tag).
fn serve_recv(tok: &Tok, sites: &BTreeMap<u32, u32>) -> Option<(u32, u32)> {
    match &tok.kind {
        Kind::P2p {
            op: P2pOp::Recv,
            tag: Some(t),
            ..
        } => sites.get(&tok.site).map(|y| (*t, *y)),
        _ => None,
    }
}

/// Whether two nodes make the same calls (compute aside).
fn same_calls(a: &[MNode], b: &[MNode]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| match (x, y) {
            (MNode::Tok { tok: t, .. }, MNode::Tok { tok: u, .. }) => t == u,
            (
                MNode::Loop {
                    counts: c, body: p, ..
                },
                MNode::Loop {
                    counts: d, body: q, ..
                },
            ) => c.values().eq(d.values()) && same_calls(p, q),
            _ => false,
        })
}

/// Whether any node holds a receive of a serve site outside a `while` head.
fn has_serve_recv(nodes: &[MNode], sites: &BTreeMap<u32, u32>) -> bool {
    nodes.iter().any(|n| match n {
        MNode::Tok { tok, .. } => serve_recv(tok, sites).is_some(),
        MNode::While { body, .. } => has_serve_recv(body.get(1..).unwrap_or(&[]), sites),
        MNode::Loop { body, .. } | MNode::Steps { body, .. } => has_serve_recv(body, sites),
        MNode::If { branches } => branches.iter().any(|(_, b)| has_serve_recv(b, sites)),
        MNode::When {
            then, otherwise, ..
        } => has_serve_recv(then, sites) || has_serve_recv(otherwise, sites),
    })
}

/// One rank's nest with its task loops as `while`s, or `None` where a receive of a
/// serve site is left outside one (`sites`: serve site index → loop tag).
pub(crate) fn to_while(
    nodes: &[MNode],
    rank: u32,
    sites: &BTreeMap<u32, u32>,
) -> Option<Vec<MNode>> {
    // The task loops are rewritten call by call: every loop's entry goes back into its
    // first call first (a farm's loops are not split at their first iteration).
    let mut nodes = nodes.to_vec();
    super::nest::absorb_all(&mut nodes);
    let out = rewrite(&nodes, rank, sites)?;
    (!has_serve_recv(&out, sites)).then_some(out)
}

/// [`to_while`] on one list of nodes (and the bodies of its loops), the task receives
/// it finds no end for left as they are.
fn rewrite(nodes: &[MNode], rank: u32, sites: &BTreeMap<u32, u32>) -> Option<Vec<MNode>> {
    let mut out: Vec<MNode> = Vec::with_capacity(nodes.len());
    for node in nodes {
        let node = match node {
            MNode::Loop {
                counts,
                body,
                entry,
            } => MNode::Loop {
                counts: counts.clone(),
                body: rewrite(body, rank, sites)?,
                entry: entry.clone(),
            },
            other => other.clone(),
        };
        let MNode::Tok { tok: end, acc } = &node else {
            out.push(node);
            continue;
        };
        let Some((tag, y)) = serve_recv(end, sites) else {
            out.push(node);
            continue;
        };
        if tag == y {
            // A task's receive: its loop ends at the next receive of another tag.
            out.push(node);
            continue;
        }
        let mut head = end.clone();
        if let Kind::P2p { tag, .. } = &mut head.kind {
            *tag = Some(y);
        }
        // The task's receive: the same call but for its tag and size (a message that
        // stops a worker may be shorter than a task).
        let unsized_head = without_sizes(&head);
        let is_head =
            |n: &MNode| matches!(n, MNode::Tok { tok, .. } if without_sizes(tok) == unsized_head);
        // The last node before the end that holds a receive of the site, and which.
        let back = out.iter().rposition(|n| {
            has_serve_recv(std::slice::from_ref(n), sites) || matches!(n, MNode::While { .. })
        });
        let mut merged = acc.clone();
        let looped = back.and_then(|at| match &out[at] {
            MNode::Loop { counts, body, .. } => {
                let h = body.iter().position(is_head)?;
                let p = &body[..h];
                (at + 1 + p.len() == out.len() && same_calls(p, &out[at + 1..]))
                    .then(|| (at, counts.clone(), body.clone(), h))
            }
            _ => None,
        });
        if let Some((at, counts, body, h)) = looped {
            // loop { P; recv T; Q } P; recv X  →  P; while recv T { Q; P }
            let tail = out.split_off(at + 1);
            out.pop();
            out.extend(tail);
            let mut head_node = body[h].clone();
            if let MNode::Tok { acc, .. } = &mut head_node {
                add_accs(acc, &merged);
            }
            let mut wbody = vec![head_node];
            wbody.extend(body[h + 1..].iter().cloned());
            wbody.extend(body[..h].iter().cloned());
            out.push(MNode::While {
                counts,
                body: wbody,
            });
            continue;
        }
        match back {
            // One task: recv T; Q; recv X  →  while recv T { Q }
            Some(at) if is_head(&out[at]) => {
                let mut wbody = out.split_off(at);
                if let Some(MNode::Tok { acc, .. }) = wbody.first_mut() {
                    add_accs(acc, &merged);
                }
                out.push(MNode::While {
                    counts: [(rank, 1)].into(),
                    body: wbody,
                });
            }
            // No task: recv X  →  while recv T { }
            None => {
                out.push(MNode::While {
                    counts: [(rank, 0)].into(),
                    body: vec![MNode::Tok {
                        tok: head,
                        acc: std::mem::take(&mut merged),
                    }],
                });
            }
            Some(at) if matches!(out[at], MNode::While { .. }) => {
                out.push(MNode::While {
                    counts: [(rank, 0)].into(),
                    body: vec![MNode::Tok {
                        tok: head,
                        acc: std::mem::take(&mut merged),
                    }],
                });
            }
            Some(_) => return None,
        }
    }
    Some(out)
}

/// A token with its message sizes left out.
fn without_sizes(tok: &Tok) -> Tok {
    let mut t = tok.clone();
    if let Kind::P2p { halves, .. } = &mut t.kind {
        for h in halves {
            h.bytes = None;
        }
    }
    t
}

/// The task loops in a nest.
pub(crate) fn count_whiles(nodes: &[MNode]) -> usize {
    nodes
        .iter()
        .map(|n| match n {
            MNode::Tok { .. } => 0,
            MNode::While { body, .. } => 1 + count_whiles(body),
            MNode::Loop { body, .. } | MNode::Steps { body, .. } => count_whiles(body),
            MNode::If { branches } => branches.iter().map(|(_, b)| count_whiles(b)).sum(),
            MNode::When {
                then, otherwise, ..
            } => count_whiles(then) + count_whiles(otherwise),
        })
        .sum()
}

fn add_accs(into: &mut BTreeMap<u32, Acc>, more: &BTreeMap<u32, Acc>) {
    for (r, a) in more {
        into.entry(*r).or_default().merge(a);
    }
}

/// The nest with the tags [`Serve`] gave its calls taken away (every tag 0, as where
/// tags vary): for when some rank's task loop cannot be a `while`.
pub(crate) fn strip(nodes: &[MNode]) -> Vec<MNode> {
    super::nest::map_toks(nodes, &|tok, acc| {
        let mut tok = tok.clone();
        if let Kind::P2p { tag, .. } = &mut tok.kind {
            *tag = None;
        }
        (tok, acc.clone())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skeletonize::tokens::{Half, PeerAbs};

    fn ev(op: Op, site: u64, peer: i64, tag: i64) -> Event {
        Event {
            op,
            site,
            peer: Some(peer),
            tag: Some(tag),
            bytes: Some(16),
            comm: Some(0),
            ..Event::default()
        }
    }

    fn sites() -> BTreeMap<u64, SiteKey> {
        (1..10).map(|s| (s, SiteKey::at("app", s))).collect()
    }

    /// A farm of `tasks[w]` tasks per worker w (ranks 1..): the master sends tasks
    /// (tag 1) from site 1 and stops (tag `stop_tag`) from site 2; a worker receives at
    /// site 5 and answers from site 6.
    fn farm(tasks: &[u64], stop_tag: i64) -> Serve {
        let mut all = ServeSurvey::default();
        let mut master = RankServe::default();
        for (w, n) in tasks.iter().enumerate() {
            let w = w as i64 + 1;
            for _ in 0..*n {
                master.add(&ev(Op::Send, 1, w, 1));
                master.add(&ev(Op::Recv, 3, w, 3));
            }
            master.add(&ev(Op::Send, 2, w, stop_tag));
        }
        all.add_rank(0, master, &sites());
        for (w, n) in tasks.iter().enumerate() {
            let mut worker = RankServe::default();
            for _ in 0..*n {
                worker.add(&ev(Op::Recv, 5, 0, 1));
                worker.add(&ev(Op::Send, 6, 0, 3));
            }
            worker.add(&ev(Op::Recv, 5, 0, stop_tag));
            all.add_rank(w as u32 + 1, worker, &sites());
        }
        all.decide(&Comms::default())
    }

    #[test]
    fn a_receive_that_goes_on_while_one_tag_comes_serves_a_loop() {
        // Worker 3 took no task: its only receive was the stop.
        let serve = farm(&[3, 2, 0], 2);
        assert_eq!(serve.sites, [(("app".to_string(), 5), 1)].into());
        // Every task and every stop the master sent fed it; the results did not.
        for k in 0..3 {
            assert!(serve.feeds(0, 1, CommRef::World, 1, k));
        }
        assert!(!serve.feeds(0, 1, CommRef::World, 1, 3));
        assert!(serve.feeds(0, 3, CommRef::World, 2, 0));
        assert!(!serve.watches(1, 0, CommRef::World, 3));
    }

    #[test]
    fn a_receive_of_one_tag_only_serves_no_loop() {
        // The stop has the task's tag: nothing tells a task from the end.
        assert!(farm(&[3, 2, 1], 1).is_empty());
    }

    #[test]
    fn a_receive_whose_tag_follows_the_program_serves_no_loop() {
        // Two ranks exchange a halo per dimension through one function: its receive
        // gets tags 0, 1, 2 in turn (runs of one), or 0, 0, 1 (an end every third
        // receive, 100 of them): neither is a worker taking tasks.
        for pattern in [&[0, 1, 2][..], &[0, 0, 1][..]] {
            let mut all = ServeSurvey::default();
            for rank in 0..2u32 {
                let peer = 1 - i64::from(rank);
                let mut part = RankServe::default();
                for _ in 0..100 {
                    for &tag in pattern {
                        part.add(&ev(Op::Send, 1, peer, tag));
                        part.add(&ev(Op::Recv, 5, peer, tag));
                    }
                }
                all.add_rank(rank, part, &sites());
            }
            assert!(all.decide(&Comms::default()).is_empty(), "{pattern:?}");
        }
    }

    #[test]
    fn a_lone_worker_keeps_its_count() {
        // One worker takes every task however they come: its loop keeps the count.
        assert!(farm(&[5], 2).is_empty());
    }

    #[test]
    fn a_site_fed_by_messages_the_survey_cannot_pair_serves_no_loop() {
        let mut all = ServeSurvey::default();
        let mut master = RankServe::default();
        master.add(&ev(Op::Send, 1, 1, 1));
        master.add(&ev(Op::Send, 2, 1, 2));
        all.add_rank(0, master, &sites());
        let mut worker = RankServe::default();
        // Two tasks received for one sent (a rank the trace lacks sent the other).
        worker.add(&ev(Op::Recv, 5, 0, 1));
        worker.add(&ev(Op::Recv, 5, 0, 1));
        worker.add(&ev(Op::Recv, 5, 0, 2));
        all.add_rank(1, worker, &sites());
        assert!(all.decide(&Comms::default()).is_empty());
    }

    /// A call of rank 0 at `site` (`tag` None: tags not kept).
    fn p2p(op: P2pOp, site: u32, tag: Option<u32>, bytes: u64) -> Tok {
        Tok {
            kind: Kind::P2p {
                op,
                halves: vec![Half {
                    peer: PeerAbs::Rank(0),
                    bytes: Some(bytes),
                    shift: None,
                    xor: None,
                }],
                tag,
                req: None,
            },
            comm: CommRef::World,
            site,
        }
    }

    /// A receive of the serve site 5.
    fn recv(tag: u32, bytes: u64) -> Tok {
        p2p(P2pOp::Recv, 5, Some(tag), bytes)
    }

    fn send(site: u32) -> Tok {
        p2p(P2pOp::Send, site, None, 8)
    }

    fn tok(t: Tok, visits: u64) -> MNode {
        let mut acc = Acc::default();
        for _ in 0..visits {
            acc.add(1000, 10);
        }
        MNode::Tok {
            tok: t,
            acc: [(1, acc)].into(),
        }
    }

    fn visits(node: &MNode) -> u64 {
        match node {
            MNode::Tok { acc, .. } => acc.values().map(|a| a.n).sum(),
            _ => 0,
        }
    }

    #[test]
    fn loops_of_tasks_become_while_loops() {
        let sites = [(5, 1)].into();
        // loop 4 { send ready; recv task; send result }; send ready; recv stop (a
        // shorter message)  →  send ready; while recv task { send result; send ready }
        let nest = vec![
            MNode::Loop {
                counts: [(1, 4)].into(),
                body: vec![tok(send(7), 4), tok(recv(1, 16), 4), tok(send(6), 4)],
                entry: BTreeMap::new(),
            },
            tok(send(7), 1),
            tok(recv(2, 0), 1),
        ];
        let out = to_while(&nest, 1, &sites).expect("rewritten");
        assert_eq!(out.len(), 2, "{out:#?}");
        assert!(matches!(&out[0], MNode::Tok { tok, .. } if *tok == send(7)));
        let MNode::While { counts, body } = &out[1] else {
            panic!("{out:#?}");
        };
        assert_eq!(counts, &[(1, 4)].into());
        // The head: the task's receive, its statistics over all five receives.
        assert!(matches!(&body[0], MNode::Tok { tok, .. } if *tok == recv(1, 16)));
        assert_eq!(visits(&body[0]), 5);
        assert!(matches!(&body[1], MNode::Tok { tok, .. } if *tok == send(6)));
        assert!(matches!(&body[2], MNode::Tok { tok, .. } if *tok == send(7)));

        // One task (no loop) and no task.
        let once = vec![tok(recv(1, 16), 1), tok(send(6), 1), tok(recv(2, 16), 1)];
        let out = to_while(&once, 1, &sites).expect("rewritten");
        assert!(
            matches!(&out[..], [MNode::While { counts, body }] if counts[&1] == 1 && body.len() == 2 && visits(&body[0]) == 2),
            "{out:#?}"
        );
        let none = vec![tok(send(7), 1), tok(recv(2, 16), 1)];
        let out = to_while(&none, 1, &sites).expect("rewritten");
        assert!(
            matches!(&out[1], MNode::While { counts, body } if counts[&1] == 0 && body.len() == 1 && matches!(&body[0], MNode::Tok { tok, .. } if *tok == recv(1, 16))),
            "{out:#?}"
        );
    }

    #[test]
    fn the_workers_task_loops_merge_whatever_their_counts() {
        use crate::skeletonize::merge::Merger;
        use crate::skeletonize::topo::Directions;
        use perfskel_grammar::ast::Topology;
        let sites = [(5, 1)].into();
        let worker = |rank: u32, tasks: u64| -> Vec<MNode> {
            let at = |t: Tok, visits: u64| match tok(t, visits) {
                MNode::Tok { tok, acc } => MNode::Tok {
                    tok,
                    acc: acc.into_values().map(|a| (rank, a)).collect(),
                },
                other => other,
            };
            let mut nest = Vec::new();
            if tasks > 0 {
                nest.push(MNode::Loop {
                    counts: [(rank, tasks)].into(),
                    body: vec![at(recv(1, 16), tasks), at(send(6), tasks)],
                    entry: BTreeMap::new(),
                });
            }
            nest.push(at(recv(2, 16), 1));
            to_while(&nest, rank, &sites).expect("rewritten")
        };
        // Rank 3 took no task: its loop has only the receive that ended it.
        let nests = [(1, worker(1, 5)), (2, worker(2, 3)), (3, worker(3, 0))];
        let seqs: Vec<(u32, &[MNode])> = nests.iter().map(|(r, n)| (*r, n.as_slice())).collect();
        let merger = Merger {
            dirs: &Directions::new(Topology::Star, 4),
        };
        let merged = merger.merge(&seqs);
        let [MNode::While { counts, body }] = merged.as_slice() else {
            panic!("{merged:#?}");
        };
        assert_eq!(counts, &[(1, 5), (2, 3), (3, 0)].into());
        assert_eq!(body.len(), 2, "{body:#?}");
        // The head: every rank's receives, the one that ended rank 3's loop included.
        let MNode::Tok { tok: head, acc } = &body[0] else {
            panic!("{body:#?}");
        };
        assert_eq!(head, &recv(1, 16));
        let visits: BTreeMap<u32, u64> = acc.iter().map(|(r, a)| (*r, a.n)).collect();
        assert_eq!(visits, [(1, 6), (2, 4), (3, 1)].into());
    }

    #[test]
    fn tasks_that_are_not_one_loop_leave_the_nest_alone() {
        let sites = [(5, 1)].into();
        // Two tasks of different kinds (no loop with the stop after it): the rank
        // would receive a fixed number of tasks, so the caller takes the tags away.
        let nest = vec![
            MNode::Loop {
                counts: [(1, 3)].into(),
                body: vec![tok(recv(1, 16), 3), tok(send(6), 3)],
                entry: BTreeMap::new(),
            },
            tok(send(8), 1),
            tok(recv(2, 16), 1),
        ];
        assert!(to_while(&nest, 1, &sites).is_none());
        let stripped = strip(&nest);
        assert!(matches!(
            &stripped[2],
            MNode::Tok {
                tok: Tok {
                    kind: Kind::P2p { tag: None, .. },
                    ..
                },
                ..
            }
        ));
    }
}
