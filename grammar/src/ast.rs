//! The skeleton IR: the abstract syntax of the skeleton DSL, shared by every stage.
//!
//! A skeleton is a small SPMD program. All ranks run the same [`Program::body`]; what
//! differs between ranks is expressed through the declared [`Topology`] (a send to a
//! neighbour that does not exist, such as `east` on the east border of a non-periodic
//! grid, does nothing, like `MPI_PROC_NULL`) and through rank-conditional blocks
//! ([`If`]) whose conditions are [`Expr`]essions over `rank`, `nranks` and the rank's
//! topology coordinates.
//!
//! The header states what the skeleton stands for: its name, the number of ranks, the
//! logical topology and the measured application time (`app_time`). Later passes scale
//! the skeleton so that it runs a fixed fraction of that time.
//!
//! The body is a list of [`Stmt`]s:
//! - [`Compute`]: a span of local computation, fixed or varying per rank, optionally with
//!   a working-set size that the generated kernel touches;
//! - [`P2p`]: `send`, `recv`, `isend`, `irecv`, `sendrecv` to a [`Peer`], which is a
//!   topology [`Direction`], an explicit rank expression or `any` (receive only);
//! - [`Collective`]: barrier, broadcasts, reductions, gathers, scatters, all-to-all and
//!   scans, blocking or nonblocking;
//! - [`Wait`]: completion of request handles bound by nonblocking operations with
//!   `req NAME = ...`;
//! - [`CommDecl`]: communicator creation (split, dup, cartesian sub-grid), so a program
//!   can talk on row and column communicators;
//! - [`Loop`] and [`If`]: structure.
//!
//! Front ends build this IR: the text parser ([`crate::parse`]) and, in the compiler
//! crate, the trace compressor. Passes transform it and back ends read it. Every node
//! carries a [`Pos`]: where it came from in source text, or that it was derived (from a
//! trace or a transformation) and has no text of its own.
//!
//! Equality of IR nodes ignores positions (as `syn` does for spans): two programs are
//! equal when they say the same thing, wherever it was written. This is what makes
//! "parse ∘ print is the identity" a meaningful property.
//!
//! Comments and blank lines belong to the program too, because people edit skeletons by
//! hand and `perfskel fmt` must never drop what they wrote: each statement and header
//! line keeps its leading comments, its end-of-line comment and whether a blank line
//! preceded it ([`Trivia`]).

use std::fmt;

/// A byte range in one source file. Small and `Copy`, as diagnostics pass it around.
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq, Hash, PartialOrd, Ord)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start: saturate(start),
            end: saturate(end),
        }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }

    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
}

fn saturate(offset: usize) -> u32 {
    u32::try_from(offset).unwrap_or(u32::MAX)
}

/// Where an IR node came from.
#[derive(Clone, Copy, Debug, Default)]
pub enum Pos {
    /// Written in the source text at this span.
    Source(Span),
    /// Produced by a front end without source text (a trace) or by a transformation.
    #[default]
    Derived,
}

impl Pos {
    pub fn span(self) -> Option<Span> {
        match self {
            Pos::Source(span) => Some(span),
            Pos::Derived => None,
        }
    }
}

/// Positions never take part in equality; see the module documentation.
impl PartialEq for Pos {
    fn eq(&self, _other: &Pos) -> bool {
        true
    }
}

/// Comments and blank lines attached to a statement or header line.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trivia {
    /// The lines before the node: comments as written (starting with `#`, trailing
    /// white space removed) and blank lines as empty strings (never two in a row).
    pub leading: Vec<String>,
    /// A comment at the end of the node's last line, starting with `#`.
    pub trailing: Option<String>,
}

/// A name (skeleton, communicator, request handle) with its position.
#[derive(Clone, Debug, PartialEq)]
pub struct Ident {
    pub name: String,
    pub pos: Pos,
}

impl Ident {
    pub fn new(name: impl Into<String>) -> Ident {
        Ident {
            name: name.into(),
            pos: Pos::Derived,
        }
    }
}

