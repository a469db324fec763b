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

use rustc_hash::FxHashMap;

use super::comms::{self, CommRef, Comms, Intercomms};
use super::topo::Directions;
use crate::logicalize::trace::is_send;
use crate::trace::format::{PEER_ANY_SOURCE, PEER_PROC_NULL, TAG_ANY};
use crate::trace::stats::SiteKey;
use crate::trace::{AppSpan, Event, Op, OpClass};

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
    /// The source of the rank's last receive from any source (`source`): a master
    /// answering whichever worker's result came first.
    Source,
    /// The world rank `(rank + k) % nranks` (from the SPMD merge: ranks whose peers no
    /// direction names on all of them but which all talk to the rank k after them).
    Shift(u32),
    /// The world rank `rank ^ k` (from the SPMD merge: ranks that all talk to the
    /// rank whose number differs from theirs in the bits of k, a recursive-doubling
    /// step, where no direction or shift names the peer on every rank).
    Xor(u32),
    /// Each rank's own peer, a rank of the communicator, by world rank (from the SPMD
    /// merge: ranks that make the same call to peers no rule relates, such as a random
    /// permutation or the partners of a data decomposition).
    Table(BTreeMap<u32, u32>),
    /// The rank `base + stride * i` of the communicator, `i` the variable of the
    /// enclosing loop over peers ([`super::peers`]).
    Step { base: i64, stride: i64 },
}

/// One direction of a point-to-point operation; `bytes` is `None` towards
/// `MPI_PROC_NULL` (the size is taken from the ranks that really communicate).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Half {
    pub peer: PeerAbs,
    pub bytes: Option<u64>,
    /// For a world peer, how many ranks after this one it is (`(peer - rank) % nranks`):
    /// what the merge falls back to where ranks name their peers differently.
    pub shift: Option<u32>,
    /// For a world peer, its rank's bits that differ from this rank's (`peer ^ rank`).
    pub xor: Option<u32>,
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
    /// One round of an exchange ([`super::exchange`]): a message of `bytes` to each
    /// of the `partners` ranks after this one (`rank + 1 + j`; `None`: every other rank,
    /// j = 0 … nranks - 2) and one from each of as many before it (`rank - 1 - j`).
    Exchange {
        bytes: u64,
        partners: Option<u64>,
        /// The application's own partners, `(stride, group)` (see
        /// [`super::exchange::Exchange::shift`]).
        shift: Option<(u64, u64)>,
        /// The exact partners and sizes of every rank, where the ranks differ
        /// ([`super::exchange::Exchange::table`]).
        table: Option<std::sync::Arc<super::exchange::PartnerTable>>,
    },
    /// No call: the compute before a loop that differs from the compute between its
    /// iterations ([`super::nest::settle_entries`]), at the site of the loop's first call.
    Compute,
}

/// One statement-to-be: what happens and where in the application it was called.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Tok {
    pub kind: Kind,
    pub comm: CommRef,
    /// Index into the trace-wide list of call-site names.
    pub site: u32,
}

/// Whether half `i` of a point-to-point operation `op` receives (its only half for
/// `recv`/`irecv`, the second for `sendrecv`).
pub(crate) fn receives(op: P2pOp, i: usize) -> bool {
    match op {
        P2pOp::Recv | P2pOp::Irecv => true,
        P2pOp::Sendrecv => i == 1,
        P2pOp::Send | P2pOp::Isend => false,
    }
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
    /// Per rank, the requests `MPI_Cancel` named: the call that posted each is left out
    /// (a cancelled receive gets no message) with its completion.
    pub cancelled: &'a BTreeMap<u32, BTreeSet<u64>>,
    /// Per rank, its data-addressed stretches (event indices) and what they become.
    pub exchanges: &'a BTreeMap<u32, Vec<super::exchange::Exchange>>,
    /// Task loops: the serve sites and the sends that feed them keep their tags.
    pub serve: &'a super::serve::Serve,
}

/// What the tokenizer knows of one call site (by rank-local id) from the survey.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SiteInfo<'a> {
    /// The site's size classes.
    pub classes: Option<&'a [(u64, u64)]>,
    /// Its receives from `MPI_ANY_SOURCE` are written `recv any` (their sources vary).
    pub any_receive: bool,
    /// Its sends answer the source of the rank's last receive from any source, every
    /// time, and are written to `source`.
    pub reply: bool,
    /// It serves a task loop ([`super::serve`]): its receives keep their tags.
    pub serve: bool,
}

/// A rank's receives from `MPI_ANY_SOURCE`, read event by event: which receive took a
/// message from any source (flagged by the tracer, or an explicit receive from the
/// source a probe of any source just found: `MPI_Probe(MPI_ANY_SOURCE)` then
/// `MPI_Recv(status.MPI_SOURCE)`), and which send goes back to the source of the last
/// one (a master answering the worker whose result came first). The survey and the
/// tokenizer read every rank with one each, so they agree on what they see.
#[derive(Clone, Debug, Default)]
pub(crate) struct Wildcards {
    /// The communicator, the source (world rank) and the call site of the last receive
    /// from any source that counts (see [`Wildcards::see`]).
    last: Option<(u64, i64, u64)>,
    /// The communicator and source a probe of any source found last.
    probed: Option<(u64, i64)>,
}

/// What [`Wildcards::see`] finds in one event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct WildRole {
    /// The receive (half) took its message from any source: the source it matched.
    pub any_from: Option<i64>,
    /// The send (half) goes to the source of the last receive from any source: that
    /// receive's call site.
    pub reply_after: Option<u64>,
}

