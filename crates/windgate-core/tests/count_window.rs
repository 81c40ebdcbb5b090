//! Property tests of count windows (`rows=`, `rows_slide=`): the streaming engine returns the reference
//! engine's rows in the same order, bit for bit, for any batch split, any disorder within the lateness bound,
//! late rows beyond it (dropped and counted) and a restore after any batch; both match an independent brute
//! force of Flink's `countWindow(rows, rows_slide)` over the admitted rows.

mod common;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, Int64Type};
use arrow_array::{Array, RecordBatch};
use arrow_select::concat::concat_batches;
use common::{Row, admitted, aggs, batch};
use proptest::prelude::*;
use windgate_core::ErrorKind;
use windgate_core::aggregate::{
    CountWindowAggregator, LatenessOpt, OnLate, Span, Strategy, WindowAggregateOptions,
    count_window_aggregate,
};

#[derive(Debug, Clone)]
struct Case {
    size: u64,
    slide: u64,
    keyed: bool,
    lateness: Option<i64>,
    rows: Vec<Row>,
    cuts: Vec<usize>,
}

fn case() -> impl proptest::strategy::Strategy<Value = Case> {
    use proptest::strategy::Strategy as _;
    let size = prop_oneof![1u64..4, 1u64..12, Just(1u64 << 40)];
    let slide = prop_oneof![1u64..4, 1u64..12];
    (
        size,
        slide,
        any::<bool>(),
        prop::option::of(0i64..8),
        any::<bool>(),
        0usize..100,
    )
        .prop_flat_map(|(size, slide, keyed, lateness, shuffled, n)| {
            let row = (
                -30i64..30,
                prop::option::weighted(0.9, 0i32..4),
                prop::option::weighted(0.85, -40i32..40),
                -1000i64..1000,
                0i64..8,
            );
            (
                Just((size, slide, keyed, lateness, shuffled)),
                prop::collection::vec(row, n),
                prop::collection::vec(0usize..100, 0..6),
            )
        })
        .prop_map(
            |((size, slide, keyed, lateness, shuffled), rows, mut cuts)| {
                let mut rows: Vec<(Row, i64)> = rows
                    .into_iter()
                    .map(|(ts, key, v, iv, delay)| {
                        let v = v.map(|x| x as f64 * 0.25);
                        (Row { ts, key, v, iv }, delay)
                    })
                    .collect();
                // Arrival: event order perturbed by a delay (within the bound unless `shuffled`).
                if let (Some(k), false) = (lateness, shuffled) {
                    rows.sort_by_key(|(r, _)| r.ts);
                    rows.sort_by_key(|(r, d)| r.ts + d % (k + 1));
                }
                cuts.sort();
                Case {
                    size,
                    slide,
                    keyed,
                    lateness,
                    rows: rows.into_iter().map(|(r, _)| r).collect(),
                    cuts,
                }
            },
        )
}

fn options(c: &Case, strategy: Strategy) -> WindowAggregateOptions {
    let mut opts = WindowAggregateOptions::count("ts", c.size, Some(c.slide), aggs());
    if c.keyed {
        opts.by = vec!["k".into()];
    }
    opts.strategy = strategy;
    opts.lateness = c
        .lateness
        .map_or(LatenessOpt::Exact, |k| LatenessOpt::Bound(Span::Units(k)));
    opts
}

/// The batches of the case: cut at `cuts` when `split`.
fn parts(c: &Case, split: bool) -> Vec<&[Row]> {
    let cuts: Vec<usize> = if split { c.cuts.clone() } else { vec![] };
    let mut out = vec![];
    let mut start = 0;
    for end in cuts.into_iter().chain([c.rows.len()]) {
        let end = end.min(c.rows.len());
        if end < start {
            continue;
        }
        out.push(&c.rows[start..end]);
        start = end;
    }
    out
}

/// Streams the case through the operator (restored from a snapshot after every batch when `restore`);
/// returns the output and the late rows.
fn run(c: &Case, strategy: Strategy, split: bool, restore: bool) -> (RecordBatch, u64) {
    let mut agg = CountWindowAggregator::new(options(c, strategy)).unwrap();
    agg.bind(&batch(&[]).schema()).unwrap();
    let mut outs = vec![];
    for part in parts(c, split) {
        outs.push(agg.push(&batch(part), 0).unwrap());
        if restore {
            let bytes = agg.snapshot(&Default::default()).unwrap();
            agg = CountWindowAggregator::restore(&bytes, None).unwrap();
        }
    }
    outs.push(agg.flush().unwrap());
    let late = agg.stats().late_rows;
    (concat_batches(&outs[0].schema(), &outs).unwrap(), late)
}