impl fmt::Display for Ident {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// A header line: a value with its position and trivia.
#[derive(Clone, Debug, PartialEq)]
pub struct Decl<T> {
    pub value: T,
    pub pos: Pos,
    pub trivia: Trivia,
}

impl<T> Decl<T> {
    pub fn new(value: T) -> Decl<T> {
        Decl {
            value,
            pos: Pos::Derived,
            trivia: Trivia::default(),
        }
    }
}

/// A whole skeleton file.
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    /// `skeleton NAME`
    pub name: Decl<Ident>,
    /// `ranks N`
    pub ranks: Decl<u64>,
    /// `topology ...`
    pub topology: Decl<Topology>,
    /// `app_time DURATION`: the measured application time this skeleton stands for.
    pub app_time: Decl<Duration>,
    /// `memory SIZE at SIZE/s` (optional): the application's working set and how fast
    /// the memory probe swept that much where the trace was taken. Compute spans then
    /// last their time × that rate / the probe's rate where the skeleton runs.
    pub memory: Option<Decl<Memory>>,
    pub body: Block,
}

/// The header line `memory 31364 KiB at 26727 MB/s`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Memory {
    /// The working set the probe sweeps.
    pub working_set: Spanned<Size>,
    /// Bytes per second: the probe's rate over the working set where traced.
    pub rate: Spanned<Size>,
}

/// A sequence of statements; `end_comments` are the lines after the last statement
/// (before the closing brace, or at the end of the file for the top level), in the
/// form of [`Trivia::leading`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Block {
    pub stmts: Vec<Stmt>,
    pub end_comments: Vec<String>,
}

/// The logical topology ranks are arranged in. Sizes follow from `ranks` except for
/// grids, whose dimensions are explicit and must multiply to `ranks`.
#[derive(Clone, Debug, PartialEq)]
pub enum Topology {
    /// A periodic 1-D arrangement: `next` is `(rank + 1) % nranks`.
    Ring,
    /// A non-periodic 1-D arrangement: the last rank has no `next`.
    Chain,
    /// An n-D cartesian grid in MPI_Cart_create's row-major rank order, with
    /// per-dimension periodicity. Written `grid(4, 4)`, `torus(4, 4)` (all periodic) or
    /// `grid(4, 4, periodic = [true, false])`.
    Grid { dims: Vec<u64>, periodic: Vec<bool> },
    /// `nranks` must be a power of two; `bit(i)` is the partner `rank ^ (1 << i)`.
    Hypercube,
    /// A k-ary tree rooted at rank 0: parent of r is `(r - 1) / k`, children
    /// `k * r + 1 ..= k * r + k`.
    Tree { arity: u64 },
    /// Rank 0 is the hub; every other rank is a leaf.
    Star,
    /// Every rank is a neighbour of every other.
    Complete,
    /// Explicit neighbour lists: `graph(0: [1, 2], 1: [0], ...)`. Ranks not listed have
    /// no neighbours. `neighbor(i)` is the i-th entry of the rank's own list.
    Graph { neighbors: Vec<(u64, Vec<u64>)> },
}

impl Topology {
    pub fn keyword(&self) -> &'static str {
        match self {
            Topology::Ring => "ring",
            Topology::Chain => "chain",
            Topology::Grid { periodic, .. } if periodic.iter().all(|&p| p) => "torus",
            Topology::Grid { .. } => "grid",
            Topology::Hypercube => "hypercube",
            Topology::Tree { .. } => "tree",
            Topology::Star => "star",
            Topology::Complete => "complete",
            Topology::Graph { .. } => "graph",
        }
    }
}

/// A time with the unit it was written in, so printing gives back what was written.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Duration {
    pub value: f64,
    pub unit: TimeUnit,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TimeUnit {
    Ns,
    Us,
    Ms,
    S,
}

impl TimeUnit {
    pub const ALL: [TimeUnit; 4] = [TimeUnit::Ns, TimeUnit::Us, TimeUnit::Ms, TimeUnit::S];

    pub fn seconds(self) -> f64 {
        match self {
            TimeUnit::Ns => 1e-9,
            TimeUnit::Us => 1e-6,
            TimeUnit::Ms => 1e-3,
            TimeUnit::S => 1.0,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TimeUnit::Ns => "ns",
            TimeUnit::Us => "us",
            TimeUnit::Ms => "ms",
            TimeUnit::S => "s",
        }
    }
}

impl Duration {
    pub fn new(value: f64, unit: TimeUnit) -> Duration {
        Duration { value, unit }
    }

    pub fn seconds(self) -> f64 {
        self.value * self.unit.seconds()
    }
}

