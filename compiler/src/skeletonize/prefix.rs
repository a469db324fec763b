//! Killed runs: takes the ranks of a trace where some rank stopped before `MPI_Finalize`
//! (killed, crashed, or its last second of events lost with it), gives the longest
//! prefix of every rank that is a consistent cut of the run ([`consistent_cut`]) and the
//! ranks read only up to it ([`Cut`]).
//!
//! A skeleton made of ranks that stopped at different points does not check: one rank
//! loops 99 times, its neighbours 150, and their messages never match. A cut is
//! consistent when, inside it, every message sent was received and every message received
//! was sent (counted per pair of world ranks), every collective was entered by all the
//! members of its communicator (counted per group of world ranks, in order), and every
//! request made was completed. The pass starts from each rank's whole trace and moves a
//! rank's end back to the first call that breaks one of these, until none does: each
//! move only shortens a prefix, so it ends, at the longest consistent cut.

use std::collections::BTreeMap;

use super::source::{self, Opened, RankEvents, Ranks};
use crate::logicalize::trace::is_send;
use crate::trace::stats::SiteKey;
use crate::trace::{Completion, Event, Memory, Op, OpClass, TraceError};

/// Where each rank's events end in the cut.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Rank → (events kept, events read). Unreadable or missing ranks are absent.
    pub keep: BTreeMap<u32, (u64, u64)>,
}

impl Plan {
    /// Events the cut leaves out, over all ranks.
    pub fn cut_events(&self) -> u64 {
        self.keep.values().map(|(k, n)| n - k).sum()
    }

    /// What was cut, for the summary: `stopped` are the ranks that ended before
    /// `MPI_Finalize`.
    pub fn describe(&self, stopped: &[u32]) -> String {
        let list = |r: &[u32]| r.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
        let kept: u64 = self.keep.values().map(|(k, _)| k).sum();
        let read: u64 = self.keep.values().map(|(_, n)| n).sum();
        let mut per_rank: Vec<String> = self
            .keep
            .iter()
            .filter(|(_, (k, n))| k < n)
            .map(|(r, (k, n))| format!("rank {r} {k} of {n}"))
            .collect();
        if per_rank.len() > 8 {
            let more = per_rank.len() - 8;
            per_rank.truncate(8);
            per_rank.push(format!("... ({more} more ranks cut)"));
        }
        format!(
            "the run was cut short: rank(s) {} stopped before MPI_Finalize; every rank is cut to the last point where all messages sent were received, all collectives entered by every member and all requests completed ({kept} of {read} events kept; {}): the skeleton, and its app_time, are of that part of the run",
            list(stopped),
            if per_rank.is_empty() {
                "no rank lost an event".to_string()
            } else {
                per_rank.join(", ")
            }
        )
    }
}

/// One rank's calls that the cut must keep consistent, by event index.
#[derive(Default)]
struct RankCalls {
    /// Destination world rank → indices of sends to it.
    sends: BTreeMap<u32, Vec<u64>>,
    /// Source world rank → indices of receives from it.
    recvs: BTreeMap<u32, Vec<u64>>,
    /// Indices of receives from any source (unresolved): they may match any sender.
    any_recvs: Vec<u64>,
    /// Group (interned world-rank list) → indices of collectives on it.
    colls: BTreeMap<usize, Vec<u64>>,
    /// (index of the call that made a request, index of the call that completed it, or
    /// `u64::MAX` when the trace never completes it), in the order made.
    requests: Vec<(u64, u64)>,
    events: u64,
}

/// How many of `indices` (sorted) fall before `limit`.
fn before(indices: &[u64], limit: u64) -> usize {
    indices.partition_point(|&i| i < limit)
}

