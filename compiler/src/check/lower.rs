//! Lowering for the simulation: a [`Program`] body → a flat plan of operations, with
//! loops and branches as jumps, communicator and request names resolved to indices,
//! sizes and tags computed once, and argument-free directions shared in peer tables.
//! The simulation runs every rank over the same plan with a program counter.

use rustc_hash::FxHashMap as HashMap;

use perfskel_grammar::ast::*;

/// Communicator id of `world`; other names get ids in order of first appearance.
pub(super) const WORLD: usize = 0;

/// How a point-to-point operation finds its peer.
#[derive(Clone, Copy)]
pub(super) struct PeerRef<'p> {
    pub peer: &'p Spanned<Peer>,
    /// A table of the peer of every world rank, for directions without arguments:
    /// their peer depends only on the communicator and the rank.
    pub table: Option<usize>,
}

pub(super) struct P2pPlan<'p> {
    pub stmt: &'p Stmt,
    pub comm: Option<usize>,
    pub comm_name: &'p str,
    pub send: Option<(PeerRef<'p>, u64)>,
    pub recv: Option<(PeerRef<'p>, u64)>,
    pub tag: u32,
    /// Whether the operation binds a request (`req NAME = ...`), and its handle index
    /// if the name is known.
    pub request: bool,
    pub handle: Option<usize>,
}

pub(super) struct CollPlan<'p> {
    pub stmt: &'p Stmt,
    pub c: &'p Collective,
    pub comm: Option<usize>,
    pub comm_name: &'p str,
    pub bytes: Option<u64>,
    pub request: bool,
    pub handle: Option<usize>,
}

