//! Preference queries: skyline, top-δ dominant and top-k over sliding windows, as in
//! Mencagli et al., *Parallel Continuous Preference Queries over Out-of-Order and Bursty Data Streams*.
//!
//! The kernels (`skyline`, `top_dominant`, `topk`) are single-threaded incremental stores over columnar `f64`
//! points, and each plays both farm roles: `insert` is G (a pane partition grows one row at a time) and `merge`
//! is H (a window combines pane partitions). Both are exact and order-independent: a store's answer depends
//! only on the *set* of points inserted, never on the order they came in, so the parallel farm cannot change a
//! result (`docs/architecture.md#determinism`).
//!
//! Points are identified by their [`PackedOrderKey`], their position in the total order `(ts, arrival)`, which picks
//! the output rows and breaks ties. NaN never reaches the kernels: the operator rejects it, naming the column.
//!
//! Each kernel module also has a brute-force reference (`*_reference`) applying the definition over all pairs;
//! the property tests check the kernels against it. Above the kernels: `query` (the kernels as a
//! `FarmQuery`), `engine` (pane, farm, per-window recomputation and
//! reference engines), `operator` (the streaming operator and the batch function) and `checkpoint` (its
//! snapshots).

mod checkpoint;
pub(crate) mod dominance;
pub(crate) mod engine;
pub(crate) mod operator;
pub(crate) mod options;
pub(crate) mod query;
mod retained;
pub(crate) mod skyline;
mod store;
pub(crate) mod strategy;
pub(crate) mod top_dominant;
pub(crate) mod topk;

pub use checkpoint::{OPERATOR as SNAPSHOT_OPERATOR, STATE_VERSION as SNAPSHOT_VERSION};
pub use dominance::{Compare, Prefer, compare, dominates, k_dominance};
pub use operator::{PreferenceOperator, PreferenceStats, preference};
pub use options::{PreferenceOptions, QueryKind};
pub use skyline::{Skyline, skyline_reference};
pub use strategy::PreferenceStrategy;
pub use top_dominant::{TopDominant, top_dominant_reference};
pub use topk::{TopK, topk_reference};

/// A row's position in the total order: the time (sign bit flipped, so it sorts as unsigned) in the high 64
/// bits, the arrival position in the low 64. Ordering keys orders rows by `(ts, arrival)`.
pub type PackedOrderKey = u128;

/// The order key of a row with time `ts` that arrived `seq`-th.
#[inline]
pub fn order_key(ts: i64, seq: u64) -> PackedOrderKey {
    (((ts as u64) ^ (1 << 63)) as u128) << 64 | seq as u128
}

/// The arrival position of an order key.
#[inline]
pub fn arrival_of(key: PackedOrderKey) -> u64 {
    key as u64
}
