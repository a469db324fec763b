//! The static pass: header consistency, communicator names, directions against the
//! topology, expression types, counts, sizes and per-rank lists.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use perfskel_grammar::ast::*;
use perfskel_grammar::printer;
use perfskel_grammar::Diag;

use crate::semantics::{depends_on_rank, eval_int, reads_vars, Env, PeerError, Shape};

/// The largest tag every MPI library must accept (MPI_TAG_UB is at least this).
const PORTABLE_TAG_MAX: u32 = 32_767;

pub(super) struct Statics {
    pub n_ranks: u64,
    pub world: Shape,
    pub comms: BTreeMap<String, CommEntry>,
    pub request_names: BTreeSet<String>,
}

pub(super) struct CommEntry {
    /// Declaration order; `world` is 0.
    pub order: usize,
    /// Shared: every use of the communicator looks at it.
    pub shape: Rc<Shape>,
    pub pos: Pos,
    pub used: bool,
}

pub(super) fn check(program: &Program, diags: &mut Vec<Diag>) -> Statics {
    let n_ranks = program.ranks.value;
    header(program, diags);
    let world = Shape::of_topology(&program.topology.value, n_ranks);
    let mut comms = BTreeMap::new();
    comms.insert(
        "world".to_string(),
        CommEntry {
            order: 0,
            shape: Rc::new(world.clone()),
            pos: Pos::Derived,
            used: true,
        },
    );
    let mut pass = Pass {
        program,
        n_ranks,
        world_dims: world_dims(&world),
        comms,
        request_names: BTreeSet::new(),
        diags,
        peer_checks: Vec::new(),
        scope: Vec::new(),
        loop_vars: Vec::new(),
        request_pos: BTreeMap::new(),
        source_uses: Vec::new(),
        any_receive_comms: BTreeSet::new(),
    };
    pass.block(&program.body, 0);
    pass.loop_var_collisions();
    pass.source_uses();
    for (name, comm) in &pass.comms {
        if !comm.used {
            pass.diags.push(
                Diag::warning(
                    "unused-communicator",
                    format!("communicator `{name}` is never used"),
                )
                .at(comm.pos, "declared here"),
            );
        }
    }
    Statics {
        n_ranks,
        world,
        comms: pass.comms,
        request_names: pass.request_names,
    }
}

fn world_dims(world: &Shape) -> usize {
    match world {
        Shape::Grid { dims, .. } => dims.len(),
        Shape::Hypercube { bits } => *bits as usize,
        _ => 0,
    }
}

fn header(program: &Program, diags: &mut Vec<Diag>) {
    let n = program.ranks.value;
    if n == 0 {
        diags.push(
            Diag::error("bad-ranks", "a skeleton needs at least one rank")
                .at(program.ranks.pos, "zero ranks"),
        );
    }
    let time = program.app_time.value;
    if time.seconds() <= 0.0 {
        diags.push(
            Diag::error("bad-app-time", "the application time must be positive").at(
                program.app_time.pos,
                "the skeleton stands for this much time",
            ),
        );
    } else if time.seconds() > MAX_APP_TIME_S {
        diags.push(
            Diag::error(
                "bad-app-time",
                format!(
                    "an application time of {:e} s is more than any run lasts (at most {MAX_APP_TIME_S:e} s, about 32 years)",
                    time.seconds()
                ),
            )
            .at(program.app_time.pos, "the skeleton stands for this much time"),
        );
    }
    if let Some(memory) = &program.memory {
        let m = memory.value;
        if m.working_set.value.bytes() == Some(0) {
            diags.push(
                Diag::error(
                    "bad-size",
                    "the memory probe's working set must have some size",
                )
                .at(m.working_set.pos, "zero"),
            );
        }
        if let Some(d) = too_large_working_set(&m.working_set) {
            diags.push(d);
        }
        if m.rate.value.bytes() == Some(0) {
            diags.push(
                Diag::error("bad-size", "the memory probe's rate must be positive")
                    .at(m.rate.pos, "zero"),
            );
        }
    }
    let topo = &program.topology;
    let bad = |message: String, hint: Option<String>| {
        let mut d = Diag::error("bad-topology", message)
            .at(topo.pos, "declared here")
            .with_secondary(program.ranks.pos, format!("{n} ranks"));
        if let Some(hint) = hint {
            d = d.with_note(format!("hint: {hint}"));
        }
        d
    };
    match &topo.value {
        Topology::Grid { dims, periodic } => {
            let product = dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
            if dims.contains(&0) {
                diags.push(bad("grid dimensions must be at least 1".into(), None));
            } else if product != Some(n) {
                let shown = printer::topology(&topo.value);
                let hint = factor_hint(n, dims.len());
                diags.push(bad(
                    format!(
                        "`{shown}` has {} ranks but the skeleton declares {n}",
                        product.map_or_else(|| "too many".into(), |p| p.to_string())
                    ),
                    hint,
                ));
            }
            if periodic.len() != dims.len() {
                diags.push(bad(
                    format!(
                        "the grid has {} dimensions but {} periodicity flags",
                        dims.len(),
                        periodic.len()
                    ),
                    None,
                ));
            }
        }
        Topology::Hypercube if !n.is_power_of_two() => {
            diags.push(bad(
                format!("a hypercube needs a power-of-two rank count, not {n}"),
                None,
            ));
        }
        Topology::Tree { arity: 0 } => {
            diags.push(bad("a tree needs an arity of at least 1".into(), None));
        }
        Topology::Graph { neighbors } => {
            let mut seen = BTreeSet::new();
            for (rank, list) in neighbors {
                if *rank >= n {
                    diags.push(bad(
                        format!(
                            "graph entry for rank {rank}, but ranks are 0 to {}",
                            n.saturating_sub(1)
                        ),
                        None,
                    ));
                } else if !seen.insert(*rank) {
                    diags.push(bad(
                        format!("rank {rank} has two neighbour lists in the graph"),
                        None,
                    ));
                }
                if let Some(bad_peer) = list.iter().find(|&&p| p >= n) {
                    diags.push(bad(
                        format!(
                            "rank {rank} lists neighbour {bad_peer}, but ranks are 0 to {}",
                            n.saturating_sub(1)
                        ),
                        None,
                    ));
                }
            }
        }
        _ => {}
    }
}

