//! The perfskel skeleton DSL: the skeleton IR ([`ast`]), its text form ([`parse`],
//! [`print`]) and diagnostics as data ([`diagnostic`]).
//!
//! This crate does no I/O: it takes source text and returns values and diagnostics.

pub mod ast;
pub mod diagnostic;
pub mod lexer;
mod parser;
pub mod printer;

#[cfg(test)]
mod proptests;

pub use diagnostic::{Diag, Severity};
pub use parser::{
    collective_op, parse, parse_parts, KEYWORDS, MAX_BLOCK_DEPTH, MAX_ELSE_IF, MAX_EXPR_COMPLEXITY,
    MAX_EXPR_NESTING,
};
pub use printer::print;
