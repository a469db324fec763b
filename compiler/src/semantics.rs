//! What the IR means for one rank: evaluation of [`Expr`]essions and the neighbours a
//! topology [`Direction`] names. Used by the checker and by back ends, so that both agree
//! on every peer.

use perfskel_grammar::ast::{
    BinOp, Block, CommDef, Direction, Else, Expr, ExprKind, MsgSize, Peer, Pos, Stmt, StmtKind,
    TimeSpec, Topology, UnaryOp,
};

/// The most ranks the simulations keep state for (the checker's deadlock simulation,
/// which skips larger programs, and the scaler's timed simulation, which refuses them).
pub const MAX_SIMULATED_RANKS: u64 = 1 << 16;

/// A rank-level view of a topology: the topology of the world communicator, or of a
/// sub-communicator (a cartesian sub-grid, or none for a `split`).
#[derive(Clone, Debug, PartialEq)]
pub enum Shape {
    /// Ranks in a row-major grid, as MPI_Cart_create numbers them.
    Grid {
        dims: Vec<u64>,
        periodic: Vec<bool>,
    },
    Hypercube {
        bits: u32,
    },
    Tree {
        arity: u64,
    },
    Star,
    Complete,
    Graph {
        neighbors: Vec<Vec<u64>>,
    },
    /// A communicator from `split`: ranks can only be addressed explicitly.
    Unstructured,
}

/// Why a direction cannot be used.
#[derive(Clone, Debug, PartialEq)]
pub enum PeerError {
    /// The direction does not exist in this kind of topology.
    NotInTopology,
    /// An index argument (`child(i)`, `bit(i)`, ...) or an offset length is out of range;
    /// the string says how.
    BadArgument(String),
    Eval(EvalError),
}

impl Shape {
    /// The shape of the world communicator for `topology` over `n_ranks` ranks.
    pub fn of_topology(topology: &Topology, n_ranks: u64) -> Shape {
        match topology {
            Topology::Ring => Shape::Grid {
                dims: vec![n_ranks],
                periodic: vec![true],
            },
            Topology::Chain => Shape::Grid {
                dims: vec![n_ranks],
                periodic: vec![false],
            },
            Topology::Grid { dims, periodic } => Shape::Grid {
                dims: dims.clone(),
                periodic: periodic.clone(),
            },
            Topology::Hypercube => Shape::Hypercube {
                bits: n_ranks.max(1).ilog2(),
            },
            Topology::Tree { arity } => Shape::Tree { arity: *arity },
            Topology::Star => Shape::Star,
            Topology::Complete => Shape::Complete,
            Topology::Graph { neighbors } => {
                // One list per rank up to the last rank listed (a rank past it has no
                // neighbours): the declared rank count comes from the input and may be
                // far larger than memory.
                let rows = neighbors
                    .iter()
                    .map(|(rank, _)| rank.saturating_add(1))
                    .max()
                    .unwrap_or(0)
                    .min(n_ranks);
                let mut lists = vec![Vec::new(); usize::try_from(rows).unwrap_or(0)];
                for (rank, list) in neighbors {
                    if let Some(slot) = lists.get_mut(*rank as usize) {
                        slot.extend(list.iter().copied());
                    }
                }
                Shape::Graph { neighbors: lists }
            }
        }
    }

    /// The coordinates of `rank` (grids: row-major; hypercube: its bits).
    pub fn coords(&self, rank: u64) -> Vec<u64> {
        match self {
            Shape::Grid { dims, .. } => {
                let mut coords = vec![0; dims.len()];
                let mut rest = rank;
                for (slot, &dim) in coords.iter_mut().zip(dims).rev() {
                    let dim = dim.max(1);
                    *slot = rest % dim;
                    rest /= dim;
                }
                coords
            }
            Shape::Hypercube { bits } => (0..*bits).map(|b| (rank >> b) & 1).collect(),
            _ => Vec::new(),
        }
    }

