//! The sharded engine (`strategy="shard"`) against the reference engine: random keys of every shape the
//! dictionary takes (one integer column over a wide range, strings, a string and an integer together, nulls in
//! any of them), 1-3 workers, random batch splits, disorder within the lateness bound and rows beyond it
//! (dropped and counted), with and without `order_by`, streamed and through the batch function; the same rows
//! in the same order, bit for bit. Plus the edges: no rows, one key, more workers than keys, no key columns,
//! and an error on a worker.

use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_select::concat::concat_batches;
use proptest::prelude::*;
use proptest::strategy::Strategy as _;
use windgate_core::aggregate::{
    LatenessOpt, Span, Strategy, WindowAggregateOptions, WindowAggregator,
    window_aggregate_in_memory,
};

#[derive(Debug, Clone)]
struct Row {
    ts: i64,
    id: Option<i64>,
    name: Option<String>,
    v: Option<f64>,
    /// The `order_by` column of the cases that have one (ties of equal times broken by it).
    tie: i64,
}

/// Key shapes: one integer column, one string column, a string and an integer.
#[derive(Debug, Clone, Copy)]
enum Keys {
    Int,
    Str,
    Both,
}

fn batch(rows: &[Row]) -> RecordBatch {
    RecordBatch::try_from_iter([
        (
            "ts",
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.ts))) as ArrayRef,
        ),
        (
            "id",
            Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.id))) as _,
        ),
        (
            "name",
            Arc::new(StringArray::from_iter(rows.iter().map(|r| r.name.clone()))) as _,
        ),
        (
            "v",
            Arc::new(Float64Array::from_iter(rows.iter().map(|r| r.v))) as _,
        ),
        (
            "tie",
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.tie))) as _,
        ),
    ])
    .unwrap()
}

fn options(
    keys: Keys,
    lateness: Option<i64>,
    strategy: Strategy,
    threads: usize,
) -> WindowAggregateOptions {
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let aggs = vec![
        ("*".into(), names(&["count"])),
        (
            "v".into(),
            names(&["count", "sum", "max", "mean", "first", "last"]),
        ),
        ("id".into(), names(&["max", "min", "last"])),
    ];
    let mut o = WindowAggregateOptions::new("ts", Span::Units(12), aggs);
    o.slide = Some(Span::Units(4));
    o.by = match keys {
        Keys::Int => names(&["id"]),
        Keys::Str => names(&["name"]),
        Keys::Both => names(&["name", "id"]),
    };
    o.lateness = lateness.map_or(LatenessOpt::Exact, |k| LatenessOpt::Bound(Span::Units(k)));
    o.on_late = windgate_core::aggregate::OnLate::Drop;
    o.strategy = strategy;
    o.threads = Some(threads);
    o
}

/// Pushes the rows cut at `cuts`, then flushes; the output and the late rows counted.
fn stream(rows: &[Row], cuts: &[usize], o: WindowAggregateOptions) -> (RecordBatch, u64) {
    let mut agg = WindowAggregator::new(o).unwrap();
    agg.bind(&batch(&[]).schema()).unwrap();
    let mut outs = vec![];
    let mut start = 0;
    for end in cuts.iter().map(|&c| c.min(rows.len())).chain([rows.len()]) {
        if end >= start {
            outs.push(agg.push(&batch(&rows[start..end]), 0).unwrap());
            start = end;
        }
    }
    outs.push(agg.flush().unwrap());
    let late = agg.stats().late_rows;
    (concat_batches(&outs[0].schema(), &outs).unwrap(), late)
}

fn in_memory(rows: &[Row], o: WindowAggregateOptions) -> RecordBatch {
    let b = batch(rows);
    let wg = window_aggregate_in_memory(vec![(b.schema(), vec![b])], o, || Ok(())).unwrap();
    let (schema, out) = (wg.schema, wg.batches);
    concat_batches(&schema, &out).unwrap()
}