/// "grid(4, 4) would fit 16 ranks": a factorization of `n` into `dims` near-equal factors.
fn factor_hint(n: u64, dims: usize) -> Option<String> {
    // Trial division over every divisor: only for rank counts people run.
    if n == 0 || dims == 0 || n > 1 << 24 {
        return None;
    }
    let mut factors = Vec::new();
    let mut rest = n;
    for left in (1..=dims).rev() {
        let target = (rest as f64).powf(1.0 / left as f64).round().max(1.0) as u64;
        let f = (1..=rest)
            .filter(|&d| rest.is_multiple_of(d))
            .min_by_key(|&d| d.abs_diff(target))
            .unwrap_or(1);
        factors.push(f);
        rest /= f;
    }
    factors.sort_unstable_by(|a, b| b.cmp(a));
    let list: Vec<String> = factors.iter().map(u64::to_string).collect();
    Some(format!("`grid({})` has {n} ranks", list.join(", ")))
}

struct Pass<'a> {
    program: &'a Program,
    n_ranks: u64,
    world_dims: usize,
    comms: BTreeMap<String, CommEntry>,
    request_names: BTreeSet<String>,
    diags: &'a mut Vec<Diag>,
    /// Outcomes of checking argument-free directions against a shape (by address:
    /// shapes are shared through `Rc` and live as long as the pass).
    peer_checks: Vec<(*const Shape, Direction, Result<(), PeerError>)>,
    /// The variables of the loops around the statement being checked, innermost last.
    scope: Vec<Ident>,
    /// Every loop variable the program declares, for the name collision check.
    loop_vars: Vec<Ident>,
    /// Where each request name is first bound.
    request_pos: BTreeMap<String, Pos>,
    /// Every `source` peer, with the communicator of its statement.
    source_uses: Vec<(Pos, String)>,
    /// The communicators some blocking receive from `any` receives on (what sets
    /// `source`).
    any_receive_comms: BTreeSet<String>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Ty {
    Int,
    Bool,
}

