//! Multiway aggregation (the designs of Cederman, Gulisano et al., *Efficient data streaming multiway aggregation
//! through concurrent algorithmic designs and new abstract data types*): several time-sorted sources, every design
//! (mq, mqlf, tumlsc) against the reference engine, for 1-8 sources with equal timestamps across sources, random
//! batch splits, random interleavings of pushes and closes, and both the streaming operator and the batch
//! function. Output must be the same rows in the same order, floats and first/last (by the total order
//! `(ts, source, seq)`) included.

mod common;

use arrow_array::RecordBatch;
use arrow_select::concat::concat_batches;
use common::{Row, aggs, batch};
use proptest::prelude::*;
// The engine strategy shadows the prelude's `Strategy`; its methods stay in scope.
use proptest::strategy::Strategy as _;
use windgate_core::aggregate::batch::window_aggregate_in_pieces;
use windgate_core::aggregate::{
    Span, Strategy, WindowAggregateOptions, WindowAggregator, window_aggregate,
};

/// The registry's designs that merge time-sorted sources themselves.
fn designs() -> Vec<Strategy> {
    Strategy::those(|caps| caps.sorted_sources)
}

#[derive(Debug, Clone)]
struct Case {
    size: i64,
    slide: i64,
    /// Each source's rows, sorted by time.
    sources: Vec<Vec<Row>>,
    /// The order of pushes: (source, rows in this push); a source is closed after its last push.
    pushes: Vec<(usize, usize)>,
}

fn arb_case() -> impl proptest::strategy::Strategy<Value = Case> {
    let row = (
        0i64..4,
        proptest::option::weighted(0.9, 0i32..3),
        -50i64..50,
    )
        .prop_map(|(step, key, iv)| (step, key, iv));
    let source = proptest::collection::vec(row, 0..40).prop_map(|steps| {
        // Non-decreasing times with many ties inside and across sources.
        let mut ts = 0;
        steps
            .into_iter()
            .map(|(step, key, iv)| {
                ts += step / 2;
                Row {
                    ts,
                    key,
                    v: (iv % 7 != 0).then_some(iv as f64 * 0.1),
                    iv,
                }
            })
            .collect::<Vec<_>>()
    });
    (
        prop_oneof![Just((4i64, 2i64)), Just((3, 3)), Just((6, 2)), Just((5, 1))],
        proptest::collection::vec(source, 1..=8),
        any::<u64>(),
    )
        .prop_map(|((size, slide), sources, seed)| {
            // Cut each source into pushes of 1-7 rows and interleave them pseudo-randomly.
            let mut s = seed | 1;
            let mut next = move |m: u64| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s % m
            };
            let mut left: Vec<usize> = sources.iter().map(|r| r.len()).collect();
            let mut pushes = vec![];
            let mut open: Vec<usize> = (0..sources.len()).collect();
            while !open.is_empty() {
                let i = next(open.len() as u64) as usize;
                let j = open[i];
                let take = (1 + next(7) as usize).min(left[j]);
                pushes.push((j, take));
                left[j] -= take;
                if left[j] == 0 {
                    open.swap_remove(i);
                }
            }
            Case {
                size,
                slide,
                sources,
                pushes,
            }
        })
}

fn opts(c: &Case, strategy: Strategy) -> WindowAggregateOptions {
    let mut o = WindowAggregateOptions::new("ts", Span::Units(c.size), aggs());
    o.slide = Some(Span::Units(c.slide));
    o.by = vec!["k".into()];
    o.strategy = strategy;
    o.sources = c.sources.len();
    o
}

/// The streaming operator: pushes in the case's order, each source closed after its last rows.
fn stream(c: &Case, strategy: Strategy) -> RecordBatch {
    let mut agg = WindowAggregator::new(opts(c, strategy)).unwrap();
    let mut at = vec![0usize; c.sources.len()];
    let mut outs = vec![];
    for &(j, n) in &c.pushes {
        let rows = &c.sources[j][at[j]..at[j] + n];
        at[j] += n;
        outs.push(agg.push(&batch(rows), j).unwrap());
        if at[j] == c.sources[j].len() {
            outs.push(agg.close_source(j).unwrap());
        }
    }
    outs.push(agg.flush().unwrap());
    concat_batches(&agg.output_schema().unwrap(), &outs).unwrap()
}

/// The batch function over whole sources.
fn whole(c: &Case, strategy: Strategy) -> RecordBatch {
    let inputs = c
        .sources
        .iter()
        .map(|rows| {
            let b = batch(rows);
            (b.schema(), vec![Ok(b)])
        })
        .collect();
    let wg = window_aggregate(inputs, opts(c, strategy), || Ok(())).unwrap();
    let (schema, outs) = (wg.schema, wg.batches);
    concat_batches(&schema, &outs).unwrap()
}

