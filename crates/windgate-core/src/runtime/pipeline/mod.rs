//! Ordered pipelines, as in Prasaad, Ramalingam, Rajan, *Scaling Ordered Stream Processing on Shared-Memory
//! Multicores*: a linear chain of operators run on all cores whose output equals a sequential run over the inputs
//! in arrival order (`docs/architecture.md#ordered-pipelines-an-item-through-the-reorder-buffer`).
//!
//! * `operator`: the three kinds (stateless, partitioned stateful, stateful) as traits, plus closure
//!   adaptors ([`Map`], [`Keyed`]).
//! * `sequential`: the sequential executor ([`Pipeline::run_sequential`]), the definition of the result.
//! * `executor`: one worker per core and a central scheduler handing out time slices by heuristic
//!   ([`SchedulerPolicy`]: CT, LP, QST, ET); stateless operators on an MPMC worklist, partitioned ones on the
//!   hybrid queue (or the partitioned-queue baseline), both emitting through a reorder buffer
//!   ([`crate::order::reorder`]); stateful ones on one worker at a time.
//!
//! ```
//! use windgate_core::runtime::pipeline::{Map, Pipeline, PipelineOptions};
//! let pipeline = Pipeline::new()
//!     .stateless(Map::new("odd", |x: u64, out: &mut Vec<u64>| if x % 2 == 1 { out.push(x) }))
//!     .stateless(Map::new("twice", |x: u64, out: &mut Vec<u64>| out.extend([x, x])));
//! let out = pipeline.run(0..6, &PipelineOptions { threads: 2, ..Default::default() }).unwrap();
//! assert_eq!(out.items, vec![1, 1, 3, 3, 5, 5]);
//! ```

mod executor;
pub(crate) mod operator;
mod options;
mod scheduler;
mod sequential;
mod stage;
mod stats;

pub use operator::{Keyed, Map, OpKind, Partitioned, Partitioner, Stateful, Stateless};
pub use options::{Partitioning, PipelineOptions, ReorderScheme, SchedulerPolicy};
pub use stats::{OpStats, PipelineStats};

use crate::error::Result;
use operator::Op;

/// A chain of operators over items of type `T`, built front to back.
pub struct Pipeline<T> {
    ops: Vec<Op<T>>,
}

/// A finished run: the output items in order and the report.
#[derive(Debug)]
pub struct RunOutput<T> {
    pub items: Vec<T>,
    pub stats: PipelineStats,
}

impl<T: Send + 'static> Default for Pipeline<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Send + 'static> Pipeline<T> {
    pub fn new() -> Self {
        Self { ops: Vec::new() }
    }

    pub fn stateless(mut self, op: impl Stateless<T> + 'static) -> Self {
        self.ops.push(Op::Stateless(Box::new(op)));
        self
    }

    pub fn partitioned(mut self, op: impl Partitioned<T> + 'static) -> Self {
        self.ops.push(Op::Partitioned(Box::new(op)));
        self
    }

    pub fn stateful(mut self, op: impl Stateful<T> + 'static) -> Self {
        self.ops.push(Op::Stateful(Box::new(op)));
        self
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Operator names and kinds, front to back.
    pub fn describe(&self) -> Vec<(String, OpKind)> {
        self.ops
            .iter()
            .map(|o| (o.name().to_string(), o.kind()))
            .collect()
    }

    /// Runs the whole input on `options.threads` workers and collects the output.
    pub fn run(
        self,
        input: impl IntoIterator<Item = T>,
        options: &PipelineOptions,
    ) -> Result<RunOutput<T>> {
        let mut items = Vec::new();
        let stats = self.run_with(input, options, &mut |t| items.push(t), &mut || Ok(()))?;
        Ok(RunOutput { items, stats })
    }

    /// Runs the whole input on `options.threads` workers; output items go to `sink` in order, on the
    /// caller's thread, as they leave the pipeline. `check` is called every few milliseconds on the caller's
    /// thread; an error from it stops the run (Ctrl-C).
    pub fn run_with(
        self,
        input: impl IntoIterator<Item = T>,
        options: &PipelineOptions,
        sink: &mut dyn FnMut(T),
        check: &mut dyn FnMut() -> Result<()>,
    ) -> Result<PipelineStats> {
        options.validate()?;
        executor::run(self.ops, input, options, sink, check)
    }

    /// The sequential executor (the definition of the result): same output, one thread, no scheduler.
    pub fn run_sequential(self, input: impl IntoIterator<Item = T>) -> Result<RunOutput<T>> {
        let mut items = Vec::new();
        let stats = self.run_sequential_with(input, &mut |t| items.push(t), &mut || Ok(()))?;
        Ok(RunOutput { items, stats })
    }

    pub fn run_sequential_with(
        self,
        input: impl IntoIterator<Item = T>,
        sink: &mut dyn FnMut(T),
        check: &mut dyn FnMut() -> Result<()>,
    ) -> Result<PipelineStats> {
        sequential::run(self.ops, input, sink, check)
    }
}
