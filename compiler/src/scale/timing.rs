//! Timed simulation: a checked [`Program`] and a [`Model`] → how long each rank runs.
//!
//! Every rank has a clock. Ranks step through the lowered plan of the execution core
//! (`crate::exec`: the checker's simulation runs the same plan, communicators and
//! matching) with MPI's rules; here the runnable rank with the earliest clock always
//! goes next, so `recv any` takes the message that would arrive first. Compute adds its
//! (mean) time to the clock; a message arrives `latency + bytes / bandwidth` after both
//! sides are ready (eager sends complete at once at the sender); a collective ends its
//! cost after the last member arrives; a wait moves the clock to the completion of what
//! it waits for. Expressions that read loop variables are evaluated on every execution
//! with the rank's iteration numbers. The program must have passed `check`, so it
//! cannot deadlock; a budget bounds long runs.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};

use perfskel_grammar::ast::*;
use rustc_hash::FxHashMap as HashMap;
use smallvec::SmallVec;

use super::model::Model;
use crate::exec::comms::{CommError, Comms};
use crate::exec::cursor::{Cursor, Fault, Memo, Stop, Work};
use crate::exec::kept::{Keeps, Kept};
use crate::exec::plan::{self, Bytes, Op, P2pPlan, PeerCache, PeerFault, PeerRef, Plan};
use crate::exec::queue::{Gatherings, Queues, ANY};
use crate::semantics::{msg_bytes, Env, Shape, MAX_SIMULATED_RANKS};

/// What the timed simulation found.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    /// Seconds from the start barrier to each rank's end, indexed by rank.
    pub rank_end_s: Vec<f64>,
    /// Seconds of compute per rank.
    pub rank_compute_s: Vec<f64>,
    /// Operations simulated.
    pub ops: u64,
    /// The most requests the simulation held at once (slots of its request table):
    /// memory follows the requests in flight, not the operations simulated.
    pub request_slots: usize,
}

impl Timing {
    /// The skeleton's time: from the barrier after set-up to the barrier before finalize.
    pub fn total_s(&self) -> f64 {
        self.rank_end_s.iter().copied().fold(0.0, f64::max)
    }
}

/// Why a timed simulation could not finish.
#[derive(Clone, Debug, PartialEq)]
pub enum TimingError {
    /// More operations than the budget.
    Budget(u64),
    /// Something a checked program cannot do (a bug, or IR that was not checked).
    Stuck(String),
    /// More ranks than the simulation keeps state for (each rank has its own).
    TooManyRanks(u64),
}

fn stuck(what: impl Into<String>) -> TimingError {
    TimingError::Stuck(what.into())
}

impl From<Fault> for TimingError {
    fn from(fault: Fault) -> TimingError {
        match fault {
            Fault::Eval(e) => stuck(e.message()),
            Fault::NegativeCount(_, count) => stuck(format!("a loop count is {count}")),
        }
    }
}

/// Simulates `program` under `model`, its world shaped `world`. The program is a
/// checked one or derived from one by scaling (loops cut, compute and sizes scaled),
/// which cannot deadlock; anything else may end in [`TimingError::Stuck`].
pub fn simulate(
    program: &Program,
    world: &Shape,
    model: &Model,
    budget: u64,
) -> Result<Timing, TimingError> {
    run_timed(program, world, model, budget, None).map(|(timing, _)| timing)
}

/// What a pass without compute spends in the statements that have a ratio of their
/// own (see [`simulate_own`]), per rank: seconds there, and the seconds of the
/// application they stand for (each statement's time times its ratio).
#[derive(Clone, Debug, PartialEq)]
pub struct OwnTime {
    pub rank_s: Vec<f64>,
    pub rank_app_s: Vec<f64>,
}

impl OwnTime {
    /// The rank that spends the most time in those statements (the lowest among
    /// equals), and its two sums: the generated programs report the same rank's.
    pub fn busiest(&self) -> (f64, f64) {
        let mut best = (0.0, 0.0);
        for (&s, &app) in self.rank_s.iter().zip(&self.rank_app_s) {
            if s > best.0 {
                best = (s, app);
            }
        }
        best
    }
}