/// A message or memory size with the unit it was written in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Size {
    pub value: f64,
    pub unit: SizeUnit,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SizeUnit {
    B,
    KiB,
    MiB,
    GiB,
    KB,
    MB,
    GB,
}

impl SizeUnit {
    pub const ALL: [SizeUnit; 7] = [
        SizeUnit::B,
        SizeUnit::KiB,
        SizeUnit::MiB,
        SizeUnit::GiB,
        SizeUnit::KB,
        SizeUnit::MB,
        SizeUnit::GB,
    ];

    pub fn bytes(self) -> u64 {
        match self {
            SizeUnit::B => 1,
            SizeUnit::KiB => 1 << 10,
            SizeUnit::MiB => 1 << 20,
            SizeUnit::GiB => 1 << 30,
            SizeUnit::KB => 1_000,
            SizeUnit::MB => 1_000_000,
            SizeUnit::GB => 1_000_000_000,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SizeUnit::B => "B",
            SizeUnit::KiB => "KiB",
            SizeUnit::MiB => "MiB",
            SizeUnit::GiB => "GiB",
            SizeUnit::KB => "KB",
            SizeUnit::MB => "MB",
            SizeUnit::GB => "GB",
        }
    }
}

impl Size {
    pub fn new(value: f64, unit: SizeUnit) -> Size {
        Size { value, unit }
    }

    pub fn bytes_exact(value: u64) -> Size {
        Size {
            value: value as f64,
            unit: SizeUnit::B,
        }
    }

    /// The size in bytes, or `None` when it is not a whole number of bytes or does not
    /// fit in 64 bits.
    pub fn bytes(self) -> Option<u64> {
        let bytes = self.value * self.unit.bytes() as f64;
        let in_range = (0.0..18_446_744_073_709_551_616.0).contains(&bytes);
        (in_range && bytes.fract() == 0.0).then_some(bytes as u64)
    }
}

/// One statement with its position, optional call-site annotation and trivia.
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    pub kind: StmtKind,
    /// `@ "x_solve.f:71"`: where in the application this statement comes from.
    pub site: Option<Site>,
    pub pos: Pos,
    pub trivia: Trivia,
}

