//! The deadlock and matching check: runs every rank of the program abstractly and
//! matches messages and collectives as MPI does.
//!
//! Semantics are the strict ones of the MPI standard, so that a program that passes runs
//! on any MPI library: a blocking `send` completes only when the receiver has posted a
//! matching receive (as MPI_Ssend; a program that relies on the library buffering the
//! message is reported as a deadlock), messages between two ranks on one communicator
//! and tag arrive in order, `any` takes the earliest sent message, a send or receive
//! towards a missing neighbour does nothing (MPI_PROC_NULL), and the k-th collective a
//! rank calls on a communicator must be the same operation (and root and size) as every
//! other member's k-th. Communicator creation is collective over its parent.
//!
//! Ranks run one at a time until they block; the scheduler is deterministic, so
//! diagnostics are too. The run stops after a budget of operations; the checker then
//! says it covered only a prefix.
//!
//! The order of events (which rank runs when, which request slot each operation gets,
//! the order in which completions wake ranks) decides which ranks a diagnostic names,
//! so the hot path keeps it exactly while avoiding work: requests are small slots in
//! one vector reused through a free list, memberships and peers are flat per-rank
//! tables, a blocking operation whose requests completed at once never builds a wait
//! record, and each distinct condition or loop count is evaluated once per rank (those
//! that read loop variables on every execution, with the rank's iteration numbers).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use rustc_hash::FxHashMap as HashMap;
use smallvec::SmallVec;

use perfskel_grammar::ast::*;
use perfskel_grammar::printer;
use perfskel_grammar::Diag;

use super::statics::Statics;
use super::{ranks_phrase, ranks_verb, Lines, Options};
use crate::exec::comms::{CommError, Comms};
use crate::exec::cursor::{Cursor, Fault, Memo, Stop, Work};
use crate::exec::kept::{Keeps, Kept, NoSource};
use crate::exec::plan::{self, Bytes, CollPlan, Op, P2pPlan, PeerCache, PeerFault, PeerRef, Plan};
use crate::exec::queue::{Gatherings, Queues};
use crate::semantics::{eval_int_in, msg_bytes, Env, EvalError, MAX_SIMULATED_RANKS};

pub(super) struct Outcome {
    pub ops: u64,
    pub complete: bool,
    pub ranks: Vec<RankStats>,
}

/// What one rank did during the simulation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RankStats {
    /// Mean compute time, in seconds.
    pub compute_seconds: f64,
    /// Point-to-point messages sent to an existing peer, and their bytes.
    pub messages_sent: u64,
    pub bytes_sent: u64,
    /// Collective calls (including communicator creation).
    pub collectives: u64,
    /// Iterations of `while recv` loops: messages received with the loop's tag.
    pub tasks: u64,
    /// Point-to-point messages and bytes sent to each world rank; filled only where
    /// [`Options::pair_traffic`] asks (the communication matrix of a skeleton).
    pub sent_to: BTreeMap<u32, (u64, u64)>,
}

pub(super) fn simulate(
    program: &Program,
    statics: &Statics,
    lines: &Lines,
    options: Options,
    diags: &mut Vec<Diag>,
) -> Outcome {
    let n = statics.n_ranks;
    if n == 0 || n > MAX_SIMULATED_RANKS {
        diags.push(
            Diag::warning(
                "not-simulated",
                format!("the deadlock check was skipped: it handles at most {MAX_SIMULATED_RANKS} ranks"),
            )
            .at(program.ranks.pos, "rank count"),
        );
        return Outcome {
            ops: 0,
            complete: false,
            ranks: Vec::new(),
        };
    }
    let handle_index: HashMap<&str, usize> = statics
        .request_names
        .iter()
        .enumerate()
        .map(|(i, name)| (name.as_str(), i))
        .collect();
    let plan = plan::lower(program, &handle_index);
    let envs = Env::all(n, &statics.world);
    let comms = match Comms::create(program, &plan, &statics.world, &envs) {
        Ok(comms) => comms,
        Err(fault) => {
            if let CommError::Eval(rank, e) = fault {
                diags.push(bad_expression(rank, &e, ""));
            }
            // An aborted run reported its problem; it is not an incomplete check.
            return Outcome {
                ops: 0,
                complete: true,
                ranks: vec![RankStats::default(); n as usize],
            };
        }
    };
    let mut sim = Sim::new(statics, &plan, comms, envs, lines, options, diags);
    let result = sim.run();
    // An aborted run reported its problem; it is not an incomplete check.
    let complete = result.unwrap_or(true);
    if !complete {
        sim.diags.push(
            Diag::warning(
                "simulation-budget",
                format!(
                    "the deadlock check stopped after {} operations; it found no problem in that part of the run",
                    sim.work.ops
                ),
            )
            .with_note("the rest of the run was not checked; `perfskel check --budget N` raises the limit"),
        );
    }
    Outcome {
        ops: sim.work.ops,
        complete,
        ranks: sim.ranks.iter().map(|r| r.stats.clone()).collect(),
    }
}

/// A problem that makes further simulation meaningless (it was reported).
struct Abort;

/// A request slot in `Sim::reqs`.
type ReqId = u32;

/// No request, no handle, no peer rank (`any`): the sentinel of the `u32` fields.
const NONE: u32 = crate::exec::queue::ANY;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ReqKind {
    Send {
        inst: u32,
        to: u32,
    },
    /// `from` is `NONE` for `any`.
    Recv {
        inst: u32,
        from: u32,
    },
    Coll {
        inst: u32,
    },
    Done,
}

struct Req<'p> {
    owner: u32,
    done: bool,
    consumed: bool,
    /// What its match sets in the owner's [`Kept`].
    keeps: Keeps,
    /// The handle the request is bound to, or `NONE`.
    handle: u32,
    kind: ReqKind,
    stmt: &'p Stmt,
}

struct PendingSend {
    src: u32,
    tag: u32,
    bytes: u64,
    req: ReqId,
}

struct PendingRecv {
    /// `NONE` for `any`.
    src: u32,
    tag: u32,
    bytes: u64,
    req: ReqId,
}

crate::exec::queue::envelope!(PendingSend, PendingRecv);

#[derive(Clone, Copy, Debug, PartialEq)]
enum CollKey {
    Op {
        op: CollOp,
        nonblocking: bool,
        root: Option<u64>,
        bytes: Option<u64>,
    },
    /// The creation of the communicator with this id (ids stand for names).
    CommCreate(usize),
}

struct CollEntry<'p> {
    key: CollKey,
    first_rank: u64,
    first_stmt: &'p Stmt,
    reqs: Vec<ReqId>,
    arrived: Vec<u64>,
}

/// The requests one statement waits for; almost always one or two.
type Reqs = SmallVec<[ReqId; 4]>;

struct Blocked<'p> {
    reqs: Reqs,
    any: bool,
    stmt: &'p Stmt,
}

