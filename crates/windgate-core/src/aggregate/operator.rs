//! `WindowAggregator`: the streaming window-aggregation operator, and `window_aggregate`, the batch function
//! built on it.
//!
//! The operator owns the parts every engine shares (schema checks, time and key columns, one K-slack per
//! source, the watermark over sources, output assembly) and hands admitted rows to the engine its strategy's
//! row of the registry ([`super::strategy`]) builds: the pane engine (`"pane"`, which `"auto"` picks for most
//! calls), the reference engine, or a parallel engine behind [`super::parallel::Driver`]. The watermark is
//! the minimum over open sources of each source's watermark (`docs/architecture.md`, "Contracts"), so a
//! stalled source holds windows back and a closed one stops doing so. Late-row decisions are per source and
//! depend only on that source's row sequence: the same input gives the same admitted rows whatever the batch
//! split or interleaving of sources.

use std::collections::VecDeque;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, Int64Array, RecordBatch};
use arrow_buffer::ScalarBuffer;
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use super::emission::Emission;
use super::engine::Engine;
use super::function::AggSpec;
use super::functions::{function, value_class};
use super::input::input_values;
use super::options::WindowAggregateOptions;
use super::pane_engine::PaneEngine;
use super::parallel::shard::ShardEngine;
use super::parallel::{Admitted, Driver, EngineArgs};
use super::partial::{self, InputKind, OutputKind};
use super::reference::ReferenceEngine;
use super::slots::SlotStore;
use super::state::{AggMeta, InputValues};
use super::strategy::{Build, Strategy};
use super::updates::{UpdateMode, UpdatingEngine, accept_allowed};
use crate::arrow_io::{
    as_i64, check_same_type, check_unambiguous, column, decode_dictionaries, int_column_as,
    plain_schema,
};
use crate::error::{Error, ErrorKind, Lifecycle, Result};
use crate::keys::KeyDict;
use crate::order::admission::{OnLate, Rules, admit};
use crate::order::kslack::{KSlack, Lateness};
use crate::runtime::farm::FarmStats;
use crate::threads::resolve_threads;
use crate::time::calendar::{self, Calendar};
use crate::time::{TimeFormat, WindowSpec};

mod checkpoint;
mod late_rows;
mod output;
mod read;
mod row_log;
mod sources;

pub(super) use late_rows::LateRows;
use output::{assemble, partial_batch};
pub(super) use read::{batch_name, check_order_by_type, order_by_values, used_columns};
use row_log::RowLog;
use sources::Source;

/// Rows ingested at a time: large batches are sliced so that per-row scratch stays in cache.
const INGEST_ROWS: usize = 1 << 15;

/// The farm's slices are smaller: the caller prepares one slice while the workers aggregate the previous ones,
/// and a punctuation after each slice lets the window-level query (WLQ) merge closed panes while the
/// pane-level query (PLQ) works on later rows.
const FARM_INGEST_ROWS: usize = 1 << 13;

/// Counters reported as `stats`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    pub batches_in: u64,
    pub rows_in: u64,
    /// Rows pushed by sources ahead of the watermark and not yet final (counted against `credits`).
    pub pending_rows: u64,
    /// Pushes refused because a source's credits were used up.
    pub backpressured: u64,
    pub late_rows: u64,
    /// Late rows kept by `on_late="keep"` and not yet taken.
    pub late_rows_pending: u64,
    pub null_time_rows: u64,
    pub rows_out: u64,
    pub windows_out: u64,
    pub open_panes: u64,
    pub open_slots: u64,
    pub keys: u64,
    /// The watermark over sources (`None`: nothing is final yet).
    pub watermark: Option<i64>,
    /// `watermark` as it reads: ISO 8601 in the time column's zone for timestamps, the integer otherwise.
    pub watermark_text: Option<String>,
    /// Largest slack K over sources (grows under `lateness="adaptive"`).
    pub slack: i64,
    pub threads: u64,
    pub strategy: &'static str,
    /// The pane farm's figures (`strategy="farm"` only).
    pub farm: Option<FarmStats>,
}

/// What is fixed once the first schema is seen.
struct Bound {
    schema: SchemaRef,
    spec: WindowSpec,
    format: TimeFormat,
    keys: KeyDict,
    metas: Vec<Arc<AggMeta>>,
    engine: Engine,
    output_schema: SchemaRef,
    /// `allowed_lateness` and `emit="early"`, resolved (see [`super::updates`]).
    update: UpdateMode,
    /// `tz=` on windows of whole days: rows are placed on wall time (`spec` is its grid), see
    /// [`crate::time::calendar`].
    calendar: Option<Calendar>,
}

