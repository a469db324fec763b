//! The skeleton context: MPI set-up, communicators with their topology, expressions
//! over the rank, compute spans, and the timing that ends in the result line.

use std::time::{Duration, Instant};

use mpi::topology::{CartesianCommunicator, Color, Communicator, Group, SimpleCommunicator};
use mpi::traits::*;

use crate::buffers::Buffers;
use crate::kernel::{ComputeMode, Kernel};
use crate::requests::Requests;
use crate::topology::{Shape, Topology};
use crate::units::{Rng, TimeSpec};

/// A communicator of the skeleton: [`WORLD`] or one made by [`Skeleton::split`],
/// [`Skeleton::dup`] or [`Skeleton::cart_sub`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Comm(pub(crate) usize);

/// All ranks, arranged in the skeleton's topology.
pub const WORLD: Comm = Comm(0);

pub(crate) enum Handle {
    Plain(SimpleCommunicator),
    Cart(CartesianCommunicator),
    /// This rank is not a member (a negative `split` color).
    Absent,
}

pub(crate) struct CommEntry {
    pub name: String,
    pub handle: Handle,
    pub shape: Shape,
    pub rank: u64,
    pub size: u64,
    /// The world rank of each member, by rank in this communicator.
    pub world_ranks: Vec<u64>,
}

/// Runs `$body` with `$c` bound to the communicator of `$entry`, whatever its type.
macro_rules! on_comm {
    ($entry:expr, $c:ident => $body:expr) => {
        match &$entry.handle {
            $crate::skeleton::Handle::Plain($c) => $body,
            $crate::skeleton::Handle::Cart($c) => $body,
            $crate::skeleton::Handle::Absent => $crate::skeleton::not_member(&$entry.name),
        }
    };
}
pub(crate) use on_comm;

pub(crate) fn not_member(name: &str) -> ! {
    fatal(&format!(
        "this rank is not a member of communicator `{name}`"
    ))
}

/// Reports a misuse of the DSL on stderr and aborts the whole job: an MPI program
/// whose ranks disagree cannot recover.
pub(crate) fn fatal(message: &str) -> ! {
    eprintln!("perfskel-runtime: error: {message}");
    let world = SimpleCommunicator::world();
    world.abort(1)
}

/// Ends the job on an error every rank has found alike (the job's size, the topology):
/// rank 0 reports it, and every rank finalizes MPI and exits with status 1. No abort: an
/// abort may end the launcher before it has passed the message on (MPICH's Hydra does).
fn fail_everywhere(universe: mpi::environment::Universe, rank: u64, message: &str) -> ! {
    if rank == 0 {
        eprintln!("perfskel-runtime: error: {message}");
    }
    drop(universe);
    std::process::exit(1)
}

/// How a skeleton is set up; made by [`Skeleton::builder`], ended by [`Builder::init`].
#[derive(Clone, Debug)]
pub struct Builder {
    name: String,
    topology: Topology,
    ranks: Option<u64>,
    ratio: u64,
    reached: Option<f64>,
    rest: Option<f64>,
    app_time: Duration,
    working_sets: Vec<u64>,
    memory: Option<(u64, f64)>,
    buffer_bytes: u64,
    backend: String,
}

impl Builder {
    /// The rank count the skeleton was written for; the job must have exactly as many.
    pub fn ranks(mut self, n_ranks: u64) -> Builder {
        self.ranks = Some(n_ranks);
        self
    }

    /// K of the target ratio 1:K: the skeleton runs 1/K of the application's time.
    pub fn ratio(mut self, k: u64) -> Builder {
        self.ratio = k.max(1);
        self
    }

    /// The ratio the scaled skeleton reaches (`perfskel compile` reports it; K when the
    /// target was hit, the default): the prediction is the skeleton's time times this.
    pub fn reached(mut self, ratio: f64) -> Builder {
        self.reached = Some(ratio);
        self
    }

    /// The program has communication with ratios of its own (between
    /// [`Skeleton::own_begin`] and [`Skeleton::own_end`]), and the rest of its time is
    /// multiplied by `ratio`: a measuring pass without compute runs before the timed
    /// one (see [`Skeleton::pass`]).
    pub fn rest(mut self, ratio: f64) -> Builder {
        self.rest = Some(ratio);
        self
    }

