//! Property tests of session windows (`gap=`): the streaming engine returns the reference engine's rows in
//! the same order, bit for bit, for any batch split, any disorder within the lateness bound and late rows
//! beyond it (dropped and counted); both match an independent brute force over the admitted rows.

mod common;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, Int64Type};
use arrow_array::{Array, RecordBatch};
use arrow_select::concat::concat_batches;
use common::{Row, admitted, aggs, batch};
use proptest::prelude::*;
use windgate_core::ErrorKind;
use windgate_core::aggregate::{
    LatenessOpt, OnLate, SessionAggregator, Span, Strategy, WindowAggregateOptions,
    session_aggregate,
};

#[derive(Debug, Clone)]
struct Case {
    gap: i64,
    lateness: Option<i64>,
    rows: Vec<Row>,
    cuts: Vec<usize>,
    /// Workers of the streaming engine (keys partitioned among them).
    threads: usize,
}

fn case() -> impl proptest::strategy::Strategy<Value = Case> {
    use proptest::strategy::Strategy as _;
    let gap = prop_oneof![1i64..4, 1i64..25, Just(1_000_000i64)];
    (
        gap,
        prop::option::of(0i64..8),
        any::<bool>(),
        0usize..100,
        1usize..5,
    )
        .prop_flat_map(|(gap, lateness, shuffled, n, threads)| {
            let row = (
                -60i64..60,
                prop::option::weighted(0.9, 0i32..4),
                prop::option::weighted(0.85, -40i32..40),
                -1000i64..1000,
                0i64..8,
            );
            (
                Just((gap, lateness, shuffled, threads)),
                prop::collection::vec(row, n),
                prop::collection::vec(0usize..100, 0..6),
            )
        })
        .prop_map(|((gap, lateness, shuffled, threads), rows, mut cuts)| {
            let mut rows: Vec<(Row, i64)> = rows
                .into_iter()
                .map(|(ts, key, v, iv, delay)| {
                    let v = v.map(|x| x as f64 * 0.25);
                    (Row { ts, key, v, iv }, delay)
                })
                .collect();
            // Arrival: event order perturbed by a delay (within the bound unless `shuffled`: then rows arrive
            // as drawn and some are late).
            if let (Some(k), false) = (lateness, shuffled) {
                rows.sort_by_key(|(r, _)| r.ts);
                rows.sort_by_key(|(r, d)| r.ts + d % (k + 1));
            }
            cuts.sort();
            Case {
                gap,
                lateness,
                rows: rows.into_iter().map(|(r, _)| r).collect(),
                cuts,
                threads,
            }
        })
}

fn options(c: &Case, strategy: Strategy) -> WindowAggregateOptions {
    let mut opts = WindowAggregateOptions::session("ts", Span::Units(c.gap), aggs());
    opts.by = vec!["k".into()];
    opts.strategy = strategy;
    opts.threads = Some(if strategy == Strategy::Reference {
        1
    } else {
        c.threads
    });
    opts.lateness = c
        .lateness
        .map_or(LatenessOpt::Exact, |k| LatenessOpt::Bound(Span::Units(k)));
    opts
}

/// Streams the case through the operator (cut at `cuts` when `split`); returns the output and late rows.
fn run(c: &Case, strategy: Strategy, split: bool) -> (RecordBatch, u64) {
    let mut agg = SessionAggregator::new(options(c, strategy)).unwrap();
    agg.bind(&batch(&[]).schema()).unwrap();
    let cuts: Vec<usize> = if split { c.cuts.clone() } else { vec![] };
    let mut outs = vec![];
    let mut start = 0;
    for end in cuts.into_iter().chain([c.rows.len()]) {
        let end = end.min(c.rows.len());
        if end < start {
            continue;
        }
        outs.push(agg.push(&batch(&c.rows[start..end]), 0).unwrap());
        start = end;
    }
    outs.push(agg.flush().unwrap());
    let late = agg.stats().late_rows;
    (concat_batches(&outs[0].schema(), &outs).unwrap(), late)
}

/// (key, start, end, count(*), sum(v), min(v), max(v), first(v), last(v)).
type Session = (
    Option<i32>,
    i64,
    i64,
    i64,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
);

