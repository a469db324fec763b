//! Tests of the scaling pass.
