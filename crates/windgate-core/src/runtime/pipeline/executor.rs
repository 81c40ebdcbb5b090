//! The parallel executor (in progress: delegates to the sequential one).

use super::operator::Op;
use super::options::PipelineOptions;
use super::stats::PipelineStats;
use crate::error::Result;

pub(crate) fn run<T: Send + 'static>(
    ops: Vec<Op<T>>,
    input: impl IntoIterator<Item = T>,
    _options: &PipelineOptions,
    sink: &mut dyn FnMut(T),
    check: &mut dyn FnMut() -> Result<()>,
) -> Result<PipelineStats> {
    super::sequential::run(ops, input, sink, check)
}
