//! Preference queries (brief 004 §1.2, DESIGN §5): skyline, top-δ dominant and top-k, as single-threaded
//! kernels over columnar `f64` points.
//!
//! Every kernel is an incremental store that plays both farm roles: `insert` is G (a pane partition grows one
//! row at a time) and `merge` is H (a window combines pane partitions). Both are exact and order-independent:
//! the store's contents depend only on the *set* of points inserted, never on the order they came in, so the
//! parallel farm cannot change a result (DESIGN §4).
//!
//! Points are identified by their position in the total order (`u64`), which is what the caller uses to pick
//! the output rows and to break ties. NaN never reaches this layer: callers reject it, naming the column.
//!
//! Each module also has a brute-force reference (`*_reference`) that applies the definition over all pairs;
//! the property tests check the kernels against it.

pub mod dominance;
pub mod skyline;
mod store;
pub mod top_dominant;
pub mod topk;

pub use dominance::{Compare, Prefer, compare, dominates, k_dominance};
pub use skyline::{Skyline, skyline_reference};
pub use top_dominant::{TopDominant, top_dominant_reference};
pub use topk::{TopK, topk_reference};