/// Simulates `program` as the generated programs' measuring pass runs it: every
/// compute span (and its polls) takes no time, and the time each rank spends in the
/// communication statements of `own` (by the byte offset where each starts in the
/// source, with the ratio it has of its own) is summed.
pub fn simulate_own(
    program: &Program,
    world: &Shape,
    model: &Model,
    budget: u64,
    own: &BTreeMap<u32, f64>,
) -> Result<OwnTime, TimingError> {
    run_timed(program, world, model, budget, Some(own)).map(|(_, own)| own)
}

fn run_timed(
    program: &Program,
    world: &Shape,
    model: &Model,
    budget: u64,
    own: Option<&BTreeMap<u32, f64>>,
) -> Result<(Timing, OwnTime), TimingError> {
    if program.ranks.value > MAX_SIMULATED_RANKS {
        return Err(TimingError::TooManyRanks(program.ranks.value));
    }
    let n = program.ranks.value;
    // Request handles by name, for the plan's indices.
    let mut names = BTreeSet::new();
    crate::semantics::visit(&program.body, &mut |stmt| {
        let handle = match &stmt.kind {
            StmtKind::P2p(p) => p.request.as_ref(),
            StmtKind::Collective(c) => c.request.as_ref(),
            _ => None,
        };
        if let Some(h) = handle {
            names.insert(h.name.as_str());
        }
    });
    let handle_index: HashMap<&str, usize> = names
        .iter()
        .enumerate()
        .map(|(i, &name)| (name, i))
        .collect();
    let plan = plan::lower(program, &handle_index);
    let envs = Env::all(n, world);
    let comms = Comms::create(program, &plan, world, &envs).map_err(|e| match e {
        CommError::Eval(_, e) => stuck(e.message()),
        CommError::UnknownParent => stuck("unknown parent communicator"),
    })?;
    let mut sim = Timed::new(&plan, comms, envs, names.len(), model, budget);
    sim.own = own;
    sim.run()?;
    if let Some(r) = sim.ranks.iter().position(|r| !r.done) {
        return Err(TimingError::Stuck(format!("rank {r} never finished")));
    }
    Ok((
        Timing {
            rank_end_s: sim.ranks.iter().map(|r| r.clock).collect(),
            rank_compute_s: sim.ranks.iter().map(|r| r.compute).collect(),
            ops: sim.work.ops,
            request_slots: sim.reqs.len(),
        },
        OwnTime {
            rank_s: sim.ranks.iter().map(|r| r.own_s).collect(),
            rank_app_s: sim.ranks.iter().map(|r| r.own_app_s).collect(),
        },
    ))
}

/// No request bound to a handle.
const NO_REQ: usize = usize::MAX;

/// The requests a blocked rank waits for; almost always one or two.
type Reqs = SmallVec<[usize; 4]>;

struct Rank<'p> {
    cursor: Cursor<'p>,
    clock: f64,
    compute: f64,
    /// Request of each handle (indexed like the plan's handles), or `NO_REQ`.
    handles: Vec<usize>,
    /// The operations in flight of each windowed handle, oldest first.
    windows: Vec<VecDeque<usize>>,
    /// Collectives called so far on each instance, by `Inst::decl`.
    coll_seq: Vec<u64>,
    /// Requests a blocked rank waits for, and whether one of them is enough.
    blocked: Option<(Reqs, bool)>,
    done: bool,
    /// Its `source` and last `while recv` tag.
    kept: Kept,
    /// In [`simulate_own`]: the clock when the rank started its last operation, and
    /// that statement's own ratio, while it is one of those timed.
    own_since: Option<(f64, f64)>,
    /// In [`simulate_own`]: seconds in the statements timed, and those times their
    /// ratios.
    own_s: f64,
    own_app_s: f64,
}

impl Rank<'_> {
    /// Adds the time since the rank started an operation of a statement timed with a
    /// ratio of its own (it has run again, or ended: the operation is over).
    fn settle_own(&mut self) {
        if let Some((since, ratio)) = self.own_since.take() {
            let t = (self.clock - since).max(0.0);
            self.own_s += t;
            self.own_app_s += t * ratio;
        }
    }
}

struct Send {
    src: u32,
    tag: u32,
    bytes: u64,
    time: f64,
    req: usize,
}