    /// The peer `dir` names from `rank` in a communicator of `size` ranks: `Some(peer)`,
    /// or `None` when there is no such neighbour (a grid border, a leaf's child, the
    /// root's parent), which makes the operation a no-op like MPI_PROC_NULL.
    pub fn peer(
        &self,
        rank: u64,
        size: u64,
        dir: &Direction,
        env: &Env,
    ) -> Result<Option<u64>, PeerError> {
        self.peer_in(rank, size, dir, env, &[])
    }

    /// [`Shape::peer`] inside loops: index arguments may read the loop variables `vars`.
    pub fn peer_in(
        &self,
        rank: u64,
        size: u64,
        dir: &Direction,
        env: &Env,
        vars: Vars,
    ) -> Result<Option<u64>, PeerError> {
        let index = |e: &Expr| -> Result<u64, PeerError> {
            let v = eval_int_in(e, env, vars).map_err(PeerError::Eval)?;
            u64::try_from(v).map_err(|_| PeerError::BadArgument(format!("index {v} is negative")))
        };
        match (self, dir) {
            (Shape::Grid { dims, periodic }, Direction::Axis(axis)) => {
                let dim = axis.dim as usize;
                if dim >= dims.len() {
                    return Err(PeerError::BadArgument(format!(
                        "the grid has {} dimension{}; this direction moves along dimension {dim}",
                        dims.len(),
                        if dims.len() == 1 { "" } else { "s" }
                    )));
                }
                let step = if axis.forward { 1 } else { -1 };
                Ok(grid_shift(dims, periodic, rank, |i| {
                    if i == dim {
                        step
                    } else {
                        0
                    }
                }))
            }
            (
                Shape::Grid { dims, periodic },
                Direction::AxisOf { dim, .. } | Direction::Shift { dim, .. },
            ) => {
                let d = index(dim)?;
                if d >= dims.len() as u64 {
                    return Err(PeerError::BadArgument(format!(
                        "dimension {d} is out of range: the grid has {} dimension{}",
                        dims.len(),
                        if dims.len() == 1 { "" } else { "s" }
                    )));
                }
                let step = match dir {
                    Direction::Shift { disp, .. } => {
                        eval_int_in(disp, env, vars).map_err(PeerError::Eval)?
                    }
                    Direction::AxisOf { forward: false, .. } => -1,
                    _ => 1,
                };
                Ok(grid_shift(dims, periodic, rank, |i| {
                    if i as u64 == d {
                        step
                    } else {
                        0
                    }
                }))
            }
            (Shape::Grid { dims, periodic }, Direction::Offset(offsets)) => {
                if offsets.len() != dims.len() {
                    return Err(PeerError::BadArgument(format!(
                        "the offset has {} component{}, the grid {} dimension{}",
                        offsets.len(),
                        if offsets.len() == 1 { "" } else { "s" },
                        dims.len(),
                        if dims.len() == 1 { "" } else { "s" }
                    )));
                }
                Ok(grid_shift(dims, periodic, rank, |i| offsets[i]))
            }
            (Shape::Grid { dims, periodic }, Direction::Next | Direction::Prev)
                if dims.len() == 1 =>
            {
                let step = if matches!(dir, Direction::Next) {
                    1
                } else {
                    -1
                };
                Ok(grid_shift(dims, periodic, rank, |_| step))
            }
            (Shape::Hypercube { bits }, Direction::Bit(e)) => {
                let bit = index(e)?;
                if bit >= u64::from(*bits) {
                    return Err(PeerError::BadArgument(format!(
                        "bit {bit} is out of range: the hypercube has {bits} dimensions"
                    )));
                }
                Ok(Some(rank ^ (1 << bit)))
            }
            (Shape::Tree { .. }, Direction::Parent) => {
                Ok((rank > 0).then(|| (rank - 1) / self.arity()))
            }
            (Shape::Tree { arity }, Direction::Child(e)) => {
                let i = index(e)?;
                if i >= *arity {
                    return Err(PeerError::BadArgument(format!(
                        "child({i}) is out of range: tree({arity}) has children 0 to {}",
                        arity - 1
                    )));
                }
                let child = rank
                    .checked_mul(*arity)
                    .and_then(|r| r.checked_add(i + 1))
                    .filter(|&c| c < size);
                Ok(child)
            }
            (Shape::Star, Direction::Hub) => Ok((rank != 0).then_some(0)),
            (Shape::Star, Direction::Leaf(e)) => {
                let i = index(e)?;
                if i + 1 >= size {
                    return Err(PeerError::BadArgument(format!(
                        "leaf({i}) is out of range: the star has {} leaves",
                        size.saturating_sub(1)
                    )));
                }
                Ok(Some(i + 1))
            }
            (Shape::Graph { neighbors }, Direction::Neighbor(e)) => {
                let i = index(e)?;
                let list = neighbors.get(rank as usize).map_or(&[][..], Vec::as_slice);
                Ok(list.get(i as usize).copied())
            }
            _ => Err(PeerError::NotInTopology),
        }
    }

