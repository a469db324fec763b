//! Events → tokens: takes every rank's events, the topology's [`Directions`] and the
//! trace-wide decisions (communicators, tags, merged sizes), gives per rank a sequence of
//! interned tokens (operation, peer as a set of topology directions or an explicit rank,
//! size, tag, communicator, request slot, call site) with the compute span before each.
//!
//! A peer becomes the set of directions that name it from this rank; `MPI_PROC_NULL`
//! becomes the set of directions that name *no* neighbour from this rank (a border), with
//! an unknown size. The SPMD merge intersects these sets across ranks, so a border rank's
//! exchange with `MPI_PROC_NULL` folds into the same statement as its neighbours' real
//! exchange. Request handles are named by slot (the lowest slot free when the request is
//! posted), so that the same program position gets the same name on every rank and in
//! every iteration.

use std::collections::{BTreeMap, BTreeSet};

use perfskel_grammar::ast::{CollOp, P2pOp, WaitOp};

use super::comms::{CommRef, Comms};
use super::topo::Directions;
use crate::trace::format::{PEER_ANY_SOURCE, PEER_PROC_NULL, TAG_ANY};
use crate::trace::{Event, Op, RankTrace};

/// Whom one half of a point-to-point operation talks to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum PeerAbs {
    /// The directions (bit set over [`Directions::dirs`]) naming the peer, or, when
    /// `null`, naming no neighbour (`MPI_PROC_NULL`).
    Dirs { mask: u64, null: bool },
    /// An explicit rank of the communicator.
    Rank(u32),
    /// `MPI_ANY_SOURCE` left unresolved.
    Any,
}

/// One direction of a point-to-point operation; `bytes` is `None` towards
/// `MPI_PROC_NULL` (the size is taken from the ranks that really communicate).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Half {
    pub peer: PeerAbs,
    pub bytes: Option<u64>,
}

/// A collective's size: one for all ranks, or one per rank (the `v` forms).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum CollSize {
    None,
    One(u64),
    PerRank(BTreeMap<u32, u64>),
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Kind {
    /// `halves` is `[send]`, `[recv]` or `[send, recv]` (sendrecv).
    P2p {
        op: P2pOp,
        halves: Vec<Half>,
        tag: Option<u32>,
        req: Option<u32>,
    },
    Coll {
        op: CollOp,
        nonblocking: bool,
        size: CollSize,
        root: Option<u32>,
        req: Option<u32>,
    },
    Wait {
        op: WaitOp,
        slots: Vec<u32>,
    },
}

/// One statement-to-be: what happens and where in the application it was called.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Tok {
    pub kind: Kind,
    pub comm: CommRef,
    /// Index into the trace-wide list of call-site names.
    pub site: u32,
}

/// Trace-wide decisions every rank's tokenization follows.
pub(crate) struct Policy<'a> {
    pub dirs: &'a Directions,
    pub comms: &'a Comms,
    /// Tags are written only when every call site uses one constant tag and no receive
    /// takes `MPI_ANY_TAG`; otherwise every tag is 0 (matching then follows program order).
    pub keep_tags: bool,
    /// Sizes merged by `--merge-sizes`: recorded → written.
    pub size_map: &'a BTreeMap<u64, u64>,
}

/// One rank's tokens.
#[derive(Clone, Debug, Default)]
pub(crate) struct RankTokens {
    pub rank: u32,
    pub ids: Vec<u32>,
    pub table: Vec<Tok>,
    /// Compute (ns) before each token, and MPI time of the token.
    pub gap_ns: Vec<u64>,
    pub dur_ns: Vec<u64>,
    /// Compute between the last token and `MPI_Finalize`.
    pub trailing_gap_ns: u64,
    /// `MPI_Init` end → `MPI_Finalize` start (or the last event).
    pub app_ns: u64,
    pub unmatched_requests: u64,
    pub unknown_waits: u64,
    pub explicit_peers: u64,
    /// Point-to-point bytes (both directions) and those written with explicit peers.
    pub p2p_bytes: u64,
    pub explicit_bytes: u64,
    pub dropped_events: u64,
}