impl Wildcards {
    /// Reads one event. Only receives at call sites `counts` accepts become the last
    /// receive from any source (the tokenizer counts those it writes `recv any`).
    pub fn see(&mut self, ev: &Event, counts: &dyn Fn(u64) -> bool) -> WildRole {
        let comm = ev.comm.unwrap_or(0);
        let reply = |last: Option<(u64, i64, u64)>, to: Option<i64>| match (last, to) {
            (Some((c, src, site)), Some(to)) if c == comm && src == to => Some(site),
            _ => None,
        };
        let mut role = WildRole::default();
        match ev.op {
            // The flag is set only on a probe that found a message.
            Op::Probe | Op::Iprobe if ev.any_source => {
                self.probed = ev.peer.map(|p| (comm, p));
            }
            Op::Recv => {
                let probed = self.probed.take();
                let from_any =
                    ev.any_source || (ev.peer.is_some() && probed == ev.peer.map(|p| (comm, p)));
                if let (true, Some(p)) = (from_any, ev.peer) {
                    role.any_from = Some(p);
                    if counts(ev.site) {
                        self.last = Some((comm, p, ev.site));
                    }
                }
            }
            Op::Sendrecv | Op::SendrecvReplace => {
                role.reply_after = reply(self.last, ev.peer);
                if let (true, Some(p)) = (ev.any_source, ev.src) {
                    role.any_from = Some(p);
                    if counts(ev.site) {
                        self.last = Some((comm, p, ev.site));
                    }
                }
            }
            op if is_send(op) => {
                role.reply_after = reply(self.last, ev.peer);
            }
            _ => {}
        }
        role
    }

    /// An event the skeleton leaves out: no later send answers through it.
    pub fn forget(&mut self) {
        self.last = None;
        self.probed = None;
    }
}

/// One token as the stream gives it: its id and the times around it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Token {
    pub id: u32,
    /// Compute (ns) before the token, and MPI time of the token.
    pub gap_ns: u64,
    pub dur_ns: u64,
    /// Failed polls (tests and probes that found nothing) in the compute before the
    /// token: made again by the skeleton, so their time is not in `gap_ns` (it is in
    /// `dur_ns`, and apart in `poll_ns`).
    pub polls: u64,
    pub poll_ns: u64,
    /// The sizes the call really had (per half of a point-to-point call, or the
    /// collective's), where the token has only their size class.
    pub sizes: [Option<u64>; 2],
}

/// What one rank's tokenization counts besides its tokens.
#[derive(Clone, Debug, Default)]
pub(crate) struct RankCounts {
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
    /// Why events were dropped: reason → count.
    pub dropped: BTreeMap<String, u64>,
}

impl RankCounts {
    fn drop_event(&mut self, why: String) {
        self.dropped_events += 1;
        *self.dropped.entry(why).or_default() += 1;
    }
}

/// One rank's tokens in memory (the unit tests of nests and of the merge build them by
/// hand; the pass streams them through [`Tokenizer`]).
#[cfg(test)]
#[derive(Clone, Debug, Default)]
pub(crate) struct RankTokens {
    pub rank: u32,
    pub ids: Vec<u32>,
    pub table: Vec<Tok>,
    pub gap_ns: Vec<u64>,
    pub dur_ns: Vec<u64>,
}

/// Tokenizes one rank event by event: [`Tokenizer::push`] every event in order, then
/// [`Tokenizer::finish`]. It holds the token table, the live requests and a few counters,
/// never the events: memory grows with the number of distinct tokens, not of events. The
/// same events give the same ids in the same order every time, so the pass can read a
/// rank twice (discovery, then statistics) and match the two reads token by token.
pub(crate) struct Tokenizer<'a> {
    rank: u32,
    policy: &'a Policy<'a>,
    /// Trace-wide site index of a rank-local site id.
    site_of: &'a dyn Fn(u64) -> u32,
    /// What the survey learnt of a rank-local site id.
    info_of: &'a dyn Fn(u64) -> SiteInfo<'a>,
    /// The rank's receives from any source and the answers to them.
    wild: Wildcards,
    intern: FxHashMap<Tok, u32>,
    table: Vec<Tok>,
    live: Live,
    pending_gap: u64,
    /// Failed polls since the last token (see [`Token::polls`]), and their time (MPI
    /// time, the token's).
    pending_polls: u64,
    pending_poll_ns: u64,
    prev_end: Option<u64>,
    span: AppSpan,
    counts: RankCounts,
    intercomms: Intercomms,
    /// Requests of dropped calls (`MPI_Rput`, `MPI_Isend` on an intercommunicator):
    /// their completions are left out with them.
    dropped_reqs: BTreeSet<u64>,
    /// The completions of `MPI_Waitany` calls in a row, held until the run ends.
    anys: Vec<Token>,
    /// The index of the next event, the next of the rank's exchanges, and the compute
    /// and MPI time inside the exchange being read.
    index: u64,
    next_exchange: usize,
    inside: (u64, u64),
    /// The failed polls inside the exchange being read, and their time.
    inside_polls: u64,
    inside_poll_ns: u64,
    /// Sends so far on each channel that fed a task loop ([`super::serve::Serve`]), and
    /// whether the current event's send fed one (it keeps its tag).
    sent: FxHashMap<(i64, CommRef, i64), u64>,
    feeds: bool,
}

impl<'a> Tokenizer<'a> {
    pub fn new(
        rank: u32,
        policy: &'a Policy<'a>,
        site_of: &'a dyn Fn(u64) -> u32,
        info_of: &'a dyn Fn(u64) -> SiteInfo<'a>,
    ) -> Self {
        Tokenizer {
            rank,
            policy,
            site_of,
            info_of,
            wild: Wildcards::default(),
            intern: FxHashMap::default(),
            table: Vec::new(),
            live: Live::default(),
            pending_gap: 0,
            pending_polls: 0,
            pending_poll_ns: 0,
            prev_end: None,
            span: AppSpan::default(),
            counts: RankCounts::default(),
            intercomms: Intercomms::default(),
            dropped_reqs: BTreeSet::new(),
            anys: Vec::new(),
            index: 0,
            next_exchange: 0,
            inside: (0, 0),
            inside_polls: 0,
            inside_poll_ns: 0,
            sent: FxHashMap::default(),
            feeds: false,
        }
    }