struct RankState<'p> {
    /// Where the rank is in the plan.
    cursor: Cursor<'p>,
    /// Request of each handle name (indexed like `Sim::handle_index`), or `NONE`.
    handles: Vec<ReqId>,
    /// The operations in flight of each windowed handle, oldest first (empty for the
    /// others).
    windows: Vec<VecDeque<ReqId>>,
    /// Collectives called so far on each instance, by `CommInst::decl`.
    coll_seq: Vec<u64>,
    blocked: Option<Blocked<'p>>,
    done: bool,
    stats: RankStats,
    /// Its `source` and last `while recv` tag.
    kept: Kept,
}

struct Sim<'p, 'd> {
    lines: &'p Lines<'p>,
    diags: &'d mut Vec<Diag>,
    plan: &'p Plan<'p>,
    ranks: Vec<RankState<'p>>,
    comms: Comms,
    /// Requests completed and consumed, ready for reuse: a long run allocates only as
    /// many requests as are in flight at once.
    free_reqs: Vec<ReqId>,
    reqs: Vec<Req<'p>>,
    /// Unmatched sends and receives by destination: `Inst::base` + rank in it.
    queues: Queues<PendingSend, PendingRecv>,
    /// Pending collectives of each instance.
    colls: Gatherings<CollEntry<'p>>,
    /// Emptied request and rank lists of completed collectives, for reuse.
    spare_lists: Vec<(Vec<ReqId>, Vec<u64>)>,
    /// Peers of the plan's tables resolved so far.
    peers: PeerCache,
    /// Rank-dependent conditions and loop counts evaluated so far.
    memo: Memo,
    ready: VecDeque<u32>,
    in_ready: Vec<bool>,
    /// Operations run so far, against the budget.
    work: Work,
    /// Statements already reported, so a problem is reported once, not once per rank.
    reported: BTreeSet<(&'static str, u32)>,
    /// Pairs of vector collectives already reported as disagreeing on their counts.
    reported_pairs: BTreeSet<(u32, u32)>,
    /// Whether each rank counts what it sends to each peer (`RankStats::sent_to`).
    pair_traffic: bool,
}

impl<'p, 'd> Sim<'p, 'd> {
    fn new(
        statics: &'p Statics,
        plan: &'p Plan<'p>,
        comms: Comms,
        envs: Vec<Env>,
        lines: &'p Lines<'p>,
        options: Options,
        diags: &'d mut Vec<Diag>,
    ) -> Sim<'p, 'd> {
        let n = statics.n_ranks;
        let ranks = envs
            .into_iter()
            .map(|env| RankState {
                cursor: Cursor::new(env),
                handles: vec![NONE; statics.request_names.len()],
                windows: vec![VecDeque::new(); statics.request_names.len()],
                coll_seq: vec![0; comms.decls],
                blocked: None,
                done: false,
                stats: RankStats::default(),
                kept: Kept::default(),
            })
            .collect();
        Sim {
            lines,
            diags,
            peers: PeerCache::new(plan, n as usize),
            memo: Memo::new(plan, n as usize),
            plan,
            ranks,
            queues: Queues::new(comms.slots),
            colls: Gatherings::new(comms.insts.len()),
            comms,
            free_reqs: Vec::new(),
            reqs: Vec::new(),
            spare_lists: Vec::new(),
            ready: (0..n as u32).collect(),
            in_ready: vec![true; n as usize],
            work: Work {
                ops: 0,
                budget: options.simulation_budget,
            },
            reported: BTreeSet::new(),
            reported_pairs: BTreeSet::new(),
            pair_traffic: options.pair_traffic,
        }
    }

    fn report_once(&mut self, code: &'static str, pos: Pos, diag: impl FnOnce() -> Diag) {
        let key = (code, pos.span().map_or(u32::MAX, |s| s.start));
        if self.reported.insert(key) {
            self.diags.push(diag());
        }
    }

    fn eval_error(&mut self, rank: u64, e: EvalError) -> Abort {
        let at = self.iteration(rank);
        self.report_once("bad-expression", e.pos(), || bad_expression(rank, &e, &at));
        Abort
    }

    /// " (at i = 3, j = 0)": the iteration numbers of the loops `rank` is in that name
    /// them, for messages about a value computed there; empty outside such loops.
    fn iteration(&self, rank: u64) -> String {
        self.iteration_list(rank)
            .map_or_else(String::new, |list| format!(" (at {list})"))
    }

    /// "i = 3, j = 0", or `None` outside loops that name their iteration numbers.
    fn iteration_list(&self, rank: u64) -> Option<String> {
        let vars = &self.ranks[rank as usize].cursor.vars;
        let list: Vec<String> = vars.iter().map(|(n, v)| format!("{n} = {v}")).collect();
        (!list.is_empty()).then(|| list.join(", "))
    }

    /// Runs until every rank is done or blocked. `Ok(false)` when the budget ran out.
    fn run(&mut self) -> Result<bool, Abort> {
        while let Some(rank) = self.ready.pop_front() {
            self.in_ready[rank as usize] = false;
            self.run_rank(rank)?;
            if self.work.ops > self.work.budget {
                return Ok(false);
            }
        }
        if self.ranks.iter().any(|r| !r.done) {
            self.report_deadlock();
            return Err(Abort);
        }
        self.report_leftovers();
        Ok(true)
    }

    #[inline]
    fn wake(&mut self, rank: u32) {
        let slot = &mut self.in_ready[rank as usize];
        if !*slot {
            *slot = true;
            self.ready.push_back(rank);
        }
    }

