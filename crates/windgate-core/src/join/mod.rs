//! Sliding-window joins (Gulisano et al., ScaleJoin): ScaleJoin's processing threads over a ScaleGate, each storing
//! every n-th tuple and probing its portion of the opposite window, outputs merged by a second ScaleGate in a
//! total order that is the same for any thread count.

mod checkpoint;
mod engine;
pub(crate) mod operator;
pub(crate) mod options;
mod outer;
mod output;
pub(crate) mod prepare;
pub(crate) mod processor;
pub(crate) mod readiness;
pub(crate) mod reference;
pub(crate) mod scale_join;
pub(crate) mod strategy;
pub(crate) mod window;

pub use checkpoint::{OPERATOR as SNAPSHOT_OPERATOR, RUNTIME as RUNTIME_OPTIONS, STATE_VERSION};
pub use operator::{BandJoiner, JoinStats, band_join};
pub use options::{BandJoinOptions, Bounds, JoinHow, Predicate, Semantics};
pub use prepare::{JoinKey, JoinTuple, Side};
pub use processor::{OutKey, OutPair, Processor};
pub use strategy::JoinStrategy;