impl Stmt {
    pub fn new(kind: StmtKind) -> Stmt {
        Stmt {
            kind,
            site: None,
            pos: Pos::Derived,
            trivia: Trivia::default(),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Site {
    pub text: String,
    pub pos: Pos,
}

/// What a statement does. Variants other than the small `Wait` are boxed: a statement
/// kind is then 40 bytes instead of 208, and the parser moves every statement through
/// several layers (unboxed, copying statements was a quarter of parse time).
#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    Compute(Box<Compute>),
    P2p(Box<P2p>),
    Collective(Box<Collective>),
    Wait(Wait),
    CommDecl(Box<CommDecl>),
    Loop(Box<Loop>),
    If(Box<If>),
    While(Box<While>),
}

impl StmtKind {
    /// The request handle a nonblocking operation binds (`req NAME = ...`).
    pub fn request(&self) -> Option<&Ident> {
        match self {
            StmtKind::P2p(p) => p.request.as_ref(),
            StmtKind::Collective(c) => c.request.as_ref(),
            _ => None,
        }
    }
}

/// `compute TIME [working_set SIZE]`
#[derive(Clone, Debug, PartialEq)]
pub struct Compute {
    pub time: TimeSpec,
    pub working_set: Option<Spanned<Size>>,
    /// `polls N`: after the span, N polls of MPI for a message that never comes (the
    /// application's failed tests and probes: their cost is the MPI's, its transport's
    /// and the scheduler's, so they are made, not timed; the span's time excludes them).
    pub polls: Option<Spanned<u64>>,
    /// `polls N each D`: what one poll took where the skeleton was made (the scaler's
    /// model counts N x D for them; the back ends make the polls whatever they cost).
    pub poll_cost: Option<Spanned<Duration>>,
}

/// How long a compute span takes, possibly varying across ranks (load imbalance).
#[derive(Clone, Debug, PartialEq)]
pub enum TimeSpec {
    /// `2 ms`
    Fixed(Spanned<Duration>),
    /// `per_rank(1 ms, 1.2 ms, ...)`: one value per rank, in rank order.
    PerRank(Vec<Spanned<Duration>>),
    /// `normal(2 ms, 0.1 ms)`: mean and standard deviation, drawn per rank and call.
    Normal {
        mean: Spanned<Duration>,
        stddev: Spanned<Duration>,
    },
    /// `uniform(1 ms, 3 ms)`: drawn per rank and call from [low, high].
    Uniform {
        low: Spanned<Duration>,
        high: Spanned<Duration>,
    },
    /// `[2 ms, per_rank(...), 5 us][dim]`: the time of the index's value (a loop
    /// variable, so iterations differ); the options are not themselves picks.
    Pick(Box<Pick<TimeSpec>>),
}

/// `[v0, v1, ...][INDEX]`: the value at INDEX (0-based), an expression that usually
/// reads a loop variable, so that a loop's iterations differ in a size or a time (a
/// loop over the dimensions of a grid whose faces differ in size).
#[derive(Clone, Debug, PartialEq)]
pub struct Pick<T> {
    pub values: Vec<T>,
    pub index: Expr,
}

/// The size of one point-to-point message: fixed, or picked by an index.
#[derive(Clone, Debug, PartialEq)]
pub enum MsgSize {
    Fixed(Spanned<Size>),
    Pick(Box<Pick<Spanned<Size>>>),
}

impl MsgSize {
    /// Every size it can take (one for a fixed size).
    pub fn values(&self) -> &[Spanned<Size>] {
        match self {
            MsgSize::Fixed(s) => std::slice::from_ref(s),
            MsgSize::Pick(p) => &p.values,
        }
    }

    pub fn values_mut(&mut self) -> &mut [Spanned<Size>] {
        match self {
            MsgSize::Fixed(s) => std::slice::from_mut(s),
            MsgSize::Pick(p) => &mut p.values,
        }
    }

    /// The largest size in bytes (a buffer holds any of them); 0 for sizes that are
    /// not whole bytes, which the checker reports.
    pub fn max_bytes(&self) -> u64 {
        self.values()
            .iter()
            .map(|s| s.value.bytes().unwrap_or(0))
            .max()
            .unwrap_or(0)
    }

    /// The mean of the sizes in bytes, over the index's values.
    pub fn mean_bytes(&self) -> f64 {
        let v = self.values();
        if v.is_empty() {
            return 0.0;
        }
        v.iter()
            .map(|s| s.value.bytes().unwrap_or(0) as f64)
            .sum::<f64>()
            / v.len() as f64
    }

    /// The fixed size, if not picked.
    pub fn fixed(&self) -> Option<Size> {
        match self {
            MsgSize::Fixed(s) => Some(s.value),
            MsgSize::Pick(_) => None,
        }
    }

    /// The index expression of a picked size.
    pub fn index(&self) -> Option<&Expr> {
        match self {
            MsgSize::Fixed(_) => None,
            MsgSize::Pick(p) => Some(&p.index),
        }
    }
}

impl TimeSpec {
    /// The mean time per call over all ranks, in seconds.
    pub fn mean_seconds(&self) -> f64 {
        match self {
            TimeSpec::Fixed(d) => d.value.seconds(),
            TimeSpec::PerRank(values) if values.is_empty() => 0.0,
            TimeSpec::PerRank(values) => {
                values.iter().map(|d| d.value.seconds()).sum::<f64>() / values.len() as f64
            }
            TimeSpec::Normal { mean, .. } => mean.value.seconds(),
            TimeSpec::Uniform { low, high } => 0.5 * (low.value.seconds() + high.value.seconds()),
            TimeSpec::Pick(p) if p.values.is_empty() => 0.0,
            TimeSpec::Pick(p) => {
                p.values.iter().map(TimeSpec::mean_seconds).sum::<f64>() / p.values.len() as f64
            }
        }
    }
}

/// A value with a position, for the parts of a statement a diagnostic may point at.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spanned<T> {
    pub value: T,
    pub pos: Pos,
}

impl<T> Spanned<T> {
    pub fn derived(value: T) -> Spanned<T> {
        Spanned {
            value,
            pos: Pos::Derived,
        }
    }
}

/// Point-to-point operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum P2pOp {
    Send,
    Recv,
    Isend,
    Irecv,
    Sendrecv,
}

impl P2pOp {
    pub fn keyword(self) -> &'static str {
        match self {
            P2pOp::Send => "send",
            P2pOp::Recv => "recv",
            P2pOp::Isend => "isend",
            P2pOp::Irecv => "irecv",
            P2pOp::Sendrecv => "sendrecv",
        }
    }

    pub fn is_nonblocking(self) -> bool {
        matches!(self, P2pOp::Isend | P2pOp::Irecv)
    }

    pub fn receives(self) -> bool {
        matches!(self, P2pOp::Recv | P2pOp::Irecv)
    }
}