/// Tokenizes one rank; `site_of` gives the trace-wide site index of a rank-local site id.
pub(crate) fn tokenize(
    rank: u32,
    trace: &RankTrace,
    policy: &Policy<'_>,
    site_of: &dyn Fn(u64) -> u32,
) -> RankTokens {
    let mut out = RankTokens {
        rank,
        ..RankTokens::default()
    };
    let mut intern: BTreeMap<Tok, u32> = BTreeMap::new();
    let mut live: BTreeMap<u64, u32> = BTreeMap::new(); // request id → slot
    let mut pending_gap = 0u64;
    let mut prev_end: Option<u64> = None;
    let mut init_end = None;
    let mut finalize_start = None;
    let mut last_end = 0;
    for ev in &trace.events {
        let gap = prev_end.map_or(0, |end| ev.start_ns.saturating_sub(end));
        prev_end = Some(ev.end_ns);
        last_end = ev.end_ns;
        match ev.op {
            Op::Init | Op::InitThread => {
                init_end = Some(ev.end_ns);
                pending_gap = 0;
                continue;
            }
            Op::Finalize | Op::Abort => {
                finalize_start = Some(ev.start_ns);
                out.trailing_gap_ns = pending_gap + gap;
                pending_gap = 0;
                break;
            }
            _ => {}
        }
        pending_gap += gap;
        let comm = match ev.comm {
            None => CommRef::World,
            Some(id) => match policy.comms.lookup(rank, id) {
                Some(c) => c,
                None => {
                    out.dropped_events += 1;
                    continue;
                }
            },
        };
        let kind = match kind_of(rank, ev, comm, policy, &mut live, &mut out) {
            Some(kind) => kind,
            None => {
                out.dropped_events += u64::from(!is_silent(ev.op));
                continue;
            }
        };
        let tok = Tok {
            kind,
            comm,
            site: site_of(ev.site),
        };
        let next = out.table.len() as u32;
        let id = *intern.entry(tok.clone()).or_insert(next);
        if id == next {
            out.table.push(tok);
        }
        out.ids.push(id);
        out.gap_ns.push(pending_gap);
        out.dur_ns.push(ev.duration_ns());
        pending_gap = 0;
    }
    if finalize_start.is_none() {
        out.trailing_gap_ns = pending_gap;
    }
    // Requests never completed in the trace are completed at the end, so that the
    // skeleton is a valid program; the summary counts them.
    if !live.is_empty() {
        out.unmatched_requests = live.len() as u64;
        let mut slots: Vec<u32> = live.values().copied().collect();
        slots.sort_unstable();
        let tok = Tok {
            kind: Kind::Wait {
                op: if slots.len() == 1 {
                    WaitOp::Wait
                } else {
                    WaitOp::Waitall
                },
                slots,
            },
            comm: CommRef::World,
            site: u32::MAX,
        };
        let id = out.table.len() as u32;
        out.table.push(tok);
        out.ids.push(id);
        out.gap_ns.push(out.trailing_gap_ns);
        out.dur_ns.push(0);
        out.trailing_gap_ns = 0;
    }
    let start = init_end.unwrap_or(0);
    out.app_ns = finalize_start.unwrap_or(last_end).saturating_sub(start);
    out
}

/// Operations that become no statement by design (communicator creation is declared at
/// the top; probes and unsuccessful tests only cost time).
fn is_silent(op: Op) -> bool {
    matches!(
        op,
        Op::CommDup
            | Op::CommSplit
            | Op::CommCreate
            | Op::CartCreate
            | Op::CartSub
            | Op::CommFree
            | Op::Probe
            | Op::Iprobe
            | Op::Test
            | Op::Testall
            | Op::Testany
            | Op::Testsome
    )
}

