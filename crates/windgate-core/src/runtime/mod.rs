//! The parallel runtime: operator-owned worker threads on bounded crossbeam channels, the pane farm that runs
//! on them, its schedulers, the PID controller and the utilisation monitor.

pub(crate) mod collector;
pub mod farm;
pub(crate) mod monitor;
pub(crate) mod pane_scheduler;
pub(crate) mod pid;
pub mod pipeline;

pub use farm::{FarmStats, WindowSchedulerKind};
pub use pane_scheduler::PaneSchedulerKind;