    /// The measured time of the application the (unscaled) skeleton stands for.
    pub fn app_time(mut self, time: Duration) -> Builder {
        self.app_time = time;
        self
    }

    /// Working-set sizes that compute spans use, calibrated before the clock starts.
    pub fn working_sets(mut self, sizes: &[u64]) -> Builder {
        self.working_sets.extend_from_slice(sizes);
        self
    }

    /// The `memory` header line: the application's working set in bytes and the memory
    /// probe's rate over it where the trace was taken, in bytes per second. At start-up
    /// rank 0 runs the same probe (as in the tracer), and compute spans on every rank last
    /// their time × that rate / the rate here, so they follow the memory's speed as the
    /// application does. Only with `PERFSKEL_MEMORY=on`: by default spans run as
    /// written, because the probe's own noise was as large as what it corrects.
    pub fn memory(mut self, working_set: u64, traced_rate: f64) -> Builder {
        self.memory = Some((working_set, traced_rate));
        self
    }

    /// Bytes to allocate and touch for message buffers before the clock starts (they
    /// grow when a message needs more).
    pub fn buffers(mut self, bytes: u64) -> Builder {
        self.buffer_bytes = bytes;
        self
    }

    /// The back end named in the result line (`rust` unless a generator says otherwise).
    pub fn backend(mut self, name: &str) -> Builder {
        self.backend = name.to_string();
        self
    }

    /// Initializes MPI, builds the world communicator in the topology, calibrates the
    /// compute kernel, allocates buffers, and starts the clock after a barrier.
    pub fn init(self) -> Skeleton {
        let Some(universe) = mpi::initialize() else {
            eprintln!("perfskel-runtime: error: MPI was already initialized");
            std::process::exit(1);
        };
        let world = universe.world();
        let n_ranks = world.size() as u64;
        let rank = world.rank() as u64;
        if let Some(expected) = self.ranks.filter(|&r| r != n_ranks) {
            fail_everywhere(
                universe,
                rank,
                &format!(
                    "skeleton `{}` is written for {expected} ranks, the job has {n_ranks}",
                    self.name
                ),
            );
        }
        if let Some(why) = self.topology.mismatch(n_ranks) {
            fail_everywhere(universe, rank, &format!("skeleton `{}`: {why}", self.name));
        }
        let shape = Shape::of_topology(&self.topology, n_ranks);
        let handle = match &shape {
            // Grids, rings and chains get an MPI cartesian communicator without
            // reordering, so its ranks are the world's.
            Shape::Grid { dims, periodic } => {
                let dims: Vec<i32> = dims.iter().map(|&d| count(d)).collect();
                match world.create_cartesian_communicator(&dims, periodic, false) {
                    Some(cart) => Handle::Cart(cart),
                    None => fatal("MPI_Cart_create gave no communicator"),
                }
            }
            _ => Handle::Plain(world.duplicate()),
        };
        let world_coords = shape.coords(rank);
        let mode = match std::env::var("PERFSKEL_COMPUTE") {
            Ok(name) => ComputeMode::from_name(&name).unwrap_or_else(|| {
                fatal(&format!(
                    "PERFSKEL_COMPUTE is `{name}`; it must be `auto`, `cpu`, `clock` or `work`"
                ))
            }),
            Err(_) => ComputeMode::Auto,
        };
        // Every rank calibrates at once, so the kernel sees the same sharing of cores
        // as the run will.
        world.barrier();
        let mut kernel = Kernel::calibrate(&self.working_sets, mode);
        // Off unless PERFSKEL_MEMORY=on (see `Builder::memory`).
        let memory_on = match std::env::var("PERFSKEL_MEMORY").as_deref() {
            Ok("on") => true,
            Ok("off") | Ok("") | Err(_) => false,
            Ok(other) => fatal(&format!(
                "PERFSKEL_MEMORY is `{other}`; it must be `on` or `off`"
            )),
        };
        if let Some((working_set, traced_rate)) = self.memory.filter(|_| memory_on) {
            let bytes = crate::kernel::probe_bytes(working_set);
            // Rank 0 probes while the others wait, as in the tracer.
            world.barrier();
            let mut here = if rank == 0 {
                crate::kernel::memory_probe(bytes)
            } else {
                0.0
            };
            world.process_at_rank(0).broadcast_into(&mut here);
            if here > 0.0 && traced_rate > 0.0 {
                kernel.set_time_factor(traced_rate / here);
                if rank == 0 {
                    eprintln!(
                        "perfskel skeleton: memory probe over {:.1} MiB: {:.2} GB/s here, {:.2} GB/s where traced: compute x {:.3}",
                        bytes as f64 / f64::from(1u32 << 20),
                        here / 1e9,
                        traced_rate / 1e9,
                        traced_rate / here
                    );
                }
            }
        }
        let buffers = Buffers::new(self.buffer_bytes);
        let mut skeleton = Skeleton {
            requests: Requests::default(),
            comms: vec![CommEntry {
                name: "world".into(),
                handle,
                shape,
                rank,
                size: n_ranks,
                world_ranks: (0..n_ranks).collect(),
            }],
            buffers,
            kernel,
            rng: Rng::new(rank),
            name: self.name,
            backend: self.backend,
            ratio: self.ratio,
            reached: self
                .reached
                .filter(|r| r.is_finite() && *r > 0.0)
                .unwrap_or(self.ratio as f64),
            rest: self.rest.filter(|r| r.is_finite() && *r > 0.0),
            own: Own::default(),
            fill: Fill::default(),
            app_time: self.app_time,
            rank,
            n_ranks,
            world_coords,
            start: Instant::now(),
            passes: Passes::NotStarted,
            warmup_s: 0.0,
            poller: crate::poll::Poller::new(),
            source: None,
            _universe: universe,
        };
        skeleton.barrier_world();
        skeleton.start = Instant::now();
        skeleton
    }
}

