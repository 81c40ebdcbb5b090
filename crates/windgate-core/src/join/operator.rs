//! `band_join` and the streaming `BandJoiner`: per-side K-slack and reordering, the engines, and the output rows
//! (the data path is in `docs/architecture.md#band-join-a-row-through-scalegate-and-scalejoin`).
//!
//! Each side is a ScaleGate source. Rows are released to it in key order once its watermark passed them
//! (`lateness=K`), or all at the end (`lateness=None`: exact whatever the order, results at `flush`). After
//! each push the side also publishes its watermark as a promise, so the other side's rows below it become
//! ready. A push returns the pairs triggered by every tuple that is ready after it: the same rows for any
//! engine and thread count.

use std::collections::VecDeque;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

use crate::error::{Error, ErrorKind, Result};
use crate::interrupt;
use crate::keys::KeyDict;
use crate::order::admission::OnLate;
use crate::order::kslack::{Admission, KSlack};
use crate::time::{TimeFormat, format_duration};

use super::engine::{Engine, EngineArgs};
use super::options::{BandJoinOptions, Bounds, JoinHow, JoinStrategy, Predicate};
use super::outer::Outer;
use super::prepare::{self, JoinKey, JoinTuple, Side, SideSchema};
use super::processor::{OutPair, Restored};
use super::readiness::ReadyMerge;

/// Tuples fed or processed on the caller's thread between two Ctrl-C checks.
const CHECK_EVERY: usize = 4096;

/// Counters of a join (Python: `BandJoiner.stats`).
#[derive(Debug, Clone, Default)]
pub struct JoinStats {
    pub rows_in: [u64; 2],
    pub late_rows: [u64; 2],
    pub pairs_out: u64,
    /// `how="left"`: left rows emitted without a match.
    pub unmatched_rows: u64,
    /// Pairs compared (window tuples scanned), summed over threads (and over the joiners a checkpoint
    /// chain restored from); per thread below, since this joiner was built or restored.
    pub comparisons: u64,
    pub per_thread: Vec<(u64, u64)>,
    pub threads: usize,
    pub strategy: &'static str,
    pub semantics: &'static str,
    pub index: bool,
    /// Rows waiting for their watermark or for the other side.
    pub buffered_rows: u64,
    /// Rows per side past their own watermark but not ready, because the other side holds readiness back:
    /// what `credits` bounds.
    pub pending_rows: [u64; 2],
    /// Rows per side of the input batches still held for output rows (a batch goes once every row of it
    /// is out of the window).
    pub retained_rows: [u64; 2],
    /// Tuples stored in the windows (every thread's portions).
    pub window_rows: u64,
    /// Pushes refused with a backpressure error.
    pub backpressured: u64,
    pub watermark: [Option<i64>; 2],
    /// `watermark` as it reads: ISO 8601 in the time column's zone for timestamps, the integer otherwise.
    pub watermark_text: [Option<String>; 2],
}

pub(super) struct SideState {
    pub(super) schema: SideSchema,
    pub(super) kslack: KSlack,
    /// Admitted rows not yet released (below the watermark they go, in key order).
    pub(super) buffer: Vec<JoinTuple>,
    /// Input batches still needed for output rows: `(first seq, batch, max ts)`.
    pub(super) chunks: VecDeque<(u64, RecordBatch, i64)>,
    pub(super) rows: u64,
}

/// The streaming band join.
pub struct BandJoiner {
    pub(super) opts: BandJoinOptions,
    pub(super) threads: usize,
    pub(super) strategy: JoinStrategy,
    pub(super) eps: Vec<f64>,
    pub(super) has_eq: bool,
    pub(super) sides: [Option<SideState>; 2],
    /// The time bounds, once the first side is bound (and the time unit known).
    pub(super) bounds: Option<Bounds>,
    pub(super) eq_dict: Option<KeyDict>,
    pub(super) engine: Option<Engine>,
    pub(super) merge: ReadyMerge,
    /// The outputs not returned yet: `(trigger position, pair)` in output order.
    pub(super) pairs: Vec<(u64, OutPair)>,
    pub(super) stats: JoinStats,
    pub(super) flushed: bool,
    pub(super) poisoned: Option<Error>,
    /// The batch function: every left batch comes before every right one, so credits do not apply.
    pub(super) deferred: bool,
    /// Comparisons made before the checkpoint this joiner was restored from (the engine counts its own).
    pub(super) comparisons_before: u64,
}