    fn arity(&self) -> u64 {
        match self {
            Shape::Tree { arity } => (*arity).max(1),
            _ => 1,
        }
    }

    /// The directions this shape offers, in the spelling of a hint.
    pub fn directions_hint(&self) -> String {
        match self {
            Shape::Grid { dims, .. } if dims.len() == 1 => "`next`, `prev` (or `+x`, `-x`)".into(),
            Shape::Grid { dims, .. } if dims.len() == 2 => {
                "`east`, `west`, `north`, `south`, `+x`, `-y`, ... or `offset(dx, dy)`".into()
            }
            Shape::Grid { .. } => {
                "`+x`, `-x`, `+y`, `-y`, `+z`, `-z`, `+dN`, `-dN` or `offset(...)`".into()
            }
            Shape::Hypercube { .. } => "`bit(i)`".into(),
            Shape::Tree { .. } => "`parent` and `child(i)`".into(),
            Shape::Star => "`hub` and `leaf(i)`".into(),
            Shape::Complete => "none: address peers with `rank(EXPR)`".into(),
            Shape::Graph { .. } => "`neighbor(i)`".into(),
            Shape::Unstructured => "none: address peers with `rank(EXPR)`".into(),
        }
    }
}

/// The rank reached from `rank` by moving `offset(dim)` along every dimension, or
/// `None` off the edge of a non-periodic dimension. Works on the row-major numbering
/// directly: this runs for every simulated message, so it allocates nothing.
fn grid_shift(
    dims: &[u64],
    periodic: &[bool],
    rank: u64,
    offset: impl Fn(usize) -> i64,
) -> Option<u64> {
    let mut rest = rank;
    let mut stride: u64 = 1;
    let mut result: u64 = 0;
    for i in (0..dims.len()).rev() {
        let dim = dims[i].max(1);
        let coord = rest % dim;
        rest /= dim;
        let step = offset(i);
        let new_coord = if step == 0 {
            coord
        } else {
            let dim_signed = i64::try_from(dim).ok()?;
            let moved = i64::try_from(coord).ok()?.checked_add(step)?;
            if periodic.get(i).copied().unwrap_or(false) {
                moved.rem_euclid(dim_signed) as u64
            } else if (0..dim_signed).contains(&moved) {
                moved as u64
            } else {
                return None;
            }
        };
        result = result.checked_add(new_coord.checked_mul(stride)?)?;
        stride = stride.checked_mul(dim)?;
    }
    Some(result)
}