/// (key, first, last, rows, count(*), sum(v), first(v), last(v), sum(iv)).
type Window = (
    Option<i32>,
    i64,
    i64,
    i64,
    i64,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    i64,
);

/// Brute force of Flink's definition: per key, the rows in order of (time, arrival); at every `slide`-th
/// row, a window of the last `min(size, n)` rows; windows in the order of their last row.
fn brute(c: &Case) -> (Vec<Window>, u64) {
    let (rows, late) = admitted(&c.rows, c.lateness);
    let key = |r: &Row| if c.keyed { r.key } else { None };
    let mut keys: Vec<Option<i32>> = rows.iter().map(|(_, r)| key(r)).collect();
    keys.sort();
    keys.dedup();
    let mut out = vec![];
    for k in keys {
        let mut mine: Vec<(usize, &Row)> =
            rows.iter().filter(|(_, r)| key(r) == k).copied().collect();
        mine.sort_by_key(|(i, r)| (r.ts, *i));
        let mut n = c.slide as usize;
        while n <= mine.len() {
            let w = &mine[n - (c.size as usize).min(n)..n];
            let vals: Vec<f64> = w.iter().filter_map(|(_, r)| r.v).collect();
            let last = w.last().unwrap();
            out.push((
                (last.1.ts, last.0),
                (
                    k,
                    w[0].1.ts,
                    last.1.ts,
                    w.len() as i64,
                    w.len() as i64,
                    (!vals.is_empty()).then(|| vals.iter().sum::<f64>()), // exact: quarters
                    vals.first().copied(),
                    vals.last().copied(),
                    w.iter().map(|(_, r)| r.iv).sum::<i64>(),
                ),
            ));
            n += c.slide as usize;
        }
    }
    out.sort_by_key(|w| w.0);
    (out.into_iter().map(|w| w.1).collect(), late)
}

fn windows(out: &RecordBatch) -> Vec<Window> {
    let col = |name: &str| out.column_by_name(name).unwrap().clone();
    let f = |name: &str, i: usize| {
        let a = col(name);
        let a = a.as_primitive::<Float64Type>();
        a.is_valid(i).then(|| a.value(i))
    };
    let int = |name: &str, i: usize| col(name).as_primitive::<Int64Type>().value(i);
    (0..out.num_rows())
        .map(|i| {
            let k = out.column_by_name("k").map(|k| {
                let k = k.as_primitive::<Int32Type>();
                k.is_valid(i).then(|| k.value(i))
            });
            (
                k.flatten(),
                int("window_first", i),
                int("window_last", i),
                int("window_rows", i),
                int("count", i),
                f("sum_v", i),
                f("first_v", i),
                f("last_v", i),
                int("sum_iv", i),
            )
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(1000), ..ProptestConfig::default() })]

    #[test]
    fn streaming_equals_reference_and_brute_force(c in case()) {
        let (reference, late) = run(&c, Strategy::Reference, false, false);
        let (reference_split, late_split) = run(&c, Strategy::Reference, true, false);
        let (stream, stream_late) = run(&c, Strategy::Auto, true, false);
        let (stream_whole, _) = run(&c, Strategy::Auto, false, false);
        prop_assert_eq!(&stream, &reference);
        prop_assert_eq!(&stream_whole, &reference);
        prop_assert_eq!(&reference_split, &reference);
        prop_assert_eq!((late, late_split, stream_late), (late, late, late));
        let (expected, expected_late) = brute(&c);
        prop_assert_eq!(windows(&reference), expected);
        prop_assert_eq!(late, expected_late);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(300), ..ProptestConfig::default() })]

    /// Checkpoints: an operator snapshotted and restored after every batch returns the rows (and the late
    /// count) of one that never stopped, bit for bit.
    #[test]
    fn restored_operator_continues_exactly(c in case()) {
        prop_assert_eq!(run(&c, Strategy::Auto, true, true), run(&c, Strategy::Auto, true, false));
    }

    /// Two sources, each with a share of the rows: the same windows as one source holding them in the
    /// order (time, source, arrival), for any split.
    #[test]
    fn sources_split_the_order(c in case(), bits in prop::collection::vec(any::<bool>(), 100)) {
        let c = Case { lateness: None, ..c };
        let mut opts = options(&c, Strategy::Auto);
        opts.sources = 2;
        let (mut a, mut b) = (vec![], vec![]);
        for (i, r) in c.rows.iter().enumerate() {
            if bits[i % bits.len()] { b.push(r.clone()) } else { a.push(r.clone()) }
        }
        let (ba, bb) = (batch(&a), batch(&b));
        let two = count_window_aggregate(
            vec![(ba.schema(), vec![Ok(ba)]), (bb.schema(), vec![Ok(bb)])], opts, || Ok(())).unwrap().batches;
        let one = Case { rows: a.into_iter().chain(b).collect(), ..c.clone() };
        let (expected, _) = brute(&one);
        let two = concat_batches(&two[0].schema(), &two).unwrap();
        prop_assert_eq!(windows(&two), expected);
    }
}