impl BandJoiner {
    pub fn new(opts: BandJoinOptions) -> Result<Self> {
        opts.validate()?;
        let threads = opts.threads();
        let strategy = opts.strategy.resolve(threads);
        let eps = opts
            .on
            .iter()
            .filter_map(|p| match p {
                Predicate::Band { eps, .. } => Some(*eps),
                Predicate::Eq { .. } => None,
            })
            .collect();
        let has_eq = opts.on.iter().any(|p| matches!(p, Predicate::Eq { .. }));
        let stats = JoinStats {
            threads: if strategy == JoinStrategy::ScaleJoin {
                threads
            } else {
                1
            },
            strategy: strategy.name(),
            semantics: opts.semantics.name(),
            index: opts.index,
            ..Default::default()
        };
        Ok(BandJoiner {
            threads,
            strategy,
            eps,
            has_eq,
            sides: [None, None],
            bounds: None,
            eq_dict: None,
            engine: None,
            merge: ReadyMerge::default(),
            pairs: Vec::new(),
            stats,
            flushed: false,
            poisoned: None,
            deferred: false,
            comparisons_before: 0,
            opts,
        })
    }

    /// Binds a side to its schema (first batch) or checks a later batch against it.
    pub fn bind(&mut self, side: Side, schema: &SchemaRef) -> Result<()> {
        if let Some(s) = &self.sides[side.index()] {
            return s.schema.check_same(schema);
        }
        let time = match side {
            Side::Left => &self.opts.time.0,
            Side::Right => &self.opts.time.1,
        };
        let bound = SideSchema::bind(side, schema, time, &self.opts.on)?;
        if let Some(other) = &self.sides[side.other().index()] {
            let (l, r) = match side {
                Side::Left => (&bound, &other.schema),
                Side::Right => (&other.schema, &bound),
            };
            prepare::check_eq_types(l, r)?;
        }
        if self.bounds.is_none() {
            let bounds = self.opts.bounds(bound.unit, &bound.time)?;
            self.eq_dict = Some(prepare::eq_dict(&bound)?);
            self.bounds = Some(bounds);
            if self.opts.how == JoinHow::Left {
                self.merge.outer = Some(Outer::new(bounds, self.opts.semantics));
            }
        }
        let kslack = KSlack::new(self.opts.lateness_policy(bound.unit, &bound.time)?);
        self.sides[side.index()] = Some(SideState {
            schema: bound,
            kslack,
            buffer: Vec::new(),
            chunks: VecDeque::new(),
            rows: 0,
        });
        Ok(())
    }

    /// Pushes one batch of `side`; returns the pairs that became final.
    pub fn push(&mut self, batch: &RecordBatch, side: Side) -> Result<RecordBatch> {
        self.guard(|j| j.push_inner(batch, side))
    }

    /// Pushes every batch of one stream of `side` (all of `schema`) as one batch: all or nothing, and credits
    /// counted once for the whole push.
    pub fn push_all(
        &mut self,
        schema: &SchemaRef,
        mut batches: Vec<RecordBatch>,
        side: Side,
    ) -> Result<RecordBatch> {
        if let Some(b) = batches
            .iter()
            .find(|b| b.schema().fields() != schema.fields())
        {
            return Err(Error::new(
                ErrorKind::SchemaMismatch,
                format!(
                    "{} input: a batch's schema differs from its stream's ({} vs {})",
                    side.name(),
                    b.schema(),
                    schema
                ),
            ));
        }
        let batch = match batches.len() {
            0 => RecordBatch::new_empty(schema.clone()),
            1 => batches.pop().expect("one"),
            _ => arrow_select::concat::concat_batches(schema, &batches).map_err(Error::output)?,
        };
        self.push(&batch, side)
    }

    /// End of both inputs: every remaining pair. The joiner takes no more input after it.
    pub fn flush(&mut self) -> Result<RecordBatch> {
        self.guard(|j| j.flush_inner())
    }

