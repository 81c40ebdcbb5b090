//! Band join determinism (Gulisano et al., ScaleJoin): the worked example, the reference against brute force,
//! and every engine against the reference, push by push, for any thread count, batch split and disorder
//! within the lateness bound.

#[path = "faults/join_support.rs"]
mod join_support;

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Float64Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use join_support::pairs;
use proptest::prelude::*;
use windgate_core::aggregate::{LatenessOpt, Span};
use windgate_core::join::{
    BandJoinOptions, BandJoiner, JoinStrategy, Predicate, Semantics, Side, band_join,
};

/// A row: (ts, band value 1 (nullable), band value 2 (may be NaN), equality key).
type Row = (i64, Option<i64>, f64, i64);

fn batch(rows: &[Row], side: Side) -> RecordBatch {
    let (v1, v2, k) = match side {
        Side::Left => ("x", "y", "k"),
        Side::Right => ("a", "b", "k"),
    };
    let schema = Arc::new(Schema::new(vec![
        Field::new("ts", DataType::Int64, false),
        Field::new(v1, DataType::Int64, true),
        Field::new(v2, DataType::Float64, false),
        Field::new(k, DataType::Int64, false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.1))),
            Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.2))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.3))),
        ],
    )
    .unwrap()
}

fn opts(window: i64, on: Vec<Predicate>) -> BandJoinOptions {
    BandJoinOptions::new(("ts".into(), "ts".into()), Span::Units(window), on)
}

fn band(l: &str, r: &str, eps: f64) -> Predicate {
    Predicate::Band {
        left: l.into(),
        right: r.into(),
        eps,
    }
}

fn run_batch(left: &[Row], right: &[Row], o: BandJoinOptions) -> Vec<RecordBatch> {
    let l = batch(left, Side::Left);
    let r = batch(right, Side::Right);
    let (_, out) = band_join(
        (l.schema(), vec![Ok(l)]),
        (r.schema(), vec![Ok(r)]),
        o,
        || Ok(()),
    )
    .unwrap();
    out
}

/// The worked example of Gulisano et al., ScaleJoin: WS = 4, t1=R@1, t2=S@2, t3=R@3, t4=S@6, t5=S@7 (R left, S right), no predicate.
#[test]
fn worked_example_both_semantics() {
    let left = [(1, Some(0), 0.0, 0), (3, Some(0), 0.0, 0)];
    let right = [
        (2, Some(0), 0.0, 0),
        (6, Some(0), 0.0, 0),
        (7, Some(0), 0.0, 0),
    ];
    for threads in [1, 2, 3, 4, 8] {
        for strategy in [
            JoinStrategy::Reference,
            JoinStrategy::Serial,
            JoinStrategy::ScaleJoin,
        ] {
            let mut o = opts(4, vec![]);
            o.semantics = Semantics::ScaleJoin;
            o.threads = Some(threads);
            o.strategy = strategy;
            // The sequential comparisons in order: (t2,t1) (t3,t2) (t4,t1) (t4,t3) (t5,t1) (t5,t3); t1-t4 at
            // distance 5 > WS matches, as the paper keeps it.
            assert_eq!(
                pairs(&run_batch(&left, &right, o.clone())),
                vec![(1, 2), (3, 2), (1, 6), (3, 6), (1, 7), (3, 7)],
                "{strategy:?} x {threads}"
            );
            o.semantics = Semantics::Interval;
            assert_eq!(
                pairs(&run_batch(&left, &right, o)),
                vec![(1, 2), (3, 2), (3, 6), (3, 7)],
                "{strategy:?} x {threads}"
            );
        }
    }
}

/// With 3 threads the six comparisons split {2, 3, 1} over threads 0, 1, 2 (the same example).
#[test]
fn worked_example_split_over_three_threads() {
    let mut o = opts(4, vec![]);
    o.semantics = Semantics::ScaleJoin;
    o.threads = Some(3);
    o.strategy = JoinStrategy::ScaleJoin;
    let mut j = BandJoiner::new(o).unwrap();
    let left = batch(&[(1, Some(0), 0.0, 0), (3, Some(0), 0.0, 0)], Side::Left);
    let right = batch(
        &[
            (2, Some(0), 0.0, 0),
            (6, Some(0), 0.0, 0),
            (7, Some(0), 0.0, 0),
        ],
        Side::Right,
    );
    j.push(&left, Side::Left).unwrap();
    j.push(&right, Side::Right).unwrap();
    assert_eq!(j.flush().unwrap().num_rows(), 6);
    let per: Vec<u64> = j.stats().per_thread.iter().map(|p| p.0).collect();
    assert_eq!(per, vec![2, 3, 1]);
}

