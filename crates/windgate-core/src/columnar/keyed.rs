//! The partitioned columnar operators' shared machinery: routing a batch into one part per partition,
//! driving an operator's per-key logic over a part in input-row order, and merging the partitions' outputs
//! back into one canonical order.
//!
//! **Why the result cannot depend on the partitioning.** An output row is *attributed* to the input row that
//! caused it: a row-triggered output (`last_n_before`) to its row; a time-triggered one (a window or session
//! closing) to the first input row at which the operator's **stream time** passed the deadline. Stream time
//! is the running maximum of the time column over the operator's whole input (minus `lateness`: the
//! watermark), which every partition knows exactly because *clocked* operators route a part to every
//! partition for every batch (possibly with no rows of its own) carrying the batch's running maximum.
//! Each part sorts its outputs by (attributed row, the operator's canonical order of output columns) and
//! `combine` merges the parts' sorted runs ([`super::merge`]); end-of-stream outputs come last, in the
//! canonical order. Nothing depends on how keys were spread
//! over partitions, on how the stream was cut into batches, or on which worker ran what.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{DataType, SchemaRef};

use super::chunk::{Chunk, FINISH, Routed, Tag};
use super::expr::BoundPredicate;
use super::order::SortKey;
use super::partition_merge::{Run, merge};
use crate::arrow_io::as_i64;
use crate::error::{Error, ErrorKind, Result};
use crate::keys::{RowCodec, hash_key};
use crate::runtime::pipeline::{Partitioned, Partitioner};

/// What `route` computes for an operator.
pub(crate) struct Routing {
    pub keys: Arc<RowCodec>,
    /// Time column index and name.
    pub time: Option<(usize, String)>,
    /// Closes windows or sessions by stream time (every partition sees every batch).
    pub clocked: bool,
    /// Stream time minus this is the watermark.
    pub lateness: i64,
    pub masks: Vec<BoundPredicate>,
    pub values: Option<Arc<RowCodec>>,
    /// Columns the operator reads as numbers: cast once per batch (index, target type).
    pub casts: Vec<(usize, DataType)>,
    pub partitions: usize,
}

/// One part as the operator sees it.
pub(crate) struct PartCtx<'a> {
    pub routed: &'a Routed,
    /// Stream position of the batch's first row (clocked operators).
    pub offset: u64,
    /// Stream time before this batch.
    pub prev: i64,
    pub lateness: i64,
    pub time_name: &'a str,
    pub clocked: bool,
}

impl PartCtx<'_> {
    /// The watermark once row `i` has arrived.
    pub fn watermark(&self, i: usize) -> i64 {
        self.prev
            .max(self.routed.clock[i])
            .saturating_sub(self.lateness)
    }

    pub fn key(&self, r: usize) -> &[u8] {
        self.routed.keys.row(r).data()
    }

    pub fn value(&self, r: usize) -> &[u8] {
        self.routed
            .values
            .as_ref()
            .expect("the operator routes values")
            .row(r)
            .data()
    }

    pub fn mask(&self, m: usize, r: usize) -> bool {
        self.routed.masks[m].value(r)
    }

    /// "row 17" (position in the operator's input) or "row 17 of a batch" when unknown.
    pub fn row_label(&self, r: usize) -> String {
        if self.clocked {
            format!("row {}", self.offset + r as u64)
        } else {
            format!("row {r} of a batch")
        }
    }

    /// Row `r`'s time; a null is an error naming the column and row.
    pub fn time(&self, r: usize, op: &str) -> Result<i64> {
        let valid = self.routed.time_valid.as_ref().is_none_or(|v| v.value(r));
        if !valid {
            return Err(Error::new(
                ErrorKind::NullValue,
                format!(
                    "{op}: column '{}' is null at {}; the time column must not hold nulls (filter them out first)",
                    self.time_name,
                    self.row_label(r)
                ),
            ));
        }
        Ok(self.routed.time.as_ref().expect("the operator routes time")[r])
    }
}