    /// Gives `out` the tokens of the next event (events after `MPI_Finalize` are
    /// ignored). `MPI_Waitany` calls in a row (a halo or transpose unpacking messages as
    /// they arrive) complete their requests in the order the messages happened to
    /// arrive, which differs from one iteration to the next: their completions are
    /// written in slot order instead, each at its call's position and time, so that the
    /// iterations are equal tokens. Only compute lies between them, so no message this
    /// rank sends depends on the order, and every order completes.
    pub fn push(&mut self, ev: &Event, out: &mut dyn FnMut(Token)) {
        let index = self.index;
        self.index += 1;
        self.feeds = false;
        if !self.policy.serve.is_empty() && is_send(ev.op) {
            let comm = self.policy.comms.lookup(self.rank, ev.comm.unwrap_or(0));
            if let (Some(dst), Some(tag), Some(comm)) = (ev.peer, ev.tag, comm) {
                let serve = self.policy.serve;
                if serve.watches(self.rank, dst, comm, tag) {
                    let k = self.sent.entry((dst, comm, tag)).or_default();
                    self.feeds = serve.feeds(self.rank, dst, comm, tag, *k);
                    *k += 1;
                }
            }
        }
        if let Some(ex) = self
            .policy
            .exchanges
            .get(&self.rank)
            .and_then(|v| v.get(self.next_exchange))
            .filter(|ex| ex.first <= index)
        {
            self.flush_anys(out);
            // The exchange's receives are no `recv any`: nothing after answers them.
            self.wild.forget();
            self.exchange_event(ev, ex, index, out);
            return;
        }
        let token = self.push_one(ev);
        if ev.op == Op::Waitany {
            if let Some(t) = token {
                if matches!(&self.table[t.id as usize].kind, Kind::Wait { slots, .. } if slots.len() == 1)
                {
                    self.anys.push(t);
                    return;
                }
            }
        }
        self.flush_anys(out);
        if let Some(t) = token {
            out(t);
        }
    }

    /// Gives `out` the held `MPI_Waitany` completions, their slots in ascending order.
    fn flush_anys(&mut self, out: &mut dyn FnMut(Token)) {
        let held = std::mem::take(&mut self.anys);
        let slot = |t: &Token, table: &[Tok]| match &table[t.id as usize].kind {
            Kind::Wait { slots, .. } => slots.first().copied().unwrap_or(0),
            _ => 0,
        };
        let mut slots: Vec<u32> = held.iter().map(|t| slot(t, &self.table)).collect();
        slots.sort_unstable();
        for (t, s) in held.into_iter().zip(slots) {
            let mut tok = self.table[t.id as usize].clone();
            if let Kind::Wait { slots, .. } = &mut tok.kind {
                *slots = vec![s];
            }
            let id = self.intern(tok);
            out(Token { id, ..t });
        }
    }

    /// An event of a data-addressed exchange: its compute and MPI time are summed; after
    /// the last, the exchange's rounds are given, the compute spread evenly over them
    /// (the compute before the exchange goes with the first).
    fn exchange_event(
        &mut self,
        ev: &Event,
        ex: &super::exchange::Exchange,
        index: u64,
        out: &mut dyn FnMut(Token),
    ) {
        // The gap is compute only while the rank held its core (the clock record).
        let gap = self.prev_end.map_or(0, |end| {
            ev.start_ns
                .saturating_sub(end)
                .saturating_sub(ev.off_cpu_ns)
        });
        self.prev_end = Some(ev.end_ns);
        self.span.see(ev);
        if index == ex.first {
            self.pending_gap = self.pending_gap.saturating_add(gap);
            self.inside = (0, 0);
            self.inside_polls = 0;
            self.inside_poll_ns = 0;
        } else {
            self.inside.0 = self.inside.0.saturating_add(gap);
        }
        if ev.is_failed_poll() {
            // A poll that found nothing is made again by the skeleton (see `token`).
            self.inside_polls = self.inside_polls.saturating_add(ev.calls());
            self.inside_poll_ns = self.inside_poll_ns.saturating_add(ev.duration_ns());
        }
        self.inside.1 = self.inside.1.saturating_add(ev.duration_ns());
        if index < ex.last {
            return;
        }
        self.next_exchange += 1;
        let tok = Tok {
            kind: Kind::Exchange {
                bytes: ex.bytes,
                partners: ex.partners,
                shift: ex.shift,
                table: ex.table.clone(),
            },
            comm: self
                .policy
                .comms
                .lookup(self.rank, ex.comm)
                .unwrap_or(CommRef::World),
            site: (self.site_of)(ex.site),
        };
        let id = self.intern(tok);
        let rounds = ex.rounds.max(1);
        let (inner, mpi) = std::mem::take(&mut self.inside);
        let polls = std::mem::take(&mut self.inside_polls);
        let polls_ns = std::mem::take(&mut self.inside_poll_ns);
        // Every round sends and receives a message of `bytes` with each partner.
        let others = ex
            .partners
            .unwrap_or((self.policy.dirs.peers.len() as u64).saturating_sub(1));
        let bytes = match ex.table.as_deref() {
            // This rank's own messages, both ways.
            Some(t) => [&t.sends, &t.recvs]
                .iter()
                .filter_map(|side| side.get(self.rank as usize))
                .flatten()
                .fold(0u64, |sum, (_, b)| sum.saturating_add(*b)),
            None => rounds.saturating_mul(2 * ex.bytes.saturating_mul(others)),
        };
        self.counts.p2p_bytes = self.counts.p2p_bytes.saturating_add(bytes);
        for k in 0..rounds {
            // Round k's share of the sums, in whole ns, adding up to them.
            let share = |total: u64| {
                let at = |k: u64| (u128::from(total) * u128::from(k) / u128::from(rounds)) as u64;
                at(k + 1) - at(k)
            };
            let (before, polls_before, poll_ns) = if k == 0 {
                (
                    std::mem::take(&mut self.pending_gap),
                    std::mem::take(&mut self.pending_polls),
                    std::mem::take(&mut self.pending_poll_ns),
                )
            } else {
                (0, 0, 0)
            };
            out(Token {
                id,
                gap_ns: before.saturating_add(share(inner)),
                dur_ns: share(mpi).saturating_add(poll_ns),
                polls: polls_before.saturating_add(share(polls)),
                poll_ns: poll_ns.saturating_add(share(polls_ns)),
                sizes: [None, None],
            });
        }
    }

