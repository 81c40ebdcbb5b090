//! Preference checkpoints: an operator snapshotted after any push and restored with any strategy and thread
//! count (and restored again from a snapshot of the restored one) continues with exactly the rows, in the
//! order, of the run that was never interrupted, and never emits a window twice
//! (`docs/checkpoints.md#preference-queries`). Damaged or mismatching snapshots are named errors.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::{Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_select::concat::concat_batches;
use proptest::prelude::*;
use windgate_core::ErrorKind;
use windgate_core::aggregate::{LatenessOpt, NullTime, Span};
use windgate_core::preference::{
    Prefer, PreferenceOperator, PreferenceOptions, PreferenceStats, PreferenceStrategy, QueryKind,
};
use windgate_core::snapshot::{Reader, Writer};

const STRATEGIES: [PreferenceStrategy; 4] = [
    PreferenceStrategy::Pane,
    PreferenceStrategy::Farm,
    PreferenceStrategy::Recompute,
    PreferenceStrategy::Reference,
];

#[derive(Debug, Clone)]
struct Rows {
    ts: Vec<Option<i64>>,
    g: Vec<Option<i64>>,
    x: Vec<f64>,
    y: Vec<f64>,
    z: Vec<f64>,
}

impl Rows {
    fn batch(&self) -> RecordBatch {
        let n = self.ts.len();
        let s = self
            .g
            .iter()
            .map(|g| g.map(|g| ["a", "b"][(g % 2) as usize]));
        RecordBatch::try_from_iter([
            ("ts", Arc::new(Int64Array::from(self.ts.clone())) as _),
            ("g", Arc::new(Int64Array::from(self.g.clone())) as _),
            ("s", Arc::new(StringArray::from_iter(s)) as _),
            ("x", Arc::new(Float64Array::from(self.x.clone())) as _),
            ("y", Arc::new(Float64Array::from(self.y.clone())) as _),
            ("z", Arc::new(Float64Array::from(self.z.clone())) as _),
            (
                "id",
                Arc::new(Int64Array::from_iter_values(0..n as i64)) as _,
            ),
        ])
        .unwrap()
    }
}

/// Rows in time order (a few per unit) moved back by up to `k` units; a few null times.
fn arb_rows(max_k: i64) -> impl Strategy<Value = (Rows, i64)> {
    (1usize..150, 0..=max_k).prop_flat_map(|(n, k)| {
        let v = || proptest::collection::vec(0u8..5, n);
        (
            proptest::collection::vec(0i64..=k, n),
            proptest::collection::vec(proptest::bool::weighted(0.03), n),
            proptest::collection::vec(proptest::option::weighted(0.9, 0i64..4), n),
            v(),
            v(),
            v(),
            Just(k),
        )
            .prop_map(move |(jitter, null, g, x, y, z, k)| {
                let ts = (0..n)
                    .map(|i| (!null[i]).then_some(i as i64 / 3 - jitter[i]))
                    .collect();
                let f = |v: Vec<u8>| v.into_iter().map(f64::from).collect();
                let rows = Rows {
                    ts,
                    g,
                    x: f(x),
                    y: f(y),
                    z: f(z),
                };
                (rows, k)
            })
    })
}

fn arb_query() -> impl Strategy<Value = QueryKind> {
    let prefer = proptest::collection::vec(prop_oneof![Just(Prefer::Min), Just(Prefer::Max)], 3);
    (0usize..3, 1usize..4, prefer, 0usize..4, any::<bool>()).prop_map(
        |(kind, d, prefer, n, descending)| {
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
                    descending,
                },
            }
        },
    )
}

/// The pieces a stream is pushed in: `batch` cut at `cuts`.
fn pieces(batch: &RecordBatch, cuts: &[usize]) -> Vec<RecordBatch> {
    let mut cuts: Vec<usize> = cuts.iter().map(|&c| c.min(batch.num_rows())).collect();
    cuts.sort_unstable();
    let mut out = vec![];
    let mut start = 0;
    for c in cuts.into_iter().chain([batch.num_rows()]) {
        out.push(batch.slice(start, c - start));
        start = c;
    }
    out
}

fn with_runtime(
    base: &PreferenceOptions,
    strategy: PreferenceStrategy,
    threads: usize,
) -> PreferenceOptions {
    let mut o = base.clone();
    o.strategy = strategy;
    o.window.threads = Some(threads);
    o
}

