//! Studies over many runs, apart from the passes that make a skeleton: `analyze` (a
//! statistical scalability analysis of profiles of many runs that names the call sites
//! that scale worst) and `validate` (each example application traced, skeletonized and
//! compiled, then timed against its skeleton in several scenarios). They read traces and
//! name back ends through the compiler crate, and bring their own statistics and plots
//! (statrs, plotters, csv), which the compiler crate does not need.

pub mod analyze;
pub mod validate;