    fn run_rank(&mut self, rank: u32) -> Result<(), Abort> {
        let r = rank as usize;
        // Resume: a rank woken from a wait consumes its completed requests first.
        if let Some(blocked) = self.ranks[r].blocked.take() {
            if !self.try_complete(&blocked) {
                self.ranks[r].blocked = Some(blocked);
                return Ok(());
            }
        }
        let plan: &'p Plan<'p> = self.plan;
        // Entered only with operations left in the budget (`run` stops as soon as they
        // are spent), the loop checks the budget after each operation that counts.
        loop {
            let state = &mut self.ranks[r];
            let stop = state.cursor.advance(
                plan,
                &mut self.memo,
                &mut state.stats.compute_seconds,
                &mut self.work,
                false,
            );
            let op = match stop {
                Ok(Stop::Op(op)) => op,
                Ok(Stop::Done) => {
                    self.ranks[r].done = true;
                    return Ok(());
                }
                Ok(Stop::Budget) => break,
                // Compute is summed, never stopped at, here.
                Ok(Stop::Compute(_)) => continue,
                Err(Fault::Eval(e)) => return Err(self.eval_error(u64::from(rank), e)),
                Err(Fault::NegativeCount(pos, count)) => {
                    let at = self.iteration(u64::from(rank));
                    self.report_once("bad-count", pos, || {
                        Diag::error(
                            "bad-count",
                            format!("the loop count is {count} on rank {rank}{at}"),
                        )
                        .at(pos, "negative")
                    });
                    return Err(Abort);
                }
            };
            match op {
                Op::P2p(i) => {
                    let p = &plan.p2ps[*i as usize];
                    if !self.p2p(rank, p)? {
                        return Ok(());
                    }
                    if self.work.ops > self.work.budget {
                        break;
                    }
                }
                Op::Collective(i) => {
                    let c = &plan.colls[*i as usize];
                    if !self.collective(rank, c)? {
                        return Ok(());
                    }
                    if self.work.ops > self.work.budget {
                        break;
                    }
                }
                Op::CommDecl { stmt, parent, name } => {
                    self.work.ops += 1;
                    // Ranks outside the parent take no part (they hold MPI_COMM_NULL
                    // there), and are not members of the new communicator either.
                    let Some((inst, _)) = self.comms.membership(rank, *parent) else {
                        continue;
                    };
                    let req = self.arrive(rank, inst, CollKey::CommCreate(*name), stmt)?;
                    if !self.wait_one(rank, req, stmt) {
                        return Ok(());
                    }
                    if self.work.ops > self.work.budget {
                        break;
                    }
                }
                Op::Wait {
                    stmt,
                    handles: ids,
                    any,
                } => {
                    // A handle whose request was completed is MPI_REQUEST_NULL: waiting
                    // for it returns at once. A windowed handle completes every
                    // operation it has in flight.
                    let state = &mut self.ranks[r];
                    let mut reqs = Reqs::new();
                    for &i in &plan.handles[ids.0 as usize..ids.1 as usize] {
                        let window = &mut state.windows[i];
                        if window.is_empty() {
                            reqs.extend((state.handles[i] != NONE).then_some(state.handles[i]));
                        } else {
                            reqs.extend(window.drain(..));
                        }
                    }
                    let blocked = Blocked {
                        reqs,
                        any: *any,
                        stmt,
                    };
                    if !self.try_complete(&blocked) {
                        self.ranks[r].blocked = Some(blocked);
                        return Ok(());
                    }
                }
                // The loop goes on while the message has its tag.
                Op::WhileTag { tag, end } => {
                    let state = &mut self.ranks[r];
                    if state.kept.goes_on(*tag) {
                        state.stats.tasks += 1;
                    } else {
                        state.cursor.pc = *end;
                    }
                }
                // The cursor stops only at operations with other ranks.
                _ => {}
            }
        }
        // Out of budget: leave the rank runnable.
        self.wake(rank);
        Ok(())
    }

    /// Runs a point-to-point operation; returns whether the rank can go on.
    #[inline]
    fn p2p(&mut self, rank: u32, p: &P2pPlan<'p>) -> Result<bool, Abort> {
        self.work.ops += 1;
        let stmt = p.stmt;
        let (inst, me) = self.member(rank, p.comm, p.comm_name, stmt)?;
        let (mut first, mut second) = (NONE, NONE);
        if let Some((peer, bytes)) = p.send {
            let bytes = self.bytes(rank, bytes)?;
            let to = if peer.source {
                self.source(rank, inst, peer)?
            } else {
                self.peer(rank, inst, me, peer)?
            };
            first = self.post_send(rank, inst, me, to, p.tag, bytes, stmt);
        }
        if let Some((peer, bytes)) = p.recv {
            let bytes = self.bytes(rank, bytes)?;
            // `Some(NONE)` for `any`, `None` for a missing neighbour.
            let from = if peer.any {
                Some(NONE)
            } else if peer.source {
                self.source(rank, inst, peer)?
            } else {
                self.peer(rank, inst, me, peer)?
            };
            let keeps = Keeps::of(p, inst);
            let req = self.post_recv(rank, inst, me, from, p.tag, bytes, keeps, stmt);
            if first == NONE {
                first = req;
            } else {
                second = req;
            }
        }
        if p.request {
            if let (true, Some(handle)) = (first != NONE, p.handle) {
                self.bind(rank, handle, first);
                if p.window > 0 {
                    // More than the window in flight: the oldest is completed first.
                    let window = &mut self.ranks[rank as usize].windows[handle];
                    window.push_back(first);
                    if window.len() as u64 > p.window {
                        if let Some(oldest) = window.pop_front() {
                            return Ok(self.wait_one(rank, oldest, stmt));
                        }
                    }
                }
            }
            return Ok(true);
        }
        // Blocking: go on if every request completed, consuming them in order.
        let done = |sim: &Self, q: ReqId| q == NONE || sim.reqs[q as usize].done;
        if done(self, first) && done(self, second) {
            for q in [first, second] {
                if q != NONE {
                    self.consume(q);
                }
            }
            return Ok(true);
        }
        let mut reqs = Reqs::new();
        reqs.extend([first, second].into_iter().filter(|&q| q != NONE));
        self.ranks[rank as usize].blocked = Some(Blocked {
            reqs,
            any: false,
            stmt,
        });
        Ok(false)
    }

    /// Waits for one request of a blocking operation; returns whether the rank can go
    /// on now.
    #[inline]
    fn wait_one(&mut self, rank: u32, req: ReqId, stmt: &'p Stmt) -> bool {
        if self.reqs[req as usize].done {
            self.consume(req);
            return true;
        }
        self.ranks[rank as usize].blocked = Some(Blocked {
            reqs: smallvec::smallvec![req],
            any: false,
            stmt,
        });
        false
    }

    /// Runs a collective; returns whether the rank can go on.
    #[inline]
    fn collective(&mut self, rank: u32, p: &CollPlan<'p>) -> Result<bool, Abort> {
        self.work.ops += 1;
        let stmt = p.stmt;
        let (inst, _) = self.member(rank, p.comm, p.comm_name, stmt)?;
        let size = self.comms.insts[inst as usize].members.len() as u64;
        let root = match (p.root, p.has_root) {
            (Some(e), _) => {
                let v = match p.constant_root {
                    Some(v) => v,
                    None => {
                        let state = &self.ranks[rank as usize];
                        eval_int_in(e, &state.cursor.env, &state.cursor.vars)
                            .map_err(|err| self.eval_error(u64::from(rank), err))?
                    }
                };
                if v < 0 || v as u64 >= size {
                    let pos = e.pos;
                    let name = p.comm_name.to_string();
                    let at = self.iteration(u64::from(rank));
                    self.report_once("bad-root", pos, || {
                        Diag::error(
                            "bad-root",
                            format!("root {v} is out of range on rank {rank}{at}"),
                        )
                        .at(pos, "root")
                        .with_note(format!("`{name}` has ranks 0 to {} there", size - 1))
                    });
                    return Err(Abort);
                }
                Some(v as u64)
            }
            (None, true) => Some(0),
            (None, false) => None,
        };
        let key = CollKey::Op {
            op: p.op,
            nonblocking: p.nonblocking,
            root,
            bytes: p.bytes,
        };
        let req = self.arrive(rank, inst, key, stmt)?;
        if p.request {
            if let Some(handle) = p.handle {
                self.bind(rank, handle, req);
            }
            Ok(true)
        } else {
            Ok(self.wait_one(rank, req, stmt))
        }
    }

