//! Timed simulation: a checked [`Program`] and a [`Model`] → how long each rank runs.
//!
//! Every rank has a clock. Like the checker's simulation (`check/sim.rs`) ranks step
//! through the program and match messages and collectives with MPI's rules; here the
//! runnable rank with the earliest clock always goes next, so `recv any` takes the
//! message that would arrive first. Compute adds its (mean) time to the clock; a message
//! arrives `latency + bytes / bandwidth` after both sides are ready (eager sends
//! complete at once at the sender); a collective ends its cost after the last member
//! arrives; a wait moves the clock to the completion of what it waits for. Expressions
//! that read loop variables are evaluated on every execution with the rank's iteration
//! numbers. The program must have passed `check`, so it cannot deadlock; a budget bounds
//! long runs.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, VecDeque};

use perfskel_grammar::ast::*;

use super::model::Model;
use crate::check::Info;
use smallvec::SmallVec;

use crate::semantics::{
    cart_sub_color, compute_seconds, eval_bool_in, eval_int, eval_int_in, msg_bytes,
    sum_iterations, Env, Shape,
};

/// What the timed simulation found.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    /// Seconds from the start barrier to each rank's end, indexed by rank.
    pub rank_end_s: Vec<f64>,
    /// Seconds of compute per rank.
    pub rank_compute_s: Vec<f64>,
    /// Operations simulated.
    pub ops: u64,
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

/// Simulates `program` (checked; `info` is its `Info`) under `model`.
pub fn simulate(
    program: &Program,
    info: &Info,
    model: &Model,
    budget: u64,
) -> Result<Timing, TimingError> {
    if program.ranks.value > crate::semantics::MAX_SIMULATED_RANKS {
        return Err(TimingError::TooManyRanks(program.ranks.value));
    }
    let mut sim = Timed::new(program, info, model, budget);
    sim.create_comms()?;
    sim.run()?;
    if let Some(r) = sim.ranks.iter().position(|r| !r.done) {
        return Err(TimingError::Stuck(format!("rank {r} never finished")));
    }
    Ok(Timing {
        rank_end_s: sim.ranks.iter().map(|r| r.clock).collect(),
        rank_compute_s: sim.ranks.iter().map(|r| r.compute).collect(),
        ops: sim.ops,
    })
}

/// A future member of a communicator: (key, rank in the parent, world rank).
type Member = (i64, u64, u64);

struct Comm {
    members: Vec<u64>,
    shape: Shape,
}

struct Frame<'p> {
    stmts: &'p [Stmt],
    idx: usize,
    left: u64,
    /// The iteration count, and the loop variable's name when the loop has one.
    count: u64,
    var: Option<&'p str>,
}

impl<'p> Frame<'p> {
    fn block(stmts: &'p [Stmt]) -> Frame<'p> {
        Frame {
            stmts,
            idx: 0,
            left: 1,
            count: 1,
            var: None,
        }
    }
}

/// Loop variables and their values, innermost last: rarely more than a few.
type VarList<'p> = SmallVec<[(&'p str, i64); 4]>;

struct Rank<'p> {
    frames: Vec<Frame<'p>>,
    clock: f64,
    compute: f64,
    env: Env,
    handles: HashMap<&'p str, usize>,
    coll_seq: HashMap<usize, u64>,
    /// Requests a blocked rank waits for, and whether one of them is enough.
    blocked: Option<(Vec<usize>, bool)>,
    done: bool,
}

struct Send {
    src: u64,
    tag: u32,
    bytes: u64,
    time: f64,
    req: usize,
}

struct Recv {
    src: Option<u64>,
    tag: u32,
    time: f64,
    req: usize,
}

struct Coll {
    arrived: Vec<(u64, usize)>,
    latest: f64,
    cost: f64,
}

struct Timed<'p> {
    program: &'p Program,
    model: &'p Model,
    budget: u64,
    n: u64,
    ranks: Vec<Rank<'p>>,
    comms: Vec<Comm>,
    membership: HashMap<String, Vec<Option<(usize, u64)>>>,
    /// Completion time of each request, once known; and its owner.
    reqs: Vec<(Option<f64>, u64)>,
    sends: HashMap<(usize, u64), VecDeque<Send>>,
    recvs: HashMap<(usize, u64), VecDeque<Recv>>,
    colls: HashMap<(usize, u64), Coll>,
    ready: BinaryHeap<Reverse<(Clock, u64)>>,
    ops: u64,
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

fn stuck(what: impl Into<String>) -> TimingError {
    TimingError::Stuck(what.into())
}