    pub fn stats(&self) -> JoinStats {
        let mut s = self.stats.clone();
        for side in Side::BOTH {
            if let Some(st) = &self.sides[side.index()] {
                s.buffered_rows += st.buffer.len() as u64;
                s.watermark[side.index()] = st.kslack.watermark();
                s.watermark_text[side.index()] =
                    TimeFormat::of(&st.schema.time_type).format_opt(s.watermark[side.index()]);
            }
        }
        s.buffered_rows += self.merge.pending_len() as u64;
        s.buffered_rows += self.merge.outer.as_ref().map_or(0, |o| o.len() as u64);
        for side in Side::BOTH {
            s.pending_rows[side.index()] = self.merge.pending_of(side) as u64;
            if let Some(st) = &self.sides[side.index()] {
                s.retained_rows[side.index()] =
                    st.chunks.iter().map(|c| c.1.num_rows() as u64).sum();
            }
        }
        match &self.engine {
            Some(Engine::Inline(p)) => {
                s.per_thread = vec![(p.comparisons, p.pairs)];
                s.window_rows = p.stored() as u64;
            }
            Some(Engine::Reference(r)) => {
                s.per_thread = vec![(r.comparisons, s.pairs_out)];
                s.window_rows = r.stored() as u64;
            }
            Some(Engine::Threads(t)) => {
                s.per_thread = t.per_thread();
                s.window_rows = t.stored();
            }
            None => {}
        }
        s.comparisons = self.comparisons_before + s.per_thread.iter().map(|p| p.0).sum::<u64>();
        s
    }

    fn guard(&mut self, f: impl FnOnce(&mut Self) -> Result<RecordBatch>) -> Result<RecordBatch> {
        if let Some(e) = &self.poisoned {
            return Err(Error::new(
                ErrorKind::Poisoned,
                format!(
                    "the join failed earlier and takes no more input: {}",
                    e.message()
                ),
            ));
        }
        let r = f(self);
        // An interruption can come while the threads are mid-flight (or between two tuples of a release), and
        // an internal error while the output is being built: the state is then unknown, so the joiner refuses
        // further work. The error itself goes back unchanged, so the bindings raise the signal handler's
        // exception.
        if let Err(e) = &r
            && matches!(
                e.kind(),
                ErrorKind::Poisoned | ErrorKind::Internal | ErrorKind::Interrupted
            )
        {
            self.poisoned = Some(e.clone());
        }
        r
    }

    fn push_inner(&mut self, batch: &RecordBatch, side: Side) -> Result<RecordBatch> {
        if self.flushed {
            return Err(Error::param(
                "push",
                "the joiner was flushed; create a new one",
            ));
        }
        let (was_bound, had_bounds) = (self.sides[side.index()].is_some(), self.bounds.is_some());
        self.bind(side, &batch.schema())?;
        self.check_credits(side, batch.num_rows() as u64)?;
        if let Err(e) = self.admit(batch, side) {
            // A rejected first batch does not bind the side either: the joiner is exactly as before.
            if !was_bound {
                self.sides[side.index()] = None;
                if !had_bounds {
                    self.bounds = None;
                    self.eq_dict = None;
                    self.merge.outer = None;
                }
            }
            return Err(e);
        }
        let wm = self.sides[side.index()]
            .as_ref()
            .expect("bound")
            .kslack
            .watermark();
        if let Some(wm) = wm {
            self.release(side, |t| t.key.ts < wm)?;
            self.advance(
                side,
                JoinKey {
                    ts: wm,
                    side,
                    seq: 0,
                },
            );
        }
        self.collect()?;
        self.output()
    }

    fn flush_inner(&mut self) -> Result<RecordBatch> {
        if self.flushed {
            return Err(Error::param("flush", "the joiner was already flushed"));
        }
        self.flushed = true;
        if self.bounds.is_some() {
            self.ensure_engine()?;
            self.release_all_merged()?;
            for side in Side::BOTH {
                self.merge.close(side);
                if let Some(Engine::Threads(t)) = &mut self.engine {
                    t.close(side);
                }
            }
            match &mut self.engine {
                // Both inputs closed: the threads run to the end of input and close SG_out.
                Some(Engine::Threads(t)) => {
                    self.merge.count_ready();
                    t.finish(&mut self.pairs)?;
                }
                _ => self.collect()?,
            }
            if let Some(o) = &mut self.merge.outer {
                o.close_all();
            }
        }
        self.output()
    }