impl Pass<'_> {
    fn block(&mut self, block: &Block, depth: usize) {
        for stmt in &block.stmts {
            self.stmt(stmt, depth);
        }
    }

    fn stmt(&mut self, stmt: &Stmt, depth: usize) {
        match &stmt.kind {
            StmtKind::Compute(c) => self.compute(c),
            StmtKind::P2p(p) => self.p2p(p),
            StmtKind::Collective(c) => self.collective(c),
            StmtKind::Wait(_) => {}
            StmtKind::CommDecl(d) => self.comm_decl(d, stmt, depth),
            StmtKind::While(w) => {
                self.p2p(&w.recv);
                self.block(&w.body, depth + 1);
            }
            StmtKind::Loop(l) => {
                // The count is evaluated before the first iteration: the loop's own
                // variable is not in scope there.
                if self.expr(&l.count, Ty::Int, "a loop count") {
                    self.count(&l.count);
                }
                let bound = l.var.as_ref().is_some_and(|v| self.bind(v));
                self.block(&l.body, depth + 1);
                if bound {
                    self.scope.pop();
                }
            }
            StmtKind::If(i) => {
                let mut current = i;
                loop {
                    self.expr(&current.cond, Ty::Bool, "`if`");
                    self.block(&current.then_block, depth + 1);
                    match &current.else_branch {
                        None => break,
                        Some(Else::Block(b)) => {
                            self.block(b, depth + 1);
                            break;
                        }
                        Some(Else::If(next)) => current = next,
                    }
                }
            }
        }
        if let Some(r) = stmt.kind.request() {
            if !self.request_names.contains(&r.name) {
                self.request_names.insert(r.name.clone());
                self.request_pos.insert(r.name.clone(), r.pos);
            }
        }
    }

    /// Brings the variable of a loop into scope for its body; refuses a name an
    /// enclosing loop already uses (returns whether it was bound).
    fn bind(&mut self, var: &Ident) -> bool {
        self.loop_vars.push(var.clone());
        if let Some(outer) = self.scope.iter().find(|v| v.name == var.name) {
            let outer_pos = outer.pos;
            self.diags.push(
                Diag::error(
                    "shadowed-variable",
                    format!(
                        "loop variable `{}` is already the variable of an enclosing loop",
                        var.name
                    ),
                )
                .at(var.pos, "declared again here")
                .with_secondary(outer_pos, "the enclosing loop's variable")
                .with_note(
                    "a loop variable cannot shadow another: inside the inner loop, which iteration number would the name mean?",
                )
                .with_note("hint: give the inner loop's variable another name"),
            );
            return false;
        }
        self.scope.push(var.clone());
        true
    }

    /// Loop variables share names with communicators and requests in generated code and
    /// in readers' minds: the same name for both is refused.
    fn loop_var_collisions(&mut self) {
        let mut diags = Vec::new();
        for var in &self.loop_vars {
            let other = match self.comms.get(&var.name) {
                Some(comm) => Some(("communicator", comm.pos)),
                None => self.request_pos.get(&var.name).map(|&pos| ("request", pos)),
            };
            if let Some((what, pos)) = other {
                let mut diag = Diag::error(
                    "name-collision",
                    format!("loop variable `{}` has the name of a {what}", var.name),
                )
                .at(var.pos, "loop variable");
                diag = if pos.span().is_some() {
                    diag.with_secondary(pos, format!("the {what} `{}`", var.name))
                } else {
                    diag.with_note(format!("`{}` is the communicator of all ranks", var.name))
                };
                diags.push(diag.with_note("hint: rename the loop variable"));
            }
        }
        self.diags.extend(diags);
    }

    /// Loop counts: a constant must be positive; a rank-dependent one must not be
    /// negative on any rank (zero is how a rank skips a loop). One that reads loop
    /// variables is checked by the simulation, iteration by iteration.
    fn count(&mut self, count: &Expr) {
        if reads_vars(count, None) {
            return;
        }
        let env = |rank| Env {
            rank,
            n_ranks: self.n_ranks,
            coords: Vec::new(),
        };
        if !depends_on_rank(count) {
            match eval_int(count, &env(0)) {
                Ok(v) if v <= 0 => self.diags.push(
                    Diag::error(
                        "bad-count",
                        format!("a loop must run at least once, not {v} times"),
                    )
                    .at(count.pos, "loop count"),
                ),
                Ok(_) => {}
                Err(e) => self
                    .diags
                    .push(Diag::error("bad-expression", e.message()).at(e.pos(), "here")),
            }
        }
    }

    fn compute(&mut self, c: &Compute) {
        let positive = |d: &Spanned<Duration>, diags: &mut Vec<Diag>| {
            if d.value.value <= 0.0 {
                diags.push(
                    Diag::error("bad-time", "a compute span must take some time")
                        .at(d.pos, "zero")
                        .with_note("hint: delete the statement if the computation is gone"),
                );
            }
        };
        self.time_spec(&c.time, &positive);
        self.working_set(c);
    }

    fn time_spec(
        &mut self,
        time: &TimeSpec,
        positive: &dyn Fn(&Spanned<Duration>, &mut Vec<Diag>),
    ) {
        match time {
            TimeSpec::Pick(p) => {
                // An option may take no time: the iterations that compute nothing.
                let not_negative = |d: &Spanned<Duration>, diags: &mut Vec<Diag>| {
                    if d.value.value != 0.0 {
                        positive(d, diags);
                    }
                };
                for option in &p.values {
                    self.time_spec(option, &not_negative);
                }
                self.check_pick_index(&p.index, p.values.len());
            }
            TimeSpec::Fixed(d) => positive(d, self.diags),
            TimeSpec::PerRank(values) => {
                self.per_rank_len(values.len(), values.first().map(|v| v.pos), "times");
            }
            TimeSpec::Normal { mean, .. } => positive(mean, self.diags),
            TimeSpec::Uniform { low, high } => {
                if low.value.seconds() > high.value.seconds() {
                    self.diags.push(
                        Diag::error("bad-time", "the low end of `uniform` is above the high end")
                            .at(low.pos, "low")
                            .with_secondary(high.pos, "high"),
                    );
                }
                positive(high, self.diags);
            }
        }
    }

    fn working_set(&mut self, c: &Compute) {
        if let Some(ws) = &c.working_set {
            if ws.value.bytes() == Some(0) {
                self.diags.push(
                    Diag::error("bad-size", "a working set must have some size").at(ws.pos, "zero"),
                );
            }
            if let Some(d) = too_large_working_set(ws) {
                self.diags.push(d);
            }
        }
        if let Some(n) = &c.polls {
            if n.value > MAX_POLLS {
                self.diags.push(
                    Diag::error(
                        "bad-polls",
                        format!(
                            "{} polls after one compute span is more than a run makes (at most {MAX_POLLS})",
                            n.value
                        ),
                    )
                    .at(n.pos, "too many"),
                );
            }
        }
        // One poll is a turn of the progress engine, a system call or a yield: a cost
        // past a second is a typo (the scaler's model would count it for every poll).
        if let Some(d) = &c.poll_cost {
            let s = d.value.seconds();
            if !s.is_finite() || s > 1.0 {
                self.diags.push(
                    Diag::error(
                        "bad-polls",
                        format!("a poll taking {} is more than any MPI call spins", perfskel_grammar::printer::duration(d.value)),
                    )
                    .at(d.pos, "each poll")
                    .with_note("`each` is what one poll took where the skeleton was made (about 50 ns with shared memory, 1 us with TCP)"),
                );
            }
        }
    }

    fn per_rank_len(&mut self, len: usize, pos: Option<Pos>, what: &str) {
        if len as u64 != self.n_ranks {
            self.diags.push(
                Diag::error(
                    "bad-per-rank",
                    format!(
                        "`per_rank` lists {len} {what} but the skeleton has {} ranks",
                        self.n_ranks
                    ),
                )
                .at(pos.unwrap_or_default(), "the list starts here")
                .with_secondary(self.program.ranks.pos, "rank count declared here"),
            );
        }
    }

    fn size(&mut self, size: &Spanned<Size>) {
        if size.value.bytes() == Some(0) {
            self.diags.push(
                Diag::warning("zero-size", "a zero-byte message only synchronizes")
                    .at(size.pos, "zero bytes"),
            );
        }
        let bytes = size.value.value * size.value.unit.bytes() as f64;
        if bytes > MAX_MESSAGE_BYTES as f64 {
            self.diags.push(
                Diag::error(
                    "bad-size",
                    format!(
                        "a message of {} B is more than one MPI call with an `int` count sends ({MAX_MESSAGE_BYTES} B, 2 GiB - 1)",
                        format_bytes(bytes)
                    ),
                )
                .at(size.pos, "too large")
                .with_note("the generated programs count bytes in an `int`: write the message as several of at most 2 GiB - 1"),
            );
        }
    }

    fn msg_size(&mut self, size: &MsgSize) {
        match size {
            MsgSize::Fixed(s) => self.size(s),
            MsgSize::Pick(p) => {
                for s in &p.values {
                    self.size(s);
                }
                self.check_pick_index(&p.index, p.values.len());
            }
        }
    }

    /// A pick's index: an integer; when it reads neither a loop variable nor the rank,
    /// its one value must be in the list's range (the simulation checks the others on
    /// every iteration).
    fn check_pick_index(&mut self, index: &Expr, len: usize) {
        if !self.expr(index, Ty::Int, "an index") {
            return;
        }
        if reads_vars(index, None) || depends_on_rank(index) {
            return;
        }
        let env = Env {
            rank: 0,
            n_ranks: self.n_ranks,
            coords: Vec::new(),
        };
        if let Err(e) = crate::semantics::pick_index(index, len, &env, &[]) {
            self.diags
                .push(Diag::error("bad-expression", e.message()).at(e.pos(), "here"));
        }
    }

    fn comm(&mut self, comm: Option<&Ident>) -> Option<Rc<Shape>> {
        let Some(comm) = comm else {
            return self.comms.get("world").map(|c| c.shape.clone());
        };
        if let Some(entry) = self.comms.get_mut(&comm.name) {
            entry.used = true;
            return Some(entry.shape.clone());
        }
        let mut diag = Diag::error(
            "undefined-communicator",
            format!("communicator `{}` is not declared", comm.name),
        )
        .at(comm.pos, "not declared before this use");
        let names: Vec<&str> = self.comms.keys().map(String::as_str).collect();
        if let Some(best) = closest(&comm.name, &names) {
            diag = diag.with_note(format!("hint: did you mean `{best}`?"));
        } else {
            diag = diag.with_note(
                "hint: declare it first, e.g. `comm row = split(world, color = coord(0))`",
            );
        }
        self.diags.push(diag);
        None
    }

    fn p2p(&mut self, p: &P2p) {
        let shape = self.comm(p.comm.as_ref());
        let comm = p.comm.as_ref().map_or("world", |c| c.name.as_str());
        let received = match p.op {
            P2pOp::Recv => Some(&p.peer.value),
            P2pOp::Sendrecv => p.recv.as_deref().map(|(peer, _)| &peer.value),
            _ => None,
        };
        if received == Some(&Peer::Any) {
            self.any_receive_comms.insert(comm.to_string());
        }
        for peer in std::iter::once(&p.peer).chain(p.recv.as_deref().map(|(peer, _)| peer)) {
            if peer.value == Peer::Source {
                self.source_uses.push((peer.pos, comm.to_string()));
            }
        }
        self.peer(&p.peer, shape.as_deref());
        self.msg_size(&p.size);
        if let Some((peer, size)) = p.recv.as_deref() {
            self.peer(peer, shape.as_deref());
            self.msg_size(size);
        }
        if let Some(tag) = &p.tag {
            if tag.value > PORTABLE_TAG_MAX {
                self.diags.push(
                    Diag::warning(
                        "large-tag",
                        format!("tag {} may exceed MPI_TAG_UB", tag.value),
                    )
                    .at(tag.pos, "tag")
                    .with_note(format!("MPI only guarantees tags up to {PORTABLE_TAG_MAX}")),
                );
            }
        }
    }

    /// `source` names the rank a blocking receive from `any` got its message from, a
    /// rank of that receive's communicator: a program without such a receive on the
    /// same communicator has no rank to name. (Whether one has matched before each use,
    /// on each rank, is the simulation's to find.)
    fn source_uses(&mut self) {
        for (pos, comm) in std::mem::take(&mut self.source_uses) {
            if self.any_receive_comms.contains(&comm) {
                continue;
            }
            let diag = if self.any_receive_comms.is_empty() {
                Diag::error(
                    "source-without-any",
                    "`source` names the rank the last `recv any` received from, and no statement receives from `any`",
                )
                .at(pos, "no rank to name")
                .with_note("hint: receive with `recv any SIZE` (or `sendrecv ... from any SIZE`) before answering with `send source SIZE`")
            } else {
                let on: Vec<String> = self
                    .any_receive_comms
                    .iter()
                    .map(|c| format!("`{c}`"))
                    .collect();
                Diag::error(
                    "source-other-communicator",
                    format!(
                        "`source` on `{comm}` names a rank of the communicator the last `recv any` received on, and receives from `any` are on {} only",
                        on.join(", ")
                    ),
                )
                .at(pos, "a rank of another communicator")
                .with_note(format!("hint: answer on the communicator the message came on: `on {}`", self.any_receive_comms.iter().next().map_or("world", String::as_str)))
            };
            self.diags.push(diag);
        }
    }

    fn peer(&mut self, peer: &Spanned<Peer>, shape: Option<&Shape>) {
        match &peer.value {
            Peer::Any | Peer::Source => {}
            Peer::Rank(e) => {
                self.expr(e, Ty::Int, "a rank");
            }
            Peer::Dir(dir) => {
                for e in direction_args(dir) {
                    self.expr(e, Ty::Int, "an index");
                }
                let Some(shape) = shape else { return };
                // Check the direction's kind against the topology with rank 0's view;
                // index arguments are checked per rank by the simulation.
                let arg_free = direction_args(dir).is_empty();
                // Without arguments the outcome depends only on the shape and the
                // direction: programs repeat a few pairs thousands of times.
                let cached = arg_free
                    .then(|| {
                        self.peer_checks
                            .iter()
                            .find(|(s, d, _)| std::ptr::eq(*s, shape) && d == dir)
                            .map(|(_, _, outcome)| outcome.clone())
                    })
                    .flatten();
                let outcome = match cached {
                    Some(outcome) => outcome,
                    None => {
                        let env = Env {
                            rank: 0,
                            n_ranks: self.n_ranks,
                            coords: shape.coords(0),
                        };
                        let outcome = shape.peer(0, self.n_ranks.max(1), dir, &env).map(|_| ());
                        if arg_free && self.peer_checks.len() < 64 {
                            self.peer_checks.push((shape, dir.clone(), outcome.clone()));
                        }
                        outcome
                    }
                };
                match outcome {
                    Err(PeerError::NotInTopology) => {
                        let topo = match shape {
                            Shape::Unstructured => "this communicator has no topology".to_string(),
                            _ => format!(
                                "the topology is `{}`",
                                printer::topology(&self.program.topology.value)
                            ),
                        };
                        let mut diag = Diag::error(
                            "unknown-direction",
                            format!(
                                "`{}` is not a direction of this topology",
                                printer::direction(dir)
                            ),
                        )
                        .at(peer.pos, "no such neighbour")
                        .with_note(format!(
                            "{topo}: its directions are {}",
                            shape.directions_hint()
                        ));
                        if let Some(s) = suggest_direction(dir, shape) {
                            diag = diag.with_note(format!("hint: did you mean `{s}`?"));
                        }
                        self.diags.push(diag);
                    }
                    Err(PeerError::BadArgument(why))
                        if arg_free || matches!(dir, Direction::Offset(_)) =>
                    {
                        self.diags.push(
                            Diag::error(
                                "unknown-direction",
                                format!("`{}` cannot be used here", printer::direction(dir)),
                            )
                            .at(peer.pos, "no such neighbour")
                            .with_note(why),
                        );
                    }
                    _ => {}
                }
            }
        }
    }

    fn collective(&mut self, c: &Collective) {
        let _ = self.comm(c.comm.as_ref());
        match &c.size {
            Some(SizeSpec::Fixed(s)) => self.size(s),
            Some(SizeSpec::PerRank(list)) => {
                self.per_rank_len(list.len(), list.first().map(|s| s.pos), "sizes");
            }
            None => {}
        }
        if let Some(root) = &c.root {
            self.expr(root, Ty::Int, "a root rank");
        }
    }

    fn comm_decl(&mut self, d: &CommDecl, stmt: &Stmt, depth: usize) {
        if depth > 0 {
            self.diags.push(
                Diag::error("nested-communicator", "communicators are declared at the top level")
                    .at(stmt.pos, "inside a loop or `if`")
                    .with_note("hint: creating a communicator in a loop creates a new one on every iteration; declare it once before the loop"),
            );
        }
        let parent = self.comm(Some(d.def.parent()));
        let shape = match (&d.def, parent.as_deref()) {
            (_, None) => Shape::Unstructured,
            (CommDef::Split { color, key, .. }, Some(_)) => {
                self.expr(color, Ty::Int, "a color");
                if let Some(key) = key {
                    self.expr(key, Ty::Int, "a key");
                }
                Shape::Unstructured
            }
            (CommDef::Dup { .. }, Some(shape)) => shape.clone(),
            (CommDef::CartSub { keep, parent }, Some(shape)) => match shape {
                Shape::Grid { dims, periodic } => {
                    let mut kept = BTreeSet::new();
                    for k in keep {
                        if k.value as usize >= dims.len() {
                            self.diags.push(
                                Diag::error(
                                    "bad-cart-sub",
                                    format!("dimension {} does not exist", k.value),
                                )
                                .at(k.pos, "kept dimension")
                                .with_note(format!(
                                    "`{parent}` has {} dimension(s), numbered from 0",
                                    dims.len()
                                )),
                            );
                        } else if !kept.insert(k.value as usize) {
                            self.diags.push(
                                Diag::error(
                                    "bad-cart-sub",
                                    format!("dimension {} is kept twice", k.value),
                                )
                                .at(k.pos, "again"),
                            );
                        }
                    }
                    Shape::Grid {
                        dims: kept.iter().map(|&k| dims[k]).collect(),
                        periodic: kept
                            .iter()
                            .map(|&k| periodic.get(k).copied().unwrap_or(false))
                            .collect(),
                    }
                }
                _ => {
                    self.diags.push(
                        Diag::error(
                            "bad-cart-sub",
                            format!("`{parent}` is not a cartesian grid"),
                        )
                        .at(parent.pos, "not a grid")
                        .with_note("`cart_sub` keeps dimensions of a grid or torus topology"),
                    );
                    Shape::Unstructured
                }
            },
        };
        if d.name.name == "world" {
            self.diags.push(
                Diag::error(
                    "duplicate-communicator",
                    "`world` is the communicator of all ranks",
                )
                .at(d.name.pos, "cannot be redeclared"),
            );
            return;
        }
        if let Some(previous) = self.comms.get(&d.name.name) {
            self.diags.push(
                Diag::error(
                    "duplicate-communicator",
                    format!("communicator `{}` is declared twice", d.name),
                )
                .at(d.name.pos, "declared again")
                .with_secondary(previous.pos, "first declared here"),
            );
            return;
        }
        let order = self.comms.len();
        self.comms.insert(
            d.name.name.clone(),
            CommEntry {
                order,
                shape: Rc::new(shape),
                pos: d.name.pos,
                used: false,
            },
        );
    }

    /// Type-checks `e`; returns whether it is well-typed.
    fn expr(&mut self, e: &Expr, expected: Ty, what: &str) -> bool {
        match self.type_of(e) {
            Ok(ty) if ty == expected => true,
            Ok(_) => {
                let (want, found) = match expected {
                    Ty::Int => ("a number", "a condition"),
                    Ty::Bool => ("a condition (a comparison, `true` or `false`)", "a number"),
                };
                self.diags.push(
                    Diag::error("type", format!("{what} needs {want}, but this is {found}"))
                        .at(e.pos, format!("`{}`", printer::expr(e))),
                );
                false
            }
            Err(diag) => {
                self.diags.push(*diag);
                false
            }
        }
    }

    fn type_of(&self, e: &Expr) -> Result<Ty, Box<Diag>> {
        let mismatch = |pos: Pos, want: &str| {
            Box::new(Diag::error("type", format!("expected {want}")).at(pos, "here"))
        };
        match &e.kind {
            ExprKind::Int(_) | ExprKind::Rank | ExprKind::NRanks => Ok(Ty::Int),
            ExprKind::PerRank(values) => {
                if values.len() as u64 == self.n_ranks {
                    Ok(Ty::Int)
                } else {
                    Err(Box::new(
                        Diag::error(
                            "bad-per-rank",
                            format!(
                                "`per_rank` lists {} values but the skeleton has {} ranks",
                                values.len(),
                                self.n_ranks
                            ),
                        )
                        .at(e.pos, "one value per rank")
                        .with_secondary(self.program.ranks.pos, "rank count declared here"),
                    ))
                }
            }
            ExprKind::Bool(_) => Ok(Ty::Bool),
            ExprKind::Pick(_, index) => match self.type_of(index)? {
                Ty::Int => Ok(Ty::Int),
                Ty::Bool => Err(mismatch(index.pos, "a number as the index of a pick")),
            },
            ExprKind::Var(v) => {
                if self.scope.iter().any(|s| s.name == v.name) {
                    Ok(Ty::Int)
                } else {
                    Err(Box::new(self.undefined_variable(v)))
                }
            }
            ExprKind::Coord(dim) => {
                if (*dim as usize) < self.world_dims {
                    Ok(Ty::Int)
                } else {
                    let topo = printer::topology(&self.program.topology.value);
                    Err(Box::new(
                        Diag::error("bad-coord", format!("`coord({dim})` does not exist"))
                            .at(e.pos, "no such coordinate")
                            .with_secondary(self.program.topology.pos, format!("the topology is `{topo}`"))
                            .with_note(match self.world_dims {
                                0 => "coordinates exist for grids, tori, rings, chains and hypercubes".to_string(),
                                1 => "the only coordinate is `coord(0)`".to_string(),
                                n => format!("coordinates are `coord(0)` to `coord({})`", n - 1),
                            }),
                    ))
                }
            }
            ExprKind::Unary(UnaryOp::Neg, x) => match self.type_of(x)? {
                Ty::Int => Ok(Ty::Int),
                Ty::Bool => Err(mismatch(x.pos, "a number after `-`")),
            },
            ExprKind::Unary(UnaryOp::Not, x) => match self.type_of(x)? {
                Ty::Bool => Ok(Ty::Bool),
                Ty::Int => Err(mismatch(x.pos, "a condition after `not`")),
            },
            ExprKind::Binary(op, l, r) => {
                let (lt, rt) = (self.type_of(l)?, self.type_of(r)?);
                match op {
                    BinOp::Or | BinOp::And => {
                        for (t, side) in [(lt, l), (rt, r)] {
                            if t != Ty::Bool {
                                return Err(mismatch(
                                    side.pos,
                                    &format!("a condition on each side of `{}`", op.symbol()),
                                ));
                            }
                        }
                        Ok(Ty::Bool)
                    }
                    BinOp::Eq | BinOp::Ne => {
                        if lt != rt {
                            return Err(mismatch(e.pos, "two numbers or two conditions"));
                        }
                        Ok(Ty::Bool)
                    }
                    _ => {
                        for (t, side) in [(lt, l), (rt, r)] {
                            if t != Ty::Int {
                                return Err(mismatch(
                                    side.pos,
                                    &format!("a number on each side of `{}`", op.symbol()),
                                ));
                            }
                        }
                        Ok(if op.is_comparison() {
                            Ty::Bool
                        } else {
                            Ty::Int
                        })
                    }
                }
            }
        }
    }
}