    fn intern(&mut self, tok: Tok) -> u32 {
        // Most events repeat an earlier token: look it up before cloning it.
        match self.intern.get(&tok) {
            Some(&id) => id,
            None => {
                let id = self.table.len() as u32;
                self.intern.insert(tok.clone(), id);
                self.table.push(tok);
                id
            }
        }
    }

    /// The token of one event, if it makes one.
    fn push_one(&mut self, ev: &Event) -> Option<Token> {
        if self.span.finalized() {
            return None;
        }
        // The gap is compute only while the rank held its core (the clock record).
        let gap = self.prev_end.map_or(0, |end| {
            ev.start_ns
                .saturating_sub(end)
                .saturating_sub(ev.off_cpu_ns)
        });
        self.prev_end = Some(ev.end_ns);
        self.span.see(ev);
        match ev.op {
            Op::Init | Op::InitThread => {
                self.pending_gap = 0;
                self.pending_polls = 0;
                self.pending_poll_ns = 0;
                return None;
            }
            Op::Finalize | Op::Abort => {
                self.counts.trailing_gap_ns = self.pending_gap.saturating_add(gap);
                self.pending_gap = 0;
                self.pending_polls = 0;
                self.pending_poll_ns = 0;
                return None;
            }
            _ => {}
        }
        self.pending_gap = self.pending_gap.saturating_add(gap);
        let on_intercomm = self.intercomms.see(ev);
        let cancelled = ev.req.is_some_and(|r| {
            self.policy
                .cancelled
                .get(&self.rank)
                .is_some_and(|c| c.contains(&r))
        });
        if cancelled {
            self.counts.drop_event(format!(
                "{} cancelled by MPI_Cancel (left out with its completion)",
                ev.op.mpi_name()
            ));
            self.dropped_reqs.extend(ev.req);
            self.wild.forget();
            return None;
        }
        if let Some(why) = comms::unmodelled(ev, on_intercomm) {
            self.counts.drop_event(why);
            if let Some(req) = ev.req {
                self.dropped_reqs.insert(req);
            }
            self.wild.forget();
            return None;
        }
        // A completion of dropped requests completes the others (if any) alone.
        let trimmed;
        let ev = if ev.reqs.iter().any(|r| self.dropped_reqs.contains(r)) {
            let mut e = ev.clone();
            e.reqs.retain(|r| !self.dropped_reqs.remove(r));
            trimmed = e;
            &trimmed
        } else {
            ev
        };
        let comm = match ev.comm {
            None => CommRef::World,
            Some(id) => match self.policy.comms.lookup(self.rank, id) {
                Some(c) => c,
                None => {
                    self.counts.drop_event(if id == 1 {
                        format!("{} on MPI_COMM_SELF", ev.op.mpi_name())
                    } else {
                        format!(
                            "{} on a communicator the skeleton does not declare",
                            ev.op.mpi_name()
                        )
                    });
                    self.wild.forget();
                    return None;
                }
            },
        };
        let info_of = self.info_of;
        let site = info_of(ev.site);
        let role = self.wild.see(ev, &|s| info_of(s).any_receive);
        let wild = Wild {
            any_receive: role.any_from.is_some() && site.any_receive,
            reply: role.reply_after.is_some() && site.reply,
            tagged: if ev.op == Op::Recv {
                site.serve
            } else {
                self.feeds
            },
        };
        let Some((kind, sizes)) = kind_of(
            self.rank,
            ev,
            comm,
            self.policy,
            site.classes,
            wild,
            &mut self.live,
            &mut self.counts,
        ) else {
            // Completions of no live request (null handles, or requests the trace never
            // posted: counted in `unknown_waits`) are no-ops, not lost calls.
            if !is_silent(ev.op) && ev.op.class() != OpClass::Completion {
                self.counts
                    .drop_event(format!("{} is not modelled", ev.op.mpi_name()));
            }
            // A poll that found nothing makes no statement of its own: the skeleton
            // makes as many polls after the compute before the next statement (`compute
            // .. polls N`). Their cost is the MPI's (a system call on TCP, a yield
            // where ranks share a core: HPCC's RandomAccess, which polls MPI_Testany
            // every 100 ns, took 7x longer on TCP and 24x with its two ranks on one
            // core), so they are made, not replayed as compute.
            if ev.is_failed_poll() {
                self.pending_polls = self.pending_polls.saturating_add(ev.calls());
                self.pending_poll_ns = self.pending_poll_ns.saturating_add(ev.duration_ns());
            }
            return None;
        };
        let tok = Tok {
            kind,
            comm,
            site: (self.site_of)(ev.site),
        };
        let id = self.intern(tok);
        let gap_ns = std::mem::take(&mut self.pending_gap);
        let poll_ns = std::mem::take(&mut self.pending_poll_ns);
        Some(Token {
            id,
            gap_ns,
            dur_ns: ev.duration_ns().saturating_add(poll_ns),
            polls: std::mem::take(&mut self.pending_polls),
            poll_ns,
            sizes,
        })
    }

    /// After the last event: gives `out` the completions still held and the token that
    /// completes requests never completed in the trace (so that the skeleton is a valid
    /// program; the summary counts them); gives the token table and the counters.
    pub fn finish(mut self, out: &mut dyn FnMut(Token)) -> (Vec<Tok>, RankCounts) {
        self.flush_anys(out);
        if !self.span.finalized() {
            self.counts.trailing_gap_ns = self.pending_gap;
        }
        let mut last = None;
        if !self.live.slot_of.is_empty() {
            self.counts.unmatched_requests = self.live.slot_of.len() as u64;
            let mut slots: Vec<u32> = self.live.slot_of.values().copied().collect();
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
            let id = self.table.len() as u32;
            self.table.push(tok);
            last = Some(Token {
                id,
                gap_ns: self.counts.trailing_gap_ns,
                dur_ns: 0,
                polls: 0,
                poll_ns: 0,
                sizes: [None, None],
            });
            self.counts.trailing_gap_ns = 0;
        }
        self.counts.app_ns = self.span.ns();
        if let Some(t) = last {
            out(t);
        }
        (self.table, self.counts)
    }
}

