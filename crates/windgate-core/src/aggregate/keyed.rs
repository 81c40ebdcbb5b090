//! The per-key window operator, generic over its kind of window (count windows; session windows, whose
//! operator has parallel workers of its own, are to move onto it):
//! the options, the sources and their watermark, the input schema, the key dictionary and the aggregate
//! states ([`super::front`] reads and admits the batches), `push` / `close_source` / `flush`, the counters, and
//! the batch function. A kind ([`Kind`]) names its parameter and output columns and
//! makes its engines ([`PerKeyEngine`]: streaming or reference), which place the admitted rows and say which
//! windows the watermark closed.

use std::any::Any;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use super::batch::BatchOutput;
use super::forget::{KeyHolder, forget_idle_keys};
use super::front::{self, Columns, Source};
use super::function::AggSpec;
use super::operator::{LateRows, Stats};
use super::options::WindowAggregateOptions;
use super::slots::SlotStore;
use super::state::{AggMeta, InputValues, RowOrder};
use super::strategy::Strategy;
use crate::arrow_io::{decode_dictionaries, plain_schema};
use crate::error::{Error, Lifecycle, Result};
use crate::keys::KeyDict;
use crate::order::admission::OnLate;
use crate::order::kslack::KSlack;
use crate::snapshot::{Reader, Writer};
use crate::time::{TimeFormat, TimeUnit};

/// One kind of per-key window: its parameter, its engines and its output columns.
pub trait Kind: Sized {
    /// A window the watermark closed, before its aggregates are lowered.
    type Window: Copy + 'static;
    /// The streaming engine's name in the counters.
    const STRATEGY: &'static str;
    /// The operator's name in a snapshot's header.
    const OPERATOR: &'static str;
    /// What errors call the kind ("count windows").
    const NAME: &'static str;

