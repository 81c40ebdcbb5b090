//! `band_join` and the streaming `BandJoiner` (DESIGN §5): per-side K-slack and reordering, the engines, and
//! the output rows.
//!
//! Each side is a ScaleGate source. Rows are released to it in key order once its watermark passed them
//! (`lateness=K`), or all at the end (`lateness=None`: exact whatever the order, results at `flush`). After
//! each push the side also publishes its watermark as a promise, so the other side's rows below it become
//! ready. A push returns the pairs triggered by every tuple that is ready after it: the same rows for any
//! engine and thread count.

use std::collections::VecDeque;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch};
use arrow_schema::{Field, Schema, SchemaRef};

use crate::aggregate::keys::KeyDict;
use crate::aggregate::options::OnLate;
use crate::error::{Error, ErrorKind, Result};
use crate::interrupt;
use crate::order::kslack::{Admission, KSlack};

use super::merge::ReadyMerge;
use super::options::{BandJoinOptions, JoinStrategy, Predicate, Semantics};
use super::prepare::{self, JoinKey, JoinTuple, Side, SideSchema};
use super::processor::{OutPair, Processor};
use super::reference::ReferenceJoin;
use super::scale_join::ScaleJoin;

/// Tuples fed or processed on the caller's thread between two Ctrl-C checks.
const CHECK_EVERY: usize = 4096;

/// Counters of a join (Python: `BandJoiner.stats`).
#[derive(Debug, Clone, Default)]
pub struct JoinStats {
    pub rows_in: [u64; 2],
    pub late_rows: [u64; 2],
    pub pairs_out: u64,
    /// Pairs compared (window tuples scanned), summed over threads; per thread below.
    pub comparisons: u64,
    pub per_thread: Vec<(u64, u64)>,
    pub threads: usize,
    pub strategy: &'static str,
    pub semantics: &'static str,
    pub index: bool,
    /// Rows waiting for their watermark or for the other side.
    pub buffered_rows: u64,
    pub watermark: [Option<i64>; 2],
}

enum Engine {
    Inline(Box<Processor>),
    Reference(Box<ReferenceJoin>),
    Threads(Box<ScaleJoin>),
}

struct SideState {
    schema: SideSchema,
    kslack: KSlack,
    /// Admitted rows not yet released (below the watermark they go, in key order).
    buffer: Vec<JoinTuple>,
    /// Input batches still needed for output rows: `(first seq, batch, max ts)`.
    chunks: VecDeque<(u64, RecordBatch, i64)>,
    rows: u64,
}