/// The first position in `lo..=hi` whose watermark is at or above `deadline` (watermarks only grow).
fn first_reaching(ctx: &PartCtx, lo: usize, hi: usize, deadline: i64) -> Option<usize> {
    if ctx.watermark(hi) < deadline {
        return None;
    }
    let (mut a, mut b) = (lo, hi);
    while a < b {
        let m = a + (b - a) / 2;
        if ctx.watermark(m) >= deadline {
            b = m;
        } else {
            a = m + 1;
        }
    }
    Some(a)
}

/// A partitioned columnar operator's per-key logic, driven by [`Keyed`].
pub(crate) trait KeyedOp: Send + Sync + 'static {
    /// A partition's state, empty at the start of a run.
    type State: Default + Send + 'static;
    /// Output rows being built for one part, empty to start with.
    type Out: Default;

    fn name(&self) -> &str;
    fn out_rows(&self, out: &Self::Out) -> usize;
    fn out_batch(&self, out: Self::Out) -> Result<RecordBatch>;
    /// Row `r` of the part's input (after every deadline its watermark reached has fired).
    fn row(&self, st: &mut Self::State, ctx: &PartCtx, r: usize, out: &mut Self::Out)
    -> Result<()>;
    /// The earliest pending deadline: it fires once the watermark is at or above it.
    fn next_deadline(&self, _st: &Self::State) -> Option<i64> {
        None
    }
    /// Fires (and removes) everything due at `deadline`.
    fn fire(&self, _st: &mut Self::State, _deadline: i64, _out: &mut Self::Out) -> Result<()> {
        Ok(())
    }
    /// End of stream.
    fn finish(&self, st: &mut Self::State, out: &mut Self::Out) -> Result<()>;
    /// After the merge (rows sorted, `at` their attribution): window_count's top-k cut.
    fn cut(&self, batch: RecordBatch, _at: &[u32]) -> Result<RecordBatch> {
        Ok(batch)
    }
}

/// A [`KeyedOp`] as a pipeline operator.
pub(crate) struct Keyed<O> {
    op: O,
    routing: Routing,
    partitioner: Partitioner,
    input: SchemaRef,
    /// Canonical order of outputs attributed to the same input row (None: row-triggered outputs only,
    /// which keep their order).
    merge: Option<SortKey>,
}

/// A partition's state: the operator's, plus the stream time and position before the next batch.
pub(crate) struct PartitionState<S> {
    st: S,
    prev: i64,
    offset: u64,
}

impl<O: KeyedOp> Keyed<O> {
    pub fn new(op: O, routing: Routing, input: SchemaRef, merge: Option<SortKey>) -> Self {
        let partitioner = Partitioner::Hash {
            partitions: routing.partitions.max(1),
        };
        Self {
            op,
            routing,
            partitioner,
            input,
            merge,
        }
    }

    fn internal(&self, what: &str) -> Error {
        Error::new(
            ErrorKind::Poisoned,
            format!("{}: internal error ({what})", self.op.name()),
        )
    }
}

impl<O: KeyedOp> Partitioned<Chunk> for Keyed<O> {
    type State = PartitionState<O::State>;

    fn name(&self) -> &str {
        self.op.name()
    }

    fn partitions(&self) -> usize {
        self.partitioner.partitions()
    }

    fn new_state(&self, _partition: usize) -> Self::State {
        PartitionState {
            st: O::State::default(),
            prev: i64::MIN,
            offset: 0,
        }
    }

