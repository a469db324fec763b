//! The MPI execution core both simulations of a skeleton share: the checker's, which
//! runs every rank under MPI's strictest rules to find deadlocks and mismatches
//! (`check/sim.rs`, a deterministic round-robin schedule), and the timed one, which
//! runs them on a model's clock (`scale/timing.rs`, the earliest clock first, eager and
//! rendezvous sends). What they share is written here once:
//!
//! - [`plan`]: the program lowered to a flat list of operations with names resolved;
//! - [`comms`]: the groups of every communicator declaration;
//! - [`cursor`]: one rank's way through loops, branches and compute to its next
//!   operation with other ranks, and the compute time of loops without communication;
//! - [`queue`]: message matching and the arrival of collectives;
//! - [`kept`]: what a rank keeps of the messages it received (`source`, the tag of a
//!   `while recv`).
//!
//! What a simulation does at a communication operation (how a send completes, what a
//! collective costs, what a mismatch reports) is its own policy.

pub(crate) mod comms;
pub(crate) mod cursor;
pub(crate) mod kept;
pub(crate) mod plan;
pub(crate) mod queue;