/// `send PEER SIZE [tag N] [on COMM]`, `req h = irecv PEER SIZE ...`,
/// `sendrecv to PEER SIZE from PEER SIZE ...`.
///
/// For `sendrecv`, `peer`/`size` are the send half and `recv` the receive half.
#[derive(Clone, Debug, PartialEq)]
pub struct P2p {
    pub op: P2pOp,
    /// The request handle a nonblocking operation binds (`req NAME = ...`).
    pub request: Option<Ident>,
    pub peer: Spanned<Peer>,
    pub size: MsgSize,
    /// Boxed: only `sendrecv` has it, and it would make every statement larger.
    pub recv: Option<Box<(Spanned<Peer>, MsgSize)>>,
    pub tag: Option<Spanned<u32>>,
    pub comm: Option<Ident>,
    /// `window W` on `req NAME = isend/irecv`: NAME holds up to W operations of this
    /// statement in flight; a post that leaves more pending completes the oldest first,
    /// and `wait NAME` completes them all (the application's messages that complete
    /// whenever they come, as in an exchange addressed by its data).
    pub window: Option<Spanned<u64>>,
}

/// Whom a point-to-point operation talks to.
#[derive(Clone, Debug, PartialEq)]
pub enum Peer {
    /// A direction of the declared topology (or of a cartesian sub-communicator).
    Dir(Direction),
    /// `rank(EXPR)`: an explicit rank in the communicator.
    Rank(Expr),
    /// `any`: MPI_ANY_SOURCE, for receives.
    Any,
    /// `source`: the rank this rank's last blocking receive from `any` (`recv any`, or
    /// the receive half of `sendrecv ... from any`) got its message from, a rank of the
    /// communicator it received on: a master answers the worker whose result came
    /// first.
    Source,
}

/// A topology-relative peer.
#[derive(Clone, Debug, PartialEq)]
pub enum Direction {
    /// `+x`, `-y`, `east`, `north`, `up`, `+d3`, ...: one step along a grid dimension
    /// (`x` is dimension 0, as in MPI_Cart_shift's `direction` argument).
    Axis(AxisDir),
    /// `offset(1, -1)`: a relative move in every grid dimension (diagonals).
    Offset(Vec<i64>),
    /// `next`/`prev` on a ring or chain.
    Next,
    Prev,
    /// `parent` / `child(i)` in a tree.
    Parent,
    Child(Expr),
    /// `hub` (rank 0 of a star) and `leaf(i)`, the i-th non-hub rank.
    Hub,
    Leaf(Expr),
    /// `bit(i)`: the hypercube partner `rank ^ (1 << i)`.
    Bit(Expr),
    /// `neighbor(i)`: the i-th entry of this rank's list in a `graph` topology.
    Neighbor(Expr),
    /// `+d(EXPR)` / `-d(EXPR)`: one step along the grid dimension EXPR evaluates to (a
    /// loop over dimensions: `loop 3 as dim { send +d(dim) ... }`).
    AxisOf {
        dim: Expr,
        forward: bool,
    },
    /// `shift(DIM, DISP)`: DISP steps (any integer, negative backwards) along the grid
    /// dimension DIM, the destination `MPI_Cart_shift(comm, DIM, DISP)` gives: one
    /// dimension's two swaps in one loop, `shift(dim, 1 - 2 * side)`.
    Shift {
        dim: Expr,
        disp: Expr,
    },
}

/// One step along one grid dimension, with the spelling the user chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AxisDir {
    pub dim: u32,
    pub forward: bool,
    pub spelling: AxisSpelling,
}

/// `east`/`west` are ±x, `north`/`south` ±y, `up`/`down` ±z; `+x`.. `-z` and `+dN`/`-dN`
/// name any dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AxisSpelling {
    Compass,
    Letter,
    Numbered,
}

