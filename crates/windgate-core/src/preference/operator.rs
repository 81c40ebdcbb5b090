//! `PreferenceOperator`: the streaming skyline, top-δ dominant and top-k operator, and `preference`, the batch
//! function built on it (`docs/architecture.md#preference-queries`).
//!
//! The operator owns what every engine shares: schema checks, the time column and K-slack admission (the same
//! rules as window aggregation, [`crate::order::admission`]), groups, the value columns as exact `f64` (NaN and
//! null rejected, naming the column), and output assembly. Engines see order keys and values only; the rows
//! they pick are gathered from the retained input, so every input column comes out unchanged.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int32Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use super::arrival_of;
use super::engine::{Engine, EngineKind, WindowPicks};
use super::options::PreferenceOptions;
use super::query::{KernelSpec, PrefChunk};
use super::retained::Retained;
use super::strategy::PreferenceStrategy;
use crate::arrow_io::{as_i64, check_same_type, column, exact_f64, int_column_as};
use crate::error::{Error, ErrorKind, Lifecycle, Result};
use crate::keys::KeyDict;
use crate::order::admission::{Rules, admit};
use crate::order::kslack::KSlack;
use crate::runtime::farm::FarmStats;
use crate::threads::resolve_threads;
use crate::time::{TimeFormat, WindowSpec};

/// Rows ingested at a time on the caller's thread (one slice's scratch stays in cache).
const INGEST_ROWS: usize = 1 << 15;
/// The farm's slices: the caller prepares one while the workers run the previous ones, and a punctuation
/// after each lets the window-level query (WLQ) workers merge closed panes while the pane-level query (PLQ)
/// workers take later rows.
const FARM_INGEST_ROWS: usize = 1 << 13;

/// Counters reported as `stats`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PreferenceStats {
    pub batches_in: u64,
    pub rows_in: u64,
    pub late_rows: u64,
    pub null_time_rows: u64,
    pub rows_out: u64,
    pub windows_out: u64,
    /// Input rows held because an open window may still select them.
    pub retained_rows: u64,
    pub keys: u64,
    pub watermark: Option<i64>,
    /// `watermark` as it reads: ISO 8601 in the time column's zone for timestamps, the integer otherwise.
    pub watermark_text: Option<String>,
    pub slack: i64,
    pub threads: u64,
    pub strategy: &'static str,
    pub farm: Option<FarmStats>,
}

/// What is fixed once the first schema is seen.
pub(super) struct Bound {
    pub(super) schema: SchemaRef,
    pub(super) spec: WindowSpec,
    pub(super) format: TimeFormat,
    pub(super) keys: KeyDict,
    pub(super) engine: Engine,
    output_schema: SchemaRef,
    window_type: DataType,
    kappa: bool,
}

/// The streaming preference operator.
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{Float64Array, Int64Array, RecordBatch};
/// use windgate_core::order::kslack::LatenessOpt;
/// use windgate_core::time::Span;
/// use windgate_core::preference::{Prefer, PreferenceOperator, PreferenceOptions, QueryKind};
///
/// let query = QueryKind::Skyline { dims: vec!["x".into(), "y".into()], prefer: vec![Prefer::Min; 2] };
/// let mut opts = PreferenceOptions::new("ts", Span::Units(10), query);
/// opts.window.lateness = LatenessOpt::Bound(Span::Units(0));
/// let mut sky = PreferenceOperator::new(opts).unwrap();
/// let batch = RecordBatch::try_from_iter([
///     ("ts", Arc::new(Int64Array::from(vec![1, 2, 3, 15])) as _),
///     ("x", Arc::new(Float64Array::from(vec![1.0, 2.0, 0.5, 9.0])) as _),
///     ("y", Arc::new(Float64Array::from(vec![1.0, 2.0, 3.0, 9.0])) as _),
/// ]).unwrap();
/// let out = sky.push(&batch).unwrap();   // window [0,10) is final at ts 15: (1,1) and (0.5,3)
/// assert_eq!(out.num_rows(), 2);
/// assert_eq!(sky.flush().unwrap().num_rows(), 1);   // [10,20) at the end of the stream
/// ```
pub struct PreferenceOperator {
    pub(super) opts: PreferenceOptions,
    kernel: KernelSpec,
    engine: EngineKind,
    pub(super) bound: Option<Bound>,
    pub(super) kslack: KSlack,
    /// Arrival position of the next row.
    pub(super) seq: u64,
    pub(super) retained: Retained,
    pub(super) stats: PreferenceStats,
    pub(super) life: Lifecycle,
    /// The last window already emitted. Engines never hand it out twice; a restored operator
    /// (`checkpoint.rs`) rebuilds its engine from retained rows, which re-creates the open panes' earlier
    /// windows too, and this is what keeps them from coming out again.
    pub(super) emitted: Option<i64>,
    /// Batch mode: pushes do not wait for the farm's windows (the flush collects them, in order).
    deferred: bool,
}