    /// The kind's own parameter must be set in `opts` (e.g. `gap`).
    fn require(opts: &WindowAggregateOptions) -> Result<()>;
    /// The kind's output columns between the `by` columns and the aggregates.
    fn window_fields(window_type: &DataType) -> Vec<Field>;
    /// The engine of `opts` (the streaming one, or the reference one), once the time unit is known.
    fn engine(
        opts: &WindowAggregateOptions,
        unit: TimeUnit,
        store: SlotStore,
        reference: bool,
    ) -> Result<Box<dyn PerKeyEngine<Self::Window>>>;
    /// Puts one emission's windows in output order (`ranks`: the keys' output ranks).
    fn order(_windows: &mut [Self::Window], _ranks: &[u32]) {}
    fn key(w: &Self::Window) -> u32;
    fn slot(w: &Self::Window) -> u32;
    /// The kind's own output columns of `windows`.
    fn columns(windows: &[Self::Window], window_type: &DataType) -> Result<Vec<ArrayRef>>;
    /// Checkpoints: writes the streaming engine's state (see [`super::keyed_checkpoint`]).
    fn write_state(b: &Bound<Self>, w: &mut Writer) -> Result<()>;
    /// Checkpoints: reads what [`Self::write_state`] wrote into the freshly bound `b`.
    fn read_state(b: &mut Bound<Self>, opts: &WindowAggregateOptions, r: &Reader<'_>)
    -> Result<()>;
}

/// An engine of a per-key window kind (streaming or reference), whose windows are `W`.
pub trait PerKeyEngine<W>: KeyHolder + AsAny + Send + Sync {
    /// Checks a batch's admitted time range before anything is committed.
    fn check_range(&self, _range: (i64, i64), _time: &str) -> Result<()> {
        Ok(())
    }
    fn ingest(
        &mut self,
        ts: &[i64],
        keys: &[u32],
        keep: Option<&[bool]>,
        inputs: &[InputValues],
        order: RowOrder<'_>,
    );
    /// Takes the windows `watermark` closes (in output order but for [`Kind::order`]); their slots stay
    /// allocated until the operator has lowered them.
    fn close_through(&mut self, watermark: i64, out: &mut Vec<W>);
    fn store(&self) -> &SlotStore;
    fn store_mut(&mut self) -> &mut SlotStore;
    /// The `open_slots` counter.
    fn open_slots(&self) -> u64;
    /// The least watermark at which a call would emit something (`None`: nothing waits for the watermark,
    /// or the engine cannot say). A driver that moves the watermark itself (the Spark Structured Streaming
    /// shard, `docs/spark.md`) sets its next timer there.
    fn next_close(&self) -> Option<i64> {
        None
    }
}

/// The engine behind a `dyn PerKeyEngine` (checkpoints read the streaming engine's own state).
pub trait AsAny {
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any> AsAny for T {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// What is fixed once the first schema is seen.
pub struct Bound<K: Kind> {
    pub schema: SchemaRef,
    pub format: TimeFormat,
    pub keys: KeyDict,
    pub metas: Vec<Arc<AggMeta>>,
    pub engine: Box<dyn PerKeyEngine<K::Window>>,
    pub output_schema: SchemaRef,
}

/// A per-key window operator: count windows ([`super::CountWindowAggregator`]).
pub struct KeyedOperator<K: Kind> {
    pub(super) opts: WindowAggregateOptions,
    specs: Vec<AggSpec>,
    pub(super) bound: Option<Bound<K>>,
    pub(super) sources: Vec<Source>,
    pub(super) stats: Stats,
    pub(super) life: Lifecycle,
    pub(super) reference: bool,
    /// `on_late="keep"`: the late rows not yet taken.
    pub(super) late: LateRows,
}

impl<K: Kind> KeyedOperator<K> {
    /// The operator of `opts`, whose kind's own parameter must be set.
    pub fn new(opts: WindowAggregateOptions) -> Result<Self> {
        K::require(&opts)?;
        let specs = opts.validate()?;
        let reference = opts.strategy == Strategy::Reference;
        let stats = Stats {
            threads: 1,
            strategy: if reference { "reference" } else { K::STRATEGY },
            ..Stats::default()
        };
        Ok(Self {
            sources: front::sources(&opts),
            opts,
            specs,
            bound: None,
            stats,
            life: Lifecycle::default(),
            reference,
            late: LateRows::default(),
        })
    }

    pub fn options(&self) -> &WindowAggregateOptions {
        &self.opts
    }

    /// The output schema, once the input schema is known.
    pub fn output_schema(&self) -> Option<SchemaRef> {
        self.bound.as_ref().map(|b| b.output_schema.clone())
    }

    /// Counters (`open_slots`: see the engine's kind).
    pub fn stats(&self) -> Stats {
        let mut s = self.stats.clone();
        if let Some(b) = &self.bound {
            s.keys = b.keys.len() as u64;
            s.open_slots = b.engine.open_slots();
        }
        s.late_rows_pending = self.late.pending() as u64;
        s.watermark = self.watermark();
        s.slack = self.sources.iter().map(|s| s.kslack.k()).max().unwrap_or(0);
        s
    }

    /// The least watermark at which the engine would emit (see [`PerKeyEngine::next_close`]).
    pub fn next_close(&self) -> Option<i64> {
        self.bound.as_ref()?.engine.next_close()
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
        let out_fields = cols.output_fields(K::window_fields(&cols.window_type()))?;
        if o.on_late == OnLate::Keep {
            self.late.bind(schema, &cols.window_type(), o.sources)?;
        }
        let engine = K::engine(o, cols.unit, SlotStore::new(&cols.metas), self.reference)?;
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

    /// Pushes one batch of source `source`; returns the windows that closed.
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
        let admitted = &read.admitted;
        if let Some(range) = admitted.range {
            b.engine.check_range(range, &self.opts.time)?;
        }
        let keys = b.keys.ids(&read.by_cols, batch.num_rows())?;
        let late = match self.opts.on_late == OnLate::Keep && !admitted.late_at.is_empty() {
            true => Some(self.late.gather(batch, &admitted.late_at, source)?),
            false => None,
        };
        // Commit.
        self.late.push(late);
        let order = RowOrder {
            ts: &read.ts,
            by: read.order_by.as_deref(),
            source: source as u32,
            seq0: read.commit(&mut self.sources[source]),
        };
        b.engine.ingest(
            &read.ts,
            &keys,
            admitted.keep.as_deref(),
            &read.inputs,
            order,
        );
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
            None => Ok(RecordBatch::new_empty(
                self.output_schema()
                    .unwrap_or_else(|| Arc::new(Schema::empty())),
            )),
        }
    }

    /// Emits every window `watermark` closes, in output order.
    fn emit_through(&mut self, watermark: i64) -> Result<RecordBatch> {
        let Some(b) = self.bound.as_mut() else {
            return Ok(RecordBatch::new_empty(Arc::new(Schema::empty())));
        };
        let mut closed = Vec::new();
        b.engine.close_through(watermark, &mut closed);
        if closed.is_empty() {
            return Ok(RecordBatch::new_empty(b.output_schema.clone()));
        }
        K::order(&mut closed, b.keys.order().ranks);
        let out = assemble(b, &closed);
        // The windows' slots were kept for the output; free now.
        let store = b.engine.store_mut();
        closed.iter().for_each(|w| store.release(K::slot(w)));
        let out = out?;
        // Keys holding nothing are forgotten once they are most of the dictionary (memory follows the open
        // state, not the stream's keys).
        forget_idle_keys(b.engine.as_mut(), &mut b.keys);
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

    /// `on_late="keep"`: every late row since the last call, in arrival order, with the input's columns, then
    /// `source` (several sources only) and the `watermark` it met (`None` before the input schema is known or
    /// when late rows are not kept).
    pub fn take_late_rows(&mut self) -> Result<Option<RecordBatch>> {
        self.late.take()
    }

    /// End of stream: emits every window still open.
    pub fn flush(&mut self) -> Result<RecordBatch> {
        self.life.check("flush")?;
        self.life.end();
        let r = self.emit_through(i64::MAX);
        self.life.record(r)
    }
}

/// The output batch of the closed windows, in their order.
fn assemble<K: Kind>(b: &Bound<K>, closed: &[K::Window]) -> Result<RecordBatch> {
    let keys: Vec<u32> = closed.iter().map(K::key).collect();
    let slots: Vec<u32> = closed.iter().map(K::slot).collect();
    let mut columns = b.keys.columns(&keys)?;
    let window_type = b.output_schema.field(b.keys.names().len()).data_type();
    columns.extend(K::columns(closed, window_type)?);
    for state in &b.engine.store().states {
        columns.push(state.finish(&slots)?);
    }
    RecordBatch::try_new(b.output_schema.clone(), columns).map_err(Error::output)
}

/// The batch function of a per-key operator: every source's batches through one operator, then the end of the
/// stream; with `on_late="keep"` also the late rows.
pub(super) fn keyed_aggregate<K: Kind, I>(
    sources: Vec<(SchemaRef, I)>,
    mut opts: WindowAggregateOptions,
    mut on_batch: impl FnMut() -> Result<()>,
) -> Result<BatchOutput>
where
    I: IntoIterator<Item = Result<RecordBatch>>,
{
    if sources.is_empty() {
        return Err(Error::param("data", "expected at least one source"));
    }
    opts.sources = sources.len();
    opts.gate_sources = false;
    let mut agg = KeyedOperator::<K>::new(opts)?;
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
    Ok(BatchOutput {
        schema: agg.output_schema().expect("bound"),
        batches: out,
        late: agg.take_late_rows()?,
    })
}
