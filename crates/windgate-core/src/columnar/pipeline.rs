//! [`ColumnarPipeline`]: a chain of columnar operators, bound to an input schema and run on the ordered
//! runtime (parallel, or the sequential executor that defines the result).

use std::cell::RefCell;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

use super::value::Value;
use super::{
    Chunk, ColumnarOp, Filter, LastNBefore, Pairs, Project, Regression, RunningMean, Sessionize,
    WindowCount, WindowTopK, check_schema,
};
use crate::error::{Error, Result};
use crate::runtime::pipeline::{Pipeline, PipelineOptions, PipelineStats};

/// Input batches are cut into chunks of at most this many rows, so that a large batch still spreads over
/// workers. The cut never changes the result.
pub const DEFAULT_CHUNK_ROWS: usize = 8192;

/// The operator kinds [`ColumnarPipeline::push`] knows.
pub const OPERATORS: [&str; 9] = [
    "filter",
    "project",
    "pairs",
    "sessionize",
    "window_count",
    "last_n_before",
    "regression",
    "topk",
    "running_mean",
];

/// A chain of columnar operators. Cheap to clone; each run binds a fresh copy of every operator, so one
/// pipeline can run many times.
#[derive(Debug, Clone, Default)]
pub struct ColumnarPipeline {
    ops: Vec<Arc<dyn ColumnarOp>>,
}

/// How to run.
#[derive(Debug, Clone)]
pub enum RunMode {
    Parallel(PipelineOptions),
    /// The sequential executor (the definition of the result).
    Sequential,
}

/// A finished run.
#[derive(Debug)]
pub struct ColumnarOutput {
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
    pub stats: PipelineStats,
    pub rows_in: u64,
    pub rows_out: u64,
}

impl ColumnarPipeline {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends an operator.
    pub fn then(mut self, op: impl ColumnarOp + 'static) -> Self {
        self.ops.push(Arc::new(op));
        self
    }

    /// Appends an operator from its spec form: `kind` is one of [`OPERATORS`], `params` a dict.
    pub fn push(self, kind: &str, params: &Value) -> Result<Self> {
        Ok(match kind {
            "filter" => self.then(Filter::from_spec(params)?),
            "project" => self.then(Project::from_spec(params)?),
            "pairs" => self.then(Pairs::from_spec(params)?),
            "sessionize" => self.then(Sessionize::from_spec(params)?),
            "window_count" => self.then(WindowCount::from_spec(params)?),
            "last_n_before" => self.then(LastNBefore::from_spec(params)?),
            "regression" => self.then(Regression::from_spec(params)?),
            "topk" => self.then(WindowTopK::from_spec(params)?),
            "running_mean" => self.then(RunningMean::from_spec(params)?),
            _ => {
                return Err(Error::param(
                    "op",
                    format!("unknown operator {kind:?}; expected one of {OPERATORS:?}"),
                ));
            }
        })
    }

    /// Operator names, front to back.
    pub fn names(&self) -> Vec<&'static str> {
        self.ops.iter().map(|o| o.name()).collect()
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The output schema for `input`, checking every operator's columns and types.
    pub fn output_schema(&self, input: &SchemaRef) -> Result<SchemaRef> {
        Ok(self.build(input)?.1)
    }

    /// The runtime pipeline for `input` and its output schema.
    pub fn build(&self, input: &SchemaRef) -> Result<(Pipeline<Chunk>, SchemaRef)> {
        let mut schema = input.clone();
        let mut pipeline = Pipeline::new();
        for op in &self.ops {
            let bound = op.bind(&schema)?;
            schema = bound.output.clone();
            pipeline = bound.add_to(pipeline);
        }
        Ok((pipeline, schema))
    }

    /// Runs whole batches in parallel with `options` and collects the output.
    pub fn run(
        &self,
        schema: SchemaRef,
        batches: impl IntoIterator<Item = RecordBatch>,
        options: &PipelineOptions,
    ) -> Result<ColumnarOutput> {
        self.run_with(
            schema,
            batches.into_iter().map(Ok),
            &RunMode::Parallel(options.clone()),
            DEFAULT_CHUNK_ROWS,
            &mut || Ok(()),
        )
    }

    /// Runs a stream of batches (an error from the stream stops the run with it), cut into chunks of at
    /// most `chunk_rows` rows. `check` is called every few milliseconds (Ctrl-C).
    pub fn run_with(
        &self,
        schema: SchemaRef,
        input: impl Iterator<Item = Result<RecordBatch>>,
        mode: &RunMode,
        chunk_rows: usize,
        check: &mut dyn FnMut() -> Result<()>,
    ) -> Result<ColumnarOutput> {
        if chunk_rows == 0 {
            return Err(Error::param("chunk_rows", "expected at least 1"));
        }
        let (pipeline, out_schema) = self.build(&schema)?;
        let failed: RefCell<Option<Error>> = RefCell::new(None);
        let rows_in = RefCell::new(0u64);
        let chunks = input
            .map_while(|b| match b {
                Ok(b) => Some(b),
                Err(e) => {
                    *failed.borrow_mut() = Some(e);
                    None
                }
            })
            .map_while(|b| match check_schema("data", &schema, &b) {
                Ok(()) => Some(b),
                Err(e) => {
                    *failed.borrow_mut() = Some(e);
                    None
                }
            })
            .flat_map(|b| {
                *rows_in.borrow_mut() += b.num_rows() as u64;
                let n = b.num_rows();
                (0..n.div_ceil(chunk_rows)).map(move |i| {
                    Chunk::new(b.slice(i * chunk_rows, chunk_rows.min(n - i * chunk_rows)))
                })
            });
        let mut batches = Vec::new();
        let mut rows_out = 0u64;
        let mut sink = |c: Chunk| {
            rows_out += c.batch.num_rows() as u64;
            batches.push(c.into_batch());
        };
        let stats = match mode {
            RunMode::Parallel(o) => pipeline.run_with(chunks, o, &mut sink, check),
            RunMode::Sequential => pipeline.run_sequential_with(chunks, &mut sink, check),
        };
        if let Some(e) = failed.into_inner() {
            return Err(e);
        }
        let stats = stats?;
        Ok(ColumnarOutput {
            schema: out_schema,
            batches,
            stats,
            rows_in: rows_in.into_inner(),
            rows_out,
        })
    }
}