struct Recv {
    /// `ANY` for `any`.
    src: u32,
    tag: u32,
    time: f64,
    req: usize,
}

crate::exec::queue::envelope!(Send, Recv);

#[derive(Clone, Copy)]
struct Req {
    done: Option<f64>,
    owner: u32,
    held: u8,
    /// What its match sets in the owner's [`Kept`].
    keeps: Keeps,
}

struct Coll {
    reqs: Vec<usize>,
    latest: f64,
    cost: f64,
}

struct Timed<'p> {
    plan: &'p Plan<'p>,
    model: &'p Model,
    work: Work,
    ranks: Vec<Rank<'p>>,
    comms: Comms,
    memo: Memo,
    /// Peers of the plan's tables resolved so far.
    peers: PeerCache,
    /// The size a collective of the plan is timed with (the largest entry of a `v`
    /// form's table).
    coll_bytes: Vec<u64>,
    /// Every request live: its completion time once known, its owner, and how many hold
    /// it (the owner until it waited; a queue or a collective until matched). A slot
    /// nobody holds is reused, so memory follows the requests in flight, not the
    /// operations simulated (a loop of 10^7 sendrecvs needs two slots).
    reqs: Vec<Req>,
    free: Vec<usize>,
    queues: Queues<Send, Recv>,
    colls: Gatherings<Coll>,
    ready: BinaryHeap<Reverse<(Clock, u32)>>,
    /// In [`simulate_own`]: the statements timed, with their ratios; compute then
    /// takes no time.
    own: Option<&'p BTreeMap<u32, f64>>,
}

/// A clock value ordered totally (clocks are finite and never negative).
#[derive(Clone, Copy, PartialEq)]
struct Clock(f64);

impl Eq for Clock {}

