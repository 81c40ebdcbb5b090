//! The preference operator end to end: every engine (pane, farm at 1-8 threads with and without forced pane
//! splitting, per-window recomputation) returns the reference engine's rows in the same order, for any batch
//! split and disorder within the lateness bound (`docs/architecture.md#determinism`).

use std::sync::Arc;

use arrow_array::{Array, Float64Array, Int32Array, Int64Array, RecordBatch};
use arrow_select::concat::concat_batches;
use proptest::prelude::*;
use windgate_core::aggregate::{LatenessOpt, Span};
use windgate_core::preference::{
    Prefer, PreferenceOperator, PreferenceOptions, PreferenceStrategy, QueryKind, preference,
};
use windgate_core::runtime::{PaneSchedulerKind, WindowSchedulerKind};

#[derive(Debug, Clone)]
struct Rows {
    ts: Vec<i64>,
    g: Vec<Option<i64>>,
    x: Vec<f64>,
    y: Vec<f64>,
    z: Vec<f64>,
}

impl Rows {
    fn batch(&self) -> RecordBatch {
        let id = Int64Array::from_iter_values(0..self.ts.len() as i64);
        RecordBatch::try_from_iter([
            ("ts", Arc::new(Int64Array::from(self.ts.clone())) as _),
            ("g", Arc::new(Int64Array::from(self.g.clone())) as _),
            ("x", Arc::new(Float64Array::from(self.x.clone())) as _),
            ("y", Arc::new(Float64Array::from(self.y.clone())) as _),
            ("z", Arc::new(Float64Array::from(self.z.clone())) as _),
            ("id", Arc::new(id) as _),
        ])
        .unwrap()
    }
}

fn skyline(dims: &[&str], prefer: Vec<Prefer>) -> QueryKind {
    QueryKind::Skyline {
        dims: dims.iter().map(|s| s.to_string()).collect(),
        prefer,
    }
}

fn opts(query: QueryKind, size: i64, slide: i64, by: bool) -> PreferenceOptions {
    let mut o = PreferenceOptions::new("ts", Span::Units(size), query);
    o.window.slide = Some(Span::Units(slide));
    if by {
        o.window.by = vec!["g".into()];
    }
    o
}

/// Streams `batch` in pieces cut at `cuts` and returns every output row.
fn stream(o: PreferenceOptions, batch: &RecordBatch, cuts: &[usize]) -> RecordBatch {
    let mut op = PreferenceOperator::new(o).unwrap();
    let mut outs = vec![];
    let mut start = 0;
    for &c in cuts.iter().chain([batch.num_rows()].iter()) {
        let c = c.clamp(start, batch.num_rows());
        outs.push(op.push(&batch.slice(start, c - start)).unwrap());
        start = c;
    }
    outs.push(op.flush().unwrap());
    concat_batches(&op.output_schema().unwrap(), &outs).unwrap()
}

fn ids(b: &RecordBatch) -> Vec<(i64, i64)> {
    let start = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
    let id = b
        .column_by_name("id")
        .unwrap()
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap();
    (0..b.num_rows())
        .map(|i| (start.value(i), id.value(i)))
        .collect()
}

#[test]
fn skyline_worked_example_with_groups() {
    // Window [0,10): group 1 has (1,1), (2,2) dominated, (0.5,3); group 2 has one row. [10,20): one row.
    let rows = Rows {
        ts: vec![1, 2, 3, 4, 15],
        g: vec![Some(1), Some(1), Some(1), Some(2), Some(1)],
        x: vec![1.0, 2.0, 0.5, 7.0, 9.0],
        y: vec![1.0, 2.0, 3.0, 7.0, 9.0],
        z: vec![0.0; 5],
    };
    let o = opts(skyline(&["x", "y"], vec![Prefer::Min; 2]), 10, 10, true);
    let out = stream(o, &rows.batch(), &[]);
    assert_eq!(ids(&out), vec![(0, 0), (0, 2), (0, 3), (10, 4)]);
    let names: Vec<String> = out
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(
        names,
        ["window_start", "window_end", "ts", "g", "x", "y", "z", "id"]
    );
}

