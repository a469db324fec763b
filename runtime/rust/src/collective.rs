//! Collective operations, blocking (`.run()`) and nonblocking (`.start(request)`), on
//! any communicator, with the DSL's sizes: the buffer for `bcast`, `reduce`,
//! `allreduce` and `scan`; each rank's contribution for `gather` and `allgather`; the
//! block per rank for `scatter` and `reduce_scatter`; the block per pair for
//! `alltoall`. The `v` forms take one size per world rank ([`crate::per_rank`]):
//! rank r contributes (gatherv, allgatherv), receives (scatterv) or sends to every
//! rank (alltoallv) its own size.
//!
//! Reductions of a multiple of 8 bytes sum doubles, like the applications they stand
//! for; other sizes sum bytes.

use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::request::StaticScope;
use mpi::traits::*;

use crate::buffers::{reserve, view_mut, Elem};
use crate::p2p::{extend, extend_mut};
use crate::requests::Req;
use crate::skeleton::{count, fatal, on_comm, Comm, CommEntry, Skeleton, WORLD};
use crate::units::Sizes;

/// The collective operations of the DSL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    fn reduces(self) -> bool {
        matches!(
            self,
            CollOp::Reduce | CollOp::Allreduce | CollOp::ReduceScatter | CollOp::Scan
        )
    }
}

/// A collective being described; `NB` tells whether it is nonblocking.
#[must_use = "a collective does nothing until `.run()` (blocking) or `.start(request)` (nonblocking)"]
pub struct Coll<'s, const NB: bool> {
    skeleton: &'s mut Skeleton,
    op: CollOp,
    sizes: Sizes,
    root: i64,
    comm: Comm,
}

impl<const NB: bool> Coll<'_, NB> {
    /// `root EXPR` (default 0), a rank of the communicator.
    pub fn root(mut self, root: i64) -> Self {
        self.root = root;
        self
    }

    /// `on COMM` (default [`WORLD`]).
    pub fn on(mut self, comm: Comm) -> Self {
        self.comm = comm;
        self
    }
}

impl Coll<'_, false> {
    /// Runs the blocking collective.
    pub fn run(self) {
        execute(
            self.skeleton,
            self.op,
            &self.sizes,
            self.root,
            self.comm,
            None,
        );
    }
}

impl Coll<'_, true> {
    /// Starts the nonblocking collective and binds it to `req`.
    pub fn start(self, req: Req) {
        execute(
            self.skeleton,
            self.op,
            &self.sizes,
            self.root,
            self.comm,
            Some(req),
        );
    }
}

macro_rules! constructors {
    ($($(#[$doc:meta])* $blocking:ident, $nonblocking:ident => $op:ident;)*) => {
        impl Skeleton {
            /// `barrier`
            pub fn barrier(&mut self) -> Coll<'_, false> {
                self.coll(CollOp::Barrier, Sizes::Fixed(0))
            }

            /// `req H = ibarrier`
            pub fn ibarrier(&mut self) -> Coll<'_, true> {
                self.coll(CollOp::Barrier, Sizes::Fixed(0))
            }

            $(
                $(#[$doc])*
                pub fn $blocking(&mut self, size: impl Into<Sizes>) -> Coll<'_, false> {
                    self.coll(CollOp::$op, size.into())
                }

                $(#[$doc])*
                /// Nonblocking: `.start(request)`.
                pub fn $nonblocking(&mut self, size: impl Into<Sizes>) -> Coll<'_, true> {
                    self.coll(CollOp::$op, size.into())
                }
            )*

            fn coll<const NB: bool>(&mut self, op: CollOp, sizes: Sizes) -> Coll<'_, NB> {
                Coll { skeleton: self, op, sizes, root: 0, comm: WORLD }
            }
        }
    };
}

constructors! {
    /// `bcast SIZE`: the buffer.
    bcast, ibcast => Bcast;
    /// `reduce SIZE`: the buffer.
    reduce, ireduce => Reduce;
    /// `allreduce SIZE`: the buffer.
    allreduce, iallreduce => Allreduce;
    /// `gather SIZE`: each rank's contribution.
    gather, igather => Gather;
    /// `gatherv per_rank(...)`
    gatherv, igatherv => Gatherv;
    /// `scatter SIZE`: the block each rank receives.
    scatter, iscatter => Scatter;
    /// `scatterv per_rank(...)`
    scatterv, iscatterv => Scatterv;
    /// `allgather SIZE`: each rank's contribution.
    allgather, iallgather => Allgather;
    /// `allgatherv per_rank(...)`
    allgatherv, iallgatherv => Allgatherv;
    /// `alltoall SIZE`: the block per pair of ranks.
    alltoall, ialltoall => Alltoall;
    /// `alltoallv per_rank(...)`: what each rank sends to every rank.
    alltoallv, ialltoallv => Alltoallv;
    /// `reduce_scatter SIZE`: the block each rank receives.
    reduce_scatter, ireduce_scatter => ReduceScatter;
    /// `scan SIZE`: the buffer.
    scan, iscan => Scan;
}

