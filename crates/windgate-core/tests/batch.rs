//! The batch function over in-memory input (`window_aggregate_in_memory`) promises the operator the least time
//! still to come before each piece, so windows close early. That must never change a row: for random rows
//! (unsorted, nulls, disorder within the lateness bound), random batches, pieces of 1-7 rows, 1-3 sources and
//! every engine, it returns what the streamed batch function returns with the reference engine, in order and
//! bit for bit.

mod common;

use arrow_array::RecordBatch;
use arrow_select::concat::concat_batches;
use common::{Case, Row, batch, case, case_options};
use proptest::prelude::*;
use windgate_core::aggregate::batch::{Tuning, window_aggregate_in_pieces, window_aggregate_tuned};
use windgate_core::aggregate::{
    LatenessOpt, OnLate, Span, Strategy, WindowAggregateOptions, window_aggregate,
};

/// Every single-source strategy of the registry (the designs that merge time-sorted sources have their own
/// tests in `multiway.rs`).
fn engines() -> Vec<Strategy> {
    Strategy::those(|caps| !caps.sorted_sources)
}

fn opts(c: &Case, strategy: Strategy, threads: usize) -> WindowAggregateOptions {
    let mut o = case_options(c);
    o.strategy = strategy;
    o.threads = Some(threads);
    o
}

/// The case's rows dealt round-robin to `sources` sources, each cut into batches at the case's cuts.
fn sources(c: &Case, sources: usize) -> Vec<Vec<RecordBatch>> {
    (0..sources)
        .map(|s| {
            let rows: Vec<Row> = c.rows.iter().skip(s).step_by(sources).cloned().collect();
            let mut out = vec![];
            let mut start = 0;
            for end in c
                .cuts
                .iter()
                .map(|&x| x.min(rows.len()))
                .chain([rows.len()])
            {
                if end >= start {
                    out.push(batch(&rows[start..end]));
                    start = end;
                }
            }
            out
        })
        .collect()
}

fn streamed(input: &[Vec<RecordBatch>], o: WindowAggregateOptions) -> RecordBatch {
    let schema = batch(&[]).schema();
    let inputs = input
        .iter()
        .map(|bs| {
            (
                schema.clone(),
                bs.iter().cloned().map(Ok).collect::<Vec<_>>(),
            )
        })
        .collect();
    let wg = window_aggregate(inputs, o, || Ok(())).unwrap();
    let (schema, outs) = (wg.schema, wg.batches);
    concat_batches(&schema, &outs).unwrap()
}

fn in_pieces(input: &[Vec<RecordBatch>], o: WindowAggregateOptions, piece: usize) -> RecordBatch {
    let tuning = Tuning {
        piece_rows: piece,
        ..Tuning::default()
    };
    tuned(input, o, tuning)
}

fn tuned(input: &[Vec<RecordBatch>], o: WindowAggregateOptions, tuning: Tuning) -> RecordBatch {
    let schema = batch(&[]).schema();
    let inputs = input
        .iter()
        .map(|bs| (schema.clone(), bs.clone()))
        .collect();
    let wg = window_aggregate_tuned(inputs, o, tuning, || Ok(())).unwrap();
    concat_batches(&wg.schema, &wg.batches).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(common::cases(if cfg!(debug_assertions) { 24 } else { 200 })))]

    #[test]
    fn promises_never_change_the_result(
        c in case(),
        n_sources in 1usize..4,
        piece in 1usize..8,
        threads in 1usize..5,
        pick in any::<u64>(),
    ) {
        // Several sources without a bound are merged exactly; with a bound each source keeps its own K-slack.
        let input = sources(&c, n_sources);
        let want = streamed(&input, opts(&c, Strategy::Reference, 1));
        let engines = engines();
        for k in 0..3 {
            let engine = engines[(pick as usize + k * 3) % engines.len()];
            let got = in_pieces(&input, opts(&c, engine, threads), piece);
            prop_assert_eq!(&got, &want, "{:?} threads={} piece={}", engine, threads, piece);
        }
    }
}

#[test]
fn empty_and_all_null_sources() {
    let c = Case {
        size: 4,
        slide: 2,
        offset: 0,
        lateness: None,
        rows: vec![],
        cuts: vec![],
    };
    let input = sources(&c, 2);
    let want = streamed(&input, opts(&c, Strategy::Reference, 1));
    assert_eq!(in_pieces(&input, opts(&c, Strategy::Farm, 2), 1), want);
    assert_eq!(want.num_rows(), 0);
}