    /// Refuses a push of `side` when it already has `credits` rows pending while the *other* side holds
    /// readiness back (its watermark is below this side's): the caller must feed that side (or flush).
    /// Nothing is consumed, so the joiner stays usable and the same batch can be pushed again. A side with
    /// nothing pending may push any batch, and a side that holds readiness back itself is never refused:
    /// that would deadlock. The batch function (all left, then all right) is never refused.
    fn check_credits(&mut self, side: Side, rows: u64) -> Result<()> {
        let Some(limit) = self.opts.credits.filter(|_| !self.deferred) else {
            return Ok(());
        };
        let pending = self.merge.pending_of(side) as u64;
        if rows == 0 || pending == 0 || pending + rows <= limit {
            return Ok(());
        }
        let wm = |s: Side| {
            self.sides[s.index()]
                .as_ref()
                .and_then(|st| st.kslack.watermark())
        };
        let (mine, theirs) = (wm(side), wm(side.other()));
        let other_holds = match (theirs, mine) {
            (None, _) => true,
            (Some(theirs), Some(mine)) => theirs < mine,
            (Some(_), None) => false,
        };
        if !other_holds {
            return Ok(());
        }
        self.stats.backpressured += 1;
        let theirs = theirs.map_or("none yet".to_string(), |t| t.to_string());
        Err(Error::new(
            ErrorKind::Backpressure,
            format!(
                "{side} input has {pending} rows pending (credits={limit}) while the {other} input holds \
                 them back (its watermark is {theirs}, this side's {mine}): push {other} rows (or flush), \
                 then push this batch again (it was not consumed)",
                side = side.name(),
                other = side.other().name(),
                mine = mine.map_or("none".to_string(), |m| m.to_string()),
            ),
        ))
    }

    /// Reads a batch's tuples and runs them past the side's K-slack into its buffer. All or nothing: the rows
    /// are decided on a copy of the K-slack, committed only once the whole batch is accepted, so a batch
    /// rejected for a late row leaves the side as it was and can be pushed again without that row.
    fn admit(&mut self, batch: &RecordBatch, side: Side) -> Result<()> {
        let st = self.sides[side.index()].as_mut().expect("bound");
        let dict = self.eq_dict.as_mut().expect("bound with the first side");
        // Interning values of a rejected batch changes no output: ids are only compared.
        let tuples = prepare::tuples(&st.schema, batch, st.rows, dict)?;
        let mut kslack = st.kslack.clone();
        let mut admitted = Vec::with_capacity(tuples.len());
        let mut late = 0;
        let mut max_ts = i64::MIN;
        for (i, t) in tuples.into_iter().enumerate() {
            match kslack.observe(t.key.ts) {
                Admission::Admit => {
                    max_ts = max_ts.max(t.key.ts);
                    admitted.push(t);
                }
                Admission::Late { watermark } => {
                    if self.opts.on_late == OnLate::Error {
                        let format = TimeFormat::of(&st.schema.time_type);
                        return Err(Error::new(
                            ErrorKind::LateRow,
                            format!(
                                "{} input: row {i} of this batch has time {} below the watermark {} \
                                 (lateness {}); pass on_late=\"drop\" to drop such rows (the batch was not \
                                 consumed)",
                                side.name(),
                                format.format(t.key.ts),
                                format.format(watermark),
                                format_duration(kslack.k(), format.unit())
                            ),
                        ));
                    }
                    late += 1;
                }
            }
        }
        st.kslack = kslack;
        st.buffer.append(&mut admitted);
        if batch.num_rows() > 0 {
            st.chunks.push_back((st.rows, batch.clone(), max_ts));
        }
        st.rows += batch.num_rows() as u64;
        self.stats.late_rows[side.index()] += late;
        self.stats.rows_in[side.index()] += batch.num_rows() as u64;
        Ok(())
    }

    /// Sorts `side`'s buffer and hands the prefix satisfying `below` to the engine.
    fn release(&mut self, side: Side, below: impl Fn(&JoinTuple) -> bool) -> Result<()> {
        let st = self.sides[side.index()].as_mut().expect("bound");
        // Admitted rows arrive nearly sorted: the adaptive sort is close to linear.
        st.buffer.sort_by_key(|t| t.key);
        let n = st.buffer.partition_point(&below);
        let released: Vec<JoinTuple> = st.buffer.drain(..n).collect();
        self.ensure_engine()?;
        self.feed_all(released)
    }

