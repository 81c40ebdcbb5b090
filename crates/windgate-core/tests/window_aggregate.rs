//! Property tests of window aggregation: the pane engine returns the reference engine's rows in the same
//! order, bit for bit, for any batch split and any disorder within the lateness bound; the reference engine
//! matches a brute-force computation.

mod common;

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, Int64Type};
use common::{Case, Row, aggs, arrival_case, batch, brute, case, run};
use proptest::prelude::*;
use windgate_core::aggregate::{
    LatenessOpt, Span, Strategy, WindowAggregateOptions, WindowAggregator,
};

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(300), ..ProptestConfig::default() })]

    #[test]
    fn pane_engine_equals_reference_and_brute_force(c in case()) {
        let reference = run(&c, Strategy::Reference, false);
        let pane = run(&c, Strategy::Pane, true);
        prop_assert_eq!(&pane, &reference);
        let pane_whole = run(&c, Strategy::Pane, false);
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

/// Long windows (6 to 48 panes, one or several panes per slide) over many keys that come and go, with gaps
/// in time: the windows the pane engine builds through its per-key two stacks.
fn long_window_case() -> impl proptest::strategy::Strategy<Value = Case> {
    use proptest::strategy::Strategy as _;
    (
        1i64..4,
        6i64..49,
        1i64..4,
        -20i64..20,
        prop::option::of(0i64..30),
    )
        .prop_flat_map(|(pane, ppw, per_slide, offset, lateness)| {
            let row = (
                prop_oneof![0i64..400, 900i64..1300, 3000i64..3100],
                prop::option::weighted(0.95, 0i32..60),
                prop::option::weighted(0.9, -400i32..400),
                -1000i64..1000,
                0i64..30,
            );
            (
                Just((pane * ppw, pane * per_slide.min(ppw), offset, lateness)),
                prop::collection::vec(row, 0..400),
                prop::collection::vec(0usize..400, 0..8),
            )
        })
        .prop_map(|((size, slide, offset, lateness), rows, cuts)| {
            let rows = rows
                .into_iter()
                .map(|(ts, key, v, iv, delay)| {
                    let v = v.map(|x| x as f64 * 0.125);
                    (Row { ts, key, v, iv }, delay)
                })
                .collect();
            arrival_case(size, slide, offset, lateness, rows, cuts)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(200), ..ProptestConfig::default() })]

    #[test]
    fn long_windows_equal_the_reference(c in long_window_case()) {
        let reference = run(&c, Strategy::Reference, false);
        prop_assert_eq!(&run(&c, Strategy::Pane, true), &reference);
        prop_assert_eq!(&run(&c, Strategy::Pane, false), &reference);
    }
}

/// Long windows over few keys that nearly all have rows in every pane, their number growing with time (a key
/// joins every 30 time units), with stretches where only one key reports: the windows the pane engine builds
/// through its shared stacks (see `aggregate::sliding`), rebuilt as the keys outgrow them and as the panes
/// turn sparse and dense again.
fn dense_long_window_case() -> impl proptest::strategy::Strategy<Value = Case> {
    use proptest::strategy::Strategy as _;
    (1i64..3, 6i64..25, 1i64..3, prop::option::of(0i64..20))
        .prop_flat_map(|(pane, ppw, per_slide, lateness)| {
            let row = (
                0i64..360,
                0i32..1000,
                prop::option::weighted(0.9, -400i32..400),
                -1000i64..1000,
                0i64..20,
            );
            (
                Just((pane * ppw, pane * per_slide.min(ppw), lateness)),
                prop::collection::vec(row, 0..900),
                prop::collection::vec(0usize..900, 0..8),
            )
        })
        .prop_map(|((size, slide, lateness), rows, cuts)| {
            let rows = rows
                .into_iter()
                .map(|(ts, raw_key, v, iv, delay)| {
                    let keys = if (120..200).contains(&ts) {
                        1
                    } else {
                        1 + ts / 30
                    };
                    let key = Some(raw_key % keys as i32);
                    let v = v.map(|x| x as f64 * 0.125);
                    (Row { ts, key, v, iv }, delay)
                })
                .collect();
            arrival_case(size, slide, 0, lateness, rows, cuts)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(200), ..ProptestConfig::default() })]

    #[test]
    fn dense_long_windows_equal_the_reference(c in dense_long_window_case()) {
        let reference = run(&c, Strategy::Reference, false);
        prop_assert_eq!(&run(&c, Strategy::Pane, true), &reference);
        prop_assert_eq!(&run(&c, Strategy::Pane, false), &reference);
    }
}

/// Dense panes whose keys are replaced every few panes until most of the dictionary is idle and forgotten
/// (the key ids renumbered), the windows six panes long: the pane engine's stacks, shared while the panes are
/// dense, follow the keys through their growth and renumbering and give the reference engine's rows.
#[test]
fn shared_stacks_follow_keys_through_churn_and_forgetting() {
    let (keys_per_phase, panes_per_phase) = (400, 8);
    let rows: Vec<Row> = (0..16i64)
        .flat_map(|phase| {
            (0..panes_per_phase).flat_map(move |p| {
                let ts = phase * panes_per_phase + p;
                (0..keys_per_phase).map(move |k| Row {
                    ts,
                    key: Some((phase * keys_per_phase + (k * 7 + ts) % keys_per_phase) as i32),
                    v: Some((k % 13) as f64 - 6.5),
                    iv: k,
                })
            })
        })
        .collect();
    assert_streams_as_reference(rows, 997);
}

/// One pane of 5000 keys, then 100 of them alone for many panes: once the big pane's windows are out, most
/// of the dictionary is idle and forgotten while the stacks (shared: every pane holds its window's keys) still
/// hold the small panes under the old ids; the windows after the renumbering are the reference engine's.
#[test]
fn shared_stacks_are_rebuilt_when_keys_are_renumbered() {
    let row = |ts: i64, key: i64| Row {
        ts,
        key: Some(key as i32),
        v: Some((key % 11) as f64 * 0.5 + ts as f64),
        iv: key + ts,
    };
    let mut rows: Vec<Row> = (0..5000).map(|k| row(0, k)).collect();
    rows.extend((1..40).flat_map(|ts| (4900..5000).map(move |k| row(ts, k))));
    assert_streams_as_reference(rows, 701);
}

/// `rows` streamed in batches of `batch` rows (no lateness: windows of six unit panes close as they end)
/// through the pane engine give the reference engine's windows.
fn assert_streams_as_reference(rows: Vec<Row>, batch: usize) {
    let cuts = (1..rows.len() / batch).map(|i| i * batch).collect();
    let c = Case {
        size: 6,
        slide: 1,
        offset: 0,
        lateness: Some(0),
        rows,
        cuts,
    };
    let reference = run(&c, Strategy::Reference, true);
    assert_eq!(run(&c, Strategy::Pane, true), reference);
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