/// The requests posted and not yet completed, each named by a slot.
#[derive(Debug, Default)]
struct Live {
    /// Request id → slot.
    slot_of: BTreeMap<u64, u32>,
    /// The slots in use (the values of `slot_of`), kept alongside so that posting does
    /// not scan every live request.
    used: BTreeSet<u32>,
}

impl Live {
    /// Posts request `id` in the lowest free slot.
    fn post(&mut self, id: u64) -> u32 {
        let mut slot = 0;
        for &u in &self.used {
            if u != slot {
                break;
            }
            slot += 1;
        }
        // An id posted again while live (a lost completion) frees its old slot.
        if let Some(old) = self.slot_of.insert(id, slot) {
            self.used.remove(&old);
        }
        self.used.insert(slot);
        slot
    }

    /// Completes request `id`: its slot, if it was live.
    fn complete(&mut self, id: u64) -> Option<u32> {
        let slot = self.slot_of.remove(&id)?;
        self.used.remove(&slot);
        Some(slot)
    }
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
            | Op::Cancel
            | Op::Probe
            | Op::Iprobe
            | Op::Test
            | Op::Testall
            | Op::Testany
            | Op::Testsome
    )
}

/// The token kind of one event, with every size replaced by its size class at the
/// event's call site (`classes`), and the sizes the call really had (per half, or the
/// collective's).
#[allow(clippy::too_many_arguments)]
fn kind_of(
    rank: u32,
    ev: &Event,
    comm: CommRef,
    policy: &Policy<'_>,
    classes: Option<&[(u64, u64)]>,
    wild: Wild,
    live: &mut Live,
    out: &mut RankCounts,
) -> Option<(Kind, [Option<u64>; 2])> {
    // Sizes in the order the kind asks for them: the halves that have one, in order.
    let seen = std::cell::RefCell::new(Vec::with_capacity(2));
    let size = |b: u64| {
        let b = policy.size_map.get(&b).copied().unwrap_or(b);
        seen.borrow_mut().push(b);
        size_class(classes, b)
    };
    let kind = kind_inner(rank, ev, comm, policy, &size, wild, live, out)?;
    let seen = seen.into_inner();
    let mut sizes = [None, None];
    match &kind {
        Kind::P2p { halves, .. } => {
            let mut it = seen.into_iter();
            for (slot, h) in sizes.iter_mut().zip(halves) {
                if h.bytes.is_some() {
                    *slot = it.next();
                }
            }
        }
        Kind::Coll { .. } => sizes[0] = seen.first().copied(),
        Kind::Wait { .. } | Kind::Exchange { .. } | Kind::Compute => {}
    }
    Some((kind, sizes))
}

/// The class of `bytes` among a site's size classes: the largest size of the class it
/// falls in (a receive is written with it, so that it takes any message of the class,
/// whichever ranks and iterations a statement stands for), or itself.
fn size_class(classes: Option<&[(u64, u64)]>, bytes: u64) -> u64 {
    let Some(classes) = classes else {
        return bytes;
    };
    let at = classes.partition_point(|(lo, _)| *lo <= bytes);
    match at.checked_sub(1).and_then(|i| classes.get(i)) {
        Some(&(_, hi)) if bytes <= hi => hi,
        _ => bytes,
    }
}

/// How one event's halves are written with respect to receives from any source.
#[derive(Clone, Copy, Debug, Default)]
struct Wild {
    /// The receive (half) is `recv any`.
    any_receive: bool,
    /// The send (half) goes to `source`.
    reply: bool,
    /// The call keeps its tag though tags are not kept: a task loop's receive, or a send
    /// whose message it received.
    tagged: bool,
}

#[allow(clippy::too_many_arguments)]
fn kind_inner(
    rank: u32,
    ev: &Event,
    comm: CommRef,
    policy: &Policy<'_>,
    size: &dyn Fn(u64) -> u64,
    wild: Wild,
    live: &mut Live,
    out: &mut RankCounts,
) -> Option<Kind> {
    let tag = |t: Option<i64>| {
        if policy.keep_tags || wild.tagged {
            t.and_then(|t| u32::try_from(t).ok())
        } else {
            None
        }
    };
    // A receive from any source.
    let any = |peer: Option<i64>| {
        if wild.any_receive {
            Some(PEER_ANY_SOURCE)
        } else {
            peer
        }
    };
    // `answer`: a send half that goes to the source of the last receive from any source
    // (`wild.reply`) is written to `source`.
    let half = |peer: Option<i64>, answer: bool, bytes: Option<u64>, out: &mut RankCounts| {
        let peer_abs = if answer && peer.is_some_and(|p| p >= 0) {
            PeerAbs::Source
        } else {
            peer_abs(rank, peer, comm, policy)
        };
        let b = bytes.unwrap_or(0);
        out.p2p_bytes += b;
        if matches!(peer_abs, PeerAbs::Rank(_) | PeerAbs::Any) {
            out.explicit_peers += 1;
            out.explicit_bytes += b;
        }
        let null = matches!(peer_abs, PeerAbs::Dirs { null: true, .. });
        let n = policy.dirs.peers.len() as i64;
        // `source` names whichever rank sent: no rank the merge could relate.
        let world = match (comm, peer) {
            _ if peer_abs == PeerAbs::Source => None,
            (CommRef::World, Some(p)) if (0..n).contains(&p) => Some(p),
            _ => None,
        };
        Half {
            peer: peer_abs,
            bytes: (!null).then(|| size(bytes.unwrap_or(0))),
            shift: world.and_then(|p| u32::try_from((p - i64::from(rank)).rem_euclid(n)).ok()),
            xor: world.and_then(|p| u32::try_from(p ^ i64::from(rank)).ok()),
        }
    };
    let mut post = |ev: &Event| -> Option<u32> { Some(live.post(ev.req?)) };
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
            let h = half(ev.peer, wild.reply, ev.bytes, out);
            p2p(P2pOp::Send, vec![h], tag(ev.tag), None)
        }
        Op::Recv => {
            let h = half(any(ev.peer), false, ev.bytes, out);
            p2p(P2pOp::Recv, vec![h], tag(ev.tag), None)
        }
        Op::Isend | Op::Ibsend | Op::Issend | Op::Irsend => {
            let h = half(ev.peer, wild.reply, ev.bytes, out);
            let req = post(ev);
            p2p(P2pOp::Isend, vec![h], tag(ev.tag), req)
        }
        Op::Irecv => {
            let h = half(ev.peer, false, ev.bytes, out);
            let req = post(ev);
            p2p(P2pOp::Irecv, vec![h], tag(ev.tag), req)
        }
        Op::Sendrecv | Op::SendrecvReplace => {
            let s = half(ev.peer, wild.reply, ev.bytes, out);
            let r = half(any(ev.src), false, ev.rbytes.or(ev.bytes), out);
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
                match live.complete(*id) {
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
        Op::IreduceScatter | Op::IreduceScatterBlock => (CollOp::ReduceScatter, true),
        Op::Iscan | Op::Iexscan => (CollOp::Scan, true),
        _ => return None,
    })
}

