//! Window aggregation under hostile use: ends before any row, parameters at their bounds, keys that never
//! repeat, dictionary-encoded and duplicate columns, failures in the middle of a stream.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, DictionaryArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use windgate_core::ErrorKind;
use windgate_core::aggregate::{
    LatenessOpt, OnLate, Span, Strategy, WindowAggregateOptions, WindowAggregator,
};

fn count_opts(size: i64, slide: i64) -> WindowAggregateOptions {
    let mut o = WindowAggregateOptions::new(
        "ts",
        Span::Units(size),
        vec![("*".into(), vec!["count".into()])],
    );
    o.slide = Some(Span::Units(slide));
    o
}

fn ts_batch(ts: Vec<i64>) -> RecordBatch {
    RecordBatch::try_from_iter([("ts", Arc::new(Int64Array::from(ts)) as ArrayRef)]).unwrap()
}

fn counts(b: &RecordBatch) -> Vec<i64> {
    let c = b.column_by_name("count").unwrap();
    c.as_primitive::<Int64Type>().values().to_vec()
}

const STRATEGIES: [&str; 9] = [
    "auto",
    "pane",
    "reference",
    "farm",
    "shard",
    "rrcpa",
    "hsa",
    "mq",
    "tumlsc",
];

#[test]
fn a_source_may_end_before_any_row() {
    for name in STRATEGIES {
        let mut o = count_opts(10, 10);
        o.strategy = Strategy::parse(name).unwrap();
        o.sources = 2;
        o.threads = Some(2);
        let mut agg = WindowAggregator::new(o).unwrap();
        let out = agg.close_source(1).unwrap();
        assert_eq!(out.num_rows(), 0, "{name}");
        let out = agg.push(&ts_batch(vec![1, 2, 15]), 0).unwrap();
        let rest = agg.flush().unwrap();
        let all: Vec<i64> = counts(&out).into_iter().chain(counts(&rest)).collect();
        assert_eq!(all, vec![2, 1], "{name}");
    }
    // One source, closed at once, then flushed: empty, no panic.
    let mut agg = WindowAggregator::new(count_opts(10, 10)).unwrap();
    assert_eq!(agg.close_source(0).unwrap().num_rows(), 0);
    assert_eq!(agg.flush().unwrap().num_rows(), 0);
}

#[test]
fn windows_per_row_and_sources_are_bounded() {
    let e = WindowAggregator::new(count_opts(1 << 40, 1)).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::InvalidParameter);
    assert!(e.message().contains("windows per row"), "{e}");
    // At the bound it works (one row, a million windows would be output: just construct).
    assert!(WindowAggregator::new(count_opts(1 << 20, 1)).is_ok());
    let mut o = count_opts(10, 10);
    o.sources = 1 << 40;
    let e = WindowAggregator::new(o).err().unwrap();
    assert!(e.message().starts_with("sources:"), "{e}");
    let mut o = count_opts(10, 10);
    o.sources = 1000;
    o.strategy = Strategy::Mq;
    let e = WindowAggregator::new(o).err().unwrap();
    assert!(e.message().contains("a thread per source"), "{e}");
}

#[test]
fn keys_without_open_state_are_forgotten() {
    let mut o = WindowAggregateOptions::new(
        "ts",
        Span::Units(10),
        vec![("v".into(), vec!["sum".into()])],
    );
    o.by = vec!["k".into()];
    o.lateness = LatenessOpt::Bound(Span::Units(0));
    for strategy in [Strategy::Pane, Strategy::Reference] {
        o.strategy = strategy;
        let mut agg = WindowAggregator::new(o.clone()).unwrap();
        let mut rows_out = 0;
        let per_batch = 10_000i64;
        for b in 0..40i64 {
            let ts: Vec<i64> = (0..per_batch).map(|i| (b * per_batch + i) / 100).collect();
            let keys: Vec<String> = (0..per_batch)
                .map(|i| format!("key-{}", b * per_batch + i))
                .collect();
            let batch = RecordBatch::try_from_iter([
                ("ts", Arc::new(Int64Array::from(ts)) as ArrayRef),
                ("k", Arc::new(StringArray::from(keys)) as ArrayRef),
                (
                    "v",
                    Arc::new(Float64Array::from(vec![1.0; per_batch as usize])) as ArrayRef,
                ),
            ])
            .unwrap();
            rows_out += agg.push(&batch, 0).unwrap().num_rows();
            let keys = agg.stats().keys;
            assert!(
                keys <= 2 * per_batch as u64,
                "{strategy:?}: {keys} keys held after batch {b}"
            );
        }
        rows_out += agg.flush().unwrap().num_rows();
        assert_eq!(rows_out, 400_000, "{strategy:?}: every key's one window");
    }
}