impl Pass<'_> {
    /// A name in an expression that no enclosing loop binds.
    fn undefined_variable(&self, v: &Ident) -> Diag {
        let mut diag = Diag::error(
            "undefined-variable",
            format!("`{}` is not the variable of an enclosing loop", v.name),
        )
        .at(v.pos, "unknown name");
        let mut names: Vec<&str> = self.scope.iter().map(|s| s.name.as_str()).collect();
        names.extend(["rank", "nranks"]);
        if let Some(best) = closest(&v.name, &names) {
            diag = diag.with_note(format!("hint: did you mean `{best}`?"));
        } else if let Some(earlier) = self.loop_vars.iter().find(|l| l.name == v.name) {
            diag = diag
                .with_secondary(earlier.pos, "the variable of this loop")
                .with_note("a loop variable is in scope only in its loop's body");
        } else if self.scope.is_empty() {
            diag = diag.with_note(format!(
                "hint: `loop COUNT as {} {{ ... }}` names the iteration number (0, 1, ...) in the loop's body",
                v.name
            ));
        } else {
            let list: Vec<String> = self.scope.iter().map(|s| format!("`{}`", s.name)).collect();
            diag = diag.with_note(format!("loop variables here: {}", list.join(", ")));
        }
        diag
    }
}

fn direction_args(dir: &Direction) -> Vec<&Expr> {
    match dir {
        Direction::Child(e)
        | Direction::Leaf(e)
        | Direction::Bit(e)
        | Direction::Neighbor(e)
        | Direction::AxisOf { dim: e, .. } => {
            vec![e]
        }
        Direction::Shift { dim, disp } => vec![dim, disp],
        _ => Vec::new(),
    }
}

