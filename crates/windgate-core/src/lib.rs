//! windgate-core: deterministic parallel sliding-window stream operators over Arrow.
//!
//! Everything algorithmic lives here, free of Python; `windgate-py` only converts and delegates. See
//! `docs/architecture.md` for the layers (which module may import which; `tools/check_layers.py` checks
//! them), the data path of a row through each engine, and the contracts: time and windows ([`time`]), late
//! rows ([`order::kslack`]), determinism (every engine returns its reference engine's rows in the same order)
//! and errors ([`error`]).
//!
//! The modules by layer, lowest first; each imports only from its own layer or lower ones, and no operator
//! imports another:
//! * foundation: [`error`], `sync` (the loom switch and the reference-counted lock-free skip list),
//!   [`interrupt`], [`registry`] (the strategy tables), [`snapshot`] (the checkpoint container), [`time`], `arrow_io`, [`exact_sum`];
//! * shared mechanisms: `keys` (group keys in Arrow's row format), [`threads`];
//! * ordering: [`order`]; runtime: [`runtime`];
//! * operator options: [`window_options`];
//! * operators: [`aggregate`], [`join`], [`preference`], [`columnar`];
//! * applications: [`tpcxbb`].

// Foundation.
pub(crate) mod arrow_io;
pub mod error;
pub mod exact_sum;
pub mod interrupt;
mod kept_threads;
mod prefetch;
pub mod registry;
pub mod snapshot;
mod sync;
pub mod time;
// Shared mechanisms.
pub(crate) mod keys;
pub mod threads;
// Ordering and runtime.
pub mod order;
pub mod runtime;
// Operator options.
pub mod window_options;
// Operators.
pub mod aggregate;
pub mod columnar;
pub mod join;
pub mod preference;
// Applications.
pub mod tpcxbb;

pub use error::{Error, ErrorKind, Result};