/// Element counts of one collective on this rank.
struct Layout {
    n: usize,
    /// This rank's own size (the `v` forms), in elements.
    mine: usize,
    counts: Vec<i32>,
    displs: Vec<i32>,
    is_root: bool,
    root: i32,
    n_send: usize,
    n_recv: usize,
}

impl Layout {
    fn new(op: CollOp, sizes: &Sizes, entry: &CommEntry, elem: usize, root: i64) -> Layout {
        let n = entry.size as usize;
        if !(0..n as i64).contains(&root) {
            fatal(&format!(
                "root {root} is out of range: `{}` has ranks 0 to {}",
                entry.name,
                n as i64 - 1
            ));
        }
        let elems = |bytes: u64| crate::p2p::usize_of(bytes) / elem;
        let me = entry
            .world_ranks
            .get(entry.rank as usize)
            .copied()
            .unwrap_or(0);
        let mine = elems(sizes.of(me as usize));
        let block = mine;
        let counts: Vec<i32> = entry
            .world_ranks
            .iter()
            .map(|&w| count(elems(sizes.of(w as usize)) as u64))
            .collect();
        let mut displs = Vec::with_capacity(n);
        let mut total = 0usize;
        for &c in &counts {
            displs.push(count(total as u64));
            total += c as usize;
        }
        let is_root = entry.rank as i64 == root;
        let at_root = |x: usize| if is_root { x } else { 0 };
        let (n_send, n_recv) = match op {
            CollOp::Barrier => (0, 0),
            CollOp::Bcast => (0, block),
            CollOp::Reduce => (block, at_root(block)),
            CollOp::Allreduce | CollOp::Scan => (block, block),
            CollOp::ReduceScatter => (n * block, block),
            CollOp::Gather => (block, at_root(n * block)),
            CollOp::Gatherv => (mine, at_root(total)),
            CollOp::Scatter => (at_root(n * block), block),
            CollOp::Scatterv => (at_root(total), mine),
            CollOp::Allgather => (block, n * block),
            CollOp::Allgatherv => (mine, total),
            CollOp::Alltoall => (n * block, n * block),
            CollOp::Alltoallv => (n * mine, total),
        };
        Layout {
            n,
            mine,
            counts,
            displs,
            is_root,
            root: root as i32,
            n_send,
            n_recv,
        }
    }

    /// alltoallv: this rank sends `mine` elements to every rank.
    fn uniform_send(&self) -> (Vec<i32>, Vec<i32>) {
        let c = count(self.mine as u64);
        let displs = (0..self.n).map(|i| count((i * self.mine) as u64)).collect();
        (vec![c; self.n], displs)
    }
}

fn execute(sk: &mut Skeleton, op: CollOp, sizes: &Sizes, root: i64, comm: Comm, req: Option<Req>) {
    let all_words = match sizes {
        Sizes::Fixed(b) => b % 8 == 0,
        Sizes::PerRank(list) => list.iter().all(|b| b % 8 == 0),
    };
    if op.reduces() && all_words {
        execute_as::<f64>(sk, op, sizes, root, comm, req);
    } else {
        execute_as::<u8>(sk, op, sizes, root, comm, req);
    }
}

fn execute_as<T: Elem>(
    sk: &mut Skeleton,
    op: CollOp,
    sizes: &Sizes,
    root: i64,
    comm: Comm,
    req: Option<Req>,
) {
    let entry = match sk.comms.get(comm.0) {
        Some(entry) => entry,
        None => fatal("unknown communicator"),
    };
    let lay = Layout::new(op, sizes, entry, T::SIZE, root);
    match req {
        None => {
            let (s, r) = sk.buffers.pair::<T>(lay.n_send, lay.n_recv);
            blocking(entry, op, &lay, s, r);
        }
        Some(req) => {
            let slot = sk.requests.for_post(req);
            let (send_counts, send_displs) = lay.uniform_send();
            slot.counts = [
                lay.counts.clone(),
                lay.displs.clone(),
                send_counts,
                send_displs,
            ];
            reserve(&mut slot.buf, (lay.n_recv * T::SIZE) as u64);
            // SAFETY: the shared send buffer lives until the end of the program; the
            // slot's buffer and counts are neither moved nor freed until the request
            // completes (see `requests.rs`).
            let (s, r, counts) = unsafe {
                (
                    extend(sk.buffers.send::<T>(lay.n_send)),
                    extend_mut(view_mut::<T>(&mut slot.buf, lay.n_recv)),
                    extend(&slot.counts),
                )
            };
            slot.raw = immediate(entry, op, &lay, s, r, counts);
        }
    }
}