#[test]
fn equal_timestamps_across_sides_and_one_side_empty() {
    let left = [(5, Some(1), 1.0, 0), (5, Some(2), 1.0, 0)];
    let right = [(5, Some(1), 1.0, 0), (5, Some(3), 1.0, 0)];
    let o = opts(0, vec![band("x", "a", 1.0)]);
    // Left before right at equal ts: right tuples trigger, partners in left order.
    assert_eq!(
        pairs(&run_batch(&left, &right, o.clone())).len(),
        3 // (1,1) (2,1) (2,3)
    );
    assert!(run_batch(&left, &[], o.clone()).is_empty());
    assert!(run_batch(&[], &right, o).is_empty());
}

/// A brute-force interval join over the input rows (no windows, no order): the reference must find exactly
/// these pairs.
fn brute(left: &[Row], right: &[Row], w: i64, eps: (f64, f64), eq: bool) -> Vec<(usize, usize)> {
    let mut out = vec![];
    for (i, l) in left.iter().enumerate() {
        for (j, r) in right.iter().enumerate() {
            let ok = (l.0 - r.0).abs() <= w
                && matches!((l.1, r.1), (Some(x), Some(a)) if ((x - a) as f64).abs() <= eps.0)
                && (l.2 - r.2).abs() <= eps.1
                && (!eq || l.3 == r.3);
            if ok {
                out.push((i, j));
            }
        }
    }
    out
}

fn row() -> impl Strategy<Value = Row> {
    (
        0i64..60,
        proptest::option::weighted(0.9, 0i64..20),
        prop_oneof![9 => (0i64..20).prop_map(|v| v as f64 * 0.5), 1 => Just(f64::NAN)],
        0i64..3,
    )
}

fn sorted(mut v: Vec<Row>) -> Vec<Row> {
    v.sort_by_key(|r| r.0);
    v
}

/// The input row of each output row, read from the `k` columns that carry the row index.
fn index_pairs(batches: &[RecordBatch]) -> Vec<(usize, usize)> {
    let mut out = vec![];
    for b in batches {
        let lk = b
            .column_by_name("left_k")
            .unwrap()
            .as_primitive::<Int64Type>();
        let rk = b
            .column_by_name("right_k")
            .unwrap()
            .as_primitive::<Int64Type>();
        for i in 0..b.num_rows() {
            out.push((lk.value(i) as usize, rk.value(i) as usize));
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    /// The reference equals brute force (interval semantics); rows carry their index in `k`.
    #[test]
    fn reference_matches_brute_force(
        left in proptest::collection::vec(row(), 0..40),
        right in proptest::collection::vec(row(), 0..40),
        w in 0i64..15, e1 in 0u8..4, e2 in 0u8..4, eq: bool,
    ) {
        let tag = |rows: Vec<Row>| -> Vec<Row> {
            sorted(rows).into_iter().enumerate().map(|(i, r)| (r.0, r.1, r.2, i as i64)).collect()
        };
        let (left, right) = (tag(left), tag(right));
        let mut on = vec![band("x", "a", e1 as f64), band("y", "b", e2 as f64 * 0.5)];
        if eq {
            on.push(Predicate::Eq { left: "k".into(), right: "k".into() });
        }
        let mut o = opts(w, on);
        o.strategy = JoinStrategy::Reference;
        let mut got = index_pairs(&run_batch(&left, &right, o));
        got.sort();
        let mut want = brute(&left, &right, w, (e1 as f64, e2 as f64 * 0.5), eq);
        if eq {
            want.retain(|&(i, j)| left[i].3 == right[j].3);
        }
        prop_assert_eq!(got, want);
    }
}

/// One streaming run: pushes `(side, rows)` in order, returns each push's output and the flush's.
fn stream(pushes: &[(Side, Vec<Row>)], o: BandJoinOptions) -> Vec<RecordBatch> {
    let mut j = BandJoiner::new(o).unwrap();
    let mut outs: Vec<RecordBatch> = pushes
        .iter()
        .map(|(side, rows)| j.push(&batch(rows, *side), *side).unwrap())
        .collect();
    outs.push(j.flush().unwrap());
    outs
}

/// Rows with disorder at most `k`: sorted, then each moved by a bounded delay.
fn disordered(rows: Vec<Row>, delays: &[u8], k: i64) -> Vec<Row> {
    let mut keyed: Vec<(i64, usize, Row)> = sorted(rows)
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            (
                r.0 + (delays.get(i).copied().unwrap_or(0) as i64 % (k + 1)),
                i,
                r,
            )
        })
        .collect();
    keyed.sort_by_key(|x| (x.0, x.1));
    keyed.into_iter().map(|x| x.2).collect()
}