/// The papers' baselines keep a state per open window (and the multiway designs one per window and key), so
/// a row in a million windows (the most [`WindowSpec`] allows) would take gigabytes; they are refused past
/// this many windows per row. The pane engine and the farm keep states per pane and are not limited.
const BASELINE_MAX_WINDOWS_PER_ROW: i64 = 1 << 12;

fn check_baseline_windows(strategy: Strategy, spec: &WindowSpec) -> Result<()> {
    let per_row = spec.windows_per_row();
    if strategy.about().caps.role == crate::registry::Role::Baseline
        && per_row > BASELINE_MAX_WINDOWS_PER_ROW
    {
        return Err(Error::param(
            "size",
            format!(
                "strategy '{}' keeps a state per open window: at most {BASELINE_MAX_WINDOWS_PER_ROW} windows \
                 per row (size / slide), got {per_row}; strategy='auto' or 'pane' has no such limit",
                strategy.name()
            ),
        ));
    }
    Ok(())
}

impl Bound {
    /// The coordinate below which no row still to come falls, once every source is at `watermark`: the
    /// watermark itself, or on wall time the least wall time still to come.
    fn closing(&self, watermark: i64) -> i64 {
        self.calendar.map_or(watermark, |c| c.closing(watermark))
    }

    /// A window bound of `spec` as the instant it stands for.
    fn instant(&self, coordinate: i64) -> i64 {
        self.calendar.map_or(coordinate, |c| c.instant(coordinate))
    }
}

/// The streaming window-aggregation operator.
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{Float64Array, Int64Array, RecordBatch};
/// use windgate_core::aggregate::{Span, WindowAggregateOptions, WindowAggregator};
///
/// let mut opts = WindowAggregateOptions::new("ts", Span::Units(10), vec![
///     ("*".into(), vec!["count".into()]),
///     ("v".into(), vec!["sum".into()]),
/// ]);
/// opts.lateness = windgate_core::aggregate::LatenessOpt::Bound(Span::Units(0));
/// let mut agg = WindowAggregator::new(opts).unwrap();
/// let batch = RecordBatch::try_from_iter([
///     ("ts", Arc::new(Int64Array::from(vec![1, 5, 12, 25])) as _),
///     ("v", Arc::new(Float64Array::from(vec![1.0, 2.0, 3.0, 4.0])) as _),
/// ]).unwrap();
/// let out = agg.push(&batch, 0).unwrap();   // windows [0,10) and [10,20) are final at ts 25
/// assert_eq!(out.num_rows(), 2);
/// let rest = agg.flush().unwrap();          // [20,30) at the end of the stream
/// assert_eq!(rest.num_rows(), 1);
/// ```
pub struct WindowAggregator {
    opts: WindowAggregateOptions,
    specs: Vec<AggSpec>,
    bound: Option<Bound>,
    sources: Vec<Source>,
    stats: Stats,
    life: Lifecycle,
    /// Batch mode: pushes do not wait for the farm's windows (the flush collects them, in order).
    deferred: bool,
    /// The strategy `auto` resolved to.
    strategy: Strategy,
    /// `auto` runs on the farm instead once the window spec is known, if windows have few panes (set for large
    /// in-memory input, [`super::batch::AUTO_FARM_ROWS`], and a large first push, `AUTO_FARM_PUSH_ROWS`).
    farm_if_few_panes: bool,
    /// Output of a push that failed (or was interrupted) after earlier batches of the same stream had closed
    /// windows: those windows are final and must not be lost, so the next call returns them first.
    carry: Vec<RecordBatch>,
    /// The last window emitted (`output="partials"`: the last pane): a checkpoint keeps the panes after it.
    emitted: Option<i64>,
    /// Restored from a checkpoint that had emitted the windows up to this one: the engine, rebuilt from the
    /// open panes alone, may emit them again (partially), so they are dropped.
    floor: Option<i64>,
    /// A parallel engine's open state as the checkpoint reads it: the engines keep state in their own
    /// layouts, so a checkpoint lifts the admitted rows of the open panes instead (see `row_log`).
    log: RowLog,
    /// `on_late="keep"`: the late rows not yet taken.
    late: LateRows,
    /// The time range of the batch being pushed, when its caller read it already ([`Self::push_in_range`]).
    known_range: Option<KnownRange>,
}