#[test]
fn windows_close_before_the_end_of_sorted_input() {
    // Not vacuous: on sorted input the windows come out of the pushes, a piece behind; only the windows
    // reaching into the last piece (11 x 3 keys) are left for the flush.
    let rows: Vec<Row> = (0..1000)
        .map(|ts| Row {
            ts,
            key: Some((ts % 3) as i32),
            v: Some(ts as f64),
            iv: ts,
        })
        .collect();
    let c = Case {
        size: 20,
        slide: 10,
        offset: 0,
        lateness: None,
        rows,
        cuts: vec![400],
    };
    let input = sources(&c, 1);
    // (The farm emits what its workers have finished by then, which depends on timing.)
    for engine in [Strategy::Pane, Strategy::Reference] {
        let schema = batch(&[]).schema();
        let inputs = input
            .iter()
            .map(|bs| (schema.clone(), bs.clone()))
            .collect();
        let wg = window_aggregate_in_pieces(inputs, opts(&c, engine, 2), 100, || Ok(())).unwrap();
        let outs = wg.batches;
        let last = outs.last().unwrap().num_rows();
        let total: usize = outs.iter().map(|b| b.num_rows()).sum();
        assert_eq!(total, 101 * 3, "{engine:?}");
        assert!(
            last <= 11 * 3,
            "{engine:?}: {last} of {total} rows came out at the flush"
        );
    }
}

/// The case's rows sorted by time (stable: equal times keep their order), as one source cut at the case's cuts.
fn sorted_source(c: &Case) -> Vec<Vec<RecordBatch>> {
    let mut sorted = c.clone();
    sorted.rows.sort_by_key(|r| r.ts);
    sources(&sorted, 1)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(common::cases(if cfg!(debug_assertions) { 24 } else { 300 })))]

    /// Input sorted by time, cut into time ranges run side by side (`auto` on 2-4 threads, ranges from 2 rows
    /// on): the reference engine's rows, in order, bit for bit, for any window, batch cut and piece size; and
    /// the same for input in any order, which is grouped by pane first when scattered (from 2 rows on, on 1-4
    /// threads), then cut.
    #[test]
    fn time_ranges_never_change_the_result(
        c in case(),
        piece in 1usize..8,
        threads in 1usize..5,
        sort in proptest::bool::weighted(0.6),
    ) {
        // Unsorted input is grouped by pane if scattered; else the ranges find it out themselves (each checks
        // its rows) and it takes the usual path.
        let input = if sort { sorted_source(&c) } else { sources(&c, 1) };
        let want = streamed(&input, opts(&c, Strategy::Reference, 1));
        // Any overlap: long windows next to the rows' span are cut too.
        let tuning = Tuning { piece_rows: piece, split_min_rows: 2, split_max_overlap: f64::INFINITY };
        let got = tuned(&input, opts(&c, Strategy::Auto, threads), tuning);
        prop_assert_eq!(&got, &want, "threads={} piece={}", threads, piece);
    }

    /// Input scattered over panes (rows in random order, no lateness bound), grouped by pane before it runs
    /// (`auto`, from 2 rows on, 1-4 threads, pieces of 1-7 rows): the reference engine's rows, in order and
    /// bit for bit, `first`/`last` ties between rows of one time included.
    #[test]
    fn scattered_input_grouped_by_pane_never_changes_the_result(
        rows in prop::collection::vec(
            (0i64..40, prop::option::weighted(0.9, 0i32..4), prop::option::weighted(0.85, -40i32..40), -1000i64..1000),
            2..150,
        ),
        (size, slide) in prop_oneof![Just((4i64, 2i64)), Just((6, 2)), Just((10, 5)), Just((20, 10)), Just((8, 8))],
        cuts in prop::collection::vec(0usize..150, 0..4),
        piece in 1usize..8,
        threads in 1usize..5,
    ) {
        let rows: Vec<Row> = rows
            .into_iter()
            .map(|(ts, key, v, iv)| Row { ts, key, v: v.map(|x| x as f64 * 0.25), iv })
            .collect();
        let mut cuts = cuts;
        cuts.sort();
        let c = Case { size, slide, offset: 0, lateness: None, rows, cuts };
        let input = sources(&c, 1);
        let want = streamed(&input, opts(&c, Strategy::Reference, 1));
        let tuning = Tuning { piece_rows: piece, split_min_rows: 2, split_max_overlap: f64::INFINITY };
        let got = tuned(&input, opts(&c, Strategy::Auto, threads), tuning);
        prop_assert_eq!(&got, &want, "threads={} piece={}", threads, piece);
    }
}

/// Scattered rows, three of each time in one key: grouped by pane, the rows of one time keep their order, so
/// `first` and `last` pick the rows the reference engine picks (reversing a pane's rows makes this fail).
#[test]
fn scattered_rows_of_one_time_keep_their_order() {
    let mut rows = vec![];
    for i in 0..60i64 {
        let ts = (i * 17) % 20;
        rows.push(Row {
            ts,
            key: Some(0),
            v: Some(i as f64),
            iv: i,
        });
    }
    let c = Case {
        size: 10,
        slide: 5,
        offset: 0,
        lateness: None,
        rows,
        cuts: vec![],
    };
    let input = sources(&c, 1);
    let want = streamed(&input, opts(&c, Strategy::Reference, 1));
    let tuning = Tuning {
        piece_rows: 4,
        split_min_rows: 2,
        split_max_overlap: f64::INFINITY,
    };
    for threads in [1, 2] {
        let got = tuned(&input, opts(&c, Strategy::Auto, threads), tuning);
        assert_eq!(got, want, "threads {threads}");
    }
}