/// A running skeleton: one per process, created by [`Skeleton::builder`]`(..).init()`
/// and ended by [`Skeleton::finish`].
pub struct Skeleton {
    // Fields drop in order: requests and communicators before MPI is finalized with
    // the universe.
    pub(crate) requests: Requests,
    pub(crate) comms: Vec<CommEntry>,
    pub(crate) buffers: Buffers,
    kernel: Kernel,
    rng: Rng,
    name: String,
    backend: String,
    ratio: u64,
    reached: f64,
    /// What the rest of the time is multiplied by where the program measures its
    /// communication with ratios of their own (`None`: it has none).
    rest: Option<f64>,
    own: Own,
    fill: Fill,
    app_time: Duration,
    rank: u64,
    n_ranks: u64,
    world_coords: Vec<u64>,
    start: Instant,
    passes: Passes,
    /// How long the warm-up pass took (0 without one).
    warmup_s: f64,
    /// The receive `compute .. polls N` tests.
    poller: crate::poll::Poller,
    /// The communicator (index) and the rank there that the last blocking receive from
    /// any rank got its message from: what [`crate::p2p::SOURCE`] names.
    pub(crate) source: Option<(usize, i32)>,
    _universe: mpi::environment::Universe,
}

/// Where [`Skeleton::pass`] stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Passes {
    NotStarted,
    WarmingUp,
    /// The pass without compute that times the communication with ratios of its own.
    Measuring,
    Timed,
}

/// What the measuring pass found on this rank.
#[derive(Clone, Copy, Debug, Default)]
struct Own {
    /// When the current stretch started.
    since: Option<Instant>,
    /// Seconds in the stretches, and those times their ratios.
    s: f64,
    app_s: f64,
    /// Whether the measuring pass ran.
    measured: bool,
}

/// A pipeline's fill on this rank, in the timed pass: loops whose first iteration
/// waits for the stages before this rank (see [`Skeleton::fill_begin`]).
#[derive(Clone, Copy, Debug, Default)]
struct Fill {
    /// When the current loop started, and when its first iteration ended.
    start: Option<Instant>,
    first: Option<Instant>,
    /// Iterations of the current loop so far.
    n: u64,
    /// The sum of each loop's first iteration less the mean of its others.
    s: f64,
}