impl AxisDir {
    /// The canonical text of this direction in its spelling.
    pub fn text(self) -> String {
        let sign = if self.forward { '+' } else { '-' };
        match (self.spelling, self.dim, self.forward) {
            (AxisSpelling::Compass, 0, true) => "east".into(),
            (AxisSpelling::Compass, 0, false) => "west".into(),
            (AxisSpelling::Compass, 1, true) => "north".into(),
            (AxisSpelling::Compass, 1, false) => "south".into(),
            (AxisSpelling::Compass, 2, true) => "up".into(),
            (AxisSpelling::Compass, 2, false) => "down".into(),
            (AxisSpelling::Letter, 0..=2, _) => {
                format!("{sign}{}", ['x', 'y', 'z'][self.dim as usize])
            }
            _ => format!("{sign}d{}", self.dim),
        }
    }
}

/// Collective operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CollOp {
    Barrier,
    Bcast,
    Reduce,
    Allreduce,
    Gather,
    Gatherv,
    Scatter,
    Scatterv,
    Allgather,
    Allgatherv,
    Alltoall,
    Alltoallv,
    ReduceScatter,
    Scan,
}

impl CollOp {
    pub const ALL: [CollOp; 14] = [
        CollOp::Barrier,
        CollOp::Bcast,
        CollOp::Reduce,
        CollOp::Allreduce,
        CollOp::Gather,
        CollOp::Gatherv,
        CollOp::Scatter,
        CollOp::Scatterv,
        CollOp::Allgather,
        CollOp::Allgatherv,
        CollOp::Alltoall,
        CollOp::Alltoallv,
        CollOp::ReduceScatter,
        CollOp::Scan,
    ];

    pub fn keyword(self) -> &'static str {
        match self {
            CollOp::Barrier => "barrier",
            CollOp::Bcast => "bcast",
            CollOp::Reduce => "reduce",
            CollOp::Allreduce => "allreduce",
            CollOp::Gather => "gather",
            CollOp::Gatherv => "gatherv",
            CollOp::Scatter => "scatter",
            CollOp::Scatterv => "scatterv",
            CollOp::Allgather => "allgather",
            CollOp::Allgatherv => "allgatherv",
            CollOp::Alltoall => "alltoall",
            CollOp::Alltoallv => "alltoallv",
            CollOp::ReduceScatter => "reduce_scatter",
            CollOp::Scan => "scan",
        }
    }

    /// Whether the operation has a root rank (`root N`).
    pub fn has_root(self) -> bool {
        matches!(
            self,
            CollOp::Bcast
                | CollOp::Reduce
                | CollOp::Gather
                | CollOp::Gatherv
                | CollOp::Scatter
                | CollOp::Scatterv
        )
    }

    /// Whether the operation moves data (all but barrier).
    pub fn has_size(self) -> bool {
        self != CollOp::Barrier
    }

    /// The `v` variants, whose size may differ per rank.
    pub fn is_vector(self) -> bool {
        matches!(
            self,
            CollOp::Gatherv | CollOp::Scatterv | CollOp::Allgatherv | CollOp::Alltoallv
        )
    }
}

/// `[req h =] [i]OP [SIZE] [root EXPR] [on COMM]`.
///
/// The size is the per-rank contribution (gather, allgather), the buffer (bcast, reduce,
/// allreduce, scan), the block per rank (scatter, reduce_scatter) or the block per pair
/// (alltoall); `v` variants take `per_rank(...)` for per-rank contributions.
#[derive(Clone, Debug, PartialEq)]
pub struct Collective {
    pub op: CollOp,
    pub nonblocking: bool,
    pub request: Option<Ident>,
    pub size: Option<SizeSpec>,
    pub root: Option<Expr>,
    pub comm: Option<Ident>,
}

/// A message size, the same on every rank or one per rank.
#[derive(Clone, Debug, PartialEq)]
pub enum SizeSpec {
    Fixed(Spanned<Size>),
    PerRank(Vec<Spanned<Size>>),
}

/// Request completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WaitOp {
    /// `wait h`
    Wait,
    /// `waitall h1, h2, ...`
    Waitall,
    /// `waitany h1, h2, ...`: completes one of them.
    Waitany,
    /// `test h`: probes once; does not guarantee completion.
    Test,
}