fn rows(ts: &[i64]) -> Vec<Row> {
    ts.iter()
        .enumerate()
        .map(|(i, &ts)| Row {
            ts,
            key: Some(1),
            v: Some(1.0),
            iv: i as i64,
        })
        .collect()
}

/// (first, last, rows, sum(iv)) of the windows of `ts` (one key, `iv` = arrival number).
fn batch_run(ts: &[i64], size: u64, slide: Option<u64>) -> Vec<(i64, i64, i64, i64)> {
    let b = batch(&rows(ts));
    let opts = WindowAggregateOptions::count("ts", size, slide, aggs());
    let out = count_window_aggregate(vec![(b.schema(), vec![Ok(b)])], opts, || Ok(()))
        .unwrap()
        .batches;
    let out = concat_batches(&out[0].schema(), &out).unwrap();
    windows(&out).iter().map(|w| (w.1, w.2, w.3, w.8)).collect()
}

#[test]
fn edges() {
    // Empty input; tumbling; Flink's sliding example (5, 2): rows 1-2, 1-4, 2-6; the rows after the last
    // firing never fire; a slide above the size skips rows; size 1; a huge size (a running window).
    assert_eq!(batch_run(&[], 3, None), vec![]);
    assert_eq!(
        batch_run(&[1, 2, 3, 4, 5], 2, None),
        vec![(1, 2, 2, 1), (3, 4, 2, 5)]
    );
    assert_eq!(
        batch_run(&[1, 2, 3, 4, 5, 6, 7], 5, Some(2)),
        vec![(1, 2, 2, 1), (1, 4, 4, 6), (2, 6, 5, 15)]
    );
    assert_eq!(
        batch_run(&[1, 2, 3, 4, 5, 6, 7], 2, Some(3)),
        vec![(2, 3, 2, 3), (5, 6, 2, 9)]
    );
    assert_eq!(
        batch_run(&[3, 1, 2], 1, None),
        vec![(1, 1, 1, 1), (2, 2, 1, 2), (3, 3, 1, 0)]
    );
    assert_eq!(
        batch_run(&[1, 2, 3], 1 << 40, Some(1)),
        vec![(1, 1, 1, 0), (1, 2, 2, 1), (1, 3, 3, 3)]
    );
    // Equal times: arrival order decides.
    assert_eq!(
        batch_run(&[5, 5, 5], 2, Some(1)),
        vec![(5, 5, 1, 0), (5, 5, 2, 1), (5, 5, 2, 3)]
    );
}