/// Pushes, window, predicates, scalejoin semantics?, with equality?, lateness.
type Case = (
    Vec<(Side, Vec<Row>)>,
    i64,
    Vec<Predicate>,
    bool,
    bool,
    Option<i64>,
);

fn engines_case() -> impl Strategy<Value = Case> {
    (
        proptest::collection::vec(row(), 0..60),
        proptest::collection::vec(row(), 0..60),
        proptest::collection::vec(any::<u8>(), 60),
        proptest::collection::vec((any::<bool>(), 1usize..12), 1..12),
        0i64..12,
        (0u8..3, 0u8..3, any::<bool>(), any::<bool>()),
        any::<bool>(),
        prop_oneof![1 => Just(None), 3 => (0i64..4).prop_map(Some)],
        any::<bool>(),
    )
        .prop_map(
            |(l, r, delays, splits, w, (e1, e2, use_y, eq), scalejoin, lateness, dense)| {
                // Dense cases: few distinct band values, so most time-band pairs match.
                let squash = |rows: Vec<Row>| -> Vec<Row> {
                    if !dense {
                        return rows;
                    }
                    rows.into_iter()
                        .map(|(t, x, y, k)| (t, x.map(|x| x % 3), (y * 2.0) % 3.0, k))
                        .collect()
                };
                let (l, r) = (squash(l), squash(r));
                let k = lateness.unwrap_or(0);
                // Without a bound rows may come in any order; with one, within it.
                let (l, r) = match lateness {
                    Some(k) => (disordered(l, &delays, k), disordered(r, &delays, k)),
                    None => (disordered(l, &delays, 30), disordered(r, &delays, 30)),
                };
                let _ = k;
                let mut pushes = vec![];
                let (mut li, mut ri) = (0, 0);
                for (left_side, n) in splits.into_iter().cycle().take(200) {
                    let (side, rows, i) = if left_side {
                        (Side::Left, &l, &mut li)
                    } else {
                        (Side::Right, &r, &mut ri)
                    };
                    if *i < rows.len() {
                        let end = (*i + n).min(rows.len());
                        pushes.push((side, rows[*i..end].to_vec()));
                        *i = end;
                    }
                    if li == l.len() && ri == r.len() {
                        break;
                    }
                }
                if li < l.len() {
                    pushes.push((Side::Left, l[li..].to_vec()));
                }
                if ri < r.len() {
                    pushes.push((Side::Right, r[ri..].to_vec()));
                }
                let mut on = vec![band("x", "a", e1 as f64)];
                if use_y {
                    on.push(band("y", "b", e2 as f64));
                }
                if eq {
                    on.push(Predicate::Eq {
                        left: "k".into(),
                        right: "k".into(),
                    });
                }
                (pushes, w, on, scalejoin, eq, lateness)
            },
        )
}

