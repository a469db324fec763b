//! File helpers for the CLI.