#[test]
fn forgotten_keys_come_back_with_the_same_output_order() {
    // Keys seen, forgotten, and seen again: output rows are still ordered by (window, key).
    let mut o = WindowAggregateOptions::new(
        "ts",
        Span::Units(1),
        vec![("*".into(), vec!["count".into()])],
    );
    o.by = vec!["k".into()];
    o.lateness = LatenessOpt::Bound(Span::Units(0));
    let mut agg = WindowAggregator::new(o).unwrap();
    let mut got = vec![];
    for t in 0..4i64 {
        let n = 70_000i64;
        let keys: Vec<i64> = (0..n).map(|i| (i * 7919 + t * 13) % (3 * n)).collect();
        let batch = RecordBatch::try_from_iter([
            (
                "ts",
                Arc::new(Int64Array::from(vec![t; n as usize])) as ArrayRef,
            ),
            ("k", Arc::new(Int64Array::from(keys)) as ArrayRef),
        ])
        .unwrap();
        got.push(agg.push(&batch, 0).unwrap());
    }
    got.push(agg.flush().unwrap());
    for b in got.iter().filter(|b| b.num_rows() > 0) {
        let ws = b
            .column_by_name("window_start")
            .unwrap()
            .as_primitive::<Int64Type>();
        let k = b.column_by_name("k").unwrap().as_primitive::<Int64Type>();
        for i in 1..b.num_rows() {
            assert!((ws.value(i - 1), k.value(i - 1)) < (ws.value(i), k.value(i)));
        }
    }
    assert_eq!(got.iter().map(|b| b.num_rows()).sum::<usize>(), 4 * 70_000);
}

#[test]
fn dictionary_encoded_columns_read_as_their_values() {
    let keys = StringArray::from(vec!["b", "a", "b", "c"]);
    let dict: DictionaryArray<Int32Type> = vec!["b", "a", "b", "c"].into_iter().collect();
    let ts = Int64Array::from(vec![1, 2, 3, 4]);
    let plain = RecordBatch::try_from_iter([
        ("ts", Arc::new(ts.clone()) as ArrayRef),
        ("k", Arc::new(keys) as ArrayRef),
    ])
    .unwrap();
    let encoded = RecordBatch::try_from_iter([
        ("ts", Arc::new(ts) as ArrayRef),
        ("k", Arc::new(dict) as ArrayRef),
    ])
    .unwrap();
    let run = |b: &RecordBatch| {
        let mut o = count_opts(10, 10);
        o.by = vec!["k".into()];
        let mut agg = WindowAggregator::new(o).unwrap();
        agg.push(b, 0).unwrap();
        agg.flush().unwrap()
    };
    assert_eq!(run(&plain), run(&encoded));
    assert_eq!(run(&encoded).schema().field(0).data_type(), &DataType::Utf8);
}

#[test]
fn a_duplicate_column_name_the_query_reads_is_an_error() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("ts", DataType::Int64, false),
        Field::new("ts", DataType::Int64, false),
    ]));
    let b = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(vec![1])) as ArrayRef,
            Arc::new(Int64Array::from(vec![2])) as ArrayRef,
        ],
    )
    .unwrap();
    let mut agg = WindowAggregator::new(count_opts(10, 10)).unwrap();
    let e = agg.push(&b, 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidParameter);
    assert!(e.message().contains("column 'ts' appears 2 times"), "{e}");
}

#[test]
fn windows_closed_before_a_failing_batch_of_a_stream_are_not_lost() {
    let mut o = count_opts(10, 10);
    o.lateness = LatenessOpt::Bound(Span::Units(0));
    let mut agg = WindowAggregator::new(o).unwrap();
    let bad = RecordBatch::try_from_iter([(
        "ts",
        Arc::new(arrow_array::StringArray::from(vec!["x"])) as ArrayRef,
    )])
    .unwrap();
    let stream = vec![Ok(ts_batch(vec![1, 2, 25])), Ok(bad)];
    assert!(agg.push_stream(stream, 0).is_err());
    // The first batch closed [0, 10) and [10, 20) had nothing: the next call returns [0, 10).
    let out = agg.push(&ts_batch(vec![26]), 0).unwrap();
    assert_eq!(counts(&out), vec![2]);
    assert_eq!(counts(&agg.flush().unwrap()), vec![2]);
}

