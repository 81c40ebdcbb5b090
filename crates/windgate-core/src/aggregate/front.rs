//! The front end of the per-key window operators ([`super::keyed`]; count windows run on it, session windows,
//! which grew parallel workers of their own, are to move onto it): their sources (a K-slack, an arrival
//! counter and a closed flag each) and the watermark over them, the output columns of the `by` keys and the
//! aggregates, and the reading and admission of a batch.

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_buffer::ScalarBuffer;
use arrow_schema::{DataType, Field, SchemaRef};

use super::function::{AggSpec, ValueClass};
use super::functions::{function, value_class};
use super::input::input_values;
use super::operator::{Stats, batch_name, check_order_by_type, order_by_values, used_columns};
use super::options::WindowAggregateOptions;
use super::partial;
use super::slots::SlotStore;
use super::state::{AggMeta, AggState, InputValues};
use super::strategy::Strategy;
use crate::arrow_io::{as_i64, check_same_type, check_unambiguous, column, time_unit};
use crate::error::{Error, Result};
use crate::order::admission::{BatchAdmission, Rules, admit};
use crate::order::kslack::{KSlack, Lateness, LatenessOpt};
use crate::threads::MAX_THREADS;
use crate::time::Span;
use crate::time::{TimeFormat, TimeUnit};

/// The run parameters of an operator (`who`, for errors) on its own single-threaded engine: `on_late` ("keep"
/// only if the operator `keeps_late` rows), `strategy` "auto" or "reference", and the lateness, threads,
/// `order_by`, sources and `by`.
pub(super) fn validate_run(
    opts: &WindowAggregateOptions,
    who: &str,
    keeps_late: bool,
) -> Result<()> {
    if !keeps_late {
        crate::order::admission::refuse_keep(opts.on_late, who)?;
    }
    if !matches!(opts.strategy, Strategy::Auto | Strategy::Reference) {
        return Err(Error::param(
            "strategy",
            format!(
                "{who} run on their own engine: expected \"auto\" or \"reference\", got {:?}",
                opts.strategy.name()
            ),
        ));
    }
    if let LatenessOpt::Bound(k) = &opts.lateness {
        k.check("lateness")?;
        if let Span::Units(k) = k {
            Lateness::fixed(*k)?;
        }
    }
    if opts.threads == Some(0) || opts.threads.is_some_and(|t| t > MAX_THREADS) {
        return Err(Error::param(
            "threads",
            format!("expected a positive number of threads up to {MAX_THREADS}, or None"),
        ));
    }
    if opts.order_by.as_deref() == Some("") {
        return Err(Error::param("order_by", "expected a column name"));
    }
    if opts.sources == 0 || opts.sources > super::options::MAX_SOURCES {
        return Err(Error::param(
            "sources",
            format!(
                "expected 1 to {} sources, got {}",
                super::options::MAX_SOURCES,
                opts.sources
            ),
        ));
    }
    opts.window().validate_by()
}

/// One source of a per-key operator.
pub(super) struct Source {
    pub kslack: KSlack,
    /// Arrival number of the source's next row (its place in the total order's last tie-break).
    pub seq: u64,
    pub closed: bool,
}

/// The sources of `opts`, before the lateness policy is known (see [`Columns::lateness`]).
pub(super) fn sources(opts: &WindowAggregateOptions) -> Vec<Source> {
    (0..opts.sources)
        .map(|_| Source {
            kslack: KSlack::new(Lateness::Exact),
            seq: opts.row_offset,
            closed: false,
        })
        .collect()
}

/// The watermark over open sources: `None` while some open source has none, `i64::MAX` once all closed.
pub(super) fn watermark(sources: &[Source]) -> Option<i64> {
    let mut wm = i64::MAX;
    for s in sources.iter().filter(|s| !s.closed) {
        wm = wm.min(s.kslack.watermark()?);
    }
    Some(wm)
}

/// `source` must exist, and (`push`) be open.
pub(super) fn check_source(sources: &[Source], source: usize, push: bool) -> Result<()> {
    if source >= sources.len() {
        return Err(Error::param(
            "source",
            format!(
                "source {source} does not exist; this operator has {} source(s)",
                sources.len()
            ),
        ));
    }
    if push && sources[source].closed {
        return Err(Error::param(
            "source",
            format!("source {source} was closed"),
        ));
    }
    Ok(())
}

