//! The lowered plan both simulations run: a [`Program`] body → a flat plan of operations, with
//! loops and branches as jumps, communicator and request names resolved to indices,
//! sizes, tags, constant roots and mean compute times computed once, argument-free
//! directions shared in peer tables, and rank-dependent expressions (conditions and
//! loop counts) interned by structure, so that the simulation evaluates each distinct
//! one once per rank however many statements repeat it. Those that read loop variables
//! change from one iteration to the next: they are not interned (their id is
//! [`PER_ITERATION`]) and the simulation evaluates them every time. The simulation runs
//! every rank over the same plan with a program counter.

use rustc_hash::FxHashMap as HashMap;

use perfskel_grammar::ast::*;

use super::comms::Inst;
use crate::semantics::{eval_int_in, reads_vars, Env, EvalError, PeerError, Vars};

/// The interned id of a condition or loop count that reads loop variables: it is
/// evaluated on every execution, with the current iteration numbers.
pub(crate) const PER_ITERATION: usize = usize::MAX;

/// Communicator id of `world`; other names get ids in order of first appearance.
pub(crate) const WORLD: usize = 0;

/// How a point-to-point operation finds its peer.
#[derive(Clone, Copy)]
pub(crate) struct PeerRef<'p> {
    pub peer: &'p Spanned<Peer>,
    /// A table of the peer of every world rank, for directions without arguments:
    /// their peer depends only on the communicator and the rank.
    pub table: Option<usize>,
    /// Whether the peer is `any`.
    pub any: bool,
    /// Whether the peer is `source`: the simulations keep each rank's (see
    /// [`P2pPlan::sets_source`]).
    pub source: bool,
}

/// A message size: constant, or picked per iteration.
#[derive(Clone, Copy)]
pub(crate) enum Bytes<'p> {
    Const(u64),
    Pick(&'p MsgSize),
}

pub(crate) struct P2pPlan<'p> {
    pub stmt: &'p Stmt,
    pub comm: Option<usize>,
    pub comm_name: &'p str,
    pub send: Option<(PeerRef<'p>, Bytes<'p>)>,
    pub recv: Option<(PeerRef<'p>, Bytes<'p>)>,
    pub tag: u32,
    /// Whether the operation binds a request (`req NAME = ...`), and its handle index
    /// if the name is known.
    pub request: bool,
    pub handle: Option<usize>,
    /// `window W`: at most W of the statement's operations stay in flight (0: none).
    pub window: u64,
    /// A blocking receive from `any` (`recv any`, `sendrecv ... from any`): the rank it
    /// receives from becomes the rank's `source`.
    pub sets_source: bool,
    /// The receive of a `while recv`: it takes any tag (`tag` is `ANY_TAG`), and the tag
    /// of its message becomes the rank's last tag.
    pub sets_tag: bool,
}

/// The tag of a receive that takes any (`while recv`).
pub(crate) const ANY_TAG: u32 = super::queue::ANY;

/// A collective, with what the simulation needs copied out of the statement (the hot
/// loop then touches no syntax tree).
pub(crate) struct CollPlan<'p> {
    pub stmt: &'p Stmt,
    pub op: CollOp,
    pub nonblocking: bool,
    pub root: Option<&'p Expr>,
    pub has_root: bool,
    pub comm: Option<usize>,
    pub comm_name: &'p str,
    pub bytes: Option<u64>,
    /// The root when it is a literal.
    pub constant_root: Option<i64>,
    pub request: bool,
    pub handle: Option<usize>,
}

