//! windgate-core: deterministic parallel sliding-window stream operators over Arrow.
//!
//! Everything algorithmic lives here, free of Python; `windgate-py` only converts and delegates. See
//! `DESIGN.md` for the contracts: time and windows ([`time`]), late rows ([`order::kslack`]), determinism
//! (every engine returns its reference engine's rows in the same order) and errors ([`error`]).

pub mod aggregate;
pub mod arrow_io;
pub mod columnar;
pub mod error;
pub mod exact_sum;
pub mod interrupt;
pub mod join;
pub mod order;
pub mod preference;
pub mod runtime;
mod sync;
pub mod time;
pub mod tpcxbb;

pub use error::{Error, ErrorKind, Result};
