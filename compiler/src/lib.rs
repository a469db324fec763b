//! perfskel's passes over the skeleton IR: the checker (semantic checks and the deadlock
//! simulation) and the rank-level semantics of topologies and expressions shared with
//! back ends; the statistical scalability analysis of profiles (`analyze`). The library
//! does no I/O.

pub mod analyze;
pub mod check;
pub mod semantics;
