//! The parallel runtime: operator-owned worker threads on bounded crossbeam channels, the pane farm that runs
//! on them, its schedulers, the PID controller and the utilisation monitor.

pub mod farm;
pub mod monitor;
pub mod pane_scheduler;
pub mod pid;
pub mod pipeline;

pub use farm::{Farm, FarmConfig, FarmQuery, FarmStats, Routed, WindowSchedulerKind};
pub use pane_scheduler::{PaneScheduler, PaneSchedulerKind};
pub use pid::{Pid, PidConfig};