#[test]
fn top_dominant_reports_kappa_and_topk_ranks() {
    let rows = Rows {
        ts: vec![0, 1, 2, 3],
        g: vec![None; 4],
        x: vec![0.0, 1.0, 2.0, 3.0],
        y: vec![5.0, 1.0, 0.0, 3.0],
        z: vec![1.0, 1.0, 1.0, 0.0],
    };
    let q = QueryKind::TopDominant {
        dims: vec!["x".into(), "y".into(), "z".into()],
        prefer: vec![Prefer::Min; 3],
        delta: 2,
    };
    let out = stream(opts(q, 4, 4, false), &rows.batch(), &[2]);
    let kappa = out
        .column_by_name("kappa")
        .unwrap()
        .as_any()
        .downcast_ref::<Int32Array>()
        .unwrap();
    assert_eq!(out.num_rows(), 2);
    assert!(kappa.iter().all(|k| k.unwrap() < 3));
    let q = QueryKind::TopK {
        score: "x".into(),
        k: 2,
        descending: true,
    };
    let out = stream(opts(q, 4, 4, false), &rows.batch(), &[1, 3]);
    assert_eq!(ids(&out), vec![(0, 3), (0, 2)]);
}

#[test]
fn nan_and_null_in_a_dimension_name_the_column() {
    let mut rows = Rows {
        ts: vec![0, 1],
        g: vec![None; 2],
        x: vec![0.0, f64::NAN],
        y: vec![1.0, 1.0],
        z: vec![0.0, 0.0],
    };
    let o = opts(skyline(&["x", "y"], vec![Prefer::Min; 2]), 4, 4, false);
    let mut op = PreferenceOperator::new(o.clone()).unwrap();
    let e = op.push(&rows.batch()).unwrap_err();
    assert!(
        e.message().contains("'x'") && e.message().contains("NaN"),
        "{e}"
    );
    rows.x[1] = 1.0;
    let b = rows.batch();
    let with_null =
        RecordBatch::try_from_iter(b.schema().fields().iter().zip(b.columns()).map(|(f, c)| {
            let c = if f.name() == "y" {
                Arc::new(Float64Array::from(vec![Some(1.0), None])) as _
            } else {
                c.clone()
            };
            (f.name().clone(), c)
        }))
        .unwrap();
    let mut op = PreferenceOperator::new(o).unwrap();
    let e = op.push(&with_null).unwrap_err();
    assert!(
        e.message().contains("'y'") && e.message().contains("null"),
        "{e}"
    );
}

fn arb_rows(max_k: i64) -> impl Strategy<Value = (Rows, i64)> {
    (1usize..120, 0..=max_k).prop_flat_map(|(n, k)| {
        let v = || proptest::collection::vec(0u8..4, n);
        (
            proptest::collection::vec(0i64..=k, n),
            proptest::collection::vec(proptest::option::weighted(0.9, 0i64..3), n),
            v(),
            v(),
            v(),
            Just(k),
        )
            .prop_map(move |(jitter, g, x, y, z, k)| {
                // In-order times (a few rows per unit) minus a jitter of at most K: disorder within K.
                let ts = (0..n).map(|i| i as i64 / 3 - jitter[i]).collect();
                let f = |v: Vec<u8>| v.into_iter().map(f64::from).collect();
                (
                    Rows {
                        ts,
                        g,
                        x: f(x),
                        y: f(y),
                        z: f(z),
                    },
                    k,
                )
            })
    })
}