fn blocking<T: Elem>(entry: &CommEntry, op: CollOp, lay: &Layout, s: &[T], r: &mut [T]) {
    let sum = SystemOperation::sum();
    on_comm!(entry, c => {
        let root = c.process_at_rank(lay.root);
        match op {
            CollOp::Barrier => c.barrier(),
            CollOp::Bcast => root.broadcast_into(r),
            CollOp::Reduce if lay.is_root => root.reduce_into_root(s, r, sum),
            CollOp::Reduce => root.reduce_into(s, sum),
            CollOp::Allreduce => c.all_reduce_into(s, r, sum),
            CollOp::Scan => c.scan_into(s, r, sum),
            CollOp::ReduceScatter => c.reduce_scatter_block_into(s, r, sum),
            CollOp::Gather if lay.is_root => root.gather_into_root(s, r),
            CollOp::Gather => root.gather_into(s),
            CollOp::Gatherv if lay.is_root => {
                let mut part = PartitionMut::new(r, &lay.counts[..], &lay.displs[..]);
                root.gather_varcount_into_root(s, &mut part);
            }
            CollOp::Gatherv => root.gather_varcount_into(s),
            CollOp::Scatter if lay.is_root => root.scatter_into_root(s, r),
            CollOp::Scatter => root.scatter_into(r),
            CollOp::Scatterv if lay.is_root => {
                let part = Partition::new(s, &lay.counts[..], &lay.displs[..]);
                root.scatter_varcount_into_root(&part, r);
            }
            CollOp::Scatterv => root.scatter_varcount_into(r),
            CollOp::Allgather => c.all_gather_into(s, r),
            CollOp::Allgatherv => {
                let mut part = PartitionMut::new(r, &lay.counts[..], &lay.displs[..]);
                c.all_gather_varcount_into(s, &mut part);
            }
            CollOp::Alltoall => c.all_to_all_into(s, r),
            CollOp::Alltoallv => {
                let (send_counts, send_displs) = lay.uniform_send();
                let send = Partition::new(s, send_counts, send_displs);
                let mut recv = PartitionMut::new(r, &lay.counts[..], &lay.displs[..]);
                c.all_to_all_varcount_into(&send, &mut recv);
            }
        }
    });
}

/// Posts the nonblocking form and returns its raw request.
fn immediate<T: Elem>(
    entry: &CommEntry,
    op: CollOp,
    lay: &Layout,
    s: &'static [T],
    r: &'static mut [T],
    counts: &'static [Vec<i32>; 4],
) -> mpi::ffi::MPI_Request {
    let sum = SystemOperation::sum();
    let sc = StaticScope;
    // rsmpi reads a partition (buffer, counts, displacements) only while posting; MPI
    // reads the counts, kept in the request's slot, until completion. The partition
    // values themselves live on this stack frame, so their `'static` borrows end here.
    // SAFETY (for every `into_raw` below): the request is completed through its slot.
    on_comm!(entry, c => {
        let root = c.process_at_rank(lay.root);
        unsafe {
            match op {
                CollOp::Barrier => c.immediate_barrier().into_raw().0,
                CollOp::Bcast => root.immediate_broadcast_into(sc, r).into_raw().0,
                CollOp::Reduce if lay.is_root => {
                    root.immediate_reduce_into_root(sc, s, r, sum).into_raw().0
                }
                CollOp::Reduce => root.immediate_reduce_into(sc, s, sum).into_raw().0,
                CollOp::Allreduce => c.immediate_all_reduce_into(sc, s, r, sum).into_raw().0,
                CollOp::Scan => c.immediate_scan_into(sc, s, r, sum).into_raw().0,
                CollOp::ReduceScatter => {
                    c.immediate_reduce_scatter_block_into(sc, s, r, sum).into_raw().0
                }
                CollOp::Gather if lay.is_root => root.immediate_gather_into_root(sc, s, r).into_raw().0,
                CollOp::Gather => root.immediate_gather_into(sc, s).into_raw().0,
                CollOp::Gatherv if lay.is_root => {
                    let mut part = PartitionMut::new(r, &counts[0][..], &counts[1][..]);
                    root.immediate_gather_varcount_into_root(sc, s, extend_mut(&mut part))
                        .into_raw()
                        .0
                }
                CollOp::Gatherv => root.immediate_gather_varcount_into(sc, s).into_raw().0,
                CollOp::Scatter if lay.is_root => root.immediate_scatter_into_root(sc, s, r).into_raw().0,
                CollOp::Scatter => root.immediate_scatter_into(sc, r).into_raw().0,
                CollOp::Scatterv if lay.is_root => {
                    let part = Partition::new(s, &counts[0][..], &counts[1][..]);
                    root.immediate_scatter_varcount_into_root(sc, extend(&part), r)
                        .into_raw()
                        .0
                }
                CollOp::Scatterv => root.immediate_scatter_varcount_into(sc, r).into_raw().0,
                CollOp::Allgather => c.immediate_all_gather_into(sc, s, r).into_raw().0,
                CollOp::Allgatherv => {
                    let mut part = PartitionMut::new(r, &counts[0][..], &counts[1][..]);
                    c.immediate_all_gather_varcount_into(sc, s, extend_mut(&mut part))
                        .into_raw()
                        .0
                }
                CollOp::Alltoall => c.immediate_all_to_all_into(sc, s, r).into_raw().0,
                CollOp::Alltoallv => {
                    let send = Partition::new(s, &counts[2][..], &counts[3][..]);
                    let mut recv = PartitionMut::new(r, &counts[0][..], &counts[1][..]);
                    c.immediate_all_to_all_varcount_into(sc, extend(&send), extend_mut(&mut recv))
                        .into_raw()
                        .0
                }
            }
        }
    })
}