/// The batch function over in-memory sources, in pieces of 3 rows (a promise before each).
fn in_memory(c: &Case, strategy: Strategy) -> RecordBatch {
    let inputs = c
        .sources
        .iter()
        .map(|rows| {
            let b = batch(rows);
            (b.schema(), vec![b])
        })
        .collect();
    let wg = window_aggregate_in_pieces(inputs, opts(c, strategy), 3, || Ok(())).unwrap();
    let (schema, outs) = (wg.schema, wg.batches);
    concat_batches(&schema, &outs).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(debug_assertions) { 24 } else { 250 }))]

    #[test]
    fn every_design_equals_the_reference(c in arb_case()) {
        let want = whole(&c, Strategy::Reference);
        prop_assert_eq!(&stream(&c, Strategy::Reference), &want);
        for design in designs() {
            prop_assert_eq!(&stream(&c, design), &want, "streaming {:?}", design);
            prop_assert_eq!(&whole(&c, design), &want, "batch {:?}", design);
            prop_assert_eq!(&in_memory(&c, design), &want, "in-memory batch {:?}", design);
        }
    }
}

#[test]
fn windows_come_out_once_every_source_passed_them() {
    // Two sources: a window is final only when both are past its end (the frontier rule: when a push
    // returns, exactly the windows ending by the frontier of the data so far have been emitted).
    for design in designs() {
        let mut o = WindowAggregateOptions::new("ts", Span::Units(10), aggs());
        o.strategy = design;
        o.sources = 2;
        o.threads = Some(1);
        let mut agg = WindowAggregator::new(o).unwrap();
        let row = |ts| Row {
            ts,
            key: Some(1),
            v: Some(1.0),
            iv: 1,
        };
        assert_eq!(
            agg.push(&batch(&[row(1), row(12)]), 0).unwrap().num_rows(),
            0
        );
        assert_eq!(agg.push(&batch(&[row(3)]), 1).unwrap().num_rows(), 0); // source 1 is at 3
        let out = agg.push(&batch(&[row(25)]), 1).unwrap(); // both past 10
        assert_eq!(out.num_rows(), 1, "{design:?}");
        assert_eq!(agg.close_source(0).unwrap().num_rows(), 1); // source 1 at 25: [10,20) closes
        assert_eq!(agg.flush().unwrap().num_rows(), 1);
        // Two input threads and O; TuMLMC adds its one updater.
        let want = if design == Strategy::TuMlMc { 4 } else { 3 };
        assert_eq!(agg.stats().threads, want);
    }
}

#[test]
fn an_unsorted_source_is_an_error_naming_it() {
    for design in designs() {
        let mut o = WindowAggregateOptions::new("ts", Span::Units(10), aggs());
        o.strategy = design;
        o.sources = 2;
        let mut agg = WindowAggregator::new(o).unwrap();
        let row = |ts| Row {
            ts,
            key: Some(1),
            v: Some(1.0),
            iv: 1,
        };
        let e = agg.push(&batch(&[row(5), row(2)]), 1).unwrap_err();
        assert!(e.message().contains("source 1 is not sorted"), "{e}");
    }
    let mut o = WindowAggregateOptions::new("ts", Span::Units(10), aggs());
    o.strategy = Strategy::TuMlSc;
    o.lateness = windgate_core::aggregate::LatenessOpt::Bound(Span::Units(3));
    let e = WindowAggregator::new(o)
        .err()
        .expect("lateness is rejected");
    assert!(e.message().contains("lateness"), "{e}");
}

#[test]
fn many_sources_stress() {
    // 8 sources x 5k rows with heavy ties, pushed in slices, every design against the pane engine.
    let n = if cfg!(debug_assertions) { 500 } else { 5_000 };
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |m: u64| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s % m
    };
    let sources: Vec<Vec<Row>> = (0..8)
        .map(|_| {
            let mut ts = 0;
            (0..n)
                .map(|_| {
                    ts += next(3) as i64;
                    Row {
                        ts,
                        key: Some(next(50) as i32),
                        v: Some(next(1000) as f64 * 0.37),
                        iv: next(100) as i64,
                    }
                })
                .collect()
        })
        .collect();
    let mut pushes = vec![];
    for _ in 0..n / 100 {
        for j in 0..8 {
            pushes.push((j, 100));
        }
    }
    let c = Case {
        size: 60,
        slide: 20,
        sources,
        pushes,
    };
    let want = whole(&c, Strategy::Pane);
    for design in designs() {
        assert_eq!(stream(&c, design), want, "{design:?}");
    }
}
