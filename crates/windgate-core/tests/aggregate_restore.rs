//! Checkpoints of window aggregation: snapshotting after any push and restoring (under any strategy and
//! thread count, once or twice) continues with exactly the rows, in the same order, of the uninterrupted
//! run; bad bytes and other queries are refused with named errors.

mod common;

use std::collections::BTreeMap;

use arrow_array::RecordBatch;
use arrow_select::concat::concat_batches;
use common::{Case, aggs, batch, case, case_options};
use proptest::prelude::*;
use proptest::strategy::Strategy as _;
use windgate_core::ErrorKind;
use windgate_core::aggregate::{
    LatenessOpt, Span, Strategy, WindowAggregateOptions, WindowAggregator,
};

/// The strategies that take any single source (the multiway designs need time-sorted sources).
fn strategies() -> Vec<Strategy> {
    Strategy::those(|c| !c.sorted_sources)
}

/// The case's pushes: its rows cut at its cuts.
fn pieces(c: &Case) -> Vec<RecordBatch> {
    let mut out = vec![];
    let mut start = 0;
    for end in c
        .cuts
        .iter()
        .map(|&x| x.min(c.rows.len()))
        .chain([c.rows.len()])
    {
        if end >= start {
            out.push(batch(&c.rows[start..end]));
            start = end;
        }
    }
    out
}

fn build(c: &Case, strategy: Strategy, threads: usize) -> WindowAggregator {
    let mut o = case_options(c);
    o.strategy = strategy;
    o.threads = Some(threads);
    let mut agg = WindowAggregator::new(o).unwrap();
    agg.bind(&batch(&[]).schema()).unwrap();
    agg
}

fn concat(outs: &[RecordBatch]) -> RecordBatch {
    let outs: Vec<_> = outs
        .iter()
        .filter(|b| b.num_columns() > 0)
        .cloned()
        .collect();
    concat_batches(&outs[0].schema(), &outs).unwrap()
}

/// One run: pushes every piece, restoring from a snapshot before each push listed in `restores` (with the
/// listed strategy and threads), then flushes.
fn run(c: &Case, first: (Strategy, usize), restores: &[(usize, Strategy, usize)]) -> RecordBatch {
    let mut agg = build(c, first.0, first.1);
    let mut outs = vec![];
    for (i, piece) in pieces(c).iter().enumerate() {
        for &(at, strategy, threads) in restores.iter().filter(|r| r.0 == i) {
            let _ = at;
            let data = agg.snapshot(&BTreeMap::new()).unwrap();
            let mut o = WindowAggregator::snapshot_options(&data).unwrap();
            o.strategy = strategy;
            o.threads = Some(threads);
            agg = WindowAggregator::restore(&data, Some(o)).unwrap();
        }
        outs.push(agg.push(piece, 0).unwrap());
    }
    outs.push(agg.flush().unwrap());
    concat(&outs)
}

fn strategy_and_threads() -> impl proptest::strategy::Strategy<Value = (Strategy, usize)> {
    let all = strategies();
    (0..all.len(), 1usize..=3).prop_map(move |(i, t)| (all[i], t))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(120), ..ProptestConfig::default() })]

    #[test]
    fn restoring_anywhere_under_any_strategy_continues_the_same_rows(
        c in case(),
        first in strategy_and_threads(),
        second in strategy_and_threads(),
        third in strategy_and_threads(),
        at in (0usize..8, 0usize..8),
    ) {
        let uninterrupted = run(&c, (Strategy::Reference, 1), &[]);
        let n = pieces(&c).len();
        let (a, b) = (at.0 % n, at.1 % n);
        let restored = run(&c, first, &[(a, second.0, second.1), (b.max(a), third.0, third.1)]);
        prop_assert_eq!(restored, uninterrupted);
    }
}

fn small_case() -> Case {
    let rows = (0..40)
        .map(|i| common::Row {
            ts: i * 3 % 50,
            key: Some((i % 3) as i32),
            v: Some(i as f64),
            iv: i,
        })
        .collect();
    Case {
        size: 10,
        slide: 5,
        offset: 0,
        lateness: Some(50),
        rows,
        cuts: vec![10, 25],
    }
}

#[test]
fn every_truncation_is_a_snapshot_error() {
    let c = small_case();
    let mut agg = build(&c, Strategy::Pane, 1);
    agg.push(&pieces(&c)[0], 0).unwrap();
    let data = agg.snapshot(&BTreeMap::new()).unwrap();
    for n in (0..data.len()).step_by(7) {
        let e = WindowAggregator::restore(&data[..n], None).err().unwrap();
        assert_eq!(e.kind(), ErrorKind::Snapshot, "{e}");
    }
    let mut bad = data.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 1;
    let e = WindowAggregator::restore(&bad, None).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::Snapshot, "{e}");
}

