//! Property tests of window aggregation: the pane engine returns the reference engine's rows in the same
//! order, bit for bit, for any batch split and any disorder within the lateness bound; the reference engine
//! matches a brute-force computation.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, Int64Type};
use arrow_array::{Array, Float64Array, Int32Array, Int64Array, RecordBatch};
use arrow_select::concat::concat_batches;
use proptest::prelude::*;
use windgate_core::aggregate::{
    LatenessOpt, Span, Strategy as Engine, WindowAggregateOptions, WindowAggregator,
};

#[derive(Debug, Clone)]
struct Row {
    ts: i64,
    key: Option<i32>,
    v: Option<f64>,
    iv: i64,
}

fn batch(rows: &[Row]) -> RecordBatch {
    RecordBatch::try_from_iter([
        (
            "ts",
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.ts))) as _,
        ),
        (
            "k",
            Arc::new(Int32Array::from_iter(rows.iter().map(|r| r.key))) as _,
        ),
        (
            "v",
            Arc::new(Float64Array::from_iter(rows.iter().map(|r| r.v))) as _,
        ),
        (
            "iv",
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.iv))) as _,
        ),
    ])
    .unwrap()
}

fn aggs() -> Vec<(String, Vec<String>)> {
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        ("*".into(), names(&["count"])),
        (
            "v".into(),
            names(&["count", "sum", "min", "max", "mean", "first", "last", "var"]),
        ),
        ("iv".into(), names(&["sum", "max", "last"])),
    ]
}

#[derive(Debug, Clone)]
struct Case {
    size: i64,
    slide: i64,
    offset: i64,
    lateness: Option<i64>,
    rows: Vec<Row>,
    cuts: Vec<usize>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        1i64..20,
        1i64..20,
        -15i64..15,
        prop::option::of(0i64..8),
        0usize..120,
        any::<u64>(),
    )
        .prop_flat_map(|(size, slide, offset, lateness, n, _)| {
            let slide = 1 + (slide - 1) % size;
            let row = (
                -60i64..60,
                prop::option::weighted(0.9, 0i32..4),
                prop::option::weighted(0.85, -40i32..40),
                -1000i64..1000,
                0i64..8,
            )
                .prop_map(|(ts, key, v, iv, delay)| {
                    (
                        Row {
                            ts,
                            key,
                            v: v.map(|x| x as f64 * 0.25),
                            iv,
                        },
                        delay,
                    )
                });
            (
                Just((size, slide, offset, lateness)),
                prop::collection::vec(row, n),
                prop::collection::vec(0usize..120, 0..6),
            )
        })
        .prop_map(|((size, slide, offset, lateness), rows, mut cuts)| {
            // With a bound K, arrival is event order perturbed by a delay <= K, so no row is late.
            let mut rows = rows;
            if let Some(k) = lateness {
                rows.sort_by_key(|(r, _)| r.ts);
                rows.sort_by_key(|(r, d)| r.ts + d % (k + 1));
            }
            cuts.sort();
            Case {
                size,
                slide,
                offset,
                lateness,
                rows: rows.into_iter().map(|(r, _)| r).collect(),
                cuts,
            }
        })
}

fn run(c: &Case, strategy: Engine, split: bool) -> RecordBatch {
    let mut opts = WindowAggregateOptions::new("ts", Span::Units(c.size), aggs());
    opts.slide = Some(Span::Units(c.slide));
    opts.offset = Span::Units(c.offset);
    opts.by = vec!["k".into()];
    opts.strategy = strategy;
    opts.lateness = c
        .lateness
        .map_or(LatenessOpt::Exact, |k| LatenessOpt::Bound(Span::Units(k)));
    let mut agg = WindowAggregator::new(opts).unwrap();
    agg.bind(&batch(&[]).schema()).unwrap();
    let mut outs = vec![];
    let mut start = 0;
    let cuts: Vec<usize> = if split {
        c.cuts.iter().map(|&x| x.min(c.rows.len())).collect()
    } else {
        vec![]
    };
    for end in cuts.into_iter().chain([c.rows.len()]) {
        if end < start {
            continue;
        }
        outs.push(agg.push(&batch(&c.rows[start..end]), 0).unwrap());
        start = end;
    }
    outs.push(agg.flush().unwrap());
    assert_eq!(agg.stats().late_rows, 0);
    concat_batches(&outs.last().unwrap().schema(), &outs).unwrap()
}