impl PreferenceOperator {
    pub fn new(opts: PreferenceOptions) -> Result<Self> {
        opts.validate()?;
        let threads = resolve_threads(opts.window.threads);
        let engine = match opts.strategy.entry().engine {
            Some(kind) => kind,
            None if threads > 1 => EngineKind::Farm,
            None => EngineKind::Pane,
        };
        let strategy = PreferenceStrategy::of_engine(engine);
        let threads = if strategy.is_parallel() { threads } else { 1 };
        let strategy = strategy.name();
        Ok(Self {
            kernel: KernelSpec::new(&opts.query),
            engine,
            bound: None,
            kslack: KSlack::new(crate::order::kslack::Lateness::Exact),
            seq: 0,
            retained: Retained::default(),
            stats: PreferenceStats {
                threads: threads as u64,
                strategy,
                ..PreferenceStats::default()
            },
            life: Lifecycle::default(),
            emitted: None,
            deferred: false,
            opts,
        })
    }

    pub fn options(&self) -> &PreferenceOptions {
        &self.opts
    }

    /// The output schema, once the input schema is known.
    pub fn output_schema(&self) -> Option<SchemaRef> {
        self.bound.as_ref().map(|b| b.output_schema.clone())
    }

    pub fn stats(&self) -> PreferenceStats {
        let mut s = self.stats.clone();
        if let Some(b) = &self.bound {
            s.keys = b.keys.len() as u64;
            s.farm = b.engine.farm_stats();
        }
        s.retained_rows = self.retained.rows() as u64;
        s.watermark = self.kslack.watermark();
        s.watermark_text = (self.bound.as_ref().map(|b| b.format))
            .unwrap_or_default()
            .format_opt(s.watermark);
        s.slack = self.kslack.k();
        s
    }