impl Skeleton {
    /// Starts describing a skeleton called `name` over `topology`.
    pub fn builder(name: &str, topology: Topology) -> Builder {
        Builder {
            name: name.to_string(),
            topology,
            ranks: None,
            ratio: 1,
            reached: None,
            rest: None,
            app_time: Duration::ZERO,
            working_sets: Vec::new(),
            memory: None,
            buffer_bytes: 0,
            backend: "rust".into(),
        }
    }

    /// `rank`: this process's world rank.
    pub fn rank(&self) -> i64 {
        self.rank as i64
    }

    /// `nranks`: the number of ranks.
    pub fn nranks(&self) -> i64 {
        self.n_ranks as i64
    }

    /// `coord(i)`: this rank's coordinate in dimension `i` of the world topology.
    pub fn coord(&self, dim: usize) -> i64 {
        match self.world_coords.get(dim) {
            Some(&c) => c as i64,
            None => fatal(&format!(
                "coord({dim}) is out of range: the topology has {} dimension(s)",
                self.world_coords.len()
            )),
        }
    }

    /// This rank's coordinates in the world topology (grids, rings and chains: row-major;
    /// hypercubes: its bits; none otherwise); `coords()[i]` is `coord(i)`.
    pub fn coords(&self) -> Vec<i64> {
        self.world_coords.iter().map(|&c| c as i64).collect()
    }