/// What a caller read of a batch's times before pushing it: only for the batch of that many rows, never a
/// slice of it.
#[derive(Debug, Clone, Copy)]
struct KnownRange {
    rows: usize,
    least: i64,
    greatest: i64,
    /// The times never decrease.
    sorted: bool,
}

/// Most panes per window for which `auto` picks the farm over the pane engine. Measured with 2 threads,
/// `WindowAggregator.push` of 256k-row batches, 4 M rows, count+sum+max: with 1000 random keys and 1000 rows a
/// pane the farm ran at 1.28x, 1.35x, 1.51x and 1.30x of the pane engine at 24, 60, 100 and 288 panes a window;
/// with 100 keys at 1.09x, 1.10x, 0.91x and 0.99x at 24, 100, 288 and 1000. From 6 panes a window on its
/// window level builds windows in blocks (`runtime/farm/blocks.rs`); before that it merged every pane into
/// every window and ran at 0.30x and 0.08x at 100 and 1000 panes.
const AUTO_FARM_PANES: i64 = 100;

/// A stream whose first push has at least this many rows runs `auto` on the farm (with few panes, more than one
/// thread). Every push waits for the windows it closed, so small pushes cost the farm a barrier each: measured
/// farm on 2 threads / pane engine, pushes of 8k, 16k, 32k, 64k, 256k rows: 0.85x, 1.03x, 1.19x, 1.25x, 1.36x.
const AUTO_FARM_PUSH_ROWS: usize = 1 << 15;

impl WindowAggregator {
    pub fn new(opts: WindowAggregateOptions) -> Result<Self> {
        let specs = opts.validate()?;
        let sources = (0..opts.sources)
            .map(|_| Source {
                kslack: KSlack::new(Lateness::Exact),
                seq: opts.row_offset,
                closed: false,
                pending: VecDeque::new(),
                pending_rows: 0,
                promised: None,
            })
            .collect();
        let threads = resolve_threads(opts.threads);
        // "auto" is the fastest engine measured on this kind of machine (2 cores): the single-threaded pane
        // engine until the first push says otherwise. The farm's per-push window barrier costs more than a
        // second core gives back on small pushes; a large first push (`AUTO_FARM_PUSH_ROWS`) or large
        // in-memory input (`batch::AUTO_FARM_ROWS`) runs it on the farm, if windows have few panes.
        let strategy = match opts.strategy {
            Strategy::Auto => Strategy::Pane,
            s => s,
        };
        let stats = Stats {
            threads: strategy.threads(opts.sources, threads) as u64,
            strategy: strategy.name(),
            ..Stats::default()
        };
        Ok(Self {
            opts,
            specs,
            bound: None,
            sources,
            stats,
            life: Lifecycle::default(),
            deferred: false,
            strategy,
            farm_if_few_panes: false,
            carry: Vec::new(),
            emitted: None,
            floor: None,
            log: RowLog::default(),
            late: LateRows::default(),
            known_range: None,
        })
    }

    pub fn options(&self) -> &WindowAggregateOptions {
        &self.opts
    }

    /// The output schema, once the input schema is known.
    pub fn output_schema(&self) -> Option<SchemaRef> {
        self.bound.as_ref().map(|b| b.output_schema.clone())
    }

    pub fn stats(&self) -> Stats {
        let mut s = self.stats.clone();
        s.pending_rows = self.sources.iter().map(|s| s.pending_rows).sum();
        s.late_rows_pending = self.late.pending() as u64;
        if let Some(b) = &self.bound {
            s.keys = b.keys.len() as u64;
            match &b.engine {
                Engine::Pane(e) => {
                    s.open_panes = e.open_panes() as u64;
                    s.open_slots = e.live_slots() as u64;
                }
                Engine::Reference(e) => s.open_slots = e.retained_rows() as u64,
                Engine::Parallel(e) => s.farm = Some(e.stats()),
                Engine::Updating(e) => s.open_slots = e.retained_rows() as u64,
                Engine::Shard(_) => {}
            }
        }
        s.watermark = self.watermark();
        s.watermark_text = (self.bound.as_ref().map(|b| b.format))
            .unwrap_or_default()
            .format_opt(s.watermark);
        s.slack = self.sources.iter().map(|s| s.kslack.k()).max().unwrap_or(0);
        s
    }