    /// Fixes the input schema (the first batch's, or a reader's schema before any batch).
    pub fn bind(&mut self, schema: &SchemaRef) -> Result<()> {
        if self.bound.is_some() {
            return Ok(());
        }
        crate::arrow_io::check_unique_names(schema, "data")?;
        let o = &self.opts.window;
        let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
        let field = |name: &str, param: &str| {
            schema
                .field_with_name(name)
                .map_err(|_| Error::column_not_found(param, name, &names))
        };
        let time_type = field(&o.time, "time")?.data_type().clone();
        let resolved = o.resolve(&time_type)?;
        self.kslack = KSlack::new(resolved.lateness);
        let mut key_types = vec![];
        for b in &o.by {
            key_types.push(field(b, "by")?.data_type().clone());
        }
        let param = self.opts.query.value_param();
        for c in self.opts.query.value_columns() {
            let dt = field(c, param)?.data_type();
            if !(dt.is_integer() || dt.is_floating()) {
                return Err(Error::column_type(
                    c,
                    format!("{param} columns must be numeric (integer or float), got {dt}"),
                ));
            }
        }
        let kappa = matches!(self.opts.query, super::QueryKind::TopDominant { .. });
        let mut fields: Vec<Field> = vec![
            Field::new("window_start", resolved.window_type.clone(), false),
            Field::new("window_end", resolved.window_type.clone(), false),
        ];
        fields.extend(nullable(schema).fields().iter().map(|f| f.as_ref().clone()));
        if kappa {
            fields.push(Field::new("kappa", DataType::Int32, false));
        }
        for name in ["window_start", "window_end", "kappa"] {
            if names.iter().any(|n| n == name) && (name != "kappa" || kappa) {
                return Err(Error::param(
                    "data",
                    format!("input column '{name}' clashes with an output column (rename it)"),
                ));
            }
        }
        let cfg = o.farm.config(self.stats.threads as usize);
        self.bound = Some(Bound {
            schema: nullable(schema),
            spec: resolved.spec,
            format: resolved.format,
            keys: KeyDict::new(o.by.clone(), key_types)?,
            engine: Engine::new(self.engine, resolved.spec, self.kernel.clone(), &cfg)?,
            output_schema: Arc::new(Schema::new(fields)),
            window_type: resolved.window_type,
            kappa,
        });
        Ok(())
    }

    /// Pushes one batch; returns the rows of the windows that became final.
    pub fn push(&mut self, batch: &RecordBatch) -> Result<RecordBatch> {
        self.check_usable("push")?;
        self.bind(batch.schema_ref())?;
        let n = batch.num_rows();
        let farm = self.engine == EngineKind::Farm;
        let slice = if farm { FARM_INGEST_ROWS } else { INGEST_ROWS };
        let mut start = 0;
        loop {
            let len = slice.min(n - start);
            self.ingest(&batch.slice(start, len), start)?;
            start += len;
            if start >= n {
                break;
            }
            if farm {
                self.guard(|this| this.advance())?;
            }
        }
        self.guard(|this| this.emit_ready())
    }

    /// End of stream: emits every window still open.
    pub fn flush(&mut self) -> Result<RecordBatch> {
        self.check_usable("flush")?;
        self.life.end();
        self.guard(|this| {
            let Some(b) = this.bound.as_ref() else {
                return Ok(RecordBatch::new_empty(Arc::new(Schema::empty())));
            };
            match b.engine.last_window() {
                Some(last) => this.emit_through(last, true),
                None => Ok(RecordBatch::new_empty(b.output_schema.clone())),
            }
        })
    }

    /// Marks the operator unusable (used by the bindings when a panic was caught).
    pub fn poison(&mut self, why: impl Into<String>) {
        self.life.poison(why);
    }

    fn check_usable(&self, what: &str) -> Result<()> {
        self.life.check(what)
    }

