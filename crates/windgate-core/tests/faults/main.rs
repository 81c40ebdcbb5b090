//! Operators under hostile use: window aggregation, the band join and deep pipeline expressions at their limits,
//! fed bad, huge, stalled or interrupted input.
//!
//! One test binary for all of them: every integration-test binary is a release link of the whole crate.

mod aggregate;
mod band_join;
mod band_join_limits;
mod columnar_depth;
mod join_support;
