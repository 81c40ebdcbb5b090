//! `CountWindowAggregator`: the streaming operator of count windows, and `count_window_aggregate`, the batch
//! function built on it.
//!
//! The front end is the per-key operators' ([`crate::aggregate::front`]: sources, admission, watermark, key
//! and aggregate columns); what differs is the engine ([`super::engine`] or [`super::reference`]) and the
//! output: the `by` columns, `window_first` and `window_last` (the times of the first and last row covered,
//! in the time column's type), `window_rows` (int64), then the aggregates, in the total order of the rows that
//! completed the windows.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use super::engine::CountEngine;
use super::reference::CountReference;
use super::{Counts, Fired, counts};
use crate::aggregate::forget::forget_idle_keys;
use crate::aggregate::front::{self, Columns, Source};
use crate::aggregate::function::AggSpec;
use crate::aggregate::operator::Stats;
use crate::aggregate::options::WindowAggregateOptions;
use crate::aggregate::slots::SlotStore;
use crate::aggregate::state::{AggMeta, RowOrder};
use crate::aggregate::strategy::Strategy;
use crate::arrow_io::{column, decode_dictionaries, int_column_as, plain_schema};
use crate::error::{Error, ErrorKind, Lifecycle, Result};
use crate::keys::KeyDict;
use crate::order::kslack::KSlack;
use crate::time::TimeFormat;

mod checkpoint;

pub use checkpoint::OPERATOR as COUNT_WINDOW_OPERATOR;

enum Engine {
    Stream(CountEngine),
    Reference(CountReference),
}

/// What is fixed once the first schema is seen.
struct Bound {
    schema: SchemaRef,
    format: TimeFormat,
    keys: KeyDict,
    metas: Vec<Arc<AggMeta>>,
    engine: Engine,
    output_schema: SchemaRef,
}

/// The streaming operator of count windows.
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{Float64Array, Int64Array, RecordBatch};
/// use windgate_core::aggregate::{CountWindowAggregator, LatenessOpt, Span, WindowAggregateOptions};
///
/// // Windows of 3 rows, one every 2 rows.
/// let mut opts = WindowAggregateOptions::count("ts", 3, Some(2), vec![("v".into(), vec!["sum".into()])]);
/// opts.lateness = LatenessOpt::Bound(Span::Units(0));
/// let mut agg = CountWindowAggregator::new(opts).unwrap();
/// let batch = RecordBatch::try_from_iter([
///     ("ts", Arc::new(Int64Array::from(vec![1, 2, 3, 4, 5])) as _),
///     ("v", Arc::new(Float64Array::from(vec![1.0, 2.0, 3.0, 4.0, 5.0])) as _),
/// ]).unwrap();
/// // The watermark (5) passed rows 1 to 4: windows of rows 1-2 and 2-4.
/// assert_eq!(agg.push(&batch, 0).unwrap().num_rows(), 2);
/// // The end of the stream releases row 5, which completes no window (as in Flink).
/// assert_eq!(agg.flush().unwrap().num_rows(), 0);
/// ```
pub struct CountWindowAggregator {
    opts: WindowAggregateOptions,
    specs: Vec<AggSpec>,
    counts: Counts,
    bound: Option<Bound>,
    sources: Vec<Source>,
    stats: Stats,
    life: Lifecycle,
    reference: bool,
}

impl CountWindowAggregator {
    /// The operator of `opts`, whose `rows` must be set.
    pub fn new(opts: WindowAggregateOptions) -> Result<Self> {
        if opts.rows.is_none() {
            return Err(Error::param(
                "rows",
                "a count-window operator needs rows= (rows per window)",
            ));
        }
        let specs = opts.validate()?;
        let reference = opts.strategy == Strategy::Reference;
        let stats = Stats {
            threads: 1,
            strategy: if reference { "reference" } else { "count" },
            ..Stats::default()
        };
        Ok(Self {
            counts: counts(&opts),
            sources: front::sources(&opts),
            opts,
            specs,
            bound: None,
            stats,
            life: Lifecycle::default(),
            reference,
        })
    }

    pub fn options(&self) -> &WindowAggregateOptions {
        &self.opts
    }

    /// The output schema, once the input schema is known.
    pub fn output_schema(&self) -> Option<SchemaRef> {
        self.bound.as_ref().map(|b| b.output_schema.clone())
    }

    /// Counters; `open_slots` counts the partial states held (rows waiting for the watermark and the panes of
    /// the keys' last rows; the reference engine: its retained rows).
    pub fn stats(&self) -> Stats {
        let mut s = self.stats.clone();
        if let Some(b) = &self.bound {
            s.keys = b.keys.len() as u64;
            s.open_slots = match &b.engine {
                Engine::Stream(e) => e.open_slots() as u64,
                Engine::Reference(e) => e.retained_rows() as u64,
            };
        }
        s.watermark = self.watermark();
        s.slack = self.sources.iter().map(|s| s.kslack.k()).max().unwrap_or(0);
        s
    }