    /// Runs a step that changes engine state; an error there leaves the operator unusable.
    fn guard<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        let r = f(self);
        self.life.record(r)
    }

    fn last_closed(&self) -> Option<i64> {
        let b = self.bound.as_ref()?;
        Some(b.spec.last_closed_window(self.kslack.watermark()?))
    }

    fn emit_ready(&mut self) -> Result<RecordBatch> {
        match self.last_closed() {
            Some(last) => self.emit_through(last, !self.deferred),
            None => {
                let b = self.bound.as_ref().expect("bound before emitting");
                Ok(RecordBatch::new_empty(b.output_schema.clone()))
            }
        }
    }

    /// Lets the farm close the panes the watermark has passed, without collecting windows (mid-push).
    fn advance(&mut self) -> Result<()> {
        match self.last_closed() {
            Some(last) => self.bound.as_mut().expect("bound").engine.advance(last),
            None => Ok(()),
        }
    }

    fn emit_through(&mut self, last: i64, wait: bool) -> Result<RecordBatch> {
        let b = self.bound.as_mut().expect("bound");
        let mut windows = b.engine.emit_until(last, wait)?;
        if let Some(e) = self.emitted {
            windows.retain(|w| w.0 > e);
        }
        // Without waiting the farm hands back a finished prefix; rows of later windows must stay.
        let done = if wait || self.engine != EngineKind::Farm {
            Some(last)
        } else {
            windows.last().map(|w| w.0)
        };
        let out = assemble(b, &self.retained, windows, &mut self.stats)?;
        if let Some(done) = done {
            self.retained.release_through(done);
            self.emitted = self.emitted.max(Some(done));
        }
        Ok(out)
    }

    /// Validates a slice of a pushed batch and hands its admitted rows to the engine. On error nothing has
    /// changed but the group dictionary (which may hold groups of the rejected batch; they are never output).
    fn ingest(&mut self, batch: &RecordBatch, first_row: usize) -> Result<()> {
        let o = &self.opts.window;
        let b = self.bound.as_mut().expect("bound");
        let batch = &conform(&b.schema, batch)?;
        let n = batch.num_rows();
        let time_col = column(batch, &o.time, "time")?;
        let ts = as_i64(time_col, &o.time)?;
        let by_cols: Vec<ArrayRef> =
            o.by.iter()
                .map(|c| column(batch, c, "by").cloned())
                .collect::<Result<_>>()?;
        let keys = b.keys.ids(&by_cols, n)?;
        let mut ks = self.kslack.clone();
        let rules = Rules {
            time: &o.time,
            null_time: o.null_time,
            on_late: o.on_late,
            source: 0,
            what: "this batch",
            first_row,
            format: b.format,
            range: None,
        };
        let admitted = admit(&mut ks, &ts, time_col.logical_nulls().as_ref(), &rules)?;
        let keep = admitted.keep.as_deref();
        let param = self.opts.query.value_param();
        let cols = self
            .opts
            .query
            .value_columns()
            .into_iter()
            .map(|c| values(column(batch, c, param)?, c, keep, first_row))
            .collect::<Result<Vec<_>>>()?;
        if let Some((lo, hi)) = admitted.range {
            b.spec.check_range(lo, hi, &o.time, &b.format)?;
        }

        // Commit.
        self.kslack = ks;
        let seq0 = self.seq;
        self.seq += n as u64;
        self.stats.batches_in += (first_row == 0) as u64;
        self.stats.rows_in += n as u64;
        self.stats.late_rows += admitted.late;
        self.stats.null_time_rows += admitted.null_time;
        if let Some((_, hi)) = admitted.range {
            let last = b.spec.windows_of_ts(hi).1;
            let keep = admitted.keep.as_deref();
            self.retained.push(seq0, batch.clone(), last, keep);
        }
        let chunk = PrefChunk {
            ts,
            keys,
            cols,
            seq0,
        };
        b.engine.ingest(chunk, admitted.keep)
    }
}

/// The batch with the bound schema's columns, matched by name and put in the first batch's order (rows of every
/// batch come out side by side). A missing, extra or retyped column is an error naming it.
fn conform(schema: &SchemaRef, batch: &RecordBatch) -> Result<RecordBatch> {
    let mismatch = |msg: String| Error::new(ErrorKind::SchemaMismatch, msg);
    let mut columns = Vec::with_capacity(schema.fields().len());
    for f in schema.fields() {
        let Some((i, _)) = batch.schema_ref().column_with_name(f.name()) else {
            return Err(mismatch(format!(
                "column '{}': missing from this batch; every batch must have the first batch's columns",
                f.name()
            )));
        };
        check_same_type(schema, batch, f.name(), "this batch")?;
        columns.push(batch.column(i).clone());
    }
    if batch.num_columns() != columns.len() {
        let extra: Vec<&String> = batch
            .schema_ref()
            .fields()
            .iter()
            .map(|f| f.name())
            .filter(|n| schema.field_with_name(n).is_err())
            .collect();
        return Err(mismatch(format!(
            "this batch has columns the first batch did not have: {extra:?}"
        )));
    }
    let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    RecordBatch::try_new_with_options(schema.clone(), columns, &options).map_err(Error::output)
}