    /// Feeds tuples in order, checking for Ctrl-C every [`CHECK_EVERY`] of them.
    fn feed_all(&mut self, tuples: Vec<JoinTuple>) -> Result<()> {
        for (i, t) in tuples.into_iter().enumerate() {
            if i % CHECK_EVERY == CHECK_EVERY - 1 {
                interrupt::check()?;
            }
            self.feed(t)?;
        }
        Ok(())
    }

    /// At flush: both sides' buffers, interleaved in merged order so the threads work while the caller
    /// inserts.
    fn release_all_merged(&mut self) -> Result<()> {
        let mut all = vec![];
        for side in Side::BOTH {
            if let Some(st) = self.sides[side.index()].as_mut() {
                all.append(&mut st.buffer);
            }
        }
        all.sort_by_key(|t| t.key);
        self.feed_all(all)
    }

    fn feed(&mut self, t: JoinTuple) -> Result<()> {
        match self.engine.as_mut().expect("engine started") {
            Engine::Threads(e) => {
                // The merge only counts the ready prefix here: it needs the key, not the values.
                self.merge.push(JoinTuple {
                    key: t.key,
                    valid: t.valid,
                    eq: t.eq,
                    band: Default::default(),
                });
                self.merge.count_ready();
                e.insert(t, self.merge.ready_count(), &mut self.pairs)?;
            }
            _ => self.merge.push(t),
        }
        Ok(())
    }

    fn advance(&mut self, side: Side, key: JoinKey) {
        self.merge.advance(side, key);
        if let Some(Engine::Threads(e)) = &mut self.engine {
            e.advance(side, key);
        }
    }

    /// Runs every ready tuple through the engine and gathers their outputs into `self.pairs`.
    fn collect(&mut self) -> Result<()> {
        let Some(engine) = self.engine.as_mut() else {
            return Ok(());
        };
        let pairs = &mut self.pairs;
        match engine {
            Engine::Inline(p) => {
                while let Some(t) = self.merge.pop() {
                    p.process(&t, |k, pair| pairs.push((k.trigger, pair)));
                    if p.processed() % CHECK_EVERY as u64 == 0 {
                        interrupt::check()?;
                    }
                }
            }
            Engine::Reference(r) => {
                let mut n = 0usize;
                while let Some(t) = self.merge.pop() {
                    r.process(t, |k, pair| pairs.push((k.trigger, pair)));
                    n += 1;
                    if n.is_multiple_of(CHECK_EVERY) {
                        interrupt::check()?;
                    }
                }
            }
            Engine::Threads(e) => {
                self.merge.count_ready();
                e.collect(self.merge.ready_count(), pairs)?;
            }
        }
        Ok(())
    }

    fn ensure_engine(&mut self) -> Result<()> {
        if self.engine.is_some() {
            return Ok(());
        }
        self.start_engine(None)
    }

    /// Starts the strategy's engine, continuing from a checkpoint's windows when `restored` is given.
    pub(super) fn start_engine(&mut self, restored: Option<&Restored>) -> Result<()> {
        let args = EngineArgs {
            bounds: self.bounds.expect("bound"),
            semantics: self.opts.semantics,
            on: &self.opts.on,
            eps: &self.eps,
            has_eq: self.has_eq,
            index: self.opts.index,
            threads: self.threads,
            restored,
        };
        self.engine = Some((self.strategy.entry().engine)(&args)?);
        Ok(())
    }
}

/// The batch function: every left batch, then every right batch, then the end. `on_batch` runs before each
/// batch (the bindings check Ctrl-C there).
pub fn band_join<L, R>(
    left: (SchemaRef, L),
    right: (SchemaRef, R),
    opts: BandJoinOptions,
    mut on_batch: impl FnMut() -> Result<()>,
) -> Result<(SchemaRef, Vec<RecordBatch>)>
where
    L: IntoIterator<Item = Result<RecordBatch>>,
    R: IntoIterator<Item = Result<RecordBatch>>,
{
    let mut j = BandJoiner::new(opts)?;
    j.deferred = true;
    j.bind(Side::Left, &left.0)?;
    j.bind(Side::Right, &right.0)?;
    let mut out = vec![];
    for batch in left.1 {
        on_batch()?;
        out.push(j.push(&batch?, Side::Left)?);
    }
    for batch in right.1 {
        on_batch()?;
        out.push(j.push(&batch?, Side::Right)?);
    }
    out.push(j.flush()?);
    out.retain(|b| b.num_rows() > 0);
    let schema = j.output_schema().expect("both sides bound");
    Ok((schema, out))
}