/// What the input schema fixes: the time column's type and unit, the `by` columns' fields and the
/// aggregates' metadata and output fields.
pub(super) struct Columns {
    pub time_type: DataType,
    pub unit: TimeUnit,
    pub lateness: Lateness,
    /// The `by` columns' output fields (nullable), in order.
    pub by: Vec<Field>,
    pub metas: Vec<Arc<AggMeta>>,
    /// The aggregates' output fields, in order.
    pub aggs: Vec<Field>,
}

impl Columns {
    /// Reads `schema` (dictionaries decoded) for the columns `opts` and `specs` name.
    pub fn bind(
        opts: &WindowAggregateOptions,
        specs: &[AggSpec],
        schema: &SchemaRef,
    ) -> Result<Self> {
        for name in used_columns(opts, specs) {
            check_unambiguous(schema, &name, "data")?;
        }
        let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
        let field = |name: &str, param: &str| {
            schema
                .field_with_name(name)
                .map_err(|_| Error::column_not_found(param, name, &names))
        };
        let time_type = field(&opts.time, "time")?.data_type().clone();
        let unit = time_unit(&time_type, &opts.time)?;
        if let Some(c) = &opts.order_by {
            check_order_by_type(c, field(c, "order_by")?.data_type())?;
        }
        let lateness = opts.lateness_policy(unit, &opts.time)?;
        let mut by = vec![];
        for b in &opts.by {
            by.push(Field::new(b, field(b, "by")?.data_type().clone(), true));
        }
        let (mut metas, mut aggs) = (vec![], vec![]);
        for spec in specs {
            let meta = match &spec.column {
                None => AggMeta {
                    spec: spec.clone(),
                    input_type: DataType::Int64,
                    class: ValueClass::Int,
                },
                Some(c) => {
                    let dt = field(c, "aggs")?.data_type().clone();
                    AggMeta {
                        spec: spec.clone(),
                        class: value_class(&dt, spec.func, c)?,
                        input_type: dt,
                    }
                }
            };
            let nullable = function(spec.func).output_nullable();
            aggs.push(Field::new(&spec.output_name, meta.output_type(), nullable));
            metas.push(Arc::new(meta));
        }
        Ok(Self {
            time_type,
            unit,
            lateness,
            by,
            metas,
            aggs,
        })
    }

    /// The type of the window's time columns: the time column's (int64 for a plain integer column).
    pub fn window_type(&self) -> DataType {
        if self.unit == TimeUnit::Plain {
            DataType::Int64
        } else {
            self.time_type.clone()
        }
    }

    /// The output fields: the `by` columns, `window` (the operator's own columns), then the aggregates; an
    /// aggregate whose name clashes with another column is an error naming `aggs`.
    pub fn output_fields(&self, window: Vec<Field>) -> Result<Vec<Field>> {
        let fields: Vec<Field> = (self.by.iter().cloned())
            .chain(window)
            .chain(self.aggs.iter().cloned())
            .collect();
        for (i, f) in fields.iter().enumerate() {
            if fields[..i].iter().any(|g| g.name() == f.name()) {
                return Err(Error::param(
                    "aggs",
                    format!(
                        "output column '{}' clashes with another output column (rename the input)",
                        f.name()
                    ),
                ));
            }
        }
        Ok(fields)
    }
}

/// A batch read and admitted, nothing committed yet.
pub(super) struct Read {
    pub ts: ScalarBuffer<i64>,
    pub order_by: Option<ScalarBuffer<i64>>,
    pub inputs: Vec<InputValues>,
    pub by_cols: Vec<ArrayRef>,
    pub admitted: BatchAdmission,
    /// The source's K-slack after the batch (committed by [`Read::commit`]).
    pub kslack: KSlack,
}