/// Brute force: per key, sort the admitted rows by time and cut where a row's time is above the previous
/// row's time plus gap (Spark's rule); ordered by (end, start, key with nulls first).
fn brute(c: &Case) -> (Vec<Session>, u64) {
    let (rows, late) = admitted(&c.rows, c.lateness);
    let mut keys: Vec<Option<i32>> = rows.iter().map(|(_, r)| r.key).collect();
    keys.sort();
    keys.dedup();
    let mut out = vec![];
    for k in keys {
        let mut mine: Vec<(usize, &Row)> =
            rows.iter().filter(|(_, r)| r.key == k).copied().collect();
        mine.sort_by_key(|(i, r)| (r.ts, *i));
        let mut groups: Vec<Vec<(usize, &Row)>> = vec![];
        for (i, r) in mine {
            match groups.last_mut() {
                Some(g) if r.ts <= g.last().unwrap().1.ts + c.gap => g.push((i, r)),
                _ => groups.push(vec![(i, r)]),
            }
        }
        for g in groups {
            let vals: Vec<f64> = g.iter().filter_map(|(_, r)| r.v).collect();
            let some = !vals.is_empty();
            let min = vals.iter().copied().reduce(f64::min);
            let max = vals.iter().copied().reduce(f64::max);
            out.push((
                k,
                g[0].1.ts,
                g.last().unwrap().1.ts + c.gap,
                g.len() as i64,
                some.then(|| vals.iter().sum::<f64>()), // exact: quarters
                min,
                max,
                vals.first().copied(),
                vals.last().copied(),
            ));
        }
    }
    out.sort_by_key(|s| (s.2, s.1, s.0));
    (out, late)
}

fn sessions(out: &RecordBatch) -> Vec<Session> {
    let col = |name: &str| out.column_by_name(name).unwrap().clone();
    let f = |name: &str, i: usize| {
        let a = col(name);
        let a = a.as_primitive::<Float64Type>();
        a.is_valid(i).then(|| a.value(i))
    };
    let int = |name: &str, i: usize| col(name).as_primitive::<Int64Type>().value(i);
    (0..out.num_rows())
        .map(|i| {
            let k = col("k");
            let k = k.as_primitive::<Int32Type>();
            (
                k.is_valid(i).then(|| k.value(i)),
                int("window_start", i),
                int("window_end", i),
                int("count", i),
                f("sum_v", i),
                f("min_v", i),
                f("max_v", i),
                f("first_v", i),
                f("last_v", i),
            )
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(1000), ..ProptestConfig::default() })]

    #[test]
    fn streaming_equals_reference_and_brute_force(c in case()) {
        let (reference, late) = run(&c, Strategy::Reference, false);
        let (reference_split, late_split) = run(&c, Strategy::Reference, true);
        let (stream, stream_late) = run(&c, Strategy::Auto, true);
        let (stream_whole, _) = run(&c, Strategy::Auto, false);
        prop_assert_eq!(&stream, &reference);
        prop_assert_eq!(&stream_whole, &reference);
        prop_assert_eq!(&reference_split, &reference);
        prop_assert_eq!((late, late_split, stream_late), (late, late, late));
        let (expected, expected_late) = brute(&c);
        prop_assert_eq!(sessions(&reference), expected);
        prop_assert_eq!(late, expected_late);
    }
}

/// [`run`] with a snapshot after every batch, the stream continuing in the operator restored from it.
fn run_restoring(c: &Case) -> (RecordBatch, u64) {
    let mut agg = SessionAggregator::new(options(c, Strategy::Auto)).unwrap();
    let mut outs = vec![];
    let mut start = 0;
    for end in c.cuts.iter().copied().chain([c.rows.len()]) {
        let end = end.min(c.rows.len());
        if end < start {
            continue;
        }
        outs.push(agg.push(&batch(&c.rows[start..end]), 0).unwrap());
        start = end;
        let bytes = agg.snapshot(&Default::default()).unwrap();
        // Restored on another number of workers (a runtime setting): the same rows.
        let mut opts = options(c, Strategy::Auto);
        opts.threads = Some(1 + (start + c.threads) % 3);
        agg = SessionAggregator::restore(&bytes, Some(opts)).unwrap();
    }
    outs.push(agg.flush().unwrap());
    let late = agg.stats().late_rows;
    (concat_batches(&outs[0].schema(), &outs).unwrap(), late)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(300), ..ProptestConfig::default() })]

    /// Checkpoints: an operator snapshotted and restored after every batch returns the rows (and the late
    /// count) of one that never stopped, bit for bit.
    #[test]
    fn restored_operator_continues_exactly(c in case()) {
        prop_assert_eq!(run_restoring(&c), run(&c, Strategy::Auto, true));
    }
}

fn rows(ts: &[i64]) -> Vec<Row> {
    ts.iter()
        .map(|&ts| Row {
            ts,
            key: Some(1),
            v: Some(1.0),
            iv: 1,
        })
        .collect()
}

fn batch_run(ts: &[i64], gap: i64) -> Vec<(i64, i64, i64)> {
    let b = batch(&rows(ts));
    let mut opts = WindowAggregateOptions::session("ts", Span::Units(gap), aggs());
    opts.by = vec!["k".into()];
    let (_, out) = session_aggregate(vec![(b.schema(), vec![Ok(b)])], opts, || Ok(())).unwrap();
    let out = concat_batches(&out[0].schema(), &out).unwrap();
    sessions(&out).iter().map(|s| (s.1, s.2, s.3)).collect()
}

