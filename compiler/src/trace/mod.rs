//! Trace front end: takes the bytes of a perfskel trace directory (per-rank event files
//! written by the PMPI tracer in `runtime/tracer/`, and `manifest.json`), gives streamed
//! events with their call-site and communicator tables, the manifest, mpiP-style
//! statistics and call sites symbolized from the traced objects' DWARF line tables.
//! Opening files is the caller's business: everything here reads from `std::io::Read`
//! or byte slices.

pub mod collect;
pub mod format;
pub mod manifest;
pub mod reader;
pub mod stats;
pub mod symbolize;

pub use collect::RankTrace;
pub use format::{Op, OpClass};
pub use manifest::{Manifest, RankEntry, RankStatus};
pub use reader::{
    AppSpan, Clock, Completion, Event, Header, Memory, RankReader, TraceError, TraceErrorKind,
};