/// A direction of `shape` that plays the role `dir` plays elsewhere.
fn suggest_direction(dir: &Direction, shape: &Shape) -> Option<&'static str> {
    let forward = match dir {
        Direction::Axis(AxisDir { forward, .. }) | Direction::AxisOf { forward, .. } => *forward,
        Direction::Next | Direction::Child(_) | Direction::Leaf(_) | Direction::Shift { .. } => {
            true
        }
        _ => false,
    };
    match shape {
        Shape::Grid { dims, .. } if dims.len() == 1 => Some(if forward { "next" } else { "prev" }),
        Shape::Grid { .. } => Some(if forward { "east" } else { "west" }),
        Shape::Tree { .. } => Some(if forward { "child(0)" } else { "parent" }),
        Shape::Star => Some(if forward { "leaf(0)" } else { "hub" }),
        Shape::Hypercube { .. } => Some("bit(0)"),
        Shape::Graph { .. } => Some("neighbor(0)"),
        Shape::Complete | Shape::Unstructured => None,
    }
}

/// The name closest to `word` by edit distance, if close enough to be a typo.
pub(super) fn closest<'n>(word: &str, names: &[&'n str]) -> Option<&'n str> {
    names
        .iter()
        .map(|&n| (strsim::levenshtein(word, n), n))
        .filter(|&(d, n)| d > 0 && d <= 2 && d < n.len())
        .min()
        .map(|(_, n)| n)
}

