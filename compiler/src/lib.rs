//! perfskel's passes over the skeleton IR and its inputs: the checker (semantic checks
//! and the deadlock simulation), the rank-level semantics of topologies and expressions
//! shared with back ends, logicalization of communication matrices, compression,
//! skeletonization, scaling with its timed simulation (over the execution core both
//! simulations share), the back ends and the pipeline that strings them together. The
//! studies over many runs (`analyze`, `validate`) are the `perfskel-studies` crate. The
//! library does no I/O.

pub mod back;
pub mod check;
pub mod compress;
mod exec;
pub mod logicalize;
pub mod pipeline;
pub mod scale;
pub mod semantics;
pub mod skeletonize;
pub mod stats;
pub mod trace;
