//! The integration test binary: one executable, one module per area.

mod analyze;
mod common;
mod compile;
mod dsl;
mod lammps;
mod otf2;
mod reliability;
mod report;
mod rust_backend;
mod simgrid;
mod skeletonize;
mod topo;
mod tracer;
mod validate;