#[test]
fn edges() {
    // Empty input, one row, equal times, a row exactly at the session's end (joins it, as in Spark), a
    // bridging row arriving last, gap 1 and a huge gap.
    assert_eq!(batch_run(&[], 5), vec![]);
    assert_eq!(batch_run(&[7], 5), vec![(7, 12, 1)]);
    assert_eq!(batch_run(&[3, 3, 3], 1), vec![(3, 4, 3)]);
    assert_eq!(batch_run(&[0, 5], 5), vec![(0, 10, 2)]);
    assert_eq!(batch_run(&[0, 6], 5), vec![(0, 5, 1), (6, 11, 1)]);
    assert_eq!(batch_run(&[0, 8, 4], 5), vec![(0, 13, 3)]);
    assert_eq!(batch_run(&[0, 1, 2, 4], 1), vec![(0, 3, 3), (4, 5, 1)]);
    assert_eq!(
        batch_run(&[0, 100, -5], i64::MAX / 4),
        vec![(-5, 100 + i64::MAX / 4, 3)]
    );
}

#[test]
fn bad_parameters_name_them() {
    let msg = |opts: WindowAggregateOptions| {
        SessionAggregator::new(opts)
            .err()
            .unwrap()
            .message()
            .to_string()
    };
    let base = || WindowAggregateOptions::session("ts", Span::Units(5), aggs());
    assert!(
        msg(WindowAggregateOptions {
            gap: Some(Span::Units(0)),
            ..base()
        })
        .starts_with("gap:")
    );
    assert!(
        msg(WindowAggregateOptions {
            gap: Some(Span::Units(-3)),
            ..base()
        })
        .starts_with("gap:")
    );
    let both = msg(WindowAggregateOptions {
        slide: Some(Span::Units(2)),
        ..base()
    });
    assert!(both.contains("gap") && both.contains("slide"), "{both}");
    let strategy = msg(WindowAggregateOptions {
        strategy: Strategy::Pane,
        ..base()
    });
    assert!(strategy.starts_with("strategy:"), "{strategy}");
    // A duration string on an integer column fails at the first batch, naming gap.
    let mut agg = SessionAggregator::new(WindowAggregateOptions {
        gap: Some(Span::Text("-1s".into())),
        ..base()
    })
    .map(Some)
    .unwrap_or(None);
    if let Some(agg) = agg.as_mut() {
        let err = agg.push(&batch(&rows(&[1])), 0).unwrap_err();
        assert!(err.message().contains("gap"), "{}", err.message());
    }
}

#[test]
fn late_rows_drop_or_raise() {
    let mut opts = WindowAggregateOptions::session("ts", Span::Units(3), aggs());
    opts.by = vec!["k".into()];
    opts.lateness = LatenessOpt::Bound(Span::Units(2));
    let mut agg = SessionAggregator::new(opts.clone()).unwrap();
    let out = agg.push(&batch(&rows(&[10, 20, 17, 18, 30])), 0).unwrap();
    assert_eq!(agg.stats().late_rows, 1); // 17 < 20 - 2
    assert_eq!(
        sessions(&out)
            .iter()
            .map(|s| (s.1, s.2))
            .collect::<Vec<_>>(),
        vec![(10, 13), (18, 23)]
    );
    opts.on_late = OnLate::Error;
    let mut agg = SessionAggregator::new(opts).unwrap();
    let err = agg.push(&batch(&rows(&[10, 20, 17])), 0).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LateRow);
    let mut reference = WindowAggregateOptions::session("ts", Span::Units(3), aggs());
    reference.strategy = Strategy::Reference;
    let mut agg = SessionAggregator::new(reference).unwrap();
    let err = agg.snapshot(&Default::default()).unwrap_err();
    assert!(err.message().starts_with("strategy:"), "{}", err.message());
}

/// A stream of ever-new keys: keys without open sessions are forgotten (the dictionary stays small) and the
/// sessions are those of the reference engine, in order.
#[test]
fn idle_keys_are_forgotten() {
    let n = 40_000i64;
    let rows: Vec<Row> = (0..n)
        .map(|i| Row {
            ts: i,
            key: Some((i % 9_000 + (i / 9_000) * 100_000) as i32),
            v: Some((i % 7) as f64),
            iv: i,
        })
        .collect();
    let c = Case {
        gap: 3,
        lateness: Some(0),
        rows,
        cuts: (1..40).map(|j| j * 1000).collect(),
        threads: 3,
    };
    let (stream, _) = run(&c, Strategy::Auto, true);
    let (reference, _) = run(&c, Strategy::Reference, true);
    assert_eq!(stream, reference);
    assert_eq!(stream.num_rows(), n as usize);
    let mut agg = SessionAggregator::new(options(&c, Strategy::Auto)).unwrap();
    for part in c.rows.chunks(1000) {
        agg.push(&batch(part), 0).unwrap();
    }
    assert!(agg.stats().keys < 20_000, "{} keys kept", agg.stats().keys);
}