/// The largest message the generated programs send in one call: MPI counts are `int`.
pub const MAX_MESSAGE_BYTES: u64 = i32::MAX as u64;

/// The longest application time a skeleton may stand for (about 32 years).
pub const MAX_APP_TIME_S: f64 = 1e9;

/// The most polls after one compute span: 10^12 polls at their cheapest, 50 ns, are a
/// day and a half.
pub const MAX_POLLS: u64 = 1_000_000_000_000;

/// The largest working set one rank may have (1 TiB): the skeleton allocates it.
pub const MAX_WORKING_SET_BYTES: u64 = 1 << 40;

fn too_large_working_set(ws: &Spanned<Size>) -> Option<Diag> {
    let bytes = ws.value.value * ws.value.unit.bytes() as f64;
    (bytes > MAX_WORKING_SET_BYTES as f64).then(|| {
        Diag::error(
            "bad-size",
            format!(
                "a working set of {} B is more than a rank's memory (at most 1 TiB): the skeleton allocates it",
                format_bytes(bytes)
            ),
        )
        .at(ws.pos, "too large")
    })
}

/// A byte count as an integer where it is one, else in scientific notation.
fn format_bytes(bytes: f64) -> String {
    if bytes < 1e18 && bytes.fract() == 0.0 {
        format!("{}", bytes as u64)
    } else {
        format!("{bytes:e}")
    }
}