/// Rows of a stream in bounded disorder: times `0..n` each moved back by up to `disorder`, keys of `keys`,
/// values spread over binades (and some zeros), never null, in batches of `batch_rows`.
fn jittered(n: usize, keys: i32, disorder: i64, seed: u64, batch_rows: usize) -> Vec<RecordBatch> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let rows: Vec<Row> = (0..n as i64)
        .map(|t| {
            let r = next();
            let v = match r % 8 {
                0 => 0.0,
                1 => (r >> 11) as f64 * 1e-12,
                _ => ((r >> 11) % 2001) as f64 * 0.25 - 250.0,
            };
            Row {
                ts: t - (next() % (disorder as u64 + 1)) as i64,
                key: Some((next() % keys as u64) as i32),
                v: Some(v),
                iv: 0,
            }
        })
        .collect();
    rows.chunks(batch_rows.max(1)).map(batch).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(common::cases(if cfg!(debug_assertions) { 12 } else { 100 })))]

    /// Aggregates the fused pass lifts by key (count, sum, mean, min, max of a column without nulls) over rows
    /// in bounded disorder: long runs of one pane lifted by key and the short runs at panes' edges lifted by
    /// slot, in one batch, give the reference engine's rows; also under a lateness bound the disorder may
    /// exceed, whose dropped rows cut the runs.
    #[test]
    fn short_and_long_pane_runs_in_one_batch_give_the_reference_rows(
        n in 200usize..3000,
        keys in 1i32..40,
        pane in 50i64..400,
        ppw in 1i64..8,
        disorder in 0i64..120,
        seed in any::<u64>(),
        batch_rows in 100usize..5000,
        piece in prop_oneof![Just(1usize << 15), 64usize..2000],
        lateness in prop::option::of(0i64..100),
    ) {
        let input = vec![jittered(n, keys, disorder, seed, batch_rows)];
        let aggs = vec![
            ("*".to_string(), vec!["count".to_string()]),
            ("v".to_string(), ["sum", "mean", "min", "max"].map(String::from).to_vec()),
        ];
        let mut o = WindowAggregateOptions::new("ts", Span::Units(pane * ppw), aggs);
        o.slide = Some(Span::Units(pane));
        o.by = vec!["k".into()];
        o.threads = Some(1);
        o.lateness = lateness.map_or(LatenessOpt::Exact, |k| LatenessOpt::Bound(Span::Units(k)));
        let run = |strategy: Strategy| {
            let mut o = o.clone();
            o.strategy = strategy;
            in_pieces(&input, o, piece)
        };
        prop_assert_eq!(run(Strategy::Pane), run(Strategy::Reference));
    }
}

/// Late rows as a side output (`on_late="keep"`) with `auto` on two threads: every late row once, in arrival
/// order, and the windows, as one pane engine gives them. (The time ranges, which read the rows between
/// neighbouring ranges twice, kept only the first range's late rows: half of them here.)
#[test]
fn kept_late_rows_are_whole_on_two_threads() {
    let input = jittered(20_000, 7, 300, 11, 1_000);
    let aggs = vec![
        ("*".to_string(), vec!["count".to_string()]),
        ("v".to_string(), vec!["sum".to_string(), "max".to_string()]),
    ];
    let mut o = WindowAggregateOptions::new("ts", Span::Units(600), aggs);
    o.slide = Some(Span::Units(100));
    o.by = vec!["k".into()];
    o.lateness = LatenessOpt::Bound(Span::Units(100));
    o.on_late = OnLate::Keep;
    let run = |strategy: Strategy, threads: usize| {
        let mut o = o.clone();
        o.strategy = strategy;
        o.threads = Some(threads);
        let tuning = Tuning {
            split_min_rows: 2,
            split_max_overlap: f64::INFINITY,
            ..Tuning::default()
        };
        let inputs = vec![(batch(&[]).schema(), input.clone())];
        let out = window_aggregate_tuned(inputs, o, tuning, || Ok(())).unwrap();
        let windows = concat_batches(&out.schema, &out.batches).unwrap();
        (windows, out.late.expect("late rows kept"))
    };
    let (want_windows, want_late) = run(Strategy::Pane, 1);
    assert!(want_late.num_rows() > 1_000, "the case has late rows");
    let (windows, late) = run(Strategy::Auto, 2);
    assert_eq!(windows, want_windows);
    assert_eq!(late, want_late);
}