/// The counters that must survive a restore (not the runtime's own: threads, strategy, farm figures).
fn counters(s: &PreferenceStats) -> Vec<Option<i64>> {
    let n = |v: u64| Some(v as i64);
    vec![
        n(s.batches_in),
        n(s.rows_in),
        n(s.late_rows),
        n(s.null_time_rows),
        n(s.rows_out),
        n(s.windows_out),
        n(s.retained_rows),
        n(s.keys),
        s.watermark,
        Some(s.slack),
    ]
}

fn snapshot(op: &mut PreferenceOperator) -> Vec<u8> {
    op.snapshot(&BTreeMap::new()).unwrap()
}

fn out_schema(op: &PreferenceOperator, fallback: &RecordBatch) -> Arc<arrow_schema::Schema> {
    op.output_schema().unwrap_or_else(|| fallback.schema())
}

/// One interrupted run: `a` takes the pieces before `stops.0`, `b` (restored from `a`) those before
/// `stops.1`, `c` (restored from `b`) the rest and the flush.
struct Plan {
    first: (PreferenceStrategy, usize),
    second: (PreferenceStrategy, usize),
    third: Option<(PreferenceStrategy, usize)>,
    stops: (usize, usize),
}

fn interrupted(
    base: &PreferenceOptions,
    pieces: &[RecordBatch],
    plan: &Plan,
) -> (RecordBatch, PreferenceStats) {
    let mut outs = vec![];
    let mut op = PreferenceOperator::new(with_runtime(base, plan.first.0, plan.first.1)).unwrap();
    let (s1, s2) = (
        plan.stops.0.min(pieces.len()),
        plan.stops.1.min(pieces.len()),
    );
    for p in &pieces[..s1] {
        outs.push(op.push(p).unwrap());
    }
    let data = snapshot(&mut op);
    drop(op);
    let opts = with_runtime(base, plan.second.0, plan.second.1);
    let mut op = PreferenceOperator::restore(&data, Some(opts)).unwrap();
    for p in &pieces[s1..s2.max(s1)] {
        outs.push(op.push(p).unwrap());
    }
    let data = snapshot(&mut op);
    drop(op);
    let opts = plan.third.map(|(s, t)| with_runtime(base, s, t));
    let mut op = PreferenceOperator::restore(&data, opts).unwrap();
    for p in &pieces[s2.max(s1)..] {
        outs.push(op.push(p).unwrap());
    }
    outs.push(op.flush().unwrap());
    let schema = out_schema(&op, &outs[outs.len() - 1]);
    let outs: Vec<RecordBatch> = outs.into_iter().filter(|b| b.num_rows() > 0).collect();
    (concat_batches(&schema, &outs).unwrap(), op.stats())
}

fn uninterrupted(o: PreferenceOptions, pieces: &[RecordBatch]) -> (RecordBatch, PreferenceStats) {
    let mut op = PreferenceOperator::new(o).unwrap();
    let mut outs: Vec<RecordBatch> = pieces.iter().map(|p| op.push(p).unwrap()).collect();
    outs.push(op.flush().unwrap());
    let schema = out_schema(&op, &outs[outs.len() - 1]);
    let outs: Vec<RecordBatch> = outs.into_iter().filter(|b| b.num_rows() > 0).collect();
    (concat_batches(&schema, &outs).unwrap(), op.stats())
}