    /// `compute TIME [working_set SIZE] [polls N]`: runs the calibrated kernel.
    pub fn compute(&mut self, time: impl Into<TimeSpec>) -> Compute<'_> {
        Compute {
            skeleton: self,
            time: time.into(),
            working_set: None,
            polls: 0,
        }
    }

    /// `comm NAME = split(PARENT, color = C)`: ranks ordered as in the parent; a
    /// negative color leaves this rank out.
    pub fn split(&mut self, name: &str, parent: Comm, color: i64) -> Comm {
        let key = self.comm_entry(parent).rank as i64;
        self.split_with_key(name, parent, color, key)
    }

    /// `comm NAME = split(PARENT, color = C, key = K)`: ranks ordered by key; a
    /// negative color leaves this rank out.
    pub fn split_with_key(&mut self, name: &str, parent: Comm, color: i64, key: i64) -> Comm {
        let entry = self.comm_entry(parent);
        let color = if color < 0 {
            Color::undefined()
        } else {
            Color::with_value(i32::try_from(color).unwrap_or_else(|_| {
                fatal(&format!("split color {color} of `{name}` is too large"))
            }))
        };
        let key = i32::try_from(key)
            .unwrap_or_else(|_| fatal(&format!("split key {key} of `{name}` is too large")));
        let made = on_comm!(entry, c => c.split_by_color_with_key(color, key));
        let handle = made.map_or(Handle::Absent, Handle::Plain);
        self.add_comm(name, handle, Shape::Unstructured)
    }

    /// `comm NAME = dup(PARENT)`: the same ranks and topology, a separate message space.
    pub fn dup(&mut self, name: &str, parent: Comm) -> Comm {
        let entry = self.comm_entry(parent);
        let shape = entry.shape.clone();
        let handle = match &entry.handle {
            Handle::Plain(c) => Handle::Plain(c.duplicate()),
            // MPI_Comm_dup keeps the cartesian topology.
            Handle::Cart(c) => match c.duplicate().into_topology() {
                mpi::topology::IntoTopology::Cartesian(cart) => Handle::Cart(cart),
                _ => fatal(&format!("dup of `{}` lost its grid", entry.name)),
            },
            Handle::Absent => Handle::Absent,
        };
        self.add_comm(name, handle, shape)
    }

    /// `comm NAME = cart_sub(PARENT, keep = [dims])`: the sub-grid of the kept
    /// dimensions that contains this rank (`MPI_Cart_sub`).
    pub fn cart_sub(&mut self, name: &str, parent: Comm, keep: &[u32]) -> Comm {
        let entry = self.comm_entry(parent);
        let shape = entry
            .shape
            .sub_grid(keep)
            .unwrap_or_else(|why| fatal(&format!("`{name}`: {why}")));
        let Handle::Cart(cart) = &entry.handle else {
            fatal(&format!("`{name}`: cart_sub needs a grid communicator"))
        };
        let n_dims = match &entry.shape {
            Shape::Grid { dims, .. } => dims.len(),
            _ => 0,
        };
        let retain: Vec<bool> = (0..n_dims as u32).map(|d| keep.contains(&d)).collect();
        let handle = Handle::Cart(cart.subgroup(&retain));
        self.add_comm(name, handle, shape)
    }

    pub(crate) fn comm_entry(&self, comm: Comm) -> &CommEntry {
        match self.comms.get(comm.0) {
            Some(entry) => entry,
            None => fatal(&format!("communicator {} does not exist", comm.0)),
        }
    }

    fn add_comm(&mut self, name: &str, handle: Handle, shape: Shape) -> Comm {
        let (rank, size, world_ranks) = match &handle {
            Handle::Absent => (0, 0, Vec::new()),
            Handle::Plain(c) => members(c),
            Handle::Cart(c) => members(c),
        };
        self.comms.push(CommEntry {
            name: name.to_string(),
            handle,
            shape,
            rank,
            size,
            world_ranks,
        });
        Comm(self.comms.len() - 1)
    }

    fn barrier_world(&self) {
        on_comm!(self.comms[0], c => c.barrier());
    }

    /// Seconds since the clock started (after set-up).
    pub fn elapsed(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// The loop over the passes: `while sk.pass() { program }`. At a ratio above 1 the
    /// program runs twice: first a warm-up pass whose compute spans do nothing, untimed,
    /// then the timed pass. The first uses of message buffers and of the MPI library's own
    /// (temporary buffers, shared-memory segments) cost time the application pays once,
    /// which a skeleton at 1:K would pay K times over. `PERFSKEL_WARMUP=on` or `off`
    /// overrides. The timed pass starts after a barrier, with the random sequence of
    /// `normal` and `uniform` spans started afresh, as in a run without warm-up; false
    /// once it is done.
    ///
    /// A program with communication that loops cut less than K (built with
    /// [`Builder::rest`]) runs a measuring pass, also without compute, before the timed
    /// one: each rank sums the time it spends between [`Skeleton::own_begin`] and
    /// [`Skeleton::own_end`], and that time times each stretch's own ratio, and the
    /// prediction is the rest ratio × (the time − that sum) + the sum × the ratios, of
    /// the rank that spends the most there (a message a shared core makes cost a time
    /// slice costs it once, not K times). `PERFSKEL_WARMUP=off` leaves it out too.
    pub fn pass(&mut self) -> bool {
        match self.passes {
            Passes::NotStarted if self.want_warmup() => {
                self.passes = Passes::WarmingUp;
                self.barrier_world();
                self.start = Instant::now();
                true
            }
            Passes::NotStarted | Passes::WarmingUp if self.want_measure() => {
                self.barrier_world();
                if self.passes == Passes::WarmingUp {
                    self.warmup_s = self.elapsed();
                }
                self.passes = Passes::Measuring;
                self.start = Instant::now();
                true
            }
            Passes::NotStarted | Passes::WarmingUp | Passes::Measuring => {
                self.barrier_world();
                if self.passes == Passes::WarmingUp {
                    self.warmup_s = self.elapsed();
                }
                if self.passes == Passes::Measuring {
                    self.own.measured = true;
                }
                self.rng = Rng::new(self.rank);
                self.passes = Passes::Timed;
                self.start = Instant::now();
                true
            }
            Passes::Timed => false,
        }
    }

    /// Whether to run the measuring pass: a program with communication with ratios of
    /// its own, above 1:1, unless `PERFSKEL_WARMUP=off`.
    fn want_measure(&self) -> bool {
        self.rest.is_some()
            && self.ratio > 1
            && std::env::var("PERFSKEL_WARMUP").as_deref() != Ok("off")
    }

    /// The start of a stretch of communication with a ratio of its own, timed in the
    /// measuring pass.
    pub fn own_begin(&mut self) {
        if self.passes == Passes::Measuring {
            self.own.since = Some(Instant::now());
        }
    }

    /// The end of such a stretch: each of its runs stands for `ratio` of the
    /// application's.
    pub fn own_end(&mut self, ratio: f64) {
        if let (Passes::Measuring, Some(since)) = (self.passes, self.own.since.take()) {
            let t = since.elapsed().as_secs_f64();
            self.own.s += t;
            self.own.app_s += t * ratio;
        }
    }

    /// Before a loop that may fill like a pipeline (`compile` marks those where its
    /// model finds a fill): in the timed pass, its first iteration's time less the mean
    /// of the others' is this rank's fill, which the application pays once too, so
    /// [`Skeleton::finish`] counts the largest rank's once instead of multiplying it.
    pub fn fill_begin(&mut self) {
        if self.passes == Passes::Timed {
            self.fill.start = Some(Instant::now());
            self.fill.first = None;
            self.fill.n = 0;
        }
    }

    /// The end of an iteration of such a loop.
    pub fn fill_iteration(&mut self) {
        if self.passes == Passes::Timed {
            self.fill.n += 1;
            if self.fill.n == 1 {
                self.fill.first = Some(Instant::now());
            }
        }
    }

    /// After such a loop.
    pub fn fill_end(&mut self) {
        if let (Passes::Timed, Some(start), Some(first), true) = (
            self.passes,
            self.fill.start.take(),
            self.fill.first.take(),
            self.fill.n >= 2,
        ) {
            let once = first.duration_since(start).as_secs_f64();
            let others = first.elapsed().as_secs_f64() / (self.fill.n - 1) as f64;
            self.fill.s += once - others;
        }
    }

    fn want_warmup(&self) -> bool {
        match std::env::var("PERFSKEL_WARMUP").as_deref() {
            Ok("on") => true,
            Ok("off") => false,
            Ok("") | Err(_) => self.ratio > 1,
            Ok(other) => fatal(&format!(
                "PERFSKEL_WARMUP is `{other}`; it must be `on` or `off`"
            )),
        }
    }

    /// Ends the run: stops the clock after a barrier and prints the result line on
    /// rank 0 (a request still pending is an error). Returns the measured skeleton time in seconds. MPI is
    /// finalized when the skeleton is dropped.
    pub fn finish(mut self) -> f64 {
        let pending = self.requests.pending_names();
        if !pending.is_empty() {
            fatal(&format!(
                "the skeleton ends with request(s) not completed: {}",
                pending.join(", ")
            ));
        }
        self.barrier_world();
        let skeleton_s = self.elapsed();
        self.poller.end();
        // The rank that spent the most in the measured stretches, and its sums; the
        // largest fill.
        let mine = [self.own.s, self.own.app_s, self.fill.s];
        let mut all = vec![0.0f64; 3 * self.n_ranks as usize];
        on_comm!(self.comms[0], c => c.all_gather_into(&mine[..], &mut all[..]));
        let mut busiest = (0.0f64, 0.0f64);
        let mut fill_s = 0.0f64;
        for each in all.chunks_exact(3) {
            if each[0] > busiest.0 {
                busiest = (each[0], each[1]);
            }
            fill_s = fill_s.max(each[2]);
        }
        let own = match self.rest {
            Some(rest) if self.own.measured => Some((busiest.0.min(skeleton_s), busiest.1, rest)),
            _ => None,
        };
        if self.rank == 0 {
            println!(
                "{}",
                result_line(
                    &self.name,
                    &self.backend,
                    self.n_ranks,
                    (self.ratio, self.reached),
                    skeleton_s,
                    self.app_time.as_secs_f64(),
                    self.warmup_s,
                    own,
                    fill_s
                )
            );
        }
        self.requests.clear();
        skeleton_s
    }

    fn run_compute(&mut self, time: &TimeSpec, working_set: Option<u64>, polls: u64) {
        if matches!(self.passes, Passes::WarmingUp | Passes::Measuring) {
            return;
        }
        let span = time.draw(self.rank as usize, &mut self.rng);
        self.kernel.run(span, working_set);
        if polls > 0 {
            self.poller.poll(polls);
        }
    }
}