/// A set of call sites (object, offset).
pub(crate) type SiteSet = BTreeSet<(String, u64)>;

/// Size classes per call site (object, offset): sorted, disjoint `(smallest, largest)`
/// ranges of the sizes recorded there.
pub(crate) type SizeClasses = BTreeMap<(String, u64), Vec<(u64, u64)>>;

/// Sizes within this factor of the next smaller one recorded at the same call site are
/// one size class: the messages of a code whose sizes follow its data (atoms migrate,
/// particles move) fill a range, densely in a long run but with gaps of a quarter or
/// more in a short or small one (LAMMPS's atom exchange at 2 ranks: 2,200 B one way and
/// 2,816 B the other), while sizes that follow the program (the levels of a multigrid,
/// a factor of 2 to 8 apart) stay apart.
pub(crate) const SIZE_CLASS_RATIO: f64 = 1.5;

/// Distinct sizes at one call site from which its sizes are taken to follow the data
/// (a program's own sizes, such as the levels of a multigrid, are a handful).
const DATA_SIZES: usize = 16;

/// Distinct sizes kept per call site; a site with more is one class from its smallest
/// to its largest size.
const MAX_SITE_SIZES: usize = 1 << 16;

/// What the survey pass learns from every event about tags, sizes and receives from
/// any source.
#[derive(Debug, Default)]
pub(crate) struct EventSurvey {
    tag_by_site: BTreeMap<(String, u64), i64>,
    tags_vary: bool,
    sizes: BTreeSet<u64>,
    site_sizes: BTreeMap<(String, u64), SiteSizes>,
    /// Receive sites that took messages from any source: whether, on some rank, from
    /// more than one source.
    any_sources_vary: BTreeMap<(String, u64), bool>,
    /// Send sites and how they answered receives from any source (`after` the sites
    /// of the receives answered).
    replies: BTreeMap<(String, u64), Replies<(String, u64)>>,
}

/// How the sends of one call site follow the rank's receives from any source.
#[derive(Debug, Clone)]
struct Replies<S> {
    /// Every send went to the source of the rank's last receive from any source.
    always: bool,
    /// The call sites of the receives they answered.
    after: BTreeSet<S>,
}

impl<S> Default for Replies<S> {
    fn default() -> Self {
        Replies {
            always: true,
            after: BTreeSet::new(),
        }
    }
}

impl Replies<u64> {
    fn add(&mut self, after: Option<u64>) {
        match after {
            Some(site) => {
                self.after.insert(site);
            }
            None => self.always = false,
        }
    }
}

/// The distinct sizes of one call site, or their range once there are too many.
#[derive(Debug, Clone)]
enum SiteSizes {
    Distinct(BTreeSet<u64>),
    Range(u64, u64),
}

impl Default for SiteSizes {
    fn default() -> Self {
        SiteSizes::Distinct(BTreeSet::new())
    }
}

impl SiteSizes {
    fn add(&mut self, b: u64) {
        match self {
            SiteSizes::Distinct(set) => {
                set.insert(b);
                if set.len() > MAX_SITE_SIZES {
                    let (lo, hi) = self.bounds().unwrap_or((b, b));
                    *self = SiteSizes::Range(lo, hi);
                }
            }
            SiteSizes::Range(lo, hi) => {
                *lo = (*lo).min(b);
                *hi = (*hi).max(b);
            }
        }
    }

    fn merge(&mut self, other: &SiteSizes) {
        match other {
            SiteSizes::Distinct(set) => set.iter().for_each(|b| self.add(*b)),
            SiteSizes::Range(lo, hi) => {
                let (a, b) = self.bounds().unwrap_or((*lo, *hi));
                *self = SiteSizes::Range(a.min(*lo), b.max(*hi));
            }
        }
    }

    /// The smallest and the largest size.
    fn bounds(&self) -> Option<(u64, u64)> {
        match self {
            SiteSizes::Distinct(set) => Some((*set.first()?, *set.last()?)),
            SiteSizes::Range(lo, hi) => Some((*lo, *hi)),
        }
    }