    /// Fixes the input schema (the first batch's, or a reader's schema before any batch).
    pub fn bind(&mut self, schema: &SchemaRef) -> Result<()> {
        if self.bound.is_some() {
            return Ok(());
        }
        // Dictionary-encoded columns (pandas Categorical) are read as their values: see `push_checked`.
        let schema = &plain_schema(schema);
        for name in used_columns(&self.opts, &self.specs) {
            check_unambiguous(schema, &name, "data")?;
        }
        let o = &self.opts;
        let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
        let field = |name: &str, param: &str| {
            schema
                .field_with_name(name)
                .map_err(|_| Error::column_not_found(param, name, &names))
        };
        let time_type = field(&o.time, "time")?.data_type().clone();
        if let Some(c) = &o.order_by {
            check_order_by_type(c, field(c, "order_by")?.data_type())?;
        }
        let resolved = o.resolve_window(&time_type)?;
        let is_months = |s: &crate::time::Span| calendar::months(s).is_some();
        let size_months = is_months(&o.size);
        let months = (size_months, o.slide.as_ref().map_or(size_months, is_months));
        let (spec, calendar) =
            calendar::bind(o.tz.as_deref(), &time_type, &o.time, resolved.spec, months)?;
        check_baseline_windows(self.strategy, &spec)?;
        for s in &mut self.sources {
            s.kslack = KSlack::new(resolved.lateness);
        }
        let mut key_types = vec![];
        let mut out_fields = vec![];
        for b in &o.by {
            let f = field(b, "by")?;
            key_types.push(f.data_type().clone());
            out_fields.push(Field::new(b, f.data_type().clone(), true));
        }
        let window_type = resolved.window_type;
        if o.on_late == OnLate::Keep {
            self.late.bind(schema, &window_type, o.sources)?;
        }
        out_fields.push(Field::new("window_start", window_type.clone(), false));
        out_fields.push(Field::new("window_end", window_type, false));
        if o.output == OutputKind::Partials {
            out_fields.truncate(o.by.len());
            out_fields.push(Field::new(&o.time, time_type.clone(), false));
        }
        let mut metas = vec![];
        for spec in &self.specs {
            let meta = Arc::new(match (o.input, &spec.column) {
                (InputKind::Partials, _) => partial::meta_from_schema(spec, schema)?,
                (InputKind::Rows, None) => AggMeta {
                    spec: spec.clone(),
                    input_type: DataType::Int64,
                    class: super::function::ValueClass::Int,
                },
                (InputKind::Rows, Some(c)) => {
                    let dt = field(c, "aggs")?.data_type().clone();
                    AggMeta {
                        spec: spec.clone(),
                        class: value_class(&dt, spec.func, c)?,
                        input_type: dt,
                    }
                }
            });
            match o.output {
                OutputKind::Partials => out_fields.extend(partial::fields(&meta)),
                OutputKind::Windows => {
                    let nullable = function(spec.func).output_nullable();
                    out_fields.push(Field::new(&spec.output_name, meta.output_type(), nullable));
                }
            }
            metas.push(meta);
        }
        for (i, f) in out_fields.iter().enumerate() {
            if out_fields[..i].iter().any(|g| g.name() == f.name()) {
                return Err(Error::param(
                    "aggs",
                    format!(
                        "output column '{}' clashes with another output column (rename the input)",
                        f.name()
                    ),
                ));
            }
        }
        // Large in-memory input (the batch function, `deferred`) runs on the sharded engine, whatever the panes
        // per window (its cost per window is the pane engine's). Measured on 2 cores, 8 M rows, 1000 random
        // int64 keys, 60/10 windows, count+sum+max, best of 6: pane engine 0.303 s, farm (2 threads) 0.253 s,
        // shard (2 threads) 0.190 s. A stream of large pushes runs on the farm, if windows have few panes
        // (every push waits for its windows, which the farm's stages overlap; the shard is not measured there).
        let parallel = if self.deferred {
            Some(Strategy::Shard)
        } else {
            (spec.panes_per_window() <= AUTO_FARM_PANES).then_some(Strategy::Farm)
        };
        if let Some(s) = parallel.filter(|_| self.farm_if_few_panes) {
            self.strategy = s;
            self.stats.strategy = s.name();
            self.stats.threads = resolve_threads(o.threads) as u64;
        }
        let update = o.update_mode(&time_type)?;
        if update.allowed.is_some() {
            // int64: Spark has no unsigned types.
            out_fields.push(Field::new("revision", DataType::Int64, false));
        }
        if update.early.is_some() {
            out_fields.push(Field::new("final", DataType::Boolean, false));
        }
        let store = || SlotStore::new(&metas);
        let engine = match self.strategy.entry().engine {
            _ if update.is_on() => {
                Engine::Updating(Box::new(UpdatingEngine::new(spec, store(), update)))
            }
            Build::Reference => Engine::Reference(Box::new(ReferenceEngine::new(spec, store()))),
            // `new` resolves `auto` to the pane engine; it runs on the farm only if switched above.
            Build::Auto | Build::Pane => {
                Engine::Pane(Box::new(PaneEngine::new(spec, store(), store())))
            }
            Build::Parallel(build) => {
                let cfg = o.farm.config(self.stats.threads as usize);
                let args = EngineArgs {
                    spec,
                    metas: &metas,
                    cfg: &cfg,
                    sources: self.sources.len(),
                    threads: resolve_threads(o.threads),
                };
                let mut driver = Driver::new(build, &args)?;
                // Sources closed before the first row (empty partitions) are closed in the engine too.
                for (j, _) in self.sources.iter().enumerate().filter(|(_, s)| s.closed) {
                    driver.close_source(j)?;
                }
                Engine::Parallel(Box::new(driver))
            }
            Build::Shard => {
                let threads = self.stats.threads as usize;
                Engine::Shard(Box::new(ShardEngine::new(
                    spec, &metas, &o.by, &key_types, threads,
                )?))
            }
        };
        self.bound = Some(Bound {
            schema: schema.clone(),
            spec,
            format: resolved.format,
            keys: KeyDict::new(o.by.clone(), key_types)?,
            metas,
            engine,
            update,
            calendar,
            output_schema: Arc::new(match o.output {
                OutputKind::Windows => Schema::new(out_fields),
                OutputKind::Partials => Schema::new_with_metadata(out_fields, partial::metadata()),
            }),
        });
        Ok(())
    }