/// The time of one execution of a `compute`, on a given rank.
#[derive(Clone, Copy)]
pub(crate) enum Time<'p> {
    /// The same mean on every rank.
    Mean(f64),
    /// `per_rank(...)`: the rank's entry (none: zero).
    PerRank(&'p [Spanned<Duration>]),
    /// `[...][index]`: evaluated on every execution, with the loop variables.
    Pick(&'p TimeSpec),
}

impl Time<'_> {
    fn of(spec: &TimeSpec) -> Time<'_> {
        match spec {
            TimeSpec::PerRank(values) => Time::PerRank(values),
            TimeSpec::Pick(_) => Time::Pick(spec),
            other => Time::Mean(other.mean_seconds()),
        }
    }

    /// Mean seconds on `rank` (as `TimeSpec::mean_seconds`, or the rank's entry).
    #[inline]
    pub fn seconds(self, rank: u64) -> f64 {
        match self {
            Time::Mean(s) => s,
            Time::PerRank(values) => values.get(rank as usize).map_or(0.0, |d| d.value.seconds()),
            Time::Pick(spec) => spec.mean_seconds(),
        }
    }
}

pub(crate) enum Op<'p> {
    /// A compute's time, and its polls' (see `semantics::poll_seconds`).
    Compute(Time<'p>, f64),
    /// Enters a loop; `end` is the index of its `EndLoop`.
    Loop {
        l: &'p Loop,
        end: usize,
        comm_free: bool,
        /// The count when it is a literal.
        constant: Option<i64>,
        /// The interned count expression (an index into the plan's counts), or
        /// `PER_ITERATION`.
        count: usize,
    },
    /// The end of a loop body: back to `start + 1` while iterations are left.
    EndLoop {
        start: usize,
        /// Whether the loop names its iteration number, which then moves on.
        var: bool,
    },
    /// A conditional: the arms' conditions (interned id, expression) in order with the
    /// first op of each arm's block, then where to go when no condition holds (the
    /// `else` block or the end).
    If {
        /// `Plan::arms[arms.0..arms.1]`.
        arms: (u32, u32),
        otherwise: usize,
    },
    Jump(usize),
    /// After the receive of `while recv ... tag T`: on into the body when the message
    /// it took has tag T, else to `end`, past the loop (the simulations keep each rank's
    /// last tag; see [`P2pPlan::sets_tag`]).
    WhileTag {
        tag: u32,
        end: usize,
    },
    /// `Plan::p2ps[i]`.
    P2p(u32),
    /// `Plan::colls[i]`.
    Collective(u32),
    CommDecl {
        stmt: &'p Stmt,
        parent: Option<usize>,
        name: usize,
    },
    Wait {
        stmt: &'p Stmt,
        /// `Plan::handles[handles.0..handles.1]`.
        handles: (u32, u32),
        any: bool,
    },
}

/// Variable-size parts of ops live in the plan's own vectors, so lowering allocates per
/// program, not per statement, and the simulation reads them from contiguous memory.
pub(crate) struct Plan<'p> {
    pub ops: Vec<Op<'p>>,
    pub p2ps: Vec<P2pPlan<'p>>,
    pub colls: Vec<CollPlan<'p>>,
    /// Arms of `If` ops: (interned condition id or `PER_ITERATION`, condition, first op
    /// of the arm).
    pub arms: Vec<(usize, &'p Expr, usize)>,
    /// Handles of `Wait` ops.
    pub handles: Vec<usize>,
    /// Communicator names by id (`world` first).
    pub comm_names: Vec<&'p str>,
    /// Peer tables: (communicator id, direction).
    pub tables: Vec<(usize, &'p Direction)>,
    /// How many distinct conditions and loop counts there are (by structure).
    pub conds: usize,
    pub counts: usize,
}

/// Expressions by structure (equality of IR nodes ignores positions): id of each
/// distinct one. Evaluation depends only on the structure and the rank, so equal
/// expressions have equal values on every rank.
#[derive(Default)]
struct Interner<'p> {
    ids: HashMap<u64, Vec<(&'p Expr, usize)>>,
    len: usize,
}

impl<'p> Interner<'p> {
    fn id(&mut self, e: &'p Expr) -> usize {
        let bucket = self.ids.entry(structural_hash(e)).or_default();
        if let Some(&(_, id)) = bucket.iter().find(|(x, _)| *x == e) {
            return id;
        }
        let id = self.len;
        bucket.push((e, id));
        self.len += 1;
        id
    }
}

/// A hash of the expression's structure (not its positions).
fn structural_hash(e: &Expr) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mix = |h: u64, v: u64| (h.rotate_left(5) ^ v).wrapping_mul(K);
    match &e.kind {
        ExprKind::Int(v) => mix(1, *v as u64),
        ExprKind::Bool(b) => mix(2, u64::from(*b)),
        ExprKind::Rank => 3,
        ExprKind::NRanks => 4,
        ExprKind::Coord(d) => mix(5, u64::from(*d)),
        ExprKind::Var(v) => v.name.bytes().fold(8, |h, b| mix(h, u64::from(b))),
        ExprKind::PerRank(values) => values.iter().fold(9, |h, v| mix(h, *v as u64)),
        ExprKind::Pick(values, index) => values
            .iter()
            .fold(mix(10, structural_hash(index)), |h, v| mix(h, *v as u64)),
        ExprKind::Unary(op, x) => mix(mix(6, *op as u64), structural_hash(x)),
        ExprKind::Binary(op, l, r) => mix(
            mix(mix(7, *op as u64), structural_hash(l)),
            structural_hash(r),
        ),
    }
}