/// The streaming band join.
pub struct BandJoiner {
    opts: BandJoinOptions,
    threads: usize,
    strategy: JoinStrategy,
    eps: Vec<f64>,
    has_eq: bool,
    sides: [Option<SideState>; 2],
    window: Option<i64>,
    eq_dict: Option<KeyDict>,
    engine: Option<Engine>,
    merge: ReadyMerge,
    pairs: Vec<OutPair>,
    stats: JoinStats,
    flushed: bool,
    poisoned: Option<Error>,
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
            window: None,
            eq_dict: None,
            engine: None,
            merge: ReadyMerge::default(),
            pairs: Vec::new(),
            stats,
            flushed: false,
            poisoned: None,
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
        if self.window.is_none() {
            self.window = Some(self.opts.window_units(bound.unit)?);
            self.eq_dict = Some(prepare::eq_dict(&bound)?);
        }
        let kslack = KSlack::new(self.opts.lateness_policy(bound.unit)?);
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
            }
        }
        s.buffered_rows += self.merge.pending_len() as u64;
        match &self.engine {
            Some(Engine::Inline(p)) => {
                s.per_thread = vec![(p.comparisons, p.pairs)];
            }
            Some(Engine::Reference(r)) => {
                s.per_thread = vec![(r.comparisons, s.pairs_out)];
            }
            Some(Engine::Threads(t)) => s.per_thread = t.per_thread(),
            None => {}
        }
        s.comparisons = s.per_thread.iter().map(|p| p.0).sum();
        s
    }

    /// The output schema: `left_*`, `right_*`, `ts`. Needs both sides bound.
    pub fn output_schema(&self) -> Option<SchemaRef> {
        let (Some(l), Some(r)) = (&self.sides[0], &self.sides[1]) else {
            return None;
        };
        let mut fields: Vec<Field> = vec![];
        for (prefix, s) in [("left_", l), ("right_", r)] {
            for f in s.schema.schema.fields() {
                fields.push(
                    f.as_ref()
                        .clone()
                        .with_name(format!("{prefix}{}", f.name())),
                );
            }
        }
        fields.push(Field::new("ts", l.schema.time_type.clone(), false));
        Some(Arc::new(Schema::new(fields)))
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
        // An interruption can come while the threads are mid-flight (or between two tuples of a release): the
        // state is then unknown, so the joiner refuses further work. The error itself goes back unchanged, so
        // the bindings raise the signal handler's exception.
        if let Err(e) = &r
            && matches!(e.kind(), ErrorKind::Poisoned | ErrorKind::Interrupted)
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
        let (was_bound, had_window) = (self.sides[side.index()].is_some(), self.window.is_some());
        self.bind(side, &batch.schema())?;
        if let Err(e) = self.admit(batch, side) {
            // A rejected first batch does not bind the side either: the joiner is exactly as before.
            if !was_bound {
                self.sides[side.index()] = None;
                if !had_window {
                    self.window = None;
                    self.eq_dict = None;
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
        if self.window.is_some() {
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
        }
        self.output()
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
                        return Err(Error::new(
                            ErrorKind::LateRow,
                            format!(
                                "{} input: row {i} of this batch has time {} below the watermark {watermark} \
                                 (lateness {}); pass on_late=\"drop\" to drop such rows (the batch was not \
                                 consumed)",
                                side.name(),
                                t.key.ts,
                                kslack.k()
                            ),
                        ));
                    }
                    late += 1;
                }
            }
        }
        st.kslack = kslack;
        st.buffer.append(&mut admitted);
        st.chunks.push_back((st.rows, batch.clone(), max_ts));
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
                    p.process(&t, |_, pair| pairs.push(pair));
                    if p.processed() % CHECK_EVERY as u64 == 0 {
                        interrupt::check()?;
                    }
                }
            }
            Engine::Reference(r) => {
                let mut n = 0usize;
                while let Some(t) = self.merge.pop() {
                    r.process(t, |_, pair| pairs.push(pair));
                    n += 1;
                    if n % CHECK_EVERY == 0 {
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
        let window = self.window.expect("bound");
        let (sem, index) = (self.opts.semantics, self.opts.index);
        let (eps, has_eq) = (self.eps.clone(), self.has_eq);
        self.engine = Some(match self.strategy {
            JoinStrategy::Reference => {
                Engine::Reference(Box::new(ReferenceJoin::new(window, sem, &self.opts.on)))
            }
            JoinStrategy::ScaleJoin => {
                let n = self.threads;
                Engine::Threads(Box::new(ScaleJoin::start(n, |id| {
                    Processor::new(id, n, window, sem, &eps, has_eq, index)
                })?))
            }
            JoinStrategy::Serial | JoinStrategy::Auto => Engine::Inline(Box::new(Processor::new(
                0, 1, window, sem, &eps, has_eq, index,
            ))),
        });
        Ok(())
    }

    /// Builds the output rows of `self.pairs` and lets go of input batches no future pair can use.
    fn output(&mut self) -> Result<RecordBatch> {
        let pairs = std::mem::take(&mut self.pairs);
        self.stats.pairs_out += pairs.len() as u64;
        let batch = match self.output_schema() {
            Some(schema) => self.rows_of(&pairs, schema)?,
            None => RecordBatch::new_empty(Arc::new(Schema::empty())),
        };
        self.release_chunks();
        Ok(batch)
    }

    fn rows_of(&self, pairs: &[OutPair], schema: SchemaRef) -> Result<RecordBatch> {
        if pairs.is_empty() {
            return Ok(RecordBatch::new_empty(schema));
        }
        let mut columns: Vec<ArrayRef> = vec![];
        let mut ts: [Vec<i64>; 2] = [vec![], vec![]];
        for side in Side::BOTH {
            let st = self.sides[side.index()].as_ref().expect("bound");
            let seqs = pairs.iter().map(|p| match side {
                Side::Left => p.left,
                Side::Right => p.right,
            });
            let picks: Vec<(usize, usize)> = seqs
                .map(|seq| {
                    let c = st.chunks.partition_point(|(first, _, _)| *first <= seq) - 1;
                    (c, (seq - st.chunks[c].0) as usize)
                })
                .collect();
            let time_idx = st.schema.schema.index_of(&st.schema.time)?;
            for col in 0..st.schema.schema.fields().len() {
                let arrays: Vec<&dyn Array> = st
                    .chunks
                    .iter()
                    .map(|(_, b, _)| b.column(col).as_ref())
                    .collect();
                let picked = arrow_select::interleave::interleave(&arrays, &picks)?;
                if col == time_idx {
                    ts[side.index()] = crate::arrow_io::as_i64(&picked, &st.schema.time)?.to_vec();
                }
                columns.push(picked);
            }
        }
        let max_ts: Int64Array = ts[0].iter().zip(&ts[1]).map(|(l, r)| *l.max(r)).collect();
        let time_type = schema.field(schema.fields().len() - 1).data_type().clone();
        columns.push(crate::arrow_io::int_column_as(
            Arc::new(max_ts),
            &time_type,
        )?);
        Ok(RecordBatch::try_new(schema, columns)?)
    }

    /// Drops leading input batches whose rows can no longer be part of a pair (DESIGN §6: memory stays
    /// bounded). Interval: a future trigger has ts >= the last ready ts, so partners below `that - window`
    /// are dead. ScaleJoin semantics: a tuple leaves its window once an own-side tuple beyond `ts + window`
    /// was processed.
    fn release_chunks(&mut self) {
        let Some(w) = self.window else { return };
        let overall = self.merge.ready_max_ts.iter().flatten().max().copied();
        for side in Side::BOTH {
            let last = match self.opts.semantics {
                Semantics::Interval => overall,
                Semantics::ScaleJoin => self.merge.ready_max_ts[side.index()],
            };
            let Some(last) = last else { continue };
            let bound = last.saturating_sub(w);
            if let Some(st) = self.sides[side.index()].as_mut() {
                while st.chunks.len() > 1 && st.chunks.front().is_some_and(|c| c.2 < bound) {
                    st.chunks.pop_front();
                }
            }
        }
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