fn kind_of(
    rank: u32,
    ev: &Event,
    comm: CommRef,
    policy: &Policy<'_>,
    live: &mut BTreeMap<u64, u32>,
    out: &mut RankTokens,
) -> Option<Kind> {
    let size = |b: u64| policy.size_map.get(&b).copied().unwrap_or(b);
    let tag = |t: Option<i64>| {
        if policy.keep_tags {
            t.and_then(|t| u32::try_from(t).ok())
        } else {
            None
        }
    };
    let half = |peer: Option<i64>, bytes: Option<u64>, out: &mut RankTokens| -> Half {
        let peer_abs = peer_abs(rank, peer, comm, policy);
        let b = bytes.unwrap_or(0);
        out.p2p_bytes += b;
        if matches!(peer_abs, PeerAbs::Rank(_) | PeerAbs::Any) {
            out.explicit_peers += 1;
            out.explicit_bytes += b;
        }
        let null = matches!(peer_abs, PeerAbs::Dirs { null: true, .. });
        Half {
            peer: peer_abs,
            bytes: (!null).then(|| size(bytes.unwrap_or(0))),
        }
    };
    let mut post = |ev: &Event| -> Option<u32> {
        let id = ev.req?;
        let used: BTreeSet<u32> = live.values().copied().collect();
        let slot = (0..).find(|s| !used.contains(s)).unwrap_or(0);
        live.insert(id, slot);
        Some(slot)
    };
    let p2p = |op, halves, tag, req| {
        Some(Kind::P2p {
            op,
            halves,
            tag,
            req,
        })
    };
    match ev.op {
        Op::Send | Op::Bsend | Op::Ssend | Op::Rsend => {
            let h = half(ev.peer, ev.bytes, out);
            p2p(P2pOp::Send, vec![h], tag(ev.tag), None)
        }
        Op::Recv => {
            let h = half(ev.peer, ev.bytes, out);
            p2p(P2pOp::Recv, vec![h], tag(ev.tag), None)
        }
        Op::Isend | Op::Ibsend | Op::Issend | Op::Irsend => {
            let h = half(ev.peer, ev.bytes, out);
            let req = post(ev);
            p2p(P2pOp::Isend, vec![h], tag(ev.tag), req)
        }
        Op::Irecv => {
            let h = half(ev.peer, ev.bytes, out);
            let req = post(ev);
            p2p(P2pOp::Irecv, vec![h], tag(ev.tag), req)
        }
        Op::Sendrecv | Op::SendrecvReplace => {
            let s = half(ev.peer, ev.bytes, out);
            let r = half(ev.src, ev.rbytes.or(ev.bytes), out);
            p2p(P2pOp::Sendrecv, vec![s, r], tag(ev.tag), None)
        }
        Op::Wait
        | Op::Waitall
        | Op::Waitany
        | Op::Waitsome
        | Op::Test
        | Op::Testall
        | Op::Testany
        | Op::Testsome => {
            let is_test = matches!(ev.op, Op::Test | Op::Testall | Op::Testany | Op::Testsome);
            if is_test && ev.flag == Some(0) {
                return None;
            }
            let mut slots = Vec::new();
            for id in &ev.reqs {
                match live.remove(id) {
                    Some(slot) => slots.push(slot),
                    None => out.unknown_waits += 1,
                }
            }
            if slots.is_empty() {
                return None;
            }
            // The order of handles in a waitall does not matter; sorted, it is the same
            // on every rank.
            slots.sort_unstable();
            let op = if slots.len() == 1 {
                WaitOp::Wait
            } else {
                WaitOp::Waitall
            };
            Some(Kind::Wait { op, slots })
        }
        op => {
            let (coll, nonblocking) = coll_op(op)?;
            let bytes = ev.bytes.unwrap_or(0).max(ev.rbytes.unwrap_or(0));
            let sz = match coll {
                CollOp::Barrier => CollSize::None,
                CollOp::Gatherv | CollOp::Allgatherv => {
                    CollSize::PerRank([(rank, size(ev.bytes.unwrap_or(0)))].into())
                }
                CollOp::Scatterv => {
                    CollSize::PerRank([(rank, size(ev.rbytes.unwrap_or(0)))].into())
                }
                // The tracer records what a rank sends to all peers together; the
                // language's size is the block per pair.
                CollOp::Alltoallv => {
                    let n = policy.comms.size(rank, comm).max(1);
                    CollSize::PerRank([(rank, size(ev.bytes.unwrap_or(0) / n))].into())
                }
                CollOp::Alltoall => {
                    let n = policy.comms.size(rank, comm).max(1);
                    CollSize::One(size(ev.bytes.unwrap_or(0) / n))
                }
                CollOp::Gather | CollOp::Allgather => CollSize::One(size(ev.bytes.unwrap_or(0))),
                CollOp::Scatter | CollOp::ReduceScatter => {
                    CollSize::One(size(ev.rbytes.unwrap_or(0)))
                }
                _ => CollSize::One(size(bytes)),
            };
            let root = if coll.has_root() {
                ev.root
                    .and_then(|r| policy.comms.index_in(rank, comm, r))
                    .or(Some(0))
            } else {
                None
            };
            let req = if nonblocking { post(ev) } else { None };
            Some(Kind::Coll {
                op: coll,
                nonblocking,
                size: sz,
                root,
                req,
            })
        }
    }
}

fn peer_abs(rank: u32, peer: Option<i64>, comm: CommRef, policy: &Policy<'_>) -> PeerAbs {
    match peer {
        Some(PEER_ANY_SOURCE) => PeerAbs::Any,
        Some(PEER_PROC_NULL) | None => {
            let mask = if comm == CommRef::World {
                policy.dirs.mask(rank, None)
            } else {
                0
            };
            PeerAbs::Dirs { mask, null: true }
        }
        Some(p) => {
            let mask = match (comm, u64::try_from(p)) {
                (CommRef::World, Ok(p)) => policy.dirs.mask(rank, Some(p)),
                _ => 0,
            };
            if mask != 0 {
                PeerAbs::Dirs { mask, null: false }
            } else {
                PeerAbs::Rank(policy.comms.index_in(rank, comm, p).unwrap_or(0))
            }
        }
    }
}