#[test]
fn a_poisoned_operator_keeps_its_first_cause() {
    let mut o = WindowAggregateOptions::new(
        "ts",
        Span::Units(10),
        vec![("v".into(), vec!["sum".into()])],
    );
    o.lateness = LatenessOpt::Bound(Span::Units(0));
    let mut agg = WindowAggregator::new(o).unwrap();
    let b = RecordBatch::try_from_iter([
        ("ts", Arc::new(Int64Array::from(vec![0, 1, 30])) as ArrayRef),
        (
            "v",
            Arc::new(Int64Array::from(vec![i64::MAX, 1, 0])) as ArrayRef,
        ),
    ])
    .unwrap();
    let first = agg.push(&b, 0).unwrap_err();
    let again = agg.push(&b, 0).unwrap_err();
    let third = agg.push(&b, 0).unwrap_err();
    assert_eq!(again.message(), third.message(), "first: {first}");
    assert_eq!(again.message().matches("failed earlier").count(), 1);
}

#[test]
fn a_large_batch_with_a_late_row_deep_inside_is_refused_whole() {
    // Batches are ingested in slices; a late row in a later slice must not leave the earlier ones ingested.
    let mut o = count_opts(10, 10);
    o.lateness = LatenessOpt::Bound(Span::Units(0));
    o.on_late = OnLate::Error;
    let mut agg = WindowAggregator::new(o.clone()).unwrap();
    let mut ts: Vec<i64> = (0..100_000).collect();
    ts[90_000] = 5;
    let e = agg.push(&ts_batch(ts), 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LateRow, "{e}");
    assert!(e.message().contains("row 90000"), "{e}");
    assert_eq!(agg.stats().rows_in, 0);
    // As if the batch never came: the corrected batch gives a fresh operator's output.
    let fixed: Vec<i64> = (0..100_000).collect();
    let mut fresh = WindowAggregator::new(o).unwrap();
    let got = (
        agg.push(&ts_batch(fixed.clone()), 0).unwrap(),
        agg.flush().unwrap(),
    );
    let want = (
        fresh.push(&ts_batch(fixed), 0).unwrap(),
        fresh.flush().unwrap(),
    );
    assert_eq!(got, want);
}

#[test]
fn forgetting_keys_never_changes_a_row() {
    // Keys recur at random over a key space far larger than the open state, so they are forgotten and come
    // back with new ids. Small pushes (forgetting between them) against one push of everything (nothing is
    // forgotten before the end): the same rows in the same order, for the pane and the reference engine.
    let n = 120_000usize;
    let mut x = 0x2545_f491_u64;
    let keys: Vec<i64> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 50_000) as i64
        })
        .collect();
    let ts: Vec<i64> = (0..n as i64).map(|i| i / 50).collect();
    let v: Vec<f64> = (0..n).map(|i| (i % 97) as f64 * 0.5).collect();
    let batch = RecordBatch::try_from_iter([
        ("ts", Arc::new(Int64Array::from(ts)) as ArrayRef),
        ("k", Arc::new(Int64Array::from(keys)) as ArrayRef),
        ("v", Arc::new(Float64Array::from(v)) as ArrayRef),
    ])
    .unwrap();
    // Windows of 2 panes recombine their panes; windows of 8 go through the sliding stacks, whose per-key
    // state must follow the renamed keys too.
    let shapes = [
        (Strategy::Pane, 20),
        (Strategy::Reference, 20),
        (Strategy::Pane, 80),
    ];
    for (strategy, size) in shapes {
        let mut o = WindowAggregateOptions::new(
            "ts",
            Span::Units(size),
            vec![("v".into(), vec!["sum".into(), "first".into(), "var".into()])],
        );
        o.slide = Some(Span::Units(10));
        o.by = vec!["k".into()];
        o.lateness = LatenessOpt::Bound(Span::Units(0));
        o.strategy = strategy;
        let mut small = WindowAggregator::new(o.clone()).unwrap();
        let mut got = vec![];
        for start in (0..n).step_by(3_000) {
            got.push(
                small
                    .push(&batch.slice(start, 3_000.min(n - start)), 0)
                    .unwrap(),
            );
        }
        got.push(small.flush().unwrap());
        let mut whole = WindowAggregator::new(o).unwrap();
        let want = [whole.push(&batch, 0).unwrap(), whole.flush().unwrap()];
        let schema = want[0].schema();
        let concat = |b: &[RecordBatch]| arrow_select::concat::concat_batches(&schema, b).unwrap();
        assert_eq!(concat(&got), concat(&want), "{strategy:?}");
        assert!(
            small.stats().keys < 50_000,
            "{strategy:?}: keys were forgotten"
        );
    }
}