struct Lowering<'p, 'h> {
    plan: Plan<'p>,
    /// Communicator ids by name, for programs with more than a handful.
    comm_ids: HashMap<&'p str, usize>,
    handle_index: &'h HashMap<&'p str, usize>,
    conds: Interner<'p>,
    counts: Interner<'p>,
}

/// Lowers the program body. `handle_index` maps request handle names to indices.
pub(crate) fn lower<'p>(program: &'p Program, handle_index: &HashMap<&'p str, usize>) -> Plan<'p> {
    let mut lowering = Lowering {
        plan: Plan {
            ops: Vec::new(),
            p2ps: Vec::new(),
            colls: Vec::new(),
            arms: Vec::new(),
            handles: Vec::new(),
            comm_names: vec!["world"],
            tables: Vec::new(),
            conds: 0,
            counts: 0,
        },
        comm_ids: HashMap::from_iter([("world", WORLD)]),
        handle_index,
        conds: Interner::default(),
        counts: Interner::default(),
    };
    // Declarations first, so that ids follow the declaration order.
    for stmt in &program.body.stmts {
        if let StmtKind::CommDecl(d) = &stmt.kind {
            lowering.comm_id(&d.name.name);
        }
    }
    lowering.block(&program.body);
    lowering.plan.conds = lowering.conds.len;
    lowering.plan.counts = lowering.counts.len;
    lowering.plan
}

/// Whether a block holds only computation (loops of computation included). Blocks
/// nest at most `MAX_BLOCK_DEPTH` deep, so rescanning inner loops costs little.
pub(crate) fn is_comm_free(block: &Block) -> bool {
    block.stmts.iter().all(|s| match &s.kind {
        StmtKind::Compute(_) => true,
        StmtKind::Loop(l) => is_comm_free(&l.body),
        _ => false,
    })
}

