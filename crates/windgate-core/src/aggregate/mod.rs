//! Window aggregation: aggregate functions as lift/combine/lower, partial states, the engines and the
//! streaming operator.

pub mod batch;
pub mod emission;
mod engine;
pub mod farm_engine;
pub mod function;
mod functions;
mod input;
pub mod keys;
pub mod line;
pub mod multiway;
pub mod operator;
pub mod options;
pub mod pane_engine;
pub mod partial;
pub mod reference;
pub mod ring;
pub mod slots;
pub mod state;
pub mod w_hive;

pub use batch::{window_aggregate, window_aggregate_in_memory};
pub use function::{AggFunc, AggSpec};
pub use operator::{Stats, WindowAggregator};
pub use options::{
    FarmOptions, LatenessOpt, NullTime, OnLate, Span, Strategy, WindowAggregateOptions,
};
pub use partial::{InputKind, OutputKind};