/// Reads `batch` of `source` against the bound `schema` and admits its rows on a copy of the source's
/// K-slack: on error nothing has changed.
pub(super) fn read(
    opts: &WindowAggregateOptions,
    specs: &[AggSpec],
    schema: &SchemaRef,
    format: TimeFormat,
    src: &Source,
    batch: &RecordBatch,
    source: usize,
) -> Result<Read> {
    let what = batch_name(source);
    for name in used_columns(opts, specs) {
        check_same_type(schema, batch, &name, &what)?;
        check_unambiguous(batch.schema_ref(), &name, "data")?;
    }
    let time_col = column(batch, &opts.time, "time")?;
    let ts = as_i64(time_col, &opts.time)?;
    let order_by = order_by_values(batch, opts.order_by.as_deref(), &what, 0)?;
    let mut inputs = vec![];
    for spec in specs {
        inputs.push(match &spec.column {
            None => InputValues::Star,
            Some(c) => {
                let col = column(batch, c, "aggs")?;
                let dt = col.data_type();
                input_values(
                    col,
                    value_class(dt, spec.func, c)?,
                    !function(spec.func).reads_values(),
                    c,
                )?
            }
        });
    }
    let by_cols: Vec<ArrayRef> = (opts.by.iter())
        .map(|c| column(batch, c, "by").cloned())
        .collect::<Result<_>>()?;
    let mut kslack = src.kslack.clone();
    let rules = Rules {
        time: &opts.time,
        null_time: opts.null_time,
        on_late: opts.on_late,
        source,
        what: &what,
        first_row: 0,
        format,
        range: None,
    };
    let admitted = admit(&mut kslack, &ts, time_col.logical_nulls().as_ref(), &rules)?;
    Ok(Read {
        ts,
        order_by,
        inputs,
        by_cols,
        admitted,
        kslack,
    })
}

impl Read {
    /// Commits the batch to its source: the K-slack moves, and the arrival counter passes the batch's rows.
    /// Returns the arrival number of the batch's first row.
    pub fn commit(&self, src: &mut Source) -> u64 {
        src.kslack = self.kslack.clone();
        let seq0 = src.seq;
        src.seq += self.ts.len() as u64;
        seq0
    }
}

/// The error of a snapshot whose contents are not what a per-key operator writes.
pub(super) fn corrupt(message: impl std::fmt::Display) -> Error {
    Error::new(
        crate::error::ErrorKind::Snapshot,
        format!("data: not a readable windgate snapshot: {message}"),
    )
}

/// What a checkpoint writes of one source.
#[derive(serde::Serialize, serde::Deserialize)]
struct SourceState {
    kslack: KSlack,
    seq: u64,
    closed: bool,
}

/// What a checkpoint of a per-key operator writes besides its engine: the sources, the counters, and whether
/// the input schema was bound.
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct RunState {
    sources: Vec<SourceState>,
    batches_in: u64,
    rows_in: u64,
    late_rows: u64,
    null_time_rows: u64,
    rows_out: u64,
    windows_out: u64,
    pub bound: bool,
}

impl RunState {
    pub fn of(sources: &[Source], s: &Stats, bound: bool) -> Self {
        Self {
            sources: (sources.iter())
                .map(|src| SourceState {
                    kslack: src.kslack.clone(),
                    seq: src.seq,
                    closed: src.closed,
                })
                .collect(),
            batches_in: s.batches_in,
            rows_in: s.rows_in,
            late_rows: s.late_rows,
            null_time_rows: s.null_time_rows,
            rows_out: s.rows_out,
            windows_out: s.windows_out,
            bound,
        }
    }

    /// How many sources the state has.
    pub fn sources(&self) -> usize {
        self.sources.len()
    }

    /// Restores the sources (keeping their lateness policy, which the options decide) and the counters.
    pub fn apply(self, sources: &mut [Source], st: &mut Stats) {
        for (src, s) in sources.iter_mut().zip(self.sources) {
            let policy = src.kslack.policy();
            src.kslack = s.kslack.with_policy(policy);
            src.seq = s.seq;
            src.closed = s.closed;
        }
        st.batches_in = self.batches_in;
        st.rows_in = self.rows_in;
        st.late_rows = self.late_rows;
        st.null_time_rows = self.null_time_rows;
        st.rows_out = self.rows_out;
        st.windows_out = self.windows_out;
    }
}

/// The partial states of `batch`'s rows (the checkpoint columns of `metas`' aggregates), each combined into a
/// fresh slot of `store`: the slots, in row order. Combines are exact, so the slots hold the same bits as the
/// rows the states came from.
pub(super) fn import_slots(
    store: &mut SlotStore,
    metas: &[Arc<AggMeta>],
    batch: &RecordBatch,
) -> Result<Vec<u32>> {
    let states: Vec<AggState> = (metas.iter())
        .map(|m| partial::import(m, batch))
        .collect::<Result<_>>()?;
    let slots: Vec<u32> = (0..batch.num_rows()).map(|_| store.alloc()).collect();
    let pairs: Vec<(u32, u32)> = (slots.iter().enumerate())
        .map(|(i, &s)| (s, i as u32))
        .collect();
    for (dst, src) in store.states.iter_mut().zip(&states) {
        dst.combine_pairs(src, &pairs);
    }
    Ok(slots)
}