/// Reads every rank once and gives the longest consistent cut, or `None` when every
/// readable rank is whole in it (nothing to cut).
pub(crate) fn consistent_cut(ranks: &dyn Ranks) -> Option<Plan> {
    let n_ranks = ranks.n_ranks();
    let mut groups: BTreeMap<Vec<i64>, usize> = BTreeMap::new();
    let mut calls: BTreeMap<u32, RankCalls> = BTreeMap::new();
    let mut complete: BTreeMap<u32, bool> = BTreeMap::new();
    for rank in 0..n_ranks {
        let mut raw = Raw::default();
        let Ok((stream, n)) = source::read_rank(ranks, rank, &mut |ev| raw.add(ev)) else {
            continue;
        };
        complete.insert(
            rank,
            matches!(stream.completion(), Completion::Complete { .. }),
        );
        let members = stream.comms();
        calls.insert(rank, raw.resolve(rank, n_ranks, n, &members, &mut groups));
    }
    if complete.values().all(|c| *c) {
        return None;
    }
    // A request a whole rank never completed was freed (MPI_Request_free writes no
    // event): it binds nothing. One a cut-off rank never completed was lost with it.
    for (rank, c) in calls.iter_mut() {
        if complete.get(rank) == Some(&true) {
            c.requests.retain(|(_, done)| *done != u64::MAX);
        }
    }
    let mut limit: BTreeMap<u32, u64> = calls.iter().map(|(r, c)| (*r, c.events)).collect();
    // Members of each group, for the collectives.
    let mut members_of: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
    for (rank, c) in &calls {
        for g in c.colls.keys() {
            members_of.entry(*g).or_default().push(*rank);
        }
    }
    let lower = |limit: &mut BTreeMap<u32, u64>, rank: u32, to: u64| -> bool {
        match limit.get_mut(&rank) {
            Some(l) if to < *l => {
                *l = to;
                true
            }
            _ => false,
        }
    };
    loop {
        let mut changed = false;
        // Messages, per pair.
        for (&s, cs) in &calls {
            for (&d, sends) in &cs.sends {
                let Some(cd) = calls.get(&d) else { continue };
                let (ls, ld) = (limit[&s], limit[&d]);
                let sent = before(sends, ls);
                let from = cd.recvs.get(&s).map_or(&[][..], Vec::as_slice);
                let got = before(from, ld);
                let any = before(&cd.any_recvs, ld);
                if sent > got + any {
                    changed |= lower(&mut limit, s, sends[got + any]);
                }
            }
            for (&src, recvs) in &cs.recvs {
                let Some(csrc) = calls.get(&src) else {
                    continue;
                };
                let (ls, lsrc) = (limit[&s], limit[&src]);
                let got = before(recvs, ls);
                let to = csrc.sends.get(&s).map_or(&[][..], Vec::as_slice);
                let sent = before(to, lsrc);
                if got > sent {
                    changed |= lower(&mut limit, s, recvs[sent]);
                }
            }
        }
        // Collectives, per group: as many as the member that entered fewest.
        for (g, members) in &members_of {
            let counts: Vec<(u32, usize)> = members
                .iter()
                .map(|r| {
                    let n = calls
                        .get(r)
                        .and_then(|c| c.colls.get(g))
                        .map_or(0, |v| before(v, limit[r]));
                    (*r, n)
                })
                .collect();
            let fewest = counts.iter().map(|(_, n)| *n).min().unwrap_or(0);
            for (r, n) in counts {
                if n > fewest {
                    let at = calls[&r].colls[g][fewest];
                    changed |= lower(&mut limit, r, at);
                }
            }
        }
        // Requests: none made inside the cut and completed outside it.
        for (&r, c) in &calls {
            let l = limit[&r];
            if let Some((made, _)) = c
                .requests
                .iter()
                .take_while(|(made, _)| *made < l)
                .find(|(_, done)| *done >= l)
            {
                changed |= lower(&mut limit, r, *made);
            }
        }
        if !changed {
            break;
        }
    }
    Some(Plan {
        keep: calls
            .iter()
            .map(|(r, c)| (*r, (limit[r], c.events)))
            .collect(),
    })
}

/// A rank's calls as read, communicators still by local id.
#[derive(Default)]
struct Raw {
    index: u64,
    sends: Vec<(u64, i64)>,
    recvs: Vec<(u64, i64)>,
    /// (index, communicator id) of each collective; `u64::MAX`: `MPI_COMM_WORLD` (init
    /// and finalize).
    colls: Vec<(u64, u64)>,
    /// Communicator ids that are intercommunicators (their records list the remote
    /// group: collectives on them are not counted).
    inter: std::collections::BTreeSet<u64>,
    made: BTreeMap<u64, u64>,
    requests: Vec<(u64, u64)>,
}

const WORLD: u64 = u64::MAX;

impl Raw {
    fn add(&mut self, ev: &Event) {
        let i = self.index;
        self.index += 1;
        match ev.op {
            Op::Sendrecv | Op::SendrecvReplace => {
                self.sends.extend(ev.peer.map(|p| (i, p)));
                self.recvs.extend(ev.src.map(|p| (i, p)));
            }
            op if is_send(op) => self.sends.extend(ev.peer.map(|p| (i, p))),
            Op::Recv | Op::Irecv => self.recvs.extend(ev.peer.map(|p| (i, p))),
            Op::Init | Op::InitThread | Op::Finalize => self.colls.push((i, WORLD)),
            op if op.class() == OpClass::Collective => {
                self.colls.extend(ev.comm.map(|c| (i, c)));
            }
            Op::CommDup
            | Op::CommSplit
            | Op::CommCreate
            | Op::CartCreate
            | Op::CartSub
            | Op::CommFree => {
                if let (Op::CommDup, Some(c), Some(n)) = (ev.op, ev.comm, ev.newcomm) {
                    if self.inter.contains(&c) {
                        self.inter.insert(n);
                    }
                }
                self.colls.extend(ev.comm.map(|c| (i, c)));
            }
            op if op.makes_intercomm() => self.inter.extend(ev.newcomm),
            _ => {}
        }
        if let Some(req) = ev.req {
            self.made.insert(req, i);
        }
        for r in &ev.reqs {
            if let Some(made) = self.made.remove(r) {
                self.requests.push((made, i));
            }
        }
    }