fn rows() -> impl proptest::strategy::Strategy<Value = (Vec<Row>, Option<i64>)> {
    let row = (
        0i64..80,
        prop::option::weighted(0.9, prop_oneof![0i64..6, any::<i64>()]),
        prop::option::weighted(0.9, "[a-d]{0,2}"),
        prop::option::weighted(0.9, -40i32..40),
        0i64..10,
        0i64..3,
    );
    (
        prop::collection::vec(row, 0..150),
        prop::option::of(0i64..6),
    )
        .prop_map(|(rows, lateness)| {
            // Arrival: event order perturbed by a delay up to 9, so with a bound below 9 some rows are late.
            let mut rows = rows;
            rows.sort_by_key(|r| r.0 + r.4);
            let rows = (rows.into_iter())
                .map(|(ts, id, name, v, _, tie)| Row {
                    ts,
                    id,
                    name,
                    v: v.map(|x| x as f64 * 0.25),
                    tie,
                })
                .collect();
            (rows, lateness)
        })
}

fn keys() -> impl proptest::strategy::Strategy<Value = Keys> {
    prop_oneof![Just(Keys::Int), Just(Keys::Str), Just(Keys::Both)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(debug_assertions) { 32 } else { 256 }))]

    #[test]
    fn shard_equals_the_reference(
        (rows, lateness) in rows(),
        keys in keys(),
        threads in 1usize..4,
        cuts in prop::collection::vec(0usize..150, 0..6),
        order_by in any::<bool>(),
    ) {
        let mut cuts = cuts;
        cuts.sort();
        let opts = |strategy, threads| {
            let mut o = options(keys, lateness, strategy, threads);
            o.order_by = order_by.then(|| "tie".to_string());
            o
        };
        let (want, late) = stream(&rows, &cuts, opts(Strategy::Reference, 1));
        let (got, got_late) = stream(&rows, &cuts, opts(Strategy::Shard, threads));
        prop_assert_eq!(&got, &want, "streamed, {} threads", threads);
        prop_assert_eq!(got_late, late);
        let whole = in_memory(&rows, opts(Strategy::Shard, threads));
        let (want_whole, _) = stream(&rows, &[], opts(Strategy::Reference, 1));
        prop_assert_eq!(&whole, &want_whole, "in memory, {} threads", threads);
    }
}

#[test]
fn no_rows_one_key_and_more_workers_than_keys() {
    let one: Vec<Row> = (0..40)
        .map(|ts| Row {
            ts,
            id: Some(7),
            name: Some("x".into()),
            v: Some(ts as f64),
            tie: 0,
        })
        .collect();
    let two: Vec<Row> = (0..40)
        .map(|ts| Row {
            ts,
            id: (ts % 2 == 0).then_some(3),
            name: None,
            v: None,
            tie: 0,
        })
        .collect();
    for rows in [vec![], one, two] {
        for keys in [Keys::Int, Keys::Str, Keys::Both] {
            let (want, _) = stream(
                &rows,
                &[5, 17],
                options(keys, Some(2), Strategy::Reference, 1),
            );
            for threads in [1, 2, 7] {
                let (got, _) = stream(
                    &rows,
                    &[5, 17],
                    options(keys, Some(2), Strategy::Shard, threads),
                );
                assert_eq!(got, want, "{keys:?}, {threads} threads");
            }
        }
    }
}

/// Without `by` columns every row is one key, on worker 0; the other workers see every batch and keep none.
#[test]
fn no_key_columns() {
    let rows: Vec<Row> = (0..100)
        .map(|i| Row {
            ts: (i * 7) % 50,
            id: Some(i),
            name: None,
            v: Some(i as f64 * 0.5),
            tie: 0,
        })
        .collect();
    let run = |strategy, threads| {
        let mut o = options(Keys::Int, None, strategy, threads);
        o.by = vec![];
        stream(&rows, &[10, 60], o).0
    };
    let want = run(Strategy::Reference, 1);
    assert_eq!(run(Strategy::Shard, 3), want);
}

/// An error on a worker (here an integer sum that overflows when its window is finished) comes back as the
/// operator's error, not a hang, and the operator stays poisoned.
#[test]
fn a_worker_error_is_an_error() {
    let rows: Vec<Row> = (0..4)
        .map(|ts| Row {
            ts,
            id: Some(i64::MAX - 1),
            name: None,
            v: None,
            tie: 0,
        })
        .collect();
    let mut o = options(Keys::Str, None, Strategy::Shard, 2);
    o.aggs = vec![("id".into(), vec!["sum".into()])];
    let mut agg = WindowAggregator::new(o).unwrap();
    agg.push(&batch(&rows), 0).unwrap();
    let err = agg.flush().unwrap_err();
    assert!(err.message().contains("overflow"), "{}", err.message());
    assert!(agg.push(&batch(&rows), 0).is_err());
}