    /// Pushes one batch of source `source`; returns the rows of the windows that became final.
    pub fn push(&mut self, batch: &RecordBatch, source: usize) -> Result<RecordBatch> {
        let out = self.push_checked(batch, source, true)?;
        self.deliver(out)
    }

    /// [`Self::push`] of a batch without null times whose least and greatest time the caller has read already
    /// (the batch function plans its pieces by them): admission takes them instead of reading the times again.
    /// `sorted`: the caller found the times never decrease (the pane engine finds pane runs by search).
    pub(crate) fn push_in_range(
        &mut self,
        batch: &RecordBatch,
        source: usize,
        (least, greatest): (i64, i64),
        sorted: bool,
    ) -> Result<RecordBatch> {
        self.known_range = Some(KnownRange {
            rows: batch.num_rows(),
            least,
            greatest,
            sorted,
        });
        let out = self.push(batch, source);
        self.known_range = None;
        out
    }

    /// Pushes every batch of a stream as one push: credits are checked before the first batch only, so a
    /// [`ErrorKind::Backpressure`] refusal never leaves part of the stream consumed and its output unreturned.
    pub fn push_stream(
        &mut self,
        batches: impl IntoIterator<Item = Result<RecordBatch>>,
        source: usize,
    ) -> Result<Vec<RecordBatch>> {
        let mut out = std::mem::take(&mut self.carry);
        for (i, batch) in batches.into_iter().enumerate() {
            match batch.and_then(|b| self.push_checked(&b, source, i == 0)) {
                Ok(b) => out.push(b),
                Err(e) => {
                    out.retain(|b| b.num_rows() > 0);
                    self.carry = out;
                    return Err(e);
                }
            }
        }
        Ok(out)
    }

    /// `out`, after the output a failed push left behind (see `carry`).
    fn deliver(&mut self, out: RecordBatch) -> Result<RecordBatch> {
        if self.carry.is_empty() {
            return Ok(out);
        }
        let mut all = std::mem::take(&mut self.carry);
        let schema = all[0].schema();
        all.push(out);
        all.retain(|b| b.num_rows() > 0);
        arrow_select::concat::concat_batches(&schema, &all).map_err(Error::output)
    }