impl PartialOrd for Clock {
    fn partial_cmp(&self, other: &Clock) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Clock {
    fn cmp(&self, other: &Clock) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl<'p> Timed<'p> {
    fn new(
        plan: &'p Plan<'p>,
        comms: Comms,
        envs: Vec<Env>,
        handles: usize,
        model: &'p Model,
        budget: u64,
    ) -> Timed<'p> {
        let n = envs.len();
        let ranks = envs
            .into_iter()
            .map(|env| Rank {
                cursor: Cursor::new(env),
                clock: 0.0,
                compute: 0.0,
                handles: vec![NO_REQ; handles],
                windows: vec![VecDeque::new(); handles],
                coll_seq: vec![0; comms.decls],
                blocked: None,
                done: false,
                kept: Kept::default(),
                own_since: None,
                own_s: 0.0,
                own_app_s: 0.0,
            })
            .collect();
        let coll_bytes = plan
            .colls
            .iter()
            .map(|c| match &c.stmt.kind {
                StmtKind::Collective(c) => match &c.size {
                    None => 0,
                    Some(SizeSpec::Fixed(s)) => s.value.bytes().unwrap_or(0),
                    Some(SizeSpec::PerRank(v)) => {
                        v.iter().filter_map(|s| s.value.bytes()).max().unwrap_or(0)
                    }
                },
                _ => 0,
            })
            .collect();
        Timed {
            plan,
            model,
            work: Work { ops: 0, budget },
            ranks,
            queues: Queues::new(comms.slots),
            colls: Gatherings::new(comms.insts.len()),
            comms,
            memo: Memo::new(plan, n),
            peers: PeerCache::new(plan, n),
            coll_bytes,
            reqs: Vec::new(),
            free: Vec::new(),
            ready: (0..n as u32).map(|r| Reverse((Clock(0.0), r))).collect(),
            own: None,
        }
    }

    /// Runs the rank with the earliest clock (the lowest rank among equal clocks) until
    /// another one is earlier, it blocks or it is done.
    fn run(&mut self) -> Result<(), TimingError> {
        while let Some(Reverse((_, rank))) = self.ready.pop() {
            loop {
                if self.work.ops > self.work.budget {
                    return Err(TimingError::Budget(self.work.budget));
                }
                if !self.step(rank)? {
                    break;
                }
                let key = (Clock(self.ranks[rank as usize].clock), rank);
                if self.ready.peek().is_some_and(|Reverse(next)| *next < key) {
                    self.ready.push(Reverse(key));
                    break;
                }
            }
        }
        Ok(())
    }

    /// Runs `rank` to its next compute or operation with other ranks and that; whether
    /// the rank can go on (not blocked, not done).
    fn step(&mut self, rank: u32) -> Result<bool, TimingError> {
        let r = rank as usize;
        let state = &mut self.ranks[r];
        state.settle_own();
        let mut unused = 0.0;
        let stop =
            state
                .cursor
                .advance(self.plan, &mut self.memo, &mut unused, &mut self.work, true)?;
        let op = match stop {
            Stop::Op(op) => op,
            // The measuring pass runs no compute.
            Stop::Compute(_) if self.own.is_some() => return Ok(true),
            Stop::Compute(t) => {
                state.clock += t;
                state.compute += t;
                return Ok(true);
            }
            Stop::Done => {
                state.done = true;
                return Ok(false);
            }
            // Found over budget before the next step.
            Stop::Budget => return Ok(true),
        };
        if let Some(own) = self.own {
            let stmt = match op {
                Op::P2p(i) => Some(self.plan.p2ps[*i as usize].stmt),
                Op::Collective(i) => Some(self.plan.colls[*i as usize].stmt),
                Op::Wait { stmt, .. } => Some(*stmt),
                _ => None,
            };
            let ratio = stmt
                .and_then(|s| s.pos.span())
                .and_then(|span| own.get(&span.start));
            if let Some(&ratio) = ratio {
                state.own_since = Some((state.clock, ratio));
            }
        }
        match op {
            Op::P2p(i) => self.p2p(rank, &self.plan.p2ps[*i as usize]),
            Op::Collective(i) => {
                self.work.ops += 1;
                let c = &self.plan.colls[*i as usize];
                let (inst, _) = self.member(rank, c.comm, c.comm_name)?;
                let p = self.comms.insts[inst as usize].members.len() as u64;
                let cost = self.model.collective(c.op, self.coll_bytes[*i as usize], p);
                let req = self.arrive(rank, inst, cost);
                if c.request {
                    match c.handle {
                        Some(h) => self.bind(rank, h, req),
                        None => self.release(req),
                    }
                    Ok(true)
                } else {
                    Ok(self.block_on(rank, smallvec::smallvec![req], false))
                }
            }
            Op::CommDecl { parent, .. } => {
                self.work.ops += 1;
                // Ranks outside the parent take no part.
                let Some((inst, _)) = self.comms.membership(rank, *parent) else {
                    return Ok(true);
                };
                let size = self.comms.insts[inst as usize].members.len() as u64;
                let cost = self.model.comm_create(size);
                let req = self.arrive(rank, inst, cost);
                Ok(self.block_on(rank, smallvec::smallvec![req], false))
            }
            Op::Wait { handles, any, .. } => {
                // Every handle named is done with once waited for (`waitany` too).
                let mut reqs = Reqs::new();
                for &h in &self.plan.handles[handles.0 as usize..handles.1 as usize] {
                    let state = &mut self.ranks[r];
                    reqs.extend(state.windows[h].drain(..));
                    let slot = &mut state.handles[h];
                    if *slot != NO_REQ {
                        reqs.push(std::mem::replace(slot, NO_REQ));
                    }
                }
                Ok(self.block_on(rank, reqs, *any))
            }
            // The loop goes on while the message has its tag.
            Op::WhileTag { tag, end } => {
                let state = &mut self.ranks[r];
                if !state.kept.goes_on(*tag) {
                    state.cursor.pc = *end;
                }
                Ok(true)
            }
            // The cursor stops only at operations with other ranks.
            _ => Ok(true),
        }
    }

    fn p2p(&mut self, rank: u32, p: &'p P2pPlan<'p>) -> Result<bool, TimingError> {
        self.work.ops += 1;
        let (inst, me) = self.member(rank, p.comm, p.comm_name)?;
        // The peer's rank in the communicator; `None` for a missing neighbour.
        let peer_of = |sim: &mut Self, peer: PeerRef<'p>| {
            let c = &sim.ranks[rank as usize].cursor;
            let found = sim.peers.peer(
                peer,
                rank,
                &sim.comms.insts[inst as usize],
                me,
                &c.env,
                &c.vars,
            );
            timed_peer(found)
        };
        // The rank `source` names, on this communicator.
        let source = |sim: &Self| {
            sim.ranks[rank as usize].kept.source(inst).map(Some).map_err(|_| {
                stuck(format!(
                    "`source` on rank {rank} names no rank of `{}`: no `recv any` there has received a message yet",
                    p.comm_name
                ))
            })
        };
        let mut reqs = Reqs::new();
        if let Some((peer, bytes)) = p.send {
            let to = if peer.source {
                source(self)?
            } else {
                peer_of(self, peer)?
            };
            let bytes = self.bytes(rank, bytes)?;
            reqs.push(self.post_send(rank, inst, me, to, p.tag, bytes));
        }
        if let Some((peer, _)) = p.recv {
            let from = if peer.any {
                Some(ANY)
            } else if peer.source {
                source(self)?
            } else {
                peer_of(self, peer)?
            };
            let keeps = Keeps::of(p, inst);
            reqs.push(self.post_recv(rank, inst, me, from, p.tag, keeps));
        }
        if p.request {
            let mut rest = reqs.into_iter();
            if let (Some(req), Some(h)) = (rest.next(), p.handle) {
                if p.window > 0 {
                    // Kept in the handle's window; past it, the oldest is completed.
                    let window = &mut self.ranks[rank as usize].windows[h];
                    window.push_back(req);
                    if window.len() as u64 > p.window {
                        if let Some(oldest) = window.pop_front() {
                            return Ok(self.block_on(rank, smallvec::smallvec![oldest], false));
                        }
                    }
                    return Ok(true);
                }
                self.bind(rank, h, req);
            }
            for req in rest {
                self.release(req);
            }
            return Ok(true);
        }
        Ok(self.block_on(rank, reqs, false))
    }