fn arb_runtime() -> impl Strategy<Value = (PreferenceStrategy, usize)> {
    (0usize..4, 1usize..=3).prop_map(|(s, t)| (STRATEGIES[s], t))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(debug_assertions) { 16 } else { 1000 }))]

    #[test]
    fn a_restored_operator_continues_the_uninterrupted_run(
        (rows, k) in arb_rows(4),
        query in arb_query(),
        (size, slide) in prop_oneof![Just((4i64, 2i64)), Just((6, 3)), Just((5, 5)), Just((6, 2)), Just((3, 1))],
        by in 0usize..3,
        lateness in 0usize..4,
        cuts in proptest::collection::vec(0usize..150, 0..6),
        stops in (0usize..7, 0usize..7),
        first in arb_runtime(),
        second in arb_runtime(),
        third in proptest::option::of(arb_runtime()),
    ) {
        let mut base = PreferenceOptions::new("ts", Span::Units(size), query);
        base.window.slide = Some(Span::Units(slide));
        base.window.by = [vec![], vec!["g".to_string()], vec!["s".to_string(), "g".to_string()]][by].clone();
        base.window.null_time = NullTime::Drop;
        // Exact (nothing final before the flush), adaptive, the disorder's bound, or less (late rows).
        base.window.lateness = match lateness {
            0 => LatenessOpt::Exact,
            1 => LatenessOpt::Adaptive,
            2 => LatenessOpt::Bound(Span::Units(k)),
            _ => LatenessOpt::Bound(Span::Units(k / 2)),
        };
        let pieces = pieces(&rows.batch(), &cuts);
        let (want, want_stats) =
            uninterrupted(with_runtime(&base, PreferenceStrategy::Pane, 1), &pieces);
        let plan = Plan { first, second, third, stops: (stops.0.min(stops.1), stops.0.max(stops.1)) };
        let (got, got_stats) = interrupted(&base, &pieces, &plan);
        prop_assert_eq!(&got, &want);
        prop_assert_eq!(counters(&got_stats), counters(&want_stats));
    }
}

fn sample_options() -> PreferenceOptions {
    let q = QueryKind::Skyline {
        dims: vec!["x".into(), "y".into()],
        prefer: vec![Prefer::Min, Prefer::Max],
    };
    let mut o = PreferenceOptions::new("ts", Span::Units(6), q);
    o.window.slide = Some(Span::Units(2));
    o.window.by = vec!["g".into()];
    o.window.lateness = LatenessOpt::Bound(Span::Units(2));
    o
}

fn sample_rows(n: usize) -> Rows {
    let v = |m: usize| (0..n).map(|i| ((i * m) % 7) as f64).collect();
    Rows {
        ts: (0..n)
            .map(|i| Some(i as i64 / 2 - (i % 3) as i64))
            .collect(),
        g: (0..n).map(|i| Some((i % 3) as i64)).collect(),
        x: v(3),
        y: v(5),
        z: v(2),
    }
}

/// A snapshot taken mid-stream (open windows, retained rows, groups).
fn sample_snapshot() -> Vec<u8> {
    let mut op = PreferenceOperator::new(sample_options()).unwrap();
    op.push(&sample_rows(60).batch()).unwrap();
    snapshot(&mut op)
}

#[test]
fn every_truncation_and_flipped_byte_is_a_snapshot_error() {
    let data = sample_snapshot();
    for n in 0..data.len() {
        let e = PreferenceOperator::restore(&data[..n], None)
            .err()
            .expect("refused");
        assert_eq!(e.kind(), ErrorKind::Snapshot, "{n}: {e}");
    }
    for i in (0..data.len()).step_by(7) {
        let mut bad = data.clone();
        bad[i] ^= 0x20;
        let e = PreferenceOperator::restore(&bad, None)
            .err()
            .expect("refused");
        assert!(
            matches!(e.kind(), ErrorKind::Snapshot | ErrorKind::SnapshotMismatch),
            "{i}: {e}"
        );
    }
}

/// A change to a snapshot's `state` section.
type StateEdit = Box<dyn Fn(&mut serde_json::Value)>;

/// Rewrites a snapshot's `state` section through `edit` (a whole, checksummed snapshot whose sections do not
/// fit together).
fn rewrite_state(data: &[u8], edit: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
    let r = Reader::open(data, "preference", 1).unwrap();
    let mut state: serde_json::Value = r.json("state").unwrap();
    edit(&mut state);
    let mut w = Writer::new("preference", 1, r.params_json()).unwrap();
    w.json("state", &state).unwrap();
    for name in ["rows", "keys"] {
        let (schema, batches) = r.batches(name).unwrap();
        w.batches(name, &schema, &batches).unwrap();
    }
    w.finish().unwrap()
}