impl WaitOp {
    pub fn keyword(self) -> &'static str {
        match self {
            WaitOp::Wait => "wait",
            WaitOp::Waitall => "waitall",
            WaitOp::Waitany => "waitany",
            WaitOp::Test => "test",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Wait {
    pub op: WaitOp,
    pub handles: Vec<Ident>,
}

/// `comm NAME = split(PARENT, color = EXPR[, key = EXPR])`, `dup(PARENT)`,
/// `cart_sub(PARENT, keep = [dims])`.
#[derive(Clone, Debug, PartialEq)]
pub struct CommDecl {
    pub name: Ident,
    pub def: CommDef,
}

#[derive(Clone, Debug, PartialEq)]
pub enum CommDef {
    Split {
        parent: Ident,
        color: Expr,
        key: Option<Expr>,
    },
    Dup {
        parent: Ident,
    },
    /// Keeps the listed dimensions of the parent's grid: `keep = [1]` of a `grid(4, 4)`
    /// gives the row communicators (ranks that share coordinate 0).
    CartSub {
        parent: Ident,
        keep: Vec<Spanned<u32>>,
    },
}

impl CommDef {
    pub fn parent(&self) -> &Ident {
        match self {
            CommDef::Split { parent, .. }
            | CommDef::Dup { parent }
            | CommDef::CartSub { parent, .. } => parent,
        }
    }
}

/// `loop COUNT [as NAME] { BODY }`. The count may depend on the rank (a master loops
/// over all workers' messages). With `as NAME`, the body reads the iteration number
/// (0, 1, ..., COUNT - 1) as the variable NAME.
#[derive(Clone, Debug, PartialEq)]
pub struct Loop {
    pub count: Expr,
    pub var: Option<Ident>,
    pub body: Block,
}

/// `while recv PEER SIZE tag T [on COMM] { ... }`: receives a message from PEER with any
/// tag; while its tag is T, runs the body and receives again; a message with another tag
/// ends the loop. A worker taking tasks until its master tells it to stop: how many
/// tasks each worker gets is decided where the skeleton runs, as in the application.
#[derive(Clone, Debug, PartialEq)]
pub struct While {
    /// The receive heading every iteration (`op` is `Recv`, `tag` is T).
    pub recv: P2p,
    pub body: Block,
}

/// `if COND { ... } else if COND { ... } else { ... }`.
#[derive(Clone, Debug, PartialEq)]
pub struct If {
    pub cond: Expr,
    pub then_block: Block,
    pub else_branch: Option<Else>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Else {
    Block(Block),
    If(Box<If>),
}

/// Integer and boolean expressions over the rank.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub pos: Pos,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    Int(i64),
    Bool(bool),
    /// `rank`: this rank's number in the world communicator.
    Rank,
    /// `nranks`: the number of ranks.
    NRanks,
    /// `coord(i)`: this rank's coordinate in dimension i of the grid topology.
    Coord(u32),
    /// The iteration number of an enclosing `loop ... as NAME`.
    Var(Ident),
    /// `per_rank(v0, v1, ...)`: one integer per world rank, in rank order; the value is
    /// this rank's (a table where the data gives each rank its own peer or count).
    PerRank(Vec<i64>),
    /// `[v0, v1, ...][INDEX]`: the value at INDEX (0-based) of a list of integers (a
    /// loop over a grid's dimensions whose count differs per dimension,
    /// `loop [1, 1, 2][dim] { ... }`).
    Pick(Vec<i64>, Box<Expr>),
    Unary(UnaryOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
}

impl Expr {
    pub fn new(kind: ExprKind) -> Expr {
        Expr {
            kind,
            pos: Pos::Derived,
        }
    }

    pub fn int(value: i64) -> Expr {
        Expr::new(ExprKind::Int(value))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    /// Bitwise exclusive or (`rank ^ 1`: the partner in a recursive-doubling step).
    Xor,
}

impl BinOp {
    /// Binding strength: higher binds tighter (`not` is 3 and unary minus 8). All binary
    /// operators are left-associative except comparisons, which do not chain. `^` binds
    /// looser than `+` and tighter than comparisons, as in Python and Rust (not C).
    pub fn precedence(self) -> u8 {
        match self {
            BinOp::Or => 1,
            BinOp::And => 2,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => 4,
            BinOp::Xor => 5,
            BinOp::Add | BinOp::Sub => 6,
            BinOp::Mul | BinOp::Div | BinOp::Rem => 7,
        }
    }

    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Or => "or",
            BinOp::And => "and",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::Xor => "^",
        }
    }

    pub fn is_comparison(self) -> bool {
        self.precedence() == 4
    }

    pub fn is_logical(self) -> bool {
        matches!(self, BinOp::Or | BinOp::And)
    }
}