impl<'p> Lowering<'p, '_> {
    fn comm_id(&mut self, name: &'p str) -> usize {
        // Programs name a handful of communicators: comparing beats hashing.
        let names = &self.plan.comm_names;
        let found = if names.len() <= 16 {
            names.iter().position(|&c| c == name)
        } else {
            self.comm_ids.get(name).copied()
        };
        if let Some(id) = found {
            return id;
        }
        let id = names.len();
        self.plan.comm_names.push(name);
        self.comm_ids.insert(name, id);
        id
    }

    fn comm(&mut self, comm: &'p Option<Ident>) -> (Option<usize>, &'p str) {
        let name = comm.as_ref().map_or("world", |c| c.name.as_str());
        (Some(self.comm_id(name)), name)
    }

    fn handle(&self, handle: &'p Option<Ident>) -> Option<usize> {
        handle
            .as_ref()
            .and_then(|h| self.handle_index.get(h.name.as_str()).copied())
    }

    fn peer(&mut self, comm: Option<usize>, peer: &'p Spanned<Peer>) -> PeerRef<'p> {
        let table = match (&peer.value, comm) {
            (
                Peer::Dir(
                    dir @ (Direction::Axis(_)
                    | Direction::Offset(_)
                    | Direction::Next
                    | Direction::Prev
                    | Direction::Parent
                    | Direction::Hub),
                ),
                Some(comm),
            ) => Some(
                match self
                    .plan
                    .tables
                    .iter()
                    .position(|&(c, d)| c == comm && d == dir)
                {
                    Some(t) => t,
                    None => {
                        self.plan.tables.push((comm, dir));
                        self.plan.tables.len() - 1
                    }
                },
            ),
            _ => None,
        };
        PeerRef {
            peer,
            table,
            any: matches!(peer.value, Peer::Any),
            source: matches!(peer.value, Peer::Source),
        }
    }

    fn push(&mut self, op: Op<'p>) -> usize {
        self.plan.ops.push(op);
        self.plan.ops.len() - 1
    }

    fn block(&mut self, block: &'p Block) {
        for stmt in &block.stmts {
            self.stmt(stmt);
        }
    }

    /// A point-to-point statement's plan; `while_head`: the receive of a `while recv`,
    /// which takes any tag and keeps the one it got.
    fn p2p(&mut self, stmt: &'p Stmt, p: &'p P2p, while_head: bool) {
        let (comm, comm_name) = self.comm(&p.comm);
        let bytes = |s: &'p MsgSize| match s {
            MsgSize::Fixed(v) => Bytes::Const(v.value.bytes().unwrap_or(0)),
            MsgSize::Pick(_) => Bytes::Pick(s),
        };
        let (send, recv) = match p.op {
            P2pOp::Recv | P2pOp::Irecv => (None, Some((&p.peer, &p.size))),
            P2pOp::Sendrecv => (
                Some((&p.peer, &p.size)),
                p.recv.as_deref().map(|(peer, size)| (peer, size)),
            ),
            P2pOp::Send | P2pOp::Isend => (Some((&p.peer, &p.size)), None),
        };
        let send = send.map(|(peer, size)| (self.peer(comm, peer), bytes(size)));
        let recv = recv.map(|(peer, size)| (self.peer(comm, peer), bytes(size)));
        let sets_source =
            matches!(p.op, P2pOp::Recv | P2pOp::Sendrecv) && recv.is_some_and(|(peer, _)| peer.any);
        let plan = P2pPlan {
            stmt,
            comm,
            comm_name,
            send,
            recv,
            tag: if while_head {
                ANY_TAG
            } else {
                p.tag.map_or(0, |t| t.value)
            },
            request: p.request.is_some(),
            handle: self.handle(&p.request),
            window: p.window.map_or(0, |w| w.value),
            sets_source,
            sets_tag: while_head,
        };
        self.plan.p2ps.push(plan);
        self.push(Op::P2p(self.plan.p2ps.len() as u32 - 1));
    }

    fn stmt(&mut self, stmt: &'p Stmt) {
        match &stmt.kind {
            StmtKind::Compute(c) => {
                self.push(Op::Compute(
                    Time::of(&c.time),
                    crate::semantics::poll_seconds(c),
                ));
            }
            StmtKind::Loop(l) => {
                let comm_free = is_comm_free(&l.body);
                let constant = match l.count.kind {
                    ExprKind::Int(v) => Some(v),
                    _ => None,
                };
                let count = match constant {
                    Some(_) => 0,
                    None if reads_vars(&l.count, None) => PER_ITERATION,
                    None => self.counts.id(&l.count),
                };
                let var = l.var.is_some();
                let start = self.push(Op::Loop {
                    l,
                    end: 0,
                    comm_free,
                    constant,
                    count,
                });
                if !comm_free {
                    self.block(&l.body);
                }
                let end = self.push(Op::EndLoop { start, var });
                if let Op::Loop { end: e, .. } = &mut self.plan.ops[start] {
                    *e = end;
                }
            }
            StmtKind::If(i) => {
                let at = self.push(Op::Jump(0));
                let mut arms: Vec<(usize, &'p Expr, usize)> = Vec::new();
                let mut jumps: Vec<usize> = Vec::new();
                let mut current = i;
                let otherwise = loop {
                    let id = if reads_vars(&current.cond, None) {
                        PER_ITERATION
                    } else {
                        self.conds.id(&current.cond)
                    };
                    arms.push((id, &current.cond, self.plan.ops.len()));
                    self.block(&current.then_block);
                    jumps.push(self.push(Op::Jump(0)));
                    match &current.else_branch {
                        None => break None,
                        Some(Else::Block(b)) => {
                            let start = self.plan.ops.len();
                            self.block(b);
                            break Some(start);
                        }
                        Some(Else::If(next)) => current = next,
                    }
                };
                let end = self.plan.ops.len();
                for j in jumps {
                    self.plan.ops[j] = Op::Jump(end);
                }
                let first = self.plan.arms.len() as u32;
                self.plan.arms.extend(arms);
                self.plan.ops[at] = Op::If {
                    arms: (first, self.plan.arms.len() as u32),
                    otherwise: otherwise.unwrap_or(end),
                };
            }
            StmtKind::While(w) => {
                let head = self.plan.ops.len();
                self.p2p(stmt, &w.recv, true);
                let at = self.push(Op::WhileTag {
                    tag: w.recv.tag.map_or(0, |t| t.value),
                    end: 0,
                });
                self.block(&w.body);
                self.push(Op::Jump(head));
                let end = self.plan.ops.len();
                if let Op::WhileTag { end: e, .. } = &mut self.plan.ops[at] {
                    *e = end;
                }
            }
            StmtKind::P2p(p) => self.p2p(stmt, p, false),
            StmtKind::Collective(c) => {
                let (comm, comm_name) = self.comm(&c.comm);
                let bytes = match &c.size {
                    Some(SizeSpec::Fixed(s)) if !c.op.is_vector() => s.value.bytes(),
                    _ => None,
                };
                let constant_root = match c.root.as_ref().map(|e| &e.kind) {
                    Some(ExprKind::Int(v)) => Some(*v),
                    _ => None,
                };
                let plan = CollPlan {
                    stmt,
                    op: c.op,
                    nonblocking: c.nonblocking,
                    root: c.root.as_ref(),
                    has_root: c.op.has_root(),
                    comm,
                    comm_name,
                    bytes,
                    constant_root,
                    request: c.request.is_some(),
                    handle: self.handle(&c.request),
                };
                self.plan.colls.push(plan);
                self.push(Op::Collective(self.plan.colls.len() as u32 - 1));
            }
            StmtKind::CommDecl(d) => {
                let parent = Some(self.comm_id(d.def.parent().name.as_str()));
                let name = self.comm_id(&d.name.name);
                self.push(Op::CommDecl { stmt, parent, name });
            }
            StmtKind::Wait(w) => {
                // `test` never blocks and completes nothing the simulation tracks.
                if w.op != WaitOp::Test {
                    let first = self.plan.handles.len() as u32;
                    for h in &w.handles {
                        if let Some(&i) = self.handle_index.get(h.name.as_str()) {
                            self.plan.handles.push(i);
                        }
                    }
                    self.push(Op::Wait {
                        stmt,
                        handles: (first, self.plan.handles.len() as u32),
                        any: w.op == WaitOp::Waitany,
                    });
                }
            }
        }
    }
}