    fn member(
        &self,
        rank: u32,
        comm: Option<usize>,
        name: &str,
    ) -> Result<(u32, u32), TimingError> {
        self.comms
            .membership(rank, comm)
            .ok_or_else(|| stuck(format!("rank {rank} is not in `{name}`")))
    }

    fn bytes(&self, rank: u32, bytes: Bytes<'p>) -> Result<u64, TimingError> {
        match bytes {
            Bytes::Const(n) => Ok(n),
            Bytes::Pick(size) => {
                let c = &self.ranks[rank as usize].cursor;
                msg_bytes(size, &c.env, &c.vars).map_err(|e| stuck(e.message()))
            }
        }
    }

    /// A request `owner` holds.
    fn new_req(&mut self, owner: u32, done: Option<f64>) -> usize {
        let req = Req {
            done,
            owner,
            held: 1,
            keeps: Keeps::default(),
        };
        match self.free.pop() {
            Some(id) => {
                self.reqs[id] = req;
                id
            }
            None => {
                self.reqs.push(req);
                self.reqs.len() - 1
            }
        }
    }

    /// A queue or a collective holds `id` too, until it is matched.
    fn hold(&mut self, id: usize) {
        self.reqs[id].held += 1;
    }

    /// One holder of `id` lets go of it; the last frees its slot.
    fn release(&mut self, id: usize) {
        let r = &mut self.reqs[id];
        debug_assert!(r.held > 0, "request {id} let go of more often than held");
        r.held = r.held.saturating_sub(1);
        if r.held == 0 {
            self.free.push(id);
        }
    }

    /// `rank`'s handle `h` now names `req`; a request it named and nobody waited for is
    /// let go.
    fn bind(&mut self, rank: u32, h: usize, req: usize) {
        let old = std::mem::replace(&mut self.ranks[rank as usize].handles[h], req);
        if old != NO_REQ {
            self.release(old);
        }
    }