    /// Single-linkage classes: a size joins the class of the next smaller one when it
    /// is within [`SIZE_CLASS_RATIO`] of it. A site with [`DATA_SIZES`] distinct sizes
    /// or more sends what its data holds (how many atoms crossed a border, zero
    /// included): it is one class, or ranks whose data differ would get different
    /// tokens, different loop nests, and rank conditions.
    fn classes(&self) -> Vec<(u64, u64)> {
        match self {
            SiteSizes::Range(..) => self.bounds().into_iter().collect(),
            SiteSizes::Distinct(set) if set.len() >= DATA_SIZES => {
                self.bounds().into_iter().collect()
            }
            SiteSizes::Distinct(set) => {
                let mut out: Vec<(u64, u64)> = Vec::new();
                for &b in set.iter().filter(|b| **b > 0) {
                    match out.last_mut() {
                        Some((_, hi)) if b as f64 <= *hi as f64 * SIZE_CLASS_RATIO => *hi = b,
                        _ => out.push((b, b)),
                    }
                }
                // No bytes at a site that also sends data is the same message with
                // nothing in it this time (no atom crossed this border): the smallest
                // class reaches down to zero.
                if set.contains(&0) {
                    match out.first_mut() {
                        Some((lo, _)) => *lo = 0,
                        None => out.push((0, 0)),
                    }
                }
                out
            }
        }
    }
}

/// What one rank's events say about tags and sizes, gathered while the rank is read and
/// added to the [`EventSurvey`] once the rank has been read to its end (call sites are
/// known by their rank-local id until then).
#[derive(Debug, Default)]
pub(crate) struct RankEventSurvey {
    /// The first tag seen at each call site.
    tag_by_site: BTreeMap<u64, i64>,
    tags_vary: bool,
    sizes: BTreeSet<u64>,
    /// The sizes of each call site.
    site_sizes: BTreeMap<u64, SiteSizes>,
    wild: Wildcards,
    /// Receive sites that took messages from any source: the first source, and whether
    /// another followed.
    any_sources: BTreeMap<u64, (i64, bool)>,
    /// Send sites (rank-local ids) and how they answered receives from any source.
    replies: BTreeMap<u64, Replies<u64>>,
}

impl RankEventSurvey {
    pub fn add(&mut self, ev: &Event) {
        let role = self.wild.see(ev, &|_| true);
        if let Some(src) = role.any_from {
            let e = self.any_sources.entry(ev.site).or_insert((src, false));
            e.1 |= e.0 != src;
        }
        if is_send(ev.op) && ev.peer.is_some_and(|p| p >= 0) {
            self.replies
                .entry(ev.site)
                .or_default()
                .add(role.reply_after);
        }
        for b in [ev.bytes, ev.rbytes].into_iter().flatten() {
            if b > 0 {
                self.sizes.insert(b);
            }
            self.site_sizes.entry(ev.site).or_default().add(b);
        }
        if self.tags_vary {
            return;
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
            if *self.tag_by_site.entry(ev.site).or_insert(t) != t {
                self.tags_vary = true;
            }
        }
    }
}

impl EventSurvey {
    /// Adds one rank read to its end; `sites` names its call sites. (Two site ids of a
    /// rank, or of two ranks, at the same place must use the same tag too.)
    pub fn add_rank(&mut self, rank: RankEventSurvey, sites: &BTreeMap<u64, SiteKey>) {
        self.sizes.extend(rank.sizes);
        let key_of = |site: &u64| {
            sites
                .get(site)
                .map(|k| (k.object.clone(), k.offset))
                .unwrap_or_default()
        };
        for (site, sizes) in &rank.site_sizes {
            self.site_sizes
                .entry(key_of(site))
                .or_default()
                .merge(sizes);
        }
        for (site, (_, vary)) in &rank.any_sources {
            *self.any_sources_vary.entry(key_of(site)).or_default() |= vary;
        }
        for (site, r) in &rank.replies {
            let into = self.replies.entry(key_of(site)).or_default();
            into.always &= r.always;
            into.after.extend(r.after.iter().map(key_of));
        }
        self.tags_vary |= rank.tags_vary;
        if self.tags_vary {
            return;
        }
        for (site, t) in rank.tag_by_site {
            let key = sites
                .get(&site)
                .map(|k| (k.object.clone(), k.offset))
                .unwrap_or_default();
            if *self.tag_by_site.entry(key).or_insert(t) != t {
                self.tags_vary = true;
            }
        }
    }

    /// The call sites whose receives from any source are written `recv any` (those that
    /// took messages from more than one source on some rank: a receive that always
    /// got its message from one rank stays a receive from that rank), and those whose
    /// sends are written to `source`: every send there went to the source of the
    /// rank's last receive from any source, and all those receives are written `recv
    /// any`: even a site whose answers all went to one rank (the first answers, where
    /// the compiler made them another call than the rest) answers whoever sent first
    /// where the skeleton runs.
    ///
    /// A receive site some of whose answers go out from a site that is not written to
    /// `source` keeps the traced sources: its master would take results in the order
    /// they come and send those answers to the traced ranks, and wait, in a blocking
    /// send, for a worker blocked sending its own result.
    pub fn wildcards(&self) -> (SiteSet, SiteSet) {
        let mut any: SiteSet = self
            .any_sources_vary
            .iter()
            .filter(|(_, vary)| **vary)
            .map(|(site, _)| site.clone())
            .collect();
        loop {
            let replies: SiteSet = self
                .replies
                .iter()
                .filter(|(_, r)| {
                    r.always && !r.after.is_empty() && r.after.iter().all(|s| any.contains(s))
                })
                .map(|(site, _)| site.clone())
                .collect();
            let static_answers: SiteSet = self
                .replies
                .iter()
                .filter(|(site, _)| !replies.contains(*site))
                .flat_map(|(_, r)| r.after.iter().cloned())
                .collect();
            let before = any.len();
            any.retain(|s| !static_answers.contains(s));
            if any.len() == before {
                return (any, replies);
            }
        }
    }