    fn push_checked(
        &mut self,
        batch: &RecordBatch,
        source: usize,
        credits: bool,
    ) -> Result<RecordBatch> {
        self.check_usable("push")?;
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
        if !self.deferred && batch.num_rows() >= AUTO_FARM_PUSH_ROWS {
            self.prefer_farm();
        }
        let batch = &decode_dictionaries(batch)?;
        self.bind(batch.schema_ref())?;
        if credits {
            self.check_credits(source, batch.num_rows() as u64)?;
        }
        // Large batches go through in cache-sized slices (one slice's row state stays in L2).
        let n = batch.num_rows();
        let engine = self.bound.as_ref().map(|b| &b.engine);
        let farm = matches!(engine, Some(Engine::Parallel(_)));
        // The sharded engine takes a push whole: its workers slice it themselves, and the caller reads it once.
        let slice = match engine {
            Some(Engine::Parallel(_)) => FARM_INGEST_ROWS,
            Some(Engine::Shard(_)) => n.max(1),
            _ => INGEST_ROWS,
        };
        if n > slice {
            // Refused whole or taken whole: a late row (or a bad value) in a later slice must not leave the
            // earlier slices ingested.
            self.read(batch, source, 0)?;
        }
        let mut start = 0;
        loop {
            let len = slice.min(n - start);
            self.ingest(&batch.slice(start, len), source, start)?;
            start += len;
            if start >= n {
                break;
            }
            if farm {
                self.guard(|this| this.advance())?;
            }
            if let Err(e) = crate::interrupt::check() {
                // Between slices the operator is whole: the rows before `start` are in, the rest are not,
                // and the windows they closed come out with the next call.
                self.note_pending(source, start as u64);
                return Err(crate::interrupt::interrupted(&format!(
                    "{}; the first {start} of this batch's {n} rows were consumed, the rest were not \
                     (push batch.slice({start}) to go on)",
                    e.message()
                )));
            }
        }
        self.note_pending(source, n as u64);
        self.guard(|this| this.emit_ready())
    }

    /// Ends source `source`: it no longer holds the watermark back.
    pub fn close_source(&mut self, source: usize) -> Result<RecordBatch> {
        self.check_usable("close_source")?;
        if source >= self.sources.len() {
            return Err(Error::param(
                "source",
                format!("source {source} does not exist"),
            ));
        }
        self.sources[source].closed = true;
        let out = self.guard(|this| {
            if let Some(Engine::Parallel(f)) = this.bound.as_mut().map(|b| &mut b.engine) {
                f.close_source(source)?;
            }
            this.emit_ready()
        })?;
        self.deliver(out)
    }

    /// End of stream: emits every window still open.
    pub fn flush(&mut self) -> Result<RecordBatch> {
        self.check_usable("flush")?;
        self.life.end();
        let out = self.guard(|this| {
            let Some(b) = this.bound.as_mut() else {
                return Ok(RecordBatch::new_empty(Arc::new(Schema::empty())));
            };
            if let Engine::Parallel(f) = &mut b.engine {
                for s in 0..this.sources.len() {
                    f.close_source(s)?;
                }
            }
            if this.opts.output == OutputKind::Partials {
                return this.emit_panes_through(i64::MAX);
            }
            b.engine.observe_watermark(i64::MAX);
            match b.engine.last_window() {
                Some(last) => this.emit_through(last, true),
                None => Ok(RecordBatch::new_empty(b.output_schema.clone())),
            }
        })?;
        self.deliver(out)
    }

    fn check_usable(&self, what: &str) -> Result<()> {
        self.life.check(what)
    }