fn arb_query() -> impl Strategy<Value = QueryKind> {
    let prefer = proptest::collection::vec(prop_oneof![Just(Prefer::Min), Just(Prefer::Max)], 3);
    (0usize..3, 1usize..4, prefer, 0usize..5, any::<bool>()).prop_map(
        |(kind, d, prefer, n, desc)| {
            let dims: Vec<String> = ["x", "y", "z"][..d].iter().map(|s| s.to_string()).collect();
            let prefer = prefer[..d].to_vec();
            match kind {
                0 => QueryKind::Skyline { dims, prefer },
                1 => QueryKind::TopDominant {
                    dims,
                    prefer,
                    delta: n,
                },
                _ => QueryKind::TopK {
                    score: "y".into(),
                    k: n,
                    descending: desc,
                },
            }
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(debug_assertions) { 24 } else { 600 }))]

    #[test]
    fn every_engine_matches_the_reference(
        (rows, k) in arb_rows(3),
        query in arb_query(),
        (size, slide) in prop_oneof![Just((4i64, 2i64)), Just((6, 3)), Just((5, 5)), Just((6, 2)), Just((3, 1))],
        by in any::<bool>(),
        bounded in any::<bool>(),
        cuts in proptest::collection::vec(0usize..120, 0..4),
        threads in prop_oneof![Just(1usize), Just(2), Just(3), Just(4), Just(8)],
        split in prop_oneof![Just(None), (1u64..4).prop_map(Some)],
        sched in 0usize..3,
        win_rr in any::<bool>(),
    ) {
        let mut cuts = cuts;
        cuts.sort_unstable();
        let batch = rows.batch();
        let mut base = opts(query, size, slide, by);
        if bounded {
            base.window.lateness = LatenessOpt::Bound(Span::Units(k));
        }
        let run = |strategy, cuts: &[usize]| {
            let mut o = base.clone();
            o.strategy = strategy;
            o.window.threads = Some(threads);
            o.window.farm.split_threshold = split;
            o.window.farm.scheduler =
                [PaneSchedulerKind::PbRr, PaneSchedulerKind::TbRr, PaneSchedulerKind::AsPid][sched];
            if win_rr {
                o.window.farm.window_scheduler = WindowSchedulerKind::WinRr;
            }
            stream(o, &batch, cuts)
        };
        let want = run(PreferenceStrategy::Reference, &[]);
        for strategy in [PreferenceStrategy::Pane, PreferenceStrategy::Recompute, PreferenceStrategy::Farm] {
            let got = run(strategy, &cuts);
            prop_assert_eq!(&got, &want, "{:?}", strategy);
        }
        // The batch function (deferred collection) gives the same rows.
        let mut o = base.clone();
        o.strategy = PreferenceStrategy::Farm;
        o.window.threads = Some(threads);
        let (schema, outs) = preference(batch.schema(), [Ok(batch.clone())], o, || Ok(())).unwrap();
        prop_assert_eq!(concat_batches(&schema, &outs).unwrap(), want);
    }
}

#[test]
fn farm_stress_many_random_windows() {
    // A larger run in release mode: 20k rows, 4 groups, sliding windows, forced splitting, 3 threads.
    let n = if cfg!(debug_assertions) {
        2_000
    } else {
        20_000
    };
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let rows = Rows {
        ts: (0..n).map(|i| i as i64 / 8 - (next() % 5) as i64).collect(),
        g: (0..n).map(|_| Some((next() % 4) as i64)).collect(),
        x: (0..n).map(|_| (next() % 100) as f64).collect(),
        y: (0..n).map(|_| (next() % 100) as f64).collect(),
        z: (0..n).map(|_| (next() % 100) as f64).collect(),
    };
    let batch = rows.batch();
    let q = skyline(
        &["x", "y", "z"],
        vec![Prefer::Min, Prefer::Max, Prefer::Min],
    );
    let mut base = opts(q, 64, 16, true);
    base.window.lateness = LatenessOpt::Bound(Span::Units(4));
    let mut pane = base.clone();
    pane.strategy = PreferenceStrategy::Pane;
    let want = stream(pane, &batch, &[1000, 5000]);
    for threads in [2, 3] {
        for split in [None, Some(50)] {
            let mut o = base.clone();
            o.strategy = PreferenceStrategy::Farm;
            o.window.threads = Some(threads);
            o.window.farm.split_threshold = split;
            let mut op = PreferenceOperator::new(o).unwrap();
            let mut outs = vec![];
            for (lo, hi) in [(0, 777), (777, 3333), (3333, n)] {
                outs.push(op.push(&batch.slice(lo, hi - lo)).unwrap());
            }
            outs.push(op.flush().unwrap());
            let got = concat_batches(&op.output_schema().unwrap(), &outs).unwrap();
            assert_eq!(got, want, "threads {threads}, split {split:?}");
            let farm = op.stats().farm.unwrap();
            // A forced threshold splits; without one AS_PID decides (either is correct).
            assert!(split.is_none() || farm.panes_split > 0, "{farm:?}");
        }
    }
}
