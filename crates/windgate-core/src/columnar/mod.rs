//! Built-in columnar operators for ordered pipelines: the pipeline item is an Arrow batch ([`Chunk`]), and every
//! operator is written so that **a pipeline's result is a function of the row sequence only**: the same rows in
//! the same order whatever the cut of the input into batches, the thread count, the scheduler, the reorder scheme
//! and the partitioning scheme.
//!
//! * Stateless ([`Filter`], [`Project`], [`Pairs`]): row by row, so batch cuts cannot matter.
//! * Partitioned by key ([`Sessionize`], [`WindowCount`], [`LastNBefore`], [`Regression`]): a batch is
//!   routed into one part per partition; outputs are attributed to input rows and merged back in input-row
//!   order, ties in a canonical order of the output columns (see `keyed`). Windows and sessions close by
//!   the operator's *stream time* (running maximum of its time column, minus `lateness`), which every
//!   partition tracks exactly, so closing never depends on which keys share a partition.
//! * Stateful ([`WindowTopK`], [`RunningMean`]): one state over the row sequence.
//!
//! Operators are built in two steps: parameters first ([`ColumnarOp`], e.g. from the spec form
//! [`Value`] that Python passes), then bound to the input schema, which checks every column and type up
//! front and gives the output schema. [`ColumnarPipeline`] chains them and runs them on the ordered runtime.
//!
//! ```
//! use std::sync::Arc;
//! use arrow_array::{Int64Array, RecordBatch};
//! use arrow_schema::{DataType, Field, Schema};
//! use windgate_core::columnar::{ColumnarPipeline, Value};
//! use windgate_core::runtime::pipeline::PipelineOptions;
//!
//! let schema = Arc::new(Schema::new(vec![
//!     Field::new("ts", DataType::Int64, false),
//!     Field::new("user", DataType::Int64, false),
//! ]));
//! let batch = RecordBatch::try_new(schema.clone(), vec![
//!     Arc::new(Int64Array::from(vec![0, 10, 20, 500])),
//!     Arc::new(Int64Array::from(vec![1, 2, 1, 1])),
//! ]).unwrap();
//! let pipeline = ColumnarPipeline::new()
//!     .push("sessionize", &Value::map([("key", "user".into()), ("time", "ts".into()), ("gap", 100.into())]))
//!     .unwrap();
//! let out = pipeline.run(schema, vec![batch], &PipelineOptions { threads: 2, ..Default::default() }).unwrap();
//! let rows: Vec<i64> = out.batches.iter().flat_map(|b| {
//!     b.column_by_name("rows").unwrap().as_any().downcast_ref::<Int64Array>().unwrap().values().to_vec()
//! }).collect();
//! assert_eq!(rows, vec![1, 2, 1]); // user 2's session, user 1's [0, 20], then user 1's [500] at the end
//! ```

mod arith;
mod chunk;
mod expr;
mod filter;
mod keyed;
mod last_n;
mod order;
mod pairs;
mod partition_merge;
mod pipeline;
mod project;
mod rank;
mod regression;
mod running_mean;
mod sessionize;
mod topk;
mod value;
mod window_count;

pub use arith::{ArithOp, Expr};
pub use chunk::Chunk;
pub use expr::{CmpOp, Literal, RowPredicate};
pub use filter::Filter;
pub use last_n::LastNBefore;
pub use pairs::Pairs;
pub use pipeline::{ColumnarOutput, ColumnarPipeline, DEFAULT_CHUNK_ROWS, OPERATORS, RunMode};
pub use project::Project;
pub use regression::Regression;
pub use running_mean::RunningMean;
pub use sessionize::Sessionize;
pub use topk::WindowTopK;
pub use value::{MAX_EXPR_DEPTH, MAX_SPEC_NESTING, Value};
pub use window_count::WindowCount;

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use arrow_schema::{DataType, SchemaRef};

use crate::arrow_io::{int_column_as, time_unit};
use crate::error::{Error, ErrorKind, Result};
use crate::runtime::pipeline::Pipeline;
use crate::time::Span;
use crate::time::TimeUnit;

/// Partitions of a partitioned operator unless the caller says otherwise: enough to spread keys over a few
/// dozen workers (hybrid queue), few enough that routing a part to each partition per batch stays cheap.
/// It never changes the result.
pub const DEFAULT_PARTITIONS: usize = 32;

/// An operator of a columnar pipeline, before it knows its input schema.
pub trait ColumnarOp: Send + Sync + std::fmt::Debug {
    /// The operator's kind (`"filter"`, `"sessionize"`, ...), also its name in stats.
    fn name(&self) -> &'static str;
    /// Checks the operator against its input schema: every column and type, with errors naming the
    /// parameter; gives the output schema and the operator ready to add to a pipeline.
    fn bind(&self, input: &SchemaRef) -> Result<Bound>;
}

/// An operator bound to its input schema.
pub struct Bound {
    pub output: SchemaRef,
    add: Box<dyn FnOnce(Pipeline<Chunk>) -> Pipeline<Chunk> + Send>,
}

impl Bound {
    pub(crate) fn new(
        output: SchemaRef,
        add: impl FnOnce(Pipeline<Chunk>) -> Pipeline<Chunk> + Send + 'static,
    ) -> Self {
        Self {
            output,
            add: Box::new(add),
        }
    }

    /// Appends the operator to `pipeline`.
    pub fn add_to(self, pipeline: Pipeline<Chunk>) -> Pipeline<Chunk> {
        (self.add)(pipeline)
    }
}

/// Every batch must have the schema the operator was bound to (same column names and types).
pub(crate) fn check_schema(op: &str, expected: &SchemaRef, batch: &RecordBatch) -> Result<()> {
    let got = batch.schema_ref();
    if Arc::ptr_eq(expected, got) || expected.fields() == got.fields() {
        return Ok(());
    }
    Err(Error::new(
        ErrorKind::SchemaMismatch,
        format!(
            "{op}: a batch has the columns ({}), but the pipeline was built for ({})",
            describe_fields(got),
            describe_fields(expected)
        ),
    ))
}

fn describe_fields(schema: &SchemaRef) -> String {
    schema
        .fields()
        .iter()
        .map(|f| format!("{}: {}", f.name(), f.data_type()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A time column: its index, type and unit (for duration strings).
pub(crate) struct TimeColumn {
    pub index: usize,
    pub name: String,
    pub data_type: DataType,
    pub unit: TimeUnit,
}

impl TimeColumn {
    pub fn bind(schema: &SchemaRef, name: &str, param: &str) -> Result<Self> {
        let index = crate::keys::column_index(schema, name, param)?;
        let data_type = schema.field(index).data_type().clone();
        let unit = time_unit(&data_type, name)?;
        Ok(Self {
            index,
            name: name.to_string(),
            data_type,
            unit,
        })
    }

    /// A duration parameter in this column's unit.
    pub fn span(&self, span: &Span, param: &str) -> Result<i64> {
        span.resolve(self.unit, &self.name, param)
    }

    /// Output times as an array of the column's type.
    pub fn array(&self, values: Vec<i64>) -> Result<ArrayRef> {
        int_column_as(Arc::new(Int64Array::from(values)), &self.data_type)
    }
}

/// Output column names must be unique; `param` is the parameter whose names collided.
pub(crate) fn check_unique(fields: &[arrow_schema::Field], param: &str) -> Result<()> {
    for (i, f) in fields.iter().enumerate() {
        if fields[..i].iter().any(|g| g.name() == f.name()) {
            return Err(Error::param(
                param,
                format!("the output would have two columns named {:?}", f.name()),
            ));
        }
    }
    Ok(())
}
