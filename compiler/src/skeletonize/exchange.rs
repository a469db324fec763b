//! Data-addressed exchanges: takes each rank's events (in the survey sweep), gives the
//! stretches in which the application sends messages to peers its data chooses and takes
//! whatever arrives through a pool of `MPI_ANY_SOURCE` receives, with the one exchange
//! every rank writes for each.
//!
//! Such a stretch (HPCC's RandomAccess, a graph traversal, particles sent wherever they
//! moved) has no loop: the destinations follow random data, the receive completions
//! follow arrival order, and both differ on every rank. Call by call it is thousands of
//! statements per rank and no two ranks alike. What matters for time is the volume (the
//! messages each rank sends and their size), that it spreads over the other ranks, and
//! the compute between the calls; the skeleton writes it as rounds of a shift exchange
//! (`sendrecv` with `rank + 1 + j` and `rank - 1 - j` for every other rank j), the same on
//! every rank and at every rank count, with the application's mean number of messages per
//! rank, their mean size and each rank's own compute.
//!
//! A stretch runs from a call that posts a request while none is pending to a point
//! where none is pending again and the next call could not belong to it. It qualifies
//! when every receive in it is from `MPI_ANY_SOURCE` (and there is one), there is no
//! collective, communicator or one-sided call and no call on another communicator than
//! `MPI_COMM_WORLD`, and its sends reach most other ranks (all of up to 4, three quarters
//! of more): a halo with any-source receives (a few neighbours) does not. A stretch goes
//! on across points where nothing is pending as long as the calls after them could
//! belong to it: a rank whose receives drain before it sends anything (its peers' data
//! came first) is one stretch, as on the ranks whose sends came first. Every merged rank
//! must have as many qualifying stretches: the k-th of each is one exchange.

use std::collections::{BTreeMap, BTreeSet};

use crate::logicalize::trace::is_send;
use crate::trace::format::{PEER_ANY_SOURCE, PEER_PROC_NULL};
use crate::trace::{Event, Op, OpClass};

/// One rank's qualifying stretch: its first and last event (indices in the rank's
/// stream), its sends, their bytes and the send call site used most (rank-local id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stretch {
    pub first: u64,
    pub last: u64,
    pub sends: u64,
    pub bytes: u128,
    pub site: u64,
}

/// What the skeleton writes for one rank's stretch: `rounds` rounds of a shift
/// exchange over every other rank, `bytes` per message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Exchange {
    pub first: u64,
    pub last: u64,
    pub rounds: u64,
    pub bytes: u64,
    pub site: u64,
}

/// Finds the stretches of one rank, event by event.
pub(crate) struct Scan {
    n_ranks: u32,
    index: u64,
    pending: BTreeSet<u64>,
    open: Option<Open>,
    found: Vec<Stretch>,
}

struct Open {
    first: u64,
    ok: bool,
    sends: u64,
    bytes: u128,
    peers: BTreeSet<i64>,
    any_posts: u64,
    sites: BTreeMap<u64, u64>,
}

impl Scan {
    pub fn new(n_ranks: u32) -> Self {
        Scan {
            n_ranks,
            index: 0,
            pending: BTreeSet::new(),
            open: None,
            found: Vec::new(),
        }
    }

    pub fn add(&mut self, ev: &Event) {
        let i = self.index;
        self.index += 1;
        // At a quiet point, a call that cannot belong to the open stretch ends it.
        if self.pending.is_empty() && self.open.is_some() && !Open::accepts(ev) {
            self.close(i);
        }
        let posts = match ev.op.class() {
            OpClass::PointToPoint | OpClass::Collective => ev.req,
            _ => None,
        };
        if self.pending.is_empty() && self.open.is_none() && posts.is_some() {
            self.open = Some(Open {
                first: i,
                ok: true,
                sends: 0,
                bytes: 0,
                peers: BTreeSet::new(),
                any_posts: 0,
                sites: BTreeMap::new(),
            });
        }
        if let Some(open) = &mut self.open {
            open.see(ev);
        }
        if let Some(r) = posts {
            self.pending.insert(r);
        }
        if ev.op.class() == OpClass::Completion {
            for r in &ev.reqs {
                self.pending.remove(r);
            }
        }
        // A stretch that cannot qualify any more ends at the first quiet point.
        if self.pending.is_empty() && self.open.as_ref().is_some_and(|o| !o.ok) {
            self.open = None;
        }
    }