    /// The size classes of every call site, trace-wide (so that every rank gives a call
    /// the same class).
    pub fn size_classes(&self) -> SizeClasses {
        self.site_sizes
            .iter()
            .map(|(site, sizes)| (site.clone(), sizes.classes()))
            .collect()
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

#[cfg(test)]
mod wildcard_tests {
    use super::*;

    fn ev(op: Op, site: u64, peer: i64, any_source: bool) -> Event {
        Event {
            op,
            site,
            peer: Some(peer),
            bytes: Some(8),
            comm: Some(0),
            any_source,
            ..Event::default()
        }
    }

    fn key(site: u64) -> (String, u64) {
        ("app".to_string(), site)
    }

    /// The survey of one rank's `events`, sites 1 to 19 named `app+N`.
    fn survey(events: &[Event]) -> (SiteSet, SiteSet) {
        let mut rank = RankEventSurvey::default();
        for e in events {
            rank.add(e);
        }
        let sites: BTreeMap<u64, SiteKey> = (1..20).map(|s| (s, SiteKey::at("app", s))).collect();
        let mut all = EventSurvey::default();
        all.add_rank(rank, &sites);
        all.wildcards()
    }

    /// A master: tasks to every worker (site 1), then results from any worker (site 2)
    /// each answered at once (site 3), in the order the workers finished.
    fn master(order: &[i64]) -> Vec<Event> {
        let mut events: Vec<Event> = (1..4).map(|w| ev(Op::Send, 1, w, false)).collect();
        for &w in order {
            events.push(ev(Op::Recv, 2, w, true));
            events.push(ev(Op::Send, 3, w, false));
        }
        events
    }

    #[test]
    fn answers_to_receives_from_any_source_are_found_per_call_site() {
        let (any, replies) = survey(&master(&[2, 1, 3, 1, 2]));
        assert_eq!(any, BTreeSet::from([key(2)]));
        // The first tasks go to named workers: no answer.
        assert_eq!(replies, BTreeSet::from([key(3)]));
    }

    #[test]
    fn a_probe_of_any_source_then_a_receive_from_what_it_found_is_a_receive_from_any() {
        let mut events = Vec::new();
        for w in [3, 1, 2, 1] {
            events.push(ev(Op::Probe, 4, w, true));
            events.push(ev(Op::Recv, 5, w, false));
            events.push(ev(Op::Send, 6, w, false));
        }
        // A receive from a named rank that no probe found stays one.
        events.push(ev(Op::Recv, 7, 2, false));
        events.push(ev(Op::Recv, 7, 3, false));
        let (any, replies) = survey(&events);
        assert_eq!(any, BTreeSet::from([key(5)]));
        assert_eq!(replies, BTreeSet::from([key(6)]));
    }

    /// MPICH's build of master_worker: the first answers are another call (site 12)
    /// than the rest, and in the traced run all went to rank 3. Written to rank 3, the
    /// skeleton's master answered rank 3 whoever sent first, and the check found the
    /// deadlock: they answer `source`.
    #[test]
    fn a_site_that_answered_one_rank_only_still_answers_whoever_sent() {
        let mut events = master(&[1, 2, 3]);
        for _ in 0..3 {
            events.push(ev(Op::Recv, 2, 3, true));
            events.push(ev(Op::Send, 12, 3, false));
        }
        let (any, replies) = survey(&events);
        assert_eq!(any, BTreeSet::from([key(2)]));
        assert_eq!(replies, BTreeSet::from([key(3), key(12)]));
    }

    #[test]
    fn sends_that_only_sometimes_answer_or_answer_one_rank_only_are_no_answers() {
        let mut events = master(&[2, 1, 3]);
        // Site 10's receives from any source always got rank 1's message: they stay
        // receives from rank 1, and the answers to them sends to rank 1 (site 11): a
        // `source` there would name no rank.
        for _ in 0..3 {
            events.push(ev(Op::Recv, 10, 1, true));
            events.push(ev(Op::Send, 11, 1, false));
        }
        let (any, replies) = survey(&events);
        assert_eq!(any, BTreeSet::from([key(2)]));
        assert_eq!(replies, BTreeSet::from([key(3)]));
    }

    #[test]
    fn a_receive_from_any_source_some_answers_of_which_go_to_fixed_ranks_keeps_its_order() {
        // Site 8 answers site 2's receives twice, then sends to a rank that sent
        // nothing: not an answer. Were site 2 `recv any`, the master would take results
        // in the order they come and still send site 8's messages to the traced ranks,
        // which may wait for a worker blocked sending its own result (mpi4py, whose
        // every send is one call site, made such a skeleton): site 2 keeps the traced
        // sources, and so site 3 cannot answer `source`.
        let mut events = master(&[2, 1, 3]);
        events.push(ev(Op::Recv, 2, 1, true));
        events.push(ev(Op::Send, 8, 1, false));
        events.push(ev(Op::Recv, 2, 3, true));
        events.push(ev(Op::Send, 8, 3, false));
        events.push(ev(Op::Send, 8, 2, false));
        let (any, replies) = survey(&events);
        assert!(any.is_empty(), "{any:?}");
        assert!(replies.is_empty(), "{replies:?}");
    }

    #[test]
    fn sendrecv_answers_the_previous_receive_and_its_own_receive_counts_next() {
        let mut w = Wildcards::default();
        let all = |_: u64| true;
        let first = Event {
            src: Some(2),
            ..ev(Op::Sendrecv, 1, 1, true)
        };
        // Its send cannot answer its own receive.
        assert_eq!(
            w.see(&first, &all),
            WildRole {
                any_from: Some(2),
                reply_after: None
            }
        );
        let second = Event {
            src: Some(3),
            ..ev(Op::Sendrecv, 2, 2, false)
        };
        assert_eq!(
            w.see(&second, &all),
            WildRole {
                any_from: None,
                reply_after: Some(1)
            }
        );
        // Another communicator's rank 2 is no answer; a dropped call forgets.
        let other = Event {
            comm: Some(5),
            ..ev(Op::Send, 3, 2, false)
        };
        assert_eq!(w.see(&other, &all).reply_after, None);
        w.forget();
        assert_eq!(w.see(&ev(Op::Send, 3, 2, false), &all).reply_after, None);
        // A receive at a site the tokenizer does not write `recv any` is none.
        w.see(&ev(Op::Recv, 4, 1, true), &|s| s != 4);
        assert_eq!(w.see(&ev(Op::Send, 3, 1, false), &all).reply_after, None);
    }
}