/// Peer table entries: not computed yet, no neighbour, or the peer's rank.
const PEER_UNKNOWN: u32 = u32::MAX;
const PEER_MISSING: u32 = u32::MAX - 1;

/// The peers of the plan's tables, per rank, filled as a run resolves them: an
/// argument-free direction's peer depends only on the communicator and the rank.
pub(crate) struct PeerCache {
    n: usize,
    /// `table * n + rank` → `PEER_UNKNOWN`, `PEER_MISSING` or the peer's rank in the
    /// communicator.
    slots: Vec<u32>,
}

impl PeerCache {
    pub fn new(plan: &Plan, n: usize) -> PeerCache {
        PeerCache {
            n,
            slots: vec![PEER_UNKNOWN; plan.tables.len() * n],
        }
    }

    /// The peer `rank` has through `peer`: `Ok` when known (`None`: no neighbour),
    /// `Err(slot)` when the caller must resolve it and [`PeerCache::store`] it there
    /// (or resolve it every time: a peer without a table).
    #[inline(always)]
    fn get(&self, peer: PeerRef, rank: u32) -> Result<Option<u32>, Option<usize>> {
        let Some(t) = peer.table else {
            return Err(None);
        };
        let slot = t * self.n + rank as usize;
        match self.slots[slot] {
            PEER_MISSING => Ok(None),
            PEER_UNKNOWN => Err(Some(slot)),
            p => Ok(Some(p)),
        }
    }