#[test]
fn bad_parameters_name_them() {
    let msg = |opts: WindowAggregateOptions| {
        CountWindowAggregator::new(opts)
            .err()
            .unwrap()
            .message()
            .to_string()
    };
    let base = || WindowAggregateOptions::count("ts", 5, None, aggs());
    let starts = |opts, param: &str| {
        let m = msg(opts);
        assert!(m.starts_with(&format!("{param}:")), "{m}");
    };
    starts(
        WindowAggregateOptions {
            rows: Some(0),
            ..base()
        },
        "rows",
    );
    starts(
        WindowAggregateOptions {
            rows: Some(1 << 50),
            ..base()
        },
        "rows",
    );
    starts(
        WindowAggregateOptions {
            rows_slide: Some(0),
            ..base()
        },
        "rows_slide",
    );
    starts(
        WindowAggregateOptions {
            gap: Some(Span::Units(3)),
            ..base()
        },
        "gap",
    );
    starts(
        WindowAggregateOptions {
            slide: Some(Span::Units(3)),
            ..base()
        },
        "slide",
    );
    starts(
        WindowAggregateOptions {
            offset: Span::Units(3),
            ..base()
        },
        "offset",
    );
    starts(
        WindowAggregateOptions {
            allowed_lateness: Some(Span::Units(3)),
            ..base()
        },
        "allowed_lateness",
    );
    starts(
        WindowAggregateOptions {
            strategy: Strategy::Pane,
            ..base()
        },
        "strategy",
    );
    let no_rows = WindowAggregateOptions {
        rows: None,
        rows_slide: Some(2),
        ..base()
    };
    assert!(
        no_rows
            .validate()
            .unwrap_err()
            .message()
            .starts_with("rows_slide:")
    );
}

#[test]
fn late_rows_drop_or_raise() {
    let mut opts = WindowAggregateOptions::count("ts", 2, None, aggs());
    opts.lateness = LatenessOpt::Bound(Span::Units(2));
    let mut agg = CountWindowAggregator::new(opts.clone()).unwrap();
    let out = agg.push(&batch(&rows(&[10, 20, 17, 18, 30])), 0).unwrap();
    assert_eq!(agg.stats().late_rows, 1); // 17 < 20 - 2
    // Released below 28: 10, 18, 20 -> one window (10, 18).
    assert_eq!(
        windows(&out).iter().map(|w| (w.1, w.2)).collect::<Vec<_>>(),
        vec![(10, 18)]
    );
    opts.on_late = OnLate::Error;
    let mut agg = CountWindowAggregator::new(opts.clone()).unwrap();
    let err = agg.push(&batch(&rows(&[10, 20, 17])), 0).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LateRow);
    // on_late="keep": the late row comes out as a side output, kept across a checkpoint.
    opts.on_late = OnLate::Keep;
    let mut agg = CountWindowAggregator::new(opts).unwrap();
    agg.push(&batch(&rows(&[10, 20, 17])), 0).unwrap();
    let mut agg =
        CountWindowAggregator::restore(&agg.snapshot(&Default::default()).unwrap(), None).unwrap();
    let late = agg.take_late_rows().unwrap().unwrap();
    assert_eq!(late.num_rows(), 1);
    assert_eq!(
        late.column_by_name("watermark")
            .unwrap()
            .as_primitive::<Int64Type>()
            .value(0),
        18
    );
    assert_eq!(agg.stats().late_rows, 1);
    let mut reference = WindowAggregateOptions::count("ts", 2, None, aggs());
    reference.strategy = Strategy::Reference;
    let mut agg = CountWindowAggregator::new(reference).unwrap();
    let err = agg.snapshot(&Default::default()).unwrap_err();
    assert!(err.message().starts_with("strategy:"), "{}", err.message());
}

/// A stream of ever-new keys with tumbling windows: a key that just fired holds nothing and is forgotten
/// (the dictionary stays small); the windows are those of the reference engine, in order.
#[test]
fn idle_keys_are_forgotten() {
    let n = 40_000i64;
    let rows: Vec<Row> = (0..n)
        .map(|i| Row {
            ts: i,
            key: Some((i / 2) as i32),
            v: Some((i % 7) as f64),
            iv: i,
        })
        .collect();
    let c = Case {
        size: 2,
        slide: 2,
        keyed: true,
        lateness: Some(0),
        rows,
        cuts: (1..40).map(|j| j * 1000).collect(),
    };
    let (stream, _) = run(&c, Strategy::Auto, true, false);
    let (reference, _) = run(&c, Strategy::Reference, true, false);
    assert_eq!(stream, reference);
    assert_eq!(stream.num_rows(), n as usize / 2);
    let mut agg = CountWindowAggregator::new(options(&c, Strategy::Auto)).unwrap();
    for part in c.rows.chunks(1000) {
        agg.push(&batch(part), 0).unwrap();
    }
    assert!(agg.stats().keys < 20_000, "{} keys kept", agg.stats().keys);
    assert!(
        agg.stats().open_slots < 10,
        "{} slots",
        agg.stats().open_slots
    );
}