/// Brute force: every (window, key) with a row, in output order, with count(*), sum(v) and first/last(v).
/// (window_start, key, count, sum, first, last)
type Expected = (i64, Option<i32>, i64, Option<f64>, Option<f64>, Option<f64>);

fn brute(c: &Case) -> Vec<Expected> {
    let mut out = vec![];
    let offset = c.offset.rem_euclid(c.slide);
    let (lo, hi) = (-60 - 40, 60 + 40);
    for j in (lo / c.slide - 2)..(hi / c.slide + 2) {
        let start = j * c.slide + offset;
        let mut keys: Vec<Option<i32>> = c
            .rows
            .iter()
            .filter(|r| start <= r.ts && r.ts < start + c.size)
            .map(|r| r.key)
            .collect();
        keys.sort();
        keys.dedup();
        for k in keys {
            let rows: Vec<(usize, &Row)> = c
                .rows
                .iter()
                .enumerate()
                .filter(|(_, r)| r.key == k && start <= r.ts && r.ts < start + c.size)
                .collect();
            let vals: Vec<(i64, usize, f64)> = rows
                .iter()
                .filter_map(|(i, r)| r.v.map(|v| (r.ts, *i, v)))
                .collect();
            let sum = (!vals.is_empty()).then(|| vals.iter().map(|x| x.2).sum::<f64>()); // exact: quarters
            let first = vals.iter().min_by_key(|x| (x.0, x.1)).map(|x| x.2);
            let last = vals.iter().max_by_key(|x| (x.0, x.1)).map(|x| x.2);
            out.push((start, k, rows.len() as i64, sum, first, last));
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn pane_engine_equals_reference_and_brute_force(c in case()) {
        let reference = run(&c, Engine::Reference, false);
        let pane = run(&c, Engine::Auto, true);
        prop_assert_eq!(&pane, &reference);
        let pane_whole = run(&c, Engine::Auto, false);
        prop_assert_eq!(&pane_whole, &reference);

        let got: Vec<_> = (0..reference.num_rows()).map(|i| {
            let col = |name: &str| reference.column_by_name(name).unwrap().clone();
            let f = |name: &str| { let a = col(name); let a = a.as_primitive::<Float64Type>(); a.is_valid(i).then(|| a.value(i)) };
            (
                col("window_start").as_primitive::<Int64Type>().value(i),
                { let a = col("k"); let a = a.as_primitive::<Int32Type>(); a.is_valid(i).then(|| a.value(i)) },
                col("count").as_primitive::<Int64Type>().value(i),
                f("sum_v"), f("first_v"), f("last_v"),
            )
        }).collect();
        prop_assert_eq!(got, brute(&c));
    }
}

#[test]
fn late_rows_are_dropped_and_counted() {
    let mut opts = WindowAggregateOptions::new("ts", Span::Units(10), aggs());
    opts.lateness = LatenessOpt::Bound(Span::Units(2));
    let mut agg = WindowAggregator::new(opts).unwrap();
    let rows: Vec<Row> = [10, 20, 17, 18, 30]
        .iter()
        .map(|&ts| Row {
            ts,
            key: Some(1),
            v: Some(1.0),
            iv: 1,
        })
        .collect();
    agg.push(&batch(&rows), 0).unwrap();
    assert_eq!(agg.stats().late_rows, 1); // 17 < 20 - 2
}