/// The schema with every field nullable: a later batch may hold nulls where the first had none.
fn nullable(schema: &SchemaRef) -> SchemaRef {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// A value column as `f64`; NaN and null in an admitted row are errors naming the column and the row.
pub(super) fn values(
    col: &ArrayRef,
    name: &str,
    keep: Option<&[bool]>,
    first_row: usize,
) -> Result<Vec<f64>> {
    let v = exact_f64(col, name, "preference values", |i| {
        format!("row {} of this batch", first_row + i)
    })?;
    let nulls = col.logical_nulls();
    let admitted = |i: usize| keep.is_none_or(|k| k[i]);
    if let Some(i) =
        (0..v.len()).find(|&i| admitted(i) && nulls.as_ref().is_some_and(|nl| nl.is_null(i)))
    {
        return Err(Error::new(
            ErrorKind::InvalidValue,
            format!(
                "column '{name}': null at row {} of this batch; preference values must not be null",
                first_row + i
            ),
        ));
    }
    if let Some(i) = (0..v.len()).find(|&i| admitted(i) && v[i].is_nan()) {
        return Err(Error::new(
            ErrorKind::InvalidValue,
            format!(
                "column '{name}': NaN at row {} of this batch; preference values must be numbers",
                first_row + i
            ),
        ));
    }
    Ok(v)
}

/// Builds the output batch of finished windows: groups in key order, each group's picks in output order.
fn assemble(
    b: &mut Bound,
    retained: &Retained,
    windows: Vec<WindowPicks>,
    stats: &mut PreferenceStats,
) -> Result<RecordBatch> {
    let order = b.keys.order();
    let (mut win, mut seqs, mut kappa) = (vec![], vec![], vec![]);
    for (j, mut groups) in windows {
        groups.sort_unstable_by_key(|(key, _)| order.ranks[*key as usize]);
        for (_, picks) in groups {
            for (key, k) in picks {
                win.push(j);
                seqs.push(arrival_of(key));
                kappa.push(k.unwrap_or(0) as i32);
            }
        }
        stats.windows_out += 1;
    }
    let rows = retained.gather(&b.schema, &seqs)?;
    let starts = Int64Array::from_iter_values(win.iter().map(|&j| b.spec.window_start(j)));
    let ends = Int64Array::from_iter_values(win.iter().map(|&j| b.spec.window_end(j)));
    let mut columns = vec![
        int_column_as(Arc::new(starts), &b.window_type)?,
        int_column_as(Arc::new(ends), &b.window_type)?,
    ];
    columns.extend(rows.columns().iter().cloned());
    if b.kappa {
        columns.push(Arc::new(Int32Array::from(kappa)));
    }
    stats.rows_out += win.len() as u64;
    let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(win.len()));
    RecordBatch::try_new_with_options(b.output_schema.clone(), columns, &options)
        .map_err(Error::output)
}

/// The batch function: every batch through one operator, then the end of the stream. Without `lateness` the
/// result is exact over all rows whatever their order. `on_batch` runs between batches (Ctrl-C checks).
pub fn preference<I>(
    schema: SchemaRef,
    batches: I,
    opts: PreferenceOptions,
    mut on_batch: impl FnMut() -> Result<()>,
) -> Result<(SchemaRef, Vec<RecordBatch>)>
where
    I: IntoIterator<Item = Result<RecordBatch>>,
{
    let mut op = PreferenceOperator::new(opts)?;
    op.deferred = true;
    op.bind(&schema)?;
    let mut out = vec![];
    for batch in batches {
        on_batch()?;
        let produced = op.push(&batch?)?;
        if produced.num_rows() > 0 {
            out.push(produced);
        }
    }
    out.push(op.flush()?);
    let schema = op.output_schema().expect("bound");
    Ok((schema, out))
}