#[test]
fn sections_that_do_not_fit_are_a_snapshot_error_not_a_panic() {
    let data = sample_snapshot();
    assert!(PreferenceOperator::restore(&rewrite_state(&data, |_| {}), None).is_ok());
    let edits: Vec<StateEdit> = vec![
        Box::new(|s| s["chunks"][0]["rows"] = 1000.into()),
        Box::new(|s| s["chunks"][0]["refused"] = vec![100_000].into()),
        Box::new(|s| s["chunks"][0]["seq0"] = u64::MAX.into()),
        Box::new(|s| s["next_seq"] = 0.into()),
        Box::new(|s| s["kslack"] = "nonsense".into()),
        Box::new(|s| s["chunks"] = serde_json::Value::Array(vec![])),
        Box::new(|s| s["kslack"]["policy"] = "Exact".into()),
    ];
    for (i, edit) in edits.iter().enumerate() {
        let e = PreferenceOperator::restore(&rewrite_state(&data, edit), None)
            .err()
            .expect("refused");
        assert_eq!(e.kind(), ErrorKind::Snapshot, "edit {i}: {e}");
    }
    // A newer state layout, and another operator's snapshot.
    let newer = Writer::new("preference", 2, &serde_json::json!({}))
        .unwrap()
        .finish()
        .unwrap();
    let e = PreferenceOperator::restore(&newer, None).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::Snapshot, "{e}");
    let other = Writer::new("window_aggregate", 1, &serde_json::json!({}))
        .unwrap()
        .finish()
        .unwrap();
    let e = PreferenceOperator::restore(&other, None).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::SnapshotMismatch, "{e}");
}

#[test]
fn other_query_parameters_are_a_mismatch_naming_the_parameter() {
    let data = sample_snapshot();
    let check = |edit: &dyn Fn(&mut PreferenceOptions), param: &str| {
        let mut o = sample_options();
        edit(&mut o);
        let e = PreferenceOperator::restore(&data, Some(o))
            .err()
            .expect("mismatch");
        assert_eq!(e.kind(), ErrorKind::SnapshotMismatch, "{e}");
        assert!(
            e.message().starts_with(&format!("{param}:")),
            "{param}: {e}"
        );
    };
    check(&|o| o.window.size = Span::Units(8), "size");
    check(&|o| o.window.slide = None, "slide");
    check(&|o| o.window.by = vec![], "by");
    check(&|o| o.window.lateness = LatenessOpt::Adaptive, "lateness");
    check(&|o| o.window.time = "id".into(), "time");
    check(
        &|o| {
            o.query = QueryKind::Skyline {
                dims: vec!["x".into(), "y".into()],
                prefer: vec![Prefer::Min; 2],
            }
        },
        "prefer",
    );
    check(
        &|o| {
            o.query = QueryKind::TopK {
                score: "x".into(),
                k: 2,
                descending: true,
            }
        },
        "query",
    );
    // Runtime settings may differ.
    let mut o = sample_options();
    o.window.threads = Some(3);
    o.strategy = PreferenceStrategy::Farm;
    o.window.farm.split_threshold = Some(2);
    let op = PreferenceOperator::restore(&data, Some(o)).unwrap();
    assert_eq!((op.stats().threads, op.stats().strategy), (3, "farm"));
    let back = PreferenceOperator::snapshot_options(&data).unwrap();
    assert_eq!(back.query, sample_options().query);
    assert_eq!(back.window.by, sample_options().window.by);
}

#[test]
fn poisoned_flushed_and_unbound_operators() {
    let mut op = PreferenceOperator::new(sample_options()).unwrap();
    // Before any batch: a snapshot restores to an operator that has seen nothing.
    let data = snapshot(&mut op);
    let mut fresh = PreferenceOperator::restore(&data, None).unwrap();
    let rows = sample_rows(40).batch();
    let (want, _) = uninterrupted(sample_options(), std::slice::from_ref(&rows));
    let mut outs = vec![fresh.push(&rows).unwrap()];
    outs.push(fresh.flush().unwrap());
    assert_eq!(concat_batches(&want.schema(), &outs).unwrap(), want);
    op.poison("a worker panicked");
    let e = op.snapshot(&BTreeMap::new()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Poisoned, "{e}");
    assert!(e.message().starts_with("snapshot:"), "{e}");
    let e = fresh.snapshot(&BTreeMap::new()).unwrap_err();
    assert!(e.message().contains("flushed"), "{e}");
}

