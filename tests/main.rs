//! The integration test binary: one executable, one module per area.

mod analyze;
mod common;
mod dsl;
mod rust_backend;
mod topo;
mod tracer;
