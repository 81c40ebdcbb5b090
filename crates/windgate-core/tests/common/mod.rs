//! Shared pieces of the window-aggregation property tests: random cases (rows with keys, nulls, disorder
//! within a bound, batch cuts), a runner with any options, and a brute-force oracle.

#![allow(dead_code)]

use std::sync::Arc;

use arrow_array::{Float64Array, Int32Array, Int64Array, RecordBatch};
use arrow_select::concat::concat_batches;
use proptest::prelude::*;
// The engine strategy shadows the prelude's `Strategy`; its methods stay in scope.
use proptest::strategy::Strategy as _;
use windgate_core::aggregate::{
    LatenessOpt, Span, Strategy, WindowAggregateOptions, WindowAggregator,
};

#[derive(Debug, Clone)]
pub struct Row {
    pub ts: i64,
    pub key: Option<i32>,
    pub v: Option<f64>,
    pub iv: i64,
}

pub fn batch(rows: &[Row]) -> RecordBatch {
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

pub fn aggs() -> Vec<(String, Vec<String>)> {
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
pub struct Case {
    pub size: i64,
    pub slide: i64,
    pub offset: i64,
    pub lateness: Option<i64>,
    pub rows: Vec<Row>,
    pub cuts: Vec<usize>,
}

pub fn case() -> impl proptest::strategy::Strategy<Value = Case> {
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
        .prop_map(|((size, slide, offset, lateness), rows, cuts)| {
            arrival_case(size, slide, offset, lateness, rows, cuts)
        })
}

/// A case whose rows arrive in the order their delays give: with a bound K, arrival is event order perturbed
/// by a delay <= K, so no row is late; without one, rows arrive as drawn.
pub fn arrival_case(
    size: i64,
    slide: i64,
    offset: i64,
    lateness: Option<i64>,
    mut rows: Vec<(Row, i64)>,
    mut cuts: Vec<usize>,
) -> Case {
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
}

pub fn run(c: &Case, strategy: Strategy, split: bool) -> RecordBatch {
    run_with(c, split, |o| o.strategy = strategy)
}

/// The case's query: its window, `by k`, [`aggs`] and its lateness bound (exact without one).
pub fn case_options(c: &Case) -> WindowAggregateOptions {
    let mut opts = WindowAggregateOptions::new("ts", Span::Units(c.size), aggs());
    opts.slide = Some(Span::Units(c.slide));
    opts.offset = Span::Units(c.offset);
    opts.by = vec!["k".into()];
    opts.lateness = c
        .lateness
        .map_or(LatenessOpt::Exact, |k| LatenessOpt::Bound(Span::Units(k)));
    opts
}

/// Runs a case through the streaming operator, with `tune` setting the engine's options.
pub fn run_with(
    c: &Case,
    split: bool,
    tune: impl FnOnce(&mut WindowAggregateOptions),
) -> RecordBatch {
    let mut opts = case_options(c);
    tune(&mut opts);
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
pub type Expected = (i64, Option<i32>, i64, Option<f64>, Option<f64>, Option<f64>);

pub fn brute(c: &Case) -> Vec<Expected> {
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

/// The rows a fixed K-slack of bound `lateness` admits (watermark = largest time seen - K; a row below it is
/// late), with their arrival numbers, and the number of late rows (`None`: every row, none late).
pub fn admitted(rows: &[Row], lateness: Option<i64>) -> (Vec<(usize, &Row)>, u64) {
    let Some(k) = lateness else {
        return (rows.iter().enumerate().collect(), 0);
    };
    let (mut wm, mut max, mut late) = (None::<i64>, None::<i64>, 0);
    let mut out = vec![];
    for (i, r) in rows.iter().enumerate() {
        if wm.is_some_and(|w| r.ts < w) {
            late += 1;
            continue;
        }
        if max.is_none_or(|m| r.ts > m) {
            max = Some(r.ts);
            wm = Some(r.ts - k);
        }
        out.push((i, r));
    }
    (out, late)
}

/// `n` property-test cases, scaled by the environment's `WINDGATE_EXAMPLES` (a factor, default 1): a deeper
/// run of the determinism suites needs no edit (`WINDGATE_EXAMPLES=10 cargo test --release`).
pub fn cases(n: u32) -> u32 {
    let scale = std::env::var("WINDGATE_EXAMPLES")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(1.0);
    ((f64::from(n) * scale) as u32).max(1)
}
