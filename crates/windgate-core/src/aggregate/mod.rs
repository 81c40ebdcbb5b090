//! Window aggregation: aggregate functions as lift/combine/lower, partial states, the engines and the
//! streaming operator. Which engine runs a query is one row of the strategy registry (`aggregate::strategy`); the
//! parallel engines share the types of `parallel`, and the research baselines live apart in `baselines`.

pub(crate) mod baselines;
pub mod batch;
mod count_window;
pub(crate) mod emission;
mod engine;
mod forget;
mod front;
pub(crate) mod function;
mod functions;
mod input;
mod kept_rows;
mod keyed;
mod keyed_checkpoint;
pub(crate) mod operator;
pub(crate) mod options;
pub(crate) mod pane_engine;
mod pane_runs;
pub(crate) mod parallel;
pub(crate) mod partial;
mod ranges;
pub(crate) mod reference;
mod regroup;
mod session;
mod sliding;
pub(crate) mod slots;
pub(crate) mod state;
pub(crate) mod strategy;
mod updates;
pub mod w_hive;

pub use batch::{BatchOutput, window_aggregate, window_aggregate_in_memory};
pub use count_window::{
    COUNT_WINDOW_OPERATOR, CountWindowAggregator, MAX_ROWS, count_window_aggregate,
};
pub use function::{AggFunc, AggSpec};
pub use operator::{Stats, WindowAggregator};
pub use options::{Emit, Strategy, WindowAggregateOptions};
pub use session::{SESSION_OPERATOR, SessionAggregator, session_aggregate};
// The window and late-row types every windowed operator shares live below the operators; they are named here
// too, where `window_aggregate`'s callers look for them.
pub use crate::order::admission::{NullTime, OnLate};
pub use crate::order::kslack::LatenessOpt;
pub use crate::time::Span;
pub use crate::window_options::FarmOptions;
pub use partial::{InputKind, OutputKind};