fn check_engines(
    pushes: &[(Side, Vec<Row>)],
    w: i64,
    on: Vec<Predicate>,
    scalejoin: bool,
    lateness: Option<i64>,
    threads: &[usize],
) {
    let mut base = opts(w, on);
    base.semantics = if scalejoin {
        Semantics::ScaleJoin
    } else {
        Semantics::Interval
    };
    base.lateness = lateness.map_or(LatenessOpt::Exact, |k| LatenessOpt::Bound(Span::Units(k)));
    let mut reference = base.clone();
    reference.strategy = JoinStrategy::Reference;
    let want = stream(pushes, reference);
    if std::env::var("SHOW").is_ok() {
        eprintln!(
            "rows {:?}",
            want.iter().map(|b| b.num_rows()).collect::<Vec<_>>()
        );
    }
    for index in [true, false] {
        let mut o = base.clone();
        o.index = index;
        o.strategy = JoinStrategy::Serial;
        assert_eq!(stream(pushes, o.clone()), want, "serial index={index}");
        for &n in threads {
            o.strategy = JoinStrategy::ScaleJoin;
            o.threads = Some(n);
            assert_eq!(
                stream(pushes, o.clone()),
                want,
                "scalejoin x{n} index={index}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    /// Every engine returns the reference's rows, in the same order, push by push.
    #[test]
    fn every_engine_equals_the_reference(
        (pushes, w, on, scalejoin, _eq, lateness) in engines_case()
    ) {
        check_engines(&pushes, w, on, scalejoin, lateness, &[1, 2, 3, 4, 8]);
    }
}

/// A side that ends early: its watermark stops, so the other side's rows wait (nothing is ready past it)
/// until flush, which emits them all.
#[test]
fn a_side_that_ends_early() {
    let mut o = opts(10, vec![band("x", "a", 0.0)]);
    o.lateness = LatenessOpt::Bound(Span::Units(0));
    for strategy in [JoinStrategy::Serial, JoinStrategy::ScaleJoin] {
        o.strategy = strategy;
        o.threads = Some(2);
        let mut j = BandJoiner::new(o.clone()).unwrap();
        let r = j
            .push(&batch(&[(0, Some(1), 0.0, 0)], Side::Right), Side::Right)
            .unwrap();
        assert_eq!(r.num_rows(), 0);
        let l: Vec<Row> = (0..100).map(|t| (t, Some(1), 0.0, 0)).collect();
        let out = j.push(&batch(&l, Side::Left), Side::Left).unwrap();
        // Only left rows below the right side's promise (its watermark 0) are ready: ts 0 is not (0 >= 0).
        assert_eq!(out.num_rows(), 0, "{strategy:?}");
        let rest = j.flush().unwrap();
        assert_eq!(rest.num_rows(), 11, "{strategy:?}"); // left ts 0..=10 within 10 of right ts 0
        assert_eq!(j.stats().pairs_out, 11);
    }
}

#[test]
fn late_rows_are_dropped_and_counted() {
    let mut o = opts(10, vec![]);
    o.lateness = LatenessOpt::Bound(Span::Units(2));
    let mut j = BandJoiner::new(o).unwrap();
    j.push(
        &batch(&[(10, Some(1), 0.0, 0), (5, Some(1), 0.0, 0)], Side::Left),
        Side::Left,
    )
    .unwrap();
    j.flush().unwrap();
    assert_eq!(j.stats().late_rows, [1, 0]);
}

/// A long run through the threaded engine (release: 200k rows a side, past the caller's lag bound, so the
/// back-pressure path runs): same rows as the serial engine and the reference.
#[test]
fn long_stream_threads_equal_serial() {
    let n = if cfg!(debug_assertions) {
        5_000
    } else {
        200_000
    };
    let mut rng = 0x1234_5678_u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut rows = |n: usize| -> Vec<Row> {
        (0..n)
            .map(|i| {
                let v = next();
                (
                    (i / 10) as i64,
                    Some((v % 1000) as i64),
                    ((v >> 20) % 1000) as f64,
                    0,
                )
            })
            .collect()
    };
    let (left, right) = (rows(n), rows(n));
    let on = vec![band("x", "a", 10.0), band("y", "b", 10.0)];
    let mut o = opts(100, on);
    o.strategy = JoinStrategy::Serial;
    let want = run_batch(&left, &right, o.clone());
    let total: usize = want.iter().map(|b| b.num_rows()).sum();
    assert!(total > n / 10, "too few pairs to mean anything: {total}");
    o.strategy = JoinStrategy::Reference;
    assert_eq!(pairs(&run_batch(&left, &right, o.clone())), pairs(&want));
    for threads in [2, 3] {
        o.strategy = JoinStrategy::ScaleJoin;
        o.threads = Some(threads);
        assert_eq!(run_batch(&left, &right, o.clone()), want, "x{threads}");
    }
}
