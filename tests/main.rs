//! The integration test binary: one executable, one module per area.

mod common;
mod dsl;
