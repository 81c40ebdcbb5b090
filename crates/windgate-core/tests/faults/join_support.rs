//! Shared pieces of the band-join tests: single-column input batches, options and the output's time pairs.

#![allow(dead_code)]

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use windgate_core::aggregate::{LatenessOpt, Span};
use windgate_core::join::{BandJoinOptions, JoinStrategy};

/// A batch of one int64 column `ts`.
pub fn ts_batch(ts: impl IntoIterator<Item = i64>) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![Field::new("ts", DataType::Int64, false)]));
    RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from_iter_values(ts))]).unwrap()
}

/// A join on `ts` of both sides with no predicates: `window`, a lateness bound (or exact), engine, threads.
pub fn opts(
    window: i64,
    lateness: Option<i64>,
    strategy: JoinStrategy,
    threads: usize,
) -> BandJoinOptions {
    let mut o = BandJoinOptions::new(("ts".into(), "ts".into()), Span::Units(window), vec![]);
    o.lateness = lateness.map_or(LatenessOpt::Exact, |k| LatenessOpt::Bound(Span::Units(k)));
    o.strategy = strategy;
    o.threads = Some(threads);
    o
}

/// (left ts, right ts) of every output row. A push before both sides are bound returns a batch without
/// columns: such (empty) batches are skipped.
pub fn pairs(batches: &[RecordBatch]) -> Vec<(i64, i64)> {
    let mut out = vec![];
    for b in batches.iter().filter(|b| b.num_rows() > 0) {
        let l = b
            .column_by_name("left_ts")
            .unwrap()
            .as_primitive::<Int64Type>();
        let r = b
            .column_by_name("right_ts")
            .unwrap()
            .as_primitive::<Int64Type>();
        out.extend((0..b.num_rows()).map(|i| (l.value(i), r.value(i))));
    }
    out
}