#[test]
fn a_snapshot_is_independent_of_the_strategy_that_took_it() {
    let rows = sample_rows(200).batch();
    let take = |strategy, threads| {
        let mut op =
            PreferenceOperator::new(with_runtime(&sample_options(), strategy, threads)).unwrap();
        op.push(&rows.slice(0, 120)).unwrap();
        let data = snapshot(&mut op);
        // The runtime settings are parameters too: normalise them before comparing the rest.
        PreferenceOperator::restore(&data, Some(sample_options()))
            .unwrap()
            .snapshot(&BTreeMap::new())
            .unwrap()
    };
    let want = take(PreferenceStrategy::Pane, 1);
    for s in STRATEGIES {
        assert_eq!(take(s, 2), want, "{s:?}");
    }
}

#[test]
fn a_push_refused_half_way_leaves_its_final_windows_to_the_restored_operator() {
    // The operator ingests 32k-row slices (8k on the farm): a NaN in a later slice refuses the push after
    // earlier slices moved the watermark, so windows are final but not emitted when the snapshot is taken.
    let n = 40_000;
    let rows = sample_rows(n);
    let mut bad = rows.clone();
    bad.x[35_000] = f64::NAN;
    let tail = sample_rows(n + 500).batch().slice(n, 500);
    for strategy in [PreferenceStrategy::Pane, PreferenceStrategy::Farm] {
        let o = with_runtime(&sample_options(), strategy, 2);
        let mut op = PreferenceOperator::new(o.clone()).unwrap();
        let mut uninterrupted = PreferenceOperator::new(o.clone()).unwrap();
        for op in [&mut op, &mut uninterrupted] {
            assert!(op.push(&bad.batch()).is_err());
        }
        let data = snapshot(&mut op);
        let mut op = PreferenceOperator::restore(
            &data,
            Some(with_runtime(&o, PreferenceStrategy::Recompute, 1)),
        )
        .unwrap();
        let got = [op.push(&tail).unwrap(), op.flush().unwrap()];
        let want = [
            uninterrupted.push(&tail).unwrap(),
            uninterrupted.flush().unwrap(),
        ];
        assert!(want[0].num_rows() > 0);
        assert_eq!(got, want, "{strategy:?}");
    }
}

/// Snapshot and restore time and size for about 1k and 100k retained rows (one group, a skyline over three
/// float dimensions, one window holding every row). Run by hand on a release build:
/// `cargo test --release -p windgate-core --test preference_restore -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a check"]
fn measure_snapshot_and_restore() {
    use std::time::Instant;
    for n in [1_000usize, 100_000] {
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % 1000) as f64
        };
        let rows = Rows {
            ts: (0..n as i64).map(Some).collect(),
            g: vec![Some(0); n],
            x: (0..n).map(|_| next()).collect(),
            y: (0..n).map(|_| next()).collect(),
            z: (0..n).map(|_| next()).collect(),
        };
        let q = QueryKind::Skyline {
            dims: vec!["x".into(), "y".into(), "z".into()],
            prefer: vec![Prefer::Min; 3],
        };
        let mut base = PreferenceOptions::new("ts", Span::Units(4 * n as i64), q);
        base.window.lateness = LatenessOpt::Bound(Span::Units(0));
        let mut op =
            PreferenceOperator::new(with_runtime(&base, PreferenceStrategy::Pane, 1)).unwrap();
        op.push(&rows.batch()).unwrap();
        assert_eq!(op.stats().retained_rows, n as u64);
        let best = |f: &mut dyn FnMut()| {
            (0..5)
                .map(|_| {
                    let t = Instant::now();
                    f();
                    t.elapsed().as_secs_f64() * 1e3
                })
                .fold(f64::INFINITY, f64::min)
        };
        let data = snapshot(&mut op);
        let snap_ms = best(&mut || drop(snapshot(&mut op)));
        for (strategy, threads) in [(PreferenceStrategy::Pane, 1), (PreferenceStrategy::Farm, 2)] {
            let opts = with_runtime(&base, strategy, threads);
            let restore_ms = best(&mut || {
                PreferenceOperator::restore(&data, Some(opts.clone())).unwrap();
            });
            println!(
                "{n} retained rows: snapshot {} bytes in {snap_ms:.2} ms; restore ({strategy:?}, {threads} \
                 threads) {restore_ms:.2} ms",
                data.len()
            );
        }
    }
}