impl<'p> Timed<'p> {
    fn new(program: &'p Program, info: &Info, model: &'p Model, budget: u64) -> Timed<'p> {
        let n = program.ranks.value;
        let ranks = (0..n)
            .map(|rank| Rank {
                frames: vec![Frame::block(&program.body.stmts)],
                clock: 0.0,
                compute: 0.0,
                env: Env {
                    rank,
                    n_ranks: n,
                    coords: info.world.coords(rank),
                },
                handles: HashMap::new(),
                coll_seq: HashMap::new(),
                blocked: None,
                done: false,
            })
            .collect();
        Timed {
            program,
            model,
            budget,
            n,
            ranks,
            comms: vec![Comm {
                members: (0..n).collect(),
                shape: info.world.clone(),
            }],
            membership: HashMap::from([(
                "world".to_string(),
                (0..n).map(|r| Some((0, r))).collect(),
            )]),
            reqs: Vec::new(),
            sends: HashMap::new(),
            recvs: HashMap::new(),
            colls: HashMap::new(),
            ready: (0..n).map(|r| Reverse((Clock(0.0), r))).collect(),
            ops: 0,
        }
    }

    /// The groups of every declared communicator, as the checker computes them.
    fn create_comms(&mut self) -> Result<(), TimingError> {
        for stmt in &self.program.body.stmts {
            let StmtKind::CommDecl(decl) = &stmt.kind else {
                continue;
            };
            let parent = self
                .membership
                .get(decl.def.parent().name.as_str())
                .cloned()
                .ok_or_else(|| stuck("unknown parent communicator"))?;
            let mut groups: BTreeMap<(usize, i64), Vec<Member>> = BTreeMap::new();
            for rank in 0..self.n {
                let Some((pinst, prank)) = parent[rank as usize] else {
                    continue;
                };
                let env = &self.ranks[rank as usize].env;
                let default_key = i64::try_from(prank).unwrap_or(i64::MAX);
                let (color, key) = match &decl.def {
                    CommDef::Split { color, key, .. } => {
                        let color = eval_int(color, env).map_err(|e| stuck(e.message()))?;
                        let key = match key {
                            Some(k) => eval_int(k, env).map_err(|e| stuck(e.message()))?,
                            None => default_key,
                        };
                        (color, key)
                    }
                    CommDef::Dup { .. } => (0, default_key),
                    CommDef::CartSub { keep, .. } => {
                        let coords = self.comms[pinst].shape.coords(prank);
                        let keep: Vec<u32> = keep.iter().map(|k| k.value).collect();
                        (cart_sub_color(&coords, &keep), default_key)
                    }
                };
                if color >= 0 {
                    groups
                        .entry((pinst, color))
                        .or_default()
                        .push((key, prank, rank));
                }
            }
            let mut member_of = vec![None; self.n as usize];
            for ((pinst, _), mut members) in groups {
                members.sort_unstable();
                let shape = match &decl.def {
                    CommDef::Split { .. } => Shape::Unstructured,
                    CommDef::Dup { .. } => self.comms[pinst].shape.clone(),
                    CommDef::CartSub { keep, .. } => match &self.comms[pinst].shape {
                        Shape::Grid { dims, periodic } => {
                            let kept: BTreeSet<usize> =
                                keep.iter().map(|k| k.value as usize).collect();
                            Shape::Grid {
                                dims: kept.iter().filter_map(|&k| dims.get(k).copied()).collect(),
                                periodic: kept
                                    .iter()
                                    .filter_map(|&k| periodic.get(k).copied())
                                    .collect(),
                            }
                        }
                        _ => Shape::Unstructured,
                    },
                };
                let inst = self.comms.len();
                for (i, &(_, _, world)) in members.iter().enumerate() {
                    member_of[world as usize] = Some((inst, i as u64));
                }
                self.comms.push(Comm {
                    members: members.iter().map(|&(_, _, w)| w).collect(),
                    shape,
                });
            }
            self.membership.insert(decl.name.name.clone(), member_of);
        }
        Ok(())
    }

    fn run(&mut self) -> Result<(), TimingError> {
        while let Some(Reverse((_, rank))) = self.ready.pop() {
            if self.ops > self.budget {
                return Err(TimingError::Budget(self.budget));
            }
            if self.step(rank)? {
                let clock = self.ranks[rank as usize].clock;
                self.ready.push(Reverse((Clock(clock), rank)));
            }
        }
        Ok(())
    }

    fn next_stmt(&mut self, rank: u64) -> Option<&'p Stmt> {
        let frames = &mut self.ranks[rank as usize].frames;
        loop {
            let top = frames.last_mut()?;
            if let Some(stmt) = top.stmts.get(top.idx) {
                top.idx += 1;
                return Some(stmt);
            }
            if top.left > 1 {
                top.left -= 1;
                top.idx = 0;
            } else {
                frames.pop();
            }
        }
    }

    /// The loop variables of `rank`'s current position and their iteration numbers.
    fn vars(&self, rank: u64) -> VarList<'p> {
        self.ranks[rank as usize]
            .frames
            .iter()
            .filter_map(|f| f.var.map(|v| (v, f.count.saturating_sub(f.left) as i64)))
            .collect()
    }

    /// Runs one statement of `rank`; whether the rank can go on (not blocked, not done).
    fn step(&mut self, rank: u64) -> Result<bool, TimingError> {
        let r = rank as usize;
        let Some(stmt) = self.next_stmt(rank) else {
            self.ranks[r].done = true;
            return Ok(false);
        };
        let env = self.ranks[r].env.clone();
        let vars = self.vars(rank);
        match &stmt.kind {
            StmtKind::Compute(c) => {
                let t = compute_seconds(&c.time, &env, &vars).map_err(|e| stuck(e.message()))?;
                self.ranks[r].clock += t;
                self.ranks[r].compute += t;
            }
            StmtKind::Loop(l) => {
                let count = eval_int_in(&l.count, &env, &vars).map_err(|e| stuck(e.message()))?;
                let count = u64::try_from(count).unwrap_or(0);
                if count > 0 {
                    let mut vars = vars;
                    let mut work = self.budget.saturating_add(1).saturating_sub(self.ops);
                    let left = work;
                    // Only computation inside: accounted for without running it (a body
                    // that communicates runs iteration by iteration).
                    let total = if is_compute_only(&l.body) {
                        Some(loop_compute(l, count as i64, &env, &mut vars, &mut work)?)
                    } else {
                        None
                    };
                    self.ops += left - work;
                    match total {
                        Some(total) => {
                            self.ranks[r].clock += total;
                            self.ranks[r].compute += total;
                        }
                        None => self.ranks[r].frames.push(Frame {
                            stmts: &l.body.stmts,
                            idx: 0,
                            left: count,
                            count,
                            var: l.var.as_ref().map(|v| v.name.as_str()),
                        }),
                    }
                }
            }
            StmtKind::If(i) => {
                let mut current = i;
                let chosen = loop {
                    if eval_bool_in(&current.cond, &env, &vars).map_err(|e| stuck(e.message()))? {
                        break Some(&current.then_block);
                    }
                    match &current.else_branch {
                        None => break None,
                        Some(Else::Block(b)) => break Some(b),
                        Some(Else::If(next)) => current = next,
                    }
                };
                if let Some(block) = chosen {
                    self.ranks[r].frames.push(Frame::block(&block.stmts));
                }
            }
            StmtKind::P2p(p) => return self.p2p(rank, p, &env, &vars),
            StmtKind::Collective(c) => {
                self.ops += 1;
                let comm = c.comm.as_ref().map_or("world", |c| c.name.as_str());
                let (inst, _) = self.member(rank, comm)?;
                let p = self.comms[inst].members.len() as u64;
                let bytes = match &c.size {
                    None => 0,
                    Some(SizeSpec::Fixed(s)) => s.value.bytes().unwrap_or(0),
                    Some(SizeSpec::PerRank(v)) => {
                        v.iter().filter_map(|s| s.value.bytes()).max().unwrap_or(0)
                    }
                };
                let cost = self.model.collective(c.op, bytes, p);
                let req = self.arrive(rank, inst, cost);
                match &c.request {
                    Some(handle) => {
                        self.ranks[r].handles.insert(handle.name.as_str(), req);
                    }
                    None => return Ok(self.block_on(rank, vec![req], false)),
                }
            }
            StmtKind::CommDecl(d) => {
                self.ops += 1;
                // Ranks outside the parent take no part.
                let Ok((inst, _)) = self.member(rank, &d.def.parent().name) else {
                    return Ok(true);
                };
                let cost = self
                    .model
                    .comm_create(self.comms[inst].members.len() as u64);
                let req = self.arrive(rank, inst, cost);
                return Ok(self.block_on(rank, vec![req], false));
            }
            StmtKind::Wait(w) => {
                if w.op == WaitOp::Test {
                    return Ok(true);
                }
                let reqs: Vec<usize> = w
                    .handles
                    .iter()
                    .filter_map(|h| self.ranks[r].handles.remove(h.name.as_str()))
                    .collect();
                return Ok(self.block_on(rank, reqs, w.op == WaitOp::Waitany));
            }
        }
        Ok(true)
    }

    fn p2p(
        &mut self,
        rank: u64,
        p: &'p P2p,
        env: &Env,
        vars: &[(&str, i64)],
    ) -> Result<bool, TimingError> {
        self.ops += 1;
        let comm = p.comm.as_ref().map_or("world", |c| c.name.as_str());
        let (inst, me) = self.member(rank, comm)?;
        let (send, recv) = match p.op {
            P2pOp::Recv | P2pOp::Irecv => (None, Some((&p.peer, &p.size))),
            P2pOp::Sendrecv => (
                Some((&p.peer, &p.size)),
                p.recv.as_deref().map(|(peer, size)| (peer, size)),
            ),
            P2pOp::Send | P2pOp::Isend => (Some((&p.peer, &p.size)), None),
        };
        let tag = p.tag.map_or(0, |t| t.value);
        let mut reqs = Vec::new();
        if let Some((peer, size)) = send {
            let to = self.resolve(inst, me, &peer.value, env, vars)?;
            let bytes = msg_bytes(size, env, vars).map_err(|e| stuck(e.message()))?;
            reqs.push(self.post_send(rank, inst, me, to, tag, bytes));
        }
        if let Some((peer, _)) = recv {
            let from = match &peer.value {
                Peer::Any => Some(None),
                other => self.resolve(inst, me, other, env, vars)?.map(Some),
            };
            reqs.push(self.post_recv(rank, inst, me, from, tag));
        }
        match &p.request {
            Some(handle) => {
                if let Some(&req) = reqs.first() {
                    self.ranks[rank as usize]
                        .handles
                        .insert(handle.name.as_str(), req);
                }
                Ok(true)
            }
            None => Ok(self.block_on(rank, reqs, false)),
        }
    }

    fn member(&self, rank: u64, name: &str) -> Result<(usize, u64), TimingError> {
        self.membership
            .get(name)
            .and_then(|m| m[rank as usize])
            .ok_or_else(|| stuck(format!("rank {rank} is not in `{name}`")))
    }

    fn resolve(
        &self,
        inst: usize,
        me: u64,
        peer: &Peer,
        env: &Env,
        vars: &[(&str, i64)],
    ) -> Result<Option<u64>, TimingError> {
        let size = self.comms[inst].members.len() as u64;
        match peer {
            Peer::Any => Ok(None),
            Peer::Rank(e) => {
                let v = eval_int_in(e, env, vars).map_err(|e| stuck(e.message()))?;
                Ok(u64::try_from(v).ok().filter(|&v| v < size))
            }
            Peer::Dir(dir) => self.comms[inst]
                .shape
                .peer_in(me, size, dir, env, vars)
                .map_err(|_| stuck("a direction the checker accepted cannot be resolved")),
        }
    }

    fn new_req(&mut self, owner: u64, done: Option<f64>) -> usize {
        self.reqs.push((done, owner));
        self.reqs.len() - 1
    }

    fn post_send(
        &mut self,
        rank: u64,
        inst: usize,
        me: u64,
        to: Option<u64>,
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
        let queue = self.recvs.entry((inst, to)).or_default();
        let matched = queue
            .iter()
            .position(|r| r.tag == tag && r.src.is_none_or(|s| s == me));
        match matched.and_then(|i| queue.remove(i)) {
            Some(recv) => self.matched(bytes, now, req, recv.time, recv.req),
            None => self.sends.entry((inst, to)).or_default().push_back(Send {
                src: me,
                tag,
                bytes,
                time: now,
                req,
            }),
        }
        req
    }

    fn post_recv(
        &mut self,
        rank: u64,
        inst: usize,
        me: u64,
        from: Option<Option<u64>>,
        tag: u32,
    ) -> usize {
        let now = self.ranks[rank as usize].clock;
        let Some(from) = from else {
            return self.new_req(rank, Some(now));
        };
        let req = self.new_req(rank, None);
        let queue = self.sends.entry((inst, me)).or_default();
        let matched = queue
            .iter()
            .position(|s| s.tag == tag && from.is_none_or(|f| f == s.src));
        match matched.and_then(|i| queue.remove(i)) {
            Some(send) => self.matched(send.bytes, send.time, send.req, now, req),
            None => self.recvs.entry((inst, me)).or_default().push_back(Recv {
                src: from,
                tag,
                time: now,
                req,
            }),
        }
        req
    }

    fn matched(&mut self, bytes: u64, send_time: f64, send: usize, recv_time: f64, recv: usize) {
        let arrival = if self.model.is_eager(bytes) {
            (send_time + self.model.p2p(bytes)).max(recv_time)
        } else {
            // Rendezvous: the data moves once both sides are there, after a handshake.
            send_time.max(recv_time) + self.model.latency_s + self.model.p2p(bytes)
        };
        if self.reqs[send].0.is_none() {
            self.complete(send, arrival);
        }
        self.complete(recv, arrival);
    }

    fn arrive(&mut self, rank: u64, inst: usize, cost: f64) -> usize {
        let seq = {
            let counter = self.ranks[rank as usize].coll_seq.entry(inst).or_insert(0);
            *counter += 1;
            *counter - 1
        };
        let now = self.ranks[rank as usize].clock;
        let req = self.new_req(rank, None);
        let members = self.comms[inst].members.len();
        let entry = self.colls.entry((inst, seq)).or_insert(Coll {
            arrived: Vec::new(),
            latest: 0.0,
            cost,
        });
        entry.arrived.push((rank, req));
        entry.latest = entry.latest.max(now);
        entry.cost = entry.cost.max(cost);
        if entry.arrived.len() == members {
            if let Some(entry) = self.colls.remove(&(inst, seq)) {
                let end = entry.latest + entry.cost;
                for (_, id) in entry.arrived {
                    self.complete(id, end);
                }
            }
        }
        req
    }

    fn complete(&mut self, id: usize, time: f64) {
        self.reqs[id].0 = Some(time);
        let owner = self.reqs[id].1;
        let blocked = self.ranks[owner as usize].blocked.take();
        if let Some((reqs, any)) = blocked {
            if !self.try_finish(owner, &reqs, any) {
                self.ranks[owner as usize].blocked = Some((reqs, any));
            } else {
                let clock = self.ranks[owner as usize].clock;
                self.ready.push(Reverse((Clock(clock), owner)));
            }
        }
    }

    /// Blocks `rank` on `reqs`; whether it can go on at once.
    fn block_on(&mut self, rank: u64, reqs: Vec<usize>, any: bool) -> bool {
        if self.try_finish(rank, &reqs, any) {
            return true;
        }
        self.ranks[rank as usize].blocked = Some((reqs, any));
        false
    }

    /// If the wait can complete, moves the rank's clock to its end.
    fn try_finish(&mut self, rank: u64, reqs: &[usize], any: bool) -> bool {
        let times = reqs.iter().map(|&id| self.reqs[id].0);
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

/// Whether a block holds only computation (loops of computation included).
fn is_compute_only(block: &Block) -> bool {
    block.stmts.iter().all(|s| match &s.kind {
        StmtKind::Compute(_) => true,
        StmtKind::Loop(l) => is_compute_only(&l.body),
        _ => false,
    })
}

/// The compute time of one execution of a block without communication (callers check
/// with [`is_compute_only`]), with the loop variables `vars`; `None` if it communicates. A loop whose inner counts read its own
/// variable is summed iteration by iteration, each costing one unit of `work`; with no
/// work left the sum stops short (the run then ends on its budget).
fn compute_only<'p>(
    block: &'p Block,
    env: &Env,
    vars: &mut VarList<'p>,
    work: &mut u64,
) -> Result<Option<f64>, TimingError> {
    let mut total = 0.0;
    for stmt in &block.stmts {
        match &stmt.kind {
            StmtKind::Compute(c) => {
                total += compute_seconds(&c.time, env, vars).map_err(|e| stuck(e.message()))?
            }
            StmtKind::Loop(l) => {
                let count = eval_int_in(&l.count, env, vars).map_err(|e| stuck(e.message()))?;
                total += loop_compute(l, count.max(0), env, vars, work)?;
            }
            _ => return Ok(None),
        }
    }
    Ok(Some(total))
}

/// The compute time of `count` iterations of a loop that holds only computation (see
/// [`compute_only`]).
fn loop_compute<'p>(
    l: &'p Loop,
    count: i64,
    env: &Env,
    vars: &mut VarList<'p>,
    work: &mut u64,
) -> Result<f64, TimingError> {
    sum_iterations(l, count, work, |bound, work| {
        vars.extend(bound);
        let once = compute_only(&l.body, env, vars, work).map(|t| t.unwrap_or(0.0));
        if bound.is_some() {
            vars.pop();
        }
        once
    })
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
        simulate(&program, &info, model, 1_000_000).expect("simulates")
    }

    fn model() -> Model {
        Model {
            latency_s: 1e-5,
            bandwidth_bytes_per_s: 1e9,
            ..Model::default()
        }
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
            simulate(&program, &info, &model(), 100),
            Err(TimingError::Budget(100))
        );
    }
}