    /// Marks the operator unusable (used by the bindings when a panic was caught).
    pub fn poison(&mut self, why: impl Into<String>) {
        self.life.poison(why);
    }

    /// Fixes the input schema (the first batch's, or a reader's schema before any batch).
    pub fn bind(&mut self, schema: &SchemaRef) -> Result<()> {
        if self.bound.is_some() {
            return Ok(());
        }
        let schema = &plain_schema(schema);
        let o = &self.opts;
        let cols = Columns::bind(o, &self.specs, schema)?;
        let window_type = cols.window_type();
        let out_fields = cols.output_fields(vec![
            Field::new("window_first", window_type.clone(), false),
            Field::new("window_last", window_type, false),
            Field::new("window_rows", DataType::Int64, false),
        ])?;
        let store = SlotStore::new(&cols.metas);
        let engine = if self.reference {
            Engine::Reference(CountReference::new(self.counts, store))
        } else {
            Engine::Stream(CountEngine::new(self.counts, store))
        };
        for s in &mut self.sources {
            s.kslack = KSlack::new(cols.lateness);
        }
        let key_types = cols.by.iter().map(|f| f.data_type().clone()).collect();
        self.bound = Some(Bound {
            schema: schema.clone(),
            format: TimeFormat::of(&cols.time_type),
            keys: KeyDict::new(o.by.clone(), key_types)?,
            metas: cols.metas,
            engine,
            output_schema: Arc::new(Schema::new(out_fields)),
        });
        Ok(())
    }

    /// Pushes one batch of source `source`; returns the windows whose completing rows the watermark passed.
    pub fn push(&mut self, batch: &RecordBatch, source: usize) -> Result<RecordBatch> {
        self.life.check("push")?;
        front::check_source(&self.sources, source, true)?;
        let batch = &decode_dictionaries(batch)?;
        self.bind(batch.schema_ref())?;
        self.ingest(batch, source)?;
        let r = self.emit_ready();
        self.life.record(r)
    }

    /// Reads, checks and admits a batch; on error nothing has changed but the key dictionary.
    fn ingest(&mut self, batch: &RecordBatch, source: usize) -> Result<()> {
        let b = self.bound.as_mut().expect("bound");
        let src = &self.sources[source];
        let read = front::read(
            &self.opts,
            &self.specs,
            &b.schema,
            b.format,
            src,
            batch,
            source,
        )?;
        let keys = b.keys.ids(&read.by_cols, batch.num_rows())?;
        // Commit.
        let order = RowOrder {
            ts: &read.ts,
            by: read.order_by.as_deref(),
            source: source as u32,
            seq0: read.commit(&mut self.sources[source]),
        };
        let keep = read.admitted.keep.as_deref();
        match &mut b.engine {
            Engine::Stream(e) => e.ingest(&keys, keep, &read.inputs, order),
            Engine::Reference(e) => e.ingest(&keys, keep, &read.inputs, order),
        }
        self.stats.batches_in += 1;
        self.stats.rows_in += batch.num_rows() as u64;
        self.stats.late_rows += read.admitted.late;
        self.stats.null_time_rows += read.admitted.null_time;
        Ok(())
    }

    fn watermark(&self) -> Option<i64> {
        front::watermark(&self.sources)
    }

    fn emit_ready(&mut self) -> Result<RecordBatch> {
        match self.watermark() {
            Some(wm) => self.emit_through(wm),
            None => Ok(self.empty()),
        }
    }

    fn empty(&self) -> RecordBatch {
        let schema = self
            .output_schema()
            .unwrap_or_else(|| Arc::new(Schema::empty()));
        RecordBatch::new_empty(schema)
    }

    /// Releases the rows below `watermark` and emits the windows they complete.
    fn emit_through(&mut self, watermark: i64) -> Result<RecordBatch> {
        let Some(b) = self.bound.as_mut() else {
            return Ok(RecordBatch::new_empty(Arc::new(Schema::empty())));
        };
        let mut fired = Vec::new();
        match &mut b.engine {
            Engine::Stream(e) => e.close_through(watermark, &mut fired),
            Engine::Reference(e) => e.close_through(watermark, &mut fired),
        }
        let out = assemble(b, &fired);
        match &mut b.engine {
            Engine::Stream(e) => {
                e.release(&fired);
                // Keys holding nothing are forgotten once they are most of the dictionary.
                forget_idle_keys(e, &mut b.keys);
            }
            Engine::Reference(e) => e.release(&fired),
        }
        let out = out?;
        self.stats.rows_out += out.num_rows() as u64;
        self.stats.windows_out += out.num_rows() as u64;
        Ok(out)
    }

