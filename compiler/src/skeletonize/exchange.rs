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

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use crate::logicalize::trace::is_send;
use crate::trace::format::{PEER_ANY_SOURCE, PEER_PROC_NULL};
use crate::trace::{Event, Op, OpClass};

/// Which kind of exchange a stretch is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Pattern {
    /// Sends to peers the data chose, receives from any source ([`Scan`]).
    DataAddressed,
    /// Receives posted from named peers, sends to named peers, all completed
    /// ([`partner stretches`](Scan)): a redistribution by hand.
    Partners,
}

/// One rank's qualifying stretch: its first and last event (indices in the rank's
/// stream), its communicator (rank-local id), its sends and receives, their bytes and
/// the send call site used most (rank-local id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stretch {
    pub pattern: Pattern,
    pub first: u64,
    pub last: u64,
    pub comm: u64,
    pub sends: u64,
    pub recvs: u64,
    pub bytes: u128,
    pub site: u64,
    /// The peers (world ranks) of a partner stretch's messages, both ways, ascending
    /// (a short list: every halo of a run is a stretch until `decide`).
    pub peers: Vec<i64>,
    /// A partner stretch's sends in call order: peer and bytes (at most
    /// [`MAX_PARTNERS`] + 1 kept: more cannot be written exactly).
    pub sent: Vec<(i64, u64)>,
    /// A partner stretch's receives in call order: the peer (as many kept).
    pub received: Vec<i64>,
}

/// The exact partners of a partner exchange whose ranks differ in how many messages
/// they send or receive: for every world rank, its sends (peer, bytes) and its
/// receives (peer, bytes of the matching send) in the application's order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct PartnerTable {
    pub sends: Vec<Vec<(u32, u64)>>,
    pub recvs: Vec<Vec<(u32, u64)>>,
}

impl PartnerTable {
    /// Whether the table is small enough to write slot by slot: no rank has more than
    /// [`MAX_SLOTS`] messages on a side, and ranks x slots is at most
    /// [`MAX_TABLE_ENTRIES`].
    pub fn by_slot(&self) -> bool {
        let slots = self
            .sends
            .iter()
            .chain(&self.recvs)
            .map(Vec::len)
            .max()
            .unwrap_or(0);
        slots <= MAX_SLOTS && slots.saturating_mul(self.sends.len()) <= MAX_TABLE_ENTRIES
    }
}

/// Most sends or receives of one rank in an exchange written slot by slot (each slot is
/// a statement, its peers and sizes one entry per rank)...
const MAX_SLOTS: usize = 8;
/// ...and most entries (ranks x slots) of its tables: a larger table is written as the
/// graph itself, a loop over each rank's partners reading lists of every message.
const MAX_TABLE_ENTRIES: usize = 256;
/// Most sends or receives of one rank in an exchange written with its exact partners
/// at all (a stretch keeps as many, and one more)...
const MAX_PARTNERS: usize = 256;
/// ...and most messages in it: larger exchanges are written by the mean, a few
/// statements whatever the rank count.
const MAX_MESSAGES: usize = 1 << 16;
/// Most distinct tables on one communicator: an exchange whose partners or sizes follow
/// the data (no two iterations alike) would make no loop, and is written by the mean.
const MAX_DISTINCT_TABLES: usize = 8;

/// What the skeleton writes for one rank's stretch: `rounds` rounds of a shift
/// exchange, each a message to `partners` ranks after this one (`None`: every other
/// rank) and from as many before it, `bytes` per message, on the stretch's
/// communicator (rank-local id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Exchange {
    pub first: u64,
    pub last: u64,
    pub rounds: u64,
    pub partners: Option<u64>,
    pub bytes: u64,
    pub site: u64,
    pub comm: u64,
    /// Where the partners are exactly the application's: every rank exchanged with
    /// each other rank of its group of `group` consecutive ranks that is a multiple of
    /// `stride` away, `(stride, group)` ([`all_in_group`]); `None`: the mean number of
    /// ranks after this one.
    pub shift: Option<(u64, u64)>,
    /// Where the ranks differ in how many messages they send or receive: their exact
    /// partners and sizes, when small enough to write ([`exact_table`]); `None`: the
    /// mean.
    pub table: Option<Arc<PartnerTable>>,
}