/// `compute ...`, waiting for `.working_set(..)` and `.run()`.
#[must_use = "a compute span does nothing until `.run()`"]
pub struct Compute<'s> {
    skeleton: &'s mut Skeleton,
    time: TimeSpec,
    working_set: Option<u64>,
    polls: u64,
}

impl Compute<'_> {
    /// `working_set SIZE`: the bytes the kernel touches.
    pub fn working_set(mut self, bytes: u64) -> Self {
        self.working_set = Some(bytes);
        self
    }

    /// `polls N`: after the span, N failed polls of MPI (see the `poll` module).
    pub fn polls(mut self, n: u64) -> Self {
        self.polls = n;
        self
    }

    pub fn run(self) {
        self.skeleton
            .run_compute(&self.time, self.working_set, self.polls);
    }
}

fn members<C: Communicator>(comm: &C) -> (u64, u64, Vec<u64>) {
    let size = comm.size();
    let world = SimpleCommunicator::world().group();
    let ranks: Vec<i32> = (0..size).collect();
    let world_ranks = comm
        .group()
        .translate_ranks(&ranks, &world)
        .into_iter()
        .map(|r| r.map_or(0, |r| r as u64))
        .collect();
    (comm.rank() as u64, size as u64, world_ranks)
}

/// A count as MPI takes it, or a clear error past 2³¹ - 1.
pub(crate) fn count(n: u64) -> i32 {
    i32::try_from(n).unwrap_or_else(|_| fatal(&format!("{n} is too large for an MPI count")))
}

