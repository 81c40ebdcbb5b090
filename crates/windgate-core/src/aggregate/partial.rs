//! The partial-state format: per-(key, pane) aggregate states as Arrow rows, exact and mergeable in any order.
//!
//! `output="partials"` makes a [`super::WindowAggregator`] emit, instead of windows, one row per (key, pane)
//! once the pane is final; `input="partials"` makes one read such rows and combine them into windows (or into
//! coarser partials). Two-phase plans pre-aggregate where the rows are (a Spark task, another process, a file
//! writer) and ship only the states; the merged windows have the same bits as aggregating every row in one
//! place, because every combine is exact (see [`super::state`]). Each function writes and reads its own
//! columns (see [`super::functions`]).
//!
//! A partial row holds the `by` columns, the time column (the pane's start, in the time column's type), and
//! per aggregate (output name `o`) the columns below ([`FORMAT_VERSION`] 1):
//!
//! | function | columns |
//! |----------|---------|
//! | every one | `o__n` int64: rows the state holds (non-null values; all rows for `count(*)`) |
//! | `sum`, `mean` of integers | `o__sum` decimal128(38, 0): the exact integer sum |
//! | `sum`, `mean` of floats | `o__sum` binary: the exact sum ([`crate::exact_sum::ExactSum::to_bytes`]) |
//! | `var`, `std` | `o__sum`, `o__sumsq` binary: exact sums of `x` and `x²`; `o__sumsq_big` binary or null: squares of `|x| ≥ 2^480`, scaled by `2^-1200` |
//! | `min`, `max` | `o__value` (the input column's type): the extreme, null when `n = 0` |
//! | `first`, `last` | `o__value`, and `o__at_ts`, `o__at_by`, `o__at_source`, `o__at_seq` int64: the row's place in the total order that decides ties |
//!
//! `count` has only `o__n`. The schema's metadata carries `windgate.partials` = the format version when the
//! rows come straight from windgate (engines that drop metadata, like Spark's shuffles, lose nothing else).

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};

use super::function::AggSpec;
use super::functions::function;
use super::state::{AggMeta, AggState};
use crate::error::{Error, Result};

/// Version of the partial-state columns; a reader refuses rows of another version.
pub const FORMAT_VERSION: u32 = 1;

/// Schema metadata key holding [`FORMAT_VERSION`].
pub const METADATA_KEY: &str = "windgate.partials";

/// What an operator reads: raw rows, or partial states of another operator with the same query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum InputKind {
    #[default]
    Rows,
    Partials,
}

/// What an operator emits: windows, or the partial states of its final panes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum OutputKind {
    #[default]
    Windows,
    Partials,
}

impl InputKind {
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "rows" => Ok(InputKind::Rows),
            "partials" => Ok(InputKind::Partials),
            other => Err(Error::param(
                "input",
                format!("expected \"rows\" or \"partials\", got {other:?}"),
            )),
        }
    }
}

impl OutputKind {
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "windows" => Ok(OutputKind::Windows),
            "partials" => Ok(OutputKind::Partials),
            other => Err(Error::param(
                "output",
                format!("expected \"windows\" or \"partials\", got {other:?}"),
            )),
        }
    }
}

/// The names of an aggregate's partial-state columns.
pub(super) fn column_names(spec: &AggSpec) -> impl Iterator<Item = String> + '_ {
    std::iter::once("n")
        .chain(function(spec.func).state_parts().iter().copied())
        .map(|p| format!("{}__{p}", spec.output_name))
}

/// The partial-state columns of one aggregate, in order.
pub(super) fn fields(meta: &AggMeta) -> Vec<Field> {
    let name = |part: &str| format!("{}__{part}", meta.spec.output_name);
    let parts = function(meta.spec.func).state_fields(&meta.input_type, meta.class);
    std::iter::once(Field::new(name("n"), DataType::Int64, false))
        .chain(
            parts
                .into_iter()
                .map(|(part, dt, nullable)| Field::new(name(part), dt, nullable)),
        )
        .collect()
}

/// The metadata of a partial schema.
pub(super) fn metadata() -> std::collections::HashMap<String, String> {
    [(METADATA_KEY.to_string(), FORMAT_VERSION.to_string())].into()
}

/// The aggregate a partial input feeds: its value class and input type read off its state columns.
pub(super) fn meta_from_schema(spec: &AggSpec, schema: &Schema) -> Result<AggMeta> {
    if let Some(v) = schema.metadata().get(METADATA_KEY)
        && v != &FORMAT_VERSION.to_string()
    {
        return Err(Error::param(
            "input",
            format!(
                "the partial states have format version {v}; this windgate reads version {FORMAT_VERSION}"
            ),
        ));
    }
    let col = |part: &str| -> Result<DataType> {
        let n = format!("{}__{part}", spec.output_name);
        let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
        schema
            .field_with_name(&n)
            .map(|f| f.data_type().clone())
            .map_err(|_| Error::column_not_found("input", &n, &names))
    };
    col("n")?;
    let (input_type, class) = function(spec.func).partial_input(spec, &col)?;
    Ok(AggMeta {
        spec: spec.clone(),
        input_type,
        class,
    })
}

/// The states of `slots`, in order, as the aggregate's partial-state columns.
pub(super) fn export(state: &AggState, slots: &[u32]) -> Result<Vec<ArrayRef>> {
    state.export(slots)
}

/// Reads the partial-state columns of `meta`'s aggregate from `batch`: a state with one slot per row.
pub(super) fn import(meta: &Arc<AggMeta>, batch: &RecordBatch) -> Result<AggState> {
    AggState::import(meta, batch)
}