/// Finds the stretches of one rank, event by event.
pub(crate) struct Scan {
    n_ranks: u32,
    index: u64,
    pending: BTreeSet<u64>,
    open: Option<Open>,
    partners: Option<PartnerOpen>,
    found: Vec<Stretch>,
}

/// An open partner stretch: it began with a request posted to or from a named peer
/// while none was pending, on communicator `comm`, and ends at the next point where
/// none is pending.
struct PartnerOpen {
    first: u64,
    comm: u64,
    ok: bool,
    recvs: u64,
    /// Its sends; `peers` also holds the peers it receives from.
    tally: Tally,
    sent: Vec<(i64, u64)>,
    received: Vec<i64>,
}

/// An open data-addressed stretch.
struct Open {
    first: u64,
    ok: bool,
    any_posts: u64,
    tally: Tally,
}

/// What an open stretch has sent: messages, bytes, the calls by site and the peers.
#[derive(Default)]
struct Tally {
    sends: u64,
    bytes: u128,
    sites: BTreeMap<u64, u64>,
    peers: BTreeSet<i64>,
}

impl Tally {
    fn send(&mut self, ev: &Event) {
        self.sends += 1;
        self.bytes += u128::from(ev.bytes.unwrap_or(0));
        *self.sites.entry(ev.site).or_default() += 1;
        self.peers.extend(ev.peer);
    }

    /// The call site used most (the lowest id among equals).
    fn site(&self) -> u64 {
        self.sites
            .iter()
            .max_by_key(|(id, n)| (**n, std::cmp::Reverse(**id)))
            .map_or(0, |(id, _)| *id)
    }
}