/// `next_close` after every batch of the case (both engines, and an operator restored from a snapshot):
/// the least end plus one over the brute force's sessions of the rows so far that the watermark has not
/// closed; pushing that watermark closes a session, one unit less closes none.
fn next_closes(c: &Case, strategy: Strategy, restore: bool) -> Vec<Option<i64>> {
    let mut agg = SessionAggregator::new(options(c, strategy)).unwrap();
    let mut got = vec![];
    let mut start = 0;
    for end in c.cuts.iter().copied().chain([c.rows.len()]) {
        let end = end.min(c.rows.len());
        if end < start {
            continue;
        }
        agg.push(&batch(&c.rows[start..end]), 0).unwrap();
        start = end;
        if restore {
            agg = SessionAggregator::restore(&agg.snapshot(&Default::default()).unwrap(), None)
                .unwrap();
        }
        let so_far = Case {
            rows: c.rows[..end].to_vec(),
            ..c.clone()
        };
        let wm = agg.stats().watermark;
        let open = brute(&so_far)
            .0
            .into_iter()
            .filter(|s| wm.is_none_or(|w| s.2 >= w));
        let want = open.map(|s| s.2 + 1).min();
        assert_eq!(agg.next_close(), want, "after {end} rows, watermark {wm:?}");
        got.push(agg.next_close());
    }
    got
}

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(300), ..ProptestConfig::default() })]

    #[test]
    fn next_close_is_the_least_open_end_plus_one(c in case()) {
        let stream = next_closes(&c, Strategy::Auto, false);
        prop_assert_eq!(&next_closes(&c, Strategy::Reference, false), &stream);
        prop_assert_eq!(&next_closes(&c, Strategy::Auto, true), &stream);
    }
}

/// The watermark `next_close` names closes the session; one unit less closes nothing.
#[test]
fn next_close_is_where_the_first_session_closes() {
    let mut opts = WindowAggregateOptions::session("ts", Span::Units(5), aggs());
    opts.lateness = LatenessOpt::Bound(Span::Units(10));
    let mut agg = SessionAggregator::new(opts).unwrap();
    assert_eq!(agg.next_close(), None);
    agg.push(&batch(&rows(&[0, 3, 12])), 0).unwrap(); // [0, 8) and [12, 17); watermark 2
    assert_eq!(agg.next_close(), Some(9));
    agg.push(&batch(&rows(&[8])), 0).unwrap(); // 8 bridges them: [0, 17)
    assert_eq!(agg.next_close(), Some(18));
    assert_eq!(agg.push(&batch(&rows(&[27])), 0).unwrap().num_rows(), 0); // watermark 17
    assert_eq!(agg.push(&batch(&rows(&[28])), 0).unwrap().num_rows(), 1); // watermark 18
    assert_eq!(agg.next_close(), Some(34)); // [27, 33) closes at watermark 34
    agg.flush().unwrap();
    assert_eq!(agg.next_close(), None);
}

/// Batches large enough to run the workers on their own threads: random keys, values and disorder; the
/// rows of the reference engine, in order, for 1 to 4 workers, whole or cut.
#[test]
fn threads_return_the_reference_rows() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    let rows: Vec<Row> = (0..60_000i64)
        .map(|i| Row {
            ts: i / 3 + next(40) as i64,
            key: (next(20) > 0).then(|| next(700) as i32),
            v: (next(10) > 0).then(|| next(1000) as f64 * 0.125),
            iv: next(2000) as i64 - 1000,
        })
        .collect();
    let base = Case {
        gap: 25,
        lateness: Some(40),
        rows,
        cuts: vec![20_000, 45_000],
        threads: 1,
    };
    let (reference, late) = run(&base, Strategy::Reference, false);
    assert!(reference.num_rows() > 1000);
    for threads in 1..=4 {
        let c = Case {
            threads,
            ..base.clone()
        };
        for split in [false, true] {
            let (stream, stream_late) = run(&c, Strategy::Auto, split);
            assert_eq!(stream, reference, "{threads} threads, split {split}");
            assert_eq!(stream_late, late);
        }
        assert_eq!(
            run_restoring(&c).0,
            reference,
            "{threads} threads, restored"
        );
    }
}
