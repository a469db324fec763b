//! The integration test binary: one executable, one module per area.

mod analyze;
mod common;
mod dsl;
mod topo;
mod tracer;
mod validate;