    /// Ends the open stretch before event `next`.
    fn close(&mut self, next: u64) {
        let Some(open) = self.open.take() else {
            return;
        };
        if open.qualifies(self.n_ranks) {
            let site = open
                .sites
                .iter()
                .max_by_key(|(id, n)| (**n, std::cmp::Reverse(**id)))
                .map_or(0, |(id, _)| *id);
            self.found.push(Stretch {
                first: open.first,
                last: next.saturating_sub(1),
                sends: open.sends,
                bytes: open.bytes,
                site,
            });
        }
    }

    /// The rank's qualifying stretches, in order (one with requests still pending at
    /// the end is not).
    pub fn finish(mut self) -> Vec<Stretch> {
        if self.pending.is_empty() {
            self.close(self.index);
        }
        self.found
    }
}

/// A send of one message (not the send half of a sendrecv, which also receives from a
/// named source).
fn plain_send(op: Op) -> bool {
    is_send(op) && !matches!(op, Op::Sendrecv | Op::SendrecvReplace)
}

impl Open {
    /// Whether `ev` leaves a stretch that qualifies so far able to qualify.
    fn accepts(ev: &Event) -> bool {
        let world = ev.comm.unwrap_or(0) == 0;
        if ev.peer == Some(PEER_PROC_NULL) {
            return false;
        }
        match ev.op {
            op if plain_send(op) => world && ev.peer.is_some_and(|p| p >= 0),
            Op::Irecv | Op::Recv => world && ev.peer == Some(PEER_ANY_SOURCE),
            Op::Probe | Op::Iprobe => ev.peer == Some(PEER_ANY_SOURCE),
            op => op.class() == OpClass::Completion || op == Op::Cancel,
        }
    }

    fn see(&mut self, ev: &Event) {
        if !Open::accepts(ev) {
            self.ok = false;
            return;
        }
        match ev.op {
            op if plain_send(op) => {
                self.sends += 1;
                self.bytes += u128::from(ev.bytes.unwrap_or(0));
                self.peers.extend(ev.peer);
                *self.sites.entry(ev.site).or_default() += 1;
            }
            Op::Irecv | Op::Recv => self.any_posts += 1,
            _ => {}
        }
    }

    fn qualifies(&self, n_ranks: u32) -> bool {
        let others = u64::from(n_ranks.saturating_sub(1));
        let need = if others <= 4 {
            others
        } else {
            (3 * others).div_ceil(4)
        };
        let peers = self.peers.len() as u64;
        self.ok && others > 0 && self.any_posts >= 1 && peers >= need.max(1)
    }
}