    /// `to`: `None` for a missing neighbour.
    fn post_send(
        &mut self,
        rank: u32,
        inst: u32,
        me: u32,
        to: Option<u32>,
        tag: u32,
        bytes: u64,
    ) -> usize {
        let now = self.ranks[rank as usize].clock;
        let Some(to) = to else {
            return self.new_req(rank, Some(now));
        };
        // An eager send completes once the data is copied out; a rendezvous send when
        // the message has arrived.
        let local = self
            .model
            .is_eager(bytes)
            .then(|| now + bytes as f64 / self.model.bandwidth_bytes_per_s);
        let req = self.new_req(rank, local);
        let slot = self.comms.insts[inst as usize].base + to as usize;
        match self.queues.receive_for(slot, me, tag) {
            Some(recv) => {
                self.matched(bytes, now, req, recv.time, recv.req, (me, tag));
                self.release(recv.req);
            }
            None => {
                self.hold(req);
                self.queues.queue_send(
                    slot,
                    Send {
                        src: me,
                        tag,
                        bytes,
                        time: now,
                        req,
                    },
                )
            }
        }
        req
    }

    /// `from`: `None` for a missing neighbour, `Some(ANY)` for `any`; `keeps`: what the
    /// match sets in the rank's [`Kept`].
    fn post_recv(
        &mut self,
        rank: u32,
        inst: u32,
        me: u32,
        from: Option<u32>,
        tag: u32,
        keeps: Keeps,
    ) -> usize {
        let now = self.ranks[rank as usize].clock;
        let Some(from) = from else {
            return self.new_req(rank, Some(now));
        };
        let req = self.new_req(rank, None);
        self.reqs[req].keeps = keeps;
        let slot = self.comms.insts[inst as usize].base + me as usize;
        match self.queues.message_for(slot, from, tag) {
            Some(send) => {
                self.matched(
                    send.bytes,
                    send.time,
                    send.req,
                    now,
                    req,
                    (send.src, send.tag),
                );
                self.release(send.req);
            }
            None => {
                self.hold(req);
                self.queues.queue_recv(
                    slot,
                    Recv {
                        src: from,
                        tag,
                        time: now,
                        req,
                    },
                )
            }
        }
        req
    }

    /// A message from rank `src` of the communicator, with `tag`, meets its receive.
    fn matched(
        &mut self,
        bytes: u64,
        send_time: f64,
        send: usize,
        recv_time: f64,
        recv: usize,
        (src, tag): (u32, u32),
    ) {
        let r = self.reqs[recv];
        self.ranks[r.owner as usize].kept.matched(r.keeps, src, tag);
        let arrival = if self.model.is_eager(bytes) {
            (send_time + self.model.p2p(bytes)).max(recv_time)
        } else {
            // Rendezvous: the data moves once both sides are there, after a handshake.
            send_time.max(recv_time) + self.model.latency_s + self.model.p2p(bytes)
        };
        if self.reqs[send].done.is_none() {
            self.complete(send, arrival);
        }
        self.complete(recv, arrival);
    }

    /// `rank` reaches its next collective on `inst`, which costs `cost` once every
    /// member is there.
    fn arrive(&mut self, rank: u32, inst: u32, cost: f64) -> usize {
        let inst = inst as usize;
        let state = &mut self.ranks[rank as usize];
        let seq = {
            let counter = &mut state.coll_seq[self.comms.insts[inst].decl];
            *counter += 1;
            *counter - 1
        };
        let now = state.clock;
        let req = self.new_req(rank, None);
        self.hold(req);
        let entry = self.colls.entry(inst, seq, || Coll {
            reqs: Vec::new(),
            latest: 0.0,
            cost,
        });
        entry.reqs.push(req);
        entry.latest = entry.latest.max(now);
        entry.cost = entry.cost.max(cost);
        if entry.reqs.len() == self.comms.insts[inst].members.len() {
            if let Some(entry) = self.colls.finish(inst, seq) {
                let end = entry.latest + entry.cost;
                for id in entry.reqs {
                    self.complete(id, end);
                    self.release(id);
                }
            }
        }
        req
    }

    fn complete(&mut self, id: usize, time: f64) {
        self.reqs[id].done = Some(time);
        let owner = self.reqs[id].owner;
        let blocked = self.ranks[owner as usize].blocked.take();
        if let Some((reqs, any)) = blocked {
            if !self.try_finish(owner, &reqs, any) {
                self.ranks[owner as usize].blocked = Some((reqs, any));
            } else {
                for id in reqs {
                    self.release(id);
                }
                let clock = self.ranks[owner as usize].clock;
                self.ready.push(Reverse((Clock(clock), owner)));
            }
        }
    }