fn coll_op(op: Op) -> Option<(CollOp, bool)> {
    Some(match op {
        Op::Barrier => (CollOp::Barrier, false),
        Op::Bcast => (CollOp::Bcast, false),
        Op::Reduce => (CollOp::Reduce, false),
        Op::Allreduce => (CollOp::Allreduce, false),
        Op::Gather => (CollOp::Gather, false),
        Op::Gatherv => (CollOp::Gatherv, false),
        Op::Scatter => (CollOp::Scatter, false),
        Op::Scatterv => (CollOp::Scatterv, false),
        Op::Allgather => (CollOp::Allgather, false),
        Op::Allgatherv => (CollOp::Allgatherv, false),
        Op::Alltoall => (CollOp::Alltoall, false),
        Op::Alltoallv => (CollOp::Alltoallv, false),
        Op::ReduceScatter | Op::ReduceScatterBlock => (CollOp::ReduceScatter, false),
        Op::Scan | Op::Exscan => (CollOp::Scan, false),
        Op::Ibarrier => (CollOp::Barrier, true),
        Op::Ibcast => (CollOp::Bcast, true),
        Op::Ireduce => (CollOp::Reduce, true),
        Op::Iallreduce => (CollOp::Allreduce, true),
        Op::Igather => (CollOp::Gather, true),
        Op::Igatherv => (CollOp::Gatherv, true),
        Op::Iscatter => (CollOp::Scatter, true),
        Op::Iscatterv => (CollOp::Scatterv, true),
        Op::Iallgather => (CollOp::Allgather, true),
        Op::Iallgatherv => (CollOp::Allgatherv, true),
        Op::Ialltoall => (CollOp::Alltoall, true),
        Op::Ialltoallv => (CollOp::Alltoallv, true),
        _ => return None,
    })
}

/// What the survey pass learns from every event about tags and sizes.
#[derive(Debug, Default)]
pub(crate) struct EventSurvey {
    tag_by_site: BTreeMap<(String, u64), i64>,
    tags_vary: bool,
    sizes: BTreeSet<u64>,
}

impl EventSurvey {
    pub fn add_rank(&mut self, trace: &RankTrace) {
        for ev in &trace.events {
            self.sizes.extend(
                [ev.bytes, ev.rbytes]
                    .into_iter()
                    .flatten()
                    .filter(|b| *b > 0),
            );
            if self.tags_vary {
                continue;
            }
            // A sendrecv has one tag clause in the DSL.
            if let (Some(t), Some(r)) = (ev.tag, ev.rtag) {
                if t != r {
                    self.tags_vary = true;
                }
            }
            for t in [ev.tag, ev.rtag].into_iter().flatten() {
                if t == TAG_ANY || t < 0 {
                    self.tags_vary = true;
                }
                let key = trace
                    .sites
                    .get(&ev.site)
                    .map(|k| (k.object.clone(), k.offset))
                    .unwrap_or_default();
                if *self.tag_by_site.entry(key).or_insert(t) != t {
                    self.tags_vary = true;
                }
            }
        }
    }

    /// Whether tags can be kept: every call site uses one constant tag, no receive takes
    /// `MPI_ANY_TAG` and every sendrecv uses one tag both ways.
    pub fn tags_are_constant(&self) -> bool {
        !self.tags_vary
    }

    /// `--merge-sizes PCT`: message sizes within `pct` % of the smallest of their group
    /// are written as the group's largest (so that no receive gets truncated). Gives
    /// recorded → written for every size that changes.
    pub fn merge_sizes(&self, pct: f64) -> BTreeMap<u64, u64> {
        let mut map = BTreeMap::new();
        let mut group: Vec<u64> = Vec::new();
        let mut flush = |group: &mut Vec<u64>| {
            if let Some(&top) = group.last() {
                for &s in group.iter().filter(|s| **s != top) {
                    map.insert(s, top);
                }
            }
            group.clear();
        };
        for &s in &self.sizes {
            if let Some(&first) = group.first() {
                if (s as f64) > first as f64 * (1.0 + pct / 100.0) {
                    flush(&mut group);
                }
            }
            group.push(s);
        }
        flush(&mut group);
        map
    }
}