pub(super) enum Op<'p> {
    Compute(&'p TimeSpec),
    /// Enters a loop; `end` is the index of its `EndLoop`.
    Loop {
        l: &'p Loop,
        end: usize,
        comm_free: bool,
        /// The count when it is a literal.
        constant: Option<i64>,
    },
    /// The end of a loop body: back to `start + 1` while iterations are left.
    EndLoop {
        start: usize,
    },
    /// A conditional: the arms' conditions in order with the first op of each arm's
    /// block, then where to go when no condition holds (the `else` block or the end).
    If {
        arms: Vec<(&'p Expr, usize)>,
        otherwise: usize,
        /// The index of this `if` among the plan's (for memos of its outcome per rank).
        index: usize,
    },
    Jump(usize),
    P2p(Box<P2pPlan<'p>>),
    Collective(Box<CollPlan<'p>>),
    CommDecl {
        stmt: &'p Stmt,
        parent: Option<usize>,
        parent_name: &'p str,
        name: usize,
    },
    Wait {
        stmt: &'p Stmt,
        handles: Vec<usize>,
        any: bool,
    },
}

pub(super) struct Plan<'p> {
    pub ops: Vec<Op<'p>>,
    /// Communicator names by id (`world` first).
    pub comm_names: Vec<&'p str>,
    /// Peer tables: (communicator id, direction).
    pub tables: Vec<(usize, &'p Direction)>,
    /// How many `If` ops there are.
    pub ifs: usize,
}

struct Lowering<'p, 'h> {
    plan: Plan<'p>,
    comm_ids: HashMap<&'p str, usize>,
    handle_index: &'h HashMap<&'p str, usize>,
    comm_free: HashMap<*const Block, bool>,
}

/// Lowers the program body. `handle_index` maps request handle names to indices.
pub(super) fn lower<'p>(program: &'p Program, handle_index: &HashMap<&'p str, usize>) -> Plan<'p> {
    let mut lowering = Lowering {
        plan: Plan {
            ops: Vec::new(),
            comm_names: vec!["world"],
            tables: Vec::new(),
            ifs: 0,
        },
        comm_ids: HashMap::from_iter([("world", WORLD)]),
        handle_index,
        comm_free: HashMap::default(),
    };
    // Declarations first, so that ids follow the declaration order.
    for stmt in &program.body.stmts {
        if let StmtKind::CommDecl(d) = &stmt.kind {
            lowering.comm_id(&d.name.name);
        }
    }
    lowering.block(&program.body);
    lowering.plan
}

/// Whether a block holds only computation (loops of computation included).
pub(super) fn is_comm_free(block: &Block, memo: &mut HashMap<*const Block, bool>) -> bool {
    let key = block as *const Block;
    if let Some(&v) = memo.get(&key) {
        return v;
    }
    let free = block.stmts.iter().all(|s| match &s.kind {
        StmtKind::Compute(_) => true,
        StmtKind::Loop(l) => is_comm_free(&l.body, memo),
        _ => false,
    });
    memo.insert(key, free);
    free
}

impl<'p> Lowering<'p, '_> {
    fn comm_id(&mut self, name: &'p str) -> usize {
        let next = self.plan.comm_names.len();
        let id = *self.comm_ids.entry(name).or_insert(next);
        if id == next {
            self.plan.comm_names.push(name);
        }
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
        PeerRef { peer, table }
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

    fn stmt(&mut self, stmt: &'p Stmt) {
        match &stmt.kind {
            StmtKind::Compute(c) => {
                self.push(Op::Compute(&c.time));
            }
            StmtKind::Loop(l) => {
                let comm_free = is_comm_free(&l.body, &mut self.comm_free);
                let constant = match l.count.kind {
                    ExprKind::Int(v) => Some(v),
                    _ => None,
                };
                let start = self.push(Op::Loop {
                    l,
                    end: 0,
                    comm_free,
                    constant,
                });
                if !comm_free {
                    self.block(&l.body);
                }
                let end = self.push(Op::EndLoop { start });
                if let Op::Loop { end: e, .. } = &mut self.plan.ops[start] {
                    *e = end;
                }
            }
            StmtKind::If(i) => {
                let at = self.push(Op::Jump(0));
                let mut arms = Vec::new();
                let mut jumps = Vec::new();
                let mut current = i;
                let otherwise = loop {
                    arms.push((&current.cond, self.plan.ops.len()));
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
                self.plan.ops[at] = Op::If {
                    arms,
                    otherwise: otherwise.unwrap_or(end),
                    index: self.plan.ifs,
                };
                self.plan.ifs += 1;
            }
            StmtKind::P2p(p) => {
                let (comm, comm_name) = self.comm(&p.comm);
                let bytes = |s: &Spanned<Size>| s.value.bytes().unwrap_or(0);
                let (send, recv) = match p.op {
                    P2pOp::Recv | P2pOp::Irecv => (None, Some((&p.peer, &p.size))),
                    P2pOp::Sendrecv => (
                        Some((&p.peer, &p.size)),
                        p.recv.as_ref().map(|(peer, size)| (peer, size)),
                    ),
                    P2pOp::Send | P2pOp::Isend => (Some((&p.peer, &p.size)), None),
                };
                let send = send.map(|(peer, size)| (self.peer(comm, peer), bytes(size)));
                let recv = recv.map(|(peer, size)| (self.peer(comm, peer), bytes(size)));
                let plan = P2pPlan {
                    stmt,
                    comm,
                    comm_name,
                    send,
                    recv,
                    tag: p.tag.map_or(0, |t| t.value),
                    request: p.request.is_some(),
                    handle: self.handle(&p.request),
                };
                self.push(Op::P2p(Box::new(plan)));
            }
            StmtKind::Collective(c) => {
                let (comm, comm_name) = self.comm(&c.comm);
                let bytes = match &c.size {
                    Some(SizeSpec::Fixed(s)) if !c.op.is_vector() => s.value.bytes(),
                    _ => None,
                };
                let plan = CollPlan {
                    stmt,
                    c,
                    comm,
                    comm_name,
                    bytes,
                    request: c.request.is_some(),
                    handle: self.handle(&c.request),
                };
                self.push(Op::Collective(Box::new(plan)));
            }
            StmtKind::CommDecl(d) => {
                let parent_name = d.def.parent().name.as_str();
                let parent = Some(self.comm_id(parent_name));
                let name = self.comm_id(&d.name.name);
                self.push(Op::CommDecl {
                    stmt,
                    parent,
                    parent_name,
                    name,
                });
            }
            StmtKind::Wait(w) => {
                // `test` never blocks and completes nothing the simulation tracks.
                if w.op != WaitOp::Test {
                    let handles = w
                        .handles
                        .iter()
                        .filter_map(|h| self.handle_index.get(h.name.as_str()).copied())
                        .collect();
                    self.push(Op::Wait {
                        stmt,
                        handles,
                        any: w.op == WaitOp::Waitany,
                    });
                }
            }
        }
    }
}