    /// Blocks `rank` on `reqs`; whether it can go on at once. The rank lets go of
    /// `reqs` once the wait is over.
    fn block_on(&mut self, rank: u32, reqs: Reqs, any: bool) -> bool {
        if self.try_finish(rank, &reqs, any) {
            for id in reqs {
                self.release(id);
            }
            return true;
        }
        self.ranks[rank as usize].blocked = Some((reqs, any));
        false
    }

    /// If the wait can complete, moves the rank's clock to its end.
    fn try_finish(&mut self, rank: u32, reqs: &[usize], any: bool) -> bool {
        let times = reqs.iter().map(|&id| self.reqs[id].done);
        let end = if any {
            times.flatten().min_by(f64::total_cmp)
        } else {
            times
                .collect::<Option<Vec<f64>>>()
                .map(|t| t.into_iter().fold(0.0, f64::max))
        };
        match end {
            Some(end) if !reqs.is_empty() => {
                let clock = &mut self.ranks[rank as usize].clock;
                *clock = clock.max(end);
                true
            }
            Some(_) => true,
            None if reqs.is_empty() => true,
            None => false,
        }
    }
}

/// A peer as the timed simulation takes it: a rank out of range is MPI_PROC_NULL (the
/// checker reports it; a scaled program has none).
fn timed_peer(found: Result<Option<u32>, PeerFault>) -> Result<Option<u32>, TimingError> {
    match found {
        Ok(found) => Ok(found),
        Err(PeerFault::OutOfRange(..)) => Ok(None),
        Err(PeerFault::Eval(e)) => Err(stuck(e.message())),
        Err(_) => Err(stuck("a direction the checker accepted cannot be resolved")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{check, Options};

    fn time(source: &str, model: &Model) -> Timing {
        let (program, diags) = perfskel_grammar::parse(source);
        assert!(diags.is_empty(), "{diags:?}");
        let checked = check(&program, source, Options::default());
        let info = checked.info.expect("checks");
        simulate(&program, info.world(), model, 1_000_000).expect("simulates")
    }

    fn model() -> Model {
        Model {
            latency_s: 1e-5,
            bandwidth_bytes_per_s: 1e9,
            ..Model::default()
        }
    }

    /// Issue 19: `compile` of `loop 10^18 { ... }` allocated 3.3 GB before refusing, one
    /// request record per message simulated. Requests are recycled once matched and
    /// waited for: a long loop of blocking and nonblocking exchanges and collectives
    /// holds a handful at once.
    #[test]
    fn requests_are_recycled() {
        let t = time(
            "skeleton t ranks 4 topology ring app_time 1 s\nloop 20000 { compute 1 us\nsendrecv to next 8 B from prev 8 B\nreq r = irecv prev 64 KiB\nreq s = isend next 64 KiB\nwaitall r, s\nallreduce 8 B\nreq b = ibarrier\nwait b }",
            &model(),
        );
        assert!(t.ops > 100_000, "{}", t.ops);
        assert!(t.request_slots <= 32, "{} request slots", t.request_slots);
    }

    /// A master answers whichever worker's message came first: the fast worker is
    /// answered at once and goes on, not after the slow one.
    #[test]
    fn answers_go_to_the_source_of_the_last_receive_from_any() {
        let t = time(
            "skeleton t ranks 3 topology star app_time 1 s\nif rank == 0 {\nloop 2 { recv any 8 B\nsend source 8 B }\n} else if rank == 1 {\ncompute 10 ms\nsend hub 8 B\nrecv hub 8 B\n} else {\ncompute 1 ms\nsend hub 8 B\nrecv hub 8 B\ncompute 5 ms\n}",
            &model(),
        );
        // Rank 2: 1 ms, its message and the answer (10 us + 8 ns each), then 5 ms.
        let fast = 6e-3 + 2.0 * (1e-5 + 8e-9);
        assert!((t.rank_end_s[2] - fast).abs() < 1e-9, "{:?}", t.rank_end_s);
        let slow = 10e-3 + 2.0 * (1e-5 + 8e-9);
        assert!((t.rank_end_s[1] - slow).abs() < 1e-9, "{:?}", t.rank_end_s);
    }

    /// A task farm: the workers take tasks while they come, so the slow worker does one
    /// task and the two fast ones share the other eleven.
    #[test]
    fn a_while_recv_takes_tasks_while_they_come() {
        let t = time(
            "skeleton t ranks 4 topology star app_time 1 s\nif rank == 0 {\nloop 3 as w { send leaf(w) 16 B tag 1 }\nloop 9 { recv any 8 B\nsend source 16 B tag 1 }\nloop 3 { recv any 8 B\nsend source 16 B tag 2 }\n} else {\nwhile recv hub 16 B tag 1 {\ncompute per_rank(0 ns, 1 ms, 1 ms, 10 ms)\nsend hub 8 B\n}\n}",
            &model(),
        );
        // Rank 3's one task lasts 10 ms; ranks 1 and 2 do 11 in turn meanwhile (6 and 5).
        assert!(
            (t.rank_compute_s[3] - 0.010).abs() < 1e-12,
            "{:?}",
            t.rank_compute_s
        );
        let shared = t.rank_compute_s[1] + t.rank_compute_s[2];
        assert!((shared - 0.011).abs() < 1e-12, "{:?}", t.rank_compute_s);
        assert!(t.total_s() < 0.0105, "{}", t.total_s());
    }

    #[test]
    fn compute_and_a_ring_shift_add_up() {
        let t = time(
            "skeleton t ranks 4 topology ring app_time 1 s\nloop 10 { compute 1 ms\nsendrecv to next 1000 B from prev 1000 B }",
            &model(),
        );
        // Each iteration: 1 ms of compute, then one message of 10 us + 1 us.
        let expected = 10.0 * (1e-3 + 1e-5 + 1e-6);
        assert!((t.total_s() - expected).abs() < 1e-9, "{}", t.total_s());
        assert!((t.rank_compute_s[0] - 0.01).abs() < 1e-12);
    }

    #[test]
    fn imbalance_is_absorbed_by_the_collective() {
        let t = time(
            "skeleton t ranks 4 topology ring app_time 1 s\ncompute per_rank(1 ms, 2 ms, 3 ms, 4 ms)\nbarrier",
            &model(),
        );
        // Everyone leaves the barrier after the slowest rank plus two latency rounds.
        for end in &t.rank_end_s {
            assert!((end - (4e-3 + 2e-5)).abs() < 1e-12, "{end}");
        }
    }

    #[test]
    fn a_pipeline_serializes() {
        let t = time(
            "skeleton t ranks 4 topology chain app_time 1 s\n\
             if rank > 0 { recv prev 8 B }\ncompute 1 ms\nsend next 8 B",
            &model(),
        );
        // Four stages of 1 ms and three messages of about 10 us.
        assert!(
            (t.total_s() - (4e-3 + 3.0 * model().p2p(8))).abs() < 1e-9,
            "{}",
            t.total_s()
        );
    }

    #[test]
    fn loop_variables_are_evaluated_per_iteration() {
        // Every fifth iteration computes; a triangular nest sums 0 + 1 + 2 + 3 ms without
        // being run; rotating partners exchange one message per iteration.
        let t = time(
            "skeleton t ranks 4 topology ring app_time 1 s\n\
             loop 10 as i { if i % 5 == 4 { compute 1 ms } }\n\
             loop 4 as i { loop i { compute 1 ms } }\n\
             loop 3 as i { loop 2 as j { if j == 1 { compute 1 ms } } sendrecv to rank((rank + i + 1) % nranks) 1000 B from rank((rank - i - 1) % nranks) 1000 B }",
            &model(),
        );
        for c in &t.rank_compute_s {
            assert!((c - 0.011).abs() < 1e-12, "{c}");
        }
        let expected = 0.011 + 3.0 * (1e-5 + 1e-6);
        assert!((t.total_s() - expected).abs() < 1e-9, "{}", t.total_s());
    }

    #[test]
    fn budget_is_enforced() {
        let source = "skeleton t ranks 2 topology ring app_time 1 s\nloop 1000 { sendrecv to next 8 B from prev 8 B }";
        let (program, _) = perfskel_grammar::parse(source);
        let info = check(&program, source, Options::default())
            .info
            .expect("checks");
        assert_eq!(
            simulate(&program, info.world(), &model(), 100),
            Err(TimingError::Budget(100))
        );
    }
}