#[test]
fn another_query_is_a_named_mismatch() {
    let c = small_case();
    let mut agg = build(&c, Strategy::Pane, 1);
    agg.push(&pieces(&c)[0], 0).unwrap();
    let data = agg.snapshot(&BTreeMap::new()).unwrap();
    let mut o = WindowAggregator::snapshot_options(&data).unwrap();
    o.size = Span::Units(20);
    let e = WindowAggregator::restore(&data, Some(o)).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::SnapshotMismatch);
    assert!(e.message().starts_with("size:"), "{e}");
    // Runtime settings may change.
    let mut o = WindowAggregator::snapshot_options(&data).unwrap();
    o.threads = Some(2);
    o.strategy = Strategy::Farm;
    assert!(WindowAggregator::restore(&data, Some(o)).is_ok());
}

#[test]
fn a_flushed_operator_refuses_to_snapshot() {
    let c = small_case();
    let mut agg = build(&c, Strategy::Pane, 1);
    agg.flush().unwrap();
    let e = agg.snapshot(&BTreeMap::new()).err().unwrap();
    assert!(e.message().starts_with("snapshot:"), "{e}");
}

/// Two sources, one closed and one stalled at the snapshot: the restored operator keeps both states.
#[test]
fn several_sources_keep_their_watermarks_and_closed_flags() {
    let mut o = WindowAggregateOptions::new("ts", Span::Units(10), aggs());
    o.by = vec!["k".into()];
    o.sources = 2;
    o.lateness = LatenessOpt::Bound(Span::Units(3));
    let rows = |ts: &[i64]| {
        batch(
            &ts.iter()
                .map(|&t| common::Row {
                    ts: t,
                    key: Some((t % 2) as i32),
                    v: Some(t as f64),
                    iv: t,
                })
                .collect::<Vec<_>>(),
        )
    };
    let drive = |restore_at: Option<usize>, strategy: Strategy| {
        let mut o = o.clone();
        o.strategy = strategy;
        let mut agg = WindowAggregator::new(o).unwrap();
        let steps: Vec<(usize, RecordBatch)> = vec![
            (0, rows(&[1, 4, 12])),
            (1, rows(&[2, 3, 15, 9])),
            (0, rows(&[22, 18])),
            (1, rows(&[30])),
            (0, rows(&[41, 35])),
        ];
        let mut outs = vec![];
        for (i, (s, b)) in steps.iter().enumerate() {
            if restore_at == Some(i) {
                let data = agg.snapshot(&BTreeMap::new()).unwrap();
                agg = WindowAggregator::restore(&data, None).unwrap();
            }
            outs.push(agg.push(b, *s).unwrap());
            if i == 3 {
                outs.push(agg.close_source(1).unwrap());
            }
        }
        outs.push(agg.flush().unwrap());
        concat(&outs)
    };
    let want = drive(None, Strategy::Reference);
    for at in 0..5 {
        for s in [Strategy::Pane, Strategy::Farm, Strategy::Reference] {
            assert_eq!(drive(Some(at), s), want, "restore before step {at}, {s:?}");
        }
    }
}

fn any_strategy() -> impl proptest::strategy::Strategy<Value = (Strategy, usize)> {
    let all = Strategy::those(|_| true);
    (0..all.len(), 1usize..=3).prop_map(move |(i, t)| (all[i], t))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(60), ..ProptestConfig::default() })]

    /// Time-sorted input without a lateness bound: every strategy takes it, the multiway designs included.
    #[test]
    fn sorted_input_restores_under_every_strategy(
        c in case(),
        first in any_strategy(),
        second in any_strategy(),
        at in 0usize..8,
    ) {
        let mut c = c;
        c.lateness = None;
        c.rows.sort_by_key(|r| r.ts);
        let uninterrupted = run(&c, (Strategy::Reference, 1), &[]);
        let n = pieces(&c).len();
        let restored = run(&c, first, &[(at % n, second.0, second.1)]);
        prop_assert_eq!(restored, uninterrupted);
    }
}

/// A parallel engine's checkpoint copy lifts its rows into panes once they are many (memory stays bounded by
/// the open state): a snapshot after more rows than that still restores to the same windows.
#[test]
fn a_long_stream_without_lateness_restores_from_the_lifted_copy() {
    let rows: Vec<common::Row> = (0..1_500_000i64)
        .map(|i| common::Row {
            ts: (i * 7919) % 1000,
            key: Some((i % 97) as i32),
            v: Some((i % 13) as f64 * 0.5),
            iv: i % 1000,
        })
        .collect();
    let c = Case {
        size: 100,
        slide: 50,
        offset: 0,
        lateness: None,
        rows,
        cuts: vec![400_000, 1_200_000],
    };
    let want = run(&c, (Strategy::Pane, 1), &[]);
    let got = run(&c, (Strategy::Farm, 2), &[(2, Strategy::Pane, 1)]);
    assert_eq!(got, want);
}