    fn resolve(
        mut self,
        rank: u32,
        n_ranks: u32,
        events: u64,
        members: &BTreeMap<u64, Vec<i64>>,
        groups: &mut BTreeMap<Vec<i64>, usize>,
    ) -> RankCalls {
        let world: Vec<i64> = (0..i64::from(n_ranks)).collect();
        let rank_of = |p: i64| u32::try_from(p).ok().filter(|p| *p < n_ranks);
        let mut c = RankCalls {
            events,
            ..RankCalls::default()
        };
        for (i, p) in self.sends {
            if let Some(d) = rank_of(p) {
                c.sends.entry(d).or_default().push(i);
            }
        }
        for (i, p) in self.recvs {
            match rank_of(p) {
                Some(s) => c.recvs.entry(s).or_default().push(i),
                None if p == crate::trace::format::PEER_ANY_SOURCE => c.any_recvs.push(i),
                None => {}
            }
        }
        for (i, id) in self.colls {
            let group = match id {
                WORLD | 0 => world.clone(),
                1 => vec![i64::from(rank)],
                id if self.inter.contains(&id) => continue,
                id => match members.get(&id) {
                    Some(m) => m.clone(),
                    None => continue,
                },
            };
            if group.len() < 2 {
                continue;
            }
            let next = groups.len();
            let g = *groups.entry(group).or_insert(next);
            c.colls.entry(g).or_default().push(i);
        }
        self.requests
            .extend(self.made.into_values().map(|made| (made, u64::MAX)));
        self.requests.sort_unstable();
        c.requests = self.requests;
        c
    }
}

/// The ranks of a trace read only up to a cut: each rank ends after its kept events and
/// reads as complete there.
pub(crate) struct Cut<'a> {
    pub inner: &'a dyn Ranks,
    pub plan: &'a Plan,
}

impl Ranks for Cut<'_> {
    fn n_ranks(&self) -> u32 {
        self.inner.n_ranks()
    }
    fn open(&self, rank: u32) -> Opened<'_> {
        match self.inner.open(rank) {
            Opened::Events(inner) => {
                let keep = self.plan.keep.get(&rank).map_or(u64::MAX, |(k, _)| *k);
                Opened::Events(Box::new(Prefix {
                    inner,
                    left: keep,
                    kept: 0,
                    end_ns: 0,
                    memory: None,
                }))
            }
            other => other,
        }
    }
}

/// One rank's first events.
struct Prefix<'a> {
    inner: Box<dyn RankEvents + 'a>,
    left: u64,
    kept: u64,
    end_ns: u64,
    memory: Option<Memory>,
}

impl RankEvents for Prefix<'_> {
    fn next_event(&mut self, ev: &mut Event) -> Result<bool, TraceError> {
        if self.left == 0 {
            return Ok(false);
        }
        let more = self.inner.next_event(ev)?;
        if more {
            self.left -= 1;
            self.kept += 1;
            self.end_ns = ev.end_ns;
            if self.left == 0 {
                // A rank kept whole still gives its memory record, read past its end.
                let mut rest = Event::default();
                while matches!(self.inner.next_event(&mut rest), Ok(true)) {}
                self.memory = self.inner.memory();
            }
        } else {
            self.left = 0;
            self.memory = self.inner.memory();
        }
        Ok(more)
    }
    fn sites(&self) -> BTreeMap<u64, SiteKey> {
        self.inner.sites()
    }
    fn comms(&self) -> BTreeMap<u64, Vec<i64>> {
        self.inner.comms()
    }
    fn grids(&self) -> BTreeMap<u64, Vec<(u64, bool)>> {
        self.inner.grids()
    }
    fn completion(&self) -> Completion {
        Completion::Complete {
            end_ns: self.end_ns,
            n_events: self.kept,
        }
    }
    fn memory(&self) -> Option<Memory> {
        self.memory
    }
    fn poll_ps(&self) -> Option<u64> {
        self.inner.poll_ps()
    }
}