    #[inline(always)]
    fn store(&mut self, slot: Option<usize>, found: Option<u32>) {
        if let Some(slot) = slot {
            self.slots[slot] = found.unwrap_or(PEER_MISSING);
        }
    }

    /// The peer of a point-to-point operation of `rank`, which is rank `me` of `inst`
    /// (its environment `env`, its loop variables `vars`): the peer's rank in the
    /// communicator, or `None` for a missing neighbour; from the table when the plan
    /// gives one (resolved the first time).
    #[inline(always)]
    pub fn peer(
        &mut self,
        peer: PeerRef,
        rank: u32,
        inst: &Inst,
        me: u32,
        env: &Env,
        vars: Vars,
    ) -> Result<Option<u32>, PeerFault> {
        match self.get(peer, rank) {
            Ok(known) => Ok(known),
            Err(slot) => {
                let found = resolve(&peer.peer.value, inst, me, env, vars)?;
                self.store(slot, found);
                Ok(found)
            }
        }
    }
}

/// Why a peer has no rank: a simulation reports it or treats it its own way.
pub(crate) enum PeerFault {
    Eval(EvalError),
    /// `rank(E)` whose value is not a rank of the communicator (its size given).
    OutOfRange(i64, u64),
    /// A direction's argument is out of range; the string says how.
    BadArgument(String),
    /// A direction this communicator's topology does not have.
    NotInTopology,
}

/// The peer `peer` names for rank `me` of `inst`; `None`: a missing neighbour (or
/// `any`, which has no single peer, or `source`, which the simulations keep per rank).
fn resolve(
    peer: &Peer,
    inst: &Inst,
    me: u32,
    env: &Env,
    vars: Vars,
) -> Result<Option<u32>, PeerFault> {
    let size = inst.members.len() as u64;
    let found = match peer {
        Peer::Any | Peer::Source => None,
        Peer::Rank(e) => match eval_int_in(e, env, vars).map_err(PeerFault::Eval)? {
            v if v >= 0 && (v as u64) < size => Some(v as u64),
            v => return Err(PeerFault::OutOfRange(v, size)),
        },
        Peer::Dir(dir) => inst
            .shape
            .peer_in(u64::from(me), size, dir, env, vars)
            .map_err(|e| match e {
                PeerError::Eval(e) => PeerFault::Eval(e),
                PeerError::BadArgument(why) => PeerFault::BadArgument(why),
                PeerError::NotInTopology => PeerFault::NotInTopology,
            })?,
    };
    // Communicators have at most `MAX_SIMULATED_RANKS` ranks.
    Ok(found.map(|p| p as u32))
}