    /// The peer of a point-to-point operation, its rank in the communicator (`None`:
    /// a missing neighbour); a peer out of range is reported.
    #[inline(always)]
    fn peer(
        &mut self,
        rank: u32,
        inst: u32,
        me: u32,
        peer: PeerRef<'p>,
    ) -> Result<Option<u32>, Abort> {
        let state = &self.ranks[rank as usize];
        let found = self.peers.peer(
            peer,
            rank,
            &self.comms.insts[inst as usize],
            me,
            &state.cursor.env,
            &state.cursor.vars,
        );
        found.map_err(|fault| self.bad_peer(u64::from(rank), peer.peer, fault))
    }

    /// The rank `source` names for `rank` on communicator instance `inst`; an error
    /// before any receive from `any` matched, or when that was on another communicator.
    #[inline]
    fn source(&mut self, rank: u32, inst: u32, peer: PeerRef<'p>) -> Result<Option<u32>, Abort> {
        match self.ranks[rank as usize].kept.source(inst) {
            Ok(src) => Ok(Some(src)),
            Err(why) => Err(self.bad_source(rank, peer.peer, why == NoSource::Elsewhere)),
        }
    }

    #[cold]
    fn bad_source(&mut self, rank: u32, peer: &Spanned<Peer>, elsewhere: bool) -> Abort {
        let at = self.iteration(u64::from(rank));
        let (code, message, label) = if elsewhere {
            (
                "source-other-communicator",
                format!("`source` on rank {rank}{at} names a rank of another communicator: the last `recv any` of this rank received on another one"),
                "a rank of another communicator",
            )
        } else {
            (
                "source-before-any",
                format!("`source` on rank {rank}{at} names no rank: no `recv any` of this rank has received a message yet"),
                "no rank to name",
            )
        };
        self.report_once(code, peer.pos, || {
            Diag::error(code, message)
                .at(peer.pos, label)
                .with_note("`source` is the rank the last blocking `recv any` (or `sendrecv ... from any`) of this rank received from")
        });
        Abort
    }

    #[cold]
    fn bad_peer(&mut self, rank: u64, peer: &Spanned<Peer>, fault: PeerFault) -> Abort {
        let message = match fault {
            PeerFault::Eval(e) => return self.eval_error(rank, e),
            PeerFault::OutOfRange(v, size) => format!(
                "`{}` is {v} on rank {rank}{}, but the communicator has ranks 0 to {}",
                printer::peer(&peer.value),
                self.iteration(rank),
                size - 1
            ),
            PeerFault::BadArgument(why) => match self.iteration_list(rank) {
                Some(at) => format!("{why} (on rank {rank}, at {at})"),
                None => format!("{why} (on rank {rank})"),
            },
            PeerFault::NotInTopology => format!(
                "`{}` is not a direction of this communicator",
                printer::peer(&peer.value)
            ),
        };
        self.report_once("bad-peer", peer.pos, || {
            Diag::error("bad-peer", message).at(peer.pos, "peer")
        });
        Abort
    }

    /// Completes the wait if its requests allow; consumes what it completes.
    #[inline]
    fn try_complete(&mut self, blocked: &Blocked) -> bool {
        if blocked.reqs.is_empty() {
            return true;
        }
        if blocked.any {
            match blocked.reqs.iter().find(|&&id| self.reqs[id as usize].done) {
                Some(&id) => {
                    self.consume(id);
                    true
                }
                None => false,
            }
        } else if blocked.reqs.iter().all(|&id| self.reqs[id as usize].done) {
            for &id in &blocked.reqs {
                self.consume(id);
            }
            true
        } else {
            false
        }
    }

    #[inline]
    fn complete(&mut self, id: ReqId) {
        let req = &mut self.reqs[id as usize];
        req.done = true;
        let owner = req.owner;
        if self.ranks[owner as usize].blocked.is_some() {
            self.wake(owner);
        }
    }

    #[inline]
    fn new_req(&mut self, owner: u32, kind: ReqKind, stmt: &'p Stmt) -> ReqId {
        let req = Req {
            owner,
            done: kind == ReqKind::Done,
            consumed: false,
            keeps: Keeps::default(),
            handle: NONE,
            kind,
            stmt,
        };
        match self.free_reqs.pop() {
            Some(id) => {
                self.reqs[id as usize] = req;
                id
            }
            None => {
                self.reqs.push(req);
                (self.reqs.len() - 1) as ReqId
            }
        }
    }

    #[inline]
    fn bind(&mut self, rank: u32, handle: usize, req: ReqId) {
        self.ranks[rank as usize].handles[handle] = req;
        self.reqs[req as usize].handle = handle as u32;
    }

    /// A completed request has been waited for: its handle becomes null and the slot
    /// is reused. Nothing else refers to a completed request.
    #[inline]
    fn consume(&mut self, id: ReqId) {
        let req = &mut self.reqs[id as usize];
        if req.consumed {
            return;
        }
        req.consumed = true;
        let (owner, handle) = (req.owner as usize, req.handle);
        // A request is bound to at most one handle, which may have moved on since.
        if handle != NONE {
            let slot = &mut self.ranks[owner].handles[handle as usize];
            if *slot == id {
                *slot = NONE;
            }
        }
        self.free_reqs.push(id);
    }

    /// The instance of communicator `name` that `rank` belongs to, and its rank there.
    #[inline]
    fn member(
        &mut self,
        rank: u32,
        comm: Option<usize>,
        name: &str,
        stmt: &'p Stmt,
    ) -> Result<(u32, u32), Abort> {
        match self.comms.membership(rank, comm) {
            Some(m) => Ok(m),
            None => Err(self.not_member(u64::from(rank), name, stmt)),
        }
    }

    #[cold]
    fn not_member(&mut self, rank: u64, name: &str, stmt: &'p Stmt) -> Abort {
        let name = name.to_string();
        self.report_once("not-member", stmt.pos, || {
            Diag::error(
                "not-member",
                format!("rank {rank} is not a member of `{name}`"),
            )
            .at(stmt.pos, "used here")
            .with_note("a negative split color leaves a rank out of the new communicator")
        });
        Abort
    }

