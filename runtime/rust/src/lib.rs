//! perfskel-runtime: an embedded Rust DSL for MPI performance skeletons, over rsmpi.
//!
//! A performance skeleton is a short SPMD program that communicates and computes like
//! an MPI application. perfskel's Rust back end generates programs in this DSL, one
//! statement per line of the `.skel` file; people can also write skeletons directly:
//!
//! ```no_run
//! use perfskel_runtime::prelude::*;
//!
//! let mut sk = Skeleton::builder("halo", Topology::grid(&[2, 2]))
//!     .app_time(secs(1.0))
//!     .working_sets(&[mib(2)])
//!     .init();
//! let (rw, sw) = (sk.request("rw"), sk.request("sw"));
//! while sk.pass() {
//!     for _ in 0..100 {
//!         sk.compute(ms(5.0)).working_set(mib(2)).run();
//!         sk.irecv(WEST, kib(4)).tag(1).start(rw);
//!         sk.isend(EAST, kib(4)).tag(1).start(sw);
//!         sk.waitall(&[rw, sw]);
//!         sk.allreduce(bytes(8)).run();
//!     }
//! }
//! sk.finish();
//! ```
//!
//! - [`Skeleton::builder`] names the skeleton and its [`Topology`]; `init` starts MPI,
//!   creates the world communicator (an MPI cartesian communicator for grids, rings and
//!   chains), calibrates the compute kernel, and starts the clock after a barrier.
//! - [`Skeleton::pass`] loops over the passes: at a ratio above 1 (`.ratio(K)`) an
//!   untimed warm-up pass without compute, then the timed pass, which restarts the
//!   clock (`PERFSKEL_WARMUP=on`/`off` overrides). Communicators are made before it.
//!   With `.rest(R)` a measuring pass without compute comes between them: it times the
//!   stretches between [`Skeleton::own_begin`] and [`Skeleton::own_end`] (communication
//!   that loops cut less than K, each with its own ratio), and the prediction counts
//!   them by their own ratios and the rest of the time by R. A loop that fills like a
//!   pipeline goes between [`Skeleton::fill_begin`] and [`Skeleton::fill_end`], each
//!   iteration ending with [`Skeleton::fill_iteration`]: in the timed pass each rank's
//!   first iteration less the mean of its others is its fill, and the prediction counts
//!   the largest rank's once.
//! - Operations are builders: `.tag(..)`, `.on(comm)`, `.root(..)` set clauses;
//!   `.run()` runs a blocking operation, `.start(request)` posts a nonblocking one.
//! - Directions ([`EAST`], [`NEXT`], [`child`]`(i)`, ...) are resolved in the
//!   communicator's topology; a missing neighbour makes the operation do nothing, like
//!   `MPI_PROC_NULL`. [`rank`]`(r)` names a rank, [`ANY`] any source, [`SOURCE`] the
//!   rank the last receive from [`ANY`] got its message from.
//! - Loops and rank conditions are plain Rust over [`Skeleton::rank`],
//!   [`Skeleton::nranks`] and [`Skeleton::coord`].
//! - [`Skeleton::finish`] stops the clock after a barrier and prints the
//!   `perfskel-result` line on rank 0.
//!
//! Misuse that MPI cannot recover from (a direction the topology lacks, a rank out of
//! range, a request started twice) prints an error and aborts the job.

mod buffers;
mod collective;
mod kernel;
mod p2p;
mod poll;
mod requests;
mod skeleton;
mod topology;
mod units;

pub use collective::{Coll, CollOp};
pub use kernel::{ComputeMode, CLOCK_THRESHOLD, DEFAULT_WORKING_SET};
pub use p2p::{rank, P2p, Peer, ANY, SOURCE};
pub use requests::Req;
pub use skeleton::{result_line, Builder, Comm, Compute, Skeleton, WORLD};
pub use topology::*;
pub use units::*;

/// Everything a skeleton program uses.
pub mod prelude {
    pub use crate::collective::CollOp;
    pub use crate::p2p::{rank, Peer, ANY, SOURCE};
    pub use crate::requests::Req;
    pub use crate::skeleton::{Comm, Skeleton, WORLD};
    pub use crate::topology::*;
    pub use crate::units::*;
}