impl Scan {
    pub fn new(n_ranks: u32) -> Self {
        Scan {
            n_ranks,
            index: 0,
            pending: BTreeSet::new(),
            open: None,
            partners: None,
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
        if self.pending.is_empty() && posts.is_some() && PartnerOpen::opens(ev) {
            self.partners = Some(PartnerOpen {
                first: i,
                comm: ev.comm.unwrap_or(0),
                ok: true,
                recvs: 0,
                tally: Tally::default(),
                sent: Vec::new(),
                received: Vec::new(),
            });
        }
        if let Some(p) = &mut self.partners {
            p.see(ev);
        }
        if self.pending.is_empty() && self.open.is_none() && posts.is_some() {
            self.open = Some(Open {
                first: i,
                ok: true,
                any_posts: 0,
                tally: Tally::default(),
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
        // A partner stretch ends at its first quiet point.
        if self.pending.is_empty() {
            if let Some(p) = self.partners.take() {
                if p.ok && p.recvs + p.tally.sends > 0 {
                    self.found.push(Stretch {
                        pattern: Pattern::Partners,
                        first: p.first,
                        last: i,
                        comm: p.comm,
                        sends: p.tally.sends,
                        recvs: p.recvs,
                        bytes: p.tally.bytes,
                        site: p.tally.site(),
                        peers: p.tally.peers.into_iter().collect(),
                        sent: p.sent,
                        received: p.received,
                    });
                }
            }
        }
    }

    /// Ends the open stretch before event `next`.
    fn close(&mut self, next: u64) {
        let Some(open) = self.open.take() else {
            return;
        };
        if open.qualifies(self.n_ranks) {
            self.found.push(Stretch {
                pattern: Pattern::DataAddressed,
                first: open.first,
                last: next.saturating_sub(1),
                comm: 0,
                sends: open.tally.sends,
                recvs: open.any_posts,
                bytes: open.tally.bytes,
                site: open.tally.site(),
                peers: Vec::new(),
                sent: Vec::new(),
                received: Vec::new(),
            });
        }
    }

    /// The rank's qualifying stretches, in order (one with requests still pending at
    /// the end is not).
    pub fn finish(mut self) -> Vec<Stretch> {
        if self.pending.is_empty() {
            self.close(self.index);
        }
        self.found.sort_by_key(|s| s.first);
        self.found
    }
}

impl PartnerOpen {
    /// Whether `ev`, posting a request while none is pending, can begin one: a
    /// receive from or a send to a named peer. (A rank that takes part with blocking
    /// calls only has no stretch: trees of blocking calls are not redistributions.)
    fn opens(ev: &Event) -> bool {
        matches!(ev.op, Op::Irecv | Op::Isend) && ev.peer.is_some_and(|p| p >= 0)
    }

    fn see(&mut self, ev: &Event) {
        let named = ev.peer.is_some_and(|p| p >= 0);
        let here = ev.comm.unwrap_or(0) == self.comm;
        match ev.op {
            op if plain_send(op) && named && here => {
                self.tally.send(ev);
                if self.sent.len() <= MAX_PARTNERS {
                    self.sent
                        .push((ev.peer.unwrap_or(0), ev.bytes.unwrap_or(0)));
                }
            }
            Op::Irecv | Op::Recv if named && here => {
                self.recvs += 1;
                self.tally.peers.extend(ev.peer);
                if self.received.len() <= MAX_PARTNERS {
                    self.received.push(ev.peer.unwrap_or(0));
                }
            }
            op if op.class() == OpClass::Completion => {}
            _ => self.ok = false,
        }
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
            op if plain_send(op) => self.tally.send(ev),
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
        let peers = self.tally.peers.len() as u64;
        self.ok && others > 0 && self.any_posts >= 1 && peers >= need.max(1)
    }
}

/// The exchanges of every rank, in stream order.
///
/// Data-addressed stretches: the k-th of each merged rank is one exchange, written with
/// the mean number of messages per rank (in rounds of one message to every other rank,
/// at least one) and the mean size; none unless every merged rank has the same number
/// of them.
///
/// Partner stretches, per communicator: the k-th of each merged rank on it is one
/// exchange when the communicator holds every rank in world order (so `rank` and
/// `nranks` address it) and the ranks' partner stretches there are alike in number,
/// when the ranks differ in how many messages they send or receive in it (what no one
/// statement with a peer per rank can write), and when some of the peers are not
/// neighbours in the topology (a halo whose border ranks skip their missing
/// neighbours is left to the merge, which names it by directions). It is written as one
/// round of messages to as many ranks after this one as the ranks sent on average
/// (rounded), each of the mean volume per rank over that many messages.
///
/// `world_copy(rank, id)` names the communicator of a rank-local id (0 for world) when
/// it holds every rank in world order, `None` otherwise; `neighbour(rank, peer)` says
/// whether the topology names `peer` from `rank`.
pub(crate) fn decide(
    stretches: &BTreeMap<u32, Vec<Stretch>>,
    merged: &[u32],
    n_ranks: u32,
    world_copy: &dyn Fn(u32, u64) -> Option<u32>,
    neighbour: &dyn Fn(u32, i64) -> bool,
) -> BTreeMap<u32, Vec<Exchange>> {
    let mut out: BTreeMap<u32, Vec<Exchange>> = BTreeMap::new();
    if n_ranks < 2 || merged.is_empty() {
        return out;
    }
    let of = |r: &u32, pattern: Pattern| -> Vec<&Stretch> {
        stretches
            .get(r)
            .map(|v| v.iter().filter(|s| s.pattern == pattern).collect())
            .unwrap_or_default()
    };
    // Data-addressed.
    let data: Vec<Vec<&Stretch>> = merged
        .iter()
        .map(|r| of(r, Pattern::DataAddressed))
        .collect();
    let k = data[0].len();
    if k > 0 && data.iter().all(|v| v.len() == k) {
        let others = u64::from(n_ranks - 1);
        for j in 0..k {
            let group: Vec<&Stretch> = data.iter().map(|v| v[j]).collect();
            let (per_rank, bytes) = means(&group);
            let rounds = ((per_rank / others as f64).round() as u64).max(1);
            for (r, s) in merged.iter().zip(&group) {
                out.entry(*r).or_default().push(Exchange {
                    first: s.first,
                    last: s.last,
                    rounds,
                    partners: None,
                    bytes,
                    site: s.site,
                    comm: s.comm,
                    shift: None,
                    table: None,
                });
            }
        }
    }
    // Partners, per communicator (as `world_copy` numbers them).
    let mut by_comm: BTreeMap<u32, Vec<Vec<&Stretch>>> = BTreeMap::new();
    for (i, r) in merged.iter().enumerate() {
        for s in of(r, Pattern::Partners) {
            if let Some(c) = world_copy(*r, s.comm) {
                by_comm
                    .entry(c)
                    .or_insert_with(|| vec![Vec::new(); merged.len()])[i]
                    .push(s);
            }
        }
    }
    for (_, lists) in by_comm {
        let k = lists[0].len();
        if lists.iter().any(|v| v.len() != k) {
            continue;
        }
        let mut written: BTreeMap<u32, Vec<Exchange>> = BTreeMap::new();
        let mut tables: BTreeSet<Arc<PartnerTable>> = BTreeSet::new();
        for j in 0..k {
            let group: Vec<&Stretch> = lists.iter().map(|v| v[j]).collect();
            let alike = |f: fn(&Stretch) -> u64| group.iter().all(|s| f(s) == f(group[0]));
            let regular = merged
                .iter()
                .zip(&group)
                .all(|(r, s)| s.peers.iter().all(|p| neighbour(*r, *p)));
            if regular {
                continue;
            }
            // Alike in number: written exactly where every rank exchanges with all the
            // others of its group (an FFT's remap within a row of the process grid),
            // else left to the merge, which names every peer.
            let shift = if alike(|s| s.sends) && alike(|s| s.recvs) {
                match all_in_group(merged, &group, n_ranks) {
                    Some(shift) => Some(shift),
                    None => continue,
                }
            } else {
                None
            };
            let (per_rank, _) = means(&group);
            let table = match shift {
                Some(_) => None,
                None => exact_table(merged, &group, n_ranks).map(Arc::new),
            };
            tables.extend(table.clone());
            let partners = match shift {
                Some(_) => group[0].sends.max(1),
                None => (per_rank.round() as u64).clamp(1, u64::from(n_ranks - 1)),
            };
            // The volume each rank sends on average, over the whole number of messages.
            let total: u128 = group.iter().map(|s| s.bytes).sum();
            let bytes = round_div(total, u128::from(partners) * group.len() as u128);
            for (r, s) in merged.iter().zip(&group) {
                written.entry(*r).or_default().push(Exchange {
                    first: s.first,
                    last: s.last,
                    rounds: 1,
                    partners: Some(partners),
                    bytes,
                    site: s.site,
                    comm: s.comm,
                    shift,
                    table: table.clone(),
                });
            }
        }
        // Exact partners only while the exchanges repeat a few tables.
        let mean_only = tables.len() > MAX_DISTINCT_TABLES;
        for (r, mut list) in written {
            if mean_only {
                list.iter_mut().for_each(|e| e.table = None);
            }
            out.entry(r).or_default().extend(list);
        }
    }
    for v in out.values_mut() {
        v.sort_by_key(|e| e.first);
    }
    out
}

/// The exact partners of one partner exchange whose ranks differ in their number of
/// messages, when every world rank takes part (`merged` is every rank), no rank sends
/// or receives more than [`MAX_PARTNERS`] messages, there are at most [`MAX_MESSAGES`],
/// and every send has its receive: the m-th message
/// from p to q is the m-th receive of q from p (MPI's order on one communicator), which
/// gives each receive the size of its message.
fn exact_table(merged: &[u32], group: &[&Stretch], n_ranks: u32) -> Option<PartnerTable> {
    let n = n_ranks as usize;
    if merged.len() != n || merged.iter().enumerate().any(|(i, r)| *r as usize != i) {
        return None;
    }
    let slots = group
        .iter()
        .map(|s| s.sent.len().max(s.received.len()))
        .max()?;
    let complete = group
        .iter()
        .all(|s| s.sent.len() as u64 == s.sends && s.received.len() as u64 == s.recvs);
    let messages: u64 = group.iter().map(|s| s.sends).sum();
    if !complete || slots == 0 || slots > MAX_PARTNERS || messages > MAX_MESSAGES as u64 {
        return None;
    }
    let peer = |p: i64| u32::try_from(p).ok().filter(|p| (*p as usize) < n);
    // The sizes of the messages from p to q, in order.
    let mut messages: BTreeMap<(u32, u32), VecDeque<u64>> = BTreeMap::new();
    let mut sends = Vec::with_capacity(n);
    for (from, s) in group.iter().enumerate() {
        let mut mine = Vec::with_capacity(s.sent.len());
        for &(p, bytes) in &s.sent {
            let to = peer(p)?;
            messages
                .entry((from as u32, to))
                .or_default()
                .push_back(bytes);
            mine.push((to, bytes));
        }
        sends.push(mine);
    }
    let mut recvs = Vec::with_capacity(n);
    for (to, s) in group.iter().enumerate() {
        let mut mine = Vec::with_capacity(s.received.len());
        for &p in &s.received {
            let from = peer(p)?;
            let bytes = messages.get_mut(&(from, to as u32))?.pop_front()?;
            mine.push((from, bytes));
        }
        recvs.push(mine);
    }
    if messages.values().any(|q| !q.is_empty()) {
        return None;
    }
    Some(PartnerTable { sends, recvs })
}

/// Most partners an exchange written call by call may have before it is a loop over
/// them (a loop writes two statements for the `3 × partners` of posts, sends and waits).
const MIN_GROUP_PARTNERS: u64 = 2;

/// `(stride, group)` when every rank's partners, both ways, are exactly the other ranks
/// of its group of `group` consecutive ranks (`group` divides the rank count) whose
/// distance is a multiple of `stride`, one message each way with each: then the
/// exchange is `loop M as other { sendrecv to rank(rank / group * group + (rank +
/// stride * (1 + other)) % group) from ... (rank - stride * (1 + other)) ... }` with the
/// application's own pairs. The smallest such group.
fn all_in_group(merged: &[u32], group: &[&Stretch], n_ranks: u32) -> Option<(u64, u64)> {
    let n = u64::from(n_ranks);
    if merged.len() != n_ranks as usize {
        return None;
    }
    let first = group.first()?;
    let m = first.sends;
    if m < MIN_GROUP_PARTNERS || first.recvs != m || first.peers.len() as u64 != m {
        return None;
    }
    let fits = |g: u64, s: u64| {
        merged.iter().zip(group).all(|(&r, st)| {
            let r = u64::from(r);
            let base = r / g * g;
            let mut want: Vec<i64> = (1..=m).map(|k| (base + (r + s * k) % g) as i64).collect();
            want.sort_unstable();
            st.sends == m && st.recvs == m && st.peers == want
        })
    };
    (2..=n)
        .filter(|g| n % g == 0)
        .flat_map(|g| {
            (1..g)
                .filter(move |s| g % s == 0 && g / s == m + 1)
                .map(move |s| (g, s))
        })
        .find(|&(g, s)| fits(g, s))
        .map(|(g, s)| (s, g))
}

/// The mean number of messages a rank sent in a group of stretches and their mean size.
fn means(group: &[&Stretch]) -> (f64, u64) {
    let sends: u64 = group.iter().map(|s| s.sends).sum();
    let bytes: u128 = group.iter().map(|s| s.bytes).sum();
    let mean = round_div(bytes, u128::from(sends.max(1)));
    (sends as f64 / group.len().max(1) as f64, mean)
}

/// `total / by` rounded to the nearest (`by` > 0), saturating.
fn round_div(total: u128, by: u128) -> u64 {
    u64::try_from((total + by / 2) / by).unwrap_or(u64::MAX)
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
            pattern: Pattern::DataAddressed,
            first: 3,
            last: 90,
            comm: 0,
            sends,
            recvs: 2,
            bytes: u128::from(sends) * 1000,
            site: 1,
            peers: Vec::new(),
            sent: Vec::new(),
            received: Vec::new(),
        };
        let stretches: BTreeMap<u32, Vec<Stretch>> = [
            (0, vec![s(40)]),
            (1, vec![s(50)]),
            (2, vec![s(30)]),
            (3, vec![s(60)]),
        ]
        .into();
        let d = decide(&stretches, &[0, 1, 2, 3], 4, &world, &none);
        // 45 messages per rank on average: 15 rounds of 3.
        assert_eq!(d.len(), 4);
        assert!(d
            .values()
            .all(|v| v.len() == 1 && v[0].rounds == 15 && v[0].bytes == 1000));
        let mut missing = stretches.clone();
        missing.insert(3, Vec::new());
        assert!(decide(&missing, &[0, 1, 2, 3], 4, &world, &none).is_empty());
    }

    fn none(_: u32, _: i64) -> bool {
        false
    }

    fn world(_: u32, id: u64) -> Option<u32> {
        // Communicator 5 is a split, the others copies of world.
        (id != 5).then_some(id as u32)
    }

    /// Receives posted from `from`, blocking sends to `to`, one waitall.
    fn redistribution(scan: &mut Scan, comm: u64, from: &[i64], to: &[i64]) {
        let with = |mut e: Event| {
            e.comm = Some(comm);
            e
        };
        for (i, p) in from.iter().enumerate() {
            scan.add(&with(ev(Op::Irecv, Some(*p), Some(20 + i as u64), &[])));
        }
        for p in to {
            scan.add(&with(ev(Op::Send, Some(*p), None, &[])));
        }
        let reqs: Vec<u64> = (0..from.len() as u64).map(|i| 20 + i).collect();
        scan.add(&with(ev(Op::Waitall, None, None, &reqs)));
    }

    #[test]
    fn a_redistribution_is_a_partner_stretch_ended_by_its_quiet_point() {
        let mut scan = Scan::new(8);
        scan.add(&ev(Op::Barrier, None, None, &[]));
        redistribution(&mut scan, 3, &[1, 2, 5], &[4, 6]);
        redistribution(&mut scan, 3, &[7], &[7]);
        // A receive from any source, or a collective inside, spoils one.
        scan.add(&ev(Op::Irecv, Some(PEER_ANY_SOURCE), Some(40), &[]));
        scan.add(&ev(Op::Send, Some(2), None, &[]));
        scan.add(&ev(Op::Wait, None, None, &[40]));
        scan.add(&ev(Op::Irecv, Some(1), Some(41), &[]));
        scan.add(&ev(Op::Allreduce, None, None, &[]));
        scan.add(&ev(Op::Send, Some(1), None, &[]));
        scan.add(&ev(Op::Wait, None, None, &[41]));
        let found = scan.finish();
        let got: Vec<(u64, u64, u64, u64, u64)> = found
            .iter()
            .map(|s| (s.first, s.last, s.comm, s.sends, s.recvs))
            .collect();
        assert_eq!(got, vec![(1, 6, 3, 2, 3), (7, 9, 3, 1, 1)]);
        assert!(found.iter().all(|s| s.pattern == Pattern::Partners));
        // Each send's peer and size, each receive's peer, in call order.
        assert_eq!(found[0].sent, vec![(4, 100), (6, 100)]);
        assert_eq!(found[0].received, vec![1, 2, 5]);
    }

    fn partner(first: u64, comm: u64, sends: u64, recvs: u64) -> Stretch {
        Stretch {
            pattern: Pattern::Partners,
            first,
            last: first + sends + recvs,
            comm,
            sends,
            recvs,
            bytes: u128::from(sends) * 100,
            site: 2,
            peers: (0..4).collect(),
            sent: Vec::new(),
            received: Vec::new(),
        }
    }

    #[test]
    fn exchanges_with_every_other_rank_of_a_group_keep_their_pairs() {
        // 8 ranks: each exchanges with the other 3 of its group of 4 (an FFT remap
        // within a row of a 2 x 4 grid), one message each way with each.
        let n = 8u32;
        let with = |peers: Vec<i64>| Stretch {
            peers,
            ..partner(10, 3, 3, 3)
        };
        let stretches: BTreeMap<u32, Vec<Stretch>> = (0..n)
            .map(|r| {
                let base = i64::from(r / 4 * 4);
                let peers: Vec<i64> = (0..4)
                    .map(|k| base + k)
                    .filter(|&p| p != i64::from(r))
                    .collect();
                (r, vec![with(peers)])
            })
            .collect();
        let all: Vec<u32> = (0..n).collect();
        let d = decide(&stretches, &all, n, &world, &none);
        assert_eq!(d.len(), 8);
        for v in d.values() {
            assert_eq!(
                (v[0].partners, v[0].shift, v[0].bytes),
                (Some(3), Some((1, 4)), 100)
            );
        }
        // Every other rank 2 apart in groups of 8 (all even or all odd ranks).
        let stretches: BTreeMap<u32, Vec<Stretch>> = (0..n)
            .map(|r| {
                let peers: Vec<i64> = (0..8)
                    .filter(|&p| p != i64::from(r) && (p - i64::from(r)) % 2 == 0)
                    .collect();
                (r, vec![with(peers)])
            })
            .collect();
        let d = decide(&stretches, &all, n, &world, &none);
        assert_eq!(d[&0][0].shift, Some((2, 8)));
        // Three partners that are not a whole group: left to the merge.
        let stretches: BTreeMap<u32, Vec<Stretch>> = (0..n)
            .map(|r| {
                let peers: Vec<i64> = [1i64, 2, 5]
                    .iter()
                    .map(|k| (i64::from(r) + k) % 8)
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect();
                (r, vec![with(peers)])
            })
            .collect();
        assert!(decide(&stretches, &all, n, &world, &none).is_empty());
    }

    #[test]
    fn partner_stretches_that_differ_by_rank_become_exchanges_and_halos_do_not() {
        // On copy 3: a redistribution (3, 1, 2 and 2 messages), then a halo (one
        // message each); on the split 5, a redistribution that stays as it is.
        let stretches: BTreeMap<u32, Vec<Stretch>> = (0..4u32)
            .map(|r| {
                let sends = [3, 1, 2, 2][r as usize];
                (
                    r,
                    vec![
                        partner(10, 3, sends, 4 - sends.min(3)),
                        partner(40, 3, 1, 1),
                        partner(60, 5, sends, 2),
                    ],
                )
            })
            .collect();
        let d = decide(&stretches, &[0, 1, 2, 3], 4, &world, &none);
        assert_eq!(d.len(), 4);
        for v in d.values() {
            assert_eq!(v.len(), 1);
            assert_eq!(
                (v[0].first, v[0].partners, v[0].bytes, v[0].comm),
                (10, Some(2), 100, 3)
            );
        }
        // A rank without the redistribution: its communicator has none.
        let mut short = stretches.clone();
        if let Some(v) = short.get_mut(&2) {
            v.remove(0);
        }
        assert!(decide(&short, &[0, 1, 2, 3], 4, &world, &none).is_empty());
        // Peers that are all neighbours: a halo whose border ranks send less.
        assert!(decide(&stretches, &[0, 1, 2, 3], 4, &world, &|_, _| true).is_empty());
    }

    /// Rank r's partner stretch of the coupling graph `partners` (symmetric), sending
    /// `size(r, p)` bytes to each, in ascending order, receives first.
    fn coupled(r: u32, partners: &[Vec<i64>], size: &dyn Fn(i64, i64) -> u64) -> Stretch {
        let mine = &partners[r as usize];
        let sent: Vec<(i64, u64)> = mine.iter().map(|&p| (p, size(i64::from(r), p))).collect();
        Stretch {
            sends: mine.len() as u64,
            recvs: mine.len() as u64,
            bytes: sent.iter().map(|(_, b)| u128::from(*b)).sum(),
            peers: mine.clone(),
            received: mine.clone(),
            sent,
            ..partner(10, 3, 0, 0)
        }
    }

    #[test]
    fn partners_that_differ_by_rank_keep_their_own_peers_and_sizes_when_they_fit() {
        let graph: Vec<Vec<i64>> = vec![vec![1, 2], vec![0, 2, 3], vec![0, 1, 3], vec![1, 2]];
        let size = |a: i64, b: i64| 100 * (a.min(b) as u64 + 1) + b.max(a) as u64;
        let stretches: BTreeMap<u32, Vec<Stretch>> = (0..4u32)
            .map(|r| {
                (
                    r,
                    vec![coupled(r, &graph, &size), coupled(r, &graph, &size)],
                )
            })
            .collect();
        let d = decide(&stretches, &[0, 1, 2, 3], 4, &world, &none);
        assert_eq!(d.len(), 4);
        let table = d[&0][0].table.clone().expect("a table");
        assert_eq!(d[&3][1].table.as_deref(), Some(&*table));
        assert_eq!(table.sends[1], vec![(0, 101), (2, 202), (3, 203)]);
        // Each receive has the size of the message its peer sent.
        assert_eq!(table.recvs[3], vec![(1, 203), (2, 303)]);
        // A send nobody receives: no table, the mean.
        let mut lost = stretches.clone();
        for s in lost.get_mut(&3).into_iter().flatten() {
            s.received.pop();
            s.recvs -= 1;
        }
        let d = decide(&lost, &[0, 1, 2, 3], 4, &world, &none);
        assert!(d.values().flatten().all(|e| e.table.is_none()), "{d:?}");
        assert_eq!(d[&0][0].partners, Some(3));
        // Ranks 0 and 1 coupled to every other rank of `n`.
        let hubs = |n: u32| -> BTreeMap<u32, Vec<Stretch>> {
            let graph: Vec<Vec<i64>> = (0..i64::from(n))
                .map(|r| {
                    (0..i64::from(n))
                        .filter(|p| *p != r && (r < 2 || *p < 2))
                        .collect()
                })
                .collect();
            (0..n)
                .map(|r| (r, vec![coupled(r, &graph, &size)]))
                .collect()
        };
        // More messages than a slot-by-slot table holds (11 a rank): the graph itself,
        // every message exact.
        let all: Vec<u32> = (0..12).collect();
        let d = decide(&hubs(12), &all, 12, &world, &none);
        assert_eq!(d.len(), 12);
        let table = d[&0][0].table.clone().expect("a table past the slots");
        assert!(!table.by_slot());
        assert_eq!(table.sends[0].len(), 11);
        assert_eq!(table.recvs[5], vec![(0, 105), (1, 205)]);
        // Past MAX_PARTNERS messages a rank: the mean.
        let n = MAX_PARTNERS as u32 + 2;
        let all: Vec<u32> = (0..n).collect();
        let d = decide(&hubs(n), &all, n, &world, &none);
        assert_eq!(d.len(), n as usize);
        assert!(d.values().flatten().all(|e| e.table.is_none()));
        // Sizes that follow the data, no two exchanges alike: the mean.
        let stretches: BTreeMap<u32, Vec<Stretch>> = (0..4u32)
            .map(|r| {
                let each = (0..MAX_DISTINCT_TABLES as u64 + 1)
                    .map(|k| {
                        let by = move |a: i64, b: i64| size(a, b) + k;
                        coupled(r, &graph, &by)
                    })
                    .collect();
                (r, each)
            })
            .collect();
        let d = decide(&stretches, &[0, 1, 2, 3], 4, &world, &none);
        assert!(d.values().flatten().all(|e| e.table.is_none()));
        assert_eq!(d[&0].len(), MAX_DISTINCT_TABLES + 1);
    }
}