/// The line every perfskel skeleton prints on rank 0 when it ends; the format of
/// `perfskel_compiler::back::RunResult::line`, which `perfskel run` reads back. `own`:
/// where the measuring pass ran, the seconds of the rank that spent the most in the
/// measured stretches, those times their ratios, and the rest ratio; `fill_s`: the
/// largest rank's pipeline fill, counted once (at most what the rest leaves).
#[allow(clippy::too_many_arguments)]
pub fn result_line(
    name: &str,
    backend: &str,
    n_ranks: u64,
    (ratio, reached): (u64, f64),
    skeleton_s: f64,
    app_time_s: f64,
    warmup_s: f64,
    own: Option<(f64, f64, f64)>,
    fill_s: f64,
) -> String {
    let (own_s, own_app_s, rest) = own.unwrap_or((0.0, 0.0, reached));
    let fill_s = fill_s.clamp(0.0, (skeleton_s - own_s).max(0.0));
    let predicted = rest * (skeleton_s - own_s - fill_s) + own_app_s + fill_s;
    format!(
        "perfskel-result skeleton={name} backend={backend} ranks={n_ranks} ratio={ratio} skeleton_s={skeleton_s:.6} predicted_s={predicted:.6} app_time_s={app_time_s:.6} warmup_s={warmup_s:.6} reached={reached:.4} own_s={own_s:.6} own_app_s={own_app_s:.6} rest={rest:.4} fill_s={fill_s:.6}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_line_has_the_compiler_format() {
        assert_eq!(
            result_line("stencil2d", "c", 4, (100, 98.7633), 0.12, 11.8, 0.004, None, 0.0),
            "perfskel-result skeleton=stencil2d backend=c ranks=4 ratio=100 skeleton_s=0.120000 predicted_s=11.851596 app_time_s=11.800000 warmup_s=0.004000 reached=98.7633 own_s=0.000000 own_app_s=0.000000 rest=98.7633 fill_s=0.000000"
        );
        // 0.02 s of the run measured as communication each run of which stands for 2
        // of the application's: 0.1 s × 102 + 0.04 s.
        assert_eq!(
            result_line(
                "s",
                "rust",
                2,
                (100, 100.0),
                0.12,
                11.8,
                0.004,
                Some((0.02, 0.04, 102.0)),
                0.0
            ),
            "perfskel-result skeleton=s backend=rust ranks=2 ratio=100 skeleton_s=0.120000 predicted_s=10.240000 app_time_s=11.800000 warmup_s=0.004000 reached=100.0000 own_s=0.020000 own_app_s=0.040000 rest=102.0000 fill_s=0.000000"
        );
        // A pipeline whose last stage waited 0.01 s before its first iteration: that
        // time counts once, the rest 100 times: 0.11 s × 100 + 0.01 s.
        assert_eq!(
            result_line("p", "rust", 4, (100, 100.0), 0.12, 11.0, 0.0, None, 0.01),
            "perfskel-result skeleton=p backend=rust ranks=4 ratio=100 skeleton_s=0.120000 predicted_s=11.010000 app_time_s=11.000000 warmup_s=0.000000 reached=100.0000 own_s=0.000000 own_app_s=0.000000 rest=100.0000 fill_s=0.010000"
        );
    }
}