/// The values of the loop variables in scope where an expression is evaluated: (name,
/// iteration number), innermost loop last. Names are unique in a scope (the checker
/// refuses shadowing), so the order only matters to programs that did not check.
pub type Vars<'a> = &'a [(&'a str, i64)];

/// What an expression can refer to on one rank (loop variables aside: see [`Vars`]).
#[derive(Clone, Debug)]
pub struct Env {
    pub rank: u64,
    pub n_ranks: u64,
    /// The rank's coordinates in the world topology (empty when it has none).
    pub coords: Vec<u64>,
}

impl Env {
    /// The environment of every rank of `n`, the world shaped `world`.
    pub fn all(n: u64, world: &Shape) -> Vec<Env> {
        (0..n)
            .map(|rank| Env {
                rank,
                n_ranks: n,
                coords: world.coords(rank),
            })
            .collect()
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum EvalError {
    /// `coord(i)` with i beyond the topology's dimensions.
    NoCoord {
        dim: u32,
        dims: usize,
        pos: Pos,
    },
    DivByZero {
        pos: Pos,
    },
    Overflow {
        pos: Pos,
    },
    /// A loop variable where no loop gives it a value.
    Unbound {
        name: String,
        pos: Pos,
    },
    /// An integer where a boolean is needed or the reverse.
    Type {
        expected: &'static str,
        pos: Pos,
    },
    /// `per_rank(...)` with no entry for this rank.
    NoEntry {
        rank: u64,
        len: usize,
        pos: Pos,
    },
    /// A pick `[...][index]` whose index is outside its list.
    PickRange {
        index: i64,
        len: usize,
        pos: Pos,
    },
}

impl EvalError {
    pub fn pos(&self) -> Pos {
        match self {
            EvalError::NoCoord { pos, .. }
            | EvalError::DivByZero { pos }
            | EvalError::Overflow { pos }
            | EvalError::Unbound { pos, .. }
            | EvalError::Type { pos, .. }
            | EvalError::NoEntry { pos, .. }
            | EvalError::PickRange { pos, .. } => *pos,
        }
    }

    pub fn message(&self) -> String {
        match self {
            EvalError::NoCoord { dim, dims: 0, .. } => {
                format!("`coord({dim})` needs a grid or hypercube topology")
            }
            EvalError::NoCoord { dim, dims, .. } => {
                format!("`coord({dim})` is out of range: the topology has {dims} dimension(s)")
            }
            EvalError::DivByZero { .. } => "division by zero".into(),
            EvalError::Overflow { .. } => "arithmetic overflow".into(),
            EvalError::Type { expected, .. } => format!("expected {expected} here"),
            EvalError::Unbound { name, .. } => {
                format!("`{name}` is not the variable of an enclosing loop")
            }
            EvalError::NoEntry { rank, len, .. } => {
                format!("`per_rank` lists {len} value(s): none for rank {rank}")
            }
            EvalError::PickRange { index, len, .. } => {
                format!("index {index} is out of range: the list has {len} value(s)")
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Value {
    Int(i64),
    Bool(bool),
}

/// The value of an integer expression outside every loop (a loop variable is
/// [`EvalError::Unbound`]).
pub fn eval_int(e: &Expr, env: &Env) -> Result<i64, EvalError> {
    eval_int_in(e, env, &[])
}

/// The value of a condition outside every loop.
pub fn eval_bool(e: &Expr, env: &Env) -> Result<bool, EvalError> {
    eval_bool_in(e, env, &[])
}

/// The value of an integer expression where the loop variables `vars` are in scope.
pub fn eval_int_in(e: &Expr, env: &Env, vars: Vars) -> Result<i64, EvalError> {
    match eval(e, env, vars)? {
        Value::Int(v) => Ok(v),
        Value::Bool(_) => Err(EvalError::Type {
            expected: "a number",
            pos: e.pos,
        }),
    }
}

/// The value of a condition where the loop variables `vars` are in scope.
pub fn eval_bool_in(e: &Expr, env: &Env, vars: Vars) -> Result<bool, EvalError> {
    match eval(e, env, vars)? {
        Value::Bool(v) => Ok(v),
        Value::Int(_) => Err(EvalError::Type {
            expected: "a condition (a comparison, `true` or `false`)",
            pos: e.pos,
        }),
    }
}

fn eval(e: &Expr, env: &Env, vars: Vars) -> Result<Value, EvalError> {
    let overflow = || EvalError::Overflow { pos: e.pos };
    Ok(match &e.kind {
        ExprKind::Int(v) => Value::Int(*v),
        ExprKind::Bool(b) => Value::Bool(*b),
        ExprKind::Rank => Value::Int(i64::try_from(env.rank).map_err(|_| overflow())?),
        ExprKind::NRanks => Value::Int(i64::try_from(env.n_ranks).map_err(|_| overflow())?),
        ExprKind::Coord(dim) => match env.coords.get(*dim as usize) {
            Some(&c) => Value::Int(i64::try_from(c).map_err(|_| overflow())?),
            None => {
                return Err(EvalError::NoCoord {
                    dim: *dim,
                    dims: env.coords.len(),
                    pos: e.pos,
                })
            }
        },
        ExprKind::PerRank(values) => {
            match usize::try_from(env.rank).ok().and_then(|r| values.get(r)) {
                Some(&v) => Value::Int(v),
                None => {
                    return Err(EvalError::NoEntry {
                        rank: env.rank,
                        len: values.len(),
                        pos: e.pos,
                    })
                }
            }
        }
        ExprKind::Pick(values, index) => {
            Value::Int(values[pick_index(index, values.len(), env, vars)?])
        }
        ExprKind::Var(v) => match vars.iter().rev().find(|(name, _)| *name == v.name) {
            Some(&(_, value)) => Value::Int(value),
            None => {
                return Err(EvalError::Unbound {
                    name: v.name.clone(),
                    pos: e.pos,
                })
            }
        },
        ExprKind::Unary(UnaryOp::Neg, x) => Value::Int(
            eval_int_in(x, env, vars)?
                .checked_neg()
                .ok_or_else(overflow)?,
        ),
        ExprKind::Unary(UnaryOp::Not, x) => Value::Bool(!eval_bool_in(x, env, vars)?),
        ExprKind::Binary(op, l, r) => match op {
            BinOp::Or => Value::Bool(eval_bool_in(l, env, vars)? || eval_bool_in(r, env, vars)?),
            BinOp::And => Value::Bool(eval_bool_in(l, env, vars)? && eval_bool_in(r, env, vars)?),
            BinOp::Eq | BinOp::Ne => {
                let (a, b) = (eval(l, env, vars)?, eval(r, env, vars)?);
                if std::mem::discriminant(&a) != std::mem::discriminant(&b) {
                    return Err(EvalError::Type {
                        expected: "operands of the same kind",
                        pos: e.pos,
                    });
                }
                Value::Bool((a == b) == (*op == BinOp::Eq))
            }
            _ => {
                let (a, b) = (eval_int_in(l, env, vars)?, eval_int_in(r, env, vars)?);
                let div_zero = || EvalError::DivByZero { pos: r.pos };
                match op {
                    BinOp::Lt => Value::Bool(a < b),
                    BinOp::Le => Value::Bool(a <= b),
                    BinOp::Gt => Value::Bool(a > b),
                    BinOp::Ge => Value::Bool(a >= b),
                    BinOp::Add => Value::Int(a.checked_add(b).ok_or_else(overflow)?),
                    BinOp::Sub => Value::Int(a.checked_sub(b).ok_or_else(overflow)?),
                    BinOp::Mul => Value::Int(a.checked_mul(b).ok_or_else(overflow)?),
                    BinOp::Div if b == 0 => return Err(div_zero()),
                    BinOp::Rem if b == 0 => return Err(div_zero()),
                    BinOp::Div => Value::Int(a.checked_div_euclid(b).ok_or_else(overflow)?),
                    BinOp::Xor => Value::Int(a ^ b),
                    _ => Value::Int(a.checked_rem_euclid(b).ok_or_else(overflow)?),
                }
            }
        },
    })
}

/// The split colour of a rank in `cart_sub` of a grid: ranks sharing every dropped
/// coordinate (those not in `keep`) form one sub-grid, so the dropped coordinates,
/// packed 20 bits each, are the colour. The checker's simulation and the scaler's timed
/// simulation both use it, so they build the same sub-grids.
pub fn cart_sub_color(coords: &[u64], keep: &[u32]) -> i64 {
    coords
        .iter()
        .enumerate()
        .filter(|(i, _)| !keep.iter().any(|&k| k as usize == *i))
        .fold(0i64, |acc, (_, &c)| {
            acc.saturating_mul(1 << 20).saturating_add(c as i64)
        })
}

/// Whether the value of `e` can differ between ranks.
pub fn depends_on_rank(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Rank | ExprKind::Coord(_) | ExprKind::PerRank(_) => true,
        ExprKind::Int(_) | ExprKind::Bool(_) | ExprKind::NRanks | ExprKind::Var(_) => false,
        ExprKind::Unary(_, x) | ExprKind::Pick(_, x) => depends_on_rank(x),
        ExprKind::Binary(_, l, r) => depends_on_rank(l) || depends_on_rank(r),
    }
}

/// Whether `e` reads a loop variable (any, or the one named `name`): its value can then
/// differ between iterations, and it cannot be evaluated once per rank.
pub fn reads_vars(e: &Expr, name: Option<&str>) -> bool {
    match &e.kind {
        ExprKind::Var(v) => name.is_none_or(|n| n == v.name),
        ExprKind::Int(_)
        | ExprKind::Bool(_)
        | ExprKind::Rank
        | ExprKind::NRanks
        | ExprKind::Coord(_)
        | ExprKind::PerRank(_) => false,
        ExprKind::Unary(_, x) | ExprKind::Pick(_, x) => reads_vars(x, name),
        ExprKind::Binary(_, l, r) => reads_vars(l, name) || reads_vars(r, name),
    }
}

/// The expressions a statement holds itself (not those of the blocks it contains): a
/// loop's count, every condition of an `if` chain, peers' ranks and direction indices,
/// a root, a split's color and key.
pub fn stmt_exprs(stmt: &Stmt) -> Vec<&Expr> {
    fn peer_exprs<'e>(peer: &'e Peer, out: &mut Vec<&'e Expr>) {
        match peer {
            Peer::Rank(e)
            | Peer::Dir(
                Direction::Child(e)
                | Direction::Leaf(e)
                | Direction::Bit(e)
                | Direction::Neighbor(e)
                | Direction::AxisOf { dim: e, .. },
            ) => out.push(e),
            Peer::Dir(Direction::Shift { dim, disp }) => out.extend([dim, disp]),
            _ => {}
        }
    }
    let mut out = Vec::new();
    match &stmt.kind {
        StmtKind::Loop(l) => out.push(&l.count),
        StmtKind::If(i) => {
            let mut current = Some(&**i);
            while let Some(arm) = current {
                out.push(&arm.cond);
                current = match &arm.else_branch {
                    Some(Else::If(next)) => Some(next),
                    _ => None,
                };
            }
        }
        StmtKind::While(w) => {
            peer_exprs(&w.recv.peer.value, &mut out);
            out.extend(w.recv.size.index());
        }
        StmtKind::P2p(p) => {
            peer_exprs(&p.peer.value, &mut out);
            out.extend(p.size.index());
            if let Some((peer, size)) = p.recv.as_deref() {
                peer_exprs(&peer.value, &mut out);
                out.extend(size.index());
            }
        }
        StmtKind::Compute(c) => {
            if let TimeSpec::Pick(p) = &c.time {
                out.push(&p.index);
            }
        }
        StmtKind::Collective(c) => out.extend(c.root.as_ref()),
        StmtKind::CommDecl(d) => {
            if let CommDef::Split { color, key, .. } = &d.def {
                out.push(color);
                out.extend(key.as_ref());
            }
        }
        StmtKind::Wait(_) => {}
    }
    out
}

/// The value a pick's index selects, with the loop variables `vars` in scope: an
/// error when the index is out of range or cannot be evaluated.
pub fn pick_index(index: &Expr, len: usize, env: &Env, vars: Vars) -> Result<usize, EvalError> {
    let v = eval_int_in(index, env, vars)?;
    usize::try_from(v)
        .ok()
        .filter(|&i| i < len)
        .ok_or(EvalError::PickRange {
            index: v,
            len,
            pos: index.pos,
        })
}

/// The size of a message for one rank and iteration.
pub fn msg_bytes(size: &MsgSize, env: &Env, vars: Vars) -> Result<u64, EvalError> {
    let v = match size {
        MsgSize::Fixed(s) => s.value,
        MsgSize::Pick(p) => p.values[pick_index(&p.index, p.values.len(), env, vars)?].value,
    };
    Ok(v.bytes().unwrap_or(0))
}

/// The mean time of one execution of `spec` on the rank of `env`, in seconds (the mean
/// of the random forms), with the loop variables `vars` (a pick's index reads them).
/// The checker's and the timed simulations share it.
/// The time the polls of a compute took where the skeleton was made (`polls N each D`:
/// N x D; none without a cost).
pub fn poll_seconds(c: &perfskel_grammar::ast::Compute) -> f64 {
    match (&c.polls, &c.poll_cost) {
        (Some(n), Some(d)) => n.value as f64 * d.value.seconds(),
        _ => 0.0,
    }
}

pub fn compute_seconds(spec: &TimeSpec, env: &Env, vars: Vars) -> Result<f64, EvalError> {
    Ok(match time_at(spec, env, vars)? {
        TimeSpec::PerRank(values) => values
            .get(env.rank as usize)
            .map_or(0.0, |d| d.value.seconds()),
        other => other.mean_seconds(),
    })
}

/// The time spec in effect for one iteration: a pick resolved to its option.
pub fn time_at<'t>(time: &'t TimeSpec, env: &Env, vars: Vars) -> Result<&'t TimeSpec, EvalError> {
    match time {
        TimeSpec::Pick(p) => Ok(&p.values[pick_index(&p.index, p.values.len(), env, vars)?]),
        other => Ok(other),
    }
}

/// The blocks a statement contains: a loop's body, the blocks of an `if` chain.
pub fn stmt_blocks(stmt: &Stmt) -> Vec<&Block> {
    let mut out = Vec::new();
    match &stmt.kind {
        StmtKind::Loop(l) => out.push(&l.body),
        StmtKind::While(w) => out.push(&w.body),
        StmtKind::If(i) => {
            let mut current = Some(&**i);
            while let Some(arm) = current {
                out.push(&arm.then_block);
                current = match &arm.else_branch {
                    Some(Else::If(next)) => Some(next),
                    Some(Else::Block(b)) => {
                        out.push(b);
                        None
                    }
                    None => None,
                };
            }
        }
        _ => {}
    }
    out
}

/// [`stmt_blocks`], mutable.
pub fn stmt_blocks_mut(stmt: &mut Stmt) -> Vec<&mut Block> {
    let mut out = Vec::new();
    match &mut stmt.kind {
        StmtKind::Loop(l) => out.push(&mut l.body),
        StmtKind::While(w) => out.push(&mut w.body),
        StmtKind::If(i) => {
            let mut current = Some(&mut **i);
            while let Some(arm) = current {
                out.push(&mut arm.then_block);
                current = match &mut arm.else_branch {
                    Some(Else::If(next)) => Some(&mut **next),
                    Some(Else::Block(b)) => {
                        out.push(b);
                        None
                    }
                    None => None,
                };
            }
        }
        _ => {}
    }
    out
}

/// The compute time of `count` iterations of a loop that holds only computation:
/// `once` times `count` when the body does not read the loop's variable, else the sum
/// of `once` over the iterations, each given its binding (name, iteration number) and
/// spending one unit of `work` (the sum stops when the budget is spent). The checker's
/// and the timed simulations share it.
pub fn sum_iterations<'p, E>(
    l: &'p perfskel_grammar::ast::Loop,
    count: i64,
    work: &mut u64,
    mut once: impl FnMut(Option<(&'p str, i64)>, &mut u64) -> Result<f64, E>,
) -> Result<f64, E> {
    match &l.var {
        Some(v) if block_reads_var(&l.body, &v.name) => {
            let mut total = 0.0;
            for i in 0..count {
                if *work == 0 {
                    break;
                }
                *work -= 1;
                total += once(Some((v.name.as_str(), i)), work)?;
            }
            Ok(total)
        }
        _ => Ok(count as f64 * once(None, work)?),
    }
}

/// Whether any expression in `block`, at any depth, reads the loop variable `name`.
pub fn block_reads_var(block: &Block, name: &str) -> bool {
    block.stmts.iter().any(|stmt| {
        stmt_exprs(stmt).iter().any(|e| reads_vars(e, Some(name)))
            || stmt_blocks(stmt).iter().any(|b| block_reads_var(b, name))
    })
}

/// Calls `f` on every statement of `block`, outer before inner, in program order (every
/// branch of an `if` chain, every loop body).
pub fn visit<'p>(block: &'p Block, f: &mut impl FnMut(&'p Stmt)) {
    for stmt in &block.stmts {
        f(stmt);
        match &stmt.kind {
            StmtKind::Loop(l) => visit(&l.body, f),
            StmtKind::While(w) => visit(&w.body, f),
            StmtKind::If(i) => {
                let mut branch = Some(i);
                while let Some(current) = branch {
                    visit(&current.then_block, f);
                    branch = match &current.else_branch {
                        Some(Else::If(next)) => Some(next),
                        Some(Else::Block(b)) => {
                            visit(b, f);
                            None
                        }
                        None => None,
                    };
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfskel_grammar::ast::{AxisDir, AxisSpelling};

    fn axis(dim: u32, forward: bool) -> Direction {
        Direction::Axis(AxisDir {
            dim,
            forward,
            spelling: AxisSpelling::Letter,
        })
    }

    fn env(rank: u64) -> Env {
        Env {
            rank,
            n_ranks: 16,
            coords: Vec::new(),
        }
    }

    #[test]
    fn grid_peers_follow_mpi_cart_shift() {
        // grid(4, 4): rank = 4 * c0 + c1, like MPI_Cart_create.
        let shape = Shape::Grid {
            dims: vec![4, 4],
            periodic: vec![false, true],
        };
        assert_eq!(shape.coords(6), vec![1, 2]);
        assert_eq!(shape.peer(6, 16, &axis(0, true), &env(6)), Ok(Some(10)));
        assert_eq!(shape.peer(12, 16, &axis(0, true), &env(12)), Ok(None));
        // Dimension 1 is periodic: the east edge wraps.
        assert_eq!(shape.peer(7, 16, &axis(1, true), &env(7)), Ok(Some(4)));
        assert_eq!(
            shape.peer(5, 16, &Direction::Offset(vec![-1, -1]), &env(5)),
            Ok(Some(0))
        );
        assert!(matches!(
            shape.peer(5, 16, &axis(2, true), &env(5)),
            Err(PeerError::BadArgument(_))
        ));
    }

    #[test]
    fn tree_star_and_hypercube_peers() {
        let tree = Shape::Tree { arity: 2 };
        assert_eq!(tree.peer(0, 7, &Direction::Parent, &env(0)), Ok(None));
        assert_eq!(tree.peer(5, 7, &Direction::Parent, &env(5)), Ok(Some(2)));
        let child1 = Direction::Child(Expr::int(1));
        assert_eq!(tree.peer(2, 7, &child1, &env(2)), Ok(Some(6)));
        assert_eq!(tree.peer(3, 7, &child1, &env(3)), Ok(None));
        let star = Shape::Star;
        assert_eq!(star.peer(3, 4, &Direction::Hub, &env(3)), Ok(Some(0)));
        assert_eq!(star.peer(0, 4, &Direction::Hub, &env(0)), Ok(None));
        let cube = Shape::Hypercube { bits: 3 };
        assert_eq!(
            cube.peer(5, 8, &Direction::Bit(Expr::int(1)), &env(5)),
            Ok(Some(7))
        );
        assert_eq!(
            cube.peer(5, 8, &Direction::Next, &env(5)),
            Err(PeerError::NotInTopology)
        );
    }

    #[test]
    fn expressions_use_euclidean_division_and_report_errors() {
        let (program, diags) = perfskel_grammar::parse(
            "skeleton t ranks 4 topology ring app_time 1 s\nloop (rank - 5) % 4 {}\nloop 1 / (rank - rank) {}",
        );
        assert!(diags.is_empty(), "{diags:?}");
        let count = |i: usize| match &program.body.stmts[i].kind {
            perfskel_grammar::ast::StmtKind::Loop(l) => l.count.clone(),
            _ => Expr::int(0),
        };
        let e = Env {
            rank: 1,
            n_ranks: 4,
            coords: vec![1],
        };
        assert_eq!(eval_int(&count(0), &e), Ok(0));
        assert!(matches!(
            eval_int(&count(1), &e),
            Err(EvalError::DivByZero { .. })
        ));
    }
}