    /// The peer's rank in the communicator, or `None` for a missing neighbour.
    /// A message's size on `rank` at its current iteration.
    #[inline(always)]
    fn bytes(&mut self, rank: u32, bytes: Bytes<'p>) -> Result<u64, Abort> {
        match bytes {
            Bytes::Const(n) => Ok(n),
            Bytes::Pick(size) => {
                let state = &self.ranks[rank as usize];
                msg_bytes(size, &state.cursor.env, &state.cursor.vars)
                    .map_err(|e| self.eval_error(u64::from(rank), e))
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn post_send(
        &mut self,
        rank: u32,
        inst: u32,
        me: u32,
        to: Option<u32>,
        tag: u32,
        bytes: u64,
        stmt: &'p Stmt,
    ) -> ReqId {
        let Some(to) = to else {
            return self.new_req(rank, ReqKind::Done, stmt);
        };
        let stats = &mut self.ranks[rank as usize].stats;
        stats.messages_sent += 1;
        stats.bytes_sent += bytes;
        if self.pair_traffic {
            let world = self.comms.insts[inst as usize].members[to as usize] as u32;
            let pair = stats.sent_to.entry(world).or_insert((0, 0));
            pair.0 += 1;
            pair.1 += bytes;
        }
        let req = self.new_req(rank, ReqKind::Send { inst, to }, stmt);
        let slot = self.comms.insts[inst as usize].base + to as usize;
        match self.queues.receive_for(slot, me, tag) {
            Some(recv) => self.matched(req, bytes, recv.req, recv.bytes, (me, tag)),
            None => self.queues.queue_send(
                slot,
                PendingSend {
                    src: me,
                    tag,
                    bytes,
                    req,
                },
            ),
        }
        req
    }

    /// `from`: `None` for a missing neighbour, `Some(NONE)` for `any`; `keeps`: the
    /// match sets the rank's `source`, its `tag`.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn post_recv(
        &mut self,
        rank: u32,
        inst: u32,
        me: u32,
        from: Option<u32>,
        tag: u32,
        bytes: u64,
        keeps: Keeps,
        stmt: &'p Stmt,
    ) -> ReqId {
        let Some(from) = from else {
            return self.new_req(rank, ReqKind::Done, stmt);
        };
        let req = self.new_req(rank, ReqKind::Recv { inst, from }, stmt);
        self.reqs[req as usize].keeps = keeps;
        let slot = self.comms.insts[inst as usize].base + me as usize;
        match self.queues.message_for(slot, from, tag) {
            Some(send) => self.matched(send.req, send.bytes, req, bytes, (send.src, send.tag)),
            None => self.queues.queue_recv(
                slot,
                PendingRecv {
                    src: from,
                    tag,
                    bytes,
                    req,
                },
            ),
        }
        req
    }

    /// A message from rank `src` of the communicator, with `tag`, meets its receive.
    #[inline]
    fn matched(
        &mut self,
        send: ReqId,
        send_bytes: u64,
        recv: ReqId,
        recv_bytes: u64,
        (src, tag): (u32, u32),
    ) {
        if send_bytes > recv_bytes {
            self.truncation(send, send_bytes, recv, recv_bytes);
        }
        let r = &self.reqs[recv as usize];
        self.ranks[r.owner as usize].kept.matched(r.keeps, src, tag);
        self.complete(send);
        self.complete(recv);
    }

    #[cold]
    fn truncation(&mut self, send: ReqId, send_bytes: u64, recv: ReqId, recv_bytes: u64) {
        {
            let (s, r) = (&self.reqs[send as usize], &self.reqs[recv as usize]);
            let (sstmt, rstmt) = (s.stmt, r.stmt);
            let (sender, receiver) = (s.owner, r.owner);
            let line = self.lines.describe(sstmt.pos);
            self.report_once("truncation", rstmt.pos, || {
                Diag::error(
                    "truncation",
                    format!(
                        "rank {receiver} receives at most {recv_bytes} B but rank {sender} sends {send_bytes} B"
                    ),
                )
                .at(rstmt.pos, "receive too small")
                .with_secondary(sstmt.pos, "the message is sent here")
                .with_note(format!("MPI fails with MPI_ERR_TRUNCATE; the send is at {line}"))
            });
        }
    }

    fn arrive(
        &mut self,
        rank: u32,
        inst: u32,
        key: CollKey,
        stmt: &'p Stmt,
    ) -> Result<ReqId, Abort> {
        let inst_us = inst as usize;
        let state = &mut self.ranks[rank as usize];
        let seq = {
            let counter = &mut state.coll_seq[self.comms.insts[inst_us].decl];
            *counter += 1;
            *counter - 1
        };
        state.stats.collectives += 1;
        let req = self.new_req(rank, ReqKind::Coll { inst }, stmt);
        let spare = &mut self.spare_lists;
        let entry = self.colls.entry(inst_us, seq, || {
            let (reqs, arrived) = spare.pop().unwrap_or_default();
            CollEntry {
                key,
                first_rank: u64::from(rank),
                first_stmt: stmt,
                reqs,
                arrived,
            }
        });
        if entry.key != key {
            let (first_rank, first_stmt) = (entry.first_rank, entry.first_stmt);
            return Err(self.mismatch(u64::from(rank), inst_us, seq, stmt, first_rank, first_stmt));
        }
        entry.reqs.push(req);
        entry.arrived.push(u64::from(rank));
        if entry.arrived.len() == self.comms.insts[inst_us].members.len() {
            if let Some(entry) = self.colls.finish(inst_us, seq) {
                if let CollKey::Op { op, root, .. } = entry.key {
                    if op.is_vector() {
                        self.vector_counts(inst_us, op, root, &entry.reqs, &entry.arrived);
                    }
                }
                let (mut reqs, mut arrived) = (entry.reqs, entry.arrived);
                for &id in &reqs {
                    self.complete(id);
                }
                reqs.clear();
                arrived.clear();
                self.spare_lists.push((reqs, arrived));
            }
        }
        Ok(req)
    }

    /// A vector collective whose members called it from statements whose tables do not
    /// agree: each member contributes its own entry, and a receiver expects from each
    /// member the entry its own statement gives (every member receives in `allgatherv`
    /// and `alltoallv`, the root in `gatherv`, and every member from the root in
    /// `scatterv`, which sends the root's entries). MPI requires the counts to agree; a
    /// skeleton's ranks meet at different statements where it merged their streams
    /// apart. Reported once per pair of statements.
    fn vector_counts(
        &mut self,
        inst: usize,
        op: CollOp,
        root: Option<u64>,
        reqs: &[ReqId],
        arrived: &[u64],
    ) {
        let entry = |stmt: &Stmt, world: u64| -> u64 {
            match &stmt.kind {
                StmtKind::Collective(c) => match &c.size {
                    Some(SizeSpec::PerRank(v)) => v
                        .get(world as usize)
                        .and_then(|s| s.value.bytes())
                        .unwrap_or(0),
                    Some(SizeSpec::Fixed(s)) => s.value.bytes().unwrap_or(0),
                    None => 0,
                },
                _ => 0,
            }
        };
        let stmts: Vec<(u64, &'p Stmt)> = arrived
            .iter()
            .zip(reqs)
            .map(|(&r, &id)| (r, self.reqs[id as usize].stmt))
            .collect();
        // Nothing to compare when every member is at the same statement.
        if stmts.iter().all(|(_, s)| std::ptr::eq(*s, stmts[0].1)) {
            return;
        }
        let receivers: Vec<(u64, &'p Stmt)> = match (op, root) {
            (CollOp::Gatherv | CollOp::Scatterv, Some(root)) => {
                let Some(&world) = self.comms.insts[inst].members.get(root as usize) else {
                    return;
                };
                stmts.iter().filter(|(r, _)| *r == world).copied().collect()
            }
            _ => stmts.clone(),
        };
        for &(j, at_j) in &receivers {
            for &(r, at_r) in &stmts {
                let (sent, expected) = (entry(at_r, r), entry(at_j, r));
                if std::ptr::eq(at_j, at_r) || sent == expected {
                    continue;
                }
                let (a, b) = (
                    at_r.pos.span().map_or(0, |s| s.start),
                    at_j.pos.span().map_or(0, |s| s.start),
                );
                let key = (a.min(b), a.max(b));
                if !self.reported_pairs.insert(key) {
                    continue;
                }
                let comm = self.comms.insts[inst].name.clone();
                let name = op.keyword();
                let line = self.lines.describe(at_r.pos);
                self.diags.push(
                    Diag::error(
                        "vector-counts",
                        format!(
                            "`{name}` on `{comm}`: rank {r} contributes {sent} B where rank {j} expects {expected} B from it"
                        ),
                    )
                    .at(at_j.pos, format!("rank {j} expects {expected} B from rank {r}"))
                    .with_secondary(at_r.pos, format!("rank {r} contributes {sent} B"))
                    .with_note(format!(
                        "the members of a vector collective meet here at different statements (rank {r}'s is at {line}) whose `per_rank` tables differ; MPI requires every member's count to agree with what the receivers expect"
                    )),
                );
            }
        }
    }

    #[cold]
    fn mismatch(
        &mut self,
        rank: u64,
        inst: usize,
        seq: u64,
        stmt: &'p Stmt,
        first_rank: u64,
        first_stmt: &'p Stmt,
    ) -> Abort {
        let comm = self.comms.insts[inst].name.clone();
        let line = self.lines.describe(first_stmt.pos);
        let mine = printer::stmt_head(stmt);
        let theirs = printer::stmt_head(first_stmt);
        self.report_once("collective-mismatch", stmt.pos, || {
            Diag::error(
                "collective-mismatch",
                format!("collectives on `{comm}` do not match: rank {rank} calls `{mine}` where rank {first_rank} calls `{theirs}`"),
            )
            .at(stmt.pos, format!("rank {rank}'s collective number {}", seq + 1))
            .with_secondary(first_stmt.pos, format!("rank {first_rank}'s"))
            .with_note(format!(
                "all ranks of a communicator must call the same collectives (operation, root and size) in the same order; rank {first_rank}'s is at {line}"
            ))
        });
        Abort
    }

    /// Collectives some members called and others not, by instance and number.
    fn pending_colls(&self) -> impl Iterator<Item = (usize, u64, &CollEntry<'p>)> {
        self.colls.pending()
    }

    /// What the first unfinished request of a blocked rank waits for.
    fn waiting_for(&self, blocked: &Blocked) -> Option<ReqKind> {
        blocked
            .reqs
            .iter()
            .map(|&id| &self.reqs[id as usize])
            .find(|req| !req.done)
            .map(|req| req.kind)
    }

    fn state_of(&self, world_rank: u64) -> String {
        let state = &self.ranks[world_rank as usize];
        match &state.blocked {
            _ if state.done => format!("rank {world_rank} has finished"),
            Some(b) => format!(
                "rank {world_rank} is blocked in `{}` at {}",
                printer::stmt_head(b.stmt),
                self.lines.describe(b.stmt.pos)
            ),
            None => format!("rank {world_rank} is running"),
        }
    }

    fn report_deadlock(&mut self) {
        // Group blocked ranks by the statement they are stuck in.
        let mut groups: BTreeMap<u32, (Vec<u64>, &'p Stmt)> = BTreeMap::new();
        for (rank, state) in self.ranks.iter().enumerate() {
            if let Some(b) = &state.blocked {
                let key = b.stmt.pos.span().map_or(u32::MAX, |s| s.start);
                groups
                    .entry(key)
                    .or_insert_with(|| (Vec::new(), b.stmt))
                    .0
                    .push(rank as u64);
            }
        }
        let blocked: Vec<u64> = groups
            .values()
            .flat_map(|(r, _)| r.iter().copied())
            .collect();
        let Some((_, (first_ranks, first_stmt))) = groups.iter().next() else {
            return;
        };
        let first_stmt: &Stmt = first_stmt;
        // A collective that finished ranks never reach is the clearer story.
        for (ranks, stmt) in groups.values() {
            let b = self.ranks[ranks[0] as usize].blocked.as_ref();
            if let Some(ReqKind::Coll { inst }) = b.and_then(|b| self.waiting_for(b)) {
                let members = &self.comms.insts[inst as usize].members;
                let finished: Vec<u64> = members
                    .iter()
                    .copied()
                    .filter(|&m| self.ranks[m as usize].done)
                    .collect();
                if !finished.is_empty() {
                    let comm = self.comms.insts[inst as usize].name.clone();
                    let diag = Diag::error(
                        "collective-not-reached",
                        format!(
                            "`{}` on `{comm}` is not reached by every rank: {} without calling it",
                            printer::stmt_head(stmt),
                            ranks_verb(&finished, "finish")
                        ),
                    )
                    .at(stmt.pos, format!("{} here forever", ranks_verb(ranks, "wait")))
                    .with_note("every rank of a communicator must call each of its collectives; is it inside an `if` that not all ranks take?");
                    self.diags.push(diag);
                    return;
                }
            }
        }
        let mut diag = Diag::error(
            "deadlock",
            format!("deadlock: {} forever", ranks_verb(&blocked, "wait")),
        )
        .at(
            first_stmt.pos,
            format!("{} here", ranks_verb(first_ranks, "block")),
        );
        let mut unsafe_send = false;
        for (i, (ranks, stmt)) in groups.values().enumerate() {
            if i > 0 && i < 4 {
                diag =
                    diag.with_secondary(stmt.pos, format!("{} here", ranks_verb(ranks, "block")));
            }
            if i >= 4 {
                continue;
            }
            let example = ranks[0];
            let Some(b) = self.ranks[example as usize].blocked.as_ref() else {
                continue;
            };
            let what = match self.waiting_for(b) {
                Some(ReqKind::Send { inst, to }) => {
                    let world = self.comms.insts[inst as usize].members[to as usize];
                    if matches!(&stmt.kind, StmtKind::P2p(p) if p.op == P2pOp::Send) {
                        unsafe_send = true;
                    }
                    format!(
                        "waits for rank {world} to receive its message, but {}",
                        self.state_of(world)
                    )
                }
                Some(ReqKind::Recv { inst, from }) if from != NONE => {
                    let world = self.comms.insts[inst as usize].members[from as usize];
                    format!(
                        "waits for a message from rank {world}, but {}",
                        self.state_of(world)
                    )
                }
                Some(ReqKind::Recv { .. }) => {
                    "waits for a message from any rank, and none is coming".to_string()
                }
                Some(ReqKind::Coll { inst }) => {
                    let missing: Vec<u64> = self.comms.insts[inst as usize]
                        .members
                        .iter()
                        .copied()
                        .filter(|&m| {
                            !self.pending_colls().any(|(_, _, e)| {
                                e.arrived.contains(&m)
                                    && e.reqs.iter().any(|&q| b.reqs.contains(&q))
                            })
                        })
                        .collect();
                    format!(
                        "waits in a collective on `{}` for {}",
                        self.comms.insts[inst as usize].name,
                        ranks_phrase(&missing)
                    )
                }
                Some(ReqKind::Done) | None => "waits".to_string(),
            };
            diag = diag.with_note(format!(
                "{} in `{}` at {}: rank {example}{} {what}",
                ranks_phrase(ranks),
                printer::stmt_head(stmt),
                self.lines.describe(stmt.pos),
                self.iteration(example)
            ));
        }
        if groups.len() > 4 {
            diag = diag.with_note(format!("... and {} more places", groups.len() - 4));
        }
        if unsafe_send {
            diag = diag.with_note(
                "hint: a blocking `send` may wait until the receiver posts its receive; MPI libraries buffer small messages, so this can seem to work, but it is unsafe. Let one side receive first, or use `sendrecv` or `isend`/`irecv`",
            );
        }
        self.diags.push(diag);
    }

    /// After every rank finished: messages nobody received and the like.
    fn report_leftovers(&mut self) {
        let mut sends: Vec<(usize, u64, ReqId)> = Vec::new();
        for (i, inst) in self.comms.insts.iter().enumerate() {
            for dst in 0..inst.members.len() {
                let queue = self.queues.sends_at(inst.base + dst);
                sends.extend(queue.iter().map(|s| (i, dst as u64, s.req)));
            }
        }
        sends.sort_unstable_by_key(|&(_, _, req)| req);
        for (inst, dst, req) in sends {
            let (stmt, owner) = (self.reqs[req as usize].stmt, self.reqs[req as usize].owner);
            let to = self.comms.insts[inst].members[dst as usize];
            self.report_once("unmatched-message", stmt.pos, || {
                Diag::error(
                    "unmatched-message",
                    format!("rank {owner} sends a message to rank {to} that is never received"),
                )
                .at(stmt.pos, "sent here")
                .with_note("a message without a matching receive stays pending; add the receive on the other side")
            });
        }
        let mut recvs: Vec<ReqId> = self.queues.recvs().map(|r| r.req).collect();
        recvs.sort_unstable();
        for req in recvs {
            let (stmt, owner) = (self.reqs[req as usize].stmt, self.reqs[req as usize].owner);
            self.report_once("unmatched-message", stmt.pos, || {
                Diag::error(
                    "unmatched-message",
                    format!("rank {owner} posts a receive that no message matches"),
                )
                .at(stmt.pos, "receive posted here")
            });
        }
        let pending: Vec<(usize, &'p Stmt, Vec<u64>)> = self
            .pending_colls()
            .map(|(inst, _, e)| (inst, e.first_stmt, e.arrived.clone()))
            .collect();
        for (inst, stmt, arrived) in pending {
            {
                let comm = self.comms.insts[inst].name.clone();
                self.report_once("collective-not-reached", stmt.pos, || {
                    Diag::error(
                        "collective-not-reached",
                        format!(
                            "`{}` on `{comm}` is called only by {}",
                            printer::stmt_head(stmt),
                            ranks_phrase(&arrived)
                        ),
                    )
                    .at(stmt.pos, "called here")
                });
            }
        }
    }
}

/// An expression that cannot be evaluated on `rank`; `at` names the iteration (" (at i
/// = 3)") or is empty.
fn bad_expression(rank: u64, e: &EvalError, at: &str) -> Diag {
    Diag::error(
        "bad-expression",
        format!("{} on rank {rank}{at}", e.message()),
    )
    .at(e.pos(), "evaluated here")
}

#[cfg(test)]
mod tests {
    use crate::check::{check, Options};

    fn codes(source: &str) -> Vec<&'static str> {
        let (program, diags) = perfskel_grammar::parse(source);
        assert!(diags.is_empty(), "{diags:#?}");
        check(&program, source, Options::default())
            .diags
            .iter()
            .map(|d| d.code)
            .collect()
    }

    const HEAD: &str = "skeleton t\nranks 4\ntopology ring\napp_time 1 s\n";

    #[test]
    fn ring_shift_with_sendrecv_is_clean() {
        assert!(codes(&format!(
            "{HEAD}loop 3 {{ sendrecv to next 1 KiB from prev 1 KiB }}"
        ))
        .is_empty());
    }

    #[test]
    fn everyone_sending_first_deadlocks() {
        assert_eq!(
            codes(&format!("{HEAD}send next 1 KiB\nrecv prev 1 KiB")),
            vec!["deadlock"]
        );
    }

    #[test]
    fn odd_even_ordering_is_safe() {
        let src = format!(
            "{HEAD}if rank % 2 == 0 {{ send next 1 KiB\nrecv prev 1 KiB }} else {{ recv prev 1 KiB\nsend next 1 KiB }}"
        );
        assert!(codes(&src).is_empty());
    }

    #[test]
    fn collectives_inside_rank_conditions_are_not_reached() {
        assert_eq!(
            codes(&format!("{HEAD}if rank == 0 {{ barrier }}")),
            vec!["collective-not-reached"]
        );
        assert_eq!(
            codes(&format!(
                "{HEAD}if rank == 0 {{ barrier }} else {{ allreduce 8 B }}"
            )),
            vec!["collective-mismatch"]
        );
    }

    #[test]
    fn vector_collectives_met_from_statements_whose_tables_disagree() {
        let table = |a: u32| format!("per_rank({a} B, 2 B, 3 B, 4 B)");
        // Ranks 0 and 1 meet rank 2 and 3's call from another statement: rank 0
        // contributes 1 B where the others expect 9 B from it.
        let apart = |op: &str, a: u32| {
            format!(
                "{HEAD}if rank < 2 {{ {op} {} }} else {{ {op} {} }}",
                table(1),
                table(a)
            )
        };
        assert_eq!(codes(&apart("alltoallv", 9)), vec!["vector-counts"]);
        assert_eq!(codes(&apart("allgatherv", 9)), vec!["vector-counts"]);
        // Tables that agree, as in one statement, are clean.
        assert!(codes(&apart("alltoallv", 1)).is_empty());
        // Only the root receives in gatherv: rank 0's table is the one that counts,
        // and it agrees with every member's own entry where the others differ.
        let gather = format!(
            "{HEAD}if rank == 0 {{ gatherv per_rank(1 B, 2 B, 3 B, 4 B) }} else {{ gatherv per_rank(7 B, 2 B, 3 B, 4 B) }}"
        );
        assert!(codes(&gather).is_empty());
        let gather = format!(
            "{HEAD}if rank == 0 {{ gatherv per_rank(1 B, 5 B, 3 B, 4 B) }} else {{ gatherv per_rank(1 B, 2 B, 3 B, 4 B) }}"
        );
        assert_eq!(codes(&gather), vec!["vector-counts"]);
    }

    #[test]
    fn master_worker_with_any_source() {
        let src = "skeleton mw\nranks 4\ntopology star\napp_time 1 s\n\
                   if rank == 0 { loop 3 * (nranks - 1) { recv any 1 KiB } } else { loop 3 { send hub 1 KiB } }";
        assert!(codes(src).is_empty());
    }

    #[test]
    fn pair_traffic_counts_each_peer_by_world_rank() {
        // The columns of a 2 x 2 grid are {0, 2} and {1, 3}: rank 1 of a column is
        // world rank 2 or 3, not 1.
        let src = "skeleton p\nranks 4\ntopology grid(2, 2)\napp_time 1 s\n\
                   comm col = cart_sub(world, keep = [0])\n\
                   loop 2 { sendrecv to east 1 KiB from west 1 KiB }\n\
                   if rank < 2 { loop 3 { send rank(1) 100 B on col } } \
                   else { loop 3 { recv rank(0) 100 B on col } }";
        let (program, diags) = perfskel_grammar::parse(src);
        assert!(diags.is_empty(), "{diags:#?}");
        let off = check(&program, src, Options::default());
        assert!(off.diags.is_empty(), "{:#?}", off.diags);
        assert!(off
            .info
            .expect("clean")
            .ranks
            .iter()
            .all(|r| r.sent_to.is_empty()));
        let on = Options {
            pair_traffic: true,
            ..Options::default()
        };
        let info = check(&program, src, on).info.expect("clean");
        let sent: Vec<Vec<(u32, (u64, u64))>> = info
            .ranks
            .iter()
            .map(|r| r.sent_to.iter().map(|(&k, &v)| (k, v)).collect())
            .collect();
        assert_eq!(
            sent,
            vec![
                // East is +x, two ranks on: the grid's and the column's messages meet.
                vec![(2, (2 + 3, 2048 + 300))],
                vec![(3, (2 + 3, 2048 + 300))],
                vec![],
                vec![],
            ]
        );
    }

    #[test]
    fn branches_and_loops_follow_each_rank() {
        // An `else if` chain inside nested loops: each rank takes its own arm on every
        // iteration, and a loop of only computation is accounted without running it.
        let src = format!(
            "{HEAD}loop 3 {{\n\
             if rank == 0 {{ compute 1 ms }} else if rank == 1 {{ compute 2 ms }} else {{ compute 3 ms }}\n\
             loop 2 {{ sendrecv to next 1 KiB from prev 1 KiB }}\n\
             loop rank {{ compute 1 ms }}\n\
             }}"
        );
        let (program, diags) = perfskel_grammar::parse(&src);
        assert!(diags.is_empty(), "{diags:#?}");
        let checked = check(&program, &src, Options::default());
        assert!(checked.diags.is_empty(), "{:#?}", checked.diags);
        let info = checked.info.expect("clean");
        let ms: Vec<u64> = info
            .ranks
            .iter()
            .map(|r| (r.compute_seconds * 1e3).round() as u64)
            .collect();
        assert_eq!(ms, vec![3, 9, 9 + 6, 9 + 9]);
        assert!(info.ranks.iter().all(|r| r.messages_sent == 6));
        assert_eq!(info.simulated_ops, 4 * 6);
    }

    fn clean_info(source: &str) -> crate::check::Info {
        let (program, diags) = perfskel_grammar::parse(source);
        assert!(diags.is_empty(), "{diags:#?}");
        let checked = check(&program, source, Options::default());
        assert!(checked.diags.is_empty(), "{:#?}", checked.diags);
        checked.info.expect("clean")
    }

    #[test]
    fn loop_variables_take_every_iteration_number() {
        // 100 iterations, an allreduce on every 20th: 5 per rank. Rank-only conditions
        // beside them keep their once-per-rank evaluation.
        let info = clean_info(&format!(
            "{HEAD}loop 100 as i {{\n\
             compute 1 ms\n\
             if i % 20 == 19 {{ allreduce 8 B }}\n\
             if rank == 0 {{ compute 1 ms }}\n\
             }}"
        ));
        assert!(info.ranks.iter().all(|r| r.collectives == 5), "{info:?}");
        let ms: Vec<u64> = info
            .ranks
            .iter()
            .map(|r| (r.compute_seconds * 1e3).round() as u64)
            .collect();
        assert_eq!(ms, vec![200, 100, 100, 100]);
    }

    #[test]
    fn loop_variables_in_peers_counts_and_roots() {
        // A rotating partner: iteration i sends to rank + i and receives from rank - i.
        let info = clean_info(&format!(
            "{HEAD}loop 6 as i {{\n\
             sendrecv to rank((rank + i) % nranks) 1 KiB from rank((rank - i) % nranks) 1 KiB\n\
             bcast 8 B root i % nranks\n\
             loop i as j {{ loop j {{ compute 1 ms }} }}\n\
             }}"
        ));
        assert!(info.ranks.iter().all(|r| r.messages_sent == 6));
        assert!(info.ranks.iter().all(|r| r.collectives == 6));
        // Σ over i < 6 of Σ over j < i of j = 0 + 0 + 1 + 3 + 6 + 10 = 20 ms, summed
        // without running the comm-free nest.
        assert!(info
            .ranks
            .iter()
            .all(|r| (r.compute_seconds * 1e3).round() as u64 == 20));
        // Loops of communication whose count reads an enclosing variable.
        let info = clean_info(&format!(
            "{HEAD}loop 4 as i {{ loop i {{ sendrecv to next 8 B from prev 8 B }} }}"
        ));
        assert!(info.ranks.iter().all(|r| r.messages_sent == 6));
    }

    #[test]
    fn problems_in_one_iteration_are_found() {
        let src = format!(
            "{HEAD}loop 10 as step {{ if step == 7 {{ send next 1 KiB\nrecv prev 1 KiB }} }}"
        );
        let (program, _) = perfskel_grammar::parse(&src);
        let diags = check(&program, &src, Options::default()).diags;
        assert_eq!(diags.len(), 1, "{diags:#?}");
        assert_eq!(diags[0].code, "deadlock");
        assert!(
            diags[0].notes[0].contains("rank 0 (at step = 7) waits for rank 1"),
            "{diags:#?}"
        );
        let src = format!("{HEAD}loop 10 as step {{ bcast 8 B root step }}");
        let (program, _) = perfskel_grammar::parse(&src);
        let diags = check(&program, &src, Options::default()).diags;
        assert_eq!(diags.len(), 1, "{diags:#?}");
        assert_eq!(diags[0].code, "bad-root");
        assert_eq!(
            diags[0].message,
            "root 4 is out of range on rank 0 (at step = 4)"
        );
        assert_eq!(
            codes(&format!("{HEAD}loop 3 as i {{ loop i - 1 {{ barrier }} }}")),
            vec!["bad-count"]
        );
        assert_eq!(
            codes(&format!(
                "{HEAD}loop 3 as i {{ sendrecv to rank(i * 2) 8 B from rank(i * 2) 8 B }}"
            )),
            vec!["bad-peer"]
        );
    }

    #[test]
    fn truncation_and_unreceived_messages() {
        assert_eq!(
            codes(&format!("{HEAD}sendrecv to next 2 KiB from prev 1 KiB")),
            vec!["truncation"]
        );
        assert_eq!(
            codes(&format!("{HEAD}req a = isend next 1 KiB\nwait a")),
            vec!["deadlock"]
        );
    }
}