    fn route(&self, input: Chunk, parts: &mut Vec<(usize, Chunk)>) -> Result<()> {
        let batch = input.batch;
        super::check_schema(self.op.name(), &self.input, &batch)?;
        let n = batch.num_rows();
        if n == 0 {
            return Ok(());
        }
        let r = &self.routing;
        let keys = r.keys.encode(&batch)?;
        let (mut time, mut time_valid, mut clock) = (None, None, Vec::new());
        if let Some((idx, name)) = &r.time {
            let col = batch.column(*idx);
            let t = as_i64(col, name)?.to_vec();
            let valid = col.logical_nulls().map(|n| n.inner().clone());
            if r.clocked {
                let mut m = i64::MIN;
                clock = (0..n)
                    .map(|i| {
                        if valid.as_ref().is_none_or(|v| v.value(i)) {
                            m = m.max(t[i]);
                        }
                        m
                    })
                    .collect();
            }
            time = Some(t);
            time_valid = valid;
        }
        let masks = r
            .masks
            .iter()
            .map(|p| p.mask(&batch))
            .collect::<Result<_>>()?;
        let values = r.values.as_ref().map(|c| c.encode(&batch)).transpose()?;
        let casts = r
            .casts
            .iter()
            .map(|(i, dt)| arrow_cast::cast(batch.column(*i), dt))
            .collect::<Result<_, _>>()?;
        let p = self.partitioner.partitions();
        let mut rows: Vec<Vec<u32>> = vec![Vec::new(); p];
        if p == 1 {
            rows[0] = (0..n as u32).collect();
        } else {
            for (i, k) in keys.iter().enumerate() {
                rows[self.partitioner.partition(hash_key(k.data()))].push(i as u32);
            }
        }
        let routed = Arc::new(Routed {
            keys,
            time,
            time_valid,
            clock,
            masks,
            values,
            casts,
        });
        for (part, rows) in rows.into_iter().enumerate() {
            if r.clocked || !rows.is_empty() {
                parts.push((
                    part,
                    Chunk {
                        batch: batch.clone(),
                        tag: Tag::Part {
                            routed: routed.clone(),
                            rows,
                        },
                    },
                ));
            }
        }
        Ok(())
    }

    fn process(&self, ps: &mut Self::State, input: Chunk, out: &mut Vec<Chunk>) -> Result<()> {
        let Tag::Part { routed, rows } = input.tag else {
            return Err(self.internal("a part was expected"));
        };
        let n = input.batch.num_rows();
        let clocked = self.routing.clocked;
        let ctx = PartCtx {
            routed: &routed,
            offset: ps.offset,
            prev: ps.prev,
            lateness: self.routing.lateness,
            time_name: self.routing.time.as_ref().map_or("", |t| t.1.as_str()),
            clocked,
        };
        let op = &self.op;
        let mut o = O::Out::default();
        let mut at: Vec<u32> = Vec::new();
        let mut cursor = 0usize;
        for idx in 0..=rows.len() {
            let own = rows.get(idx).map(|r| *r as usize);
            if clocked {
                // Everything due up to this row (inclusive), or to the batch's end.
                let last = own.unwrap_or(n - 1);
                while let Some(d) = op.next_deadline(&ps.st) {
                    let Some(i) = first_reaching(&ctx, cursor, last, d) else {
                        break;
                    };
                    op.fire(&mut ps.st, d, &mut o)?;
                    at.resize(op.out_rows(&o), i as u32);
                    if op.next_deadline(&ps.st) == Some(d) {
                        return Err(self.internal("a deadline did not fire"));
                    }
                    cursor = i;
                }
            }
            if let Some(r) = own {
                op.row(&mut ps.st, &ctx, r, &mut o)?;
                at.resize(op.out_rows(&o), r as u32);
                cursor = r;
            }
        }
        if clocked {
            ps.prev = ps.prev.max(routed.clock[n - 1]);
            ps.offset += n as u64;
        }
        if !at.is_empty() {
            out.push(Chunk::run(Run::sorted(
                op.out_batch(o)?,
                at,
                self.merge.as_ref(),
            )?));
        }
        Ok(())
    }

    fn combine(&self, parts: Vec<Vec<Chunk>>, out: &mut Vec<Chunk>) -> Result<()> {
        let mut runs = Vec::new();
        for c in parts.into_iter().flatten() {
            let Tag::Attributed(run) = c.tag else {
                return Err(self.internal("an attributed output was expected"));
            };
            runs.push(*run);
        }
        if runs.is_empty() {
            return Ok(());
        }
        let (merged, at) = merge(runs)?;
        let cut = self.op.cut(merged, &at)?;
        if cut.num_rows() > 0 {
            out.push(Chunk::new(cut));
        }
        Ok(())
    }

    fn finish(&self, ps: &mut Self::State, out: &mut Vec<Chunk>) -> Result<()> {
        let mut o = O::Out::default();
        self.op.finish(&mut ps.st, &mut o)?;
        let n = self.op.out_rows(&o);
        if n > 0 {
            let batch = self.op.out_batch(o)?;
            out.push(Chunk::run(Run::sorted(
                batch,
                vec![FINISH; n],
                self.merge.as_ref(),
            )?));
        }
        Ok(())
    }
}
