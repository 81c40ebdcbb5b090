//! `SessionAggregator`: the streaming operator of session windows, and `session_aggregate`, the batch
//! function built on it.
//!
//! The pieces every windowed operator shares are the window aggregation's: the options
//! ([`WindowAggregateOptions`] with `gap`), admission (null times, then one K-slack per source, see
//! [`crate::order::admission`]), the watermark as the minimum over open sources, the key dictionary and its
//! output order, the aggregate functions' states. What differs is the engine ([`super::engine`] or
//! [`super::reference`]) and the output: the `by` columns, `window_start`, `window_end` (the time column's
//! type), then the aggregates, in the order `(window_end, window_start, key)`.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use super::reference::SessionReference;
use super::workers::{BatchRows, SessionWorkers, finish_from};
use super::{Closed, positive_gap};
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
use crate::threads::resolve_threads;
use crate::time::TimeFormat;

enum Engine {
    Stream(SessionWorkers),
    Reference(SessionReference),
}

impl Engine {
    fn ingest(&mut self, rows: &BatchRows<'_>, key_count: usize, admitted: usize) {
        match self {
            Engine::Stream(e) => e.ingest(rows, key_count, admitted),
            Engine::Reference(e) => {
                e.ingest(rows.ts, rows.keys, rows.keep, rows.inputs, rows.order)
            }
        }
    }

    fn close_through(&mut self, watermark: i64, out: &mut Vec<Closed>) {
        match self {
            Engine::Stream(e) => e.close_through(watermark, out),
            Engine::Reference(e) => e.close_through(watermark, out),
        }
    }

    fn earliest_end(&self) -> Option<i64> {
        match self {
            Engine::Stream(e) => e.earliest_end(),
            Engine::Reference(e) => e.earliest_end(),
        }
    }

    /// Each aggregate's column over the closed sessions, in their order.
    fn finish(&self, closed: &[Closed]) -> Result<Vec<ArrayRef>> {
        match self {
            Engine::Stream(e) => e.finish(closed),
            Engine::Reference(e) => finish_from(e.store(), closed),
        }
    }

    fn release(&mut self, closed: &[Closed]) {
        match self {
            Engine::Stream(e) => e.release(closed),
            Engine::Reference(e) => e.release(closed),
        }
    }
}

mod checkpoint;

pub use checkpoint::OPERATOR as SESSION_OPERATOR;

/// What is fixed once the first schema is seen.
struct Bound {
    schema: SchemaRef,
    gap: i64,
    /// How times read in errors (ISO 8601 on timestamp columns).
    format: TimeFormat,
    keys: KeyDict,
    metas: Vec<Arc<AggMeta>>,
    engine: Engine,
    output_schema: SchemaRef,
}

/// The streaming operator of session windows.
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{Float64Array, Int64Array, RecordBatch};
/// use windgate_core::aggregate::{LatenessOpt, SessionAggregator, Span, WindowAggregateOptions};
///
/// let mut opts = WindowAggregateOptions::session("ts", Span::Units(10), vec![
///     ("*".into(), vec!["count".into()]),
///     ("v".into(), vec!["sum".into()]),
/// ]);
/// opts.lateness = LatenessOpt::Bound(Span::Units(0));
/// let mut agg = SessionAggregator::new(opts).unwrap();
/// let batch = RecordBatch::try_from_iter([
///     ("ts", Arc::new(Int64Array::from(vec![1, 5, 14, 40])) as _),
///     ("v", Arc::new(Float64Array::from(vec![1.0, 2.0, 3.0, 4.0])) as _),
/// ]).unwrap();
/// let out = agg.push(&batch, 0).unwrap();   // [1, 24) is final at ts 40 (14 <= 5 + 10 joined it)
/// assert_eq!(out.num_rows(), 1);
/// let rest = agg.flush().unwrap();          // [40, 50) at the end of the stream
/// assert_eq!(rest.num_rows(), 1);
/// ```
pub struct SessionAggregator {
    opts: WindowAggregateOptions,
    specs: Vec<AggSpec>,
    bound: Option<Bound>,
    sources: Vec<Source>,
    stats: Stats,
    life: Lifecycle,
    reference: bool,
}

