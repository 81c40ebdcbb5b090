//! The joiner's output rows: the pairs' input rows gathered from the batches each side keeps (nulls for the
//! right columns of an unmatched left row), and the release of batches no future pair can use (the joiner's
//! memory bound).

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, new_null_array};
use arrow_schema::{Field, Schema, SchemaRef};

use crate::error::{Error, Result};

use super::operator::BandJoiner;
use super::options::{JoinHow, Semantics};
use super::prepare::Side;
use super::processor::OutPair;

impl BandJoiner {
    /// The output schema: `left_*`, `right_*` (nullable for `how="left"`), `ts`. Needs both sides bound.
    pub fn output_schema(&self) -> Option<SchemaRef> {
        let (Some(l), Some(r)) = (&self.sides[0], &self.sides[1]) else {
            return None;
        };
        let mut fields: Vec<Field> = vec![];
        let outer = self.opts.how == JoinHow::Left;
        for (prefix, s) in [("left_", l), ("right_", r)] {
            for f in s.schema.schema.fields() {
                let nullable = f.is_nullable() || (outer && prefix == "right_");
                fields.push(
                    f.as_ref()
                        .clone()
                        .with_name(format!("{prefix}{}", f.name()))
                        .with_nullable(nullable),
                );
            }
        }
        fields.push(Field::new("ts", l.schema.time_type.clone(), false));
        Some(Arc::new(Schema::new(fields)))
    }

    /// Builds the output rows of `self.pairs` and lets go of input batches no future pair can use.
    pub(super) fn output(&mut self) -> Result<RecordBatch> {
        let triggered = std::mem::take(&mut self.pairs);
        let n_pairs = triggered.len();
        let pairs = match self.merge.outer.as_mut() {
            Some(o) => o.resolve(triggered),
            None => triggered.into_iter().map(|p| p.1).collect(),
        };
        self.stats.pairs_out += n_pairs as u64;
        self.stats.unmatched_rows += (pairs.len() - n_pairs) as u64;
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
            // An unmatched left row's right columns come from one extra all-null row after the chunks.
            let null_source = st.chunks.len();
            let picks: Vec<(usize, usize)> = seqs
                .map(|seq| {
                    if seq == OutPair::NO_ROW {
                        return (null_source, 0);
                    }
                    let c = st.chunks.partition_point(|(first, _, _)| *first <= seq) - 1;
                    (c, (seq - st.chunks[c].0) as usize)
                })
                .collect();
            let any_null = side == Side::Right && pairs.iter().any(|p| p.right == OutPair::NO_ROW);
            let time_idx = st
                .schema
                .schema
                .index_of(&st.schema.time)
                .map_err(Error::output)?;
            for (col, field) in st.schema.schema.fields().iter().enumerate() {
                let null_row = any_null.then(|| new_null_array(field.data_type(), 1));
                let arrays: Vec<&dyn Array> = st
                    .chunks
                    .iter()
                    .map(|(_, b, _)| b.column(col).as_ref())
                    .chain(null_row.as_deref())
                    .collect();
                let picked =
                    arrow_select::interleave::interleave(&arrays, &picks).map_err(Error::output)?;
                if col == time_idx {
                    ts[side.index()] = crate::arrow_io::as_i64(&picked, &st.schema.time)?.to_vec();
                }
                columns.push(picked);
            }
        }
        // An unmatched left row's time is its own.
        let max_ts: Int64Array = pairs
            .iter()
            .zip(ts[0].iter().zip(&ts[1]))
            .map(|(p, (l, r))| {
                if p.right == OutPair::NO_ROW {
                    *l
                } else {
                    *l.max(r)
                }
            })
            .collect();
        let time_type = schema.field(schema.fields().len() - 1).data_type().clone();
        columns.push(crate::arrow_io::int_column_as(
            Arc::new(max_ts),
            &time_type,
        )?);
        RecordBatch::try_new(schema, columns).map_err(Error::output)
    }

    /// Drops leading input batches whose rows can no longer be part of a pair (memory stays
    /// bounded). Interval: a future trigger has ts >= the last ready ts, so partners below that side's
    /// [horizon](super::options::Bounds::horizon) are dead (`ts - window` for symmetric bounds), as long as
    /// they were processed (below `that`); an unmatched
    /// left row below it was closed and emitted already. ScaleJoin semantics: a tuple leaves its window once
    /// an own-side tuple beyond `ts + window` was processed.
    fn release_chunks(&mut self) {
        let Some(bounds) = self.bounds else { return };
        let overall = self.merge.ready_max_ts.iter().flatten().max().copied();
        for side in Side::BOTH {
            let last = match self.opts.semantics {
                Semantics::Interval => overall,
                Semantics::ScaleJoin => self.merge.ready_max_ts[side.index()],
            };
            let Some(last) = last else { continue };
            // Rows not processed yet have times >= `last`: the horizon can be above it (`upper < 0` for the
            // left, `lower > 0` for the right side), but their batches must stay.
            let bound = bounds.horizon(side, last).min(last);
            if let Some(st) = self.sides[side.index()].as_mut() {
                while st.chunks.len() > 1 && st.chunks.front().is_some_and(|c| c.2 < bound) {
                    st.chunks.pop_front();
                }
            }
        }
    }
}