    /// Ends source `source`: it no longer holds the watermark back.
    pub fn close_source(&mut self, source: usize) -> Result<RecordBatch> {
        self.life.check("close_source")?;
        front::check_source(&self.sources, source, false)?;
        self.sources[source].closed = true;
        let r = self.emit_ready();
        self.life.record(r)
    }

    /// End of stream: releases every row and emits the windows they complete (the rows after a key's last
    /// firing fire nothing, as in Flink).
    pub fn flush(&mut self) -> Result<RecordBatch> {
        self.life.check("flush")?;
        self.life.end();
        let r = self.emit_through(i64::MAX);
        self.life.record(r)
    }
}

/// The output batch of the fired windows, in their order.
fn assemble(b: &Bound, fired: &[Fired]) -> Result<RecordBatch> {
    if fired.is_empty() {
        return Ok(RecordBatch::new_empty(b.output_schema.clone()));
    }
    let keys: Vec<u32> = fired.iter().map(|f| f.key).collect();
    let slots: Vec<u32> = fired.iter().map(|f| f.slot).collect();
    let mut columns = b.keys.columns(&keys)?;
    let window_type = b
        .output_schema
        .field(b.keys.names().len())
        .data_type()
        .clone();
    let times = |t: fn(&Fired) -> i64| -> Result<ArrayRef> {
        int_column_as(
            Arc::new(Int64Array::from_iter_values(fired.iter().map(t))),
            &window_type,
        )
    };
    columns.push(times(|f| f.first)?);
    columns.push(times(|f| f.last)?);
    columns.push(Arc::new(Int64Array::from_iter_values(
        fired.iter().map(|f| f.rows as i64),
    )));
    for state in &b.engine_store().states {
        columns.push(state.finish(&slots)?);
    }
    RecordBatch::try_new(b.output_schema.clone(), columns).map_err(Error::output)
}

impl Bound {
    fn engine_store(&self) -> &SlotStore {
        match &self.engine {
            Engine::Stream(e) => e.store(),
            Engine::Reference(e) => e.store(),
        }
    }
}

/// The batch function of count windows: every source's batches through one [`CountWindowAggregator`], then
/// the end of the stream. Without `lateness` the result is exact over all rows whatever their order.
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{Int64Array, RecordBatch};
/// use windgate_core::aggregate::{WindowAggregateOptions, count_window_aggregate};
///
/// let batch = RecordBatch::try_from_iter([
///     ("ts", Arc::new(Int64Array::from(vec![5, 1, 4, 2, 3])) as _),
/// ]).unwrap();
/// let opts = WindowAggregateOptions::count("ts", 2, None, vec![("*".into(), vec!["count".into()])]);
/// let (_, out) = count_window_aggregate(vec![(batch.schema(), vec![Ok(batch)])], opts, || Ok(())).unwrap();
/// let rows: usize = out.iter().map(|b| b.num_rows()).sum();
/// assert_eq!(rows, 2); // rows at 1-2 and 3-4; the row at 5 never fires
/// ```
pub fn count_window_aggregate<I>(
    sources: Vec<(SchemaRef, I)>,
    mut opts: WindowAggregateOptions,
    mut on_batch: impl FnMut() -> Result<()>,
) -> Result<(SchemaRef, Vec<RecordBatch>)>
where
    I: IntoIterator<Item = Result<RecordBatch>>,
{
    if sources.is_empty() {
        return Err(Error::param("data", "expected at least one source"));
    }
    opts.sources = sources.len();
    opts.gate_sources = false;
    let mut agg = CountWindowAggregator::new(opts)?;
    let mut out = vec![];
    for (s, (schema, batches)) in sources.into_iter().enumerate() {
        agg.bind(&schema)?;
        for batch in batches {
            on_batch()?;
            let got = agg.push(&batch?, s)?;
            if got.num_rows() > 0 {
                out.push(got);
            }
        }
    }
    out.push(agg.flush()?);
    let schema = agg.output_schema().expect("bound");
    Ok((schema, out))
}

/// A snapshot column that is not what this module writes.
fn corrupt(message: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::Snapshot,
        format!("data: not a readable windgate snapshot: {message}"),
    )
}

/// The `by` columns of a written batch.
fn by_columns(opts: &WindowAggregateOptions, batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
    (opts.by.iter())
        .map(|c| column(batch, c, "by").cloned())
        .collect()
}