    /// Runs a step that changes engine state; an error there leaves the operator unusable.
    fn guard<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        let r = f(self);
        self.life.record(r)
    }

    /// Batch mode (the batch functions): pushes do not wait for windows, the flush collects the rest.
    pub(super) fn for_batch(mut opts: WindowAggregateOptions, sources: usize) -> Result<Self> {
        if sources == 0 {
            return Err(Error::param("data", "expected at least one source"));
        }
        opts.sources = sources;
        opts.gate_sources = false;
        let mut agg = Self::new(opts)?;
        agg.deferred = true;
        Ok(agg)
    }

    /// Lets `auto` run on the farm if the windows turn out to have few panes (the choice for large in-memory
    /// input and for streams pushed in large batches, with more than one thread).
    pub(super) fn prefer_farm(&mut self) {
        if self.opts.strategy == Strategy::Auto
            && self.opts.output == OutputKind::Windows
            && !self.farm_if_few_panes
            && self.stats.rows_in == 0
            && resolve_threads(self.opts.threads) > 1
        {
            self.farm_if_few_panes = true;
            // Nothing was ingested: the next bind builds the engine again, now knowing the farm is wanted
            // (the bindings bind before the first push so that an empty stream has a schema).
            self.bound = None;
        }
    }

    /// The bound window grid when rows are placed on it as they are (no `tz=` calendar): what the batch
    /// function cuts into time ranges (see `super::ranges`).
    pub(super) fn plain_grid(&self) -> Option<WindowSpec> {
        let b = self.bound.as_ref()?;
        b.calendar.is_none().then_some(b.spec)
    }

    /// Binds source `s`'s schema and checks that the columns the query reads have the types the first
    /// source's have (before any of its rows are read).
    pub(super) fn bind_source(&mut self, s: usize, schema: &SchemaRef) -> Result<()> {
        self.bind(schema)?;
        let bound = self.bound.as_ref().expect("bound");
        let empty = RecordBatch::new_empty(plain_schema(schema));
        for name in used_columns(&self.opts, &self.specs) {
            check_same_type(&bound.schema, &empty, &name, &format!("source {s}"))?;
        }
        Ok(())
    }

    /// `on_late="keep"`: every late row since the last call, in arrival order, with the input's columns (then
    /// `source` when the operator has several sources) and the `watermark` each met; `None` before the input
    /// schema is known or when late rows are not kept.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use arrow_array::{Int64Array, RecordBatch};
    /// use windgate_core::aggregate::{LatenessOpt, OnLate, Span, WindowAggregateOptions, WindowAggregator};
    ///
    /// let mut opts = WindowAggregateOptions::new("ts", Span::Units(10), vec![("*".into(), vec!["count".into()])]);
    /// opts.lateness = LatenessOpt::Bound(Span::Units(2));
    /// opts.on_late = OnLate::Keep;
    /// let mut agg = WindowAggregator::new(opts).unwrap();
    /// let batch = RecordBatch::try_from_iter([("ts", Arc::new(Int64Array::from(vec![1, 20, 3, 19])) as _)]).unwrap();
    /// agg.push(&batch, 0).unwrap();
    /// let late = agg.take_late_rows().unwrap().unwrap();
    /// assert_eq!(late.num_rows(), 1); // ts 3 came after the watermark 20 - 2 = 18; 19 did not
    /// assert_eq!(late.schema().field(1).name(), "watermark");
    /// ```
    pub fn take_late_rows(&mut self) -> Result<Option<RecordBatch>> {
        self.late.take()
    }

    /// The schema of [`Self::take_late_rows`]' batches, once the input schema is known (`on_late="keep"`).
    pub fn late_rows_schema(&self) -> Option<SchemaRef> {
        self.late.schema().cloned()
    }

    /// Marks the operator unusable (used by the bindings when a panic was caught).
    pub fn poison(&mut self, why: impl Into<String>) {
        self.life.poison(why);
    }

    /// The watermark over open sources: `None` while some open source has none. A source's watermark is its
    /// K-slack's, raised to what the caller promised; late rows are still judged by the K-slack alone.
    fn watermark(&self) -> Option<i64> {
        let mut wm = i64::MAX;
        for s in self.sources.iter().filter(|s| !s.closed) {
            let own = match (s.kslack.watermark(), s.promised) {
                (Some(a), Some(b)) => a.max(b),
                (a, b) => a.or(b)?,
            };
            wm = wm.min(own);
        }
        Some(wm)
    }

    /// Promises that no row of `source` still to come has a time below `t` (promises only move forward).
    /// A row that breaks the promise is an internal error, so only callers that know every row may promise:
    /// [`super::batch::window_aggregate_in_memory`] does.
    pub(super) fn promise(&mut self, source: usize, t: i64) {
        let s = &mut self.sources[source];
        s.promised = Some(s.promised.map_or(t, |p| p.max(t)));
    }

    fn emit_ready(&mut self) -> Result<RecordBatch> {
        // A source may end before any row arrived (an empty partition, an idle sensor): nothing to emit.
        let Some(b) = self.bound.as_ref() else {
            return Ok(RecordBatch::new_empty(Arc::new(Schema::empty())));
        };
        let wait = !self.deferred;
        if self.opts.output == OutputKind::Partials {
            return match self.watermark() {
                Some(i64::MAX) => self.emit_panes_through(i64::MAX),
                Some(wm) => self.emit_panes_through(b.spec.last_closed_pane(b.closing(wm))),
                None => Ok(RecordBatch::new_empty(b.output_schema.clone())),
            };
        }
        match self.watermark() {
            Some(i64::MAX) => match b.engine.last_window() {
                Some(last) => self.emit_through(last, wait),
                None => Ok(RecordBatch::new_empty(b.output_schema.clone())),
            },
            Some(wm) => {
                let wm = b.closing(wm);
                let last = b.spec.last_closed_window(wm);
                self.bound
                    .as_mut()
                    .expect("bound")
                    .engine
                    .observe_watermark(wm);
                self.emit_through(last, wait)
            }
            None => Ok(RecordBatch::new_empty(b.output_schema.clone())),
        }
    }

    /// Lets the farm close the panes the watermark has passed, without collecting windows (mid-push).
    fn advance(&mut self) -> Result<()> {
        let wm = self.watermark();
        let b = self.bound.as_mut().expect("bound");
        let last = wm.map(|wm| b.spec.last_closed_window(b.closing(wm)));
        if let (Engine::Parallel(f), Some(wm), Some(last)) = (&mut b.engine, wm, last)
            && wm != i64::MAX
        {
            f.advance(last)?;
        }
        Ok(())
    }

    fn emit_through(&mut self, last: i64, wait: bool) -> Result<RecordBatch> {
        let b = self.bound.as_mut().expect("bound");
        let mut emission = Emission::default();
        b.engine
            .emit_until(last, &mut b.keys, &mut emission, wait)?;
        if let Some(floor) = self.floor {
            emission.drop_through(floor);
        }
        let out = assemble(b, &emission);
        b.engine.scratch().clear();
        let out = out?;
        b.engine.forget_idle_keys(&mut b.keys);
        self.stats.rows_out += out.num_rows() as u64;
        self.stats.windows_out += emission.window_count;
        self.emitted = Some(self.emitted.map_or(last, |e| e.max(last)));
        let needed = b.spec.first_pane(last.saturating_add(1));
        self.log.prune(needed);
        Ok(out)
    }

    /// `output="partials"`: takes every pane up to `last` out of the pane engine as partial-state rows.
    fn emit_panes_through(&mut self, last: i64) -> Result<RecordBatch> {
        let b = self.bound.as_mut().expect("bound");
        let Engine::Pane(engine) = &mut b.engine else {
            return Err(Error::param(
                "output",
                "output=\"partials\" runs on the pane engine only",
            ));
        };
        let rows = engine.drain_panes(last, b.keys.order().ranks);
        let out = partial_batch(b, &rows);
        if let Engine::Pane(engine) = &mut b.engine {
            engine.release(rows.iter().map(|r| r.2));
        }
        let out = out?;
        b.engine.forget_idle_keys(&mut b.keys);
        self.stats.rows_out += out.num_rows() as u64;
        self.emitted = Some(self.emitted.map_or(last, |e| e.max(last)));
        Ok(out)
    }

    /// Validates a batch and hands its admitted rows to the engine. On error nothing has changed but the key
    /// dictionary (which may hold keys of the rejected batch; they are never output).
    fn ingest(&mut self, batch: &RecordBatch, source: usize, first_row: usize) -> Result<()> {
        let read = self.read(batch, source, first_row)?;
        let o = &self.opts;
        let b = self.bound.as_mut().expect("bound");
        let n = batch.num_rows();
        let by_cols: Vec<ArrayRef> =
            o.by.iter()
                .map(|c| column(batch, c, "by").cloned())
                .collect::<Result<_>>()?;
        // The sharded engine's workers number keys themselves; the caller does too only for the checkpoint's
        // copy of the rows (streaming).
        let keys = if b.engine.numbers_keys() && self.deferred {
            Vec::new()
        } else {
            b.keys.ids(&by_cols, n)?
        };

        let late = match o.on_late == OnLate::Keep && !read.admitted.late_at.is_empty() {
            false => None,
            true => Some(self.late.gather(batch, &read.admitted.late_at, source)?),
        };

        // Commit.
        self.late.push(late);
        let src = &mut self.sources[source];
        src.kslack = read.kslack;
        let rows = Admitted {
            ts: read.ts,
            keys,
            key_columns: by_cols,
            max_ts: read.admitted.range.map(|(_, hi)| hi),
            keep: read.admitted.keep,
            inputs: read.inputs,
            source: source as u32,
            seq0: src.seq,
            by: read.order_by,
            sorted: read.sorted,
        };
        src.seq += n as u64;
        self.stats.batches_in += (first_row == 0) as u64;
        self.stats.rows_in += n as u64;
        self.stats.late_rows += read.admitted.late;
        self.stats.null_time_rows += read.admitted.null_time;
        if !self.deferred && b.engine.logs_rows() {
            // The checkpoint's copy of a parallel engine's rows (shares the columns).
            self.log.push(b, &rows);
        }
        if let Engine::Updating(e) = &mut b.engine {
            e.expect_accepted(read.accepted);
        }
        b.engine.ingest(rows)
    }
}