impl SessionAggregator {
    /// The operator of `opts`, whose `gap` must be set.
    pub fn new(opts: WindowAggregateOptions) -> Result<Self> {
        if opts.gap.is_none() {
            return Err(Error::param(
                "gap",
                "a session operator needs gap= (the inactivity gap)",
            ));
        }
        let specs = opts.validate()?;
        let reference = opts.strategy == Strategy::Reference;
        let sources = front::sources(&opts);
        let stats = Stats {
            threads: if reference {
                1
            } else {
                resolve_threads(opts.threads) as u64
            },
            strategy: if reference { "reference" } else { "session" },
            ..Stats::default()
        };
        Ok(Self {
            opts,
            specs,
            bound: None,
            sources,
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

    /// Counters; `open_slots` counts the open sessions (the reference engine: its retained rows).
    pub fn stats(&self) -> Stats {
        let mut s = self.stats.clone();
        if let Some(b) = &self.bound {
            s.keys = b.keys.len() as u64;
            s.open_slots = match &b.engine {
                Engine::Stream(e) => {
                    s.threads = e.threads() as u64;
                    e.open_sessions() as u64
                }
                Engine::Reference(e) => e.retained_rows() as u64,
            };
        }
        s.watermark = self.watermark();
        s.slack = self.sources.iter().map(|s| s.kslack.k()).max().unwrap_or(0);
        s
    }

    /// The least watermark at which an open session becomes final (its end plus one: a session is final
    /// once `end < watermark`), `None` while no session is open. A driver that moves the watermark itself
    /// (the Spark Structured Streaming shard, `docs/spark.md`) sets its next timer there.
    pub fn next_close(&self) -> Option<i64> {
        let end = self.bound.as_ref()?.engine.earliest_end()?;
        Some(end.saturating_add(1))
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
        let gap = o.gap.as_ref().expect("checked by new");
        let gap = positive_gap(gap.resolve(cols.unit, &o.time, "gap")?)?;
        let window_type = cols.window_type();
        let out_fields = cols.output_fields(vec![
            Field::new("window_start", window_type.clone(), false),
            Field::new("window_end", window_type, false),
        ])?;
        let key_types = cols.by.iter().map(|f| f.data_type().clone()).collect();
        let store = SlotStore::new(&cols.metas);
        let engine = if self.reference {
            Engine::Reference(SessionReference::new(gap, store))
        } else {
            Engine::Stream(SessionWorkers::new(gap, store, resolve_threads(o.threads)))
        };
        for s in &mut self.sources {
            s.kslack = KSlack::new(cols.lateness);
        }
        self.bound = Some(Bound {
            schema: schema.clone(),
            gap,
            format: TimeFormat::of(&cols.time_type),
            keys: KeyDict::new(o.by.clone(), key_types)?,
            metas: cols.metas,
            engine,
            output_schema: Arc::new(Schema::new(out_fields)),
        });
        Ok(())
    }

    /// Pushes one batch of source `source`; returns the sessions that became final.
    pub fn push(&mut self, batch: &RecordBatch, source: usize) -> Result<RecordBatch> {
        self.life.check("push")?;
        if source >= self.sources.len() {
            return Err(Error::param(
                "source",
                format!(
                    "source {source} does not exist; this operator has {} source(s)",
                    self.sources.len()
                ),
            ));
        }
        if self.sources[source].closed {
            return Err(Error::param(
                "source",
                format!("source {source} was closed"),
            ));
        }
        let batch = &decode_dictionaries(batch)?;
        self.bind(batch.schema_ref())?;
        self.ingest(batch, source)?;
        let r = self.emit_ready();
        self.life.record(r)
    }

    /// Reads, checks and admits a batch; on error nothing has changed but the key dictionary.
    fn ingest(&mut self, batch: &RecordBatch, source: usize) -> Result<()> {
        let o = &self.opts;
        let b = self.bound.as_mut().expect("bound");
        let src = &self.sources[source];
        let read = front::read(o, &self.specs, &b.schema, b.format, src, batch, source)?;
        let admitted = &read.admitted;
        if let Some((_, hi)) = admitted.range
            && hi.checked_add(b.gap).is_none()
        {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                format!(
                    "column '{}': time {hi} plus gap {} overflows int64 (the session's end)",
                    o.time, b.gap
                ),
            ));
        }
        let keys = b.keys.ids(&read.by_cols, batch.num_rows())?;
        // Commit.
        let seq0 = read.commit(&mut self.sources[source]);
        let ts = &read.ts;
        let inputs = &read.inputs;
        let order = RowOrder {
            ts,
            by: read.order_by.as_deref(),
            source: source as u32,
            seq0,
        };
        let rows = BatchRows {
            ts,
            keys: &keys,
            keep: admitted.keep.as_deref(),
            inputs,
            order,
        };
        let admitted_rows = batch.num_rows() - (admitted.late + admitted.null_time) as usize;
        b.engine.ingest(&rows, b.keys.len(), admitted_rows);
        self.stats.batches_in += 1;
        self.stats.rows_in += batch.num_rows() as u64;
        self.stats.late_rows += admitted.late;
        self.stats.null_time_rows += admitted.null_time;
        Ok(())
    }

    /// The watermark over open sources: `None` while some open source has none, `i64::MAX` once all closed.
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

    /// Emits every final session (ending before `watermark`), in the order `(end, start, key)`.
    fn emit_through(&mut self, watermark: i64) -> Result<RecordBatch> {
        let Some(b) = self.bound.as_mut() else {
            return Ok(RecordBatch::new_empty(Arc::new(Schema::empty())));
        };
        let mut closed = Vec::new();
        b.engine.close_through(watermark, &mut closed);
        if closed.is_empty() {
            return Ok(RecordBatch::new_empty(b.output_schema.clone()));
        }
        let closed = in_output_order(closed, &mut b.keys);
        let out = assemble(b, &closed);
        b.engine.release(&closed);
        let out = out?;
        // Keys without open sessions are forgotten once they are most of the dictionary (memory follows
        // the open sessions, not the stream's keys).
        match &mut b.engine {
            Engine::Stream(e) => forget_idle_keys(e, &mut b.keys),
            Engine::Reference(e) => forget_idle_keys(e, &mut b.keys),
        }
        self.stats.rows_out += out.num_rows() as u64;
        self.stats.windows_out += out.num_rows() as u64;
        Ok(out)
    }

    /// Ends source `source`: it no longer holds the watermark back.
    pub fn close_source(&mut self, source: usize) -> Result<RecordBatch> {
        self.life.check("close_source")?;
        if source >= self.sources.len() {
            return Err(Error::param(
                "source",
                format!("source {source} does not exist"),
            ));
        }
        self.sources[source].closed = true;
        let r = self.emit_ready();
        self.life.record(r)
    }

    /// End of stream: emits every session still open.
    pub fn flush(&mut self) -> Result<RecordBatch> {
        self.life.check("flush")?;
        self.life.end();
        let r = self.emit_through(i64::MAX);
        self.life.record(r)
    }
}

/// The closed sessions in the output order `(end, start, key)`. Few sessions against a large dictionary
/// compare their keys' bytes (the order the dictionary's ranks come from) rather than rank every key, which
/// each push bringing new keys would redo; many are sorted on `(end, start, rank)` with each rank looked up
/// once, not once per comparison (a flush may close millions).
fn in_output_order(mut closed: Vec<Closed>, keys: &mut KeyDict) -> Vec<Closed> {
    if closed.len() * 8 < keys.len() {
        closed.sort_unstable_by(|a, b| {
            (a.end, a.start)
                .cmp(&(b.end, b.start))
                .then_with(|| keys.key_bytes(a.key).cmp(keys.key_bytes(b.key)))
        });
        return closed;
    }
    let ranks = keys.order().ranks;
    let mut order: Vec<(i64, i64, u32, u32)> = (closed.iter().enumerate())
        .map(|(i, c)| (c.end, c.start, ranks[c.key as usize], i as u32))
        .collect();
    order.sort_unstable();
    order
        .into_iter()
        .map(|(.., i)| closed[i as usize])
        .collect()
}

/// The output batch of the closed sessions, in their order.
fn assemble(b: &Bound, closed: &[Closed]) -> Result<RecordBatch> {
    let keys: Vec<u32> = closed.iter().map(|c| c.key).collect();
    let mut columns = b.keys.columns(&keys)?;
    let window_type = b
        .output_schema
        .field(b.keys.names().len())
        .data_type()
        .clone();
    let starts = Int64Array::from_iter_values(closed.iter().map(|c| c.start));
    let ends = Int64Array::from_iter_values(closed.iter().map(|c| c.end));
    columns.push(int_column_as(Arc::new(starts), &window_type)?);
    columns.push(int_column_as(Arc::new(ends), &window_type)?);
    columns.extend(b.engine.finish(closed)?);
    RecordBatch::try_new(b.output_schema.clone(), columns).map_err(Error::output)
}

/// The batch function of session windows: every source's batches through one [`SessionAggregator`], then
/// the end of the stream. Without `lateness` the result is exact over all rows whatever their order.
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{Int64Array, RecordBatch};
/// use windgate_core::aggregate::{Span, WindowAggregateOptions, session_aggregate};
///
/// let batch = RecordBatch::try_from_iter([
///     ("ts", Arc::new(Int64Array::from(vec![1, 30, 5, 12, 3])) as _),
/// ]).unwrap();
/// let opts = WindowAggregateOptions::session("ts", Span::Units(10), vec![("*".into(), vec!["count".into()])]);
/// let (_, out) = session_aggregate(vec![(batch.schema(), vec![Ok(batch)])], opts, || Ok(())).unwrap();
/// let rows: usize = out.iter().map(|b| b.num_rows()).sum();
/// assert_eq!(rows, 2); // [1, 22) holds 1, 3, 5, 12; then [30, 40)
/// ```
pub fn session_aggregate<I>(
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
    let mut agg = SessionAggregator::new(opts)?;
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