/// The exchanges of every rank: the k-th stretch of each merged rank is one exchange,
/// written with the mean number of messages per rank (in rounds of one message to every
/// other rank, at least one) and the mean size; none unless every merged rank has the
/// same number of stretches.
pub(crate) fn decide(
    stretches: &BTreeMap<u32, Vec<Stretch>>,
    merged: &[u32],
    n_ranks: u32,
) -> BTreeMap<u32, Vec<Exchange>> {
    let mut out = BTreeMap::new();
    let Some(k) = merged.first().and_then(|r| stretches.get(r)).map(Vec::len) else {
        return out;
    };
    if k == 0
        || n_ranks < 2
        || merged
            .iter()
            .any(|r| stretches.get(r).map_or(0, Vec::len) != k)
    {
        return out;
    }
    let others = u64::from(n_ranks - 1);
    for j in 0..k {
        let (mut sends, mut bytes) = (0u64, 0u128);
        for r in merged {
            if let Some(s) = stretches.get(r).and_then(|v| v.get(j)) {
                sends += s.sends;
                bytes += s.bytes;
            }
        }
        let per_rank = sends as f64 / merged.len() as f64;
        let rounds = ((per_rank / others as f64).round() as u64).max(1);
        let mean = u64::try_from((bytes + u128::from(sends) / 2) / u128::from(sends.max(1)))
            .unwrap_or(u64::MAX);
        for r in merged {
            if let Some(s) = stretches.get(r).and_then(|v| v.get(j)) {
                out.entry(*r).or_insert_with(Vec::new).push(Exchange {
                    first: s.first,
                    last: s.last,
                    rounds,
                    bytes: mean,
                    site: s.site,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(op: Op, peer: Option<i64>, req: Option<u64>, reqs: &[u64]) -> Event {
        Event {
            op,
            peer,
            bytes: Some(100),
            comm: Some(0),
            req,
            reqs: reqs.to_vec(),
            site: 7,
            ..Event::default()
        }
    }

    /// A pool of two any-source receives, sends to every other rank in a data order,
    /// receives re-posted as they complete, and the pool cancelled at the end.
    fn pool_stretch(scan: &mut Scan, peers: &[i64]) {
        scan.add(&ev(Op::Irecv, Some(PEER_ANY_SOURCE), Some(1), &[]));
        scan.add(&ev(Op::Irecv, Some(PEER_ANY_SOURCE), Some(2), &[]));
        for (i, p) in peers.iter().enumerate() {
            let req = 10 + i as u64;
            scan.add(&ev(Op::Isend, Some(*p), Some(req), &[]));
            scan.add(&ev(Op::Test, None, None, &[req]));
            if i % 3 == 0 {
                scan.add(&ev(Op::Testany, None, None, &[1]));
                scan.add(&ev(Op::Irecv, Some(PEER_ANY_SOURCE), Some(1), &[]));
            }
        }
        scan.add(&ev(Op::Cancel, None, None, &[1]));
        scan.add(&ev(Op::Wait, None, None, &[1]));
        scan.add(&ev(Op::Cancel, None, None, &[2]));
        scan.add(&ev(Op::Wait, None, None, &[2]));
    }

    #[test]
    fn a_pool_exchange_to_every_rank_qualifies_and_a_halo_does_not() {
        let mut scan = Scan::new(4);
        scan.add(&ev(Op::Barrier, None, None, &[]));
        pool_stretch(&mut scan, &[2, 1, 3, 3, 2, 1, 1, 2, 3, 2, 3, 1, 1]);
        scan.add(&ev(Op::Barrier, None, None, &[]));
        // A halo with any-source receives: two messages per neighbour, then quiet.
        for _ in 0..5 {
            scan.add(&ev(Op::Irecv, Some(PEER_ANY_SOURCE), Some(50), &[]));
            scan.add(&ev(Op::Irecv, Some(PEER_ANY_SOURCE), Some(51), &[]));
            scan.add(&ev(Op::Isend, Some(1), Some(52), &[]));
            scan.add(&ev(Op::Isend, Some(3), Some(53), &[]));
            scan.add(&ev(Op::Waitall, None, None, &[50, 51, 52, 53]));
        }
        let found = scan.finish();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].first, 1);
        assert_eq!(found[0].last, 42);
        assert_eq!(found[0].sends, 13);
        assert_eq!(found[0].bytes, 1300);
        assert_eq!(found[0].site, 7);
    }

    #[test]
    fn a_stretch_with_a_collective_or_a_named_source_does_not_qualify() {
        let peers = [2, 1, 3, 3, 2, 1, 1, 2, 3, 2, 3, 1, 1];
        let mut scan = Scan::new(4);
        scan.add(&ev(Op::Irecv, Some(PEER_ANY_SOURCE), Some(1), &[]));
        scan.add(&ev(Op::Allreduce, None, None, &[]));
        pool_stretch(&mut scan, &peers);
        let mut named = Scan::new(4);
        named.add(&ev(Op::Irecv, Some(2), Some(99), &[]));
        pool_stretch(&mut named, &peers);
        named.add(&ev(Op::Wait, None, None, &[99]));
        assert!(scan.finish().is_empty());
        assert!(named.finish().is_empty());
    }

    #[test]
    fn every_rank_writes_the_mean_volume_or_no_rank_does() {
        let s = |sends: u64| Stretch {
            first: 3,
            last: 90,
            sends,
            bytes: u128::from(sends) * 1000,
            site: 1,
        };
        let stretches: BTreeMap<u32, Vec<Stretch>> = [
            (0, vec![s(40)]),
            (1, vec![s(50)]),
            (2, vec![s(30)]),
            (3, vec![s(60)]),
        ]
        .into();
        let d = decide(&stretches, &[0, 1, 2, 3], 4);
        // 45 messages per rank on average: 15 rounds of 3.
        assert_eq!(d.len(), 4);
        assert!(d
            .values()
            .all(|v| v.len() == 1 && v[0].rounds == 15 && v[0].bytes == 1000));
        let mut missing = stretches.clone();
        missing.insert(3, Vec::new());
        assert!(decide(&missing, &[0, 1, 2, 3], 4).is_empty());
    }
}
